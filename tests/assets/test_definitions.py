"""The code location loads, and its sensor and Launchpad job apply the intake rules."""

from __future__ import annotations

import time
from pathlib import Path

import dagster as dg

from kb_assets.constants import (
    ADD_JOB,
    BUILD_JOB,
    CORPUS_ASSETS,
    DOCUMENTS,
    MARKET_ASSETS,
    RETRIEVAL_EVAL,
)
from kb_assets.definitions import defs
from kb_assets.instance import dagster_instance
from kb_assets.resources import StoresResource
from kb_assets.sensors import INBOX_SETTLE_SECONDS, inbox_files, intake_sensor
from kb_shared.settings import Settings
from tests.fakes import settled

PDF = b"%PDF-1.7\n% tiny\n%%EOF\n"


def test_definitions_load_with_partitioned_assets_and_checks() -> None:
    repo = defs.get_repository_def()
    graph = repo.asset_graph
    keys = sorted(k.to_user_string() for k in graph.get_all_asset_keys())
    assert keys == sorted((*CORPUS_ASSETS, *MARKET_ASSETS, RETRIEVAL_EVAL))
    for key in map(dg.AssetKey, CORPUS_ASSETS):
        partitions = graph.get(key).partitions_def
        assert isinstance(partitions, dg.DynamicPartitionsDefinition)
        assert partitions.name == DOCUMENTS
    checks = sorted(
        f"{k.asset_key.to_user_string()}:{k.name}" for k in graph.asset_check_keys
    )
    assert checks == [
        "aer_performance:aer_totals_match_their_parts",
        "chunks:chunks_located_in_pdf",
        "compliance_actions:compliance_count_matches_read",
        "embeddings:index_matches_chunks",
        "graph:edge_chunk_ids_resolve",
        "retrieval_eval:retrieval_above_floors",
    ]
    assert repo.has_job(BUILD_JOB) and repo.has_job(ADD_JOB)
    assert [s.name for s in repo.sensor_defs] == [
        "batch_failures_sensor", "intake_sensor", "quality_automation_sensor", "reference_sensor",
    ]


def _tick(instance: dg.DagsterInstance, home: Path, cursor: str | None) -> dg.SensorResult:
    with dg.build_sensor_context(
        instance=instance, cursor=cursor, resources={"stores": StoresResource(home=str(home))}
    ) as context:
        return intake_sensor(context)


def _run_add(instance: dg.DagsterInstance, home: Path, request: dg.RunRequest) -> dg.ExecuteInProcessResult:
    """Run an ``add_documents`` request as the daemon would, on ``home``'s stores."""
    run_config = {**request.run_config, "resources": {"stores": {"config": {"home": str(home)}}}}
    return defs.resolve_job_def(request.job_name).execute_in_process(
        run_config=run_config, instance=instance
    )


def test_the_sensor_leaves_a_file_still_being_copied_in_for_a_later_tick(tmp_path: Path) -> None:
    # a copy updates the file's modification time as it writes: a file written just now may
    # be half a PDF, which would be admitted truncated
    home = tmp_path / "kb"
    settings = Settings(home=home)
    settings.inbox.mkdir(parents=True)
    copying = settings.inbox / "Copying.pdf"
    copying.write_bytes(PDF)
    instance = dagster_instance(settings)
    assert _tick(instance, home, None).run_requests == []
    later = time.time() + INBOX_SETTLE_SECONDS
    assert inbox_files(settings.inbox, now=later) == [copying]
    settled(copying)
    (request,) = _tick(instance, home, None).run_requests
    assert request.run_config["ops"]["add_documents_op"]["config"]["paths"] == [str(copying)]


def test_the_sensor_writes_nothing_and_requests_an_add_run(tmp_path: Path) -> None:
    home = tmp_path / "kb"
    settings = Settings(home=home)
    settings.inbox.mkdir(parents=True)
    (settings.inbox / "Inbox Doc.pdf").write_bytes(PDF)
    (settings.inbox / "notes.docx").write_text("left alone")
    settled(settings.inbox / "Inbox Doc.pdf")
    instance = dagster_instance(settings)

    first = _tick(instance, home, None)
    (request,) = first.run_requests
    assert request.job_name == ADD_JOB
    assert request.run_config == {
        "ops": {
            "add_documents_op": {
                "config": {"paths": [str(settings.inbox / "Inbox Doc.pdf")], "from_inbox": True}
            }
        }
    }
    assert request.run_key.startswith("add:") and len(request.run_key) == 4 + 64
    assert first.dynamic_partitions_requests == []
    # the tick wrote nothing: no row, no blob, no partition, no file moved
    stores = StoresResource(home=str(home))
    assert stores.catalog().list_documents() == []
    assert stores.blobs().list("") == []
    assert instance.get_dynamic_partitions(DOCUMENTS) == []
    assert sorted(p.name for p in settings.inbox.iterdir()) == ["Inbox Doc.pdf", "notes.docx"]

    # the cursor remembers the request: the next tick asks for nothing
    assert _tick(instance, home, first.cursor).run_requests == []

    # the add run admits the file and moves it to inbox/added
    assert _run_add(instance, home, request).success
    assert (settings.inbox / "added" / "Inbox Doc.pdf").exists()
    assert (settings.inbox / "notes.docx").exists()
    assert instance.has_dynamic_partition(DOCUMENTS, "inbox-doc.pdf")
    row = stores.catalog().get("inbox-doc.pdf")
    assert row.status == "pending"

    # a later tick requests the build of the pending document, with an idempotent run key
    third = _tick(instance, home, first.cursor)
    (build,) = third.run_requests
    assert (build.job_name, build.partition_key) == (BUILD_JOB, "inbox-doc.pdf")
    assert build.run_key == f"inbox-doc.pdf:{row.sha256[:16]}:{row.created_at.isoformat()}"

    # A second file with the same normalised name is moved aside with its reason.
    (settings.inbox / "inbox doc.PDF").write_bytes(b"%PDF-1.7\n% other\n%%EOF\n")
    settled(settings.inbox / "inbox doc.PDF")
    fourth = _tick(instance, home, third.cursor)
    add, again = fourth.run_requests
    assert add.job_name == ADD_JOB
    assert add.run_config["ops"]["add_documents_op"]["config"]["paths"] == [
        str(settings.inbox / "inbox doc.PDF")
    ]
    assert _run_add(instance, home, add).success
    reason = (settings.inbox / "refused" / "inbox doc.PDF.reason.txt").read_text()
    assert reason.startswith(
        "duplicate: 'Inbox Doc.pdf' is already in the corpus (doc_id inbox-doc.pdf, pending). "
        "To add it as a new version: `kb add --new-version "
    )
    # The pending document is still requested; Dagster dedupes by run key.
    assert (again.partition_key, again.run_key) == ("inbox-doc.pdf", build.run_key)
    assert instance.get_dynamic_partitions(DOCUMENTS) == ["inbox-doc.pdf"]
    stores.close()


def test_the_sensor_skips_a_pending_document_without_a_partition(tmp_path: Path) -> None:
    home = tmp_path / "kb"
    stores = StoresResource(home=str(home))
    stores.catalog().add_pending(
        name="Lost.pdf", doc_id="lost.pdf", sha256="0" * 64, size_bytes=3, blob_key="pdfs/lost.pdf"
    )
    instance = dagster_instance(Settings(home=home))
    result = _tick(instance, home, None)
    assert result.run_requests == []
    assert instance.get_dynamic_partitions(DOCUMENTS) == []
    stores.close()


def test_add_documents_job_reports_each_file(tmp_path: Path) -> None:
    home = tmp_path / "kb"
    folder = tmp_path / "server-side"
    folder.mkdir()
    (folder / "first.pdf").write_bytes(PDF)
    (folder / "FIRST.pdf").write_bytes(b"%PDF-1.7\n% dup name\n%%EOF\n")
    instance = dagster_instance(Settings(home=home))
    result = defs.resolve_job_def(ADD_JOB).execute_in_process(
        run_config={
            "ops": {"add_documents_op": {"config": {"paths": [str(folder)]}}},
            "resources": {"stores": {"config": {"home": str(home)}}},
        },
        instance=instance,
    )
    assert result.success
    assert result.output_for_node("add_documents_op") == ["first.pdf"]
    assert instance.has_dynamic_partition(DOCUMENTS, "first.pdf")
    metadata = result.get_step_success_events()[0]  # the op succeeded
    assert metadata.step_key == "add_documents_op"
    outputs = [
        e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"
    ][0].event_specific_data.metadata
    assert outputs["added"].value == 1 and outputs["duplicates"].value == 1
    assert "same name as" in outputs["outcomes"].value
    # not from the inbox: the files stay where they are
    assert sorted(p.name for p in folder.iterdir()) == ["FIRST.pdf", "first.pdf"]
