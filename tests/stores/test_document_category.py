"""documents.category (issue 12, "Categories from folders"): normalised, validated, set at
intake and moved by ``set_category`` alone; on Postgres also added to a documents table that
predates it by ``sql/004_document_category.sql``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import sqlalchemy as sa

from kb_shared.stores.catalog import Catalog
from kb_shared.stores.catalog.documents import in_category, normalize_category
from kb_shared.stores.sql import apply_sql_files, make_engine
from tests.conftest import REPO_ROOT
from tests.stores.test_catalog_contract import fresh_postgres_database


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("aemo/procedures", "aemo/procedures"),
        (" AEMO\\Procedures/ ", "AEMO/Procedures"),
        ("//a// b /", "a/b"),
        ("", None),
        (" / ", None),
        (None, None),
    ],
)
def test_normalize_category(given: str | None, stored: str | None) -> None:
    assert normalize_category(given) == stored


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("a/../b", "category 'a/../b' has a '.' or '..' segment"),
        ("./a", "category './a' has a '.' or '..' segment"),
        ("a\nb", "a category cannot contain control characters"),
        ("aemo/\u202eserudecorp", "category 'aemo/\\u202eserudecorp' holds an invisible "
         "bidirectional control (U+202E RIGHT-TO-LEFT OVERRIDE) that changes how the name is "
         "shown; give folder names without it"),
        ("/".join("abcdefghi"), "has 9 levels; the limit is 8"),
        ("x" * 201, "a category is at most 200 characters, got 201"),
        (3, "a category must be text, got int"),
    ],
)
def test_normalize_category_refuses(given: object, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        normalize_category(given)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("category", "prefix", "inside"),
    [
        ("aemo/procedures", "aemo", True),
        ("AEMO/Procedures", "aemo/procedures", True),
        ("aemo", "aemo", True),
        ("aemo2/x", "aemo", False),
        ("aemo", "aemo/procedures", False),
        (None, "aemo", False),
        (None, None, True),
    ],
)
def test_in_category_matches_whole_segments_in_any_case(
    category: str | None, prefix: str | None, inside: bool
) -> None:
    assert in_category(category, prefix) is inside


def _contract(catalog: Catalog) -> None:
    catalog.ensure_schema()
    first = catalog.add_pending("A.pdf", "a.pdf", "a" * 64, 1, "pdfs/a.pdf", "aemo\\procedures")
    catalog.add_pending("B.pdf", "b.pdf", "b" * 64, 1, "pdfs/b.pdf")
    assert first.category == "aemo/procedures"
    assert catalog.get("b.pdf").category is None
    assert [r.doc_id for r in catalog.list_documents(category="AEMO")] == ["a.pdf"]
    ready = catalog.mark_ready("a.pdf", pages=1, chunk_count=1)
    moved = catalog.set_category("a.pdf", "aer/reports")
    assert (moved.category, moved.status, moved.chunk_count) == ("aer/reports", "ready", 1)
    assert moved.updated_at >= ready.updated_at
    assert catalog.list_documents(category="aemo") == []
    assert catalog.set_category("a.pdf", None).category is None
    with pytest.raises(ValueError, match="has a '.' or '..' segment"):
        catalog.set_category("a.pdf", "../x")
    with pytest.raises(ValueError, match="has a '.' or '..' segment"):
        catalog.add_pending("C.pdf", "c.pdf", "c" * 64, 1, "pdfs/c.pdf", "..")
    assert catalog.find_by_doc_id("c.pdf") is None


def test_category_contract_on_sqlite(tmp_path: Path) -> None:
    _contract(Catalog(make_engine(f"sqlite:///{tmp_path / 'kb.sqlite'}")))


@pytest.mark.services
def test_category_contract_on_postgres() -> None:
    with fresh_postgres_database("kb_category") as url:
        engine = make_engine(url)
        _contract(Catalog(engine))
        engine.dispose()


@pytest.mark.services
def test_sql_files_add_the_column_to_a_documents_table_that_predates_it() -> None:
    ddl = (REPO_ROOT / "sql" / "001_catalog.sql").read_text(encoding="utf-8")
    line = "    category           varchar(200),\n"
    assert ddl.count(line) == 1
    with fresh_postgres_database("kb_category_old") as url:
        engine = make_engine(url)
        with engine.begin() as conn:  # the documents table as 001 created it before issue 12
            conn.exec_driver_sql(ddl.replace(line, ""))
            conn.exec_driver_sql(
                "INSERT INTO documents (doc_id, name, normalized_name, sha256, size_bytes, "
                "blob_key) VALUES ('old.pdf', 'Old.pdf', 'old.pdf', repeat('e', 64), 1, 'k')"
            )
        assert "category" not in {c["name"] for c in sa.inspect(engine).get_columns("documents")}
        apply_sql_files(engine, REPO_ROOT / "sql")
        catalog = Catalog(engine)
        assert catalog.get("old.pdf").category is None
        assert catalog.set_category("old.pdf", "aemo").category == "aemo"
        engine.dispose()
