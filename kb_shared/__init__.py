"""kb_shared: what the pipeline (``kb_assets``) and the server (``kb_mcp``) both import; it
imports neither, nor Dagster nor MCP (``tests/test_import_rules.py``).

The core, at the top: ``settings`` (the one reader of the environment), ``errors`` (every
exception kb raises on purpose), ``identity`` (names and ids), ``layout`` (blob keys),
``models`` (model ids), ``access`` (who may reach the HTTP servers), ``graph_model`` (entities
and relationships), ``retry_after`` (the wait a rate-limited response asks for). One package
per concern beside it: ``ingest`` (PDF to located chunks), ``search`` (the search pipeline),
``compliance`` (obligations, what changed), ``fetch`` (the safe fetcher), ``market`` (AER and
Notion data), ``providers`` (models, local and cloud) and ``stores`` (catalog, vectors, graph,
blobs). The map is ``docs/architecture.md``.
"""
