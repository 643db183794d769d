"""SQL plumbing shared by the catalog and the SQL graph store (SQLAlchemy 2 Core).

Engines (``make_engine``: SQLite through ``pysqlite3`` or Postgres through psycopg 3), the
SQLite connection hooks, the ``UtcDateTime`` column type, driver-error translation
(``guard``), write transactions and schema creation under a lock, ``in_batches`` for bounded
``IN`` lists, and ``apply_sql_files``
for the Postgres DDL in ``sql/``. Nothing here knows a kb table.
"""

from __future__ import annotations

import datetime as dt
import re
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError, ProgrammingError
from sqlalchemy.pool import StaticPool

from kb_shared.errors import SchemaMissingError, StoreError, StoreUnavailableError

#: SQLite busy timeout in milliseconds: how long a writer waits for another writer's lock
#: before "database is locked" (https://www.sqlite.org/pragma.html#pragma_busy_timeout).
SQLITE_BUSY_TIMEOUT_MS = 30_000

#: Execution option that makes a SQLite transaction start with ``BEGIN IMMEDIATE``.
WRITE_OPTION = "kb_write"

#: Advisory-lock key (Postgres) that serialises schema creation; any fixed 64-bit constant.
SCHEMA_LOCK = zlib.crc32(b"kb.catalog.schema")

#: Values per ``IN (…)`` list or ``executemany`` batch (``in_batches``). SQLite allows 32,766
#: bound parameters per statement (``SQLITE_MAX_VARIABLE_NUMBER`` default since 3.32,
#: https://www.sqlite.org/limits.html#max_variable_number); Postgres 65,535. 500 stays far
#: below both and keeps each statement small.
IN_BATCH = 500

#: Postgres SQLSTATEs kb translates (PostgreSQL docs, Appendix A "Error Codes").
UNDEFINED_TABLE = "42P01"
INSUFFICIENT_PRIVILEGE = "42501"

_NUMBERED_SQL = re.compile(r"^\d{3}_")
_T = TypeVar("_T")


class UtcDateTime(sa.types.TypeDecorator[dt.datetime]):
    """A timezone-aware UTC timestamp on every backend.

    Postgres stores ``timestamptz``; SQLite stores UTC text without an offset. Binding a naive
    datetime raises ``ValueError`` (its zone would be a guess); results are always aware UTC.
    """

    impl = sa.DateTime
    cache_ok = True

    def load_dialect_impl(self, dialect: sa.Dialect) -> sa.types.TypeEngine[Any]:
        """``DateTime(timezone=True)`` on every dialect (SQLite stores it as naive UTC text)."""
        return dialect.type_descriptor(sa.DateTime(timezone=True))

    def process_bind_param(self, value: dt.datetime | None, dialect: sa.Dialect) -> Any:
        """An aware datetime in UTC (naive on SQLite).

        Raises:
            TypeError: not a datetime. ValueError: a naive datetime (its zone is unknown).
        """
        if value is None:
            return None
        if not isinstance(value, dt.datetime):
            raise TypeError(f"expected a datetime, got {type(value).__name__}")
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value!r}: pass a timezone-aware value")
        value = value.astimezone(dt.UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: sa.Dialect) -> dt.datetime | None:
        """The stored value as an aware UTC datetime (``None`` stays ``None``)."""
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.UTC)
        return value.astimezone(dt.UTC)


def utc_now() -> dt.datetime:
    """The current time, aware UTC."""
    return dt.datetime.now(dt.UTC)


# --------------------------------------------------------------------------------------------
# Engines
# --------------------------------------------------------------------------------------------


def make_engine(url: str | sa.URL, **kwargs: Any) -> Engine:
    """Create a SQLAlchemy engine for kb's SQL database (no connection is opened here).

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
        immediate = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


def safe_url(engine_or_url: Engine | str | sa.URL) -> str:
    """The URL with its password replaced by ``***`` (for messages and logs)."""
    url = engine_or_url.url if isinstance(engine_or_url, Engine) else engine_or_url
    parsed = sa.make_url(url) if isinstance(url, str) else url
    return parsed.render_as_string(hide_password=True)


# --------------------------------------------------------------------------------------------
# Error translation and transactions
# --------------------------------------------------------------------------------------------


def error_detail(exc: DBAPIError, engine: Engine) -> str:
    """The first line of the driver's message, with the engine's password masked."""
    text = str(exc.orig).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    password = engine.url.password
    return line.replace(str(password), "***") if password else line


@contextmanager
def guard(engine: Engine, store: str = "catalog", action: str | None = None) -> Iterator[None]:
    """Translate driver errors into kb errors that say what to do.

    Args:
        engine: the engine the body uses (its URL, password hidden, goes in messages).
        store: what the database holds, for messages (``"catalog"``, ``"graph"``).
        action: what the body was doing (e.g. ``"walking the graph"``), for messages.

    Raises:
        SchemaMissingError: a table is missing (SQLite "no such table", Postgres 42P01);
            the message says to run ``kb db init``.
        StoreError: permission denied (Postgres 42501).
        StoreUnavailableError: the database cannot be reached or opened.

    Other errors (an ``IntegrityError``, a ``ProgrammingError`` of another kind) propagate
    unchanged for the caller to handle.
    """
    try:
        yield
    except (OperationalError, ProgrammingError, InterfaceError) as exc:
        detail = error_detail(exc, engine)
        where = safe_url(engine)
        sqlstate = getattr(exc.orig, "sqlstate", None)
        if "no such table" in detail or sqlstate == UNDEFINED_TABLE:
            raise SchemaMissingError(
                f"the {store} schema is missing in {where} ({detail}); run `kb db init`"
            ) from exc
        if sqlstate == INSUFFICIENT_PRIVILEGE:
            raise StoreError(f"permission denied in {where}: {detail}") from exc
        if isinstance(exc, ProgrammingError):
            raise
        during = f"{action} failed (server unreachable?): " if action else ""
        raise StoreUnavailableError(
            f"{store} database {where} is unavailable: {during}{detail}"
        ) from exc


@contextmanager
def read_transaction(engine: Engine, store: str = "catalog") -> Iterator[Connection]:
    """A connection in one read transaction, errors translated by ``guard``."""
    with guard(engine, store), engine.connect() as conn, conn.begin():
        yield conn


@contextmanager
def write_transaction(engine: Engine, store: str = "catalog") -> Iterator[Connection]:
    """A connection in one write transaction (``BEGIN IMMEDIATE`` on SQLite, so a
    read-then-write cannot interleave with another writer), errors translated by ``guard``."""
    with (
        guard(engine, store),
        engine.connect().execution_options(**{WRITE_OPTION: True}) as conn,
        conn.begin(),
    ):
        yield conn


def advisory_lock(conn: Connection, key: int) -> None:
    """Take a transaction-scoped Postgres advisory lock on ``key`` (no-op on SQLite, where
    the write transaction's ``BEGIN IMMEDIATE`` already serialises writers)."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.select(sa.func.pg_advisory_xact_lock(key)))


def in_batches(items: Sequence[_T], size: int = IN_BATCH) -> Iterator[Sequence[_T]]:
    """``items`` in consecutive slices of at most ``size`` (``IN (…)`` lists, batched
    deletes)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def upsert(table: sa.Table, dialect: str) -> postgresql.Insert | sqlite.Insert:
    """The dialect's INSERT for ``table``, which has ``on_conflict_do_update``."""
    module = postgresql if dialect == "postgresql" else sqlite
    return module.insert(table)


def create_tables(engine: Engine, *metadata: sa.MetaData, store: str = "catalog") -> None:
    """Create every missing table and index of ``metadata`` in one write transaction;
    idempotent. An existing table only ever gains the columns a later version added
    (``add_missing_columns``); nothing is dropped or retyped.

    On Postgres an advisory lock (``SCHEMA_LOCK``) serialises concurrent callers (two
    processes starting at once); on SQLite ``BEGIN IMMEDIATE`` does.

    Raises:
        StoreUnavailableError / StoreError: as ``guard``.
    """
    with write_transaction(engine, store) as conn:
        advisory_lock(conn, SCHEMA_LOCK)
        for each in metadata:
            existing = set(sa.inspect(conn).get_table_names())
            each.create_all(conn, checkfirst=True)
            for table in each.sorted_tables:
                if table.name in existing:
                    add_missing_columns(conn, table)


def add_missing_columns(conn: Connection, table: sa.Table) -> list[str]:
    """``ALTER TABLE … ADD COLUMN`` for each column of ``table`` the database lacks (a
    database made by an earlier kb), when every missing column is nullable or has a server
    default; the same statement on SQLite and Postgres.

    A table that also lacks a NOT NULL column without a default is an older *shape*, not an
    older version: it is left as it is, for the store that owns it to refuse with its own
    message (e.g. the market-data tables name how to replace theirs).

    Returns:
        The names of the columns added (empty when none could or needed to be).
    """
    present = {column["name"] for column in sa.inspect(conn).get_columns(table.name)}
    missing = [column for column in table.columns if column.name not in present]
    if any(not column.nullable and column.server_default is None for column in missing):
        return []
    for column in missing:
        ddl = sa.schema.CreateColumn(column).compile(dialect=conn.dialect)
        conn.execute(sa.text(f"ALTER TABLE {table.name} ADD COLUMN {ddl}"))
    return [column.name for column in missing]


def apply_sql_files(engine: Engine, directory: str | Path) -> list[str]:
    """Apply the numbered DDL files (``NNN_*.sql``) of ``directory`` to Postgres, in order.

    Each file runs in its own transaction, so a failing file leaves nothing half-applied. The
    files are written to be idempotent (``IF NOT EXISTS``, ``DO`` blocks), so running this on
    every ``kb db init`` is safe.

    Returns:
        The file names applied, in order.

    Raises:
        ValueError: the engine is not Postgres (SQLite gets its schema from the code), or
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
    files = sorted(p for p in Path(directory).glob("*.sql") if _NUMBERED_SQL.match(p.name))
    if not files:
        raise ValueError(f"no numbered NNN_*.sql files in {directory}")
    applied: list[str] = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        with guard(engine), engine.begin() as conn:
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
