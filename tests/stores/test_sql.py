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
    "document_versions",
    "document_requests",
    "reference_sources",
    "reference_requests",
    "compliance_actions",
    "compliance_action_misconduct_types",
    "compliance_sync_state",
    "aer_performance",
    "aer_metrics",
    "aer_sync_state",
    "obligations",
    "change_sets",
    "document_changes",
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


def test_a_catalog_made_by_an_earlier_kb_gains_the_new_columns(tmp_path: Path) -> None:
    # The documents and document_requests tables as kb wrote them before `category`,
    # `request_count`, `doc_id` and `run_id` existed (an existing user's .kb/kb.sqlite).
    url = f"sqlite:///{tmp_path / 'kb.sqlite'}"
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE documents (doc_id VARCHAR(120) PRIMARY KEY, name VARCHAR(1024) NOT "
            "NULL, normalized_name VARCHAR(1024) NOT NULL UNIQUE, sha256 CHAR(64) NOT NULL "
            "UNIQUE, status VARCHAR(16) NOT NULL DEFAULT 'pending', failure_reason TEXT, "
            "title TEXT, version VARCHAR(200), pages INTEGER, chunk_count INTEGER, "
            "entity_count INTEGER, relationship_count INTEGER, figure_count INTEGER, "
            "size_bytes BIGINT, blob_key TEXT NOT NULL, markdown_key TEXT, embedding_model "
            "VARCHAR(200), converter VARCHAR(200), created_at DATETIME NOT NULL, updated_at "
            "DATETIME NOT NULL, built_at DATETIME)"
        )
        conn.exec_driver_sql(
            "INSERT INTO documents (doc_id, name, normalized_name, sha256, status, blob_key, "
            "created_at, updated_at) VALUES ('old.pdf', 'Old.pdf', 'old.pdf', '"
            + "a" * 64 + "', 'ready', 'pdfs/old.pdf', '2026-11-30 00:00:00', "
            "'2026-11-30 00:00:00')"
        )
        conn.exec_driver_sql(
            "CREATE TABLE document_requests (id INTEGER PRIMARY KEY, title VARCHAR(300) NOT "
            "NULL, title_key VARCHAR(300) NOT NULL, reason VARCHAR(2000) NOT NULL, source_url "
            "VARCHAR(2048), checked_indexed_documents BOOLEAN NOT NULL DEFAULT 0, status "
            "VARCHAR(16) NOT NULL DEFAULT 'pending', failure_reason TEXT, created_at DATETIME "
            "NOT NULL, decided_at DATETIME)"
        )
    engine.dispose()
    catalog = open_catalog(Settings(home=tmp_path))
    (row,) = catalog.list_documents()
    assert (row.doc_id, row.status, row.category) == ("old.pdf", "ready", None)
    assert catalog.set_category("old.pdf", "aemo/procedures").category == "aemo/procedures"
    columns = {c["name"] for c in sa.inspect(catalog.engine).get_columns("document_requests")}
    assert {"request_count", "doc_id", "run_id"} <= columns
    catalog.close()
    again = open_catalog(Settings(home=tmp_path))  # nothing left to add: idempotent
    assert again.resolve("Old.pdf").category == "aemo/procedures"
    again.close()
