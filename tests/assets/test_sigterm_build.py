"""``kb build`` stops within 10 s of SIGTERM at any step, and a stopped build is resumable like
a crashed one (issue 16). Real subprocesses; the slow input is a page of text just under the
per-page character cap, whose layout holds MuPDF in native calls that ignore signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from kb_assets import operations, stopping
from kb_assets.constants import MARKDOWN, PARTITION_TAG
from kb_assets.instance import dagster_instance
from kb_assets.intake import IntakeStatus, admit
from kb_assets.operations import PROCESS_TAG, close_abandoned_runs, this_process
from kb_assets.resources import StoresResource
from kb_assets.stopping import STOPPED_REASON
from kb_shared.providers.base import LayoutStore
from kb_shared.providers.local_markdown import PymupdfMarkdownConverter
from kb_shared.settings import Settings
from kb_shared.stores.vectors import KIND_TEXT
from tests.assets.test_bad_input import dense_page

KB = str(Path(sys.executable).with_name("kb"))

#: What the watchdog prints when it ends a build whose step ignored the signal.
WATCHDOG_SAYS = (
    "kb: the running step did not stop within 5 s of the signal; ended the build process. "
    "Run `kb build` again to finish."
)


def guarded(body: str, grace: float) -> subprocess.Popen[str]:
    """A Python process that runs ``body`` inside ``stopping.stop_guard(grace)`` (the guard
    is yielded as ``flag``) after printing ``ready``."""
    code = (
        "from kb_assets.stopping import stop_guard\n"
        f"with stop_guard({grace}) as flag:\n"
        "    print('ready', flush=True)\n"
        f"    {body}\n"
        "print('left', flag.signal, flush=True)\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    assert process.stdout.readline() == "ready\n"
    return process


@pytest.mark.slow
def test_a_step_that_sees_the_signal_stops_by_itself_and_the_watchdog_leaves() -> None:
    process = guarded("while flag.signal is None: __import__('time').sleep(0.05)", grace=30)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=20)
    assert (process.returncode, out, err) == (0, f"left {int(signal.SIGTERM)}\n", "")


@pytest.mark.slow
def test_a_native_call_that_ignores_the_signal_is_ended_by_the_watchdog() -> None:
    # sum() over a range runs in C without returning to the interpreter: no handler runs
    process = guarded("sum(range(10**13))", grace=1)
    sent = time.monotonic()
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=20)
    assert time.monotonic() - sent < 10
    assert (process.returncode, out) == (-signal.SIGKILL, "")
    assert err == (
        "kb: the running step did not stop within 1 s of the signal; ended the build process. "
        "Run `kb build` again to finish.\n"
    )


def markdown_started(instance: dg.DagsterInstance) -> bool:
    """Whether the (only) run's markdown step has started."""
    runs = instance.get_runs()
    if not runs:
        return False
    starts = instance.all_logs(runs[0].run_id, of_type=dg.DagsterEventType.STEP_START)
    return any(event.step_key == MARKDOWN for event in starts)


@pytest.mark.slow
def test_kb_build_stops_within_10_s_of_sigterm_and_a_second_build_finishes(
    tmp_path: Path,
) -> None:
    home = tmp_path / "kb"
    env = {**os.environ, "KB_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    pdf = tmp_path / "Dense Page.pdf"
    pdf.write_bytes(dense_page(99_000))
    subprocess.run([KB, "add", str(pdf)], env=env, check=True, capture_output=True, timeout=300)

    build = subprocess.Popen(
        [KB, "build"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    instance = dagster_instance(Settings(home=home))
    deadline = time.monotonic() + 300
    while not markdown_started(instance):
        assert build.poll() is None and time.monotonic() < deadline, build.communicate()
        time.sleep(0.5)
    time.sleep(2)  # well inside the conversion (tens of seconds for this page)
    sent = time.monotonic()
    build.send_signal(signal.SIGTERM)
    out, err = build.communicate(timeout=60)
    assert time.monotonic() - sent < 10
    said = " ".join((out + err).split())
    # Dagster's interrupt raised in the step, or the watchdog ended the native call
    assert (build.returncode == 1 and STOPPED_REASON in said) or (
        build.returncode == -signal.SIGKILL and WATCHDOG_SAYS in said
    ), (build.returncode, said)

    (stopped,) = instance.get_runs()
    again = subprocess.run([KB, "build"], env=env, capture_output=True, text=True, timeout=1200)
    assert again.returncode == 0, again.stdout + again.stderr
    stores = StoresResource(home=str(home))
    row = stores.catalog().get("dense-page.pdf")
    assert (row.status, row.pages) == ("ready", 1)
    index = stores.existing_vectors()
    assert index is not None
    assert index.count(document="dense-page.pdf", kind=KIND_TEXT) == row.chunk_count
    stores.close()
    # the stopped run is not left "started" for ever
    statuses = {run.run_id: run.status for run in instance.get_runs()}
    assert statuses.pop(stopped.run_id) == dg.DagsterRunStatus.FAILURE
    assert list(statuses.values()) == [dg.DagsterRunStatus.SUCCESS]


def test_a_started_run_whose_process_is_gone_is_marked_failed() -> None:
    ended = subprocess.Popen(["true"])
    ended.wait()  # exited and reaped: its pid names no process
    host = this_process().rpartition(":")[0]
    with dg.instance_for_test() as instance:
        for run_id, process in (("a" * 8, f"{host}:{ended.pid}"), ("b" * 8, this_process()),
                                ("c" * 8, f"elsewhere:{ended.pid}")):
            instance.add_run(dg.DagsterRun(
                job_name="build_documents", run_id=run_id, status=dg.DagsterRunStatus.STARTED,
                tags={PARTITION_TAG: "doc.pdf", PROCESS_TAG: process},
            ))
        assert close_abandoned_runs(instance, "doc.pdf") == ["a" * 8]
        assert instance.get_run_by_id("a" * 8).status == dg.DagsterRunStatus.FAILURE
        # this process is alive, and another host's process is not ours to judge
        assert instance.get_run_by_id("b" * 8).status == dg.DagsterRunStatus.STARTED
        assert instance.get_run_by_id("c" * 8).status == dg.DagsterRunStatus.STARTED


def test_a_signal_the_step_sees_stops_the_build_and_no_further_document_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process: the converter of the first document sends this process SIGTERM and keeps
    running Python, where Dagster's handler interrupts the step; the second never starts."""
    calls: list[str] = []

    def signalling(
        self: PymupdfMarkdownConverter, pdf: bytes, filename: str, layouts: LayoutStore
    ) -> None:
        calls.append(filename)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)  # interrupted by the handler Dagster installs around a step
        raise AssertionError("the signal did not interrupt the step")

    monkeypatch.setattr(PymupdfMarkdownConverter, "convert_reusing", signalling)
    monkeypatch.setattr(stopping, "STOP_GRACE_SECONDS", 600.0)  # the watchdog must not fire
    settings = Settings(home=tmp_path / "kb")
    stores = StoresResource(home=str(settings.home))
    instance = dagster_instance(settings)
    for name in ("First.pdf", "Second.pdf"):
        (tmp_path / name).write_bytes(dense_page(100))
    outcomes = admit([tmp_path / "First.pdf", tmp_path / "Second.pdf"], stores, instance)
    assert [o.status for o in outcomes] == [IntakeStatus.ADDED, IntakeStatus.ADDED]

    before = signal.getsignal(signal.SIGTERM)
    built = operations.build_documents(stores, instance, ["first.pdf", "second.pdf"])
    assert [(o.name, o.status, o.reason) for o in built] == [
        ("First.pdf", "failed", STOPPED_REASON)
    ]
    assert calls == ["First.pdf"]
    assert signal.getsignal(signal.SIGTERM) is before  # handlers put back
    assert stores.catalog().get("second.pdf").status == "pending"
    stores.close()
