"""kb_mcp: the read-only MCP server of kb (``kb-mcp serve``).

It answers questions over the corpus that ``kb_assets`` built, reading the stores through
``kb_shared`` only (it never imports ``kb_assets``; passage ranking is ``kb_shared.search.retrieval``):

* ``server`` (``build_server`` and its lifespan), ``tools/`` (one module per tool),
  ``prompts``, ``resources``;
* ``documents`` (name resolution, which documents may be served, the document list,
  read_doc), ``graph_search``;
* ``render`` (text and tool results, pure), ``schemas`` (structured content), ``images``
  (inline figure PNGs), ``links`` (citation URLs and their signatures);
* ``state`` (read-only store views held by the lifespan), ``errors`` (what failures tell the
  model), ``http`` (Streamable HTTP, ``/files``, ``/healthz``), ``cli``.
"""
