"""Benchmark — the knowledge-graph page (``GET /graph``, issue 13): first meaningful paint and
responsiveness in Chromium on synthetic graphs of 2,000 and 6,000 edges.

Run from the repository root (about a minute; needs Debian's ``chromium`` and the test extra's
``playwright``)::

    .venv/bin/python -m benchmarks.graph_page
    .venv/bin/python -m benchmarks.graph_page --sizes 2000 6000 --runs 5

What it does, per size:

1. Builds a throw-away ``KB_HOME`` (``benchmarks/work/graph-page-<edges>``): ``--documents``
   ready documents in the catalog and a graph of exactly ``<edges>`` relationships grown by
   preferential attachment (a few hubs, many leaves, like an extracted regulatory graph), entity
   types drawn from the extractor's five, spread over the documents. There is no vector index,
   so edges carry no page (the JSON is a little smaller than a built corpus's).
2. Serves it with ``kb_mcp.http.build_app`` under uvicorn in a thread on a free loopback port.
3. Opens ``/graph?limit=<edges>`` ``--runs`` times, each in a fresh 1280×900 page of one
   headless Chromium, and reads from the page: **first meaningful paint** (``kbGraph
   .firstPaintMs``: navigation start to sigma's first frame with every node drawn), the
   ``/api/graph`` request (``PerformanceResourceTiming``: start to response end, bytes), and
   **frames per second while the ForceAtlas2 layout runs** (``requestAnimationFrame`` callbacks
   over ``--fps-seconds``; the layout runs in a web worker) and **while the camera zooms** once
   the layout is stopped, each with the longest gap between two frames.

Output: ``benchmarks/results/graph_page.md`` (the issue names this file; a re-run replaces it).
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import Report, fresh_dir, log, percentile
from benchmarks.mcp_server import free_port, serving_in_thread

#: The entity and relationship types synthetic edges take (the spaCy extractor's vocabulary:
#: ``kb_shared.providers.graph_vocabulary``).
ENTITY_TYPES = ("Role", "Organisation", "Document", "Code", "DefinedTerm")
RELATIONSHIP_TYPES = ("MUST_NOTIFY", "MUST_PROVIDE", "REFERS_TO", "PART_OF", "DEFINED_IN",
                      "APPLIES_TO", "RESPONSIBLE_FOR", "MAY_PROVIDE")

#: Chance that a new edge starts at a new entity, so entities ≈ 0.55 × edges (a chosen shape,
#: not a measured one: the page's cost grows with both counts).
NEW_ENTITY_SHARE = 0.55

#: Where the report goes (issue 13 names it).
REPORT_PATH = Path(__file__).resolve().parent / "results" / "graph_page.md"

DEFAULT_CHROMIUM = "/usr/bin/chromium"

#: JavaScript that counts animation frames for ``seconds`` and returns ``[frames, longest gap ms]``.
_FRAME_PROBE = """([seconds, zoom]) => new Promise(done => {
  if (zoom) {
    kbGraph.stopLayout();
    kbGraph.camera().animate({ratio: 0.25}, {duration: seconds * 1000});
  }
  let frames = 0, last = performance.now(), longest = 0;
  const end = last + seconds * 1000;
  function tick(now) {
    longest = Math.max(longest, now - last); last = now; frames++;
    if (now < end) requestAnimationFrame(tick); else done([frames, longest]);
  }
  requestAnimationFrame(tick);
})"""

_GL_RENDERER = """() => {
  const gl = document.createElement('canvas').getContext('webgl2');
  const info = gl && gl.getExtension('WEBGL_debug_renderer_info');
  return info ? gl.getParameter(info.UNMASKED_RENDERER_WEBGL) : 'unknown';
}"""

_API_TIMING = """() => {
  const entry = performance.getEntriesByType('resource').find(e => e.name.includes('/api/graph'));
  return entry ? [entry.responseEnd - entry.startTime, entry.encodedBodySize] : [null, null];
}"""


@dataclass(frozen=True)
class PageRun:
    """One load of the page: times in ms, API body in bytes, frames per second."""

    first_paint_ms: float
    api_ms: float
    api_bytes: int
    fps: float
    longest_frame_ms: float
    zoom_fps: float
    zoom_longest_frame_ms: float
    idle_fps: float
    nodes: int
    edges: int
    renderer: str


def synthetic_graph(edges: int, documents: Sequence[str], seed: int = 13) -> list[tuple]:
    """``edges`` relationships grown by preferential attachment, deterministic for ``seed``.

    Returns ``[(source name, source type, target name, target type, relationship type,
    document, chunk number), …]`` without self-loops or repeated pairs.
    """
    rng = random.Random(seed)
    types: dict[str, str] = {}
    ends: list[str] = []  # every endpoint once per edge: choosing from it is degree-weighted
    pairs: set[tuple[str, str]] = set()
    rows: list[tuple] = []

    def new_entity() -> str:
        name = f"Entity {len(types):05d}"
        types[name] = rng.choice(ENTITY_TYPES)
        return name

    first, second = new_entity(), new_entity()
    ends += [first, second]
    while len(rows) < edges:
        source = new_entity() if rng.random() < NEW_ENTITY_SHARE else rng.choice(ends)
        target = rng.choice(ends)
        if source == target or (source, target) in pairs or (target, source) in pairs:
            continue
        pairs.add((source, target))
        ends += [source, target]
        document = documents[len(rows) % len(documents)]
        rows.append((source, types[source], target, types[target],
                     rng.choice(RELATIONSHIP_TYPES), document, len(rows) // len(documents)))
    return rows


def build_home(home: Path, edges: int, documents: int) -> Any:
    """Write the catalog and graph of one synthetic corpus into ``home``; return its
    ``Settings``."""
    from kb_shared import layout  # noqa: PLC0415 - kb imports stay inside the functions
    from kb_shared.graph_model import Entity, Relationship, entity_key  # noqa: PLC0415
    from kb_shared.identity import chunk_id, doc_id  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415
    from kb_shared.stores import factory  # noqa: PLC0415

    settings = Settings(home=home)
    catalog = factory.open_catalog(settings)
    names = [f"Synthetic rules {number:02d}.pdf" for number in range(1, documents + 1)]
    ids = [doc_id(name) for name in names]
    for name, document in zip(names, ids, strict=True):
        catalog.add_pending(name, document, f"{hash(name) & 0xFFFFFFFF:064x}", 1000,
                            layout.pdf_key(document))
        catalog.mark_ready(document, title=name[:-4], pages=100, chunk_count=500)
    store = factory.open_graph_store(settings, engine=catalog.engine)
    store.ensure_schema(None)
    by_document: dict[str, tuple[dict[str, Entity], list[Relationship]]] = {
        document: ({}, []) for document in ids
    }
    for source, source_type, target, target_type, kind, document, chunk in synthetic_graph(
        edges, ids
    ):
        entities, relationships = by_document[document]
        entities.setdefault(source, Entity(source, source_type))
        entities.setdefault(target, Entity(target, target_type))
        relationships.append(Relationship(
            source=entity_key(source), target=entity_key(target), type=kind,
            description=f"{source} {kind.lower().replace('_', ' ')} {target}",
            source_doc=document, chunk_id=chunk_id(document, chunk),
        ))
    for document, (entities, relationships) in by_document.items():
        store.replace_document(document, list(entities.values()), relationships)
    counts = store.counts()
    store.close()
    catalog.close()
    log(f"{home.name}: {counts.entities} entities, {counts.relationships} relationships")
    return settings


@contextmanager
def serving(settings: Any) -> Iterator[str]:
    """The kb HTTP app on ``settings`` under uvicorn in a thread; yields its base URL."""
    from kb_mcp.http import build_app  # noqa: PLC0415

    port = free_port()
    app = build_app(settings.model_copy(update={"mcp_port": port}), warm=False,
                    log_level="WARNING")
    with serving_in_thread(app, port) as url:
        yield url


def measure(browser: Any, url: str, fps_seconds: float) -> PageRun:
    """Load ``url`` in a fresh page and read the numbers of the module docstring."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(url)
        page.wait_for_function("() => window.kbGraph && kbGraph.firstPaintMs !== null",
                               timeout=120_000)
        frames, longest = page.evaluate(_FRAME_PROBE, [fps_seconds, False])
        zoom_frames, zoom_longest = page.evaluate(_FRAME_PROBE, [fps_seconds, True])
        idle_frames, _ = page.evaluate(_FRAME_PROBE, [fps_seconds, False])
        api_ms, api_bytes = page.evaluate(_API_TIMING)
        first_paint, nodes, edges = page.evaluate(
            "() => [kbGraph.firstPaintMs, kbGraph.order(), kbGraph.size()]"
        )
        renderer = page.evaluate(_GL_RENDERER)
    finally:
        context.close()
    if errors:
        raise RuntimeError(f"the page failed: {errors}")
    return PageRun(first_paint_ms=first_paint, api_ms=api_ms, api_bytes=api_bytes,
                   fps=frames / fps_seconds, longest_frame_ms=longest,
                   zoom_fps=zoom_frames / fps_seconds, zoom_longest_frame_ms=zoom_longest,
                   idle_fps=idle_frames / fps_seconds,
                   nodes=nodes, edges=edges, renderer=renderer)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark (module docstring) and write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 6000])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--documents", type=int, default=20)
    parser.add_argument("--fps-seconds", type=float, default=2.0)
    parser.add_argument("--chromium", default=DEFAULT_CHROMIUM)
    args = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright  # noqa: PLC0415

    report = Report(name="graph_page", title="Benchmark: the knowledge-graph page")
    report.fact("chromium", args.chromium)
    report.fact("runs per size", args.runs)
    rows: list[list[Any]] = []
    runs_by_size: dict[int, list[PageRun]] = {}
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=args.chromium, headless=True,
                                         args=["--no-sandbox"])
        try:
            for size in args.sizes:
                settings = build_home(fresh_dir(f"graph-page-{size}"), size, args.documents)
                with serving(settings) as base:
                    url = f"{base}/graph?limit={size}"
                    measure(browser, url, 0.5)  # untimed: warms the server and browser caches
                    runs = [measure(browser, url, args.fps_seconds) for _ in range(args.runs)]
                runs_by_size[size] = runs
                report.fact("WebGL renderer", runs[0].renderer)
                paints = [run.first_paint_ms for run in runs]
                rows.append([
                    f"{runs[0].edges:,}", f"{runs[0].nodes:,}",
                    f"{runs[0].api_bytes / 1e6:.2f} MB",
                    f"{percentile([r.api_ms for r in runs], 50):.0f} ms",
                    f"{percentile(paints, 50):.0f} ms", f"{max(paints):.0f} ms",
                    f"{percentile([r.fps for r in runs], 50):.0f}",
                    f"{max(r.longest_frame_ms for r in runs):.0f} ms",
                    f"{percentile([r.zoom_fps for r in runs], 50):.0f}",
                    f"{max(r.zoom_longest_frame_ms for r in runs):.0f} ms",
                    f"{percentile([r.idle_fps for r in runs], 50):.0f}",
                ])
                log(f"{size} edges: first paint p50 {percentile(paints, 50):.0f} ms")
        finally:
            browser.close()
    report.heading("First meaningful paint and frame rate")
    report.text(
        "Each row: one synthetic graph served by the kb HTTP app (uvicorn, same process), "
        f"`/graph?limit=<edges>` opened {args.runs} times in fresh pages of one headless "
        "Chromium (software WebGL: no GPU on this machine). *First paint*: navigation start to "
        "sigma's first frame with every node drawn (`kbGraph.firstPaintMs`). *API*: the "
        "`/api/graph` request as the page saw it. *FPS*: animation frames per second during "
        f"the first {args.fps_seconds:g} s after the first paint, while ForceAtlas2 runs in its "
        "web worker (positions reach the drawing a few times a second); *zoom FPS*: the same "
        f"over a {args.fps_seconds:g} s camera zoom once the layout is stopped (what panning "
        "and zooming feel like; edges and labels are hidden while the camera moves above "
        "1,000 edges); *idle FPS*: the same with nothing moving (the page's ceiling on this "
        "machine); *longest frame*: the longest gap between two frames in any run."
    )
    report.table(
        ["edges", "entities", "JSON", "API p50", "first paint p50", "first paint max",
         "layout FPS p50", "longest frame", "zoom FPS p50", "longest frame", "idle FPS p50"],
        rows, align="rrrrrrrrrrr",
    )
    report.text(
        "Reading the numbers: this machine has no GPU, so Chromium rasterises every WebGL "
        "frame on the CPU (SwiftShader, named above), and the CPU is shared with whatever else "
        "runs (see *CPU used by other processes*). First paint and the API time are what a "
        "person waits for before seeing the graph; the frame rates show where the time goes "
        "after that. On a desktop with a GPU the raster cost is not on the CPU; that case is "
        "not measured here."
    )
    for size, runs in runs_by_size.items():
        report.text(f"Runs at {size:,} edges (first paint, ms): "
                    + ", ".join(f"{run.first_paint_ms:.0f}" for run in runs))
    REPORT_PATH.write_text(report.render(), encoding="utf-8")
    log(f"report written to {REPORT_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
