"""Printed page labels (issue 16, "Reading hard PDFs correctly"): a PDF whose
``/PageLabels`` run A–M, i–ii, 1–5 over 20 physical pages is cited by its printed labels with
the physical page beside them ("p. iv (PDF page 6)"), while links keep ``#page=<physical>``;
the same convention runs through the Markdown markers, the chunks, the payload, the MCP
rendering and read_doc, for the local and the cloud converter."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from kb_shared.ingest.chunking import chunk_markdown, page_marker
from kb_shared.ingest.pdf import page_labels
from kb_shared.search.citations import Citation, PointPayload, format_pages
from kb_shared.providers.local_markdown import PymupdfMarkdownConverter
from kb_shared.search.retrieval import Passage
from kb_shared.stores.vectors import KIND_TEXT, StoredPoint

#: The printed label of each physical page 1..20 of ``labelled_pdf``.
LABELS = [*"ABCDEFGHIJKLM", "i", "ii", "1", "2", "3", "4", "5"]


def labelled_pdf() -> bytes:
    """20 pages labelled A–M (appendix letters), i–ii (roman front matter), 1–5; each page
    holds a heading and one sentence naming its physical page."""
    doc = pymupdf.open()
    for number in range(1, 21):
        page = doc.new_page()
        page.insert_text((72, 200), f"Clause {number} Obligations", fontsize=16, fontname="hebo")
        page.insert_text(
            (72, 240),
            f"The participant keeps record number {number * 11} for audit topic {number}.",
            fontsize=11,
        )
    doc.set_page_labels(
        [
            {"startpage": 0, "prefix": "", "style": "A", "firstpagenum": 1},
            {"startpage": 13, "prefix": "", "style": "r", "firstpagenum": 1},
            {"startpage": 15, "prefix": "", "style": "D", "firstpagenum": 1},
        ]
    )
    return doc.tobytes()


@pytest.fixture(scope="module")
def converted_markdown() -> str:
    """The local converter's Markdown of ``labelled_pdf`` (about 2-3 s)."""
    return PymupdfMarkdownConverter().convert(labelled_pdf(), "labelled.pdf").markdown


def test_page_labels_reads_the_pdfs_printed_labels() -> None:
    doc = pymupdf.open("pdf", labelled_pdf())
    assert page_labels(doc) == LABELS
    unlabelled = pymupdf.open()
    unlabelled.new_page()
    assert page_labels(unlabelled) == [""]


@pytest.mark.parametrize(
    ("number", "label", "marker"),
    [
        (6, "iv", "<!-- page 6 (p. iv) -->"),
        (3, "3", "<!-- page 3 -->"),  # the label is the number: nothing to add
        (3, "", "<!-- page 3 -->"),
        (9, "A--1", "<!-- page 9 (p. A-1) -->"),  # cannot end the HTML comment
        (2, " Annex  B ", "<!-- page 2 (p. Annex B) -->"),
    ],
)
def test_page_marker_carries_a_label_only_when_it_differs(
    number: int, label: str, marker: str
) -> None:
    assert page_marker(number, label) == marker


def test_page_marker_refuses_page_zero() -> None:
    with pytest.raises(ValueError, match="1-based"):
        page_marker(0, "i")


@pytest.mark.parametrize(
    ("args", "text"),
    [
        ((6, 6, "iv", "iv"), "p. iv (PDF page 6)"),
        ((14, 16, "i", "1"), "pp. i\u20131 (PDF pages 14\u201316)"),
        ((6, 7, "", ""), "pp. 6\u20137"),
        ((6, 6, "6", "6"), "p. 6"),
        ((5, 6, "5", "iv"), "pp. 5\u2013iv (PDF pages 5\u20136)"),
        ((5, 6, "", "iv"), "pp. 5\u2013iv (PDF pages 5\u20136)"),  # an end without a label
        ((3, 4, "x", "x"), "pp. x (PDF pages 3\u20134)"),
        ((None, None, "iv", "iv"), ""),
    ],
)
def test_format_pages_shows_printed_labels_beside_physical_pages(
    args: tuple, text: str
) -> None:
    assert format_pages(*args) == text


def test_the_converter_writes_the_labels_into_its_page_markers(converted_markdown: str) -> None:
    markers = [line for line in converted_markdown.splitlines() if line.startswith("<!-- page")]
    assert markers == [f"<!-- page {n} (p. {label}) -->" for n, label in enumerate(LABELS, 1)]
    unlabelled = PymupdfMarkdownConverter().convert(
        _one_page_pdf("A sentence on a page without a label."), "plain.pdf"
    )
    assert unlabelled.markdown.startswith("<!-- page 1 -->\n")


def _one_page_pdf(text: str) -> bytes:
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 200), text, fontsize=11)
    return doc.tobytes()


def test_chunks_carry_the_labels_of_their_first_and_last_page(converted_markdown: str) -> None:
    chunks = chunk_markdown(converted_markdown, "labelled.pdf")
    by_page = {c.page_start: c for c in chunks}
    assert sorted(by_page) == list(range(1, 21))  # one chunk per page (a heading each)
    for number, label in enumerate(LABELS, 1):
        chunk = by_page[number]
        assert (chunk.page_end, chunk.page_label_start, chunk.page_label_end) == (
            number, label, label
        )
        assert f"record number {number * 11} " in chunk.text
    # a chunk across a page break names both ends' labels
    spanning = chunk_markdown(
        "<!-- page 14 (p. i) -->\n\nOne sentence\n\n<!-- page 16 (p. 1) -->\n\ngoes on.", "d"
    )
    spans = [(c.page_start, c.page_end, c.page_label_start, c.page_label_end) for c in spanning]
    assert spans == [(14, 16, "i", "1")]


def _passage(chunk, number: int = 1) -> Passage:
    """The search result of a chunk as the embeddings asset would store it."""
    from kb_assets.assets.embeddings import chunk_inputs  # noqa: PLC0415 - dagster is heavy
    from kb_assets.outputs import MarkdownDocument  # noqa: PLC0415

    document = MarkdownDocument(
        markdown="", pages=20, title="Labelled Rules", version="", converter="test",
        figures=(), seconds=0.0, doc_id="labelled.pdf", name="labelled.pdf",
        provider="test", sha256="0" * 64, size_bytes=1,
    )
    (prepared,) = chunk_inputs(document, [chunk], "model")
    payload = prepared.payload.to_payload()
    point = StoredPoint(chunk.id, chunk.document, KIND_TEXT, chunk.text, payload)
    return Passage.of(point, number)


def test_citations_and_links_of_labelled_pages(converted_markdown: str) -> None:
    from kb_mcp.links import Links  # noqa: PLC0415
    from kb_mcp.render import render_passage  # noqa: PLC0415

    chunks = {c.page_start: c for c in chunk_markdown(converted_markdown, "labelled.pdf")}
    links = Links("http://kb.test")
    expected = {
        1: "p. A (PDF page 1)",
        13: "p. M (PDF page 13)",
        15: "p. ii (PDF page 15)",
        16: "p. 1 (PDF page 16)",
        20: "p. 5 (PDF page 20)",
    }
    for page, pages in expected.items():
        passage = _passage(chunks[page])
        assert passage.citation.pages == pages
        text = render_passage(passage, links)
        header, locator = text.split("\n")[:2]
        assert header == f"[1] Labelled Rules \u2014 {pages} \u2014 Clause {page} Obligations"
        assert locator == (
            f"chunk {chunks[page].index} of labelled.pdf \u00b7 [Source page {pages[3:]}]"
            f"(http://kb.test/files/pdfs/labelled.pdf#page={page})"
        )


def test_payloads_without_labels_read_as_before() -> None:
    old = {
        "doc_id": "d", "name": "d.pdf", "title": "T", "version": "", "page_start": 6,
        "page_end": 7, "section": "", "chunk_index": 0, "pdf_key": "pdfs/d.pdf",
        "markdown_key": None,
    }
    payload = PointPayload.from_payload(old)
    assert (payload.page_label_start, payload.page_label_end) == ("", "")
    assert payload.to_payload() == old  # no label keys written: fingerprints do not move
    assert Citation.from_payload(old).pages == "pp. 6\u20137"
    labelled = PointPayload.build(
        doc_id="d", name="d.pdf", title="T", version="", page_start=6, page_end=6,
        page_label_start="iv", page_label_end="iv",
    )
    again = PointPayload.from_payload(labelled.to_payload())
    assert (again.page_label_start, again.page_label_end) == ("iv", "iv")
    assert again.citation.pages == "p. iv (PDF page 6)"


def test_chunk_labels_survive_the_chunks_parquet_round_trip() -> None:
    from kb_assets.io_manager import chunks_from_parquet, chunks_to_parquet  # noqa: PLC0415

    markdown = "<!-- page 6 (p. iv) -->\n\nText.\n\n<!-- page 7 -->\n\n# H\n\nMore."
    chunks = chunk_markdown(markdown, "d")
    assert chunks_from_parquet(chunks_to_parquet(chunks)) == chunks
    assert [(c.page_label_start, c.page_label_end) for c in chunks] == [("iv", "iv"), ("", "")]


@pytest.mark.slow
def test_a_labelled_pdf_built_and_served_cites_printed_pages(tmp_path: Path) -> None:
    """The real pipeline (intake, one Dagster run) and the MCP server's search_docs and
    read_doc on the 20-page labelled PDF."""
    import anyio  # noqa: PLC0415

    from kb_mcp.server import build_server  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415
    from tests.mcp.pipeline import build_corpus  # noqa: PLC0415

    pdf = tmp_path / "Labelled Rules.pdf"
    pdf.write_bytes(labelled_pdf())
    home = tmp_path / "home"
    build_corpus(home, [pdf])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KB_HOME", str(home))
        settings = Settings()
    server = build_server(settings, warm=False)

    async def call(name: str, arguments: dict) -> str:
        from mcp import Client  # noqa: PLC0415

        async with Client(server) as client:
            result = await client.call_tool(name, arguments)
        assert not result.is_error, result.content
        return result.content[0].text

    found = anyio.run(call, "search_docs", {"query": "record number 165 audit topic 15"})
    lines = found.split("\n")
    first = next(i for i, line in enumerate(lines) if line.startswith("[1] "))
    assert lines[first].endswith(" \u2014 p. ii (PDF page 15) \u2014 Clause 15 Obligations")
    assert lines[first + 1].startswith(
        "chunk 14 of labelled-rules.pdf \u00b7 [Source page ii (PDF page 15)]("
    )
    assert lines[first + 1].endswith("/files/pdfs/labelled-rules.pdf#page=15)")
    assert "\u2014 p. 1 (PDF page 16) \u2014 Clause 16 Obligations" in found  # another result
    read = anyio.run(call, "read_doc", {"document": "Labelled Rules.pdf", "chunk_numbers": [0]})
    assert read.split("\n")[0].endswith(" \u2014 p. A (PDF page 1)")  # heading = title
    assert "[Source page A (PDF page 1)](" in read and "labelled-rules.pdf#page=1)" in read


def test_the_cloud_converter_writes_the_labels_into_its_page_markers() -> None:
    import httpx2  # noqa: PLC0415

    from kb_shared.providers.cloud_markdown import ClaudeMarkdownConverter  # noqa: PLC0415
    from tests.providers.cloud.conftest import (  # noqa: PLC0415
        Recorder,
        anthropic_client,
        claude_message,
        no_wait,
    )

    answer = "\n\n".join(f"<!-- page {k} -->\n\nText of page {k}." for k in range(1, 21))
    recorder = Recorder(lambda request, i: httpx2.Response(200, json=claude_message(answer)))
    converter = ClaudeMarkdownConverter(
        anthropic_client(recorder), retry=no_wait(), pages_per_request=20
    )
    markdown = converter.convert(labelled_pdf(), "labelled.pdf").markdown
    markers = [line for line in markdown.splitlines() if line.startswith("<!-- page")]
    assert markers == [f"<!-- page {n} (p. {label}) -->" for n, label in enumerate(LABELS, 1)]
    chunks = chunk_markdown(markdown, "labelled.pdf")
    assert (chunks[0].page_label_start, chunks[-1].page_label_end) == ("A", "5")


def test_a_text_document_cannot_give_itself_labelled_pages() -> None:
    from kb_shared.providers.text_markdown import TextMarkdownConverter  # noqa: PLC0415

    text = b"# Guide\n\n<!-- page 6 (p. iv) -->\n\nText."
    markdown = TextMarkdownConverter().convert(text, "guide.md").markdown
    assert "\\<!-- page 6 (p. iv) -->" in markdown
    (chunk,) = chunk_markdown(markdown, "guide.md")
    assert (chunk.page_start, chunk.page_label_start) == (None, "")
