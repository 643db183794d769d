"""documents.edition_of (issue 27, "Editions"): two documents with different names linked as
editions of one series; the links the catalog refuses (unknown, itself, a second next
edition, a loop, a document being deleted); ``series``; ``previous_issue`` over versions and
editions; a delete that unlinks the next edition. On the ``catalog`` fixture (SQLite, and
Postgres when the services run); on Postgres also ``sql/010_document_editions.sql`` on a
documents table that predates it."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pytest
import sqlalchemy as sa

from kb_shared.errors import DocumentNotFoundError, EditionLinkError
from kb_shared.stores.catalog import Catalog
from kb_shared.stores.catalog.editions import series_ids
from kb_shared.stores.sql import apply_sql_files, make_engine
from tests.conftest import REPO_ROOT
from tests.stores.test_catalog_contract import fresh_postgres_database


def add(catalog: Catalog, name: str, edition_of: str | None = None) -> str:
    """Add ``name`` (its content hash: the name's) as a pending document; its doc_id."""
    doc = name.lower()
    digest = hashlib.sha256(name.encode()).hexdigest()
    catalog.add_pending(name, doc, digest, 1, f"pdfs/{doc}", edition_of=edition_of)
    return doc


def ready(catalog: Catalog, doc: str) -> None:
    catalog.record_version(doc, 1, pages=3, chunk_count=4)


def test_add_pending_links_a_new_edition_and_series_lists_it_oldest_first(
    catalog: Catalog,
) -> None:
    first = add(catalog, "A.pdf")
    second = add(catalog, "B.pdf", edition_of=first)
    third = add(catalog, "C.pdf", edition_of=second)
    add(catalog, "D.pdf")
    assert catalog.get(second).edition_of == "a.pdf"
    assert catalog.get(first).edition_of is None
    for doc in (first, second, third):
        assert [r.doc_id for r in catalog.series(doc)] == ["a.pdf", "b.pdf", "c.pdf"]
    assert [r.doc_id for r in catalog.series("d.pdf")] == ["d.pdf"]
    with pytest.raises(DocumentNotFoundError, match="no document 'x.pdf' in the catalog"):
        catalog.series("x.pdf")


def test_a_link_to_an_unknown_document_is_refused_and_nothing_is_written(
    catalog: Catalog,
) -> None:
    with pytest.raises(EditionLinkError, match="no document 'old.pdf' in the catalog to be the "
                       r"previous edition of 'b.pdf'; add the earlier edition first \(`kb add`\)"):
        add(catalog, "B.pdf", edition_of="old.pdf")
    assert catalog.find_by_doc_id("b.pdf") is None
    assert catalog.versions("b.pdf") == []


def test_a_document_cannot_be_its_own_edition(catalog: Catalog) -> None:
    doc = add(catalog, "A.pdf")
    with pytest.raises(EditionLinkError, match="'a.pdf' cannot be an edition of itself"):
        catalog.set_edition_of(doc, doc)
    assert catalog.get(doc).edition_of is None


def test_a_second_next_edition_is_refused_naming_the_one_there(catalog: Catalog) -> None:
    first = add(catalog, "A.pdf")
    add(catalog, "B.pdf", edition_of=first)
    with pytest.raises(
        EditionLinkError,
        match="'A.pdf' already has a next edition \\('b.pdf'\\); a series is one edition after "
        "another, so link 'c.pdf' to the newest edition of that series instead",
    ):
        add(catalog, "C.pdf", edition_of=first)
    assert catalog.find_by_doc_id("c.pdf") is None


def test_a_link_that_makes_a_loop_is_refused(catalog: Catalog) -> None:
    first = add(catalog, "A.pdf")
    second = add(catalog, "B.pdf", edition_of=first)
    third = add(catalog, "C.pdf", edition_of=second)
    with pytest.raises(
        EditionLinkError,
        match="linking 'a.pdf' as an edition of 'c.pdf' would make a loop: 'c.pdf' is already "
        "a later edition of 'a.pdf'; link the newer document to the older one",
    ):
        catalog.set_edition_of(first, third)
    assert catalog.get(first).edition_of is None
    assert [r.doc_id for r in catalog.series(third)] == ["a.pdf", "b.pdf", "c.pdf"]


def test_set_edition_of_links_and_unlinks_existing_documents(catalog: Catalog) -> None:
    first, second = add(catalog, "A.pdf"), add(catalog, "B.pdf")
    linked = catalog.set_edition_of(second, first)
    assert linked.edition_of == "a.pdf"
    assert [r.doc_id for r in catalog.series(first)] == ["a.pdf", "b.pdf"]
    assert catalog.set_edition_of(second, None).edition_of is None
    assert [r.doc_id for r in catalog.series(first)] == ["a.pdf"]
    with pytest.raises(DocumentNotFoundError, match="no document 'z.pdf' in the catalog"):
        catalog.set_edition_of("z.pdf", first)


def test_a_document_being_deleted_cannot_become_a_previous_edition(catalog: Catalog) -> None:
    first = add(catalog, "A.pdf")
    catalog.mark_deleting(first)
    with pytest.raises(EditionLinkError, match="'A.pdf' cannot be a previous edition now: "
                       '"A.pdf" \\(doc_id a.pdf\\) is being deleted'):
        add(catalog, "B.pdf", edition_of=first)


def test_deleting_a_previous_edition_unlinks_the_next_and_says_so(
    catalog: Catalog, caplog: pytest.LogCaptureFixture
) -> None:
    first = add(catalog, "A.pdf")
    second = add(catalog, "B.pdf", edition_of=first)
    third = add(catalog, "C.pdf", edition_of=second)
    with caplog.at_level(logging.WARNING, logger="kb_shared.stores.catalog.documents"):
        assert catalog.delete(second) is True
    assert catalog.get(third).edition_of is None
    assert catalog.get(first).edition_of is None
    assert [r.doc_id for r in catalog.series(third)] == ["c.pdf"]
    assert [r.doc_id for r in catalog.series(first)] == ["a.pdf"]
    assert (
        "c.pdf was the next edition of b.pdf, which is deleted: it is unlinked and has no "
        "previous edition now"
    ) in caplog.messages
    # the freed first edition can take a new next edition
    assert add(catalog, "E.pdf", edition_of=first) == "e.pdf"


def test_previous_issue_of_versions(catalog: Catalog) -> None:
    doc = add(catalog, "A.pdf")
    assert catalog.previous_issue(doc) is None  # pending version 1, no edition
    ready(catalog, doc)
    assert catalog.previous_issue(doc) is None
    catalog.add_version(doc, 2, "A.pdf", "2" * 64, 1, "pdfs/a.pdf@v2")
    assert catalog.previous_issue(doc, 2) == ("a.pdf", 1)  # v1 still serving
    catalog.fail_version(doc, 2, "embeddings: timeout")
    catalog.add_version(doc, 3, "A.pdf", "3" * 64, 1, "pdfs/a.pdf@v3")
    catalog.record_version(doc, 3, pages=3, chunk_count=4)
    # v3 serving: the one served before it is v1 (v2 failed, never served)
    assert catalog.previous_issue(doc) == ("a.pdf", 1)
    assert catalog.previous_issue(doc, 3) == ("a.pdf", 1)
    assert catalog.previous_issue(doc, 2) == ("a.pdf", 1)
    assert catalog.previous_issue(doc, 1) is None
    with pytest.raises(DocumentNotFoundError, match="document 'a.pdf' has no version 4; it has "
                       "versions 1 to 3"):
        catalog.previous_issue(doc, 4)
    with pytest.raises(DocumentNotFoundError, match="no document 'x.pdf' in the catalog"):
        catalog.previous_issue("x.pdf")


def test_previous_issue_of_an_edition_is_the_previous_editions_serving_version(
    catalog: Catalog,
) -> None:
    first = add(catalog, "A.pdf")
    second = add(catalog, "B.pdf", edition_of=first)
    assert catalog.previous_issue(second) is None  # A has no version serving yet
    ready(catalog, first)
    catalog.add_version(first, 2, "A.pdf", "2" * 64, 1, "pdfs/a.pdf@v2")
    assert catalog.previous_issue(second) == ("a.pdf", 1)
    catalog.record_version(first, 2, pages=3, chunk_count=4)
    assert catalog.previous_issue(second) == ("a.pdf", 2)
    ready(catalog, second)
    catalog.add_version(second, 2, "B.pdf", "9" * 64, 1, "pdfs/b.pdf@v2")
    # a version after the first: its own document's previous version, not the edition
    assert catalog.previous_issue(second, 2) == ("b.pdf", 1)
    assert catalog.previous_issue(second, 1) == ("a.pdf", 2)
    catalog.mark_deleting(first)
    assert catalog.previous_issue(second, 1) is None


@pytest.mark.parametrize(
    ("links", "doc", "chain"),
    [
        ({"a": None, "b": "a", "c": "b"}, "b", ["a", "b", "c"]),
        ({"a": None}, "a", ["a"]),
        ({"b": "gone", "c": "b"}, "c", ["b", "c"]),  # a previous edition not listed ends it
        ({"a": "b", "b": "a"}, "a", ["b", "a"]),  # a loop lists each document once
        ({"a": None, "b": "a", "c": "a"}, "a", ["a", "b"]),  # a fork follows the first doc_id
    ],
)
def test_series_ids(links: dict[str, str | None], doc: str, chain: list[str]) -> None:
    assert series_ids(links, doc) == chain


def test_an_older_sqlite_catalog_gains_the_column_on_open(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'old.sqlite'}")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE documents (doc_id VARCHAR(120) PRIMARY KEY, name VARCHAR(1024) NOT "
            "NULL, normalized_name VARCHAR(1024) NOT NULL UNIQUE, sha256 VARCHAR(64) NOT NULL "
            "UNIQUE, status VARCHAR(16) NOT NULL DEFAULT 'pending', failure_reason TEXT, "
            "title TEXT, version TEXT, pages INTEGER, chunk_count INTEGER, figure_count "
            "INTEGER, entity_count INTEGER, relationship_count INTEGER, size_bytes BIGINT NOT "
            "NULL, blob_key TEXT NOT NULL, markdown_key TEXT, converter TEXT, embedding_model "
            "TEXT, created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP, updated_at DATETIME "
            "NOT NULL DEFAULT CURRENT_TIMESTAMP, category VARCHAR(200))"
        )
        conn.exec_driver_sql(
            "INSERT INTO documents (doc_id, name, normalized_name, sha256, size_bytes, "
            f"blob_key) VALUES ('old.pdf', 'Old.pdf', 'old.pdf', '{'e' * 64}', 1, 'k')"
        )
    catalog = Catalog(engine)
    catalog.ensure_schema()
    assert "edition_of" in {c["name"] for c in sa.inspect(engine).get_columns("documents")}
    assert catalog.get("old.pdf").edition_of is None
    assert add(catalog, "New.pdf", edition_of="old.pdf") == "new.pdf"
    assert [r.doc_id for r in catalog.series("new.pdf")] == ["old.pdf", "new.pdf"]
    engine.dispose()


@pytest.mark.services
def test_sql_010_adds_the_column_to_a_documents_table_that_predates_it() -> None:
    ddl = (REPO_ROOT / "sql" / "001_catalog.sql").read_text(encoding="utf-8")
    line = "    edition_of         varchar(120),\n"
    assert ddl.count(line) == 1
    with fresh_postgres_database("kb_editions_old") as url:
        engine = make_engine(url)
        with engine.begin() as conn:  # the documents table as 001 created it before issue 27
            conn.exec_driver_sql(ddl.replace(line, ""))
            conn.exec_driver_sql(
                "INSERT INTO documents (doc_id, name, normalized_name, sha256, size_bytes, "
                "blob_key) VALUES ('old.pdf', 'Old.pdf', 'old.pdf', repeat('e', 64), 1, 'k')"
            )
        assert "edition_of" not in {
            c["name"] for c in sa.inspect(engine).get_columns("documents")
        }
        apply_sql_files(engine, REPO_ROOT / "sql")
        apply_sql_files(engine, REPO_ROOT / "sql")  # idempotent
        catalog = Catalog(engine)
        assert catalog.get("old.pdf").edition_of is None
        assert add(catalog, "New.pdf", edition_of="old.pdf") == "new.pdf"
        with pytest.raises(sa.exc.IntegrityError):  # the CHECK holds without the code
            with engine.begin() as conn:
                conn.exec_driver_sql("UPDATE documents SET edition_of = doc_id")
        engine.dispose()
