"""Vector index role: chunk and figure points with a dense vector, a sparse side and a payload.

One interface, ``VectorIndex``, whose reads alone are ``VectorReader`` (what the MCP server
holds). Their public methods check every argument and leave each backend ``_`` hooks that
get checked arguments, so the backends cannot drift apart on the contract:

* ``kb_shared.stores.vectors_sqlite.SqliteVectorIndex`` — sqlite-vec ``vec0`` (cosine) for the
  dense side, FTS5 BM25 over ``kb_shared.search.sparse`` terms for the sparse side. Embedded default.
* ``kb_shared.stores.vectors_qdrant.QdrantVectorIndex`` — Qdrant named dense + sparse vectors
  (sparse with ``Modifier.IDF``), server or local mode (``QdrantClient(":memory:")`` in tests).

Both derive the sparse side from ``Point.sparse_text`` with ``kb_shared.search.sparse`` so codes such
as ``IN008-24`` are one term on every backend. Hybrid search fuses dense and sparse candidate
lists with reciprocal rank fusion (``reciprocal_rank_fusion`` below) in our code, not the
backend's, so the ranking is identical whichever store is live.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from kb_shared.errors import EmbeddingMismatchError, StoreError
from kb_shared.stores.closing import ClosingStore

#: Point kinds. ``text`` and ``table`` come from the chunks asset, ``figure`` from figures;
#: ``reference`` is a registered live page's descriptor (``kb_assets.references``), never a
#: passage: passage search keeps to ``DOCUMENT_KINDS``.
KIND_TEXT = "text"
KIND_TABLE = "table"
KIND_FIGURE = "figure"
KIND_REFERENCE = "reference"
DOCUMENT_KINDS = (KIND_TEXT, KIND_TABLE, KIND_FIGURE)
KINDS = (*DOCUMENT_KINDS, KIND_REFERENCE)

#: Weighted reciprocal rank fusion, ``score(d) = sum_i w_i / (RRF_K + rank_i(d))`` (Cormack,
#: Clarke & Büttcher, SIGIR 2009; k and weights tuned per Bruch et al., ACM TOIS 2023). The
#: values come from the fusion sweep in benchmarks/results/retrieval-2026-11-30.md
#: ("Fusion constants").
RRF_K = 10
DENSE_WEIGHT = 0.75
SPARSE_WEIGHT = 1.0

#: Candidates fetched from each side before fusion, as a multiple of the requested limit
#: (never fewer than ``MIN_CANDIDATES``).
CANDIDATE_FACTOR = 4
MIN_CANDIDATES = 50


@dataclass(frozen=True, slots=True)
class Point:
    """One item to index.

    Attributes:
        id: chunk id (``{doc_id}-{i}``) or figure id (``{doc_id}#figure-{n}``); the key.
        document: the ``doc_id`` it belongs to.
        kind: one of ``KINDS``.
        text: the text stored and returned to readers (chunk text or figure description).
        dense: the embedding, shape ``(dimension,)``, float; stored L2-normalised.
        payload: JSON-serialisable citation data (title, version, page_start, page_end,
            section, blob keys, …). Never contains ``text`` again.
        sparse_text: the text the sparse side indexes; defaults to ``text``. The embeddings
            asset passes heading path + text so section words match too.
    """

    id: str
    document: str
    kind: str
    text: str
    dense: Sequence[float] | np.ndarray
    payload: Mapping[str, Any] = field(default_factory=dict)
    sparse_text: str | None = None

    @property
    def terms_source(self) -> str:
        """The text the sparse side tokenises."""
        return self.text if self.sparse_text is None else self.sparse_text


@dataclass(frozen=True, slots=True)
class StoredPoint:
    """A point as read back (no dense vector: readers never need it)."""

    id: str
    document: str
    kind: str
    text: str
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result.

    Attributes:
        point: the stored point.
        score: higher is better. Dense: cosine similarity in [-1, 1]. Sparse: the backend's
            relevance (BM25 on SQLite, IDF-weighted dot product on Qdrant), not comparable
            across backends. Hybrid: the fused score, ``sum(w / (RRF_K + rank))``.
        dense_rank / sparse_rank: 1-based rank on each side, ``None`` when absent there.
        dense_score: cosine similarity when the point was a dense candidate (hybrid keeps it
            so callers can apply a "nothing relevant" threshold).
    """

    point: StoredPoint
    score: float
    dense_rank: int | None = None
    sparse_rank: int | None = None
    dense_score: float | None = None

    @property
    def id(self) -> str:
        """The point id."""
        return self.point.id


@dataclass(frozen=True, slots=True)
class CollectionInfo:
    """What a collection records about the vectors in it."""

    model: str
    dimension: int


def reciprocal_rank_fusion(
    ranked_lists: Sequence[Sequence[str]],
    k: int = RRF_K,
    weights: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """Fuse ranked id lists with weighted RRF: ``score(d) = sum_i w_i / (k + rank_i(d))``.

    Args:
        ranked_lists: each a list of ids, best first (rank 1 = index 0). Duplicates inside one
            list count at their first position only.
        k: the RRF constant (``RRF_K``).
        weights: one weight per list; ``None`` = 1.0 each (classic RRF).

    Returns:
        ``[(id, score), …]`` best first; ties broken by best single rank, then by id so the
        order is deterministic.

    Raises:
        ValueError: ``weights`` of another length than ``ranked_lists``.
    """
    if weights is None:
        weights = [1.0] * len(ranked_lists)
    if len(weights) != len(ranked_lists):
        raise ValueError(f"{len(weights)} weights for {len(ranked_lists)} ranked lists")
    scores: dict[str, float] = {}
    best_rank: dict[str, int] = {}
    for ranked, weight in zip(ranked_lists, weights, strict=True):
        seen: set[str] = set()
        for position, item in enumerate(ranked, start=1):
            if item in seen:
                continue
            seen.add(item)
            if item in scores:
                scores[item] += weight / (k + position)
                if position < best_rank[item]:
                    best_rank[item] = position
            else:
                scores[item] = 0.0 + weight / (k + position)
                best_rank[item] = position
    return sorted(scores.items(), key=lambda kv: (-kv[1], best_rank[kv[0]], kv[0]))


def check_collection(recorded: CollectionInfo, model: str, dimension: int, where: str) -> None:
    """Raise ``EmbeddingMismatchError`` unless ``recorded`` matches ``model``/``dimension``.

    Args:
        recorded: what the index says its vectors are.
        model, dimension: what the caller is about to write or query with.
        where: the index's name for the message (a path or a collection name).
    """
    if recorded.model != model or recorded.dimension != dimension:
        raise EmbeddingMismatchError(
            f"the vector index {where} holds embeddings from {recorded.model!r} "
            f"({recorded.dimension} dimensions), but the live embedding model is {model!r} "
            f"({dimension} dimensions). Vectors from different models cannot be compared: "
            "re-embed the corpus with `kb rebuild embeddings --all --reset` (or set the "
            "embedding settings back to the recorded model)."
        )


#: The checked ``documents``/``kinds`` filters of a search (``check_filters``):
#: ``[("document", [...]), ("kind", [...])]``, each present only when given, never empty.
Filters = list[tuple[str, list[str]]]


class VectorReader(ClosingStore, ABC):
    """The reads of the vector index role: what a reader that must never write holds (the
    MCP server). Constructors do no I/O; reads need an opened index (``VectorIndex.open``).

    Every public read checks its arguments here, the same for every backend, then calls the
    backend's hook (``_fetch``, ``_count``, ``_list_ids``, ``_dense_search``,
    ``_sparse_search``). Every method that takes ``documents``/``kinds`` treats ``None`` as
    "no filter" and an empty sequence as "matches nothing" (returns empty / zero, never
    everything).

    ``close()`` and ``with`` come from ``ClosingStore``. Errors: ``StoreUnavailableError``
    when the backend cannot be reached; ``StoreError`` for use before ``open``;
    ``ValueError`` for a vector of the wrong length or an unknown kind.
    """

    #: set by ``VectorIndex.open``
    info: CollectionInfo | None = None
    #: the index in messages, e.g. ``"vector index 'chunks' in /kb/vectors.sqlite"``
    label: str = "vector index"

    def _require_open(self) -> CollectionInfo:
        """The recorded model and dimension; ``StoreError`` before ``open``."""
        if self.info is None:
            raise StoreError(f"{self.label} used before open(model, dimension)")
        return self.info

    @abstractmethod
    def describe(self) -> CollectionInfo | None:
        """The recorded model and dimension, or ``None`` when no collection exists yet."""

    def fetch(self, ids: Sequence[str]) -> list[StoredPoint]:
        """Points for ``ids`` in the order asked; ids not stored are skipped."""
        self._require_open()
        return self._fetch(ids) if ids else []

    def count(self, document: str | None = None, kind: str | None = None) -> int:
        """Number of points, optionally for one document and/or kind."""
        self._require_open()
        return self._count(document, None if kind is None else check_kind(kind))

    def list_ids(self, document: str | None = None, kind: str | None = None) -> list[str]:
        """Point ids, sorted ascending, optionally for one document and/or kind."""
        self._require_open()
        return self._list_ids(document, None if kind is None else check_kind(kind))

    def dense_search(
        self,
        vector: Sequence[float] | np.ndarray,
        limit: int,
        documents: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
    ) -> list[Hit]:
        """The ``limit`` nearest points passing the filters by cosine similarity, best first;
        ``Hit.score`` = cosine.

        Raises:
            ValueError: a vector of the wrong length or zero/non-finite, or an unknown kind.
        """
        query = as_unit_vector(vector, self._require_open().dimension)
        filters = check_filters(documents, kinds)
        return [] if limit <= 0 or filters is None else self._dense_search(query, limit, filters)

    def sparse_search(
        self,
        text: str,
        limit: int,
        documents: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
    ) -> list[Hit]:
        """Best points by term match over ``kb_shared.search.sparse`` terms of ``text``, best first,
        equal scores by id; every backend gives Qdrant's IDF-weighted BM25 score
        (``kb_shared.stores.vectors_sparse``), so a migrated index ranks alike.

        A query with no usable terms returns ``[]``. Raw user text is never handed to a
        query parser (FTS5 syntax in it is matched as words).

        Raises:
            ValueError: an unknown kind in ``kinds``.
        """
        self._require_open()
        filters = check_filters(documents, kinds)
        if limit <= 0 or filters is None:
            return []
        return sorted(self._sparse_search(text, limit, filters), key=lambda h: (-h.score, h.id))

    def hybrid_search(
        self,
        vector: Sequence[float] | np.ndarray,
        text: str,
        limit: int,
        documents: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
        candidates: int | None = None,
        extra: Sequence[tuple[Sequence[Hit], float]] = (),
        sparse: Sequence[Hit] | None = None,
    ) -> list[Hit]:
        """Dense and sparse candidates (plus any ``extra`` ranked lists) fused by weighted
        reciprocal rank fusion (``RRF_K``, ``DENSE_WEIGHT``, ``SPARSE_WEIGHT``), best first.

        Args:
            candidates: how many to take from each side; default
                ``max(MIN_CANDIDATES, CANDIDATE_FACTOR * limit)``.
            extra: more ``(hits best first, weight)`` lists to fuse, e.g. the points that
                contain a rare code of the query word for word (``kb_shared.search.retrieval``).
            sparse: the sparse side when the caller searched it already: ``sparse_search(text,
                candidates, documents, kinds)``'s answer (``kb_shared.search.retrieval`` does, while
                the query is still being embedded).

        Returns:
            At most ``limit`` hits with ``score`` = fused score, both side ranks and the dense
            cosine (``dense_score``) filled in where the point was a candidate there.
        """
        if limit <= 0:
            return []
        depth = candidates or max(MIN_CANDIDATES, CANDIDATE_FACTOR * limit)
        if sparse is None:
            sparse = self.sparse_search(text, depth, documents, kinds)
        dense = self.dense_search(vector, depth, documents, kinds)
        lists = [(dense, DENSE_WEIGHT), (sparse, SPARSE_WEIGHT), *extra]
        ids = [[hit.point.id for hit in hits] for hits, _ in lists]
        points = {
            point_id: hit.point
            for (hits, _), listed in zip(lists, ids, strict=True)
            for point_id, hit in zip(listed, hits, strict=True)
        }
        dense_rank: dict[str, int] = {}
        dense_score: dict[str, float] = {}
        for rank, (point_id, hit) in enumerate(zip(ids[0], dense, strict=True), start=1):
            dense_rank[point_id] = rank
            dense_score[point_id] = hit.score
        sparse_rank: dict[str, int] = {}
        for rank, point_id in enumerate(ids[1], start=1):
            sparse_rank[point_id] = rank
        fused = reciprocal_rank_fusion(ids, weights=[w for _, w in lists])
        return [
            Hit(points[item], score, dense_rank.get(item), sparse_rank.get(item),
                dense_score.get(item))
            for item, score in fused[:limit]
        ]

    # -- the backend's reads, called with checked arguments ---------------------------------

    @abstractmethod
    def _fetch(self, ids: Sequence[str]) -> list[StoredPoint]:
        """``fetch`` for a non-empty ``ids``."""

    @abstractmethod
    def _count(self, document: str | None, kind: str | None) -> int:
        """``count`` with ``kind`` checked."""

    @abstractmethod
    def _list_ids(self, document: str | None, kind: str | None) -> list[str]:
        """``list_ids`` with ``kind`` checked."""

    @abstractmethod
    def _dense_search(self, query: np.ndarray, limit: int, filters: Filters) -> list[Hit]:
        """``dense_search`` for a unit float32 ``query`` of the index's dimension,
        ``limit`` >= 1 and checked ``filters``."""

    @abstractmethod
    def _sparse_search(self, text: str, limit: int, filters: Filters) -> list[Hit]:
        """``sparse_search`` for ``limit`` >= 1 and checked ``filters``: the ``limit`` best by
        (score, then id) — a backend must settle ties at the cut by id itself; ``[]`` when
        ``text`` has no terms."""


class VectorIndex(VectorReader):
    """The vector index role: the reads of ``VectorReader`` plus the writes. Call ``open``
    before anything else.

    Errors, besides ``VectorReader``'s: ``EmbeddingMismatchError`` from ``open`` on a
    model/dimension mismatch; ``ValueError`` for a point that fails ``check_point``
    (nothing of the call is written).
    """

    #: where the index lives, for the model-mismatch message (a path; a URL / collection)
    location: str = ""

    def open(self, model: str, dimension: int, *, create: bool = True) -> CollectionInfo:
        """Create (if ``create`` and absent) or open the collection for ``model``/``dimension``.

        Returns:
            The recorded ``CollectionInfo``.

        Raises:
            ValueError: empty ``model`` or ``dimension`` < 1.
            EmbeddingMismatchError: the collection exists with another model or dimension
                (the message says to re-embed).
            StoreError: the collection is absent and ``create`` is false, or the backend's
                layout check failed (``_check_layout``).
        """
        dimension = check_open_args(model, dimension)
        recorded = self.describe()
        if recorded is None:
            if not create:
                raise self.absent()
            recorded = self._create(model, dimension)
        check_collection(recorded, model, dimension, self.location)
        self._check_layout()
        self.info = recorded
        return recorded

    def absent(self) -> StoreError:
        """The error ``open(create=False)`` raises when there is no collection to open (also
        when a writer drops it while the reader opens)."""
        return StoreError(f"no {self.label}; build it first (materialise the embeddings asset)")

    @abstractmethod
    def drop(self) -> bool:
        """Delete the whole collection: every point and the recorded model and dimension, so
        the next ``open`` may record another model (switching embedding models). Returns
        whether there was a collection. ``info`` is reset to ``None``."""

    @abstractmethod
    def upsert(self, points: Sequence[Point]) -> int:
        """Insert or replace points by id (re-upserting the same id replaces it; the last of
        repeated ids in one call wins). Every point is checked (``check_points``) before
        anything is written. Returns the number of distinct ids written."""

    def delete_ids(self, ids: Iterable[str]) -> int:
        """Delete points by id; unknown ids are ignored. Returns how many were deleted."""
        self._require_open()
        wanted = list(dict.fromkeys(ids))
        return self._delete_ids(wanted) if wanted else 0

    def delete_document(self, document: str) -> int:
        """Delete every point of a document (none is fine). Returns how many were deleted."""
        self._require_open()
        return self._delete_document(document)

    # -- the backend's side, called with checked arguments ------------------------------

    @abstractmethod
    def _create(self, model: str, dimension: int) -> CollectionInfo:
        """Create the collection (or find that another process just did); return what it
        records."""

    def _check_layout(self) -> None:  # noqa: B027 - optional hook
        """Raise ``StoreError`` when the stored layout is not the one this code writes."""

    @abstractmethod
    def _delete_ids(self, ids: list[str]) -> int:
        """``delete_ids`` for distinct, non-empty ``ids``."""

    @abstractmethod
    def _delete_document(self, document: str) -> int:
        """``delete_document`` on an opened index."""


def as_unit_vector(vector: Sequence[float] | np.ndarray, dimension: int) -> np.ndarray:
    """Return ``vector`` as a float32 array of shape ``(dimension,)`` scaled to unit length.

    Raises:
        ValueError: wrong length, or a zero / non-finite vector.
    """
    array = np.asarray(vector, dtype=np.float32).reshape(-1)
    if array.shape[0] != dimension:
        raise ValueError(f"expected a vector of {dimension} dimensions, got {array.shape[0]}")
    norm = float(np.linalg.norm(array))
    if not np.isfinite(norm) or norm == 0.0:
        raise ValueError("cannot index a zero or non-finite vector")
    return array / norm


def check_kind(kind: str) -> str:
    """Return ``kind`` or raise ``ValueError`` naming the allowed kinds."""
    if kind not in KINDS:
        raise ValueError(f"unknown point kind {kind!r}; expected one of {', '.join(KINDS)}")
    return kind


def check_filters(
    documents: Sequence[str] | None, kinds: Sequence[str] | None
) -> list[tuple[str, list[str]]] | None:
    """The ``documents`` / ``kinds`` filters of a search, checked.

    Returns:
        ``[(field, values), …]`` with field ``"document"`` then ``"kind"``, leaving out a
        filter that is ``None`` (no filter); ``None`` when a filter is empty (it matches
        nothing, so the search returns ``[]``).

    Raises:
        ValueError: an unknown kind, or a filter given as one string instead of a sequence.
    """
    if kinds is not None:
        kinds = [check_kind(kind) for kind in kinds]
    filters: list[tuple[str, list[str]]] = []
    for name, values in (("document", documents), ("kind", kinds)):
        if values is None:
            continue
        if isinstance(values, str):
            raise ValueError(f"{name} filter must be a sequence of strings, not one string")
        if len(values) == 0:
            return None
        filters.append((name, list(values)))
    return filters


def check_open_args(model: str, dimension: int) -> int:
    """Check the arguments of ``VectorIndex.open``; return ``dimension`` as an ``int``.

    Raises:
        ValueError: empty ``model`` or ``dimension`` < 1.
    """
    if not model:
        raise ValueError("the embedding model name cannot be empty")
    if int(dimension) < 1:
        raise ValueError(f"dimension must be >= 1, got {dimension}")
    return int(dimension)


def check_point(
    point: Point, dimension: int, *, sort_keys: bool = False
) -> tuple[np.ndarray, str]:
    """Validate one point before anything is written, in the order every backend reports.

    Checks a non-empty string id and document, a string text, a known kind
    (:func:`check_kind`), the dense vector (:func:`as_unit_vector`) and a JSON-serialisable
    payload (no NaN or infinity).

    Args:
        point: the point to write.
        dimension: the index's vector size.
        sort_keys: sort the payload's keys in the JSON text.

    Returns:
        ``(dense, payload)``: the vector as float32 of shape ``(dimension,)`` at unit length,
        and the payload as JSON text (non-ASCII kept as is).

    Raises:
        ValueError: any check failed; the message names the point id.
    """
    if not isinstance(point.id, str) or not point.id:
        raise ValueError(f"a point id must be a non-empty string, got {point.id!r}")
    if not isinstance(point.document, str) or not point.document:
        raise ValueError(f"point {point.id!r} has no document id")
    if not isinstance(point.text, str):
        raise ValueError(f"point {point.id!r}: text must be a string")
    check_kind(point.kind)
    try:
        dense = as_unit_vector(point.dense, dimension)
    except ValueError as exc:
        raise ValueError(f"point {point.id!r}: {exc}") from exc
    try:
        payload = json.dumps(
            dict(point.payload), ensure_ascii=False, allow_nan=False, sort_keys=sort_keys
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"point {point.id!r}: payload is not JSON-serialisable: {exc}") from exc
    return dense, payload


class CheckedPoint(NamedTuple):
    """A point that passed ``check_point``: the point, its unit float32 vector of shape
    ``(dimension,)`` and its payload as JSON text."""

    point: Point
    dense: np.ndarray
    payload: str


def check_points(
    points: Sequence[Point], dimension: int, *, sort_keys: bool = False
) -> list[CheckedPoint]:
    """``check_point`` every point before anything is written; of repeated ids the last one
    wins, at its own position.

    Raises:
        ValueError: the first point that fails ``check_point`` (message names its id).
    """
    checked: dict[str, CheckedPoint] = {}
    for point in points:
        dense, payload = check_point(point, dimension, sort_keys=sort_keys)
        checked.pop(point.id, None)
        checked[point.id] = CheckedPoint(point, dense, payload)
    return list(checked.values())
