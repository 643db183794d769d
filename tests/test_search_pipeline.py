"""The search pipeline as stages over one analysed query (issue 29, "A query bounces"): the
query is tokenised once per search, everything a stage asks of it is read in ``analyse``, the
typed stages run in order are ``search_docs``, and the analysed forms answer as the text
does."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from kb_shared.providers.base import FusionOrderReranker
from kb_shared.search import acronyms, editions, retrieval, retrieval_features
from kb_shared.search import query as query_module
from kb_shared.search.acronyms import AcronymTable
from kb_shared.search.citations import PointPayload
from kb_shared.search.editions import (
    FINANCIAL_YEAR,
    Edition,
    HeldDocument,
    edition_mismatch,
    edition_question,
)
from kb_shared.search.query import analyse
from kb_shared.search.retrieval import (
    Candidates,
    Ordered,
    PayloadsOf,
    SearchScope,
    cite,
    find_candidates,
    judge,
    order_candidates,
    search_docs,
)
from kb_shared.search.retrieval_features import bonuses, question_shape
from kb_shared.search.sparse import tokenize
from kb_shared.stores.vectors import DOCUMENT_KINDS, KIND_TABLE, KIND_TEXT, Point
from kb_shared.stores.vectors_sqlite import SqliteVectorIndex
from tests.fakes import HashingEmbedder

QUESTION = "What does NPL stand for in the 2021-22 balance sheet table under clause 3.1.5?"

TEXTS = (
    "3.1.5 Each pass checks for non-physical loss (NPL) in every region.",
    "If NPL are detected, the second pass of the dispatch solve is rerun.",
    "| Item | 2020-21 |\n| --- | --- |\n| Total assets | 1,200 |",
    "Dispatch intervals are five minutes long.",
)


def _payload(number: int) -> dict:
    return PointPayload.build(
        doc_id="mlf.pdf", name="mlf.pdf", title="Balance sheet 2020-21", version="",
        page_start=number + 1, page_end=number + 1, heading_path=("3 Rules",),
        chunk_index=number, pdf_key="pdfs/mlf.pdf",
    ).to_payload()


@pytest.fixture
def index(tmp_path: Path) -> SqliteVectorIndex:
    embedder = HashingEmbedder(64)
    index = SqliteVectorIndex(tmp_path / "v.sqlite")
    index.open(embedder.model, embedder.dimension)
    vectors = embedder.embed_documents(list(TEXTS))
    index.upsert([
        Point(id=f"mlf.pdf-{n}", document="mlf.pdf", kind=KIND_TABLE if "|" in text else KIND_TEXT,
              text=text, dense=vector, payload=_payload(n))
        for n, (text, vector) in enumerate(zip(TEXTS, vectors, strict=True))
    ])
    yield index
    index.close()


TABLE = AcronymTable([("NPL", "non-physical loss")])


def test_analyse_reads_every_stage_s_question_from_one_tokenising() -> None:
    query = analyse(QUESTION, TABLE)
    assert query.tokens == ("npl", "stand", "2021-22", "2021", "22", "balance", "sheet", "table",
                            "under", "clause", "3.1.5", "3", "1", "5")
    assert query.terms == frozenset(query.tokens)
    assert query.identifiers == ("npl", "3.1.5")
    assert query.sparse_text == QUESTION + " non-physical non physical loss"
    assert query.spells_out is not None
    assert query.spells_out("Checks for non-physical loss (NPL).")
    assert not query.spells_out("NPL are detected.")
    assert query.shape.definition_terms == ("NPL",)
    assert query.shape.section_numbers == ("3.1.5",)
    assert query.shape.statements == ("balance sheet",)
    assert query.shape.table is True
    assert {"npl", "balancesheet", "2021"} <= query.shape.naming_words
    assert ("balance", "sheet") in query.shape.features
    assert query.editions.asked == (Edition(FINANCIAL_YEAR, "2021-22"),)
    assert query.editions.words == frozenset(  # with the long form of the NPL it names
        {"npl", "stand", "balance", "sheet", "table", "under", "clause", "non", "physical", "loss"})


def test_without_a_table_the_keyword_side_is_the_query_itself() -> None:
    query = analyse("What does NPL stand for?")
    assert query.sparse_text == "What does NPL stand for?"
    assert query.spells_out is None


def test_a_search_tokenises_the_query_once(
    index: SqliteVectorIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []

    def counting(module: object) -> Callable[[str], list[str]]:
        def counted(text: str) -> list[str]:
            if "NPL stand" in text:
                seen.append(module.__name__)
            return tokenize(text)
        return counted

    for module in (query_module, retrieval, retrieval_features, acronyms, editions):
        monkeypatch.setattr(module, "tokenize", counting(module))
    answer = search_docs(index, HashingEmbedder(64), QUESTION, top_k=3, acronyms=TABLE)
    assert seen == ["kb_shared.search.query"]
    assert answer.edition_note is not None and "2021-22" in answer.edition_note


def test_the_stages_in_order_are_search_docs(index: SqliteVectorIndex) -> None:
    embedder = HashingEmbedder(64)
    query = analyse(QUESTION, TABLE)
    payload_of = PayloadsOf()
    vector = retrieval.start_query_embedding(embedder, QUESTION)
    found = find_candidates(index, query, vector, SearchScope(None, list(DOCUMENT_KINDS)), 4,
                            False, payload_of)
    assert isinstance(found, Candidates)
    assert list(found.exact) == ["npl", "3.1.5"]
    assert [h.id for h in found.exact["npl"]] == ["mlf.pdf-1", "mlf.pdf-0"]  # BM25: shorter first
    assert [h.id for h in found.exact["3.1.5"]] == ["mlf.pdf-0"]
    ordered = order_candidates(query, found, 4, FusionOrderReranker(), payload_of)
    assert isinstance(ordered, Ordered) and len(ordered.hits) == len(ordered.scores) == 4
    confidence = judge(query, found, ordered, payload_of)
    page = cite(ordered, 0, 3, payload_of, None)
    answer = search_docs(index, embedder, QUESTION, top_k=3, acronyms=TABLE)
    assert [(p.number, p.point.id, p.score) for p in page] == [
        (p.number, p.point.id, p.score) for p in answer.results]
    assert answer.results[0].point.id == "mlf.pdf-0"  # the requirement that spells NPL out
    assert [p.quote for p in page] == [p.quote for p in answer.results]
    assert (confidence.coverage, confidence.low_confidence, confidence.edition_note) == (
        answer.coverage, answer.low_confidence, answer.edition_note)
    assert confidence.low_confidence  # the corpus holds 2020-21, not the 2021-22 asked for


class _Reversing(FusionOrderReranker):
    reorders = True

    def rerank(self, query: str, texts, top_n: int) -> list[tuple[int, float]]:  # noqa: ANN001
        return [(len(texts) - 1 - i, 1.0 / (i + 1)) for i in range(min(top_n, len(texts)))]


def test_a_reranker_orders_and_the_best_units_follow_its_order(index: SqliteVectorIndex) -> None:
    query = analyse(QUESTION, TABLE)
    payload_of = PayloadsOf()
    vector = np.asarray(HashingEmbedder(64).embed_query(QUESTION))
    found = find_candidates(index, query, vector, SearchScope(None, list(DOCUMENT_KINDS)), 4,
                            True, payload_of)
    ordered = order_candidates(query, found, 2, _Reversing(), payload_of)
    assert [h.id for h in ordered.hits] == [h.id for h in reversed(found.pool)][:2]
    assert ordered.scores == [1.0, 0.5]
    assert len(ordered.matches) == 2


def test_the_question_s_shape_answers_as_its_text() -> None:
    question = "What is the capital expenditure in the cash flow statement of 3M?"
    payloads = [PointPayload.from_payload(_payload(n)) for n in range(2)]
    texts = ["## Consolidated Statement of Cash Flows\n| Capital expenditure | 1,577 |",
             "Capital expenditure rose."]
    assert bonuses(question_shape(question), texts, payloads) == bonuses(question, texts, payloads)
    assert question_shape(question, tokenize(question)) == question_shape(question)


def test_the_edition_check_reads_the_question_once() -> None:
    question = "What is the 2021-22 marginal loss factor for Bayswater?"
    held = [HeldDocument("aemo_Marginal_Loss_Factors_for_the_2020-21_Financial_year.pdf",
                         "Marginal Loss Factors for the 2020-21 Financial Year")]
    read = edition_question(question)
    assert read.asked == (Edition(FINANCIAL_YEAR, "2021-22"),)
    assert "bayswater" in read.words and "marginal" in read.words
    mismatch = edition_mismatch(read, held)
    assert mismatch is not None and mismatch == edition_mismatch(question, held)
    assert mismatch.held[0][1] == Edition(FINANCIAL_YEAR, "2020-21")
    assert edition_question("What is the marginal loss factor?") == editions.EditionQuestion(
        (), frozenset())


def test_pages_are_slices_of_one_ranking_however_deep_or_wide(tmp_path: Path) -> None:
    # 150 points, many of them with the features the re-ordering rewards (a table, the
    # clause the question names, the abbreviation spelled out) at every fused rank: a deeper
    # page must not re-rank what an earlier page already showed
    embedder = HashingEmbedder(64)
    texts = []
    for n in range(150):
        kind = n % 5
        texts.append(
            f"| Item {n} | NPL |\n| --- | --- |\n| region {n} | {n} |" if kind == 0
            else f"3.1.5 Clause {n}: the NPL check of pass {n}." if kind == 1
            else f"Non-physical loss (NPL) is checked in step {n}." if kind == 2
            else f"Dispatch note {n} on NPL and the table of regions." if kind == 3
            else f"Interval {n} is five minutes long."
        )
    index = SqliteVectorIndex(tmp_path / "paging.sqlite")
    index.open(embedder.model, embedder.dimension)
    index.upsert([
        Point(id=f"mlf.pdf-{n}", document="mlf.pdf", kind=KIND_TABLE if "|" in text else KIND_TEXT,
              text=text, dense=vector, payload=_payload(n))
        for n, (text, vector) in enumerate(
            zip(texts, embedder.embed_documents(texts), strict=True))
    ])
    try:
        def page(offset: int, top_k: int) -> tuple[list[tuple[str, str]], int | None]:
            answer = search_docs(index, embedder, QUESTION, top_k=top_k, offset=offset,
                                 acronyms=TABLE)
            cited = [(p.point.id, p.quote.text if p.quote else "") for p in answer.results]
            return cited, answer.next_offset

        by_8: list[tuple[str, str]] = []
        offset: int | None = 0
        while offset is not None and offset < 120:
            ids, offset = page(offset, 8)
            by_8 += ids
        by_25: list[tuple[str, str]] = []
        for start in range(0, 125, 25):
            by_25 += page(start, 25)[0]
        assert len({point for point, _ in by_8}) == 120  # nothing repeated, nothing skipped
        assert by_8 == by_25[:120]  # the same ranking and quotes, whatever the page size
    finally:
        index.close()


def test_a_document_named_by_its_abbreviation_is_checked_for_the_edition_asked() -> None:
    # "the 2021-22 NPL" asks about the "Non-physical loss" report, which holds FY 2020-21
    held = [HeldDocument("losses.pdf", "Non-physical Loss Report FY 2020-21")]
    question = "What is the 2021-22 NPL for region 1?"
    assert edition_mismatch(analyse(question).editions, held) is None  # no shared word
    mismatch = edition_mismatch(analyse(question, TABLE).editions, held)
    assert mismatch is not None
    assert mismatch.asked == Edition(FINANCIAL_YEAR, "2021-22")
    assert mismatch.held == (("Non-physical Loss Report FY 2020-21", Edition(FINANCIAL_YEAR, "2020-21")),)
    # the edition it holds is no mismatch, named either way
    assert edition_mismatch(analyse("What is the 2020-21 NPL?", TABLE).editions, held) is None
