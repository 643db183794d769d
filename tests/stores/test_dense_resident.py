"""The in-memory float copy (kb_shared.stores.vectors_codes.DenseTables) answers every exact
dense search as vec0's scan does — the same ids in the same order, scores within 1e-6 — on
generated corpora, with filters, after replaced and deleted points, writes from another
connection, across the ``exact_below`` boundary both ways, on an empty index and for k
larger than the index; and it follows the file by deltas.

Each comparison opens two ``SqliteVectorIndex`` objects on one file: ``resident`` (the
default) and ``vec0`` (``resident_dense=False``, the scan the copy replaces).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pysqlite3.dbapi2 as sqlite3
import pytest
import sqlite_vec

from kb_shared.stores import vectors_codes
from kb_shared.stores.vectors import Hit, Point
from kb_shared.stores.vectors_codes import (
    DenseCache,
    DenseRows,
    DenseTables,
    _GrowingRows,
    cosine_distances,
    magnitudes,
)
from kb_shared.stores.vectors_sqlite import SqliteVectorIndex
from tests.stores.test_vectors_ann import downgrade_to_version_2, vectors

MODEL = "test-dense-model"
DIM = 384
KINDS = ("text", "table", "figure")


def points(count: int, seed: int, start: int = 0, documents: int = 12) -> list[Point]:
    """``count`` clustered unit vectors (``test_vectors_ann.vectors``) as points ``p{n}``
    of ``documents`` documents and the three kinds."""
    dense = vectors(count, seed)
    return [
        Point(id=f"p{n:05d}", document=f"doc-{n % documents}", kind=KINDS[n % 3],
              text=f"chunk {n}", dense=dense[n - start], payload={"n": n})
        for n in range(start, start + count)
    ]


def listed(hits: list[Hit]) -> list[tuple[str, float]]:
    return [(hit.id, hit.score) for hit in hits]


FILTERS = (
    (None, None),
    (["doc-0", "doc-5"], None),
    (None, ["table"]),
    (["doc-1", "doc-2", "doc-3"], ["text", "figure"]),
    (["no-such-document"], None),
)


def assert_alike(resident: SqliteVectorIndex, vec0: SqliteVectorIndex, queries: np.ndarray,
                 limits: tuple[int, ...] = (1, 10, 200)) -> int:
    """Every query, limit and filter answered alike (ids and order equal, scores within
    1e-6); returns how many answers had hits."""
    answered = 0
    for query in queries:
        for limit in limits:
            for documents, kinds in FILTERS:
                mine = resident.dense_search(query, limit, documents, kinds)
                theirs = vec0.dense_search(query, limit, documents, kinds)
                assert [h.id for h in mine] == [h.id for h in theirs], (limit, documents, kinds)
                assert [h.score for h in mine] == pytest.approx(
                    [h.score for h in theirs], abs=1e-6)
                assert [h.point for h in mine] == [h.point for h in theirs]
                answered += bool(mine)
    return answered


@pytest.fixture
def both(tmp_path: Path) -> Iterator[tuple[SqliteVectorIndex, SqliteVectorIndex]]:
    """``(resident, vec0)``: two indexes on one new file (the first creates it)."""
    path = tmp_path / "vectors.sqlite"
    resident = SqliteVectorIndex(path)
    resident.open(MODEL, DIM)
    vec0 = SqliteVectorIndex(path, resident_dense=False)
    vec0.open(MODEL, DIM, create=False)
    yield resident, vec0
    assert vec0._dense_copy.cache is None  # the answers compared with were vec0's
    resident.close()
    vec0.close()


def snapshot(index: SqliteVectorIndex) -> vectors_codes.DenseSnapshot:
    assert index._dense_copy.cache is not None
    return index._dense_copy.cache.snapshot


def test_generated_corpus_answers_alike_with_filters(both) -> None:
    resident, vec0 = both
    resident.upsert(points(900, seed=1))
    assert assert_alike(resident, vec0, vectors(6, seed=50)) == 6 * 3 * 4
    held = snapshot(resident)
    assert (held.live, held.dead, held.vectors.shape) == (900, 0, (900, DIM))
    hit = resident.dense_search(points(900, seed=1)[7].dense, 1)[0]  # a point finds itself
    assert (hit.id, hit.point.payload, hit.point.kind) == ("p00007", {"n": 7}, "table")
    assert hit.score == pytest.approx(1.0, abs=1e-6)


def test_distances_agree_with_sqlite_vec_to_1e_6() -> None:
    """Against sqlite-vec's ``vec_distance_cosine`` itself, on vectors of any length."""
    rng = np.random.default_rng(7)
    rows = (rng.standard_normal((300, DIM)) * rng.uniform(0.1, 9, (300, 1))).astype(np.float32)
    query = rng.standard_normal(DIM).astype(np.float32)
    conn = sqlite3.connect(":memory:")
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    theirs = [conn.execute("SELECT vec_distance_cosine(?, ?)",
                           (row.tobytes(), query.tobytes())).fetchone()[0] for row in rows]
    mine = cosine_distances(rows, magnitudes(rows), query)
    assert mine.dtype == np.float32
    assert np.abs(mine.astype(np.float64) - np.asarray(theirs)).max() < 1e-6
    conn.close()


def test_k_larger_than_the_index_and_an_empty_index(both) -> None:
    resident, vec0 = both
    query = vectors(1, seed=3)[0]
    assert resident.dense_search(query, 50) == []
    assert snapshot(resident).live == 0
    resident.upsert(points(40, seed=2))
    assert len(resident.dense_search(query, 4096)) == 40
    assert assert_alike(resident, vec0, vectors(3, seed=4), (39, 40, 41, 4096)) == 3 * 4 * 4
    resident.delete_ids([p.id for p in points(40, seed=2)])
    assert resident.dense_search(query, 10) == []
    assert snapshot(resident).live == 0


def test_equal_distances_are_ordered_and_cut_by_id(both) -> None:
    """Twelve points with one vector: ordered by id at every limit, so the answer for k is
    the first k of the answer for k + 1. (vec0 keeps the tied points of the highest rowids
    at its cut, then orders those by id: the same order, other members at a cut.)"""
    resident, vec0 = both
    base = points(30, seed=5)
    same = base[0].dense
    tied = [Point(id=f"t{n:02d}", document="doc-t", kind="text", text="t", dense=same,
                  payload={}) for n in reversed(range(12))]  # higher rowid, lower id
    resident.upsert(base[1:] + tied)
    for limit in (1, 5, 12, 13, 20):
        found = [h.id for h in resident.dense_search(same, limit)]
        assert found[: min(limit, 12)] == [f"t{n:02d}" for n in range(min(limit, 12))]
    # every tie inside the answer: as vec0
    assert assert_alike(resident, vec0, np.stack([same, base[3].dense]), (12, 20)) > 0


def test_replaced_and_deleted_points_are_followed_by_deltas(both) -> None:
    resident, vec0 = both
    resident.upsert(points(600, seed=8))
    assert assert_alike(resident, vec0, vectors(2, seed=9), (10,)) > 0
    loaded = snapshot(resident)
    resident.upsert(points(100, seed=10, start=200))  # p00200..p00299 get other vectors
    resident.delete_ids([f"p{n:05d}" for n in range(400, 420)] + ["p00005", "nope"])
    resident.delete_document("doc-7")
    resident.upsert(points(30, seed=11, start=600))
    assert assert_alike(resident, vec0, vectors(5, seed=12)) > 50
    applied = snapshot(resident)
    # 600 - 21 deleted - 48 more of doc-7 + 30 new (two of them doc-7 again)
    assert applied.live == resident.count() == 561
    # appended, not reloaded: 600 + the 92 rewritten points still there (8 were doc-7) + 30
    assert (applied.alive.size, applied.dead) == (722, 722 - 561)
    assert applied.vectors[:600].tolist() == loaded.vectors.tolist()
    gone = {"p00005", *(f"p{n:05d}" for n in range(400, 420))}
    assert not gone & {h.id for h in resident.dense_search(vectors(1, seed=12)[0], 4096)}


def test_writes_through_another_connection_reach_the_copy(tmp_path: Path) -> None:
    """Another ``SqliteVectorIndex`` on the file (another process, in effect) writes; the
    reader's copy applies the delta and answers like vec0."""
    path = tmp_path / "vectors.sqlite"
    reader = SqliteVectorIndex(path)
    reader.open(MODEL, DIM)
    reader.upsert(points(300, seed=13))
    vec0 = SqliteVectorIndex(path, resident_dense=False)
    vec0.open(MODEL, DIM, create=False)
    assert assert_alike(reader, vec0, vectors(2, seed=14), (10,)) > 0
    before = snapshot(reader)
    writer = SqliteVectorIndex(path)
    writer.open(MODEL, DIM, create=False)
    writer.upsert(points(50, seed=15, start=100))
    writer.delete_ids(["p00250", "p00251"])
    writer.close()
    assert assert_alike(reader, vec0, vectors(4, seed=16)) > 30
    after = snapshot(reader)
    assert after.key[1] == before.key[1] + 2  # two write transactions applied
    assert (after.live, after.alive.size) == (298, 350)
    reader.close()
    vec0.close()


def test_the_copy_exists_only_below_exact_below(tmp_path: Path) -> None:
    """Past the bound the codes answer and the copy is let go; back below it, it loads
    again. ``min_rescore`` rescoring every point makes the codes path exact here."""
    path = tmp_path / "vectors.sqlite"
    index = SqliteVectorIndex(path, exact_below=300, min_rescore=10_000)
    index.open(MODEL, DIM)
    vec0 = SqliteVectorIndex(path, resident_dense=False, exact_below=10**9)
    vec0.open(MODEL, DIM, create=False)
    queries = vectors(3, seed=17)
    index.upsert(points(299, seed=18))
    assert assert_alike(index, vec0, queries, (10,)) > 0
    assert snapshot(index).live == 299
    index.upsert(points(1, seed=19, start=299))  # 300 points: the codes path
    assert assert_alike(index, vec0, queries, (10,)) > 0
    assert index._dense_copy.cache is None
    index.delete_ids(["p00000"])  # 299 again
    assert assert_alike(index, vec0, queries, (10,)) > 0
    assert snapshot(index).live == 299
    index.close()
    vec0.close()


def test_a_load_past_the_bound_reads_at_most_one_point_more(
    both, monkeypatch: pytest.MonkeyPatch
) -> None:
    resident, _ = both
    resident.upsert(points(500, seed=20))
    monkeypatch.setattr(vectors_codes, "DENSE_BATCH", 7)
    tables = DenseTables("chunks")
    read: list[int] = []
    rows = tables._rows

    def counted(conn, after, most):  # noqa: ANN001, ANN202 - wraps DenseTables._rows
        for batch in rows(conn, after, most):
            read.append(len(batch.rowids))
            yield batch

    monkeypatch.setattr(tables, "_rows", counted)
    conn = resident._connection()
    conn.execute("BEGIN")
    key = resident._generation_key(conn)
    assert tables.refreshed(conn, key, 100, DIM) is None
    assert sum(read) == 101 and max(read) == 7
    assert tables.cache is None
    assert tables.refreshed(conn, key, 500, DIM).live == 500
    conn.execute("COMMIT")


def test_many_dead_positions_load_the_copy_afresh(both) -> None:
    resident, vec0 = both
    resident.upsert(points(200, seed=21))
    resident.dense_search(vectors(1, seed=22)[0], 5)
    resident.upsert(points(40, seed=23))  # 40 rewritten: applied
    resident.dense_search(vectors(1, seed=22)[0], 5)
    assert (snapshot(resident).dead, snapshot(resident).alive.size) == (40, 240)
    resident.upsert(points(40, seed=24, start=40))  # 40 of 240 dead (< 25%): applied
    resident.dense_search(vectors(1, seed=22)[0], 5)
    assert snapshot(resident).dead == 80
    resident.upsert(points(1, seed=25))  # 80 of 280 dead (> 25%): loaded afresh
    assert assert_alike(resident, vec0, vectors(3, seed=26)) > 30
    reloaded = snapshot(resident)
    assert (reloaded.dead, reloaded.live, reloaded.alive.size) == (0, 200, 200)
    assert reloaded.vectors.shape == (200, DIM)


def test_growing_rows_keep_every_row_and_earlier_views(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(vectors_codes, "DENSE_BATCH", 2)
    grown = _GrowingRows(3)
    rows = np.arange(60, dtype=np.float32).reshape(20, 3)
    grown.extend(rows[:5])
    early = grown.view()
    for start in range(5, 20, 3):  # grows several times, by doubling while loading
        grown.extend(rows[start:start + 3])
    assert grown.view().tolist() == rows.tolist()
    assert early.tolist() == rows[:5].tolist()
    grown.trim()
    assert grown.data.shape == (20, 3)
    grown.extend(rows[:1])  # after a load: a quarter more (and DENSE_BATCH)
    assert grown.data.shape == (20 + 5 + 2, 3)
    assert grown.view()[:20].tolist() == rows.tolist()


def test_a_failed_delta_read_leaves_the_copy_as_it_was() -> None:
    cache = DenseCache(4)
    unit = np.eye(4, dtype=np.float32)

    def rows(rowids: list[int], at: list[int]) -> DenseRows:
        return DenseRows(rowids, [f"r{r}" for r in rowids], ["d"] * len(rowids),
                         ["text"] * len(rowids), [unit[a].tobytes() for a in at])

    cache.load(("e", 1), [rows([1, 2], [0, 1])])

    def broken() -> Iterator[DenseRows]:
        yield rows([3], [2])
        raise sqlite3.OperationalError("disk I/O error")

    with pytest.raises(sqlite3.OperationalError):
        cache.apply(("e", 2), [], broken())
    assert cache.key == ("e", 1)
    cache.apply(("e", 2), [1], [rows([4], [3])])
    assert cache.snapshot.search(unit[3], 5) == [(4, 0.0), (2, 1.0)]
    assert cache.snapshot.search(unit[2], 1, [("kind", ["table"])]) == []


def test_a_version_2_file_is_scanned_by_vec0_until_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite"
    writer = SqliteVectorIndex(path)
    writer.open(MODEL, DIM)
    writer.upsert(points(80, seed=27))
    query = vectors(1, seed=28)[0]
    expected = listed(writer.dense_search(query, 10))
    writer.close()
    downgrade_to_version_2(path)
    reader = SqliteVectorIndex(path)
    reader.open(MODEL, DIM, create=False)  # a reader never upgrades the file
    assert [h.id for h in reader.dense_search(query, 10)] == [h for h, _ in expected]
    assert reader._dense_copy.cache is None
    writer.open(MODEL, DIM)  # the writer upgrades it: codes tables, a new epoch
    upgraded = listed(reader.dense_search(query, 10))
    assert [h for h, _ in upgraded] == [h for h, _ in expected]
    assert [s for _, s in upgraded] == pytest.approx([s for _, s in expected], abs=1e-6)
    assert snapshot(reader).live == 80
    reader.close()
    writer.close()


def test_an_older_transaction_or_a_held_lock_is_answered_by_vec0(both) -> None:
    resident, vec0 = both
    resident.upsert(points(60, seed=29))
    query = vectors(1, seed=30)[0]
    resident.dense_search(query, 1)
    tables, path = resident._dense_copy, resident.path
    old = sqlite3.connect(str(path), isolation_level=None)
    old.execute("BEGIN")
    old_key = resident._generation_key(old)
    resident.upsert(points(1, seed=31, start=60))
    assert resident.dense_search(query, 1)  # the copy moves to the new generation
    assert tables.refreshed(old, old_key, 1000, DIM) is None
    old.execute("COMMIT")
    old.close()
    cache = tables.cache
    held = cache.key
    resident.upsert(points(1, seed=32, start=61))
    with cache.lock:  # another thread updating: vec0 answers, the copy waits
        assert [h.id for h in resident.dense_search(query, 8)] == [
            h.id for h in vec0.dense_search(query, 8)]
        assert cache.key == held
    resident.dense_search(query, 8)
    assert cache.key[1] == held[1] + 1


def test_threads_searching_while_a_writer_commits_see_whole_states(tmp_path: Path) -> None:
    """Readers on several threads share one copy while another connection rewrites the
    corpus between two sets of vectors; every answer is one of the two states' answers."""
    path = tmp_path / "vectors.sqlite"
    index = SqliteVectorIndex(path)
    index.open(MODEL, DIM)
    states = [points(150, seed=33), points(150, seed=34)]
    query = vectors(1, seed=35)[0]
    expected = []
    for state in states:
        index.upsert(state)
        expected.append([h.id for h in index.dense_search(query, 8)])
    assert expected[0] != expected[1]
    writer = SqliteVectorIndex(path)
    writer.open(MODEL, DIM, create=False)
    failures: list[object] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                got = [h.id for h in index.dense_search(query, 8)]
            except Exception as exc:  # noqa: BLE001 - reported below
                failures.append(exc)
                return
            if got not in expected:
                failures.append(got)

    readers = [threading.Thread(target=read) for _ in range(3)]
    for reader in readers:
        reader.start()
    for round_ in range(8):
        writer.upsert(states[round_ % 2])
    stop.set()
    for reader in readers:
        reader.join()
    assert failures == []
    writer.close()
    index.close()
