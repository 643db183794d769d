"""Contract suite for the vector index role, run unchanged against every backend:

* ``sqlite`` — ``SqliteVectorIndex`` on a file in ``tmp_path`` (sqlite-vec + FTS5);
* ``sqlite-codes`` — the same with ``exact_below=0``: every dense search ranks the binary
  codes and rescores the candidates (the path large indexes take);
* ``qdrant`` — ``QdrantVectorIndex`` on ``QdrantClient(":memory:")`` (Qdrant's local mode,
  same API as a server).

Vectors are 4-dimensional and hand-built so every expected order can be written down. The
end of the file holds the few backend-specific tests (WAL readers, SQL rollback, Qdrant
point ids and connection errors).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import QdrantClient

from kb_shared.errors import EmbeddingMismatchError, StoreError, StoreUnavailableError
from kb_shared.identity import point_uuid
from kb_shared.stores.vectors import (
    CollectionInfo,
    Point,
    StoredPoint,
    VectorIndex,
    reciprocal_rank_fusion,
)
from kb_shared.stores.vectors_qdrant import QdrantVectorIndex
from kb_shared.stores.vectors_sqlite import SqliteVectorIndex

MODEL = "test-model-v1"
DIM = 4


@dataclass
class Backend:
    """Makes index handles that all see the same underlying store."""

    name: str
    make: Callable[[], VectorIndex]
    #: a handle on a second, separate store of the same backend
    make_other: Callable[[], VectorIndex]


@pytest.fixture(params=["sqlite", "sqlite-codes", "qdrant"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    handles: list[VectorIndex] = []
    if request.param.startswith("sqlite"):
        path = tmp_path / "vectors.sqlite"
        # "sqlite-codes": dense searches always go through the binary codes (no exact scan)
        tuning = {"exact_below": 0} if request.param == "sqlite-codes" else {}

        def make(where: Path = path) -> VectorIndex:
            handles.append(SqliteVectorIndex(where, **tuning))
            return handles[-1]

        def make_other() -> VectorIndex:
            return make(tmp_path / "other.sqlite")
    else:
        client = QdrantClient(":memory:")

        def make(collection: str = "kb_test") -> VectorIndex:
            handles.append(QdrantVectorIndex(client, collection))
            return handles[-1]

        def make_other() -> VectorIndex:
            return make("kb_other")

    yield Backend(request.param, make, make_other)
    for handle in handles:
        handle.close()
    if request.param == "qdrant":
        client.close()


@pytest.fixture
def fresh_index(backend: Backend) -> Callable[[], VectorIndex]:
    """Makes an opened index in a second, separate store of the same backend."""

    def make() -> VectorIndex:
        other = backend.make_other()
        other.open(MODEL, DIM)
        return other

    return make


@pytest.fixture
def index(backend: Backend) -> VectorIndex:
    idx = backend.make()
    idx.open(MODEL, DIM)
    return idx


def point(
    pid: str,
    document: str = "doc-a",
    *,
    text: str | None = None,
    dense: list[float] | None = None,
    kind: str = "text",
    payload: dict | None = None,
    sparse_text: str | None = None,
) -> Point:
    return Point(
        id=pid,
        document=document,
        kind=kind,
        text=text if text is not None else f"text of {pid}",
        dense=dense if dense is not None else [1.0, 0.5, 0.25, 0.125],
        payload=payload or {},
        sparse_text=sparse_text,
    )


def ids(hits: list) -> list[str]:
    return [hit.id for hit in hits]


# -- open / record / mismatch ------------------------------------------------------------


def test_new_store_describes_none_and_open_records(backend: Backend) -> None:
    idx = backend.make()
    assert idx.describe() is None
    assert idx.open(MODEL, DIM) == CollectionInfo(model=MODEL, dimension=DIM)
    assert backend.make().describe() == CollectionInfo(model=MODEL, dimension=DIM)


def test_open_without_create_on_missing_store_raises(backend: Backend) -> None:
    with pytest.raises(StoreError, match="build it first"):
        backend.make().open(MODEL, DIM, create=False)


def test_an_index_dropped_while_a_reader_opens_it_is_absent_not_a_broken_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The writer drops the index between the reader's two reads (the recorded model, then
    # the layout version): the reader says there is no index, as when it never existed.
    path = tmp_path / "v.sqlite"
    writer = SqliteVectorIndex(path)
    writer.open(MODEL, DIM)
    reader = SqliteVectorIndex(path)
    described = reader.describe

    def describe_then_drop() -> CollectionInfo | None:
        info = described()
        writer.drop()
        return info

    monkeypatch.setattr(reader, "describe", describe_then_drop)
    expected = f"no vector index 'chunks' in {path}; build it first (materialise the embeddings"
    with pytest.raises(StoreError, match=f"^{re.escape(expected)}"):
        reader.open(MODEL, DIM, create=False)
    assert reader.info is None


def test_reopen_same_model_is_fine_and_other_model_says_reembed(backend: Backend) -> None:
    first = backend.make()
    first.open(MODEL, DIM)
    first.upsert([point("doc-a-0")])
    again = backend.make()
    assert again.open(MODEL, DIM, create=False) == CollectionInfo(MODEL, DIM)
    assert again.count() == 1
    with pytest.raises(EmbeddingMismatchError, match="re-embed") as excinfo:
        backend.make().open("other-model", DIM)
    assert "'test-model-v1' (4 dimensions)" in str(excinfo.value)
    assert "'other-model' (4 dimensions)" in str(excinfo.value)
    with pytest.raises(EmbeddingMismatchError, match="re-embed"):
        backend.make().open(MODEL, 8)
    assert backend.make().describe() == CollectionInfo(MODEL, DIM)  # nothing was overwritten


def test_use_before_open_raises(backend: Backend) -> None:
    with pytest.raises(StoreError, match="before open"):
        backend.make().upsert([point("doc-a-0")])


# -- writes and reads ----------------------------------------------------------------------


def test_upsert_fetch_roundtrip_unicode_long_text_and_payload(index: VectorIndex) -> None:
    long_text = ("Clause 3.1.5 least privilege. " * 6700)[:200_000]
    payload = {
        "title": "Schedule of CVP factors — Müller/السلام",
        "version": "4.10.0",
        "page_start": 11,
        "page_end": 12,
        "score": 0.25,
        "sections": ["3 Dispatch", "3.1 Bids"],
        "nested": {"ok": True, "none": None},
    }
    points = [
        point("doc-a-0", text="Ölförderung und Straße; عَلَيْكُم السلام; 中文", payload=payload),
        point("doc-a-1", text=long_text, kind="table"),
        point("doc-a#figure-1", text="Figure: dispatch timeline", kind="figure"),
    ]
    assert index.upsert(points) == 3
    got = index.fetch(["doc-a#figure-1", "missing", "doc-a-0", "doc-a-1"])
    assert got == [
        StoredPoint("doc-a#figure-1", "doc-a", "figure", "Figure: dispatch timeline", {}),
        StoredPoint(
            "doc-a-0", "doc-a", "text", "Ölförderung und Straße; عَلَيْكُم السلام; 中文", payload
        ),
        StoredPoint("doc-a-1", "doc-a", "table", long_text, {}),
    ]
    assert len(got[2].text) == 200_000
    assert index.fetch([]) == []
    assert ids(index.sparse_search("straße", 5)) == ["doc-a-0"]
    assert ids(index.sparse_search("السلام", 5)) == ["doc-a-0"]


def test_reupsert_replaces_text_vector_and_terms(index: VectorIndex) -> None:
    index.upsert(
        [
            point("doc-a-0", text="giraffe grazing", dense=[1, 0, 0, 0], payload={"v": 1}),
            point("doc-a-1", text="lion resting", dense=[0, 1, 0, 0]),
            point("doc-b-0", "doc-b", text="hippo bathing", dense=[0, 0, 1, 0]),
        ]
    )
    assert index.count() == 3
    assert (
        index.upsert([point("doc-a-0", text="zebra running", dense=[0, 0, 0, 1], payload={"v": 2})])
        == 1
    )
    assert index.count() == 3
    assert index.fetch(["doc-a-0"]) == [
        StoredPoint("doc-a-0", "doc-a", "text", "zebra running", {"v": 2})
    ]
    assert index.sparse_search("giraffe", 10) == []
    assert ids(index.sparse_search("zebra", 10)) == ["doc-a-0"]
    assert ids(index.dense_search([0, 0, 0, 1], 1)) == ["doc-a-0"]
    assert index.dense_search([1, 0, 0, 0], 1)[0].score < 0.01  # old vector is gone


def test_repeated_id_in_one_batch_keeps_the_last(index: VectorIndex) -> None:
    assert index.upsert([point("doc-a-0", text="first"), point("doc-a-0", text="second")]) == 1
    assert [p.text for p in index.fetch(["doc-a-0"])] == ["second"]
    assert index.count() == 1


def test_sparse_text_is_what_the_sparse_side_indexes(index: VectorIndex) -> None:
    index.upsert([point("doc-a-0", text="body words", sparse_text="Dispatch › Bids body words")])
    assert ids(index.sparse_search("bids", 5)) == ["doc-a-0"]
    assert index.fetch(["doc-a-0"])[0].text == "body words"


def test_delete_ids_ignores_unknown(index: VectorIndex) -> None:
    index.upsert([point("doc-a-0"), point("doc-a-1"), point("doc-b-0", "doc-b")])
    assert index.delete_ids(["doc-a-1", "no-such-id", "doc-a-1"]) == 1
    assert index.delete_ids(["no-such-id"]) == 0
    assert index.delete_ids([]) == 0
    assert index.list_ids() == ["doc-a-0", "doc-b-0"]
    # the deleted point's own code no longer matches; the survivors match on its parts
    assert ids(index.sparse_search("doc-a-1", 10)) == ["doc-a-0", "doc-b-0"]
    assert "doc-a-1" not in ids(index.dense_search([1, 0.5, 0.25, 0.125], 10))


def test_delete_document(index: VectorIndex) -> None:
    index.upsert([point("doc-a-0"), point("doc-a-1"), point("doc-b-0", "doc-b", text="keep me")])
    assert index.delete_document("no-such-doc") == 0
    assert index.delete_document("doc-a") == 2
    assert index.list_ids() == ["doc-b-0"]
    assert ids(index.dense_search([1, 0.5, 0.25, 0.125], 10)) == ["doc-b-0"]
    assert ids(index.sparse_search("text of doc", 10)) == []
    assert index.delete_document("doc-a") == 0


def test_count_and_list_ids_by_document_and_kind(index: VectorIndex) -> None:
    index.upsert(
        [
            point("doc-a-1", kind="text"),
            point("doc-a-0", kind="table"),
            point("doc-a#figure-1", kind="figure"),
            point("doc-b-0", "doc-b", kind="text"),
        ]
    )
    assert index.count() == 4
    assert index.count(document="doc-a") == 3
    assert index.count(kind="text") == 2
    assert index.count(document="doc-b", kind="table") == 0
    assert index.count(document="nope") == 0
    assert index.list_ids() == ["doc-a#figure-1", "doc-a-0", "doc-a-1", "doc-b-0"]
    assert index.list_ids(document="doc-a", kind="text") == ["doc-a-1"]
    assert index.list_ids(kind="figure") == ["doc-a#figure-1"]


# -- search ---------------------------------------------------------------------------------


def test_dense_search_order_and_cosine_scores(index: VectorIndex) -> None:
    index.upsert(
        [
            point("e", dense=[-1, 0, 0, 0]),  # cos -1
            point("c", dense=[1, 1, 1, 1]),  # cos 0.5
            point("a", dense=[2, 0, 0, 0]),  # cos 1 (length does not matter)
            point("d", dense=[0, 1, 0, 0]),  # cos 0
            point("b", dense=[1, 1, 0, 0]),  # cos 0.7071
        ]
    )
    hits = index.dense_search([1, 0, 0, 0], 5)
    assert ids(hits) == ["a", "b", "c", "d", "e"]
    assert [h.score for h in hits] == pytest.approx([1.0, 2**-0.5, 0.5, 0.0, -1.0], abs=1e-5)
    assert ids(index.dense_search(np.array([3.0, 0, 0, 0]), 3)) == ["a", "b", "c"]
    assert index.dense_search([1, 0, 0, 0], 0) == []


def test_dense_filter_returns_limit_matches_even_when_far(index: VectorIndex) -> None:
    near = [point(f"near-{i}", f"doc-{i % 3}", dense=[1, 0.01 * i, 0, 0]) for i in range(30)]
    far = [point(f"far-{i}", "doc-far", dense=[-1, 0, 0.01 * i, 0], kind="table") for i in range(5)]
    index.upsert(near + far)
    # cos(far-i, query) = -1 / sqrt(1 + 0.0001 i^2): far-4 is the least far
    hits = index.dense_search([1, 0, 0, 0], 3, documents=["doc-far"])
    assert ids(hits) == ["far-4", "far-3", "far-2"]
    assert all(h.score < -0.99 for h in hits)
    hits = index.dense_search([1, 0, 0, 0], 10, kinds=["table"])
    assert ids(hits) == ["far-4", "far-3", "far-2", "far-1", "far-0"]
    hits = index.dense_search([1, 0, 0, 0], 2, documents=["doc-far", "doc-1"], kinds=["text"])
    assert ids(hits) == ["near-1", "near-4"]


def test_sparse_search_exact_code_beats_its_parts(index: VectorIndex) -> None:
    index.upsert(
        [
            point(
                "decoy-1", text="Market notice IN008 was issued on 24 March; IN008 covers 24 units."
            ),
            point(
                "target",
                text="Under market notice IN008-24 AEMO revised the constraint equations "
                "for the Victorian region after a review of the dispatch outcomes.",
            ),
            point("decoy-2", text="IN008 24 IN008 24"),
            point("other", text="Fast start inflexibility profile, mode 2."),
        ]
    )
    hits = index.sparse_search("IN008-24", 10)
    assert ids(hits)[0] == "target"
    assert set(ids(hits)) == {"target", "decoy-1", "decoy-2"}
    assert hits[0].score > hits[1].score > 0
    assert ids(index.sparse_search("What does IN008-24 change?", 1)) == ["target"]


def test_sparse_search_treats_fts_syntax_as_words(index: VectorIndex) -> None:
    index.upsert(
        [
            point("target", text="IN008-24 notice"),
            point("other", text="nothing near here"),
        ]
    )
    hostile = 'IN008-24" OR * NEAR( -x col:1 ) "'
    assert ids(index.sparse_search(hostile, 10))[0] == "target"
    assert index.sparse_search('" * ( ) - :', 10) == []
    assert index.sparse_search("the of and", 10) == []
    assert index.sparse_search("", 10) == []


def test_filters_that_match_nothing_return_empty(index: VectorIndex) -> None:
    index.upsert([point("doc-a-0", text="dispatch"), point("doc-b-0", "doc-b", text="dispatch")])
    vec = [1, 0.5, 0.25, 0.125]
    assert index.dense_search(vec, 5, documents=["nope"]) == []
    assert index.sparse_search("dispatch", 5, kinds=["figure"]) == []
    assert index.hybrid_search(vec, "dispatch", 5, documents=["nope"]) == []
    for empty in ([], ()):
        assert index.dense_search(vec, 5, documents=empty) == []
        assert index.dense_search(vec, 5, kinds=empty) == []
        assert index.sparse_search("dispatch", 5, documents=empty) == []
        assert index.hybrid_search(vec, "dispatch", 5, documents=empty) == []
    assert ids(index.sparse_search("dispatch", 5, documents=["doc-b"])) == ["doc-b-0"]
    assert sorted(ids(index.dense_search(vec, 5, documents=None))) == ["doc-a-0", "doc-b-0"]


def test_hybrid_search_rrf_scores(index: VectorIndex) -> None:
    # dense order for [1,0,0,0]: a, b, c.  sparse order for "zeta": c (tf 2, short), a; b none.
    index.upsert(
        [
            point(
                "a", dense=[1, 0, 0, 0], text="zeta appears once in this rather longer chunk text"
            ),
            point("b", dense=[1, 1, 0, 0], text="nothing relevant"),
            point("c", dense=[1, 1, 1, 0], text="zeta zeta"),
        ]
    )
    assert ids(index.dense_search([1, 0, 0, 0], 3)) == ["a", "b", "c"]
    assert ids(index.sparse_search("zeta", 3)) == ["c", "a"]
    hits = index.hybrid_search([1, 0, 0, 0], "zeta", 3)
    # weighted RRF, k=10, dense 0.75, sparse 1.0:
    # a = .75/11 + 1/12 = 0.1515, c = .75/13 + 1/11 = 0.1486, b = .75/12 = 0.0625
    assert ids(hits) == ["a", "c", "b"]
    assert [h.score for h in hits] == pytest.approx(
        [0.75 / 11 + 1 / 12, 0.75 / 13 + 1 / 11, 0.75 / 12], rel=1e-12
    )
    assert [(h.dense_rank, h.sparse_rank) for h in hits] == [(1, 2), (3, 1), (2, None)]
    assert hits[0].dense_score == pytest.approx(1.0, abs=1e-5)
    assert ids(index.hybrid_search([1, 0, 0, 0], "zeta", 1)) == ["a"]
    # an extra ranked list (e.g. exact code matches) joins the fusion with its weight
    boosted = index.hybrid_search([1, 0, 0, 0], "zeta", 3, extra=[([hits[2]], 2.0)])
    assert ids(boosted) == ["b", "a", "c"]
    assert boosted[0].score == pytest.approx(0.75 / 12 + 2.0 / 11, rel=1e-12)
    # the sparse side searched beforehand (while the query was embedded) fuses as its own would
    searched = index.sparse_search("zeta", 50)
    again = index.hybrid_search([1, 0, 0, 0], "zeta", 3, sparse=searched)
    assert [(h.id, h.score, h.dense_rank, h.sparse_rank) for h in again] == [
        (h.id, h.score, h.dense_rank, h.sparse_rank) for h in hits
    ]
    # ...and it is the list that is fused: without its "c", c keeps only its dense rank
    only_a = index.hybrid_search([1, 0, 0, 0], "zeta", 3, sparse=searched[1:])
    assert ids(only_a) == ["a", "b", "c"]
    assert only_a[0].score == pytest.approx(0.75 / 11 + 1 / 11, rel=1e-12)
    assert only_a[2].sparse_rank is None


def test_reciprocal_rank_fusion_formula() -> None:
    # classic RRF (Cormack et al. 2009) with k=60 and equal weights
    assert reciprocal_rank_fusion([["a", "b", "c"], ["c", "a"]], k=60)[0] == (
        "a",
        1 / 61 + 1 / 62,
    )
    fused = reciprocal_rank_fusion([["a", "b"], ["b"]], k=10, weights=[0.5, 1.0])
    assert fused == [("b", 0.5 / 12 + 1 / 11), ("a", 0.5 / 11)]
    # a repeated id counts at its first position only
    assert reciprocal_rank_fusion([["a", "a", "b"]], k=1) == [("a", 1 / 2), ("b", 1 / 4)]
    with pytest.raises(ValueError, match="1 weights for 2 ranked lists"):
        reciprocal_rank_fusion([["a"], ["b"]], weights=[1.0])


# -- bad input ------------------------------------------------------------------------------


def test_wrong_dimension_raises_value_error(index: VectorIndex) -> None:
    with pytest.raises(ValueError, match="expected a vector of 4 dimensions, got 3"):
        index.upsert([point("doc-a-0", dense=[1, 0, 0])])
    with pytest.raises(ValueError, match="expected a vector of 4 dimensions, got 5"):
        index.dense_search([1, 0, 0, 0, 0], 3)
    with pytest.raises(ValueError, match="expected a vector of 4 dimensions, got 5"):
        index.hybrid_search([1, 0, 0, 0, 0], "x", 3)
    assert index.count() == 0


def test_unknown_kind_raises_value_error(index: VectorIndex) -> None:
    with pytest.raises(ValueError, match="unknown point kind 'image'"):
        index.upsert([point("doc-a-0", kind="image")])
    with pytest.raises(ValueError, match="unknown point kind 'image'"):
        index.dense_search([1, 0, 0, 0], 3, kinds=["image"])
    with pytest.raises(ValueError, match="unknown point kind 'image'"):
        index.sparse_search("x", 3, kinds=["image"])
    with pytest.raises(ValueError, match="unknown point kind 'image'"):
        index.count(kind="image")
    assert index.count() == 0


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (point("doc-a-9", dense=[0, 0, 0, 0]), "zero or non-finite"),
        (point("doc-a-9", dense=[float("nan"), 1, 0, 0]), "zero or non-finite"),
        (point("doc-a-9", dense=[1, 0]), "expected a vector of 4 dimensions"),
        (point("doc-a-9", kind="chart"), "unknown point kind"),
        (point("doc-a-9", payload={"when": object()}), "not JSON-serialisable"),
        (point("", "doc-a"), "non-empty string"),
    ],
)
def test_failing_upsert_leaves_index_unchanged(
    index: VectorIndex, bad: Point, message: str
) -> None:
    index.upsert([point("doc-a-0", text="original words", dense=[1, 0, 0, 0])])
    batch = [
        point("doc-a-0", text="replacement words", dense=[0, 1, 0, 0]),
        point("doc-a-1", text="brand new"),
        bad,
    ]
    with pytest.raises(ValueError, match=message):
        index.upsert(batch)
    assert index.list_ids() == ["doc-a-0"]
    assert index.fetch(["doc-a-0"])[0].text == "original words"
    assert ids(index.sparse_search("original", 5)) == ["doc-a-0"]
    assert index.sparse_search("replacement", 5) == []
    assert index.dense_search([1, 0, 0, 0], 1)[0].score == pytest.approx(1.0, abs=1e-5)


# -- SQLite only ----------------------------------------------------------------------------


def test_sqlite_describe_does_not_create_the_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "vectors.sqlite"
    assert SqliteVectorIndex(path).describe() is None
    assert not path.exists()


def test_sqlite_rejects_bad_table_prefix(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="index name"):
        SqliteVectorIndex(tmp_path / "v.sqlite", name="chunks; DROP TABLE x")


def test_sqlite_rolls_back_a_write_that_fails_inside_sqlite(tmp_path: Path) -> None:
    idx = SqliteVectorIndex(tmp_path / "v.sqlite")
    idx.open(MODEL, DIM)
    idx.upsert([point("doc-a-0", text="original words", dense=[1, 0, 0, 0])])
    # A temp trigger on this thread's connection makes SQLite itself fail half-way through
    # the transaction, after the old vec0/FTS rows of doc-a-0 were already deleted.
    idx._connection().execute(
        "CREATE TEMP TRIGGER boom BEFORE INSERT ON main.chunks_points "
        "WHEN NEW.id = 'doc-a-2' BEGIN SELECT RAISE(ABORT, 'boom'); END"
    )
    with pytest.raises(StoreError, match="boom"):
        idx.upsert(
            [
                point("doc-a-0", text="replacement words", dense=[0, 1, 0, 0]),
                point("doc-a-1"),
                point("doc-a-2"),
            ]
        )
    assert idx.list_ids() == ["doc-a-0"]
    assert ids(idx.sparse_search("original", 5)) == ["doc-a-0"]
    assert idx.dense_search([1, 0, 0, 0], 1)[0].score == pytest.approx(1.0, abs=1e-5)
    idx.close()


def test_sqlite_dense_limit_above_vec0_cap_is_clamped(tmp_path: Path) -> None:
    idx = SqliteVectorIndex(tmp_path / "v.sqlite")
    idx.open(MODEL, DIM)
    idx.upsert([point("doc-a-0"), point("doc-a-1")])
    assert ids(idx.dense_search([1, 0, 0, 0], 100_000)) == ["doc-a-0", "doc-a-1"]
    idx.close()


def test_sqlite_readers_see_old_or_new_state_while_a_writer_commits(tmp_path: Path) -> None:
    path = tmp_path / "v.sqlite"
    writer = SqliteVectorIndex(path)
    writer.open(MODEL, DIM)
    n = 600
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(n, DIM)) + 0.1

    def version(tag: str) -> list[Point]:
        filler = " ".join(f"w{j}" for j in range(40))
        return [
            point(f"doc-a-{i}", text=f"{tag} marker {filler}", dense=list(vectors[i]))
            for i in range(n)
        ]

    writer.upsert(version("old"))
    writing = threading.Event()
    done = threading.Event()
    errors: list[BaseException] = []
    seen: list[frozenset[str]] = []
    reads_during_write = [0]
    reader = SqliteVectorIndex(path)
    reader.open(MODEL, DIM, create=False)

    def read_loop() -> None:
        try:
            while not done.is_set():
                during = writing.is_set()
                hits = reader.sparse_search("marker", n)
                seen.append(frozenset(h.point.text.split()[0] for h in hits))
                assert len(hits) == n
                assert reader.count() == n
                dense = reader.dense_search([1, 0, 0, 0], 20)
                assert len({h.point.text.split()[0] for h in dense}) == 1
                if during and writing.is_set():
                    reads_during_write[0] += 1
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=read_loop) for _ in range(2)]
    for thread in threads:
        thread.start()
    for tag in ("new", "old", "new"):
        writing.set()
        writer.upsert(version(tag))
        writing.clear()
    done.set()
    for thread in threads:
        thread.join(timeout=120)
    reader.close()
    writer.close()
    assert errors == []
    assert seen, "readers never ran"
    assert set(seen) <= {frozenset({"old"}), frozenset({"new"})}
    assert reads_during_write[0] > 0


# -- Qdrant only ----------------------------------------------------------------------------


def test_qdrant_uses_uuid5_point_ids_and_keeps_the_string_id() -> None:
    client = QdrantClient(":memory:")
    idx = QdrantVectorIndex(client, "kb_ids")
    idx.open(MODEL, DIM)
    idx.upsert([point("doc-a-0", payload={"page_start": 3})])
    (record,) = client.retrieve("kb_ids", ids=[str(point_uuid("doc-a-0"))], with_payload=True)
    assert record.payload == {
        "id": "doc-a-0",
        "document": "doc-a",
        "kind": "text",
        "text": "text of doc-a-0",
        "payload": {"page_start": 3},
    }
    assert client.get_collection("kb_ids").config.metadata == {
        "kb_model": MODEL,
        "kb_dimension": DIM,
    }
    client.close()


def test_qdrant_unreachable_server_is_store_unavailable_naming_the_url() -> None:
    # port 9 (discard) on loopback: nothing listens, the connection is refused at once
    client = QdrantClient(url="http://127.0.0.1:9", timeout=2, check_compatibility=False)
    idx = QdrantVectorIndex(client, "kb_chunks")
    with pytest.raises(StoreUnavailableError, match=r"http://127\.0\.0\.1:9"):
        idx.open(MODEL, DIM)
    client.close()


def test_qdrant_foreign_collection_without_metadata_is_refused() -> None:
    from qdrant_client import models

    client = QdrantClient(":memory:")
    client.create_collection(
        "theirs", vectors_config=models.VectorParams(size=DIM, distance=models.Distance.COSINE)
    )
    with pytest.raises(StoreError, match="not created by kb"):
        QdrantVectorIndex(client, "theirs").open(MODEL, DIM)
    client.close()


def test_drop_removes_the_collection_so_another_model_can_open(index: VectorIndex) -> None:
    index.upsert([point("a", dense=[1, 0, 0, 0])])
    assert index.drop() is True
    assert index.info is None
    assert index.describe() is None
    info = index.open("another-model", 2)
    assert (info.model, info.dimension) == ("another-model", 2)
    assert index.count() == 0
    assert index.drop() is True
    assert index.drop() is False


def test_rebuilt_index_ranks_like_a_fresh_one(index: VectorIndex, fresh_index) -> None:
    """Re-embedding (replace, delete, re-insert) must leave the sparse side's statistics as a
    fresh build of the same content would: no drift in BM25 / IDF scores."""
    final = [
        point(f"p{i}", dense=[1, i % 3, 0, 1], text=f"swamping constraint equation {'rhs ' * i}")
        for i in range(6)
    ]
    for round_ in range(3):  # earlier versions, longer texts and points that go away
        index.upsert(
            [point(f"p{i}", dense=[1, 0, i, 0], text="old words " * (10 + i + round_)) for i in range(9)]
        )
        index.delete_ids([f"p{i}" for i in range(6, 9)])
    index.upsert(final)
    fresh = fresh_index()
    fresh.upsert(final)
    for query in ("swamping", "constraint equation rhs", "rhs"):
        rebuilt = [(h.id, round(h.score, 6)) for h in index.sparse_search(query, 10)]
        assert rebuilt == [(h.id, round(h.score, 6)) for h in fresh.sparse_search(query, 10)]
