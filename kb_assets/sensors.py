"""The intake sensor: it only reads, and asks for runs.

Each tick (1) requests one ``add_documents`` run for the documents (.pdf, .md, .txt) that appeared in
``KB_HOME/inbox/`` since the last tick — the run admits them and moves them to
``inbox/added`` or ``inbox/refused`` — and (2) requests a build run for every pending document
whose partition exists, and for every document whose newest version is pending, except a
document a live run builds already (a ``kb build`` in a terminal, a request still queued:
``live_runs.builds_in_progress``, one run query a tick). The sensor itself writes nothing:
no catalog row, no blob, no file move, no partition — except that each tick first finishes
what a killed ``kb`` process left half done (``recover``), as ``kb build`` does.
"""

# No `from __future__ import annotations` in asset, op and sensor modules: Dagster reads the
# parameter annotations as classes when it decorates them, to find config and resources.

import hashlib
import json
import time
from pathlib import Path

import dagster as dg

from kb_assets.constants import ADD_JOB, BUILD_JOB, DOCUMENTS, DocumentStatus
from kb_assets.intake import is_document_file
from kb_assets.jobs import add_documents_job, build_documents_job
from kb_assets.live_runs import builds_in_progress
from kb_assets.operations import recover_interrupted
from kb_assets.resources import StoresResource
from kb_shared.errors import StoreError
from kb_shared.stores.catalog import new_version_waits


def inbox_key(path: Path) -> str:
    """Identity of one inbox file as seen now: ``name:size:mtime_ns``. A file replaced under
    the same name (new size or time) is a new file; a link that leads nowhere is known by
    the link itself (the intake refuses links)."""
    try:
        stat = path.stat()
    except OSError:
        stat = path.lstat()
    return f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}"


#: An inbox file last written less than this long ago (seconds) may still be being copied in
#: (a copy updates the file's modification time as it writes): the sensor leaves it for a
#: later tick, so a half-copied PDF is not admitted as a truncated document.
INBOX_SETTLE_SECONDS = 10.0


def inbox_files(inbox: Path, now: float | None = None) -> list[Path]:
    """The documents (.pdf, .md, .txt) directly in the inbox (its ``added``/``refused`` folders
    are not scanned) that nothing has written to for ``INBOX_SETTLE_SECONDS`` before ``now``
    (POSIX seconds; default the current time)."""
    if not inbox.is_dir():
        return []
    now = time.time() if now is None else now
    return sorted(p for p in inbox.iterdir() if is_document_file(p) and _settled(p, now))


def _settled(path: Path, now: float) -> bool:
    try:
        written = path.stat().st_mtime
    except OSError:  # a link that leads nowhere: nothing is being written to it
        return True
    return now - written >= INBOX_SETTLE_SECONDS


#: A ``deleting`` document whose delete started less than this long ago (seconds) may still
#: be in the hands of a live ``kb delete``: the sensor leaves it for that command (a delete
#: takes seconds; ``kb build`` finishes it at once).
DELETE_GRACE_SECONDS = 600

#: Documents a tick's log line names when it leaves documents to live runs (the count is
#: always given).
LOGGED_DOCUMENTS = 10


def recover(context: dg.SensorEvaluationContext, stores: StoresResource) -> None:
    """Finish what a killed ``kb`` process left half done before requesting runs
    (``operations.recover_interrupted``: dead runs closed, a killed delete or version switch
    finished), so that with ``kb ui``/``kb demo`` running nobody has to type ``kb build`` for it
    (issue 16, crash recovery). A tick with nothing to recover costs a run query, a catalog
    read and a walk of a local blob store: ~0.16 s at 1,000 documents on a busy machine
    (benchmarks/results/sensor-recovery-2026-12-01.md). A store that fails is logged and left
    for the next tick; the intake goes on."""
    try:
        closed = recover_interrupted(
            stores, context.instance, delete_grace_seconds=DELETE_GRACE_SECONDS
        )
    except (StoreError, OSError) as exc:
        context.log.warning(
            "could not finish an interrupted operation (the next tick retries): %s", exc
        )
        return
    if closed:
        context.log.info(
            "removed the leftovers of %d interrupted version switch(es)", len(closed)
        )


@dg.sensor(
    jobs=[add_documents_job, build_documents_job],
    minimum_interval_seconds=15,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Requests an add_documents run for new documents in KB_HOME/inbox/ (the run moves them to "
        "inbox/added or inbox/refused with a .reason.txt) and a build run for every pending "
        "document."
    ),
)
def intake_sensor(context: dg.SensorEvaluationContext, stores: StoresResource) -> dg.SensorResult:
    """One tick; reads the inbox folder, the catalog, the partition set and the live runs, and
    writes nothing but what ``recover`` finishes of an interrupted run, delete or version
    switch. A document with a live run is not requested; the first tick after that run ends
    finds it ready (or failed, and leaves it as a failed build).

    Cursor: JSON ``{"requested": [inbox_key, …]}``, the keys of the inbox files already
    requested that are still in the inbox; a file is requested once while it stays unchanged
    (if its add run fails, re-execute that run from the Dagster UI, or touch the file).
    Run keys make every request idempotent: ``add:<sha256 of the batch's keys>`` for an
    intake, ``doc_id:sha256[:16]:created-at`` for a build (requested once per intake, and again
    only after delete + re-add).
    """
    settings = stores.settings
    recover(context, stores)
    requested = set(json.loads(context.cursor)["requested"]) if context.cursor else set()
    present = {inbox_key(p): p for p in inbox_files(settings.inbox)}
    new = {key: path for key, path in present.items() if key not in requested}
    run_requests: list[dg.RunRequest] = []
    if new:
        keys = sorted(new)
        # a file name whose bytes are not UTF-8 holds lone surrogates (``os.fsdecode``): hashed
        # as its bytes, so the run is requested and the intake refuses the file with the reason
        batch = "\n".join(keys).encode("utf-8", "surrogateescape")
        run_requests.append(
            dg.RunRequest(
                job_name=ADD_JOB,
                run_key="add:" + hashlib.sha256(batch).hexdigest(),
                run_config={
                    "ops": {
                        "add_documents_op": {
                            "config": {
                                "paths": [str(new[k]) for k in keys],
                                "from_inbox": True,
                            }
                        }
                    }
                },
            )
        )
        context.log.info("requested the intake of %d inbox file(s)", len(new))

    pending = stores.catalog().list_documents(status=DocumentStatus.PENDING)
    versions = {
        doc_id: history[-1]
        for doc_id, history in stores.catalog().all_versions().items()
        if new_version_waits(history)
    }
    order = context.instance.get_dynamic_partitions(DOCUMENTS) if pending or versions else []
    partitions = set(order)
    # a document a live run builds (a `kb build` in a terminal, a queued request) is left to it
    live = builds_in_progress(context.instance, order) if pending or versions else {}
    left = sorted(
        {row.doc_id for row in pending if row.doc_id in live} | (versions.keys() & live.keys())
    )
    if left:
        context.log.info(
            "%d document(s) left to the live runs building them: %s",
            len(left),
            ", ".join(f"{doc} (run {live[doc].run_id})" for doc in left[:LOGGED_DOCUMENTS]),
        )
    for row in pending:
        if row.doc_id in live:
            continue
        if row.doc_id not in partitions:
            context.log.warning(
                "%s is pending but has no partition; `kb repair` restores it", row.doc_id
            )
            continue
        run_requests.append(
            dg.RunRequest(
                job_name=BUILD_JOB,
                partition_key=row.doc_id,
                run_key=f"{row.doc_id}:{row.sha256[:16]}:{row.created_at.isoformat()}",
            )
        )
    # a new version of a ready document (issue 12): its own run key, so each is built once;
    # intake writes the version's row before its file, so one whose file is not stored yet
    # waits for the next tick (its build would fail for want of the file)
    for doc_id, newest in versions.items():
        if doc_id in live or not stores.blobs().exists(newest.blob_key):
            continue
        run_requests.append(
            dg.RunRequest(
                job_name=BUILD_JOB,
                partition_key=doc_id,
                run_key=f"{doc_id}:{newest.sha256[:16]}:{newest.added_at.isoformat()}",
            )
        )
    # every file now in the inbox has been requested; files the runs moved out drop off
    return dg.SensorResult(run_requests=run_requests, cursor=json.dumps({"requested": sorted(present)}))
