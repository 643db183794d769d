"""The process-local copy of point rows (kb_shared.stores.vectors_rows.RowCache): it reads
only the rows it lacks, keeps them for one (epoch, generation) key, lets the oldest go past
its capacity, and a SqliteVectorIndex that searched before a write (from this or another
connection) never answers with a row of the older generation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kb_shared.stores.vectors import Point
from kb_shared.stores.vectors_rows import RowCache
from kb_shared.stores.vectors_sqlite import SqliteVectorIndex

MODEL = "test-rows-model"
DIM = 8


class Reads:
    """A ``read`` for ``RowCache.rows`` that records what it was asked for."""

    def __init__(self, version: str = "v1") -> None:
        self.asked: list[list[int]] = []
        self.version = version

    def __call__(self, rowids: list[int]) -> list[tuple[str, str]]:
        self.asked.append(list(rowids))
        return [(f"p{r}", self.version) for r in rowids]


def test_only_missing_rows_are_read_in_the_order_asked() -> None:
    cache, read = RowCache(), Reads()
    key = ("epoch-a", 3)
    assert cache.rows(key, [5, 2, 9], read) == [("p5", "v1"), ("p2", "v1"), ("p9", "v1")]
    assert cache.rows(key, [9, 7, 2, 7, 11], read) == [
        ("p9", "v1"), ("p7", "v1"), ("p2", "v1"), ("p7", "v1"), ("p11", "v1")]
    assert read.asked == [[5, 2, 9], [7, 11]]  # a rowid asked twice is read once
    assert cache.rows(key, [11, 5], read) == [("p11", "v1"), ("p5", "v1")]
    assert read.asked == [[5, 2, 9], [7, 11]]


def test_another_key_reads_again_and_no_key_keeps_nothing() -> None:
    cache, old, new = RowCache(), Reads("v1"), Reads("v2")
    cache.rows(("epoch-a", 3), [1, 2], old)
    assert cache.rows(("epoch-a", 4), [1, 2], new) == [("p1", "v2"), ("p2", "v2")]
    assert new.asked == [[1, 2]]
    assert cache.rows(("epoch-b", 4), [1], old) == [("p1", "v1")]  # a new epoch too
    unkeyed = Reads("v3")
    assert cache.rows(None, [1, 1], unkeyed) == [("p1", "v3"), ("p1", "v3")]
    assert cache.rows(None, [1], unkeyed) == [("p1", "v3")]
    assert unkeyed.asked == [[1, 1], [1]]


def test_the_oldest_rows_go_first_past_the_capacity() -> None:
    cache, read = RowCache(capacity=3), Reads()
    key = ("epoch-a", 1)
    cache.rows(key, [1, 2, 3], read)
    cache.rows(key, [4, 5], read)  # 1 and 2 go
    read.asked.clear()
    cache.rows(key, [3, 4, 5], read)
    assert read.asked == []
    cache.rows(key, [1, 2], read)
    assert read.asked == [[1, 2]]
    with pytest.raises(ValueError, match="capacity must be at least 1, got 0"):
        RowCache(capacity=0)


def _points(texts: dict[str, str], version: int) -> list[Point]:
    points = []
    for number, (point_id, text) in enumerate(sorted(texts.items())):
        dense = np.zeros(DIM, np.float32)
        dense[number % DIM] = 1.0
        dense[(number + 1) % DIM] = 0.5
        points.append(Point(id=point_id, document="doc-a", kind="text", text=text,
                            dense=dense, payload={"version": version}))
    return points


def test_a_search_after_a_write_reads_the_new_rows(tmp_path: Path) -> None:
    """Searches keep rows; a rewrite of the same ids (same rowids in SQLite) through another
    connection, then a deletion, are what the next searches show."""
    path = tmp_path / "vectors.sqlite"
    reader, writer = SqliteVectorIndex(path), SqliteVectorIndex(path)
    reader.open(MODEL, DIM)
    writer.open(MODEL, DIM, create=False)
    texts = {"p1": "clearing price cap", "p2": "price floor", "p3": "market suspension"}
    writer.upsert(_points(texts, 1))
    query = np.zeros(DIM, np.float32)
    query[0] = 1.0
    assert {h.id: h.point.payload for h in reader.sparse_search("price", 10)} == {
        "p1": {"version": 1}, "p2": {"version": 1}}
    assert reader.dense_search(query, 3)[0].point.text == "clearing price cap"
    assert len(reader._row_cache._rows) == 3

    writer.upsert(_points({**texts, "p1": "administered price cap"}, 2))
    hits = reader.sparse_search("price", 10)
    assert {h.id: (h.point.text, h.point.payload) for h in hits} == {
        "p1": ("administered price cap", {"version": 2}),
        "p2": ("price floor", {"version": 2}),
    }
    assert reader.dense_search(query, 3)[0].point.text == "administered price cap"

    writer.delete_ids(["p2"])
    assert [h.id for h in reader.sparse_search("price", 10)] == ["p1"]
    assert sorted(h.id for h in reader.dense_search(query, 3)) == ["p1", "p3"]
    reader.close()
    writer.close()
