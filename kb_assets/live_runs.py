"""Which build runs are live in the Dagster instance, so no document is built by two runs at
once: ``kb build`` leaves a document to the run already building it (the intake sensor's, run
by the daemon of ``kb ui``/``make demo``), and the intake sensor requests no run for a
document a ``kb build`` is building.

A run started by a ``kb`` process carries ``PROCESS_TAG`` (``host:pid``); when that process is
gone (killed, crashed) the run is closed as failed instead of counted as live
(``close_abandoned_runs``). A run the daemon launched has no such tag and counts as live until
Dagster ends it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg

from kb_assets.constants import DOCUMENTS, PARTITION_TAG

#: Run tag naming the process that executes a build run (``host:pid``), so a later build can
#: tell a run whose process is gone (killed or crashed) from one still going.
PROCESS_TAG = "kb/process"

#: Statuses of a run that has not ended (Dagster's ``DagsterRunStatus``): waiting in the
#: daemon's queue, created, launching, or executing: each will still build its documents
#: (a ``CANCELING`` run is being stopped; Dagster 1.13 writes no ``SUSPENDED``: not counted).
LIVE_STATUSES = (
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
)

#: Statuses a ``kb`` process's own run can be in while that process executes it (an
#: in-process ``execute_job`` is never queued).
_OWN_RUN_STATUSES = (
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
)

#: Dagster's name of the daemon loop that launches queued runs
#: (``QueuedRunCoordinatorDaemon.daemon_type``).
QUEUE_DAEMON = "QUEUED_RUN_COORDINATOR"

#: ``BuildOutcome.status`` of a document ``kb build`` left to a live run of another process.
BUILDING_ELSEWHERE = "building elsewhere"


@dataclass(frozen=True)
class LiveRun:
    """A live run (``LIVE_STATUSES``) that builds a document.

    Attributes:
        run_id: the Dagster run id.
        status: its status in lower case words, e.g. ``"queued"``, ``"not started"``.
    """

    run_id: str
    status: str

    def reason(self, queue_served: bool = True) -> str:
        """What ``kb build`` says of a document it left to this run, and what to do;
        ``queue_served``: whether a daemon launches queued runs now (``queue_is_served``)."""
        if self.status == "queued" and not queue_served:
            return (
                f"run {self.run_id} (queued) of this Dagster instance will build it, but no "
                "Dagster daemon is running to launch it: start `kb ui` (or `make demo`) and it "
                "runs, or terminate that run in the Dagster UI and run `kb build` again"
            )
        return (
            f"run {self.run_id} ({self.status}) of this Dagster instance is building it "
            "(the intake sensor of `kb ui`/`make demo`, or another `kb build`); wait for it: "
            "`kb status` shows when it is ready. If that run is stuck, terminate it in the "
            "Dagster UI and run `kb build` again"
        )


def queue_is_served(instance: dg.DagsterInstance) -> bool:
    """Whether queued runs get launched now: the daemon's run-queue loop sent a heartbeat
    within Dagster's tolerance (``dagster._daemon.controller.get_daemon_statuses``; its errors
    ignored), or the instance queues no runs (another run coordinator in ``dagster.yaml``)."""
    try:  # Dagster's own check; private, so a Dagster without it reads as "served"
        from dagster._daemon.controller import get_daemon_statuses  # noqa: PLC0415
    except ImportError:
        return True
    statuses = get_daemon_statuses(instance, [QUEUE_DAEMON], ignore_errors=True)
    return statuses[QUEUE_DAEMON].healthy is not False


def this_process() -> str:
    """``PROCESS_TAG``'s value for this process: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _process_is_gone(tag: str) -> bool:
    host, _, pid = tag.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False  # another machine's run: not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _close_if_abandoned(instance: dg.DagsterInstance, run: dg.DagsterRun) -> bool:
    """Mark ``run`` failed when a ``kb`` process of this host executed it and is gone;
    returns whether it did."""
    tag = run.tags.get(PROCESS_TAG, "")
    if not tag or run.status not in _OWN_RUN_STATUSES or not _process_is_gone(tag):
        return False
    instance.report_run_failed(
        run,
        f"the build process ({tag}) ended before this run finished (stopped or "
        "crashed); a later `kb build` builds the document again",
    )
    return True


def close_abandoned_runs(instance: dg.DagsterInstance, doc_id: str | None = None) -> list[str]:
    """Mark failed the document's runs (every document's with ``doc_id`` ``None``) not yet
    ended (not started, starting, started) whose process (``PROCESS_TAG``, on this host) no
    longer exists: a build killed mid-run (the stop watchdog, SIGKILL, a crash) leaves its run
    started for ever otherwise. Returns their run ids."""
    runs = instance.get_runs(
        filters=dg.RunsFilter(
            tags={PARTITION_TAG: doc_id} if doc_id is not None else {},
            statuses=list(_OWN_RUN_STATUSES),
        )
    )
    return [run.run_id for run in runs if _close_if_abandoned(instance, run)]


def builds_in_progress(
    instance: dg.DagsterInstance, partition_order: Sequence[str] | None = None
) -> dict[str, LiveRun]:
    """Every document a live run builds, from ONE run query (all ``LIVE_STATUSES`` runs, so a
    sensor tick over 10,000 pending documents costs one query, not one per document).

    A run whose ``kb`` process is gone is closed first (``close_abandoned_runs``) and not
    counted. A single-partition run names its document by ``PARTITION_TAG``; a range run
    (a backfill's batch, ``kb_assets.backfill``) covers the partitions from its first to its
    last key in ``partition_order`` (the order the partitions were added; read from the
    instance when ``None`` and a range run is live).

    Returns:
        ``{doc_id: LiveRun}``; of several runs of one document, the newest.
    """
    # the batch runs' tags, imported here: backfill and the IO manager load the build's code
    from kb_assets.backfill import RANGE_END_TAG
    from kb_assets.io_manager import RANGE_START_TAG

    runs = instance.get_runs(filters=dg.RunsFilter(statuses=list(LIVE_STATUSES)))
    live: dict[str, LiveRun] = {}
    order: list[str] | None = None
    position: dict[str, int] = {}
    for run in runs:  # newest first
        if _close_if_abandoned(instance, run):
            continue
        doc_id = run.tags.get(PARTITION_TAG)
        first, last = run.tags.get(RANGE_START_TAG), run.tags.get(RANGE_END_TAG)
        if doc_id:
            live.setdefault(doc_id, _live(run))
        elif first and last:
            if order is None:
                order = list(
                    partition_order
                    if partition_order is not None
                    else instance.get_dynamic_partitions(DOCUMENTS)
                )
                position = {key: index for index, key in enumerate(order)}
            if first in position and last in position:
                for doc in order[position[first] : position[last] + 1]:
                    live.setdefault(doc, _live(run))
    return live


def live_build_of(instance: dg.DagsterInstance, doc_id: str) -> LiveRun | None:
    """The newest live single-partition run of ``doc_id`` (one run query by its
    ``PARTITION_TAG``), after closing its abandoned ones; ``None`` when there is none. Range
    runs are not seen here (``builds_in_progress`` sees them)."""
    runs = instance.get_runs(
        filters=dg.RunsFilter(tags={PARTITION_TAG: doc_id}, statuses=list(LIVE_STATUSES))
    )
    for run in runs:
        if not _close_if_abandoned(instance, run):
            return _live(run)
    return None


def _live(run: dg.DagsterRun) -> LiveRun:
    return LiveRun(run.run_id, run.status.value.lower().replace("_", " "))
