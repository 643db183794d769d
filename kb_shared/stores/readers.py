"""Read-only views of the stores, for code that must never write (the MCP server).

Each reader type lists the reads a reader needs and nothing that changes the store: no
``upsert``/``delete``/``drop`` on vectors, no ``replace_document``/``clear`` on the graph, no
``add_pending``/``mark_*`` on the catalog. ``VectorReader`` and ``GraphReader`` are the
read-only bases of ``VectorIndex`` and ``GraphStore`` (defined beside them in
``stores.vectors`` and ``stores.graph``, re-exported here); ``Catalog`` satisfies the
``CatalogReader`` Protocol structurally. A reader is opened through
``kb_shared.stores.factory`` as usual and then held as its reader type; "read-only" is then
stated by the types as well as by the database role (``sql/003_reader_role.sql``).
``RequestQueue`` is the one narrow writer beside them: the document-request queue.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Protocol

from kb_shared.stores.catalog import (
    DEFAULT_MAX_PENDING,
    AerSearchResult,
    ComplianceSearchResult,
    DocumentRequestRow,
    DocumentRow,
)
from kb_shared.stores.graph import GraphReader
from kb_shared.stores.vectors import VectorReader

__all__ = ["CatalogReader", "GraphReader", "RequestQueue", "VectorReader"]


class CatalogReader(Protocol):
    """The reads of the ``Catalog`` the MCP server makes: the documents table and the
    market-data searches (same semantics; see ``Catalog``'s docstrings)."""

    def find_by_doc_id(self, doc_id: str) -> DocumentRow | None:
        """The row with this ``doc_id``, or ``None``."""
        ...

    def resolve(self, ref: str) -> DocumentRow | None:
        """The document a person means by a ``doc_id`` or a file name, or ``None``."""
        ...

    def list_documents(self, status: str | None = None) -> list[DocumentRow]:
        """Every document (or those with ``status``), ordered by normalised name.

        Raises:
            SchemaMissingError: the catalog's tables were never created.
        """
        ...

    def close(self) -> None:
        """Release the database engine; safe to call twice."""
        ...

    def search_aer(
        self,
        *,
        retailer: str | None = None,
        jurisdiction: str | None = None,
        fuel: str | None = None,
        customer_type: str | None = None,
        schedule: str | int | None = None,
        metric: str | None = None,
        period_from: str | dt.date | None = None,
        period_to: str | dt.date | None = None,
        limit: int = 100,
    ) -> AerSearchResult:
        """Every stored AER figure matching the filters, with exact count and totals
        (``kb_shared.stores.catalog.aer_search``).

        Raises:
            QueryError: a bad filter or ``limit`` (the message says what to send).
            SchemaMissingError: the AER tables were never created.
        """
        ...

    def search_compliance(
        self,
        query: str | None = None,
        *,
        organisation: str | None = None,
        regulatory_body: str | None = None,
        status: str | None = None,
        misconduct_type: str | None = None,
        sector: str | None = None,
        date_from: dt.date | str | None = None,
        date_to: dt.date | str | None = None,
        min_fine: Decimal | float | int | str | None = None,
        limit: int = 100,
    ) -> ComplianceSearchResult:
        """Every enforcement action matching the filters, with exact count and fine total
        (``kb_shared.stores.catalog.compliance_search``).

        Raises:
            QueryError: a bad filter or ``limit`` (the message says what to send).
            SchemaMissingError: the compliance tables were never created.
        """
        ...


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
