"""Tables that continue on the next page (issue 16, "Reading hard PDFs correctly"): with the
header row repeated, without it, with a running header/footer or a "continued" note between the
parts, a table is one table: every data row once, every part under the real header, the repeated
header never a data row, each row cited on the page it is printed on. PDFs are built here."""

from __future__ import annotations

from collections import Counter

import pymupdf
import pytest

from kb_shared.ingest.chunking import KIND_TABLE, chunk_markdown
from kb_shared.providers.local_markdown import PymupdfMarkdownConverter
from kb_shared.providers.markdown_cleanup import Block, Page
from kb_shared.providers.markdown_regions import join_split_tables

HEADER = ("Code", "Participant", "Obligation")
HEADER_ROW = "|Code|Participant|Obligation|"
WIDTHS = (80.0, 150.0, 230.0)
ROW_HEIGHT = 20.0
#: Rows printed on each page: 28 on the first (below a heading and caption), then 30, then 12.
PAGE_ROWS = (28, 30, 12)


def _rows() -> list[tuple[str, str, str]]:
    total = sum(PAGE_ROWS)
    return [(f"C{i:02d}", f"Party {i}", f"must report item {i} within {i} days") for i in
            range(1, total + 1)]


def _draw_table(page: pymupdf.Page, top: float, rows: list[tuple[str, ...]], *,
                bold_first: bool = False) -> float:
    """Ruled cells from ``top`` down; returns the bottom edge."""
    xs = [72.0]
    for width in WIDTHS:
        xs.append(xs[-1] + width)
    for r, row in enumerate(rows):
        y = top + r * ROW_HEIGHT
        font = "hebo" if bold_first and r == 0 else "helv"
        for c, cell in enumerate(row):
            page.draw_rect(pymupdf.Rect(xs[c], y, xs[c + 1], y + ROW_HEIGHT), width=0.5)
            page.insert_text((xs[c] + 3, y + 14), cell, fontsize=9, fontname=font)
    return top + len(rows) * ROW_HEIGHT


def split_table_pdf(*, repeat_header: bool, note: str = "", furniture: bool = True,
                    header_outside_band: bool = False) -> bytes:
    """A three-page table (``PAGE_ROWS`` rows per page) under "4 Obligations", followed by
    "5 Next section". ``repeat_header``: pages 2-3 repeat the header row; ``note``: a line
    printed above the continued parts (a "continued" note); ``furniture``: a running header
    and footer on every page (inside the margin bands, or the header at 110 pt, below the
    band, with ``header_outside_band``)."""
    doc = pymupdf.open()
    rows = _rows()
    start = 0
    for number, count in enumerate(PAGE_ROWS, start=1):
        page = doc.new_page()
        if furniture:
            page.insert_text((72, 110 if header_outside_band else 40),
                             "Market Rules 2026 - Obligations schedule", fontsize=8)
            page.insert_text((72, 815), "Market Rules 2026", fontsize=8)
        top = 130.0
        if number == 1:
            page.insert_text((72, 150), "4 Obligations", fontsize=14, fontname="hebo")
            page.insert_text((72, 180), "Table 3 Obligations of participants", fontsize=10)
            top = 195.0
        elif note:
            page.insert_text((72, 140), note, fontsize=9)
            top = 150.0
        part = rows[start : start + count]
        start += count
        head = [HEADER] if number == 1 or repeat_header else []
        bottom = _draw_table(page, top, head + part)
        if number == len(PAGE_ROWS):
            page.insert_text((72, bottom + 40), "5 Next section", fontsize=14, fontname="hebo")
            page.insert_text((72, bottom + 70), "After the table the rules go on in prose.",
                             fontsize=10)
    return doc.tobytes()


def _row_line(row: tuple[str, str, str]) -> str:
    return "|" + "|".join(row) + "|"


def _page_of_row(index: int) -> int:
    """Physical page (1-based) that row ``index`` (0-based) is printed on."""
    bound = 0
    for page, count in enumerate(PAGE_ROWS, start=1):
        bound += count
        if index < bound:
            return page
    raise IndexError(index)


def _assert_one_table(markdown: str) -> None:
    rows = [_row_line(r) for r in _rows()]
    chunks = chunk_markdown(markdown, "split.pdf", budget_words=300)
    tables = [c for c in chunks if c.kind == KIND_TABLE]
    assert len(tables) >= 2  # ~10 words a row: the budget splits the table
    body: Counter[str] = Counter()
    for chunk in tables:
        lines = chunk.text.split("\n")
        header_at = lines.index(HEADER_ROW)  # the caption may lead the first part
        assert lines[header_at + 1] == "|---|---|---|"
        part_rows = lines[header_at + 2 :]
        assert HEADER_ROW not in part_rows
        body.update(part_rows)
        for line in part_rows:
            page = _page_of_row(rows.index(line))
            assert chunk.page_start <= page <= chunk.page_end, (line, chunk.page_start)
    assert body == Counter(rows)  # every data row exactly once, nothing else
    # one logical table: its first part runs on past the page break (29 rows fit the budget)
    assert (tables[0].page_start, tables[0].page_end) == (1, 2)
    # prose after the table is a text chunk of the next section
    assert chunks[-1].heading_path[-1].endswith("5 Next section")
    assert "After the table the rules go on in prose." in chunks[-1].text


@pytest.mark.parametrize(
    "build",
    [
        pytest.param({"repeat_header": True}, id="header-repeated"),
        pytest.param({"repeat_header": False}, id="no-header"),
        pytest.param({"repeat_header": True, "note": "Table 3 (continued)"}, id="continued-note"),
        pytest.param(
            {"repeat_header": False, "note": "Table 3 Obligations of participants (cont'd)"},
            id="continued-note-no-header",
        ),
        pytest.param({"repeat_header": False, "header_outside_band": True},
                     id="running-header-below-band"),
        pytest.param({"repeat_header": True, "furniture": False}, id="no-furniture"),
    ],
)
def test_a_table_across_pages_is_one_table(build: dict) -> None:
    converted = PymupdfMarkdownConverter().convert(split_table_pdf(**build), "split.pdf")
    markdown = converted.markdown
    assert "continued" not in markdown.casefold() and "cont'd" not in markdown
    assert markdown.count(HEADER_ROW) == 3  # the parts repeat it; the chunker drops repeats
    _assert_one_table(markdown)


# --------------------------------------------------------------------------- the rule itself


def _page(number: int, *blocks: Block) -> Page:
    return Page(number, pymupdf.Rect(0, 0, 595, 842), list(blocks))


def _table(y0: float, y1: float, *lines: str, x0: float = 72, x1: float = 532) -> Block:
    return Block("table", pymupdf.Rect(x0, y0, x1, y1), "\n".join(lines))


def test_a_continuation_without_header_gets_the_real_header_and_keeps_its_first_row() -> None:
    upper = _table(200, 780, HEADER_ROW, "|---|---|---|", "|C01|Party 1|x|")
    lower = _table(60, 300, "|C02|Party 2|y|", "|---|---|---|", "|C03|Party 3|z|")
    assert join_split_tables([_page(1, upper), _page(2, lower)]) == 1
    assert lower.markdown == "\n".join([HEADER_ROW, "|---|---|---|", "|C02|Party 2|y|",
                                        "|C03|Party 3|z|"])


def test_a_row_cut_by_the_page_break_is_one_row_on_the_page_where_it_starts() -> None:
    upper = _table(200, 780, HEADER_ROW, "|---|---|---|", "|C01|Party 1|must report the"
                   " outage|")
    lower = _table(60, 300, "|||within two days|", "|---|---|---|", "|C02|Party 2|y|")
    assert join_split_tables([_page(1, upper), _page(2, lower)]) == 1
    assert upper.markdown == "\n".join(
        [HEADER_ROW, "|---|---|---|", "|C01|Party 1|must report the outage within two days|"]
    )
    assert lower.markdown == "\n".join([HEADER_ROW, "|---|---|---|", "|C02|Party 2|y|"])


def test_a_repeated_header_written_differently_becomes_the_real_header() -> None:
    upper = _table(200, 780, HEADER_ROW, "|---|---|---|", "|C01|Party 1|x|")
    lower = _table(60, 300, "|**Code**|**Participant**|**OBLIGATION**|", "|---|---|---|",
                   "|C02|Party 2|y|")
    assert join_split_tables([_page(1, upper), _page(2, lower)]) == 1
    assert lower.markdown == "\n".join([HEADER_ROW, "|---|---|---|", "|C02|Party 2|y|"])


@pytest.mark.parametrize(
    ("upper", "lower", "why"),
    [
        (_table(200, 420, HEADER_ROW, "|---|---|---|", "|C01|Party 1|x|"),
         _table(60, 300, "|C02|Party 2|y|", "|---|---|---|", "|C03|Party 3|z|"),
         "the first table ends mid-page"),
        (_table(200, 780, HEADER_ROW, "|---|---|---|", "|C01|Party 1|x|"),
         _table(500, 700, "|C02|Party 2|y|", "|---|---|---|", "|C03|Party 3|z|"),
         "the second starts low on its page"),
        (_table(200, 780, HEADER_ROW, "|---|---|---|", "|C01|Party 1|x|"),
         _table(60, 300, "|a|b|", "|---|---|", "|c|d|"),
         "a different number of columns"),
        (_table(200, 780, HEADER_ROW, "|---|---|---|", "|C01|Party 1|x|"),
         _table(60, 300, "|C02|Party 2|y|", "|---|---|---|", "|C03|Party 3|z|", x0=300, x1=560),
         "another place on the page"),
        (_table(200, 780, HEADER_ROW, "|---|---|---|", "|C01|Party 1|x|"),
         _table(60, 300, "|**Term**|**Meaning**|**Source**|", "|---|---|---|", "|a|b|c|"),
         "a bold header of its own"),
    ],
)
def test_tables_that_are_not_one_are_left_alone(upper: Block, lower: Block, why: str) -> None:
    before = lower.markdown
    assert join_split_tables([_page(1, upper), _page(2, lower)]) == 0, why
    assert lower.markdown == before


def test_prose_between_the_parts_keeps_them_apart() -> None:
    upper = _table(200, 700, HEADER_ROW, "|---|---|---|", "|C01|Party 1|x|")
    prose = Block("text", pymupdf.Rect(72, 710, 500, 760), "A paragraph that says something.")
    lower = _table(60, 300, "|C02|Party 2|y|", "|---|---|---|", "|C03|Party 3|z|")
    assert join_split_tables([_page(1, upper, prose), _page(2, lower)]) == 0
    assert not prose.removed


def test_the_chunker_merges_parts_whose_headers_differ_only_in_emphasis() -> None:
    markdown = "\n".join([
        "<!-- page 1 -->", "", "| **Code** | **Party** |", "|---|---|", "| C1 | P1 |", "",
        "<!-- page 2 -->", "", "|Code|party|", "|---|---|", "| C2 | P2 |",
    ])
    (table,) = chunk_markdown(markdown, "d")
    assert table.text == "| **Code** | **Party** |\n|---|---|\n| C1 | P1 |\n| C2 | P2 |"
    assert (table.page_start, table.page_end) == (1, 2)
