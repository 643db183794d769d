"""A search result's verbatim quote and its page (``kb_shared.search.quotes``), under hostile input:
quotes too long, table rows of numbers, cells with line breaks, regex-special text, chunks
whose pages were not found in the PDF (issue 25, "Citations that are true to the page")."""

from __future__ import annotations

from kb_shared.search.citations import PointPayload, heading_label, readable
from kb_shared.search.quotes import (
    QUOTE_CHARS,
    MarkdownPages,
    cut,
    passage_quote,
    unit_offset,
)
from kb_shared.search.retrieval_features import UnitMatch, units


def payload(**fields: object) -> PointPayload:
    base: dict[str, object] = {
        "doc_id": "d1", "name": "proc.pdf", "title": "Procedure", "version": "1",
        "page_start": 5, "page_end": 6, "chunk_index": 0,
    }
    base.update(fields)
    return PointPayload(**base)  # type: ignore[arg-type]


def match_of(text: str, starting: str) -> UnitMatch:
    unit = next(u for u in units(text) if u.text.startswith(starting))
    return UnitMatch(unit, 1.0, 1.0)


TWO_PAGES = (
    "The Retailer must notify the Distributor within two business days. "
    "The Distributor must confirm the registration within one business day."
)


def test_a_located_chunk_quotes_the_page_its_runs_give_the_sentence() -> None:
    second = TWO_PAGES.index("The Distributor must")
    point = payload(page_runs=((0, 5), (second, 6)), located=True,
                    page_label_start="5", page_label_end="vi")
    quote = passage_quote(point, TWO_PAGES, match_of(TWO_PAGES, "The Distributor must"))
    assert quote is not None
    assert quote.text == "The Distributor must confirm the registration within one business day."
    assert (quote.page, quote.page_label, quote.page_reference) == (6, "vi", "vi (PDF page 6)")
    first = passage_quote(point, TWO_PAGES, None)  # no unit matched: the first sentence
    assert first is not None and (first.page, first.text[:12]) == (5, "The Retailer")


def test_a_quote_on_a_middle_page_shows_its_printed_label_when_the_numbering_runs_on() -> None:
    three = TWO_PAGES + " Either party may ask for the register."
    third = three.index("The Distributor must")
    runs = ((0, 10), (third, 11), (three.index("Either party"), 12))
    numbered = payload(page_start=10, page_end=12, page_runs=runs, located=True,
                       page_label_start="8", page_label_end="10")
    quote = passage_quote(numbered, three, match_of(three, "The Distributor must"))
    assert quote is not None
    assert (quote.page, quote.page_label, quote.page_reference) == (11, "9", "9 (PDF page 11)")
    # roman numerals, or a numbering that jumps inside the chunk: the PDF page alone
    for start, end in (("iv", "vi"), ("8", "11")):
        other = payload(page_start=10, page_end=12, page_runs=runs, located=True,
                        page_label_start=start, page_label_end=end)
        quote = passage_quote(other, three, match_of(three, "The Distributor must"))
        assert quote is not None and (quote.page, quote.page_label) == (11, "")


def test_an_unlocated_chunk_does_not_quote_the_page_of_its_unverified_runs() -> None:
    # the chunks asset stores the runs of a chunk it could not verify (located=False): a stray
    # 4-word run put it on page 40; the citation keeps the markers' pp. 5-6, so must the quote
    point = payload(page_runs=((0, 40),), located=False)
    quote = passage_quote(point, TWO_PAGES, match_of(TWO_PAGES, "The Distributor must"))
    assert quote is not None
    assert quote.page == 5
    assert PointPayload.from_payload(point.to_payload()).located is False


def test_a_sentence_longer_than_the_limit_is_cut_at_a_word_and_stays_verbatim() -> None:
    sentence = "The Registered Participant " + "must keep the records of each dispatch " * 12 + "."
    text = sentence + " Next sentence."
    quote = passage_quote(payload(), text, match_of(text, "The Registered"))
    assert quote is not None
    assert QUOTE_CHARS == 300
    # 299 characters: the 300th would fall inside the next "must"
    assert (len(quote.text), quote.text[-25:]) == (299, "the records of each dispatch"[-25:])
    assert " ".join(sentence.split()).startswith(quote.text)
    assert cut("x" * 301) == "x" * 300  # one word longer than the limit: cut at the limit
    assert cut("a " + "y" * 400) == "a " + "y" * 298


def test_table_rows_of_numbers_and_cells_with_line_breaks_read_as_the_page_shows_them() -> None:
    assert readable("| 2019 | 1,234.5 | (12) |  |") == "2019 | 1,234.5 | (12)"
    # pymupdf4llm writes a line break inside a cell as <br>: the words stay apart
    assert readable("| Net revenue<br>2023 | **1,200** |") == "Net revenue 2023 | 1,200"
    assert readable("Area in m<sup>2</sup> of **site** SO_OP_3705.") == "Area in m2 of site SO_OP_3705."


def test_a_formula_keeps_its_multiplication_signs_and_emphasis_still_goes() -> None:
    # the MLF report's interconnector loss equations (p. 44): the "*" is on the page
    assert readable("Murraylink loss = -0.0707*Flowt + 1.1479E-03*(Flowt)2") == (
        "Murraylink loss = -0.0707*Flowt + 1.1479E-03*(Flowt)2"
    )
    assert readable("= (-0.1*Nd)*NQt + 1.0989E-04*(NQt)^2") == (
        "= (-0.1*Nd)*NQt + 1.0989E-04*(NQt)^2"
    )
    assert readable("*Note*: see (_this_) and **that**.") == "Note: see (this) and that."


def test_unit_offset_with_regex_characters_line_breaks_and_long_units() -> None:
    text = "Intro.\nPrice ($/MWh)\n[note 3]* applies (see 2.1+).  Then more."
    assert unit_offset(text, "Price ($/MWh) [note 3]* applies (see 2.1+).") == 7
    long_words = [f"w{n}" for n in range(400)]
    long_text = "Start. " + "\n".join(" ".join(long_words[i : i + 10]) for i in range(0, 400, 10))
    assert unit_offset(long_text, " ".join(long_words)) == 7
    assert unit_offset(text, "Not in the chunk at all.") == -1
    assert unit_offset(text, "   ") == -1


def test_an_unlocated_chunk_finds_its_quotes_page_in_the_markdown() -> None:
    markdown = (
        "<!-- page 5 -->\nThe Retailer must notify the Distributor within two business days.\n\n"
        "<!-- page 6 -->\nThe Distributor must confirm the registration within one business day.\n"
    )
    pages = MarkdownPages({"md/d1.md": markdown.encode()}.__getitem__)
    point = payload(page_runs=((0, 40),), located=False, markdown_key="md/d1.md")
    quote = passage_quote(point, TWO_PAGES, match_of(TWO_PAGES, "The Distributor must"), pages)
    assert quote is not None and quote.page == 6


def test_a_figure_marker_is_never_the_quote() -> None:
    text = "[Figure: Figure 1 – Notification flow]\n\nThe Retailer must notify the Distributor."
    payload = PointPayload.build(doc_id="d.pdf", name="d.pdf", title="D", version="",
                                 page_start=2, page_end=2)
    marker = units(text)[0]
    assert marker.text == "[Figure: Figure 1 – Notification flow]"
    quote = passage_quote(payload, text, UnitMatch(marker, 0.9, 0.9))
    assert (quote.text, quote.page) == ("The Retailer must notify the Distributor.", 2)
    assert passage_quote(payload, "[Figure: image on page 2]", None) is None


def test_a_heading_label_drops_the_emphasis_marks_a_converter_leaves() -> None:
    assert heading_label("*****UPDATED*** Active internet connection**") == (
        "UPDATED Active internet connection"
    )
    assert heading_label("3 Flow › **3.1 NEW** _Rules_") == "3 Flow › 3.1 NEW Rules"
    assert heading_label("**3.1.19 Encrypt CUI.**<sup>23</sup> › Note<SUP>a, b</SUP>") == (
        "3.1.19 Encrypt CUI. › Note"
    )
    # marks inside a word or between digits are text, not emphasis
    assert heading_label("A_B_C rule 2*3") == "A_B_C rule 2*3"
