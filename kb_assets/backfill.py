"""Corpus-wide builds in batches: several documents per run, as a Dagster backfill with
``BackfillPolicy.multi_run(KB_BACKFILL_BATCH)`` launches them (``kb_assets.assets.batch`` does
the per-document work inside a run).

A Dagster backfill (``instance.add_backfill``) is executed by the daemon's backfill loop only;
``kb`` on the embedded instance runs no daemon, so ``kb rebuild ASSET --all`` runs the same
runs itself, in this process (``build_batches``): one range run per batch of consecutive
partitions, then each document that failed in its batch alone. With a daemon (``kb ui``,
``dagster dev``, a deployment), a backfill from the asset page runs the same range runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence

import dagster as dg

from kb_assets.constants import CORPUS_ASSETS, DOCUMENTS, DocumentStatus
from kb_assets.definitions import build_job
from kb_assets.io_manager import RANGE_START_TAG, StepRecords
from kb_assets.operations import (
    PROCESS_TAG,
    STOP_GRACE_SECONDS,
    STOPPED_REASON,
    BuildOutcome,
    build_documents,
    build_one,
    close_abandoned_runs,
    outcome_of,
    run_config_for,
    stop_guard,
    this_process,
    was_interrupted,
)
from kb_assets.resources import SettingsResource, StoresResource

#: Dagster's run tag of the last partition of a range run (``dagster._core.storage.tags``).
RANGE_END_TAG = "dagster/asset_partition_range_end"


def run_batch_build(
    instance: dg.DagsterInstance,
    first: str,
    last: str,
    *,
    assets: Sequence[str] | None = None,
    force: Iterable[str] = (),
    settings: SettingsResource | None = None,
    job: Callable[[], dg.JobDefinition] = build_job,
) -> dg.JobExecutionResult:
    """Materialise the assets of every document from partition ``first`` to ``last``
    (inclusive, in the order the partitions were added) in one in-process run: the run a
    backfill with ``BackfillPolicy.multi_run`` launches (tags ``RANGE_START_TAG`` and
    ``RANGE_END_TAG``). Each document's failure is its own (``kb_assets.assets.batch``).
    Arguments as ``run_build``."""
    selected = list(assets or CORPUS_ASSETS)
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
    job: Callable[[], dg.JobDefinition] = build_job,
) -> list[BuildOutcome]:
    """Build ``doc_ids`` ``batch`` documents per run (``partition_batches``; a batch of one is
    a single-partition run), what a Dagster backfill with ``BackfillPolicy.multi_run(batch)``
    launches, executed in this process (the embedded instance has no daemon to run a
    backfill). Each document failed in a batch run, or all of a batch whose run failed as a
    whole, is then built again alone (``run_build``), so Dagster records its failure on its
    own partition and the catalog row gets that run's reason. Outcomes come in batch order;
    documents without a partition get the ``kb repair`` outcome of ``build_documents``.
    SIGTERM/SIGINT: as ``build_documents``.
    """
    order = instance.get_dynamic_partitions(DOCUMENTS)
    known = set(order)
    force = tuple(force)
    outcomes: list[BuildOutcome] = []
    unknown = [d for d in doc_ids if d not in known]
    if unknown:
        outcomes += build_documents(stores, instance, unknown, on_done=on_done, job=job)
    close_abandoned_runs(instance)
    records = StepRecords(stores.blobs())
    with stop_guard(STOP_GRACE_SECONDS) as stop:
        for docs in partition_batches(order, doc_ids, batch):
            if stop.signal is not None:
                break
            if len(docs) == 1:
                done = [build_one(stores, instance, docs[0], assets=assets, force=force, job=job)]
            else:
                done = _build_batch(stores, instance, records, docs, assets, force, job)
            for outcome in done:
                outcomes.append(outcome)
                if on_done is not None:
                    on_done(outcome)
            if any(o.reason == STOPPED_REASON for o in done):
                break
    return outcomes


def _build_batch(
    stores: StoresResource,
    instance: dg.DagsterInstance,
    records: StepRecords,
    docs: list[str],
    assets: Sequence[str] | None,
    force: tuple[str, ...],
    job: Callable[[], dg.JobDefinition],
) -> list[BuildOutcome]:
    started = time.perf_counter()
    result = run_batch_build(
        instance, docs[0], docs[-1], assets=assets, force=force, settings=stores, job=job
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
