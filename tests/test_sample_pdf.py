"""The generated demo PDF ("Sample Retail Market Procedure") and its conversion.

The conversion runs pymupdf4llm layout mode over the six pages once for the module
(~1-2 s a page), then each test checks one feature the pipeline relies on.
"""

from __future__ import annotations

import re
from pathlib import Path

import pymupdf
import pytest

from kb_shared.providers.base import ConvertedDocument
from kb_shared.providers.local_markdown import PymupdfMarkdownConverter
from kb_assets.sample_pdf import (
    FIGURE_CAPTION,
    FIXED_DATE,
    OBLIGATION_ROWS,
    SAMPLE_FILENAME,
    build_sample_pdf,
    obligation_rows,
    sample_pdf_bytes,
)


def page_segment(markdown: str, page: int) -> str:
    pattern = rf"^<!-- page {page} -->$(.*?)(?=^<!-- page \d+ -->$|\Z)"
    match = re.search(pattern, markdown, re.M | re.S)
    assert match, f"no marker for page {page}"
    return match.group(1)


def table_rows(segment: str) -> list[list[str]]:
    """Pipe-table rows of a page as cell lists (bold marks removed), alignment rows dropped."""
    rows = []
    for line in segment.splitlines():
        if line.startswith("|") and not re.fullmatch(r"\|(?:-+\|)+", line):
            rows.append([c.replace("**", "").strip() for c in line.strip("|").split("|")])
    return rows


@pytest.fixture(scope="module")
def converted() -> ConvertedDocument:
    return PymupdfMarkdownConverter().convert(sample_pdf_bytes(), SAMPLE_FILENAME)


# --------------------------------------------------------------------------------------
# The file itself
# --------------------------------------------------------------------------------------
def test_two_builds_are_byte_identical() -> None:
    first = sample_pdf_bytes()
    second = sample_pdf_bytes.__wrapped__()  # bypass the cache: really build again
    assert first == second
    assert first.startswith(b"%PDF-")


def test_metadata_and_page_count() -> None:
    doc = pymupdf.open(stream=sample_pdf_bytes())
    try:
        assert doc.page_count == 6
        assert doc.metadata["title"] == "Sample Retail Market Procedure"
        assert doc.metadata["creationDate"] == doc.metadata["modDate"] == FIXED_DATE
        # the caption's en dash and the defined terms' quotes survive extraction
        assert FIGURE_CAPTION in doc[1].get_text()
        assert "‘Life Support Customer’" in doc[0].get_text()
        # the figure is vector art: no raster image anywhere
        assert all(not page.get_images() for page in doc)
    finally:
        doc.close()


def test_build_writes_into_a_directory_or_to_a_path(tmp_path: Path) -> None:
    into_dir = build_sample_pdf(tmp_path)
    assert into_dir == tmp_path / SAMPLE_FILENAME
    nested = build_sample_pdf(tmp_path / "demo" / "inbox" / "procedure.pdf")
    assert nested == tmp_path / "demo" / "inbox" / "procedure.pdf"
    assert into_dir.read_bytes() == nested.read_bytes() == sample_pdf_bytes()


def test_obligation_rows() -> None:
    rows = obligation_rows()
    assert len(rows) == OBLIGATION_ROWS == 60
    assert rows[0] == (
        "4.1.1",
        "Retailer",
        "Notify the Distributor of a new Life Support Customer",
        "2 business days",
    )
    assert rows[9][0] == "4.1.10" and rows[10][0] == "4.2.1" and rows[-1][0] == "4.6.10"
    assert rows[4][2] == "Update the site register and publish change IN008-24"


# --------------------------------------------------------------------------------------
# Its conversion
# --------------------------------------------------------------------------------------
@pytest.mark.slow
def test_pages_title_and_version(converted: ConvertedDocument) -> None:
    markers = re.findall(r"^<!-- page (\d+) -->$", converted.markdown, re.M)
    assert markers == ["1", "2", "3", "4", "5", "6"]
    assert (converted.pages, converted.title, converted.version) == (
        6,
        "Sample Retail Market Procedure",
        "1.2",
    )


@pytest.mark.slow
def test_heading_tree(converted: ConvertedDocument) -> None:
    levels = {}
    for line in converted.markdown.splitlines():
        match = re.match(r"^(#{1,6}) \**(.+?)\**$", line)
        if match:
            levels[match.group(2)] = len(match.group(1))
    assert levels["Sample Retail Market Procedure"] == 1
    for top, sub in [
        ("1 Introduction", "1.1 Purpose"),
        ("1 Introduction", "1.2 Scope"),
        ("2 Definitions and interpretation", "2.1 Defined terms"),
        ("3 Notification obligations", "3.1 Life support notifications"),
    ]:
        assert levels[top] < levels[sub], (top, sub)
    for heading in (
        "4 Obligations schedule",
        "5 Compliance and reporting",
        "Appendix A Worked example",
    ):
        assert heading in levels


@pytest.mark.slow
def test_obligations_definitions_and_codes_are_text(converted: ConvertedDocument) -> None:
    text = converted.markdown
    assert (
        "The Retailer must notify the Distributor within 2 business days after the "
        "Registration Date of a Life Support Customer." in text
    )
    assert "In this procedure, ‘Life Support Customer’ means a customer at whose" in text
    for code in ("IN008-24", "IN012-25", "IN004-22", "IN021-23"):
        assert code in text


@pytest.mark.slow
def test_schedule_spans_pages_as_pipe_tables(converted: ConvertedDocument) -> None:
    header = ["Clause", "Party", "Obligation", "Deadline"]
    page3 = table_rows(page_segment(converted.markdown, 3))
    page4 = table_rows(page_segment(converted.markdown, 4))
    assert page3[0] == header and page4[0] == header  # the header row repeats per page
    body = [r for r in page3[1:] + page4[1:] if r != header]
    assert [tuple(r) for r in body] == obligation_rows()  # all 60 rows, in order, once
    assert page3[1] == [
        "4.1.1",
        "Retailer",
        "Notify the Distributor of a new Life Support Customer",
        "2 business days",
    ]
    assert page4[-1] == [
        "4.6.10",
        "Distributor",
        "Give written notice of a Planned Interruption",
        "Within 24 hours",
    ]
    assert len(page3) > 10 and len(page4) > 10


@pytest.mark.slow
def test_diagram_is_a_figure_region_with_its_caption(converted: ConvertedDocument) -> None:
    assert len(converted.figures) == 1
    figure = converted.figures[0]
    assert (figure.page, figure.caption) == (2, "Figure 1 – Notification flow")
    x0, y0, x1, y1 = figure.bbox
    # the three boxes run from the left margin (56 pt) to the right margin (539 pt)
    assert x0 <= 56 and x1 >= 539 and 0 < y1 - y0 < 200
    segment = page_segment(converted.markdown, 2)
    assert "[Figure: Figure 1 – Notification flow]" in segment
    assert "B2B hub (IN004-22)" in segment  # labels inside the drawing stay searchable


@pytest.mark.slow
def test_running_header_and_footer_are_gone(converted: ConvertedDocument) -> None:
    text = converted.markdown
    assert "Sample Retail Market Procedure | Version 1.2" not in text
    assert "SRMP-001 | Effective 1 July 2025" not in text
    assert not re.search(r"Page \d of 6", text)
    assert text.count("Sample Retail Market Procedure") == 1  # the cover title only


def test_the_diagram_is_on_figure_page() -> None:
    import pymupdf

    from kb_assets.sample_pdf import FIGURE_CAPTION, FIGURE_PAGE, sample_pdf_bytes

    with pymupdf.open(stream=sample_pdf_bytes(), filetype="pdf") as doc:
        pages = [n + 1 for n, page in enumerate(doc) if FIGURE_CAPTION in page.get_text()]
        assert pages == [FIGURE_PAGE]
        assert doc[FIGURE_PAGE - 1].get_drawings()  # vector boxes and arrows
