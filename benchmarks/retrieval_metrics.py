"""The retrieval benchmark's metrics: which configurations it runs, how one answer is judged
by the corpus README's hit rule and how a configuration's answers are scored
(``benchmarks.retrieval``, module docstring "Metrics"). Split out of ``benchmarks.retrieval``
so its report writer (``benchmarks.retrieval_report``) shares them without importing it."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from kb_shared.search import evaluation
from kb_shared.search.evaluation import Question, Retrieved, pages_overlap, relevant

#: Results kept per question (Recall@10, MRR@10, nDCG@10).
TOP_K = 10

#: Labels of the main configurations, in report order.
DENSE, SPARSE, BM25_PLAIN, HYBRID_RRF60, SHIPPED = (
    "dense", "sparse", "bm25-plain", "hybrid-rrf60", "search_docs",
)
MAIN_CONFIGS = (DENSE, SPARSE, BM25_PLAIN, HYBRID_RRF60, SHIPPED)

CONFIG_DESCRIPTIONS = {
    DENSE: "dense only: cosine over the live model's vectors (sqlite-vec)",
    SPARSE: "sparse only: kb tokenizer + FTS5 BM25 (VectorIndex.sparse_search)",
    BM25_PLAIN: "plain FTS5 BM25 baseline: default unicode61 tokenizer, OR-joined query words",
    HYBRID_RRF60: "hybrid: dense + sparse, equal-weight RRF k=60, 50 candidates per side",
    SHIPPED: "search_docs as shipped: weighted RRF of dense, sparse and exact identifiers",
}


# --------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scores(evaluation.Scores):
    """Quality of one configuration over some answerable questions (shares in 0-1): the
    ranking metrics plus nDCG@10 and page-citation accuracy (module docstring)."""

    ndcg_at_10: float
    page_accuracy: float

    def cells(self) -> list[str]:
        """``[n, R@1, R@5, R@10, MRR, nDCG@10, page acc]`` formatted for a table."""
        return [
            str(self.questions),
            *(f"{v:.3f}" for v in (self.recall_at_1, self.recall_at_5, self.recall_at_10,
                                   self.mrr, self.ndcg_at_10, self.page_accuracy)),
        ]


SCORE_HEADERS = ("n", "R@1", "R@5", "R@10", "MRR", "nDCG@10", "page acc")


@dataclass
class QuestionOutcome:
    """What one configuration returned for one question, judged.

    Attributes:
        ids: result ids, best first (at most ``TOP_K``).
        rank: 1-based rank of the first hit, ``None`` when none of the results hits.
        gains: 1/0 per result (relevant or not), for nDCG.
        page_ok: the top-1 result is on an evidence page of an evidence document.
        top_cosine: best dense cosine seen by the configuration (``None`` for keyword ones).
        flagged: the configuration says "nothing found" (module docstring).
    """

    ids: list[str]
    rank: int | None
    gains: list[int]
    page_ok: bool
    top_cosine: float | None
    flagged: bool


def score(
    outcomes: Sequence[QuestionOutcome], relevant_counts: Sequence[int]
) -> Scores:
    """Aggregate per-question outcomes (answerable questions only) with
    ``kb_shared.search.evaluation``'s metrics.

    Raises:
        ValueError: no outcomes, or ``relevant_counts`` of another length.
    """
    if not outcomes:
        raise ValueError("no answerable questions to score")
    if len(relevant_counts) != len(outcomes):
        raise ValueError("one relevant count per outcome is needed")
    n = len(outcomes)
    ranking = evaluation.score([o.rank for o in outcomes])
    return Scores(
        **dataclasses.asdict(ranking),
        ndcg_at_10=sum(evaluation.ndcg(o.gains, r, TOP_K)
                       for o, r in zip(outcomes, relevant_counts, strict=True)) / n,
        page_accuracy=sum(1 for o in outcomes if o.page_ok) / n,
    )


def judge(
    question: Question,
    results: Sequence[Retrieved],
    top_cosine: float | None,
    flagged: bool,
) -> QuestionOutcome:
    """Apply the hit rule to ``results`` (best first) for ``question``."""
    results = list(results)[:TOP_K]
    gains = [1 if relevant(question, r) else 0 for r in results]
    rank = next((i for i, g in enumerate(gains, start=1) if g), None)
    page_ok = bool(results) and any(pages_overlap(results[0], e) for e in question.evidence)
    return QuestionOutcome(
        ids=[r.id for r in results], rank=rank, gains=gains, page_ok=page_ok,
        top_cosine=top_cosine, flagged=flagged,
    )
