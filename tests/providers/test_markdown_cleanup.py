"""Clean-up of pymupdf4llm layout pages (``providers.markdown_cleanup``), on hand-built
pages and blocks: no PDF and no layout run, so these are fast.

Whole-document behaviour (real running headers, tables, figures) is tested through the
converter in ``test_local_markdown.py``.
"""

from __future__ import annotations

import pymupdf
import pytest

from kb_shared.providers.markdown_cleanup import (
    Block,
    Page,
    _merge_continuation_rows,
    contents_entries,
    furniture_key,
    is_numbered_heading,
    page_markdown,
    remove_furniture,
)

A4 = pymupdf.Rect(0, 0, 595, 842)
CVP_HEADER = "SCHEDULE OF CONSTRAINT VIOLATION PENALTY FACTORS"


def block(kind: str, y: float, markdown: str) -> Block:
    """A one-line block at height ``y`` (points from the top of an A4 page)."""
    return Block(kind, pymupdf.Rect(72, y, 520, y + 14), markdown)


def page(number: int, *blocks: Block) -> Page:
    return Page(number=number, rect=A4, blocks=list(blocks))


def body(number: int) -> Block:
    return block("text", 300, f"The distributor must keep a register (page {number}).")


# --------------------------------------------------------------------------------------
# Table rows
# --------------------------------------------------------------------------------------
def test_rows_split_inside_a_wrapped_cell_are_merged() -> None:
    table = [
        "|**Constraints**|**Dispatch**|**Pre-dispatch**|",
        "|---|---|---|",
        "|**Scaling for AGC ramp**|All|None|",
        "|**rates**|||",
        "|**Scaling for UIGF**|All|All|",
        "|Note|||",  # one filled cell, but capitalised: a row of its own
    ]
    assert _merge_continuation_rows(table) == [
        "|**Constraints**|**Dispatch**|**Pre-dispatch**|",
        "|---|---|---|",
        "|**Scaling for AGC ramp rates**|All|None|",
        "|**Scaling for UIGF**|All|All|",
        "|Note|||",
    ]


# --------------------------------------------------------------------------------------
# Furniture
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("**Page 12** of 67", "page of"),
        ("Page 13 of 67", "page of"),
        ("PAGE iv", "page"),
        ("© AEMO 2017", "© aemo"),
        ("_Dispatch procedure_", "dispatch procedure"),
        ("SP 800-171, REVISION 2", "sp - , revision"),
        ("civil mild", "civil mild"),  # words made of roman-numeral letters stay words
        ("17", "#"),  # a bare page number
        # left- and right-hand pages of one running footer share a key
        ("**Solar Victoria** Notice to Market 2025\u201326 **1**", "solar victoria notice to market \u2013"),
        ("**2 Solar Victoria** Notice to Market 2025\u201326", "solar victoria notice to market \u2013"),
    ],
)
def test_furniture_key(text: str, key: str) -> None:
    assert furniture_key(text) == key


def test_a_running_header_and_page_numbers_are_removed_on_every_page() -> None:
    pages = [
        page(
            n,
            block("page-header", 30, "_Dispatch procedure_"),
            body(n),
            block("page-footer", 810, f"Page {n} of 6"),
        )
        for n in range(1, 7)
    ]
    assert remove_furniture(pages) == 12
    assert [page_markdown(p) for p in pages] == [
        f"The distributor must keep a register (page {n})." for n in range(1, 7)
    ]


def test_numbered_headings_whose_number_changes_are_kept() -> None:
    # "Schedule 1" .. "Schedule 6" atop pages 1-6 share the number-free key "schedule" on
    # every page, yet each opens its own schedule: none is a running header.
    pages = [
        page(n, block("section-header", 60, f"## **Schedule {n}**"), body(n)) for n in range(1, 7)
    ]
    assert remove_furniture(pages) == 0
    assert [page_markdown(p).splitlines()[0] for p in pages] == [
        f"## **Schedule {n}**" for n in range(1, 7)
    ]


def test_a_numbered_heading_repeated_atop_its_part_is_kept_where_the_part_begins() -> None:
    # Part 12 runs from page 2 to page 6 and its heading tops each of those pages (5 of 6).
    headings = ["# **Part 11 – General**"] + ["# **Part 12 – Registration**"] * 5
    pages = [
        page(n, block("section-header", 60, heading), body(n))
        for n, heading in enumerate(headings, start=1)
    ]
    assert remove_furniture(pages) == 4
    assert page_markdown(pages[1]) == (
        "# **Part 12 – Registration**\n\nThe distributor must keep a register (page 2)."
    )
    assert [page_markdown(p) for p in pages[2:]] == [
        f"The distributor must keep a register (page {n})." for n in range(3, 7)
    ]
    assert page_markdown(pages[0]).startswith("# **Part 11 – General**\n")


def test_copies_that_are_not_numbered_headings_are_removed_with_the_rest() -> None:
    # The chapter's running footer (a page-footer, not a heading) and an unnumbered
    # running header that layout classed as a heading (CVP's "SCHEDULE OF CONSTRAINT
    # VIOLATION PENALTY FACTORS") go; the chapter heading on page 3 stays.
    pages = []
    for n in range(1, 7):
        blocks = [block("section-header", 30, f"###### {CVP_HEADER}")]
        if n == 3:
            blocks.append(block("section-header", 60, "### **CHAPTER THREE**"))
        blocks += [body(n)]
        if n >= 3:
            blocks.append(block("page-footer", 810, "CHAPTER THREE"))
        pages.append(page(n, *blocks))
    assert remove_furniture(pages) == 6 + 4
    assert page_markdown(pages[2]) == (
        "### **CHAPTER THREE**\n\nThe distributor must keep a register (page 3)."
    )
    assert all("CHAPTER" not in page_markdown(p) for p in pages if p.number != 3)


@pytest.mark.parametrize(
    ("kind", "y", "markdown", "numbered"),
    [
        # headings (layout's class), anywhere on the page
        ("section-header", 300, "# **Part 12 – Registration**", True),
        ("section-header", 300, "### **CHAPTER THREE**", True),
        ("section-header", 300, "## Schedule 3", True),
        ("title", 300, "PART IV", True),
        ("section-header", 300, "## **Appendix B**", True),
        ("section-header", 300, "## 3.1. Scope", True),
        ("section-header", 300, "## 12 Registration", True),
        ("section-header", 300, "## IV. Compliance", True),
        # "of" is not a section label; nor is "heading"
        ("section-header", 30, "###### SCHEDULE OF CONSTRAINT VIOLATION PENALTY FACTORS", False),
        ("section-header", 300, "## Section heading", False),
        ("section-header", 300, "## Dispatch procedure", False),
        ("section-header", 300, "## 2020", False),  # a bare number labels nothing
        ("section-header", 300, "## Mild. Winter", False),  # not a roman numeral
        # atop the page, whatever layout called it: only the division-word form
        ("page-header", 30, "**Part 12 – Registration**", True),
        ("text", 40, "CHAPTER THREE", True),
        ("page-header", 30, "10 Solar Victoria Notice to Market 2025–26", False),
        ("page-header", 30, "1 July 2012", False),
        ("page-header", 30, "Page 3 of 67", False),
        # a footer never opens a section; body text is not a heading; nor is a table
        ("page-footer", 810, "CHAPTER THREE", False),
        ("text", 300, "Part 12 – Registration", False),
        ("table", 30, "|Part 1|Registration|\n|---|---|", False),
    ],
)
def test_is_numbered_heading(kind: str, y: float, markdown: str, numbered: bool) -> None:
    assert is_numbered_heading(block(kind, y, markdown), A4) is numbered


def test_a_numbered_page_header_kept_where_its_part_begins_becomes_a_heading() -> None:
    # Layout often classes the repeated part heading as a page header (plain bold text);
    # where it is kept it must be a heading for the part's chunks to carry it, at the level
    # the document gives parts ("## Part 11" here).
    headings = [block("section-header", 60, "## **Part 11 – General**")] + [
        block("page-header", 60, "**Part 12 – Registration**") for _ in range(5)
    ]
    pages = [page(n, heading, body(n)) for n, heading in enumerate(headings, start=1)]
    assert remove_furniture(pages) == 4
    assert page_markdown(pages[1]).splitlines()[0] == "## **Part 12 – Registration**"
    assert pages[1].blocks[0].kind == "section-header"
    assert all("Part 12" not in page_markdown(p) for p in pages[2:])


def test_a_running_footer_naming_the_chapter_is_removed_everywhere() -> None:
    pages = [
        page(n, body(n), block("page-footer", 810, "CHAPTER THREE")) for n in range(1, 7)
    ]
    assert remove_furniture(pages) == 6


# --------------------------------------------------------------------------------------
# Tables of contents
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("markdown", "pages", "expected"),
    [
        # AEMO contents table: section number, title, page in its own cell
        ("|1|Introduction|7|\n|---|---|---|\n|1.1|Other AEMO Procedures|7|\n|2|Structure|9|", 54, (3, 3, False)),
        # Solar Victoria: dotted leaders inside one cell
        ("|**Foreword ........ 3**|\n|---|\n|**Section 1: Overview ....... 4**|\n|1.1 About ...... 5|", 60, (3, 3, True)),
        # a data table whose last column holds a few small integers is not a listing
        ("|Generator|DUID|Units|\n|---|---|---|\n|Bayswater|BW01|4|\n|Eraring|ER01|4.5|", 62, (1, 3, False)),
        # page numbers that go backwards: not a contents listing
        ("|Clause|Party|Days|\n|---|---|---|\n|4.1.1|Retailer|2|\n|4.1.2|Distributor|1|", 6, None),
        # a page number beyond the document is not an entry
        ("Section 1 ........ 3\nSection 2 ........ 900", 60, (1, 2, True)),
        # layout joined two entries into one line
        ("1 Introduction ........ 2 2 Scope ........ 2", 9, (2, 1, True)),
    ],
)
def test_contents_entries(markdown: str, pages: int, expected) -> None:
    assert contents_entries(markdown, pages) == expected
