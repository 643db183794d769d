"""Benchmark — does search_graph answer the relation asked about?

Run from the repository root over a KB_HOME that holds the regulatory eval PDFs (the
retrieval benchmark's build is reused by default)::

    .venv/bin/python -m benchmarks.graph_relations
    .venv/bin/python -m benchmarks.graph_relations --home DIR --hops 1,2

The question set is ``benchmarks/eval/relational.jsonl``: one JSON object per line, ``{id,
kind, question, subject: [names], relationship: [types], object: [names], doc, pages}``,
written from the shared-corpus PDFs (obligations, notifications, permissions,
responsibilities; the page is the physical page the sentence is printed on).

**Hit rule.** A relationship answers its question when its source entity key is one of
``subject``, its target key one of ``object`` (names compared lower-cased), its type one of
``relationship``, it comes from ``doc`` and its chunk's page span overlaps ``pages``. A
question counts as correct when one of search_graph's top ``--top-k`` (5) relationships
answers it (issue 14's target: at least 0.8 of the set).

Output: ``benchmarks/results/graph-relations-<date>.md`` with the per-question rank.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import WORK_DIR, Report, kb_environment, log

#: The relational question set (module docstring).
QUESTIONS = Path(__file__).with_name("eval") / "relational.jsonl"

#: The retrieval benchmark's regulatory build, reused when present.
DEFAULT_HOME = WORK_DIR / "retrieval-regulatory"

#: Relationships judged per question (issue 14: "a correct relationship in the top 5").
TOP_K = 5


@dataclass(frozen=True)
class RelationalQuestion:
    """One question of the set (module docstring)."""

    id: str
    kind: str
    question: str
    subject: frozenset[str]
    relationship: frozenset[str]
    object: frozenset[str]
    doc: str
    pages: tuple[int, ...]


def load_relational(path: Path = QUESTIONS) -> list[RelationalQuestion]:
    """Parse the set.

    Raises:
        ValueError: a line missing a field, naming ``path:line``.
    """
    questions = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        raw = json.loads(line)
        try:
            questions.append(
                RelationalQuestion(
                    id=raw["id"], kind=raw["kind"], question=raw["question"],
                    subject=frozenset(n.lower() for n in raw["subject"]),
                    relationship=frozenset(raw["relationship"]),
                    object=frozenset(n.lower() for n in raw["object"]),
                    doc=raw["doc"], pages=tuple(raw["pages"]),
                )
            )
        except KeyError as exc:
            raise ValueError(f"{path}:{number}: missing field {exc}") from exc
    return questions


@dataclass(frozen=True)
class Found:
    """One relationship as the hit rule sees it: endpoint keys, type, the document's file
    name and the 1-based page span of its chunk (``None`` when the chunk is missing)."""

    source: str
    target: str
    type: str
    doc: str
    page_start: int | None
    page_end: int | None


def answers(question: RelationalQuestion, found: Found) -> bool:
    """The hit rule (module docstring)."""
    if found.page_start is None or found.doc != question.doc:
        return False
    end = found.page_end if found.page_end is not None else found.page_start
    return (
        found.source.lower() in question.subject
        and found.target.lower() in question.object
        and found.type in question.relationship
        and any(found.page_start <= page <= end for page in question.pages)
    )


def first_answer(question: RelationalQuestion, ranked: Sequence[Found]) -> int | None:
    """1-based rank of the first relationship that answers ``question``, or ``None``."""
    for rank, found in enumerate(ranked, start=1):
        if answers(question, found):
            return rank
    return None


def run(home: Path, hops: int, top_k: int) -> list[tuple[RelationalQuestion, int | None, list[Found]]]:
    """Ask every question through ``kb_mcp.graph_search.search_graph`` on ``home``."""
    from kb_mcp.graph_search import search_graph  # noqa: PLC0415 - loads models
    from kb_mcp.state import open_state  # noqa: PLC0415
    from kb_shared.search.citations import PointPayload  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415

    outcomes = []
    with kb_environment(home):
        state = open_state(Settings(home=home))
        try:
            index = state.vectors()
            for question in load_relational():
                answer = search_graph(state.graph, index, state.embedder, question.question,
                                      hops=hops, top_k=top_k)
                chunk_ids = [r.relationship.chunk_id for r in answer.relationships]
                payloads = {
                    p.id: PointPayload.from_payload(p.payload) for p in index.fetch(chunk_ids)
                }
                ranked = []
                for r in answer.relationships:
                    payload = payloads.get(r.relationship.chunk_id)
                    ranked.append(Found(
                        r.relationship.source, r.relationship.target, r.relationship.type,
                        payload.name if payload else "",
                        payload.page_start if payload else None,
                        payload.page_end if payload else None,
                    ))
                outcomes.append((question, first_answer(question, ranked), ranked))
        finally:
            state.close()
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    """Run the set at each ``--hops`` and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME)
    parser.add_argument("--hops", default="1,2")
    parser.add_argument("--top-k", type=int, default=TOP_K)
    parser.add_argument("--variant", default="")
    args = parser.parse_args(argv)
    report = Report("graph-relations", "search_graph on relational questions", variant=args.variant)
    report.fact("corpus", args.home)
    report.fact("question set", f"{QUESTIONS.relative_to(Path.cwd()) if QUESTIONS.is_relative_to(Path.cwd()) else QUESTIONS}")
    for hops in (int(h) for h in args.hops.split(",")):
        outcomes = run(args.home, hops, args.top_k)
        correct = sum(1 for _, rank, _ in outcomes if rank is not None)
        log(f"hops={hops}: {correct}/{len(outcomes)} with a correct relationship in the top {args.top_k}")
        report.heading(f"hops = {hops}: {correct}/{len(outcomes)} correct in the top {args.top_k} "
                       f"({correct / len(outcomes):.2f})")
        rows = []
        for question, rank, ranked in outcomes:
            top = ranked[0] if ranked else None
            rows.append([
                question.id, question.kind, question.question, rank or "—",
                f"{top.source} {top.type} {top.target} (p. {top.page_start})" if top else "nothing",
            ])
        report.table(["id", "kind", "question", "rank", "first relationship returned"], rows)
    print(report.write())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
