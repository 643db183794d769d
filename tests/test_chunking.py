"""Tests of ``kb_shared.ingest.chunking``: chunk boundaries, heading paths, page spans, table parts
and ids (rules in the module docstring of ``kb_shared/ingest/chunking.py``)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kb_shared.ingest.chunking import (
    KIND_TABLE,
    KIND_TEXT,
    Chunk,
    chunk_markdown,
    count_words,
    markdown_headings,
    section_label,
)
from kb_shared.ingest.contextual import embedding_text, prefix_title, stored_embedding_text
from kb_shared.search.citations import PointPayload, naming_title
from tests.conftest import corpus_dir


def _summary(chunks: list[Chunk]) -> list[tuple]:
    """(id, kind, text, heading_path, page_start, page_end) of each chunk."""
    return [(c.id, c.kind, c.text, c.heading_path, c.page_start, c.page_end) for c in chunks]


# --------------------------------------------------------------------------- words


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", 0),
        ("  \n ", 0),
        ("The Retailer must notify.", 4),
        ("| a | b c |", 3),
        ("|**Bulli Creek**|132|QBK2|", 4),
        ("|---|:--:|", 2),
        ("SO_OP_3705 3.1.2", 2),
    ],
)
def test_count_words_counts_runs_without_whitespace_or_pipes(text: str, words: int) -> None:
    assert count_words(text) == words


# --------------------------------------------------------------------------- basics


@pytest.mark.parametrize(
    "markdown", ["", "   ", "\n\n\t\n", "<!-- page 1 -->\n\n<!-- page 2 -->\n"]
)
def test_empty_or_marker_only_markdown_gives_no_chunks(markdown: str) -> None:
    assert chunk_markdown(markdown, "doc") == []


def test_budget_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="budget_words must be >= 1, got 0"):
        chunk_markdown("Some text.", "doc", budget_words=0)


def test_page_zero_marker_is_refused_with_its_line() -> None:
    with pytest.raises(
        ValueError, match=r"page markers are 1-based, but line 3 is '<!-- page 0 -->'"
    ):
        chunk_markdown("Intro.\n\n<!-- page 0 -->\n\nText.", "doc")


def test_headings_start_chunks_and_paths_pop_by_level() -> None:
    markdown = (
        "# SO_OP_3705 Dispatch\n\nScope text.\n\n"
        "## 3 Dispatch\n\nDispatch text.\n\n"
        "### 3.1 Bids\n\nBid text.\n\n"
        "#### 3.1.1 Rebids\n\nRebid text.\n\n"
        "## 4 Records\n\nRecords text.\n\n"
        "### 4.1 Logs ###\n\nLog text.\n\n"
        "# **Glossary**\n\nTerms."
    )
    assert _summary(chunk_markdown(markdown, "so-op-3705.pdf")) == [
        (
            "so-op-3705.pdf-0",
            "text",
            "# SO_OP_3705 Dispatch\n\nScope text.",
            ("SO_OP_3705 Dispatch",),
            None,
            None,
        ),
        (
            "so-op-3705.pdf-1",
            "text",
            "## 3 Dispatch\n\nDispatch text.",
            ("SO_OP_3705 Dispatch", "3 Dispatch"),
            None,
            None,
        ),
        (
            "so-op-3705.pdf-2",
            "text",
            "### 3.1 Bids\n\nBid text.",
            ("SO_OP_3705 Dispatch", "3 Dispatch", "3.1 Bids"),
            None,
            None,
        ),
        (
            "so-op-3705.pdf-3",
            "text",
            "#### 3.1.1 Rebids\n\nRebid text.",
            ("SO_OP_3705 Dispatch", "3 Dispatch", "3.1 Bids", "3.1.1 Rebids"),
            None,
            None,
        ),
        (
            "so-op-3705.pdf-4",
            "text",
            "## 4 Records\n\nRecords text.",
            ("SO_OP_3705 Dispatch", "4 Records"),
            None,
            None,
        ),
        (
            "so-op-3705.pdf-5",
            "text",
            "### 4.1 Logs ###\n\nLog text.",
            ("SO_OP_3705 Dispatch", "4 Records", "4.1 Logs"),
            None,
            None,
        ),
        ("so-op-3705.pdf-6", "text", "# **Glossary**\n\nTerms.", ("Glossary",), None, None),
    ]


def test_text_before_the_first_heading_has_an_empty_path() -> None:
    chunks = chunk_markdown("Preamble.\n\n## 2 Scope\n\nBody.", "doc")
    assert [(c.text, c.heading_path) for c in chunks] == [
        ("Preamble.", ()),
        ("## 2 Scope\n\nBody.", ("2 Scope",)),
    ]


def test_a_heading_only_chunk_is_not_closed_by_the_next_heading() -> None:
    chunks = chunk_markdown("## 3 Dispatch\n\n### 3.1 Bids\n\nBids are made daily.", "doc")
    assert _summary(chunks) == [
        (
            "doc-0",
            "text",
            "## 3 Dispatch\n\n### 3.1 Bids\n\nBids are made daily.",
            ("3 Dispatch", "3.1 Bids"),
            None,
            None,
        ),
    ]


def test_a_heading_only_chunk_is_closed_by_a_sibling_or_higher_heading() -> None:
    markdown = "## 3 Dispatch\n\n### 3.9 Empty\n\n## 4 Records\n\nKept for 7 years."
    assert _summary(chunk_markdown(markdown, "doc")) == [
        (
            "doc-0",
            "text",
            "## 3 Dispatch\n\n### 3.9 Empty",
            ("3 Dispatch", "3.9 Empty"),
            None,
            None,
        ),
        ("doc-1", "text", "## 4 Records\n\nKept for 7 years.", ("4 Records",), None, None),
    ]


def test_heading_titles_drop_hash_marks_and_one_wrapping_emphasis() -> None:
    markdown = (
        "# **1. Intro** \n\nA.\n\n## __Scope__ ##\n\nB.\n\n## **a** and **b**\n\nC.\n\n## C#\n\nD."
    )
    paths = [c.heading_path for c in chunk_markdown(markdown, "doc")]
    assert paths == [
        ("1. Intro",),
        ("1. Intro", "Scope"),
        ("1. Intro", "**a** and **b**"),
        ("1. Intro", "C#"),
    ]


def test_hash_without_space_is_text_not_a_heading() -> None:
    chunks = chunk_markdown("#hashtag line\n\n####### seven", "doc")
    assert _summary(chunks) == [("doc-0", "text", "#hashtag line\n\n####### seven", (), None, None)]


# --------------------------------------------------------------------------- pages


def test_page_span_covers_a_page_break_and_markers_leave_the_text() -> None:
    markdown = "<!-- page 1 -->\n\nFirst page text.\n\n<!-- page 2 -->\n\nSecond page text.\n"
    assert _summary(chunk_markdown(markdown, "doc")) == [
        ("doc-0", "text", "First page text.\n\nSecond page text.", (), 1, 2),
    ]


def test_a_paragraph_continuing_across_a_marker_is_one_block() -> None:
    markdown = "<!-- page 4 -->\nThe Retailer must\n<!-- page 5 -->\nnotify the Distributor."
    assert _summary(chunk_markdown(markdown, "doc")) == [
        ("doc-0", "text", "The Retailer must\nnotify the Distributor.", (), 4, 5),
    ]


def test_text_before_the_first_marker_is_page_one() -> None:
    markdown = "Cover title.\n\n<!-- page 2 -->\n\n# Body\n\nText."
    assert [(c.page_start, c.page_end) for c in chunk_markdown(markdown, "doc")] == [(1, 1), (2, 2)]


def test_markdown_without_markers_has_no_pages() -> None:
    chunks = chunk_markdown("Alpha.\n\nBeta.", "doc")
    assert [(c.page_start, c.page_end) for c in chunks] == [(None, None)]


def test_each_chunk_reports_only_its_own_pages() -> None:
    markdown = (
        "<!-- page 1 -->\n\nOne two three four.\n\n"
        "<!-- page 2 -->\n\nFive six seven eight.\n\n"
        "<!-- page 3 -->\n\nNine ten eleven twelve."
    )
    chunks = chunk_markdown(markdown, "doc", budget_words=8)
    assert [(c.text, c.page_start, c.page_end) for c in chunks] == [
        ("One two three four.\n\nFive six seven eight.", 1, 2),
        ("Nine ten eleven twelve.", 3, 3),
    ]


# --------------------------------------------------------------------------- packing and splitting


def test_blocks_are_packed_greedily_up_to_the_budget() -> None:
    markdown = "a b c.\n\nd e f g.\n\nh i.\n\nj k l m n o.\n\np."
    chunks = chunk_markdown(markdown, "doc", budget_words=7)
    assert [(c.id, c.text) for c in chunks] == [
        ("doc-0", "a b c.\n\nd e f g."),
        ("doc-1", "h i."),
        ("doc-2", "j k l m n o.\n\np."),
    ]


def test_a_long_paragraph_is_split_at_sentence_boundaries() -> None:
    paragraph = (
        "The Retailer must notify the Distributor. "
        "It must do so within 5 business days, e.g. by email under clause 3.1.2. "
        "AEMO publishes the list."
    )
    chunks = chunk_markdown(f"Intro words here.\n\n{paragraph}", "doc", budget_words=16)
    assert [c.text for c in chunks] == [
        "Intro words here.\n\nThe Retailer must notify the Distributor.",
        "It must do so within 5 business days, e.g. by email under clause 3.1.2.",
        "AEMO publishes the list.",
    ]
    assert [count_words(c.text) for c in chunks] == [9, 14, 4]


def test_no_sentence_cut_after_an_abbreviation_or_inside_a_clause_number() -> None:
    paragraph = "Alpha beta gamma e.g. delta epsilon clause 3.1.2 zeta. Eta theta."
    chunks = chunk_markdown(paragraph, "doc", budget_words=6)
    # The first sentence (10 words) is over budget with no sentence boundary inside it, so
    # it is cut by words: the cut is never after "e.g." or inside "3.1.2".
    assert [c.text for c in chunks] == [
        "Alpha beta gamma e.g. delta epsilon",
        "clause 3.1.2 zeta. Eta theta.",
    ]


def test_pieces_of_one_paragraph_in_one_chunk_keep_their_original_spacing() -> None:
    paragraph = "One two.  Three four.\nFive six seven eight nine ten."
    chunks = chunk_markdown(paragraph, "doc", budget_words=6)
    assert [c.text for c in chunks] == ["One two.  Three four.", "Five six seven eight nine ten."]


def test_a_sentence_over_budget_is_cut_at_line_breaks_then_words() -> None:
    words = " ".join(f"w{i}" for i in range(1, 12))
    chunks = chunk_markdown(f"short line\n{words}", "doc", budget_words=4)
    assert [c.text for c in chunks] == [
        "short line",
        "w1 w2 w3 w4",
        "w5 w6 w7 w8",
        "w9 w10 w11",
    ]


def test_a_list_over_budget_is_split_between_items() -> None:
    markdown = "- alpha beta gamma\n  continued here\n- delta epsilon\n- zeta eta theta iota"
    chunks = chunk_markdown(markdown, "doc", budget_words=7)
    assert [c.text for c in chunks] == [
        "- alpha beta gamma\n  continued here",
        "- delta epsilon",
        "- zeta eta theta iota",
    ]


def test_line_endings_are_normalised_and_trailing_whitespace_trimmed() -> None:
    lf = chunk_markdown("# Title  \n\n  Indented text.   \nNext line.\n", "doc")
    crlf = chunk_markdown("# Title  \r\n\r\n  Indented text.   \r\nNext line.\r\n", "doc")
    assert crlf == lf
    assert [c.text for c in lf] == ["# Title\n\n  Indented text.\nNext line."]


def test_a_fenced_code_block_stays_whole_even_over_budget() -> None:
    code = "```python\nx = 1 + 2 + 3\n\n<!-- page 2 -->\ny = x * 4\n```"
    markdown = f"<!-- page 1 -->\n\nBefore.\n\n{code}\n\nAfter."
    chunks = chunk_markdown(markdown, "doc", budget_words=4)
    assert _summary(chunks) == [
        ("doc-0", "text", "Before.", (), 1, 1),
        ("doc-1", "text", "```python\nx = 1 + 2 + 3\n\ny = x * 4\n```", (), 1, 2),
        ("doc-2", "text", "After.", (), 2, 2),
    ]


def test_figure_markers_are_ordinary_text() -> None:
    markdown = "<!-- page 3 -->\n\n[Figure: Dispatch timeline]\n\nCaption text."
    assert _summary(chunk_markdown(markdown, "doc")) == [
        ("doc-0", "text", "[Figure: Dispatch timeline]\n\nCaption text.", (), 3, 3),
    ]


# --------------------------------------------------------------------------- tables

HEADER = "| Clause | Party | Obligation |"
ALIGN = "|---|:--:|---|"


def test_a_table_is_never_mixed_with_prose() -> None:
    markdown = f"Before the table.\n{HEADER}\n{ALIGN}\n| 1 | A | x |\n\nAfter the table."
    assert _summary(chunk_markdown(markdown, "doc")) == [
        ("doc-0", "text", "Before the table.", (), None, None),
        ("doc-1", "table", f"{HEADER}\n{ALIGN}\n| 1 | A | x |", (), None, None),
        ("doc-2", "text", "After the table.", (), None, None),
    ]


def test_a_table_with_two_body_rows_over_budget_stays_whole() -> None:
    rows = ["| 1 | Retailer | must notify the Distributor |", "| 2 | Distributor | must reply |"]
    markdown = "\n".join([HEADER, ALIGN, *rows])
    chunks = chunk_markdown(markdown, "doc", budget_words=5)
    assert _summary(chunks) == [("doc-0", "table", markdown, (), None, None)]
    assert count_words(chunks[0].text) == 16


def test_a_single_row_over_budget_is_its_own_part_with_the_header() -> None:
    small = ["| 1 | A | x |", "| 2 | B | y |"]
    huge = "| 3 | C | " + " ".join(f"word{i}" for i in range(20)) + " |"
    last = "| 4 | D | z |"
    markdown = "\n".join([HEADER, ALIGN, *small, huge, last])
    chunks = chunk_markdown(markdown, "doc", budget_words=15)
    head = f"{HEADER}\n{ALIGN}\n"
    assert [c.text for c in chunks] == [head + "\n".join(small), head + huge, head + last]
    assert [c.kind for c in chunks] == [KIND_TABLE] * 3
    assert [count_words(c.text) for c in chunks] == [12, 28, 9]


def test_a_table_across_a_page_break_repeats_its_header_and_reports_its_rows_pages() -> None:
    rows = [f"| {i} | P{i} | o{i} |" for i in range(1, 7)]
    markdown = "\n".join(
        [
            "<!-- page 7 -->",
            "## 5 Obligations",
            "",
            "Parties must meet these.",
            "",
            HEADER,
            ALIGN,
            *rows[:3],
            "<!-- page 8 -->",
            *rows[3:],
        ]
    )
    # header + alignment = 6 words, each row 3: two rows fit a budget of 12.
    chunks = chunk_markdown(markdown, "doc", budget_words=12)
    head = f"{HEADER}\n{ALIGN}\n"
    path = ("5 Obligations",)
    assert _summary(chunks) == [
        ("doc-0", "text", "## 5 Obligations\n\nParties must meet these.", path, 7, 7),
        ("doc-1", "table", head + "\n".join(rows[0:2]), path, 7, 7),
        ("doc-2", "table", head + "\n".join(rows[2:4]), path, 7, 8),
        ("doc-3", "table", head + "\n".join(rows[4:6]), path, 8, 8),
    ]


def test_headings_directly_above_a_table_lead_its_first_part() -> None:
    rows = [f"| {i} | P{i} | o{i} |" for i in range(1, 5)]
    markdown = "\n".join(
        [
            "<!-- page 3 -->",
            "## 4 Schedule",
            "",
            "###### **Table 2 Deadlines**",
            "<!-- page 4 -->",
            HEADER,
            ALIGN,
            *rows,
        ]
    )
    # lead 7 words ("##", "4", "Schedule", "######", "**Table", "2", "Deadlines**") + header 6
    # + one row 3 = 16; later parts hold three rows (6 + 3 + 3 + 3 = 15).
    chunks = chunk_markdown(markdown, "doc", budget_words=16)
    head = f"{HEADER}\n{ALIGN}\n"
    path = ("4 Schedule", "Table 2 Deadlines")
    lead = "## 4 Schedule\n\n###### **Table 2 Deadlines**"
    assert _summary(chunks) == [
        ("doc-0", "table", f"{lead}\n\n{head}{rows[0]}", path, 3, 4),
        ("doc-1", "table", head + "\n".join(rows[1:4]), path, 4, 4),
    ]
    assert all(count_words(c.text) <= 16 for c in chunks)
    # When the lead cannot fit beside the first row, it stays a text chunk of its own.
    tight = chunk_markdown(markdown, "doc", budget_words=14)
    assert _summary(tight)[0] == ("doc-0", "text", lead, path, 3, 3)
    assert [c.kind for c in tight[1:]] == ["table", "table"]


def test_tables_with_identical_headers_across_a_page_marker_are_merged() -> None:
    first = [f"| {i} | Retailer | r{i} |" for i in range(1, 4)]
    second = [f"| {i} | Retailer | r{i} |" for i in range(4, 7)]
    markdown = "\n".join(
        [
            "<!-- page 2 -->",
            HEADER,
            ALIGN,
            *first,
            "",
            "<!-- page 3 -->",
            "",
            HEADER,
            ALIGN,
            *second,
        ]
    )
    whole = chunk_markdown(markdown, "doc", budget_words=100)
    assert _summary(whole) == [
        ("doc-0", "table", "\n".join([HEADER, ALIGN, *first, *second]), (), 2, 3),
    ]
    parts = chunk_markdown(markdown, "doc", budget_words=15)
    head = f"{HEADER}\n{ALIGN}\n"
    assert _summary(parts) == [
        ("doc-0", "table", head + "\n".join(first), (), 2, 2),
        ("doc-1", "table", head + "\n".join(second), (), 3, 3),
    ]


def test_a_headerless_continuation_after_a_page_marker_joins_the_table() -> None:
    markdown = "\n".join(
        [HEADER, ALIGN, "| 1 | A | x |", "", "<!-- page 2 -->", "", "| 2 | B | y |"]
    )
    assert _summary(chunk_markdown(markdown, "doc")) == [
        ("doc-0", "table", "\n".join([HEADER, ALIGN, "| 1 | A | x |", "| 2 | B | y |"]), (), 1, 2),
    ]


@pytest.mark.parametrize(
    ("between", "second_header"),
    [
        ("\n\n<!-- page 2 -->\n\n", "| Term | Meaning | Source |"),  # another table
        ("\n\nA paragraph.\n\n<!-- page 2 -->\n\n", HEADER),  # prose between them
        ("\n\n", HEADER),  # no page break between them
    ],
)
def test_tables_are_not_merged_without_a_page_marker_alone_and_equal_headers(
    between: str, second_header: str
) -> None:
    one = f"{HEADER}\n{ALIGN}\n| 1 | A | x |"
    two = f"{second_header}\n{ALIGN}\n| 2 | B | y |"
    tables = [c.text for c in chunk_markdown(one + between + two, "doc") if c.kind == KIND_TABLE]
    assert tables == [one, two]


def test_a_400_row_table_is_split_between_rows_with_the_header_on_every_part() -> None:
    header = "| Clause | Party | Obligation |"
    rows = [
        f"| 3.1.{i} | Retailer | must notify the Distributor within {i} business days of … |"
        for i in range(1, 401)
    ]
    markdown = "\n".join(["<!-- page 1 -->", header, ALIGN, *rows])
    chunks = chunk_markdown(markdown, "obligations.pdf")
    assert all(c.kind == KIND_TABLE for c in chunks)
    seen: list[str] = []
    for chunk in chunks:
        lines = chunk.text.split("\n")
        assert lines[:2] == [header, ALIGN]
        assert all(line in rows for line in lines[2:])  # whole rows only
        seen.extend(lines[2:])
    assert seen == rows  # every row exactly once, in order
    # Measured (deterministic): a row is 12 words, header + alignment 6, so 24 rows a part.
    assert len(chunks) == 17
    assert max(count_words(c.text) for c in chunks) == 294
    assert max(len(c.text) for c in chunks) == 2038
    assert [c.id for c in chunks][:2] == ["obligations.pdf-0", "obligations.pdf-1"]
    assert chunks[-1].id == "obligations.pdf-16"


# --------------------------------------------------------------------------- labels


def _chunk(path: tuple[str, ...], text: str = "Bids are due by 12:30.") -> Chunk:
    return Chunk("d-0", "d", 0, text, path, 1, 1, KIND_TEXT)


def test_section_label_joins_the_heading_path() -> None:
    assert section_label(_chunk(("3 Dispatch", "3.1 Bids"))) == "3 Dispatch › 3.1 Bids"
    assert section_label(_chunk(())) == ""


def test_embedding_text_prefixes_title_and_heading_path() -> None:
    chunk = _chunk(("3 Dispatch", "3.1 Bids"))
    assert embedding_text(chunk, "SO_OP_3705 Dispatch") == (
        "SO_OP_3705 Dispatch › 3 Dispatch › 3.1 Bids\n\nBids are due by 12:30."
    )
    assert embedding_text(chunk) == "3 Dispatch › 3.1 Bids\n\nBids are due by 12:30."
    assert embedding_text(_chunk(())) == "Bids are due by 12:30."
    assert embedding_text(_chunk(()), "Title") == "Title\n\nBids are due by 12:30."
    # A title equal to the outermost heading is not said twice.
    assert (
        embedding_text(_chunk(("Title", "Part")), "Title")
        == "Title › Part\n\nBids are due by 12:30."
    )
    # An SEC filing's title is not embedded: its heading path alone
    filing = "3M COMPANY Form 10-K for the fiscal year ended December 31, 2018"
    assert embedding_text(_chunk(("3M COMPANY", "Item 7")), filing) == (
        "3M COMPANY › Item 7\n\nBids are due by 12:30."
    )
    assert prefix_title(filing) == "" and prefix_title(" Dispatch ") == "Dispatch"


def test_naming_title_cuts_a_filing_title_to_its_registrant_only() -> None:
    assert naming_title("Foot Locker, Inc. Form 8-K dated August 19, 2022") == "Foot Locker, Inc."
    assert naming_title("BEST BUY CO., INC. Form 10-Q") == "BEST BUY CO., INC."
    # titles kb did not build from a filing's cover keep every word
    assert naming_title("Dispatch procedure") == "Dispatch procedure"
    assert naming_title("Application Form 12-B guide") == "Application Form 12-B guide"
    assert naming_title("Form 10-K") == "Form 10-K"


@pytest.mark.parametrize(
    ("path", "title"),
    [
        (("3 Dispatch", "3.1 Bids"), "SO_OP_3705 Dispatch"),
        ((), "Title"),
        (("Title", "Part"), "Title"),
        ((), ""),
    ],
)
def test_stored_embedding_text_rebuilds_what_was_embedded_from_the_payload(
    path: tuple[str, ...], title: str
) -> None:
    chunk = _chunk(path)
    payload = PointPayload.build(
        heading_path=chunk.heading_path, doc_id="d", name="d.pdf", title=title, version="",
        page_start=1, page_end=1, chunk_index=0,
    )
    stored = PointPayload.from_payload(payload.to_payload())
    assert stored_embedding_text(chunk.text, stored) == embedding_text(chunk, title)


def test_stored_embedding_text_of_a_known_payload() -> None:
    payload = PointPayload(
        doc_id="d", name="d.pdf", title="SO_OP_3705 Dispatch", version="", page_start=4,
        page_end=4, section="3 Dispatch › 3.1 Bids",
    )
    assert stored_embedding_text("Bids are due by 12:30.", payload) == (
        "SO_OP_3705 Dispatch › 3 Dispatch › 3.1 Bids\n\nBids are due by 12:30."
    )


# --------------------------------------------------------------------------- properties

_VOCAB = ["alpha", "beta", "gamma", "3.1.2", "e.g.", "AEMO", "must", "notify", "Retailer", "x"]


@dataclass
class _Model:
    """What the generated Markdown holds, for checking the chunks against."""

    markdown: str = ""
    max_page: int = 1
    has_markers: bool = False
    # non-table content lines: (text, page, words of the block it is in)
    lines: list[tuple[str, int, int]] = field(default_factory=list)
    code_blocks: list[str] = field(default_factory=list)
    # tables: (header, alignment, [(row, page)])
    tables: list[tuple[str, str, list[tuple[str, int]]]] = field(default_factory=list)


_word = st.sampled_from(_VOCAB)
_sentence = st.lists(_word, min_size=1, max_size=8).map(
    lambda ws: " ".join([ws[0].capitalize(), *ws[1:]]) + "."
)
_element = st.one_of(
    st.tuples(st.just("heading"), st.integers(1, 6), st.lists(_word, min_size=1, max_size=4)),
    st.tuples(
        st.just("para"),
        st.lists(st.lists(_sentence, min_size=1, max_size=4), min_size=1, max_size=3),
        st.integers(0, 3),  # a page marker before this line (no blank lines around it), 0 = none
    ),
    st.tuples(
        st.just("list"), st.lists(st.lists(_word, min_size=1, max_size=6), min_size=1, max_size=5)
    ),
    st.tuples(st.just("figure"), st.lists(_word, min_size=1, max_size=4)),
    st.tuples(
        st.just("code"), st.lists(st.lists(_word, min_size=1, max_size=6), min_size=1, max_size=3)
    ),
    st.tuples(
        st.just("table"),
        st.integers(0, 12),  # body rows
        # page break inside: none; a marker line between rows; blank lines, a marker, blank
        # lines and the rows go on; the table cut in two with its header repeated
        st.sampled_from(["none", "marker", "gap", "split"]),
        st.integers(0, 12),  # where the break falls
        st.integers(1, 6),  # words per row's last cell
    ),
    st.just(("marker",)),
)


@st.composite
def _documents(draw: st.DrawFn) -> _Model:
    """Markdown from a small grammar of headings, paragraphs, lists, figures, code, tables and
    page markers, with the model of what it holds."""
    model = _Model()
    page = 1
    blocks: list[str] = []
    if draw(st.booleans()):
        blocks.append("<!-- page 1 -->")
        model.has_markers = True
    for number, element in enumerate(draw(st.lists(_element, max_size=14))):
        kind = element[0]
        if kind == "marker":
            page += 1
            model.has_markers = True
            blocks.append(f"<!-- page {page} -->")
        elif kind in ("heading", "figure"):
            line = (
                "#" * element[1] + " " + " ".join(element[2])
                if kind == "heading"
                else ("[Figure: " + " ".join(element[1]) + "]")
            )
            model.lines.append((line, page, count_words(line)))
            blocks.append(line)
        elif kind == "para":
            lines = [" ".join(sentences) for sentences in element[1]]
            words = count_words("\n".join(lines))
            text = []
            for index, line in enumerate(lines):
                if index and index == element[2]:
                    page += 1
                    model.has_markers = True
                    text.append(f"<!-- page {page} -->")
                model.lines.append((line, page, words))
                text.append(line)
            blocks.append("\n".join(text))
        elif kind in ("list", "code"):
            if kind == "list":
                lines = ["- " + " ".join(words) for words in element[1]]
            else:
                lines = ["```", *[" ".join(words) for words in element[1]], "```"]
                model.code_blocks.append("\n".join(lines))
            words = count_words("\n".join(lines))
            model.lines.extend((line, page, words) for line in lines)
            blocks.append("\n".join(lines))
        else:
            _, n_rows, brk, at, cell_words = element
            header, align = f"| T{number} a | T{number} b |", "|---|:--:|"
            rows: list[tuple[str, int]] = []
            text = [header, align]
            for r in range(n_rows):
                if brk != "none" and r == min(at, n_rows - 1) and r > 0:
                    page += 1
                    model.has_markers = True
                    text += {
                        "marker": [f"<!-- page {page} -->"],
                        "gap": ["", f"<!-- page {page} -->", ""],
                        "split": ["", f"<!-- page {page} -->", "", header, align],
                    }[brk]
                row = (
                    f"| r{number}.{r} | "
                    + " ".join(_VOCAB[(r + k) % len(_VOCAB)] for k in range(cell_words))
                    + " |"
                )
                rows.append((row, page))
                text.append(row)
            model.tables.append((header, align, rows))
            blocks.append("\n".join(text))
    model.max_page = page
    model.markdown = "\n\n".join(blocks)
    return model


def _split_lead(chunk: Chunk) -> tuple[str, str]:
    """``(lead, table text)`` of a chunk: headings that lead a table's first part, and the
    rest; ``("", text)`` for chunks without a lead."""
    if chunk.kind != KIND_TABLE or chunk.text.startswith("|"):
        return "", chunk.text
    lead, _, table = chunk.text.partition("\n\n|")
    return lead, "|" + table


def _prose(chunk: Chunk) -> str:
    """The prose of a chunk: all of a text chunk, the lead of a table chunk."""
    return chunk.text if chunk.kind == KIND_TEXT else _split_lead(chunk)[0]


def _table_of(chunk: Chunk, model: _Model) -> tuple[str, str, list[tuple[str, int]]]:
    lines = _split_lead(chunk)[1].split("\n")
    matches = [t for t in model.tables if t[0] == lines[0] and t[1] == lines[1]]
    assert len(matches) == 1, chunk.text
    return matches[0]


_PROPERTY_SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@_PROPERTY_SETTINGS
@given(model=_documents(), budget=st.integers(3, 40))
def test_property_chunking_is_deterministic_with_contiguous_ids(model: _Model, budget: int) -> None:
    first = chunk_markdown(model.markdown, "doc", budget)
    second = chunk_markdown(model.markdown, "doc", budget)
    assert first == second
    assert [c.id for c in first] == [f"doc-{i}" for i in range(len(first))]
    assert [c.index for c in first] == list(range(len(first)))
    assert {c.document for c in first} <= {"doc"}
    assert all(c.kind in (KIND_TEXT, KIND_TABLE) for c in first)


@_PROPERTY_SETTINGS
@given(model=_documents(), budget=st.integers(3, 40))
def test_property_every_line_is_covered_and_table_rows_exactly_once(
    model: _Model, budget: int
) -> None:
    chunks = chunk_markdown(model.markdown, "doc", budget)
    prose = [_prose(c) for c in chunks]
    # Prose: the words of the text chunks and table leads are the words of the non-table
    # lines, in order.
    expected_tokens = [token for line, _, _ in model.lines for token in line.split()]
    assert [token for text in prose for token in text.split()] == expected_tokens
    # A line whose block fits the budget appears verbatim, as a line of some chunk's prose.
    chunk_lines = Counter(line for text in prose for line in text.split("\n"))
    for line, _, block_words in model.lines:
        if block_words <= budget:
            assert chunk_lines[line] >= 1, line
    # Tables: each part starts with its table's header and alignment rows; rows exactly once.
    rows_seen: dict[str, list[str]] = {}
    for chunk in chunks:
        if chunk.kind != KIND_TABLE:
            continue
        header, align, rows = _table_of(chunk, model)
        lead, table = _split_lead(chunk)
        assert table.split("\n")[:2] == [header, align]
        assert not lead or all(
            line.startswith("#") for line in lead.split("\n") if line
        ), "only headings may lead a table"
        rows_seen.setdefault(header, []).extend(table.split("\n")[2:])
    for header, _, rows in model.tables:
        assert rows_seen.get(header) == [row for row, _ in rows]


@_PROPERTY_SETTINGS
@given(model=_documents(), budget=st.integers(3, 40))
def test_property_chunks_keep_to_the_budget_except_unsplittable_units(
    model: _Model, budget: int
) -> None:
    for chunk in chunk_markdown(model.markdown, "doc", budget):
        words = count_words(chunk.text)
        if chunk.kind == KIND_TEXT:
            # The only unsplittable text unit is a fenced code block.
            assert words <= budget or chunk.text in model.code_blocks, chunk.text
        else:
            _, _, rows = _table_of(chunk, model)
            lead, table = _split_lead(chunk)
            body = table.split("\n")[2:]
            # a lead is only taken when the part still fits
            assert words <= budget or (not lead and (len(body) == 1 or len(rows) < 3)), (
                chunk.text
            )


@_PROPERTY_SETTINGS
@given(model=_documents(), budget=st.integers(3, 40))
def test_property_page_spans_are_ordered_and_hold_their_lines(model: _Model, budget: int) -> None:
    chunks = chunk_markdown(model.markdown, "doc", budget)
    if not model.has_markers:
        assert all(c.page_start is None and c.page_end is None for c in chunks)
        return
    for chunk in chunks:
        assert chunk.page_start is not None and chunk.page_end is not None
        assert 1 <= chunk.page_start <= chunk.page_end <= model.max_page
    starts = [c.page_start for c in chunks]
    ends = [c.page_end for c in chunks]
    assert starts == sorted(starts)  # type: ignore[type-var]
    assert ends == sorted(ends)  # type: ignore[type-var]
    for chunk in chunks:
        if chunk.kind == KIND_TABLE:
            _, _, rows = _table_of(chunk, model)
            lead, table = _split_lead(chunk)
            body = set(table.split("\n")[2:])
            pages = [page for row, page in rows if row in body]
            assert pages or not rows, chunk.text
            if pages and not lead:
                assert (chunk.page_start, chunk.page_end) == (min(pages), max(pages))
            elif pages:  # the lead's pages join the span; they come before the rows
                assert chunk.page_start <= min(pages) and chunk.page_end == max(pages)
    # A line of a block that fits the budget is whole in some chunk; when it is unique (in
    # the input and among the chunks' lines, so a piece of a split line cannot be taken for
    # it), that chunk's span holds the line's page.
    chunk_lines = Counter(line for c in chunks for line in _prose(c).split("\n"))
    input_lines = Counter(line for line, _, _ in model.lines)
    for line, page, block_words in model.lines:
        if block_words <= budget and input_lines[line] == 1 and chunk_lines[line] == 1:
            (chunk,) = [c for c in chunks if line in _prose(c).split("\n")]
            assert chunk.page_start <= page <= chunk.page_end  # type: ignore[operator]


# --------------------------------------------------------------------------- real Markdown

_FOOTER = re.compile(r"^(©\s*AEMO\b.*|\d{1,3})\s*$")
_ALIGNMENT = re.compile(r"^\|(?:\s*:?-+:?\s*\|)+$")
_LOSS_FACTOR_PDF = "aemo_Marginal_Loss_Factors_for_the_2020-21_Financial_year.pdf"
#: 0-based pages 6-9 (printed 7-10): section 1's first table and three page breaks that cut
#: Queensland tables, which is what the merge and per-part pages are about. Four pages keep
#: the layout-mode conversion (~1-3 s/page) to seconds.
_PAGES = [6, 7, 8, 9]


@pytest.fixture(scope="module")
def loss_factor_markdown() -> tuple[str, list[int]]:
    """Converter-like Markdown of four pages of the loss-factor report: pymupdf4llm layout
    Markdown with ``<!-- page N -->`` markers and the running footer removed (as the
    converter contract in ``providers.base.ConvertedDocument`` requires)."""
    path = corpus_dir() / "pdfs" / _LOSS_FACTOR_PDF
    if not path.is_file():
        pytest.skip(f"{_LOSS_FACTOR_PDF} is not in the shared corpus at {path.parent}")
    import pymupdf4llm

    pages = pymupdf4llm.to_markdown(str(path), pages=_PAGES, page_chunks=True, use_ocr=False)
    parts, numbers = [], []
    for page in pages:
        number = page["metadata"]["page_number"]
        body = "\n".join(
            line for line in page["text"].split("\n") if not _FOOTER.match(line.strip())
        )
        parts.append(f"<!-- page {number} -->\n\n{body}")
        numbers.append(number)
    return "\n\n".join(parts), numbers


@pytest.mark.corpus
@pytest.mark.slow
def test_real_loss_factor_tables_keep_the_invariants(
    loss_factor_markdown: tuple[str, list[int]],
) -> None:
    markdown, numbers = loss_factor_markdown
    budget = 300
    chunks = chunk_markdown(markdown, "mlf.pdf", budget)
    assert chunks == chunk_markdown(markdown, "mlf.pdf", budget)
    assert [c.id for c in chunks] == [f"mlf.pdf-{i}" for i in range(len(chunks))]
    tables = [c for c in chunks if c.kind == KIND_TABLE]
    assert len(tables) >= 4
    for chunk in chunks:
        assert chunk.page_start is not None and chunk.page_end is not None
        assert min(numbers) <= chunk.page_start <= chunk.page_end <= max(numbers)
        lines = chunk.text.split("\n")
        if chunk.kind == KIND_TEXT:
            assert count_words(chunk.text) <= budget
            continue
        assert lines[0].startswith("|") and _ALIGNMENT.match(lines[1]), lines[:2]
        assert count_words(chunk.text) <= budget or len(lines) <= 3
    # The Queensland tables run across pages 8-10 and are merged: some part spans a page break.
    assert any(c.page_start < c.page_end for c in tables)  # type: ignore[operator]
    # Every body row of the input is in exactly one table part (repeated headers dropped).
    input_rows = [line.strip() for line in markdown.split("\n") if line.strip().startswith("|")]
    headers = {c.text.split("\n")[0] for c in tables}
    body_rows = Counter(r for r in input_rows if r not in headers and not _ALIGNMENT.match(r))
    part_rows = Counter(line for c in tables for line in c.text.split("\n")[2:])
    assert part_rows == body_rows


def test_an_unnumbered_heading_under_an_empty_same_level_heading_is_its_sub_part() -> None:
    # NIST SP 800-171 pattern: a requirement heading, then "DISCUSSION" at the same level.
    markdown = "\n".join(
        [
            "<!-- page 24 -->",
            "##### **3.1 ACCESS CONTROL**",
            "",
            "###### **3.1.5 Employ the principle of least privilege.**",
            "",
            "###### **DISCUSSION**",
            "",
            "Organizations employ the principle of least privilege.",
            "",
            "###### **3.1.6 Use non-privileged accounts.**",
            "",
            "###### **DISCUSSION**",
            "",
            "This requirement limits exposure.",
        ]
    )
    chunks = chunk_markdown(markdown, "nist", budget_words=300)
    assert _summary(chunks) == [
        (
            "nist-0",
            "text",
            "##### **3.1 ACCESS CONTROL**\n\n###### **3.1.5 Employ the principle of least "
            "privilege.**\n\n###### **DISCUSSION**\n\nOrganizations employ the principle of "
            "least privilege.",
            ("3.1 ACCESS CONTROL", "3.1.5 Employ the principle of least privilege.", "DISCUSSION"),
            24,
            24,
        ),
        (
            "nist-1",
            "text",
            "###### **3.1.6 Use non-privileged accounts.**\n\n###### **DISCUSSION**\n\n"
            "This requirement limits exposure.",
            ("3.1 ACCESS CONTROL", "3.1.6 Use non-privileged accounts.", "DISCUSSION"),
            24,
            24,
        ),
    ]


def test_a_numbered_heading_after_an_empty_numbered_one_is_its_sibling() -> None:
    markdown = "### 3.3 [This section is deleted]\n\n### 3.4 Conditions\n\nText."
    first, second = chunk_markdown(markdown, "doc")
    assert (first.text, first.heading_path) == (
        "### 3.3 [This section is deleted]",
        ("3.3 [This section is deleted]",),
    )
    assert (second.text, second.heading_path) == (
        "### 3.4 Conditions\n\nText.",
        ("3.4 Conditions",),
    )


# --------------------------------------------------------------------------- fences


@pytest.mark.parametrize(
    "fence",
    [
        "```python\n# a comment, not a heading\n\nx = 1\n```",
        "~~~\n## not a heading\n~~~",
        "````markdown\n# Example heading\n```python\n# comment\n```\n````",
        "~~~text\n```\n# inside backticks inside tildes\n```\n~~~",
        "```\n# a shorter fence does not close\n``\n``` not a closer: text after it\n```",
    ],
    ids=["backticks", "tildes", "four-backticks-holding-three", "tildes-holding-backticks",
         "closers-that-do-not-close"],
)
def test_a_hash_line_inside_a_fence_is_code_not_a_heading(fence: str) -> None:
    markdown = f"# Setup\n\nInstall it.\n\n{fence}\n\n## Run\n\nStart it."
    assert _summary(chunk_markdown(markdown, "doc")) == [
        ("doc-0", "text", f"# Setup\n\nInstall it.\n\n{fence}", ("Setup",), None, None),
        ("doc-1", "text", "## Run\n\nStart it.", ("Setup", "Run"), None, None),
    ]


def test_a_fence_is_never_split_and_never_shares_past_the_budget() -> None:
    code = "```\none two\n\nthree four\n```"
    markdown = f"# A\n\nalpha beta gamma.\n\n{code}\n\ndelta epsilon."
    # the fence (6 words, its two fence lines included) does not fit beside the heading and
    # paragraph (5), so it starts a chunk; the paragraph after it (2) fits beside it
    assert [c.text for c in chunk_markdown(markdown, "doc", budget_words=8)] == [
        "# A\n\nalpha beta gamma.",
        f"{code}\n\ndelta epsilon.",
    ]


def test_a_fence_over_the_budget_is_one_chunk_of_its_own() -> None:
    code = "```sh\n# step one\nrun a b c d e f\n\n# step two\nrun g h i j k l\n```"
    markdown = f"# Build\n\n{code}\n\nDone."
    assert _summary(chunk_markdown(markdown, "doc", budget_words=5)) == [
        ("doc-0", "text", "# Build", ("Build",), None, None),
        ("doc-1", "text", code, ("Build",), None, None),
        ("doc-2", "text", "Done.", ("Build",), None, None),
    ]


def test_an_unclosed_fence_runs_to_the_end_of_the_document() -> None:
    markdown = (
        "<!-- page 1 -->\n# Guide\n\nIntro.\n\n```\n# not a heading\n\n<!-- page 2 -->\n"
        "## nor this\n| a | b |\n|---|---|\n| 1 | 2 |\n\n\n"
    )
    assert _summary(chunk_markdown(markdown, "doc", budget_words=3)) == [
        ("doc-0", "text", "# Guide\n\nIntro.", ("Guide",), 1, 1),
        (
            "doc-1", "text",
            "```\n# not a heading\n\n## nor this\n| a | b |\n|---|---|\n| 1 | 2 |",
            ("Guide",), 1, 2,
        ),
    ]


def test_a_backtick_in_a_backtick_fence_info_string_makes_it_text() -> None:
    markdown = "```not`a fence\n\n# Heading\n\nText."
    assert [(c.text, c.heading_path) for c in chunk_markdown(markdown, "doc")] == [
        ("```not`a fence", ()),
        ("# Heading\n\nText.", ("Heading",)),
    ]


def test_a_list_items_indented_fence_is_one_block_with_its_blank_lines() -> None:
    code = "    ```bash\n    # install\n\n    pip install kb\n    ```"
    markdown = f"1. Install:\n\n{code}\n\n2. Run it."
    assert [c.text for c in chunk_markdown(markdown, "doc", budget_words=3)] == [
        "1. Install:", code, "2. Run it.",
    ]
    # closed by a fence indented less (still within 3 columns of the opening one)
    closed = "- Item\n    ```\n    # x\n\n    y\n  ```\n\n# H\n\nText."
    assert [c.text for c in chunk_markdown(closed, "doc")] == [
        "- Item\n\n    ```\n    # x\n\n    y\n  ```",
        "# H\n\nText.",
    ]
    # unclosed, it ends where the item does: before the first line indented less
    unclosed = "- Item\n\n    ```\n    code\n\n    more\n- Next item\n\n# H\n\nText."
    assert [c.text for c in chunk_markdown(unclosed, "doc", budget_words=3)] == [
        "- Item", "    ```\n    code\n\n    more", "- Next item", "# H\n\nText.",
    ]


def test_an_indented_fence_line_outside_a_list_is_paragraph_text() -> None:
    markdown = "Text.\n\n    ```\n# Heading\n\nMore."
    assert [(c.text, c.heading_path) for c in chunk_markdown(markdown, "doc", budget_words=3)] == [
        ("Text.\n\n    ```", ()),
        ("# Heading\n\nMore.", ("Heading",)),
    ]


def test_markdown_headings_skips_hash_lines_inside_fences() -> None:
    markdown = "# Guide\r\n\r\n````\n# x\n```\n## y\n```\n````\n\n## Setup\n\n~~~\n# z"
    assert markdown_headings(markdown) == [(1, "Guide"), (2, "Setup")]


_fence_char = st.sampled_from(["`", "~"])


@st.composite
def _fenced_documents(draw: st.DrawFn) -> tuple[str, list[str], list[str]]:
    """Markdown of headings, paragraphs and fences whose code holds ``#`` lines and shorter or
    other-character fence lines; returns (markdown, heading titles, code blocks)."""
    parts: list[str] = []
    titles: list[str] = []
    codes: list[str] = []
    for number, kind in enumerate(
        draw(st.lists(st.sampled_from(["heading", "para", "code"]), max_size=10))
    ):
        if kind == "heading":
            title = f"Section {number}"
            titles.append(title)
            parts.append("#" * draw(st.integers(1, 4)) + " " + title)
        elif kind == "para":
            parts.append(" ".join(draw(st.lists(_word, min_size=1, max_size=12))) + ".")
        else:
            char, length = draw(_fence_char), draw(st.integers(3, 5))
            other = "~" if char == "`" else "`"
            inner = draw(
                st.lists(
                    st.one_of(
                        st.builds(lambda w: f"# {w}", _word),
                        st.builds(lambda w: f"## {w} {number}", _word),
                        st.just(char * (length - 1)),
                        st.just(other * length),
                        st.just(""),
                        st.builds(lambda ws: " ".join(ws), st.lists(_word, min_size=1, max_size=6)),
                    ),
                    max_size=6,
                )
            )
            while inner and not inner[-1]:
                inner.pop()
            code = "\n".join([char * length + "text", *inner, char * length])
            codes.append(code)
            parts.append(code)
    return "\n\n".join(parts), titles, codes


@_PROPERTY_SETTINGS
@given(document=_fenced_documents(), budget=st.integers(2, 30))
def test_property_fences_stay_whole_and_never_start_sections(
    document: tuple[str, list[str], list[str]], budget: int
) -> None:
    markdown, titles, codes = document
    chunks = chunk_markdown(markdown, "doc", budget)
    assert {title for c in chunks for title in c.heading_path} <= set(titles)
    for code in codes:
        holding = [c for c in chunks if code in c.text]
        assert len(holding) >= 1, code  # whole inside one chunk, never cut
        if count_words(code) > budget:
            assert code in [c.text for c in chunks], code  # alone when over the budget
    assert [title for _, title in markdown_headings(markdown)] == titles
