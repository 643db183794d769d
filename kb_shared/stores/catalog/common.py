"""What the catalog's tables and their methods share: the ``MetaData``, the timestamp
columns, row conversion, the input checks, the market-data syncs' and searches' common steps
(legacy-shape refusal, sync state, filter and limit checks), and ``CatalogBase`` (engine,
transactions, schema, ``close``).

Limits come from DESIGN.md "The MCP server" (per-field length caps, a ceiling of pending
rows per intake queue).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from functools import lru_cache
from typing import Any, Generic, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import NoSuchTableError

from kb_shared.errors import DocumentNotFoundError, QueryError, SchemaMissingError
from kb_shared.stores.closing import ClosingStore
from kb_shared.stores.sql import (
    UtcDateTime,
    advisory_lock,
    create_tables,
    read_transaction,
    safe_url,
    upsert,
    write_transaction,
)

#: Longest URL, in characters. The sitemaps.org protocol caps URLs at 2,048 characters, the
#: de facto limit most clients and servers share.
URL_MAX = 2048
#: Failure reasons longer than this are cut (they are stack-trace tails at worst).
FAILURE_REASON_MAX = 4000

#: Every catalog table (documents, intake queues, reference sources, compliance, AER).
#: The SQL graph's tables are on ``graph_sql.GRAPH_METADATA``; ``factory.ensure_sql_schema``
#: creates both.
CATALOG_METADATA = sa.MetaData()


def created_at(name: str = "created_at", nullable: bool = False) -> sa.Column[Any]:
    """An aware-UTC timestamp column; NOT NULL ones default to the server's clock."""
    return sa.Column(
        name,
        UtcDateTime(),
        nullable=nullable,
        server_default=None if nullable else sa.func.current_timestamp(),
    )


def sync_count_columns() -> list[sa.Column[Any]]:
    """The counts every ``*_sync_state`` table records of the last sync: ``rows_read``,
    ``inserted``, ``updated``, ``deleted``, ``unchanged`` (new objects each call: a column
    belongs to one table)."""
    return [
        sa.Column(name, sa.Integer, nullable=False)
        for name in ("rows_read", "inserted", "updated", "deleted", "unchanged")
    ]


@dataclass(frozen=True, slots=True)
class SyncCounts:
    """The row counts every market-data sync reports (the ``sync_count_columns`` it records):
    ``read`` rows given, of which ``inserted`` were new, ``updated`` changed and ``unchanged``
    identical; ``deleted`` stored rows gone. Each sync's result extends it."""

    read: int
    inserted: int
    updated: int
    deleted: int
    unchanged: int


def to_row(cls: type[Any], row: sa.Row[Any] | Mapping[str, Any], **values: Any) -> Any:
    """The frozen dataclass ``cls`` built from ``values`` and, for every other field, the
    same-named column of ``row`` (a ``Row`` or a row mapping).

    Raises:
        KeyError: a field of ``cls`` that is neither in ``values`` nor a column of ``row``.
    """
    mapping = row._mapping if isinstance(row, sa.Row) else row
    return cls(**{
        name: values[name] if name in values else mapping[name] for name in _field_names(cls)
    })


@lru_cache(maxsize=None)
def _field_names(cls: type[Any]) -> tuple[str, ...]:
    """The field names of dataclass ``cls``, read once per class (``to_row`` builds every row
    of a listing; benchmarks/results/partitions-2026-12-01-profile.md)."""
    return tuple(f.name for f in fields(cls))


def clean_text(value: Any, field: str, limit: int, *, required: bool = True) -> str | None:
    """``value`` trimmed; ``None`` for a missing optional value.

    Raises:
        ValueError: not a string, empty when required, a NUL character, or over ``limit``
            characters; the message names ``field``.
    """
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


def clean_failure(reason: Any) -> str:
    """A failure reason, trimmed and cut to ``FAILURE_REASON_MAX`` characters.

    Raises:
        ValueError: empty or not a string.
    """
    clean = clean_text(reason, "failure reason", 10**9)
    assert clean is not None
    return clean[:FAILURE_REASON_MAX]


RowT = TypeVar("RowT")


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult(Generic[RowT]):
    """What every market-data search returns besides its own totals (keyword-only fields).

    ``rows``: up to ``limit`` matches (``capped_limit``); ``count``: every match, counted in
    SQL. ``synced_at``: the last applied sync (``None``: never synced). ``filters``: the
    filters given, as checked (``given_filters``).
    """

    rows: tuple[RowT, ...]
    count: int
    synced_at: dt.datetime | None
    limit: int
    filters: Mapping[str, Any] = field(default_factory=dict)

    @property
    def truncated(self) -> bool:
        """True when more match than ``rows`` holds."""
        return self.count > len(self.rows)


def refuse_legacy_shape(conn: Connection, table: str, column: str, sync: str) -> None:
    """Raise ``SchemaMissingError`` when ``table`` exists without ``column``: the shape it had
    before the ``sync`` wrote it (``ensure_schema`` never alters a table). A missing table
    passes: the next statement fails with "run `kb db init`" (``stores.sql.guard``)."""
    try:
        columns = {c["name"] for c in sa.inspect(conn).get_columns(table)}
    except NoSuchTableError:
        return
    if column not in columns:
        raise SchemaMissingError(
            f"{table} has the shape it had before the {sync} sync (no {column} column); "
            f"nothing wrote to it then. Drop it (DROP TABLE {table}) and run `kb db init` "
            "to create the current one."
        )


def last_synced(conn: Connection, state: sa.Table, source: str) -> dt.datetime | None:
    """``synced_at`` of the ``state`` row of ``source`` (``None``: never synced)."""
    return conn.execute(sa.select(state.c.synced_at).where(state.c.source == source)).scalar()


def capped_limit(limit: Any, maximum: int) -> int:
    """A search's row ``limit``, cut to ``maximum``.

    Raises:
        QueryError: not a whole number of at least 1.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise QueryError(f"limit must be a whole number of at least 1, got {limit!r}")
    return min(limit, maximum)


def clean_filters(given: Mapping[str, Any], limit: int) -> dict[str, str | None]:
    """Text filters by name, white space collapsed; ``None`` for a missing or blank one.

    Raises:
        QueryError: a value that is not text, or longer than ``limit`` characters (the
            message names the filter).
    """
    clean: dict[str, str | None] = {}
    for name, value in given.items():
        if value is not None and not isinstance(value, str):
            raise QueryError(f"{name} must be text, got {value!r}")
        text = " ".join((value or "").split())
        if len(text) > limit:
            raise QueryError(f"{name} is {len(text)} characters; send at most {limit}")
        clean[name] = text or None
    return clean


def date_filter(
    value: Any, name: str, parse: Callable[[str], dt.date], expected: str
) -> dt.date | None:
    """A date filter: ``None`` for ``None`` or ``""``, a date as given (a datetime's date),
    anything else through ``parse`` (which raises ``ValueError`` on bad text).

    Raises:
        QueryError: ``parse`` refused it; the message names ``name`` and says ``expected``.
    """
    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    try:
        return parse(value if isinstance(value, str) else str(value))
    except ValueError:
        raise QueryError(f"{name} must be {expected}, got {value!r}") from None


def given_filters(values: Mapping[str, Any]) -> dict[str, Any]:
    """The filters a search echoes back: those that are not ``None``."""
    return {name: value for name, value in values.items() if value is not None}


def document_not_found(doc_id: str, version: int | None = None) -> DocumentNotFoundError:
    """The error for a ``doc_id`` (and ``version``) the catalog does not hold: "no document
    'x.pdf' in the catalog", "no version 3 of document 'x.pdf' in the catalog"."""
    what = f"version {version} of document" if version is not None else "document"
    return DocumentNotFoundError(f"no {what} {doc_id!r} in the catalog")


class CatalogBase(ClosingStore):
    """The catalog's engine and transactions; the table classes build on it.

    The constructor does no I/O. Every public method of a subclass runs in its own
    transaction and returns frozen dataclasses.

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
        return f"{type(self).__name__}({safe_url(self._engine)!r})"

    def close(self) -> None:
        """Close the engine's pooled connections (``Engine.dispose``); safe to call twice.

        A later call opens new connections, so a closed catalog still works; close it when
        its owner (a Dagster run, the MCP server, a CLI command) ends.
        """
        self._engine.dispose()

    def ensure_schema(self) -> None:
        """Create every missing catalog table and index; idempotent, never alters a table.

        The SQL graph's tables come from ``factory.ensure_sql_schema`` (which ``open_catalog``
        and ``kb db init`` call).
        """
        create_tables(self._engine, CATALOG_METADATA)

    @contextmanager
    def _read(self) -> Iterator[Connection]:
        with read_transaction(self._engine) as conn:
            yield conn

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        with write_transaction(self._engine) as conn:
            yield conn

    def _list_rows(
        self,
        cls: type[Any],
        table: sa.Table,
        order_by: Sequence[sa.ColumnElement[Any]],
        status: str | None,
        statuses: Sequence[str],
    ) -> list[Any]:
        """Every row of ``table`` (or those with ``status``) as ``cls``, in ``order_by``.

        Raises:
            ValueError: ``status`` is not one of ``statuses``.
        """
        query = sa.select(table).order_by(*order_by)
        if status is not None:
            if status not in statuses:
                raise ValueError(f"status must be one of {statuses}, got {status!r}")
            query = query.where(table.c.status == status)
        with self._read() as conn:
            return [to_row(cls, r) for r in conn.execute(query)]

    @contextmanager
    def _snapshot(self) -> Iterator[Connection]:
        """A read transaction that sees one snapshot: ``REPEATABLE READ READ ONLY`` on
        Postgres; a SQLite read transaction already is one."""
        with self._read() as conn:
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield conn

    def _record_sync(self, conn: Connection, state: sa.Table, values: Mapping[str, Any]) -> None:
        """Insert or replace the ``state`` row of ``values["source"]`` with ``values``."""
        stmt = self._insert(state).values(**values)
        conn.execute(
            stmt.on_conflict_do_update(
                index_elements=["source"],
                set_={name: stmt.excluded[name] for name in values if name != "source"},
            )
        )

    def _advisory_lock(self, conn: Connection, key: int) -> None:
        advisory_lock(conn, key)

    def _insert(self, table: sa.Table) -> Any:
        return upsert(table, self.dialect)
