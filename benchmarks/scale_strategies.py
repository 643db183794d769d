"""Dense search strategies of the scale benchmark (``benchmarks.scale``), compared on the
SQLite backend's own file at each size (``compare_strategies``) and reported
(``write_strategies``).

The strategies: the old exact vec0 scan, the binary codes of
``kb_shared.stores.vectors_codes`` ranked in memory and rescored with the float vectors at
several oversampling factors (the default is the index's own setting), and sqlite-vec's own
``bit[DIM]`` vec0 table (``vec_quantize_binary``, Hamming KNN) rescored the same way. Each is
reported with recall@10 against the exact top 10 (numpy over the generated vectors), without
a filter and with document filters keeping ~2%, ~10% and ~50% of the documents, and with
dense and hybrid latency.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.common import Report, latency_summary, log
from benchmarks.scale_corpus import CHUNKS_PER_DOCUMENT, LIMIT, SEED, WARMUP, Query, search

#: Issue 15's targets for the embedded index (384-d): hybrid p95 ms by size, and the dense
#: recall@10 against exact search, filters included.
HYBRID_TARGET_MS = {100_000: 30.0, 1_000_000: 150.0}
RECALL_TARGET = 0.95
#: Document filters of the strategy comparison: the share of documents each keeps.
FILTER_SHARES = (0.02, 0.10, 0.50)
#: Dense strategies compared on the SQLite file: label -> SqliteVectorIndex tuning
#: (``None``: sqlite-vec's own bit[] vec0 table, ``Vec0BitIndex``).
DEFAULT_STRATEGY = "codes x16, min 800, 0.65% of points (default)"
EXACT_STRATEGY = "exact vec0 scan (old index)"
BIT_VEC0_STRATEGY = "sqlite-vec bit[] vec0 x16, min 800"
#: (the fixed-count strategies rescore no share of the points; the exact one keeps vec0's
#: scan, never the in-memory float copy, which would hold every vector of a large index)
STRATEGIES: dict[str, dict[str, int] | None] = {
    EXACT_STRATEGY: {"exact_below": 10**12, "resident_dense": False},
    "codes x8, min 400": {"exact_below": 0, "oversample": 8, "min_rescore": 400,
                          "rescore_share": 0},
    "codes x16, min 800": {"exact_below": 0, "rescore_share": 0},
    DEFAULT_STRATEGY: {"exact_below": 0},
    "codes x32, min 1600": {"exact_below": 0, "oversample": 32, "min_rescore": 1600,
                            "rescore_share": 0},
    BIT_VEC0_STRATEGY: None,
}
#: Largest index each slow strategy is measured on (``compare_strategies`` skips it past
#: that and the report shows dashes): the bit[] vec0 KNN took 890 ms p95 per dense query at
#: 100k chunks (benchmarks/results/scale-2026-12-01-ann.md), seconds per query at 1M.
STRATEGY_MAX_SIZE = {BIT_VEC0_STRATEGY: 100_000}


def vec0_bit_index(path: Path, dimension: int) -> Any:
    """A ``SqliteVectorIndex`` whose dense candidates come from a sqlite-vec ``bit[DIM]``
    vec0 table (Hamming KNN, ``k = max(16 * limit, 800)``) filled from the float vectors for
    the rowids it lacks; unfiltered searches only (a filtered one scans exactly)."""
    from kb_shared.stores.vectors_sqlite import (  # noqa: PLC0415
        MAX_KNN,
        MIN_RESCORE,
        OVERSAMPLE,
        SqliteVectorIndex,
    )

    class Vec0BitIndex(SqliteVectorIndex):
        def fill(self) -> None:
            with self._write("filling the bit vec0 table") as conn:
                conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {self.name}_vbit "
                             f"USING vec0(embedding bit[{dimension}])")
                last = conn.execute(f"SELECT coalesce(max(rowid), 0) FROM {self.name}_vbit"
                                    ).fetchone()[0]
                conn.execute(f"INSERT INTO {self.name}_vbit(rowid, embedding) SELECT rowid, "
                             f"vec_quantize_binary(embedding) FROM {self._vec} WHERE rowid > ?",
                             (last,))

        def _code_candidates(self, query: Any, limit: int, filters: Any) -> list[int] | None:
            if filters:
                return None
            k = min(MAX_KNN, max(OVERSAMPLE * limit, MIN_RESCORE))
            return [r[0] for r in self._connection().execute(
                f"SELECT rowid FROM {self.name}_vbit WHERE embedding MATCH "
                "vec_quantize_binary(?) AND k = ? ORDER BY distance", (query.tobytes(), k))]

    return Vec0BitIndex(path)


def filter_documents(size: int, share: float, seed: int = SEED) -> list[str]:
    """About ``share`` of the documents of a ``size``-chunk synthetic corpus (at least one)."""
    import numpy as np  # noqa: PLC0415

    documents = -(-size // CHUNKS_PER_DOCUMENT)
    count = max(1, round(documents * share))
    chosen = np.random.default_rng([seed, 7]).choice(documents, count, replace=False)
    return [f"synthetic-{n:06d}.pdf" for n in sorted(chosen.tolist())]


def exact_top(matrix: Any, query: Any, limit: int, documents: Sequence[str] | None) -> list[str]:
    """Ids of the exact ``limit`` nearest rows of ``matrix`` (row n = chunk n) by cosine."""
    import numpy as np  # noqa: PLC0415

    from kb_shared.identity import chunk_id  # noqa: PLC0415

    scores = matrix @ query
    if documents is not None:
        keep = np.zeros(matrix.shape[0], dtype=bool)
        for name in documents:
            number = int(name.removeprefix("synthetic-").removesuffix(".pdf"))
            keep[number * CHUNKS_PER_DOCUMENT : (number + 1) * CHUNKS_PER_DOCUMENT] = True
        scores = np.where(keep, scores, -np.inf)
    best = np.argsort(-scores, kind="stable")[:limit]
    return [chunk_id(f"synthetic-{n // CHUNKS_PER_DOCUMENT:06d}.pdf",
                     int(n % CHUNKS_PER_DOCUMENT)) for n in best.tolist()]


def compare_strategies(path: Path, dimension: int, queries: Sequence[Query],
                       matrix: Any) -> dict[str, Any]:
    """Per strategy (``STRATEGIES``): dense and hybrid latency without filters, recall@10
    against ``exact_top`` without and with each ``FILTER_SHARES`` filter, and the latency
    of the filtered dense searches (skipped for the vec0 strategies past 20k chunks: their
    ``document IN (…)`` metadata filter costs grow with the number of documents listed).
    A strategy is skipped past its ``STRATEGY_MAX_SIZE``: its entry is ``{"skipped": why}``."""
    from kb_shared.stores.vectors_sqlite import SqliteVectorIndex  # noqa: PLC0415

    size = matrix.shape[0]
    model = f"synthetic-unit-vectors@{dimension}"
    timed = queries[WARMUP:]
    out: dict[str, Any] = {}
    for label, tuning in STRATEGIES.items():
        if size > STRATEGY_MAX_SIZE.get(label, size):
            out[label] = {"skipped": f"past {STRATEGY_MAX_SIZE[label]:,} chunks"}
            log(f"  {label}: skipped ({out[label]['skipped']}, STRATEGY_MAX_SIZE)")
            continue
        if tuning is None:
            index = vec0_bit_index(path, dimension)
            index.open(model, dimension)
            started = time.perf_counter()
            index.fill()
            fill_seconds = time.perf_counter() - started
        else:
            # the keyword side on FTS5, as in every strategy's hybrid column: the dense
            # side is what differs (and no strategy loads its own postings copy)
            index = SqliteVectorIndex(path, resident_points=0, **tuning)
            index.open(model, dimension, create=False)
            fill_seconds = 0.0
        vec0_filters = tuning is None or tuning.get("exact_below", 0) > size
        entry: dict[str, Any] = {"fill_seconds": fill_seconds}
        for kind in ("dense", "hybrid"):
            seconds, recall = [], []
            for number, query in enumerate(queries):
                started = time.perf_counter()
                found = search(index, kind, query)
                elapsed = time.perf_counter() - started
                if number >= WARMUP:
                    seconds.append(elapsed)
                    if kind == "dense":
                        truth = exact_top(matrix, query.vector, LIMIT, None)
                        recall.append(len({h.id for h in found} & set(truth)) / LIMIT)
            entry[kind] = asdict(latency_summary(seconds))
            if kind == "dense":
                entry["recall"] = {"none": sum(recall) / len(recall)}
        for share in FILTER_SHARES:
            if vec0_filters and size > 20_000:
                continue
            documents = filter_documents(size, share)
            seconds, recall, short = [], [], 0
            for query in timed:
                started = time.perf_counter()
                found = index.dense_search(query.vector, LIMIT, documents=documents)
                seconds.append(time.perf_counter() - started)
                truth = exact_top(matrix, query.vector, LIMIT, documents)
                recall.append(len({h.id for h in found} & set(truth)) / LIMIT)
                short += len(found) < LIMIT
            entry["recall"][f"{share:.0%}"] = sum(recall) / len(recall)
            entry[f"filtered {share:.0%}"] = asdict(latency_summary(seconds))
            entry.setdefault("short", 0)
            entry["short"] += short
        index.close()
        out[label] = entry
        log(f"  {label}: dense p95 {entry['dense']['p95_ms']:.1f} ms, hybrid p95 "
            f"{entry['hybrid']['p95_ms']:.1f} ms, recall@10 {entry['recall']}")
    return out


def write_strategies(report: Report, checkpoints: Sequence[dict[str, Any]]) -> None:
    """The dense strategy comparison (``compare_strategies``) at each size."""
    report.heading("Dense search strategies on the same SQLite file")
    report.text(
        "Recall@10 is against the exact top 10 (numpy over the generated vectors); the "
        "filters keep the share of documents named (every chunk of a kept document). "
        "Latency cells are *p50 / p95 ms*; hybrid runs the strategy's dense search with 50 "
        "candidates next to the (unchanged) FTS5 side. A dash: not measured (the vec0 "
        "`document IN (…)` metadata filter grows with the number of documents listed: "
        "7.5 s for one dense query with 50 documents at 100k chunks in a trial run at load "
        "~20, so the filtered runs are skipped for the vec0 strategies past 20k chunks; the "
        "bit[] vec0 table has no metadata columns here). A strategy marked *skipped* was "
        "not run at that size at all (`STRATEGY_MAX_SIZE`: "
        + ", ".join(f"{label} up to {size:,} chunks"
                    for label, size in STRATEGY_MAX_SIZE.items())
        + "; seconds per query past that)."
    )
    shares = [f"{share:.0%}" for share in FILTER_SHARES]
    rows = []
    for c in checkpoints:
        for label, entry in c["strategies"].items():
            if "skipped" in entry:
                rows.append((f"{c['size']:,}", f"{label} (skipped: {entry['skipped']})",
                             *("–" for _ in range(4 + 2 * len(shares)))))
                continue
            recall = entry["recall"]
            rows.append((
                f"{c['size']:,}", label,
                f"{entry['dense']['p50_ms']:.1f} / {entry['dense']['p95_ms']:.1f}",
                f"{entry['hybrid']['p50_ms']:.1f} / {entry['hybrid']['p95_ms']:.1f}",
                f"{recall['none']:.3f}",
                *(f"{recall[s]:.3f}" if s in recall else "–" for s in shares),
                *(f"{entry[f'filtered {s}']['p95_ms']:.1f}" if f"filtered {s}" in entry
                  else "–" for s in shares),
                str(entry.get("short", "–")),
            ))
    from kb_shared.stores.vectors_sqlite import EXACT_BELOW  # noqa: PLC0415

    verdict = []
    for c in checkpoints:
        shipped = DEFAULT_STRATEGY if c["size"] >= EXACT_BELOW else EXACT_STRATEGY
        entry = c["strategies"].get(shipped)
        if entry is None:
            continue
        target = HYBRID_TARGET_MS.get(c["size"])
        p95 = c["latency"]["hybrid"]["p95_ms"]
        worst = min(entry["recall"].values())
        verdict.append((
            f"{c['size']:,}", f"{p95:.1f}",
            f"≤ {target:.0f}: {'met' if p95 <= target else 'missed'}" if target else "–",
            f"{worst:.3f}", f"≥ {RECALL_TARGET}: {'met' if worst >= RECALL_TARGET else 'missed'}",
            str(entry.get("short", "–")),
        ))
    report.text(
        f"Verdict for the index as shipped (`SqliteVectorIndex()` defaults: an exact scan "
        f"below `EXACT_BELOW` = {EXACT_BELOW:,} points, *{DEFAULT_STRATEGY}* from there on): "
        "hybrid p95 from the main table, the lowest recall@10 over no filter and the three "
        "filters."
    )
    report.table(("chunks", "hybrid p95 ms", "target", "lowest recall@10", "target",
                  "filtered searches short of 10"), verdict)
    report.table(
        ("chunks", "strategy", "dense", "hybrid", "recall@10",
         *(f"recall@10 {s} filter" for s in shares),
         *(f"dense p95 {s} filter" for s in shares), "filtered searches short of 10"),
        rows,
    )
