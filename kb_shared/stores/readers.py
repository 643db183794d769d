"""Read-only views of the stores, for code that must never write (the MCP server).

Each reader type lists the reads a reader needs and nothing that changes the store: no
``upsert``/``delete``/``drop`` on vectors, no ``replace_document``/``clear`` on the graph, no
``add_pending``/``mark_*`` on the catalog. ``VectorReader`` and ``GraphReader`` are the
read-only bases of ``VectorIndex`` and ``GraphStore`` (defined beside them in
``stores.vectors`` and ``stores.graph``, re-exported here), and ``CatalogReader`` is the
read-only base of ``Catalog`` (``stores.catalog``). A reader is opened through
``kb_shared.stores.factory`` as usual and then held as its reader type; "read-only" is then
stated by the types as well as by the database role (``sql/003_reader_role.sql``).
``RequestQueue`` and ``ReferenceQueue`` are the narrow writers beside them: the two intake
queues.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Protocol

from kb_shared.stores.catalog import (
    DEFAULT_MAX_PENDING,
    CatalogReader,
    DocumentRequestRow,
    ReferenceRequestRow,
    ReferenceSourceRow,
)
from kb_shared.stores.graph import GraphReader
from kb_shared.stores.vectors import VectorReader

__all__ = ["CatalogReader", "GraphReader", "ReferenceQueue", "RequestQueue", "VectorReader"]


class RequestQueue(Protocol):
    """The MCP server's only catalog writes: queueing a document request (MCP tool
    ``request_document``) and counting one more ask of a pending one. ``Catalog`` satisfies
    it structurally; on Postgres the ``kb_reader`` role may INSERT the queue's content
    columns and UPDATE ``request_count`` only (``sql/003_reader_role.sql``). Semantics: see
    ``RequestCatalog``."""

    def add_document_request(
        self,
        title: str,
        reason: str,
        source_url: str | None = None,
        checked_indexed_documents: bool = False,
        *,
        max_pending: int = DEFAULT_MAX_PENDING,
    ) -> DocumentRequestRow:
        """Queue a pending request.

        Raises:
            ValueError: a field empty, too long, or a URL that is not http(s).
            QueueFullError: ``max_pending`` requests are already pending.
            DuplicateRequestError: a pending request has the same token-normalised title.
        """
        ...

    def join_document_request(self, title: str) -> DocumentRequestRow:
        """Add one to the ``request_count`` of the pending request with this title.

        Raises:
            RequestNotFoundError: no pending request has that title.
        """
        ...


class ReferenceQueue(Protocol):
    """The reference-page queue as the MCP server uses it (``add_reference``): queue a page
    and read the registered ones. ``Catalog`` satisfies it structurally; on Postgres the
    ``kb_reader`` role may INSERT the queue's ``url``, ``title`` and ``description`` only
    (``sql/003_reader_role.sql``). Semantics: see ``RequestCatalog``."""

    def add_reference_request(
        self, url: str, title: str, description: str, *, max_pending: int = DEFAULT_MAX_PENDING
    ) -> ReferenceRequestRow:
        """Queue a pending reference request.

        Raises:
            ValueError: an empty/over-long field or a URL that is not http(s).
            QueueFullError: ``max_pending`` requests are already pending.
            DuplicateRequestError: a pending request has the same URL.
        """
        ...

    def list_reference_sources(self) -> list[ReferenceSourceRow]:
        """Every registered reference page, ordered by URL."""
        ...
