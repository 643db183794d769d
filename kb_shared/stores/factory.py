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
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.engine import Engine

from kb_shared.settings import Settings
from kb_shared.stores.blobs import BlobStore
from kb_shared.stores.catalog import Catalog, make_engine

if TYPE_CHECKING:
    from kb_shared.stores.graph import GraphStore
    from kb_shared.stores.vectors import VectorIndex


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
        create: run ``ensure_schema()`` (idempotent). Default: yes for the writer, no for the
            reader (the Postgres reader role cannot create tables; ``kb db init`` does).

    Raises:
        StoreUnavailableError: ``create`` and the database cannot be reached.
    """
    catalog = Catalog(open_engine(settings, reader=reader))
    if create if create is not None else not reader:
        catalog.ensure_schema()
    return catalog


def open_blob_store(settings: Settings) -> BlobStore:
    """The blob store at ``settings.resolved_blob_url`` (folders are created on first write)."""
    return BlobStore(settings.resolved_blob_url)


def open_vector_index(settings: Settings) -> VectorIndex:
    """Qdrant (``QdrantVectorIndex``) when ``qdrant_url`` is set, else the SQLite index
    (``SqliteVectorIndex``) at ``resolved_vector_path`` (its folder is created)."""
    if settings.qdrant_url:
        from qdrant_client import QdrantClient  # noqa: PLC0415

        from kb_shared.stores.vectors_qdrant import QdrantVectorIndex  # noqa: PLC0415

        api_key = settings.qdrant_api_key.get_secret_value() if settings.qdrant_api_key else None
        client = QdrantClient(url=settings.qdrant_url, api_key=api_key)
        return QdrantVectorIndex(client, settings.qdrant_collection)

    from kb_shared.stores.vectors_sqlite import SqliteVectorIndex  # noqa: PLC0415

    path = settings.resolved_vector_path
    path.parent.mkdir(parents=True, exist_ok=True)
    return SqliteVectorIndex(path)


def open_graph_store(settings: Settings, engine: Engine | None = None) -> GraphStore:
    """Neo4j (``Neo4jGraphStore``) when ``neo4j_uri`` is set, else the SQL graph
    (``SqlGraphStore``) in the catalog database.

    Args:
        settings: where things live.
        engine: the catalog engine to share (e.g. ``catalog.engine``); default a new engine
            on ``resolved_database_url``.
    """
    if settings.neo4j_uri:
        from neo4j import GraphDatabase  # noqa: PLC0415

        from kb_shared.stores.graph_neo4j import Neo4jGraphStore  # noqa: PLC0415

        password = settings.neo4j_password.get_secret_value() if settings.neo4j_password else None
        auth = (settings.neo4j_user, password) if password is not None else None
        driver = GraphDatabase.driver(settings.neo4j_uri, auth=auth)
        return Neo4jGraphStore(driver, database=settings.neo4j_database)

    from kb_shared.stores.graph_sql import SqlGraphStore  # noqa: PLC0415

    return SqlGraphStore(engine if engine is not None else open_engine(settings))
