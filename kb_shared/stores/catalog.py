"""Catalog role: documents, the two intake queues, reference sources, compliance actions and
AER retail statistics, in one SQL database through SQLAlchemy 2 Core.

Backends: a SQLite file (embedded default, through ``pysqlite3`` so every part of kb uses the
same SQLite build) or Postgres through psycopg 3 (``postgresql+psycopg://``). The same
``CATALOG_METADATA`` creates the schema on both; ``sql/001_catalog.sql`` is the same DDL
written out for DBAs, and ``tests/stores/test_sql_files.py`` proves the two agree.

The constraints are what keep the data true, not the Python around them:

* ``documents``: ``doc_id`` primary key, ``normalized_name`` and ``sha256`` unique. The intake
  writes a ``pending`` row first (``Catalog.add_pending``) so these indexes close the race
  between two uploads of the same document; the pipeline's ``record`` asset then marks it
  ``ready`` (or ``failed``). A ``failed`` row always has a reason and a ``ready`` row always
  has its page and chunk counts (CHECK constraints).
* ``document_requests`` / ``reference_requests``: per-field length caps as CHECKs, status
  vocabulary as a CHECK, and a partial unique index so one title (or URL) has at most one
  pending request. The MCP server's ``kb_reader`` role may INSERT only the content columns
  (``sql/003_reader_role.sql``), so ``status`` always starts as the server default
  ``'pending'``.
* ``aer_performance``: one value per (schedule, retailer, jurisdiction, fuel, metric, period);
  all six are NOT NULL so the UNIQUE constraint cannot be dodged with NULLs.

Rules come from ``DESIGN.md`` ("Identity", "Stores", "The MCP server") and from the
mcp-utilities README (``document_requests``, ``compliance_actions``, ``aer_performance``,
``reference_sources``).
"""

from __future__ import annotations

import datetime as dt
import importlib
import importlib.util
import re
import unicodedata
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import (
    DBAPIError,
    IntegrityError,
    InterfaceError,
    OperationalError,
    ProgrammingError,
)
from sqlalchemy.pool import StaticPool

from kb_shared import identity
from kb_shared.errors import (
    IdentityError,
    DuplicateDocumentError,
    DuplicateRequestError,
    QueueFullError,
    RequestNotFoundError,
    RequestRefusedError,
    DocumentNotFoundError,
    KbError,
    SchemaMissingError,
    StoreError,
    StoreUnavailableError,
)

# --------------------------------------------------------------------------------------------
# Limits (product caps from DESIGN.md "The MCP server": per-field length caps and a ceiling of
# pending rows on the two intake queues).
# --------------------------------------------------------------------------------------------

#: Longest request / reference title, in characters.
TITLE_MAX = 300
#: Longest request reason, in characters.
REASON_MAX = 2000
#: Longest reference description, in characters.
DESCRIPTION_MAX = 2000
#: Longest URL, in characters. The sitemaps.org protocol caps URLs at 2,048 characters, the
#: de facto limit most clients and servers share.
URL_MAX = 2048
#: Longest document name (as uploaded, trimmed), in characters.
NAME_MAX = 1024
#: Failure reasons longer than this are cut (they are stack-trace tails at worst).
FAILURE_REASON_MAX = 4000
#: Default ceiling of pending rows per intake queue.
DEFAULT_MAX_PENDING = 200

DOCUMENT_STATUSES = ("pending", "ready", "failed")
REQUEST_STATUSES = ("pending", "approved", "rejected", "failed")

#: Scale (digits after the point) of money and statistic values; see ``_to_decimal``.
PENALTY_SCALE = 2
AER_VALUE_SCALE = 6

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_TOKENS = re.compile(r"\w+")

#: Advisory-lock keys (Postgres) that serialise schema creation and each queue's
#: count-then-insert; any 64-bit constant works as long as it is fixed.
_SCHEMA_LOCK = zlib.crc32(b"kb.catalog.schema")
_QUEUE_LOCKS = {
    "document_requests": zlib.crc32(b"kb.catalog.document_requests"),
    "reference_requests": zlib.crc32(b"kb.catalog.reference_requests"),
}


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Types and schema
# --------------------------------------------------------------------------------------------


class UtcDateTime(sa.types.TypeDecorator[dt.datetime]):
    """A timezone-aware UTC timestamp on every backend.

    Postgres stores ``timestamptz``; SQLite stores UTC text without an offset. Binding a naive
    datetime raises ``ValueError`` (its zone would be a guess); results are always aware UTC.
    """

    impl = sa.DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect: sa.Dialect) -> sa.types.TypeEngine[Any]:
        return dialect.type_descriptor(sa.DateTime(timezone=True))

    def process_bind_param(self, value: dt.datetime | None, dialect: sa.Dialect) -> Any:
        if value is None:
            return None
        if not isinstance(value, dt.datetime):
            raise TypeError(f"expected a datetime, got {type(value).__name__}")
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value!r}: pass a timezone-aware value")
        value = value.astimezone(dt.UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: sa.Dialect) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC)


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _created_at(name: str = "created_at", nullable: bool = False) -> sa.Column[Any]:
    return sa.Column(
        name,
        UtcDateTime(),
        nullable=nullable,
        server_default=None if nullable else sa.func.current_timestamp(),
    )


#: Every catalog table. The graph tables of ``graph_sql.GRAPH_METADATA`` live in their own
#: MetaData and are created next to these by ``Catalog.ensure_schema``.
CATALOG_METADATA = sa.MetaData()

_COUNT_COLUMNS = ("pages", "chunk_count", "figure_count", "entity_count", "relationship_count")

documents = sa.Table(
    "documents",
    CATALOG_METADATA,
    sa.Column("doc_id", sa.String(120), primary_key=True),
    sa.Column("name", sa.String(NAME_MAX), nullable=False),
    sa.Column("normalized_name", sa.String(NAME_MAX), nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("status", sa.String(16), nullable=False, server_default="pending"),
    sa.Column("failure_reason", sa.Text),
    sa.Column("title", sa.Text),
    sa.Column("version", sa.Text),
    *(sa.Column(name, sa.Integer) for name in _COUNT_COLUMNS),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    sa.Column("blob_key", sa.Text, nullable=False),
    sa.Column("markdown_key", sa.Text),
    sa.Column("converter", sa.Text),
    sa.Column("embedding_model", sa.Text),
    _created_at(),
    _created_at("updated_at"),
    sa.UniqueConstraint("normalized_name", name="uq_documents_normalized_name"),
    sa.UniqueConstraint("sha256", name="uq_documents_sha256"),
    sa.CheckConstraint("status IN ('pending', 'ready', 'failed')", name="ck_documents_status"),
    sa.CheckConstraint(
        "(status = 'failed') = (failure_reason IS NOT NULL)", name="ck_documents_failure_reason"
    ),
    sa.CheckConstraint(
        "status <> 'ready' OR (pages IS NOT NULL AND chunk_count IS NOT NULL)",
        name="ck_documents_ready_counts",
    ),
    sa.CheckConstraint("length(sha256) = 64", name="ck_documents_sha256"),
    sa.CheckConstraint("size_bytes >= 0", name="ck_documents_size_bytes"),
    *(sa.CheckConstraint(f"{name} >= 0", name=f"ck_documents_{name}") for name in _COUNT_COLUMNS),
)

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
    _created_at(),
    _created_at("decided_at", nullable=True),
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
    _created_at(),
    _created_at("updated_at"),
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
    _created_at(),
    _created_at("decided_at", nullable=True),
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

compliance_actions = sa.Table(
    "compliance_actions",
    CATALOG_METADATA,
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("entity_name", sa.Text, nullable=False),
    sa.Column("regulator", sa.Text),
    sa.Column("action_type", sa.Text),
    sa.Column("penalty_amount", sa.Numeric(18, PENALTY_SCALE)),
    sa.Column("currency", sa.String(3)),
    sa.Column("action_date", sa.Date),
    sa.Column("status", sa.Text),
    sa.Column("summary", sa.Text),
    sa.Column("url", sa.String(URL_MAX)),
    sa.Column("source", sa.String(64), nullable=False),
    sa.Column("last_edited", UtcDateTime()),
    sa.Column("synced_at", UtcDateTime(), nullable=False),
    sa.CheckConstraint("penalty_amount >= 0", name="ck_compliance_actions_penalty_amount"),
    sa.CheckConstraint("length(currency) = 3", name="ck_compliance_actions_currency"),
    sa.CheckConstraint("length(id) >= 1", name="ck_compliance_actions_id"),
)

_AER_KEY = ("schedule", "retailer", "jurisdiction", "fuel", "metric", "period")

aer_performance = sa.Table(
    "aer_performance",
    CATALOG_METADATA,
    sa.Column("id", sa.Integer, sa.Identity(), primary_key=True),
    sa.Column("schedule", sa.String(32), nullable=False),
    sa.Column("retailer", sa.Text, nullable=False),
    sa.Column("jurisdiction", sa.String(64), nullable=False),
    sa.Column("fuel", sa.String(32), nullable=False),
    sa.Column("metric", sa.Text, nullable=False),
    sa.Column("period", sa.String(32), nullable=False),
    sa.Column("value", sa.Numeric(20, AER_VALUE_SCALE)),
    sa.Column("unit", sa.String(64)),
    sa.Column("source_file", sa.Text),
    sa.UniqueConstraint(*_AER_KEY, name="uq_aer_performance_key"),
)

aer_metrics = sa.Table(
    "aer_metrics",
    CATALOG_METADATA,
    sa.Column("metric", sa.Text, primary_key=True),
    sa.Column("schedule", sa.String(32), nullable=False),
    sa.Column("description", sa.Text),
    sa.Column("unit", sa.String(64)),
)


def schema_metadata() -> tuple[sa.MetaData, ...]:
    """The MetaData objects ``ensure_schema`` creates: the catalog, plus the SQL graph tables
    (``kb_shared.stores.graph_sql.GRAPH_METADATA``) when that module is installed.

    Raises:
        ImportError / AttributeError: ``graph_sql`` exists but is broken or lacks
            ``GRAPH_METADATA`` (a broken module is an error, never a silently missing table).
    """
    if importlib.util.find_spec("kb_shared.stores.graph_sql") is None:
        return (CATALOG_METADATA,)
    module = importlib.import_module("kb_shared.stores.graph_sql")
    return (CATALOG_METADATA, module.GRAPH_METADATA)


# --------------------------------------------------------------------------------------------
# Row types (what the Catalog returns: frozen dataclasses, never raw Row objects)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DocumentRow:
    """One document. ``status`` is ``pending`` | ``ready`` | ``failed``; counts are ``None``
    until the pipeline records them; ``size_bytes`` is the PDF size in bytes; ``blob_key`` and
    ``markdown_key`` are blob-store keys; timestamps are aware UTC."""

    doc_id: str
    name: str
    normalized_name: str
    sha256: str
    status: str
    failure_reason: str | None
    title: str | None
    version: str | None
    pages: int | None
    chunk_count: int | None
    figure_count: int | None
    entity_count: int | None
    relationship_count: int | None
    size_bytes: int
    blob_key: str
    markdown_key: str | None
    converter: str | None
    embedding_model: str | None
    created_at: dt.datetime
    updated_at: dt.datetime


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


@dataclass(frozen=True, slots=True)
class ComplianceActionRow:
    """One regulatory enforcement action, keyed by its source row id (e.g. a Notion page id).

    ``penalty_amount`` is a non-negative ``Decimal`` in ``currency`` (ISO 4217 code, 3
    letters), rounded half-even to cents; ``action_date`` a date; ``last_edited`` the source's
    edit time and ``synced_at`` when kb wrote the row (both aware UTC). ``synced_at`` may be
    left ``None`` on input: ``upsert_compliance_actions`` stamps it.
    """

    id: str
    entity_name: str
    source: str
    regulator: str | None = None
    action_type: str | None = None
    penalty_amount: Decimal | None = None
    currency: str | None = None
    action_date: dt.date | None = None
    status: str | None = None
    summary: str | None = None
    url: str | None = None
    last_edited: dt.datetime | None = None
    synced_at: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class AerRow:
    """One reported AER retail performance figure: ``value`` (a ``Decimal`` rounded half-even
    to 6 places, or ``None`` when the cell was blank) of ``metric`` for one retailer,
    jurisdiction, fuel and period (e.g. ``"2024-Q3"``) in one schedule (``"2"``/``"3"``/``"4"``).
    """

    schedule: str
    retailer: str
    jurisdiction: str
    fuel: str
    metric: str
    period: str
    value: Decimal | None = None
    unit: str | None = None
    source_file: str | None = None


@dataclass(frozen=True, slots=True)
class AerMetric:
    """A metric's vocabulary entry: which schedule reports it, what it means, its unit."""

    metric: str
    schedule: str
    description: str | None = None
    unit: str | None = None


def _row(cls: type[Any], row: sa.Row[Any]) -> Any:
    mapping = row._mapping
    return cls(**{f.name: mapping[f.name] for f in fields(cls)})


# --------------------------------------------------------------------------------------------
# Engines
# --------------------------------------------------------------------------------------------

#: SQLite busy timeout in milliseconds: how long a writer waits for another writer's lock
#: before "database is locked" (https://www.sqlite.org/pragma.html#pragma_busy_timeout).
SQLITE_BUSY_TIMEOUT_MS = 30_000

#: Execution option that makes a SQLite transaction start with ``BEGIN IMMEDIATE``.
_WRITE_OPTION = "kb_write"


def make_engine(url: str | sa.URL, **kwargs: Any) -> Engine:
    """Create a SQLAlchemy engine for the catalog (no connection is opened here).

    * SQLite (``sqlite:///path``): DBAPI is ``pysqlite3`` (the SQLite build the vector index
      also needs); every connection gets ``journal_mode=WAL`` (readers never block the
      writer), ``foreign_keys=ON`` and ``busy_timeout``. SQLAlchemy emits ``BEGIN`` itself
      (SQLAlchemy docs, "Enabling Non-Legacy SQLite Transactional Modes") so SELECTs and DDL
      are transactional; write transactions use ``BEGIN IMMEDIATE`` so a read-then-write (the
      queue ceiling) cannot interleave with another writer. ``sqlite://`` (memory) shares one
      connection.
    * Postgres (``postgresql://``, ``postgres://`` or ``postgresql+psycopg://``): psycopg 3,
      ``pool_pre_ping`` so a restarted server is survived, 10 s connect timeout.

    Args:
        url: SQLAlchemy URL.
        **kwargs: passed to ``sqlalchemy.create_engine``.

    Raises:
        ValueError: any other database (kb supports SQLite and Postgres only).
    """
    parsed = sa.make_url(url) if isinstance(url, str) else url
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.get_driver_name() not in ("pysqlite", ""):
            raise ValueError(f"unsupported SQLite driver {parsed.drivername!r}; use sqlite:///")
        import pysqlite3.dbapi2 as pysqlite3  # noqa: PLC0415 - optional heavy import

        parsed = parsed.set(drivername="sqlite+pysqlite")
        if not parsed.database or parsed.database == ":memory:":
            kwargs.setdefault("poolclass", StaticPool)
            kwargs.setdefault("connect_args", {"check_same_thread": False})
        engine = sa.create_engine(parsed, module=pysqlite3, **kwargs)
        _install_sqlite_hooks(engine)
        return engine
    if backend in ("postgresql", "postgres"):
        if parsed.drivername in ("postgresql", "postgres"):
            parsed = parsed.set(drivername="postgresql+psycopg")
        elif parsed.drivername != "postgresql+psycopg":
            raise ValueError(
                f"unsupported Postgres driver {parsed.drivername!r}; use postgresql+psycopg://"
            )
        kwargs.setdefault("pool_pre_ping", True)
        connect_args = dict(kwargs.pop("connect_args", {}))
        connect_args.setdefault("connect_timeout", 10)
        return sa.create_engine(parsed, connect_args=connect_args, **kwargs)
    raise ValueError(
        f"the catalog supports sqlite:/// and postgresql:// URLs, not {parsed.drivername!r}"
    )


def _install_sqlite_hooks(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy emits BEGIN (see _on_begin)
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA foreign_keys = ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(_WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def safe_url(engine_or_url: Engine | str | sa.URL) -> str:
    """The URL with its password replaced by ``***`` (for messages and logs)."""
    url = engine_or_url.url if isinstance(engine_or_url, Engine) else engine_or_url
    parsed = sa.make_url(url) if isinstance(url, str) else url
    return parsed.render_as_string(hide_password=True)


def apply_sql_files(engine: Engine, directory: str | Path) -> list[str]:
    """Apply the numbered DDL files (``NNN_*.sql``) of ``directory`` to Postgres, in order.

    Each file runs in its own transaction, so a failing file leaves nothing half-applied. The
    files are written to be idempotent (``IF NOT EXISTS``, ``DO`` blocks), so running this on
    every ``kb db init`` is safe.

    Returns:
        The file names applied, in order.

    Raises:
        ValueError: the engine is not Postgres (SQLite gets ``Catalog.ensure_schema``), or
            the directory holds no numbered files.
        StoreUnavailableError: the server cannot be reached.
        StoreError: a statement failed (the message names the file; that file is rolled
            back, earlier files stay applied).
    """
    if engine.dialect.name != "postgresql":
        raise ValueError(
            f"sql/ files are Postgres DDL; {engine.dialect.name} schema comes from "
            "Catalog.ensure_schema()"
        )
    files = sorted(p for p in Path(directory).glob("*.sql") if re.match(r"^\d{3}_", p.name))
    if not files:
        raise ValueError(f"no numbered NNN_*.sql files in {directory}")
    applied: list[str] = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        with _guard(engine), engine.begin() as conn:
            # The raw cursor, with no parameters, so psycopg leaves format('%I') alone and
            # runs the whole file (several statements) in this one transaction.
            cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
            try:
                cursor.execute(text)
            except Exception as exc:
                raise StoreError(f"applying {path.name} failed: {exc}") from exc
            finally:
                cursor.close()
        applied.append(path.name)
    return applied


# --------------------------------------------------------------------------------------------
# Error translation
# --------------------------------------------------------------------------------------------


def _sqlstate(exc: DBAPIError) -> str | None:
    return getattr(exc.orig, "sqlstate", None)


def _detail(exc: DBAPIError, engine: Engine) -> str:
    text = str(exc.orig).strip().splitlines()[0] if str(exc.orig).strip() else type(exc).__name__
    password = engine.url.password
    return text.replace(str(password), "***") if password else text


@contextmanager
def _guard(engine: Engine) -> Iterator[None]:
    """Translate driver errors into kb errors that say what to do."""
    try:
        yield
    except (OperationalError, ProgrammingError, InterfaceError) as exc:
        detail = _detail(exc, engine)
        where = safe_url(engine)
        if "no such table" in detail or _sqlstate(exc) == "42P01":
            raise SchemaMissingError(
                f"the catalog schema is missing in {where} ({detail}); run `kb db init`"
            ) from exc
        if _sqlstate(exc) == "42501":
            raise StoreError(f"permission denied in {where}: {detail}") from exc
        if isinstance(exc, ProgrammingError):
            raise
        raise StoreUnavailableError(f"catalog database {where} is unavailable: {detail}") from exc


# --------------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------------


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


def _text(value: Any, field: str, limit: int, *, required: bool = True) -> str | None:
    if value is None:
        if required:
            raise ValueError(f"{field} is required")
        return None
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a string, got {type(value).__name__}")
    clean = value.strip()
    if not clean:
        if required:
            raise ValueError(f"{field} cannot be empty")
        return None
    if "\x00" in clean:
        raise ValueError(f"{field} cannot contain NUL characters")
    if len(clean) > limit:
        raise ValueError(f"{field} is {len(clean)} characters; the limit is {limit}")
    return clean


def _url(value: Any, field: str, *, required: bool) -> str | None:
    clean = _text(value, field, URL_MAX, required=required)
    if clean is None:
        return None
    parts = urlsplit(clean)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{field} must be an http(s) URL with a host, got {clean!r}")
    if any(ch.isspace() for ch in clean):
        raise ValueError(f"{field} cannot contain whitespace")
    return clean


def _count(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{field} must be an integer, got {value!r}")
    if value < 0:
        raise ValueError(f"{field} cannot be negative, got {value}")
    return value


def _to_decimal(value: Any, field: str, scale: int) -> Decimal | None:
    """A ``Decimal`` rounded half-even to ``scale`` places (the column's scale; Postgres would
    round the same way on insert). Floats go through ``str`` so ``0.1`` stays ``0.1``."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"{field} must be a number, got {value!r}")
    try:
        number = Decimal(str(value)) if isinstance(value, (int, float, str)) else Decimal(value)
    except (InvalidOperation, TypeError, ValueError) as exc:
        raise ValueError(f"{field} must be a number, got {value!r}") from exc
    if not number.is_finite():
        raise ValueError(f"{field} must be finite, got {value!r}")
    return number.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_EVEN)


_DOCUMENT_FIELDS: dict[str, str] = {
    "title": "text",
    "version": "text",
    "pages": "count",
    "chunk_count": "count",
    "figure_count": "count",
    "entity_count": "count",
    "relationship_count": "count",
    "size_bytes": "count",
    "blob_key": "key",
    "markdown_key": "text",
    "converter": "text",
    "embedding_model": "text",
}


def _document_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(values) - set(_DOCUMENT_FIELDS))
    if unknown:
        raise ValueError(
            f"cannot set {', '.join(unknown)} on a document; settable fields: "
            f"{', '.join(sorted(_DOCUMENT_FIELDS))} (identity fields never change)"
        )
    clean: dict[str, Any] = {}
    for name, value in values.items():
        kind = _DOCUMENT_FIELDS[name]
        if kind == "count":
            if value is None and name == "size_bytes":
                raise ValueError("size_bytes cannot be None")
            clean[name] = _count(value, name)
        elif kind == "key":
            clean[name] = _text(value, name, 4096)
        else:
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{name} must be a string or None, got {value!r}")
            clean[name] = value
    return clean


def _failure(reason: Any) -> str:
    clean = _text(reason, "failure reason", 10**9)
    assert clean is not None
    return clean[:FAILURE_REASON_MAX]


# --------------------------------------------------------------------------------------------
# The catalog
# --------------------------------------------------------------------------------------------


class Catalog:
    """The catalog store over one SQLAlchemy engine (SQLite or Postgres).

    The constructor does no I/O. Call ``ensure_schema()`` once (``kb db init`` and the
    factory do). Every method runs in its own transaction and returns frozen dataclasses.

    Errors (all methods):
        StoreUnavailableError: the database cannot be reached (message has the URL, password
            hidden).
        StoreError: the schema is missing ("run `kb db init`") or the role lacks a privilege.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @property
    def engine(self) -> Engine:
        """The engine (shared with ``SqlGraphStore`` in the embedded setup)."""
        return self._engine

    @property
    def dialect(self) -> str:
        """``"sqlite"`` or ``"postgresql"``."""
        return self._engine.dialect.name

    def __repr__(self) -> str:
        return f"Catalog({safe_url(self._engine)!r})"

    # -- plumbing ----------------------------------------------------------------------------

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with _guard(self._engine), self._engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with (
            _guard(self._engine),
            self._engine.connect().execution_options(**{_WRITE_OPTION: True}) as conn,
            conn.begin(),
        ):
            yield conn

    def _advisory_lock(self, conn: Connection, key: int) -> None:
        if self.dialect == "postgresql":
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(key)))

    # -- schema ------------------------------------------------------------------------------

    def ensure_schema(self) -> None:
        """Create every missing catalog (and SQL graph) table and index; idempotent.

        On Postgres an advisory lock serialises concurrent callers (two processes starting at
        once); on SQLite ``BEGIN IMMEDIATE`` does. Existing tables are never altered.
        """
        with self._write() as conn:
            self._advisory_lock(conn, _SCHEMA_LOCK)
            for metadata in schema_metadata():
                metadata.create_all(conn, checkfirst=True)

    # -- documents ---------------------------------------------------------------------------

    def add_pending(
        self, name: str, doc_id: str, sha256: str, size_bytes: int, blob_key: str
    ) -> DocumentRow:
        """Write the intake row of a new document with status ``pending``.

        Args:
            name: the file name as uploaded (stored trimmed).
            doc_id: ``identity.doc_id(name)`` (checked).
            sha256: lower-case hex SHA-256 of the PDF bytes.
            size_bytes: PDF size in bytes.
            blob_key: blob-store key of the PDF.

        Raises:
            DuplicateDocumentError: the normalised name, the content hash or the ``doc_id`` is
                already in the catalog (the unique indexes decide, so two racing intakes
                cannot both win); the message names the existing document.
            ValueError: an empty or over-long name, a ``doc_id`` that is not
                ``identity.doc_id(name)``, a malformed hash, a negative size or empty key.
        """
        clean = _text(name, "name", NAME_MAX)
        assert clean is not None
        normal = identity.normalize_name(clean)
        expected = identity.doc_id(clean)
        if doc_id != expected:
            raise ValueError(f"doc_id {doc_id!r} does not match the name {clean!r} ({expected!r})")
        if not isinstance(sha256, str) or not _SHA256.match(sha256):
            raise ValueError(f"sha256 must be 64 lower-case hex digits, got {sha256!r}")
        size = _count(size_bytes, "size_bytes")
        if size is None:
            raise ValueError("size_bytes is required")
        key = _text(blob_key, "blob_key", 4096)
        now = _now()
        values: dict[str, Any] = {
            "doc_id": doc_id,
            "name": clean,
            "normalized_name": normal,
            "sha256": sha256,
            "status": "pending",
            "size_bytes": size,
            "blob_key": key,
            "created_at": now,
            "updated_at": now,
        }
        try:
            with self._write() as conn:
                row = conn.execute(
                    documents.insert().values(**values).returning(*documents.c)
                ).one()
        except IntegrityError as exc:
            raise self._duplicate(clean, normal, doc_id, sha256, exc) from exc
        return _row(DocumentRow, row)

    def _duplicate(
        self, name: str, normal: str, doc_id: str, sha256: str, exc: IntegrityError
    ) -> KbError:
        checks = (
            ("name", documents.c.normalized_name == normal),
            ("sha256", documents.c.sha256 == sha256),
            ("doc_id", documents.c.doc_id == doc_id),
        )
        with self._read() as conn:
            for field, condition in checks:
                found = conn.execute(sa.select(documents).where(condition)).first()
                if found is None:
                    continue
                existing: DocumentRow = _row(DocumentRow, found)
                what = f'"{existing.name}" (doc_id {existing.doc_id}, status {existing.status})'
                if field == "name":
                    message = (
                        f'"{name}" is already in the catalog as {what}; '
                        "delete that document first to replace it"
                    )
                elif field == "sha256":
                    message = (
                        f'"{name}" has the same content (sha256 {sha256[:12]}…) as the existing '
                        f"document {what}; it is not added twice"
                    )
                else:
                    message = (
                        f'"{name}" maps to doc_id "{doc_id}", which the existing document '
                        f"{what} already uses; rename the file so its letters and digits differ"
                    )
                return DuplicateDocumentError(message, name=name, field=field, existing=existing)
        return StoreError(f'the catalog refused "{name}": {_detail(exc, self._engine)}')

    def find_by_normalized_name(self, name: str) -> DocumentRow | None:
        """The document whose normalised name equals ``normalize_name(name)``, or ``None``."""
        return self._find(documents.c.normalized_name == identity.normalize_name(name))

    def find_by_sha256(self, sha256: str) -> DocumentRow | None:
        """The document with this content hash (lower-case hex), or ``None``."""
        return self._find(documents.c.sha256 == sha256.lower())

    def find_by_doc_id(self, doc_id: str) -> DocumentRow | None:
        """The document with this ``doc_id``, or ``None``."""
        return self._find(documents.c.doc_id == doc_id)

    def resolve(self, ref: str) -> DocumentRow | None:
        """The document a person or model means by ``ref``, or ``None``: a ``doc_id``, else a
        file name compared by ``normalize_name`` (case and surrounding spaces forgiven), else
        the same with a missing ``.pdf`` extension. One read for the common case; the CLI and
        the MCP tools both resolve through here.
        """
        ref = ref.strip()
        if not ref:
            return None
        try:
            keys = [identity.normalize_name(ref)]
            ids = [ref, identity.doc_id(ref), identity.doc_id(ref + ".pdf")]
        except IdentityError:
            return None
        keys.append(identity.normalize_name(ref + ".pdf"))
        condition = sa.or_(
            documents.c.doc_id.in_(list(dict.fromkeys(ids))),
            documents.c.normalized_name.in_(list(dict.fromkeys(keys))),
        )
        with self._read() as conn:
            rows = [_row(DocumentRow, r) for r in conn.execute(sa.select(documents).where(condition))]
        # Prefer the most literal match: exact doc_id, then the name, then the guesses.
        for matches in (
            lambda r: r.doc_id == ref,
            lambda r: r.normalized_name == keys[0],
            lambda r: r.doc_id in ids or r.normalized_name in keys,
        ):
            for row in rows:
                if matches(row):
                    return row
        return None

    def get(self, doc_id: str) -> DocumentRow:
        """The document with this ``doc_id``.

        Raises:
            DocumentNotFoundError: no such document.
        """
        row = self.find_by_doc_id(doc_id)
        if row is None:
            raise DocumentNotFoundError(f"no document with doc_id {doc_id!r} in the catalog")
        return row

    def _find(self, condition: sa.ColumnElement[bool]) -> DocumentRow | None:
        with self._read() as conn:
            row = conn.execute(sa.select(documents).where(condition)).first()
        return None if row is None else _row(DocumentRow, row)

    def list_documents(self, status: str | None = None) -> list[DocumentRow]:
        """Every document (or those with ``status``), ordered by normalised name.

        Raises:
            ValueError: an unknown status.
        """
        query = sa.select(documents).order_by(documents.c.normalized_name)
        if status is not None:
            if status not in DOCUMENT_STATUSES:
                raise ValueError(f"status must be one of {DOCUMENT_STATUSES}, got {status!r}")
            query = query.where(documents.c.status == status)
        with self._read() as conn:
            return [_row(DocumentRow, r) for r in conn.execute(query)]

    def mark_ready(self, doc_id: str, **fields: Any) -> DocumentRow:
        """Set status ``ready`` (clearing any failure reason) and the given fields.

        A ready document must have ``pages`` and ``chunk_count`` (given here or earlier).
        Settable fields: title, version, pages, chunk_count, figure_count, entity_count,
        relationship_count, size_bytes, blob_key, markdown_key, converter, embedding_model.

        Raises:
            DocumentNotFoundError: no such document.
            ValueError: an unknown field, a bad value, or missing pages/chunk_count.
        """
        values = _document_fields(fields)
        with self._write() as conn:
            current = conn.execute(
                sa.select(documents.c.pages, documents.c.chunk_count).where(
                    documents.c.doc_id == doc_id
                )
            ).first()
            if current is None:
                raise DocumentNotFoundError(f"no document with doc_id {doc_id!r} in the catalog")
            merged = {**current._mapping, **values}
            missing = [k for k in ("pages", "chunk_count") if merged.get(k) is None]
            if missing:
                raise ValueError(f"a ready document needs {' and '.join(missing)}")
            return self._set(conn, doc_id, status="ready", failure_reason=None, **values)

    def mark_failed(self, doc_id: str, reason: str) -> DocumentRow:
        """Set status ``failed`` with a reason (cut to ``FAILURE_REASON_MAX`` characters).

        Raises:
            DocumentNotFoundError: no such document.
            ValueError: an empty reason.
        """
        message = _failure(reason)
        with self._write() as conn:
            return self._set(conn, doc_id, status="failed", failure_reason=message)

    def update(self, doc_id: str, **fields: Any) -> DocumentRow:
        """Set fields without changing the status (same fields as ``mark_ready``).

        Raises:
            DocumentNotFoundError: no such document.
            ValueError: an unknown field or a bad value.
        """
        values = _document_fields(fields)
        with self._write() as conn:
            return self._set(conn, doc_id, **values)

    def _set(self, conn: Connection, doc_id: str, **values: Any) -> DocumentRow:
        row = conn.execute(
            documents.update()
            .where(documents.c.doc_id == doc_id)
            .values(updated_at=_now(), **values)
            .returning(*documents.c)
        ).first()
        if row is None:
            raise DocumentNotFoundError(f"no document with doc_id {doc_id!r} in the catalog")
        return _row(DocumentRow, row)

    def delete(self, doc_id: str) -> bool:
        """Delete the catalog row of a document. Returns ``False`` when there was none."""
        with self._write() as conn:
            result = conn.execute(documents.delete().where(documents.c.doc_id == doc_id))
        return result.rowcount > 0

    # -- intake queues -----------------------------------------------------------------------

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
        clean_title = _text(title, "title", TITLE_MAX)
        assert clean_title is not None
        key = title_key(clean_title)
        values = {
            "title": clean_title,
            "title_key": key,
            "reason": _text(reason, "reason", REASON_MAX),
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
        return _row(DocumentRequestRow, row)

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
            "title": _text(title, "title", TITLE_MAX),
            "description": _text(description, "description", DESCRIPTION_MAX),
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
        return _row(ReferenceRequestRow, row)

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
            return [_row(cls, r) for r in conn.execute(query)]

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
        reason = None if failure_reason is None else _failure(failure_reason)
        if status == "failed" and reason is None:
            raise ValueError("a failed request needs a failure reason")
        if status == "approved" and reason is not None:
            raise ValueError("an approved request has no failure reason")
        with self._write() as conn:
            row = conn.execute(
                table.update()
                .where(table.c.id == request_id)
                .values(status=status, failure_reason=reason, decided_at=_now())
                .returning(*table.c)
            ).first()
        if row is None:
            raise RequestNotFoundError(f"no {table.name} row with id {request_id}")
        return _row(cls, row)

    # -- reference sources -------------------------------------------------------------------

    def upsert_reference_source(self, url: str, title: str, description: str) -> ReferenceSourceRow:
        """Register (or re-describe) a live reference page, keyed by its exact URL.

        Raises:
            ValueError: an empty/over-long field or a URL that is not http(s).
        """
        now = _now()
        values = {
            "url": _url(url, "url", required=True),
            "title": _text(title, "title", TITLE_MAX),
            "description": _text(description, "description", DESCRIPTION_MAX),
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
        return _row(ReferenceSourceRow, row)

    def list_reference_sources(self) -> list[ReferenceSourceRow]:
        """Every registered reference page, ordered by URL."""
        with self._read() as conn:
            rows = conn.execute(sa.select(reference_sources).order_by(reference_sources.c.url))
            return [_row(ReferenceSourceRow, r) for r in rows]

    # -- compliance actions ------------------------------------------------------------------

    def _insert(self, table: sa.Table) -> Any:
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert  # noqa: PLC0415
        else:
            from sqlalchemy.dialects.sqlite import insert  # noqa: PLC0415
        return insert(table)

    def _upsert_many(
        self, conn: Connection, table: sa.Table, rows: list[dict[str, Any]], key: Sequence[str]
    ) -> None:
        if not rows:
            return
        stmt = self._insert(table)
        update = {
            c.name: stmt.excluded[c.name]
            for c in table.c
            if c.name not in key and not c.primary_key
        }
        conn.execute(stmt.on_conflict_do_update(index_elements=list(key), set_=update), rows)

    def upsert_compliance_actions(
        self,
        rows: Iterable[ComplianceActionRow | Mapping[str, Any]],
        *,
        prune: bool = False,
    ) -> int:
        """Insert or update compliance actions by ``id``, all in one transaction.

        Args:
            rows: ``ComplianceActionRow`` objects or mappings with its field names.
            prune: also delete the rows of the same ``source`` whose id is not in ``rows`` (a
                full re-sync). An empty ``rows`` never prunes anything.

        Returns:
            The number of rows written.

        Raises:
            ValueError: a bad row (message names its id); an id given twice with different
                content. Nothing is written then.
        """
        now = _now()
        clean: dict[str, dict[str, Any]] = {}
        for raw in rows:
            item = _as(ComplianceActionRow, raw)
            values = _compliance_values(item, now)
            previous = clean.get(values["id"])
            if previous is not None and previous != values:
                raise ValueError(f"compliance action {values['id']!r} appears twice, differently")
            clean[values["id"]] = values
        with self._write() as conn:
            self._upsert_many(conn, compliance_actions, list(clean.values()), ["id"])
            if prune and clean:
                for source in {v["source"] for v in clean.values()}:
                    keep = [k for k, v in clean.items() if v["source"] == source]
                    conn.execute(
                        compliance_actions.delete().where(
                            compliance_actions.c.source == source,
                            compliance_actions.c.id.not_in(keep),
                        )
                    )
        return len(clean)

    def list_compliance_actions(self) -> list[ComplianceActionRow]:
        """Every compliance action, newest action date first (undated last), then by id."""
        query = sa.select(compliance_actions).order_by(
            compliance_actions.c.action_date.desc().nulls_last(), compliance_actions.c.id
        )
        with self._read() as conn:
            return [_row(ComplianceActionRow, r) for r in conn.execute(query)]

    # -- AER retail performance --------------------------------------------------------------

    def upsert_aer_rows(
        self,
        rows: Iterable[AerRow | Mapping[str, Any]],
        metrics: Iterable[AerMetric | Mapping[str, Any]] = (),
    ) -> int:
        """Insert or update AER figures by (schedule, retailer, jurisdiction, fuel, metric,
        period), and metric descriptions by metric, in one transaction.

        Returns:
            The number of figure rows written.

        Raises:
            ValueError: an empty key field, a non-numeric value, or one key given twice with
                different values. Nothing is written then.
        """
        clean: dict[tuple[str, ...], dict[str, Any]] = {}
        for raw in rows:
            item = _as(AerRow, raw)
            values = {
                **{k: _text(getattr(item, k), k, 1000) for k in _AER_KEY},
                "value": _to_decimal(item.value, "value", AER_VALUE_SCALE),
                "unit": _text(item.unit, "unit", 64, required=False),
                "source_file": _text(item.source_file, "source_file", 4096, required=False),
            }
            key = tuple(values[k] for k in _AER_KEY)
            if key in clean and clean[key] != values:
                raise ValueError(f"AER figure {key} appears twice with different values")
            clean[key] = values
        metric_rows: dict[str, dict[str, Any]] = {}
        for raw in metrics:
            item_m = _as(AerMetric, raw)
            metric_rows[item_m.metric] = {
                "metric": _text(item_m.metric, "metric", 1000),
                "schedule": _text(item_m.schedule, "schedule", 32),
                "description": _text(item_m.description, "description", 10_000, required=False),
                "unit": _text(item_m.unit, "unit", 64, required=False),
            }
        with self._write() as conn:
            self._upsert_many(conn, aer_metrics, list(metric_rows.values()), ["metric"])
            self._upsert_many(conn, aer_performance, list(clean.values()), _AER_KEY)
        return len(clean)

    def list_aer_rows(self) -> list[AerRow]:
        """Every AER figure, ordered by its key."""
        query = sa.select(aer_performance).order_by(*(aer_performance.c[k] for k in _AER_KEY))
        with self._read() as conn:
            return [_row(AerRow, r) for r in conn.execute(query)]

    def list_aer_metrics(self) -> list[AerMetric]:
        """Every AER metric description, ordered by metric."""
        with self._read() as conn:
            rows = conn.execute(sa.select(aer_metrics).order_by(aer_metrics.c.metric))
            return [_row(AerMetric, r) for r in rows]


def _as(cls: type[Any], raw: Any) -> Any:
    if isinstance(raw, cls):
        return raw
    if isinstance(raw, Mapping):
        try:
            return cls(**raw)
        except TypeError as exc:
            raise ValueError(f"bad {cls.__name__} fields: {exc}") from exc
    raise ValueError(f"expected {cls.__name__} or a mapping, got {type(raw).__name__}")


def _compliance_values(item: ComplianceActionRow, now: dt.datetime) -> dict[str, Any]:
    row_id = _text(item.id, "id", 200)
    where = f"compliance action {row_id!r}"
    currency = _text(item.currency, f"{where}: currency", 3, required=False)
    if currency is not None:
        if not re.fullmatch(r"[A-Za-z]{3}", currency):
            raise ValueError(
                f"{where}: currency must be a 3-letter ISO 4217 code, got {currency!r}"
            )
        currency = currency.upper()
    amount = _to_decimal(item.penalty_amount, f"{where}: penalty_amount", PENALTY_SCALE)
    if amount is not None and amount < 0:
        raise ValueError(f"{where}: penalty_amount cannot be negative, got {amount}")
    if item.action_date is not None and (
        not isinstance(item.action_date, dt.date) or isinstance(item.action_date, dt.datetime)
    ):
        raise ValueError(f"{where}: action_date must be a date, got {item.action_date!r}")
    for name in ("last_edited", "synced_at"):
        stamp = getattr(item, name)
        if stamp is not None and (not isinstance(stamp, dt.datetime) or stamp.utcoffset() is None):
            raise ValueError(f"{where}: {name} must be a timezone-aware datetime, got {stamp!r}")
    return {
        "id": row_id,
        "entity_name": _text(item.entity_name, f"{where}: entity_name", 10_000),
        "regulator": _text(item.regulator, "regulator", 10_000, required=False),
        "action_type": _text(item.action_type, "action_type", 10_000, required=False),
        "penalty_amount": amount,
        "currency": currency,
        "action_date": item.action_date,
        "status": _text(item.status, "status", 10_000, required=False),
        "summary": _text(item.summary, "summary", 100_000, required=False),
        "url": _text(item.url, f"{where}: url", URL_MAX, required=False),
        "source": _text(item.source, f"{where}: source", 64),
        "last_edited": item.last_edited,
        "synced_at": item.synced_at or now,
    }
