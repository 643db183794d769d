"""SQLite's sparse search ranks by Qdrant's score (kb_shared.stores.vectors_sparse): a real
SQLite index and a Qdrant local-mode collection built from the same points return the same
ids in the same order with the same scores, ties ordered by id on both.

The hand-built points make the expected lists writable; the generated corpus (a fixed seed,
words with Zipf-like frequencies) checks the candidate bound: with a shallow candidate
depth the answer still equals a full scoring of every point. The comparisons with Qdrant
run on both SQLite paths (``pair`` is parametrised): the in-memory postings
(``kb_shared.stores.vectors_postings``) and FTS5's candidates (``resident_points=0``); the
tests of the FTS5 scorer's own machinery pin the FTS5 path.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pysqlite3.dbapi2 as sqlite3
import pytest
from qdrant_client import QdrantClient, models

from kb_shared.search.sparse import bm25_term_weight, fts_document, sparse_vector
from kb_shared.stores.vectors import Point
from kb_shared.stores.vectors_qdrant import SPARSE, QdrantVectorIndex
from kb_shared.stores.vectors_sparse import (
    counted_score,
    fts5_idf,
    length_ratio,
    outside_bound,
    point_score,
    qdrant_idf,
    query_terms,
    read_averages,
    read_varints,
    term_counts,
)
from kb_shared.stores.vectors_sqlite import SqliteVectorIndex

MODEL = "test-model"
DIM = 4

HAND = {
    "a": "zeta alpha",
    "b": "zeta zeta beta gamma",
    "c": "alpha beta",
    "d": "zeta alpha",  # the same text as "a": every query ties the two
}


def points(texts: dict[str, str]) -> list[Point]:
    return [
        Point(id=pid, document=f"doc-{i % 3}", kind="text", text=text,
              dense=[1.0, float(i % 5), 0.0, 1.0], payload={})
        for i, (pid, text) in enumerate(texts.items())
    ]


#: ``SqliteVectorIndex(resident_points=...)`` of each sparse path: in-memory postings, FTS5.
PATHS = {"resident": 10_000, "fts5": 0}


@pytest.fixture(params=sorted(PATHS))
def pair(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[SqliteVectorIndex, QdrantVectorIndex]]:
    """An SQLite index (on each sparse path in turn) and a Qdrant local-mode collection (a
    folder), both empty."""
    sqlite = SqliteVectorIndex(tmp_path / "vectors.sqlite", resident_points=PATHS[request.param])
    sqlite.open(MODEL, DIM)
    qdrant = QdrantVectorIndex(QdrantClient(path=str(tmp_path / "qdrant")), "kb")
    qdrant.open(MODEL, DIM)
    yield sqlite, qdrant
    # each test searched on the path it was given
    assert (sqlite._postings.cache is not None) == (request.param == "resident")
    sqlite.close()
    qdrant.close()


def listed(hits: list) -> list[tuple[str, float]]:
    return [(h.id, h.score) for h in hits]


def test_hand_built_points_rank_and_score_alike(pair) -> None:
    sqlite, qdrant = pair
    for index in pair:
        index.upsert(points(HAND))
    expected = {
        "zeta": ["b", "a", "d"],
        "alpha beta": ["c", "b", "a", "d"],
        "zeta zeta gamma": ["b", "a", "d"],
        "alpha": ["a", "c", "d"],  # a three-way tie: by id
    }
    for query, order in expected.items():
        got = sqlite.sparse_search(query, 10)
        theirs = qdrant.sparse_search(query, 10)
        assert [h.id for h in got] == order, query
        assert [h.id for h in theirs] == order, query
        for mine, other in zip(got, theirs, strict=True):
            assert mine.score == pytest.approx(other.score, abs=1e-6)
    # "zeta": N = 4, df = 3; b holds it twice in 4 terms, the query once in 1
    idf = math.log((4 - 3 + 0.5) / (3 + 0.5) + 1)
    assert idf == pytest.approx(0.3566749, abs=1e-7)
    b_score = bm25_term_weight(1, 1) * idf * bm25_term_weight(2, 4)
    assert sqlite.sparse_search("zeta", 1)[0].score == pytest.approx(1.1446077, abs=1e-6)
    assert b_score == pytest.approx(1.1446077, abs=1e-6)


def test_a_tie_at_the_cut_keeps_the_smallest_id(pair) -> None:
    sqlite, qdrant = pair
    for index in pair:
        index.upsert(points(HAND))
    # a, c and d score alike for "alpha"; Qdrant's own order puts later points first
    indices, values = sparse_vector("alpha")
    raw = qdrant.client.query_points(
        "kb", query=models.SparseVector(indices=indices, values=values),
        using=SPARSE, limit=1, with_payload=True,
    )
    assert raw.points[0].payload["id"] != "a"
    assert listed(sqlite.sparse_search("alpha", 1)) == listed(qdrant.sparse_search("alpha", 1))
    assert [h.id for h in qdrant.sparse_search("alpha", 2)] == ["a", "c"]
    assert [h.id for h in sqlite.sparse_search("alpha", 2)] == ["a", "c"]


WORDS = [f"w{i}" for i in range(60)] + ["so_op_3705", "in008-24", "3.1.5", "clause"]


def generated(seed: int, count: int) -> dict[str, str]:
    """``count`` texts of 3-80 words drawn with Zipf-like weights (w0 most common), some
    repeated whole so ties occur."""
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) for rank in range(len(WORDS))]
    texts: dict[str, str] = {}
    for i in range(count):
        if i % 17 == 5:
            texts[f"p{i:03d}"] = texts[f"p{i - 1:03d}"]
            continue
        texts[f"p{i:03d}"] = " ".join(rng.choices(WORDS, weights, k=rng.randint(3, 80)))
    return texts


QUERIES = ["w0", "w0 w1 w2", "w3 w40", "w59 w0 w0", "so_op_3705", "SO_OP_3705 clause",
           "In008-24 3.1.5 w7", "w12 w13 w14 w15 w16 w17", "w1 w1 w1 w55"]


def test_generated_corpus_ranks_alike_with_filters(pair) -> None:
    sqlite, qdrant = pair
    corpus = points(generated(7, 150))
    for index in pair:
        index.upsert(corpus)
    for query in QUERIES:
        for limit, documents in ((5, None), (30, None), (3, ["doc-0", "doc-2"])):
            mine = sqlite.sparse_search(query, limit, documents=documents)
            theirs = qdrant.sparse_search(query, limit, documents=documents)
            assert [h.id for h in mine] == [h.id for h in theirs], (query, limit, documents)
            assert [h.score for h in mine] == pytest.approx([h.score for h in theirs], abs=1e-6)
    assert sqlite._scorer.capped == 0


def full_scoring(path: Path, query: str, limit: int) -> list[tuple[str, float]]:
    """Every point scored with Qdrant's formula straight from the stored FTS5 terms."""
    conn = sqlite3.connect(str(path))
    rows = conn.execute(
        "SELECT p.id, f.terms FROM chunks_points AS p JOIN chunks_fts AS f ON f.rowid = p.rowid"
    ).fetchall()
    conn.close()
    frequencies: dict[str, int] = {}
    for _, stored in rows:
        for term in set(stored.split(" ")):
            frequencies[term] = frequencies.get(term, 0) + 1
    terms = query_terms(query, frequencies, len(rows))
    scored = [(pid, point_score(terms, stored)) for pid, stored in rows]
    return sorted((s for s in scored if s[1] > 0), key=lambda s: (-s[1], s[0]))[:limit]


def test_a_shallow_candidate_depth_deepens_until_exact(tmp_path: Path) -> None:
    index = SqliteVectorIndex(tmp_path / "vectors.sqlite", resident_points=0)
    index.open(MODEL, DIM)
    index.upsert(points(generated(11, 300)))
    index._scorer.min_depth, index._scorer.depth_factor = 1, 1
    for query in QUERIES:
        for limit in (1, 4, 12):
            assert listed(index.sparse_search(query, limit)) == full_scoring(
                tmp_path / "vectors.sqlite", query, limit), (query, limit)
    assert index._scorer.deepened > 0  # the bound did fail at depth 1..12 somewhere
    assert index._scorer.capped == 0
    index.close()


def test_statistics_follow_deletes_and_replacements(pair) -> None:
    """df and N after re-embedding equal a fresh build's (Qdrant drops deleted points from
    its IDF at once in local mode; FTS5 stores its text, so it deletes exactly)."""
    sqlite, qdrant = pair
    for index in pair:
        index.upsert(points({f"old{i}": "w1 w2 w3 " * (i + 1) for i in range(6)}))
        index.upsert(points(generated(3, 40)))
        index.delete_ids([f"old{i}" for i in range(6)])
    for query in ("w1", "w2 w3", "w0 w9"):
        mine, theirs = sqlite.sparse_search(query, 8), qdrant.sparse_search(query, 8)
        assert [h.id for h in mine] == [h.id for h in theirs], query
        assert [h.score for h in mine] == pytest.approx([h.score for h in theirs], abs=1e-6)


def test_averages_record_gives_rows_and_tokens(tmp_path: Path) -> None:
    index = SqliteVectorIndex(tmp_path / "vectors.sqlite")
    index.open(MODEL, DIM)
    texts = generated(5, 150)
    index.upsert(points(texts))
    index.delete_ids(["p000", "p001"])
    conn = sqlite3.connect(str(tmp_path / "vectors.sqlite"))
    block = conn.execute("SELECT block FROM chunks_fts_data WHERE id = 1").fetchone()[0]
    conn.close()
    kept = [t for pid, t in texts.items() if pid not in ("p000", "p001")]
    tokens = sum(len(fts_document(t).split(" ")) for t in kept)
    assert read_averages(block) == (148, tokens)
    assert read_averages(b"") == (0, 0)
    assert read_averages(bytes([0x82, 0x2A, 0x82, 0xE0, 0x57])) == (298, 45143)
    with pytest.raises(ValueError, match="too short"):
        read_averages(bytes([0x05]))
    assert read_varints(bytes([0x81, 0x80, 0x00]), 1) == [16384]
    assert read_varints(bytes([0xFF] * 8 + [0x01]), 1) == [(1 << 64) - 255]
    index.close()


def test_idf_expressions() -> None:
    assert qdrant_idf(3, 4) == pytest.approx(math.log(1.5 / 3.5 + 1))
    assert qdrant_idf(4, 4) > 0  # Qdrant's never reaches 0
    assert fts5_idf(1, 10) == pytest.approx(math.log(9.5 / 1.5))
    assert fts5_idf(8, 10) == 1e-6  # FTS5 floors a negative IDF


def test_outside_bound_is_a_fractional_knapsack() -> None:
    terms = query_terms("x y", {"x": 1, "y": 8}, 10)
    x = next(t for t in terms if t.term == "x")
    y = next(t for t in terms if t.term == "y")
    # rho = 1: y costs almost nothing in FTS5 units (df 8 of 10), so it is taken whole
    bound = outside_bound(terms, 1.0, 1.0)
    assert bound == pytest.approx(y.value * 2.2 + x.value * (1.0 - y.fts_idf * 2.2) / x.fts_idf)
    assert outside_bound(terms, 1.0, 1.5) > bound
    assert outside_bound([], 5.0, 1.0) == 0.0


def test_length_ratio() -> None:
    # a corpus averaging 256 terms: FTS5 and Qdrant normalise alike
    assert length_ratio(10_000, 256.0) == 1.0
    # average 128, longest 256: (1 + 1.2 * (0.25 + 0.75 * 2)) / (1 + 1.2) = 3.1 / 2.2
    assert length_ratio(256, 128.0) == pytest.approx(3.1 / 2.2)
    assert length_ratio(0, 128.0) == 1.0
    assert length_ratio(5, 0.0) == math.inf


def test_search_leaves_the_file_schema_alone(tmp_path: Path) -> None:
    """The vocabulary table is a temp one, so a file written before the scorer existed is
    searched as it is (no upgrade) and searching writes nothing to it."""
    path = tmp_path / "vectors.sqlite"
    index = SqliteVectorIndex(path)
    index.open(MODEL, DIM)
    index.upsert(points(HAND))

    def schema() -> list[tuple]:
        conn = sqlite3.connect(str(path))
        try:
            return conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        finally:
            conn.close()

    before = schema()
    assert [h.id for h in index.sparse_search("zeta", 5)] == ["b", "a", "d"]
    assert schema() == before
    assert not any("vocab" in name for _, name, _ in before)
    index.close()


def test_more_ties_than_the_margin_still_cut_by_id(pair) -> None:
    """20 points tie (one text); Qdrant is asked again with a larger limit until the tie
    group is whole, so the cut keeps the 3 smallest ids on both backends."""
    tied = {f"t{i:02d}": "the same words here" for i in reversed(range(20))}
    for index in pair:
        index.upsert(points({**tied, "other": "words elsewhere, in a longer text than theirs"}))
    for index in pair:
        assert [h.id for h in index.sparse_search("same", 3)] == ["t00", "t01", "t02"]
        assert [h.id for h in index.sparse_search("words", 21)] == [*sorted(tied), "other"]


def test_counted_score_equals_the_sum_over_stored_terms() -> None:
    """The cached-counts score is the string-searching one, bit for bit (same sum order)."""
    texts = generated(13, 120)
    frequencies: dict[str, int] = {}
    for text in texts.values():
        for term in set(fts_document(text).split(" ")):
            frequencies[term] = frequencies.get(term, 0) + 1
    for query in QUERIES:
        terms = query_terms(query, frequencies, len(texts))
        for text in texts.values():
            tokens = fts_document(text).split(" ")
            total = 0.0
            for term in terms:
                if term.term in tokens:
                    total += term.value * bm25_term_weight(tokens.count(term.term), len(tokens))
            expected = float(np.float32(total))
            assert counted_score(terms, *term_counts(" ".join(tokens))) == expected
            assert point_score(terms, " ".join(tokens)) == expected
    assert term_counts("a b a") == ({"a": 2, "b": 1}, 3)


def test_cached_terms_follow_writes_from_another_index(tmp_path: Path) -> None:
    """A second ``SqliteVectorIndex`` on the same file (another process, in effect) rewrites
    points the first has cached; the first's next answers equal a full scoring."""
    path = tmp_path / "vectors.sqlite"
    reader = SqliteVectorIndex(path, resident_points=0)
    reader.open(MODEL, DIM)
    reader.upsert(points(generated(17, 200)))
    for query in QUERIES:
        assert listed(reader.sparse_search(query, 12)) == full_scoring(path, query, 12)
    assert reader._scorer.cache.points  # warm
    writer = SqliteVectorIndex(path)
    writer.open(MODEL, DIM, create=False)
    rewritten = {pid: text for pid, text in generated(19, 200).items() if pid < "p100"}
    writer.upsert(points(rewritten))
    writer.delete_ids(["p150", "p151"])
    writer.close()
    for query in QUERIES:
        assert listed(reader.sparse_search(query, 12)) == full_scoring(path, query, 12), query
    assert all(entry[0] not in ("p150", "p151") for entry in reader._scorer.cache.points.values())
    reader.close()


def test_cache_stays_within_its_capacity(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite"
    index = SqliteVectorIndex(path, resident_points=0)
    index.open(MODEL, DIM)
    index.upsert(points(generated(23, 300)))
    index._scorer.cache_points = 7
    for query in QUERIES:
        for limit in (3, 40):
            assert listed(index.sparse_search(query, limit)) == full_scoring(path, query, limit)
            assert len(index._scorer.cache.points) <= 7
    index.close()


@pytest.mark.parametrize("path_name", sorted(PATHS))
def test_cached_terms_follow_a_dropped_and_rebuilt_index(tmp_path: Path, path_name: str) -> None:
    """Rebuilt with the texts swapped: same rowids, generation and totals, other terms."""
    path = tmp_path / "vectors.sqlite"
    index = SqliteVectorIndex(path, resident_points=PATHS[path_name])
    index.open(MODEL, DIM)
    index.upsert(points({"a": "alpha beta", "b": "gamma delta", "c": "alpha"}))
    assert [h.id for h in index.sparse_search("alpha gamma", 3)] == ["b", "c", "a"]
    other = SqliteVectorIndex(path)
    other.drop()
    other.open(MODEL, DIM)
    other.upsert(points({"a": "gamma delta", "b": "alpha beta", "c": "alpha"}))
    other.close()
    assert [h.id for h in index.sparse_search("alpha gamma", 3)] == ["a", "c", "b"]
    index.close()


def test_a_query_of_more_terms_than_one_lookup_takes(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite"
    index = SqliteVectorIndex(path, resident_points=0)
    index.open(MODEL, DIM)
    index.upsert(points(generated(29, 100)))
    query = " ".join(f"absent{i}" for i in range(1200)) + " w2 w30 clause"
    assert listed(index.sparse_search(query, 10)) == full_scoring(path, query, 10)
    assert len(index.sparse_search(query, 10)) == 10
    index.close()
