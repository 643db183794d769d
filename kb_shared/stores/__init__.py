"""Where kb keeps things, one role each with its backends: ``catalog`` (documents, versions,
registers, market tables; SQLite or Postgres), ``vectors`` (dense and sparse vectors; SQLite or
Qdrant), ``graph`` (entities and relationships; SQL or Neo4j), ``blobs`` (files, through fsspec).
``factory`` picks the backends from settings, ``readers`` gives the server read-only views, ``sql``
holds the engine and transaction helpers, ``migrate`` copies a corpus between backends.
"""
