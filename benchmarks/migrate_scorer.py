"""Benchmark: SQLite's sparse scorer against Qdrant's, before and after ``kb migrate`` (issue 15).

Run from the repository root; each subcommand prints JSON (and writes it to ``--out``), from
which benchmarks/results/migrate-2026-12-01-scorer.md was written::

    .venv/bin/python -m benchmarks.migrate_scorer regulatory \\
        --home benchmarks/work/fb/retrieval-regulatory --eval ../shared/corpus/eval/regulatory
    .venv/bin/python -m benchmarks.migrate_scorer scale --points 100000
    .venv/bin/python -m benchmarks.migrate_scorer legacy -- --eval … --home … --variant …

* ``regulatory`` copies the KB_HOME to a temporary folder, migrates its vector index alone
  (``kb_shared.stores.migrate.migrate`` with a Qdrant local-mode folder as the only target)
  and asks every question of the eval set three ways: the SQLite index with the old scorer
  (FTS5 ``bm25()``, ``legacy_sparse_search``), the SQLite index with the new one, and the
  migrated Qdrant folder. It reports identical dense / top-1 / top-10 lists and R@1/R@5/MRR
  per way, then re-runs every sparse search search_docs made at fixed candidate depths
  against a full scoring of every match (how deep the candidates must go).
* ``scale`` builds (or reuses) a synthetic index of ``--points`` chunks
  (``benchmarks.scale_corpus``, 384 dims) and times sparse_search p50/p95 with the old and
  the new scorer, plus the same depth study on its queries.
* ``legacy`` runs ``benchmarks.retrieval`` with the old scorer patched in (the "before"
  column of the retrieval comparison).
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import shutil
import sys
import tempfile
import time
import types
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks.common import kb_environment, latency_summary, load_average, log

#: Candidate depths of the depth study (FTS5 ``bm25()`` candidates re-scored, one round).
DEPTHS = (10, 20, 50, 100, 200, 400, 1000)


def legacy_sparse_search(self: Any, text: str, limit: int, filters: Any) -> list[Any]:
    """The SQLite scorer before issue 15: FTS5 ``bm25()`` itself, ``Hit.score = -bm25``,
    ties by id (kept here only to measure against)."""
    from kb_shared.search.sparse import fts_query  # noqa: PLC0415
    from kb_shared.stores.vectors import Hit  # noqa: PLC0415
    from kb_shared.stores.vectors_sqlite import _in_filters, _stored  # noqa: PLC0415

    match = fts_query(text)
    if match is None:
        return []
    clauses, params = _in_filters(filters, prefix="p.")
    fts, points = self._fts, self._points
    if clauses:
        sql = (
            f"SELECT p.id, p.document, p.kind, p.text, p.payload, bm25({fts}) AS rank "
            f"FROM {fts} JOIN {points} AS p ON p.rowid = {fts}.rowid "
            f"WHERE {fts} MATCH ?{''.join(' AND ' + c for c in clauses)} "
            "ORDER BY rank, p.id LIMIT ?"
        )
    else:
        sql = (
            f"WITH top AS (SELECT rowid, bm25({fts}) AS rank FROM {fts} "
            f"WHERE {fts} MATCH ? ORDER BY rank, rowid LIMIT ?) "
            "SELECT p.id, p.document, p.kind, p.text, p.payload, top.rank "
            f"FROM top JOIN {points} AS p ON p.rowid = top.rowid ORDER BY top.rank, p.id"
        )
    with self._errors("sparse search"):
        rows = self._connection().execute(sql, (match, *params, limit)).fetchall()
    return [Hit(point=_stored(row[:5]), score=-float(row[5])) for row in rows]


def use_legacy(index: Any) -> Any:
    """``index`` (a ``SqliteVectorIndex``) with the old scorer bound to it; returns it."""
    index._sparse_search = types.MethodType(legacy_sparse_search, index)
    return index


def recording(index: Any, calls: list[tuple[str, int, Any, Any]]) -> Any:
    """Wrap ``index.sparse_search`` so each call's ``(text, limit, documents, kinds)`` is
    appended to ``calls``."""
    original = index.sparse_search

    def sparse_search(text: str, limit: int, documents: Any = None, kinds: Any = None) -> Any:
        calls.append((text, limit, None if documents is None else list(documents),
                      None if kinds is None else list(kinds)))
        return original(text, limit, documents, kinds)

    index.sparse_search = sparse_search
    return index


def depth_study(index: Any, calls: Sequence[tuple[str, int, Any, Any]]) -> dict[str, Any]:
    """For each recorded call: the exact answer (every match scored), the answer from one
    round of ``depth`` candidates for each of ``DEPTHS``, and the shipped (bounded) scorer's;
    how many differ from the exact one in ids or order."""
    from kb_shared.stores.vectors_sparse import SparseScorer  # noqa: PLC0415

    shipped = index._scorer

    def answer(scorer: SparseScorer, call: tuple[str, int, Any, Any]) -> list[str]:
        index._scorer = scorer
        text, limit, documents, kinds = call
        return [h.id for h in index.sparse_search(text, limit, documents, kinds)]

    exact_scorer = SparseScorer(index._fts, index._points, index._meta, min_depth=10**9, max_depth=10**9)
    exact = [answer(exact_scorer, call) for call in calls]
    differing: dict[str, int] = {}
    for depth in DEPTHS:
        fixed = SparseScorer(index._fts, index._points, index._meta, depth_factor=0, min_depth=depth,
                             max_depth=depth)
        differing[str(depth)] = sum(answer(fixed, c) != e for c, e in zip(calls, exact,
                                                                           strict=True))
    bounded = SparseScorer(index._fts, index._points, index._meta)
    shipped_differ = sum(answer(bounded, c) != e for c, e in zip(calls, exact, strict=True))
    index._scorer = shipped
    return {
        "calls": len(calls),
        "differ_at_fixed_depth": differing,
        "shipped_differ": shipped_differ,
        "shipped_deepened": bounded.deepened,
        "shipped_capped": bounded.capped,
    }


def regulatory(args: argparse.Namespace) -> dict[str, Any]:
    """The ``regulatory`` subcommand (module docstring)."""
    from qdrant_client import QdrantClient  # noqa: PLC0415

    from benchmarks.retrieval import judge, load_eval_set, score  # noqa: PLC0415
    from kb_mcp.state import open_state  # noqa: PLC0415
    from kb_shared.search.evaluation import Retrieved, relevant  # noqa: PLC0415
    from kb_shared.search.retrieval import search_docs  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415
    from kb_shared.stores.migrate import MigrationTargets, migrate  # noqa: PLC0415
    from kb_shared.stores.vectors_qdrant import QdrantVectorIndex  # noqa: PLC0415
    from kb_shared.stores.vectors_sqlite import SqliteVectorIndex  # noqa: PLC0415

    scratch = Path(tempfile.mkdtemp(prefix="kb-scorer-"))
    home = scratch / "home"
    shutil.copytree(args.home, home)
    folder = scratch / "qdrant"
    with kb_environment(home):
        settings = Settings()
        started = time.perf_counter()
        report = migrate(settings, MigrationTargets(qdrant=str(folder)))
        migrate_seconds = time.perf_counter() - started
    log(f"migrated the vectors in {migrate_seconds:.1f} s: {report.written}")
    state = open_state(settings, use_reranker=False)
    embedder = state.embedder
    embedder.warm()
    new = state.vectors()
    info = new.info
    old = use_legacy(SqliteVectorIndex(new.path))
    old.open(info.model, info.dimension, create=False)
    qdrant = QdrantVectorIndex(QdrantClient(path=str(folder)), settings.qdrant_collection)
    qdrant.open(info.model, info.dimension, create=False)
    calls: list[tuple[str, int, Any, Any]] = []
    recording(new, calls)
    eval_set = load_eval_set(args.eval)
    points = [Retrieved.from_point(p) for p in new.fetch(new.list_ids())]
    ways = {"sqlite-old": old, "sqlite-new": new, "qdrant": qdrant}
    lists: dict[str, dict[str, dict[str, list[str]]]] = {w: {} for w in ways}
    outcomes: dict[str, list[Any]] = {w: [] for w in ways}
    seconds: dict[str, list[float]] = {w: [] for w in ways}
    counts = []
    for question in eval_set.questions:
        vector = embedder.embed_query(question.question)
        for way, index in ways.items():
            dense = [h.id for h in index.dense_search(vector, 10)]
            started = time.perf_counter()
            answer = search_docs(index, embedder, question.question, top_k=10)
            seconds[way].append(time.perf_counter() - started)
            found = [f.point for f in answer.results]
            lists[way][question.id] = {"dense": dense, "docs": [p.id for p in found]}
            if question.answerable:
                outcomes[way].append(judge(question, [Retrieved.from_point(p) for p in found],
                                           answer.best_similarity, answer.low_confidence))
        if question.answerable:
            counts.append(sum(1 for r in points if relevant(question, r)))
    ids = [q.id for q in eval_set.questions]

    def same(a: str, b: str, key: str, top: int | None = None) -> int:
        return sum(lists[a][i][key][:top] == lists[b][i][key][:top] for i in ids)

    comparison = {
        f"{a} vs {b}": {
            "dense top-10": same(a, b, "dense"),
            "search_docs top-1": same(a, b, "docs", 1),
            "search_docs top-10": same(a, b, "docs"),
            "search_docs top-10 as sets": sum(
                set(lists[a][i]["docs"]) == set(lists[b][i]["docs"]) for i in ids),
        }
        for a, b in (("sqlite-old", "qdrant"), ("sqlite-new", "qdrant"),
                     ("sqlite-old", "sqlite-new"))
    }
    quality = {}
    for way in ways:
        scores = score(outcomes[way], counts)
        quality[way] = {
            "n": scores.questions, "R@1": scores.recall_at_1, "R@5": scores.recall_at_5,
            "R@10": scores.recall_at_10, "MRR": scores.mrr, "nDCG@10": scores.ndcg_at_10,
            "page acc": scores.page_accuracy,
            "search_docs p50/p95 ms": [latency_summary(seconds[way]).p50_ms,
                                       latency_summary(seconds[way]).p95_ms],
        }
    log(f"depth study over {len(calls)} sparse searches")
    del new.sparse_search  # the recording wrapper (an instance attribute)
    study = depth_study(new, list(calls))
    for index in (old, new, qdrant):
        index.close()
    state.close()
    shutil.rmtree(scratch, ignore_errors=True)
    return {
        "questions": len(ids), "migrate_seconds": migrate_seconds,
        "written": report.written, "counts": [c.__dict__ if hasattr(c, "__dict__") else
                                              [c.store, c.item, c.source, c.target]
                                              for c in report.counts],
        "comparison": comparison, "quality": quality, "depth_study": study,
        "differing_questions": [i for i in ids if lists["sqlite-new"][i] != lists["qdrant"][i]],
    }


def build_scale_index(path: Path, points: int) -> None:
    """Fill ``path`` with ``points`` synthetic chunks (``benchmarks.scale_corpus``), unless
    it already holds them."""
    from benchmarks.scale_corpus import SyntheticCorpus  # noqa: PLC0415
    from kb_shared.stores.vectors_sqlite import SqliteVectorIndex  # noqa: PLC0415

    index = SqliteVectorIndex(path)
    index.open("synthetic", 384)
    have = index.count()
    corpus = SyntheticCorpus(384)
    started = time.perf_counter()
    for start in range(have, points, 1000):
        index.upsert(corpus.batch(start, min(1000, points - start)))
        if start % 10_000 == 0:
            log(f"{start} points, {time.perf_counter() - started:.0f} s")
    index.close()


def scale(args: argparse.Namespace) -> dict[str, Any]:
    """The ``scale`` subcommand (module docstring)."""
    from benchmarks.scale_corpus import SyntheticCorpus  # noqa: PLC0415
    from kb_shared.search.retrieval import RARE_TERM_MAX_POINTS  # noqa: PLC0415
    from kb_shared.stores.vectors_sqlite import SqliteVectorIndex  # noqa: PLC0415

    path = args.work / f"scorer-{args.points}" / "vectors.sqlite"
    load_before = load_average()
    build_scale_index(path, args.points)
    new = SqliteVectorIndex(path)
    new.open("synthetic", 384, create=False)
    old = use_legacy(SqliteVectorIndex(path))
    old.open("synthetic", 384, create=False)
    queries = SyntheticCorpus(384).queries(args.queries)
    timings: dict[str, list[float]] = {}
    load_start = load_average()
    for limit in (10, 50):
        for q in queries[:5]:  # warm-up, untimed
            old.sparse_search(q.text, limit)
            new.sparse_search(q.text, limit)
        for way, index in (("old", old), ("new", new)):
            timings[f"{way} k={limit}"] = []
            timings[f"{way} k={limit} CPU"] = []
        for q in queries:  # interleaved, so load changes hit both alike
            for way, index in (("old", old), ("new", new)):
                started, cpu = time.perf_counter(), time.process_time()
                index.sparse_search(q.text, limit)
                timings[f"{way} k={limit}"].append(time.perf_counter() - started)
                timings[f"{way} k={limit} CPU"].append(time.process_time() - cpu)
    load_end = load_average()
    latency = {k: [latency_summary(v).p50_ms, latency_summary(v).p95_ms]
               for k, v in timings.items()}
    log(f"latency p50/p95 ms: {latency}; load {load_start} -> {load_end}")
    queries = queries[: args.study]
    codes = [w for q in queries for w in q.text.split() if any(c.isdigit() for c in w)]
    calls = ([(q.text, 10, None, None) for q in queries]
             + [(q.text, 50, None, None) for q in queries]
             + [(c, RARE_TERM_MAX_POINTS + 1, None, None) for c in codes])
    log(f"depth study over {len(calls)} sparse searches")
    study = depth_study(new, calls)
    new.close()
    old.close()
    return {"points": args.points, "queries": len(queries), "latency_ms_p50_p95": latency,
            "load": {"before build": load_before, "timing start": load_start,
                     "timing end": load_end},
            "depth_study": study}


def legacy(argv: Sequence[str]) -> None:
    """Run ``benchmarks.retrieval`` with ``argv`` and the old scorer on every SQLite index."""
    from kb_shared.stores.vectors_sqlite import SqliteVectorIndex  # noqa: PLC0415

    SqliteVectorIndex._sparse_search = legacy_sparse_search
    sys.argv = ["benchmarks.retrieval", *argv]
    runpy.run_module("benchmarks.retrieval", run_name="__main__", alter_sys=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the subcommand and run it; print its JSON."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "legacy":
        legacy([a for a in argv[1:] if a != "--"])
        return 0
    parser = argparse.ArgumentParser(prog="benchmarks.migrate_scorer")
    sub = parser.add_subparsers(dest="command", required=True)
    reg = sub.add_parser("regulatory")
    reg.add_argument("--home", type=Path, required=True)
    reg.add_argument("--eval", type=Path, required=True)
    sca = sub.add_parser("scale")
    sca.add_argument("--points", type=int, default=100_000)
    sca.add_argument("--queries", type=int, default=200)
    sca.add_argument("--study", type=int, default=40, help="queries in the depth study")
    sca.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")))
    for p in (reg, sca):
        p.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    run: Callable[[argparse.Namespace], dict[str, Any]] = (
        regulatory if args.command == "regulatory" else scale)
    result = run(args)
    text = json.dumps(result, indent=2, default=str)
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
