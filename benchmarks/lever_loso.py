"""Every ranking lever of search_docs switched off in turn, on every eval set: which levers hold
on the sets they were not tuned with — ``python -m benchmarks.lever_loso``.

Usage::

    python -m benchmarks.lever_loso --set regulatory=HOME --set financebench=HOME \\
        --set financebench-dev=HOME [--tuned regulatory,financebench]

For each set, the questions are asked through ``kb_shared.search.retrieval.search_docs`` (top 10, as
``benchmarks.retrieval_levers``, whose ``run`` it uses) with every lever on, then with each
lever of ``LEVERS`` off alone. A lever's effect on a set is MRR with it minus MRR without it.
**Leave one set out** (issue 25): a lever is kept only when, on every set it was not tuned
with, it does not lose; ``--tuned`` names the sets the current constants were chosen on (each
other set is one it was not tuned with), and a lever that loses on a tuned set while gaining
on another tuned one is reported as a trade, not a gain. Writes
``benchmarks/results/levers-loso-<date>[-variant].md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from benchmarks.common import Report, log
from benchmarks.retrieval_levers import DEFAULT_EVAL, run
from kb_shared.search import acronyms, evaluation, retrieval_features

#: Levers and how each is switched off: a ``FeatureWeights`` field set to its "off" value, a
#: pull-in of ``kb_shared.search.retrieval`` replaced by one that adds nothing, or the acronym switch.
#: (Removed after levers-loso-2026-12-06-baseline.md: the best-unit share bonus, routing by
#: other documents' text and the row pull-in.)
LEVERS: dict[str, tuple[str, str]] = {
    "definition bonus": ("weight", "definition"),
    "section-number bonus": ("weight", "section_number"),
    "document routing bonus": ("weight", "document"),
    "named-statement bonus": ("weight", "statement"),
    "routed units only": ("flag", "routed_units_only"),
    "table bonus": ("weight", "table"),
    "best-unit lead bonus": ("weight", "unit_lead"),
    "definition pull-in": ("skip", "definition_candidates"),
    "statement pull-in": ("skip", "statement_candidates"),
    "acronym expansion": ("acronyms", ""),
}


@contextmanager
def lever_off(name: str) -> Iterator[None]:
    """Switch lever ``name`` (``LEVERS``) off for the duration."""
    from kb_shared.search import retrieval  # noqa: PLC0415

    how, what = LEVERS[name]
    saved_weights = retrieval_features.DEFAULT_FEATURES
    saved_expansion = acronyms.ACRONYM_EXPANSION
    saved_pull: Callable[..., list] | None = (
        getattr(retrieval, what, None) if how == "skip" else None
    )
    try:
        if how in ("weight", "flag"):
            off = 0.0 if how == "weight" else False
            retrieval_features.DEFAULT_FEATURES = dataclasses.replace(saved_weights, **{what: off})
        elif how == "skip":
            setattr(retrieval, what, lambda *_args, **_kwargs: [])
        else:
            acronyms.ACRONYM_EXPANSION = False
        yield
    finally:
        retrieval_features.DEFAULT_FEATURES = saved_weights
        acronyms.ACRONYM_EXPANSION = saved_expansion
        if saved_pull is not None:
            setattr(retrieval, what, saved_pull)


def verdict(effects: dict[str, float], tuned: set[str]) -> str:
    """``keep`` / ``remove`` / ``neutral`` from one lever's MRR effect per set (module
    docstring): it is removed when it loses on a set it was not tuned with."""
    untuned = {s: e for s, e in effects.items() if s not in tuned}
    if any(e < -1e-9 for e in untuned.values()):
        return "remove (loses where not tuned)"
    if all(abs(e) < 1e-9 for e in effects.values()):
        return "neutral (no effect anywhere)"
    gains = any(e > 1e-9 for e in effects.values())
    if any(e < -1e-9 for e in effects.values()):
        return "trade (loses on a tuned set)" if gains else "remove (loses, gains nowhere)"
    return "keep"


def main(argv: Sequence[str] | None = None) -> int:
    """Run every set with all levers on, then each lever off; write the report."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lever_loso",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--set", action="append", required=True, metavar="NAME=HOME[:EVAL]")
    parser.add_argument("--tuned", default="regulatory,financebench",
                        help="sets the current constants were chosen on")
    parser.add_argument("--variant", default="")
    args = parser.parse_args(argv)
    tuned = {s.strip() for s in args.tuned.split(",") if s.strip()}
    sets: list[tuple[str, Path, list[evaluation.Question]]] = []
    for spec in args.set:
        name, _, where = spec.partition("=")
        home_text, _, eval_text = where.partition(":")
        folder = Path(eval_text) if eval_text else DEFAULT_EVAL / name
        sets.append((name, Path(home_text), evaluation.load_questions(folder / "questions.jsonl")))

    def scores(home: Path, questions: list[evaluation.Question]) -> evaluation.Scores:
        ranks = run(home, questions, show=False, passes=0)
        return evaluation.score(list(ranks.values()))

    base: dict[str, evaluation.Scores] = {}
    for name, home, questions in sets:
        log(f"{name}: all levers on")
        base[name] = scores(home, questions)
    effects: dict[str, dict[str, evaluation.Scores]] = {}
    for lever in LEVERS:
        effects[lever] = {}
        with lever_off(lever):
            for name, home, questions in sets:
                log(f"{name}: {lever} off")
                effects[lever][name] = scores(home, questions)

    report = Report(name="levers-loso", title="Ranking levers, leave one set out",
                    variant=args.variant)
    report.fact("sets", ", ".join(f"{n} ({len(q)} questions)" for n, _, q in sets))
    report.fact("tuned on", ", ".join(sorted(tuned)) or "none")
    names = [n for n, _, _ in sets]
    report.text("All levers on (top 10, search_docs as shipped): " + "; ".join(
        f"{n} R@1 {base[n].recall_at_1:.3f} R@5 {base[n].recall_at_5:.3f} MRR {base[n].mrr:.3f}"
        for n in names))
    rows = []
    for lever, by_set in effects.items():
        deltas = {n: base[n].mrr - by_set[n].mrr for n in names}
        cells = [f"{deltas[n]:+.3f} (R@1 {base[n].recall_at_1 - by_set[n].recall_at_1:+.3f})"
                 for n in names]
        rows.append([lever, *cells, verdict(deltas, tuned)])
        print(f"{lever:26s} " + "  ".join(cells) + f"  {rows[-1][-1]}")
    report.text("Each cell: MRR with the lever minus MRR without it (R@1 likewise); a "
                "positive number is what the lever earns on that set.")
    report.table(["lever", *names, "verdict"], rows)
    report.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
