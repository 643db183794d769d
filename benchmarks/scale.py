"""Benchmark 4 — scale: synthetic corpora of growing size on the embedded vector index
(``SqliteVectorIndex``: sqlite-vec ``vec0`` + FTS5) and on Qdrant's local mode on disk.

Run from the repository root (not part of the unit test run)::

    .venv/bin/python -m benchmarks.scale                          # 10k and 100k chunks
    .venv/bin/python -m benchmarks.scale --sizes 10k,100k,1M      # adds the 1M step (long)
    .venv/bin/python -m benchmarks.scale --sizes 2k --queries 20  # smoke run (~1 min)
    # on the index a run left behind (the largest size): where a hybrid query's time goes,
    # and dense recall@10 by the number of candidates rescored (Markdown on stdout)
    .venv/bin/python -m benchmarks.scale --profile-stages benchmarks/work/scale-sqlite
    .venv/bin/python -m benchmarks.scale --recall-sweep benchmarks/work/scale-sqlite

For each backend a child process (so its peak RSS is its own) grows one index through the
sizes in turn — 10k, then 90k more to reach 100k, then 900k more to reach 1M — and at each
size measures:

* **upsert rate** of the points added since the previous size, in batches of ``--batch``
  points per ``upsert`` call (one transaction each on SQLite; the pipeline's embeddings
  asset upserts one document's chunks per call). Generating the points is timed apart and
  not counted;
* **query latency** p50/p95/p99 of ``--queries`` dense (KNN), sparse (FTS5 BM25 / Qdrant
  IDF sparse) and hybrid (both + reciprocal rank fusion, ``VectorIndex.hybrid_search``)
  searches for the top 10, after ``WARMUP`` untimed queries of each kind;
* **disk** (every file of the index folder, SQLite WAL included) and **memory** (current
  RSS after the queries, and peak RSS so far).

The synthetic corpus (chunks like the pipeline's, Zipf-distributed words, unit vectors
around topic centroids; ``--dimension`` dimensions, default the live embedding model's) is
``benchmarks.scale_corpus``. On the SQLite backend each size also compares dense search
strategies on the same file (``benchmarks.scale_strategies``): the old exact vec0 scan,
binary codes rescored with the float vectors, and sqlite-vec's ``bit[DIM]`` vec0 table, each
with recall@10 against exact search, with and without document filters.

Qdrant's local mode persists points to its own SQLite file (~170 points/s one at a time in
notes/library-facts.md; faster in batches), keeps every point in memory, scores sparse
queries in a Python loop over every point, serves one process only and warns above 20,000
points; it exists for tests and development, so it is measured only up to
``--qdrant-max`` (default 10k). A Qdrant *server* is the production backend past the
embedded index's limit; this benchmark does not start one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.common import (
    LATENCY_HEADERS,
    Report,
    current_rss_bytes,
    disk_usage_bytes,
    fmt_bytes,
    fmt_duration,
    fresh_dir,
    latency_summary,
    log,
    peak_rss_bytes,
)
from benchmarks.scale_corpus import (
    CHUNKS_PER_DOCUMENT,
    LIMIT,
    TABLE_EVERY,
    TOPICS,
    VOCABULARY_SIZE,
    WARMUP,
    Query,
    SyntheticCorpus,
    search,
)
from benchmarks.scale_strategies import compare_strategies, write_strategies

DEFAULT_SIZES = (10_000, 100_000)
#: Qdrant local mode is measured up to this many points (see the module docstring).
QDRANT_MAX = 10_000
BATCH = 1_000
QUERIES = 50
#: p95 budget (ms) for one hybrid index query in an interactive search tool call; the
#: plain FTS5 docs server the project compares with answered in 13 ms p50 (corpus README),
#: and the whole search_docs call (query embedding, fusion, rendering) must stay well under
#: a second.
BUDGET_MS = 100.0
#: Chunks per PDF page, to translate chunk counts into corpus sizes: the ingest benchmark's
#: 11 buildable corpus PDFs gave 1,838 chunks for 570 pages with the default 300-word budget
#: (benchmarks/results/ingest-2026-11-30.md).
CHUNKS_PER_PAGE = 3.2
BACKENDS = ("sqlite", "qdrant")


# --------------------------------------------------------------------------------------
# The worker: one backend, growing through the sizes
# --------------------------------------------------------------------------------------
def open_index(backend: str, folder: Path) -> Any:
    """A ``VectorIndex`` for ``backend`` stored in ``folder``."""
    if backend == "sqlite":
        from kb_shared.stores.vectors_sqlite import SqliteVectorIndex  # noqa: PLC0415

        return SqliteVectorIndex(folder / "vectors.sqlite")
    if backend == "qdrant":
        from qdrant_client import QdrantClient  # noqa: PLC0415

        from kb_shared.stores.vectors_qdrant import QdrantVectorIndex  # noqa: PLC0415

        return QdrantVectorIndex(QdrantClient(path=str(folder / "qdrant")), "chunks")
    raise ValueError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")


def measure_queries(index: Any, queries: Sequence[Query]) -> dict[str, dict[str, float]]:
    """Latency summary and mean hit count of dense, sparse and hybrid top-``LIMIT`` searches
    (the first ``WARMUP`` queries of each kind are not timed)."""
    results: dict[str, dict[str, float]] = {}
    for kind in ("dense", "sparse", "hybrid"):
        seconds: list[float] = []
        cpu_seconds: list[float] = []
        hits = 0
        for number, query in enumerate(queries):
            started, cpu_started = time.perf_counter(), time.process_time()
            found = search(index, kind, query)
            elapsed = time.perf_counter() - started
            if number >= WARMUP:
                seconds.append(elapsed)
                cpu_seconds.append(time.process_time() - cpu_started)
                hits += len(found)
        summary = asdict(latency_summary(seconds))
        summary["mean_hits"] = hits / len(seconds)
        # this process's CPU time per query: what the wall time would be on an idle machine
        # (page cache warm), whatever else runs; p95 like the wall time
        summary["cpu_p95_ms"] = latency_summary(cpu_seconds).p95_ms
        results[kind] = summary
    return results


def run_worker(backend: str, sizes: Sequence[int], dimension: int, batch: int,
               queries: int, folder: Path) -> dict[str, Any]:
    """Grow one index through ``sizes`` and measure each checkpoint (see module docstring)."""
    import numpy as np  # noqa: PLC0415

    corpus = SyntheticCorpus(dimension)
    query_set = corpus.queries(queries + WARMUP)
    matrix = np.zeros((max(sizes), dimension), dtype=np.float32) if backend == "sqlite" else None
    index = open_index(backend, folder)
    index.open(f"synthetic-unit-vectors@{dimension}", dimension)
    checkpoints: list[dict[str, Any]] = []
    written = 0
    started = time.perf_counter()
    for size in sorted(sizes):
        segment_start = written
        upsert_seconds = generate_seconds = 0.0
        last_log = time.perf_counter()
        while written < size:
            count = min(batch, size - written)
            t0 = time.perf_counter()
            points = corpus.batch(written, count)
            if matrix is not None:
                matrix[written : written + count] = np.stack([p.dense for p in points])
            t1 = time.perf_counter()
            index.upsert(points)
            t2 = time.perf_counter()
            generate_seconds += t1 - t0
            upsert_seconds += t2 - t1
            written += count
            if t2 - last_log > 15 or written == size:
                last_log = t2
                rate = (written - segment_start) / upsert_seconds if upsert_seconds else 0.0
                log(f"{backend}: {written:,}/{size:,} points, {rate:,.0f} points/s upsert")
        rss_before = current_rss_bytes()
        log(f"{backend}: {size:,} points — {queries} queries of each kind")
        latency = measure_queries(index, query_set)
        strategies = (compare_strategies(folder / "vectors.sqlite", dimension, query_set,
                                         matrix[:size]) if matrix is not None else {})
        added = written - segment_start
        checkpoints.append({
            "size": size,
            "added": added,
            "upsert_seconds": upsert_seconds,
            "generate_seconds": generate_seconds,
            "upsert_rate": added / upsert_seconds if upsert_seconds else 0.0,
            "disk_bytes": disk_usage_bytes(folder),
            "rss_before_queries": rss_before,
            "rss_after_queries": current_rss_bytes(),
            "peak_rss": peak_rss_bytes(),
            "latency": latency,
            "strategies": strategies,
            "elapsed": time.perf_counter() - started,
        })
        log(f"{backend}: {size:,} points — hybrid p95 {latency['hybrid']['p95_ms']:.1f} ms, "
            f"disk {fmt_bytes(checkpoints[-1]['disk_bytes'])}")
    index.close()
    return {"backend": backend, "dimension": dimension, "batch": batch, "queries": queries,
            "checkpoints": checkpoints, "seconds": time.perf_counter() - started}


# --------------------------------------------------------------------------------------
# Where a hybrid query's time goes (``--profile-stages FOLDER``)
# --------------------------------------------------------------------------------------
#: Stages of one hybrid query on ``SqliteVectorIndex``, in the order they run, with the
#: method each one's time is read from (``StageTimer``; a stage's own time excludes the
#: stages nested in it; a method the index does not have is left out, its time stays in
#: the stage that calls it).
STAGES = (
    ("codes refresh (read new writes)", "index", "_refreshed_codes"),
    ("binary codes scan (candidates)", "index", "_code_candidates"),
    ("float rescoring (SQL)", "index", "_dense_search"),
    ("dense: checks, Hit objects", "index", "dense_search"),
    ("sparse: statistics, df look-ups", "scorer", "_statistics"),
    ("sparse: FTS5 bm25 candidates", "scorer", "_ranked"),
    ("sparse: read candidates' terms", "scorer", "_stored"),
    ("sparse: Qdrant re-scoring (Python)", "scorer", "_score"),
    ("sparse: bound, cut, rest of search", "scorer", "search"),
    ("sparse: in-memory postings (when resident)", "index", "_resident_search"),
    ("sparse: result rows, transaction", "index", "_sparse_search"),
    ("sparse: checks, sort", "index", "sparse_search"),
    ("fusion (RRF) and Hit objects", "index", "hybrid_search"),
)


class StageTimer:
    """Wraps the ``STAGES`` methods of one ``SqliteVectorIndex`` (instance attributes, so
    the class is untouched) and adds each call's wall time, minus the time of stages nested
    inside it, to ``seconds[stage]`` (and the CPU time, ``time.process_time``, to
    ``cpu[stage]``); ``_ranked``'s cursor counts its fetches too."""

    def __init__(self, index: Any) -> None:
        self.seconds: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self._stack: list[tuple[float, float]] = []
        owners = {"index": index, "scorer": index._scorer}
        for label, owner, name in STAGES:
            target = owners[owner]
            if hasattr(target, name):
                setattr(target, name, self._wrap(label, getattr(target, name)))

    def reset(self) -> None:
        """Zero every stage."""
        self.seconds = {label: 0.0 for label, _, _ in STAGES}
        self.cpu = dict(self.seconds)

    def _start(self) -> tuple[float, float]:
        self._stack.append((0.0, 0.0))
        return time.perf_counter(), time.process_time()

    def _charge(self, label: str, started: tuple[float, float]) -> None:
        elapsed = time.perf_counter() - started[0]
        cpu = time.process_time() - started[1]
        nested, nested_cpu = self._stack.pop()
        self.seconds[label] = self.seconds.get(label, 0.0) + elapsed - nested
        self.cpu[label] = self.cpu.get(label, 0.0) + cpu - nested_cpu
        if self._stack:
            outer, outer_cpu = self._stack[-1]
            self._stack[-1] = (outer + elapsed, outer_cpu + cpu)

    def _wrap(self, label: str, method: Any) -> Any:
        timer = self

        class TimedCursor:
            def __init__(self, cursor: Any) -> None:
                self.cursor = cursor

            def _timed(self, name: str, *args: Any) -> Any:
                started = timer._start()
                try:
                    return getattr(self.cursor, name)(*args)
                finally:
                    timer._charge(label, started)

            def fetchall(self) -> Any:
                return self._timed("fetchall")

            def fetchmany(self, size: int) -> Any:
                return self._timed("fetchmany", size)

            def close(self) -> None:
                self.cursor.close()

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = timer._start()
            try:
                result = method(*args, **kwargs)
            finally:
                timer._charge(label, started)
            return TimedCursor(result) if method.__name__ == "_ranked" else result

        return timed


def profile_stages(folder: Path, dimension: int, queries: int) -> str:
    """Time the stages of ``queries`` hybrid queries (``STAGES``, after ``WARMUP`` untimed)
    on the SQLite index the worker left in ``folder``, then profile the slowest one with
    cProfile. Returns Markdown: per-stage mean / p50 / p95 ms and the slowest query's ms,
    the query's FTS5 match count, and cProfile's top functions by own time."""
    import cProfile  # noqa: PLC0415
    import io  # noqa: PLC0415
    import pstats  # noqa: PLC0415

    from kb_shared.search.sparse import tokenize  # noqa: PLC0415
    from kb_shared.stores.vectors_sparse import match_expression, query_terms  # noqa: PLC0415

    corpus_queries = SyntheticCorpus(dimension).queries(queries + WARMUP)
    index = open_index("sqlite", folder)
    index.open(f"synthetic-unit-vectors@{dimension}", dimension, create=False)
    timer = StageTimer(index)
    per_query: list[tuple[float, float, dict[str, float], Query, dict[str, float]]] = []
    for number, query in enumerate(corpus_queries):
        timer.reset()
        started, cpu_started = time.perf_counter(), time.process_time()
        search(index, "hybrid", query)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        if number >= WARMUP:
            per_query.append((wall, cpu, dict(timer.seconds), query, dict(timer.cpu)))
    walls = [q[0] for q in per_query]
    slowest = max(per_query, key=lambda q: q[0])
    rows = []
    for label, _, _ in STAGES:
        values = [q[2].get(label, 0.0) for q in per_query]
        cpu_values = [q[4].get(label, 0.0) for q in per_query]
        summary = latency_summary(values)
        rows.append(f"| {label} | {sum(values) / len(values) * 1000:.1f} | "
                    f"{summary.p50_ms:.1f} | {summary.p95_ms:.1f} | "
                    f"{sum(cpu_values) / len(cpu_values) * 1000:.1f} | "
                    f"{latency_summary(cpu_values).p95_ms:.1f} | "
                    f"{slowest[2].get(label, 0.0) * 1000:.1f} |")
    total = latency_summary(walls)
    cpu = latency_summary([q[1] for q in per_query])
    conn = index._connection()
    words = sorted(set(tokenize(slowest[3].text)))
    frequencies = dict(conn.execute(
        f"SELECT term, doc FROM temp.{index._scorer.vocab} WHERE term IN "
        f"({', '.join('?' * len(words))})", words,
    ).fetchall())
    size = index.count()
    terms = query_terms(slowest[3].text, frequencies, size)
    matches = conn.execute(f"SELECT count(*) FROM {index._fts} WHERE {index._fts} MATCH ?",
                           (match_expression(terms),)).fetchone()[0] if terms else 0
    profiler = cProfile.Profile()
    profiler.enable()
    search(index, "hybrid", slowest[3])
    profiler.disable()
    stream = io.StringIO()
    pstats.Stats(profiler, stream=stream).sort_stats("tottime").print_stats(15)
    index.close()
    lines = [
        f"{len(per_query)} hybrid queries on {size:,} points (`{folder}`), wall ms per stage "
        f"(a stage's own time; nested stages excluded). Whole query: p50 {total.p50_ms:.1f} / "
        f"p95 {total.p95_ms:.1f} ms wall, p50 {cpu.p50_ms:.1f} / p95 {cpu.p95_ms:.1f} ms CPU.",
        "",
        "| stage | mean ms | p50 ms | p95 ms | CPU mean ms | CPU p95 ms | slowest query ms |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        *rows,
        f"| **whole query** | {sum(walls) / len(walls) * 1000:.1f} | {total.p50_ms:.1f} | "
        f"{total.p95_ms:.1f} | {sum(q[1] for q in per_query) / len(per_query) * 1000:.1f} | "
        f"{cpu.p95_ms:.1f} | {slowest[0] * 1000:.1f} |",
        "",
        f"Slowest query: `{slowest[3].text}`; its terms' df: "
        + ", ".join(f"{t.term} {t.df:,}" for t in terms)
        + f"; FTS5 matches of the OR of them: {matches:,} of {size:,} points.",
        "",
        "cProfile of that query again (top 15 by own time):",
        "",
        "```",
        *[line for line in stream.getvalue().splitlines() if line.strip()][:40],
        "```",
    ]
    return "\n".join(lines)


def recall_sweep(folder: Path, dimension: int, queries: int,
                 rescored: Sequence[int] = (800, 1600, 3200, 6400, 12800)) -> str:
    """Dense recall@10 and latency by the number of binary-code candidates rescored, on the
    SQLite index the worker left in ``folder``, without a filter and with the 50% document
    filter (the worst of the run's filters at 1M). The exact truth is numpy over the index's
    own float32 copy (``{name}_codes.dense``). Returns a Markdown table."""
    import numpy as np  # noqa: PLC0415

    from benchmarks.scale_strategies import filter_documents  # noqa: PLC0415

    query_set = SyntheticCorpus(dimension).queries(queries + WARMUP)
    index = open_index("sqlite", folder)
    index.open(f"synthetic-unit-vectors@{dimension}", dimension, create=False)
    conn = index._connection()
    rows = conn.execute(f"SELECT c.rowid, c.dense, p.id, p.document FROM {index.name}_codes "
                        f"AS c JOIN {index._points} AS p ON p.rowid = c.rowid ORDER BY c.rowid"
                        ).fetchall()
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    ids = [r[2] for r in rows]
    documents = np.array([r[3] for r in rows])
    kept = filter_documents(len(rows), 0.50)
    mask = np.isin(documents, kept)
    del rows
    truth = {}
    for number, query in enumerate(query_set[WARMUP:]):
        scores = matrix @ query.vector
        truth[number, None] = {ids[i] for i in np.argsort(-scores, kind="stable")[:LIMIT]}
        masked = np.where(mask, scores, -np.inf)
        truth[number, "50%"] = {ids[i] for i in np.argsort(-masked, kind="stable")[:LIMIT]}
    lines = ["| candidates rescored | recall@10 | recall@10 50% filter | dense p50 / p95 ms "
             "| dense CPU p95 ms |", "| ---: | ---: | ---: | ---: | ---: |"]
    for count in rescored:
        index.oversample, index.min_rescore, index.exact_below = 1, count, 0
        index.rescore_share = 0.0
        for query in query_set[:WARMUP]:
            index.dense_search(query.vector, LIMIT)
        recall: dict[str | None, list[float]] = {None: [], "50%": []}
        seconds, cpu = [], []
        for number, query in enumerate(query_set[WARMUP:]):
            for share, chosen in ((None, None), ("50%", kept)):
                started, cpu_started = time.perf_counter(), time.process_time()
                found = index.dense_search(query.vector, LIMIT, documents=chosen)
                if share is None:
                    seconds.append(time.perf_counter() - started)
                    cpu.append(time.process_time() - cpu_started)
                recall[share].append(len({h.id for h in found} & truth[number, share]) / LIMIT)
        wall = latency_summary(seconds)
        lines.append(f"| {count:,} | {np.mean(recall[None]):.3f} | {np.mean(recall['50%']):.3f} "
                     f"| {wall.p50_ms:.1f} / {wall.p95_ms:.1f} "
                     f"| {latency_summary(cpu).p95_ms:.1f} |")
        log(lines[-1])
    index.close()
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# The parent: one child per backend, then the report
# --------------------------------------------------------------------------------------
def parse_size(text: str) -> int:
    """``"10k" -> 10000``, ``"1M" -> 1000000``, ``"2500" -> 2500``.

    Raises:
        argparse.ArgumentTypeError: not a positive count.
    """
    raw = text.strip().lower().replace("_", "")
    factor = {"k": 1_000, "m": 1_000_000}.get(raw[-1:], 1)
    digits = raw[:-1] if factor > 1 else raw
    try:
        value = int(float(digits) * factor)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 10000, 10k, 1M)") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a size must be positive, got {text!r}")
    return value


def live_dimension() -> int:
    """The live embedding model's dimension (no weights are loaded)."""
    from kb_shared.providers import factory  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415

    return factory.embedder(Settings()).dimension


def run_child(backend: str, sizes: Sequence[int], args: argparse.Namespace,
              folder: Path) -> dict[str, Any]:
    """Run ``run_worker`` in a fresh interpreter and return its JSON result.

    Raises:
        RuntimeError: the child failed (its stderr was shown as it ran).
    """
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        result_path = Path(handle.name)
    command = [
        sys.executable, "-m", "benchmarks.scale", "--worker", backend,
        "--sizes", ",".join(map(str, sizes)), "--dimension", str(args.dimension),
        "--batch", str(args.batch), "--queries", str(args.queries),
        "--folder", str(folder), "--result", str(result_path),
    ]
    try:
        completed = subprocess.run(command, check=False)
        if completed.returncode != 0:
            raise RuntimeError(f"the {backend} worker exited with {completed.returncode}")
        return json.loads(result_path.read_text())
    finally:
        result_path.unlink(missing_ok=True)


def _lat(checkpoint: dict[str, Any], kind: str) -> str:
    latency = checkpoint["latency"][kind]
    return f"{latency['p50_ms']:.1f} / {latency['p95_ms']:.1f}"


def crossing(points: Sequence[tuple[int, float]], budget: float) -> tuple[float, str] | None:
    """Where ``(size, p95 ms)`` measurements reach ``budget`` ms.

    Between two measured sizes the crossing is interpolated linearly; past the largest one it
    is extrapolated with a least-squares line ``ms = a + b·size`` through every measurement
    (brute-force KNN and BM25 over common terms both grow linearly with the corpus).

    Returns:
        ``(size, "measured" | "interpolated" | "extrapolated")``, or ``None`` when latency
        does not grow with size (slope <= 0) and never reaches the budget.
    """
    ordered = sorted(points)
    for (s0, m0), (s1, m1) in zip(ordered, ordered[1:], strict=False):
        if m0 < budget <= m1:
            return s0 + (budget - m0) * (s1 - s0) / (m1 - m0), "interpolated"
    if ordered and ordered[0][1] >= budget:
        return float(ordered[0][0]), "measured"
    n = len(ordered)
    if n < 2:
        return None
    mean_s = sum(s for s, _ in ordered) / n
    mean_m = sum(m for _, m in ordered) / n
    var = sum((s - mean_s) ** 2 for s, _ in ordered)
    slope = sum((s - mean_s) * (m - mean_m) for s, m in ordered) / var if var else 0.0
    if slope <= 0:
        return None
    return (budget - (mean_m - slope * mean_s)) / slope, "extrapolated"


def write_report(report: Report, results: list[dict[str, Any]], args: argparse.Namespace,
                 qdrant_sizes: Sequence[int]) -> None:
    """Setup, one table per backend, the growth curve and the conclusion."""
    report.heading("Setup")
    report.text(
        f"Synthetic chunks of 120-300 Zipf-distributed words over a {VOCABULARY_SIZE:,}-word "
        "vocabulary (function words and regulatory terms first), with codes like `IN008-24` "
        f"and clause numbers; {CHUNKS_PER_DOCUMENT} chunks per document, every "
        f"{TABLE_EVERY}th a pipe table; citation payloads like the pipeline's. Dense vectors: "
        f"{args.dimension}-dimensional unit vectors around {TOPICS} topic centroids. Upserts "
        f"in batches of {args.batch:,} points; {args.queries} timed queries of each kind "
        f"(after {WARMUP} untimed), top {LIMIT}; hybrid = dense + sparse candidates "
        "(50 each) fused by reciprocal rank fusion. Each backend ran in its own process "
        "growing one index through the sizes; the upsert rate is for the points added since "
        "the previous size. Latency cells are *p50 / p95 ms*; *hybrid CPU p95* is the "
        "p95 of this process's CPU time per hybrid query (`time.process_time`), which "
        "other load on the machine changes much less than the wall time."
    )
    for result in results:
        backend = result["backend"]
        label = ("SQLite (sqlite-vec vec0 + FTS5) — embedded default" if backend == "sqlite"
                 else "Qdrant local mode on disk (`QdrantClient(path=…)`)")
        report.heading(label, 3)
        rows = []
        for c in result["checkpoints"]:
            rows.append((
                f"{c['size']:,}",
                f"{c['upsert_rate']:,.0f}",
                fmt_duration(c["upsert_seconds"]),
                fmt_bytes(c["disk_bytes"]),
                f"{c['disk_bytes'] / c['size'] / 1024:.1f}",
                fmt_bytes(c["rss_after_queries"]),
                fmt_bytes(c["peak_rss"]),
                _lat(c, "dense"), _lat(c, "sparse"), _lat(c, "hybrid"),
                f"{c['latency']['hybrid']['p99_ms']:.1f}",
                f"{c['latency']['hybrid'].get('cpu_p95_ms', float('nan')):.1f}",
            ))
        report.table(
            ("chunks", "upsert points/s", "upsert time", "disk", "KiB/chunk", "RSS",
             "peak RSS", "dense", "sparse", "hybrid", "hybrid p99", "hybrid CPU p95"),
            rows,
        )
        hits = result["checkpoints"][-1]["latency"]
        report.text(
            f"Took {fmt_duration(result['seconds'])} in all (generation included). Mean hits "
            f"per query at the largest size: dense {hits['dense']['mean_hits']:.1f}, sparse "
            f"{hits['sparse']['mean_hits']:.1f}, hybrid {hits['hybrid']['mean_hits']:.1f} "
            f"(of {LIMIT})."
        )
        report.table(
            ("chunks", "search", *LATENCY_HEADERS, "mean hits"),
            [
                (f"{c['size']:,}", kind, c["latency"][kind]["n"], *(
                    f"{c['latency'][kind][key]:.1f}"
                    for key in ("p50_ms", "p95_ms", "p99_ms", "max_ms", "mean_hits")
                ))
                for c in result["checkpoints"] for kind in ("dense", "sparse", "hybrid")
            ],
            align="ll" + "r" * 6,
        )

    sqlite_result = next((r for r in results if r["backend"] == "sqlite"), None)
    if sqlite_result is not None and sqlite_result["checkpoints"][0].get("strategies"):
        write_strategies(report, sqlite_result["checkpoints"])

    report.heading("Where the embedded default stops being the right choice")
    sqlite = next((r for r in results if r["backend"] == "sqlite"), None)
    if sqlite is None:
        report.text("The SQLite backend was not run (`--backends`).")
    else:
        checkpoints = sqlite["checkpoints"]
        points = [(c["size"], c["latency"]["hybrid"]["p95_ms"]) for c in checkpoints]
        dense_points = [(c["size"], c["latency"]["dense"]["p95_ms"]) for c in checkpoints]
        found = crossing(points, args.budget_ms)
        dense_found = crossing(dense_points, args.budget_ms)
        lines = [
            f"Criterion: hybrid search p95 within **{args.budget_ms:.0f} ms** for one index "
            "query (`--budget-ms`), on this machine.",
        ]
        if found is None:
            lines.append("Hybrid p95 did not grow with size in these runs, so no limit can be "
                         "read from the curve; run larger sizes.")
        else:
            size, how = found
            pages = size / CHUNKS_PER_PAGE
            lines.append(
                f"Hybrid p95 reaches it at about **{size:,.0f} chunks** ({how} from the "
                f"measured sizes), i.e. roughly {pages:,.0f} PDF pages at "
                f"{CHUNKS_PER_PAGE} chunks per page."
            )
        if dense_found is not None:
            lines.append(f"Dense-only p95 reaches it at about {dense_found[0]:,.0f} chunks "
                         f"({dense_found[1]}).")
        largest = checkpoints[-1]
        vector_bytes = largest["size"] * args.dimension * 4
        lines.append(
            "Why: sqlite-vec 0.1.9 `vec0` has no approximate index. The index now ranks "
            f"binary codes ({fmt_bytes(largest['size'] * args.dimension // 8)} at "
            f"{largest['size']:,} chunks, held in each process's memory) instead of "
            f"scanning {fmt_bytes(vector_bytes)} of float32, and rescores the best "
            "candidates exactly; that is still a linear scan (32× less data), and FTS5 BM25 "
            "still reads whole posting lists of common query terms, so both keep growing "
            f"linearly with the corpus. {_upsert_trend(checkpoints)} Below the limit the "
            "embedded default (one file, no server, "
            "WAL readers next to one writer) is the right choice; past it — or when several "
            "writers or replicas are needed — use the Qdrant server "
            "(`KB_QDRANT_URL`), whose HNSW index answers in sub-linear time."
        )
        report.text("\n\n".join(lines))

    qdrant = next((r for r in results if r["backend"] == "qdrant"), None)
    report.heading("Qdrant local mode: why it stops early")
    if qdrant is None:
        report.text("Not run (`--backends`).")
        return
    last = qdrant["checkpoints"][-1]
    latency = last["latency"]
    same_size = next(
        (c for c in (sqlite or {}).get("checkpoints", []) if c["size"] == last["size"]), None
    )
    compared = (
        f" (SQLite at the same size: {same_size['latency']['hybrid']['p95_ms']:.1f} ms)"
        if same_size else ""
    )
    report.text(
        f"Measured only up to {last['size']:,} points (`--qdrant-max`). Upserts ran at "
        f"{last['upsert_rate']:,.0f} points/s in batches of {args.batch:,}. Dense search is "
        f"fast ({latency['dense']['p95_ms']:.1f} ms p95: numpy over an in-memory matrix), but "
        f"sparse search took {latency['sparse']['p95_ms']:.0f} ms p95 and hybrid "
        f"{latency['hybrid']['p95_ms']:.0f} ms p95 — "
        f"{latency['hybrid']['p95_ms'] / args.budget_ms:.1f}× the {args.budget_ms:.0f} ms "
        f"budget{compared} — because local mode scores the query against every stored "
        "sparse vector in a Python loop (qdrant-client 1.20 "
        "`qdrant_client/local/sparse_distances.py`, `calculate_distance_sparse`), so it "
        "grows linearly from there. It also keeps every point in memory (RSS "
        f"{fmt_bytes(last['rss_after_queries'])} at {last['size']:,} points), warns above "
        "20,000 points and allows one process per folder (the pipeline and the MCP server "
        "could not share it). It is Qdrant's test/development mode — kb's contract tests use "
        "it (`:memory:`) — not a scaling option; the Qdrant server is."
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """Command-line options (``--help`` lists them)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.scale", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)),
                        help="comma-separated corpus sizes in chunks (10000, 10k, 1M); "
                        "default 10k,100k — add 1M explicitly (long)")
    parser.add_argument("--backends", default=",".join(BACKENDS),
                        help="comma-separated: sqlite, qdrant (default both)")
    parser.add_argument("--qdrant-max", type=parse_size, default=QDRANT_MAX,
                        help=f"largest size run on Qdrant local mode (default {QDRANT_MAX:,})")
    parser.add_argument("--dimension", type=int, default=0,
                        help="vector dimension (default: the live embedding model's)")
    parser.add_argument("--batch", type=int, default=BATCH, help="points per upsert call")
    parser.add_argument("--queries", type=int, default=QUERIES,
                        help="timed queries of each kind per size")
    parser.add_argument("--variant", default="",
                        help="report file name suffix (default: the sizes when not 10k,100k)")
    parser.add_argument("--budget-ms", type=float, default=BUDGET_MS,
                        help="hybrid p95 budget used to state the embedded limit")
    parser.add_argument("--profile-stages", type=Path, metavar="FOLDER",
                        help="only time the stages of hybrid queries on the SQLite index a "
                        "run left in FOLDER (e.g. benchmarks/work/scale-sqlite) and print "
                        "Markdown; needs --dimension")
    parser.add_argument("--recall-sweep", type=Path, metavar="FOLDER",
                        help="only measure dense recall@10 by candidates rescored on the "
                        "SQLite index a run left in FOLDER and print Markdown")
    # internal: the per-backend child process
    parser.add_argument("--worker", choices=BACKENDS, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.size_list = sorted({parse_size(s) for s in args.sizes.split(",") if s.strip()})
    if not args.size_list:
        parser.error("--sizes is empty")
    if args.batch < 1 or args.queries < 1:
        parser.error("--batch and --queries must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Parent: run each backend in a child and write the report. Child: run one backend."""
    args = parse_args(argv)
    if args.recall_sweep:
        print(recall_sweep(args.recall_sweep, args.dimension or live_dimension(),
                           args.queries))
        return 0
    if args.profile_stages:
        print(profile_stages(args.profile_stages, args.dimension or live_dimension(),
                             args.queries))
        return 0
    if args.worker:
        result = run_worker(args.worker, args.size_list, args.dimension, args.batch,
                            args.queries, args.folder)
        args.result.write_text(json.dumps(result))
        return 0

    args.dimension = args.dimension or live_dimension()
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = set(backends) - set(BACKENDS)
    if unknown:
        raise SystemExit(f"unknown backend(s) {sorted(unknown)}; expected {BACKENDS}")
    default_sizes = tuple(args.size_list) == DEFAULT_SIZES
    report = Report("scale", "Scale benchmark (vector index)", local_providers=False,
                    variant=args.variant or ("" if default_sizes else "sizes-" + "-".join(
                        _short(s) for s in args.size_list)))
    report.fact("sizes", ", ".join(f"{s:,}" for s in args.size_list))
    report.fact("dimension", args.dimension)
    results = []
    qdrant_sizes = [s for s in args.size_list if s <= args.qdrant_max] or [args.qdrant_max]
    for backend in backends:
        sizes = args.size_list if backend == "sqlite" else qdrant_sizes
        folder = fresh_dir(f"scale-{backend}")
        log(f"{backend}: sizes {sizes} in {folder}")
        results.append(run_child(backend, sizes, args, folder))
    write_report(report, results, args, qdrant_sizes)
    raw = fresh_dir("scale-results") / f"{report.path.stem}.json"
    raw.write_text(json.dumps(results, indent=1))
    log(f"raw measurements in {raw}")
    print(report.write())
    return 0


def _upsert_trend(checkpoints: Sequence[dict[str, Any]]) -> str:
    """A sentence on how the upsert rate changed from the first to the last size."""
    first, last = checkpoints[0], checkpoints[-1]
    if first is last:
        return f"Upserts ran at {first['upsert_rate']:,.0f} points/s."
    return (
        f"Upserts ran at {first['upsert_rate']:,.0f} points/s up to {first['size']:,} chunks "
        f"and {last['upsert_rate']:,.0f} points/s from {last['size'] - last['added']:,} to "
        f"{last['size']:,}."
    )


def _short(size: int) -> str:
    if size % 1_000_000 == 0:
        return f"{size // 1_000_000}M"
    if size % 1_000 == 0:
        return f"{size // 1_000}k"
    return str(size)


if __name__ == "__main__":
    sys.exit(main())
