"""Measure search_docs' offline re-ordering levers on built corpora, fast and per question.

``python -m benchmarks.retrieval_levers --set regulatory=HOME[:EVAL] --set financebench=HOME
[options]`` opens each ``KB_HOME`` (copy it to /tmp first: the SQLite reader may write a
journal), asks every answerable question of its eval set through
``kb_shared.search.retrieval.search_docs`` (top ``TOP_K``, no reranker, local models; chunk spans
cited, no Markdown: as ``benchmarks.retrieval``'s ``search_docs`` row) and prints R@1 / R@5 /
MRR overall, per kind and over the even / odd halves of the question ids (each half is the
other's held-out split; ids end in a number), the first-hit rank of every question and the
CPU time of one search_docs call (process time, so other load counts less than in wall time).

Options, each measuring search_docs without (or with another setting of) one lever:
``--off NAME`` zeroes a ``retrieval_features.FeatureWeights`` field, ``--weight NAME=VALUE``
sets one, ``--skip FUNCTION`` turns off one of the pool's pull-ins (``PULL_INS``),
``--old-routing`` names documents by round 2's rule (``_alphabetic_words``),
``--definition-search N`` sets ``kb_shared.search.retrieval.DEFINITION_SEARCH``, ``--acronyms on|off``
expands the graph's abbreviation pairs on the sparse side (``kb_shared.search.acronyms``; default:
``ACRONYM_EXPANSION``, as the MCP tool); ``--cpu-passes N``
times each question N times (default 3, 0: untimed); ``--show`` prints
the top 3 results of each question not answered at rank 1. The report this fed:
``benchmarks/results/retrieval-levers-2026-12-01-round3.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from benchmarks.common import kb_environment
from kb_shared.search import evaluation, retrieval_features
from kb_shared.search.evaluation import Question, Retrieved

#: Results judged per question (the retrieval benchmark's ``TOP_K``).
TOP_K = 10

#: Where the shared eval sets live when a ``--set`` names none.
DEFAULT_EVAL = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "eval"

#: ``kb_shared.search.retrieval`` functions that add candidates to the pool; ``--skip`` one to
#: measure search_docs without it.
PULL_INS = ("definition_candidates", "statement_candidates")

_ID_NUMBER = re.compile(r"(\d+)$")


def _alphabetic_words(question: str, tokens: Sequence[str] | None = None) -> frozenset[str]:
    """Round 2's document-naming words of a question: its alphabetic sparse terms only (no
    "3m", no glued "bestbuy", no years); ``tokens``: the question's terms when already cut."""
    from kb_shared.search.sparse import tokenize  # noqa: PLC0415

    terms = tokenize(question) if tokens is None else tokens
    return frozenset(t for t in terms if t.isalpha())


def half(question_id: str) -> str:
    """``"even"`` or ``"odd"`` by the number that ends ``question_id``.

    Raises:
        ValueError: the id does not end in a number.
    """
    found = _ID_NUMBER.search(question_id)
    if found is None:
        raise ValueError(f"question id {question_id!r} does not end in a number")
    return "even" if int(found.group(1)) % 2 == 0 else "odd"


def summary(ranks: dict[str, int | None], kinds: dict[str, str]) -> list[tuple[str, evaluation.Scores]]:
    """``(label, Scores)`` for all questions, each kind and each half (``half``), in that
    order; ``ranks``/``kinds`` are keyed by question id."""
    groups: dict[str, list[int | None]] = defaultdict(list)
    for qid, rank in ranks.items():
        groups["all"].append(rank)
        groups[f"kind {kinds[qid]}"].append(rank)
        groups[f"{half(qid)} ids"].append(rank)
    order = ["all", *sorted(k for k in groups if k.startswith("kind")), "even ids", "odd ids"]
    return [(label, evaluation.score(groups[label])) for label in order if label in groups]


def run(
    home: Path,
    questions: Sequence[Question],
    show: bool,
    passes: int = 3,
    acronyms: bool | None = None,
) -> dict[str, int | None]:
    """The first-hit rank of each answerable question of ``questions`` over ``home``; each is
    asked ``passes`` more times for its CPU time (0: not timed). ``acronyms``: expand the
    graph's abbreviation pairs (``None``: as the MCP tool, ``acronyms.ACRONYM_EXPANSION``)."""
    from kb_mcp.state import open_state  # noqa: PLC0415
    from kb_shared.search import acronyms as acronym_pairs  # noqa: PLC0415
    from kb_shared.search.retrieval import search_docs  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415

    with kb_environment(home):
        settings = Settings()
    state = open_state(settings, use_reranker=False)
    index, embedder = state.vectors(), state.embedder
    table = acronym_pairs.acronyms_for(state.graph, acronyms)  # as the MCP tool gets it
    ranks: dict[str, int | None] = {}
    cpu_ms: list[float] = []
    for question in questions:
        if not question.answerable:
            continue
        answer = search_docs(  # warms caches
            index, embedder, question.question, top_k=TOP_K, acronyms=table
        )
        spent = []
        for _ in range(passes):
            began = time.process_time()
            search_docs(index, embedder, question.question, top_k=TOP_K, acronyms=table)
            spent.append(time.process_time() - began)
        if spent:
            cpu_ms.append(1000 * min(spent))
        results = [
            Retrieved(p.payload.name, p.citation.page_start, p.citation.page_end, p.point.text,
                      p.point.id)
            for p in answer.results
        ]
        rank = evaluation.hit_rank(question, results)
        ranks[question.id] = rank
        if show and rank != 1:
            print(f"\n{question.id} [{question.kind}] rank {rank}: {question.question[:160]}")
            for e in question.evidence:
                print(f"   want {e.doc} p{e.pages} {(e.quote or '')[:80]!r}")
            for p in answer.results[:3]:
                head = " ".join(p.point.text.split())[:110]
                print(f"   got {p.payload.name} p{p.citation.page_start}-{p.citation.page_end} "
                      f"{p.score:.3f} §{p.payload.section[-60:]!r} {head!r}")
    if cpu_ms:
        cpu_ms.sort()
        print(f"\nsearch_docs CPU per question (min of {passes}, this process): median "
              f"{statistics.median(cpu_ms):.1f} ms, max {cpu_ms[-1]:.1f} ms")
    return ranks


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (module docstring); returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", required=True, metavar="NAME=HOME[:EVAL]")
    parser.add_argument("--off", action="append", default=[], metavar="LEVER")
    parser.add_argument("--weight", action="append", default=[], metavar="LEVER=VALUE")
    parser.add_argument("--skip", action="append", default=[], choices=PULL_INS)
    parser.add_argument("--old-routing", action="store_true")
    parser.add_argument("--definition-search", type=int, metavar="N")
    parser.add_argument("--acronyms", choices=("on", "off"))
    parser.add_argument("--cpu-passes", type=int, default=3, metavar="N")
    parser.add_argument("--show", action="store_true")
    args = parser.parse_args(argv)
    fields = {f.name for f in dataclasses.fields(retrieval_features.FeatureWeights)}
    weights: dict[str, float | bool] = {
        name: float(value) for name, _, value in (w.partition("=") for w in args.weight)
    }
    weights.update({name: 0.0 for name in args.off})
    unknown = sorted(set(weights) - fields)
    if unknown:
        parser.error(f"unknown lever(s) {unknown}; known: {sorted(fields)}")
    for name in ("routed_units_only",):
        if name in weights:
            weights[name] = bool(weights[name])
    retrieval_features.DEFAULT_FEATURES = dataclasses.replace(
        retrieval_features.DEFAULT_FEATURES, **weights
    )
    from kb_shared.search import retrieval  # noqa: PLC0415

    for name in args.skip:
        setattr(retrieval, name, lambda *_args, **_kwargs: [])
    if args.definition_search is not None:
        retrieval.DEFINITION_SEARCH = args.definition_search
    if args.old_routing:
        retrieval_features.question_naming_words = _alphabetic_words
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    for spec in args.set:
        name, _, where = spec.partition("=")
        home_text, _, eval_text = where.partition(":")
        folder = Path(eval_text) if eval_text else DEFAULT_EVAL / name
        questions = evaluation.load_questions(folder / "questions.jsonl")
        switch = None if args.acronyms is None else args.acronyms == "on"
        ranks = run(Path(home_text), questions, args.show, args.cpu_passes, switch)
        kinds = {q.id: q.kind for q in questions}
        print(f"\n== {name} (changed: {weights or 'none'}; skipped: {args.skip or 'none'}; "
              f"old routing: {args.old_routing}; acronyms: {args.acronyms or 'default'})")
        for label, scores in summary(ranks, kinds):
            print(f"{label:22s} n={scores.questions:2d} R@1 {scores.recall_at_1:.3f} "
                  f"R@5 {scores.recall_at_5:.3f} MRR {scores.mrr:.3f}")
        print("ranks " + " ".join(f"{q[-5:]}:{r or '-'}" for q, r in ranks.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
