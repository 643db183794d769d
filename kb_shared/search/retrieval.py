"""The search pipeline of search_docs, stage by stage, and its confidence policy: what
search_docs answers, for any caller.

The MCP server, the retrieval benchmark and the tests all rank through here, so the ranking is
one piece of code. It takes a vector reader and models as arguments and returns plain
dataclasses; failures raise ``kb_shared.errors`` types (``QueryError``, ``EmptyCorpusError``,
store and provider errors) that each caller words for its own audience. ``search_docs`` at
the bottom runs the stages in order; each is a function from typed values to a typed value:

1. **Analyse** (``kb_shared.search.query.analyse`` -> ``AnalysedQuery``): the text tokenised
   once (``kb_shared.search.sparse.tokenize``, so codes such as ``IN008-24`` or ``3.1.5`` stay
   one term), its identifier-like words, the acronyms and long forms it names
   (``kb_shared.search.acronyms``, when the caller passes the table), its question shape and
   the editions it asks for. It is embedded with the live model's query-side convention
   (``start_query_embedding``) on a worker thread meanwhile.
2. **Candidates** (``find_candidates`` -> ``Candidates``): dense and sparse candidates plus the
   points that contain a rare identifier of the query whole, fused by weighted reciprocal rank
   fusion (``VectorReader.hybrid_search``; k and weights in ``kb_shared.stores.vectors``, the
   third list's weight ``EXACT_WEIGHT`` here); offline, the definitions a keyword search finds
   and the named statements fusion left below the cut are added once each
   (``definition_candidates``, ``statement_candidates``).
3. **Features and order** (``order_candidates`` -> ``Ordered``): a reranker that re-orders
   (``Reranker.reorders``) orders the candidates and each result's best unit is found after;
   offline (``FusionOrderReranker``) each candidate's features come first
   (``candidate_features``: ``kb_shared.search.retrieval_features``' definitions, section
   numbers, document routing, the best table row or sentence, the financial statement a
   question names, tables) and the fused order is adjusted by them (``feature_order``).
4. **Confidence** (``judge`` -> ``Confidence``): when the best dense cosine is below
   ``NOTHING_FOUND_SIMILARITY``, no identifier of the query matches exactly and no result
   contains ``MIN_TERM_COVERAGE`` of the query's terms, the answer is ``low_confidence`` ("the
   corpus has nothing on this"). So is an answer to a question naming an edition (a financial
   year, a version) that its top documents lack while holding another
   (``kb_shared.search.editions``); ``edition_note`` then says which they hold. The names and
   clause numbers a question asks about that no searched passage mentions ("… of Tesla?",
   looked up in stage 2: ``kb_shared.search.subjects``) are listed in ``absent_names``, a
   caveat the answer leads with, not a reason for low confidence.
5. **Pages and quotes** (``cite``): the page of ``top_k`` results from ``offset``, each citing
   every page its passage is on and carrying a verbatim quote of its best row or sentence with
   that quote's own page (``kb_shared.search.quotes``).
6. **Answer**: a ``DocsAnswer``, with ``next_offset`` when more results exist.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from kb_shared.errors import EmptyCorpusError
from kb_shared.providers.base import Embedder, FusionOrderReranker, Reranker
from kb_shared.search import retrieval_features
from kb_shared.search.acronyms import AcronymTable
from kb_shared.search.citations import Citation, PointPayload
from kb_shared.search.editions import HeldDocument, edition_mismatch
from kb_shared.search.query import (  # re-exported: the names callers import from here
    AnalysedQuery,
    analyse,
    check_query,
    identifier_terms,
    start_query_embedding,
)
from kb_shared.search.quotes import MarkdownPages, Quote, passage_quote
from kb_shared.search.retrieval_features import (
    UnitMatch,
    best_units,
    bonuses,
    defines,
    in_statement,
)
from kb_shared.search.sparse import tokenize
from kb_shared.search.subjects import absent_subjects
from kb_shared.stores.readers import VectorReader
from kb_shared.stores.vectors import (
    CANDIDATE_FACTOR,
    DOCUMENT_KINDS,
    KIND_FIGURE,
    MIN_CANDIDATES,
    Hit,
    StoredPoint,
)

# ---------------------------------------------------------------------------------------------
# Constants (each with where it comes from)
# ---------------------------------------------------------------------------------------------

#: Weight of the third fused list (points containing a rare identifier of the query whole),
#: relative to ``SPARSE_WEIGHT``; chosen by the fusion sweep (benchmarks/results/
#: retrieval-2026-11-30.md, "Fusion constants").
EXACT_WEIGHT = 1.0

#: Best dense cosine below which an answer may be "low confidence"; calibrated on minilm-int8,
#: re-measure when the embedding model changes (benchmarks/results/retrieval-2026-11-30.md,
#: "Nothing-found behaviour"; per-query ranges in tests/mcp/test_retrieval_quality.py).
NOTHING_FOUND_SIMILARITY = 0.36

#: ...unless one result contains at least this share of the query's sparse terms (short
#: on-topic queries get low cosines); same measurement as ``NOTHING_FOUND_SIMILARITY``.
MIN_TERM_COVERAGE = 0.75

#: An identifier-like query term counts as an exact, trustworthy match when it occurs in at
#: least one and at most this many points (a term in every chunk proves nothing). Chosen as the
#: default page size of search_docs: a code that fits on one page of results is specific.
RARE_TERM_MAX_POINTS = 8

#: Fused candidates handed to a reranker that re-orders, and the fewest fused hits search_docs
#: asks for (``MIN_CANDIDATES`` of ``kb_shared.stores.vectors``; Cohere rerank-v3.5 accepts up
#: to 1,000 documents per call).
RERANK_CANDIDATES = 50

#: Fused candidates ``feature_order`` re-orders when no reranker does.
FEATURE_CANDIDATES = 30

#: Fused candidates below the cut that search_docs hands ``statement_candidates``: all of them
#: (two lists of ``CANDIDATE_FACTOR * RERANK_CANDIDATES``; fusion ranks them all anyway).
POOL_TAIL = 2 * CANDIDATE_FACTOR * RERANK_CANDIDATES

#: Points per definition term fetched by keyword for a definition question
#: (``definition_candidates``).
DEFINITION_LOOKUP = 10

#: Points a keyword search for a definition term reads (``definition_hits``): a term in
#: a document's own title ("controlled unclassified information") is in most of its chunks.
DEFINITION_SEARCH = 30

#: Results whose documents ``kb_shared.search.editions.edition_mismatch`` compares with the
#: query's edition: the documents the first answers would come from.
EDITION_DOCUMENTS = 3

#: Offline default: the fused order stands.
_FUSION_ORDER = FusionOrderReranker()

# ---------------------------------------------------------------------------------------------
# Stage 1: the query (``kb_shared.search.query.analyse``), and what one search reads once
# ---------------------------------------------------------------------------------------------

#: Distinct texts whose terms ``text_terms`` keeps: the candidates of one corpus recur from
#: query to query (benchmarks/results/serving-2026-12-01-latency.md).
TERMS_CACHE = 4096


@lru_cache(maxsize=TERMS_CACHE)
def text_terms(text: str) -> frozenset[str]:
    """The distinct ``kb_shared.search.sparse.tokenize`` terms of ``text``, kept per process in a
    bounded LRU keyed by the text itself (a changed chunk is a new key, never a stale hit)."""
    return frozenset(tokenize(text))


def _analysed(query: AnalysedQuery | str) -> AnalysedQuery:
    """``query`` itself when analysed, else ``analyse(query)`` (no acronym table)."""
    return query if isinstance(query, AnalysedQuery) else analyse(query)


class PayloadsOf:
    """``PointPayload.from_payload`` of each point a search looks at, parsed once per search
    (memo by point id); call with a ``StoredPoint``."""

    def __init__(self) -> None:
        self._parsed: dict[str, PointPayload] = {}

    def __call__(self, point: StoredPoint) -> PointPayload:
        """The point's parsed payload."""
        parsed = self._parsed.get(point.id)
        if parsed is None:
            parsed = self._parsed[point.id] = PointPayload.from_payload(point.payload)
        return parsed


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Passage:
    """One result of search_docs, one excerpt of search_graph, or one chunk read by read_doc.

    Attributes:
        number: its number in the rendering (``[number]``), 1-based; search pages continue it
            (page 2 of 8 starts at 9).
        point: the stored chunk or figure.
        payload: its typed payload (``PointPayload``, written at ingestion).
        citation: its citation fields.
        score: fused RRF score, or the reranker's relevance; 0.0 where nothing was ranked.
        similarity: cosine of the query and the point's dense vector, when a dense candidate.
        sparse_rank: its rank on the sparse (keyword) side, ``None`` when not a candidate.
        quote: its best sentence or row and that one's page (``kb_shared.search.quotes``); ``None``
            for figures and where no quote was asked for (search_graph, read_doc).
    """

    number: int
    point: StoredPoint
    payload: PointPayload
    citation: Citation
    score: float = 0.0
    similarity: float | None = None
    sparse_rank: int | None = None
    quote: Quote | None = None

    @classmethod
    def of(
        cls,
        point: StoredPoint,
        number: int,
        *,
        score: float = 0.0,
        similarity: float | None = None,
        sparse_rank: int | None = None,
        citation: Citation | None = None,
        payload: PointPayload | None = None,
        quote: Quote | None = None,
    ) -> Passage:
        """The passage of a stored point, its payload parsed once (or ``payload``, already
        parsed); ``citation`` replaces the payload's."""
        payload = payload if payload is not None else PointPayload.from_payload(point.payload)
        cite = citation if citation is not None else payload.citation
        return cls(number, point, payload, cite, score, similarity, sparse_rank, quote)

    @property
    def is_figure(self) -> bool:
        """True for a figure point."""
        return self.point.kind == KIND_FIGURE

    @property
    def chunk_number(self) -> int | None:
        """The 0-based chunk index (what read_doc takes), ``None`` for figures."""
        return None if self.is_figure else self.payload.chunk_index

    @property
    def figure_number(self) -> int | None:
        """The 1-based figure number, ``None`` for chunks (or a figure without one)."""
        figure = self.payload.figure
        return figure.number if self.is_figure and figure is not None else None


@dataclass(frozen=True, slots=True)
class DocsAnswer:
    """What search_docs found.

    Attributes:
        results: the page of results, best first.
        offset / top_k: the page asked for.
        next_offset: the offset of the next page, ``None`` on the last page.
        best_similarity: the best dense cosine similarity over the whole (filtered) corpus.
        exact_terms: identifier-like query terms that matched at most
            ``RARE_TERM_MAX_POINTS`` points exactly.
        coverage: the best share of the query's sparse terms found in one result (0–1).
        low_confidence: the corpus probably has nothing on the query (module docstring, 6).
        edition_note: why, when the query asks for an edition the corpus lacks
            (``kb_shared.search.editions.EditionMismatch.message``); ``None`` otherwise.
        reranked: a reranker that re-orders ordered the results.
        absent_names: names and clause numbers the query asks about that no searched passage
            mentions (``kb_shared.search.subjects``): a caveat, low confidence aside.
    """

    results: list[Passage]
    offset: int
    top_k: int
    next_offset: int | None
    best_similarity: float | None
    exact_terms: list[str] = field(default_factory=list)
    coverage: float = 0.0
    low_confidence: bool = False
    reranked: bool = False
    edition_note: str | None = None
    absent_names: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------
# Stage 2: candidates
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SearchScope:
    """Where a search looks.

    Attributes:
        documents: doc_ids (serving keys) to search in; ``None`` = all.
        kinds: point kinds to search (``DOCUMENT_KINDS`` or one of them).
    """

    documents: Sequence[str] | None
    kinds: list[str]


@dataclass(frozen=True, slots=True)
class Candidates:
    """What the stores found for a query (stage 2).

    Attributes:
        pool: the fused candidates best first (``Hit.score``: the fused score), then offline
            the points ``definition_candidates`` and ``statement_candidates`` added.
        best_similarity: the best dense cosine over the scope (``hybrid_candidates``).
        exact: identifier-like query terms found whole in a few points, with those points
            (``exact_identifier_matches``).
        rest: the fused candidates below ``pool``, in fused order, none of them in it: what
            a page deeper than the re-ordered pool shows.
        absent: the query's names that no point of the documents searched mentions, whatever
            kind was asked for (``absent_subjects``).
    """

    pool: list[Hit]
    best_similarity: float | None
    exact: dict[str, list[Hit]]
    rest: list[Hit] = field(default_factory=list)
    absent: tuple[str, ...] = ()


def exact_identifier_matches(
    index: VectorReader,
    query: AnalysedQuery | str,
    documents: Sequence[str] | None,
    kinds: Sequence[str] | None,
) -> dict[str, list[Hit]]:
    """Identifier-like query terms found whole in between 1 and ``RARE_TERM_MAX_POINTS``
    points, each with those points (best BM25 first), in query order.

    ``query`` is analysed here when given as a string. The sparse side ranks by BM25 over every
    term (a compound and its parts), so each hit is re-checked: its own text must contain the
    whole term. One sparse search per identifier.
    """
    matched: dict[str, list[Hit]] = {}
    for term in _analysed(query).identifiers:
        hits = index.sparse_search(term, RARE_TERM_MAX_POINTS + 1, documents, kinds)
        exact = [h for h in hits if term in text_terms(h.point.text)]
        if 1 <= len(exact) <= RARE_TERM_MAX_POINTS:
            matched[term] = exact
    return matched


def hybrid_candidates(
    index: VectorReader,
    vector: Sequence[float] | np.ndarray | Future[np.ndarray],
    query: str,
    limit: int,
    documents: Sequence[str] | None,
    kinds: Sequence[str] | None,
    exact: Sequence[Hit] = (),
    tail: int = 0,
) -> tuple[list[Hit], float | None]:
    """``hybrid_search`` of the keyword text ``query`` (``AnalysedQuery.sparse_text``) with
    ``exact`` as a third fused list (weight ``EXACT_WEIGHT``), at most ``limit`` hits (and up
    to ``tail`` more after them: the fused candidates below the cut, for
    ``statement_candidates``), plus the best dense cosine of the query over the filtered index
    (``None`` when it holds no matching point). Each side is searched
    ``max(MIN_CANDIDATES, CANDIDATE_FACTOR * max(limit, RERANK_CANDIDATES))`` deep
    (``kb_shared.stores.vectors``), whatever ``tail``: callers keep ``limit`` fixed and ask
    for deeper pages by ``tail``, so every page is cut from one fused list.

    The best cosine is the dense rank-1 candidate's; when fusion pushed that point below the
    cut, one more dense query fetches it, so "nothing found" never depends on fusion constants.
    A ``vector`` still being computed (``start_query_embedding``) is waited for after the
    sparse side is searched.
    """
    wanted = max(limit, RERANK_CANDIDATES)
    depth = max(MIN_CANDIDATES, CANDIDATE_FACTOR * wanted)
    sparse = index.sparse_search(query, depth, documents, kinds)
    if isinstance(vector, Future):
        vector = vector.result()
    hits = index.hybrid_search(
        vector, query, wanted + tail, documents, kinds, candidates=depth,
        extra=[(exact, EXACT_WEIGHT)] if exact else (), sparse=sparse,
    )
    similarities = [h.dense_score for h in hits if h.dense_rank == 1]
    if similarities:
        best = similarities[0]
    else:
        top = index.dense_search(vector, 1, documents, kinds)
        best = top[0].score if top else None
    return hits[: limit + tail], best


def definition_hits(
    index: VectorReader,
    query: AnalysedQuery | str,
    documents: Sequence[str] | None,
    kinds: Sequence[str] | None,
) -> list[Hit]:
    """For a definition question (``retrieval_features.definition_terms``), the points a
    keyword search for each term finds (``DEFINITION_SEARCH`` a term, term by term, best
    first) that define one of the terms (``defines``); ``[]`` for any other question.
    Needs no query vector: search_docs runs it while the query is still being embedded."""
    terms = _analysed(query).shape.definition_terms
    if not terms:
        return []
    return [
        hit
        for term in terms
        for hit in index.sparse_search(term, DEFINITION_SEARCH, documents, kinds)
        if defines(hit.point.text, terms)
    ]


def definition_candidates(pool: Sequence[Hit], found: Sequence[Hit]) -> list[Hit]:
    """The points of ``found`` (``definition_hits``) not in ``pool``, once each in their
    order: a long glossary table ranks low on meaning and on BM25 but holds the answer. Each
    enters with the score of the pool's ``DEFINITION_LOOKUP``-th hit (its bonus decides the
    rest)."""
    if not pool or not found:
        return []
    have = {h.id for h in pool}
    floor = pool[min(DEFINITION_LOOKUP, len(pool)) - 1].score
    added: dict[str, Hit] = {}
    for hit in found:
        if hit.id not in have and hit.id not in added:
            added[hit.id] = Hit(hit.point, floor)
    return list(added.values())


def statement_candidates(
    query: AnalysedQuery | str,
    pool: Sequence[Hit],
    rest: Sequence[Hit],
    payload_of: PayloadsOf | None = None,
) -> list[Hit]:
    """For a question naming a financial statement (``retrieval_features.statements_named``:
    "… shown in the balance sheet"), the statement's own passages (``in_statement``) among
    ``rest`` (what the keyword and meaning searches found but fusion ranked below ``pool``):
    a statement is a table of numbers that ranks low on meaning. Each enters with the score
    of the pool's ``DEFINITION_LOOKUP``-th hit (its bonuses decide the rest). No search of its
    own: ``rest`` is ``hybrid_candidates``' tail (``POOL_TAIL``)."""
    names = _analysed(query).shape.statements
    if not names or not pool:
        return []
    payload_of = payload_of or PayloadsOf()
    have = {h.id for h in pool}
    floor = pool[min(DEFINITION_LOOKUP, len(pool)) - 1].score
    return [
        Hit(h.point, floor)
        for h in rest
        if h.id not in have and in_statement(payload_of(h.point), h.point.text, names)
    ]


def find_candidates(
    index: VectorReader,
    query: AnalysedQuery,
    vector: Sequence[float] | np.ndarray | Future[np.ndarray],
    scope: SearchScope,
    wanted: int,
    reorders: bool,
    payload_of: PayloadsOf,
) -> Candidates:
    """Stage 2 (module docstring): the identifier and named-subject look-ups and, offline, the
    definition look-ups (keyword only, while ``vector`` is computed), then the fused
    candidates: the pool
    stage 3 re-orders (``RERANK_CANDIDATES`` for a reranker that ``reorders``, else
    ``FEATURE_CANDIDATES`` plus the pull-ins, each point once) and, below it, the fused rest
    up to ``wanted`` in all. The pool is the same for every ``wanted``, so a deeper page is
    cut from the same ranking as the first (paging never repeats or skips a result). Raises
    as the index."""
    documents, kinds = scope.documents, scope.kinds
    exact = exact_identifier_matches(index, query, documents, kinds)
    exact_hits = [hit for found in exact.values() for hit in found]
    # names are looked up in every kind of the documents searched: a figure's short caption
    # rarely repeats the name its document is about
    absent = absent_subjects(index, query.subjects, documents, list(DOCUMENT_KINDS))
    if reorders:
        fused, best = hybrid_candidates(
            index, vector, query.sparse_text, RERANK_CANDIDATES, documents, kinds, exact_hits,
            tail=max(0, wanted - RERANK_CANDIDATES),
        )
        return Candidates(
            fused[:RERANK_CANDIDATES], best, exact, fused[RERANK_CANDIDATES:], absent
        )
    defined = definition_hits(index, query, documents, kinds)
    size = FEATURE_CANDIDATES
    fused, best = hybrid_candidates(
        index, vector, query.sparse_text, size, documents, kinds, exact_hits,
        tail=max(POOL_TAIL, wanted - size),
    )
    pool = fused[:size]
    added = [
        *definition_candidates(pool, defined),
        *statement_candidates(query, pool, fused[size : size + POOL_TAIL], payload_of),
    ]
    seen = {h.id for h in pool}
    for hit in added:  # a statement's passage may also be a definition: once
        if hit.id not in seen:
            seen.add(hit.id)
            pool.append(hit)
    return Candidates(pool, best, exact, [h for h in fused[size:] if h.id not in seen], absent)


# ---------------------------------------------------------------------------------------------
# Stage 3: features and order
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Features:
    """Each candidate's features (parallel to the candidates).

    Attributes:
        matches: its best unit for the question (``retrieval_features.best_units``).
        bonuses: what its features add to its fused score (``retrieval_features.bonuses``,
            plus the definition bonus for spelling out an asked abbreviation).
    """

    matches: list[UnitMatch | None]
    bonuses: list[float]


@dataclass(frozen=True, slots=True)
class Ordered:
    """The candidates in answer order (stage 3), parallel lists.

    Attributes:
        hits: the ordered candidates, at most the ``wanted`` asked for.
        scores: each one's score (fused score plus bonus, or the reranker's relevance).
        matches: each one's best unit, the source of its quote.
    """

    hits: list[Hit]
    scores: list[float]
    matches: list[UnitMatch | None]


def candidate_features(
    query: AnalysedQuery, pool: Sequence[Hit], payload_of: PayloadsOf
) -> Features:
    """The ``Features`` of each of ``pool``: its best unit, and its bonus. A passage that
    spells out the abbreviation the query asks about (``AnalysedQuery.spells_out``) earns the
    definition bonus (``FeatureWeights.definition``) unless it already earned it."""
    payloads = [payload_of(h.point) for h in pool]
    texts = [h.point.text for h in pool]
    matches = best_units(query.shape, texts, payloads)
    extra = bonuses(query.shape, texts, payloads, matches=matches)
    if query.spells_out is not None:
        terms = query.shape.definition_terms
        weight = retrieval_features.DEFAULT_FEATURES.definition  # as rebound by benchmarks
        extra = [
            bonus + weight if query.spells_out(text) and not (terms and defines(text, terms))
            else bonus
            for bonus, text in zip(extra, texts, strict=True)
        ]
    return Features(matches, extra)


def feature_order(
    query: AnalysedQuery | str,
    pool: Sequence[Hit],
    limit: int,
    payload_of: PayloadsOf | None = None,
    spells_out: Callable[[str], bool] | None = None,
) -> tuple[list[Hit], list[float], list[UnitMatch | None]]:
    """``pool`` re-ordered by fused score plus its features' bonus (``candidate_features``;
    stable: equal scores keep the fused order), cut to ``limit``; returns the hits, their
    scores and their best units. ``payload_of``: the search's payloads. ``spells_out``
    replaces the query's (``AnalysedQuery.spells_out``) when given."""
    analysed = _analysed(query)
    if spells_out is not None:
        analysed = replace(analysed, spells_out=spells_out)
    found = candidate_features(analysed, pool, payload_of or PayloadsOf())
    extra = found.bonuses
    order = sorted(range(len(pool)), key=lambda i: -(pool[i].score + extra[i]))[:limit]
    return (
        [pool[i] for i in order],
        [pool[i].score + extra[i] for i in order],
        [found.matches[i] for i in order],
    )


def order_candidates(
    query: AnalysedQuery,
    found: Candidates,
    wanted: int,
    reranker: Reranker,
    payload_of: PayloadsOf,
) -> Ordered:
    """Stage 3 (module docstring): the first ``wanted`` candidates in answer order: the pool
    ordered whole, by the reranker when it ``reorders`` (their best units found after, weighed
    over the pool), else by ``feature_order``, then ``found.rest`` in fused order (its fused
    scores; best units weighed over the whole rest). A result's place and quote are the same
    whichever page asks for it. Raises as ``reranker.rerank`` (``RerankError``)."""
    pool = found.pool
    if not reranker.reorders:
        hits, scores, matches = feature_order(query, pool, len(pool), payload_of)
    else:
        order = reranker.rerank(query.text, [h.point.text for h in pool], top_n=len(pool))
        hits = [pool[i] for i, _ in order]
        scores = [float(s) for _, s in order]
        matches = best_units(
            query.shape, [h.point.text for h in hits], [payload_of(h.point) for h in hits]
        )
    below = max(0, wanted - len(hits))
    if below and found.rest:  # a page deeper than the ordered pool
        rest = found.rest  # best units weighed over all of it: the same on every page
        hits = [*hits, *rest[:below]]
        scores = [*scores, *(h.score for h in rest[:below])]
        matches = [*matches, *best_units(
            query.shape, [h.point.text for h in rest], [payload_of(h.point) for h in rest]
        )[:below]]
    return Ordered(hits[:wanted], scores[:wanted], matches[:wanted])


# ---------------------------------------------------------------------------------------------
# Stage 4: confidence
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Confidence:
    """How far the answer can be trusted (stage 4; module docstring, 4).

    Attributes:
        coverage: the best share of the query's terms in one ordered result (0–1).
        low_confidence: the corpus probably has nothing on the query.
        edition_note: why, when the query asks for an edition the corpus lacks; else ``None``.
        absent_names: the query's names no searched passage mentions (``Candidates.absent``).
    """

    coverage: float
    low_confidence: bool
    edition_note: str | None
    absent_names: tuple[str, ...] = ()


def term_coverage(
    query: AnalysedQuery, point: StoredPoint, payload: PointPayload | None = None
) -> float:
    """Share of the query's distinct sparse terms that occur in the point's text, section,
    title or figure caption; ``0.0`` for a query without terms. ``payload``: the point's,
    when already parsed."""
    if not query.terms:
        return 0.0
    if payload is None:
        payload = PointPayload.from_payload(point.payload)
    caption = payload.figure.caption if payload.figure is not None else ""
    context = " ".join((payload.section, payload.title, caption))
    have = text_terms(f"{point.text}\n{context}")
    return len(query.terms & have) / len(query.terms)


def _held(payload: PointPayload) -> HeldDocument:
    return HeldDocument(payload.name, payload.title or "", payload.version or "")


def judge(
    query: AnalysedQuery, found: Candidates, ordered: Ordered, payload_of: PayloadsOf
) -> Confidence:
    """Stage 4: the confidence rule over every ordered result (not only the page asked for),
    the edition check over the documents of the first ``EDITION_DOCUMENTS``; the names stage 2
    found in no searched passage (``Candidates.absent``) are passed on as a caveat."""
    hits = ordered.hits
    coverage = max(
        (term_coverage(query, hit.point, payload_of(hit.point)) for hit in hits), default=0.0
    )
    best = found.best_similarity
    low = (
        not found.exact
        and coverage < MIN_TERM_COVERAGE
        and (best is None or best < NOTHING_FOUND_SIMILARITY)
    )
    mismatch = edition_mismatch(
        query.editions, [_held(payload_of(hit.point)) for hit in hits[:EDITION_DOCUMENTS]]
    )
    note = mismatch.message() if mismatch is not None else None
    return Confidence(coverage, low or mismatch is not None, note, found.absent)


# ---------------------------------------------------------------------------------------------
# Stage 5: pages and quotes
# ---------------------------------------------------------------------------------------------


def cite(
    ordered: Ordered,
    offset: int,
    top_k: int,
    payload_of: PayloadsOf,
    markdown: MarkdownPages | None,
) -> list[Passage]:
    """Stage 5: the ``top_k`` ordered results from ``offset`` as numbered ``Passage`` s
    (``offset + 1`` first), each text or table result with the quote of its best unit and
    that quote's page (``kb_shared.search.quotes.passage_quote``; ``markdown`` for chunks
    indexed without page runs)."""
    ranked = list(zip(ordered.hits, ordered.scores, ordered.matches, strict=True))
    return [
        Passage.of(
            hit.point, offset + position, score=score, similarity=hit.dense_score,
            sparse_rank=hit.sparse_rank, payload=payload_of(hit.point),
            quote=None if hit.point.kind == KIND_FIGURE else passage_quote(
                payload_of(hit.point), hit.point.text, match, markdown
            ),
        )
        for position, (hit, score, match) in enumerate(ranked[offset : offset + top_k], start=1)
    ]


# ---------------------------------------------------------------------------------------------
# The pipeline
# ---------------------------------------------------------------------------------------------


def search_docs(
    index: VectorReader,
    embedder: Embedder,
    query: str,
    *,
    top_k: int = 8,
    offset: int = 0,
    documents: Sequence[str] | None = None,
    kind: str | None = None,
    reranker: Reranker = _FUSION_ORDER,
    markdown: MarkdownPages | None = None,
    vector: Future[np.ndarray] | None = None,
    acronyms: AcronymTable | None = None,
) -> DocsAnswer:
    """Hybrid search, one page of results: the stages of the module docstring in order.

    Args:
        index: the opened vector index (built with ``embedder``).
        embedder: the live model.
        query: the checked query (``check_query``).
        top_k: results per page, >= 1.
        offset: results to skip (a previous answer's ``next_offset``), >= 0.
        documents: doc_ids to search in; ``None`` = all.
        kind: ``text``, ``table`` or ``figure`` to search one kind only; ``None`` = all of
            ``DOCUMENT_KINDS`` (never a registered reference page: find_reference's).
        reranker: orders the fused candidates when ``reranker.reorders``.
        markdown: the documents' Markdown, where a chunk indexed without located page runs
            finds its quote's page (``kb_shared.search.quotes.passage_quote``).
        vector: ``start_query_embedding(embedder, query)`` when the caller started it (the MCP
            tool does, before it reads the catalog); started here when ``None``.
        acronyms: the corpus's abbreviation pairs (``kb_shared.search.acronyms``); given, the
            keyword side also searches the long form of a short form the query names and the
            short form of a long form (``AcronymTable.sparse_text``); ``None``: the query as is.

    Raises:
        EmptyCorpusError: the index holds no points at all.
        ValueError: ``top_k`` < 1 or ``offset`` < 0.
        EmbeddingError / ProviderError: the embedder failed.
    """
    if top_k < 1 or offset < 0:
        raise ValueError(f"top_k must be >= 1 and offset >= 0, got {top_k} and {offset}")
    if vector is None:
        vector = start_query_embedding(embedder, query)
    analysed = analyse(query, acronyms)  # 1
    scope = SearchScope(documents, [kind] if kind else list(DOCUMENT_KINDS))
    wanted = offset + top_k + 1  # one more than the page: tells whether a next page exists
    payload_of = PayloadsOf()
    found = find_candidates(  # 2
        index, analysed, vector, scope, wanted, reranker.reorders, payload_of
    )
    ordered = order_candidates(analysed, found, wanted, reranker, payload_of)  # 3
    if not ordered.hits and not any(index.count(kind=k) for k in DOCUMENT_KINDS):
        raise EmptyCorpusError("the vector index holds no points")
    confidence = judge(analysed, found, ordered, payload_of)  # 4
    page = cite(ordered, offset, top_k, payload_of, markdown)  # 5
    return DocsAnswer(  # 6
        results=page,
        offset=offset,
        top_k=top_k,
        next_offset=offset + top_k if len(ordered.hits) > offset + top_k else None,
        best_similarity=found.best_similarity,
        exact_terms=list(found.exact),
        coverage=confidence.coverage,
        low_confidence=confidence.low_confidence,
        reranked=reranker.reorders,
        edition_note=confidence.edition_note,
        absent_names=confidence.absent_names,
    )
