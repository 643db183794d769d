"""The quality gate (``kb_assets.quality``): ``retrieval_eval`` scores the eval sets that apply
to the corpus with search_docs, records per-set and per-kind figures, and its check warns
below the floors."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from kb_assets.assets import CORPUS_ASSETS
from kb_assets.definitions import defs
from kb_assets.jobs import kb_resources
from kb_assets.intake import admit
from kb_assets.quality import (
    CHECK_FLOORS,
    FLOORS_FILE,
    QUALITY_ASSETS,
    QUALITY_CHECKS,
    SKIPPED,
    breaches,
    load_floors,
)
from kb_assets.resources import StoresResource
from kb_shared.search.evaluation import EvalSet, applicable, find_eval_sets, parse_question
from tests.assets.fake_providers import FakeProviders
from tests.fakes import tiny_pdf

NAME = "Fake Procedure.pdf"
DOC = "fake-procedure.pdf"

#: Questions on tests.fakes.SAMPLE_MARKDOWN (chunk 0: "1 Notifications", page 1; chunk 1:
#: "2 Records", page 1), one on a document the corpus lacks and one absent question.
QUESTIONS = [
    {"id": "q1", "kind": "lookup", "question": "Retailer notify Distributor business days life support",
     "evidence": [{"doc": NAME, "pages": [1], "quote": "The Retailer must notify the Distributor within 2 business days"}]},
    {"id": "q2", "kind": "definition", "question": "register of every site reports monthly",
     "evidence": [{"doc": NAME, "pages": [1], "quote": "The Distributor keeps the register of every site and reports it monthly"}]},
    {"id": "q3", "kind": "lookup", "question": "a question about another document",
     "evidence": [{"doc": "Other.pdf", "pages": [3], "quote": "anything"}]},
    {"id": "q4", "kind": "absent", "question": "zebra migration patterns in the Serengeti", "evidence": []},
]


def write_set(folder: Path, name: str, questions: list[dict]) -> None:
    (folder / name).mkdir(parents=True)
    (folder / name / "questions.jsonl").write_text(
        "\n".join(json.dumps(q) for q in questions) + "\n", encoding="utf-8"
    )


def built(tmp_path: Path, stores: StoresResource, instance: dg.DagsterInstance) -> FakeProviders:
    pdf = tmp_path / "in" / NAME
    pdf.parent.mkdir(parents=True)
    pdf.write_bytes(tiny_pdf("quality"))
    admit([pdf], stores, instance)
    providers = FakeProviders()
    result = dg.materialize(
        CORPUS_ASSETS, partition_key=DOC, resources=kb_resources(stores, providers), instance=instance
    )
    assert result.success
    return providers


def evaluate(stores: StoresResource, providers: FakeProviders, instance: dg.DagsterInstance):
    return dg.materialize(
        [*QUALITY_ASSETS], resources=kb_resources(stores, providers), instance=instance,
        selection=["retrieval_eval"],
    )


def materialised_metadata(result: dg.ExecuteInProcessResult) -> dict:
    (event,) = result.get_asset_materialization_events()
    return {k: v.value for k, v in event.step_materialization_data.materialization.metadata.items()}


def test_retrieval_eval_scores_the_applicable_questions_per_set_and_kind(
    tmp_path: Path, home: Path, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    providers = built(tmp_path, stores, instance)
    write_set(home / "eval", "fake", QUESTIONS)
    write_set(home / "eval", "elsewhere", [QUESTIONS[2]])  # no question applies: left out

    metadata = materialised_metadata(evaluate(stores, providers, instance))

    assert metadata["sets"] == 1
    assert metadata["fake/questions"] == 2  # q3's document is not in the corpus
    assert metadata["fake/skipped_questions"] == 1
    assert metadata["fake/recall_at_1"] == 1.0
    assert metadata["fake/mrr"] == 1.0
    assert metadata["fake/lookup/mrr"] == 1.0 and metadata["fake/definition/mrr"] == 1.0
    assert "fake/absent_flagged" in metadata and metadata["fake/absent_flagged"].endswith("/1")
    assert "| fake | all | 2 | 1.000 | 1.000 | 1.000 | 1.000 |" in metadata["scores"]
    assert not any(key.startswith("elsewhere/") for key in metadata)


def test_retrieval_eval_without_sets_says_where_to_put_them(
    tmp_path: Path, home: Path, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    providers = built(tmp_path, stores, instance)
    metadata = materialised_metadata(evaluate(stores, providers, instance))
    assert metadata["sets"] == 0
    assert metadata[SKIPPED] == (
        f"no eval set in {home / 'eval'} has questions whose documents are all ready "
        "(0 sets, 1 ready documents); put <name>/questions.jsonl there or set KB_EVAL_DIR"
    )


def test_the_floor_check_warns_on_a_breach_and_passes_otherwise(
    tmp_path: Path, home: Path, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    providers = built(tmp_path, stores, instance)
    # a set named like a floored one, scored 0 on recall: the regulatory floors are breached
    write_set(home / "eval", "regulatory", [
        {"id": "r1", "kind": "table", "question": "register of every site reports monthly",
         "evidence": [{"doc": NAME, "pages": [2], "quote": "no chunk on page two says this"}]},
    ])
    result = dg.materialize(
        [*QUALITY_ASSETS, *QUALITY_CHECKS], resources=kb_resources(stores, providers),
        instance=instance,
    )
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.check_name == CHECK_FLOORS
    assert evaluation.passed is False
    assert evaluation.severity == dg.AssetCheckSeverity.WARN
    values = {k: v.value for k, v in evaluation.metadata.items()}
    # recall_at_1/5/10 and mrr of the set, and table's MRR: five figures checked, all below
    assert (values["checked"], values["below_floor"]) == (5, 5)
    assert "- regulatory/table/mrr: 0.000 < floor 0.770" in values["breaches"]


def test_floors_file_parses_and_breaches_ignore_what_was_not_measured() -> None:
    floors = load_floors(FLOORS_FILE)
    assert floors["regulatory/mrr"] == 0.82
    assert floors["regulatory/definition/mrr"] == 1.00
    assert floors["financebench/recall_at_5"] == 0.88
    assert floors["financebench/mrr"] == 0.62
    assert floors["financebench-dev/mrr"] == 0.67
    found = breaches({"regulatory/mrr": 0.81, "regulatory/recall_at_1": 0.9}, floors)
    assert [(b.key, b.value, b.floor) for b in found] == [("regulatory/mrr", 0.81, 0.82)]


def test_a_floor_outside_zero_to_one_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "floors.toml"
    bad.write_text('measured_on = "x"\n[regulatory]\nmrr = 60\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"floor regulatory/mrr must be a number in \[0, 1\], got 60"):
        load_floors(bad)


def test_applicable_questions_need_every_evidence_document() -> None:
    both = parse_question(
        {"id": "x", "kind": "cross_doc", "question": "?",
         "evidence": [{"doc": "A.pdf", "pages": [1]}, {"doc": "B.pdf", "pages": [2]}]}, "t",
    )
    absent = parse_question({"id": "y", "kind": "absent", "question": "?", "evidence": []}, "t")
    eval_set = EvalSet("s", (both, absent))
    assert applicable(eval_set, {"A.pdf"}) == ([], [])
    assert applicable(eval_set, {"A.pdf", "B.pdf"}) == ([both], [absent])


def test_find_eval_sets_reads_each_folder(tmp_path: Path) -> None:
    write_set(tmp_path, "b", QUESTIONS[:1])
    write_set(tmp_path, "a", QUESTIONS)
    assert [(s.name, len(s.questions)) for s in find_eval_sets(tmp_path)] == [("a", 4), ("b", 1)]
    assert find_eval_sets(tmp_path / "missing") == []


def test_the_code_location_has_the_quality_group_and_its_sensor() -> None:
    repo = defs.get_repository_def()
    node = repo.asset_graph.get(dg.AssetKey("retrieval_eval"))
    assert node.group_name == "quality"
    assert "quality_automation_sensor" in [s.name for s in repo.sensor_defs]
