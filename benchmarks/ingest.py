"""Benchmark 1 — ingest: ``kb build`` over the shared corpus PDFs, per document and per asset.

Run from the repository root (not part of the unit test run)::

    .venv/bin/python -m benchmarks.ingest                 # the 14 PDFs of ../shared/corpus/pdfs
    .venv/bin/python -m benchmarks.ingest --quick         # 3 PDFs, a smoke run (~2 min)
    .venv/bin/python -m benchmarks.ingest --pdfs 'aemo_*' --corpus /other/pdfs
    .venv/bin/python -m benchmarks.ingest --corpus-list benchmarks/corpora/eval21.txt --skip-modes
                                                          # issue 28's 21-PDF corpus
    .venv/bin/python -m benchmarks.ingest --pdfs 'a.pdf,b.pdf' --workers-ab   # issue 28's A/B

What it does, in one process:

1. Creates a fresh ``KB_HOME`` in ``benchmarks/work/ingest`` (``ingest-quick`` for
   ``--quick``), with every provider forced to its local implementation
   (``common.kb_environment``), adds the PDFs with the intake rules and builds every added
   document with ``kb_assets.operations.build_documents`` — the code ``kb build`` runs:
   one Dagster run per document, eight assets each, ``--workers`` documents at once (default
   ``kb build``'s: ``kb_assets.build_workers.resolve_workers``).
2. Reads each run's event log: the ``seconds`` metadata every asset reports (the work in the
   asset body) and Dagster's ``STEP_SUCCESS`` duration (body + IO manager load/store), and
   reports seconds and seconds per page per document and per asset, pages per second
   overall, the peak RSS of the process, and every failure with its reason. Three corpus
   PDFs must fail (corpus README): the two scanned ones (no text layer) and the one whose
   font has no Unicode mapping; any other outcome is flagged as unexpected (exit code 1).
3. Plain conversion: raw ``pymupdf4llm.to_markdown`` in layout mode on every page of the
   PDFs that built, one after another (``_convert``; a keyword docs server's whole ingest),
   and the ratio kb build wall time / plain conversion (issue 28's target: at most 1).
4. Times the Markdown step alone, pymupdf4llm's layout mode against its legacy mode
   (``pymupdf4llm.use_layout(False)``, pymupdf4llm 2.0), on the PDFs that built, one
   document at a time alternating the modes so a change in machine load hits both. Only the
   first ``--mode-pages`` pages of each PDF are converted (default 20; 0 = all) to keep the
   run short; seconds per page are comparable all the same. Raw ``pymupdf4llm.to_markdown``
   output is timed (not kb's clean-up after it), so this isolates the mode.

``--workers-ab`` measures instead, in one process and interleaved, plain conversion, ``kb
build`` with 1 worker, with ``--workers`` workers, then plain conversion again (load average
before and after each, peak memory of the process tree), and checks the two builds stored the
same catalog rows, chunk ids, payloads and vectors byte for byte.

The built ``KB_HOME`` is left in place: the retrieval and serving benchmarks can reuse it
(``common.INGEST_HOME``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import (
    DEFAULT_CORPUS,
    DEFAULT_PDFS,
    WORK_DIR,
    Report,
    Stopwatch,
    add_pdfs,
    fmt_bytes,
    fmt_duration,
    fresh_dir,
    kb_environment,
    listed_pdfs,
    load_average,
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

#: The eight corpus assets in build order (``kb_assets.constants.CORPUS_ASSETS``).
ASSETS = (
    "markdown", "chunks", "obligations", "changes", "embeddings", "graph", "figures", "record",
)

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


def build(
    pdfs: Sequence[Path], home: Path, workers: int = 1
) -> tuple[list[DocumentResult], float, float]:
    """Add and build ``pdfs`` in ``home``, ``workers`` documents at once.

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
                corpus.stores, corpus.instance, added, on_done=done, workers=workers
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
# Plain conversion, and kb build with 1 worker vs N (issue 28)
# --------------------------------------------------------------------------------------
def tree_rss_bytes(root: int | None = None) -> int:
    """Resident memory of process ``root`` (default: this one) and all its descendants, in
    bytes, from ``/proc/<pid>/status`` ``VmRSS`` (Linux ``proc(5)``); 0 without ``/proc``."""
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        parents[int(entry.name)] = int(fields.get("PPid", "0").strip() or 0)
        rss[int(entry.name)] = int(fields.get("VmRSS", "0 kB").split()[0]) * 1024
    tree, todo = set(), [root or os.getpid()]
    while todo:
        pid = todo.pop()
        tree.add(pid)
        todo += [child for child, parent in parents.items() if parent == pid]
    return sum(rss.get(pid, 0) for pid in tree)


class TreeMemory(threading.Thread):
    """Peak of ``tree_rss_bytes`` while inside (``with``), sampled every 0.5 s."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak, self.done = 0, threading.Event()

    def run(self) -> None:
        self.peak = tree_rss_bytes()
        while not self.done.wait(0.5):
            self.peak = max(self.peak, tree_rss_bytes())

    def __enter__(self) -> TreeMemory:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.join()


def plain_conversion(pdfs: Sequence[Path]) -> dict[str, float]:
    """Seconds raw ``pymupdf4llm.to_markdown`` (layout mode, ``use_ocr=False``: ``_convert``)
    takes on every page of each PDF, one after another, after one untimed warm-up page, with
    the layout model's sessions as pymupdf-layout ships them."""
    import pymupdf  # noqa: PLC0415
    import pymupdf.layout  # noqa: PLC0415

    pymupdf.set_messages(pylogging=True, pylogging_name="pymupdf")
    pymupdf.set_log(pylogging=True, pylogging_name="pymupdf")
    # The layout model as pymupdf-layout builds it (onnxruntime's default threads, spinning),
    # in case kb's converter set its own in this process (kb_shared.providers.layout_sessions).
    pymupdf._get_layout = None
    pymupdf.layout.activate()
    if pdfs:
        _convert(pdfs[0], True, [0])
    seconds = {}
    for path in pdfs:
        pages = list(range(pdf_page_count(path) or 0))
        seconds[path.name], _ = _convert(path, True, pages)
        log(f"plain  {path.name}: {len(pages)} pages in {seconds[path.name]:.1f} s")
    return seconds


def stored_outputs(home: Path) -> dict[str, object]:
    """What a build of ``home`` stored, without timestamps and run ids: catalog documents and
    versions, every point's id, text and payload, every stored vector's bytes, and each
    document's graph relationship count."""
    import pysqlite3.dbapi2 as sqlite3  # noqa: PLC0415
    import sqlite_vec  # noqa: PLC0415
    from dataclasses import asdict  # noqa: PLC0415

    with kb_environment(home):
        corpus = open_corpus(home)
        catalog = corpus.stores.catalog()
        rows = catalog.list_documents()
        index = corpus.stores.existing_vectors()
        graph = corpus.stores.graph()
        docs = sorted(r.doc_id for r in rows)
        outputs: dict[str, object] = {
            "documents": {r.doc_id: {k: v for k, v in asdict(r).items()
                                     if k not in ("created_at", "updated_at")} for r in rows},
            "versions": {d: [(v.version, v.status, v.key, v.failure_reason) for v in h]
                         for d, h in catalog.all_versions().items()},
            "points": {d: [(p.id, p.text, p.payload) for p in
                           index.fetch(sorted(index.list_ids(d)))] for d in docs}
            if index is not None else {},
            "relationships": {d: graph.counts(d).relationships for d in docs},
        }
        path = corpus.settings.resolved_vector_path
        corpus.close()
    vectors: dict[str, bytes] = {}
    if path.exists():
        with sqlite3.connect(path) as conn:
            conn.enable_load_extension(True)
            sqlite_vec.load(conn)
            for (points,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%_points'"
            ).fetchall():
                vec = points.removesuffix("_points") + "_vec"
                vectors.update(
                    (point_id, bytes(blob)) for point_id, blob in conn.execute(
                        f"SELECT p.id, v.embedding FROM {points} AS p "
                        f"JOIN {vec} AS v ON v.rowid = p.rowid"
                    )
                )
    outputs["vectors"] = vectors
    return outputs


def differences(first: dict[str, object], second: dict[str, object]) -> list[str]:
    """Keys of ``stored_outputs`` whose values differ, with how many items differ."""
    found = []
    for key in sorted(first.keys() | second.keys()):
        a, b = first.get(key) or {}, second.get(key) or {}
        if a != b:
            keys = a.keys() | b.keys()  # type: ignore[attr-defined]
            found.append(f"{key}: {sum(1 for k in keys if a.get(k) != b.get(k))} of {len(keys)}")
    return found


@dataclass
class Leg:
    """One timed part of the A/B: plain conversion or a build with ``workers``."""

    label: str
    seconds: float
    load_before: float | None
    load_after: float | None
    peak_tree_rss: int = 0
    cpu_seconds: float = 0.0
    results: list[DocumentResult] = field(default_factory=list)
    plain: dict[str, float] = field(default_factory=dict)


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and the children it has waited for."""
    import resource  # noqa: PLC0415

    return sum(
        r.ru_utime + r.ru_stime
        for r in (resource.getrusage(resource.RUSAGE_SELF),
                  resource.getrusage(resource.RUSAGE_CHILDREN))
    )


def workers_ab(
    pdfs: Sequence[Path], workers: int, *, reverse: bool = False
) -> tuple[list[Leg], list[str], int]:
    """Plain conversion, ``kb build`` with 1 worker, with ``workers`` (the other way round
    with ``reverse``), plain conversion again (each build into a fresh
    ``benchmarks/work/ingest-ab-w{n}``).

    Returns:
        ``(the four legs in order, differences between the two builds' stored outputs,
        the largest peak RSS of one worker process)``.
    """
    legs = []
    builds = ["kb build, 1 worker", f"kb build, {workers} workers"]
    for label in ("plain conversion", *(builds[::-1] if reverse else builds),
                  "plain conversion (again)"):
        before, cpu = (load_average() or (None,))[0], _cpu_seconds()
        with TreeMemory() as memory:
            if label.startswith("plain"):
                plain = plain_conversion(pdfs)
                leg = Leg(label, sum(plain.values()), before, None, plain=plain)
            else:
                n = 1 if "1 worker" in label else workers
                results, wall, _ = build(pdfs, fresh_dir(f"ingest-ab-w{n}"), workers=n)
                leg = Leg(label, wall, before, None, results=results)
        leg.load_after, leg.peak_tree_rss = (load_average() or (None,))[0], memory.peak
        leg.cpu_seconds = _cpu_seconds() - cpu
        log(f"{label}: {leg.seconds:.1f} s (load {before} -> {leg.load_after})")
        legs.append(leg)
    diff = differences(*(stored_outputs(WORK_DIR / f"ingest-ab-w{n}") for n in (1, workers)))
    return legs, diff, peak_rss_bytes(children=True)


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
    plain: dict[str, float] | None = None,
    workers: int = 1,
) -> None:
    """Fill ``report`` with the headline, per-asset, per-document, plain-conversion, failure
    and mode tables (``plain``: ``plain_conversion`` of the ready PDFs; ``workers``: documents
    the build ran at once)."""
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
        ("build wall time", f"{fmt_duration(wall)} ({workers} at once)"),
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
        ("peak RSS of the build (this process and its workers together)", fmt_bytes(peak_build)),
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
        align="lrl" + "r" * (len(ASSETS) + 5),
    )

    report.heading("Plain conversion vs kb build")
    plain_total = sum((plain or {}).values())
    if not plain or not plain_total:
        report.text("Skipped (`--skip-plain`, or no document built).")
    else:
        built = [r for r in ready if r.name in plain]
        kb_total = sum(r.wall_seconds for r in built) if workers == 1 else wall
        report.text(
            "Plain conversion: raw `pymupdf4llm.to_markdown` (layout mode, `use_ocr=False`) on "
            "every page of each PDF that built, one after another, after the build in the same "
            f"process — what a keyword docs server's ingest costs. kb: the build's wall time "
            f"({workers} documents at once), all eight assets. Issue 28's target: ratio ≤ 1. "
            "Per document, kb's seconds are its own run's (with several at once they overlap, "
            "so only the total is wall time)."
        )
        report.table(
            ("document", "pages", "plain s", "kb s", "ratio"),
            [(r.name, r.pages or "", f"{plain[r.name]:.1f}", f"{r.wall_seconds:.1f}",
              f"{r.wall_seconds / plain[r.name]:.2f}" if plain[r.name] else "") for r in built]
            + [("**all (wall)**", sum(r.pages or 0 for r in built), f"{plain_total:.1f}",
                f"{kb_total:.1f}", f"**{kb_total / plain_total:.2f}**")],
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


def write_ab_report(
    report: Report, legs: list[Leg], diff: list[str], worker_peak: int, workers: int
) -> None:
    """Fill ``report`` with the ``workers_ab`` tables: each leg with its load, the ratio to
    plain conversion, per-asset seconds with 1 and with ``workers`` workers, and whether the
    two builds stored the same outputs."""
    plains = [leg for leg in legs if leg.plain]
    builds = [leg for leg in legs if not leg.plain]
    pages = sum(r.pages or 0 for r in builds[0].results if r.status == "ready")
    plain_mean = statistics.mean(leg.seconds for leg in plains)
    report.heading(f"Plain conversion vs kb build with 1 and {workers} workers")
    report.text(
        "One process, legs in the order of the table: plain conversion "
        "(`pymupdf4llm.to_markdown`, layout mode, every page, one PDF after another), `kb build` "
        f"with 1 worker (in the kb process, as before issue 28) and with {workers} workers (each "
        "in a spawned process), plain conversion again. Load average (1 min) read before and after each leg; the machine is shared. "
        "Ratio = leg seconds / mean of the two plain conversions. Peak memory: resident set "
        "of the benchmark process and all its children together, sampled every 0.5 s. CPU s: "
        "user + system seconds of the process and its (waited-for) workers during the leg; "
        "CPU s / wall s is the cores the leg kept busy on average."
    )
    report.table(
        ("leg", "seconds", "s/page", "ratio to plain", "CPU s", "cores busy",
         "load before → after", "peak RSS (tree)"),
        [(leg.label, f"{leg.seconds:.1f}", f"{leg.seconds / pages:.3f}" if pages else "",
          f"{leg.seconds / plain_mean:.2f}", f"{leg.cpu_seconds:.1f}",
          f"{leg.cpu_seconds / leg.seconds:.2f}" if leg.seconds else "",
          f"{leg.load_before:.2f} → {leg.load_after:.2f}"
          if leg.load_before is not None and leg.load_after is not None else "n/a",
          fmt_bytes(leg.peak_tree_rss)) for leg in legs],
    )
    report.text(f"Largest peak RSS of one worker process: {fmt_bytes(worker_peak)}.")
    report.heading("Per asset, 1 worker vs " + str(workers), level=3)
    report.text(
        "Asset-body seconds (`seconds` metadata) summed over the documents, and per page. "
        f"With {workers} workers the documents' steps overlap, so these sums exceed the wall "
        "time; a step that grows shows what the two builds contend for."
    )
    rows = []
    for asset in ASSETS:
        cells: list[object] = [asset]
        for leg in builds:
            done = [r for r in leg.results if r.status == "ready"]
            total = sum(r.asset_seconds.get(asset, r.step_seconds.get(asset, 0.0)) for r in done)
            cells += [f"{total:.1f}", _per_page(total, pages)]
        rows.append(cells)
    report.table(
        ("asset", *(f"{leg.label}: {unit}" for leg in builds for unit in ("s", "s/page"))), rows
    )
    report.heading("Same outputs?", level=3)
    report.text(
        "Stored outputs of the two builds compared: catalog documents and versions (without "
        "timestamps), every point's id, text and payload, every stored vector byte for byte, "
        "relationships per document. "
        + ("**Identical.**" if not diff else f"**Different:** {'; '.join(diff)}.")
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options (``--help`` lists them)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.ingest", description=__doc__.split("\n\n")[0]
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--corpus", type=Path, default=DEFAULT_PDFS,
                        help=f"folder of PDFs (default: {DEFAULT_PDFS})")
    source.add_argument("--corpus-list", type=Path, default=None,
                        help=f"a list of PDFs, one path a line relative to {DEFAULT_CORPUS} "
                        "(e.g. benchmarks/corpora/eval21.txt), instead of --corpus's folder")
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
    parser.add_argument("--skip-plain", action="store_true",
                        help="do not time plain conversion of the built PDFs")
    parser.add_argument("--workers", type=int, default=None,
                        help="documents built at once (default: kb build's, "
                        "kb_assets.build_workers.resolve_workers)")
    parser.add_argument("--workers-ab", action="store_true",
                        help="only the A/B: plain conversion, kb build with 1 worker and with "
                        "--workers, plain conversion again, and the outputs compared")
    parser.add_argument("--ab-reverse", action="store_true",
                        help="with --workers-ab: build with --workers workers first, then 1")
    args = parser.parse_args(argv)
    if args.quick and args.corpus_list is not None:
        parser.error("--quick builds 3 PDFs of the shared corpus folder; it does not combine "
                     "with --corpus-list (use --pdfs to pick PDFs of the list)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; returns 1 when a document's outcome was not the expected one."""
    args = parse_args(argv)
    names = [n.strip() for n in args.pdfs.split(",") if n.strip()] or (
        list(QUICK_PDFS) if args.quick else None
    )
    if args.corpus_list is not None:
        pdfs = listed_pdfs(args.corpus_list, names=names)
        source = f"{args.corpus_list} (relative to {DEFAULT_CORPUS})"
    else:
        pdfs = select_pdfs(args.corpus.resolve(), names)
        source = str(args.corpus)
    from kb_assets.build_workers import resolve_workers  # noqa: PLC0415

    workers = resolve_workers(args.workers, len(pdfs))
    if args.workers_ab:
        report = Report("ingest", "Ingest: plain conversion vs kb build with 1 and "
                        f"{max(workers, 2)} workers",
                        variant="workers-ab" + ("-reversed" if args.ab_reverse else ""))
        report.fact("PDFs", ", ".join(p.name for p in pdfs))
        report.fact("providers", "all local (KB_*_PROVIDER=local)")
        legs, diff, worker_peak = workers_ab(pdfs, max(workers, 2), reverse=args.ab_reverse)
        write_ab_report(report, legs, diff, worker_peak, max(workers, 2))
        print(report.write())
        return 0 if not diff else 1
    variant = "quick" if args.quick else ("subset" if names else "")
    if args.corpus_list is not None:
        variant = "-".join(filter(None, [args.corpus_list.stem, variant]))
    report = Report("ingest", "Ingest benchmark (kb build)", variant=variant)
    home = fresh_dir("ingest" + (f"-{variant}" if variant else ""))
    report.fact("corpus", f"{source} ({len(pdfs)} PDFs)")
    report.fact("KB_HOME", home)
    report.fact("providers", "all local (KB_*_PROVIDER=local)")
    report.fact("documents at once", workers)
    log(f"building {len(pdfs)} PDFs from {source}, {workers} at once")

    with TreeMemory() as memory:
        results, wall, intake = build(pdfs, home, workers=workers)
    peak_build = max(memory.peak, peak_rss_bytes(), peak_rss_bytes(children=True))
    by_name = {p.name: p for p in pdfs}
    ready = [by_name[r.name] for r in results if r.status == "ready" and r.name in by_name]
    plain: dict[str, float] = {}
    if not args.skip_plain:
        log(f"plain conversion of {len(ready)} PDFs")
        plain = plain_conversion(ready)
    modes: list[ModeResult] = []
    if not args.skip_modes:
        log(f"layout vs legacy on {len(ready)} PDFs")
        modes = compare_modes(ready, args.mode_pages)
    write_report(
        report, results, wall, intake, peak_build, modes, args.mode_pages, peak_rss_bytes(),
        plain=plain, workers=workers,
    )
    path = report.write()
    print(path)
    return 0 if all(r.as_expected for r in results) else 1

if __name__ == "__main__":
    sys.exit(main())
