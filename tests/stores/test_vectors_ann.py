"""The embedded index's binary-code dense search (``SqliteVectorIndex`` with codes) against
its exact vec0 scan, and the upgrade of a version-2 file (no codes tables) by the writer.

Vectors are 384-dimensional unit vectors around 16 topic centroids (cosine to the centroid
about 0.6), 25 points per document, like the scale benchmark's synthetic corpus.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from kb_shared.errors import StoreError
from kb_shared.stores.vectors import Point
from kb_shared.stores.vectors_codes import CodeCache, CodeRows, binary_code
from kb_shared.stores.vectors_sqlite import SCHEMA_VERSION, SqliteVectorIndex

MODEL = "test-ann-model"
DIM = 384
PER_DOCUMENT = 25
TOPICS = 16


def vectors(count: int, seed: int) -> np.ndarray:
    """``count`` clustered unit vectors (one topic per document of ``PER_DOCUMENT``)."""
    rng = np.random.default_rng(seed)
    centroids = np.random.default_rng(0).standard_normal((TOPICS, DIM)).astype(np.float32)
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    topics = (np.arange(count) // PER_DOCUMENT * 7) % TOPICS
    out = centroids[topics] + rng.standard_normal((count, DIM)).astype(np.float32) * (
        1.3 / np.sqrt(DIM)
    )
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def points(count: int, start: int = 0) -> list[Point]:
    dense = vectors(count + start, seed=1)[start:]
    return [
        Point(
            id=f"doc-{n // PER_DOCUMENT:04d}-{n % PER_DOCUMENT}",
            document=f"doc-{n // PER_DOCUMENT:04d}",
            kind="text",
            text=f"chunk {n}",
            dense=dense[n - start],
            payload={"n": n},
        )
        for n in range(start, start + count)
    ]


def build(path: Path, count: int, **tuning: int) -> SqliteVectorIndex:
    index = SqliteVectorIndex(path, **tuning)
    index.open(MODEL, DIM)
    for start in range(0, count, 1000):
        index.upsert(points(min(1000, count - start), start))
    return index


def downgrade_to_version_2(path: Path) -> None:
    """Make ``path`` what the version-2 code wrote: no codes tables, no generation."""
    index = SqliteVectorIndex(path)
    conn = index._connection()
    conn.execute("DROP TABLE chunks_codes")
    conn.execute("DROP TABLE chunks_removed")
    conn.execute("DELETE FROM chunks_meta WHERE key IN ('generation', 'epoch')")
    conn.execute("UPDATE chunks_meta SET value = '2' WHERE key = 'schema_version'")
    index.close()


def tables(path: Path) -> set[str]:
    index = SqliteVectorIndex(path)
    found = {r[0] for r in index._connection().execute("SELECT name FROM sqlite_master")}
    index.close()
    return found


def ids(hits: list) -> list[str]:
    return [hit.id for hit in hits]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ann") / "vectors.sqlite"
    build(path, 5000).close()
    return path


def test_codes_search_on_5000_points_returns_the_exact_top_10(corpus: Path) -> None:
    exact = SqliteVectorIndex(corpus, exact_below=10**9)
    codes = SqliteVectorIndex(corpus, exact_below=0)
    default = SqliteVectorIndex(corpus)
    for index in (exact, codes, default):
        index.open(MODEL, DIM, create=False)
    for query in vectors(20, seed=99):
        expected = exact.dense_search(query, 10)
        assert len(expected) == 10
        assert ids(codes.dense_search(query, 10)) == ids(expected)
        assert ids(default.dense_search(query, 10)) == ids(expected)
        assert [h.score for h in codes.dense_search(query, 10)] == pytest.approx(
            [h.score for h in expected], abs=1e-6
        )
    for index in (exact, codes, default):
        index.close()


def test_codes_search_with_a_2_percent_document_filter_returns_k_true_neighbours(
    corpus: Path,
) -> None:
    exact = SqliteVectorIndex(corpus, exact_below=10**9)
    codes = SqliteVectorIndex(corpus, exact_below=0, min_rescore=50, oversample=2)
    exact.open(MODEL, DIM, create=False)
    codes.open(MODEL, DIM, create=False)
    documents = [f"doc-{n:04d}" for n in range(0, 200, 25)]  # 4 of 200 documents = 2%
    for query in vectors(10, seed=5):
        found = codes.dense_search(query, 10, documents=documents)
        assert len(found) == 10
        assert {hit.point.document for hit in found} <= set(documents)
        assert ids(found) == ids(exact.dense_search(query, 10, documents=documents))
    exact.close()
    codes.close()


def test_a_reader_sees_writes_committed_by_another_handle(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    writer = build(path, 300)
    reader = SqliteVectorIndex(path, exact_below=0)
    reader.open(MODEL, DIM, create=False)
    target = points(1, start=7)[0]
    assert ids(reader.dense_search(target.dense, 1)) == [target.id]  # cache loaded
    writer.delete_document(target.document)
    assert target.id not in ids(reader.dense_search(target.dense, 10))
    moved = Point(id="new-0", document="doc-new", kind="table", text="t",
                  dense=target.dense, payload={})
    writer.upsert([moved])
    assert ids(reader.dense_search(target.dense, 1)) == ["new-0"]
    assert ids(reader.dense_search(target.dense, 1, kinds=["table"])) == ["new-0"]
    writer.upsert([Point(id="new-0", document="doc-new", kind="text", text="t",
                         dense=-target.dense, payload={})])  # replaced in place
    assert ids(reader.dense_search(target.dense, 1, kinds=["table"])) == []
    assert "new-0" not in ids(reader.dense_search(target.dense, 5))
    writer.drop()
    build(path, 50)
    assert reader.dense_search(target.dense, 100) == reader.dense_search(target.dense, 100)
    assert len(reader.dense_search(target.dense, 100)) == 50  # a new epoch: reloaded
    writer.close()
    reader.close()


def test_a_version_2_file_is_read_exactly_and_upgraded_by_the_writer(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    build(path, 600).close()
    downgrade_to_version_2(path)
    queries = vectors(5, seed=3)

    reader = SqliteVectorIndex(path, exact_below=0)
    reader.open(MODEL, DIM, create=False)
    before = [ids(reader.dense_search(q, 10)) for q in queries]
    assert all(len(found) == 10 for found in before)
    assert "chunks_codes" not in tables(path)  # the reader wrote nothing

    writer = SqliteVectorIndex(path)
    writer.open(MODEL, DIM)
    conn = writer._connection()
    assert conn.execute(
        "SELECT value FROM chunks_meta WHERE key = 'schema_version'"
    ).fetchone()[0] == SCHEMA_VERSION == "3"
    stored = dict(conn.execute("SELECT rowid, code FROM chunks_codes").fetchall())
    floats = conn.execute("SELECT rowid, embedding FROM chunks_vec").fetchall()
    assert len(stored) == len(floats) == 600
    assert all(
        stored[rowid] == binary_code(np.frombuffer(blob, dtype=np.float32))
        for rowid, blob in floats
    )
    # the reader opened before the upgrade now ranks codes, with the same results
    assert [ids(reader.dense_search(q, 10)) for q in queries] == before
    assert reader._code_tables.cache is not None and reader._code_tables.cache.size == 600
    writer.close()
    reader.close()


def test_a_write_through_an_old_file_opened_without_create_upgrades_it(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    build(path, 60).close()
    downgrade_to_version_2(path)
    index = SqliteVectorIndex(path, exact_below=0)
    index.open(MODEL, DIM, create=False)
    assert index.delete_document("doc-0000") == PER_DOCUMENT
    conn = index._connection()
    assert conn.execute("SELECT count(*) FROM chunks_codes").fetchone()[0] == 60 - PER_DOCUMENT
    assert len(index.dense_search(vectors(1, seed=4)[0], 100)) == 60 - PER_DOCUMENT
    index.close()


def test_a_failed_write_leaves_the_codes_as_they_were(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    index = build(path, 30, exact_below=0)
    conn = index._connection()
    before = conn.execute("SELECT rowid, code, generation FROM chunks_codes").fetchall()
    generation = conn.execute("SELECT value FROM chunks_meta WHERE key = 'generation'").fetchone()
    # the codes are written last: failing there must roll back the floats, terms and points
    conn.execute(
        "CREATE TEMP TRIGGER boom BEFORE INSERT ON main.chunks_codes "
        "WHEN NEW.rowid = 31 BEGIN SELECT RAISE(ABORT, 'boom'); END"
    )
    replaced = Point(id="doc-0001-4", document="doc-0001", kind="text", text="new words",
                     dense=-points(1, start=29)[0].dense, payload={})
    with pytest.raises(StoreError, match="boom"):
        index.upsert([replaced, *points(1, start=30)])
    assert conn.execute("SELECT rowid, code, generation FROM chunks_codes").fetchall() == before
    assert conn.execute(
        "SELECT value FROM chunks_meta WHERE key = 'generation'"
    ).fetchone() == generation
    assert index.count() == 30
    assert ids(index.dense_search(points(1, start=29)[0].dense, 1)) == ["doc-0001-4"]
    assert index.sparse_search("new words", 5) == []
    index.close()


def test_code_cache_applies_removals_then_writes_and_ranks_by_hamming_distance() -> None:
    cache = CodeCache(code_bytes=1)
    cache.load(("e1", 3), CodeRows([5, 2, 9], [b"\x00", b"\xff", b"\x0f"],
                                   ["a", "b", "a"], ["text", "text", "table"]))
    assert cache.size == 3
    # distance to 0x00: rowid 5 -> 0, rowid 9 -> 4, rowid 2 -> 8
    assert cache.candidates(b"\x00", 3) == [5, 9, 2]
    assert cache.candidates(b"\x00", 2, [("document", ["a"])]) == [5, 9]
    assert cache.candidates(b"\x00", 5, [("kind", ["table"])]) == [9]
    assert cache.candidates(b"\x00", 5, [("document", ["unknown"])]) == []
    # rowid 5 removed; rowid 9 removed then written again (live); rowid 3 is new and lands
    # between stored rowids; rowid 2 rewritten with another code
    cache.apply(("e1", 6), [5, 9], CodeRows([9, 3, 2], [b"\x01", b"\x00", b"\x03"],
                                           ["c", "c", "b"], ["text"] * 3))
    assert cache.key == ("e1", 6)
    assert cache.size == 3
    assert cache.candidates(b"\x00", 10) == [3, 9, 2]
    assert cache.candidates(b"\x00", 10, [("document", ["c"])]) == [3, 9]
    assert cache.candidates(b"\x00", 10, [("document", ["a"])]) == []


def test_binary_code_sets_a_bit_per_positive_component_most_significant_first() -> None:
    assert binary_code(np.array([0.5, -0.1, 0.0, 0.2, -1, -1, -1, 1, 0.3], dtype=np.float32)) == (
        bytes([0b10010001, 0b10000000])
    )


def test_rescored_candidates_grow_with_the_index(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 800 candidates kept recall@10 at 0.97 on 100k points but 0.65 on 1M
    # (benchmarks/results/scale-2026-12-02-1M.md): a share of the live points is the floor
    asked: list[tuple[int, int]] = []
    real = CodeCache.candidates

    def recorded(self: CodeCache, code: bytes, count: int, **filters: object) -> list[int]:
        asked.append((count, self.size))
        return real(self, code, count, **filters)

    monkeypatch.setattr(CodeCache, "candidates", recorded)
    query = vectors(1, seed=9)[0]
    share = SqliteVectorIndex(corpus, exact_below=0, min_rescore=10, oversample=1,
                              rescore_share=0.25)
    fixed = SqliteVectorIndex(corpus, exact_below=0, min_rescore=10, oversample=1,
                              rescore_share=0.0)
    for index in (share, fixed):
        index.open(MODEL, DIM, create=False)
        index.dense_search(query, 5)
        index.close()
    (grown, size), (floor, _) = asked
    assert size > 100 and grown == math.ceil(0.25 * size)
    assert floor == 10  # max(1 * 5, 10) without the share
