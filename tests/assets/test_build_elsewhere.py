"""``kb build`` beside a running ``kb ui``/``make demo`` builds no document twice: it leaves a
document to the live run already building it (the intake sensor's, another ``kb build``'s) and
says so, and the intake sensor requests no run for a document a live run builds. A live run
whose ``kb`` process is gone is closed and its document built. A real Dagster instance under
KB_HOME, tiny real PDFs, the build job on fake providers (``tests/assets/fake_providers.py``).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from dagster._core.remote_origin import RegisteredCodeLocationOrigin, RemoteRepositoryOrigin
from dagster._daemon.types import DaemonHeartbeat
from typer.testing import CliRunner

from kb_assets import operations
from kb_assets.cli import main as cli
from kb_assets.assets import CORPUS_ASSETS
from kb_assets.backfill import RANGE_END_TAG
from kb_assets.constants import BUILD_JOB, PARTITION_TAG
from kb_assets.jobs import kb_resources
from kb_assets.instance import dagster_instance
from kb_assets.intake import IntakeStatus, admit
from kb_assets.io_manager import RANGE_START_TAG
from kb_assets.jobs import build_documents_job
from kb_assets.live_runs import (
    BUILDING_ELSEWHERE,
    PROCESS_TAG,
    QUEUE_DAEMON,
    builds_in_progress,
    this_process,
)
from kb_assets.resources import StoresResource
from kb_assets.sensors import intake_sensor
from kb_shared.settings import Settings
from tests.assets.fake_providers import FakeProviders
from tests.fakes import tiny_pdf

NAMES = ("A Notice.pdf", "B Notice.pdf", "C Notice.pdf")
DOCS = ("a-notice.pdf", "b-notice.pdf", "c-notice.pdf")

#: What ``fake_job`` builds with (``dagster.reconstructable`` needs a module-level function).
FAKE_JOB: dict[str, Any] = {}

#: A queued run needs the origin of the job the daemon will launch (any code location name).
ORIGIN = RemoteRepositoryOrigin(
    RegisteredCodeLocationOrigin("kb_assets"), "__repository__"
).get_job_origin(BUILD_JOB)


def fake_job() -> dg.JobDefinition:
    """The build job (with its failure hook) on ``FAKE_JOB``'s stores and providers."""
    defs = dg.Definitions(
        assets=CORPUS_ASSETS,
        jobs=[build_documents_job],
        resources=kb_resources(FAKE_JOB["stores"], FAKE_JOB["providers"]),
        executor=dg.in_process_executor,
    )
    return defs.resolve_job_def(BUILD_JOB)


def reason(run_id: str, status: str) -> str:
    """What ``kb build`` says of a document it left to run ``run_id``."""
    return (
        f"run {run_id} ({status}) of this Dagster instance is building it (the intake sensor "
        "of `kb ui`/`make demo`, or another `kb build`); wait for it: `kb status` shows when "
        "it is ready. If that run is stuck, terminate it in the Dagster UI and run `kb build` "
        "again"
    )


def unlaunched(run_id: str) -> str:
    """What ``kb build`` says of a document whose run is queued while no daemon runs."""
    return (
        f"run {run_id} (queued) of this Dagster instance will build it, but no Dagster daemon "
        "is running to launch it: start `kb ui` (or `make demo`) and it runs, or terminate "
        "that run in the Dagster UI and run `kb build` again"
    )


def dead_process() -> str:
    """``PROCESS_TAG`` of a process that has exited and been reaped (its pid names none)."""
    ended = subprocess.Popen(["true"])
    ended.wait()
    return f"{this_process().rpartition(':')[0]}:{ended.pid}"


def add_run(
    instance: dg.DagsterInstance, run_id: str, status: dg.DagsterRunStatus, **tags: str
) -> None:
    """A build run as the daemon (queued: no ``PROCESS_TAG``) or a ``kb`` process left it."""
    instance.add_run(dg.DagsterRun(
        job_name=BUILD_JOB, run_id=run_id, status=status, tags=tags,
        remote_job_origin=ORIGIN if status == dg.DagsterRunStatus.QUEUED else None,
    ))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """KB_HOME (the CLI's too) with the three documents pending, their partitions added."""
    home = Path(str(Settings().home))
    stores = StoresResource(home=str(home))
    paths = []
    for name in NAMES:
        path = tmp_path / "in" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(tiny_pdf(name))
        paths.append(path)
    outcomes = admit(paths, stores, dagster_instance(Settings(home=home)))
    assert [(o.status, o.doc_id) for o in outcomes] == [(IntakeStatus.ADDED, d) for d in DOCS]
    stores.close()
    return home


def build(
    home: Path, instance: dg.DagsterInstance, **kwargs: Any
) -> list[operations.BuildOutcome]:
    stores = StoresResource(home=str(home))
    FAKE_JOB.update(stores=stores, providers=FakeProviders())
    try:
        return operations.build_documents(stores, instance, DOCS, job=fake_job, **kwargs)
    finally:
        stores.close()


def statuses(home: Path) -> list[str]:
    stores = StoresResource(home=str(home))
    try:
        return [stores.catalog().get(doc).status for doc in DOCS]
    finally:
        stores.close()


def runs_of(instance: dg.DagsterInstance, doc: str) -> list[tuple[str, dg.DagsterRunStatus]]:
    return [
        (run.run_id, run.status)
        for run in instance.get_runs(filters=dg.RunsFilter(tags={PARTITION_TAG: doc}))
    ]


def test_build_leaves_a_document_to_its_queued_run_and_builds_one_whose_process_is_gone(
    home: Path,
) -> None:
    instance = dagster_instance(Settings(home=home))
    # `kb ui`'s daemon is up (its run queue's heartbeat) and has B's run in its queue
    instance.add_daemon_heartbeat(DaemonHeartbeat(time.time(), QUEUE_DAEMON, "kb-ui", None))
    add_run(instance, "queued01", dg.DagsterRunStatus.QUEUED, **{PARTITION_TAG: DOCS[1]})
    add_run(instance, "dead0001", dg.DagsterRunStatus.STARTED,
            **{PARTITION_TAG: DOCS[2], PROCESS_TAG: dead_process()})

    outcomes = build(home, instance)

    assert [(o.doc_id, o.status) for o in outcomes] == [
        (DOCS[0], "ready"), (DOCS[1], BUILDING_ELSEWHERE), (DOCS[2], "ready"),
    ]
    left = outcomes[1]
    assert (left.name, left.run_id, left.reason) == (
        NAMES[1], "queued01", reason("queued01", "queued")
    )
    assert statuses(home) == ["ready", "pending", "ready"]
    # no run of B was started here; C's dead run was closed, then C built in a run of its own
    assert runs_of(instance, DOCS[1]) == [("queued01", dg.DagsterRunStatus.QUEUED)]
    (built, closed) = runs_of(instance, DOCS[2])
    assert closed == ("dead0001", dg.DagsterRunStatus.FAILURE)
    assert built[1] == dg.DagsterRunStatus.SUCCESS
    assert outcomes[2].run_id == built[0]


def test_a_run_requested_while_the_build_goes_on_is_seen_before_its_document_starts(
    home: Path,
) -> None:
    instance = dagster_instance(Settings(home=home))

    def sensor_requests_c(outcome: operations.BuildOutcome) -> None:
        if outcome.doc_id == DOCS[0]:  # the daemon launches the sensor's run of C meanwhile
            add_run(instance, "launched", dg.DagsterRunStatus.NOT_STARTED,
                    **{PARTITION_TAG: DOCS[2]})

    outcomes = build(home, instance, on_done=sensor_requests_c)

    assert [(o.doc_id, o.status, o.run_id) for o in outcomes][2] == (
        DOCS[2], BUILDING_ELSEWHERE, "launched"
    )
    assert outcomes[2].reason == reason("launched", "not started")
    assert statuses(home) == ["ready", "ready", "pending"]


def test_a_document_deleted_while_the_build_goes_on_is_reported_so_and_not_run(
    home: Path,
) -> None:
    instance = dagster_instance(Settings(home=home))

    def delete_c(outcome: operations.BuildOutcome) -> None:
        if outcome.doc_id == DOCS[0]:  # `kb delete C` in another terminal, meanwhile
            stores = StoresResource(home=str(home))
            try:
                operations.delete_document(stores, instance, NAMES[2])
            finally:
                stores.close()

    outcomes = build(home, instance, on_done=delete_c)

    assert [(o.doc_id, o.status, o.run_id) for o in outcomes] == [
        (DOCS[0], "ready", outcomes[0].run_id), (DOCS[1], "ready", outcomes[1].run_id),
        (DOCS[2], "failed", ""),
    ]
    assert outcomes[2].reason == (
        "it is no longer in the catalog (deleted while this build ran); nothing was built"
    )
    assert len(instance.get_run_records()) == 2  # no run was started for C


def test_kb_build_says_which_documents_it_left_and_exits_0(home: Path) -> None:
    instance = dagster_instance(Settings(home=home))
    # the sensor queued A's run, then `kb ui` was stopped: no daemon will launch it
    add_run(instance, "queued01", dg.DagsterRunStatus.QUEUED, **{PARTITION_TAG: DOCS[0]})
    # another `kb build` (this test's process stands in for it) builds B and C in one range run
    add_run(instance, "range001", dg.DagsterRunStatus.STARTED,
            **{RANGE_START_TAG: DOCS[1], RANGE_END_TAG: DOCS[2], PROCESS_TAG: this_process()})
    runner = CliRunner()

    as_json = runner.invoke(cli.app, ["build", "--json"])
    assert as_json.exit_code == 0, as_json.output
    said = json.loads(as_json.stdout)
    assert [(o["doc_id"], o["status"], o["run_id"], o["reason"]) for o in said] == [
        (DOCS[0], BUILDING_ELSEWHERE, "queued01", unlaunched("queued01")),
        (DOCS[1], BUILDING_ELSEWHERE, "range001", reason("range001", "started")),
        (DOCS[2], BUILDING_ELSEWHERE, "range001", reason("range001", "started")),
    ]

    named = runner.invoke(cli.app, ["build", NAMES[0]])
    assert named.exit_code == 0, named.output
    assert named.output.count("building elsewhere") == 2  # the table's status, then the note
    words = " ".join(named.output.split())
    assert f"building elsewhere {NAMES[0]}: {unlaunched('queued01')}" in words
    assert f"{NAMES[1]}" not in words  # only the named document
    assert len(instance.get_runs()) == 2  # nothing was run
    assert statuses(home) == ["pending", "pending", "pending"]


def tick(instance: dg.DagsterInstance, home: Path) -> list[str | None]:
    stores = StoresResource(home=str(home))
    try:
        with dg.build_sensor_context(instance=instance, resources={"stores": stores}) as context:
            return [r.partition_key for r in intake_sensor(context).run_requests]
    finally:
        stores.close()


def test_the_sensor_requests_no_run_for_a_document_a_live_run_builds(home: Path) -> None:
    instance = dagster_instance(Settings(home=home))
    # a `kb build` in a terminal builds A (this test's process stands in for it)
    add_run(instance, "terminal", dg.DagsterRunStatus.STARTED,
            **{PARTITION_TAG: DOCS[0], PROCESS_TAG: this_process()})
    add_run(instance, "dead0001", dg.DagsterRunStatus.STARTED,
            **{PARTITION_TAG: DOCS[2], PROCESS_TAG: dead_process()})

    assert tick(instance, home) == [DOCS[1], DOCS[2]]  # C's dead run closed, C requested
    assert instance.get_run_by_id("dead0001").status == dg.DagsterRunStatus.FAILURE

    # the run ends (stopped, the document still pending): the next tick requests it
    instance.report_run_canceled(instance.get_run_by_id("terminal"))
    assert tick(instance, home) == [DOCS[0], DOCS[1], DOCS[2]]


def test_the_sensor_leaves_a_new_version_a_live_run_builds(home: Path, tmp_path: Path) -> None:
    instance = dagster_instance(Settings(home=home))
    stores = StoresResource(home=str(home))
    stores.catalog().mark_ready(DOCS[0], pages=2, chunk_count=2)
    revised = tmp_path / "revised" / NAMES[0]
    revised.parent.mkdir()
    revised.write_bytes(tiny_pdf("A, revised"))
    (outcome,) = admit([revised], stores, instance, new_version=True)
    assert (outcome.status, outcome.version) == (IntakeStatus.ADDED, 2)
    stores.close()
    assert tick(instance, home) == [DOCS[1], DOCS[2], DOCS[0]]

    add_run(instance, "terminal", dg.DagsterRunStatus.NOT_STARTED,
            **{PARTITION_TAG: DOCS[0], PROCESS_TAG: this_process()})
    assert tick(instance, home) == [DOCS[1], DOCS[2]]


def test_a_tick_reads_the_runs_once_however_many_documents_are_pending(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    instance = dagster_instance(Settings(home=home))
    for number, doc in enumerate(DOCS):
        add_run(instance, f"queued{number:02d}", dg.DagsterRunStatus.QUEUED,
                **{PARTITION_TAG: doc})
    queries: list[dg.RunsFilter | None] = []
    get_runs = instance.get_runs

    def counted(filters: dg.RunsFilter | None = None, **kwargs: Any) -> Any:
        queries.append(filters)
        return get_runs(filters, **kwargs)

    monkeypatch.setattr(instance, "get_runs", counted)
    assert tick(instance, home) == []
    # one for crash recovery (runs of a gone process), one for every live run: not one a document
    assert [sorted(s.value for s in q.statuses) for q in queries if q is not None] == [
        ["NOT_STARTED", "STARTED", "STARTING"],
        ["NOT_STARTED", "QUEUED", "STARTED", "STARTING"],
    ]
    assert all(not q.tags for q in queries if q is not None)
    assert sorted(builds_in_progress(instance)) == sorted(DOCS)


def test_kb_build_exits_1_when_a_document_it_built_failed_beside_one_it_left(
    home: Path, tmp_path: Path
) -> None:
    instance = dagster_instance(Settings(home=home))
    for number, doc in enumerate(DOCS):
        add_run(instance, f"queued{number:02d}", dg.DagsterRunStatus.QUEUED,
                **{PARTITION_TAG: doc})
    broken = tmp_path / "notes.pdf"
    broken.write_text("hello, this is not a PDF\n", encoding="utf-8")
    runner = CliRunner()
    assert runner.invoke(cli.app, ["add", str(broken)]).exit_code == 0

    built = runner.invoke(cli.app, ["build", "--json"])
    assert built.exit_code == 1, built.output
    said = {o["doc_id"]: o["status"] for o in json.loads(built.stdout)}
    assert said == {**dict.fromkeys(DOCS, BUILDING_ELSEWHERE), "notes.pdf": "failed"}
