"""SQL plumbing (``kb_shared.stores.sql``) and what the SQL stores share: engine settings,
schema creation split between the catalog and the factory, error translation for the graph
tables, and ``close`` on the catalog and blob stores. SQLite only (the Postgres side runs in
the catalog, graph and ``sql/`` suites)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from kb_shared.errors import SchemaMissingError
from kb_shared.settings import Settings
from kb_shared.stores.blobs import BlobStore
from kb_shared.stores.catalog import CATALOG_METADATA, Catalog
from kb_shared.stores.factory import SQL_SCHEMA, ensure_sql_schema, open_catalog
from kb_shared.stores.graph_sql import GRAPH_METADATA, SqlGraphStore
from kb_shared.stores.sql import make_engine, safe_url

CATALOG_TABLES = {
    "documents",
    "document_requests",
    "reference_sources",
    "reference_requests",
    "compliance_actions",
    "compliance_action_misconduct_types",
    "compliance_sync_state",
    "aer_performance",
    "aer_metrics",
    "aer_sync_state",
}
GRAPH_TABLES = {"graph_entities", "graph_relationships"}


def test_sqlite_engine_settings(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'kb.sqlite'}")
    assert engine.dialect.dbapi.__name__ == "pysqlite3.dbapi2"
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30_000
    engine.dispose()


def test_make_engine_urls() -> None:
    assert make_engine("postgresql://u@h/db").url.drivername == "postgresql+psycopg"
    assert make_engine("postgres://u@h/db").url.drivername == "postgresql+psycopg"
    with pytest.raises(ValueError, match="the catalog supports sqlite:/// and postgresql://"):
        make_engine("mysql://u@h/db")
    with pytest.raises(ValueError, match="unsupported Postgres driver 'postgresql\\+psycopg2'"):
        make_engine("postgresql+psycopg2://u@h/db")


def test_safe_url_hides_the_password() -> None:
    url = "postgresql+psycopg://kb:s3cret@db.example:5432/kb"
    assert safe_url(url) == "postgresql+psycopg://kb:***@db.example:5432/kb"
    assert safe_url(make_engine(url)) == "postgresql+psycopg://kb:***@db.example:5432/kb"


def test_the_catalog_creates_only_its_own_tables(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'kb.sqlite'}")
    Catalog(engine).ensure_schema()
    assert set(sa.inspect(engine).get_table_names()) == CATALOG_TABLES
    ensure_sql_schema(engine)
    ensure_sql_schema(engine)  # idempotent
    assert set(sa.inspect(engine).get_table_names()) == CATALOG_TABLES | GRAPH_TABLES
    assert SQL_SCHEMA == (CATALOG_METADATA, GRAPH_METADATA)
    engine.dispose()


def test_open_catalog_creates_the_catalog_and_graph_tables(tmp_path: Path) -> None:
    catalog = open_catalog(Settings(home=tmp_path / "home"))
    assert set(sa.inspect(catalog.engine).get_table_names()) == CATALOG_TABLES | GRAPH_TABLES
    catalog.close()


def test_graph_tables_missing_says_run_kb_db_init(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'kb.sqlite'}")
    Catalog(engine).ensure_schema()  # catalog only: no graph tables
    with pytest.raises(SchemaMissingError, match="the graph schema is missing in .*kb db init"):
        SqlGraphStore(engine).counts()
    engine.dispose()


def test_catalog_close_releases_pooled_connections_and_stays_usable(tmp_path: Path) -> None:
    with Catalog(make_engine(f"sqlite:///{tmp_path / 'kb.sqlite'}")) as catalog:
        catalog.ensure_schema()
        assert catalog.list_documents() == []
        assert catalog.engine.pool.checkedin() == 1  # the connection went back to the pool
        catalog.close()
        assert catalog.engine.pool.checkedin() == 0
        catalog.close()  # twice is fine
        assert catalog.list_documents() == []  # a closed catalog reconnects on use
    assert catalog.engine.pool.checkedin() == 0  # the with block closed it again


def test_blob_store_close_twice_keeps_the_store_usable(tmp_path: Path) -> None:
    blobs = BlobStore(f"file://{tmp_path / 'blobs'}")
    blobs.put("pdfs/a.pdf", b"%PDF-1.7")
    blobs.close()
    blobs.close()
    assert blobs.get("pdfs/a.pdf") == b"%PDF-1.7"
