"""Retrieval behind the tools: hybrid search, graph search, reading chunks, the catalog.

Everything here takes the stores and models as arguments and returns plain dataclasses, so it
runs the same under the MCP server, in tests and in the retrieval benchmark; rendering is in
``kb_mcp.render``. Failures the caller can act on raise ``ToolProblem``; store and provider
failures propagate as the ``kb_shared`` errors ``kb_mcp.errors.tool_errors`` translates.

search_docs (DESIGN.md "The MCP server", issue 4):

1. the query is embedded with the live model's query-side convention
   (``Embedder.embed_query``) and tokenised for the sparse side (``kb_shared.sparse``), so
   codes such as ``IN008-24`` or ``3.1.5`` stay one term;
2. dense and sparse candidates (``VectorIndex.dense_search`` / ``sparse_search``), plus the
   points that contain a rare identifier of the query whole, are fused by weighted reciprocal
   rank fusion (``VectorIndex.hybrid_search``; k and weights in ``kb_shared.stores.vectors``);
3. a rerank provider, when one is configured, re-orders the fused candidates (none offline);
4. a page of ``top_k`` results from ``offset`` is returned with ``next_offset`` when more
   exist;
5. confidence: when the best dense cosine similarity is below
   ``NOTHING_FOUND_SIMILARITY``, no identifier-like term of the query matches exactly, and no
   result contains ``MIN_TERM_COVERAGE`` of the query's terms, the answer is flagged
   ``low_confidence`` and rendered as "the corpus has nothing on this".
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from kb_mcp.errors import ToolProblem
from kb_mcp.state import EMPTY_CORPUS
from kb_shared import citations
from kb_shared.citations import Citation
from kb_shared.errors import SchemaMissingError
from kb_shared.identity import IdentityError, doc_id, normalize_name
from kb_shared.providers.base import Embedder, Reranker
from kb_shared.sparse import tokenize
from kb_shared.stores.catalog import Catalog, DocumentRow
from kb_shared.graph_model import Relationship
from kb_shared.stores.graph import EntityHit, GraphStore
from kb_shared.stores.vectors import KIND_FIGURE, Hit, StoredPoint, VectorIndex

# ---------------------------------------------------------------------------------------------
# Constants (each with where it comes from)
# ---------------------------------------------------------------------------------------------

#: Weight of the third fused list: the points that contain a rare identifier of the query
#: whole (a clause number, a market notice, a variable name; ``exact_identifier_matches``).
#: BM25 alone lets the common parts of a code ("3", "1", "5" of 3.1.5, or "800-171" next to
#: it) outweigh the code itself; the issue requires that exact codes hit. Relative to the
#: sparse side's weight (``kb_shared.stores.vectors.SPARSE_WEIGHT``); chosen with the fusion
#: sweep of ``benchmarks/retrieval.py`` on both eval sets (weights 0, 0.25, 0.5, 1): at k=10,
#: dense 0.75 it lifts regulatory from 0.833 / 0.589 (no exact list) to 0.867 / 0.606
#: Recall@5 / MRR; FinanceBench (which asks for no codes) moves from 0.588 / 0.385 to 0.588 /
#: 0.391.
EXACT_WEIGHT = 1.0

#: A search_docs answer is "low confidence" (the corpus has nothing on it) when its best
#: dense cosine similarity is below this, no result covers ``MIN_TERM_COVERAGE`` of the
#: query's terms and no identifier in the query matched exactly. Measured with minilm-int8 on
#: the same corpus: the 30 answerable eval questions score 0.456-0.860, 20 off-topic
#: questions 0.104-0.325, short on-topic keyword queries from 0.253 ("life support"); the
#: threshold sits between the off-topic maximum and the lowest short query that needs cosine
#: to pass (0.395, "notification flow diagram"). The 2 ``absent`` eval questions (0.484,
#: 0.615) ask for a year or revision next to one the corpus has, and no similarity separates
#: them: they are answered, with the nearest year's passages. Model-specific: re-measure with
#: ``tests/mcp/test_retrieval_quality.py`` when the embedding model changes.
NOTHING_FOUND_SIMILARITY = 0.36

#: ...or unless one result contains at least this share of the query's sparse terms
#: (``term_coverage``): short queries get low cosines even on a spot-on passage ("life
#: support" 0.253 at full coverage). Measured on the same sets: off-topic questions cover at
#: most 0.667 ("the life cycle of a butterfly": life, cycle), on-topic section-heading queries
#: all cover 1.0.
MIN_TERM_COVERAGE = 0.75

#: An identifier-like query term counts as an exact, trustworthy match when it occurs in at
#: least one and at most this many points (a term in every chunk proves nothing). Chosen as the
#: default page size of search_docs: a code that fits on one page of results is specific.
RARE_TERM_MAX_POINTS = 8

#: Fused candidates handed to a rerank provider, and the fewest fused hits search_docs asks
#: for (Cohere rerank-v3.5 accepts up to 1,000 documents per call; 50 is the candidate depth
#: ``VectorIndex.hybrid_search`` fetches from each side by default, ``MIN_CANDIDATES``).
RERANK_CANDIDATES = 50

#: Entity seeds for search_graph (mcp-utilities README, search_graph: "seeds from a vector
#: similarity search over entity names"); 5 keeps the 2-hop walk within ``WALK_LIMIT``.
GRAPH_SEEDS = 5

#: Seeds whose name vector has a cosine similarity to the query below this are not walked
#: (a walk from an unrelated entity returns unrelated relationships). Measured with
#: minilm-int8 on the eval corpus's graph: the best seed of every answerable eval question
#: scores 0.357-0.896 (median 0.517), of the 20 off-topic questions 0.157-0.482 (median
#: 0.257); 0.35 keeps every eval question's seed.
GRAPH_SEED_MIN_SIMILARITY = 0.35

#: Paths read from the graph per search_graph call (the default of ``GraphStore.walk``).
WALK_LIMIT = 200

#: Most chunks read_doc returns per call (mcp-documentation README: ``max_chunks_per_read`` 5).
MAX_READ_CHUNKS = 5

#: The figure caption's payload key (written by the figures asset).
_CAPTION = "caption"

#: Suggestions offered for an unknown document name.
_SUGGESTIONS = 3

#: A raw query word (split on spaces and punctuation that never occurs inside a code);
#: ``identifier_terms`` decides which ones are identifiers.
_YEAR = re.compile(r"(?:19|20)\d\d(?:[-/\u2013](?:\d\d|(?:19|20)\d\d))?")
_RAW_TERM = re.compile(r"[^\s,;:!?()\[\]{}\"'“”‘’]+")


# ---------------------------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------------------------


def check_query(query: str, max_chars: int) -> str:
    """Return the stripped query.

    Raises:
        ToolProblem: empty, or longer than ``max_chars`` (``Settings.max_query_chars``).
    """
    if len(query) > max_chars:
        raise ToolProblem(
            f"the query is {len(query):,} characters long; the limit is {max_chars:,}. Search "
            "with the key terms, codes or a one-sentence question instead of a whole passage."
        )
    text = query.strip()
    if not text:
        raise ToolProblem("the query is empty; pass the words, clause number or code to look for")
    return text


def find_document(catalog: Catalog, ref: str) -> DocumentRow | None:
    """The catalog row for a doc_id or a file name (case, surrounding spaces and a missing
    ``.pdf`` extension forgiven), or ``None``."""
    ref = ref.strip()
    if not ref:
        return None
    row = catalog.find_by_doc_id(ref)
    if row is not None:
        return row
    try:
        row = catalog.find_by_normalized_name(normalize_name(ref))
        if row is not None:
            return row
        for candidate in dict.fromkeys((doc_id(ref), doc_id(ref + ".pdf"))):
            row = catalog.find_by_doc_id(candidate)
            if row is not None:
                return row
    except IdentityError:
        return None
    return None


def _unknown(catalog: Catalog, refs: Sequence[str], what: str) -> ToolProblem:
    rows = catalog.list_documents()
    known = {r.doc_id: r.doc_id for r in rows} | {normalize_name(r.name): r.doc_id for r in rows}
    hints: list[str] = []
    for ref in refs:
        try:
            key = normalize_name(ref)
        except IdentityError:
            continue
        hints += [known[m] for m in difflib.get_close_matches(key, list(known), _SUGGESTIONS)]
    names = ", ".join(repr(r) for r in refs)
    message = (
        f"unknown {what} {names}: give a file name or doc_id exactly as list_documents shows "
        "them"
    )
    if hints:
        message += "; did you mean " + ", ".join(repr(h) for h in dict.fromkeys(hints)) + "?"
    elif not rows:
        message += "; the catalog has no documents yet"
    else:
        message += "; call list_documents to see them"
    return ToolProblem(message)


def resolve_document(catalog: Catalog, ref: str) -> DocumentRow:
    """Like ``find_document``, but an unknown document is an error.

    Raises:
        ToolProblem: no such document; the message suggests close names.
    """
    row = find_document(catalog, ref)
    if row is None:
        raise _unknown(catalog, [ref], "document")
    return row


def not_ready(rows: Sequence[DocumentRow], action: str) -> ToolProblem:
    """The error for asking to ``action`` ("read", "searched") documents that are pending or
    failed: each with its status and failure reason, and where to see the ready ones."""
    parts = [
        f"{row.name!r} is {row.status}" + (f": {row.failure_reason}" if row.failure_reason else "")
        for row in rows
    ]
    return ToolProblem(
        f"document {'; '.join(parts)}. Only ready documents can be {action}; call "
        "list_documents to see which are ready."
    )


def resolve_documents(catalog: Catalog, refs: Sequence[str] | None) -> list[str] | None:
    """doc_ids for a ``documents`` filter (``None`` = no filter).

    Raises:
        ToolProblem: any name is unknown (all unknown names are listed), any named document
            is pending or failed (it has nothing indexed; ``not_ready``), or the list is
            empty (an empty filter would match nothing, which is never what a caller means).
    """
    if refs is None:
        return None
    if not refs:
        raise ToolProblem(
            "documents is an empty list, which would match nothing; leave it out to search "
            "every document"
        )
    found: list[str] = []
    missing: list[str] = []
    unready: list[DocumentRow] = []
    for ref in refs:
        row = find_document(catalog, ref)
        if row is None:
            missing.append(ref)
        elif row.status != "ready":
            unready.append(row)
        elif row.doc_id not in found:
            found.append(row.doc_id)
    if missing:
        raise _unknown(catalog, missing, "document" if len(missing) == 1 else "documents")
    if unready:
        raise not_ready(unready, "searched")
    return found


# ---------------------------------------------------------------------------------------------
# search_docs
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Found:
    """One result of search_docs or one excerpt of search_graph.

    Attributes:
        number: the result's number in the rendering (``[number]``), 1-based, continuing
            across pages (page 2 of 8 starts at 9).
        point: the stored chunk or figure.
        citation: its citation fields (from the payload written at ingestion).
        score: fused RRF score, or the rerank relevance when reranked.
        similarity: cosine similarity of the query and the point's dense vector, when the
            point was a dense candidate.
        sparse_rank: its rank on the sparse (keyword) side, ``None`` when not a candidate.
    """

    number: int
    point: StoredPoint
    citation: Citation
    score: float
    similarity: float | None = None
    sparse_rank: int | None = None

    @property
    def is_figure(self) -> bool:
        """True for a figure point."""
        return self.point.kind == KIND_FIGURE

    @property
    def chunk_number(self) -> int | None:
        """The 0-based chunk index (what read_doc takes), ``None`` for figures."""
        value = self.point.payload.get(citations.CHUNK_INDEX)
        return None if self.is_figure or value is None else int(value)


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
        low_confidence: no result clears ``NOTHING_FOUND_SIMILARITY``, no identifier matched
            and no result covers ``MIN_TERM_COVERAGE`` of the query's terms: the corpus
            probably has nothing on the query.
        reranked: a rerank provider ordered the results.
    """

    results: list[Found]
    offset: int
    top_k: int
    next_offset: int | None
    best_similarity: float | None
    exact_terms: list[str] = field(default_factory=list)
    coverage: float = 0.0
    low_confidence: bool = False
    reranked: bool = False


def identifier_terms(query: str) -> list[str]:
    """The identifier-like words of a query, as sparse-index terms (case-folded, whole).

    A word of at least two characters counts when it contains a digit (``IN008-24``,
    ``3.1.5``, ``SO_OP_3705``, ``BW01``) or an upper-case letter after its first character
    (``UIGFSurplus``, ``RREG``); plain words (``Dispatch``, ``left-hand``) and single digits do
    not. Years and financial-year ranges (``2025``, ``2025-26``, ``2020/21``) are not
    identifiers: they qualify many passages of a document (its title, running text), so an
    exact-match boost on them favours whichever passage repeats the year rather than the one
    that answers. Each is returned as its first ``kb_shared.sparse.tokenize`` term, i.e. the
    whole compound.
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


def term_coverage(query: str, point: StoredPoint) -> float:
    """Share of the query's distinct sparse terms (``kb_shared.sparse.tokenize``: stopwords
    dropped, codes whole plus their parts) that occur in the point's text, section or title.
    ``0.0`` for a query without terms."""
    wanted = set(tokenize(query))
    if not wanted:
        return 0.0
    payload = point.payload
    context = " ".join(
        str(payload.get(key) or "") for key in (citations.SECTION, citations.TITLE, _CAPTION)
    )
    have = set(tokenize(f"{point.text}\n{context}"))
    return len(wanted & have) / len(wanted)


def exact_identifier_matches(
    index: VectorIndex,
    query: str,
    documents: Sequence[str] | None,
    kinds: Sequence[str] | None,
) -> dict[str, list[Hit]]:
    """Identifier-like query terms found whole in between 1 and ``RARE_TERM_MAX_POINTS``
    points, each with those points (best BM25 first), in query order.

    The sparse side ranks by BM25 over every term (a compound and its parts), so a hit is
    re-checked: the point's own text must contain the whole term.
    """
    matched: dict[str, list[Hit]] = {}
    for term in identifier_terms(query):
        hits = index.sparse_search(term, RARE_TERM_MAX_POINTS + 1, documents, kinds)
        exact = [h for h in hits if term in set(tokenize(h.point.text))]
        if 1 <= len(exact) <= RARE_TERM_MAX_POINTS:
            matched[term] = exact
    return matched


def hybrid_candidates(
    index: VectorIndex,
    vector: Sequence[float],
    query: str,
    limit: int,
    documents: Sequence[str] | None,
    kinds: Sequence[str] | None,
    exact: Sequence[Hit] = (),
) -> tuple[list[Hit], float | None]:
    """``VectorIndex.hybrid_search`` with ``exact`` as a third fused list (weight
    ``EXACT_WEIGHT``), at most ``limit`` hits, plus the best dense cosine of the query over
    the filtered index (``None`` when the index holds no matching point).

    The best cosine is the dense rank-1 candidate's; fusion can push that point below the
    fused cut (many sparse or exact hits), and then one more dense query fetches it, so the
    "nothing found" test never depends on the fusion constants.
    """
    hits = index.hybrid_search(
        vector, query, max(limit, RERANK_CANDIDATES), documents, kinds,
        extra=[(exact, EXACT_WEIGHT)] if exact else (),
    )
    similarities = [h.dense_score for h in hits if h.dense_rank == 1]
    if similarities:
        best = similarities[0]
    else:
        top = index.dense_search(vector, 1, documents, kinds)
        best = top[0].score if top else None
    return hits[:limit], best


def search_docs(
    index: VectorIndex,
    embedder: Embedder,
    query: str,
    *,
    top_k: int = 8,
    offset: int = 0,
    documents: Sequence[str] | None = None,
    kind: str | None = None,
    reranker: Reranker | None = None,
) -> DocsAnswer:
    """Hybrid search (module docstring), one page of results.

    Args:
        index: the opened vector index.
        embedder: the live model (the index was built with it).
        query: the checked query (``check_query``).
        top_k: results per page, >= 1.
        offset: results to skip (a previous answer's ``next_offset``), >= 0.
        documents: doc_ids to search in (``resolve_documents``); ``None`` = all.
        kind: ``text``, ``table`` or ``figure`` to search one kind only; ``None`` = all.
        reranker: optional rerank provider.

    Raises:
        ToolProblem: the index holds no points at all (empty corpus).
        ValueError: ``top_k`` < 1 or ``offset`` < 0.
    """
    if top_k < 1 or offset < 0:
        raise ValueError(f"top_k must be >= 1 and offset >= 0, got {top_k} and {offset}")
    kinds = [kind] if kind else None
    vector = embedder.embed_query(query)
    wanted = offset + top_k + 1  # one more than the page: tells whether a next page exists
    exact = exact_identifier_matches(index, query, documents, kinds)
    exact_hits = [hit for found in exact.values() for hit in found]
    scores: list[float]
    if reranker is not None:
        pool, best_similarity = hybrid_candidates(
            index, vector, query, max(wanted, RERANK_CANDIDATES), documents, kinds, exact_hits
        )
        order = reranker.rerank(query, [h.point.text for h in pool], top_n=wanted)
        hits = [pool[i] for i, _ in order]
        scores = [float(s) for _, s in order]
    else:
        hits, best_similarity = hybrid_candidates(
            index, vector, query, wanted, documents, kinds, exact_hits
        )
        scores = [h.score for h in hits]
    if not hits and index.count() == 0:
        raise ToolProblem(EMPTY_CORPUS)
    coverage = max((term_coverage(query, hit.point) for hit in hits), default=0.0)
    low = (
        not exact
        and coverage < MIN_TERM_COVERAGE
        and (best_similarity is None or best_similarity < NOTHING_FOUND_SIMILARITY)
    )
    page = [
        Found(
            number=offset + position + 1,
            point=hit.point,
            citation=Citation.from_payload(hit.point.payload),
            score=score,
            similarity=hit.dense_score,
            sparse_rank=hit.sparse_rank,
        )
        for position, (hit, score) in enumerate(
            list(zip(hits, scores, strict=True))[offset : offset + top_k]
        )
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
        reranked=reranker is not None,
    )


# ---------------------------------------------------------------------------------------------
# search_graph
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RankedRelationship:
    """A relationship chosen by search_graph.

    Attributes:
        number: ``R{number}`` in the rendering.
        relationship: the stored edge (its own direction, provenance and chunk id).
        source_name / target_name: display names of its endpoints.
        hops: 1 when it touches a seed, 2 when it is one edge further out.
        seed: the seed entity whose walk reached it (best one when several did).
        seed_similarity: that seed's cosine similarity to the query.
        excerpt: number of its supporting excerpt (``[n]``), ``None`` when the chunk is
            missing from the vector index.
    """

    number: int
    relationship: Relationship
    source_name: str
    target_name: str
    hops: int
    seed: str
    seed_similarity: float
    excerpt: int | None


@dataclass(frozen=True, slots=True)
class GraphAnswer:
    """What search_graph found: seeds, relationships (best first) and their excerpts.

    ``closest`` is the best entity when none reached ``GRAPH_SEED_MIN_SIMILARITY`` (then
    ``seeds`` is empty and nothing was walked).
    """

    seeds: list[EntityHit]
    relationships: list[RankedRelationship]
    excerpts: list[Found]
    hops: int
    closest: EntityHit | None = None


def rank_relationships(
    seeds: Sequence[EntityHit], paths: Sequence, top_k: int
) -> list[tuple[Relationship, int, EntityHit]]:
    """Order the walked relationships: hop 1 before hop 2, then by the similarity of the seed
    that reached them, then walk order; each relationship once (its best placing).

    Args:
        seeds: the seeds, best first.
        paths: ``GraphPath``s from ``GraphStore.walk`` (``nodes[0]`` is a seed key).
        top_k: how many to keep.

    Returns:
        ``[(relationship, hops, seed), …]``, at most ``top_k``.
    """
    by_key = {seed.key: seed for seed in seeds}
    best: dict[str, tuple[tuple[int, float, int], Relationship, int, EntityHit]] = {}
    for order, path in enumerate(paths):
        seed = by_key.get(path.nodes[0])
        if seed is None:
            continue
        for position, rel in enumerate(path.relationships):
            hops = position + 1
            key = (hops, -seed.score, order)
            current = best.get(rel.id)
            if current is None or key < current[0]:
                best[rel.id] = (key, rel, hops, seed)
    ranked = sorted(best.values(), key=lambda item: item[0])
    return [(rel, hops, seed) for _, rel, hops, seed in ranked[:top_k]]


def search_graph(
    graph: GraphStore,
    index: VectorIndex,
    embedder: Embedder,
    query: str,
    *,
    hops: int = 1,
    top_k: int = 10,
) -> GraphAnswer:
    """Seed entities by name-vector similarity, walk 1–2 hops, rank the relationships, then
    fetch each one's supporting chunk from the vector index by its ``chunk_id``.

    Raises:
        ToolProblem: the graph has no entity vectors (nothing extracted yet), or its entity
            vectors have another dimension than the live model.
    """
    vector = embedder.embed_query(query)
    try:
        candidates = graph.similar_entities(vector, GRAPH_SEEDS)
    except ValueError as exc:  # stored entity vectors of another dimension
        raise ToolProblem(
            f"the knowledge graph's entity vectors do not match the live embedding model "
            f"({exc}); the operator must rebuild it with `kb rebuild graph --all`. Use "
            "search_docs meanwhile."
        ) from exc
    if not candidates:
        raise ToolProblem(
            "the knowledge graph is empty: no entities have been extracted yet, so there is "
            "nothing to walk. Use search_docs instead; call list_documents to see what is "
            "indexed."
        )
    seeds = [s for s in candidates if s.score >= GRAPH_SEED_MIN_SIMILARITY]
    if not seeds:
        return GraphAnswer(
            seeds=[], relationships=[], excerpts=[], hops=hops, closest=candidates[0]
        )
    paths = graph.walk([s.key for s in seeds], hops=hops, limit=WALK_LIMIT)
    chosen = rank_relationships(seeds, paths, top_k)
    keys = list(
        dict.fromkeys(k for rel, _, _ in chosen for k in (rel.source, rel.target))
    )
    names = {entity.key: entity.name for entity in graph.entities(keys)}
    chunk_ids = list(dict.fromkeys(rel.chunk_id for rel, _, _ in chosen))
    stored = {point.id: point for point in index.fetch(chunk_ids)}
    excerpt_number: dict[str, int] = {}
    excerpts: list[Found] = []
    for chunk in chunk_ids:
        point = stored.get(chunk)
        if point is None:
            continue
        excerpt_number[chunk] = len(excerpts) + 1
        excerpts.append(
            Found(
                number=len(excerpts) + 1,
                point=point,
                citation=Citation.from_payload(point.payload),
                score=0.0,
            )
        )
    relationships = [
        RankedRelationship(
            number=number,
            relationship=rel,
            source_name=names.get(rel.source, rel.source),
            target_name=names.get(rel.target, rel.target),
            hops=rel_hops,
            seed=seed.name,
            seed_similarity=seed.score,
            excerpt=excerpt_number.get(rel.chunk_id),
        )
        for number, (rel, rel_hops, seed) in enumerate(chosen, start=1)
    ]
    return GraphAnswer(seeds=list(seeds), relationships=relationships, excerpts=excerpts, hops=hops)


# ---------------------------------------------------------------------------------------------
# read_doc
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReadAnswer:
    """Chunks of one document, in the order asked; ``missing`` lists numbers not stored."""

    document: DocumentRow
    chunks: list[Found]
    missing: list[int]


def read_doc(
    catalog: Catalog, index: VectorIndex, document: str, chunk_numbers: Sequence[int]
) -> ReadAnswer:
    """Fetch up to ``MAX_READ_CHUNKS`` chunks of one document by their 0-based numbers.

    Raises:
        ToolProblem: unknown document; a document that is not ready; too many or negative
            numbers; none of the numbers exists (the message gives the valid range).
    """
    numbers = list(dict.fromkeys(chunk_numbers))
    if not numbers:
        raise ToolProblem("chunk_numbers is empty; pass 1 to 5 chunk numbers, e.g. [0, 1]")
    if len(numbers) > MAX_READ_CHUNKS:
        raise ToolProblem(
            f"read_doc returns at most {MAX_READ_CHUNKS} chunks per call; ask for the rest in "
            "another call"
        )
    if any(n < 0 for n in numbers):
        raise ToolProblem("chunk numbers start at 0 (the n of chunk id '{doc_id}-{n}')")
    row = resolve_document(catalog, document)
    if row.status != "ready":
        raise not_ready([row], "read")
    ids = [f"{row.doc_id}-{n}" for n in numbers]
    stored = {point.id: point for point in index.fetch(ids)}
    chunks: list[Found] = []
    missing: list[int] = []
    for position, (number, chunk) in enumerate(zip(numbers, ids, strict=True), start=1):
        point = stored.get(chunk)
        if point is None:
            missing.append(number)
            continue
        chunks.append(
            Found(
                number=position,
                point=point,
                citation=Citation.from_payload(point.payload),
                score=0.0,
            )
        )
    if not chunks:
        last = (row.chunk_count or 0) - 1
        valid = f"0–{last}" if last >= 0 else "none"
        raise ToolProblem(
            f"document {row.name!r} has no chunk {', '.join(map(str, missing))}; it has "
            f"{row.chunk_count or 0} chunks (numbers {valid})"
        )
    return ReadAnswer(document=row, chunks=chunks, missing=missing)


# ---------------------------------------------------------------------------------------------
# list_documents
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Catalogue:
    """The catalog as list_documents shows it: ready documents and the others' counts."""

    ready: list[DocumentRow]
    pending: list[DocumentRow]
    failed: list[DocumentRow]


def catalogue(catalog: Catalog) -> Catalogue:
    """Every document, split by status (each list ordered by normalised name). A catalog
    whose tables were never created (a fresh ``KB_HOME``: nothing added yet) is empty."""
    try:
        rows = catalog.list_documents()
    except SchemaMissingError:
        rows = []
    return Catalogue(
        ready=[r for r in rows if r.status == "ready"],
        pending=[r for r in rows if r.status == "pending"],
        failed=[r for r in rows if r.status == "failed"],
    )
