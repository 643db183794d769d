"""``kb_shared.search.evaluation``: the two questions.jsonl formats, the README hit rule and the
ranking metrics, with values worked out by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from kb_shared.search.citations import PointPayload
from kb_shared.search.evaluation import (
    Evidence,
    Question,
    Retrieved,
    dcg,
    hit_rank,
    hits,
    load_questions,
    mean_reciprocal_rank,
    ndcg,
    pages_overlap,
    parse_question,
    recall_at_k,
    reduce_words,
    relevant,
    score,
)
from kb_shared.stores.vectors import StoredPoint
from tests.conftest import corpus_dir

FAST_START = "aemo_Fast_Start_Unit_Inflexibility_Profile_Model_October_2014.pdf"
QUOTE = (
    "Mode 2 Start Up Mode The fast-start unit is generating but has not reached minimum "
    "loading."
)


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --------------------------------------------------------------------------- questions


def test_reduce_words_keeps_lower_case_letter_and_digit_runs() -> None:
    assert reduce_words("|**Mode 2**|Start-Up, T2.|") == ["mode", "2", "start", "up", "t2"]
    assert reduce_words("— ¶ —") == []


def test_a_regulatory_line_is_parsed_with_its_quote_and_kind() -> None:
    raw = {"id": "regulatory_002", "kind": "table", "question": "What is Mode 2?",
           "evidence": [{"doc": FAST_START, "pages": [6, 7], "quote": QUOTE}]}
    question = parse_question(raw, "q.jsonl:1")
    assert question == Question(
        id="regulatory_002", kind="table", question="What is Mode 2?",
        evidence=(Evidence(doc=FAST_START, pages=(6, 7), quote=QUOTE),),
    )
    assert question.answerable


def test_a_question_without_evidence_is_absent() -> None:
    question = parse_question({"id": "r9", "question": "Q?", "evidence": []}, "w")
    assert (question.kind, question.evidence, question.answerable) == ("absent", (), False)


def test_a_financebench_line_names_the_pdf_and_turns_page_indexes_into_pages() -> None:
    raw = {"id": "fb_1", "doc_name": "3M_2018_10K", "question": "Capex?",
           "question_type": "metrics-generated",
           "evidence": [{"page_index0": 59, "text": "..."}, {"page_index0": 58}]}
    question = parse_question(raw, "w")
    assert question == Question(
        id="fb_1", kind="metrics-generated", question="Capex?",
        evidence=(Evidence(doc="3M_2018_10K.pdf", pages=(59, 60), quote=None),),
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"question": "Q?"}, "q.jsonl:3: missing field 'id'"),
        ({"id": "x", "question": "Q?", "evidence": [{"doc": "a.pdf"}]},
         "q.jsonl:3: evidence item needs doc and pages"),
        ({"id": "x", "doc_name": "a", "question": "Q?", "evidence": [{"text": "t"}]},
         "q.jsonl:3: FinanceBench evidence without page_index0"),
    ],
)
def test_a_line_in_neither_format_is_refused_with_where_it_is(raw: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_question(raw, "q.jsonl:3")


def test_load_questions_skips_blank_lines_and_keeps_file_order(tmp_path: Path) -> None:
    path = _write(tmp_path / "questions.jsonl", [
        json.dumps({"id": "a", "kind": "definition", "question": "A?",
                    "evidence": [{"doc": "a.pdf", "pages": [1], "quote": "alpha"}]}),
        "",
        json.dumps({"id": "b", "kind": "absent", "question": "B?", "evidence": []}),
    ])
    assert [(q.id, q.kind, q.answerable) for q in load_questions(path)] == [
        ("a", "definition", True), ("b", "absent", False),
    ]


def test_load_questions_names_the_line_that_is_not_json(tmp_path: Path) -> None:
    first = json.dumps({"id": "a", "question": "A?"})
    path = _write(tmp_path / "questions.jsonl", [first, "{oops"])
    with pytest.raises(ValueError, match=r"questions\.jsonl:2: not JSON"):
        load_questions(path)


def test_load_questions_refuses_a_line_that_is_not_an_object(tmp_path: Path) -> None:
    path = _write(tmp_path / "questions.jsonl", ["[1, 2]"])
    with pytest.raises(ValueError, match=r"questions\.jsonl:1: expected a JSON object, got list"):
        load_questions(path)


@pytest.mark.corpus
def test_the_shared_regulatory_set_loads_with_30_answerable_and_2_absent_questions() -> None:
    questions = load_questions(corpus_dir() / "eval" / "regulatory" / "questions.jsonl")
    assert len(questions) == 32
    assert sum(q.answerable for q in questions) == 30
    assert all(e.quote for q in questions for e in q.evidence)


# --------------------------------------------------------------------------- hit rule


def test_a_stored_point_is_seen_through_its_payload() -> None:
    payload = PointPayload(doc_id="d", name=FAST_START, title="T", version="", page_start=6,
                           page_end=None)
    point = StoredPoint("d-3", "d", "text", "chunk text", payload.to_payload())
    assert Retrieved.from_point(point) == Retrieved(FAST_START, 6, 6, "chunk text", "d-3")


def test_page_overlap_needs_the_document_and_a_page_inside_the_span() -> None:
    evidence = Evidence(doc=FAST_START, pages=(6,))
    assert pages_overlap(Retrieved(FAST_START, 5, 7, ""), evidence)
    assert pages_overlap(Retrieved(FAST_START, 6, None, ""), evidence)
    assert not pages_overlap(Retrieved(FAST_START, 7, 9, ""), evidence)
    assert not pages_overlap(Retrieved("other.pdf", 6, 6, ""), evidence)
    assert not pages_overlap(Retrieved(FAST_START, None, None, ""), evidence)


def test_the_quote_rule_matches_the_first_8_words_through_markdown() -> None:
    evidence = Evidence(doc=FAST_START, pages=(6,), quote=QUOTE)
    table_row = "|**Mode 2**|Start Up Mode|The fast-start unit is generating|"
    assert hits(Retrieved(FAST_START, 6, 6, table_row), evidence)
    # Seven of the eight words are not enough; the right words on another page do not count.
    assert not hits(Retrieved(FAST_START, 6, 6, "Mode 2 Start Up Mode The fast"), evidence)
    assert not hits(Retrieved(FAST_START, 8, 8, table_row), evidence)
    # A word boundary is respected: "mode 20" does not contain "mode 2".
    assert not hits(Retrieved(FAST_START, 6, 6, table_row.replace("Mode 2", "Mode 20")), evidence)


def test_evidence_without_a_quote_hits_on_document_and_pages_alone() -> None:
    evidence = Evidence(doc="3M_2018_10K.pdf", pages=(60,))
    assert hits(Retrieved("3M_2018_10K.pdf", 59, 61, "anything"), evidence)
    assert not hits(Retrieved("3M_2018_10K.pdf", 61, 62, "anything"), evidence)


def test_hit_rank_is_the_first_result_hitting_any_evidence_item() -> None:
    question = Question("q", "table", "Q?", (
        Evidence("a.pdf", (3,), "alpha beta"), Evidence("b.pdf", (1,), "gamma"),
    ))
    results = [
        Retrieved("a.pdf", 3, 3, "beta alpha"),
        Retrieved("c.pdf", 1, 1, "gamma"),
        Retrieved("b.pdf", 1, 2, "x gamma y"),
        Retrieved("a.pdf", 2, 3, "Alpha, beta!"),
    ]
    assert [relevant(question, r) for r in results] == [False, False, True, True]
    assert hit_rank(question, results) == 3
    assert hit_rank(question, results[:2]) is None


# --------------------------------------------------------------------------- metrics


def test_recall_and_mrr_of_hand_worked_ranks() -> None:
    ranks = [1, 3, None, 6]
    assert recall_at_k(ranks, 1) == 0.25
    assert recall_at_k(ranks, 5) == 0.5
    assert recall_at_k(ranks, 10) == 0.75
    assert mean_reciprocal_rank(ranks) == pytest.approx((1 + 1 / 3 + 1 / 6) / 4)
    scores = score(ranks)
    assert (scores.questions, scores.recall_at_1, scores.recall_at_5, scores.recall_at_10) == (
        4, 0.25, 0.5, 0.75,
    )
    assert scores.mrr == pytest.approx(0.375)


def test_metrics_refuse_an_empty_question_list() -> None:
    for metric in (lambda: recall_at_k([], 5), lambda: mean_reciprocal_rank([]), lambda: score([])):
        with pytest.raises(ValueError, match="no answerable questions"):
            metric()


def test_ndcg_with_binary_gains() -> None:
    assert dcg([1, 0, 1]) == pytest.approx(1 + 1 / math.log2(4))
    # Two relevant points in the corpus, found at ranks 1 and 3 of the top 3.
    assert ndcg([1, 0, 1], 2, 3) == pytest.approx((1 + 0.5) / (1 + 1 / math.log2(3)))
    assert ndcg([1, 1], 2, 10) == 1.0
    # Only the first k results count, and nothing relevant in the corpus gives 0.
    assert ndcg([0, 1], 1, 1) == 0.0
    assert ndcg([0, 0], 0, 10) == 0.0
