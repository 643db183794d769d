"""The in-memory postings copy (kb_shared.stores.vectors_postings) answers every sparse search
exactly as the FTS5 path does — the same ids in the same order with the same float32 scores —
on generated corpora, with filters, ties, replaced and deleted points, writes from another
connection, an empty index and queries of unknown terms; and it follows the file by deltas.

Each comparison opens two ``SqliteVectorIndex`` objects on one file: ``resident`` (the
default) and ``fts5`` (``resident_points=0``). The FTS5 path is exact when it is not capped
(asserted), so equal answers mean the copy is exact too.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pysqlite3.dbapi2 as sqlite3
import pytest

from kb_shared.settings import Settings
from kb_shared.search.sparse import bm25_term_weight, fts_document
from kb_shared.stores import vectors_postings
from kb_shared.stores.factory import open_vector_index
from kb_shared.stores.vectors import Point
from kb_shared.stores.vectors_postings import PostingsTables, _Growing, bm25_weights
from kb_shared.stores.vectors_sparse import query_terms
from kb_shared.stores.vectors_sqlite import SqliteVectorIndex
from tests.stores.test_vectors_ann import downgrade_to_version_2
from tests.stores.test_sparse_scorer import (
    DIM,
    MODEL,
    QUERIES,
    full_scoring,
    generated,
    listed,
    pair,  # noqa: F401 - the SQLite + Qdrant fixture
    points,
)

KINDS = ("text", "table", "figure")


def varied(texts: dict[str, str]) -> list[Point]:
    """``points(texts)`` spread over five documents and three kinds."""
    return [
        Point(id=p.id, document=f"doc-{i % 5}", kind=KINDS[i % 3], text=p.text,
              dense=p.dense, payload={"n": i})
        for i, p in enumerate(points(texts))
    ]


@pytest.fixture
def both(tmp_path: Path) -> Iterator[tuple[SqliteVectorIndex, SqliteVectorIndex]]:
    """``(resident, fts5)``: two indexes on one new file (the first creates it)."""
    path = tmp_path / "vectors.sqlite"
    resident = SqliteVectorIndex(path)
    resident.open(MODEL, DIM)
    fts5 = SqliteVectorIndex(path, resident_points=0)
    fts5.open(MODEL, DIM, create=False)
    yield resident, fts5
    assert fts5._scorer.capped == 0  # the FTS5 answers compared with were exact
    assert fts5._postings.cache is None
    resident.close()
    fts5.close()


FILTERS = (
    (None, None),
    (["doc-0", "doc-3"], None),
    (None, ["table"]),
    (["doc-1"], ["text", "figure"]),
    (["no-such-document"], None),
)


def assert_alike(resident: SqliteVectorIndex, fts5: SqliteVectorIndex,
                 queries: list[str] = QUERIES, limits: tuple[int, ...] = (1, 5, 30, 500)) -> int:
    """Every query, limit and filter answered alike; returns how many answers had hits."""
    answered = 0
    for query in queries:
        for limit in limits:
            for documents, kinds in FILTERS:
                mine = listed(resident.sparse_search(query, limit, documents, kinds))
                theirs = listed(fts5.sparse_search(query, limit, documents, kinds))
                assert mine == theirs, (query, limit, documents, kinds)
                answered += bool(mine)
    return answered


def test_generated_corpus_answers_alike_with_filters(both) -> None:
    resident, fts5 = both
    resident.upsert(varied(generated(31, 400)))
    assert assert_alike(resident, fts5) > 100
    snapshot = resident._postings.cache.snapshot
    assert snapshot.live == 400
    assert snapshot.dead == 0
    # a point with every hit's payload: the rows come from SQLite as before
    hit = resident.sparse_search("w3 w40", 1)[0]
    assert hit.point.payload == {"n": int(hit.id[1:])}


def test_weights_are_bm25_term_weight_bit_for_bit() -> None:
    tfs, lengths = np.meshgrid(np.arange(1, 41), np.arange(1, 3001))
    tfs, lengths = tfs.ravel().astype(np.uint16), lengths.ravel().astype(np.int32)
    keep = tfs <= lengths
    expected = [bm25_term_weight(int(t), int(n)) for t, n in zip(tfs[keep], lengths[keep],
                                                                  strict=True)]
    assert bm25_weights(tfs[keep], lengths[keep]).tolist() == expected
    assert bm25_weights(np.array([2], np.uint16), np.array([4]))[0] == pytest.approx(
        2 * 2.2 / (2 + 1.2 * (0.25 + 0.75 * 4 / 256)))


def test_unrounded_sums_equal_the_python_sum_in_term_index_order(both) -> None:
    """Before the float32 rounding too: every point's double-precision sum is the one
    ``counted_score`` forms, term by term in ``term_index`` order."""
    resident, _ = both
    texts = generated(89, 250)
    resident.upsert(points(texts))
    resident.sparse_search("w1", 1)
    snapshot = resident._postings.cache.snapshot
    stored = {pid: fts_document(text).split(" ") for pid, text in texts.items()}
    frequencies: dict[str, int] = {}
    for tokens in stored.values():
        for term in set(tokens):
            frequencies[term] = frequencies.get(term, 0) + 1
    for query in QUERIES:
        terms = query_terms(query, frequencies, len(texts))
        totals = snapshot.totals(query)
        for position, pid in enumerate(snapshot.ids):
            tokens, total = stored[pid], 0.0
            for term in terms:
                if term.term in tokens:
                    total += term.value * bm25_term_weight(tokens.count(term.term), len(tokens))
            assert totals[position] == total, (query, pid)


def test_loading_in_batches_gives_the_same_copy(
    both, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seven points a batch (points without terms among them) load the same postings as one
    batch, and answer alike."""
    resident, fts5 = both
    texts = generated(101, 90)
    texts.update({f"p{i:03d}": "" for i in (3, 7, 8, 50)})  # no terms: the FTS5 column is ""
    resident.upsert(varied(texts))
    resident.sparse_search("w1", 1)
    whole = resident._postings.cache.snapshot
    monkeypatch.setattr(vectors_postings, "LOAD_BATCH", 7)
    batched = PostingsTables("chunks")
    conn = resident._connection()
    conn.execute("BEGIN")
    state = dict(conn.execute("SELECT key, value FROM chunks_meta").fetchall())
    snapshot = batched.refreshed(conn, (state["epoch"], int(state["generation"])), 1000)
    conn.execute("COMMIT")
    assert "" not in snapshot.base.vocabulary
    assert sorted(snapshot.base.vocabulary) == sorted(whole.base.vocabulary)
    for term in whole.base.vocabulary:
        mine, theirs = snapshot.base.of(term), whole.base.of(term)
        assert mine[0].tolist() == theirs[0].tolist() and mine[1].tolist() == theirs[1].tolist()
    assert snapshot.lengths.tolist() == whole.lengths.tolist()
    assert snapshot.lengths[snapshot.ids.index("p003")] == 1  # "".split(" ") is one token
    resident._postings = batched
    assert assert_alike(resident, fts5) > 50


def test_growing_array_keeps_every_value() -> None:
    grown = _Growing(2)
    parts = [np.arange(3), np.arange(0), np.arange(10, 15), np.array([7])]
    for part in parts:
        grown.extend(part)
    assert grown.view().tolist() == [0, 1, 2, 10, 11, 12, 13, 14, 7]
    assert grown.view().dtype == np.int32


def test_ties_are_cut_by_id(both) -> None:
    resident, fts5 = both
    tied = {f"t{i:02d}": "the same words here" for i in reversed(range(20))}
    resident.upsert(points({**tied, "other": "words elsewhere, in a longer text than theirs"}))
    assert [h.id for h in resident.sparse_search("same", 3)] == ["t00", "t01", "t02"]
    assert [h.id for h in resident.sparse_search("words", 21)] == [*sorted(tied), "other"]
    # the cut falls inside the tie group at every limit
    assert assert_alike(resident, fts5, ["same", "words", "same words here"],
                        (1, 7, 19, 20, 21)) > 0


def test_replaced_and_deleted_points_are_followed_by_deltas(both) -> None:
    resident, fts5 = both
    resident.upsert(varied(generated(37, 300)))
    assert assert_alike(resident, fts5, QUERIES[:3], (5,)) > 0
    loaded = resident._postings.cache.snapshot
    # rewrite a third of the points with other texts, delete some, add new ones
    rewritten = {pid: text for pid, text in generated(41, 300).items() if pid < "p100"}
    resident.upsert(varied(rewritten))
    resident.delete_ids([f"p{i:03d}" for i in range(150, 170)] + ["p005", "nope"])
    resident.delete_document("doc-4")
    resident.upsert(points({f"new{i}": f"w{i} w{i + 1} clause" for i in range(30)}))
    assert assert_alike(resident, fts5) > 100
    snapshot = resident._postings.cache.snapshot
    assert snapshot.base is loaded.base  # applied as deltas, not loaded again
    assert snapshot.live == fts5.count() == resident.count()
    assert snapshot.dead > 100
    removed = {"p005", *(f"p{i:03d}" for i in range(150, 170))}
    assert not removed & {h.id for h in resident.sparse_search(" ".join(QUERIES), 500)}


def test_writes_through_another_connection_reach_the_copy(tmp_path: Path) -> None:
    """Another ``SqliteVectorIndex`` on the file (another process, in effect) writes; the
    reader's copy applies the delta and answers like a full scoring of the file."""
    path = tmp_path / "vectors.sqlite"
    reader = SqliteVectorIndex(path)
    reader.open(MODEL, DIM)
    reader.upsert(points(generated(43, 200)))
    for query in QUERIES:
        assert listed(reader.sparse_search(query, 12)) == full_scoring(path, query, 12)
    before = reader._postings.cache.snapshot
    writer = SqliteVectorIndex(path)
    writer.open(MODEL, DIM, create=False)
    writer.upsert(points({pid: t for pid, t in generated(47, 200).items() if pid < "p080"}))
    writer.delete_ids(["p150", "p151"])
    writer.close()
    for query in QUERIES:
        assert listed(reader.sparse_search(query, 12)) == full_scoring(path, query, 12), query
    after = reader._postings.cache.snapshot
    assert after.base is before.base
    assert after.key[1] == before.key[1] + 2  # two write transactions applied
    assert after.live == 198
    reader.close()


def test_empty_index_and_unknown_terms(both) -> None:
    resident, fts5 = both
    assert resident.sparse_search("w1 clause", 10) == []
    assert resident._postings.cache.snapshot.live == 0
    resident.upsert(points({"a": "alpha beta", "b": ""}))  # "b" has no terms at all
    for index in both:
        assert index.sparse_search("gamma delta", 10) == []
        assert index.sparse_search("the of", 10) == []  # stopwords only: no terms
        assert [h.id for h in index.sparse_search("gamma alpha", 10)] == ["a"]
    resident.delete_ids(["a", "b"])
    assert resident.sparse_search("alpha", 10) == []


def test_more_points_than_resident_points_use_fts5(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite"
    index = SqliteVectorIndex(path, resident_points=150)
    index.open(MODEL, DIM)
    fts5 = SqliteVectorIndex(path, resident_points=0)
    fts5.open(MODEL, DIM, create=False)
    index.upsert(points(generated(53, 120)))
    assert listed(index.sparse_search("w2 w9", 10)) == listed(fts5.sparse_search("w2 w9", 10))
    assert index._postings.cache is not None
    index.upsert(points({f"more{i}": f"w{i % 9} w2" for i in range(40)}))  # 160 points now
    assert listed(index.sparse_search("w2 w9", 10)) == listed(fts5.sparse_search("w2 w9", 10))
    assert index._postings.cache is None  # let go once past the bound
    assert listed(index.sparse_search("w2 w9", 40)) == listed(fts5.sparse_search("w2 w9", 40))
    assert index._postings.cache is None  # not loaded again while past it
    index.delete_ids([f"more{i}" for i in range(40)])
    assert listed(index.sparse_search("w2 w9", 10)) == listed(fts5.sparse_search("w2 w9", 10))
    assert index._postings.cache is not None
    index.close()
    fts5.close()


def test_a_version_2_file_is_searched_by_fts5_until_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite"
    writer = SqliteVectorIndex(path)
    writer.open(MODEL, DIM)
    writer.upsert(points(generated(97, 80)))
    expected = full_scoring(path, "w3 w5 clause", 10)
    writer.close()
    downgrade_to_version_2(path)
    reader = SqliteVectorIndex(path)
    reader.open(MODEL, DIM, create=False)  # a reader never upgrades the file
    assert listed(reader.sparse_search("w3 w5 clause", 10)) == expected
    assert reader._postings.cache is None
    writer.open(MODEL, DIM)  # the writer upgrades it: codes tables, a new epoch
    assert listed(reader.sparse_search("w3 w5 clause", 10)) == expected
    assert reader._postings.cache.snapshot.live == 80
    reader.close()
    writer.close()


def test_large_deltas_load_the_copy_afresh(both, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vectors_postings, "RELOAD_MINIMUM", 10)
    resident, fts5 = both
    resident.upsert(varied(generated(59, 200)))
    assert assert_alike(resident, fts5, QUERIES[:2], (5,)) > 0
    first = resident._postings.cache.snapshot
    resident.upsert(varied(generated(61, 200)))  # every point rewritten: all dead, all new
    assert assert_alike(resident, fts5, QUERIES[:2], (5,)) > 0
    applied = resident._postings.cache.snapshot
    assert applied.base is first.base and applied.dead == 200
    resident.upsert(varied({"p000": "w1 w2"}))  # the next refresh sees the copy outgrown
    assert assert_alike(resident, fts5) > 100
    reloaded = resident._postings.cache.snapshot
    assert reloaded.base is not first.base
    assert (reloaded.dead, reloaded.live, reloaded.delta) == (0, 200, {})


def test_a_transaction_older_than_the_copy_is_answered_by_fts5(tmp_path: Path) -> None:
    """A search whose read transaction began before another thread moved the copy on gets
    ``None`` (then FTS5 answers from its own snapshot); the copy is not taken back."""
    path = tmp_path / "vectors.sqlite"
    index = SqliteVectorIndex(path)
    index.open(MODEL, DIM)
    index.upsert(points(generated(67, 50)))
    tables = PostingsTables("chunks")
    old = sqlite3.connect(str(path), isolation_level=None)
    new = sqlite3.connect(str(path), isolation_level=None)

    def key(conn: sqlite3.Connection) -> tuple[str, int]:
        state = dict(conn.execute("SELECT key, value FROM chunks_meta").fetchall())
        return state["epoch"], int(state["generation"])

    old.execute("BEGIN")
    old_key = key(old)
    index.upsert(points({"late": "w1 w1 w1"}))
    new.execute("BEGIN")
    assert tables.refreshed(new, key(new), 1000).live == 51
    assert tables.refreshed(old, old_key, 1000) is None
    assert tables.cache.key == key(new)
    old.execute("COMMIT")
    new.execute("COMMIT")
    old.close()
    new.close()
    index.close()


def test_a_search_does_not_wait_for_a_long_update(both) -> None:
    """While another thread holds the copy (a load takes seconds at 100k points), a search
    of a newer generation is answered by FTS5, alike, and the copy is left as it was."""
    resident, fts5 = both
    resident.upsert(points(generated(103, 60)))
    resident.sparse_search("w1", 1)
    cache = resident._postings.cache
    held = cache.key
    resident.upsert(points({"late": "w1 w2 w2"}))
    with cache.lock:
        assert listed(resident.sparse_search("w1 w2", 8)) == listed(fts5.sparse_search("w1 w2", 8))
        assert cache.key == held
    assert listed(resident.sparse_search("w1 w2", 8)) == listed(fts5.sparse_search("w1 w2", 8))
    assert cache.key[1] == held[1] + 1


def test_threads_searching_while_a_writer_commits_see_whole_states(tmp_path: Path) -> None:
    """Readers on several threads share one copy while another connection rewrites the
    corpus between two texts; every answer is one of the two states' answers."""
    path = tmp_path / "vectors.sqlite"
    index = SqliteVectorIndex(path)
    index.open(MODEL, DIM)
    states = [generated(71, 120), generated(73, 120)]
    expected = []
    for texts in states:
        index.upsert(points(texts))
        expected.append(full_scoring(path, "w1 w4 clause", 8))
    assert expected[0] != expected[1]
    writer = SqliteVectorIndex(path)
    writer.open(MODEL, DIM, create=False)
    failures: list[object] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            try:
                got = listed(index.sparse_search("w1 w4 clause", 8))
            except Exception as exc:  # noqa: BLE001 - reported below
                failures.append(exc)
                return
            if got not in expected:
                failures.append(got)

    readers = [threading.Thread(target=read) for _ in range(3)]
    for reader in readers:
        reader.start()
    for round_ in range(8):
        writer.upsert(points(states[round_ % 2]))
    stop.set()
    for reader in readers:
        reader.join()
    assert failures == []
    writer.close()
    index.close()


def test_answers_equal_qdrant_after_rewrites(pair) -> None:  # noqa: F811
    sqlite, qdrant = pair
    for index in pair:
        index.upsert(varied(generated(79, 200)))
        index.upsert(varied({pid: t for pid, t in generated(83, 200).items() if pid < "p060"}))
        index.delete_ids(["p100", "p101", "p102"])
    for query in QUERIES:
        for limit, documents in ((5, None), (40, None), (6, ["doc-1", "doc-4"])):
            mine = sqlite.sparse_search(query, limit, documents=documents)
            theirs = qdrant.sparse_search(query, limit, documents=documents)
            assert [h.id for h in mine] == [h.id for h in theirs], (query, limit, documents)
            assert [h.score for h in mine] == pytest.approx([h.score for h in theirs], abs=1e-6)


def test_the_resident_bound_comes_from_the_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KB_VECTOR_RESIDENT_POINTS", raising=False)
    assert open_vector_index(Settings(home=tmp_path)).resident_points == vectors_postings.RESIDENT_POINTS
    assert vectors_postings.RESIDENT_POINTS == 1_000_000  # 94 ms hybrid p95 at 1M (sparse-resident-…-1M.md)
    monkeypatch.setenv("KB_VECTOR_RESIDENT_POINTS", "0")
    assert open_vector_index(Settings(home=tmp_path)).resident_points == 0
