"""The code location loads, and its sensor and Launchpad job apply the intake rules."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from kb_assets.constants import ADD_JOB, BUILD_JOB, CORPUS_ASSETS, DOCUMENTS
from kb_assets.definitions import defs
from kb_assets.instance import dagster_instance
from kb_assets.resources import StoresResource
from kb_assets.sensors import intake_sensor
from kb_shared.settings import Settings

PDF = b"%PDF-1.7\n% tiny\n%%EOF\n"


def test_definitions_load_with_partitioned_assets_and_checks() -> None:
    repo = defs.get_repository_def()
    graph = repo.asset_graph
    keys = sorted(k.to_user_string() for k in graph.get_all_asset_keys())
    assert keys == sorted(CORPUS_ASSETS)
    for key in graph.get_all_asset_keys():
        partitions = graph.get(key).partitions_def
        assert isinstance(partitions, dg.DynamicPartitionsDefinition)
        assert partitions.name == DOCUMENTS
    checks = sorted(
        f"{k.asset_key.to_user_string()}:{k.name}" for k in graph.asset_check_keys
    )
    assert checks == ["embeddings:index_matches_chunks", "graph:edge_chunk_ids_resolve"]
    assert repo.has_job(BUILD_JOB) and repo.has_job(ADD_JOB)
    assert [s.name for s in repo.sensor_defs] == ["intake_sensor"]


def test_sensor_takes_inbox_files_and_requests_runs(tmp_path: Path) -> None:
    settings = Settings()
    settings.inbox.mkdir(parents=True)
    (settings.inbox / "Inbox Doc.pdf").write_bytes(PDF)
    (settings.inbox / "notes.txt").write_text("left alone")
    instance = dagster_instance(settings)
    with dg.build_sensor_context(
        instance=instance, resources={"stores": StoresResource()}
    ) as context:
        _check_two_ticks(context, settings)


def _check_two_ticks(context: dg.SensorEvaluationContext, settings: Settings) -> None:
    result = intake_sensor(context)

    assert [r.partition_key for r in result.run_requests] == ["inbox-doc.pdf"]
    (add,) = result.dynamic_partitions_requests
    assert (add.partitions_def_name, list(add.partition_keys)) == (DOCUMENTS, ["inbox-doc.pdf"])
    assert (settings.inbox / "added" / "Inbox Doc.pdf").exists()
    assert (settings.inbox / "notes.txt").exists()

    # A second file with the same normalised name is moved aside with its reason.
    (settings.inbox / "inbox doc.PDF").write_bytes(b"%PDF-1.7\n% other\n%%EOF\n")
    result = intake_sensor(context)
    reason = (settings.inbox / "refused" / "inbox doc.PDF.reason.txt").read_text()
    assert reason.startswith("duplicate: already in the corpus as 'Inbox Doc.pdf'")
    assert result.dynamic_partitions_requests == []
    # The pending document is still requested; Dagster dedupes by run key.
    assert [r.partition_key for r in result.run_requests] == ["inbox-doc.pdf"]


def test_add_documents_job_reports_each_file(tmp_path: Path) -> None:
    settings = Settings()
    folder = tmp_path / "server-side"
    folder.mkdir()
    (folder / "first.pdf").write_bytes(PDF)
    (folder / "FIRST.pdf").write_bytes(b"%PDF-1.7\n% dup name\n%%EOF\n")
    instance = dagster_instance(settings)
    result = defs.resolve_job_def(ADD_JOB).execute_in_process(
        run_config={"ops": {"add_documents_op": {"config": {"paths": [str(folder)]}}}},
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
