"""Benchmark 1 — ingest: ``kb build`` over the shared corpus PDFs, per document and per asset.

Run from the repository root (not part of the unit test run)::

    .venv/bin/python -m benchmarks.ingest                 # the 14 PDFs of ../shared/corpus/pdfs
    .venv/bin/python -m benchmarks.ingest --quick         # 3 PDFs, a smoke run (~2 min)
    .venv/bin/python -m benchmarks.ingest --pdfs 'aemo_*' --corpus /other/pdfs

What it does, in one process:

1. Creates a fresh ``KB_HOME`` in ``benchmarks/work/ingest`` (``ingest-quick`` for
   ``--quick``), with every provider forced to its local implementation
   (``common.kb_environment``), adds the PDFs with the intake rules and builds every added
   document with ``kb_assets.operations.build_documents`` — the code ``kb build`` runs:
   one in-process Dagster run per document, six assets each.
2. Reads each run's event log: the ``seconds`` metadata every asset reports (the work in the
   asset body) and Dagster's ``STEP_SUCCESS`` duration (body + IO manager load/store), and
   reports seconds and seconds per page per document and per asset, pages per second
   overall, the peak RSS of the process, and every failure with its reason. Three corpus
   PDFs must fail (corpus README): the two scanned ones (no text layer) and the one whose
   font has no Unicode mapping; any other outcome is flagged as unexpected (exit code 1).
3. Times the Markdown step alone, pymupdf4llm's layout mode against its legacy mode
   (``pymupdf4llm.use_layout(False)``, pymupdf4llm 2.0), on the PDFs that built, one
   document at a time alternating the modes so a change in machine load hits both. Only the
   first ``--mode-pages`` pages of each PDF are converted (default 20; 0 = all) to keep the
   run short; seconds per page are comparable all the same. Raw ``pymupdf4llm.to_markdown``
   output is timed (not kb's clean-up after it), so this isolates the mode.

The built ``KB_HOME`` is left in place: the retrieval and serving benchmarks can reuse it
(``common.INGEST_HOME``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import (
    DEFAULT_PDFS,
    Report,
    Stopwatch,
    add_pdfs,
    fmt_bytes,
    fmt_duration,
    fresh_dir,
    kb_environment,
    log,
    materialisations,
    numeric,
    open_corpus,
    pdf_page_count,
    peak_rss_bytes,
    select_pdfs,
    step_durations,
)

#: Corpus PDFs that must fail, with the reason the corpus README gives.
EXPECTED_FAILURES = {
    "scanned_ocrmypdf_c02-22_huckfinn_p22.pdf": "scanned, no text layer",
    "scanned_ocrmypdf_multipage.pdf": "scanned, no text layer",
    "encoding_ocrmypdf_truetype_font_nomapping.pdf": "font with no Unicode mapping",
}

#: ``--quick``: a 10-page AEMO procedure with tables and a flow diagram, a 1-page Arabic
#: (right-to-left) PDF, and a scanned page that must fail.
QUICK_PDFS = (
    "aemo_Fast_Start_Unit_Inflexibility_Profile_Model_October_2014.pdf",
    "encoding_pypdf_habibi_arabic.pdf",
    "scanned_ocrmypdf_c02-22_huckfinn_p22.pdf",
)

#: The six corpus assets in build order (``kb_assets.constants.CORPUS_ASSETS``).
ASSETS = ("markdown", "chunks", "embeddings", "graph", "figures", "record")

#: Default number of leading pages per PDF for the layout-vs-legacy comparison.
MODE_PAGES = 20


@dataclass
class DocumentResult:
    """One document's build, with each asset's timings from the event log."""

    name: str
    doc_id: str | None
    pages: int | None
    status: str
    reason: str = ""
    wall_seconds: float = 0.0
    asset_seconds: dict[str, float] = field(default_factory=dict)  # asset-body seconds
    step_seconds: dict[str, float] = field(default_factory=dict)  # Dagster step durations
    chunks: int | None = None
    figures: int | None = None
    entities: int | None = None
    relationships: int | None = None

    @property
    def expected(self) -> str:
        """``"fail"`` or ``"ready"``: what the corpus README says should happen."""
        return "fail" if self.name in EXPECTED_FAILURES else "ready"

    @property
    def as_expected(self) -> bool:
        """The outcome matches ``expected``."""
        return (self.status == "failed") == (self.expected == "fail")


def build(pdfs: Sequence[Path], home: Path) -> tuple[list[DocumentResult], float, float]:
    """Add and build ``pdfs`` in ``home``.

    Returns:
        ``(per-document results, build wall seconds, intake seconds)`` — intake is ``kb add``
        (identity checks, copy to blobs, partitions) including the first import of kb and
        Dagster.
    """
    results: list[DocumentResult] = []
    pages = {p.name: pdf_page_count(p) for p in pdfs}
    with kb_environment(home), Stopwatch() as intake_watch:
        corpus = open_corpus(home)
        added, intake = add_pdfs(corpus, pdfs)
    with kb_environment(home):
        for outcome in intake:
            if outcome.status != "added":
                results.append(
                    DocumentResult(
                        name=outcome.name, doc_id=outcome.doc_id, pages=pages.get(outcome.name),
                        status="failed", reason=f"not added ({outcome.status}): {outcome.reason}",
                    )
                )
        log(f"added {len(added)} documents to {home}; building")
        from kb_assets import operations  # noqa: PLC0415 - after KB_HOME is set

        def done(outcome: operations.BuildOutcome) -> None:
            per_page = (
                f", {outcome.seconds / outcome.pages:.2f} s/page" if outcome.pages else ""
            )
            log(f"{outcome.status:6} {outcome.name} in {outcome.seconds:.1f} s{per_page}")

        with Stopwatch() as watch:
            outcomes = operations.build_documents(
                corpus.stores, corpus.instance, added, on_done=done
            )
        for outcome in outcomes:
            meta = materialisations(corpus.instance, outcome.run_id)
            results.append(
                DocumentResult(
                    name=outcome.name,
                    doc_id=outcome.doc_id,
                    pages=outcome.pages or pages.get(outcome.name),
                    status=outcome.status,
                    reason=outcome.reason,
                    wall_seconds=outcome.seconds,
                    asset_seconds={
                        asset: numeric(values, "seconds") for asset, values in meta.items()
                        if "seconds" in values
                    },
                    step_seconds=step_durations(corpus.instance, outcome.run_id),
                    chunks=outcome.chunks,
                    figures=outcome.figures,
                    entities=outcome.entities,
                    relationships=outcome.relationships,
                )
            )
        corpus.close()
    return results, watch.seconds, intake_watch.seconds


# --------------------------------------------------------------------------------------
# pymupdf4llm layout vs legacy
# --------------------------------------------------------------------------------------
@dataclass
class ModeResult:
    """One PDF converted by raw ``pymupdf4llm.to_markdown`` in one mode."""

    name: str
    mode: str
    pages: int
    seconds: float
    characters: int
    table_lines: int
    heading_lines: int

    @property
    def seconds_per_page(self) -> float:
        """Seconds per converted page."""
        return self.seconds / self.pages if self.pages else 0.0


def _convert(path: Path, layout: bool, pages: list[int]) -> tuple[float, str]:
    """Convert ``pages`` (0-based) of ``path`` in one mode; returns (seconds, Markdown).

    Layout mode gets ``use_ocr=False`` (kb never OCRs, and OCR would print a RapidOCR warning);
    the legacy path takes no OCR arguments. Whatever pymupdf4llm prints is swallowed.
    """
    import pymupdf  # noqa: PLC0415
    import pymupdf4llm  # noqa: PLC0415

    pymupdf4llm.use_layout(layout)
    extra = {"use_ocr": False} if layout else {}
    with pymupdf.open(path) as doc, contextlib.redirect_stdout(io.StringIO()):
        started = time.perf_counter()
        markdown = pymupdf4llm.to_markdown(doc, pages=pages, show_progress=False, **extra)
        seconds = time.perf_counter() - started
    return seconds, markdown


def compare_modes(pdfs: Sequence[Path], max_pages: int) -> list[ModeResult]:
    """Layout and legacy conversions of the first ``max_pages`` pages (0 = all) of each PDF.

    Modes alternate per document (layout, then legacy) so a change in machine load affects
    both alike; one untimed page in each mode first loads the layout model and warms caches.
    Layout mode is restored at the end (it is pymupdf4llm's default when ``pymupdf.layout``
    imports, and kb's converter relies on it).
    """
    import pymupdf  # noqa: PLC0415
    import pymupdf4llm  # noqa: PLC0415

    pymupdf.set_messages(pylogging=True, pylogging_name="pymupdf")
    pymupdf.set_log(pylogging=True, pylogging_name="pymupdf")
    results: list[ModeResult] = []
    try:
        if pdfs:
            for layout in (True, False):
                _convert(pdfs[0], layout, [0])
        for path in pdfs:
            total = pdf_page_count(path) or 0
            pages = list(range(min(total, max_pages) if max_pages else total))
            if not pages:
                continue
            for mode, layout in (("layout", True), ("legacy", False)):
                seconds, markdown = _convert(path, layout, pages)
                lines = markdown.splitlines()
                results.append(
                    ModeResult(
                        name=path.name,
                        mode=mode,
                        pages=len(pages),
                        seconds=seconds,
                        characters=len(markdown),
                        table_lines=sum(1 for ln in lines if ln.lstrip().startswith("|")),
                        heading_lines=sum(1 for ln in lines if ln.lstrip().startswith("#")),
                    )
                )
                log(f"{mode:6} {path.name}: {len(pages)} pages in {seconds:.1f} s "
                    f"({seconds / len(pages):.2f} s/page)")
    finally:
        pymupdf4llm.use_layout(True)
    return results


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------
def _per_page(seconds: float | None, pages: int | None) -> str:
    if seconds is None or not pages:
        return ""
    return f"{seconds / pages:.3f}"


def write_report(
    report: Report,
    results: list[DocumentResult],
    wall: float,
    intake: float,
    peak_build: int,
    modes: list[ModeResult],
    mode_pages: int,
    peak_total: int,
) -> None:
    """Fill ``report`` with the headline, per-asset, per-document, failure and mode tables."""
    ready = [r for r in results if r.status == "ready"]
    failed = [r for r in results if r.status != "ready"]
    ready_pages = sum(r.pages or 0 for r in ready)
    ready_wall = sum(r.wall_seconds for r in ready)
    all_pages = sum(r.pages or 0 for r in results)
    surprises = [r for r in results if not r.as_expected]

    report.heading("Headline")
    headline = [
        ("documents", f"{len(results)} ({len(ready)} ready, {len(failed)} failed)"),
        ("pages built", f"{ready_pages} (of {all_pages} in the selected PDFs)"),
        ("intake (`kb add`, incl. first import of kb + Dagster)", fmt_duration(intake)),
        ("build wall time", fmt_duration(wall)),
        (
            "seconds per page (ready documents, end to end)",
            f"{ready_wall / ready_pages:.3f}" if ready_pages else "n/a",
        ),
        (
            "pages per second (ready documents, end to end)",
            f"{ready_pages / ready_wall:.3f}" if ready_wall else "n/a",
        ),
        ("pages per second (whole run incl. failures)", f"{ready_pages / wall:.3f}"
         if wall else "n/a"),
        ("peak RSS after the build", fmt_bytes(peak_build)),
        ("peak RSS at the end (incl. mode comparison)", fmt_bytes(peak_total)),
        ("outcomes as expected", "yes" if not surprises else
         f"NO — {', '.join(r.name for r in surprises)}"),
    ]
    report.table(("measure", "value"), headline, align="lr")

    report.heading("Per asset (ready documents)")
    report.text(
        "`body s` is the `seconds` metadata the asset reports (its own work); `step s` is "
        "Dagster's step duration (body plus loading inputs and storing the output through "
        "the blob IO manager). `s/page` divides by the pages of the documents that ran it. "
        "`record` reports no `seconds` of its own."
    )
    rows = []
    for asset in ASSETS:
        body = [r.asset_seconds[asset] for r in ready if asset in r.asset_seconds]
        step = [r.step_seconds[asset] for r in ready if asset in r.step_seconds]
        pages = sum(r.pages or 0 for r in ready if asset in r.step_seconds)
        per_doc = [
            r.asset_seconds[asset] / r.pages for r in ready
            if asset in r.asset_seconds and r.pages
        ]
        rows.append((
            asset,
            f"{sum(body):.1f}" if body else "",
            _per_page(sum(body), pages) if body else "",
            f"{statistics.median(per_doc):.3f}" if per_doc else "",
            f"{max(per_doc):.3f}" if per_doc else "",
            f"{sum(step):.1f}" if step else "",
            _per_page(sum(step), pages) if step else "",
        ))
    steps_total = sum(sum(r.step_seconds.values()) for r in ready)
    rows.append((
        "all steps", "", "", "", "", f"{steps_total:.1f}", _per_page(steps_total, ready_pages),
    ))
    overhead = ready_wall - steps_total
    rows.append(("run overhead (wall − steps)", "", "", "", "", f"{overhead:.1f}",
                 _per_page(overhead, ready_pages)))
    report.table(
        ("asset", "body s", "body s/page", "median doc s/page", "max doc s/page", "step s",
         "step s/page"),
        rows,
    )

    report.heading("Per document")
    report.text("Seconds per page from each asset's `seconds` metadata (`record`: step time).")
    doc_rows = []
    for r in results:
        cells = [
            r.name, r.pages if r.pages is not None else "", r.status,
            f"{r.wall_seconds:.1f}" if r.wall_seconds else "",
            _per_page(r.wall_seconds, r.pages) if r.status == "ready" else "",
        ]
        for asset in ASSETS:
            seconds = r.asset_seconds.get(asset, r.step_seconds.get(asset))
            cells.append(_per_page(seconds, r.pages) if seconds is not None else "")
        cells += [
            r.chunks if r.chunks is not None else "",
            r.figures if r.figures is not None else "",
            r.relationships if r.relationships is not None else "",
        ]
        doc_rows.append(cells)
    report.table(
        ("document", "pages", "status", "wall s", "s/page", *(f"{a} s/p" for a in ASSETS),
         "chunks", "figures", "relationships"),
        doc_rows,
        align="lrl" + "r" * 11,
    )

    report.heading("Failures")
    if failed:
        report.table(
            ("document", "expected", "reason"),
            [(r.name, "yes — " + EXPECTED_FAILURES[r.name] if r.name in EXPECTED_FAILURES
              else "**NO**", r.reason) for r in failed],
            align="lll",
        )
    else:
        report.text("None.")
    missing = [r.name for r in ready if r.name in EXPECTED_FAILURES]
    if missing:
        report.text(f"**Expected to fail but built:** {', '.join(missing)}.")

    report.heading("Markdown step: pymupdf4llm layout vs legacy mode")
    if not modes:
        report.text("Skipped (`--skip-modes`, or no document built).")
        return
    scope = f"the first {mode_pages} pages of each" if mode_pages else "every page of each"
    report.text(
        f"Raw `pymupdf4llm.to_markdown` on {scope} PDF that built, layout mode "
        "(`use_ocr=False`) and legacy mode (`pymupdf4llm.use_layout(False)`) alternating per "
        "document in this one process. `table lines` / `heading lines` count Markdown lines "
        "starting with `|` / `#` — a rough sign of how each mode structures the page "
        "(legacy mode is known to turn headings into tables and miss vector figures)."
    )
    by_mode: dict[str, list[ModeResult]] = {"layout": [], "legacy": []}
    for m in modes:
        by_mode[m.mode].append(m)
    summary = []
    for mode, items in by_mode.items():
        pages = sum(m.pages for m in items)
        seconds = sum(m.seconds for m in items)
        summary.append((
            mode, pages, f"{seconds:.1f}", f"{seconds / pages:.3f}" if pages else "",
            f"{statistics.median(m.seconds_per_page for m in items):.3f}" if items else "",
            sum(m.characters for m in items), sum(m.table_lines for m in items),
            sum(m.heading_lines for m in items),
        ))
    report.table(
        ("mode", "pages", "seconds", "s/page", "median doc s/page", "characters",
         "table lines", "heading lines"),
        summary,
    )
    layout_total = sum(m.seconds for m in by_mode["layout"])
    legacy_total = sum(m.seconds for m in by_mode["legacy"])
    if legacy_total:
        report.text(f"Layout mode took **{layout_total / legacy_total:.1f}×** the time of "
                    "legacy mode on the same pages.")
    pairs = {}
    for m in modes:
        pairs.setdefault(m.name, {})[m.mode] = m
    report.table(
        ("document", "pages", "layout s/page", "legacy s/page", "layout tables/headings",
         "legacy tables/headings"),
        [
            (
                name, pair["layout"].pages,
                f"{pair['layout'].seconds_per_page:.3f}",
                f"{pair['legacy'].seconds_per_page:.3f}",
                f"{pair['layout'].table_lines} / {pair['layout'].heading_lines}",
                f"{pair['legacy'].table_lines} / {pair['legacy'].heading_lines}",
            )
            for name, pair in pairs.items() if {"layout", "legacy"} <= pair.keys()
        ],
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options (``--help`` lists them)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.ingest", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--corpus", type=Path, default=DEFAULT_PDFS,
                        help=f"folder of PDFs (default: {DEFAULT_PDFS})")
    parser.add_argument("--pdfs", default="",
                        help="comma-separated file names or patterns (e.g. 'aemo_*') to limit "
                        "the run to")
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke run on {len(QUICK_PDFS)} PDFs: {', '.join(QUICK_PDFS)}")
    parser.add_argument("--mode-pages", type=int, default=MODE_PAGES,
                        help="leading pages per PDF for layout vs legacy (0 = all; default "
                        f"{MODE_PAGES})")
    parser.add_argument("--skip-modes", action="store_true",
                        help="do not run the layout vs legacy comparison")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns 1 when a document's outcome was not the expected one."""
    args = parse_args(argv)
    names = [n.strip() for n in args.pdfs.split(",") if n.strip()] or (
        list(QUICK_PDFS) if args.quick else None
    )
    pdfs = select_pdfs(args.corpus.resolve(), names)
    variant = "quick" if args.quick else ("subset" if names else "")
    report = Report("ingest", "Ingest benchmark (kb build)", variant=variant)
    home = fresh_dir("ingest" + (f"-{variant}" if variant else ""))
    report.fact("corpus", f"{args.corpus} ({len(pdfs)} PDFs)")
    report.fact("KB_HOME", home)
    report.fact("providers", "all local (KB_*_PROVIDER=local)")
    log(f"building {len(pdfs)} PDFs from {args.corpus}")

    results, wall, intake = build(pdfs, home)
    peak_build = peak_rss_bytes()
    modes: list[ModeResult] = []
    if not args.skip_modes:
        by_name = {p.name: p for p in pdfs}
        ready = [by_name[r.name] for r in results if r.status == "ready" and r.name in by_name]
        log(f"layout vs legacy on {len(ready)} PDFs")
        modes = compare_modes(ready, args.mode_pages)
    write_report(
        report, results, wall, intake, peak_build, modes, args.mode_pages, peak_rss_bytes()
    )
    path = report.write()
    print(path)
    return 0 if all(r.as_expected for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
