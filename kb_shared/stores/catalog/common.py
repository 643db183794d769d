"""What the catalog's tables and their methods share: the ``MetaData``, the timestamp
columns, row conversion, the input checks, and ``CatalogBase`` (engine, transactions,
schema, ``close``).

Limits come from DESIGN.md "The MCP server" (per-field length caps, a ceiling of pending
rows per intake queue).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import fields
from typing import Any, Self

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

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


def to_row(cls: type[Any], row: sa.Row[Any]) -> Any:
    """The frozen dataclass ``cls`` built from the same-named columns of ``row``."""
    mapping = row._mapping
    return cls(**{f.name: mapping[f.name] for f in fields(cls)})


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


class CatalogBase:
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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    def _advisory_lock(self, conn: Connection, key: int) -> None:
        advisory_lock(conn, key)

    def _insert(self, table: sa.Table) -> Any:
        return upsert(table, self.dialect)
