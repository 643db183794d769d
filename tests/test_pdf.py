"""PDF inspection shared by both converters (``kb_shared.ingest.pdf``): opening, the text-layer
statistics behind the scanned/unmappable refusals, titles and versions.

The refusal messages themselves are tested through the local converter in
``tests/providers/test_local_markdown.py``. Real-document titles and versions read
``../shared/corpus`` and skip without it; they run no layout, so they are fast.
"""

from __future__ import annotations

import pymupdf
import pytest

from kb_shared.errors import ConversionError
from kb_shared.ingest.pdf import (
    MIN_INVISIBLE_TEXT_CHARS,
    TextLayerStats,
    check_text_layer,
    count_unmapped,
    drop_unmapped,
    extract_title,
    extract_version,
    press_release_title,
    sec_filing_title,
    open_pdf,
    read_page_text,
    unmapped_characters,
)
from kb_shared.providers.local_markdown import PymupdfMarkdownConverter
from kb_shared.ingest.contextual import prefix_title
from kb_shared.search.citations import naming_title
from tests.conftest import corpus_dir
from tests.providers.pdf_builders import (
    doc_with_lines,
    image_page_pdf,
    text_pdf,
    type0_pdf_without_tounicode,
)

CVP = "aemo_Schedule_of_Constraint_Violation_Penalty_factors.pdf"
FCAS = "aemo_FCAS_Model_in_NEMDE.pdf"


# --------------------------------------------------------------------------------------
# Opening and the text layer
# --------------------------------------------------------------------------------------
def test_the_unmapped_characters_are_the_replacement_character_and_the_private_use_areas() -> None:
    every = "".join(chr(code) for code in range(0x110000) if not 0xD800 <= code <= 0xDFFF)
    private_use = [*range(0xE000, 0xF900), *range(0xF0000, 0xFFFFE), *range(0x100000, 0x10FFFE)]
    expected = "".join(map(chr, [0xFFFD, *private_use]))
    assert len(expected) == 1 + 6_400 + 65_534 + 65_534  # Unicode 15.1 §23.5
    assert count_unmapped(every) == len(expected)
    unmapped = set(expected)
    assert drop_unmapped(every) == "".join(ch for ch in every if ch not in unmapped)
    assert drop_unmapped(expected) == ""
    assert drop_unmapped("\uf0b7 Bullet \ufffdtext\U000f0001") == " Bullet text"


def test_header_after_leading_junk_is_still_a_pdf() -> None:
    # Acrobat accepts the header anywhere in the first 1,024 bytes; so do we.
    doc = open_pdf(b"\r\n" * 20 + text_pdf("Shifted header"), "shifted.pdf")
    try:
        assert doc.page_count == 1
    finally:
        doc.close()


def test_owner_password_only_opens() -> None:
    # Permissions-only encryption (empty user password) opens without a prompt.
    doc = pymupdf.open(stream=text_pdf("Printable but not editable"))
    restricted = doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="own", user_pw="")
    opened = open_pdf(restricted, "restricted.pdf")
    try:
        assert "Printable but not editable" in opened[0].get_text()
    finally:
        opened.close()


def test_a_real_invisible_ocr_layer_counts_as_text() -> None:
    words = " ".join(["notify the distributor within two business days"] * 6)
    assert len(words.replace(" ", "")) >= MIN_INVISIBLE_TEXT_CHARS
    doc = pymupdf.open(stream=image_page_pdf(2, words))
    stats = unmapped_characters(doc)
    assert (stats.pages, stats.pages_with_text, stats.unmapped) == (2, 1, 0)


def test_a_few_symbol_glyphs_are_tolerated() -> None:
    stats = TextLayerStats(
        pages=3, pages_with_text=3, characters=1000, unmapped=12, unmapped_fonts=("Wingdings",)
    )
    check_text_layer(stats, "bullets.pdf")  # 1.2 % private-use bullets: fine
    with pytest.raises(ConversionError, match=r"bullets\.pdf: the text layer cannot be read: 30% "):
        check_text_layer(
            TextLayerStats(3, 3, 1000, 300, ("Wingdings",)), "bullets.pdf"
        )


def test_a_type0_font_coded_by_unicode_is_readable_and_one_coded_by_glyph_id_is_not() -> None:
    readable = pymupdf.open(stream=type0_pdf_without_tounicode("Sensor datasheet", "NX-220"))
    stats = unmapped_characters(readable)
    assert (stats.characters, stats.unmapped, stats.unmapped_fonts) == (21, 0, ())
    assert read_page_text(readable, readable[0]).unreadable_fonts == frozenset()
    ids = pymupdf.open(stream=type0_pdf_without_tounicode("Sensor datasheet", codes="glyph"))
    layer = read_page_text(ids, ids[0])
    # 15 letters and the space's glyph id (1), which is not white space
    assert (layer.characters, layer.unmapped, layer.unmapped_share) == (16, 16, 1.0)
    assert layer.unreadable_fonts == {"Droid Sans Fallback Regu"}  # MuPDF's 31-character cut
    assert layer.unmapped_by_font == {"Droid Sans Fallback Regu": 16}
    # the same glyph ids, each line marked with its /ActualText: Unicode by definition
    marked = pymupdf.open(
        stream=type0_pdf_without_tounicode("Sensor datasheet", codes="glyph", actual_text=True)
    )
    assert marked[0].get_text() == "Sensor datasheet\n"
    assert read_page_text(marked, marked[0]).unmapped == 0


def test_a_type0_font_with_codes_numbered_from_one_is_not_readable() -> None:
    # Codes of its own (a /CIDToGIDMap) but not Unicode: get_text() reads control codes.
    doc = pymupdf.open(stream=type0_pdf_without_tounicode("Sensor datasheet", codes="sequential"))
    assert doc[0].get_text().startswith("\x01\x02\x03\x04\x05\x06")
    stats = unmapped_characters(doc)
    assert stats.unmapped == stats.characters > 0
    with pytest.raises(ConversionError, match=r"100% of characters have no Unicode mapping"):
        check_text_layer(stats, "numbered.pdf")


# --------------------------------------------------------------------------------------
# Titles and versions
# --------------------------------------------------------------------------------------
def test_metadata_title_used_only_when_page_one_says_it() -> None:
    doc = doc_with_lines((72, 100, "Dispatch procedure", 24), (72, 140, "Version: 94", 10))
    page = doc[0]
    assert extract_title("Dispatch Procedure", "", page) == "Dispatch Procedure"
    # A template's leftover title (AEMO's case) or a placeholder falls back to the page.
    assert extract_title("Power System Security Guidelines", "", page) == "Dispatch procedure"
    assert extract_title("Microsoft Word - draft.docx", "", page) == "Dispatch procedure"
    assert extract_title("", "## **Dispatch procedure (draft)**\n\ntext", page) == (
        "Dispatch procedure (draft)"
    )


#: A Form 10-Q cover as its text layer reads (BEST BUY's of 2023, with the rules and boxes).
COVER_10Q = """UNITED STATES
SECURITIES AND EXCHANGE COMMISSION
Washington, D.C. 20549
FORM 10-Q
(Mark One)
QUARTERLY REPORT PURSUANT TO SECTION 13 OR 15(d) OF THE SECURITIES EXCHANGE ACT OF 1934
For the quarterly period ended July 29, 2023
OR
For the transition period from            to
Commission File Number: 1-9595
____________________
BEST BUY CO., INC.
(Exact name of registrant as specified in its charter)
Minnesota
"""


def test_an_sec_cover_names_registrant_form_and_period() -> None:
    assert sec_filing_title(COVER_10Q) == (
        "BEST BUY CO., INC. Form 10-Q for the quarterly period ended July 29, 2023"
    )
    # what names the filing in its chunks' prefix and for routing: the registrant
    assert naming_title(sec_filing_title(COVER_10Q)) == "BEST BUY CO., INC."
    # the period split over lines and in capitals (General Mills' cover)
    annual = COVER_10Q.replace("FORM 10-Q", "Form 10-K").replace(
        "For the quarterly period ended July 29, 2023",
        "ANNUAL REPORT ... FOR\nTHE FISCAL YEAR ENDED May 31, 2020",
    )
    assert sec_filing_title(annual) == (
        "BEST BUY CO., INC. Form 10-K for the fiscal year ended May 31, 2020"
    )
    # no "(Exact name …)" line: the name below the commission file number (3M's cover)
    no_note = COVER_10Q.replace("(Exact name of registrant as specified in its charter)\n", "")
    no_note = no_note.replace("____________________\n", "")
    assert sec_filing_title(no_note).startswith("BEST BUY CO., INC. Form 10-Q")
    # an 8-K's date of report; no period at all leaves the form alone
    current = COVER_10Q.replace("FORM 10-Q", "FORM 8-K").replace(
        "For the quarterly period ended July 29, 2023",
        "Date of report (Date of earliest event reported): August 19, 2022 (August 16, 2022)",
    )
    assert sec_filing_title(current) == "BEST BUY CO., INC. Form 8-K dated August 19, 2022"
    undated = COVER_10Q.replace("For the quarterly period ended July 29, 2023\n", "")
    assert sec_filing_title(undated) == "BEST BUY CO., INC. Form 10-Q"


def test_text_that_only_mentions_the_commission_is_no_cover() -> None:
    # a regulator's paper citing the SEC and its forms, without a form line or registrant
    prose = (
        "Guidance note\nThe Securities and Exchange Commission requires a Form 10-K each "
        "year.\nCommission File Number: 1-9595\n"
    )
    assert sec_filing_title(prose) == ""
    assert sec_filing_title(COVER_10Q.replace("FORM 10-Q", "FORM")) == ""
    # the line above "(Exact name …)" is the file number's label, not a name
    assert sec_filing_title(COVER_10Q.replace("BEST BUY CO., INC.\n", "")) == ""
    page = doc_with_lines((72, 100, "Dispatch procedure", 24))[0]
    assert extract_title("", "", page) == "Dispatch procedure"


@pytest.mark.parametrize(
    ("lead", "issuer", "title"),
    [
        (  # Johnson & Johnson, 2023-07-20: the dateline, an en dash, the listing
            "**New Brunswick, N.J. (July 20, 2023)** – Johnson & Johnson (NYSE: JNJ) today "
            "announced results for second-quarter 2023. “Our robust performance …",
            "Johnson & Johnson",
            "Johnson & Johnson press release: results for second-quarter 2023",
        ),
        (  # Business Wire's dateline; a long period is cut at a word
            "BOLINGBROOK, Ill.--(BUSINESS WIRE)-- Ulta Beauty, Inc. (NASDAQ: ULTA) today "
            "announced financial results for the thirteen-week period (“fourth quarter”) and "
            "fifty-two-week period (“fiscal year”) ended January 28, 2023 compared to the same "
            "periods a year ago. Net sales",
            "Ulta Beauty, Inc.",
            "Ulta Beauty, Inc. press release: financial results for the thirteen-week period "
            "(“fourth quarter”) and fifty-two-week…",
        ),
        (  # a defined name after the listing; "Dec." inside the period is no sentence end
            "Las Vegas, Nevada, February 8, 2023 – MGM Resorts International (NYSE: MGM) "
            "(“MGM Resorts” or the “Company”) today reported its financial results for the "
            "quarter and year ended Dec. 31, 2022. Net revenues",
            "MGM Resorts International",
            "MGM Resorts International press release: financial results for the quarter and "
            "year ended Dec. 31, 2022",
        ),
        (  # a hyphen in the name and a plain dateline dash
            "ATLANTA -- The Coca-Cola Company (NYSE: KO) today reported fourth quarter and full "
            "year 2022 results. Net revenues",
            "The Coca-Cola Company",
            "The Coca-Cola Company press release: fourth quarter and full year 2022 results",
        ),
        # no listing, no dateline, no results, or a note in parentheses: no release lead
        ("LONDON -- Acme Corp. today announced results for 2023. More", "", ""),
        ("Acme Corp. (NYSE: ACM) today reported results for 2023. More", "", ""),
        ("LONDON -- " + "Earlier news. " * 150 + "LONDON -- Acme Corp. (NYSE: ACM) today "
         "reported results for 2023. More", "", ""),  # too far down page 1 to be its lead
        ("PARIS -- Acme S.A. (NYSE: ACM) today announced a dividend. Results follow.", "", ""),
        ("ROME -- The retailer (Note: see below) reported results for 2023. More", "", ""),
    ],
)
def test_a_press_release_lead_names_its_issuer_and_results(
    lead: str, issuer: str, title: str
) -> None:
    assert press_release_title(lead) == (issuer, title)


def test_a_release_lead_titles_a_release_whose_heading_does_not_name_the_issuer() -> None:
    lead = (
        "New Brunswick, N.J. (July 20, 2023) – Johnson & Johnson (NYSE: JNJ) today announced "
        "results for second-quarter 2023. Sales grew"
    )
    page = doc_with_lines((72, 100, "OVERALL FINANCIAL RESULTS", 14))[0]
    markdown = f"**FOR IMMEDIATE RELEASE**\n\n{lead}\n\n# **OVERALL FINANCIAL RESULTS**\n"
    assert extract_title("", markdown, page) == (
        "Johnson & Johnson press release: results for second-quarter 2023"
    )
    # the company names the document; the period is no part of its name nor of its chunks'
    # contextual prefix (as a filing's form and period)
    assert naming_title(extract_title("", markdown, page)) == "Johnson & Johnson"
    assert prefix_title(extract_title("", markdown, page)) == ""
    # a headline that names the issuer (its legal form aside) stays the title
    named = markdown.replace("OVERALL FINANCIAL RESULTS", "Johnson & Johnson Reports Q2 Results")
    assert extract_title("", named, page) == "Johnson & Johnson Reports Q2 Results"
    # ... and so does a meaningful metadata title
    assert extract_title("Overall Financial Results", markdown, page) == (
        "Overall Financial Results"
    )


def test_the_first_page_of_a_real_earnings_release_is_titled_by_its_lead() -> None:
    # Johnson & Johnson's release of 2023-07-20: its headline is an image, its first heading
    # a table's; the lead's "second-" / "quarter" lines are blocks of their own in MuPDF
    source = pymupdf.open(corpus_dir() / "eval/financebench-dev/pdfs" /
                          "JOHNSON_JOHNSON_2023Q2_EARNINGS.pdf")
    first = pymupdf.open()
    first.insert_pdf(source, from_page=0, to_page=0)
    converted = PymupdfMarkdownConverter().convert(first.tobytes(), "jnj-p1.pdf")
    assert converted.title == "Johnson & Johnson press release: results for second-quarter 2023"
    assert "(NYSE: JNJ) today announced results for second-quarter 2023." in converted.markdown


def test_version_label_and_placeholder() -> None:
    label_and_value = doc_with_lines((72, 100, "Version:", 10), (160, 100, "1.2", 10))
    assert extract_version(label_and_value) == "1.2"
    assert extract_version(doc_with_lines((72, 100, "Revision 2", 10))) == "2"
    assert extract_version(doc_with_lines((72, 100, "VERSION: Enter Version Number", 10))) == ""
    assert extract_version(doc_with_lines((72, 100, "Doc Ref: SO_OP_3705", 10))) == "SO_OP_3705"


def test_version_table_gives_the_latest_version() -> None:
    doc = doc_with_lines(
        (72, 100, "Version", 10),
        (140, 100, "Release date", 10),
        (260, 100, "Changes", 10),
        (72, 120, "3", 10),
        (140, 120, "20 April 2023", 10),
        (260, 120, "Complete review; 12 examples", 10),
        (72, 140, "10", 10),
        (140, 140, "June 2015", 10),
        (72, 160, "1", 10),
        (140, 160, "14 September 2011", 10),
    )
    assert extract_version(doc) == "10"


def test_prose_that_says_revision_and_date_on_one_line_heads_no_version_column() -> None:
    # a 10-K's forward-looking statements (NETFLIX_2017_10K.pdf p. 3) above a year
    words = ("we assume no obligation to publicly release any Revision of these statements "
             "after the date hereof except as required").split()
    doc = doc_with_lines(
        *((30 + 30 * i, 100, word, 6) for i, word in enumerate(words)),
        (30 + 30 * words.index("Revision"), 120, "2010", 6),  # under "Revision"
    )
    assert extract_version(doc) == ""
    lower = doc_with_lines((72, 100, "revision", 10), (140, 100, "date", 10), (72, 120, "7", 10))
    assert extract_version(lower) == ""  # a header is capitalised


@pytest.mark.corpus
@pytest.mark.parametrize("name", ["NETFLIX_2015_10K.pdf", "NETFLIX_2017_10K.pdf"])
def test_a_filing_states_no_version(name: str) -> None:
    doc = pymupdf.open(corpus_dir() / "eval" / "financebench-dev" / "pdfs" / name)
    try:
        assert extract_version(doc) == ""  # was "190" and "2010", read from prose
    finally:
        doc.close()


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("name", "title", "version"),
    [
        # metadata title is another document's ("Victorian Transfer Limit Advice -
        # Outages"); version from the version-control table on page 3 (3, 2, 1)
        (
            "aemo_Constraint_Implementation_Guidelines_v3_FINAL_Clean.pdf",
            "Constraint Implementation Guidelines",
            "3",
        ),
        # metadata says "Power System Security Guidelines"; cover: "Version: 94"
        ("aemo_SO_OP_3705_Dispatch.pdf", "Dispatch procedure", "94"),
        # version release history on page 4: 4.0, 3.0, 2.0, 1.0
        (CVP, "Schedule of Constraint Violation Penalty Factors", "4.0"),
        # "VER.REL" column: 1.0, 1.1
        (
            "aemo_Fast_Start_Unit_Inflexibility_Profile_Model_October_2014.pdf",
            "Fast-Start Inflexibility Profile",
            "1.1",
        ),
        # no metadata title; version control 1 (draft), 2 (final)
        (
            "aemo_Marginal_Loss_Factors_for_the_2020-21_Financial_year.pdf",
            "Regions and Marginal Loss Factors: FY 2020-21",
            "2",
        ),
        (
            "nist_SP_800-171r2.pdf",
            "Protecting Controlled Unclassified Information in Nonfederal Systems",
            "2",
        ),
        # an unfilled template: "VERSION: Enter Version Number", "DOCUMENT REF: Enter Document Ref"
        (
            "aemo_Treatment_of_Loss_Factors_in_the_NEM.pdf",
            "treatment of loss factors in the national electricity market",
            "",
        ),
        (FCAS, "FCAS Model in NEMDE", ""),
        # SEC filings: every cover is headed by the commission's name; the metadata holds an
        # accession number, or "10-K - 02/07/2019 - 3M Company"
        (
            "../eval/financebench/pdfs/AMAZON_2017_10K.pdf",
            "AMAZON.COM, INC. Form 10-K for the fiscal year ended December 31, 2017",
            "",
        ),
        (
            "../eval/financebench/pdfs/3M_2018_10K.pdf",
            "3M COMPANY Form 10-K for the fiscal year ended December 31, 2018",
            "",
        ),
        (
            "../eval/financebench/pdfs/Pfizer_2023Q2_10Q.pdf",
            "PFIZER INC. Form 10-Q for the quarterly period ended July 2, 2023",
            "",
        ),
        (
            "../eval/financebench-dev/pdfs/FOOTLOCKER_2022_8K_dated_2022-08-19.pdf",
            "Foot Locker, Inc. Form 8-K dated August 19, 2022",
            "",
        ),
        # a press release is no filing: its own headline stays the title
        (
            "../eval/financebench/pdfs/ULTABEAUTY_2023Q4_EARNINGS.pdf",
            "Ulta Beauty Announces Fourth Quarter Fiscal 2022 Results",
            "",
        ),
    ],
)
def test_title_and_version_of_real_pdfs(name: str, title: str, version: str) -> None:
    doc = pymupdf.open(corpus_dir() / "pdfs" / name)
    try:
        assert extract_title(doc.metadata["title"], "", doc[0]) == title
        assert extract_version(doc) == version
    finally:
        doc.close()
