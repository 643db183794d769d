"""A ``kb delete`` that stops half way leaves its document ``deleting`` (issue 16, "Crash and
outage recovery"): nothing builds it, a new file of the same name or content is refused with
what to do, ``kb status`` shows it, and the next ``kb build`` (``recover_interrupted``) or
``kb delete`` finishes the delete. Here the delete stops on a store error injected into the
graph step, in this process; the SIGKILL versions are in ``test_crash_recovery.py``."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from typer.testing import CliRunner

from kb_assets import operations
from kb_assets.cli import main as cli
from kb_assets.constants import DOCUMENTS
from kb_assets.instance import dagster_instance
from kb_assets.intake import IntakeStatus, admit
from kb_assets.resources import StoresResource
from kb_shared.errors import StoreError
from kb_shared.settings import Settings
from kb_shared.stores.catalog import DocumentRow
from kb_shared.stores.graph_sql import SqlGraphStore
from tests.assets.fake_providers import FakeProviders
from tests.assets.test_assets import DOC, NAME, admitted, materialize  # noqa: F401
from tests.fakes import tiny_pdf

#: What every refusal says about the half-deleted document (``deleting_message``).
BEING_DELETED = (
    f'"{NAME}" (doc_id {DOC}) is being deleted: a `kb delete` of it has not finished; run '
    f"`kb delete {DOC}` to finish it (`kb build` also finishes it)"
)


@pytest.fixture
def half_deleted(
    admitted: DocumentRow,  # noqa: F811
    stores: StoresResource,
    providers: FakeProviders,
    instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
) -> StoresResource:
    """``DOC`` built, then a delete that removed its points and stopped at the graph: its
    edges, blobs, partition and row are still there."""
    materialize(stores, providers, instance)

    def graph_down(self: SqlGraphStore, document: str) -> None:
        raise StoreError("graph store unreachable (injected)")

    with monkeypatch.context() as patch:
        patch.setattr(SqlGraphStore, "delete_document", graph_down)
        with pytest.raises(StoreError, match="injected"):
            operations.delete_document(stores, instance, NAME)
    assert stores.catalog().get(DOC).status == "deleting"
    assert stores.existing_vectors().count(DOC) == 0
    assert stores.graph().counts(DOC).relationships == 2
    return stores


def assert_gone(stores: StoresResource, instance: dg.DagsterInstance) -> None:
    """Nothing of ``DOC`` is left in any store or in Dagster."""
    assert stores.catalog().list_documents() == []
    assert stores.catalog().all_versions() == {}
    assert stores.existing_vectors().count() == 0
    assert (stores.graph().counts().entities, stores.graph().counts().relationships) == (0, 0)
    assert stores.blobs().list("") == []
    assert not instance.has_dynamic_partition(DOCUMENTS, DOC)


def test_a_deleting_document_is_never_built(
    half_deleted: StoresResource, instance: dg.DagsterInstance
) -> None:
    assert operations.documents_to_build(half_deleted) == []
    assert operations.documents_to_build(half_deleted, everything=True) == []
    runs = len(instance.get_runs())  # the build that made it
    (outcome,) = operations.build_documents(half_deleted, instance, [DOC])
    assert (outcome.status, outcome.run_id, outcome.reason) == ("failed", "", BEING_DELETED)
    assert len(instance.get_runs()) == runs  # no run was started
    assert half_deleted.catalog().get(DOC).status == "deleting"


def test_status_shows_deleting_and_repair_leaves_its_partition_to_the_delete(
    half_deleted: StoresResource, instance: dg.DagsterInstance
) -> None:
    (row,) = operations.document_status(half_deleted, instance)
    assert (row["doc_id"], row["status"], row["reason"]) == (DOC, "deleting", "")
    report = operations.repair_partitions(half_deleted, instance)
    assert (report.added, report.removed) == ([], [])
    instance.delete_dynamic_partition(DOCUMENTS, DOC)  # the delete had got that far
    report = operations.repair_partitions(half_deleted, instance)
    assert (report.added, report.removed) == ([], [])
    assert not instance.has_dynamic_partition(DOCUMENTS, DOC)


@pytest.mark.parametrize("name", [NAME, "Other Name.pdf"])
def test_adding_the_same_name_or_content_while_deleting_is_refused_with_what_to_do(
    name: str, half_deleted: StoresResource, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    again = tmp_path / "again" / name
    again.parent.mkdir()
    again.write_bytes((tmp_path / "in" / NAME).read_bytes())  # the file `admitted` added
    (outcome,) = admit([again], half_deleted, instance)
    assert (outcome.status, outcome.doc_id, outcome.reason) == (
        IntakeStatus.REFUSED, DOC, BEING_DELETED + ", then add the file again",
    )
    (new_version,) = admit([again], half_deleted, instance, new_version=True)
    assert new_version.status == IntakeStatus.REFUSED
    assert [v.version for v in half_deleted.catalog().versions(DOC)] == [1]
    assert [r.doc_id for r in half_deleted.catalog().list_documents()] == [DOC]


def test_the_next_build_finishes_the_delete(
    half_deleted: StoresResource, instance: dg.DagsterInstance
) -> None:
    assert operations.recover_interrupted(half_deleted, instance) == []
    assert_gone(half_deleted, instance)


def test_the_sensor_leaves_a_delete_that_started_just_now_to_its_kb_delete(
    half_deleted: StoresResource, instance: dg.DagsterInstance
) -> None:
    from kb_assets.sensors import DELETE_GRACE_SECONDS

    operations.recover_interrupted(
        half_deleted, instance, delete_grace_seconds=DELETE_GRACE_SECONDS
    )
    assert half_deleted.catalog().get(DOC).status == "deleting"  # maybe a live kb delete's
    assert half_deleted.graph().counts(DOC).relationships == 2
    operations.recover_interrupted(half_deleted, instance)  # kb build: no grace
    assert_gone(half_deleted, instance)


def test_running_the_delete_again_finishes_it_and_says_so(
    half_deleted: StoresResource, instance: dg.DagsterInstance, tmp_path: Path
) -> None:
    report = operations.delete_document(half_deleted, instance, DOC)
    assert (report.doc_id, report.vectors, report.relationships, report.resumed) == (
        DOC, 0, 2, True,
    )
    assert report.partition is True
    assert_gone(half_deleted, instance)
    readd = tmp_path / "readd" / NAME
    readd.parent.mkdir()
    readd.write_bytes(tiny_pdf("first"))
    (outcome,) = admit([readd], half_deleted, instance)
    assert (outcome.status, outcome.doc_id) == (IntakeStatus.ADDED, DOC)


def test_a_delete_that_runs_to_the_end_reports_it_was_not_resumed(
    admitted: DocumentRow,  # noqa: F811
    stores: StoresResource,
    providers: FakeProviders,
    instance: dg.DagsterInstance,
) -> None:
    materialize(stores, providers, instance)
    report = operations.delete_document(stores, instance, NAME)
    assert (report.vectors, report.relationships, report.resumed) == (4, 2, False)
    assert_gone(stores, instance)


def test_the_cli_shows_deleting_refuses_a_retry_and_finishes_the_delete(tmp_path: Path) -> None:
    home = tmp_path / "kb"
    env = {"KB_HOME": str(home)}
    pdf = tmp_path / "in" / NAME
    pdf.parent.mkdir()
    pdf.write_bytes(tiny_pdf("cli"))
    runner = CliRunner()
    assert runner.invoke(cli.app, ["add", str(pdf)], env=env).exit_code == 0
    stores = StoresResource(home=str(home))
    try:
        stores.catalog().mark_deleting(DOC)  # a delete killed right after its first step
    finally:
        stores.close()
    dagster_instance(Settings(home=home)).delete_dynamic_partition(DOCUMENTS, DOC)

    status = runner.invoke(cli.app, ["status"], env=env)
    assert status.exit_code == 0, status.output
    said = " ".join(status.output.split())
    assert f"│ {NAME} │ deleting │" in said
    assert (
        f"1 document(s) are being deleted ({NAME}): they are no longer served; if no `kb "
        "delete` is running, run `kb delete NAME` (or `kb build`) to finish"
    ) in said
    assert "no Dagster partition" not in said  # its partition is the delete's to remove

    retry = runner.invoke(cli.app, ["retry", NAME], env=env)
    assert (retry.exit_code, " ".join(retry.output.split())) == (2, BEING_DELETED)

    finished = runner.invoke(cli.app, ["delete", NAME], env=env)
    assert finished.exit_code == 0, finished.output
    assert " ".join(finished.output.split()) == (
        f"finished deleting {NAME} (an earlier delete of it did not finish): 0 vectors, 0 "
        "relationships, 0 orphan entities, 1 blobs"
    )
    assert runner.invoke(cli.app, ["delete", NAME], env=env).exit_code == 1
