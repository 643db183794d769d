"""The Postgres DDL in ``sql/``: idempotent, identical to the schema the code creates, and the
``kb_reader`` role can do exactly what DESIGN.md says (SELECT everything, INSERT only the
content columns of the two intake queues).

Postgres only: skipped with the reason when ``KB_TEST_POSTGRES_URL`` is unset (a failure
under ``KB_REQUIRE_SERVICES=1``). Privileges are checked with ``SET ROLE kb_reader`` from the
superuser connection, which applies kb_reader's privileges exactly, without needing its
password or the server's pg_hba rules.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import ProgrammingError

from kb_shared.errors import StoreError
from kb_shared.stores.catalog import CATALOG_METADATA, Catalog
from kb_shared.stores.sql import apply_sql_files, make_engine
from tests.conftest import REPO_ROOT
from tests.stores.test_catalog_contract import fresh_postgres_database

SQL_DIR = REPO_ROOT / "sql"

services = pytest.mark.services


@pytest.fixture(scope="module")
def from_files() -> Iterator[sa.Engine]:
    """A fresh database built by applying sql/*.sql twice."""
    with fresh_postgres_database("kb_sqlfiles") as url:
        engine = make_engine(url)
        applied = apply_sql_files(engine, SQL_DIR)
        assert applied[0] == "001_catalog.sql" and "003_reader_role.sql" in applied
        assert apply_sql_files(engine, SQL_DIR) == applied  # idempotent
        yield engine
        engine.dispose()


@pytest.fixture(scope="module")
def from_code() -> Iterator[sa.Engine]:
    """A fresh database built by Catalog.ensure_schema()."""
    with fresh_postgres_database("kb_sqlcode") as url:
        engine = make_engine(url)
        Catalog(engine).ensure_schema()
        yield engine
        engine.dispose()


def _describe(engine: sa.Engine, table: str) -> dict[str, Any]:
    inspector = sa.inspect(engine)
    columns = [
        (
            c["name"],
            str(c["type"]),
            c["nullable"],
            c.get("default"),
            c.get("identity") is not None,
        )
        for c in inspector.get_columns(table)
    ]
    return {
        "columns": columns,
        "primary_key": inspector.get_pk_constraint(table)["constrained_columns"],
        "unique": sorted(
            (u["name"], tuple(u["column_names"])) for u in inspector.get_unique_constraints(table)
        ),
        "indexes": sorted(
            (
                i["name"],
                tuple(i["column_names"]),
                bool(i["unique"]),
                str(i.get("dialect_options", {})),
            )
            for i in inspector.get_indexes(table)
        ),
        "checks": sorted((c["name"], c["sqltext"]) for c in inspector.get_check_constraints(table)),
    }


@services
def test_sql_files_create_every_catalog_table_with_the_code_columns(from_files: sa.Engine) -> None:
    tables = set(sa.inspect(from_files).get_table_names())
    assert set(CATALOG_METADATA.tables) <= tables
    for table in CATALOG_METADATA.sorted_tables:
        reflected = [c["name"] for c in sa.inspect(from_files).get_columns(table.name)]
        assert reflected == [c.name for c in table.columns], table.name


@services
@pytest.mark.parametrize("table", sorted(CATALOG_METADATA.tables))
def test_sql_files_match_the_code_schema(
    from_files: sa.Engine, from_code: sa.Engine, table: str
) -> None:
    """Types, nullability, defaults, keys, indexes and CHECKs as Postgres itself reports them."""
    assert _describe(from_files, table) == _describe(from_code, table)


@services
def test_code_works_on_a_database_built_from_the_files(from_files: sa.Engine) -> None:
    catalog = Catalog(from_files)
    catalog.ensure_schema()  # nothing to create: no error, no change
    row = catalog.add_pending("Rule 3.1.pdf", "rule-3.1.pdf", "d" * 64, 10, "pdfs/rule-3.1.pdf")
    assert catalog.mark_ready(row.doc_id, pages=2, chunk_count=5).status == "ready"
    assert catalog.delete(row.doc_id) is True


def _reader_engine(engine: sa.Engine) -> sa.Engine:
    reader = make_engine(engine.url)

    @sa.event.listens_for(reader, "connect")
    def _become_reader(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SET ROLE kb_reader")
        dbapi_connection.commit()

    return reader


@pytest.fixture
def reader(from_files: sa.Engine) -> Iterator[sa.Engine]:
    engine = _reader_engine(from_files)
    yield engine
    engine.dispose()


@services
def test_reader_role_exists_and_can_log_in(from_files: sa.Engine) -> None:
    with from_files.connect() as conn:
        row = conn.execute(
            sa.text(
                "SELECT rolcanlogin, rolsuper, rolcreatedb, rolcreaterole "
                "FROM pg_roles WHERE rolname = 'kb_reader'"
            )
        ).one()
    assert tuple(row) == (True, False, False, False)


@services
def test_reader_selects_every_table(reader: sa.Engine, from_files: sa.Engine) -> None:
    tables = sa.inspect(from_files).get_table_names()
    with reader.connect() as conn:
        assert conn.execute(sa.text("SELECT current_user")).scalar() == "kb_reader"
        for table in tables:
            conn.execute(sa.text(f'SELECT count(*) FROM "{table}"')).scalar()


@services
def test_reader_can_queue_requests_through_the_catalog(reader: sa.Engine) -> None:
    catalog = Catalog(reader)
    row = catalog.add_document_request("Gas Distribution Code", "asked twice", "https://x.org/g")
    assert (row.status, row.title) == ("pending", "Gas Distribution Code")
    ref = catalog.add_reference_request("https://docs.example.org/v3", "Example v3", "API docs")
    assert ref.status == "pending"
    assert [d.doc_id for d in catalog.list_documents()] == []


@services
@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO document_requests (title, title_key, reason, status) "
        "VALUES ('Sneaky', 'sneaky', 'x', 'approved')",
        "INSERT INTO document_requests (id, title, title_key, reason) "
        "VALUES (424242, 'a', 'a', 'b')",
        "UPDATE document_requests SET status = 'approved'",
        "DELETE FROM document_requests",
        "INSERT INTO reference_requests (url, title, description, status) "
        "VALUES ('https://a.org', 'a', 'b', 'approved')",
        "INSERT INTO documents (doc_id, name, normalized_name, sha256, size_bytes, blob_key) "
        "VALUES ('x', 'x', 'x', repeat('a', 64), 1, 'k')",
        "UPDATE documents SET title = 'x'",
        "DELETE FROM documents",
        "INSERT INTO reference_sources (url, title, description) "
        "VALUES ('https://a.org', 'a', 'b')",
        "INSERT INTO compliance_actions (page_id, search_text) VALUES ('x', ' x ')",
        "DELETE FROM aer_performance",
        "TRUNCATE aer_metrics",
        "DROP TABLE documents",
    ],
)
def test_reader_cannot_write_anything_else(reader: sa.Engine, statement: str) -> None:
    with pytest.raises(ProgrammingError) as info, reader.begin() as conn:
        conn.exec_driver_sql(statement)
    assert getattr(info.value.orig, "sqlstate", None) in ("42501",)  # insufficient_privilege


@services
def test_reader_cannot_create_tables(reader: sa.Engine) -> None:
    with reader.connect() as conn:
        version = conn.execute(sa.text("SHOW server_version_num")).scalar()
    if int(version) < 150000:
        pytest.skip("Postgres < 15 lets PUBLIC create in schema public (see 003_reader_role.sql)")
    with pytest.raises(ProgrammingError, match="permission denied"), reader.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE reader_table (id int)")


@services
def test_reader_gets_select_on_tables_created_later(
    from_files: sa.Engine, reader: sa.Engine
) -> None:
    with from_files.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE later_table (id int)")
    try:
        with reader.connect() as conn:
            assert conn.execute(sa.text("SELECT count(*) FROM later_table")).scalar() == 0
    finally:
        with from_files.begin() as conn:
            conn.exec_driver_sql("DROP TABLE later_table")


@services
def test_rerun_removes_privileges_granted_by_hand(from_files: sa.Engine, reader: sa.Engine) -> None:
    with from_files.begin() as conn:
        conn.exec_driver_sql("GRANT UPDATE ON documents TO kb_reader")
    apply_sql_files(from_files, SQL_DIR)
    with pytest.raises(ProgrammingError, match="permission denied"), reader.begin() as conn:
        conn.exec_driver_sql("UPDATE documents SET title = 'x'")


@services
def test_a_failing_file_is_rolled_back_whole(tmp_path: Path) -> None:
    (tmp_path / "001_ok.sql").write_text("CREATE TABLE IF NOT EXISTS t_ok (id int);\n")
    (tmp_path / "002_bad.sql").write_text("CREATE TABLE t_half (id int);\nSELEC oops;\n")
    (tmp_path / "notes.sql").write_text("this file is not numbered and never runs")
    with fresh_postgres_database("kb_sqlbad") as url:
        engine = make_engine(url)
        with pytest.raises(StoreError, match="applying 002_bad.sql failed: syntax error"):
            apply_sql_files(engine, tmp_path)
        tables = set(sa.inspect(engine).get_table_names())
        engine.dispose()
    assert tables == {"t_ok"}


def test_apply_sql_files_refuses_sqlite(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'kb.sqlite'}")
    with pytest.raises(ValueError, match="sql/ files are Postgres DDL; sqlite schema comes from"):
        apply_sql_files(engine, SQL_DIR)


def test_every_sql_file_is_numbered() -> None:
    names = sorted(p.name for p in SQL_DIR.glob("*.sql"))
    assert "001_catalog.sql" in names and "003_reader_role.sql" in names
    assert all(name[:3].isdigit() and name[3] == "_" for name in names), names

