"""The offline re-ordering signals of search_docs (``kb_shared.search.retrieval_features``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from kb_shared.ingest.chunking import sentence_starts
from kb_shared.search.citations import PointPayload
from kb_shared.providers.base import Reranker
from kb_shared.search.quotes import MarkdownPages, markdown_pages, passage_quote
from kb_shared.search.retrieval import search_docs
from kb_shared.search.retrieval_features import (
    DEFAULT_FEATURES,
    PagedText,
    Unit,
    UnitMatch,
    best_units,
    bonuses,
    definition_terms,
    defines,
    features,
    heads_with,
    query_weights,
    routed_documents,
    section_numbers,
    unit_bonuses,
    unit_page,
    units,
)
from kb_shared.stores.blobs import BlobStore
from kb_shared.stores.vectors import KIND_TABLE, KIND_TEXT, Hit, Point
from kb_shared.stores.vectors_sqlite import SqliteVectorIndex
from tests.fakes import HashingEmbedder


@pytest.mark.parametrize(
    ("question", "terms"),
    [
        ("What is a virtual transmission node (VTN)?", ["virtual transmission node", "VTN"]),
        ("How does SP 800-171r2 define controlled unclassified information (CUI)?",
         ["controlled unclassified information", "CUI"]),
        ("In AEMO's fast-start documentation, what is meant by a fast-start unit's 'mode'?", ["mode"]),
        ("What is an average loss factor (ALF) and how is it calculated?", ["average loss factor", "ALF"]),
        ("What does NEMDE stand for?", ["NEMDE"]),
        ("Define the term 'dispatch interval'", ["dispatch interval"]),
        ("Which generators must submit ramp rates?", []),
        ("What must a retailer provide to the customer, and when?", []),
    ],
)
def test_definition_terms(question: str, terms: list[str]) -> None:
    assert sorted(definition_terms(question)) == sorted(terms)


@pytest.mark.parametrize(
    "text",
    [
        "VTNs are aggregations of transmission nodes for which a single MLF is applied.",
        "A virtual transmission node (VTN) means a set of transmission nodes.",
        "The position of a unit on the inflexibility profile is known as its mode.",
        "|**controlled unclassified** **information** [EO 13556]|Information that law, regulation, or policy requires to be safeguarded.|",
        "**Mode**  The position of a unit on its profile.",
        # split over a line, in another case, or written with an underscore
        "A Virtual\nTransmission  Node means a set of transmission nodes.",
        "The settlement_residue means the amount left after the market settles.",
        # the term in quotes, curly or straight, as legal drafting writes it
        "In this procedure, \u2018Virtual Transmission Node\u2019 means a set of nodes.",
        "\u201cVTNs\u201d are aggregations of transmission nodes.",
        "'Mode' (of a unit) means the position of a unit on its profile.",
        "The position of a unit on the profile is known as its \u2018mode\u2019.",
    ],
)
def test_defines_recognises_definitions(text: str) -> None:
    terms = [
        "virtual transmission node", "VTN", "mode", "controlled unclassified information",
        "settlement residue",
    ]
    assert defines(text, terms)


@pytest.mark.parametrize(
    "text",
    [
        "The SJP1 VTN for South Australia contains the connection points below.",
        "|NCO|CUI|FED|\n|AC-1|NFO|CUI|",  # the acronym as a table value, not a glossary row
        "Units change mode when dispatched.",
        "The \u2018VTN\u2019 table lists the connection points below.",
        "A unit\u2019s \u2018mode\u2019 changes when it is dispatched.",
    ],
)
def test_defines_ignores_mere_mentions(text: str) -> None:
    assert not defines(text, ["VTN", "CUI", "mode"])


def test_section_numbers_skip_values_with_decimals() -> None:
    assert section_numbers("What does requirement 3.1.5 require, and 3.13.11?") == ["3.1.5", "3.13.11"]
    assert section_numbers("a loss factor of 0.9713 in 2020") == []


def _payload(doc_id: str, section: str = "", title: str = "", name: str | None = None) -> PointPayload:
    return PointPayload.build(
        doc_id=doc_id, name=name or doc_id, title=title, version="", page_start=1, page_end=1,
        heading_path=tuple(section.split(" › ")) if section else (),
    )


def test_heads_with_reads_the_own_heading_or_the_opening_line() -> None:
    own = _payload("nist.pdf", "THE REQUIREMENTS › 3.1 ACCESS CONTROL › 3.1.5 Employ least privilege")
    parent = _payload("nist.pdf", "THE REQUIREMENTS › 3.1 ACCESS CONTROL")
    assert heads_with(own, "text", ["3.1.5"])
    assert not heads_with(parent, "Requirement 3.1.5 is tailored", ["3.1.5"])
    assert heads_with(parent, "###### **3.1.5 Employ the principle of least privilege**", ["3.1.5"])
    assert not heads_with(own, "text", ["3.1"])  # 3.1.5 is not section 3.1


def test_routing_names_the_document_only_one_candidate_has_in_its_title() -> None:
    nist = _payload("nist_sp_800-171r2.pdf", title="Protecting CUI", name="nist_SP_800-171r2.pdf")
    vic = _payload("vic_notice.pdf", title="Solar Victoria Notice to Market", name="vic_notice.pdf")
    assert routed_documents("What does NIST SP 800-171 requirement 3.1.5 require?", [nist, vic]) == {
        "nist_sp_800-171r2.pdf"
    }
    # a word every candidate document has routes nowhere
    assert routed_documents("What does the notice say?", [vic, vic]) == set()


def test_bonuses_add_up_per_signal() -> None:
    nist = _payload("nist_sp_800-171r2.pdf", "REQS › 3.1.5 Employ least privilege", "Protecting CUI",
                    "nist_SP_800-171r2.pdf")
    vic = _payload("vic_notice.pdf", "3.1.5 All other workers", "Solar Victoria Notice", "vic_notice.pdf")
    got = bonuses("What does NIST SP 800-171 requirement 3.1.5 require?", ["a", "b"], [nist, vic])
    assert got == [DEFAULT_FEATURES.section_number + DEFAULT_FEATURES.document,
                   DEFAULT_FEATURES.section_number]


# ---------------------------------------------------------------------------------------------
# Rows and sentences
# ---------------------------------------------------------------------------------------------

MLF_TABLE = """|**Generator**|**DUID**|**2020/21** **MLF**|
|---|---|---|
|**Broken Hill GT 1**|GB01|0.8734|
|**Broken Hill Solar Farm**|BROKENH1|0.7844|"""


def test_units_read_each_row_with_its_header_and_caption() -> None:
    rows = units(MLF_TABLE, caption="1.2 New South Wales marginal loss factors")
    assert [u.text for u in rows] == [
        "|**Broken Hill GT 1**|GB01|0.8734|",
        "|**Broken Hill Solar Farm**|BROKENH1|0.7844|",
    ]
    solar = rows[1].features
    assert {"solar", ("solar", "farm"), "0.7844"} <= solar  # the row
    assert {"duid", "2020/21", "mlf"} <= solar  # its header row
    assert {"marginal", ("loss", "factors")} <= solar  # its caption
    assert "gb01" not in solar  # not another row's


def test_units_cut_prose_into_sentences_and_list_items() -> None:
    text = (
        "## 3.1 Ramp rates\n\nA unit must submit ramp rates. The rate of clause 3.1.2 is in MW/min,\n"
        "e.g. the rate per minute.\n- (a) a first item\n- (b) a second item"
    )
    assert [u.text for u in units(text)] == [
        "A unit must submit ramp rates.",
        "The rate of clause 3.1.2 is in MW/min, e.g. the rate per minute.",
        "- (a) a first item",
        "- (b) a second item",
    ]


def test_units_cut_sentences_by_the_chunker_s_rule_curly_quotes_included() -> None:
    # A press release's typographic quotes: a sentence ends after the closing ” or ’ and the
    # next begins at the opening “; each keeps its quote marks, so a quote is a whole sentence.
    text = (
        "“Our results were strong,” said the chief executive officer. “For the first time "
        "our revenue surpassed ten billion dollars.” He thanked the ‘associates.’ Élan "
        "followed. The “Company” grew 5%."
    )
    assert [u.text for u in units(text)] == [
        "“Our results were strong,” said the chief executive officer.",
        "“For the first time our revenue surpassed ten billion dollars.”",
        "He thanked the ‘associates.’",
        "Élan followed.",
        "The “Company” grew 5%.",
    ]
    assert [text[start:start + 4] for start in sentence_starts(text)] == [
        "“For", "He t", "Élan", "The ",
    ]


def test_features_hold_terms_and_adjacent_pairs() -> None:
    assert features("Mode 2 start") == {"mode", "2", "start", ("mode", "2"), ("2", "start")}


def test_query_weights_are_idf_over_the_candidates() -> None:
    held = [frozenset(features(t)) for t in ("broken hill farm", "farm output", "farm table")]
    weights = query_weights("Which row gives the broken farm?", held)
    assert set(weights) == {"broken", "farm"}  # "row", "gives" and ("broken", "farm") are nowhere
    assert weights["broken"] == pytest.approx(math.log(1 + 2.5 / 1.5))  # df 1 of 3
    assert weights["farm"] == pytest.approx(math.log(1 + 0.5 / 3.5))  # df 3 of 3


def test_the_row_holding_the_question_is_the_best_unit() -> None:
    texts = [MLF_TABLE, "The factor is computed each year for every generator."]
    payloads = [_payload("mlf.pdf", "1.2 NSW"), _payload("mlf.pdf", "2.1 Method")]
    table, prose = best_units("Broken Hill Solar Farm factor", texts, payloads)
    # held features: broken, hill, solar, farm, 3 pairs (the table); factor (the prose);
    # each in one of the 2 candidates, so all weigh the same: the row has 7 of 8.
    assert table is not None and table.unit.text == "|**Broken Hill Solar Farm**|BROKENH1|0.7844|"
    assert table.share == pytest.approx(7 / 8)
    assert prose is not None and prose.share == pytest.approx(1 / 8)
    assert best_units("nothing shared here", texts, payloads) == [None, None]


def test_unit_bonuses_reward_only_the_leader_s_lead() -> None:
    unit = Unit("x", frozenset())
    got = unit_bonuses([UnitMatch(unit, 0.8, 0.9), UnitMatch(unit, 0.5, 0.5), None])
    assert got == pytest.approx([0.3 * 0.3, 0.0, 0.0])
    # a tie leads nobody
    assert unit_bonuses([UnitMatch(unit, 0.5, 0.5), UnitMatch(unit, 0.5, 0.5)]) == pytest.approx([0.0, 0.0])


# ---------------------------------------------------------------------------------------------
# The page a unit is on
# ---------------------------------------------------------------------------------------------

MARKDOWN = """<!-- page 1 -->
# Report

<!-- page 6 (p. iv) -->
|**Generator**|**DUID**|**2020/21** **MLF**|
|---|---|---|
|**Broken Hill GT 1**|GB01|0.8734|

<!-- page 7 (p. v) -->

|**Broken Hill Solar Farm**|BROKENH1|0.7844|
"""


def test_unit_page_finds_the_page_and_label_of_a_row_on_a_later_page() -> None:
    paged = PagedText.parse(MARKDOWN)
    rows = units(MLF_TABLE)
    assert unit_page(paged, 6, MLF_TABLE, rows[0]) == (6, "iv")
    assert unit_page(paged, 6, MLF_TABLE, rows[1]) == (7, "v")
    assert unit_page(paged, 6, MLF_TABLE, Unit("|not in the document|", frozenset())) is None


def _table_payload(page_start: int = 6, page_end: int = 7) -> PointPayload:
    return PointPayload.build(
        doc_id="mlf.pdf", name="mlf.pdf", title="MLF", version="", page_start=page_start,
        page_end=page_end, heading_path=("1.2 NSW",), page_label_start="iv", page_label_end="v",
        markdown_key="markdown/mlf.pdf.md",
    )


def _reader(documents: dict[str, str], calls: list[str]):  # noqa: ANN202
    def read(key: str) -> bytes:
        calls.append(key)
        if key not in documents:
            raise FileNotFoundError(key)
        return documents[key].encode()
    return read


def test_a_quote_of_an_unlocated_chunk_finds_its_rows_page_in_the_markdown() -> None:
    calls: list[str] = []
    pages = MarkdownPages(_reader({"markdown/mlf.pdf.md": MARKDOWN}, calls))
    row = units(MLF_TABLE)[1]
    quote = passage_quote(_table_payload(), MLF_TABLE, UnitMatch(row, 0.8, 0.9), pages)
    assert quote is not None
    assert (quote.text, quote.page, quote.page_label) == (
        "Broken Hill Solar Farm | BROKENH1 | 0.7844", 7, "v")
    assert quote.page_reference == "v (PDF page 7)"
    # a one-page chunk needs no look-up; the first row's page is the chunk's first
    assert passage_quote(_table_payload(7, 7), MLF_TABLE, UnitMatch(row, 0.8, 0.9), pages).page == 7
    first = passage_quote(_table_payload(), MLF_TABLE, UnitMatch(units(MLF_TABLE)[0], 0.8, 0.9), pages)
    assert (first.text, first.page) == ("Broken Hill GT 1 | GB01 | 0.8734", 6)
    assert calls == ["markdown/mlf.pdf.md"]  # parsed once, then kept


def test_a_located_chunk_quotes_the_page_its_runs_give_without_reading_markdown() -> None:
    payload = PointPayload.build(
        doc_id="mlf.pdf", name="mlf.pdf", title="MLF", version="", page_start=6, page_end=7,
        markdown_key="markdown/mlf.pdf.md", located=True,
        page_runs=((0, 6), (MLF_TABLE.index("|**Broken Hill Solar"), 7)),
    )
    calls: list[str] = []
    pages = MarkdownPages(_reader({}, calls))
    rows = units(MLF_TABLE)
    assert passage_quote(payload, MLF_TABLE, UnitMatch(rows[1], 0.8, 0.9), pages).page == 7
    assert passage_quote(payload, MLF_TABLE, UnitMatch(rows[0], 0.8, 0.9), pages).page == 6
    # no unit matched: the passage's first row is quoted
    assert passage_quote(payload, MLF_TABLE, None, pages).text == "Broken Hill GT 1 | GB01 | 0.8734"
    assert calls == []


def test_a_quote_is_cut_at_a_word_boundary_within_300_characters() -> None:
    sentence = "The Retailer must notify the Distributor " + "without undue delay " * 30 + "today."
    payload = PointPayload.build(doc_id="d.pdf", name="d.pdf", title="D", version="",
                                 page_start=3, page_end=3)
    quote = passage_quote(payload, sentence, None)
    assert len(quote.text) <= 300 and sentence.startswith(quote.text)
    assert sentence[len(quote.text)] == " " and len(quote.text) > 280  # whole words only
    assert quote.page == 3


def test_a_quote_of_markdown_missing_or_rebuilt_since_keeps_the_first_page_or_rereads() -> None:
    documents = {"markdown/mlf.pdf.md": "<!-- page 6 -->\nsomething else entirely\n"}
    calls: list[str] = []
    pages = MarkdownPages(_reader(documents, calls))
    row = units(MLF_TABLE)[1]
    assert pages.get("markdown/mlf.pdf.md") is not None
    documents["markdown/mlf.pdf.md"] = MARKDOWN
    quote = passage_quote(_table_payload(), MLF_TABLE, UnitMatch(row, 0.8, 0.9), pages)
    assert quote.page == 7 and len(calls) == 2
    missing = MarkdownPages(_reader({}, []))
    assert passage_quote(_table_payload(), MLF_TABLE, UnitMatch(row, 0.8, 0.9), missing).page == 6


def test_markdown_pages_is_one_per_blob_store(tmp_path: Path) -> None:
    first, second = BlobStore(f"file://{tmp_path / 'a'}"), BlobStore(f"file://{tmp_path / 'b'}")
    assert markdown_pages(first) is markdown_pages(first)
    assert markdown_pages(first) is not markdown_pages(second)


# ---------------------------------------------------------------------------------------------
# search_docs with rows: a keyword search brings the row fusion left out; its page is cited
# ---------------------------------------------------------------------------------------------


def _point(index: int, kind: str, text: str, payload: PointPayload, embedder: HashingEmbedder) -> Point:
    return Point(f"mlf.pdf-{index}", "mlf.pdf", kind, text, embedder.embed_documents([text])[0],
                 payload.to_payload())


@pytest.fixture()
def mlf_index(tmp_path: Path):  # noqa: ANN201
    embedder = HashingEmbedder()
    index = SqliteVectorIndex(tmp_path / "v.sqlite")
    index.open(embedder.model, embedder.dimension)
    # 40 passages with every word of the question, spread over sentences and repeated, so
    # meaning and BM25 rank them all above the table; only its row holds the name whole
    prose = [
        f"Broken Hill hosted meeting {n}, and Broken Hill residents came. Solar Farm owners "
        f"discussed the 2020-21 MLF. The MLF applies to every Solar Farm from 2020-21."
        for n in range(40)
    ]
    points = [
        _point(n, KIND_TEXT, text, _payload("mlf.pdf", f"2.{n} Changes"), embedder)
        for n, text in enumerate(prose)
    ]
    points.append(_point(99, KIND_TABLE, MLF_TABLE, _table_payload(), embedder))
    index.upsert(points)
    yield index, embedder
    index.close()


def test_search_docs_quotes_the_matching_row_with_its_page(mlf_index, tmp_path: Path) -> None:  # noqa: ANN001
    index, embedder = mlf_index
    blobs = BlobStore(f"file://{tmp_path / 'blobs'}")
    blobs.put("markdown/mlf.pdf.md", MARKDOWN.encode())
    question = "What MLF applies to Broken Hill Solar Farm in 2020-21?"
    answer = search_docs(index, embedder, question, top_k=3, kind=KIND_TABLE,
                         markdown=markdown_pages(blobs))
    first = answer.results[0]
    assert first.point.id == "mlf.pdf-99"
    # the citation names every page of the passage; the quote, the row's own page
    assert (first.citation.page_start, first.citation.page_end) == (6, 7)
    assert (first.quote.text, first.quote.page) == ("Broken Hill Solar Farm | BROKENH1 | 0.7844", 7)
    plain = search_docs(index, embedder, question, top_k=3, kind=KIND_TABLE)
    assert (plain.results[0].citation.page_start, plain.results[0].citation.page_end) == (6, 7)
    assert plain.results[0].quote.page == 6  # no Markdown, no page runs: the first page


class _TablesFirst(Reranker):
    """A reranker that puts table passages first (stands in for a cloud reranker)."""

    name = "tables-first"

    def rerank(self, query: str, texts: Sequence[str], top_n: int) -> list[tuple[int, float]]:
        order = sorted(range(len(texts)), key=lambda i: not texts[i].startswith("|"))
        return [(i, 1.0 / (rank + 1)) for rank, i in enumerate(order[:top_n])]


def test_a_reranked_answer_quotes_the_row_with_its_page_too(mlf_index, tmp_path: Path) -> None:  # noqa: ANN001
    index, embedder = mlf_index
    blobs = BlobStore(f"file://{tmp_path / 'blobs'}")
    blobs.put("markdown/mlf.pdf.md", MARKDOWN.encode())
    answer = search_docs(index, embedder, "Broken Hill Solar Farm MLF", top_k=2,
                         reranker=_TablesFirst(), markdown=markdown_pages(blobs))
    assert answer.reranked and answer.results[0].point.id == "mlf.pdf-99"
    assert (answer.results[0].citation.page_start, answer.results[0].citation.page_end) == (6, 7)
    assert answer.results[0].quote.page == 7
