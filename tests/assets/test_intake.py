"""Intake: the identity rules of DESIGN.md applied to batches of files by ``admit``, which
also gives every added file its Dagster partition."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import dagster as dg
import pytest

from kb_assets.constants import DOCUMENTS
from kb_assets.intake import IntakeOutcome, admit
from kb_assets.resources import StoresResource
from kb_shared.errors import IntakeError, StoreUnavailableError
from kb_shared.stores.catalog import Catalog

PDF_A = b"%PDF-1.7\n% first document\n%%EOF\n"
PDF_B = b"%PDF-1.7\n% second document\n%%EOF\n"
PDF_C = b"%PDF-1.7\n% third document\n%%EOF\n"


def write(folder: Path, name: str, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(data)
    return path


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[StoresResource]:
    resource = StoresResource(home=str(tmp_path / "home"))
    yield resource
    resource.close()


@pytest.fixture
def instance() -> dg.DagsterInstance:
    return dg.DagsterInstance.ephemeral()


def summary(outcomes: Sequence[IntakeOutcome]) -> list[tuple[str, str, str | None]]:
    return [(o.name, o.status, o.doc_id) for o in outcomes]


def test_new_files_are_added_with_blob_pending_row_and_partition(
    tmp_path: Path, stores, instance
) -> None:
    a = write(tmp_path / "in", "Rule Book.PDF", PDF_A)
    outcomes = admit([a], stores, instance)
    assert summary(outcomes) == [("Rule Book.PDF", "added", "rule-book.pdf")]
    row = stores.catalog().find_by_doc_id("rule-book.pdf")
    assert (row.status, row.name, row.size_bytes) == ("pending", "Rule Book.PDF", len(PDF_A))
    assert row.blob_key == "pdfs/rule-book.pdf"
    assert stores.blobs().get("pdfs/rule-book.pdf") == PDF_A
    assert instance.get_dynamic_partitions(DOCUMENTS) == ["rule-book.pdf"]


def test_names_matching_after_normalisation_are_duplicates(tmp_path: Path, stores, instance) -> None:
    first = write(tmp_path / "one", "Report.pdf", PDF_A)
    admit([first], stores, instance)
    again = write(tmp_path / "two", " report.PDF", PDF_B)
    (outcome,) = admit([again], stores, instance)
    assert (outcome.status, outcome.doc_id) == ("duplicate", "report.pdf")
    assert outcome.reason == (
        "'Report.pdf' is already in the corpus (doc_id report.pdf, pending). To add it as a new "
        f"version: `kb add --new-version {again}`; to replace it entirely: "
        "`kb delete report.pdf` first"
    )
    # the existing document's bytes are untouched
    assert stores.blobs().get("pdfs/report.pdf") == PDF_A


def test_the_same_file_again_gets_no_new_version_command(tmp_path: Path, stores, instance) -> None:
    admit([write(tmp_path / "one", "Report.pdf", PDF_A)], stores, instance)
    stores.catalog().mark_ready("report.pdf", pages=1, chunk_count=1)
    (outcome,) = admit([write(tmp_path / "two", "Report.pdf", PDF_A)], stores, instance)
    assert (outcome.status, outcome.doc_id, outcome.hint) == ("duplicate", "report.pdf", "")
    assert outcome.reason == (
        "'Report.pdf' is already in the corpus (doc_id report.pdf, ready) with the same "
        "content; to replace it entirely: `kb delete report.pdf` first"
    )


def test_nfd_name_is_a_duplicate_of_nfc(tmp_path: Path, stores, instance) -> None:
    nfc = write(tmp_path / "a", "R\u00e9sum\u00e9.pdf", PDF_A)
    nfd = write(tmp_path / "b", "Re\u0301sume\u0301.pdf", PDF_B)
    outcomes = admit([nfc, nfd], stores, instance)
    assert [o.status for o in outcomes] == ["added", "duplicate"]
    assert outcomes[1].reason == "same name as 'R\u00e9sum\u00e9.pdf' earlier in this batch"


def test_batch_repeats_collapse_to_the_first(tmp_path: Path, stores, instance) -> None:
    a = write(tmp_path / "x", "notes.pdf", PDF_A)
    b = write(tmp_path / "y", "NOTES.pdf", PDF_B)
    c = write(tmp_path / "z", "copy of notes.pdf", PDF_A)
    outcomes = admit([a, b, c], stores, instance)
    assert summary(outcomes) == [
        ("notes.pdf", "added", "notes.pdf"),
        ("NOTES.pdf", "duplicate", "notes.pdf"),
        ("copy of notes.pdf", "duplicate", None),
    ]
    assert outcomes[2].reason == "identical content to 'notes.pdf' earlier in this batch"
    assert [r.doc_id for r in stores.catalog().list_documents()] == ["notes.pdf"]


def test_identical_content_under_another_name_is_refused(tmp_path: Path, stores, instance) -> None:
    admit([write(tmp_path / "a", "original.pdf", PDF_A)], stores, instance)
    (outcome,) = admit([write(tmp_path / "b", "renamed.pdf", PDF_A)], stores, instance)
    assert outcome.status == "refused"
    assert outcome.reason == "identical content is already in the corpus as 'original.pdf'"
    assert stores.catalog().find_by_doc_id("renamed.pdf") is None
    assert not stores.blobs().exists("pdfs/renamed.pdf")


def test_names_that_slug_to_the_same_id_are_refused(tmp_path: Path, stores, instance) -> None:
    admit([write(tmp_path / "a", "a b.pdf", PDF_A)], stores, instance)
    (outcome,) = admit([write(tmp_path / "b", "a-b.pdf", PDF_B)], stores, instance)
    assert outcome.status == "refused"
    assert outcome.reason == "its id 'a-b.pdf' is taken by 'a b.pdf'; rename the file"


def test_folders_recurse_and_explicit_non_pdfs_are_refused(tmp_path: Path, stores, instance) -> None:
    folder = tmp_path / "docs"
    write(folder, "b.pdf", PDF_B)
    write(folder / "sub", "a.pdf", PDF_A)
    write(folder, "readme.docx", b"not a document kb reads")  # ignored inside a folder
    text = write(tmp_path, "notes.docx", b"hello")
    empty = write(tmp_path, "empty.pdf", b"")
    outcomes = admit([folder, text, empty, tmp_path / "missing.pdf"], stores, instance)
    assert [(o.name, o.status, o.reason) for o in outcomes] == [
        ("b.pdf", "added", ""),
        ("a.pdf", "added", ""),
        ("notes.docx", "refused", "not a document kb reads (.pdf, .md, .txt)"),
        ("empty.pdf", "refused", "the file is empty"),
        ("missing.pdf", "refused", "no such file"),
    ]


def test_oversized_files_are_refused(tmp_path: Path, instance) -> None:
    stores = StoresResource(home=str(tmp_path / "home"), overrides={"max_upload_bytes": "10"})
    (outcome,) = admit([write(tmp_path, "big.pdf", PDF_A)], stores, instance)
    assert outcome.status == "refused"
    assert outcome.reason == (
        f"{len(PDF_A)} bytes is over the 10-byte limit (KB_MAX_UPLOAD_BYTES)"
    )


class _BrokenCatalog:
    """A catalog whose lookups fail, as when the database is down."""

    def __getattr__(self, name: str):
        def fail(*args, **kwargs):
            raise StoreUnavailableError("could not connect to postgresql://db:5432/kb")

        return fail


class _BrokenCatalogStores(StoresResource):
    """Stores whose catalog lookups fail."""

    def catalog(self) -> Catalog:
        return _BrokenCatalog()  # type: ignore[return-value]


def test_a_failing_duplicate_lookup_refuses_the_whole_batch(tmp_path: Path, instance) -> None:
    files = [write(tmp_path, "one.pdf", PDF_A), write(tmp_path, "two.pdf", PDF_B)]
    stores = _BrokenCatalogStores(home=str(tmp_path / "home"))
    with pytest.raises(IntakeError, match="nothing was added"):
        admit(files, stores, instance)
    assert stores.blobs().list("") == []
    assert instance.get_dynamic_partitions(DOCUMENTS) == []


def test_real_catalog_on_a_closed_port_fails_closed(tmp_path: Path, instance) -> None:
    stores = StoresResource(
        home=str(tmp_path / "home"),
        overrides={"database_url": "postgresql+psycopg://kb:pw@127.0.0.1:1/kb?connect_timeout=2"},
    )
    with pytest.raises(IntakeError, match="could not read the catalog"):
        admit([write(tmp_path, "c.pdf", PDF_C)], stores, instance)
    assert stores.blobs().list("") == []


class _RefusingInstance:
    """A Dagster instance that cannot take new partitions (its storage is read-only)."""

    def add_dynamic_partitions(self, name: str, keys: Sequence[str]) -> None:
        raise PermissionError("attempt to write a readonly database")


def test_a_refused_partition_removes_the_batch_again(tmp_path: Path, stores) -> None:
    files = [write(tmp_path, "one.pdf", PDF_A), write(tmp_path, "two.pdf", PDF_B)]
    refusing: dg.DagsterInstance = _RefusingInstance()  # type: ignore[assignment]
    with pytest.raises(IntakeError, match="did not take the new documents' partitions"):
        admit(files, stores, refusing)
    assert stores.catalog().list_documents() == []
    assert stores.blobs().list("") == []
