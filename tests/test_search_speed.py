"""What the search_docs speed-ups (issue 14, latency) must not change: cached payloads and
terms give what decoding and tokenising afresh give, and no caller can alter the cache; the
serving benchmarks' shared start and the snapshot diff that proves answers unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.common import served_questions
from benchmarks.search_snapshot import differences
from kb_shared.search.citations import PointPayload
from kb_shared.search.retrieval import PayloadsOf, term_coverage, analyse, text_terms
from kb_shared.search.retrieval_features import best_units
from kb_shared.search.sparse import tokenize
from kb_shared.stores.vectors import KIND_TABLE, KIND_TEXT, Point
from kb_shared.stores.vectors_sqlite import SqliteVectorIndex


def _payload(title: str) -> dict:
    return PointPayload.build(doc_id="d.pdf", name="d.pdf", title=title, version="", page_start=1,
                              page_end=2, heading_path=("3 Rules",), chunk_index=0,
                              pdf_key="pdfs/d.pdf").to_payload()


def test_a_changed_payload_never_reaches_the_next_reader(tmp_path: Path) -> None:
    index = SqliteVectorIndex(tmp_path / "v.sqlite")
    index.open("m", 2)
    index.upsert([Point(id="a", document="d.pdf", kind=KIND_TEXT, text="alpha",
                        dense=np.array([1.0, 0.0]), payload=_payload("Rules"))])
    first = index.fetch(["a"])[0]
    first.payload["title"] = "changed by a caller"
    first.payload.pop("page_start")
    again = index.fetch(["a"])[0]
    assert again.payload == _payload("Rules")
    assert index.dense_search([1.0, 0.0], 1)[0].point.payload["title"] == "Rules"
    index.upsert([Point(id="a", document="d.pdf", kind=KIND_TEXT, text="alpha",
                        dense=np.array([1.0, 0.0]), payload=_payload("Rules v2"))])
    assert index.fetch(["a"])[0].payload["title"] == "Rules v2"  # new text, new entry
    index.close()


def test_cached_terms_are_the_tokenizer_terms_of_that_exact_text() -> None:
    text = "Clause 3.1.5 of SO_OP_3705 applies to IN008-24."
    assert text_terms(text) == frozenset(tokenize(text))
    assert "in008-24" in text_terms(text)
    assert "in008-24" not in text_terms(text.replace("IN008-24", "IN009-24"))


def test_coverage_with_a_parsed_payload_equals_parsing_it_again() -> None:
    payload = _payload("Loss Factors")
    point = Point(id="p", document="d.pdf", kind=KIND_TEXT, text="Marginal loss factors",
                  dense=np.zeros(2), payload=payload)
    stored = type("Stored", (), {"id": "p", "text": point.text, "payload": payload})()
    query = analyse("marginal loss factors rules")
    parsed = PayloadsOf()(stored)
    assert term_coverage(query, stored, parsed) == term_coverage(query, stored) == 1.0


def test_payloads_are_parsed_once_per_point_per_search() -> None:
    seen: list[str] = []

    class Counting(dict):
        def get(self, key, default=None):
            seen.append(key)
            return super().get(key, default)

    stored = type("Stored", (), {"id": "p", "payload": Counting(_payload("T"))})()
    payload_of = PayloadsOf()
    first = payload_of(stored)
    reads = len(seen)
    assert payload_of(stored) is first and len(seen) == reads
    assert first.title == "T" and first.section == "3 Rules"


def test_best_units_skip_no_unit_that_shares_a_feature() -> None:
    table = ("| Station | Region | MLF |\n| --- | --- | --- |\n| Broken Hill Solar Farm | NSW "
             "| 0.8213 |\n| Moree Solar Farm | NSW | 0.9417 |")
    prose = "The report lists each station. Nothing here names a farm. Broken Hill is a town."
    payloads = [PointPayload.from_payload(_payload("MLF")) for _ in range(2)]
    table_match, prose_match = best_units("Broken Hill Solar Farm MLF", [table, prose], payloads)
    assert table_match.unit.text == "| Broken Hill Solar Farm | NSW | 0.8213 |"
    assert prose_match.unit.text == "Broken Hill is a town."
    assert 0 < prose_match.share < table_match.share == pytest.approx(1.0)


def test_served_questions_checks_the_home_and_reads_questions_in_order(tmp_path: Path) -> None:
    evals = tmp_path / "eval"
    evals.mkdir()
    rows = [{"id": f"q{n}", "kind": "lookup", "question": f"Question {n}?", "evidence": []}
            for n in (2, 1)]
    (evals / "questions.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    home = tmp_path / "home"
    home.mkdir()
    with pytest.raises(SystemExit, match="holds no built corpus"):
        served_questions(home, evals)
    (home / "kb.sqlite").write_bytes(b"")
    assert served_questions(home, evals) == (home.resolve(), ["Question 2?", "Question 1?"])
    with pytest.raises(FileNotFoundError, match="no questions.jsonl"):
        served_questions(home, tmp_path)


def test_snapshot_differences_name_the_question_and_call() -> None:
    line = {"id": "q1", "args": {"query": "a"}, "result": {"content": [{"text": "[1] x"}]}}
    before = [json.dumps(line, sort_keys=True)]
    changed = [json.dumps({**line, "result": {"content": [{"text": "[1] y"}]}}, sort_keys=True)]
    assert differences(before, before) == []
    assert differences(before, changed) == ["differs: q1 {'query': 'a'}"]
    assert differences(before, []) == ["1 lines before, 0 after"]
