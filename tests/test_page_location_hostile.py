"""Hostile input for ``kb_shared.ingest.page_location``: PDFs built with PyMuPDF whose text repeats on
many pages, runs over page breaks, spells ligatures, uses other scripts, or has empty pages,
and one real PDF of the shared corpus (issue 25, "Citations that are true to the page")."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from kb_shared.search.citations import PointPayload
from kb_shared.ingest.page_location import (
    MAX_CANDIDATES,
    PageText,
    locate,
    page_words,
    passage_words,
    words_with_offsets,
)
from kb_shared.search.quotes import passage_quote
from kb_shared.search.retrieval_features import UnitMatch, units

DEJAVU = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
CORPUS = Path("/work/shared/corpus/pdfs")


def build_pdf(pages: list[list[str]], *, font: Path | None = None) -> bytes:
    """A PDF with one page per item, each line of it written at its own height."""
    with pymupdf.open() as pdf:
        for lines in pages:
            page = pdf.new_page()
            for row, line in enumerate(lines):
                if font is None:
                    page.insert_text((50, 60 + 14 * row), line, fontsize=10)
                else:
                    page.insert_text((50, 60 + 14 * row), line, fontsize=10, fontname="dv",
                                     fontfile=str(font))
        return pdf.tobytes()


DISCLAIMER = "Confidential: this report is provided for information only and must not be relied upon."


def test_boilerplate_on_every_page_is_cited_on_the_markers_page_not_the_first_pages() -> None:
    # the same paragraph is on all 20 pages; the chunk came from page 15 (its marker): with
    # more pages than MAX_CANDIDATES holding it, page 15 must still be among the candidates
    assert MAX_CANDIDATES < 20
    text = PageText.from_pdf(build_pdf(
        [[f"Section {n} market notice number {n * 7}", DISCLAIMER] for n in range(1, 21)]
    ))
    found = locate(DISCLAIMER, text, (15, 15))
    assert (found.located, found.pages, found.runs) == (True, (15,), ((0, 15),))
    # without markers the earliest page holding it is as good as any: page 1
    assert locate(DISCLAIMER, text).pages == (1,)


def test_a_table_continued_without_its_header_cites_each_row_on_its_own_page() -> None:
    page_1 = ["Table 4 Regional reference prices", "Region Price Volume"] + [
        f"{region} {price} {volume}" for region, price, volume in
        (("NSW1", "45.20", "1200"), ("QLD1", "39.75", "980"), ("VIC1", "51.05", "1410"))
    ]
    page_2 = ["SA1 88.10 640", "TAS1 33.35 310", "2019 2020 2021"]
    text = PageText.from_pdf(build_pdf([["Cover"], page_1, page_2]))
    chunk = (
        "Table 4 Regional reference prices\n\n"
        "|Region|Price|Volume|\n|---|---|---|\n|NSW1|45.20|1200|\n|QLD1|39.75|980|\n"
        "|VIC1|51.05|1410|\n|SA1|88.10|640|\n|TAS1|33.35|310|\n|2019|2020|2021|\n"
    )
    found = locate(chunk, text, (2, 2))  # the converter put the whole table on page 2
    assert found.located is True and found.pages == (2, 3)
    assert found.page_at(chunk.index("|VIC1|")) == 2
    assert found.page_at(chunk.index("|SA1|")) == 3
    assert found.page_at(chunk.index("|2019|")) == 3  # a row made only of numbers
    # and the quote of the row that answers names page 3
    point = PointPayload(doc_id="d", name="t.pdf", title="t", version="1", page_start=2,
                         page_end=3, page_runs=found.runs, located=True)
    row = next(u for u in units(chunk) if u.text.startswith("|SA1|"))
    quote = passage_quote(point, chunk, UnitMatch(row, 1.0, 1.0))
    assert quote is not None and (quote.text, quote.page) == ("SA1 | 88.10 | 640", 3)


def test_a_chunk_over_three_pages_with_an_empty_page_between() -> None:
    pages = [
        ["Part one begins the obligations of the market customer in full."],
        ["Part two continues the obligations of the market customer here."],
        [],  # a blank page (a scanned image, or left empty on purpose)
        ["Part three closes the obligations of the market customer at last."],
    ]
    text = PageText.from_pdf(build_pdf(pages))
    assert text.pages == [1, 2, 3, 4] and text.words[3] == []
    chunk = "\n\n".join(lines[0] for lines in pages if lines)
    found = locate(chunk, text, (1, 4))
    assert found.located is True and found.pages == (1, 2, 4)
    assert found.runs == ((0, 1), (chunk.index("Part two"), 2), (chunk.index("Part three"), 4))


def test_ligatures_of_the_text_layer_match_the_markdowns_spelled_out_letters() -> None:
    pdf = build_pdf([["Cover page"], ["The ﬁnancial beneﬁts of the oﬀer are ﬂat this year."]],
                    font=DEJAVU)
    text = PageText.from_pdf(pdf)
    with pymupdf.open(stream=pdf, filetype="pdf") as doc:
        assert "ﬁnancial" in doc[1].get_text()  # PyMuPDF's plain text keeps the ligature
    assert text.words[2][:4] == ["the", "financial", "benefits", "of"]
    found = locate("The financial benefits of the offer are flat this year.", text, (2, 2))
    assert (found.located, found.pages) == (True, (2,))


def test_a_character_that_lower_cases_longer_keeps_the_offsets_of_the_runs() -> None:
    # "İ".lower() is two characters: offsets must still point into the chunk as written
    text = PageText.from_texts([
        "İİİİ registry notes apply here today for every site",
        "The Distributor must update the register promptly",
    ])
    chunk = "İİİİ registry notes apply here today for every site.\n\nThe Distributor must update the register promptly."
    assert [w for w, _ in words_with_offsets("İx")] == ["i", "x"] == page_words("İx")
    found = locate(chunk, text, (1, 2))
    assert found.runs == ((0, 1), (chunk.index("The Distributor"), 2))


def test_converter_comments_and_picture_text_markers_are_not_words_of_the_page() -> None:
    chunk = (
        "Sei f stetig und A zusammenhängend, so ist f(A) zusammenhängend.\n\n"
        "<!-- Start of picture text -->\nf(A) = U1 ∪ U2<br>\n<!-- End of picture text -->\n"
    )
    assert passage_words(chunk)[-4:] == ["f", "a", "u1", "u2"]
    text = PageText.from_texts(["Vorwort", "Sei f stetig und A zusammenhängend, so ist f(A) "
                                "zusammenhängend.\nf(A) = U1 ∪U2"])
    assert locate(chunk, text, (2, 2)).located is True


def test_a_passage_in_a_script_without_latin_words_is_flagged_not_placed() -> None:
    greek = "Ο Διανομέας ενημερώνει το μητρώο εντός μίας εργάσιμης ημέρας."
    text = PageText.from_texts(["Κεφάλαιο πρώτο", greek])
    assert text.words[2] == []  # the shared word rule gives Greek no words
    found = locate(greek, text, (2, 2))
    assert (found.located, found.runs, found.pages) == (False, (), ())
    # a Greek passage with two numbers is placed on the markers' page, not the first page
    # that happens to hold the same numbers
    numbers = "Άρθρο 5 του νόμου 2019 ισχύει."
    text = PageText.from_texts(["Άρθρο 5 Εισαγωγή 2019", "Κεφάλαιο", numbers])
    assert locate(numbers, text, (3, 3)).pages == (3,)


def test_two_columns_read_across_by_the_converter_still_locate_on_their_page() -> None:
    # the text layer reads the left column, then the right; the Markdown interleaves them
    left = ["The left column describes the dispatch", "of scheduled generating units in order."]
    right = ["The right column describes the pricing", "of ancillary services in each interval."]
    with pymupdf.open() as pdf:
        pdf.new_page().insert_text((50, 60), "Cover")
        page = pdf.new_page()
        for row, line in enumerate(left):
            page.insert_text((40, 60 + 14 * row), line, fontsize=9)
        for row, line in enumerate(right):
            page.insert_text((320, 60 + 14 * row), line, fontsize=9)
        data = pdf.tobytes()
    text = PageText.from_pdf(data)
    chunk = " ".join(a + " " + b for a, b in zip(left, right, strict=True))
    found = locate(chunk, text, (2, 2))
    assert (found.located, found.pages) == (True, (2,))


@pytest.mark.slow
def test_a_real_german_pdf_with_ligatures_and_picture_text_locates_its_chunks() -> None:
    # shared corpus: the text layer spells "oﬀen" with a ligature, pymupdf4llm writes "offen"
    # and wraps formulas in "<!-- Start of picture text -->" comments
    text = PageText.from_pdf((CORPUS / "long_pypdf_GeoTopo-komprimiert_de.pdf").read_bytes())
    assert "offen" in text.words[18]
    chunk = (
        "### **Bemerkung 17**\n\nSei _f_ : _X → Y_ stetig. Ist _A ⊆ X_ zusammenhängend, so ist "
        "_f_ ( _A_ ) _⊆ Y_ zusammenhängend. **Beweis:** Sei _f_ ( _A_ ) = _U_ 1 _∪ U_ 2 _, Ui̸_ "
        "= _∅,_ offen, disjunkt.\n\n<!-- Start of picture text -->\n⇒ f − 1 ( f ( A )) =  "
        "f − 1 ( U 1)  ∪ f − 1 ( U 2)<br>\n<!-- End of picture text -->\n"
    )
    found = locate(chunk, text, (18, 18))
    assert (found.located, found.pages) == (True, (18,))


def test_words_hyphenated_at_line_ends_match_joined_words_and_kept_compounds() -> None:
    # the converter joins a syllable break ("regu-" / "lation") and keeps a compound's hyphen
    # ("n-" / "octanal"): the page must match the chunk either way
    lines = ["The Distributor applies the regu-", "lation of the market to every par-",
             "ticipant who regis-", "tered a connec-", "tion point in the re-",
             "gion during the year. The n-", "octanal sample is kept cold."]
    text = PageText.from_pdf(build_pdf([["Cover"], lines]))
    assert text.words[2][4:6] == ["regu", "lation"]  # the plain text as PyMuPDF reads it
    joined = ("The Distributor applies the regulation of the market to every participant who "
              "registered a connection point in the region during the year.")
    assert (locate(joined, text, (2, 2)).located, locate(joined, text).pages) == (True, (2,))
    assert locate("The n-octanal sample is kept cold.", text, (2, 2)).located is True
    # a hyphen inside a line is no break: "cross-border" is not read as "crossborder"
    inline = PageText.from_texts(["cross-border trade rules apply"])
    assert inline.gram_pages(("crossborder", "trade", "rules", "apply")) == set()
    assert inline.gram_pages(("cross", "border", "trade", "rules")) == {1}


def test_an_inline_tag_is_no_word_that_can_match_another_page() -> None:
    # 3M's 10-K (FinanceBench): a chunk "2 / <u>Table of Contents</u>" (a page number and the
    # running link) went to page 96, whose text reads "Table of Contents U.S. Pension Plans":
    # the tag's "u" made the run "table of contents u"
    texts = [f"Table of Contents\nItem {n} business overview of the year\n{n}" for n in range(1, 9)]
    texts.append("Table of Contents\nU.S. Pension Plans and Postretirement Benefit Plan Assets")
    text = PageText.from_texts(texts)
    found = locate("2\n\n<u>Table of Contents</u>", text, (2, 3))
    assert (found.located, found.pages) == (True, (2, 3))


LIST = [
    "+ 0.3120 x Crudine Ridge wind farm", "+ 0.2709 x Mt Piper 1 & 2",
    "+ 0.2232 x Bayswater 3 & 4", "+ 0.1587 x Woodlawn wind farm",
    "+ 0.1409 x Bayswater 1 & 2", "- 0.6228 x Shoalhaven",
]


def test_a_passage_printed_again_pages_later_stays_on_the_markers_pages() -> None:
    # AEMO's Constraint Implementation Guidelines print the same factor list on pp. 19-20 and
    # again on p. 22; the chunk of pp. 19-20 must not move to p. 22 (the whole list is there,
    # so one page beats two by the switch cost)
    texts = [
        "Cover", "Contents", "3.2 Example\nThe constraint equation has the factors\n" + LIST[0],
        "\n".join(LIST[1:]) + "\n3.3 Dispatch RHS\nThe right-hand side is computed each interval.",
        "4 Other matters of the guideline",
        "4.1 The list again for comparison\n" + "\n".join(LIST),
    ]
    text = PageText.from_texts(texts)
    chunk = "\n\n".join(f"- **_{line}_**" for line in LIST)
    found = locate(chunk, text, (3, 4))
    assert (found.located, found.pages) == (True, (3, 4))
    assert found.runs == ((0, 3), (chunk.index("- **_+ 0.2709"), 4))
    # with no markers, one page holding all of it is the better reading
    assert locate(chunk, text).pages == (6,)
