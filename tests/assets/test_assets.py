"""Every corpus asset on fake providers (``tests/fakes.py``): no PDF conversion, no model, a
few seconds in all. Each test admits a tiny real PDF into a fresh SQLite KB_HOME and runs the
assets directly (``build_asset_context``), through ``materialize``, or as runs of the build
job with its failure hook. The full builds on the real providers are in ``test_pipeline.py``
(marked slow)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from kb_assets import operations
from kb_assets.assets import CORPUS_ASSETS
from kb_assets.assets.chunks import chunks
from kb_assets.assets.common import BuildConfig
from kb_assets.assets.markdown import markdown
from kb_assets.constants import (
    BUILD_JOB,
    CHECK_CHUNKS_LOCATED,
    CHECK_EDGES_RESOLVE,
    CHECK_INDEX_MATCHES_CHUNKS,
    CHUNKS,
    DOCUMENTS,
    EMBEDDINGS,
    FIGURES,
    GRAPH,
    MARKDOWN,
    RECORD,
)
from kb_assets.jobs import kb_resources
from kb_assets.io_manager import StepRecords
from kb_assets.jobs import build_documents_job
from kb_assets.outputs import MarkdownDocument, StepSummary
from kb_assets.resources import StoresResource
from kb_shared.search.citations import PointPayload
from kb_shared.stores.catalog import DocumentRow
from kb_shared.stores.vectors import KIND_FIGURE, KIND_TEXT
from tests.assets.admitted import admit_one
from tests.assets.fake_providers import FakeProviders
from tests.fakes import SAMPLE_FIGURE, SAMPLE_TITLE, SAMPLE_VERSION, FlakyEmbedder, tiny_pdf

NAME = "Fake Procedure.pdf"
DOC = "fake-procedure.pdf"
CHUNK_IDS = [f"{DOC}-0", f"{DOC}-1", f"{DOC}-2"]


@pytest.fixture
def admitted(tmp_path: Path, stores: StoresResource, instance: dg.DagsterInstance) -> DocumentRow:
    """The tiny PDF admitted as ``DOC`` (pending, with its partition)."""
    row = admit_one(tmp_path, stores, instance, NAME, tiny_pdf("first"))
    assert row.doc_id == DOC
    return row


def materialize(
    stores: StoresResource,
    providers: FakeProviders,
    instance: dg.DagsterInstance,
    *,
    selection: list[str] | None = None,
    force: tuple[str, ...] = (),
) -> dg.ExecuteInProcessResult:
    """``dagster.materialize`` of the corpus assets (or ``selection``) for ``DOC``."""
    return dg.materialize(
        CORPUS_ASSETS,
        partition_key=DOC,
        resources=kb_resources(stores, providers),
        instance=instance,
        selection=selection,
        run_config={"ops": {name: {"config": {"force": True}} for name in force}},
    )


def build_run(
    stores: StoresResource, providers: FakeProviders, instance: dg.DagsterInstance
) -> dg.ExecuteInProcessResult:
    """One run of the real build job (with its failure hook) on the fakes."""
    defs = dg.Definitions(
        assets=CORPUS_ASSETS,
        jobs=[build_documents_job],
        resources=kb_resources(stores, providers),
        executor=dg.in_process_executor,
    )
    return defs.resolve_job_def(BUILD_JOB).execute_in_process(
        partition_key=DOC, instance=instance, raise_on_error=False
    )


def metadata(result: dg.ExecuteInProcessResult, asset: str) -> dict[str, Any]:
    """The metadata values of ``asset``'s materialisation in ``result``."""
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        if materialization.asset_key.path[-1] == asset:
            return {k: v.value for k, v in materialization.metadata.items()}
    raise AssertionError(f"{asset} was not materialised")


# --------------------------------------------------------------------------------------
# One asset at a time (build_asset_context)
# --------------------------------------------------------------------------------------
def test_markdown_converts_once_then_reuses_until_forced(
    admitted: DocumentRow, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    context = dg.build_asset_context(partition_key=DOC, instance=instance)
    first = markdown(context, BuildConfig(), stores=stores, providers=providers)
    document = first.value
    assert (document.doc_id, document.name, document.title, document.version) == (
        DOC, NAME, SAMPLE_TITLE, SAMPLE_VERSION
    )
    assert (document.pages, document.sha256, document.provider) == (2, admitted.sha256, "fake-converter")
    assert document.figures == (SAMPLE_FIGURE,)
    assert first.metadata["markdown_conversions"].value == 1
    assert first.metadata["markdown_key"].value == f"markdown/{DOC}.md"

    StepRecords(stores.blobs()).save(MARKDOWN, DOC, document)  # what the IO manager does
    again = markdown(context, BuildConfig(), stores=stores, providers=providers)
    assert again.value == document
    assert again.metadata["markdown_conversions"].value == 0
    forced = markdown(context, BuildConfig(force=True), stores=stores, providers=providers)
    assert forced.metadata["markdown_conversions"].value == 1
    assert providers.converter_.calls == [NAME, NAME]


def test_markdown_refusal_fails_the_step_and_writes_no_reason(
    admitted: DocumentRow, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    providers.converter_.refuse[NAME] = "the PDF is encrypted; remove the password and add it again"
    context = dg.build_asset_context(partition_key=DOC, instance=instance)
    with pytest.raises(dg.Failure) as failure:
        markdown(context, BuildConfig(), stores=stores, providers=providers)
    assert failure.value.description == "the PDF is encrypted; remove the password and add it again"
    # the failure hook is the one writer of a failure reason; the asset writes none
    row = stores.catalog().get(DOC)
    assert (row.status, row.failure_reason) == ("pending", None)


def test_chunks_have_ids_heading_paths_and_page_spans(
    admitted: DocumentRow, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    context = dg.build_asset_context(partition_key=DOC, instance=instance)
    document = markdown(context, BuildConfig(), stores=stores, providers=providers).value
    result, check = chunks(context, BuildConfig(), stores=stores, document=document)
    assert [(c.id, c.index, c.heading_path, c.page_start, c.page_end) for c in result.value] == [
        (CHUNK_IDS[0], 0, ("Fake Retail Procedure", "1 Notifications"), 1, 1),
        (CHUNK_IDS[1], 1, ("Fake Retail Procedure", "2 Records"), 1, 1),
        (CHUNK_IDS[2], 2, ("Fake Retail Procedure", "3 Flow"), 2, 2),
    ]
    # each chunk was found on its page of the PDF's own text layer
    assert [(c.located, c.page_runs) for c in result.value] == [
        (True, ((0, 1),)), (True, ((0, 1),)), (True, ((0, 2),)),
    ]
    assert result.metadata["located"].value == 3
    assert (check.check_name, check.passed) == (CHECK_CHUNKS_LOCATED, True)
    assert check.metadata["located_share"].value == 1.0
    assert check.metadata["document"].value == NAME
    assert result.value[1].text == (
        "## 2 Records\n\nThe Distributor keeps the register of every site and reports it monthly."
    )
    assert result.metadata["chunks"].value == 3
    assert result.metadata["budget_words"].value == 300
    assert result.metadata["chunks_key"].value == f"chunks/{DOC}.parquet"


def test_an_empty_conversion_fails_at_chunks(
    admitted: DocumentRow, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    context = dg.build_asset_context(partition_key=DOC, instance=instance)
    empty = MarkdownDocument(
        doc_id=DOC, name=NAME, markdown="<!-- page 1 -->\n", pages=1, title="", version="",
        converter="fake", provider="fake-converter", sha256=admitted.sha256, size_bytes=1,
    )
    with pytest.raises(dg.Failure, match="Fake Procedure.pdf: the Markdown has no text to chunk"):
        list(chunks(context, BuildConfig(), stores=stores, document=empty))


# --------------------------------------------------------------------------------------
# The corpus assets together (materialize)
# --------------------------------------------------------------------------------------
def test_build_writes_every_store(
    admitted: DocumentRow, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    result = materialize(stores, providers, instance)
    assert result.success

    row = stores.catalog().get(DOC)
    assert (row.status, row.title, row.version, row.pages) == ("ready", SAMPLE_TITLE, SAMPLE_VERSION, 2)
    assert (row.chunk_count, row.figure_count, row.entity_count, row.relationship_count) == (3, 1, 2, 2)
    assert (row.embedding_model, row.converter) == ("test-hashing-32", "fake 1.0")
    assert row.markdown_key == f"markdown/{DOC}.md"

    index = stores.existing_vectors()
    assert sorted(index.list_ids(DOC, KIND_TEXT)) == CHUNK_IDS
    payload = PointPayload.from_payload(index.fetch([CHUNK_IDS[2]])[0].payload)
    assert (payload.doc_id, payload.name, payload.title, payload.version) == (
        DOC, NAME, SAMPLE_TITLE, SAMPLE_VERSION
    )
    assert (payload.page_start, payload.page_end, payload.chunk_index) == (2, 2, 2)
    assert payload.section == "Fake Retail Procedure › 3 Flow"
    assert (payload.pdf_key, payload.markdown_key) == (f"pdfs/{DOC}", f"markdown/{DOC}.md")
    assert payload.fingerprint is not None and len(payload.fingerprint) == 64

    (figure_point,) = index.fetch(index.list_ids(DOC, KIND_FIGURE))
    assert figure_point.id == f"{DOC}#figure-1"
    figure = PointPayload.from_payload(figure_point.payload)
    assert figure.is_figure and (figure.page_start, figure.figure.number) == (2, 1)
    assert figure.figure.caption == SAMPLE_FIGURE.caption
    assert figure.figure.bbox == SAMPLE_FIGURE.bbox
    assert figure.figure.stored_key == f"figures/{DOC}/figure-1.png"
    assert sorted(stores.blobs().list(f"figures/{DOC}/")) == [
        f"figures/{DOC}/figure-1.embed.png",
        f"figures/{DOC}/figure-1.inline.png",
        f"figures/{DOC}/figure-1.png",
    ]

    edges = stores.graph().relationships_for_document(DOC)
    assert sorted(e.chunk_id for e in edges) == [CHUNK_IDS[0], CHUNK_IDS[2]]
    assert {p.id for p in index.fetch([e.chunk_id for e in edges])} == {CHUNK_IDS[0], CHUNK_IDS[2]}

    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {
        CHECK_CHUNKS_LOCATED: True, CHECK_INDEX_MATCHES_CHUNKS: True, CHECK_EDGES_RESOLVE: True
    }
    records = StepRecords(stores.blobs())
    assert [c.id for c in records.load(CHUNKS, DOC)] == CHUNK_IDS
    summary = records.previous_summary(EMBEDDINGS, DOC)
    assert isinstance(summary, StepSummary)
    assert summary.counts == {"chunks": 3, "embedded": 3, "deleted": 0}
    assert records.previous_summary(GRAPH, DOC).counts == {"entities": 2, "relationships": 2}
    # one embedding call each: the figure, the three chunks, the two entity names
    assert sorted(providers.embedder_.calls) == [1, 2, 3]


def test_unchanged_document_costs_no_provider_call(
    admitted: DocumentRow, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    materialize(stores, providers, instance)
    calls = (
        list(providers.converter_.calls), list(providers.embedder_.calls),
        list(providers.extractor_.calls), list(providers.locator_.calls),
    )
    again = materialize(stores, providers, instance)
    assert metadata(again, MARKDOWN)["markdown_conversions"] == 0
    assert (metadata(again, EMBEDDINGS)["embedded"], metadata(again, EMBEDDINGS)["embedding_calls"]) == (0, 0)
    assert metadata(again, GRAPH)["extraction_calls"] == 0
    assert metadata(again, FIGURES)["embedding_calls"] == 0
    assert (
        providers.converter_.calls, providers.embedder_.calls,
        providers.extractor_.calls, providers.locator_.calls,
    ) == calls
    assert stores.catalog().get(DOC).relationship_count == 2


def test_forced_rebuild_of_one_asset_loads_its_inputs_and_runs_nothing_upstream(
    admitted: DocumentRow, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    materialize(stores, providers, instance)
    result = materialize(stores, providers, instance, selection=[GRAPH, RECORD], force=(GRAPH,))
    assert sorted(e.step_key for e in result.get_step_success_events()) == [GRAPH, RECORD]
    assert metadata(result, GRAPH)["extraction_calls"] == 1
    assert providers.extractor_.calls == [DOC, DOC]
    assert providers.converter_.calls == [NAME]


def test_a_shorter_document_replaces_its_chunks_and_deletes_the_stale_ones(
    admitted: DocumentRow, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    materialize(stores, providers, instance)
    providers.converter_.markdown = (
        "<!-- page 1 -->\n# Fake Retail Procedure\n\n## 1 Notifications\n\n"
        "The Retailer must notify the Distributor within 2 business days.\n"
    )
    result = materialize(stores, providers, instance, force=(MARKDOWN,))
    embedded = metadata(result, EMBEDDINGS)
    assert (embedded["chunks"], embedded["embedded"], embedded["stale_deleted"]) == (1, 1, 2)
    assert stores.existing_vectors().list_ids(DOC, KIND_TEXT) == [CHUNK_IDS[0]]
    assert [e.chunk_id for e in stores.graph().relationships_for_document(DOC)] == [CHUNK_IDS[0]]
    assert (stores.catalog().get(DOC).chunk_count, stores.catalog().get(DOC).relationship_count) == (1, 1)


# --------------------------------------------------------------------------------------
# Runs of the build job: the failure hook, re-execution
# --------------------------------------------------------------------------------------
def test_the_failure_hook_records_the_step_and_the_converters_reason(
    admitted: DocumentRow, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    providers.converter_.refuse[NAME] = "no text layer on any of 2 pages; OCR is not enabled"
    result = build_run(stores, providers, instance)
    assert not result.success
    row = stores.catalog().get(DOC)
    assert row.status == "failed"
    assert row.failure_reason == "markdown: no text layer on any of 2 pages; OCR is not enabled"
    assert stores.blobs().list(f"markdown/{DOC}") == []


def test_a_failing_asset_check_stops_the_build_and_records_why(
    admitted: DocumentRow, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    providers.extractor_.dangling = True  # one edge on a chunk id that is not indexed
    result = build_run(stores, providers, instance)
    assert not result.success
    checks = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    assert checks == {
        CHECK_CHUNKS_LOCATED: True, CHECK_INDEX_MATCHES_CHUNKS: True, CHECK_EDGES_RESOLVE: False
    }
    assert RECORD not in {e.step_key for e in result.get_step_success_events()}
    row = stores.catalog().get(DOC)
    assert row.status == "failed"
    assert row.failure_reason.startswith("graph: ")
    assert CHECK_EDGES_RESOLVE in row.failure_reason


#: What ``fake_build_job`` runs on: set by the test that uses it (a job to re-execute must be
#: rebuilt from a module-level function, ``dagster.reconstructable``).
FAKE_JOB: dict[str, Any] = {}


def fake_build_job() -> dg.JobDefinition:
    """The build job on ``FAKE_JOB``'s stores and providers."""
    defs = dg.Definitions(
        assets=CORPUS_ASSETS,
        jobs=[build_documents_job],
        resources=kb_resources(FAKE_JOB["stores"], FAKE_JOB["providers"]),
        executor=dg.in_process_executor,
    )
    return defs.resolve_job_def(BUILD_JOB)


def test_failed_embeddings_run_re_executes_from_failure(
    admitted: DocumentRow, stores: StoresResource, instance: dg.DagsterInstance,
) -> None:
    providers = FakeProviders(embedder_=FlakyEmbedder("embedding service unavailable (simulated)"))
    FAKE_JOB.update(stores=stores, providers=providers)
    failed = operations.run_build(instance, DOC, job=fake_build_job)
    assert not failed.success
    assert operations.failure_reason(failed) == (
        "embeddings: RuntimeError: embedding service unavailable (simulated)"
    )
    materialized = {e.asset_key.path[-1] for e in failed.get_asset_materialization_events()}
    assert MARKDOWN in materialized and EMBEDDINGS not in materialized
    row = stores.catalog().get(DOC)
    assert row.status == "failed"
    assert row.failure_reason == "embeddings: RuntimeError: embedding service unavailable (simulated)"

    retried = operations.retry_failed(instance, failed.run_id, job=fake_build_job)
    assert retried.success, operations.failure_reason(retried)
    steps = {e.step_key for e in retried.get_step_success_events()}
    assert MARKDOWN not in steps and CHUNKS not in steps
    assert {EMBEDDINGS, GRAPH, RECORD} <= steps
    row = stores.catalog().get(DOC)
    assert (row.status, row.failure_reason) == ("ready", None)
    assert providers.converter_.calls == [NAME]


# --------------------------------------------------------------------------------------
# The operations around the assets
# --------------------------------------------------------------------------------------
def test_status_reads_only_and_repair_restores_a_lost_partition(
    admitted: DocumentRow, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    materialize(stores, providers, instance)
    (row,) = operations.document_status(stores, instance)
    assert (row["doc_id"], row["status"], row["partition"]) == (DOC, "ready", True)
    assert row["assets"] == {asset.key.path[-1]: "materialized" for asset in CORPUS_ASSETS}
    assert (row["chunks"], row["figures"], row["relationships"]) == (3, 1, 2)

    instance.delete_dynamic_partition(DOCUMENTS, DOC)  # as if KB_HOME/dagster was reset
    (row,) = operations.document_status(stores, instance)
    assert row["partition"] is False
    assert set(row["assets"].values()) == {"missing"}
    assert instance.get_dynamic_partitions(DOCUMENTS) == []  # status wrote nothing

    refused = operations.build_documents(stores, instance, [DOC])
    assert [(o.status, o.run_id) for o in refused] == [("failed", "")]
    assert "run `kb repair`" in refused[0].reason

    report = operations.repair_partitions(stores, instance)
    assert (report.added, report.removed) == ([DOC], [])
    assert instance.get_dynamic_partitions(DOCUMENTS) == [DOC]
    again = operations.repair_partitions(stores, instance)
    assert (again.added, again.removed) == ([], [])


def test_delete_leaves_nothing_behind(
    admitted: DocumentRow, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    materialize(stores, providers, instance)
    report = operations.delete_document(stores, instance, NAME.upper())
    assert (report.doc_id, report.vectors, report.relationships) == (DOC, 4, 2)
    assert report.partition is True
    assert stores.catalog().find_by_doc_id(DOC) is None
    assert stores.blobs().list("") == []
    assert stores.existing_vectors().count(DOC) == 0
    assert stores.graph().counts().entities == 0
    assert not instance.has_dynamic_partition(DOCUMENTS, DOC)
