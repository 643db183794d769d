"""Batched runs: one run of the corpus assets over a range of document partitions (a backfill
with ``BackfillPolicy.multi_run(N)``, or ``kb``'s own batches: ``operations.build_batches``).

A step of a batched run does each document's work in turn (the same per-document function a
single-partition run calls) and passes on a ``Batch``: the outputs of the documents that
succeeded, which the blob IO manager stores one blob per document, as it does for one. Every
corpus asset's body is ``document_step``'s: ``run_documents`` of its per-document work, which
does one or the other.

One document's failure does not fail the step (Dagster 1.13 has no per-partition outcome for
a step over a range: a step that raises marks every partition of the range failed and skips
every downstream step, and a step that succeeds marks every partition materialised;
``dagster/_core/execution/plan/execute_step.py``, ``_get_output_asset_events``). So the step
catches it, records it on the document's catalog row (``Catalog.fail_version``, the same
reason ``jobs.record_build_failure`` writes for a single run), adds it to the run's failure
list (``StepRecords.add_run_failures``) so later steps of the run leave the document out, and
finishes the others. The failed document's partition then shows the batch's materialisation
with ``failed`` metadata until it is built alone: ``kb``'s batch driver runs it again as a
single-partition run at once, whose failure Dagster records like any other.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from kb_assets.assets.common import BuildConfig, failure_text, version_being_built
from kb_assets.io_manager import Batch, StepRecords
from kb_assets.partitions import partition_set_snapshot
from kb_assets.resources import StoresResource
from kb_shared.errors import StoreError

#: What a per-document function returns: its output event (``Output`` or, for ``record``,
#: ``MaterializeResult``), or its events in order (output, then asset check results).
DocumentEvents = dg.Output | dg.MaterializeResult | Iterable[Any]


def is_batch_run(context: dg.AssetExecutionContext) -> bool:
    """Whether the step runs over a partition range (run tags
    ``dagster/asset_partition_range_start``/``_end``, what a backfill run with more than one
    partition per run gets) rather than one partition (``dagster/partition``)."""
    return context.has_partition_key_range and not context.has_partition_key


@dataclass
class BatchProgress:
    """What a batched step did: per-document outputs, failures and check outcomes.

    Attributes:
        outputs: doc_id -> the document's output (what a single run would have stored).
        failed: doc_id -> reason (``common.failure_text`` form), for documents failed here.
        skipped: documents left out because an earlier step of the run failed them.
        checks: check name -> doc_ids whose check did not pass.
        checked: check name -> number of documents checked.
    """

    outputs: dict[str, Any] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    checks: dict[str, list[str]] = field(default_factory=dict)
    checked: dict[str, int] = field(default_factory=dict)


def record_document_failure(
    stores: StoresResource, doc_id: str, reason: str, *, step: str
) -> None:
    """Mark the version of ``doc_id`` that ``step`` worked on (``common.version_being_built``)
    failed with ``reason``, as the build job's failure hook does for a single run
    (``Catalog.fail_version``). A catalog that cannot be reached leaves the row as it is (the
    run's failure list still has the reason)."""
    try:
        version = version_being_built(stores, doc_id, step)
        if version is not None:
            stores.catalog().fail_version(doc_id, version.version, reason)
    except StoreError:
        return


def document_step(
    work: Callable[..., DocumentEvents],
    *,
    inputs: Sequence[str],
    checks: Sequence[str],
    stored: bool,
) -> Callable[..., Any]:
    """The compute function of a corpus asset whose one document's work is ``work``
    (``common.corpus_asset`` applies it): ``run_documents`` over the step's partition or range.

    ``work`` takes, by name, any of ``context``, ``config``, ``stores``, ``doc_id`` (the
    document's partition key), its other resources and its ``inputs`` (one document's outputs).
    The compute function's signature, which Dagster reads for config, resources and inputs, is
    ``context``, ``config: BuildConfig``, ``stores: StoresResource`` (every corpus asset takes
    ``kb rebuild``'s ``force`` and needs the stores for a batch), then ``work``'s other
    parameters but ``doc_id``, without a return annotation (a batched run returns a ``Batch``).

    Returns:
        a generator function when ``checks`` (the asset yields its output, then its check
        results), else a function returning the output event.
    """
    declared = inspect.signature(work).parameters
    fixed = (("context", dg.AssetExecutionContext), ("config", BuildConfig),
             ("stores", StoresResource))
    parameters = [
        inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation)
        for name, annotation in fixed
    ] + [
        parameter.replace(kind=inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for name, parameter in declared.items()
        if name not in {"doc_id", *(name for name, _ in fixed)}
    ]

    def step(context: dg.AssetExecutionContext, **given: Any) -> Any:
        documents = {name: given.pop(name) for name in inputs}

        def one(doc: str, **of_doc: Any) -> DocumentEvents:
            offered = {"context": context, "doc_id": doc, **given, **of_doc}
            return work(**{name: offered[name] for name in declared})

        return run_documents(context, given["stores"], one, documents, stored=stored, checks=checks)

    def checked_step(context: dg.AssetExecutionContext, **given: Any) -> Iterator[Any]:
        yield from step(context, **given)

    compute = checked_step if checks else step
    functools.update_wrapper(compute, work, updated=())
    compute.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return compute


def run_documents(
    context: dg.AssetExecutionContext,
    stores: StoresResource,
    work: Callable[..., DocumentEvents],
    inputs: Mapping[str, Any],
    *,
    stored: bool,
    checks: Sequence[str],
) -> Any:
    """The body of every corpus asset: ``work(doc_id, **inputs)`` for the step's one
    partition or, in a batched run (``is_batch_run``), ``run_batch`` over each document of
    the range (``inputs`` are then ``Batch``es) and ``batch_events`` of what it did.

    Returns:
        A single-partition run: what ``work`` returns (an event, or a generator of events for
        an asset with checks). A batched run: its one ``Output(Batch)`` or
        ``MaterializeResult`` when ``checks`` is empty, else that and the check results, in
        a list.
    """
    if not is_batch_run(context):
        return work(context.partition_key, **inputs)
    progress = run_batch(context, stores, work, inputs)
    events = batch_events(context, progress, stored=stored, checks=checks)
    return events if checks else events[0]


def run_batch(
    context: dg.AssetExecutionContext,
    stores: StoresResource,
    work: Callable[..., DocumentEvents],
    inputs: Mapping[str, Batch],
) -> BatchProgress:
    """Do ``work(doc_id, **inputs_of_doc)`` for each document of the step's partition range;
    each document's metadata goes on its partition (``context.add_asset_metadata``).

    A document that an earlier step of this run failed is skipped; one whose input is not
    stored, whose work raises, or whose blocking asset check does not pass is failed
    (``record_document_failure``) and added to the run's failure list.
    """
    records = StepRecords(stores.blobs())
    asset = context.asset_key.path[-1]
    earlier = records.run_failures(context.run.run_id)
    progress = BatchProgress()
    # Each document's add_asset_metadata checks its key against the whole partition set: one
    # read of the set serves the step (partitions.partition_set_snapshot).
    with partition_set_snapshot(context.instance):
        for doc in context.partition_keys:
            if doc in earlier:
                progress.skipped.append(doc)
                continue
            missing = [f"{name}: {batch.missing[doc]}" for name, batch in inputs.items()
                       if doc not in batch.outputs]
            if missing:
                _fail(context, stores, progress, doc, asset, f"{asset}: {'; '.join(missing)}")
                continue
            try:
                events = work(doc, **{n: b.outputs[doc] for n, b in inputs.items()})
                events = (
                    [events] if isinstance(events, dg.Output | dg.MaterializeResult)
                    else list(events)
                )
            except Exception as error:  # noqa: BLE001 - one document's failure stays its own
                _fail(context, stores, progress, doc, asset, failure_text(asset, error))
                continue
            _collect(context, stores, progress, doc, events, asset)
    records.add_run_failures(context.run.run_id, progress.failed)
    return progress


def _fail(
    context: dg.AssetExecutionContext,
    stores: StoresResource,
    progress: BatchProgress,
    doc: str,
    asset: str,
    reason: str,
) -> None:
    progress.failed[doc] = reason
    record_document_failure(stores, doc, reason, step=asset)
    context.log.warning("%s failed in this batch: %s", doc, reason)
    context.add_asset_metadata({"failed": reason}, partition_key=doc)


def _collect(
    context: dg.AssetExecutionContext,
    stores: StoresResource,
    progress: BatchProgress,
    doc: str,
    events: list[Any],
    asset: str,
) -> None:
    """Keep one document's output and metadata; fail it on a check that did not pass."""
    failing: list[str] = []
    for event in events:
        if isinstance(event, dg.AssetCheckResult):
            name = event.check_name or ""
            progress.checked[name] = progress.checked.get(name, 0) + 1
            if not event.passed:
                progress.checks.setdefault(name, []).append(doc)
                if event.severity != dg.AssetCheckSeverity.WARN:  # a warning fails nothing
                    failing.append(name)
        elif isinstance(event, dg.Output):
            progress.outputs[doc] = event.value
            context.add_asset_metadata(dict(event.metadata or {}), partition_key=doc)
        elif isinstance(event, dg.MaterializeResult):
            progress.outputs[doc] = None
            context.add_asset_metadata(dict(event.metadata or {}), partition_key=doc)
    if failing:  # its output stays stored, as in a single run whose blocking check fails
        _fail(
            context, stores, progress, doc, asset,
            f"asset check {', '.join(failing)} failed on {asset}",
        )


def batch_events(
    context: dg.AssetExecutionContext,
    progress: BatchProgress,
    *,
    stored: bool,
    checks: Sequence[str],
) -> list[Any]:
    """The events of a batched step: one ``Output(Batch)`` of the documents' outputs
    (``MaterializeResult`` when not ``stored``) with the batch's counts, then one result per
    asset check named in ``checks`` (each gets one, even when no document reached it),
    reported with severity WARN naming the documents whose check did not pass, so it does not
    block the others' downstream steps (they have left the batch already)."""
    for name in checks:
        progress.checked.setdefault(name, 0)
    metadata = {
        "batch_documents": len(progress.outputs) + len(progress.failed) + len(progress.skipped),
        "batch_succeeded": len(progress.outputs),
        "batch_failed": len(progress.failed),
        "batch_skipped": len(progress.skipped),
        "failed_documents": ", ".join(sorted(progress.failed)[:50]),
    }
    events: list[Any] = [
        dg.Output(Batch(outputs=progress.outputs), metadata=metadata)
        if stored
        else dg.MaterializeResult(metadata=metadata)
    ]
    for name, count in sorted(progress.checked.items()):
        failed = progress.checks.get(name, [])
        events.append(
            dg.AssetCheckResult(
                check_name=name,
                passed=not failed,
                severity=dg.AssetCheckSeverity.WARN if failed else dg.AssetCheckSeverity.ERROR,
                metadata={
                    "documents_checked": count,
                    "documents_failed": len(failed),
                    "failed_documents": ", ".join(sorted(failed)[:50]),
                },
            )
        )
    return events
