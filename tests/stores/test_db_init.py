"""``kb db init`` (``factory.init_database``): the schema of every store, and on Postgres the
``sql/`` files, so the ``kb_reader`` role exists with its grants (issue 10, defect 3).

The SQLite test always runs. The Postgres tests need ``KB_TEST_POSTGRES_URL`` (a superuser;
skipped with that reason otherwise, a failure under ``KB_REQUIRE_SERVICES=1``); they log in
as ``kb_reader`` over TCP with a password the test sets as the admin.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.exc import ProgrammingError

from benchmarks.postgres import reader_login
from kb_shared.errors import StoreError
from kb_shared.settings import Settings
from kb_shared.stores.catalog import Catalog
from kb_shared.stores.factory import DatabaseInit, init_database
from kb_shared.stores.sql import make_engine
from tests.stores.test_catalog_contract import fresh_postgres_database

SQL_FILES = (
    "001_catalog.sql",
    "002_graph.sql",
    "003_reader_role.sql",
    "004_document_category.sql",
    "005_document_versions.sql",
    "006_document_deleting.sql",
    "007_aer_block.sql",
    "008_obligations.sql",
    "009_changes.sql",
    "010_document_editions.sql",
)
SHA = "e" * 64


def test_init_database_on_sqlite_creates_every_table_twice_over(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    first = init_database(settings)
    second = init_database(settings)
    database = f"sqlite+pysqlite:///{tmp_path / 'home' / 'kb.sqlite'}"
    assert first == second == DatabaseInit(database=database, sql_files=())
    engine = make_engine(settings.resolved_database_url)
    tables = set(sa.inspect(engine).get_table_names())
    engine.dispose()
    assert {"documents", "document_requests", "graph_entities", "graph_relationships"} <= tables


@pytest.fixture
def database_url() -> Iterator[str]:
    """An empty Postgres database (superuser URL); dropped afterwards."""
    with fresh_postgres_database("kb_dbinit") as url:
        yield url


@pytest.mark.services
def test_init_database_twice_creates_a_reader_that_reads_and_cannot_write(
    database_url: str, tmp_path: Path
) -> None:
    settings = Settings(home=tmp_path / "home", database_url=database_url)
    admin_url = sa.make_url(database_url)
    expected = DatabaseInit(admin_url.render_as_string(hide_password=True), SQL_FILES)
    assert init_database(settings) == expected
    assert init_database(settings) == expected  # idempotent: the second run fails on nothing

    reader_url = reader_login(database_url)
    writer = make_engine(database_url)
    Catalog(writer).add_pending("Rule 3.1.pdf", "rule-3.1.pdf", SHA, 10, "pdfs/rule-3.1.pdf")
    reader = make_engine(reader_url)
    try:
        with reader.connect() as conn:
            assert conn.execute(sa.text("SELECT current_user")).scalar() == "kb_reader"
            assert conn.execute(sa.text("SELECT doc_id FROM documents")).scalars().all() == [
                "rule-3.1.pdf"
            ]
            assert conn.execute(sa.text("SELECT count(*) FROM graph_entities")).scalar() == 0
        with pytest.raises(ProgrammingError) as info, reader.begin() as conn:
            conn.exec_driver_sql(
                "INSERT INTO documents (doc_id, name, normalized_name, sha256, size_bytes, "
                "blob_key) VALUES ('x.pdf', 'x.pdf', 'x.pdf', repeat('f', 64), 1, 'pdfs/x')"
            )
        assert isinstance(info.value.orig, psycopg.errors.InsufficientPrivilege)
        with pytest.raises(StoreError, match="permission denied in .*kb_reader:\\*\\*\\*@"):
            Catalog(reader).add_pending("x.pdf", "x.pdf", "f" * 64, 1, "pdfs/x.pdf")
        assert [d.doc_id for d in Catalog(reader).list_documents()] == ["rule-3.1.pdf"]
    finally:
        reader.dispose()
        writer.dispose()


@pytest.mark.services
def test_kb_db_init_command_applies_sql_files_and_hides_the_password(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner  # noqa: PLC0415

    from kb_assets.cli import main as cli  # noqa: PLC0415 - imports Dagster: only when Postgres is here

    monkeypatch.setenv("KB_DATABASE_URL", database_url)
    runner = CliRunner()
    outputs = []
    for _ in range(2):
        result = runner.invoke(cli.app, ["db", "init"])
        assert result.exit_code == 0, result.output
        outputs.append(result.output)
    admin_url = sa.make_url(database_url)
    assert outputs[0] == outputs[1] == (
        f"applied sql/: {', '.join(SQL_FILES)}\n"
        f"schema ready at {admin_url.render_as_string(hide_password=True)}\n"
    )
    assert admin_url.password not in outputs[0]
    engine = make_engine(database_url)
    with engine.connect() as conn:  # grants live in this database: only sql/003 makes them
        granted = conn.execute(
            sa.text(
                "SELECT has_table_privilege('kb_reader', 'documents', 'SELECT'), "
                "has_table_privilege('kb_reader', 'documents', 'INSERT'), "
                "has_column_privilege('kb_reader', 'document_requests', 'title', 'INSERT'), "
                "has_column_privilege('kb_reader', 'document_requests', 'status', 'INSERT')"
            )
        ).one()
    engine.dispose()
    assert tuple(granted) == (True, False, True, False)


@pytest.mark.services
def test_init_database_without_the_sql_folder_says_where_it_looked(
    database_url: str, tmp_path: Path
) -> None:
    settings = Settings(home=tmp_path / "home", database_url=database_url)
    missing = tmp_path / "no-sql"
    with pytest.raises(StoreError, match=f"the Postgres DDL folder {missing} does not exist"):
        init_database(settings, sql_dir=missing)
