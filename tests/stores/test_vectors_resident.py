"""The bookkeeping the process-local copies share (kb_shared.stores.vectors_resident)."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass, field

import numpy as np
import pytest

from kb_shared.stores.vectors_resident import (
    CopyTables,
    Numbering,
    Positions,
    PositionsSnapshot,
    fetch_batches,
    filter_mask,
    refresh,
    removed_since,
)


def test_positions_kill_removed_and_rewritten_points_and_place_new_ones() -> None:
    positions = Positions(np.array([5, 2, 9], dtype=np.int64))  # positions 0, 1, 2
    alive = np.ones(3, dtype=bool)
    # rowid 2 removed, rowid 9 written again, rowid 40 new (past the table's end)
    after = positions.appended(alive, [2], np.array([9, 40], dtype=np.int64))
    assert after.tolist() == [True, False, False, True, True]
    assert alive.tolist() == [True, True, True]  # the old flags are not touched
    # rowid 9 now stands at position 3: writing it again kills 3, not 2
    again = positions.appended(after, [], np.array([9], dtype=np.int64))
    assert again.tolist() == [True, False, False, False, True, True]
    # removing a rowid never held, or one already removed, changes nothing
    assert positions.appended(again, [2, 77], np.zeros(0, dtype=np.int64)).tolist() == \
        again.tolist()


def _snapshot(key: tuple[str, int] | None) -> PositionsSnapshot:
    documents, kinds = Numbering(), Numbering()
    return PositionsSnapshot(
        key=key, rowids=np.array([1, 2, 3]), ids=["a", "b", "c"],
        documents=documents.numbered(["d1", "d2", "d1"]),
        kinds=kinds.numbered(["text", "text", "figure"]),
        alive=np.array([True, False, True]), live=2,
        document_numbering=documents, kind_numbering=kinds,
    )


def test_snapshot_scope_and_dead_count() -> None:
    snap = _snapshot(("e", 1))
    assert snap.dead == 1
    assert snap.in_scope(None, [("document", ["d1"])]).tolist() == [True, False, True]
    assert snap.in_scope(None, [("document", ["d1"]), ("kind", ["figure"])]).tolist() == \
        [False, False, True]
    assert snap.in_scope(np.array([2, 1]), [("kind", ["text"])]).tolist() == [False, True]
    assert snap.in_scope(None, [("document", ["never seen"])]).tolist() == [False, False, False]


def test_filter_mask_keeps_the_points_passing_every_filter() -> None:
    documents, kinds = Numbering(), Numbering()
    held_documents = documents.numbered(["d1", "d2", "d1", "d3"])
    held_kinds = kinds.numbered(["text", "table", "table", "text"])
    assert filter_mask([], held_documents, held_kinds, documents, kinds).tolist() == \
        [True, True, True, True]
    assert filter_mask([("document", ["d1", "d3"]), ("kind", ["text"])], held_documents,
                       held_kinds, documents, kinds).tolist() == [True, False, False, True]
    assert filter_mask([("kind", ["figure"])], held_documents, held_kinds, documents,
                       kinds).tolist() == [False, False, False, False]
    with pytest.raises(ValueError, match=r"by document or kind, not 'section'$"):
        filter_mask([("section", ["1"])], held_documents, held_kinds, documents, kinds)


@dataclass
class _Copy:
    snapshot: PositionsSnapshot
    lock: threading.Lock = field(default_factory=threading.Lock)
    updates: list[tuple[str, int] | None] = field(default_factory=list)

    def update(self, held: tuple[str, int] | None) -> PositionsSnapshot:
        self.updates.append(held)
        return _snapshot(("e", 5))


def test_refresh_returns_a_current_snapshot_without_updating() -> None:
    copy = _Copy(_snapshot(("e", 5)))
    assert refresh(copy, ("e", 5), copy.update) is copy.snapshot
    assert copy.updates == []


def test_refresh_updates_an_older_or_other_epoch_copy() -> None:
    for held in [None, ("e", 3), ("other", 9)]:
        copy = _Copy(_snapshot(held))
        assert refresh(copy, ("e", 5), copy.update).key == ("e", 5)
        assert copy.updates == [held]
        assert not copy.lock.locked()


def test_refresh_leaves_an_older_transaction_to_the_file() -> None:
    copy = _Copy(_snapshot(("e", 7)))
    assert refresh(copy, ("e", 5), copy.update) is None
    assert copy.updates == []


def test_refresh_does_not_wait_for_another_threads_load() -> None:
    copy = _Copy(_snapshot(("e", 3)))
    with copy.lock:
        assert refresh(copy, ("e", 5), copy.update) is None
    assert copy.updates == []


def test_forget_lets_go_only_the_named_copy() -> None:
    tables: CopyTables[object] = CopyTables("chunks")
    assert (tables.codes, tables.removed, tables.points, tables.meta) == (
        "chunks_codes", "chunks_removed", "chunks_points", "chunks_meta")
    first, second = object(), object()
    tables.cache = second
    tables.forget(first)
    assert tables.cache is second
    tables.forget(second)
    assert tables.cache is None


def test_removed_since_and_batches_read_the_tables() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t_removed (rowid INTEGER NOT NULL, generation INTEGER NOT NULL)")
    conn.executemany("INSERT INTO t_removed VALUES (?, ?)", [(4, 1), (8, 2), (9, 3)])
    assert sorted(removed_since(conn, "t_removed", 1)) == [8, 9]
    cursor = conn.execute("SELECT rowid, generation FROM t_removed ORDER BY rowid")
    got = list(fetch_batches(cursor, 2, lambda *columns: columns, 2))
    assert got == [([4, 8], [1, 2]), ([9], [3])]
