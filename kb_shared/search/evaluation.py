"""Retrieval evaluation: eval-set questions, the hit rule and the ranking metrics.

Used by the retrieval test, ``benchmarks.retrieval`` and (DESIGN.md, group ``quality``) the
``retrieval_eval`` asset, so every one of them scores the same way.

**Eval sets.** A ``questions.jsonl`` file (``../shared/corpus/README.md``) holds one JSON
object per line in one of two formats:

* regulatory: ``{id, kind, question, evidence: [{doc, pages (1-based), quote}]}``; an
  ``absent`` question has no evidence;
* FinanceBench: ``{id, doc_name (no ".pdf"), question, evidence: [{page_index0}]}`` and an
  optional ``question_type``: one evidence item for the document, pages 1-based.

**Hit rule** (``../shared/corpus/README.md``). A retrieved chunk hits an evidence item when it
comes from the item's ``doc``, its page span overlaps the item's ``pages`` and, when the item
has a quote, its text reduced to ``[0-9a-z]`` words (lower-cased; Markdown pipes, bold marks
and punctuation gone) contains the first ``QUOTE_WORDS`` such words of the quote. A question
is answered at the rank of its first result that hits any of its evidence items.

**Metrics** over the answerable questions: Recall@k (share with a hit in the top k), MRR
(mean of 1/rank of the first hit, 0 without one) and nDCG@k with binary gains (Järvelin &
Kekäläinen, ACM TOIS 2002).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb_shared.search.citations import PointPayload

if TYPE_CHECKING:
    from kb_shared.stores.vectors import StoredPoint

#: Words of the quote that must appear in the chunk (README hit rule).
QUOTE_WORDS = 8

_WORD = re.compile(r"[0-9a-z]+")


def reduce_words(text: str) -> list[str]:
    """Lower-case ``text`` and keep its runs of ``[0-9a-z]`` (everything else separates)."""
    return _WORD.findall(text.lower())


# --------------------------------------------------------------------------------------
# Questions
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Evidence:
    """Where an answer is: a document (file name), its 1-based pages and, in the regulatory
    format, the quote whose first ``QUOTE_WORDS`` words the hit rule looks for (``None``:
    the pages alone decide)."""

    doc: str
    pages: tuple[int, ...]
    quote: str | None = None


@dataclass(frozen=True)
class Question:
    """One eval question; ``evidence`` is empty for an ``absent`` question."""

    id: str
    kind: str
    question: str
    evidence: tuple[Evidence, ...]

    @property
    def answerable(self) -> bool:
        """The question has evidence (``absent`` questions have none)."""
        return bool(self.evidence)


def parse_question(raw: Mapping[str, Any], where: str) -> Question:
    """One ``questions.jsonl`` object in either format (module docstring).

    Args:
        where: names the object in error messages (``path:line``).

    Raises:
        ValueError: neither format (missing ``id``/``question``, or evidence items with
            neither ``doc`` + ``pages`` nor ``page_index0``), naming ``where``.
    """
    try:
        qid, text = str(raw["id"]), str(raw["question"])
    except KeyError as exc:
        raise ValueError(f"{where}: missing field {exc}") from exc
    items = raw.get("evidence") or []
    evidence: list[Evidence] = []
    if "doc_name" in raw:  # FinanceBench: one document, 0-based page indexes
        doc = str(raw["doc_name"])
        doc = doc if doc.lower().endswith(".pdf") else f"{doc}.pdf"
        pages = sorted({int(item["page_index0"]) + 1 for item in items if "page_index0" in item})
        if items and not pages:
            raise ValueError(f"{where}: FinanceBench evidence without page_index0")
        if pages:
            evidence.append(Evidence(doc=doc, pages=tuple(pages)))
        kind = str(raw.get("kind") or raw.get("question_type") or "all")
    else:
        for item in items:
            if "doc" not in item or "pages" not in item:
                raise ValueError(f"{where}: evidence item needs doc and pages: {item!r}")
            evidence.append(
                Evidence(
                    doc=str(item["doc"]),
                    pages=tuple(int(p) for p in item["pages"]),
                    quote=item.get("quote"),
                )
            )
        kind = str(raw.get("kind") or ("absent" if not evidence else "all"))
    return Question(id=qid, kind=kind, question=text, evidence=tuple(evidence))


def load_questions(path: Path) -> list[Question]:
    """Parse a ``questions.jsonl`` file (blank lines skipped).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: a line that is not JSON or in neither format (``path:line`` in the
            message).
    """
    questions: list[Question] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not JSON: {exc}") from exc
        if not isinstance(raw, dict):
            raise ValueError(f"{path}:{number}: expected a JSON object, got {type(raw).__name__}")
        questions.append(parse_question(raw, f"{path}:{number}"))
    return questions


# --------------------------------------------------------------------------------------
# The hit rule
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Retrieved:
    """One retrieved result as the hit rule sees it.

    Attributes:
        name: the document's file name (the payload's ``name``).
        page_start, page_end: 1-based page span, ``None`` when unknown.
        text: the point's stored text.
        id: the point id ("" when the caller does not need it).
    """

    name: str
    page_start: int | None
    page_end: int | None
    text: str
    id: str = ""

    @classmethod
    def from_point(cls, point: StoredPoint) -> Retrieved:
        """A stored point's file name and page span (``PointPayload``) and text.

        Raises:
            ValueError: the payload's ``page_end`` is before its ``page_start``.
        """
        payload = PointPayload.from_payload(point.payload)
        return cls(payload.name, payload.page_start, payload.page_end, point.text, point.id)


def pages_overlap(result: Retrieved, evidence: Evidence) -> bool:
    """Same document, and the result's page span (``page_end`` defaults to
    ``page_start``) contains one of the evidence pages; ``False`` without a page."""
    if result.name != evidence.doc or result.page_start is None:
        return False
    end = result.page_end if result.page_end is not None else result.page_start
    return any(result.page_start <= page <= end for page in evidence.pages)


def hits(result: Retrieved, evidence: Evidence) -> bool:
    """The README hit rule for one result and one evidence item (module docstring)."""
    if not pages_overlap(result, evidence):
        return False
    if evidence.quote is None:
        return True
    quote = " ".join(reduce_words(evidence.quote)[:QUOTE_WORDS])
    return f" {quote} " in f" {' '.join(reduce_words(result.text))} "


def relevant(question: Question, result: Retrieved) -> bool:
    """The result hits one of the question's evidence items."""
    return any(hits(result, evidence) for evidence in question.evidence)


def hit_rank(question: Question, results: Sequence[Retrieved]) -> int | None:
    """1-based rank of the first result that hits any evidence item, or ``None``."""
    for rank, result in enumerate(results, start=1):
        if relevant(question, result):
            return rank
    return None


# --------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------
def recall_at_k(ranks: Sequence[int | None], k: int) -> float:
    """Share of questions whose first hit is at rank ``k`` or better (``None``: no hit).

    Raises:
        ValueError: no ranks.
    """
    if not ranks:
        raise ValueError("no answerable questions to score")
    return sum(1 for r in ranks if r is not None and r <= k) / len(ranks)


def mean_reciprocal_rank(ranks: Sequence[int | None]) -> float:
    """Mean of ``1 / rank`` of each question's first hit, 0 for ``None`` (no hit).

    Raises:
        ValueError: no ranks.
    """
    if not ranks:
        raise ValueError("no answerable questions to score")
    return sum(1 / r for r in ranks if r is not None) / len(ranks)


def dcg(gains: Sequence[int]) -> float:
    """Discounted cumulative gain ``sum(g_i / log2(i + 1))`` over 1-based ranks (Järvelin &
    Kekäläinen, ACM TOIS 2002)."""
    return sum(g / math.log2(i + 1) for i, g in enumerate(gains, start=1))


def ndcg(gains: Sequence[int], relevant_in_corpus: int, k: int) -> float:
    """nDCG@k with binary gains: DCG of the first ``k`` results over the DCG of
    ``min(R, k)`` relevant points at the top, where ``R`` is how many points of the corpus
    are relevant. 0 when ``R`` is 0 (no single point holds the evidence)."""
    ideal = dcg([1] * min(relevant_in_corpus, k))
    return dcg(gains[:k]) / ideal if ideal else 0.0


@dataclass(frozen=True)
class Scores:
    """Recall@1/5/10 and MRR over the answerable questions (shares in 0-1)."""

    questions: int
    recall_at_1: float
    recall_at_5: float
    recall_at_10: float
    mrr: float


def score(ranks: Sequence[int | None]) -> Scores:
    """Metrics of one hit rank per answerable question (``None`` = no hit in the retrieved
    list; MRR counts it as 0).

    Raises:
        ValueError: no ranks.
    """
    return Scores(
        questions=len(ranks),
        recall_at_1=recall_at_k(ranks, 1),
        recall_at_5=recall_at_k(ranks, 5),
        recall_at_10=recall_at_k(ranks, 10),
        mrr=mean_reciprocal_rank(ranks),
    )


# --------------------------------------------------------------------------------------
# Running eval sets on a corpus (the retrieval_eval asset, the retrieval test)
# --------------------------------------------------------------------------------------
#: File name of an eval set inside its folder (``<eval dir>/<set name>/questions.jsonl``).
QUESTIONS_FILE = "questions.jsonl"


@dataclass(frozen=True)
class EvalSet:
    """A named list of questions (``name`` = the folder holding ``questions.jsonl``)."""

    name: str
    questions: tuple[Question, ...]


def find_eval_sets(folder: Path) -> list[EvalSet]:
    """Every ``<folder>/<name>/questions.jsonl``, by name; ``[]`` when ``folder`` is missing.

    Raises:
        ValueError: a questions file that does not parse (``load_questions``).
    """
    if not folder.is_dir():
        return []
    return [
        EvalSet(path.parent.name, tuple(load_questions(path)))
        for path in sorted(folder.glob(f"*/{QUESTIONS_FILE}"))
    ]


def applicable(eval_set: EvalSet, documents: set[str]) -> tuple[list[Question], list[Question]]:
    """The questions of ``eval_set`` that the corpus can answer, split into
    ``(answerable, absent)``: an answerable question applies when every evidence document (a
    file name) is in ``documents``; ``absent`` questions apply when at least one answerable
    question does (the set is about this corpus at all)."""
    answerable = [
        q for q in eval_set.questions
        if q.answerable and all(e.doc in documents for e in q.evidence)
    ]
    absent = [q for q in eval_set.questions if not q.answerable] if answerable else []
    return answerable, absent


@dataclass(frozen=True)
class SetOutcome:
    """One eval set run on the current corpus.

    Attributes:
        name: the set's name.
        overall: scores over its answerable, applicable questions.
        by_kind: scores per question kind (``definition``, ``table``, …).
        skipped: answerable questions left out because an evidence document is not in the
            corpus.
        absent: ``absent`` questions asked; ``absent_flagged``: how many of them got the
            low-confidence ("not covered") answer, which is the right one.
        ranks: question id -> 1-based rank of its first hit (``None``: no hit in the list).
    """

    name: str
    overall: Scores
    by_kind: dict[str, Scores]
    skipped: int
    absent: int
    absent_flagged: int
    ranks: dict[str, int | None]


#: A search as the eval sees it: query -> (results best first, low-confidence flag).
EvalSearch = Callable[[str], tuple[list[Retrieved], bool]]


def run_eval_set(eval_set: EvalSet, documents: set[str], search: EvalSearch) -> SetOutcome | None:
    """Ask ``eval_set``'s applicable questions (``applicable``) through ``search`` and score
    them with the hit rule; ``None`` when none applies to ``documents``."""
    answerable, absent = applicable(eval_set, documents)
    if not answerable:
        return None
    ranks = {q.id: hit_rank(q, search(q.question)[0]) for q in answerable}
    kinds = sorted({q.kind for q in answerable})
    by_kind = {
        kind: score([ranks[q.id] for q in answerable if q.kind == kind]) for kind in kinds
    }
    flagged = sum(1 for q in absent if search(q.question)[1])
    return SetOutcome(
        name=eval_set.name,
        overall=score(list(ranks.values())),
        by_kind=by_kind,
        skipped=sum(1 for q in eval_set.questions if q.answerable) - len(answerable),
        absent=len(absent),
        absent_flagged=flagged,
        ranks=ranks,
    )
