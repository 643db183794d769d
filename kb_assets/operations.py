"""What the ``kb`` CLI does, as plain functions (tests call these directly).

Every build goes through ``dagster.execute_job`` on the code location's own job, so each
document's run is a real run in the instance under ``KB_HOME/dagster``: the Dagster UI
shows it, its event log records every step, and a failed run can be re-executed from the
failed step (``retry_failed``) without re-running the steps before it.

A build stops on SIGTERM or SIGINT (``kb_assets.stopping``): Dagster interrupts the
running step when Python next gets control, and ``build_documents`` starts no further
document; when the step sits in a long native call (MuPDF layout, a model) that ignores the
signal for ``STOP_GRACE_SECONDS``, a watchdog process ends the build process, which is then
resumable like a crashed one (``kb build`` again).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import dagster as dg

from kb_assets.constants import (
    CORPUS_ASSETS,
    CORPUS_UPSTREAM,
    DOCUMENTS,
    EMBEDDINGS,
    FIGURES,
    GRAPH,
    PARTITION_TAG,
    REBUILDABLE,
    RECORD,
    DocumentStatus,
)
from kb_assets.live_runs import (
    BUILDING_ELSEWHERE,
    PROCESS_TAG,
    builds_in_progress,
    close_abandoned_runs,
    live_build_of,
    queue_is_served,
    this_process,
)
from kb_assets.partitions import MISSING, not_run_after_failures, partition_states
from kb_assets.resources import SettingsResource, StoresResource
from kb_assets.stopping import STOPPED_REASON, build_in_turn
from kb_shared import layout
from kb_shared.errors import DocumentBusyError, DocumentNotFoundError, KbError, StoreError
from kb_shared.stores.catalog import (
    DocumentRow,
    DocumentVersionRow,
    VersionStatus,
    deleting_message,
    new_version_waits,
)

#: Dagster's console log is silenced during CLI builds: the CLI prints its own table with
#: each failure's reason, and the full event log stays in the instance (Dagster UI).
QUIET_LOGGERS = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}

@dataclass
class BuildOutcome:
    """One document's build, as ``kb build`` reports it: ``status`` ready or failed, or
    ``BUILDING_ELSEWHERE`` when a live run of another process builds it (``run_id`` is that
    run's, ``reason`` says what to do)."""

    doc_id: str
    name: str
    status: DocumentStatus | str
    run_id: str
    seconds: float
    pages: int | None = None
    chunks: int | None = None
    entities: int | None = None
    relationships: int | None = None
    figures: int | None = None
    reason: str = ""
    step_seconds: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        return asdict(self)


def resolve_document(stores: StoresResource, ref: str) -> DocumentRow:
    """Find a document by ``doc_id`` or file name (``Catalog.resolve``).

    Raises:
        DocumentNotFoundError: nothing matches; the message lists how to see what exists.
    """
    row = stores.catalog().resolve(ref)
    if row is None:
        raise DocumentNotFoundError(
            f"no document named {ref!r} (by file name or id); `kb status` lists them"
        )
    return row


def run_build(
    instance: dg.DagsterInstance,
    doc_id: str,
    *,
    assets: Sequence[str] | None = None,
    force: Iterable[str] = (),
    settings: SettingsResource | None = None,
    job: Callable[[], dg.JobDefinition] | None = None,
) -> dg.JobExecutionResult:
    """Materialise one document's assets in-process as a run of ``build_documents``.

    Args:
        assets: asset names to materialise (default: all of ``CORPUS_ASSETS``).
        force: asset names whose unchanged-input shortcut is skipped.
        settings: whose ``home`` and ``overrides`` the run's ``stores`` and ``providers``
            resources get as run config (shown on the run in the UI, reused by a
            re-execution); ``None`` = the environment's. Secrets always come from the
            environment.
        job: module-level function returning the build job (tests pass one on fakes);
            ``None``: ``kb_assets.jobs.build_job``.
    """
    selected = list(assets or CORPUS_ASSETS)
    close_abandoned_runs(instance, doc_id)
    return dg.execute_job(
        dg.reconstructable(job or _build_job()),
        instance=instance,
        run_config=run_config_for(selected, force, settings),
        tags={PARTITION_TAG: doc_id, PROCESS_TAG: this_process()},
        asset_selection=[dg.AssetKey(name) for name in selected],
    )


def _build_job() -> Callable[[], dg.JobDefinition]:
    """``kb_assets.jobs.build_job``, imported when a build runs: the jobs load every asset
    (PyMuPDF, the models' code), which ``kb status`` and ``kb add`` do not need."""
    from kb_assets.jobs import build_job  # noqa: PLC0415

    return build_job


def run_config_for(
    selected: Sequence[str], force: Iterable[str], settings: SettingsResource | None
) -> dict[str, Any]:
    """The run config of a build run of ``selected`` assets (``run_build``'s arguments)."""
    ops = {name: {"config": {"force": True}} for name in force if name in selected}
    run_config: dict[str, Any] = dict(QUIET_LOGGERS)
    if ops:
        run_config["ops"] = ops
    if settings is not None:
        launch = settings.launch_config()
        run_config["resources"] = {
            "stores": {"config": launch},
            "providers": {"config": launch},
        }
    return run_config


def recover_interrupted(
    stores: StoresResource, instance: dg.DagsterInstance, *, delete_grace_seconds: float = 0.0
) -> list[str]:
    """Finish what a killed ``kb`` process left half done (issue 16, crash recovery); ``kb
    build`` calls it first. Closes every run whose process is gone (``close_abandoned_runs``),
    and removes the stored data of each superseded or failed version older than the served
    one that still holds some (``record.versions_with_data_left``): a new version's switch
    (``record``) killed after the catalog switched and before the removal ended. A
    superseded version's kept file is not such data. A store it cannot reach leaves that for
    the next build. Returns the cleaned version keys.

    First it finishes every ``kb delete`` that was killed (``finish_interrupted_deletes``;
    one that started less than ``delete_grace_seconds`` ago is left alone).
    """
    close_abandoned_runs(instance)
    finish_interrupted_deletes(stores, instance, grace_seconds=delete_grace_seconds)
    try:
        blobs = stores.blobs()
        blobs.remove_stale_temps()  # the .kb-tmp-* files of a put that was killed
        from kb_assets.assets.record import remove_version_data, versions_with_data_left

        older = []
        for history in stores.catalog().all_versions().values():
            serving = next((v.version for v in history if v.status == VersionStatus.SERVING), 0)
            older += [
                v for v in history
                if v.version < serving
                and v.status in (VersionStatus.SUPERSEDED, VersionStatus.FAILED)
            ]
        leftover = versions_with_data_left(stores, older)
        if leftover:
            remove_version_data(stores, leftover)
    except StoreError:
        return []
    return [v.key for v in leftover]


def retry_failed(
    instance: dg.DagsterInstance,
    run_id: str,
    *,
    job: Callable[[], dg.JobDefinition] | None = None,
) -> dg.JobExecutionResult:
    """Re-execute a failed run from its failed step: steps that succeeded are not re-run
    (``job``: as ``run_build``).

    The parent run's partition tag is passed on explicitly (``execute_job`` does not copy
    it), so the re-execution works on the same document.

    Raises:
        ValueError: no run with that id.
    """
    parent = instance.get_run_by_id(run_id)
    if parent is None:
        raise ValueError(f"no run {run_id!r} in this Dagster instance")
    partition = parent.tags.get(PARTITION_TAG)
    return dg.execute_job(
        dg.reconstructable(job or _build_job()),
        instance=instance,
        run_config=parent.run_config or QUIET_LOGGERS,
        tags={PARTITION_TAG: partition, PROCESS_TAG: this_process()}
        if partition
        else {PROCESS_TAG: this_process()},
        reexecution_options=dg.ReexecutionOptions.from_failure(run_id, instance),
    )


def _kb_error_names() -> set[str]:
    """Class names of ``KbError`` and all its subclasses (imported so far)."""
    names, todo = set(), [KbError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names


def failure_reason(result: dg.JobExecutionResult) -> str:
    """The first failed step's message (a ``Failure`` description when there is one): the
    deepest cause's, or the first kb error's on the way down (its message names the store or
    input and what to do, where the driver error under it does not)."""
    kb_errors = _kb_error_names()
    for event in result.get_step_failure_events():
        data = event.step_failure_data
        if data.user_failure_data is not None and data.user_failure_data.description:
            return f"{event.step_key}: {data.user_failure_data.description}"
        if data.error is not None:
            message = data.error.message.strip().splitlines()[-1] if data.error.message else ""
            cause = data.error.cause
            while cause is not None and cause.cause is not None and cause.cls_name not in kb_errors:
                cause = cause.cause
            if cause is not None and cause.message:
                message = cause.message.strip().splitlines()[-1]
                qualified, _, text = message.partition(": ")
                if cause.cls_name in kb_errors and qualified.endswith("." + cause.cls_name):
                    message = f"{cause.cls_name}: {text}"  # as ``failure_text`` writes it
            return f"{event.step_key}: {message}"
    for check in result.get_asset_check_evaluations():
        if not check.passed and check.severity != dg.AssetCheckSeverity.WARN:
            return f"asset check {check.check_name} failed on {check.asset_key.to_user_string()}"
    return "the run failed (see the Dagster UI for the run's event log)"


def step_seconds(result: dg.JobExecutionResult) -> dict[str, float]:
    """``seconds`` metadata of each materialised asset in the run."""
    seconds: dict[str, float] = {}
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        value = materialization.metadata.get("seconds")
        if value is not None:
            seconds[materialization.asset_key.path[-1]] = float(value.value)
    return seconds


def build_documents(
    stores: StoresResource,
    instance: dg.DagsterInstance,
    doc_ids: Sequence[str],
    *,
    assets: Sequence[str] | None = None,
    force: Iterable[str] = (),
    on_done: Callable[[BuildOutcome], None] | None = None,
    job: Callable[[], dg.JobDefinition] | None = None,
    workers: int = 1,
) -> list[BuildOutcome]:
    """Build each document (in turn, or ``workers`` at once), its runs configured with
    ``stores``' settings; returns one outcome per document, in the order of ``doc_ids`` (never
    raises for a document's failure — its reason is in the outcome, and the run's failure hook
    put it on the catalog row).

    ``job``: as ``run_build`` (``None``: its default). ``kb_assets.backfill.build_batches`` builds several documents
    per run instead. ``workers`` > 1: that many documents at once, each in a worker process
    (``kb_assets.build_workers``; ``job`` must then be importable there); capped by the
    documents that need a run, so 1 of them is built here as with ``workers`` = 1.

    A document without a Dagster partition (the instance was reset) is not run: its outcome
    says to run ``kb repair``; nor is a ``deleting`` one (its outcome says to finish the delete);
    nor one a live run of another process builds (the intake sensor's, another ``kb build``'s:
    ``live_runs``), whose outcome has status ``BUILDING_ELSEWHERE``, that run's id and what to
    do. Live runs are read once at the start and once more for each document just before it
    is built (a run requested meanwhile); a run whose process is gone is closed, not waited for.

    SIGTERM or SIGINT stops the build (``stopping.build_in_turn``): the documents in progress
    get ``STOPPED_REASON`` and no further document is started; the outcomes so far are returned.
    """
    order = instance.get_dynamic_partitions(DOCUMENTS)
    known = set(order)
    live = builds_in_progress(instance, order)
    queued = any(run.status == "queued" for run in live.values())
    queue_served = not queued or queue_is_served(instance)

    def not_built(doc_id: str) -> BuildOutcome | None:
        """The outcome of a document that is not to be run now, or ``None``."""
        try:
            row = stores.catalog().find_by_doc_id(doc_id)
            gone = row is None
        except StoreError:  # an outage: the run itself fails with the catalog's reason
            row, gone = None, False
        name = row.name if row else doc_id
        elsewhere = live.get(doc_id) or (
            live_build_of(instance, doc_id) if doc_id in known else None
        )
        if elsewhere is not None:
            return BuildOutcome(
                doc_id=doc_id, name=name, status=BUILDING_ELSEWHERE,
                run_id=elsewhere.run_id, seconds=0.0, reason=elsewhere.reason(queue_served),
            )
        if row is not None and row.status == DocumentStatus.DELETING:
            return BuildOutcome(
                doc_id=doc_id, name=name, status=DocumentStatus.FAILED, run_id="",
                seconds=0.0, reason=deleting_message(row),
            )
        if gone:  # `kb delete` finished while the documents before it were built
            return BuildOutcome(
                doc_id=doc_id, name=name, status=DocumentStatus.FAILED, run_id="",
                seconds=0.0, reason="it is no longer in the catalog (deleted while this build "
                "ran); nothing was built",
            )
        if doc_id not in known:
            return BuildOutcome(
                doc_id=doc_id, name=name, status=DocumentStatus.FAILED, run_id="",
                seconds=0.0,
                reason="it has no Dagster partition (was KB_HOME/dagster reset?); run `kb repair`",
            )
        return None

    force = tuple(force)
    if workers > 1:
        workers = min(workers, sum(1 for doc_id in doc_ids if not_built(doc_id) is None))
    if workers > 1:
        from kb_assets.build_workers import build_in_workers  # noqa: PLC0415

        return build_in_workers(
            stores, instance, doc_ids, workers=workers, not_built=not_built, assets=assets,
            force=force, on_done=on_done, job=job,
        )

    def build_alone(docs: Sequence[str]) -> list[BuildOutcome]:
        """The outcome of the one document of ``docs``, run or not."""
        (doc_id,) = docs
        return [not_built(doc_id) or build_one(
            stores, instance, doc_id, assets=assets, force=force, job=job
        )]

    return build_in_turn(([doc_id] for doc_id in doc_ids), build_alone, on_done)


def build_one(
    stores: StoresResource,
    instance: dg.DagsterInstance,
    doc_id: str,
    *,
    assets: Sequence[str] | None,
    force: tuple[str, ...],
    job: Callable[[], dg.JobDefinition] | None = None,
) -> BuildOutcome:
    """Build one document in its own run (``run_build``) and report its outcome."""
    started = time.perf_counter()
    # None passes no job at all, so run_build's default applies, or the default of a wrapped
    # run_build (tests/stores/test_outages.py gives one its fake-provider job that way)
    chosen = {} if job is None else {"job": job}
    result = run_build(instance, doc_id, assets=assets, force=force, settings=stores, **chosen)
    seconds = round(time.perf_counter() - started, 2)
    return outcome_of(stores, doc_id, result, seconds, success=result.success)


def outcome_of(
    stores: StoresResource,
    doc_id: str,
    result: dg.JobExecutionResult,
    seconds: float,
    *,
    success: bool,
) -> BuildOutcome:
    """One document's outcome of ``result`` (its own run, or its batch's with ``success``
    saying whether the document came through)."""
    row = _find_row(stores, doc_id)
    common: dict[str, Any] = {
        "doc_id": doc_id,
        "name": row.name if row else doc_id,
        "run_id": result.run_id,
        "seconds": seconds,
        "pages": row.pages if row else None,
        "step_seconds": step_seconds(result),
    }
    if success:
        return BuildOutcome(
            status=DocumentStatus.READY,
            chunks=row.chunk_count if row else None,
            entities=row.entity_count if row else None,
            relationships=row.relationship_count if row else None,
            figures=row.figure_count if row else None,
            **common,
        )
    if was_interrupted(result):
        reason = STOPPED_REASON
    else:
        reason = row.failure_reason if row and row.failure_reason else failure_reason(result)
    return BuildOutcome(status=DocumentStatus.FAILED, reason=reason, **common)


def _find_row(stores: StoresResource, doc_id: str) -> DocumentRow | None:
    """The document's catalog row, or ``None`` when it is unknown or the catalog cannot be
    read (a database outage: the run itself then fails with the catalog's reason)."""
    try:
        return stores.catalog().find_by_doc_id(doc_id)
    except StoreError:
        return None


def was_interrupted(result: dg.JobExecutionResult) -> bool:
    """Whether a stop signal ended the run: a step failed with Dagster's
    ``DagsterExecutionInterruptedError`` (what its handler raises in a step), or the run was
    canceled."""
    if result.dagster_run.status == dg.DagsterRunStatus.CANCELED:
        return True
    return any(
        event.step_failure_data.error is not None
        and event.step_failure_data.error.cls_name == "DagsterExecutionInterruptedError"
        for event in result.get_step_failure_events()
    )


def documents_to_build(stores: StoresResource, *, everything: bool = False) -> list[str]:
    """Ids of pending and failed documents, and of ready ones whose newest version is
    pending (``kb add --new-version`` waits for a build); every document with
    ``everything``. Never a ``deleting`` one (``delete_document``)."""
    catalog = stores.catalog()
    versions = catalog.all_versions()
    return [
        r.doc_id
        for r in catalog.list_documents()
        if r.status != DocumentStatus.DELETING
        and (
            everything
            or r.status in (DocumentStatus.PENDING, DocumentStatus.FAILED)
            or new_version_waits(versions.get(r.doc_id) or [])
        )
    ]


def rebuild_selection(asset: str) -> list[str]:
    """Assets a ``kb rebuild ASSET`` run materialises: the asset and ``record``.

    Raises:
        ValueError: ``asset`` is not one of ``REBUILDABLE``.
    """
    if asset not in REBUILDABLE:
        raise ValueError(f"can rebuild {', '.join(REBUILDABLE)}; not {asset!r}")
    return [asset, RECORD]


#: What ``kb rebuild embeddings --all --reset`` re-materialises: everything that holds
#: vectors of the embedding model (chunk and figure points, entity-name vectors) and record.
RESET_SELECTION = [EMBEDDINGS, GRAPH, FIGURES, RECORD]


def reset_for_new_model(stores: StoresResource) -> tuple[bool, int]:
    """Drop the vector index and clear the graph so vectors of another embedding model can
    be stored (``EmbeddingMismatchError`` otherwise refuses to mix them). The caller then
    rebuilds ``RESET_SELECTION`` for every ready document; Markdown and chunks are kept.

    Returns:
        ``(whether an index was dropped, relationships removed from the graph)``.
    """
    dropped = stores.drop_vectors()
    graph = stores.graph()
    graph.ensure_schema(None)
    removed = graph.clear()
    return dropped, removed.relationships


@dataclass
class DeleteReport:
    """What ``delete_document`` removed; ``resumed``: the document was already ``deleting``
    (this finished a delete that was killed or failed half way)."""

    doc_id: str
    name: str
    vectors: int
    relationships: int
    orphan_entities: int
    blobs: int
    partition: bool
    resumed: bool = False


def delete_document(
    stores: StoresResource, instance: dg.DagsterInstance, ref: str
) -> DeleteReport:
    """Remove a document everywhere. First, in one committed catalog write, its status becomes
    ``deleting`` (``Catalog.mark_deleting``): from then on the MCP server serves none of it and
    no build starts it. Then its vectors, graph edges (then orphan entities), blobs, the
    Dagster partition, and last the catalog row. Every step removes only what is still there,
    so a delete that fails or is killed half way is finished by running it again (or by ``kb
    build``: ``finish_interrupted_deletes``).

    A document that a live run builds (``live_runs.builds_in_progress``: a sensor's, another
    ``kb build``'s, the upload page's) is refused before anything changes: that run would
    write its points, edges and figures after they were removed, with no row left to find
    them by.

    Raises:
        DocumentNotFoundError: unknown name or id.
        DocumentBusyError: a live run builds it; the message names the run.
        StoreError / StoreUnavailableError: a store failed; what was removed stays removed
            and the document stays ``deleting``.
    """
    row = resolve_document(stores, ref)
    doc = row.doc_id
    building = builds_in_progress(instance).get(doc)
    if building is not None:
        raise DocumentBusyError(
            f"{row.name} is being built by run {building.run_id} ({building.status}); delete "
            "it when that run has ended (`kb status` shows it), or terminate the run in the "
            "Dagster UI first"
        )
    resumed = row.status == DocumentStatus.DELETING
    if not resumed:
        stores.catalog().mark_deleting(doc)
    index = stores.existing_vectors()
    vectors = index.delete_document(doc) if index is not None else 0
    graph = stores.graph()
    graph.ensure_schema(None)
    removed = graph.delete_document(doc)
    blobs = stores.blobs()
    count = 0
    from kb_assets.io_manager import StepRecords  # PyArrow: only deletes and builds need it

    for key in [row.blob_key, layout.snapshot_key(doc), *StepRecords.keys(doc)]:
        if key and blobs.exists(key):
            blobs.delete(key)
            count += 1
    figure_keys = blobs.list(layout.figures_prefix(doc))
    for key in figure_keys:
        blobs.delete(key)
    count += len(figure_keys)
    relationships, entities = removed.relationships, removed.entities
    history = stores.catalog().versions(doc)
    if len(history) > 1:  # version 1's file, kept after it was superseded (record asset)
        count += int(blobs.delete(history[0].blob_key))
    for version in history[1:]:  # versions 2+ have their own keys
        vectors += index.delete_document(version.key) if index is not None else 0
        more = graph.delete_document(version.key)
        relationships, entities = relationships + more.relationships, entities + more.entities
        count += int(blobs.delete(version.blob_key))
        count += blobs.delete_prefix(layout.figures_prefix(version.key))
        count += int(blobs.delete(layout.snapshot_key(version.key)))
    had_partition = instance.has_dynamic_partition(DOCUMENTS, doc)
    if had_partition:  # before the row, so a delete killed after it can be run again
        instance.delete_dynamic_partition(DOCUMENTS, doc)
    stores.catalog().delete(doc)
    return DeleteReport(
        doc_id=doc,
        name=row.name,
        vectors=vectors,
        relationships=relationships,
        orphan_entities=entities,
        blobs=count,
        partition=had_partition,
        resumed=resumed,
    )


def finish_interrupted_deletes(
    stores: StoresResource, instance: dg.DagsterInstance, *, grace_seconds: float = 0.0
) -> list[DeleteReport]:
    """Finish the delete of every ``deleting`` document (a ``kb delete`` killed or failed half
    way). Safe to do unasked: only ``kb delete`` sets that status, so the user's decision is
    already on record; the document is no longer served, and every step of
    ``delete_document`` is idempotent with the catalog row last. A store it cannot reach
    leaves the rest for the next ``kb build`` or ``kb delete``. Returns one report per
    finished delete.

    ``grace_seconds``: leave a delete alone that started less than this long ago (its row's
    ``updated_at``), so a caller running beside a live ``kb delete`` (the intake sensor)
    does not race it.
    """
    try:
        rows = stores.catalog().list_documents(status=DocumentStatus.DELETING)
    except StoreError:
        return []
    started_before = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=grace_seconds)
    reports = []
    for row in rows:
        since = row.updated_at
        if since.tzinfo is None:  # SQLite hands back naive UTC timestamps
            since = since.replace(tzinfo=dt.timezone.utc)
        if grace_seconds and since > started_before:
            continue
        try:
            reports.append(delete_document(stores, instance, row.doc_id))
        except (StoreError, OSError, DocumentNotFoundError, DocumentBusyError):
            continue  # unreachable, gone meanwhile, or still being built: the next call
    return reports


def next_version(
    history: Sequence[DocumentVersionRow], assets: dict[str, str]
) -> dict[str, Any] | None:
    """The version of a served document newer than the one it serves, when there is one:
    ``{"version": n, "state": "pending" | "building" | "failed", "reason": str}`` (building:
    pending with some asset ``in_progress`` in ``assets``, ``document_status``'s per-asset
    states; reason: the failed build's). ``None`` for a document no version of which serves
    (its own status says it) or whose newest version serves."""
    served = next((v for v in history if v.status == VersionStatus.SERVING), None)
    newest = history[-1] if history else None
    if served is None or newest is None or newest.version <= served.version:
        return None
    if newest.status not in (VersionStatus.PENDING, VersionStatus.FAILED):
        return None
    building = newest.status == VersionStatus.PENDING and "in_progress" in assets.values()
    return {
        "version": newest.version,
        "state": "building" if building else str(newest.status),
        "reason": newest.failure_reason or "",
    }


def status_text(row: dict[str, Any]) -> str:
    """One ``document_status`` row's status as ``kb status`` and the upload page say it: the
    catalog status, its failure reason, the newer version's state (``next_version``), and for
    a document with several versions the one kb serves (``serving_version``, in the words of
    ``kb versions`` and the MCP ``list_documents``), e.g. ``ready (version 2 building); version
    1 serving``, ``ready (version 2 failed: markdown: …); version 1 serving`` or ``ready;
    version 2 serving``. A document with one version reads ``ready`` alone."""
    text = row["status"] + (f" ({row['reason']})" if row["reason"] else "")
    newer = row.get("next_version")
    if newer:
        why = f": {newer['reason']}" if newer["reason"] else ""
        text += f" (version {newer['version']} {newer['state']}{why})"
    served = row.get("serving_version")
    if served and (newer or served > 1):
        text += f"; version {served} serving"
    return text


def document_status(stores: StoresResource, instance: dg.DagsterInstance) -> list[dict[str, Any]]:
    """Every catalog document with its per-asset state (materialized / failed / in progress /
    missing, or not_run: planned by a failed run but never started, ``not_run_after_failures``)
    from the Dagster instance, its counts, whether its partition exists, the number
    of its serving version (``serving_version``, ``None`` while none serves) and a newer
    version being added (``next_version``). Reads only: a missing partition is reported, and
    ``repair_partitions`` restores it."""
    rows = stores.catalog().list_documents()
    versions = stores.catalog().all_versions()
    partitions = set(instance.get_dynamic_partitions(DOCUMENTS))
    keys = [r.doc_id for r in rows if r.doc_id in partitions]
    found = partition_states(instance, CORPUS_ASSETS, keys) if keys else {}
    states = {
        r.doc_id: not_run_after_failures(found[r.doc_id], CORPUS_UPSTREAM)
        if found.get(r.doc_id) else dict.fromkeys(CORPUS_ASSETS, MISSING)
        for r in rows
    }
    return [
        {
            "name": r.name,
            "doc_id": r.doc_id,
            "status": r.status,
            "reason": r.failure_reason or "",
            "pages": r.pages,
            "chunks": r.chunk_count,
            "entities": r.entity_count,
            "relationships": r.relationship_count,
            "figures": r.figure_count,
            "assets": states[r.doc_id],
            "partition": r.doc_id in partitions,
            "serving_version": next(
                (v.version for v in versions.get(r.doc_id, ())
                 if v.status == VersionStatus.SERVING),
                None,
            ),
            "next_version": next_version(versions.get(r.doc_id, ()), states[r.doc_id]),
        }
        for r in rows
    ]


@dataclass
class RepairReport:
    """What ``repair_partitions`` changed: partitions added for catalog documents that had
    none, and partitions removed that had no catalog document."""

    added: list[str]
    removed: list[str]


def repair_partitions(stores: StoresResource, instance: dg.DagsterInstance) -> RepairReport:
    """Make the Dagster partition set equal the catalog's documents (``kb repair``): after
    ``KB_HOME/dagster`` was reset or a delete stopped half-way. Intake and delete keep them
    equal otherwise; nothing else calls this. A ``deleting`` document's partition is left to
    its delete (neither restored nor removed)."""
    rows = stores.catalog().list_documents()
    wanted = {r.doc_id for r in rows if r.status != DocumentStatus.DELETING}
    deleting = {r.doc_id for r in rows} - wanted
    present = set(instance.get_dynamic_partitions(DOCUMENTS))
    added = sorted(wanted - present)
    removed = sorted(present - wanted - deleting)
    if added:
        from kb_assets.intake import register_partitions  # the fetcher's HTTP client with it

        register_partitions(instance, added)
    for doc in removed:
        instance.delete_dynamic_partition(DOCUMENTS, doc)
    return RepairReport(added=added, removed=removed)
