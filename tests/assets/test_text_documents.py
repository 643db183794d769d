"""Markdown and plain-text documents (``kb_shared.providers.text_markdown``): intake of ``.md``
and ``.txt`` files (by name and from folders), the refusal of binary ones with nothing
written, and builds on fake providers in which the PDF converter and the figure locator are
never called, chunks have no pages and fenced code stays whole. The real build through the
``kb`` CLI is at the end (marked slow)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from typer.testing import CliRunner

from kb_assets.cli import main as cli
from kb_assets.assets import CORPUS_ASSETS
from kb_assets.constants import BUILD_JOB, CHUNKS, DOCUMENTS, FIGURES, MARKDOWN
from kb_assets.jobs import kb_resources
from kb_assets.intake import IntakeStatus, admit
from kb_assets.io_manager import StepRecords
from kb_assets.jobs import build_documents_job
from kb_assets.resources import StoresResource
from kb_shared.ingest.chunking import chunk_markdown
from kb_shared.search.citations import PointPayload
from kb_shared.errors import ConversionError
from kb_shared.providers.text_markdown import TextMarkdownConverter, is_text_document
from kb_shared.stores.vectors import KIND_FIGURE, KIND_TEXT
from tests.assets.fake_providers import FakeProviders
from tests.fakes import tiny_pdf

GUIDE = "Connection Guide.md"
GUIDE_ID = "connection-guide.md"
CODE = "```sh\n# not a heading: a shell comment\nkb add guide.md\n```"
GUIDE_TEXT = (
    "# Connection Guide\r\n\r\n"
    "Read this before connecting.\r\n\r\n"
    "## 1 Notifications\r\n\r\n"
    "The Retailer must notify the Distributor before a site is connected.\r\n\r\n"
    f"{CODE}\r\n\r\n"
    "## 2 Records\r\n\r\n"
    "The Distributor keeps the register.\r\n"
)
NOTES = "Field Notes.txt"
NOTES_ID = "field-notes.txt"
NOTES_TEXT = (
    "# a hash line in plain text is not a heading\n"
    "The Retailer calls the Distributor.\n\n\n"
    "Second paragraph,\n  with its line break kept.\n"
)


def write(folder: Path, name: str, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(data)
    return path


def materialize(
    stores: StoresResource, providers: FakeProviders, instance: dg.DagsterInstance, doc: str
) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        CORPUS_ASSETS, partition_key=doc, resources=kb_resources(stores, providers),
        instance=instance,
    )


def metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict:
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        if materialization.asset_key.path[-1] == asset:
            return {k: v.value for k, v in materialization.metadata.items()}
    raise AssertionError(f"{asset} was not materialised")


# --------------------------------------------------------------------------------------
# The pass-through converter
# --------------------------------------------------------------------------------------
def test_markdown_passes_through_without_pages_and_takes_its_title_outside_fences() -> None:
    data = (
        "\ufeff```\r\n# Not the title\r\n```\r\n## Intro\r\n\r\n<!-- page 2 -->\r\n"
        "# Guide\r\n\r\nText.\r\n\r\n"
    ).encode()
    converted = TextMarkdownConverter().convert(data, "guide.md")
    assert converted.markdown == (
        "```\n# Not the title\n```\n## Intro\n\n\\<!-- page 2 -->\n# Guide\n\nText.\n"
    )
    assert (converted.title, converted.pages, converted.version, converted.figures) == (
        "Guide", 0, "", ()
    )
    assert converted.converter == "text-passthrough-r2"
    assert all(c.page_start is None for c in chunk_markdown(converted.markdown, "guide.md"))


@pytest.mark.parametrize("name", ["hostile.md", "hostile.txt"])
def test_invisible_controls_become_spaces_and_right_to_left_text_stays(name: str) -> None:
    # A terminal escape, a bell, DEL, a C1 control and a right-to-left override (which would
    # make the line display "...AEMO ytfiton" backwards) are spaces; Arabic, tabs and the
    # line breaks are kept as they are.
    data = (
        "The Retailer must\x07 notify\x1b[31m AEMO\x7f within\x85 2 days.\r\n"
        "\u202eThe Distributor\u202c keeps\tthe register. يجب إخطار الموزع\n"
    ).encode()
    converted = TextMarkdownConverter().convert(data, name)
    assert converted.markdown == (
        "The Retailer must  notify [31m AEMO  within  2 days.\n"
        " The Distributor  keeps\tthe register. يجب إخطار الموزع\n"
    )


def test_plain_text_becomes_paragraphs_with_markdown_structure_escaped() -> None:
    text = (
        "  # not a heading\nline two\n \n\n\n| a | b |\n|---|---|\n~~~\n```\n"
        "<!-- page 3 -->\n- a list item stays\n\n"
    )
    converted = TextMarkdownConverter().convert(text.encode(), "Notes.TXT")
    assert converted.markdown == (
        "  \\# not a heading\nline two\n\n| a | b |\n\\|---|---|\n\\~~~\n\\```\n"
        "\\<!-- page 3 -->\n- a list item stays\n"
    )
    assert converted.title == ""
    (chunk,) = chunk_markdown(converted.markdown, "notes.txt")
    assert (chunk.kind, chunk.heading_path, chunk.page_start) == ("text", (), None)


@pytest.mark.parametrize("name", ["blank.md", "blank.txt"])
def test_a_file_without_text_is_refused_by_the_converter(name: str) -> None:
    with pytest.raises(ConversionError) as refused:
        TextMarkdownConverter().convert(b"\xef\xbb\xbf \r\n\t\n", name)
    assert str(refused.value) == f"{name} has no text: it is empty or only whitespace"


@pytest.mark.parametrize(
    ("name", "text"),
    [("a.md", True), ("A.TXT", True), (" b.Md ", True), ("c.pdf", False), ("d.markdown", False)],
)
def test_text_documents_are_known_by_their_extension(name: str, text: bool) -> None:
    assert is_text_document(name) is text


# --------------------------------------------------------------------------------------
# Intake
# --------------------------------------------------------------------------------------
def test_md_and_txt_files_are_admitted_by_name_and_from_folders(
    tmp_path: Path, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    folder = tmp_path / "docs"
    write(folder, "a.pdf", tiny_pdf("a"))
    write(folder / "sub", "Guide.MD", b"# Guide\n\nText.\n")
    write(folder, "picture.png", b"\x89PNG\r\n\x1a\n")  # not a document: ignored in a folder
    notes = write(tmp_path, NOTES, NOTES_TEXT.encode())
    outcomes = admit([folder, notes], stores, instance)
    assert [(o.name, o.status, o.doc_id) for o in outcomes] == [
        ("a.pdf", "added", "a.pdf"),
        ("Guide.MD", "added", "guide.md"),
        (NOTES, "added", NOTES_ID),
    ]
    blobs = stores.blobs()
    assert blobs.get("pdfs/guide.md") == b"# Guide\n\nText.\n"  # the original, one key for all
    assert blobs.get(f"pdfs/{NOTES_ID}") == NOTES_TEXT.encode()
    assert stores.catalog().get(NOTES_ID).blob_key == f"pdfs/{NOTES_ID}"
    assert sorted(instance.get_dynamic_partitions(DOCUMENTS)) == ["a.pdf", NOTES_ID, "guide.md"]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"# Title\n\x00\x01\x02", "notes.md is binary, not text: it holds a NUL byte at byte 8; "
         "add a UTF-8 text or Markdown file"),
        ("# Café\n".encode("latin-1"), "notes.md is not valid UTF-8 text (bad byte at byte 5); "
         "save it as UTF-8 and add it again"),
        (tiny_pdf("renamed"), "notes.md is a PDF, not text: rename it to end in .pdf and add it "
         "again"),
    ],
    ids=["nul-bytes", "latin-1", "pdf-renamed"],
)
def test_a_binary_md_is_refused_with_its_reason_and_nothing_written(
    tmp_path: Path, stores: StoresResource, instance: dg.DagsterInstance, data: bytes,
    reason: str,
) -> None:
    (outcome,) = admit([write(tmp_path, "notes.md", data)], stores, instance)
    assert (outcome.status, outcome.doc_id, outcome.reason) == (IntakeStatus.REFUSED, None, reason)
    assert stores.catalog().list_documents() == []
    assert stores.blobs().list("") == []
    assert instance.get_dynamic_partitions(DOCUMENTS) == []


# --------------------------------------------------------------------------------------
# Builds on the fake providers
# --------------------------------------------------------------------------------------
def test_a_markdown_document_builds_without_pages_figures_or_the_pdf_converter(
    tmp_path: Path, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    admit([write(tmp_path, GUIDE, GUIDE_TEXT.encode())], stores, instance)
    result = materialize(stores, providers, instance, GUIDE_ID)
    assert result.success
    # the PDF converter and the figure locator were never called
    assert (providers.converter_.calls, providers.locator_.calls) == ([], [])

    row = stores.catalog().get(GUIDE_ID)
    assert (row.status, row.title, row.pages, row.chunk_count, row.figure_count) == (
        "ready", "Connection Guide", 0, 3, 0
    )
    assert (row.converter, row.relationship_count) == ("text-passthrough-r2", 1)
    records = StepRecords(stores.blobs())
    assert records.previous_markdown(GUIDE_ID).markdown == GUIDE_TEXT.replace("\r\n", "\n")
    chunk_list = records.load(CHUNKS, GUIDE_ID)
    assert [(c.text, c.heading_path, c.page_start, c.page_end) for c in chunk_list] == [
        ("# Connection Guide\n\nRead this before connecting.", ("Connection Guide",), None, None),
        (
            "## 1 Notifications\n\nThe Retailer must notify the Distributor before a site is "
            f"connected.\n\n{CODE}",
            ("Connection Guide", "1 Notifications"), None, None,
        ),
        (
            "## 2 Records\n\nThe Distributor keeps the register.",
            ("Connection Guide", "2 Records"), None, None,
        ),
    ]

    index = stores.existing_vectors()
    assert index.list_ids(GUIDE_ID, KIND_FIGURE) == []
    payload = PointPayload.from_payload(index.fetch([f"{GUIDE_ID}-1"])[0].payload)
    assert (payload.page_start, payload.page_end, payload.section, payload.pdf_key) == (
        None, None, "Connection Guide › 1 Notifications", f"pdfs/{GUIDE_ID}"
    )
    assert payload.citation.header(1) == "[1] Connection Guide — 1 Notifications"
    assert [e.chunk_id for e in stores.graph().relationships_for_document(GUIDE_ID)] == [
        f"{GUIDE_ID}-1"
    ]
    assert metadata(result, FIGURES)["figures"] == 0
    assert metadata(result, MARKDOWN)["pages"] == 0


def test_a_text_document_becomes_paragraphs_cited_by_its_name(
    tmp_path: Path, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    admit([write(tmp_path, NOTES, NOTES_TEXT.encode())], stores, instance)
    assert materialize(stores, providers, instance, NOTES_ID).success
    (chunk,) = StepRecords(stores.blobs()).load(CHUNKS, NOTES_ID)
    assert (chunk.text, chunk.heading_path, chunk.page_start) == (
        "\\# a hash line in plain text is not a heading\nThe Retailer calls the Distributor.\n\n"
        "Second paragraph,\n  with its line break kept.",
        (), None,
    )
    row = stores.catalog().get(NOTES_ID)
    assert (row.status, row.title, row.pages, row.figure_count) == ("ready", "", 0, 0)
    (point,) = stores.existing_vectors().fetch([f"{NOTES_ID}-0"])
    assert PointPayload.from_payload(point.payload).citation.header(2) == f"[2] {NOTES}"


def test_a_whitespace_only_markdown_file_fails_at_markdown_with_its_reason(
    tmp_path: Path, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    admit([write(tmp_path, "blank.md", b" \n\t\n")], stores, instance)
    defs = dg.Definitions(
        assets=CORPUS_ASSETS, jobs=[build_documents_job],
        resources=kb_resources(stores, providers), executor=dg.in_process_executor,
    )
    result = defs.resolve_job_def(BUILD_JOB).execute_in_process(
        partition_key="blank.md", instance=instance, raise_on_error=False
    )
    assert not result.success
    row = stores.catalog().get("blank.md")
    assert (row.status, row.failure_reason) == (
        "failed", "markdown: blank.md has no text: it is empty or only whitespace"
    )
    assert stores.existing_vectors() is None or stores.existing_vectors().count("blank.md") == 0


# --------------------------------------------------------------------------------------
# The real build through the CLI
# --------------------------------------------------------------------------------------
@pytest.mark.slow
def test_kb_add_and_build_of_a_markdown_file_on_the_real_providers(tmp_path: Path) -> None:
    guide = write(tmp_path / "in", GUIDE, GUIDE_TEXT.encode())
    runner = CliRunner()
    added = runner.invoke(cli.app, ["add", str(guide)])
    assert added.exit_code == 0, added.output
    built = runner.invoke(cli.app, ["build"])
    assert built.exit_code == 0, built.output
    stores = StoresResource()
    try:
        row = stores.catalog().get(GUIDE_ID)
        assert (row.status, row.title, row.pages, row.chunk_count, row.figure_count) == (
            "ready", "Connection Guide", 0, 3, 0
        )
        index = stores.existing_vectors()
        assert sorted(index.list_ids(GUIDE_ID, KIND_TEXT)) == [f"{GUIDE_ID}-{i}" for i in range(3)]
        payload = PointPayload.from_payload(index.fetch([f"{GUIDE_ID}-1"])[0].payload)
        assert (payload.page_start, payload.section) == (
            None, "Connection Guide › 1 Notifications"
        )
    finally:
        stores.close()
