"""The builds the upload page shows, read from the Dagster instance: the ``build_documents``
runs of the last hours by their partition tag (the ``doc_id``), each with one row per asset
step (state, attempts, failure reason) from the run's step events, and the number of the
document version it builds (``run_version``).

A step's ``state`` is one of ``STEP_STATES``: ``waiting`` (the run has not reached it),
``running``, ``retrying`` (it failed and Dagster's retry policy will run it again),
``succeeded``, ``failed``, ``skipped`` (Dagster skipped it), ``not run`` (the run ended
before it), ``reused`` (a re-execution from failure kept the parent run's output) or ``not
selected`` (a rebuild of one asset leaves the others as they are). A failed step is
``refused`` when it failed with a ``dagster.Failure``: every corpus asset raises one only to
refuse its input (``allow_retries=False``: a scanned or damaged PDF, Markdown with no text,
outputs of another version) with a reason that says what to do, so running the step again on
the same input fails the same way and the page offers no retry for it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

import dagster as dg

from kb_assets.constants import BUILD_JOB, CORPUS_ASSETS, MARKDOWN, PARTITION_TAG
from kb_shared.stores.catalog import Catalog, DocumentRow, DocumentVersionRow, serving_version

#: Every state a step row can show (module docstring).
STEP_STATES = (
    "waiting", "running", "retrying", "succeeded", "failed", "skipped", "not run", "reused",
    "not selected",
)

#: The step events that change a step's row.
STEP_EVENTS = {
    dg.DagsterEventType.STEP_START,
    dg.DagsterEventType.STEP_RESTARTED,
    dg.DagsterEventType.STEP_UP_FOR_RETRY,
    dg.DagsterEventType.STEP_SUCCESS,
    dg.DagsterEventType.STEP_FAILURE,
    dg.DagsterEventType.STEP_SKIPPED,
}

_STATE_AFTER = {
    dg.DagsterEventType.STEP_START: "running",
    dg.DagsterEventType.STEP_RESTARTED: "running",
    dg.DagsterEventType.STEP_UP_FOR_RETRY: "retrying",
    dg.DagsterEventType.STEP_SUCCESS: "succeeded",
    dg.DagsterEventType.STEP_FAILURE: "failed",
    dg.DagsterEventType.STEP_SKIPPED: "skipped",
}

#: Run statuses after which nothing more happens.
FINISHED = {
    dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED,
}

#: The most runs one listing reads (newest first).
RUN_LIMIT = 200

#: The ``markdown`` step's metadata entry naming the version it converted
#: (``kb_assets.assets.markdown``).
VERSION_METADATA = "document_version"


def failure_message(data: Any) -> str:
    """The reason in a step's failure or retry data (``StepFailureData``/``StepRetryData``):
    a ``Failure``'s description (the converter's reason) when there is one, else the last
    line of the innermost error's message (the reading of ``operations.failure_reason``)."""
    user = getattr(data, "user_failure_data", None)
    if user is not None and user.description:
        return user.description
    error = data.error
    if error is None:
        return "failed (see the run's event log in the Dagster UI)"
    while error.cause is not None:
        error = error.cause
    lines = (error.message or "").strip().splitlines()
    return lines[-1] if lines else error.cls_name or "failed"


def planned_steps(run: dg.DagsterRun) -> list[str]:
    """The corpus assets ``run`` executes, in build order: its re-execution step keys, else
    its asset selection, else all of ``CORPUS_ASSETS``."""
    if run.step_keys_to_execute:
        wanted = set(run.step_keys_to_execute)
    elif run.asset_selection:
        wanted = {key.path[-1] for key in run.asset_selection}
    else:
        wanted = set(CORPUS_ASSETS)
    return [asset for asset in CORPUS_ASSETS if asset in wanted]


def step_rows(
    instance: dg.DagsterInstance, run: dg.DagsterRun, entries: Iterable[Any] | None = None
) -> list[dict[str, Any]]:
    """One row per corpus asset: ``{"asset", "state", "attempts", "reason", "refused"}``
    (module docstring); ``attempts`` counts the step's starts (1 + its retries). ``entries``:
    the run's event log entries when already read (others than step events are skipped)."""
    planned = planned_steps(run)
    rows: dict[str, dict[str, Any]] = {}
    for asset in CORPUS_ASSETS:
        if asset in planned:
            state = "waiting"
        else:
            state = "reused" if run.parent_run_id else "not selected"
        rows[asset] = {"asset": asset, "state": state, "attempts": 0, "reason": "",
                       "refused": False}
    if entries is None:
        entries = instance.all_logs(run.run_id, of_type=STEP_EVENTS)
    for entry in entries:
        event = entry.dagster_event
        if event is None or event.event_type not in STEP_EVENTS or event.step_key not in rows:
            continue
        row = rows[event.step_key]
        row["state"] = _STATE_AFTER[event.event_type]
        if event.event_type in (dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_RESTARTED):
            row["attempts"] += 1
        if event.event_type == dg.DagsterEventType.STEP_FAILURE:
            row["reason"] = failure_message(event.step_failure_data)
            row["refused"] = event.step_failure_data.user_failure_data is not None
        if event.event_type == dg.DagsterEventType.STEP_UP_FOR_RETRY:
            row["reason"] = failure_message(event.step_retry_data)
    if run.status in FINISHED:
        for row in rows.values():
            if row["state"] in ("waiting", "running", "retrying"):
                row["state"] = "not run"
    return [rows[asset] for asset in CORPUS_ASSETS]


def is_corpus_run(run: dg.DagsterRun) -> bool:
    """Whether ``run`` builds a document: it has a partition tag and is the build job or
    materialises corpus assets (a materialisation launched from the Dagster UI's asset
    pages runs under another job name)."""
    if not run.tags.get(PARTITION_TAG):
        return False
    if run.job_name == BUILD_JOB:
        return True
    return any(key.path[-1] in CORPUS_ASSETS for key in run.asset_selection or ())


def run_summary(
    instance: dg.DagsterInstance, record: Any, dagster_url: str
) -> dict[str, Any]:
    """One run (a ``RunRecord``) as the page shows it: id, ``doc_id``, status, times (ISO
    8601, UTC), parent run, link to the run in the Dagster UI, and its step rows."""
    run: dg.DagsterRun = record.dagster_run
    entries = instance.all_logs(
        run.run_id, of_type={*STEP_EVENTS, dg.DagsterEventType.ASSET_MATERIALIZATION}
    )
    steps = step_rows(instance, run, entries)
    failed = next((s for s in steps if s["state"] == "failed"), None)
    return {
        "run_id": run.run_id,
        "doc_id": run.tags.get(PARTITION_TAG),
        "version": converted_version(entries),
        "status": run.status.value.lower(),
        "finished": run.status in FINISHED,
        "created": _iso(record.create_timestamp),
        "parent_run_id": run.parent_run_id,
        "rebuild": not run.parent_run_id and len(planned_steps(run)) < len(CORPUS_ASSETS),
        "url": f"{dagster_url.rstrip('/')}/runs/{run.run_id}",
        "steps": steps,
        "reason": f"{failed['asset']}: {failed['reason']}" if failed else "",
    }


def converted_version(entries: Iterable[Any]) -> int | None:
    """The version number the run's ``markdown`` step converted (its ``VERSION_METADATA``),
    or ``None`` before that step materialised (or in a run without it)."""
    for entry in entries:
        event = entry.dagster_event
        if event is None or event.event_type != dg.DagsterEventType.ASSET_MATERIALIZATION:
            continue
        materialization = event.step_materialization_data.materialization
        if materialization.asset_key.path[-1] != MARKDOWN:
            continue
        value = materialization.metadata.get(VERSION_METADATA)
        if value is not None and isinstance(value.value, int):
            return value.value
    return None


def run_version(
    summary: dict[str, Any], versions: list[DocumentVersionRow]
) -> int | None:
    """The version a run builds: what its ``markdown`` step converted, else the one
    ``version_to_build`` picks (the newest) among the ``versions`` added by the run's
    creation (``None`` when no version is known: a document deleted since)."""
    if summary.get("version") is not None:
        return summary["version"]
    created = dt.datetime.fromisoformat(summary["created"]) if summary.get("created") else None
    before = [v for v in versions if created is None or _aware(v.added_at) <= created]
    chosen = before or versions
    return chosen[-1].version if chosen else None


def _iso(value: dt.datetime | float | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        value = dt.datetime.fromtimestamp(value, tz=dt.UTC)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.isoformat()


def recent_builds(
    instance: dg.DagsterInstance,
    catalog: Catalog,
    *,
    hours: float,
    dagster_url: str,
    now: dt.datetime | None = None,
    finished: dict[str, dict[str, Any]] | None = None,
    names: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The documents built, or added and waiting for a build, in the last ``hours``, newest
    first: ``{"doc_id", "name", "status", "reason", "added", "version", "serving_version",
    "runs"}`` with the document's catalog status and failure reason and its corpus runs of
    that window (``is_corpus_run``; newest first, ``run_summary`` each, its ``version`` from
    ``run_version``). ``version`` is the number of the version the newest run builds, or
    without a run the one a build will make (the newest); ``None`` when unknown.
    ``serving_version`` is the number of the version kb serves (``None`` while none does):
    while a new version waits or builds beside it, ``status`` (``ready``) is the served
    version's, not ``version``'s. A document added without a run yet has ``runs == []``; a
    run whose document was deleted since is listed with status ``deleted`` under the name it
    had when ``names`` knew it, else under its ``doc_id``.

    Args:
        finished: summaries of finished runs by run id, reused and filled in (a finished
            run's events no longer change), so a page polling every few seconds reads each
            finished run's event log once.
        names: document names by ``doc_id``, read and filled in from the catalog (the
            catalog row goes with a delete; the runs stay), kept while a document is in the
            catalog or has runs in the window.
    """
    since = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(hours=hours)
    records = instance.get_run_records(
        filters=dg.RunsFilter(created_after=since), limit=RUN_LIMIT
    )
    by_doc: dict[str, list[dict[str, Any]]] = {}
    seen: set[str] = set()
    for record in records:
        run = record.dagster_run
        if not is_corpus_run(run):
            continue
        seen.add(run.run_id)
        summary = finished.get(run.run_id) if finished is not None else None
        if summary is None:
            summary = run_summary(instance, record, dagster_url)
            if finished is not None and summary["finished"]:
                finished[run.run_id] = summary
        by_doc.setdefault(summary["doc_id"], []).append(summary)
    if finished is not None:
        for gone in set(finished) - seen:  # out of the window: forget it
            finished.pop(gone, None)
    rows = {r.doc_id: r for r in catalog.list_documents()}
    if names is not None:
        names.update((doc, row.name) for doc, row in rows.items())
        for gone in set(names) - set(rows) - set(by_doc):  # neither listed nor in the catalog
            names.pop(gone, None)
    recent = [r for r in rows.values() if _aware(r.created_at) >= since and r.doc_id not in by_doc]
    listed = [(rows.get(doc), doc, runs) for doc, runs in by_doc.items()]
    listed += [(row, row.doc_id, []) for row in recent]
    builds = [
        _document(
            row, doc, runs, catalog.versions(doc) if row else [],
            (names or {}).get(doc, doc),
        )
        for row, doc, runs in listed
    ]
    return sorted(builds, key=_newest, reverse=True)


def _aware(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def _document(
    row: DocumentRow | None,
    doc: str,
    runs: Iterable[dict[str, Any]],
    versions: list[DocumentVersionRow],
    known_name: str,
) -> dict[str, Any]:
    shown = [{**run, "version": run_version(run, versions)} for run in runs]
    newest = versions[-1].version if versions else None
    served = serving_version(versions)
    return {
        "doc_id": doc,
        "name": row.name if row else known_name,
        "status": row.status if row else "deleted",
        "reason": (row.failure_reason or "") if row else "",
        "added": _iso(row.created_at) if row else None,
        "version": shown[0]["version"] if shown else newest,
        "serving_version": served.version if served is not None else None,
        "runs": shown,
    }


def _newest(build: dict[str, Any]) -> str:
    times = [r["created"] or "" for r in build["runs"]] + [build["added"] or ""]
    return max(times)
