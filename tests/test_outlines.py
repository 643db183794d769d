"""What becomes a heading in a converted PDF (issue 16, "Reading hard PDFs correctly"): the PDF's
outline (bookmarks) gives headings and their levels; code and monospaced blocks never do — their
fences, nested or unclosed, never start a section and are never split. PDFs are built here."""

from __future__ import annotations

import pymupdf
import pytest

from kb_shared.ingest.chunking import chunk_markdown, markdown_headings
from kb_shared.providers.local_markdown import PymupdfMarkdownConverter
from kb_shared.providers.markdown_cleanup import (
    Block,
    Page,
    apply_outline,
    fence_code,
    page_markdown,
)


def _convert(doc: pymupdf.Document) -> str:
    return PymupdfMarkdownConverter().convert(doc.tobytes(), "structure.pdf").markdown


# --------------------------------------------------------------------------- outlines


def outlined_pdf(toc: list[list] | None) -> pymupdf.Document:
    """Two pages whose section titles are set like body text (no visual heading), optionally
    with an outline ``toc`` (``doc.set_toc`` rows)."""
    doc = pymupdf.open()
    first = doc.new_page()
    first.insert_text((72, 200), "Scope of the rules", fontsize=10)
    first.insert_text((72, 230), "These rules apply to every participant in the market.",
                      fontsize=10)
    first.insert_text((72, 260), "Definitions", fontsize=10)
    first.insert_text((72, 290), "A participant is a registered person under the law.", fontsize=10)
    second = doc.new_page()
    second.insert_text((72, 200), "Obligations", fontsize=10)
    second.insert_text((72, 230), "Each participant keeps its records for seven years.",
                       fontsize=10)
    second.insert_text((72, 260), "Record keeping", fontsize=10)
    second.insert_text((72, 290), "Records are kept in a form the regulator can read.", fontsize=10)
    if toc:
        doc.set_toc(toc)
    return doc


def test_the_outline_gives_headings_and_levels() -> None:
    toc = [[1, "Scope of the rules", 1], [2, "Definitions", 1], [1, "Obligations", 2],
           [2, "Record keeping", 2]]
    markdown = _convert(outlined_pdf(toc))
    assert markdown_headings(markdown) == [
        (1, "Scope of the rules"), (2, "Definitions"), (1, "Obligations"), (2, "Record keeping"),
    ]
    paths = {c.text.split("\n")[-1]: c.heading_path for c in chunk_markdown(markdown, "d", 12)}
    assert paths["Records are kept in a form the regulator can read."] == (
        "Obligations", "Record keeping"
    )
    assert paths["A participant is a registered person under the law."] == (
        "Scope of the rules", "Definitions"
    )


def test_without_an_outline_the_same_pdf_has_only_what_layout_guesses() -> None:
    # layout takes the first line of page 2 for a heading, and nothing else
    assert markdown_headings(_convert(outlined_pdf(None))) == [(1, "Obligations")]


def test_an_outline_entry_not_on_its_page_changes_nothing() -> None:
    toc = [[1, "Scope of the rules", 1], [1, "Definitions", 2]]  # "Definitions" is on page 1
    markdown = _convert(outlined_pdf(toc))
    # layout's own heading "Obligations" nests under the outline heading in force
    assert markdown_headings(markdown) == [(1, "Scope of the rules"), (2, "Obligations")]
    assert "\n\nDefinitions\n\n" in markdown


def _page(*blocks: Block) -> Page:
    return Page(1, pymupdf.Rect(0, 0, 595, 842), list(blocks))


def _block(kind: str, markdown: str) -> Block:
    return Block(kind, pymupdf.Rect(72, 100, 300, 120), markdown)


def test_a_layout_heading_outside_the_outline_nests_under_the_outline_heading() -> None:
    part = _block("text", "PART 2 General")
    inner = _block("section-header", "# **Notices**")
    body = _block("text", "Notices are in writing.")
    assert apply_outline([_page(part, inner, body)], [[2, "Part 2 General", 1]]) == 1
    assert part.markdown == "## PART 2 General"
    assert inner.markdown == "### **Notices**"
    assert body.markdown == "Notices are in writing."


@pytest.mark.parametrize(
    ("title", "text", "matched"),
    [
        ("3.1 Scope", "**3.1 Scope**", True),
        ("Scope \u2013 general", "Scope - General", True),  # dashes and case do not matter
        ("Scope", "Scope 7", True),  # a page number layout kept beside the heading
        ("Scope", "Scope of these rules covers every participant in the market", False),
        ("Scope", "Introduction", False),
    ],
)
def test_outline_titles_match_block_text(title: str, text: str, matched: bool) -> None:
    block = _block("text", text)
    assert apply_outline([_page(block)], [[9, title, 1]]) == int(matched)
    assert block.markdown.startswith("###### ") is matched  # level 9 is capped at 6


# --------------------------------------------------------------------------- code blocks


CODE = [
    "# Settings for the market gateway",
    "[gateway]",
    'host = "10.0.0.1"',
    "## retries",
    "retries = 3",
    "```",
    "nested = true",
    "~~~",
]


def code_pdf(lines: list[str]) -> pymupdf.Document:
    """A heading, a sentence, ``lines`` in Courier, then a closing paragraph."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 120), "Gateway configuration", fontsize=14, fontname="hebo")
    page.insert_text((72, 150), "The settings file looks like this:", fontsize=10)
    for index, line in enumerate(lines):
        page.insert_text((90, 175 + 12 * index), line, fontsize=9, fontname="cour")
    page.insert_text((72, 190 + 12 * len(lines)), "Restart the gateway after each change.",
                     fontsize=10)
    return doc


def test_a_code_block_from_a_pdf_is_fenced_safely_and_never_a_heading() -> None:
    markdown = _convert(code_pdf(CODE))
    assert "````\n" + "\n".join(CODE) + "\n````" in markdown  # the inner ``` cannot close it
    assert markdown_headings(markdown) == [(1, "Gateway configuration")]
    chunks = chunk_markdown(markdown, "d")
    assert [c.heading_path for c in chunks] == [("Gateway configuration",)]
    assert chunks[0].text.endswith("````\n\nRestart the gateway after each change.")


def test_a_code_block_over_the_budget_is_one_chunk() -> None:
    lines = [f"# step {i}: set option_{i} = {i}" for i in range(40)]
    markdown = _convert(code_pdf(lines))
    chunks = chunk_markdown(markdown, "d", budget_words=50)
    (code,) = [c for c in chunks if "# step 0:" in c.text]
    assert code.text == "```\n" + "\n".join(lines) + "\n```"
    assert all("# step" not in c.text for c in chunks if c is not code)
    assert markdown_headings(markdown) == [(1, "Gateway configuration")]


@pytest.mark.parametrize(
    ("code", "fenced"),
    [
        ("a = 1", "```\na = 1\n```"),
        ("```\nx\n```", "````\n```\nx\n```\n````"),
        ("a ````` b\n```", "``````\na ````` b\n```\n``````"),
        ("~~~\n# not a heading   \n\n", "```\n~~~\n# not a heading\n```"),
        ("", "```\n```"),
    ],
)
def test_fence_code_is_longer_than_any_backtick_run_inside(code: str, fenced: str) -> None:
    assert fence_code(code) == fenced
    assert markdown_headings(fenced + "\n\n# After") == [(1, "After")]


def test_an_unclosed_code_box_is_closed_where_the_box_ends() -> None:
    page = _page(_block("text", "```\n# comment\nx = 1\n"), _block("text", "After the code."))
    markdown = page_markdown(page)
    assert markdown == "```\n# comment\nx = 1\n```\n\nAfter the code."
    assert markdown_headings(markdown) == []


def test_a_code_listing_cut_by_a_page_break_stays_one_block() -> None:
    doc = pymupdf.open()
    first = [f"# step {i}" if i % 2 else f"run_step({i})" for i in range(12)]
    second = [f"# step {i}" if i % 2 else f"run_step({i})" for i in range(12, 18)]
    for number, lines in enumerate((first, second), start=1):
        page = doc.new_page()
        page.insert_text((72, 40), "Gateway manual - configuration", fontsize=8)
        page.insert_text((72, 815), "Gateway manual", fontsize=8)
        top = 660 if number == 1 else 110
        if number == 1:
            page.insert_text((72, 630), "The start-up script reads:", fontsize=10)
        for index, line in enumerate(lines):
            page.insert_text((90, top + 12 * index), line, fontsize=9, fontname="cour")
        if number == 2:
            page.insert_text((72, 200), "Then the gateway is up.", fontsize=10)
    markdown = _convert(doc)
    assert not [title for _, title in markdown_headings(markdown) if "step" in title]
    (code,) = [c for c in chunk_markdown(markdown, "d", budget_words=20) if "run_step" in c.text]
    # one fence; the page break between the parts shows as two blank lines inside it
    assert code.text == "```\n" + "\n".join(first) + "\n\n\n" + "\n".join(second) + "\n```"
    assert (code.page_start, code.page_end) == (1, 2)
