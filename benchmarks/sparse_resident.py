"""Benchmark: the embedded index's sparse search from the in-memory postings against the FTS5
path (issues 14 and 15), written up in benchmarks/results/sparse-resident-2026-12-02.md; and
its exact dense search from the in-memory float copy against vec0's scan (``dense``,
benchmarks/results/dense-resident-2026-12-02.md).

Run from the repository root; each subcommand prints JSON (and writes it to ``--out``)::

    .venv/bin/python -m benchmarks.sparse_resident build --points 100000 --index I.sqlite
    .venv/bin/python -m benchmarks.sparse_resident measure --index COPY.sqlite --eval DIR
    .venv/bin/python -m benchmarks.sparse_resident measure --index I.sqlite --synthetic 200
    .venv/bin/python -m benchmarks.sparse_resident search-docs --home H --eval DIR
    .venv/bin/python -m benchmarks.sparse_resident dense --index COPY.sqlite --queries 100

* ``build`` fills an index with ``benchmarks.scale_corpus`` chunks (``--dimension``, default
  384), unless it already holds them.
* ``measure`` opens the index twice in a fresh process: ``resident`` (the default) and
  ``fts5`` (``resident_points=0``). It times the copy's first load and the resident set
  size it adds (``/proc/self/statm`` before and after), then, interleaved, each way's wall
  and CPU time per ``sparse_search``: with ``--eval`` the questions of that set at the
  limits search_docs asks (200 hybrid candidates, 30 definition terms, 9 exact codes),
  with ``--synthetic`` that many ``SyntheticCorpus`` queries at k = 10 and 50 (and hybrid
  search at k = 10, both ways). Every answer pair is compared (ids and scores). With
  ``--delta`` it then rewrites one document's worth of points (40) through another
  connection and times the next search (the copy applying the delta). Never point it at a
  build you must keep: ``--delta`` writes, so work on a copy (``--copy-from`` makes one
  with SQLite's backup API, reading the source read-only).
* ``search-docs`` copies a built KB_HOME to a temporary folder and times
  ``kb_shared.search.retrieval.search_docs`` in process (local models, fusion order, top 8) for
  every question of ``--eval``, interleaved with the index on each sparse path (with
  ``--compare dense``: on each exact dense path, the float copy against vec0), comparing
  the answers' point ids.
* ``dense`` opens the index twice in a fresh process: ``resident`` (the float copy) and
  ``vec0`` (``resident_dense=False``). It times the copy's first load and the resident set
  size it adds, then, interleaved, each way's wall and CPU time per ``dense_search`` at the
  calls search_docs makes (k = 200 and k = 1 over the kinds text, table and figure; k = 200
  also within two documents) and k = 10 unfiltered, for ``--queries`` query vectors (stored
  vectors with noise, seeded), comparing every answer pair (ids; largest score difference).
  ``--delta`` then rewrites 40 points' vectors through another connection and times the
  search that applies the delta (writes: work on a copy, ``--copy-from``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import current_rss_bytes, latency_summary, load_average, log

#: search_docs' sparse calls per question: hybrid candidates, definition terms, exact codes
#: (``kb_shared.search.retrieval``; serving-2026-12-01-latency.md counts them).
SEARCH_DOCS_LIMITS = (200, 30, 9)
#: Untimed calls per way before timing (page cache, the copy's first load).
WARMUP = 3


def build(path: Path, points: int, dimension: int) -> float:
    """Fill ``path`` with ``points`` synthetic chunks unless it holds them; seconds taken."""
    from benchmarks.scale_corpus import SyntheticCorpus  # noqa: PLC0415
    from kb_shared.stores.vectors_sqlite import SqliteVectorIndex  # noqa: PLC0415

    index = SqliteVectorIndex(path)
    index.open("synthetic", dimension)
    have = index.count()
    corpus = SyntheticCorpus(dimension)
    started = time.perf_counter()
    for start in range(have, points, 1000):
        index.upsert(corpus.batch(start, min(1000, points - start)))
        if start % 10_000 == 0:
            log(f"{start} points, {time.perf_counter() - started:.0f} s")
    index.close()
    return time.perf_counter() - started


def copy_index(source: Path, target: Path) -> None:
    """Copy the SQLite file ``source`` (opened read-only) to ``target`` (SQLite backup API,
    so the WAL's committed pages come along)."""
    import pysqlite3.dbapi2 as sqlite3  # noqa: PLC0415
    import sqlite_vec  # noqa: PLC0415

    target.parent.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    src.enable_load_extension(True)
    sqlite_vec.load(src)
    dst = sqlite3.connect(str(target))
    src.backup(dst)
    dst.close()
    src.close()


def timed(call: Callable[[], Any]) -> tuple[Any, float, float]:
    """``(result, wall seconds, CPU seconds of this process)``."""
    started, cpu = time.perf_counter(), time.process_time()
    result = call()
    return result, time.perf_counter() - started, time.process_time() - cpu


def summary(seconds: Sequence[float]) -> list[float]:
    """``[p50, p95]`` in ms, rounded to 0.01."""
    found = latency_summary(seconds)
    return [round(found.p50_ms, 2), round(found.p95_ms, 2)]


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """The ``measure`` subcommand (module docstring)."""
    from kb_shared.stores.vectors_sqlite import SqliteVectorIndex  # noqa: PLC0415

    if args.copy_from:
        copy_index(args.copy_from, args.index)
    bound = {} if args.resident_points is None else {"resident_points": args.resident_points}
    resident = SqliteVectorIndex(args.index, **bound)
    fts5 = SqliteVectorIndex(args.index, resident_points=0)
    info = resident.describe()
    if info is None:
        raise SystemExit(f"{args.index} holds no index")
    for index in (resident, fts5):
        index.open(info.model, info.dimension, create=False)
    points = resident.count()
    rss_before = current_rss_bytes()
    _, load_wall, load_cpu = timed(lambda: resident.sparse_search("warm", 1))
    rss_after = current_rss_bytes()
    cache = resident._postings.cache
    if cache is None:
        raise SystemExit(f"{points} points: past RESIDENT_POINTS, nothing to compare")
    snapshot = cache.snapshot
    arrays = (snapshot.rowids, snapshot.documents, snapshot.kinds, snapshot.lengths,
              snapshot.alive, snapshot.base.offsets, snapshot.base.positions,
              snapshot.base.tfs)
    copy = {
        "points": points, "terms": len(snapshot.base.vocabulary),
        "postings": int(snapshot.base.positions.size),
        "load_wall_s": round(load_wall, 3), "load_cpu_s": round(load_cpu, 3),
        "rss_added_mib": (None if rss_before is None or rss_after is None
                          else round((rss_after - rss_before) / 2**20, 1)),
        "numpy_arrays_mib": round(sum(a.nbytes for a in arrays) / 2**20, 1),
    }
    log(f"copy: {copy}")
    calls: list[tuple[str, str, int, Any]] = []  # (label, text, limit, vector or None)
    if args.eval:
        texts = [json.loads(line)["question"] for line in
                 (args.eval / "questions.jsonl").read_text(encoding="utf-8").splitlines()
                 if line.strip()]
        calls = [(f"sparse k={k}", t, k, None) for t in texts for k in SEARCH_DOCS_LIMITS]
    else:
        from benchmarks.scale_corpus import SyntheticCorpus  # noqa: PLC0415

        queries = SyntheticCorpus(info.dimension).queries(args.synthetic)
        calls = [(f"sparse k={k}", q.text, k, None) for q in queries for k in (10, 50)]
        if args.hybrid:
            calls += [("hybrid k=10", q.text, 10, q.vector) for q in queries]
    ways = {"resident": resident, "fts5": fts5}

    def run(index: Any, call: tuple[str, str, int, Any]) -> list[tuple[str, float]]:
        label, text, limit, vector = call
        if vector is None:
            hits = index.sparse_search(text, limit)
        else:
            hits = index.hybrid_search(vector, text, limit)
        return [(h.id, h.score) for h in hits]

    for call in calls[:WARMUP]:
        for index in ways.values():
            run(index, call)
    load_start = load_average()
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    differ: dict[str, int] = {}
    for number, call in enumerate(calls):
        answers = {}
        order = list(ways.items()) if number % 2 == 0 else list(reversed(ways.items()))
        for way, index in order:  # alternate who goes first, so load hits both alike
            answers[way], w, c = timed(lambda index=index: run(index, call))
            wall.setdefault(f"{way} {call[0]}", []).append(w)
            cpu.setdefault(f"{way} {call[0]}", []).append(c)
        if answers["resident"] != answers["fts5"]:
            differ[call[0]] = differ.get(call[0], 0) + 1
    load_end = load_average()
    result: dict[str, Any] = {
        "index": str(args.index), "copy": copy,
        "searches": {label: len(v) for label, v in wall.items()},
        "wall_ms_p50_p95": {label: summary(v) for label, v in sorted(wall.items())},
        "cpu_ms_p50_p95": {label: summary(v) for label, v in sorted(cpu.items())},
        "answers_differ": differ, "fts5_capped": fts5._scorer.capped,
        "load": {"start": load_start, "end": load_end},
    }
    if args.delta:
        result["delta"] = delta(args.index, info, resident, calls[0][1])
    for index in ways.values():
        index.close()
    return result


#: ``dense`` subcommand calls: (label, limit, kinds, documents to keep) — search_docs' dense
#: calls (``kb_shared.search.retrieval``: 200 hybrid candidates and the rank-1 check over the three
#: searchable kinds, sometimes within named documents) and a plain k = 10.
DENSE_CALLS = (
    ("k=200 kinds", 200, ("text", "table", "figure"), 0),
    ("k=200 kinds, 2 documents", 200, ("text", "table", "figure"), 2),
    ("k=1 kinds", 1, ("text", "table", "figure"), 0),
    ("k=10", 10, None, 0),
)


def dense(args: argparse.Namespace) -> dict[str, Any]:
    """The ``dense`` subcommand (module docstring)."""
    import numpy as np  # noqa: PLC0415

    from kb_shared.stores.vectors_sqlite import SqliteVectorIndex  # noqa: PLC0415

    if args.copy_from:
        copy_index(args.copy_from, args.index)
    resident = SqliteVectorIndex(args.index)
    vec0 = SqliteVectorIndex(args.index, resident_dense=False)
    info = resident.describe()
    if info is None:
        raise SystemExit(f"{args.index} holds no index")
    for index in (resident, vec0):
        index.open(info.model, info.dimension, create=False)
    conn = resident._connection()
    stored = conn.execute("SELECT c.dense, p.document FROM chunks_codes AS c JOIN chunks_points "
                          "AS p ON p.rowid = c.rowid ORDER BY c.rowid").fetchall()
    rng = np.random.default_rng(2026)
    picked = rng.choice(len(stored), size=args.queries, replace=len(stored) < args.queries)
    names = sorted({row[1] for row in stored})
    queries = []
    for number in picked:
        vector = np.frombuffer(stored[number][0], dtype=np.float32)
        noisy = vector + rng.standard_normal(vector.size).astype(np.float32) * 0.03
        queries.append((noisy / np.linalg.norm(noisy), [str(d) for d in
                        rng.choice(names, size=min(2, len(names)), replace=False)]))
    del stored
    rss_before = current_rss_bytes()
    _, load_wall, load_cpu = timed(lambda: resident.dense_search(queries[0][0], 1))
    rss_after = current_rss_bytes()
    cache = resident._dense_copy.cache
    if cache is None:
        raise SystemExit(f"{resident.count()} points: not below exact_below, nothing to compare")
    snap = cache.snapshot
    arrays = (snap.vectors, snap.lengths, snap.rowids, snap.documents, snap.kinds, snap.alive)
    copy = {
        "points": snap.live, "dimension": info.dimension,
        "load_wall_s": round(load_wall, 3), "load_cpu_s": round(load_cpu, 3),
        "rss_added_mib": (None if rss_before is None or rss_after is None
                          else round((rss_after - rss_before) / 2**20, 1)),
        "numpy_arrays_mib": round(sum(a.nbytes for a in arrays) / 2**20, 1),
    }
    log(f"copy: {copy}")
    ways = {"resident": resident, "vec0": vec0}

    def run(index: Any, query: Any, call: tuple[str, int, Any, int]) -> list[tuple[str, float]]:
        _, limit, kinds, keep = call
        documents = query[1][:keep] if keep else None
        return [(h.id, h.score) for h in index.dense_search(query[0], limit, documents, kinds)]

    for query in queries[:WARMUP]:
        for index in ways.values():
            run(index, query, DENSE_CALLS[0])
    load_start = load_average()
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    differ: dict[str, int] = {}
    largest = 0.0
    number = 0
    for query in queries:
        for call in DENSE_CALLS:
            answers = {}
            order = list(ways.items()) if number % 2 == 0 else list(reversed(ways.items()))
            number += 1
            for way, index in order:  # alternate who goes first, so load hits both alike
                answers[way], w, c = timed(lambda index=index: run(index, query, call))
                wall.setdefault(f"{way} {call[0]}", []).append(w)
                cpu.setdefault(f"{way} {call[0]}", []).append(c)
            mine, theirs = answers["resident"], answers["vec0"]
            if [i for i, _ in mine] != [i for i, _ in theirs]:
                differ[call[0]] = differ.get(call[0], 0) + 1
            else:
                largest = max([largest, *(abs(a[1] - b[1]) for a, b in zip(mine, theirs))])
    result: dict[str, Any] = {
        "index": str(args.index), "copy": copy,
        "searches": {label: len(v) for label, v in wall.items()},
        "wall_ms_p50_p95": {label: summary(v) for label, v in sorted(wall.items())},
        "cpu_ms_p50_p95": {label: summary(v) for label, v in sorted(cpu.items())},
        "answers_differ": differ, "largest_score_difference": largest,
        "load": {"start": load_start, "end": load_average()},
    }
    if args.delta:
        result["delta"] = dense_delta(args.index, info, resident, queries[0][0])
    for index in ways.values():
        index.close()
    return result


def dense_delta(path: Path, info: Any, resident: Any, query: Any) -> dict[str, Any]:
    """Rewrite the first 40 points through another ``SqliteVectorIndex`` (their vectors
    rotated), then time the resident search that applies the delta, and one after it."""
    from kb_shared.stores.vectors import Point  # noqa: PLC0415
    from kb_shared.stores.vectors_sqlite import SqliteVectorIndex  # noqa: PLC0415

    writer = SqliteVectorIndex(path)
    writer.open(info.model, info.dimension, create=False)
    stored = writer.export_points(limit=40)
    writer.upsert([
        Point(id=p.point.id, document=p.point.document, kind=p.point.kind, text=p.point.text,
              dense=stored[(i + 1) % len(stored)].dense, payload=p.point.payload)
        for i, p in enumerate(stored)
    ])
    writer.close()
    _, applying, applying_cpu = timed(lambda: resident.dense_search(query, 200))
    _, after, after_cpu = timed(lambda: resident.dense_search(query, 200))
    return {"rewritten": len(stored), "applying_search_ms": round(applying * 1000, 2),
            "applying_search_cpu_ms": round(applying_cpu * 1000, 2),
            "next_search_ms": round(after * 1000, 2),
            "next_search_cpu_ms": round(after_cpu * 1000, 2),
            "dead": resident._dense_copy.cache.snapshot.dead}


def delta(path: Path, info: Any, resident: Any, text: str) -> dict[str, Any]:
    """Rewrite the first 40 points through another ``SqliteVectorIndex`` (their texts
    rotated), then time the resident search that applies the delta, and one after it."""
    from kb_shared.stores.vectors import Point  # noqa: PLC0415
    from kb_shared.stores.vectors_sqlite import SqliteVectorIndex  # noqa: PLC0415

    writer = SqliteVectorIndex(path)
    writer.open(info.model, info.dimension, create=False)
    ids = writer.list_ids()[:40]
    stored = writer.export_points(limit=40)
    rotated = [
        Point(id=ids[i], document=p.point.document, kind=p.point.kind,
              text=stored[(i + 1) % len(stored)].point.text, dense=p.dense,
              payload=p.point.payload)
        for i, p in enumerate(stored)
    ]
    writer.upsert(rotated)
    writer.close()
    _, applying, applying_cpu = timed(lambda: resident.sparse_search(text, 50))
    _, after, after_cpu = timed(lambda: resident.sparse_search(text, 50))
    return {"rewritten": len(rotated), "applying_search_ms": round(applying * 1000, 2),
            "applying_search_cpu_ms": round(applying_cpu * 1000, 2),
            "next_search_ms": round(after * 1000, 2),
            "next_search_cpu_ms": round(after_cpu * 1000, 2),
            "dead": resident._postings.cache.snapshot.dead}


def search_docs_timing(args: argparse.Namespace) -> dict[str, Any]:
    """The ``search-docs`` subcommand (module docstring)."""
    import shutil  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    from benchmarks.common import kb_environment  # noqa: PLC0415
    from kb_mcp.state import open_state  # noqa: PLC0415
    from kb_shared.search.retrieval import search_docs  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415

    scratch = Path(tempfile.mkdtemp(prefix="kb-resident-"))
    home = scratch / "home"
    shutil.copytree(args.home, home, ignore=shutil.ignore_patterns("vectors.sqlite*"))
    copy_index(args.home / "vectors.sqlite", home / "vectors.sqlite")
    texts = [json.loads(line)["question"] for line in
             (args.eval / "questions.jsonl").read_text(encoding="utf-8").splitlines()
             if line.strip()]
    with kb_environment(home):
        state = open_state(Settings(), use_reranker=False)
        state.embedder.warm()
        index = state.vectors()
        setting, paths = (("resident_dense", {"resident": True, "vec0": False})
                          if args.compare == "dense" else
                          ("resident_points", {"resident": index.resident_points, "fts5": 0}))
        wall: dict[str, list[float]] = {way: [] for way in paths}
        cpu: dict[str, list[float]] = {way: [] for way in paths}
        differ = 0
        for number, text in enumerate([*texts[:WARMUP], *texts]):
            answers = {}
            for way in (paths if number % 2 == 0 else list(reversed(paths))):
                setattr(index, setting, paths[way])
                answer, w, c = timed(lambda: search_docs(index, state.embedder, text))
                answers[way] = [f.point.id for f in answer.results]
                if number >= WARMUP:
                    wall[way].append(w)
                    cpu[way].append(c)
            differ += len({tuple(ids) for ids in answers.values()}) > 1
        state.close()
    shutil.rmtree(scratch, ignore_errors=True)
    return {"home": str(args.home), "questions": len(texts), "compare": args.compare,
            "wall_ms_p50_p95": {w: summary(v) for w, v in wall.items()},
            "cpu_ms_p50_p95": {w: summary(v) for w, v in cpu.items()},
            "answers_differ": differ, "load": load_average()}


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the subcommand and run it; print its JSON."""
    parser = argparse.ArgumentParser(prog="benchmarks.sparse_resident")
    sub = parser.add_subparsers(dest="command", required=True)
    bld = sub.add_parser("build")
    bld.add_argument("--points", type=int, default=100_000)
    bld.add_argument("--dimension", type=int, default=384)
    bld.add_argument("--index", type=Path, required=True)
    mea = sub.add_parser("measure")
    mea.add_argument("--index", type=Path, required=True)
    mea.add_argument("--copy-from", type=Path, help="copy this index file to --index first")
    source = mea.add_mutually_exclusive_group(required=True)
    source.add_argument("--eval", type=Path, help="an eval set folder (questions.jsonl)")
    source.add_argument("--synthetic", type=int, help="this many synthetic queries")
    mea.add_argument("--hybrid", action="store_true", help="time hybrid search too (synthetic)")
    mea.add_argument("--delta", action="store_true", help="then time a delta (writes!)")
    mea.add_argument("--resident-points", type=int, default=None,
                     help="the copy's bound for this run (default: RESIDENT_POINTS)")
    docs = sub.add_parser("search-docs")
    docs.add_argument("--home", type=Path, required=True, help="a built KB_HOME (copied)")
    docs.add_argument("--eval", type=Path, required=True, help="an eval set folder")
    docs.add_argument("--compare", choices=("sparse", "dense"), default="sparse",
                      help="the sparse paths (postings, FTS5) or the exact dense ones")
    den = sub.add_parser("dense")
    den.add_argument("--index", type=Path, required=True)
    den.add_argument("--copy-from", type=Path, help="copy this index file to --index first")
    den.add_argument("--queries", type=int, default=100, help="query vectors")
    den.add_argument("--delta", action="store_true", help="then time a delta (writes!)")
    for p in (bld, mea, docs, den):
        p.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if args.command == "build":
        load_before = load_average()
        seconds = build(args.index, args.points, args.dimension)
        result: dict[str, Any] = {"index": str(args.index), "points": args.points,
                                  "seconds": round(seconds, 1),
                                  "load": [load_before, load_average()]}
    elif args.command == "search-docs":
        result = search_docs_timing(args)
    elif args.command == "dense":
        result = dense(args)
    else:
        result = measure(args)
    text = json.dumps(result, indent=2, default=str)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
