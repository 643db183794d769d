"""Batched runs (issue 15): several documents in one run of the build job, as a backfill with
``BackfillPolicy.multi_run(N)`` launches them, on fake providers (``tests/assets/
fake_providers.py``) and tiny real PDFs. A batch gives the same ids and counts as one run per
document; a broken PDF in the middle of a batch fails alone, with the reason a run of its own
gives, while the others become ready; one asset re-runs over a range without touching what is
upstream; and the batches never include a document that was not asked for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from kb_assets import backfill, operations
from kb_assets.assets import CORPUS_ASSETS
from kb_assets.constants import BUILD_JOB, DOCUMENTS, EMBEDDINGS, MARKDOWN, RECORD
from kb_assets.jobs import kb_resources
from kb_assets.intake import IntakeStatus, admit
from kb_assets.io_manager import StepRecords
from kb_assets.jobs import build_documents_job
from kb_assets.live_runs import BUILDING_ELSEWHERE, PROCESS_TAG, this_process
from kb_assets.partitions import documents_partitions
from kb_assets.resources import StoresResource
from kb_shared.stores.vectors import KIND_FIGURE, KIND_TEXT
from tests.assets.fake_providers import FakeProviders
from tests.fakes import tiny_pdf

NAMES = ("A Procedure.pdf", "B Broken.pdf", "C Procedure.pdf")
DOCS = ("a-procedure.pdf", "b-broken.pdf", "c-procedure.pdf")

#: What ``fake_job`` builds with (``dagster.reconstructable`` needs a module-level function).
FAKE_JOB: dict[str, Any] = {}


def fake_job() -> dg.JobDefinition:
    """The build job (with its failure hook) on ``FAKE_JOB``'s stores and providers."""
    defs = dg.Definitions(
        assets=CORPUS_ASSETS,
        jobs=[build_documents_job],
        resources=kb_resources(FAKE_JOB["stores"], FAKE_JOB["providers"]),
        executor=dg.in_process_executor,
    )
    return defs.resolve_job_def(BUILD_JOB)


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


def admit_three(
    folder: Path, home: Path, instance: dg.DagsterInstance, *, broken: bool
) -> StoresResource:
    """A fresh KB_HOME with the three documents admitted in order (their partitions too);
    with ``broken`` the middle one is a PDF cut short (refused by the markdown step)."""
    stores = StoresResource(home=str(home))
    paths = []
    for number, name in enumerate(NAMES):
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        data = tiny_pdf(name)
        path.write_bytes(data[:900] if broken and number == 1 else data)
        paths.append(path)
    outcomes = admit(paths, stores, instance)
    assert [(o.status, o.doc_id) for o in outcomes] == [(IntakeStatus.ADDED, d) for d in DOCS]
    FAKE_JOB.update(stores=stores, providers=FakeProviders())
    return stores


def stored_state(stores: StoresResource) -> dict[str, tuple[Any, ...]]:
    """Per document: status, the four counts, its text and figure point ids, its edges."""
    index = stores.existing_vectors()
    graph = stores.graph()
    state = {}
    for doc in DOCS:
        row = stores.catalog().get(doc)
        state[doc] = (
            row.status, row.chunk_count, row.figure_count, row.entity_count,
            row.relationship_count,
            sorted(index.list_ids(doc, KIND_TEXT)), sorted(index.list_ids(doc, KIND_FIGURE)),
            graph.counts(doc).relationships,
        )
    return state


def test_a_batch_of_three_equals_three_single_runs(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    with dg.DagsterInstance.ephemeral() as single_instance:
        single = admit_three(tmp_path / "in", tmp_path / "single", single_instance, broken=False)
        outcomes = operations.build_documents(single, single_instance, DOCS, job=fake_job)
        assert [o.status for o in outcomes] == ["ready"] * 3
        expected = stored_state(single)
        single.close()

    stores = admit_three(tmp_path / "in", tmp_path / "batched", instance, broken=False)
    result = backfill.run_batch_build(instance, DOCS[0], DOCS[-1], settings=stores, job=fake_job)
    assert result.success
    assert stored_state(stores) == expected
    assert expected[DOCS[0]][:5] == ("ready", 3, 1, 2, 2)
    # one run; every asset materialised once per document, each with its own metadata
    assert len(instance.get_runs()) == 1
    events = result.get_asset_materialization_events()
    per_asset = {
        asset: sorted(
            e.step_materialization_data.materialization.partition
            for e in events
            if e.asset_key.path[-1] == asset
        )
        for asset in operations.CORPUS_ASSETS
    }
    assert per_asset == {asset: list(DOCS) for asset in operations.CORPUS_ASSETS}
    record_names = {
        e.step_materialization_data.materialization.partition:
            e.step_materialization_data.materialization.metadata["name"].value
        for e in events
        if e.asset_key.path[-1] == RECORD
    }
    assert record_names == dict(zip(DOCS, NAMES, strict=True))
    checks = {c.check_name: (c.passed, c.metadata["documents_checked"].value)
              for c in result.get_asset_check_evaluations()}
    assert checks == {"chunks_located_in_pdf": (True, 3), "index_matches_chunks": (True, 3),
                      "edge_chunk_ids_resolve": (True, 3)}
    statuses = instance.get_status_by_partition(
        dg.AssetKey(RECORD), list(DOCS), documents_partitions
    )
    assert {d: s.value for d, s in statuses.items()} == dict.fromkeys(DOCS, "MATERIALIZED")
    stores.close()


def test_a_broken_pdf_in_the_middle_fails_alone_with_its_own_reason(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    stores = admit_three(tmp_path / "in", tmp_path / "kb", instance, broken=True)
    batch_run = backfill.run_batch_build(
        instance, DOCS[0], DOCS[-1], settings=stores, job=fake_job
    )
    assert batch_run.success  # the others' work is kept: their steps all ran
    in_batch = stores.catalog().get(DOCS[1]).failure_reason
    assert in_batch.startswith("markdown: B Broken.pdf is truncated")
    assert StepRecords(stores.blobs()).run_failures(batch_run.run_id) == {DOCS[1]: in_batch}
    assert [stores.catalog().get(d).status for d in DOCS] == ["ready", "failed", "ready"]
    index = stores.existing_vectors()
    assert [len(index.list_ids(d, KIND_TEXT)) for d in DOCS] == [3, 0, 3]
    assert not stores.blobs().exists(f"chunks/{DOCS[1]}.parquet")

    # the driver: the same batch, then the failed document alone, failing on its own partition
    outcomes = backfill.build_batches(
        stores, instance, list(DOCS), batch=3, force=(MARKDOWN,), job=fake_job
    )
    assert [(o.doc_id, o.status) for o in outcomes] == [
        (DOCS[0], "ready"), (DOCS[1], "failed"), (DOCS[2], "ready")
    ]
    assert outcomes[1].reason == in_batch
    assert outcomes[1].run_id not in (outcomes[0].run_id, batch_run.run_id)
    assert instance.get_run_by_id(outcomes[1].run_id).tags["dagster/partition"] == DOCS[1]
    row = stores.catalog().get(DOCS[1])
    assert (row.status, row.failure_reason) == ("failed", in_batch)
    statuses = instance.get_status_by_partition(
        dg.AssetKey(MARKDOWN), list(DOCS), documents_partitions
    )
    assert {d: s.value for d, s in statuses.items()} == {
        DOCS[0]: "MATERIALIZED", DOCS[1]: "FAILED", DOCS[2]: "MATERIALIZED"
    }
    assert StepRecords(stores.blobs()).run_failures(outcomes[0].run_id) == {}  # cleared
    stores.close()


def test_a_document_a_live_run_builds_is_left_to_it_and_out_of_every_batch(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    stores = admit_three(tmp_path / "in", tmp_path / "kb", instance, broken=False)
    # the intake sensor's run of B, launched and running in a live process
    instance.add_run(dg.DagsterRun(
        job_name=BUILD_JOB, run_id="sensor01", status=dg.DagsterRunStatus.STARTED,
        tags={"dagster/partition": DOCS[1], PROCESS_TAG: this_process()},
    ))
    outcomes = backfill.build_batches(stores, instance, list(DOCS), batch=3, job=fake_job)
    assert [(o.doc_id, o.status, o.run_id) for o in outcomes][0] == (
        DOCS[1], BUILDING_ELSEWHERE, "sensor01"
    )
    assert [(o.doc_id, o.status) for o in outcomes[1:]] == [(DOCS[0], "ready"), (DOCS[2], "ready")]
    for record in instance.get_run_records():  # no run of this build touched B
        run = record.dagster_run
        if run.run_id != "sensor01":
            assert run.tags.get("dagster/partition") in (DOCS[0], DOCS[2]), run.tags
    assert stores.catalog().get(DOCS[1]).status == "pending"
    stores.close()


def test_one_asset_re_runs_over_a_range_and_nothing_upstream(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    stores = admit_three(tmp_path / "in", tmp_path / "kb", instance, broken=False)
    assert backfill.run_batch_build(instance, DOCS[0], DOCS[-1], settings=stores,
                                    job=fake_job).success
    before = stored_state(stores)
    providers: FakeProviders = FAKE_JOB["providers"]
    conversions = list(providers.converter_.calls)
    embedded = len(providers.embedder_.calls)

    outcomes = backfill.build_batches(
        stores, instance, list(DOCS), batch=25,
        assets=operations.rebuild_selection(EMBEDDINGS), force=(EMBEDDINGS,), job=fake_job,
    )
    assert [o.status for o in outcomes] == ["ready"] * 3
    assert len({o.run_id for o in outcomes}) == 1
    run_id = outcomes[0].run_id
    steps = {e.dagster_event.step_key
             for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START)}
    assert steps == {EMBEDDINGS, RECORD}
    assert providers.converter_.calls == conversions  # no conversion
    assert providers.embedder_.calls[embedded:] == [3, 3, 3]  # forced: each re-embedded
    assert stored_state(stores) == before
    stores.close()


def test_batches_are_ranges_of_asked_documents_only() -> None:
    order = ["a", "b", "c", "d", "e", "f", "g"]
    assert backfill.partition_batches(order, ["a", "b", "d", "e", "f", "g"], 2) == [
        ["a", "b"], ["d", "e"], ["f", "g"]
    ]
    assert backfill.partition_batches(order, ["g", "c", "b"], 25) == [["b", "c"], ["g"]]
    assert backfill.partition_batches(order, ["zz"], 3) == []
    with pytest.raises(ValueError, match="at least 1, not 0"):
        backfill.partition_batches(order, order, 0)
    assert DOCUMENTS == documents_partitions.name
