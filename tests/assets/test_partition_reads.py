"""The two reads of the ``documents`` partition set that must not grow with it (issue 15,
benchmarks/results/partitions-2026-12-01-profile.md): ``partition_states`` (``kb status``,
the upload page) and ``partition_set_snapshot`` (a build run's view of the set)."""

# No `from __future__ import annotations`: Dagster reads the assets' context annotation as a class.

import threading
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from kb_assets.constants import DOCUMENTS
from kb_assets.partitions import (
    MISSING,
    add_document_partitions,
    documents_partitions,
    partition_set_snapshot,
    partition_states,
)

RANGE_TAGS = {
    "dagster/asset_partition_range_start": "a.pdf",
    "dagster/asset_partition_range_end": "c.pdf",
}


@dg.asset(partitions_def=documents_partitions)
def first(context: dg.AssetExecutionContext) -> None:
    """Fails for ``b.pdf``; in a range run, adds each document's metadata as kb's batched
    steps do (``kb_assets.assets.batch``)."""
    if context.has_partition_key and context.partition_key == "b.pdf":
        raise ValueError("b.pdf does not convert")
    if not context.has_partition_key:
        for key in context.partition_keys:
            context.add_asset_metadata({"seconds": 1.0}, partition_key=key)


@dg.asset(partitions_def=documents_partitions, deps=[first])
def second() -> None:
    """Materialised for whatever partition it is asked."""


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test(temp_dir=str(tmp_path)) as opened:
        add_document_partitions(opened, ["a.pdf", "b.pdf", "c.pdf"])
        yield opened


def test_partition_states_are_what_dagster_reports_per_partition(
    instance: dg.DagsterInstance,
) -> None:
    dg.materialize([first, second], instance=instance, partition_key="a.pdf")
    dg.materialize([first], instance=instance, partition_key="b.pdf", raise_on_error=False)

    states = partition_states(instance, ["first", "second"], ["a.pdf", "b.pdf", "c.pdf"])

    assert states == {
        "a.pdf": {"first": "materialized", "second": "materialized"},
        "b.pdf": {"first": "failed", "second": MISSING},
        "c.pdf": {"first": MISSING, "second": MISSING},
    }
    for asset in ("first", "second"):
        dagster = instance.get_status_by_partition(
            dg.AssetKey(asset), ["a.pdf", "b.pdf", "c.pdf"], documents_partitions
        ) or {}
        assert {k: v.value.lower() if v else MISSING for k, v in dagster.items()} == {
            k: states[k][asset] for k in ("a.pdf", "b.pdf", "c.pdf")
        }


def test_partition_states_of_assets_never_run_are_missing(instance: dg.DagsterInstance) -> None:
    assert partition_states(instance, ["first"], ["a.pdf"]) == {"a.pdf": {"first": MISSING}}


def test_partition_states_read_the_partition_set_once_for_all_assets(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    dg.materialize([first, second], instance=instance, partition_key="a.pdf")
    storage = instance.event_log_storage
    reads = []
    real = storage.get_dynamic_partitions
    monkeypatch.setattr(
        storage, "get_dynamic_partitions", lambda name: reads.append(name) or real(name)
    )
    states = partition_states(instance, ["first", "second"], ["a.pdf", "c.pdf"])
    assert states["a.pdf"] == {"first": "materialized", "second": "materialized"}
    assert reads == [DOCUMENTS]


def test_partition_states_read_the_asset_records_in_one_query(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    dg.materialize([first, second], instance=instance, partition_key="a.pdf")
    storage = instance.event_log_storage
    asked = []
    real = storage.get_asset_records
    monkeypatch.setattr(
        storage, "get_asset_records",
        lambda asset_keys=None: asked.append(sorted(k.to_user_string() for k in asset_keys))
        or real(asset_keys),
    )
    states = partition_states(instance, ["first", "second"], ["a.pdf", "c.pdf"])
    assert states["a.pdf"] == {"first": "materialized", "second": "materialized"}
    assert asked == [["first", "second"]]


def test_a_snapshot_answers_this_thread_from_one_read(instance: dg.DagsterInstance) -> None:
    elsewhere: list[object] = []

    def other_thread() -> None:
        elsewhere.append(instance.get_dynamic_partitions(DOCUMENTS))
        elsewhere.append(instance.has_dynamic_partition(DOCUMENTS, "d.pdf"))

    with partition_set_snapshot(instance) as keys:
        assert keys == ["a.pdf", "b.pdf", "c.pdf"]
        instance.add_dynamic_partitions(DOCUMENTS, ["d.pdf"])
        assert instance.get_dynamic_partitions(DOCUMENTS) == ["a.pdf", "b.pdf", "c.pdf"]
        assert instance.has_dynamic_partition(DOCUMENTS, "a.pdf") is True
        assert instance.has_dynamic_partition(DOCUMENTS, "d.pdf") is False
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
    assert elsewhere == [["a.pdf", "b.pdf", "c.pdf", "d.pdf"], True]
    assert instance.get_dynamic_partitions(DOCUMENTS) == ["a.pdf", "b.pdf", "c.pdf", "d.pdf"]
    assert instance.has_dynamic_partition(DOCUMENTS, "d.pdf") is True
    assert "get_dynamic_partitions" not in vars(instance)
    assert "has_dynamic_partition" not in vars(instance)


def test_a_range_run_inside_a_snapshot_lists_the_partitions_no_more(
    instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = instance.event_log_storage
    reads: list[str] = []
    real = storage.get_dynamic_partitions
    monkeypatch.setattr(
        storage, "get_dynamic_partitions", lambda name: reads.append(name) or real(name)
    )
    result = dg.materialize([first], instance=instance, tags=RANGE_TAGS)
    assert result.success
    unguarded = len(reads)
    # one listing of every key per document's metadata, and more for the run's range
    assert unguarded >= 3

    reads.clear()
    with partition_set_snapshot(instance):
        result = dg.materialize([first], instance=instance, tags=RANGE_TAGS)
    assert result.success
    assert reads == [DOCUMENTS]  # the snapshot's own read on entry
    materialised = instance.get_status_by_partition(
        dg.AssetKey("first"), ["a.pdf", "b.pdf", "c.pdf"], documents_partitions
    )
    assert {k: v.value for k, v in (materialised or {}).items()} == {
        "a.pdf": "MATERIALIZED", "b.pdf": "MATERIALIZED", "c.pdf": "MATERIALIZED",
    }
