"""Read-only views of the stores, for code that must never write (the MCP server).

Each reader type lists the reads a reader needs and nothing that changes the store: no
``upsert``/``delete``/``drop`` on vectors, no ``replace_document``/``clear`` on the graph, no
``add_pending``/``mark_*`` on the catalog. ``VectorReader`` and ``GraphReader`` are the
read-only bases of ``VectorIndex`` and ``GraphStore`` (defined beside them in
``stores.vectors`` and ``stores.graph``, re-exported here), and ``CatalogReader`` is the
read-only base of ``Catalog`` (``stores.catalog``). A reader is opened through
``kb_shared.stores.factory`` as usual and then held as its reader type; "read-only" is then
stated by the types as well as by the database role (``sql/003_reader_role.sql``).
``RequestQueue`` and ``ReferenceQueue`` (``stores.catalog.requests``) are the narrow writers
beside them: the two intake queues, bases of ``Catalog`` like ``CatalogReader``.
"""

from __future__ import annotations

from kb_shared.stores.catalog import CatalogReader
from kb_shared.stores.catalog.requests import ReferenceQueue, RequestQueue
from kb_shared.stores.graph import GraphReader
from kb_shared.stores.vectors import VectorReader

__all__ = ["CatalogReader", "GraphReader", "ReferenceQueue", "RequestQueue", "VectorReader"]
