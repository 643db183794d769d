"""The ``deleting`` document status (issue 16, "Crash and outage recovery") in the catalog: a
catalog made before it (CHECK ``status IN ('pending', 'ready', 'failed')``) keeps working and
gets the wider CHECK, on SQLite by a table rebuild that keeps every row and every other
constraint, on Postgres by ``sql/006_document_deleting.sql`` or, without ``kb db init``, by the
first ``mark_deleting`` itself (``ensure_deleting_status``).

The Postgres tests need ``KB_TEST_POSTGRES_URL`` (skipped with the reason otherwise, a failure
under ``KB_REQUIRE_SERVICES=1``).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import IntegrityError

from kb_shared.errors import DocumentNotFoundError, DuplicateDocumentError
from kb_shared.stores.catalog import Catalog, documents, ensure_deleting_status
from kb_shared.stores.catalog.documents import STATUS_CHECK
from kb_shared.stores.sql import apply_sql_files, make_engine
from tests.conftest import REPO_ROOT
from tests.stores.test_catalog_contract import fresh_postgres_database

#: The status CHECK every catalog had before ``deleting``.
OLD_CHECK = "status IN ('pending', 'ready', 'failed')"
SHA_A, SHA_B = "a" * 64, "b" * 64


def make_old_sqlite_catalog(path: Path) -> None:
    """A SQLite catalog file at ``path`` as kb made it before ``deleting``: every table of
    today, the ``documents`` table with the old status CHECK."""
    engine = make_engine(f"sqlite+pysqlite:///{path}")
    try:
        Catalog(engine).ensure_schema()
        ddl = str(sa.schema.CreateTable(documents).compile(dialect=sqlite.dialect()))
        assert STATUS_CHECK in ddl
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE documents")
            conn.exec_driver_sql(ddl.replace(STATUS_CHECK, OLD_CHECK))
    finally:
        engine.dispose()


def _add_two(catalog: Catalog) -> None:
    catalog.add_pending("Rule 3.1.pdf", "rule-3.1.pdf", SHA_A, 10, "pdfs/rule-3.1.pdf", "aemo")
    catalog.mark_ready("rule-3.1.pdf", pages=2, chunk_count=5, title="Rule 3.1")
    catalog.add_pending("Queued.pdf", "queued.pdf", SHA_B, 20, "pdfs/queued.pdf")
    catalog.mark_failed("queued.pdf", "markdown: the PDF is encrypted")


def _set_status(catalog: Catalog, doc_id: str, status: str) -> None:
    with catalog.engine.begin() as conn:
        conn.execute(documents.update().where(documents.c.doc_id == doc_id).values(status=status))


@pytest.fixture
def old_sqlite(tmp_path: Path) -> Iterator[Catalog]:
    make_old_sqlite_catalog(tmp_path / "kb.sqlite")
    catalog = Catalog(make_engine(f"sqlite+pysqlite:///{tmp_path / 'kb.sqlite'}"))
    catalog.ensure_schema()  # what opening it does: nothing to add, the CHECK stays old
    yield catalog
    catalog.close()


def test_an_old_sqlite_catalog_refuses_deleting_until_it_is_widened(old_sqlite: Catalog) -> None:
    _add_two(old_sqlite)
    with pytest.raises(IntegrityError, match="ck_documents_status"):
        _set_status(old_sqlite, "rule-3.1.pdf", "deleting")
    with old_sqlite.engine.begin() as conn:
        assert ensure_deleting_status(conn) is True
        assert ensure_deleting_status(conn) is False  # once is enough
    _set_status(old_sqlite, "rule-3.1.pdf", "deleting")
    assert old_sqlite.get("rule-3.1.pdf").status == "deleting"
    with pytest.raises(IntegrityError, match="ck_documents_status"):
        _set_status(old_sqlite, "rule-3.1.pdf", "gone")


def test_mark_deleting_on_an_old_sqlite_catalog_keeps_every_row_and_constraint(
    old_sqlite: Catalog,
) -> None:
    _add_two(old_sqlite)
    before = {row.doc_id: row for row in old_sqlite.list_documents()}
    versions = old_sqlite.all_versions()

    row = old_sqlite.mark_deleting("queued.pdf")
    assert (row.status, row.failure_reason) == ("deleting", None)

    after = {r.doc_id: r for r in old_sqlite.list_documents()}
    assert after["rule-3.1.pdf"] == before["rule-3.1.pdf"]
    assert after["queued.pdf"].sha256 == before["queued.pdf"].sha256
    assert after["queued.pdf"].created_at == before["queued.pdf"].created_at
    assert old_sqlite.all_versions() == versions
    with old_sqlite.engine.connect() as conn:
        ddl = conn.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'documents'"
        ).scalar()
        assert conn.exec_driver_sql(
            "SELECT count(*) FROM sqlite_master WHERE name = 'documents_rebuild'"
        ).scalar() == 0
    assert "'deleting'" in ddl
    # the other constraints came through the rebuild
    with pytest.raises(DuplicateDocumentError, match="already in the catalog"):
        old_sqlite.add_pending("RULE 3.1.pdf", "rule-3.1.pdf", "c" * 64, 1, "pdfs/x.pdf")
    with pytest.raises(IntegrityError, match="ck_documents_failure_reason"):
        _set_status(old_sqlite, "queued.pdf", "failed")
    with pytest.raises(IntegrityError, match="ck_documents_status"):
        _set_status(old_sqlite, "queued.pdf", "gone")
    assert old_sqlite.delete("queued.pdf") is True
    assert [r.doc_id for r in old_sqlite.list_documents()] == ["rule-3.1.pdf"]


def test_adding_a_name_or_content_of_a_deleting_document_says_how_to_finish(
    old_sqlite: Catalog,
) -> None:
    _add_two(old_sqlite)
    old_sqlite.mark_deleting("rule-3.1.pdf")
    expected = (
        '"{name}" cannot be added now: "Rule 3.1.pdf" (doc_id rule-3.1.pdf) is being deleted: '
        "a `kb delete` of it has not finished; run `kb delete rule-3.1.pdf` to finish it (`kb "
        "build` also finishes it), then add it again"
    )
    with pytest.raises(DuplicateDocumentError) as by_name:
        old_sqlite.add_pending("rule 3.1.pdf", "rule-3.1.pdf", "c" * 64, 1, "pdfs/r.pdf")
    assert str(by_name.value) == expected.format(name="rule 3.1.pdf")
    with pytest.raises(DuplicateDocumentError) as by_content:
        old_sqlite.add_pending("Other.pdf", "other.pdf", SHA_A, 1, "pdfs/other.pdf")
    assert str(by_content.value) == expected.format(name="Other.pdf")
    assert old_sqlite.list_documents(status="deleting")[0].doc_id == "rule-3.1.pdf"
    with pytest.raises(DocumentNotFoundError):
        old_sqlite.mark_deleting("no-such.pdf")


# --- Postgres ---------------------------------------------------------------------------------


def _status_check(engine: sa.Engine) -> tuple[int, str]:
    with engine.connect() as conn:
        return tuple(conn.execute(sa.text(
            "SELECT oid, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = 'documents'::regclass AND conname = 'ck_documents_status'"
        )).one())


@pytest.mark.services
def test_sql_006_widens_an_old_postgres_catalog_once_and_deleting_works(tmp_path: Path) -> None:
    old_files = tmp_path / "sql-before-006"
    old_files.mkdir()
    for path in sorted((REPO_ROOT / "sql").glob("00[1-5]_*.sql")):
        shutil.copy(path, old_files / path.name)
    with fresh_postgres_database("kb_deleting") as url:
        engine = make_engine(url)
        try:
            assert apply_sql_files(engine, old_files)[-1] == "005_document_versions.sql"
            catalog = Catalog(engine)
            _add_two(catalog)
            assert "'deleting'" not in _status_check(engine)[1]
            with pytest.raises(IntegrityError, match="ck_documents_status"):
                _set_status(catalog, "rule-3.1.pdf", "deleting")

            applied = apply_sql_files(engine, REPO_ROOT / "sql")
            assert applied[5] == "006_document_deleting.sql"  # later files may follow it
            widened = _status_check(engine)
            assert "'deleting'" in widened[1]
            apply_sql_files(engine, REPO_ROOT / "sql")
            assert _status_check(engine) == widened  # the same constraint: not replaced again

            assert catalog.mark_deleting("rule-3.1.pdf").status == "deleting"
            assert [(r.doc_id, r.status) for r in catalog.list_documents()] == [
                ("queued.pdf", "failed"), ("rule-3.1.pdf", "deleting"),
            ]
            with pytest.raises(IntegrityError, match="ck_documents_status"):
                _set_status(catalog, "rule-3.1.pdf", "gone")
            assert catalog.delete("rule-3.1.pdf") is True
        finally:
            engine.dispose()


@pytest.mark.services
def test_mark_deleting_widens_a_postgres_catalog_made_by_older_code() -> None:
    """A catalog kb created itself (``ensure_schema``, no ``kb db init``) before ``deleting``."""
    with fresh_postgres_database("kb_deleting_code") as url:
        engine = make_engine(url)
        try:
            catalog = Catalog(engine)
            catalog.ensure_schema()
            with engine.begin() as conn:
                conn.exec_driver_sql(
                    "ALTER TABLE documents DROP CONSTRAINT ck_documents_status, "
                    f"ADD CONSTRAINT ck_documents_status CHECK ({OLD_CHECK})"
                )
            _add_two(catalog)
            row = catalog.mark_deleting("queued.pdf")
            assert (row.status, row.failure_reason) == ("deleting", None)
            assert "'deleting'" in _status_check(engine)[1]
            with engine.begin() as conn:
                assert ensure_deleting_status(conn) is False
            assert catalog.get("rule-3.1.pdf").status == "ready"
        finally:
            engine.dispose()


def test_a_build_that_ends_after_a_delete_began_leaves_the_document_deleting(
    tmp_path: Path,
) -> None:
    engine = make_engine(f"sqlite+pysqlite:///{tmp_path / 'catalog.db'}")
    try:
        catalog = Catalog(engine)
        catalog.ensure_schema()
        _add_two(catalog)
        catalog.mark_deleting("rule-3.1.pdf")
        with pytest.raises(DocumentNotFoundError, match="'rule-3.1.pdf' is being deleted"):
            catalog.record_version("rule-3.1.pdf", 1, pages=2, chunk_count=5)
        catalog.fail_version("rule-3.1.pdf", 1, "embeddings: killed")
        assert catalog.get("rule-3.1.pdf").status == "deleting"
    finally:
        engine.dispose()
