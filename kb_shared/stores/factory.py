"""Open each store role from ``Settings`` alone (DESIGN.md "Stores and their backends").

Nothing else in kb decides which backend is live: the Dagster resources, the MCP lifespan
and the CLIs call these functions. Backend modules are imported inside the functions, so an
embedded setup never imports ``qdrant_client`` or ``neo4j`` and vice versa.

| role     | setting that selects the server backend | embedded default                     |
|----------|------------------------------------------|--------------------------------------|
| catalog  | ``database_url`` (Postgres)              | SQLite ``{home}/kb.sqlite``          |
| blobs    | ``blob_url`` (any fsspec URL)            | ``file://{home}/blobs``              |
| vectors  | ``qdrant_url``                           | SQLite ``{home}/vectors.sqlite``     |
| graph    | ``neo4j_uri``                            | SQL tables in the catalog database   |

``init_database`` is what ``kb db init`` runs: the schema of every role, and on Postgres the
DDL and grants of ``sql/``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.engine import Engine

from kb_shared.errors import StoreError
from kb_shared.settings import Settings
from kb_shared.stores.blobs import BlobStore
from kb_shared.stores.catalog import CATALOG_METADATA, Catalog
from kb_shared.stores.graph_sql import GRAPH_METADATA, SqlGraphStore
from kb_shared.stores.sql import apply_sql_files, create_tables, make_engine, safe_url

if TYPE_CHECKING:
    import neo4j

    from kb_shared.stores.graph import GraphStore
    from kb_shared.stores.vectors import VectorIndex

#: Every table kb keeps in the SQL database: the catalog's and the embedded graph's (the
#: graph tables exist even when Neo4j holds the graph, as they always have).
SQL_SCHEMA = (CATALOG_METADATA, GRAPH_METADATA)

#: Seconds a read-only graph store (the MCP server's) retries a query while Neo4j is
#: unreachable, instead of the driver's 30 s: a tool or ``/healthz`` then says the graph is
#: down within seconds (issue 16, "Crash and outage recovery").
READER_RETRY_SECONDS = 2.0

#: Seconds a writing graph store (a build's ``graph`` step) retries a transaction while Neo4j
#: is unreachable: the driver's own default (``max_transaction_retry_time``, 30 s), kept, and
#: named so an outage test can shorten it.
WRITER_RETRY_SECONDS = 30.0

#: The numbered Postgres DDL files (``NNN_*.sql``) of a kb checkout; not installed with the
#: package, so ``init_database`` takes another folder as an argument.
SQL_DIR = Path(__file__).resolve().parents[2] / "sql"


def _sqlite_file(url: str) -> Path | None:
    """The database file of a ``sqlite:///path`` URL (``None`` for memory or other DBs)."""
    from sqlalchemy import make_url  # noqa: PLC0415

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def open_engine(settings: Settings, *, reader: bool = False) -> Engine:
    """The SQLAlchemy engine of the catalog database (``make_engine``).

    Args:
        settings: where things live.
        reader: use ``resolved_reader_database_url`` (the MCP server's read-only role).

    For SQLite the folder of the database file is created (SQLite cannot create it).
    """
    url = settings.resolved_reader_database_url if reader else settings.resolved_database_url
    database = _sqlite_file(url)
    if database is not None:
        database.parent.mkdir(parents=True, exist_ok=True)
    return make_engine(url)


def open_catalog(
    settings: Settings, *, reader: bool = False, create: bool | None = None
) -> Catalog:
    """A ``Catalog`` on the configured database.

    Args:
        settings: where things live.
        reader: connect with the reader URL (MCP server).
        create: create missing tables (``ensure_sql_schema``: catalog and SQL graph).
            Default: yes for the writer, no for the reader (the Postgres reader role cannot
            create tables; ``kb db init`` does).

    Raises:
        StoreUnavailableError: ``create`` and the database cannot be reached.
    """
    catalog = Catalog(open_engine(settings, reader=reader))
    if create if create is not None else not reader:
        ensure_sql_schema(catalog.engine)
    return catalog


def ensure_sql_schema(engine: Engine) -> None:
    """Create every missing table of ``SQL_SCHEMA`` (catalog and SQL graph) in one locked
    transaction; idempotent, never alters a table.

    Raises:
        StoreUnavailableError: the database cannot be reached.
        StoreError: the role may not create tables.
    """
    create_tables(engine, *SQL_SCHEMA)


@dataclass(frozen=True, slots=True)
class DatabaseInit:
    """What ``init_database`` did: ``database`` is the URL with the password hidden;
    ``sql_files`` the ``sql/`` files applied, in order (empty on SQLite)."""

    database: str
    sql_files: tuple[str, ...]


def init_database(settings: Settings, *, sql_dir: Path = SQL_DIR) -> DatabaseInit:
    """Create the schema of the configured stores; safe to run again (``kb db init``).

    Creates the catalog and SQL graph tables, then on Postgres applies every numbered file
    of ``sql_dir`` (the same tables, plus the ``kb_reader`` role and its grants, which only
    those files create; DESIGN.md "Stores and their backends"), then, when ``neo4j_uri`` is
    set, the Neo4j graph's constraint and index.

    Raises:
        StoreUnavailableError: a store cannot be reached.
        StoreError: a ``sql/`` file failed (named in the message; earlier files stay
            applied), the role lacks a privilege, or ``sql_dir`` is missing on Postgres.
    """
    engine = open_engine(settings)
    try:
        ensure_sql_schema(engine)
        applied: list[str] = []
        if engine.dialect.name == "postgresql":
            if not sql_dir.is_dir():
                raise StoreError(
                    f"the Postgres DDL folder {sql_dir} does not exist; run `kb db init` from "
                    "a kb checkout, or apply its sql/ files with psql (see their headers)"
                )
            applied = apply_sql_files(engine, sql_dir)
        if settings.neo4j_uri:
            from kb_shared.stores.graph_neo4j import Neo4jGraphStore  # noqa: PLC0415

            with _neo4j_driver(settings) as driver:
                Neo4jGraphStore(driver, settings.neo4j_database).ensure_schema(None)
        return DatabaseInit(database=safe_url(engine), sql_files=tuple(applied))
    finally:
        engine.dispose()


def open_blob_store(settings: Settings) -> BlobStore:
    """The blob store at ``settings.resolved_blob_url`` (folders are created on first write)."""
    return BlobStore(settings.resolved_blob_url)


def open_vector_index(settings: Settings) -> VectorIndex:
    """Qdrant (``QdrantVectorIndex``) when ``qdrant_url`` is set, else the SQLite index
    (``SqliteVectorIndex``) at ``resolved_vector_path`` (its folder is created), with
    ``vector_resident_points`` when set."""
    if settings.qdrant_url:
        from qdrant_client import QdrantClient  # noqa: PLC0415

        from kb_shared.stores.vectors_qdrant import QdrantVectorIndex  # noqa: PLC0415

        api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        client = QdrantClient(url=settings.qdrant_url, api_key=api_key)
        return QdrantVectorIndex(client, settings.qdrant_collection)

    from kb_shared.stores.vectors_sqlite import SqliteVectorIndex  # noqa: PLC0415

    path = settings.resolved_vector_path
    path.parent.mkdir(parents=True, exist_ok=True)
    if settings.vector_resident_points is None:
        return SqliteVectorIndex(path)
    return SqliteVectorIndex(path, resident_points=settings.vector_resident_points)


def open_graph_store(
    settings: Settings, engine: Engine | None = None, *, read_only: bool = False
) -> GraphStore:
    """Neo4j (``Neo4jGraphStore``) when ``neo4j_uri`` is set, else the SQL graph
    (``SqlGraphStore``) in the catalog database.

    Args:
        settings: where things live.
        engine: the catalog engine to share (e.g. ``catalog.engine``); default a new engine
            on ``resolved_database_url``.
        read_only: Neo4j sessions in READ access mode, so the server refuses writes (the
            MCP server; its SQL graph is read-only through the ``kb_reader`` engine it passes).
    """
    if settings.neo4j_uri:
        from kb_shared.stores.graph_neo4j import Neo4jGraphStore  # noqa: PLC0415

        return Neo4jGraphStore(
            _neo4j_driver(
                settings, retry_seconds=READER_RETRY_SECONDS if read_only else WRITER_RETRY_SECONDS
            ),
            database=settings.neo4j_database,
            owns_driver=True,
            read_only=read_only,
        )

    return SqlGraphStore(engine if engine is not None else open_engine(settings))


def _neo4j_driver(settings: Settings, *, retry_seconds: float | None = None) -> neo4j.Driver:
    """A driver on ``settings.neo4j_uri`` (no I/O until first use); the caller closes it.
    ``retry_seconds`` caps how long a query is retried while the server is unreachable
    (default: the driver's 30 s ``max_transaction_retry_time``)."""
    from neo4j import GraphDatabase  # noqa: PLC0415

    password = settings.neo4j_password.get_secret_value() if settings.neo4j_password else None
    auth = (settings.neo4j_user, password) if password is not None else None
    options = {} if retry_seconds is None else {"max_transaction_retry_time": retry_seconds}
    return GraphDatabase.driver(settings.neo4j_uri, auth=auth, **options)
