"""The retrieval evaluation of ``../shared/corpus/eval/regulatory/questions.jsonl`` with the
official hit rule of ``../shared/corpus/README.md``:

    A retrieved chunk "hits" when it comes from ``doc``, its page span overlaps ``pages``, and
    its text reduced to ``[0-9a-z]`` words (lower-cased; Markdown pipes, bold marks and
    punctuation gone) contains the first 8 such words of the ``quote``.

A question is answered at the rank of its first hitting result (any of its evidence items).
``absent`` questions have no evidence and are scored separately (the right behaviour is an
empty or low-confidence answer).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

_WORD = re.compile(r"[0-9a-z]+")

#: Words of the quote that must appear in the chunk (README hit rule).
QUOTE_WORDS = 8


def reduce_words(text: str) -> list[str]:
    """Lower-case ``text`` and keep its runs of ``[0-9a-z]`` (everything else separates)."""
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class Evidence:
    doc: str
    pages: tuple[int, ...]
    quote: str


@dataclass(frozen=True)
class Question:
    id: str
    kind: str
    question: str
    evidence: tuple[Evidence, ...]


@dataclass(frozen=True)
class Retrieved:
    """One retrieved result as the hit rule sees it."""

    name: str  # the document's file name
    page_start: int | None
    page_end: int | None
    text: str


def load_questions(path: Path) -> list[Question]:
    """Parse ``questions.jsonl``."""
    questions = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        evidence = tuple(
            Evidence(doc=e["doc"], pages=tuple(e["pages"]), quote=e["quote"]) for e in raw["evidence"]
        )
        questions.append(Question(raw["id"], raw["kind"], raw["question"], evidence))
    return questions


def hits(result: Retrieved, evidence: Evidence) -> bool:
    """The README hit rule for one result and one evidence item."""
    if result.name != evidence.doc or result.page_start is None:
        return False
    end = result.page_end if result.page_end is not None else result.page_start
    if not any(result.page_start <= page <= end for page in evidence.pages):
        return False
    quote = " ".join(reduce_words(evidence.quote)[:QUOTE_WORDS])
    return f" {quote} " in f" {' '.join(reduce_words(result.text))} "


def hit_rank(question: Question, results: Sequence[Retrieved]) -> int | None:
    """1-based rank of the first result that hits any evidence item, or ``None``."""
    for rank, result in enumerate(results, start=1):
        if any(hits(result, evidence) for evidence in question.evidence):
            return rank
    return None


@dataclass(frozen=True)
class Scores:
    """Recall@k and MRR over the answerable (non-absent) questions."""

    questions: int
    recall_at_1: float
    recall_at_5: float
    recall_at_10: float
    mrr: float


def score(ranks: Sequence[int | None]) -> Scores:
    """Metrics of a list of hit ranks (``None`` = no hit in the retrieved list; MRR counts it
    as 0)."""
    n = len(ranks)

    def recall(k: int) -> float:
        return sum(1 for r in ranks if r is not None and r <= k) / n

    return Scores(
        questions=n,
        recall_at_1=recall(1),
        recall_at_5=recall(5),
        recall_at_10=recall(10),
        mrr=sum(1 / r for r in ranks if r is not None) / n,
    )
