"""Words hyphenated at a line end (issue 16, "Reading hard PDFs correctly"): a syllable break
is joined ("cli-" + "mate" -> "climate"), a real compound keeps its hyphen whether the break
falls at its hyphen or not, and a keyword query for the compound or either part finds the
passage. PDFs are built here with pymupdf."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pymupdf
import pytest

from kb_shared.ingest.chunking import chunk_markdown
from kb_shared.providers.local_markdown import PymupdfMarkdownConverter
from kb_shared.providers.hyphenation import (
    block_lines,
    break_words,
    document_vocabulary,
    english_words,
    line_breaks,
    resolve_break,
)
from kb_shared.search.sparse import tokenize
from kb_shared.stores.vectors import KIND_TEXT, Point
from kb_shared.stores.vectors_sqlite import SqliteVectorIndex

#: Lines of one paragraph, each ending where a typesetter broke it.
LINES = [
    "Each participant must publish its cli-",
    "mate disclosures and follow the pro-",
    "cedures for a well-",
    "known state-of-the-",
    "art method of self-assess-",
    "ment, with long-",
    "term records kept by the inter-",
    "connector operator and a co-",
    "operative review of non-",
    "compliance, as agreed.",
]


def paragraph_pdf(
    lines: list[str], extra: str = "", *, embedded: bool = False, leading: float = 12
) -> bytes:
    """One page: ``lines`` as one paragraph (``leading`` pt from line to line, 10 pt text),
    then ``extra`` as a paragraph; ``embedded`` writes them in an embedded Unicode font (Nimbus
    Sans, which has Greek) rather than base-14 Helvetica (Latin-1 only)."""
    doc = pymupdf.open()
    page = doc.new_page()
    font = "helv"
    if embedded:
        font = "kbsans"
        page.insert_font(fontname=font, fontbuffer=pymupdf.Font("helv").buffer)
    for index, line in enumerate(lines):
        page.insert_text((72, 200 + leading * index), line, fontsize=10, fontname=font)
    if extra:
        page.insert_text((72, 200 + leading * len(lines) + 30), extra, fontsize=10, fontname=font)
    if embedded:
        doc.subset_fonts()
    return doc.tobytes()


def keyword_hits(tmp_path: Path, query: str, documents: dict[str, str]) -> list:
    """The top 5 keyword hits of ``query`` over the chunks of ``documents`` (name ->
    Markdown) in a fresh embedded index."""
    index = SqliteVectorIndex(tmp_path / "v.sqlite")
    index.open("test", 2)
    chunks = [c for name, markdown in documents.items() for c in chunk_markdown(markdown, name)]
    index.upsert(
        [Point(c.id, c.document, KIND_TEXT, c.text, np.array([1.0, 0.0])) for c in chunks]
    )
    try:
        return index.sparse_search(query, 5)
    finally:
        index.close()


def _convert(pdf: bytes) -> str:
    return PymupdfMarkdownConverter().convert(pdf, "hyphens.pdf").markdown


def test_the_offline_word_list_is_the_spacy_models_vocabulary() -> None:
    words = english_words()
    assert len(words) > 40_000
    assert {"climate", "procedures", "well", "known", "self", "assessment"} <= words
    assert "wellknown" not in words and "selfassessment" not in words


@pytest.mark.parametrize(
    ("head", "tail", "document", "word"),
    [
        ("cli", "mate", "", "climate"),  # syllable break, "climate" is a word
        ("pro", "cedures", "", "procedures"),
        ("well", "known", "", "well-known"),  # both parts words, "wellknown" is not
        ("state-of-the", "art", "", "state-of-the-art"),  # only the last part is weighed
        ("self-assess", "ment", "", "self-assessment"),  # the break is not at the hyphen
        ("Self", "assessment", "", "Self-assessment"),  # case kept
        ("long", "term", "", "long-term"),
        ("VPP", "capable", "", "VPP-capable"),  # an acronym's hyphen is kept
        ("co", "optimising", "", "co-optimising"),  # a prefix before its own last vowel
        ("pre", "empted", "", "preempted"),  # ... unless the word list has the joined word
        # the document's own words decide first
        ("inter", "connector", "the interconnector trips", "interconnector"),
        ("co", "operative", "a co-operative approach", "co-operative"),
        ("co", "operative", "", "cooperative"),
        ("e", "mail", "send an e-mail or an email or e-mail", "e-mail"),  # more often hyphenated
        ("xq", "zzv", "", "xqzzv"),  # nothing known: a syllable break
        # a single letter or a locant before the hyphen is a prefix, never a syllable
        ("n", "octanal", "", "n-octanal"),
        ("α", "pinene", "", "α-pinene"),
        ("2", "octanone", "", "2-octanone"),
        ("3", "methylbutanal", "", "3-methylbutanal"),
        ("1,2", "dichloroethane", "", "1,2-dichloroethane"),
        ("N,N", "dimethylformamide", "", "N,N-dimethylformamide"),
        ("2′", "deoxyadenosine", "", "2′-deoxyadenosine"),
        ("COVID-19", "related", "", "COVID-19-related"),
        ("e", "mail", "", "e-mail"),  # the word list's "email" does not outrank the prefix
        ("n", "octanal", "the noctanal peak", "noctanal"),  # ... the document does
        ("regu", "lation", "", "regulation"),
        ("co", "ordinate", "", "coordinate"),
        ("co", "ordinate", "we coordinate", "coordinate"),
        ("co", "ordinate", "we co-ordinate", "co-ordinate"),
    ],
)
def test_resolve_break(head: str, tail: str, document: str, word: str) -> None:
    vocabulary = Counter(w.casefold() for w in document.replace(",", " ").split())
    assert resolve_break(head, tail, vocabulary, english_words()) == word


def test_breaks_are_read_from_the_pdf_and_left_out_of_its_vocabulary() -> None:
    page = pymupdf.open("pdf", paragraph_pdf(LINES[:3], "The climate is mild."))[0]
    assert [(head, tail, literal) for _, head, tail, literal in line_breaks(block_lines(page))] == [
        ("cli", "mate", False), ("pro", "cedures", False)
    ]
    vocabulary = document_vocabulary(break_words(block_lines(page)))
    assert vocabulary["climate"] == 1  # the other paragraph's, not the broken one
    assert not {"cli", "mate", "pro", "cedures"} & set(vocabulary)
    assert vocabulary["disclosures"] == 1


def test_line_end_breaks_in_a_pdf_are_resolved() -> None:
    markdown = _convert(paragraph_pdf(LINES))
    assert (
        "Each participant must publish its climate disclosures and follow the procedures for a "
        "well-known state-of-the-art method of self-assessment, with long-term records kept by "
        "the inter"  # "interconnector" is not in the word list: see the next test
    ) in markdown
    assert "operator and a cooperative review of non-compliance, as agreed." in markdown


#: A press release's lead set at 1.5 line spacing (Johnson & Johnson's of 2023-07-20, p. 1):
#: MuPDF reads each line as a block of its own.
SPACED = [
    "Johnson & Johnson (NYSE: JNJ) today announced results for second-",
    "quarter 2023, a testament to the cli-",
    "mate of innovation.",
]


def test_a_word_broken_across_lines_that_mupdf_reads_as_blocks_is_resolved() -> None:
    pdf = paragraph_pdf(SPACED, "2023 Second-Quarter sales grew.", leading=18)
    page = pymupdf.open("pdf", pdf)[0]
    lines = block_lines(page)
    assert [len(block) for block in lines] == [1, 1, 1, 1]  # a block a line
    assert [(head, tail) for _, head, tail, _ in line_breaks(lines)] == [
        ("second", "quarter"), ("cli", "mate")
    ]
    assert not {"cli", "mate", "quarter"} & set(document_vocabulary(break_words(lines)))
    markdown = _convert(pdf)
    # the document writes "Second-Quarter": the compound keeps its hyphen; "cli-" is a syllable
    assert "announced results for second-quarter 2023, a testament to the climate of" in markdown


def test_a_line_ending_in_a_hyphen_above_a_new_paragraph_is_no_break() -> None:
    # the next block starts a line and more below (a paragraph gap): not the same paragraph
    lines = ["The retailer must publish its non-"]
    page = pymupdf.open("pdf", paragraph_pdf(lines, "Compliance reports follow."))[0]
    assert line_breaks(block_lines(page)) == []
    # ... and a block beside it (another column) is not its next line either
    doc = pymupdf.open()
    side = doc.new_page()
    side.insert_text((72, 200), "Publish the self-", fontsize=10)
    side.insert_text((320, 212), "assessment weekly.", fontsize=10)
    assert line_breaks(block_lines(side)) == []


def test_the_documents_own_words_decide_a_break() -> None:
    extra = "The interconnector and the co-operative are named again here."
    markdown = _convert(paragraph_pdf(LINES, extra))
    assert "kept by the interconnector operator and a co-operative review" in markdown
    assert extra in markdown


def test_an_address_broken_at_its_own_hyphen_keeps_it() -> None:
    lines = ["Forecasts are at https://aemo.example/energy/projected-assessment-of-system-",
             "adequacy and in the e-mail sent to ops@grid-", "operator.example each week."]
    markdown = _convert(paragraph_pdf(lines))
    assert "https://aemo.example/energy/projected-assessment-of-system-adequacy and" in markdown
    assert "ops@grid-operator.example each week." in markdown


#: A paragraph broken after one-letter prefixes and locants, a syllable and "co-".
CHEMISTRY = [
    "The solvent was n-",
    "octanal, then α-",
    "pinene and 2-",
    "octanone, with 3-",
    "methylbutanal and the regu-",
    "lation of 1,2-",
    "dichloroethane and N,N-",
    "dimethylformamide by the co-",
    "ordinate team.",
]
CHEMISTRY_READ = (
    "The solvent was n-octanal, then α-pinene and 2-octanone, with 3-methylbutanal and the "
    "regulation of 1,2-dichloroethane and N,N-dimethylformamide by the {co} team."
)


def test_breaks_after_a_letter_or_a_locant_are_read_from_the_pdf() -> None:
    page = pymupdf.open("pdf", paragraph_pdf(CHEMISTRY, embedded=True))[0]
    assert [(head, tail) for _, head, tail, _ in line_breaks(block_lines(page))] == [
        ("n", "octanal"), ("α", "pinene"), ("2", "octanone"), ("3", "methylbutanal"),
        ("regu", "lation"), ("1,2", "dichloroethane"), ("N,N", "dimethylformamide"),
        ("co", "ordinate"),
    ]
    assert not {"octanal", "pinene", "regu", "lation"} & set(document_vocabulary(break_words(block_lines(page))))


@pytest.mark.parametrize(
    ("extra", "co"),
    [
        ("", "coordinate"),  # the word list has "coordinate"
        ("Both teams coordinate daily.", "coordinate"),
        ("Both teams co-ordinate daily.", "co-ordinate"),  # the document's spelling wins
    ],
)
def test_a_prefix_of_one_letter_or_a_locant_keeps_its_hyphen_in_a_pdf(extra: str, co: str) -> None:
    markdown = _convert(paragraph_pdf(CHEMISTRY, extra, embedded=True))
    assert CHEMISTRY_READ.format(co=co) in markdown


@pytest.mark.parametrize("query", ["n-octanal", "octanal", "1,2-dichloroethane", "dichloroethane"])
def test_a_keyword_query_for_a_prefixed_name_or_its_stem_finds_the_passage(
    query: str, tmp_path: Path, chemistry: str
) -> None:
    other = "<!-- page 1 -->\n\nThe operator dispatches generators every five minutes."
    hits = keyword_hits(tmp_path, query, {"solvents.pdf": chemistry, "other.pdf": other})
    assert [hit.point.document for hit in hits] == ["solvents.pdf"]
    assert "n-octanal" in hits[0].point.text and "1,2-dichloroethane" in hits[0].point.text


@pytest.fixture(scope="module")
def chemistry() -> str:
    """The converted chemistry paragraph."""
    return _convert(paragraph_pdf(CHEMISTRY, embedded=True))


def test_a_hyphen_inside_a_line_is_never_touched() -> None:
    lines = ["A well-known and long-term rule applies to the", "market."]
    markdown = _convert(paragraph_pdf(lines))
    assert "A well-known and long-term rule applies to the market." in markdown


def test_code_lines_ending_in_a_hyphen_are_not_joined() -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 200), "Run the tool as shown:", fontsize=10)
    for index, line in enumerate(["export KB_MODE=fast-", "lane"]):
        page.insert_text((90, 225 + 11 * index), line, fontsize=9, fontname="cour")
    markdown = _convert(doc.tobytes())
    assert "```\nexport KB_MODE=fast-\nlane\n```" in markdown


@pytest.mark.parametrize(
    "query", ["self-assessment", "self", "assessment", "well-known", "known", "climate",
              "state-of-the-art", "non-compliance", "compliance"]
)
def test_a_keyword_query_for_a_compound_or_its_parts_finds_the_passage(
    query: str, tmp_path: Path, converted: tuple[str, str]
) -> None:
    markdown, other = converted
    hits = keyword_hits(tmp_path, query, {"hyphens.pdf": markdown, "other.pdf": other})
    assert hits and hits[0].point.document == "hyphens.pdf"
    assert set(tokenize(query)) <= set(tokenize(hits[0].point.text))


@pytest.fixture(scope="module")
def converted() -> tuple[str, str]:
    """The converted paragraph, and a second document about something else."""
    other = "<!-- page 1 -->\n\nThe operator dispatches generators every five minutes."
    return _convert(paragraph_pdf(LINES)), other


def test_a_soft_hyphen_is_not_a_word_break_for_the_keyword_index() -> None:
    assert tokenize("cli\u00admate") == ["climate"]


def test_a_compound_in_italics_or_with_a_capital_after_the_break_keeps_its_hyphen() -> None:
    # pymupdf4llm joins "semi-" / "scheduled" itself and wraps italics in "_": the document's
    # own "semi-scheduled" decides, whatever the emphasis marks around the joined word
    doc = pymupdf.open()
    page = doc.new_page()
    lines = ["This clause applies to every semi-", "scheduled generating unit and to Non-",
             "Conforming units named by AEMO."]
    for index, line in enumerate(lines):
        page.insert_text((72, 200 + 12 * index), line, fontsize=10, fontname="heit")
    page.insert_text((72, 260), "A semi-scheduled unit and a semi-scheduled plant are listed.",
                     fontsize=10, fontname="helv")
    markdown = _convert(doc.tobytes())
    assert "semi-scheduled generating unit and to Non-Conforming units" in markdown
    assert "semischeduled" not in markdown and "NonConforming" not in markdown


def test_a_capital_after_the_break_keeps_the_hyphen_unless_the_document_joins_it() -> None:
    assert resolve_break("Non", "Conforming", Counter(), english_words()) == "Non-Conforming"
    joined = Counter({"nonconforming": 3})
    assert resolve_break("Non", "Conforming", joined, english_words()) == "NonConforming"
