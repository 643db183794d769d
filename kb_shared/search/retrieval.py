"""Hybrid passage retrieval and its confidence policy: what search_docs answers, for any caller.

The MCP server, the retrieval benchmark and the tests all rank through here, so the ranking is
one piece of code. It takes a vector reader and models as arguments and returns plain
dataclasses; failures raise ``kb_shared.errors`` types (``QueryError``, ``EmptyCorpusError``,
store and provider errors) that each caller words for its own audience.

1. The query is analysed once (``analyse``): its sparse terms (``kb_shared.search.sparse.tokenize``,
   so codes such as ``IN008-24`` or ``3.1.5`` stay one term) and its identifier-like words.
2. It is embedded with the live model's query-side convention (``Embedder.embed_query``), on
   a worker thread (``start_query_embedding``) while the identifier look-ups and the sparse
   side run.
3. Dense and sparse candidates (the sparse side also searching the acronyms and long forms
   the query names, ``kb_shared.search.acronyms``, when the caller passes the table), plus the points
   that contain a rare identifier of the query whole, are fused by weighted reciprocal rank
   fusion (``VectorIndex.hybrid_search``; k and weights in ``kb_shared.stores.vectors``, the
   third list's weight ``EXACT_WEIGHT`` here).
4. A reranker that re-orders (``Reranker.reorders``) orders the fused candidates; offline
   (``FusionOrderReranker``) the fused order is adjusted by question-shaped signals instead
   (``kb_shared.search.retrieval_features``: definitions, section numbers, document routing, the
   best table row or sentence, the financial statement a question names, tables), after the
   definitions a keyword search finds and the named statements fusion left below the cut
   were added once each (``definition_candidates``, ``statement_candidates``).
5. A page of ``top_k`` results from ``offset`` is returned, with ``next_offset`` when more exist.
   Each result cites every page its passage is on and carries a verbatim quote of its best row
   or sentence with that quote's own page (``kb_shared.search.quotes``).
6. Confidence: when the best dense cosine is below ``NOTHING_FOUND_SIMILARITY``, no identifier
   of the query matches exactly and no result contains ``MIN_TERM_COVERAGE`` of the query's
   terms, the answer is ``low_confidence`` ("the corpus has nothing on this"). So is an answer
   to a question naming an edition (a financial year, a version) that its top documents lack
   while holding another (``kb_shared.search.editions``); ``edition_note`` then says which they hold.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache, partial

import numpy as np

from kb_shared.search import retrieval_features
from kb_shared.search.acronyms import AcronymTable
from kb_shared.search.citations import Citation, PointPayload
from kb_shared.search.editions import HeldDocument, edition_mismatch
from kb_shared.search.retrieval_features import (
    UnitMatch,
    best_units,
    bonuses,
    defines,
    definition_terms,
    in_statement,
    statements_named,
)
from kb_shared.errors import EmptyCorpusError, QueryError
from kb_shared.providers.base import Embedder, FusionOrderReranker, Reranker
from kb_shared.search.quotes import MarkdownPages, Quote, passage_quote
from kb_shared.search.sparse import tokenize
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

#: Offline default: the fused order stands.
_FUSION_ORDER = FusionOrderReranker()

#: Worker threads of ``start_query_embedding``: concurrent searches beyond this many wait for
#: one (the model already spreads one query over the cores it is given).
QUERY_EMBEDDING_THREADS = 8

#: Years and financial-year ranges (``2025``, ``2025-26``, ``2020/21``): never identifiers.
_YEAR = re.compile(r"(?:19|20)\d\d(?:[-/\u2013](?:\d\d|(?:19|20)\d\d))?")

#: A raw query word (split on spaces and punctuation that never occurs inside a code).
_RAW_TERM = re.compile(r"[^\s,;:!?()\[\]{}\"'“”‘’]+")


# ---------------------------------------------------------------------------------------------
# The query
# ---------------------------------------------------------------------------------------------

_embedding_pool: ThreadPoolExecutor | None = None
_embedding_pool_lock = threading.Lock()


def _forget_embedding_pool() -> None:
    # a forked child has none of the parent's threads: its first search starts a new pool
    global _embedding_pool
    _embedding_pool = None


os.register_at_fork(after_in_child=_forget_embedding_pool)


def start_query_embedding(embedder: Embedder, query: str) -> Future[np.ndarray]:
    """Begin ``embedder.embed_query(query)`` on a worker thread and return its future, so the
    caller's catalog reads, the identifier look-ups and the sparse search run while the model
    works (onnxruntime and the C engines release the GIL; benchmarks/results/
    serving-2026-12-02-latency-round5.md). ``result()`` returns the ``(dimension,)`` float32
    vector or re-raises the embedder's error (``EmbeddingError``, ``ProviderError``).
    """
    global _embedding_pool
    with _embedding_pool_lock:
        if _embedding_pool is None:
            _embedding_pool = ThreadPoolExecutor(
                QUERY_EMBEDDING_THREADS, thread_name_prefix="kb-query-embedding"
            )
        pool = _embedding_pool
    return pool.submit(embedder.embed_query, query)


def check_query(query: str, max_chars: int) -> str:
    """Return the stripped query.

    Raises:
        QueryError: empty, or longer than ``max_chars`` (``Settings.max_query_chars``).
    """
    if len(query) > max_chars:
        raise QueryError(
            f"the query is {len(query):,} characters long; the limit is {max_chars:,}. Search "
            "with the key terms, codes or a one-sentence question instead of a whole passage."
        )
    text = query.strip()
    if not text:
        raise QueryError("the query is empty; pass the words, clause number or code to look for")
    return text


def identifier_terms(query: str) -> list[str]:
    """The identifier-like words of a query, as sparse-index terms (case-folded, whole).

    A word of at least two characters counts when it contains a digit (``IN008-24``,
    ``3.1.5``, ``SO_OP_3705``, ``BW01``) or an upper-case letter after its first character
    (``UIGFSurplus``, ``RREG``); plain words (``Dispatch``, ``left-hand``) and single digits do
    not. Years and financial-year ranges are not identifiers: they qualify many passages of a
    document, so boosting them favours whichever passage repeats the year. Each is returned as
    its first ``kb_shared.search.sparse.tokenize`` term, i.e. the whole compound.
    """
    terms: list[str] = []
    for raw in _RAW_TERM.findall(query):
        word = raw.strip(".-_/")
        if not word or _YEAR.fullmatch(word):
            continue
        has_digit = any(ch.isdigit() for ch in word)
        inner_upper = any(ch.isupper() for ch in word[1:])
        if len(word) < 2 or not (has_digit or inner_upper):
            continue
        tokens = tokenize(word)
        if tokens and tokens[0] not in terms:
            terms.append(tokens[0])
    return terms


@dataclass(frozen=True, slots=True)
class AnalysedQuery:
    """A query analysed once and passed down, so no step tokenises it again.

    Attributes:
        text: the query as the stores receive it (their sparse side tokenises it itself).
        terms: its distinct sparse terms (``kb_shared.search.sparse.tokenize``).
        identifiers: its identifier-like terms in query order (``identifier_terms``).
    """

    text: str
    terms: frozenset[str]
    identifiers: tuple[str, ...]


def analyse(query: str) -> AnalysedQuery:
    """Tokenise ``query`` once into an ``AnalysedQuery``."""
    return AnalysedQuery(
        text=query, terms=frozenset(tokenize(query)), identifiers=tuple(identifier_terms(query))
    )


#: Distinct texts whose terms ``text_terms`` keeps: the candidates of one corpus recur from
#: query to query (benchmarks/results/serving-2026-12-01-latency.md).
TERMS_CACHE = 4096


@lru_cache(maxsize=TERMS_CACHE)
def text_terms(text: str) -> frozenset[str]:
    """The distinct ``kb_shared.search.sparse.tokenize`` terms of ``text``, kept per process in a
    bounded LRU keyed by the text itself (a changed chunk is a new key, never a stale hit)."""
    return frozenset(tokenize(text))


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


# ---------------------------------------------------------------------------------------------
# Ranking
# ---------------------------------------------------------------------------------------------


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
    analysed = analyse(query) if isinstance(query, str) else query
    matched: dict[str, list[Hit]] = {}
    for term in analysed.identifiers:
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
    """``hybrid_search`` with ``exact`` as a third fused list (weight ``EXACT_WEIGHT``), at
    most ``limit`` hits (and up to ``tail`` more after them: the fused candidates below the
    cut, for ``statement_candidates``), plus the best dense cosine of the query over the filtered
    index (``None`` when it holds no matching point). Each side is searched
    ``max(MIN_CANDIDATES, CANDIDATE_FACTOR * max(limit, RERANK_CANDIDATES))`` deep
    (``kb_shared.stores.vectors``), whatever ``tail``.

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


#: Results whose documents ``kb_shared.search.editions.edition_mismatch`` compares with the query's
#: edition: the documents the first answers would come from.
EDITION_DOCUMENTS = 3


#: Fused candidates ``feature_order`` re-orders when no reranker does.
FEATURE_CANDIDATES = 30


def feature_order(
    query: str,
    pool: Sequence[Hit],
    limit: int,
    payload_of: PayloadsOf | None = None,
    spells_out: Callable[[str], bool] | None = None,
) -> tuple[list[Hit], list[float], list[UnitMatch | None]]:
    """``pool`` re-ordered by fused score plus ``retrieval_features.bonuses`` (stable: equal
    scores keep the fused order), cut to ``limit``; returns the hits, their scores and their
    best units (``retrieval_features.best_units``). ``payload_of``: the search's payloads.
    ``spells_out``: true of a text that spells out the abbreviation the query asks about
    (``AcronymTable.spells_out``); such a passage earns the definition bonus
    (``FeatureWeights.definition``) unless it already earned it."""
    payload_of = payload_of or PayloadsOf()
    payloads = [payload_of(h.point) for h in pool]
    texts = [h.point.text for h in pool]
    matches = best_units(query, texts, payloads)
    extra = bonuses(query, texts, payloads, matches=matches)
    if spells_out is not None:
        terms = definition_terms(query)
        weight = retrieval_features.DEFAULT_FEATURES.definition  # as rebound by benchmarks
        extra = [
            bonus + weight if spells_out(text) and not (terms and defines(text, terms)) else bonus
            for bonus, text in zip(extra, texts, strict=True)
        ]
    order = sorted(range(len(pool)), key=lambda i: -(pool[i].score + extra[i]))[:limit]
    return (
        [pool[i] for i in order],
        [pool[i].score + extra[i] for i in order],
        [matches[i] for i in order],
    )


#: Fused candidates below the cut that search_docs hands ``statement_candidates``: all of them
#: (two lists of ``CANDIDATE_FACTOR * RERANK_CANDIDATES``; fusion ranks them all anyway).
POOL_TAIL = 2 * CANDIDATE_FACTOR * RERANK_CANDIDATES


#: Points per definition term fetched by keyword for a definition question
#: (``definition_candidates``).
DEFINITION_LOOKUP = 10

#: Points a keyword search for a definition term reads (``definition_hits``): a term in
#: a document's own title ("controlled unclassified information") is in most of its chunks.
DEFINITION_SEARCH = 30


def definition_hits(
    index: VectorReader,
    query: str,
    documents: Sequence[str] | None,
    kinds: Sequence[str] | None,
) -> list[Hit]:
    """For a definition question (``retrieval_features.definition_terms``), the points a
    keyword search for each term finds (``DEFINITION_SEARCH`` a term, term by term, best
    first) that define one of the terms (``defines``); ``[]`` for any other question.
    Needs no query vector: search_docs runs it while the query is still being embedded."""
    terms = definition_terms(query)
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
    query: str, pool: Sequence[Hit], rest: Sequence[Hit], payload_of: PayloadsOf | None = None
) -> list[Hit]:
    """For a question naming a financial statement (``retrieval_features.statements_named``:
    "… shown in the balance sheet"), the statement's own passages (``in_statement``) among
    ``rest`` (what the keyword and meaning searches found but fusion ranked below ``pool``):
    a statement is a table of numbers that ranks low on meaning. Each enters with the score
    of the pool's ``DEFINITION_LOOKUP``-th hit (its bonuses decide the rest). No search of its
    own: ``rest`` is ``hybrid_candidates``' tail (``POOL_TAIL``)."""
    names = statements_named(query)
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


def _held(payload: PointPayload) -> HeldDocument:
    return HeldDocument(payload.name, payload.title or "", payload.version or "")


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
    """Hybrid search (module docstring), one page of results.

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
    analysed = analyse(query)
    sparse_text = query
    spells_out: Callable[[str], bool] | None = None
    if acronyms is not None:
        expansion = acronyms.expand(query)
        sparse_text = expansion.sparse_text(query)
        if expansion.asked:
            spells_out = partial(acronyms.spells_out, shorts=expansion.asked)
    payload_of = PayloadsOf()
    kinds = [kind] if kind else list(DOCUMENT_KINDS)
    wanted = offset + top_k + 1  # one more than the page: tells whether a next page exists
    exact = exact_identifier_matches(index, analysed, documents, kinds)
    exact_hits = [hit for found in exact.values() for hit in found]
    defined = [] if reranker.reorders else definition_hits(index, query, documents, kinds)
    scores: list[float]
    matches: list[UnitMatch | None]
    if reranker.reorders:
        pool, best_similarity = hybrid_candidates(
            index, vector, sparse_text, max(wanted, RERANK_CANDIDATES), documents, kinds,
            exact_hits,
        )
        order = reranker.rerank(query, [h.point.text for h in pool], top_n=wanted)
        hits = [pool[i] for i, _ in order]
        scores = [float(s) for _, s in order]
        matches = best_units(query, [h.point.text for h in hits], [payload_of(h.point) for h in hits])
    else:
        size = max(wanted, FEATURE_CANDIDATES)
        fused, best_similarity = hybrid_candidates(
            index, vector, sparse_text, size, documents, kinds, exact_hits, tail=POOL_TAIL
        )
        pool, rest = fused[:size], fused[size:]
        added = [
            *definition_candidates(pool, defined),
            *statement_candidates(query, pool, rest, payload_of),
        ]
        seen = {h.id for h in pool}
        for hit in added:  # a statement's passage may also be a definition: once
            if hit.id not in seen:
                seen.add(hit.id)
                pool.append(hit)
        hits, scores, matches = feature_order(query, pool, wanted, payload_of, spells_out)
    if not hits and not any(index.count(kind=k) for k in DOCUMENT_KINDS):
        raise EmptyCorpusError("the vector index holds no points")
    coverage = max(
        (term_coverage(analysed, hit.point, payload_of(hit.point)) for hit in hits), default=0.0
    )
    low = (
        not exact
        and coverage < MIN_TERM_COVERAGE
        and (best_similarity is None or best_similarity < NOTHING_FOUND_SIMILARITY)
    )
    mismatch = edition_mismatch(
        query, [_held(payload_of(hit.point)) for hit in hits[:EDITION_DOCUMENTS]]
    )
    low = low or mismatch is not None
    ranked = list(zip(hits, scores, matches, strict=True))[offset : offset + top_k]
    page = [
        Passage.of(
            hit.point, offset + position, score=score, similarity=hit.dense_score,
            sparse_rank=hit.sparse_rank, payload=payload_of(hit.point),
            quote=None if hit.point.kind == KIND_FIGURE else passage_quote(
                payload_of(hit.point), hit.point.text, match, markdown
            ),
        )
        for position, (hit, score, match) in enumerate(ranked, start=1)
    ]
    return DocsAnswer(
        results=page,
        offset=offset,
        top_k=top_k,
        next_offset=offset + top_k if len(hits) > offset + top_k else None,
        best_similarity=best_similarity,
        exact_terms=list(exact),
        coverage=coverage,
        low_confidence=low,
        reranked=reranker.reorders,
        edition_note=mismatch.message() if mismatch is not None else None,
    )
