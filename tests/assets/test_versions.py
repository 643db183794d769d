"""New versions of a document (issue 12) on fake providers: intake with ``new_version``, the
build of version 2 step by step with the served version checked between steps, the switch in
``record``, a failed version 3 that leaves version 2 serving, the history in the catalog, the
Launchpad flag and the intake sensor. The real-PDF version is at the end (marked slow).

"Search" here is what the MCP server does: the catalog's serving scope
(``kb_mcp.documents.search_scope``) applied to a hybrid search of the vector index, and
``served_documents`` applied to the graph's edges.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pymupdf
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from kb_assets import operations, request_jobs, url_intake
from kb_assets.cli import main as cli
from kb_assets.assets import CORPUS_ASSETS
from kb_assets.constants import (
    BUILD_JOB, CHANGES, CHUNKS, EMBEDDINGS, FIGURES, GRAPH, MARKDOWN, OBLIGATIONS, RECORD,
)
from kb_assets.jobs import kb_resources
from kb_assets.intake import IntakeOutcome, admit
from kb_assets.jobs import add_documents_job, build_documents_job
from kb_assets.resources import StoresResource
from kb_assets.sensors import intake_sensor
from kb_mcp.documents import document_list, search_scope, served_documents, version_notes
from kb_mcp.links import links_for
from kb_mcp.pages.gallery import read_gallery
from kb_mcp.state import open_state
from kb_shared.search.citations import PointPayload
from kb_shared.errors import DocumentBusyError, DocumentNotFoundError, DuplicateDocumentError
from kb_shared.fetch.fetcher import Fetched
from kb_shared.identity import chunk_id, figure_id, sha256_bytes, split_version_key, version_key
from kb_shared.settings import Settings
from kb_shared.stores.catalog import (
    CATALOG_METADATA,
    Catalog,
    VersionStatus,
    document_versions,
    documents,
)
from kb_shared.stores.sql import apply_sql_files, make_engine
from tests.assets.fake_providers import FakeProviders
from tests.conftest import REPO_ROOT, corpus_dir
from tests.fakes import SAMPLE_MARKDOWN, FlakyEmbedder, tiny_pdf

NAME = "Fake Procedure.pdf"
DOC = "fake-procedure.pdf"
V2 = "fake-procedure.pdf@v2"
V3 = "fake-procedure.pdf@v3"

#: Version 2's Markdown: the same document with one rule changed ("quarterly" only here).
MARKDOWN_V2 = SAMPLE_MARKDOWN.replace("reports it monthly", "reports it quarterly")


def write(folder: Path, data: bytes, name: str = NAME) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(data)
    return path


def materialize(
    stores: StoresResource,
    providers: FakeProviders,
    instance: dg.DagsterInstance,
    selection: list[str] | None = None,
) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        CORPUS_ASSETS,
        partition_key=DOC,
        resources=kb_resources(stores, providers),
        instance=instance,
        selection=selection,
    )


def build_run(
    stores: StoresResource, providers: FakeProviders, instance: dg.DagsterInstance,
    selection: list[str] | None = None, force: tuple[str, ...] = (),
) -> dg.ExecuteInProcessResult:
    """One run of the real build job, with its failure hook; ``selection`` and ``force`` as
    ``kb rebuild`` passes them (``operations.run_config_for``)."""
    defs = dg.Definitions(
        assets=CORPUS_ASSETS,
        jobs=[build_documents_job],
        resources=kb_resources(stores, providers),
        executor=dg.in_process_executor,
    )
    return defs.resolve_job_def(BUILD_JOB).execute_in_process(
        partition_key=DOC, instance=instance, raise_on_error=False,
        run_config=operations.run_config_for(selection or [], force, None),
        asset_selection=[dg.AssetKey(name) for name in selection] if selection else None,
    )


def search(stores: StoresResource, providers: FakeProviders, text: str) -> dict[str, str]:
    """The passages search_docs may return for ``text``: point id -> its payload's cited
    version, under the catalog's serving scope."""
    scope = search_scope(stores.catalog(), None)
    index = stores.existing_vectors()
    assert index is not None
    vector = providers.embedder_.embed_query(text)
    hits = index.hybrid_search(vector, text, 50, documents=scope)
    return {hit.id: PointPayload.from_payload(hit.point.payload).version for hit in hits}


def served_edges(stores: StoresResource) -> set[str]:
    """The ``source_doc`` of every graph edge search_graph may return."""
    served = served_documents(stores.catalog())
    graph = stores.graph()
    edges = {
        rel.source_doc
        for key in (DOC, V2, V3)
        for rel in graph.relationships_for_document(key)
    }
    return {doc for doc in edges if served.serves(doc)}


@pytest.fixture
def version_1(
    tmp_path: Path, stores: StoresResource, providers: FakeProviders, instance: dg.DagsterInstance
) -> Path:
    """``NAME`` admitted and built (version 1 serving)."""
    (outcome,) = admit([write(tmp_path / "v1", tiny_pdf("first"))], stores, instance)
    assert (outcome.status, outcome.doc_id, outcome.version) == ("added", DOC, 1)
    assert materialize(stores, providers, instance).success
    return tmp_path


def add_version(folder: Path, label: str, stores: StoresResource, instance) -> IntakeOutcome:
    (outcome,) = admit(
        [write(folder, tiny_pdf(label), name=" fake procedure.PDF")], stores, instance,
        new_version=True,
    )
    return outcome


def test_version_2_is_built_beside_version_1_and_served_only_after_record(
    version_1: Path, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    catalog = stores.catalog()
    v1_ids = {f"{DOC}-0", f"{DOC}-1", f"{DOC}-2", f"{DOC}#figure-1"}
    assert set(search(stores, providers, "reports monthly register")) == v1_ids
    v1_pdf = catalog.get(DOC).blob_key

    outcome = add_version(version_1 / "v2", "second", stores, instance)
    assert (outcome.status, outcome.doc_id, outcome.version) == ("added", DOC, 2)
    assert stores.blobs().exists("pdfs/fake-procedure.pdf@v2")
    assert instance.get_dynamic_partitions("documents") == [DOC]
    providers.converter_.markdown = MARKDOWN_V2

    # Each step of version 2 on its own: search serves version 1 only, all the way.
    for step in (MARKDOWN, CHUNKS, OBLIGATIONS, CHANGES, EMBEDDINGS, GRAPH, FIGURES):
        assert materialize(stores, providers, instance, selection=[step]).success, step
        assert set(search(stores, providers, "reports monthly register")) == v1_ids, step
        assert not any(
            pid.startswith(V2) for pid in search(stores, providers, "quarterly register")
        ), step
        assert served_edges(stores) == {DOC}, step
        assert catalog.get(DOC).status == "ready"
    # version 2 is complete in the stores, beside version 1, and not served
    assert stores.existing_vectors().count(V2) == 4
    assert served_documents(catalog).only == frozenset({DOC})

    assert materialize(stores, providers, instance, selection=[RECORD]).success
    v2_ids = {f"{V2}-0", f"{V2}-1", f"{V2}-2", f"{V2}#figure-1"}
    assert set(search(stores, providers, "reports quarterly register")) == v2_ids
    assert set(search(stores, providers, "reports monthly register")) == v2_ids
    # both versions print "2.0": the citation also names kb's version
    assert set(search(stores, providers, "reports quarterly register").values()) == {
        "2.0 (kb version 2)"
    }
    # the figure gallery shows version 2's figure under the document's own doc_id
    settings = stores.settings
    state = open_state(settings, embedder=providers.embedder_, use_reranker=False)
    try:
        gallery = read_gallery(state, DOC, links_for(settings))
    finally:
        state.close()
    assert [(f.id, f.page) for f in gallery.figures] == [(f"{V2}#figure-1", 2)]
    assert served_edges(stores) == {V2}
    # version 1 is gone from every store; its history row stays
    assert stores.existing_vectors().count(DOC) == 0
    assert stores.graph().relationships_for_document(DOC) == []
    assert stores.blobs().exists(v1_pdf)  # kept: the "before" side of what changed (issue 27)
    assert stores.blobs().list("figures/fake-procedure.pdf/") == []
    row = catalog.get(DOC)
    assert (row.status, row.name, row.blob_key) == (
        "ready", "fake procedure.PDF", "pdfs/fake-procedure.pdf@v2"
    )
    history = catalog.versions(DOC)
    assert [(v.version, v.status, v.label) for v in history] == [
        (1, "superseded", "2.0"), (2, "serving", "2.0"),
    ]
    assert history[0].superseded_at is not None and history[1].superseded_at is None


def test_a_version_that_fails_at_embeddings_leaves_the_served_version_and_says_why(
    version_1: Path, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    catalog = stores.catalog()
    add_version(version_1 / "v2", "second", stores, instance)
    providers.converter_.markdown = MARKDOWN_V2
    providers.embedder_ = FlakyEmbedder("embedding service down")

    result = build_run(stores, providers, instance)

    assert not result.success
    row = catalog.get(DOC)
    assert (row.status, row.failure_reason, row.blob_key) == ("ready", None, "pdfs/fake-procedure.pdf")
    history = catalog.versions(DOC)
    assert [(v.version, v.status) for v in history] == [(1, "serving"), (2, "failed")]
    assert history[1].failure_reason == "embeddings: RuntimeError: embedding service down"
    assert set(search(stores, providers, "reports monthly register")) == {
        f"{DOC}-0", f"{DOC}-1", f"{DOC}-2", f"{DOC}#figure-1"
    }
    assert version_notes(document_list(catalog)) == [
        "Fake Procedure.pdf: version 2 failed: embeddings: RuntimeError: embedding service "
        "down; version 1 (v2.0) serving"
    ]

    # the next build retries version 2 and switches to it
    assert build_run(stores, providers, instance).success
    assert [(v.version, v.status) for v in catalog.versions(DOC)] == [
        (1, "superseded"), (2, "serving"),
    ]
    assert set(search(stores, providers, "quarterly register")) >= {f"{V2}-1"}


def test_a_failed_version_3_leaves_version_2_serving_and_a_later_switch_cleans_it_up(
    version_1: Path, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    catalog = stores.catalog()
    add_version(version_1 / "v2", "second", stores, instance)
    providers.converter_.markdown = MARKDOWN_V2
    assert build_run(stores, providers, instance).success
    assert add_version(version_1 / "v3", "third", stores, instance).version == 3
    providers.converter_.refuse = {"fake procedure.PDF": "the PDF is encrypted"}

    assert not build_run(stores, providers, instance).success
    assert [(v.version, v.status, v.failure_reason) for v in catalog.versions(DOC)] == [
        (1, "superseded", None),
        (2, "serving", None),
        (3, "failed", "markdown: the PDF is encrypted"),
    ]
    assert set(search(stores, providers, "quarterly register")) >= {f"{V2}-1"}
    listing = document_list(catalog)
    assert [row.doc_id for row in listing.ready] == [DOC]
    assert version_notes(listing) == [
        "fake procedure.PDF: version 3 failed: markdown: the PDF is encrypted; version 2 "
        "(v2.0) serving"
    ]

    # version 3 fixed: its build switches, and nothing of version 2 is served; its file and
    # snapshot stay as the "before" side of what changed (issue 27)
    providers.converter_.refuse = {}
    assert build_run(stores, providers, instance).success
    assert served_edges(stores) == {V3}
    assert stores.existing_vectors().count(V2) == 0
    assert stores.blobs().exists("pdfs/fake-procedure.pdf@v2")
    assert stores.blobs().exists("snapshots/fake-procedure.pdf@v2.json")
    assert catalog.change_set(DOC, 3).previous_version == 2
    assert version_notes(document_list(catalog)) == [
        "fake procedure.PDF: version 3 (v2.0) serving, 2 earlier"
    ]


def test_recovery_leaves_a_finished_switch_alone_and_finishes_a_killed_one(
    version_1: Path, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    add_version(version_1 / "v2", "second", stores, instance)
    providers.converter_.markdown = MARKDOWN_V2
    assert build_run(stores, providers, instance).success
    blobs = stores.blobs()
    # version 1 keeps its file after the switch (issue 27): that is no leftover
    assert blobs.exists("pdfs/fake-procedure.pdf")
    assert operations.recover_interrupted(stores, instance) == []
    assert blobs.exists("pdfs/fake-procedure.pdf")
    # a switch killed before it removed version 1's figure renders
    blobs.put("figures/fake-procedure.pdf/1-stored.png", b"\x89PNG left behind")
    assert operations.recover_interrupted(stores, instance) == [DOC]
    assert blobs.list("figures/fake-procedure.pdf/") == []
    assert blobs.exists("pdfs/fake-procedure.pdf")
    assert operations.recover_interrupted(stores, instance) == []
    assert set(search(stores, providers, "quarterly register")) >= {f"{V2}-1"}


def test_intake_rules_for_new_versions(
    version_1: Path, stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    folder = version_1
    first = (folder / "v1" / NAME).read_bytes()
    # without the flag: a duplicate, whose hint says how to add a new version
    (plain,) = admit([write(folder / "a", tiny_pdf("second"))], stores, instance)
    assert (plain.status, plain.doc_id) == ("duplicate", DOC)
    assert plain.hint == (
        f"to add it as a new version of 'Fake Procedure.pdf', run "
        f"`kb add --new-version {folder / 'a' / NAME}`"
    )
    # identical content: nothing new, with or without the flag (and no hint)
    (same,) = admit([write(folder / "b", first)], stores, instance, new_version=True)
    assert (same.status, same.version) == ("duplicate", None)
    assert same.reason == (
        "identical content to a version of 'Fake Procedure.pdf' already in the corpus; "
        "nothing new to add"
    )
    (again,) = admit([write(folder / "c", first)], stores, instance)
    assert again.hint == ""
    # a new version, then another one before the first is built: refused with the reason
    assert add_version(folder / "d", "second", stores, instance).version == 2
    refused = add_version(folder / "e", "third", stores, instance)
    assert (refused.status, refused.doc_id) == ("refused", DOC)
    assert refused.reason == (
        "version 2 of 'Fake Procedure.pdf' is still waiting to be built; build it "
        "(`kb build fake-procedure.pdf`) before adding another version"
    )
    assert not stores.blobs().exists("pdfs/fake-procedure.pdf@v3")
    # version 2's content under another name is refused like any duplicate content
    version_2 = (folder / "d" / " fake procedure.PDF").read_bytes()
    (other,) = admit([write(folder / "f", version_2, name="Other.pdf")], stores, instance)
    assert (other.status, other.doc_id) == ("refused", DOC)
    # a name not in the corpus is simply a new document, flag or not
    (fresh,) = admit(
        [write(folder / "g", tiny_pdf("fresh"), name="Fresh.pdf")], stores, instance,
        new_version=True,
    )
    assert (fresh.status, fresh.doc_id, fresh.version) == ("added", "fresh.pdf", 1)


def test_a_failed_first_build_fails_the_document_and_its_version(
    tmp_path: Path, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    admit([write(tmp_path, tiny_pdf("first"))], stores, instance)
    providers.converter_.refuse = {NAME: "scanned"}
    assert not build_run(stores, providers, instance).success
    catalog = stores.catalog()
    assert (catalog.get(DOC).status, catalog.get(DOC).failure_reason) == (
        "failed", "markdown: scanned"
    )
    assert [(v.version, v.status) for v in catalog.versions(DOC)] == [(1, "failed")]


def test_the_launchpad_flag_and_the_sensor_build_a_new_version(
    version_1: Path, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    path = write(version_1 / "v2", tiny_pdf("second"))
    config = {"ops": {"add_documents_op": {"config": {"paths": [str(path)], "new_version": True}}}}
    result = add_documents_job.execute_in_process(
        run_config=config, instance=instance, resources={"stores": stores}
    )
    assert result.success
    assert result.output_for_node("add_documents_op") == [DOC]
    assert [(v.version, v.status) for v in stores.catalog().versions(DOC)] == [
        (1, "serving"), (2, "pending"),
    ]

    with dg.build_sensor_context(instance=instance, resources={"stores": stores}) as context:
        requests = intake_sensor(context).run_requests
    version = stores.catalog().versions(DOC)[1]
    assert [(r.job_name, r.partition_key, r.run_key) for r in requests] == [
        (BUILD_JOB, DOC, f"{DOC}:{version.sha256[:16]}:{version.added_at.isoformat()}")
    ]


def test_the_sensor_waits_for_a_new_versions_file_before_it_requests_the_build(
    version_1: Path, stores: StoresResource, instance: dg.DagsterInstance,
) -> None:
    # intake writes the version's row, then its file: a tick between the two must not build
    add_version(version_1 / "v2", "second", stores, instance)
    data = stores.blobs().get("pdfs/fake-procedure.pdf@v2")
    stores.blobs().delete("pdfs/fake-procedure.pdf@v2")  # as if still being copied
    with dg.build_sensor_context(instance=instance, resources={"stores": stores}) as context:
        assert intake_sensor(context).run_requests == []
    stores.blobs().put("pdfs/fake-procedure.pdf@v2", data)
    with dg.build_sensor_context(instance=instance, resources={"stores": stores}) as context:
        assert [r.partition_key for r in intake_sensor(context).run_requests] == [DOC]


def test_a_document_being_built_is_not_deleted_under_its_build(
    tmp_path: Path, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    admit([write(tmp_path / "v1", tiny_pdf("first"))], stores, instance)
    refused: list[str] = []

    class DeletingEmbedder(type(providers.embedder_)):  # kb delete while the build embeds
        def embed_documents(self, texts, titles=None):  # type: ignore[no-untyped-def]
            if not refused:
                with pytest.raises(DocumentBusyError) as busy:
                    operations.delete_document(stores, instance, NAME)
                refused.append(str(busy.value))
            return super().embed_documents(texts, titles)

    providers.embedder_ = DeletingEmbedder(providers.embedder_.dimension)
    result = build_run(stores, providers, instance)
    assert result.success
    assert refused == [
        f"{NAME} is being built by run {result.run_id} (started); delete it when that run "
        "has ended (`kb status` shows it), or terminate the run in the Dagster UI first"
    ]
    assert stores.catalog().get(DOC).status == "ready"  # nothing was removed under it
    report = operations.delete_document(stores, instance, NAME)  # the build has ended
    assert report.vectors == 4
    assert stores.existing_vectors().count(DOC) == 0


def test_a_partial_rebuild_cannot_switch_to_a_half_built_version(
    version_1: Path, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    add_version(version_1 / "v2", "second", stores, instance)
    assert materialize(stores, providers, instance, selection=[MARKDOWN, CHUNKS]).success
    result = dg.materialize(
        CORPUS_ASSETS, partition_key=DOC, resources=kb_resources(stores, providers),
        instance=instance, selection=[RECORD], raise_on_error=False,
    )
    assert not result.success
    failure = operations.failure_reason(result)
    assert failure == (
        "record: the stored embeddings, graph, figures, obligations, changes output of "
        "'fake-procedure.pdf' belongs to another version than its Markdown (version 2); build "
        "every step: "
        "`kb build fake-procedure.pdf`"
    )
    assert stores.catalog().versions(DOC)[0].status == VersionStatus.SERVING


def test_a_version_whose_obligations_failed_is_not_switched_to_by_a_partial_rebuild(
    version_1: Path, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch,
) -> None:
    catalog = stores.catalog()
    before = catalog.obligation_count(DOC)
    assert before > 0
    add_version(version_1 / "v2", "second", stores, instance)

    def broken(chunks: object) -> list:
        raise OSError("register unreachable")

    monkeypatch.setattr("kb_assets.assets.obligations.find_obligations", broken)
    assert not build_run(stores, providers, instance).success
    monkeypatch.undo()
    # `kb rebuild graph`: record runs again, but version 2 has no obligations of its own
    result = build_run(stores, providers, instance, selection=[GRAPH, RECORD], force=(GRAPH,))
    assert not result.success
    assert "obligations" in operations.failure_reason(result)
    assert [(v.version, v.status) for v in catalog.versions(DOC)] == [
        (1, "serving"), (2, "failed")
    ]
    assert catalog.obligation_count(DOC) == before  # version 1's register still served


def test_a_rebuild_of_the_served_version_keeps_a_newer_failed_versions_file(
    version_1: Path, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    add_version(version_1 / "v2", "second", stores, instance)
    providers.converter_.markdown = MARKDOWN_V2
    providers.converter_.refuse = {"fake procedure.PDF": "the converter timed out"}
    assert not build_run(stores, providers, instance).success
    providers.converter_.refuse = {}
    # `kb rebuild figures`: version 1's Markdown is the stored one, so version 1 is recorded
    assert build_run(stores, providers, instance, selection=[FIGURES, RECORD], force=(FIGURES,)).success
    assert stores.blobs().exists("pdfs/fake-procedure.pdf@v2")  # still there to retry
    assert [(v.version, v.status) for v in stores.catalog().versions(DOC)] == [
        (1, "serving"), (2, "failed")
    ]
    assert build_run(stores, providers, instance).success  # the retry builds version 2
    assert [(v.version, v.status) for v in stores.catalog().versions(DOC)] == [
        (1, "superseded"), (2, "serving")
    ]


def test_a_failed_rebuild_of_the_served_version_leaves_a_waiting_version_pending(
    version_1: Path, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    add_version(version_1 / "v2", "second", stores, instance)
    providers.embedder_ = FlakyEmbedder("embedding service down")
    # `kb rebuild embeddings` works on version 1 (the stored Markdown's), not on version 2
    result = build_run(stores, providers, instance, selection=[EMBEDDINGS, RECORD],
                       force=(EMBEDDINGS,))
    assert not result.success
    catalog = stores.catalog()
    assert [(v.version, v.status, v.failure_reason) for v in catalog.versions(DOC)] == [
        (1, "serving", None), (2, "pending", None)
    ]
    row = catalog.get(DOC)  # the served version's stores may be half rewritten
    assert (row.status, row.failure_reason) == (
        "failed", "embeddings: RuntimeError: embedding service down"
    )


def test_a_store_failing_after_the_switch_leaves_the_new_version_served(
    version_1: Path, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch,
) -> None:
    add_version(version_1 / "v2", "second", stores, instance)
    providers.converter_.markdown = MARKDOWN_V2

    def unreachable(*args: object) -> str:
        raise OSError("blob store: connection reset")

    monkeypatch.setattr("kb_assets.assets.record.remove_version_data", unreachable)
    assert build_run(stores, providers, instance).success
    monkeypatch.undo()
    assert stores.catalog().get(DOC).status == "ready"
    assert set(search(stores, providers, "reports quarterly register")) >= {f"{V2}-1"}
    assert stores.existing_vectors().count(DOC) > 0  # version 1's points, not served
    assert operations.recover_interrupted(stores, instance) == [DOC]
    assert stores.existing_vectors().count(DOC) == 0


def test_chunks_of_another_version_are_never_embedded_under_this_one(
    version_1: Path, stores: StoresResource, providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    add_version(version_1 / "v2", "second", stores, instance)
    assert materialize(stores, providers, instance, selection=[MARKDOWN]).success
    result = dg.materialize(
        CORPUS_ASSETS, partition_key=DOC, resources=kb_resources(stores, providers),
        instance=instance, selection=[EMBEDDINGS], raise_on_error=False,
    )
    assert operations.failure_reason(result) == (
        "embeddings: the stored chunks are of fake-procedure.pdf, not of version 2 "
        "(fake-procedure.pdf@v2) whose Markdown this build has; build every step: "
        "`kb build fake-procedure.pdf`"
    )
    assert stores.existing_vectors().count(V2) == 0


# --------------------------------------------------------------------------------------
# A real PDF of the shared corpus (issue 12 "Done when")
# --------------------------------------------------------------------------------------
CORPUS_PDF = "aemo_SO_OP_3705_Dispatch.pdf"


@pytest.mark.slow
def test_a_second_version_of_a_corpus_pdf_replaces_the_first(tmp_path: Path) -> None:
    """The real pipeline (local providers) builds a shared-corpus PDF, then a copy with one
    page's text changed as its version 2: during that build search returns version 1 only,
    after it version 2 only, and the history lists both."""
    from kb_assets.instance import dagster_instance  # noqa: PLC0415 - slow test only
    from kb_shared.providers import factory as provider_factory  # noqa: PLC0415

    original = corpus_dir() / "pdfs" / CORPUS_PDF
    home = tmp_path / "home"
    stores = StoresResource(home=str(home))
    instance = dagster_instance(Settings(home=home))
    first = write(tmp_path / "v1", original.read_bytes(), name=CORPUS_PDF)
    (added,) = admit([first], stores, instance)
    doc = added.doc_id
    assert doc is not None
    (built,) = operations.build_documents(stores, instance, [doc])
    assert built.status == "ready", built.reason

    marker = "Zanzibarquokka"  # a word no version 1 passage contains
    with pymupdf.open(original) as pdf:
        page = pdf[0]
        page.insert_text((72, 72), f"Revised: {marker} rule applies to dispatch.", fontsize=11)
        second = write(tmp_path / "v2", pdf.tobytes(), name=CORPUS_PDF)
    embedder = provider_factory.embedder(Settings(home=home))

    def ids(text: str) -> set[str]:
        scope = search_scope(stores.catalog(), None)
        index = stores.existing_vectors()
        hits = index.hybrid_search(embedder.embed_query(text), text, 20, documents=scope)
        return {hit.point.document for hit in hits}

    assert ids("dispatch instructions") == {doc}
    (version,) = admit([second], stores, instance, new_version=True)
    assert (version.status, version.version) == ("added", 2)
    assert ids("dispatch instructions") == {doc}  # pending: still version 1 only
    (rebuilt,) = operations.build_documents(stores, instance, [doc])
    assert rebuilt.status == "ready", rebuilt.reason
    assert ids("dispatch instructions") == {f"{doc}@v2"}
    assert f"{doc}@v2" in ids(marker)
    assert stores.existing_vectors().count(doc) == 0
    history = stores.catalog().versions(doc)
    assert [(v.version, v.status) for v in history] == [(1, "superseded"), (2, "serving")]
    assert history[0].sha256 != history[1].sha256
    embedder.close()
    stores.close()


# --------------------------------------------------------------------------------------
# The catalog's version history, on SQLite and Postgres (the ``catalog`` fixture)
# --------------------------------------------------------------------------------------
SHA_1, SHA_2, SHA_3, SHA_X = ("1" * 64, "2" * 64, "3" * 64, "9" * 64)


def _ready_document(catalog: Catalog) -> None:
    catalog.add_pending("Rule Book.pdf", "rule-book.pdf", SHA_1, 100, "pdfs/rule-book.pdf")
    catalog.mark_ready("rule-book.pdf", pages=3, chunk_count=5, version="3.1")


def test_catalog_switches_versions_in_one_step_and_keeps_the_history(catalog: Catalog) -> None:
    _ready_document(catalog)
    assert [(v.version, v.status, v.key) for v in catalog.versions("rule-book.pdf")] == [
        (1, "serving", "rule-book.pdf")
    ]
    added = catalog.add_version(
        "rule-book.pdf", 2, "RULE BOOK.pdf", SHA_2, 200, "pdfs/rule-book.pdf@v2"
    )
    assert (added.version, added.status, added.key) == (2, "pending", "rule-book.pdf@v2")
    assert catalog.get("rule-book.pdf").sha256 == SHA_1  # the served file until the switch

    row, others = catalog.record_version(
        "rule-book.pdf", 2, pages=4, chunk_count=6, version="3.2", title="Rule Book"
    )
    assert (row.status, row.sha256, row.size_bytes, row.blob_key, row.name, row.version) == (
        "ready", SHA_2, 200, "pdfs/rule-book.pdf@v2", "RULE BOOK.pdf", "3.2"
    )
    assert [(v.version, v.status) for v in others] == [(1, "superseded")]
    history = catalog.versions("rule-book.pdf")
    assert [(v.version, v.status, v.label, v.sha256) for v in history] == [
        (1, "superseded", "3.1", SHA_1), (2, "serving", "3.2", SHA_2),
    ]
    assert history[0].superseded_at is not None
    assert history[0].superseded_at >= history[1].added_at

    catalog.add_version("rule-book.pdf", 3, "Rule Book.pdf", SHA_3, 300, "pdfs/rule-book.pdf@v3")
    failed = catalog.fail_version("rule-book.pdf", 3, "embeddings: quota exceeded")
    assert (failed.status, failed.failure_reason) == ("failed", "embeddings: quota exceeded")
    assert (catalog.get("rule-book.pdf").status, catalog.get("rule-book.pdf").sha256) == (
        "ready", SHA_2
    )
    assert catalog.all_versions()["rule-book.pdf"][-1].status == "failed"


def test_catalog_refuses_versions_that_are_not_new(catalog: Catalog) -> None:
    _ready_document(catalog)
    with pytest.raises(ValueError, match="'Other.pdf' is not a version of 'Rule Book.pdf'"):
        catalog.add_version("rule-book.pdf", 2, "Other.pdf", SHA_2, 1, "pdfs/x")
    with pytest.raises(ValueError, match="the next version of 'Rule Book.pdf' is 2, not 3"):
        catalog.add_version("rule-book.pdf", 3, "Rule Book.pdf", SHA_2, 1, "pdfs/x")
    with pytest.raises(DuplicateDocumentError) as same:
        catalog.add_version("rule-book.pdf", 2, "Rule Book.pdf", SHA_1, 1, "pdfs/x")
    assert (same.value.field, str(same.value)) == (
        "sha256",
        f'"Rule Book.pdf" has the same content (sha256 {SHA_1[:12]}…) as version 1 of '
        "rule-book.pdf; a new version must differ",
    )
    with pytest.raises(DocumentNotFoundError):
        catalog.add_version("nothing.pdf", 2, "nothing.pdf", SHA_2, 1, "pdfs/x")
    catalog.add_version("rule-book.pdf", 2, "Rule Book.pdf", SHA_2, 1, "pdfs/rule-book.pdf@v2")
    with pytest.raises(ValueError, match="version 2 of 'Rule Book.pdf' is still waiting"):
        catalog.add_version("rule-book.pdf", 3, "Rule Book.pdf", SHA_3, 1, "pdfs/x")
    # a pending version's content is taken: another document cannot have it
    with pytest.raises(DuplicateDocumentError) as taken:
        catalog.add_pending("Other.pdf", "other.pdf", SHA_2, 1, "pdfs/other.pdf")
    assert (taken.value.field, taken.value.existing.doc_id) == ("sha256", "rule-book.pdf")
    assert catalog.remove_pending_version("rule-book.pdf", 2) is True
    assert [v.version for v in catalog.versions("rule-book.pdf")] == [1]
    assert catalog.remove_pending_version("rule-book.pdf", 1) is False  # built: kept


def test_catalog_first_build_failure_fails_the_document_and_a_retry_serves_it(
    catalog: Catalog,
) -> None:
    catalog.add_pending("Rule Book.pdf", "rule-book.pdf", SHA_1, 100, "pdfs/rule-book.pdf")
    catalog.fail_version("rule-book.pdf", 1, "markdown: scanned")
    row = catalog.get("rule-book.pdf")
    assert (row.status, row.failure_reason) == ("failed", "markdown: scanned")
    assert [(v.status, v.failure_reason) for v in catalog.versions("rule-book.pdf")] == [
        ("failed", "markdown: scanned")
    ]
    row, others = catalog.record_version("rule-book.pdf", 1, pages=1, chunk_count=1)
    assert (row.status, row.failure_reason, others) == ("ready", None, [])
    assert [v.status for v in catalog.versions("rule-book.pdf")] == ["serving"]
    # a failed rebuild of the served version takes the document out of service
    catalog.fail_version("rule-book.pdf", 1, "graph: store down")
    assert catalog.get("rule-book.pdf").status == "failed"
    assert [v.status for v in catalog.versions("rule-book.pdf")] == ["serving"]


def test_a_document_catalogued_before_versions_is_version_1(catalog: Catalog) -> None:
    _ready_document(catalog)
    with catalog.engine.begin() as conn:  # the catalog as an earlier kb left it
        conn.execute(document_versions.delete())
    (first,) = catalog.versions("rule-book.pdf")
    assert (first.version, first.status, first.label, first.sha256, first.blob_key) == (
        1, "serving", "3.1", SHA_1, "pdfs/rule-book.pdf"
    )
    catalog.add_version("rule-book.pdf", 2, "Rule Book.pdf", SHA_2, 1, "pdfs/rule-book.pdf@v2")
    with catalog.engine.connect() as conn:
        stored = conn.execute(
            sa.select(document_versions.c.version, document_versions.c.status)
            .order_by(document_versions.c.version)
        ).all()
    assert [tuple(r) for r in stored] == [(1, "serving"), (2, "pending")]
    assert catalog.delete("rule-book.pdf") is True
    assert catalog.versions("rule-book.pdf") == []
    with catalog.engine.connect() as conn:  # the history goes with the document
        assert conn.execute(sa.select(sa.func.count()).select_from(document_versions)).scalar() == 0


def test_an_sqlite_catalog_without_the_version_table_gains_it(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'old.sqlite'}")
    documents.create(engine)  # the catalog before versions: documents only
    with engine.begin() as conn:
        conn.execute(
            documents.insert().values(
                doc_id="rule-book.pdf", name="Rule Book.pdf", normalized_name="rule book.pdf",
                sha256=SHA_1, status="ready", pages=2, chunk_count=3, size_bytes=10,
                blob_key="pdfs/rule-book.pdf", version="7",
            )
        )
    catalog = Catalog(engine)
    assert catalog.all_versions()["rule-book.pdf"][0].status == "serving"  # no table yet
    catalog.ensure_schema()
    assert [(v.version, v.status, v.label) for v in catalog.versions("rule-book.pdf")] == [
        (1, "serving", "7")
    ]
    engine.dispose()


@pytest.mark.services
def test_sql_005_makes_every_document_version_1(
    catalog_postgres_engine: sa.Engine, tmp_path: Path
) -> None:
    catalog = Catalog(catalog_postgres_engine)
    catalog.ensure_schema()
    with catalog_postgres_engine.begin() as conn:
        for table in reversed(CATALOG_METADATA.sorted_tables):
            conn.execute(table.delete())
    _ready_document(catalog)
    catalog.add_pending("Draft.pdf", "draft.pdf", SHA_X, 5, "pdfs/draft.pdf")
    catalog.mark_failed("draft.pdf", "markdown: scanned")
    with catalog_postgres_engine.begin() as conn:
        conn.execute(document_versions.delete())
    folder = tmp_path / "sql"
    folder.mkdir()
    migration = REPO_ROOT / "sql" / "005_document_versions.sql"
    (folder / migration.name).write_text(migration.read_text(encoding="utf-8"), encoding="utf-8")
    for _ in range(2):  # idempotent
        assert apply_sql_files(catalog_postgres_engine, folder) == [migration.name]
        with catalog_postgres_engine.connect() as conn:
            rows = conn.execute(
                sa.select(
                    document_versions.c.doc_id, document_versions.c.version,
                    document_versions.c.status, document_versions.c.failure_reason,
                    document_versions.c.label,
                ).order_by(document_versions.c.doc_id)
            ).all()
        assert [tuple(r) for r in rows] == [
            ("draft.pdf", 1, "failed", "markdown: scanned", None),
            ("rule-book.pdf", 1, "serving", None, "3.1"),
        ]


# --------------------------------------------------------------------------------------
# kb add --new-version, kb versions
# --------------------------------------------------------------------------------------
def test_kb_add_new_version_and_kb_versions(tmp_path: Path) -> None:
    runner = CliRunner()
    first = write(tmp_path / "one", b"%PDF-1.7\n% version one\n%%EOF\n")
    second = write(tmp_path / "two", b"%PDF-1.7\n% version two\n%%EOF\n")
    assert runner.invoke(cli.app, ["add", str(first)]).exit_code == 0
    built = StoresResource(home=str(Settings().home))  # as if built: version 1 serves
    built.catalog().mark_ready(DOC, pages=1, chunk_count=1)
    built.close()

    plain = runner.invoke(cli.app, ["add", str(second)])
    assert plain.exit_code == 1  # the changed file was not added
    assert "1 file(s) not added: their names are in the corpus with other content" in (
        " ".join(plain.output.split())
    )
    assert (
        f"to add it as a new version of 'Fake Procedure.pdf', run `kb add --new-version {second}`"
        in " ".join(plain.output.split())
    )
    added = runner.invoke(cli.app, ["add", "--new-version", str(second)])
    assert added.exit_code == 0, added.output
    assert "version 2" in added.output and "1 added" in added.output

    listed = runner.invoke(cli.app, ["versions", "fake procedure", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)
    assert [(r["version"], r["status"], r["blob_key"]) for r in rows] == [
        (1, "serving", "pdfs/fake-procedure.pdf"), (2, "pending", "pdfs/fake-procedure.pdf@v2"),
    ]
    # `kb build` with no names picks up the waiting version (the document itself is ready)
    waiting = StoresResource(home=str(Settings().home))
    assert operations.documents_to_build(waiting) == [DOC]
    waiting.close()
    table = runner.invoke(cli.app, ["versions", DOC])
    assert table.exit_code == 0
    assert "kb versions Fake Procedure.pdf (fake-procedure.pdf)" in table.output
    unknown = runner.invoke(cli.app, ["versions", "nothing.pdf"])
    assert unknown.exit_code == 1
    assert "no document 'nothing.pdf' in the catalog" in unknown.output


# --------------------------------------------------------------------------------------
# An approved request that names an existing document
# --------------------------------------------------------------------------------------
def test_an_approved_request_becomes_a_new_version_only_when_asked(
    version_1: Path, stores: StoresResource, instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = tiny_pdf("from the web")
    url = "https://www.example.org/procedures/fake-procedure.pdf"

    def download(asked: str) -> Fetched:
        return Fetched(
            url=asked, final_url=asked, redirects=(), address="93.184.215.14", name=NAME,
            content_type="application/pdf", data=data, sha256=sha256_bytes(data),
        )

    monkeypatch.setattr(url_intake, "fetcher_for", lambda settings: download)
    catalog = stores.catalog()
    request = catalog.add_document_request(
        "Fake procedure", "the new revision", url, checked_indexed_documents=True
    )
    refused = request_jobs.approve_request(request.id, stores, instance)
    assert (refused.request.status, refused.outcome.status) == ("failed", "duplicate")
    assert refused.outcome.hint == (
        f"to add it as a new version of 'Fake Procedure.pdf', run `kb add --new-version {url}`"
    )
    approved = request_jobs.approve_request(request.id, stores, instance, new_version=True)
    assert (approved.request.status, approved.request.doc_id) == ("approved", DOC)
    assert (approved.outcome.status, approved.outcome.version) == ("added", 2)
    assert [(v.version, v.status, v.sha256) for v in catalog.versions(DOC)][1:] == [
        (2, "pending", sha256_bytes(data))
    ]


def test_version_keys_keep_versions_and_their_ids_apart() -> None:
    assert version_key(DOC, 1) == DOC
    assert version_key(DOC, 12) == "fake-procedure.pdf@v12"
    assert split_version_key("fake-procedure.pdf@v12") == (DOC, 12)
    assert split_version_key(DOC) == (DOC, 1)
    assert split_version_key("odd@v1") == ("odd@v1", 1)  # only 2+ are written with a suffix
    # a chunk or figure id of one version is never another version's or document's
    assert chunk_id(version_key(DOC, 2), 1) == "fake-procedure.pdf@v2-1" != chunk_id(DOC, 1)
    assert figure_id(version_key(DOC, 2), 1) == "fake-procedure.pdf@v2#figure-1"
    with pytest.raises(ValueError, match="versions start at 1, got 0"):
        version_key(DOC, 0)
