"""Benchmark 5 — rebuild cost: provider calls for ``kb rebuild`` and for re-running unchanged
documents.

Run from the repository root (not part of the unit test run; ~3-6 minutes)::

    .venv/bin/python -m benchmarks.rebuild_cost
    .venv/bin/python -m benchmarks.rebuild_cost --pdfs 'aemo_FCAS*'   # other real PDFs

On a small corpus in a fresh ``KB_HOME`` (``benchmarks/work/rebuild``, local providers) —
the sample procedure PDF ``kb_assets.sample_pdf`` generates plus, by default, two short AEMO
PDFs of the shared corpus — it runs these phases in order, each through
``kb_assets.operations.build_documents`` (the code of ``kb build`` / ``kb rebuild``):

1. ``first build`` — every asset of every document;
2. ``re-run, nothing changed`` — ``kb build --all``: every asset again, no ``force``;
3. ``kb rebuild graph`` — ``graph`` + ``record``, ``force`` on ``graph``;
4. ``kb rebuild embeddings`` — ``embeddings`` + ``record``, ``force`` on ``embeddings``;
5. ``kb rebuild figures`` — ``figures`` + ``record``, ``force`` on ``figures``;
6. ``re-run after the rebuilds`` — like 2, to show the rebuilds left nothing stale.

Provider calls are counted twice, independently:

* from the asset metadata in each run's event log (``markdown_conversions``,
  ``embedding_calls``, ``embedded``, ``extraction_calls``) — what the pipeline says it did;
* by a counting proxy around every provider: the functions of
  ``kb_shared.providers.factory`` that ``ProvidersResource`` calls are replaced for the
  duration with wrappers whose providers count each public call (and the items in it)
  before delegating. The runs execute in this process (Dagster's in-process executor), so
  the replacement is what the assets get — these are the real calls.

Expected (issue 6): a phase where nothing changed makes zero Markdown conversions and zero
embedding calls; a rebuild calls only its own asset's providers. Each phase gets a verdict,
and the script exits 1 when any phase is not as expected.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import (
    DEFAULT_PDFS,
    Report,
    Stopwatch,
    add_pdfs,
    fresh_dir,
    kb_environment,
    log,
    materialisations,
    numeric,
    open_corpus,
    pdf_page_count,
    select_pdfs,
    steps_started,
)

#: Two short AEMO procedures (10 and 24 pages; tables, a flow diagram) next to the sample.
DEFAULT_REAL_PDFS = (
    "aemo_Fast_Start_Unit_Inflexibility_Profile_Model_October_2014.pdf",
    "aemo_Schedule_of_Constraint_Violation_Penalty_factors.pdf",
)

#: The public provider methods counted, per ``kb_shared.providers.factory`` function
#: (the interfaces of ``kb_shared.providers.base``).
COUNTED: dict[str, tuple[str, ...]] = {
    "markdown_converter": ("convert",),
    "embedder": ("embed_documents", "embed_query", "embed_figures", "embed_names"),
    "contextualiser": ("contexts",),
    "graph_extractor": ("extract",),
    "figure_locator": ("locate",),
}


# --------------------------------------------------------------------------------------
# Counting proxies
# --------------------------------------------------------------------------------------
@dataclass
class CallCounter:
    """Calls and items per ``(factory function, method)``; items = length of the first
    argument when it is a list/tuple of inputs (texts, chunks, figures), else 1 (one PDF)."""

    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    items: Counter[tuple[str, str]] = field(default_factory=Counter)

    def record(self, role: str, method: str, args: tuple[Any, ...]) -> None:
        """Count one call of ``role.method`` with positional ``args``."""
        self.calls[(role, method)] += 1
        batch = next((a for a in args if isinstance(a, list | tuple)), None)
        self.items[(role, method)] += len(batch) if batch is not None else 1

    def reset(self) -> None:
        """Forget every count (between phases)."""
        self.calls.clear()
        self.items.clear()

    def get(self, role: str, method: str) -> tuple[int, int]:
        """``(calls, items)`` of one method."""
        return self.calls[(role, method)], self.items[(role, method)]


class CountingProxy:
    """Wraps a provider; counted methods (``COUNTED[role]``) record a call, then delegate.

    Every other attribute (``name``, ``model``, ``dimension``, ``usage``) is the wrapped
    provider's, so the assets see the same provider. Calls the provider makes on itself
    (e.g. the base ``embed_names`` calling ``embed_documents``) are not counted: only what
    the pipeline asks for.
    """

    def __init__(self, inner: Any, role: str, counter: CallCounter) -> None:
        self._inner = inner
        self._role = role
        self._counter = counter

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if name not in COUNTED[self._role] or not callable(value):
            return value

        def counted(*args: Any, **kwargs: Any) -> Any:
            self._counter.record(self._role, name, args)
            return value(*args, **kwargs)

        return counted


@contextlib.contextmanager
def counting_providers(counter: CallCounter) -> Iterator[None]:
    """Replace the ``kb_shared.providers.factory`` functions in ``COUNTED`` with wrappers
    returning ``CountingProxy``s, restoring the originals on exit."""
    from kb_shared.providers import factory  # noqa: PLC0415

    originals: dict[str, Callable[..., Any]] = {name: getattr(factory, name) for name in COUNTED}

    def wrapper(name: str, build: Callable[..., Any]) -> Callable[..., Any]:
        def make(*args: Any, **kwargs: Any) -> Any:
            return CountingProxy(build(*args, **kwargs), name, counter)

        return make

    try:
        for name, build in originals.items():
            setattr(factory, name, wrapper(name, build))
        yield
    finally:
        for name, build in originals.items():
            setattr(factory, name, build)


# --------------------------------------------------------------------------------------
# Phases
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Phase:
    """One ``build_documents`` call over every document.

    Attributes:
        label: what a person would run.
        assets: asset selection (``None`` = all six).
        force: assets whose unchanged-input shortcut is skipped.
        expect: counted ``(role, method)`` -> ``"zero"``, ``"each"`` (one call per
            document) or ``"some"`` (at least one: figures exist only in some documents).
            Anything not listed must be zero.
    """

    label: str
    assets: tuple[str, ...] | None
    force: tuple[str, ...]
    expect: dict[tuple[str, str], str]


EVERYTHING_CALLED = {
    ("markdown_converter", "convert"): "each",
    ("embedder", "embed_documents"): "each",
    ("contextualiser", "contexts"): "each",
    ("graph_extractor", "extract"): "each",
    ("embedder", "embed_names"): "each",
    ("figure_locator", "locate"): "each",
    ("embedder", "embed_figures"): "some",
}

PHASES = (
    Phase("first build (`kb build`)", None, (), EVERYTHING_CALLED),
    Phase("re-run, nothing changed (`kb build --all`)", None, (), {}),
    Phase(
        "`kb rebuild graph --all`", ("graph", "record"), ("graph",),
        {("graph_extractor", "extract"): "each", ("embedder", "embed_names"): "each"},
    ),
    Phase(
        "`kb rebuild embeddings --all`", ("embeddings", "record"), ("embeddings",),
        {("embedder", "embed_documents"): "each", ("contextualiser", "contexts"): "each"},
    ),
    Phase(
        "`kb rebuild figures --all`", ("figures", "record"), ("figures",),
        {("figure_locator", "locate"): "each", ("embedder", "embed_figures"): "some"},
    ),
    Phase("re-run after the rebuilds (`kb build --all`)", None, (), {}),
)


@dataclass
class PhaseResult:
    """What one phase did, from the event log and from the counting proxies."""

    phase: Phase
    documents: int
    seconds: float
    failures: list[str]
    steps: list[str]
    metadata: dict[str, float]  # summed over the phase's runs
    calls: dict[tuple[str, str], tuple[int, int]]  # (calls, items) per counted method
    problems: list[str]

    @property
    def as_expected(self) -> bool:
        """No failure and every count as the phase expects."""
        return not self.problems


def _check(phase: Phase, documents: int, result: PhaseResult) -> list[str]:
    """Compare the proxy counts with the phase's expectation and with the metadata."""
    problems: list[str] = []
    for key in sorted({k for role, methods in COUNTED.items() for k in
                       ((role, m) for m in methods)}):
        calls = result.calls.get(key, (0, 0))[0]
        want = phase.expect.get(key, "zero")
        name = ".".join(key)
        if want == "zero" and calls:
            problems.append(f"{name}: {calls} calls, expected none")
        elif want == "each" and calls != documents:
            problems.append(f"{name}: {calls} calls, expected one per document ({documents})")
        elif want == "some" and not calls:
            problems.append(f"{name}: no calls, expected at least one")
    agreements = (
        ("markdown conversions", result.metadata["markdown_conversions"],
         result.calls.get(("markdown_converter", "convert"), (0, 0))[0]),
        ("chunk embedding calls", result.metadata["chunk_embedding_calls"],
         result.calls.get(("embedder", "embed_documents"), (0, 0))[0]),
        ("chunks embedded", result.metadata["chunks_embedded"],
         result.calls.get(("embedder", "embed_documents"), (0, 0))[1]),
        ("graph extraction calls", result.metadata["extraction_calls"],
         result.calls.get(("graph_extractor", "extract"), (0, 0))[0]),
        ("figure embedding calls", result.metadata["figure_embedding_calls"],
         result.calls.get(("embedder", "embed_figures"), (0, 0))[0]),
    )
    for what, from_metadata, counted in agreements:
        if int(from_metadata) != counted:
            problems.append(f"{what}: metadata says {int(from_metadata)}, proxy counted "
                            f"{counted}")
    problems.extend(f"failed: {f}" for f in result.failures)
    return problems


def run_phase(corpus: Any, doc_ids: list[str], phase: Phase, counter: CallCounter) -> PhaseResult:
    """Run one phase over every document and collect its counts."""
    from kb_assets import operations  # noqa: PLC0415

    counter.reset()
    with Stopwatch() as watch:
        outcomes = operations.build_documents(
            corpus.stores, corpus.instance, doc_ids,
            assets=list(phase.assets) if phase.assets else None, force=phase.force,
        )
    totals = dict.fromkeys(
        ("markdown_conversions", "chunk_embedding_calls", "chunks_embedded",
         "extraction_calls", "figure_embedding_calls"), 0.0,
    )
    steps: list[str] = []
    for outcome in outcomes:
        meta = materialisations(corpus.instance, outcome.run_id)
        totals["markdown_conversions"] += numeric(meta.get("markdown", {}),
                                                  "markdown_conversions")
        totals["chunk_embedding_calls"] += numeric(meta.get("embeddings", {}), "embedding_calls")
        totals["chunks_embedded"] += numeric(meta.get("embeddings", {}), "embedded")
        totals["extraction_calls"] += numeric(meta.get("graph", {}), "extraction_calls")
        totals["figure_embedding_calls"] += numeric(meta.get("figures", {}), "embedding_calls")
        for step in steps_started(corpus.instance, outcome.run_id):
            if step not in steps:
                steps.append(step)
    result = PhaseResult(
        phase=phase,
        documents=len(doc_ids),
        seconds=watch.seconds,
        failures=[f"{o.name}: {o.reason}" for o in outcomes if o.status != "ready"],
        steps=steps,
        metadata=totals,
        calls={key: counter.get(*key) for key in counter.calls},
        problems=[],
    )
    result.problems = _check(phase, len(doc_ids), result)
    return result


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------
def _pair(from_metadata: float, counted: int) -> str:
    """``"3 / 3"``: metadata value / proxy count."""
    return f"{int(from_metadata)} / {counted}"


def write_report(report: Report, documents: list[tuple[str, int | None]],
                 results: list[PhaseResult]) -> None:
    """The corpus, the phase table, the per-method call table and the verdicts."""
    report.heading("Corpus")
    report.table(("document", "pages"), [(n, p if p is not None else "") for n, p in documents])

    report.heading("Provider calls per phase")
    report.text(
        "Each cell is *event-log metadata / counting proxy* (summed over the phase's runs, one "
        "run per document). `steps run` lists the Dagster steps that started in the phase. "
        "`entity-name embeds` and `figure locates` come from the proxy only (no metadata "
        "field reports them)."
    )
    rows = []
    for r in results:
        calls = r.calls
        rows.append((
            r.phase.label,
            ", ".join(r.steps),
            _pair(r.metadata["markdown_conversions"],
                  calls.get(("markdown_converter", "convert"), (0, 0))[0]),
            _pair(r.metadata["chunk_embedding_calls"],
                  calls.get(("embedder", "embed_documents"), (0, 0))[0]),
            _pair(r.metadata["chunks_embedded"],
                  calls.get(("embedder", "embed_documents"), (0, 0))[1]),
            _pair(r.metadata["extraction_calls"],
                  calls.get(("graph_extractor", "extract"), (0, 0))[0]),
            calls.get(("embedder", "embed_names"), (0, 0))[0],
            calls.get(("figure_locator", "locate"), (0, 0))[0],
            _pair(r.metadata["figure_embedding_calls"],
                  calls.get(("embedder", "embed_figures"), (0, 0))[0]),
            f"{r.seconds:.1f}",
            "as expected" if r.as_expected else "**NOT as expected**",
        ))
    report.table(
        ("phase", "steps run", "markdown conversions", "chunk embedding calls",
         "chunks embedded", "graph extractions", "entity-name embeds", "figure locates",
         "figure embedding calls", "seconds", "verdict"),
        rows,
        align="ll" + "r" * 8 + "l",
    )

    report.heading("Every counted provider method (proxy: calls / items)")
    methods = [(role, m) for role, ms in COUNTED.items() for m in ms]
    report.table(
        ("phase", *(f"{role}.{m}" for role, m in methods)),
        [
            (r.phase.label, *(
                "{} / {}".format(*r.calls.get(key, (0, 0))) for key in methods
            ))
            for r in results
        ],
    )
    report.text(
        "`contextualiser.contexts` is asked once per document whose chunks are embedded. With "
        "local providers that is the `HeadingPathContextualiser` (`factory.contextualiser`): "
        "the context is the heading path `embedding_text` already adds, so it returns empty "
        "contexts and calls no model."
    )

    report.heading("Verdicts")
    report.text("\n".join(
        f"- {r.phase.label}: "
        + ("as expected." if r.as_expected else "; ".join(r.problems))
        for r in results
    ))


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options (``--help`` lists them)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.rebuild_cost", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--corpus", type=Path, default=DEFAULT_PDFS,
                        help=f"folder of real PDFs (default: {DEFAULT_PDFS})")
    parser.add_argument("--pdfs", default=",".join(DEFAULT_REAL_PDFS),
                        help="comma-separated real PDF names or patterns added next to the "
                        "generated sample (default: two short AEMO procedures; '' for none)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run every phase; returns 1 when a phase was not as expected."""
    from kb_assets.sample_pdf import SAMPLE_FILENAME, build_sample_pdf  # noqa: PLC0415

    args = parse_args(argv)
    names = [n.strip() for n in args.pdfs.split(",") if n.strip()]
    real = select_pdfs(args.corpus.resolve(), names) if names else []
    home = fresh_dir("rebuild")
    sample = build_sample_pdf(home / "incoming" / SAMPLE_FILENAME)
    pdfs = [sample, *real]
    report = Report("rebuild-cost", "Rebuild cost benchmark (provider calls)")
    report.fact("KB_HOME", home)
    report.fact("providers", "all local (KB_*_PROVIDER=local), each wrapped in a counting proxy")

    documents = [(p.name, pdf_page_count(p)) for p in pdfs]
    counter = CallCounter()
    results: list[PhaseResult] = []
    with kb_environment(home), counting_providers(counter):
        corpus = open_corpus(home)
        doc_ids, intake = add_pdfs(corpus, pdfs)
        refused = [o for o in intake if o.status != "added"]
        if refused:
            raise SystemExit(f"intake refused: {[(o.name, o.reason) for o in refused]}")
        for phase in PHASES:
            log(f"phase: {phase.label}")
            result = run_phase(corpus, doc_ids, phase, counter)
            results.append(result)
            log(f"  {result.seconds:.1f} s; "
                + ("as expected" if result.as_expected else "; ".join(result.problems)))
        corpus.close()
    write_report(report, documents, results)
    print(report.write())
    return 0 if all(r.as_expected for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
