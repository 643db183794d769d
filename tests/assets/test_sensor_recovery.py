"""The intake sensor finishes what a killed ``kb`` process left half done before it requests
runs (issue 16, crash recovery): with ``kb ui``/``kb demo`` running, a dead run does not stay
"started" and a killed put's temp file does not stay, until someone types ``kb build``."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import dagster as dg
import pytest

from kb_assets import operations
from kb_assets.constants import ADD_JOB
from kb_assets.instance import dagster_instance
from kb_assets.operations import PARTITION_TAG, PROCESS_TAG, this_process
from kb_assets.resources import StoresResource
from kb_assets.sensors import intake_sensor
from kb_shared.errors import StoreUnavailableError
from kb_shared.settings import Settings
from kb_shared.stores.blobs import STALE_TEMP_SECONDS, TEMP_PREFIX
from tests.fakes import settled

PDF = b"%PDF-1.7\n% tiny\n%%EOF\n"


def _tick(instance: dg.DagsterInstance, stores: StoresResource) -> dg.SensorResult:
    with dg.build_sensor_context(instance=instance, resources={"stores": stores}) as context:
        return intake_sensor(context)


def _dead_process() -> str:
    """``PROCESS_TAG`` of a process that has exited and been reaped (its pid names none)."""
    ended = subprocess.Popen(["true"])
    ended.wait()
    return f"{this_process().rpartition(':')[0]}:{ended.pid}"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "kb"
    Settings(home=home).inbox.mkdir(parents=True)
    (Settings(home=home).inbox / "New Doc.pdf").write_bytes(PDF)
    settled(Settings(home=home).inbox / "New Doc.pdf")
    return home


def test_a_tick_closes_a_dead_run_and_removes_a_killed_puts_temp_file(home: Path) -> None:
    stores = StoresResource(home=str(home))
    instance = dagster_instance(Settings(home=home))
    for run_id, process in (("dead0001", _dead_process()), ("live0001", this_process())):
        instance.add_run(dg.DagsterRun(
            job_name="build_documents", run_id=run_id, status=dg.DagsterRunStatus.STARTED,
            tags={PARTITION_TAG: "doc.pdf", PROCESS_TAG: process},
        ))
    folder = stores.blobs().local_path("probe").parent / "figures" / "doc.pdf"
    folder.mkdir(parents=True)
    stale = folder / f"{TEMP_PREFIX}abc"
    stale.write_bytes(b"half a png")
    stamp = time.time() - 2 * STALE_TEMP_SECONDS
    os.utime(stale, (stamp, stamp))
    try:
        result = _tick(instance, stores)
    finally:
        stores.close()

    dead = instance.get_run_by_id("dead0001")
    assert dead.status == dg.DagsterRunStatus.FAILURE
    assert instance.get_run_by_id("live0001").status == dg.DagsterRunStatus.STARTED
    (failure,) = instance.get_records_for_run(
        "dead0001", of_type=dg.DagsterEventType.RUN_FAILURE
    ).records
    assert failure.event_log_entry.dagster_event.message == (
        f"the build process ({dead.tags[PROCESS_TAG]}) ended before this run finished (stopped "
        "or crashed); a later `kb build` builds the document again"
    )
    assert not stale.exists()
    # and the tick still does its job
    assert [r.job_name for r in result.run_requests] == [ADD_JOB]


def test_a_store_that_fails_during_recovery_does_not_stop_the_intake(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unavailable(
        stores: StoresResource, instance: dg.DagsterInstance, **_: float
    ) -> list[str]:
        raise StoreUnavailableError("catalog database at sqlite:///x is unavailable")

    monkeypatch.setattr(operations, "recover_interrupted", unavailable)
    stores = StoresResource(home=str(home))
    try:
        result = _tick(dagster_instance(Settings(home=home)), stores)
    finally:
        stores.close()
    (request,) = result.run_requests
    assert request.job_name == ADD_JOB
    assert request.run_config["ops"]["add_documents_op"]["config"]["paths"] == [
        str(Settings(home=home).inbox / "New Doc.pdf")
    ]
