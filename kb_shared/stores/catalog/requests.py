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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from kb_shared.errors import (
    DuplicateRequestError,
    QueueFullError,
    ReferenceNotFoundError,
    RequestNotFoundError,
)
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


def _length_checks(table: str, lengths: Mapping[str, str]) -> list[sa.CheckConstraint]:
    """``ck_{table}_{column}`` CHECKs from ``{column: SQL condition}``."""
    return [sa.CheckConstraint(sql, name=f"ck_{table}_{column}") for column, sql in lengths.items()]


def _queue_table(
    name: str,
    columns: Sequence[sa.Column[Any]],
    lengths: Mapping[str, str],
    pending_unique: tuple[str, str],
) -> sa.Table:
    """An intake queue: ``id``, the content ``columns``, then ``status``, ``failure_reason``,
    ``created_at`` and ``decided_at``; CHECKs on the status vocabulary
    (``REQUEST_STATUSES``), the content ``lengths`` and a reason for every ``failed`` row;
    and the partial unique index ``ux_{name}_pending_{suffix}`` on ``column``
    (``pending_unique = (suffix, column)``), so a value has at most one pending request."""
    statuses = ", ".join(f"'{status}'" for status in REQUEST_STATUSES)
    table = sa.Table(
        name,
        CATALOG_METADATA,
        sa.Column("id", sa.Integer, sa.Identity(), primary_key=True),
        *columns,
        sa.Column("status", sa.String(16), nullable=False, server_default="pending"),
        sa.Column("failure_reason", sa.Text),
        created_at(),
        created_at("decided_at", nullable=True),
        sa.CheckConstraint(f"status IN ({statuses})", name=f"ck_{name}_status"),
        *_length_checks(name, lengths),
        sa.CheckConstraint(
            "status <> 'failed' OR failure_reason IS NOT NULL", name=f"ck_{name}_failure_reason"
        ),
    )
    suffix, column = pending_unique
    sa.Index(
        f"ux_{name}_pending_{suffix}",
        table.c[column],
        unique=True,
        postgresql_where=sa.text("status = 'pending'"),
        sqlite_where=sa.text("status = 'pending'"),
    )
    return table


def _reference_columns() -> list[sa.Column[Any]]:
    """``url``, ``title`` and ``description`` of a reference page (new objects each call: a
    column belongs to one table)."""
    return [
        sa.Column("url", sa.String(URL_MAX), nullable=False),
        sa.Column("title", sa.String(TITLE_MAX), nullable=False),
        sa.Column("description", sa.String(DESCRIPTION_MAX), nullable=False),
    ]


#: The length CHECKs of ``_reference_columns``.
_REFERENCE_LENGTHS = {
    "url": f"length(url) BETWEEN 1 AND {URL_MAX}",
    "title": f"length(title) BETWEEN 1 AND {TITLE_MAX}",
    "description": f"length(description) BETWEEN 1 AND {DESCRIPTION_MAX}",
}

document_requests = _queue_table(
    "document_requests",
    [
        sa.Column("title", sa.String(TITLE_MAX), nullable=False),
        sa.Column("title_key", sa.Text, nullable=False),
        sa.Column("reason", sa.String(REASON_MAX), nullable=False),
        sa.Column("source_url", sa.String(URL_MAX)),
        sa.Column(
            "checked_indexed_documents", sa.Boolean, nullable=False, server_default=sa.false()
        ),
        sa.Column("request_count", sa.Integer, nullable=False, server_default="1"),
        sa.Column("doc_id", sa.String(120)),
        sa.Column("run_id", sa.String(64)),
    ],
    {
        "title": f"length(title) BETWEEN 1 AND {TITLE_MAX}",
        "reason": f"length(reason) BETWEEN 1 AND {REASON_MAX}",
        "source_url": f"length(source_url) <= {URL_MAX}",
        "request_count": "request_count >= 1",
    },
    pending_unique=("title", "title_key"),
)

reference_sources = sa.Table(
    "reference_sources",
    CATALOG_METADATA,
    sa.Column("id", sa.Integer, sa.Identity(), primary_key=True),
    *_reference_columns(),
    created_at(),
    created_at("updated_at"),
    sa.UniqueConstraint("url", name="uq_reference_sources_url"),
    *_length_checks("reference_sources", _REFERENCE_LENGTHS),
)

reference_requests = _queue_table(
    "reference_requests",
    _reference_columns(),
    _REFERENCE_LENGTHS,
    pending_unique=("url", "url"),
)


@dataclass(frozen=True, slots=True)
class DocumentRequestRow:
    """A request that a document be added (written by the MCP tool ``request_document``).

    ``request_count``: how many times it was asked for (a duplicate title joins it);
    ``doc_id`` / ``run_id``: the document an approval added and the Dagster run that built
    (or admitted) it.
    """

    id: int
    title: str
    reason: str
    source_url: str | None
    checked_indexed_documents: bool
    request_count: int
    doc_id: str | None
    run_id: str | None
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
    """``value`` as a trimmed http(s) URL with a host (``None`` when optional and missing).

    Raises:
        ValueError: empty when required, over ``URL_MAX``, not http(s), or with whitespace.
    """
    clean = clean_text(value, field, URL_MAX, required=required)
    if clean is None:
        return None
    parts = urlsplit(clean)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{field} must be an http(s) URL with a host, got {clean!r}")
    if any(ch.isspace() for ch in clean):
        raise ValueError(f"{field} cannot contain whitespace")
    return clean


def _reference_values(url: Any, title: Any, description: Any) -> dict[str, Any]:
    """The checked ``url``, ``title`` and ``description`` of a reference page.

    Raises:
        ValueError: an empty/over-long field or a URL that is not http(s).
    """
    return {
        "url": _url(url, "url", required=True),
        "title": clean_text(title, "title", TITLE_MAX),
        "description": clean_text(description, "description", DESCRIPTION_MAX),
    }


@dataclass(frozen=True, slots=True)
class _Queue:
    """What tells the two intake queues apart: the table and its row class, the name in
    messages, the column a pending duplicate is found by, and how a message names a request
    (a ``str.format`` template over the row's columns)."""

    table: sa.Table
    row: type[Any]
    what: str
    unique: str
    shown_as: str


_DOCUMENT_QUEUE = _Queue(
    document_requests, DocumentRequestRow, "document request", "title_key", '"{title}"'
)
_REFERENCE_QUEUE = _Queue(
    reference_requests, ReferenceRequestRow, "reference request", "url", "{url}"
)


class _QueueWrites(CatalogBase):
    """What the two intake queues' inserts share (``_enqueue``)."""

    def _enqueue(self, queue: _Queue, values: dict[str, Any], max_pending: int) -> Any:
        """Insert checked ``values`` as a pending request of ``queue``, under the queue's
        advisory lock: refused when the queue is full or the same request is pending."""
        table = queue.table
        try:
            with self._write() as conn:
                self._advisory_lock(conn, _QUEUE_LOCKS[table.name])
                pending = conn.scalar(
                    sa.select(sa.func.count()).select_from(table).where(table.c.status == "pending")
                )
                if (pending or 0) >= max_pending:
                    raise QueueFullError(
                        f"the {queue.what} queue already holds {pending} pending requests (the "
                        f"ceiling is {max_pending}); an operator must review them before more "
                        "can be added"
                    )
                same = conn.execute(
                    sa.select(table).where(
                        table.c[queue.unique] == values[queue.unique], table.c.status == "pending"
                    )
                ).first()
                if same is not None:
                    raise DuplicateRequestError(
                        f"a request for {queue.shown_as.format(**same._mapping)} is already "
                        f"pending (request #{same.id})"
                    )
                row = conn.execute(table.insert().values(**values).returning(*table.c)).one()
        except IntegrityError as exc:  # a concurrent insert won the partial unique index
            raise DuplicateRequestError(
                f"a request for {queue.shown_as.format(**values)} is already pending"
            ) from exc
        return to_row(queue.row, row)


class RequestQueue(_QueueWrites):
    """The document-request queue as the MCP server writes it (MCP tool ``request_document``):
    queue a request, count one more ask of a pending one. With ``ReferenceQueue``'s, the only
    catalog writes the MCP server makes: on Postgres the ``kb_reader`` role may INSERT the
    queue's content columns and UPDATE ``request_count`` only (``sql/003_reader_role.sql``).
    The server holds its catalog as this type (``kb_shared.stores.readers``)."""

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
        values = {
            "title": clean_title,
            "title_key": title_key(clean_title),
            "reason": clean_text(reason, "reason", REASON_MAX),
            "source_url": _url(source_url, "source_url", required=False),
            "checked_indexed_documents": bool(checked_indexed_documents),
        }
        return self._enqueue(_DOCUMENT_QUEUE, values, max_pending)

    def join_document_request(self, title: str) -> DocumentRequestRow:
        """Count one more ask of the pending request whose ``title_key`` is ``title``'s:
        ``request_count`` goes up by one (the one UPDATE ``kb_reader`` may make).

        Raises:
            ValueError: the title is empty, over ``TITLE_MAX`` or has no letters or digits.
            RequestNotFoundError: no pending request has that title (decided meanwhile).
        """
        clean = clean_text(title, "title", TITLE_MAX)
        assert clean is not None
        table = document_requests
        with self._write() as conn:
            row = conn.execute(
                table.update()
                .where(table.c.title_key == title_key(clean), table.c.status == "pending")
                .values(request_count=table.c.request_count + 1)
                .returning(*table.c)
            ).first()
        if row is None:
            raise RequestNotFoundError(f'no pending document request for "{clean}"')
        return to_row(DocumentRequestRow, row)


class ReferenceQueue(_QueueWrites):
    """The reference-page queue as the MCP server uses it (``add_reference``): queue a page
    and read the registered ones. On Postgres the ``kb_reader`` role may INSERT the queue's
    ``url``, ``title`` and ``description`` only (``sql/003_reader_role.sql``)."""

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
        values = _reference_values(url, title, description)
        return self._enqueue(_REFERENCE_QUEUE, values, max_pending)

    def list_reference_sources(self) -> list[ReferenceSourceRow]:
        """Every registered reference page, ordered by URL."""
        with self._read() as conn:
            rows = conn.execute(sa.select(reference_sources).order_by(reference_sources.c.url))
            return [to_row(ReferenceSourceRow, r) for r in rows]


class RequestCatalog(RequestQueue, ReferenceQueue):
    """The intake queues and reference sources of the catalog (see the module docstring): the
    MCP server's two narrow queues, plus listing and deciding requests and registering and
    removing reference pages."""

    def list_document_requests(self, status: str | None = None) -> list[DocumentRequestRow]:
        """Document requests (all, or those with ``status``), oldest first."""
        return self._list_requests(_DOCUMENT_QUEUE, status)

    def set_document_request_status(
        self,
        request_id: int,
        status: str,
        failure_reason: str | None = None,
        *,
        doc_id: str | None = None,
        run_id: str | None = None,
    ) -> DocumentRequestRow:
        """Decide a document request: ``approved``, ``rejected`` or ``failed`` (needs a reason),
        recording the document and run an approval produced (``None`` clears them).

        Raises:
            RequestNotFoundError: no such request.
            ValueError: an unknown status or a failed status without a reason.
        """
        produced = {"doc_id": doc_id, "run_id": run_id}
        return self._decide(_DOCUMENT_QUEUE, request_id, status, failure_reason, produced)

    def list_reference_requests(self, status: str | None = None) -> list[ReferenceRequestRow]:
        """Reference requests (all, or those with ``status``), oldest first."""
        return self._list_requests(_REFERENCE_QUEUE, status)

    def set_reference_request_status(
        self, request_id: int, status: str, failure_reason: str | None = None
    ) -> ReferenceRequestRow:
        """Decide a reference request (same rules as ``set_document_request_status``)."""
        return self._decide(_REFERENCE_QUEUE, request_id, status, failure_reason)

    def _list_requests(self, queue: _Queue, status: str | None) -> list[Any]:
        order = (queue.table.c.created_at, queue.table.c.id)
        return self._list_rows(queue.row, queue.table, order, status, REQUEST_STATUSES)

    def _decide(
        self,
        queue: _Queue,
        request_id: int,
        status: str,
        failure_reason: str | None,
        produced: Mapping[str, Any] | None = None,
    ) -> Any:
        if status not in ("approved", "rejected", "failed"):
            raise ValueError(f"a decision is approved, rejected or failed, not {status!r}")
        reason = None if failure_reason is None else clean_failure(failure_reason)
        if status == "failed" and reason is None:
            raise ValueError("a failed request needs a failure reason")
        if status == "approved" and reason is not None:
            raise ValueError("an approved request has no failure reason")
        table = queue.table
        with self._write() as conn:
            row = conn.execute(
                table.update()
                .where(table.c.id == request_id)
                .values(
                    status=status, failure_reason=reason, decided_at=utc_now(), **(produced or {})
                )
                .returning(*table.c)
            ).first()
        if row is None:
            raise RequestNotFoundError(f"no {table.name} row with id {request_id}")
        return to_row(queue.row, row)

    # -- reference sources -------------------------------------------------------------------

    def upsert_reference_source(self, url: str, title: str, description: str) -> ReferenceSourceRow:
        """Register (or re-describe) a live reference page, keyed by its exact URL.

        Raises:
            ValueError: an empty/over-long field or a URL that is not http(s).
        """
        now = utc_now()
        values = _reference_values(url, title, description)
        values |= {"created_at": now, "updated_at": now}
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

    def remove_reference_source(self, source_id: int) -> ReferenceSourceRow:
        """Unregister reference page ``source_id``; returns the row as it was (its vector
        point is the caller's to delete: ``kb_assets.references.remove_reference``).

        Raises:
            ReferenceNotFoundError: no registered page has that id.
        """
        table = reference_sources
        with self._write() as conn:
            row = conn.execute(
                table.delete().where(table.c.id == source_id).returning(*table.c)
            ).first()
        if row is None:
            raise ReferenceNotFoundError(
                f"no registered reference #{source_id}; `kb references list` lists them"
            )
        return to_row(ReferenceSourceRow, row)
