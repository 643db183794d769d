"""The two intake queues (``document_requests``, ``reference_requests``) and the registered
live pages (``reference_sources``).

Per-field length caps and the status vocabulary are CHECKs, and a partial unique index lets
one title (or URL) have at most one pending request. The MCP server's ``kb_reader`` role may
INSERT only the content columns (``sql/003_reader_role.sql``), so ``status`` always starts as
the server default ``'pending'``. Caps and the pending ceiling: DESIGN.md "The MCP server";
the tables: the mcp-utilities README (``document_requests``, ``reference_sources``).
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
import zlib
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from kb_shared.errors import DuplicateRequestError, QueueFullError, RequestNotFoundError
from kb_shared.stores.catalog.common import (
    CATALOG_METADATA,
    URL_MAX,
    CatalogBase,
    clean_failure,
    clean_text,
    created_at,
    to_row,
)
from kb_shared.stores.sql import utc_now

#: Longest request / reference title, in characters.
TITLE_MAX = 300
#: Longest request reason, in characters.
REASON_MAX = 2000
#: Longest reference description, in characters.
DESCRIPTION_MAX = 2000
#: Default ceiling of pending rows per intake queue.
DEFAULT_MAX_PENDING = 200

REQUEST_STATUSES = ("pending", "approved", "rejected", "failed")

_TOKENS = re.compile(r"\w+")

#: Advisory-lock keys (Postgres) that serialise each queue's count-then-insert; any fixed
#: 64-bit constant works.
_QUEUE_LOCKS = {
    "document_requests": zlib.crc32(b"kb.catalog.document_requests"),
    "reference_requests": zlib.crc32(b"kb.catalog.reference_requests"),
}

document_requests = sa.Table(
    "document_requests",
    CATALOG_METADATA,
    sa.Column("id", sa.Integer, sa.Identity(), primary_key=True),
    sa.Column("title", sa.String(TITLE_MAX), nullable=False),
    sa.Column("title_key", sa.Text, nullable=False),
    sa.Column("reason", sa.String(REASON_MAX), nullable=False),
    sa.Column("source_url", sa.String(URL_MAX)),
    sa.Column(
        "checked_indexed_documents", sa.Boolean, nullable=False, server_default=sa.false()
    ),
    sa.Column("status", sa.String(16), nullable=False, server_default="pending"),
    sa.Column("failure_reason", sa.Text),
    created_at(),
    created_at("decided_at", nullable=True),
    sa.CheckConstraint(
        "status IN ('pending', 'approved', 'rejected', 'failed')",
        name="ck_document_requests_status",
    ),
    sa.CheckConstraint(
        f"length(title) BETWEEN 1 AND {TITLE_MAX}", name="ck_document_requests_title"
    ),
    sa.CheckConstraint(
        f"length(reason) BETWEEN 1 AND {REASON_MAX}", name="ck_document_requests_reason"
    ),
    sa.CheckConstraint(
        f"length(source_url) <= {URL_MAX}", name="ck_document_requests_source_url"
    ),
    sa.CheckConstraint(
        "status <> 'failed' OR failure_reason IS NOT NULL",
        name="ck_document_requests_failure_reason",
    ),
)
sa.Index(
    "ux_document_requests_pending_title",
    document_requests.c.title_key,
    unique=True,
    postgresql_where=sa.text("status = 'pending'"),
    sqlite_where=sa.text("status = 'pending'"),
)

reference_sources = sa.Table(
    "reference_sources",
    CATALOG_METADATA,
    sa.Column("id", sa.Integer, sa.Identity(), primary_key=True),
    sa.Column("url", sa.String(URL_MAX), nullable=False),
    sa.Column("title", sa.String(TITLE_MAX), nullable=False),
    sa.Column("description", sa.String(DESCRIPTION_MAX), nullable=False),
    created_at(),
    created_at("updated_at"),
    sa.UniqueConstraint("url", name="uq_reference_sources_url"),
    sa.CheckConstraint(f"length(url) BETWEEN 1 AND {URL_MAX}", name="ck_reference_sources_url"),
    sa.CheckConstraint(
        f"length(title) BETWEEN 1 AND {TITLE_MAX}", name="ck_reference_sources_title"
    ),
    sa.CheckConstraint(
        f"length(description) BETWEEN 1 AND {DESCRIPTION_MAX}",
        name="ck_reference_sources_description",
    ),
)

reference_requests = sa.Table(
    "reference_requests",
    CATALOG_METADATA,
    sa.Column("id", sa.Integer, sa.Identity(), primary_key=True),
    sa.Column("url", sa.String(URL_MAX), nullable=False),
    sa.Column("title", sa.String(TITLE_MAX), nullable=False),
    sa.Column("description", sa.String(DESCRIPTION_MAX), nullable=False),
    sa.Column("status", sa.String(16), nullable=False, server_default="pending"),
    sa.Column("failure_reason", sa.Text),
    created_at(),
    created_at("decided_at", nullable=True),
    sa.CheckConstraint(
        "status IN ('pending', 'approved', 'rejected', 'failed')",
        name="ck_reference_requests_status",
    ),
    sa.CheckConstraint(f"length(url) BETWEEN 1 AND {URL_MAX}", name="ck_reference_requests_url"),
    sa.CheckConstraint(
        f"length(title) BETWEEN 1 AND {TITLE_MAX}", name="ck_reference_requests_title"
    ),
    sa.CheckConstraint(
        f"length(description) BETWEEN 1 AND {DESCRIPTION_MAX}",
        name="ck_reference_requests_description",
    ),
    sa.CheckConstraint(
        "status <> 'failed' OR failure_reason IS NOT NULL",
        name="ck_reference_requests_failure_reason",
    ),
)
sa.Index(
    "ux_reference_requests_pending_url",
    reference_requests.c.url,
    unique=True,
    postgresql_where=sa.text("status = 'pending'"),
    sqlite_where=sa.text("status = 'pending'"),
)


@dataclass(frozen=True, slots=True)
class DocumentRequestRow:
    """A request that a document be added (written by the MCP tool ``request_document``)."""

    id: int
    title: str
    reason: str
    source_url: str | None
    checked_indexed_documents: bool
    status: str
    failure_reason: str | None
    created_at: dt.datetime
    decided_at: dt.datetime | None


@dataclass(frozen=True, slots=True)
class ReferenceRequestRow:
    """A request that a live reference page be registered (MCP tool ``add_reference``)."""

    id: int
    url: str
    title: str
    description: str
    status: str
    failure_reason: str | None
    created_at: dt.datetime
    decided_at: dt.datetime | None


@dataclass(frozen=True, slots=True)
class ReferenceSourceRow:
    """A registered live page: what ``find_reference`` routes to (a descriptor, not a copy)."""

    id: int
    url: str
    title: str
    description: str
    created_at: dt.datetime
    updated_at: dt.datetime


def title_key(title: str) -> str:
    """Token-normalised form of a title for duplicate checks: NFKC, case-folded, the word
    tokens (``\\w+``) joined by one space. ``"Retail  Code, V2"`` → ``"retail code v2"``.

    Raises:
        ValueError: the title has no letters or digits.
    """
    key = " ".join(_TOKENS.findall(unicodedata.normalize("NFKC", title).casefold()))
    if not key:
        raise ValueError(f"the title {title!r} has no letters or digits")
    return key


def _url(value: Any, field: str, *, required: bool) -> str | None:
    clean = clean_text(value, field, URL_MAX, required=required)
    if clean is None:
        return None
    parts = urlsplit(clean)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{field} must be an http(s) URL with a host, got {clean!r}")
    if any(ch.isspace() for ch in clean):
        raise ValueError(f"{field} cannot contain whitespace")
    return clean


class RequestCatalog(CatalogBase):
    """The intake queues and reference sources of the catalog (see the module docstring)."""

    def _check_room(self, conn: Connection, table: sa.Table, max_pending: int, what: str) -> None:
        self._advisory_lock(conn, _QUEUE_LOCKS[table.name])
        pending = conn.scalar(
            sa.select(sa.func.count()).select_from(table).where(table.c.status == "pending")
        )
        if (pending or 0) >= max_pending:
            raise QueueFullError(
                f"the {what} queue already holds {pending} pending requests (the ceiling is "
                f"{max_pending}); an operator must review them before more can be added"
            )

    def add_document_request(
        self,
        title: str,
        reason: str,
        source_url: str | None = None,
        checked_indexed_documents: bool = False,
        *,
        max_pending: int = DEFAULT_MAX_PENDING,
    ) -> DocumentRequestRow:
        """Queue a request that a document be added (status ``pending``).

        Only the content columns are written; ``status`` and ``created_at`` come from server
        defaults, which is all the ``kb_reader`` role may do.

        Args:
            title: the document asked for (1–300 characters after trimming).
            reason: why it is needed (1–2000 characters).
            source_url: where it may be found (http(s), ≤ 2048 characters); never fetched here.
            checked_indexed_documents: the caller searched the indexed documents first.
            max_pending: ceiling of pending requests.

        Raises:
            ValueError: a field empty, too long, or a URL that is not http(s).
            QueueFullError: ``max_pending`` requests are already pending.
            DuplicateRequestError: a pending request has the same token-normalised title.
        """
        clean_title = clean_text(title, "title", TITLE_MAX)
        assert clean_title is not None
        key = title_key(clean_title)
        values = {
            "title": clean_title,
            "title_key": key,
            "reason": clean_text(reason, "reason", REASON_MAX),
            "source_url": _url(source_url, "source_url", required=False),
            "checked_indexed_documents": bool(checked_indexed_documents),
        }
        try:
            with self._write() as conn:
                self._check_room(conn, document_requests, max_pending, "document request")
                same = conn.execute(
                    sa.select(document_requests.c.id, document_requests.c.title).where(
                        document_requests.c.title_key == key,
                        document_requests.c.status == "pending",
                    )
                ).first()
                if same is not None:
                    raise DuplicateRequestError(
                        f'a request for "{same.title}" is already pending (request #{same.id})'
                    )
                row = conn.execute(
                    document_requests.insert().values(**values).returning(*document_requests.c)
                ).one()
        except IntegrityError as exc:  # a concurrent insert won the partial unique index
            raise DuplicateRequestError(
                f'a request for "{clean_title}" is already pending'
            ) from exc
        return to_row(DocumentRequestRow, row)

    def list_document_requests(self, status: str | None = None) -> list[DocumentRequestRow]:
        """Document requests (all, or those with ``status``), oldest first."""
        return self._list_requests(document_requests, DocumentRequestRow, status)

    def set_document_request_status(
        self, request_id: int, status: str, failure_reason: str | None = None
    ) -> DocumentRequestRow:
        """Decide a document request: ``approved``, ``rejected`` or ``failed`` (needs a reason).

        Raises:
            RequestNotFoundError: no such request.
            ValueError: an unknown status or a failed status without a reason.
        """
        return self._decide(
            document_requests, DocumentRequestRow, request_id, status, failure_reason
        )

    def add_reference_request(
        self,
        url: str,
        title: str,
        description: str,
        *,
        max_pending: int = DEFAULT_MAX_PENDING,
    ) -> ReferenceRequestRow:
        """Queue a request that a live page be registered as a reference (status ``pending``).

        Raises:
            ValueError: an empty/over-long field or a URL that is not http(s).
            QueueFullError: ``max_pending`` requests are already pending.
            DuplicateRequestError: a pending request has the same URL.
        """
        values = {
            "url": _url(url, "url", required=True),
            "title": clean_text(title, "title", TITLE_MAX),
            "description": clean_text(description, "description", DESCRIPTION_MAX),
        }
        try:
            with self._write() as conn:
                self._check_room(conn, reference_requests, max_pending, "reference request")
                same = conn.execute(
                    sa.select(reference_requests.c.id).where(
                        reference_requests.c.url == values["url"],
                        reference_requests.c.status == "pending",
                    )
                ).first()
                if same is not None:
                    raise DuplicateRequestError(
                        f"a request for {values['url']} is already pending (request #{same.id})"
                    )
                row = conn.execute(
                    reference_requests.insert().values(**values).returning(*reference_requests.c)
                ).one()
        except IntegrityError as exc:
            raise DuplicateRequestError(
                f"a request for {values['url']} is already pending"
            ) from exc
        return to_row(ReferenceRequestRow, row)

    def list_reference_requests(self, status: str | None = None) -> list[ReferenceRequestRow]:
        """Reference requests (all, or those with ``status``), oldest first."""
        return self._list_requests(reference_requests, ReferenceRequestRow, status)

    def set_reference_request_status(
        self, request_id: int, status: str, failure_reason: str | None = None
    ) -> ReferenceRequestRow:
        """Decide a reference request (same rules as ``set_document_request_status``)."""
        return self._decide(
            reference_requests, ReferenceRequestRow, request_id, status, failure_reason
        )

    def _list_requests(self, table: sa.Table, cls: type[Any], status: str | None) -> list[Any]:
        query = sa.select(table).order_by(table.c.created_at, table.c.id)
        if status is not None:
            if status not in REQUEST_STATUSES:
                raise ValueError(f"status must be one of {REQUEST_STATUSES}, got {status!r}")
            query = query.where(table.c.status == status)
        with self._read() as conn:
            return [to_row(cls, r) for r in conn.execute(query)]

    def _decide(
        self,
        table: sa.Table,
        cls: type[Any],
        request_id: int,
        status: str,
        failure_reason: str | None,
    ) -> Any:
        if status not in ("approved", "rejected", "failed"):
            raise ValueError(f"a decision is approved, rejected or failed, not {status!r}")
        reason = None if failure_reason is None else clean_failure(failure_reason)
        if status == "failed" and reason is None:
            raise ValueError("a failed request needs a failure reason")
        if status == "approved" and reason is not None:
            raise ValueError("an approved request has no failure reason")
        with self._write() as conn:
            row = conn.execute(
                table.update()
                .where(table.c.id == request_id)
                .values(status=status, failure_reason=reason, decided_at=utc_now())
                .returning(*table.c)
            ).first()
        if row is None:
            raise RequestNotFoundError(f"no {table.name} row with id {request_id}")
        return to_row(cls, row)

    # -- reference sources -------------------------------------------------------------------

    def upsert_reference_source(self, url: str, title: str, description: str) -> ReferenceSourceRow:
        """Register (or re-describe) a live reference page, keyed by its exact URL.

        Raises:
            ValueError: an empty/over-long field or a URL that is not http(s).
        """
        now = utc_now()
        values = {
            "url": _url(url, "url", required=True),
            "title": clean_text(title, "title", TITLE_MAX),
            "description": clean_text(description, "description", DESCRIPTION_MAX),
            "created_at": now,
            "updated_at": now,
        }
        with self._write() as conn:
            stmt = self._insert(reference_sources).values(**values)
            stmt = stmt.on_conflict_do_update(
                index_elements=["url"],
                set_={
                    "title": stmt.excluded.title,
                    "description": stmt.excluded.description,
                    "updated_at": stmt.excluded.updated_at,
                },
            )
            row = conn.execute(stmt.returning(*reference_sources.c)).one()
        return to_row(ReferenceSourceRow, row)

    def list_reference_sources(self) -> list[ReferenceSourceRow]:
        """Every registered reference page, ordered by URL."""
        with self._read() as conn:
            rows = conn.execute(sa.select(reference_sources).order_by(reference_sources.c.url))
            return [to_row(ReferenceSourceRow, r) for r in rows]
