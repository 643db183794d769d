"""kb_mcp: the read-only MCP server of kb (``kb-mcp serve``).

It answers questions over the corpus that ``kb_assets`` built, reading the stores through
``kb_shared`` only (it never imports ``kb_assets``): ``server`` (tools, prompt, resource),
``search`` (retrieval), ``render`` (text, structured content, images), ``state`` (the stores
held open by the lifespan), ``http`` (Streamable HTTP, ``/files``, ``/healthz``), ``cli``.
"""
