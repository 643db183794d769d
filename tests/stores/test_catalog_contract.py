"""Catalog contract: one suite, run unchanged on SQLite (a temp file) and on Postgres (a fresh
database per session on ``KB_TEST_POSTGRES_URL``; skipped with the reason when it is unset,
a failure under ``KB_REQUIRE_SERVICES=1``)."""

from __future__ import annotations

import datetime as dt
import unicodedata
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from benchmarks.postgres import scratch_database
from kb_shared import identity
from kb_shared.errors import (
    DocumentNotFoundError,
    DuplicateDocumentError,
    DuplicateRequestError,
    QueueFullError,
    RequestNotFoundError,
    StoreError,
    StoreUnavailableError,
)
from kb_shared.stores.catalog import (
    Catalog,
    document_requests,
    documents,
    duplicate_message,
    title_key,
)
from kb_shared.stores.sql import make_engine
from tests.conftest import postgres_url

SHA_A = "a" * 64
SHA_B = "b" * 64
SHA_C = "c" * 64
UTC = dt.UTC


def fresh_postgres_database(prefix: str = "kb_test") -> AbstractContextManager[str]:
    """An empty database on the test server (``benchmarks.postgres.scratch_database``): its
    URL, dropped afterwards.

    Skips (or fails under KB_REQUIRE_SERVICES=1) when KB_TEST_POSTGRES_URL is unset.
    """
    return scratch_database(postgres_url(), prefix)


def _pending(catalog: Catalog, name: str, sha: str = SHA_A, size: int = 1000):
    doc = identity.doc_id(name)
    return catalog.add_pending(name, doc, sha, size, f"pdfs/{doc}")


# --- schema ----------------------------------------------------------------------------------


def test_ensure_schema_twice_keeps_tables_and_rows(catalog: Catalog) -> None:
    _pending(catalog, "Rule 3.1.pdf")
    catalog.ensure_schema()
    catalog.ensure_schema()
    tables = set(sa.inspect(catalog.engine).get_table_names())
    assert {
        "documents",
        "document_requests",
        "reference_sources",
        "reference_requests",
        "compliance_actions",
        "aer_performance",
        "aer_metrics",
    } <= tables
    assert [d.doc_id for d in catalog.list_documents()] == ["rule-3.1.pdf"]


# --- documents: lifecycle --------------------------------------------------------------------


def test_pending_ready_failed_lifecycle(catalog: Catalog) -> None:
    row = catalog.add_pending("  Retail Code v2.PDF ", "retail-code-v2.pdf", SHA_A, 5123, "pdfs/x")
    assert (row.doc_id, row.name, row.normalized_name) == (
        "retail-code-v2.pdf",
        "Retail Code v2.PDF",
        "retail code v2.pdf",
    )
    assert (row.status, row.failure_reason, row.chunk_count, row.size_bytes) == (
        "pending",
        None,
        None,
        5123,
    )
    assert row.created_at.tzinfo is not None and row.created_at.utcoffset() == dt.timedelta(0)
    assert abs(row.created_at - dt.datetime.now(UTC)) < dt.timedelta(minutes=5)

    ready = catalog.mark_ready(
        "retail-code-v2.pdf",
        title="Retail Code",
        version="v2",
        pages=12,
        chunk_count=40,
        figure_count=3,
        markdown_key="markdown/retail-code-v2.pdf.md",
        converter="pymupdf4llm",
        embedding_model="usem3",
    )
    assert (ready.status, ready.title, ready.version, ready.pages, ready.chunk_count) == (
        "ready",
        "Retail Code",
        "v2",
        12,
        40,
    )
    assert ready.updated_at >= row.updated_at
    assert catalog.get("retail-code-v2.pdf") == ready

    failed = catalog.mark_failed("retail-code-v2.pdf", "embedding provider: 401 bad key")
    assert (failed.status, failed.failure_reason, failed.chunk_count) == (
        "failed",
        "embedding provider: 401 bad key",
        40,
    )
    again = catalog.mark_ready("retail-code-v2.pdf")  # counts recorded earlier still hold
    assert (again.status, again.failure_reason) == ("ready", None)
    assert [d.doc_id for d in catalog.list_documents(status="ready")] == ["retail-code-v2.pdf"]
    assert catalog.list_documents(status="pending") == []


def test_ready_needs_pages_and_chunk_count(catalog: Catalog) -> None:
    _pending(catalog, "a.pdf")
    with pytest.raises(ValueError, match="a ready document needs pages and chunk_count"):
        catalog.mark_ready("a.pdf", title="A")
    with pytest.raises(ValueError, match="a ready document needs chunk_count"):
        catalog.mark_ready("a.pdf", pages=3)
    row = catalog.get("a.pdf")
    assert (row.status, row.title, row.pages) == ("pending", None, None)  # nothing half-written


def test_failure_reason_is_required_and_cut(catalog: Catalog) -> None:
    _pending(catalog, "a.pdf")
    with pytest.raises(ValueError, match="failure reason cannot be empty"):
        catalog.mark_failed("a.pdf", "   ")
    row = catalog.mark_failed("a.pdf", "x" * 10_000)
    assert len(row.failure_reason or "") == 4000


def test_update_refuses_identity_and_unknown_fields(catalog: Catalog) -> None:
    _pending(catalog, "a.pdf")
    with pytest.raises(ValueError, match="cannot set name, sha256 on a document"):
        catalog.update("a.pdf", name="b.pdf", sha256=SHA_B)
    with pytest.raises(ValueError, match="chunk_count cannot be negative, got -1"):
        catalog.update("a.pdf", chunk_count=-1)
    with pytest.raises(ValueError, match="pages must be an integer, got True"):
        catalog.update("a.pdf", pages=True)
    assert catalog.update("a.pdf", entity_count=7, relationship_count=9).entity_count == 7
    with pytest.raises(DocumentNotFoundError, match="no document 'nope.pdf' in the catalog"):
        catalog.update("nope.pdf", title="x")
    with pytest.raises(DocumentNotFoundError):
        catalog.mark_ready("nope.pdf", pages=1, chunk_count=1)
    with pytest.raises(DocumentNotFoundError):
        catalog.mark_failed("nope.pdf", "x")
    with pytest.raises(DocumentNotFoundError):
        catalog.get("nope.pdf")


def test_add_pending_checks_its_arguments(catalog: Catalog) -> None:
    with pytest.raises(ValueError, match="does not match the name 'a b.pdf' \\('a-b.pdf'\\)"):
        catalog.add_pending("a b.pdf", "a_b.pdf", SHA_A, 1, "pdfs/a")
    with pytest.raises(ValueError, match="sha256 must be 64 lower-case hex digits"):
        catalog.add_pending("a.pdf", "a.pdf", "A" * 64, 1, "pdfs/a")
    with pytest.raises(ValueError, match="size_bytes cannot be negative"):
        catalog.add_pending("a.pdf", "a.pdf", SHA_A, -1, "pdfs/a")
    with pytest.raises(ValueError, match="name is 1025 characters; the limit is 1024"):
        long_name = "a" * 1021 + ".pdf"
        catalog.add_pending(long_name, identity.doc_id(long_name), SHA_A, 1, "pdfs/a")
    assert catalog.list_documents() == []


def test_finders(catalog: Catalog) -> None:
    row = _pending(catalog, "Report.pdf", SHA_B)
    assert catalog.find_by_normalized_name("  REPORT.pdf") == row
    assert catalog.find_by_sha256(SHA_B.upper()) == row
    assert catalog.find_by_doc_id("report.pdf") == row
    assert catalog.find_by_normalized_name("other.pdf") is None
    assert catalog.find_by_sha256(SHA_C) is None
    assert catalog.find_by_doc_id("other.pdf") is None


def test_resolve_by_doc_id_name_or_name_without_pdf(catalog: Catalog) -> None:
    report = _pending(catalog, "Annual Report 2024.pdf", SHA_A)
    assert report.doc_id == "annual-report-2024.pdf"
    assert catalog.resolve("annual-report-2024.pdf") == report  # the doc_id
    assert catalog.resolve("  ANNUAL report 2024.PDF ") == report  # normalised name
    assert catalog.resolve("Annual Report 2024") == report  # ".pdf" left off
    assert catalog.resolve("annual-report-2024") == report  # doc_id without ".pdf"


def test_resolve_unknown_or_empty_is_none(catalog: Catalog) -> None:
    _pending(catalog, "Annual Report 2024.pdf", SHA_A)
    assert catalog.resolve("Annual Report 2023") is None
    assert catalog.resolve("") is None
    assert catalog.resolve("   ") is None
    assert catalog.resolve("???") is None  # no letters or digits: no doc_id to look up


def test_resolve_prefers_the_literal_match_to_the_pdf_guess(catalog: Catalog) -> None:
    bare = _pending(catalog, "Notes", SHA_A)  # a file named without an extension
    pdf = _pending(catalog, "Notes.pdf", SHA_B)
    assert (bare.doc_id, pdf.doc_id) == ("notes", "notes.pdf")
    assert catalog.resolve("notes") == bare
    assert catalog.resolve("NOTES") == bare
    assert catalog.resolve("notes.pdf") == pdf


def test_duplicate_message_is_the_refusal_wording(catalog: Catalog) -> None:
    report = _pending(catalog, "Report.pdf", SHA_A)
    spaced = _pending(catalog, "a b.pdf", SHA_C)
    for name, sha, field, existing in (
        ("report.PDF", SHA_B, "name", report),
        ("Copy.pdf", SHA_A, "sha256", report),
        ("a-b.pdf", SHA_B, "doc_id", spaced),
    ):
        with pytest.raises(DuplicateDocumentError) as info:
            _pending(catalog, name, sha)
        assert (info.value.field, info.value.existing) == (field, existing)
        assert str(info.value) == duplicate_message(field, name, existing)
    assert duplicate_message("sha256", "Copy.pdf", report) == (
        '"Copy.pdf" has the same content (sha256 aaaaaaaaaaaa…) as the existing document '
        '"Report.pdf" (doc_id report.pdf, status pending); it is not added twice'
    )
    with pytest.raises(ValueError, match="a duplicate field is one of"):
        duplicate_message("title", "x.pdf", report)


def test_list_documents_is_ordered_by_normalized_name(catalog: Catalog) -> None:
    _pending(catalog, "b.pdf", SHA_A)
    _pending(catalog, "A.pdf", SHA_B)
    _pending(catalog, "c.pdf", SHA_C)
    assert [d.name for d in catalog.list_documents()] == ["A.pdf", "b.pdf", "c.pdf"]
    with pytest.raises(ValueError, match="status must be one of"):
        catalog.list_documents(status="done")


def test_delete(catalog: Catalog) -> None:
    _pending(catalog, "a.pdf")
    assert catalog.delete("unknown.pdf") is False
    assert catalog.delete("a.pdf") is True
    assert catalog.find_by_doc_id("a.pdf") is None
    assert catalog.delete("a.pdf") is False
    _pending(catalog, "A.PDF")  # the name is free again after a delete
    assert [d.name for d in catalog.list_documents()] == ["A.PDF"]


# --- documents: identity and duplicates ------------------------------------------------------


def test_duplicate_by_normalised_name(catalog: Catalog) -> None:
    _pending(catalog, " Report.PDF", SHA_A)
    with pytest.raises(DuplicateDocumentError) as info:
        _pending(catalog, "report.pdf", SHA_B)
    assert info.value.field == "name"
    assert info.value.existing.name == "Report.PDF"
    assert str(info.value) == (
        '"report.pdf" is already in the catalog as "Report.PDF" (doc_id report.pdf, '
        "status pending); delete that document first to replace it"
    )
    assert len(catalog.list_documents()) == 1


def test_duplicate_by_nfd_versus_nfc_name(catalog: Catalog) -> None:
    nfc = unicodedata.normalize("NFC", "Règles été.pdf")
    nfd = unicodedata.normalize("NFD", "Règles été.pdf")
    assert nfc != nfd
    _pending(catalog, nfc, SHA_A)
    with pytest.raises(DuplicateDocumentError) as info:
        _pending(catalog, nfd, SHA_B)
    assert info.value.field == "name"
    assert info.value.existing.doc_id == "regles-ete.pdf"


def test_duplicate_content_under_another_name(catalog: Catalog) -> None:
    _pending(catalog, "Retail Code.pdf", SHA_A)
    with pytest.raises(DuplicateDocumentError) as info:
        _pending(catalog, "copy of retail code.pdf", SHA_A)
    assert info.value.field == "sha256"
    assert str(info.value) == (
        '"copy of retail code.pdf" has the same content (sha256 aaaaaaaaaaaa…) as the '
        'existing document "Retail Code.pdf" (doc_id retail-code.pdf, status pending); '
        "it is not added twice"
    )


def test_duplicate_doc_id_from_different_names(catalog: Catalog) -> None:
    assert identity.doc_id("a b.pdf") == identity.doc_id("a-b.pdf") == "a-b.pdf"
    _pending(catalog, "a b.pdf", SHA_A)
    with pytest.raises(DuplicateDocumentError) as info:
        _pending(catalog, "a-b.pdf", SHA_B)
    assert info.value.field == "doc_id"
    assert str(info.value) == (
        '"a-b.pdf" maps to doc_id "a-b.pdf", which the existing document "a b.pdf" '
        "(doc_id a-b.pdf, status pending) already uses; rename the file so its letters "
        "and digits differ"
    )


def test_unique_indexes_hold_without_the_class(catalog: Catalog) -> None:
    _pending(catalog, "Report.pdf", SHA_A)
    now = dt.datetime.now(UTC)
    base = {
        "status": "pending",
        "size_bytes": 1,
        "blob_key": "pdfs/x",
        "created_at": now,
        "updated_at": now,
    }
    rows = [
        {"doc_id": "other", "name": "x", "normalized_name": "report.pdf", "sha256": SHA_B},
        {"doc_id": "other", "name": "x", "normalized_name": "other.pdf", "sha256": SHA_A},
        {"doc_id": "report.pdf", "name": "x", "normalized_name": "x.pdf", "sha256": SHA_C},
    ]
    for row in rows:
        with pytest.raises(IntegrityError), catalog.engine.begin() as conn:
            conn.execute(documents.insert().values(**base, **row))
    assert [d.doc_id for d in catalog.list_documents()] == ["report.pdf"]


@pytest.mark.parametrize(
    "values",
    [
        {"status": "done"},
        {"status": "failed"},  # failed without a reason
        {"status": "pending", "failure_reason": "stale reason"},
        {"status": "ready"},  # ready without counts
        {"status": "pending", "size_bytes": -1},
        {"status": "pending", "sha256": "abc"},
        {"status": "pending", "chunk_count": -5},
    ],
)
def test_check_constraints_hold_without_the_class(catalog: Catalog, values: dict) -> None:
    now = dt.datetime.now(UTC)
    row = {
        "doc_id": "x.pdf",
        "name": "x.pdf",
        "normalized_name": "x.pdf",
        "sha256": SHA_A,
        "size_bytes": 1,
        "blob_key": "pdfs/x",
        "created_at": now,
        "updated_at": now,
        **values,
    }
    with pytest.raises(IntegrityError), catalog.engine.begin() as conn:
        conn.execute(documents.insert().values(**row))
    assert catalog.list_documents() == []


def test_unicode_and_very_long_title(catalog: Catalog) -> None:
    title = "Règlement – 東京 " * 700  # 11,200 characters
    _pending(catalog, "Règlement 東京 v2.pdf")
    row = catalog.mark_ready("reglement-v2.pdf", title=title, pages=1, chunk_count=1)
    assert row.name == "Règlement 東京 v2.pdf"
    assert catalog.get("reglement-v2.pdf").title == title


# --- intake queues ---------------------------------------------------------------------------


def test_document_request_roundtrip(catalog: Catalog) -> None:
    row = catalog.add_document_request(
        "  Retail Energy Code v2 ",
        "Asked about hardship rules",
        "https://www.aer.gov.au/code.pdf",
        checked_indexed_documents=True,
    )
    assert (row.title, row.reason, row.source_url, row.checked_indexed_documents) == (
        "Retail Energy Code v2",
        "Asked about hardship rules",
        "https://www.aer.gov.au/code.pdf",
        True,
    )
    assert (row.status, row.failure_reason, row.decided_at) == ("pending", None, None)
    assert row.created_at.utcoffset() == dt.timedelta(0)
    assert catalog.list_document_requests("pending") == [row]

    decided = catalog.set_document_request_status(row.id, "failed", "download refused: http")
    assert (decided.status, decided.failure_reason) == ("failed", "download refused: http")
    assert decided.decided_at is not None
    assert catalog.list_document_requests("pending") == []
    assert catalog.list_document_requests() == [decided]
    with pytest.raises(ValueError, match="a failed request needs a failure reason"):
        catalog.set_document_request_status(row.id, "failed")
    with pytest.raises(ValueError, match="a decision is approved, rejected or failed"):
        catalog.set_document_request_status(row.id, "pending")
    with pytest.raises(RequestNotFoundError, match="no document_requests row with id 999999"):
        catalog.set_document_request_status(999_999, "approved")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"title": "t" * 301}, "title is 301 characters; the limit is 300"),
        ({"title": "   "}, "title cannot be empty"),
        ({"title": "???"}, "the title '\\?\\?\\?' has no letters or digits"),
        ({"reason": "r" * 2001}, "reason is 2001 characters; the limit is 2000"),
        ({"reason": ""}, "reason cannot be empty"),
        ({"source_url": "https://x.org/" + "a" * 2035}, "source_url is 2049 characters"),
        ({"source_url": "file:///etc/passwd"}, "source_url must be an http\\(s\\) URL"),
        ({"source_url": "javascript:alert(1)"}, "source_url must be an http\\(s\\) URL"),
    ],
)
def test_document_request_caps(catalog: Catalog, kwargs: dict, message: str) -> None:
    arguments = {"title": "Retail Code", "reason": "needed", **kwargs}
    with pytest.raises(ValueError, match=message):
        catalog.add_document_request(**arguments)
    assert catalog.list_document_requests() == []


def test_document_request_at_the_caps_is_accepted(catalog: Catalog) -> None:
    title = "é" * 300  # 300 characters, 600 UTF-8 bytes
    row = catalog.add_document_request(title, "r" * 2000, "https://x.org/" + "a" * 2034)
    assert (len(row.title), len(row.reason), len(row.source_url or "")) == (300, 2000, 2048)


def test_duplicate_pending_title_is_refused(catalog: Catalog) -> None:
    assert title_key("Retail  Code, V2!") == "retail code v2"
    first = catalog.add_document_request("Retail Code, v2", "one")
    with pytest.raises(DuplicateRequestError) as info:
        catalog.add_document_request("retail  code V2", "two")
    assert str(info.value) == (
        f'a request for "Retail Code, v2" is already pending (request #{first.id})'
    )
    catalog.set_document_request_status(first.id, "rejected", "out of scope")
    second = catalog.add_document_request("retail  code V2", "three")  # no longer pending
    assert [r.status for r in catalog.list_document_requests()] == ["rejected", "pending"]
    assert second.reason == "three"


def test_document_request_ceiling(catalog: Catalog) -> None:
    for n in range(3):
        catalog.add_document_request(f"Document {n}", "reason", max_pending=3)
    with pytest.raises(QueueFullError) as info:
        catalog.add_document_request("Document 3", "reason", max_pending=3)
    assert str(info.value) == (
        "the document request queue already holds 3 pending requests (the ceiling is 3); "
        "an operator must review them before more can be added"
    )
    assert len(catalog.list_document_requests("pending")) == 3
    first = catalog.list_document_requests()[0]
    catalog.set_document_request_status(first.id, "approved")
    catalog.add_document_request("Document 3", "reason", max_pending=3)  # room again
    assert len(catalog.list_document_requests("pending")) == 3


def test_pending_title_index_holds_without_the_class(catalog: Catalog) -> None:
    catalog.add_document_request("Retail Code", "one")
    with pytest.raises(IntegrityError), catalog.engine.begin() as conn:
        conn.execute(
            document_requests.insert().values(
                title="RETAIL CODE", title_key="retail code", reason="x"
            )
        )
    with pytest.raises(IntegrityError), catalog.engine.begin() as conn:
        conn.execute(document_requests.insert().values(title="Other", title_key="other", reason=""))
    with pytest.raises(IntegrityError), catalog.engine.begin() as conn:
        conn.execute(
            document_requests.insert().values(
                title="Other", title_key="other", reason="x", status="approved!"
            )
        )
    assert [r.title for r in catalog.list_document_requests()] == ["Retail Code"]


def test_reference_requests_and_sources(catalog: Catalog) -> None:
    url = "https://docs.example.org/api/v2"
    row = catalog.add_reference_request(url, "Example API v2", "Endpoints and auth of the API")
    assert (row.url, row.status) == (url, "pending")
    with pytest.raises(DuplicateRequestError, match=f"a request for {url} is already pending"):
        catalog.add_reference_request(url, "Again", "Again")
    with pytest.raises(ValueError, match="url must be an http\\(s\\) URL"):
        catalog.add_reference_request("ftp://x.org/a", "T", "D")
    with pytest.raises(ValueError, match="description is 2001 characters; the limit is 2000"):
        catalog.add_reference_request("https://x.org/b", "T", "d" * 2001)
    catalog.add_reference_request("https://x.org/b", "T", "D", max_pending=2)
    with pytest.raises(QueueFullError, match="reference request queue already holds 2"):
        catalog.add_reference_request("https://x.org/c", "T", "D", max_pending=2)
    assert [r.url for r in catalog.list_reference_requests("pending")] == [url, "https://x.org/b"]
    assert catalog.set_reference_request_status(row.id, "approved").status == "approved"

    first = catalog.upsert_reference_source(url, "Example API v2", "Endpoints")
    second = catalog.upsert_reference_source(url, "Example API v2", "Endpoints and auth")
    assert second.id == first.id
    assert [(s.url, s.description) for s in catalog.list_reference_sources()] == [
        (url, "Endpoints and auth")
    ]


# --- errors that say what to do --------------------------------------------------------------


def test_missing_schema_says_run_kb_db_init(catalog: Catalog) -> None:
    with catalog.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE documents")
    with pytest.raises(StoreError, match="the catalog schema is missing in .*; run `kb db init`"):
        catalog.list_documents()
    catalog.ensure_schema()
    assert catalog.list_documents() == []


def test_unreachable_postgres_is_store_unavailable_without_the_password() -> None:
    catalog = Catalog(make_engine("postgresql://kb:s3cret-pw@127.0.0.1:1/kb"))
    with pytest.raises(StoreUnavailableError) as info:
        catalog.list_documents()
    message = str(info.value)
    assert message.startswith(
        "catalog database postgresql+psycopg://kb:***@127.0.0.1:1/kb is unavailable:"
    )
    assert "s3cret-pw" not in message


def test_unopenable_sqlite_is_store_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "no-such-folder" / "kb.sqlite"
    catalog = Catalog(make_engine(f"sqlite:///{path}"))
    with pytest.raises(StoreUnavailableError, match="unable to open database file"):
        catalog.ensure_schema()


def test_sqlite_write_transactions_are_immediate(tmp_path: Path) -> None:
    """A second writer waits for (here: times out on) the first writer's lock instead of
    interleaving a read-then-write, which is what makes the queue ceiling exact."""
    url = f"sqlite:///{tmp_path / 'kb.sqlite'}"
    first = Catalog(make_engine(url))
    first.ensure_schema()
    with first._write():  # noqa: SLF001 - holds the write lock
        impatient = make_engine(url, connect_args={"timeout": 0})

        @sa.event.listens_for(impatient, "connect")
        def _no_wait(dbapi_connection, _record) -> None:  # noqa: ANN001
            dbapi_connection.execute("PRAGMA busy_timeout = 0")

        with pytest.raises(StoreUnavailableError, match="database is locked"):
            Catalog(impatient).add_document_request("Retail Code", "reason")
        impatient.dispose()
    assert first.list_document_requests() == []


# --- factory ---------------------------------------------------------------------------------


def test_open_catalog_creates_home_and_schema(tmp_path: Path) -> None:
    from kb_shared.settings import Settings
    from kb_shared.stores.factory import open_blob_store, open_catalog

    settings = Settings(home=tmp_path / "new" / "home")
    catalog = open_catalog(settings)
    assert (tmp_path / "new" / "home" / "kb.sqlite").is_file()
    assert catalog.list_documents() == []
    reader = open_catalog(settings, reader=True)  # same file; the reader never creates
    assert reader.list_document_requests() == []
    blobs = open_blob_store(settings)
    assert blobs.local_path("pdfs/a.pdf") == tmp_path / "new" / "home" / "blobs" / "pdfs" / "a.pdf"
    catalog.engine.dispose()
    reader.engine.dispose()


def test_open_catalog_as_reader_does_not_create_the_schema(tmp_path: Path) -> None:
    from kb_shared.settings import Settings
    from kb_shared.stores.factory import open_catalog

    reader = open_catalog(Settings(home=tmp_path / "home"), reader=True)
    with pytest.raises(StoreError, match="run `kb db init`"):
        reader.list_documents()
    reader.engine.dispose()


def test_open_vector_index_embedded(tmp_path: Path) -> None:
    from kb_shared.settings import Settings
    from kb_shared.stores.factory import open_vector_index
    from kb_shared.stores.vectors_sqlite import SqliteVectorIndex

    index = open_vector_index(Settings(home=tmp_path / "home"))
    assert isinstance(index, SqliteVectorIndex)
    assert (tmp_path / "home").is_dir()
    index.close()


def test_open_graph_store_embedded_shares_the_catalog_engine(tmp_path: Path) -> None:
    from kb_shared.settings import Settings
    from kb_shared.stores.factory import open_catalog, open_graph_store
    from kb_shared.stores.graph_sql import SqlGraphStore

    settings = Settings(home=tmp_path / "home")
    catalog = open_catalog(settings)
    graph = open_graph_store(settings, catalog.engine)
    assert isinstance(graph, SqlGraphStore)
    catalog.engine.dispose()
