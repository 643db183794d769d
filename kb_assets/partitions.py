"""The one partitioning of the corpus build: one dynamic partition per document, the one way
kb adds its keys (in batches), and the two reads of the partition set that must not grow with
it: every document's asset states (``partition_states``: ``kb status``, the upload page) and a
build run's view of the set (``partition_set_snapshot``)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import dagster as dg
from dagster._core.definitions.partitions.context import partition_loading_context
from dagster._core.instance.types import CachingDynamicPartitionsLoader
from dagster._core.loader import LoadingContext
from dagster._core.storage.event_log.base import AssetRecord
from dagster._core.storage.partition_status_cache import get_and_update_asset_status_cache_value

from kb_assets.constants import DOCUMENTS

#: Keys are ``kb_shared.identity.doc_id`` values (``[a-z0-9._-]``, never a comma).
documents_partitions = dg.DynamicPartitionsDefinition(name=DOCUMENTS)

#: Keys per ``add_dynamic_partitions`` call. Dagster looks the keys up with one SQL ``IN``
#: list, and SQLite builds refuse more than ``SQLITE_MAX_VARIABLE_NUMBER`` bound values (999
#: before SQLite 3.32, https://www.sqlite.org/limits.html #9); ~36k keys at once fail on
#: Dagster's SQLite storage (../shared/notes/next-capabilities.md, "Dagster at scale").
PARTITION_BATCH = 500


def add_document_partitions(
    instance: dg.DagsterInstance, doc_ids: Sequence[str], *, batch: int = PARTITION_BATCH
) -> int:
    """Add ``doc_ids`` to the ``documents`` dynamic partitions, ``batch`` keys per call, in
    the order given; keys already present are kept as they are (Dagster skips them).

    Returns the number of ``add_dynamic_partitions`` calls made (0 for no keys).

    Raises:
        ValueError: ``batch`` is below 1.
    """
    if batch < 1:
        raise ValueError(f"the partition batch size must be at least 1, not {batch}")
    keys = list(doc_ids)
    calls = 0
    for start in range(0, len(keys), batch):
        instance.add_dynamic_partitions(DOCUMENTS, keys[start : start + batch])
        calls += 1
    return calls


#: A document's state for an asset without a materialisation, failure or run in progress.
MISSING = "missing"

#: A document's state for an asset its failed run planned but never started, because an
#: upstream asset failed first (``not_run_after_failures``).
NOT_RUN = "not_run"


class _AssetRecordBatch(LoadingContext):
    """Dagster's batching loader scope for one ``partition_states`` call: the asset records
    ``prepare``d on it are read in one ``get_asset_records`` query at the first load."""

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self._instance = instance
        self._loaders: dict[type, Any] = {}

    @property
    def instance(self) -> dg.DagsterInstance:
        """The instance the records are read from."""
        return self._instance

    @property
    def loaders(self) -> dict[type, Any]:
        """Dagster's loaders of this scope, one per loadable type."""
        return self._loaders


def partition_states(
    instance: dg.DagsterInstance, assets: Sequence[str], keys: Iterable[str]
) -> dict[str, dict[str, str]]:
    """Each of ``keys`` (``documents`` partitions) -> asset name -> ``"materialized"``,
    ``"failed"``, ``"in_progress"`` or ``MISSING``: what ``DagsterInstance.
    get_status_by_partition`` answers (in progress over failed over materialised), from each
    asset's partition status cache brought up to date the same way, with the partition set
    read once for all ``assets`` instead of about twice per asset
    (benchmarks/results/partitions-2026-12-01-profile.md) and the assets' records in one
    query instead of one per asset (benchmarks/results/cli-2026-12-06.md).
    Uses Dagster 1.13's status cache module (``dagster._core.storage.partition_status_cache``)
    and its batching loader (``dagster._core.loader``).
    """
    wanted = list(keys)
    states: dict[str, dict[str, str]] = {key: {} for key in wanted}
    loader = CachingDynamicPartitionsLoader(instance)
    definition = documents_partitions
    records = _AssetRecordBatch(instance)
    AssetRecord.prepare(records, [dg.AssetKey(asset) for asset in assets])
    for asset in assets:
        cached = get_and_update_asset_status_cache_value(
            instance, dg.AssetKey(asset), definition, dynamic_partitions_loader=loader,
            loading_context=records,
        )
        if cached is None:
            for key in wanted:
                states[key][asset] = MISSING
            continue
        with partition_loading_context(dynamic_partitions_store=loader):
            ranked = [
                ("in_progress", cached.deserialize_in_progress_partition_subsets(definition)),
                ("failed", cached.deserialize_failed_partition_subsets(definition)),
                ("materialized", cached.deserialize_materialized_partition_subsets(definition)),
            ]
        for key in wanted:
            states[key][asset] = next((name for name, subset in ranked if key in subset), MISSING)
    return states


def not_run_after_failures(
    states: dict[str, str], upstream: Mapping[str, Sequence[str]]
) -> dict[str, str]:
    """One document's ``partition_states`` (asset -> state, in build order) with every
    ``"failed"`` asset whose upstream asset (``upstream``: asset -> its dependencies) failed or did
    not run turned into ``NOT_RUN``. Dagster marks every step a failed run planned as failed,
    but a step starts only once its inputs succeeded, so after a failed ``markdown`` the other
    seven never ran. (Were an asset rebuilt alone after its upstream had failed, and failed
    itself, it would read ``NOT_RUN`` too.)"""
    result = dict(states)
    for asset, state in states.items():
        if state == "failed" and any(
            result.get(name) in ("failed", NOT_RUN) for name in upstream.get(asset, ())
        ):
            result[asset] = NOT_RUN
    return result


class _Snapshots(threading.local):
    """Per thread: id of an instance -> its ``documents`` keys read on entry (list, set)."""

    def __init__(self) -> None:
        self.by_instance: dict[int, tuple[list[str], set[str]]] = {}


_snapshots = _Snapshots()
_installed: dict[int, int] = {}  # id of an instance -> snapshots open on it (all threads)
_install_lock = threading.Lock()


@contextlib.contextmanager
def partition_set_snapshot(instance: dg.DagsterInstance) -> Iterator[list[str]]:
    """While inside, this thread's reads of the ``documents`` partition set through
    ``instance`` (``get_dynamic_partitions``, ``has_dynamic_partition``) are answered from one
    read made on entry (yielded); other threads, and other partition sets, read the storage as
    before. Wrap one build run in it: a run adds and deletes no partition.

    Why: in a run over a range of partitions Dagster checks the range against the whole set
    for each document and asset (``context.add_asset_metadata(partition_key=...)`` lists every
    key and looks up both ends), so a run's cost grew with the corpus
    (benchmarks/results/partitions-2026-12-01-profile.md). The instance's two methods are
    shadowed on the object while any thread holds a snapshot of it.
    """
    keys = list(instance.get_dynamic_partitions(DOCUMENTS))
    ident = id(instance)
    outer = _snapshots.by_instance.get(ident)
    _snapshots.by_instance[ident] = (keys, set(keys))
    with _install_lock:
        if _installed.get(ident, 0) == 0:
            _shadow_reads(instance)
        _installed[ident] = _installed.get(ident, 0) + 1
    try:
        yield keys
    finally:
        with _install_lock:
            _installed[ident] -= 1
            if _installed[ident] == 0:
                del _installed[ident]
                for name in ("get_dynamic_partitions", "has_dynamic_partition"):
                    instance.__dict__.pop(name, None)
        if outer is None:
            del _snapshots.by_instance[ident]
        else:
            _snapshots.by_instance[ident] = outer


def _shadow_reads(instance: dg.DagsterInstance) -> None:
    """Shadow the instance's two partition-set reads with ones that answer from this thread's
    snapshot (``partition_set_snapshot``) when it has one for ``documents``."""
    ident = id(instance)
    read_keys = type(instance).get_dynamic_partitions.__get__(instance)
    read_one = type(instance).has_dynamic_partition.__get__(instance)

    def get_dynamic_partitions(partitions_def_name: str) -> Any:
        held = _snapshots.by_instance.get(ident)
        if held is None or partitions_def_name != DOCUMENTS:
            return read_keys(partitions_def_name)
        return list(held[0])

    def has_dynamic_partition(partitions_def_name: str, partition_key: str) -> bool:
        held = _snapshots.by_instance.get(ident)
        if held is None or partitions_def_name != DOCUMENTS:
            return read_one(partitions_def_name, partition_key)
        return partition_key in held[1]

    instance.__dict__["get_dynamic_partitions"] = get_dynamic_partitions
    instance.__dict__["has_dynamic_partition"] = has_dynamic_partition
