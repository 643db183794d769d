"""Fusion sweep: how search_docs' reciprocal rank fusion constants score on every eval set.

search_docs fuses three ranked lists with weighted reciprocal rank fusion,
``score(d) = sum_i w_i / (k + rank_i(d))`` (``kb_shared.stores.vectors.RRF_K``,
``DENSE_WEIGHT``, ``SPARSE_WEIGHT``; ``kb_shared.search.retrieval.EXACT_WEIGHT``). The lists do not depend
on the constants, so each question's lists are fetched once, exactly as search_docs fetches
them (same depth, same exact-identifier matches), and every grid point is fused from them in
pure Python: the sweep costs one search_docs call per question, whatever the grid's size.

The sparse weight stays 1.0 (RRF is scale-free in the weights: only their ratios and ``k``
matter), so the grid is ``k`` x dense weight x exact weight (``GRID_*``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kb_shared.search.evaluation import mean_reciprocal_rank, recall_at_k

#: RRF constants tried. 60 is Cormack et al.'s default (SIGIR 2009); Bruch et al. (ACM TOIS
#: 2023) found small k better when the first ranks of each list carry the signal.
GRID_K = (2, 3, 5, 7, 10, 15, 20, 30, 60)
#: Dense weights tried, relative to a sparse weight of 1.0.
GRID_DENSE = (0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)
#: Exact-identifier weights tried (0 = no exact list).
GRID_EXACT = (0.0, 0.25, 0.5, 1.0)


@dataclass(frozen=True)
class Lists:
    """The ranked lists search_docs fuses for one question (ids best first) and the points."""

    dense: list[str]
    sparse: list[str]
    exact: list[str]
    points: dict[str, Any]


@dataclass(frozen=True)
class Params:
    """One grid point."""

    k: int
    dense: float
    exact: float

    @property
    def label(self) -> str:
        """``k=10 dense=0.5 exact=1``."""
        return f"k={self.k} dense={self.dense:g} exact={self.exact:g}"


def collect(index: Any, embedder: Any, query: str) -> Lists:
    """Fetch the lists search_docs would fuse for ``query`` over the whole index: dense and
    sparse candidates at the depth ``VectorIndex.hybrid_search`` uses for search_docs'
    request, plus the exact-identifier matches (``kb_shared.search.retrieval.exact_identifier_matches``)."""
    from kb_shared.search.retrieval import RERANK_CANDIDATES, exact_identifier_matches  # noqa: PLC0415
    from kb_shared.stores.vectors import CANDIDATE_FACTOR, MIN_CANDIDATES  # noqa: PLC0415

    depth = max(MIN_CANDIDATES, CANDIDATE_FACTOR * RERANK_CANDIDATES)
    dense = index.dense_search(embedder.embed_query(query), depth)
    sparse = index.sparse_search(query, depth)
    exact = [h for found in exact_identifier_matches(index, query, None, None).values()
             for h in found]
    points = {h.id: h.point for h in (*dense, *sparse, *exact)}
    return Lists([h.id for h in dense], [h.id for h in sparse], [h.id for h in exact], points)


def fuse(lists: Lists, params: Params, top: int) -> list[Any]:
    """The ``top`` points of ``lists`` fused with ``params`` (sparse weight 1.0), best first;
    the same arithmetic and tie-breaking as ``kb_shared.stores.vectors.reciprocal_rank_fusion``."""
    from kb_shared.stores.vectors import reciprocal_rank_fusion  # noqa: PLC0415

    ranked = [lists.dense, lists.sparse]
    weights = [params.dense, 1.0]
    if params.exact > 0 and lists.exact:
        ranked.append(lists.exact)
        weights.append(params.exact)
    fused = reciprocal_rank_fusion(ranked, k=params.k, weights=weights)
    return [lists.points[item] for item, _ in fused[:top]]


def grid() -> list[Params]:
    """Every grid point, ``k`` outermost."""
    return [Params(k, d, e) for k, d, e in itertools.product(GRID_K, GRID_DENSE, GRID_EXACT)]


@dataclass
class SweepRow:
    """One grid point's R@5 and MRR per eval set, and their means over the sets."""

    params: Params
    per_set: dict[str, tuple[float, float]]

    @property
    def mean_recall_at_5(self) -> float:
        """Unweighted mean of the sets' Recall@5 (each set counts once, whatever its size)."""
        return sum(r for r, _ in self.per_set.values()) / len(self.per_set)

    @property
    def mean_mrr(self) -> float:
        """Unweighted mean of the sets' MRR."""
        return sum(m for _, m in self.per_set.values()) / len(self.per_set)


def sweep(
    per_set: dict[str, list[tuple[Lists, Callable[[Sequence[Any]], int | None]]]],
    top: int,
) -> list[SweepRow]:
    """Score every grid point on every set.

    Args:
        per_set: set name -> one ``(lists, rank_of)`` per answerable question, where
            ``rank_of(points)`` returns the 1-based rank of the first relevant point among
            ``points``, or ``None`` (the benchmark's hit rule).
        top: results judged per question (Recall@5 needs >= 5; MRR counts ranks <= top).

    Returns:
        One row per grid point, best first by mean Recall@5, then mean MRR: search_docs
        hands the model a page of results (8 by default) that it reads whole, so whether the
        evidence is on the page matters more than its position on it.
    """
    rows: list[SweepRow] = []
    for params in grid():
        scores: dict[str, tuple[float, float]] = {}
        for name, questions in per_set.items():
            ranks = [rank_of(fuse(lists, params, top)) for lists, rank_of in questions]
            scores[name] = (recall_at_k(ranks, 5), mean_reciprocal_rank(ranks))
        rows.append(SweepRow(params, scores))
    rows.sort(key=lambda row: (-row.mean_recall_at_5, -row.mean_mrr, row.params.k))
    return rows
