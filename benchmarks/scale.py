"""Benchmark 4 — scale: synthetic corpora of growing size on the embedded vector index
(``SqliteVectorIndex``: sqlite-vec ``vec0`` + FTS5) and on Qdrant's local mode on disk.

Run from the repository root (not part of the unit test run)::

    .venv/bin/python -m benchmarks.scale                          # 10k and 100k chunks
    .venv/bin/python -m benchmarks.scale --sizes 10k,100k,1M      # adds the 1M step (long)
    .venv/bin/python -m benchmarks.scale --sizes 2k --queries 20  # smoke run (~1 min)

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

The synthetic chunks look like the pipeline's: ``{doc_id}-{i}`` ids, 40 chunks per
document, one in ten a pipe table, 120-300 words drawn from a Zipf distribution (word
frequency proportional to 1/rank, Zipf 1949) over a vocabulary that starts with English
function words and regulatory terms and continues with generated rare words, plus codes
such as ``IN008-24`` and clause numbers such as ``3.2.1``; a citation payload built with
``kb_shared.citations.citation_payload`` and a SHA-256 fingerprint like the embeddings
asset stores. Dense vectors are unit vectors of ``--dimension`` dimensions (default: the
live embedding model's), each document scattered around one of 64 random topic centroids
(cosine to its centroid about 0.6) so nearest neighbours are not uniform noise. Everything
is generated in batches from a fixed seed, so memory stays bounded and runs repeat.

On the SQLite backend each size also compares **dense search strategies** on the same file
(``compare_strategies``): the old exact vec0 scan, the binary codes of
``kb_shared.stores.vectors_codes`` ranked in memory and rescored with the float vectors at
several oversampling factors (the default is the index's own setting), and sqlite-vec's own
``bit[DIM]`` vec0 table (``vec_quantize_binary``, Hamming KNN) rescored the same way. Each is
reported with recall@10 against the exact top 10 (numpy over the generated vectors), without
a filter and with document filters keeping ~2%, ~10% and ~50% of the documents, and with
dense and hybrid latency.

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
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
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

DEFAULT_SIZES = (10_000, 100_000)
#: Qdrant local mode is measured up to this many points (see the module docstring).
QDRANT_MAX = 10_000
BATCH = 1_000
QUERIES = 50
#: Untimed queries of each kind before the timed ones (first-touch page cache, lazy setup).
WARMUP = 3
LIMIT = 10
CHUNKS_PER_DOCUMENT = 40
TABLE_EVERY = 10
TOPICS = 64
VOCABULARY_SIZE = 30_000
#: Zipf exponent: frequency proportional to rank^-s with s = 1 (Zipf 1949; Piantadosi
#: 2014, "Zipf's word frequency law in natural language", finds s close to 1 for English).
ZIPF_S = 1.0
SEED = 20261130
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

FUNCTION_WORDS = (
    "the of and to a in must be or by for is that with under this as an on any not if at "
    "from which are its such each may where within than after before other all has will "
    "shall been it their these those when no one more"
).split()

REGULATORY_WORDS = (
    "participant retailer distributor customer market operator aemo aer registered "
    "generator scheduled dispatch interval bid offer price constraint equation violation "
    "penalty factor loss marginal transmission network connection point meter metering "
    "data provider notification notify obligation compliance procedure clause rule "
    "schedule version effective date amendment consultation determination guideline "
    "energy electricity gas load demand supply frequency control ancillary service fcas "
    "raise lower regulation contingency reserve capacity settlement billing payment "
    "invoice credit support prudential requirement threshold limit value period trading "
    "region interconnector flow forecast pre-dispatch predispatch nemde solver "
    "intervention direction emergency outage plan planned unplanned maintenance "
    "standing data nmi life support disconnection reconnection hardship concession "
    "tariff retail contract explicit informed consent business days calendar month "
    "quarter annual report publish record retain information confidential disclosure "
    "dispute resolution ombudsman breach civil penalty enforcement audit review "
    "assessment approval application exemption register registration category "
    "semi-scheduled non-scheduled bidirectional storage battery solar wind rooftop "
    "inverter voltage reactive power system strength inertia stability security "
    "reliability standard minimum maximum fast start inflexibility profile mode "
    "trapezium ramp rate availability capability technical envelope contract "
    "settlement residue auction unit loss factor mlf dlf volume weighted average "
    "methodology calculation formula coefficient parameter input output model "
    "simulation study scenario base case sensitivity table figure appendix section "
    "part chapter definition means includes relevant applicable responsible party "
    "person entity agent representative officer nominated authorised"
).split()

_SYLLABLES = (
    "ab ac ad al am an ar as at ba be bi bo ca ce ci co cu da de di do du fa fe fi fo ga "
    "ge gi go la le li lo lu ma me mi mo mu na ne ni no nu pa pe pi po pu ra re ri ro ru "
    "sa se si so su ta te ti to tu va ve vi vo"
).split()


def vocabulary(size: int = VOCABULARY_SIZE) -> list[str]:
    """Words by frequency rank: function words, regulatory terms, then generated rare words
    (two to four syllables, deterministic, all distinct)."""
    words = list(dict.fromkeys(FUNCTION_WORDS + REGULATORY_WORDS))
    seen = set(words)
    n = 0
    base = len(_SYLLABLES)
    while len(words) < size:
        parts, value = [], n + base * base  # start at two syllables
        while value:
            value, digit = divmod(value, base)
            parts.append(_SYLLABLES[digit])
        word = "".join(parts) + ("tion" if n % 7 == 0 else "")
        n += 1
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


@dataclass(frozen=True)
class Query:
    """One synthetic query: a dense vector near a topic and a few words (maybe a code)."""

    vector: Any
    text: str


class SyntheticCorpus:
    """Deterministic generator of ``Point`` batches and queries (see the module docstring).

    Args:
        dimension: vector length.
        seed: the run's seed; batch ``start`` derives its own generator from it, so any
            batch can be produced again alone.
    """

    def __init__(self, dimension: int, seed: int = SEED) -> None:
        import numpy as np  # noqa: PLC0415

        self.dimension = dimension
        self.seed = seed
        rng = np.random.default_rng(seed)
        centroids = rng.standard_normal((TOPICS, dimension)).astype(np.float32)
        self.centroids = centroids / np.linalg.norm(centroids, axis=1, keepdims=True)
        self.words = vocabulary()
        weights = 1.0 / np.arange(1, len(self.words) + 1) ** ZIPF_S
        self.cdf = np.cumsum(weights / weights.sum())
        self.codes = [f"IN{n:03d}-{yy:02d}" for yy in range(18, 27) for n in range(1, 1000)]
        # Noise per dimension such that the noise vector's norm is 1.3 x the centroid's:
        # cosine to the centroid ~ 1 / sqrt(1 + 1.3^2) ~ 0.61.
        self.noise = 1.3 / math.sqrt(dimension)

    def _words(self, rng: Any, count: int) -> list[str]:
        import numpy as np  # noqa: PLC0415

        ranks = np.searchsorted(self.cdf, rng.random(count), side="right")
        ranks = np.minimum(ranks, len(self.words) - 1)
        return [self.words[i] for i in ranks]

    def _clause(self, rng: Any) -> str:
        a, b, c = rng.integers(1, 12), rng.integers(1, 20), rng.integers(1, 30)
        return f"{a}.{b}.{c}"

    def batch(self, start: int, count: int) -> list[Any]:
        """Points ``start`` .. ``start + count - 1`` (``kb_shared.stores.vectors.Point``)."""
        import numpy as np  # noqa: PLC0415

        from kb_shared import citations  # noqa: PLC0415
        from kb_shared.identity import chunk_id  # noqa: PLC0415
        from kb_shared.stores.vectors import KIND_TABLE, KIND_TEXT, Point  # noqa: PLC0415

        rng = np.random.default_rng([self.seed, start])
        lengths = rng.integers(120, 301, size=count)
        words = self._words(rng, int(lengths.sum()))
        numbers = np.arange(start, start + count)
        topics = (numbers // CHUNKS_PER_DOCUMENT * 2654435761) % TOPICS  # Knuth's hash
        vectors = self.centroids[topics] + rng.standard_normal(
            (count, self.dimension), dtype=np.float32
        ) * np.float32(self.noise)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        points = []
        offset = 0
        for row, (number, length) in enumerate(zip(numbers.tolist(), lengths.tolist(),
                                                   strict=True)):
            chunk_words = words[offset : offset + length]
            offset += length
            for _ in range(rng.poisson(0.6)):
                chunk_words.insert(int(rng.integers(0, len(chunk_words))),
                                   self.codes[int(rng.integers(0, len(self.codes)))])
            for _ in range(rng.poisson(1.0)):
                chunk_words.insert(int(rng.integers(0, len(chunk_words))), self._clause(rng))
            doc_number, index = divmod(number, CHUNKS_PER_DOCUMENT)
            doc_id = f"synthetic-{doc_number:06d}.pdf"
            table = index % TABLE_EVERY == TABLE_EVERY - 1
            if table:
                cells = [" ".join(chunk_words[i : i + 6]) for i in range(0, len(chunk_words), 6)]
                text = "| code | requirement |\n| --- | --- |\n" + "\n".join(
                    f"| {self.codes[(number + i) % len(self.codes)]} | {cell} |"
                    for i, cell in enumerate(cells)
                )
            else:
                text = " ".join(chunk_words)
            section = f"{1 + index // 8} {self.words[40 + (number % 200)].title()}"
            heading = (f"Synthetic Procedure {doc_number}", section)
            page = 1 + index * 10 // 24
            payload = citations.citation_payload(
                doc_id=doc_id,
                name=doc_id,
                title=heading[0],
                version="1.0",
                page_start=page,
                page_end=page + int(rng.integers(0, 2)),
                heading_path=heading,
                chunk_index=index,
                pdf_key=f"pdfs/{doc_id}",
                markdown_key=f"markdown/{doc_id}.md",
                extra={citations.FINGERPRINT: f"{number:064x}"},
            )
            points.append(
                Point(
                    id=chunk_id(doc_id, index),
                    document=doc_id,
                    kind=KIND_TABLE if table else KIND_TEXT,
                    text=text,
                    dense=vectors[row],
                    payload=payload,
                    sparse_text=" › ".join(heading) + "\n\n" + text,
                )
            )
        return points

    def queries(self, count: int) -> list[Query]:
        """``count`` queries: a vector near a random topic, 2-6 mid-frequency words and, for
        half of them, a code (what a person types into a search box)."""
        import numpy as np  # noqa: PLC0415

        rng = np.random.default_rng([self.seed, 1 << 40])
        out = []
        for _ in range(count):
            vector = self.centroids[int(rng.integers(0, TOPICS))] + rng.standard_normal(
                self.dimension, dtype=np.float32
            ) * np.float32(self.noise)
            ranks = rng.integers(40, 5000, size=int(rng.integers(2, 7)))
            words = [self.words[int(i)] for i in ranks]
            if rng.random() < 0.5:
                words.append(self.codes[int(rng.integers(0, len(self.codes)))])
            out.append(Query(vector=vector / np.linalg.norm(vector), text=" ".join(words)))
        return out


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


#: Issue 15's targets for the embedded index (384-d): hybrid p95 ms by size, and the dense
#: recall@10 against exact search, filters included.
HYBRID_TARGET_MS = {100_000: 30.0, 1_000_000: 150.0}
RECALL_TARGET = 0.95
#: Document filters of the strategy comparison: the share of documents each keeps.
FILTER_SHARES = (0.02, 0.10, 0.50)
#: Dense strategies compared on the SQLite file: label -> SqliteVectorIndex tuning
#: (``None``: sqlite-vec's own bit[] vec0 table, ``Vec0BitIndex``).
DEFAULT_STRATEGY = "codes x16, min 800 (default)"
EXACT_STRATEGY = "exact vec0 scan (old index)"
STRATEGIES: dict[str, dict[str, int] | None] = {
    EXACT_STRATEGY: {"exact_below": 10**12},
    "codes x8, min 400": {"exact_below": 0, "oversample": 8, "min_rescore": 400},
    DEFAULT_STRATEGY: {"exact_below": 0},
    "codes x32, min 1600": {"exact_below": 0, "oversample": 32, "min_rescore": 1600},
    "sqlite-vec bit[] vec0 x16, min 800": None,
}


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
    ``document IN (…)`` metadata filter costs grow with the number of documents listed)."""
    from kb_shared.stores.vectors_sqlite import SqliteVectorIndex  # noqa: PLC0415

    size = matrix.shape[0]
    model = f"synthetic-unit-vectors@{dimension}"
    timed = queries[WARMUP:]
    out: dict[str, Any] = {}
    for label, tuning in STRATEGIES.items():
        if tuning is None:
            index = vec0_bit_index(path, dimension)
            index.open(model, dimension)
            started = time.perf_counter()
            index.fill()
            fill_seconds = time.perf_counter() - started
        else:
            index = SqliteVectorIndex(path, **tuning)
            index.open(model, dimension, create=False)
            fill_seconds = 0.0
        vec0_filters = tuning is None or tuning.get("exact_below", 0) > size
        entry: dict[str, Any] = {"fill_seconds": fill_seconds}
        for kind in ("dense", "hybrid"):
            seconds, recall = [], []
            for number, query in enumerate(queries):
                started = time.perf_counter()
                if kind == "dense":
                    found = index.dense_search(query.vector, LIMIT)
                else:
                    found = index.hybrid_search(query.vector, query.text, LIMIT)
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
            if kind == "dense":
                found = index.dense_search(query.vector, LIMIT)
            elif kind == "sparse":
                found = index.sparse_search(query.text, LIMIT)
            else:
                found = index.hybrid_search(query.vector, query.text, LIMIT)
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
        "bit[] vec0 table has no metadata columns here)."
    )
    shares = [f"{share:.0%}" for share in FILTER_SHARES]
    rows = []
    for c in checkpoints:
        for label, entry in c["strategies"].items():
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
        f"Verdict for the index as shipped (`SqliteVectorIndex()` defaults: *{EXACT_STRATEGY}* "
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
