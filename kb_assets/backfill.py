"""Corpus-wide builds in batches: several documents per run, as a Dagster backfill with
``BackfillPolicy.multi_run(KB_BACKFILL_BATCH)`` launches them (``kb_assets.assets.batch`` does
the per-document work inside a run).

A Dagster backfill (``instance.add_backfill``) is executed by the daemon's backfill loop only;
``kb`` on the embedded instance runs no daemon, so ``kb rebuild ASSET --all`` runs the same
runs itself, in this process (``build_batches``): one range run per batch of consecutive
partitions, then each document that failed in its batch alone. With a daemon (``kb ui``,
``dagster dev``, a deployment), a backfill from the asset page runs the same range runs, and
``batch_failures_sensor`` does the second half: each document a finished range run failed is
requested as a run of its own.

Why a run of its own (Dagster 1.13): a step over a partition range that succeeds records every
partition of the range materialised, and a partition shows ``failed`` only when the latest run
that planned it failed (``dagster/_core/storage/partition_status_cache.py``,
``build_failed_and_in_progress_partition_subset``); there is no per-partition failure inside a
range run (dagster-io/dagster#17836, open). So a document failed inside a batch shows
materialised until a single-partition run of it fails (or succeeds: a passing failure heals).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Iterable, Sequence

import dagster as dg

from kb_assets.constants import BUILD_JOB, CORPUS_ASSETS, DOCUMENTS, DocumentStatus
from kb_assets.io_manager import RANGE_START_TAG, StepRecords
from kb_assets.jobs import build_documents_job, build_job
from kb_assets.operations import (
    PROCESS_TAG,
    BuildOutcome,
    build_documents,
    build_one,
    close_abandoned_runs,
    outcome_of,
    run_config_for,
    this_process,
    was_interrupted,
)
from kb_assets.live_runs import builds_in_progress
from kb_assets.partitions import partition_set_snapshot
from kb_assets.resources import SettingsResource, StoresResource
from kb_assets.stopping import STOPPED_REASON, build_in_turn
from kb_shared.errors import StoreError

#: Dagster's run tag of the last partition of a range run (``dagster._core.storage.tags``).
RANGE_END_TAG = "dagster/asset_partition_range_end"

#: Tag of a run ``batch_failures_sensor`` requested: the range run whose failure it repeats.
BATCH_RUN_TAG = "kb/batch_run"

#: Finished range runs ``batch_failures_sensor`` reads per tick (older ones wait a tick).
SENSOR_RUNS_PER_TICK = 100


def default_job() -> dg.JobDefinition:
    """The resolved build job (``kb_assets.jobs.build_job``)."""
    return build_job()


def run_batch_build(
    instance: dg.DagsterInstance,
    first: str,
    last: str,
    *,
    assets: Sequence[str] | None = None,
    force: Iterable[str] = (),
    settings: SettingsResource | None = None,
    job: Callable[[], dg.JobDefinition] = default_job,
) -> dg.JobExecutionResult:
    """Materialise the assets of every document from partition ``first`` to ``last``
    (inclusive, in the order the partitions were added) in one in-process run: the run a
    backfill with ``BackfillPolicy.multi_run`` launches (tags ``RANGE_START_TAG`` and
    ``RANGE_END_TAG``). Each document's failure is its own (``kb_assets.assets.batch``).
    Arguments as ``run_build``."""

    selected = list(assets or CORPUS_ASSETS)
    # Dagster checks the range against the whole partition set many times a run: one read
    # serves it (partitions.partition_set_snapshot; a run adds or deletes no partition).
    with partition_set_snapshot(instance):
        return dg.execute_job(
            dg.reconstructable(job),
            instance=instance,
            run_config=run_config_for(selected, force, settings),
            tags={RANGE_START_TAG: first, RANGE_END_TAG: last, PROCESS_TAG: this_process()},
            asset_selection=[dg.AssetKey(name) for name in selected],
        )


def partition_batches(
    partition_order: Sequence[str], doc_ids: Iterable[str], batch: int
) -> list[list[str]]:
    """Split ``doc_ids`` into runs of a batched build: each a range of consecutive partitions
    (in ``partition_order``, the order they were added) that are all in ``doc_ids``, at most
    ``batch`` long, so no run touches a document that was not asked for. Ids without a
    partition are left out.

    Raises:
        ValueError: ``batch`` is below 1.
    """
    if batch < 1:
        raise ValueError(f"the batch size must be at least 1, not {batch}")
    wanted = set(doc_ids)
    batches: list[list[str]] = []
    current: list[str] = []
    for key in partition_order:
        if key in wanted and len(current) < batch:
            current.append(key)
            continue
        if current:
            batches.append(current)
        current = [key] if key in wanted else []
    if current:
        batches.append(current)
    return batches


def build_batches(
    stores: StoresResource,
    instance: dg.DagsterInstance,
    doc_ids: Sequence[str],
    *,
    assets: Sequence[str] | None = None,
    force: Iterable[str] = (),
    on_done: Callable[[BuildOutcome], None] | None = None,
    batch: int,
    job: Callable[[], dg.JobDefinition] | None = None,
) -> list[BuildOutcome]:
    """Build ``doc_ids`` ``batch`` documents per run (``partition_batches``; a batch of one is
    a single-partition run), what a Dagster backfill with ``BackfillPolicy.multi_run(batch)``
    launches, executed in this process (the embedded instance has no daemon to run a
    backfill). Each document failed in a batch run, or all of a batch whose run failed as a
    whole, is then built again alone (``run_build``), so Dagster records its failure on its
    own partition and the catalog row gets that run's reason. Outcomes come in batch order;
    documents without a partition get the ``kb repair`` outcome of ``build_documents``, and
    documents a live run already builds (the intake sensor's, another ``kb``'s:
    ``live_runs.builds_in_progress``) its ``BUILDING_ELSEWHERE`` outcome, before the batches;
    no batch includes them. SIGTERM/SIGINT: as ``build_documents``. ``job``: as
    ``build_documents`` (``None``: ``run_build``'s default; a batch run: ``default_job``).
    """

    close_abandoned_runs(instance)
    order = instance.get_dynamic_partitions(DOCUMENTS)
    known = set(order)
    force = tuple(force)
    outcomes: list[BuildOutcome] = []
    live = builds_in_progress(instance, order)
    aside = [d for d in doc_ids if d not in known or d in live]
    if aside:  # build_documents says why each is not built here (and builds none of them)
        outcomes += build_documents(stores, instance, aside, on_done=on_done, job=job)
        left = set(aside)
        doc_ids = [d for d in doc_ids if d not in left]
    records = StepRecords(stores.blobs())

    def build_group(docs: Sequence[str]) -> list[BuildOutcome]:
        """The outcomes of one batch: a run of its own for a batch of one."""
        if len(docs) == 1:
            return [build_one(stores, instance, docs[0], assets=assets, force=force, job=job)]
        return _build_batch(stores, instance, records, list(docs), assets, force, job)

    batches = partition_batches(order, doc_ids, batch)
    return outcomes + build_in_turn(batches, build_group, on_done)


def _build_batch(
    stores: StoresResource,
    instance: dg.DagsterInstance,
    records: StepRecords,
    docs: list[str],
    assets: Sequence[str] | None,
    force: tuple[str, ...],
    job: Callable[[], dg.JobDefinition] | None,
) -> list[BuildOutcome]:

    started = time.perf_counter()
    result = run_batch_build(
        instance, docs[0], docs[-1], assets=assets, force=force, settings=stores,
        job=job or default_job,
    )
    seconds = round((time.perf_counter() - started) / len(docs), 2)
    failed = records.run_failures(result.run_id)
    records.clear_run_failures(result.run_id)
    if was_interrupted(result):
        return [
            BuildOutcome(doc_id=d, name=d, status=DocumentStatus.FAILED, run_id=result.run_id,
                         seconds=seconds, reason=STOPPED_REASON)
            for d in docs
        ]
    outcomes = []
    for doc in docs:
        if result.success and doc not in failed:
            outcomes.append(outcome_of(stores, doc, result, seconds, success=True))
        else:  # alone now: its own run, its own failure event and reason
            outcomes.append(build_one(stores, instance, doc, assets=assets, force=force, job=job))
    return outcomes


def is_daemon_batch_run(run: dg.DagsterRun) -> bool:
    """Whether ``run`` is a range run a backfill launched (range tags) and no ``kb`` process
    started (no ``operations.PROCESS_TAG``: ``build_batches`` settles those itself)."""

    return RANGE_START_TAG in run.tags and PROCESS_TAG not in run.tags


def batch_failure_requests(run: dg.DagsterRun, failed: Iterable[str]) -> list[dg.RunRequest]:
    """One single-partition build request per document ``run`` (a finished range run) failed:
    the same assets (its ``asset_selection``, else every corpus asset) and run config, run key
    ``<run id>:<doc_id>`` so each is requested once, tagged ``BATCH_RUN_TAG``."""
    selection = sorted(run.asset_selection or (), key=lambda key: key.to_string()) or [
        dg.AssetKey(name) for name in CORPUS_ASSETS
    ]
    return [
        dg.RunRequest(
            job_name=BUILD_JOB,
            partition_key=doc,
            run_key=f"{run.run_id}:{doc}",
            asset_selection=selection,
            run_config=dict(run.run_config or {}),
            tags={BATCH_RUN_TAG: run.run_id},
        )
        for doc in sorted(failed)
    ]


@dg.sensor(
    jobs=[build_documents_job],
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "After a backfill's batch run finishes, requests a run of its own for each document the "
        "batch failed (so that partition shows failed, with its own reason, instead of "
        "materialised) and removes the batch's failure list."
    ),
)
def batch_failures_sensor(
    context: dg.SensorEvaluationContext, stores: StoresResource
) -> dg.SensorResult:
    """One tick: every backfill range run (``is_daemon_batch_run``) that finished since the
    cursor has its failure list (``StepRecords.run_failures``) read and removed; a run that
    succeeded gets ``batch_failure_requests`` for its failed documents (a run that failed or was
    canceled already shows all its partitions failed). A blob store that cannot be reached
    leaves the cursor where it is, so the next tick reads those runs again.

    Cursor: the update time (POSIX seconds, as text) of the last finished run read.
    """
    after = float(context.cursor) if context.cursor else None
    records = context.instance.get_run_records(
        filters=dg.RunsFilter(
            statuses=[
                dg.DagsterRunStatus.SUCCESS,
                dg.DagsterRunStatus.FAILURE,
                dg.DagsterRunStatus.CANCELED,
            ],
            updated_after=None if after is None else dt.datetime.fromtimestamp(after, dt.UTC),
        ),
        limit=SENSOR_RUNS_PER_TICK,
        order_by="update_timestamp",
        ascending=True,
    )
    steps = StepRecords(stores.blobs())
    requests: list[dg.RunRequest] = []
    cursor = context.cursor
    for record in records:
        run = record.dagster_run
        if is_daemon_batch_run(run):
            try:
                failed = steps.run_failures(run.run_id)
                steps.clear_run_failures(run.run_id)
            except (OSError, StoreError) as error:
                context.log.warning("reading the failures of run %s failed: %s", run.run_id, error)
                break
            if run.status == dg.DagsterRunStatus.SUCCESS and failed:
                requests += batch_failure_requests(run, failed)
                context.log.info(
                    "run %s failed %d document(s) in its batch: each is built alone (%s)",
                    run.run_id, len(failed), ", ".join(sorted(failed)),
                )
        cursor = json.dumps(record.update_timestamp.timestamp())
    return dg.SensorResult(run_requests=requests, cursor=cursor)
