"""search_graph: seed entities by name-vector similarity, walk 1–2 hops, rank the
relationships, and fetch each one's supporting chunk from the vector index.

Only edges of servable documents are used (``kb_mcp.documents.ServedDocuments``): a walk stops
at the first edge of a document that is not ready, and a seed reached only through such edges
is not shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kb_mcp.errors import ToolProblem
from kb_shared.errors import EmbeddingMismatchError, IdentityError
from kb_shared.graph_model import Relationship
from kb_shared.search.graph_relevance import (
    RelationIntent,
    asked_types,
    name_candidates,
    relation_intent,
    relevance,
)
from kb_shared.identity import chunk_index
from kb_shared.providers.base import Embedder
from kb_shared.search.retrieval import Passage
from kb_shared.search.subjects import absent_subjects, subjects_of
from kb_shared.stores.graph import EdgeFilter, EntityHit, GraphPath
from kb_shared.stores.readers import GraphReader, VectorReader
from kb_shared.stores.vectors import DOCUMENT_KINDS

#: Entity seeds per call (mcp-utilities README, search_graph: "seeds from a vector similarity
#: search over entity names"); 5 keeps the 2-hop walk within ``WALK_LIMIT``.
GRAPH_SEEDS = 5

#: Seeds whose name vector has a cosine to the query below this are not walked; calibrated on
#: minilm-int8 (benchmarks/results/retrieval-2026-11-30.md; per-query ranges in
#: tests/mcp/test_retrieval_quality.py).
GRAPH_SEED_MIN_SIMILARITY = 0.35

#: Paths read from the graph per call; ranked by relevance afterwards, so more than a page.
WALK_LIMIT = 400

#: Entities the question names that join the seeds (``named_seeds``), and how many more
#: entities than ``GRAPH_SEEDS`` are read by similarity for it to choose from.
NAMED_SEEDS = 3
GRAPH_CANDIDATES = 10


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
        chunk_number: the 0-based index of its chunk (``identity.chunk_index``), ``None`` when
            its chunk id is not one of its document's.
    """

    number: int
    relationship: Relationship
    source_name: str
    target_name: str
    hops: int
    seed: str
    seed_similarity: float
    excerpt: int | None
    chunk_number: int | None


@dataclass(frozen=True, slots=True)
class GraphAnswer:
    """What search_graph found: seeds, relationships (best first) and their excerpts.

    ``closest`` is the best entity when none reached ``GRAPH_SEED_MIN_SIMILARITY`` (then
    ``seeds`` is empty and nothing was walked). ``absent_names``: the names and clause numbers
    the query asks about that no served passage mentions (``kb_shared.search.subjects``), so whatever was
    walked is about something else.
    """

    seeds: list[EntityHit]
    relationships: list[RankedRelationship]
    excerpts: list[Passage]
    hops: int
    closest: EntityHit | None = None
    absent_names: tuple[str, ...] = ()


def rank_relationships(
    seeds: Sequence[EntityHit],
    paths: Sequence[GraphPath],
    top_k: int,
    intent: RelationIntent | None = None,
) -> list[tuple[Relationship, int, EntityHit]]:
    """Order the walked relationships; each relationship once (its best placing).

    Without ``intent``: hop 1 before hop 2, then by the similarity of the seed that reached
    them, then walk order. With it: by ``graph_relevance.relevance`` (how well the type and
    description answer the question, plus seed similarity, minus hops), then that order.

    Args:
        seeds: the seeds, best first.
        paths: ``GraphPath``s from ``GraphStore.walk`` (``nodes[0]`` is a seed key).
        top_k: how many to keep.
        intent: what the question asks about (``graph_relevance.relation_intent``).

    Returns:
        ``[(relationship, hops, seed), …]``, at most ``top_k``.
    """
    by_key = {seed.key: seed for seed in seeds}
    best: dict[str, tuple[tuple[float, int, float, int], Relationship, int, EntityHit]] = {}
    for order, path in enumerate(paths):
        seed = by_key.get(path.nodes[0])
        if seed is None:
            continue
        for position, rel in enumerate(path.relationships):
            hops = position + 1
            score = 0.0
            if intent is not None:
                score = relevance(
                    intent, rel.type, rel.description, rel.source, rel.target,
                    seed_similarity=seed.score, hops=hops,
                )
            key = (-score, hops, -seed.score, order)
            current = best.get(rel.id)
            if current is None or key < current[0]:
                best[rel.id] = (key, rel, hops, seed)
    ranked = sorted(best.values(), key=lambda item: item[0])
    return [(rel, hops, seed) for _, rel, hops, seed in ranked[:top_k]]


def named_seeds(
    graph: GraphReader, query: str, seeds: Sequence[EntityHit], candidates: Sequence[EntityHit]
) -> list[EntityHit]:
    """Entities the question names that are not seeds yet, at most ``NAMED_SEEDS``: first
    those it names word for word (``graph_relevance.name_candidates``, longest first), then
    near candidates below the similarity floor whose head noun it names ("Who should
    participants contact …" seeds ``market participant``). Each keeps its similarity when it
    was a candidate, else ``GRAPH_SEED_MIN_SIMILARITY``."""
    taken = {s.key for s in seeds}
    similarity = {c.key: c.score for c in candidates}
    names = name_candidates(query)
    heads = {name for name in names if " " not in name}
    found: list[EntityHit] = []
    for entity in graph.entities(names):
        if entity.key not in taken:
            taken.add(entity.key)
            score = similarity.get(entity.key, GRAPH_SEED_MIN_SIMILARITY)
            found.append(EntityHit(entity.key, entity.name, entity.type, score))
    for candidate in candidates:
        if candidate.key not in taken and candidate.key.rsplit(" ", 1)[-1] in heads:
            taken.add(candidate.key)
            found.append(candidate)
    return found[:NAMED_SEEDS]


#: Edges of each asked type (``graph_relevance.asked_types``) read whatever the seeds reached,
#: best connected first.
TYPED_CANDIDATES = 50


def typed_paths(graph: GraphReader, intent: RelationIntent) -> tuple[list[GraphPath], list[EntityHit]]:
    """One-edge paths of the relationship types the question asks for (``asked_types``:
    "Who must notify whom?" names no party, yet its answer is every MUST_NOTIFY edge), each
    from its source entity as a seed at ``GRAPH_SEED_MIN_SIMILARITY``; relevance ranks them
    with the walked ones."""
    paths: list[GraphPath] = []
    for kind in asked_types(intent):
        for rel in graph.overview(TYPED_CANDIDATES, where=EdgeFilter(relationship_type=kind)):
            paths.append(GraphPath((rel.source, rel.target), (rel,)))
    sources = list(dict.fromkeys(path.nodes[0] for path in paths))
    seeds = [
        EntityHit(entity.key, entity.name, entity.type, GRAPH_SEED_MIN_SIMILARITY)
        for entity in graph.entities(sources)
    ]
    return paths, seeds


def served_paths(paths: Sequence[GraphPath], only: frozenset[str] | None) -> list[GraphPath]:
    """``paths`` cut before their first edge whose ``source_doc`` is not in ``only``; paths
    left empty are dropped. ``only=None`` serves every document (``paths`` unchanged)."""
    if only is None:
        return list(paths)
    kept: list[GraphPath] = []
    for path in paths:
        length = 0
        for rel in path.relationships:
            if rel.source_doc not in only:
                break
            length += 1
        if length:
            kept.append(GraphPath(path.nodes[: length + 1], path.relationships[:length]))
    return kept


def _chunk_number(rel: Relationship) -> int | None:
    try:
        return chunk_index(rel.source_doc, rel.chunk_id)
    except IdentityError:
        return None


def search_graph(
    graph: GraphReader,
    index: VectorReader,
    embedder: Embedder,
    query: str,
    *,
    hops: int = 1,
    top_k: int = 10,
    only: frozenset[str] | None = None,
) -> GraphAnswer:
    """Seed, walk, rank (module docstring), then fetch each relationship's chunk by its id.

    Args:
        only: the doc_ids whose edges and excerpts may be served
            (``ServedDocuments.only``); ``None`` = every document.

    Raises:
        ToolProblem: the graph has no entity vectors (nothing extracted yet), or its entity
            vectors have another dimension than the live model.
    """
    vector = embedder.embed_query(query)
    scope = sorted(only) if only is not None else None
    absent = absent_subjects(index, subjects_of(query), scope, list(DOCUMENT_KINDS))
    try:
        candidates = graph.similar_entities(vector, GRAPH_SEEDS + GRAPH_CANDIDATES)
    except EmbeddingMismatchError as exc:
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
    seeds = [s for s in candidates[:GRAPH_SEEDS] if s.score >= GRAPH_SEED_MIN_SIMILARITY]
    if not seeds:
        return GraphAnswer(
            seeds=[], relationships=[], excerpts=[], hops=hops, closest=candidates[0],
            absent_names=absent,
        )
    seeds += named_seeds(graph, query, seeds, candidates)
    walked = graph.walk([s.key for s in seeds], hops=hops, limit=WALK_LIMIT)
    paths = served_paths(walked, only)
    hidden = {p.nodes[0] for p in walked} - {p.nodes[0] for p in paths}
    seeds = [s for s in seeds if s.key not in hidden]
    if not seeds:  # every seed is known only from documents that are not served
        return GraphAnswer(
            seeds=[], relationships=[], excerpts=[], hops=hops, absent_names=absent
        )
    intent = relation_intent(query)
    typed, typed_seeds = typed_paths(graph, intent)
    walked_keys = {s.key for s in seeds}
    rank_seeds = [*seeds, *(s for s in typed_seeds if s.key not in walked_keys)]
    paths += served_paths(typed, only)
    chosen = rank_relationships(rank_seeds, paths, top_k, intent)
    keys = list(dict.fromkeys(k for rel, _, _ in chosen for k in (rel.source, rel.target)))
    names = {entity.key: entity.name for entity in graph.entities(keys)}
    chunk_ids = list(dict.fromkeys(rel.chunk_id for rel, _, _ in chosen))
    stored = {point.id: point for point in index.fetch(chunk_ids)}
    excerpt_number: dict[str, int] = {}
    excerpts: list[Passage] = []
    for chunk in chunk_ids:
        point = stored.get(chunk)
        if point is None or (only is not None and point.document not in only):
            continue
        excerpt_number[chunk] = len(excerpts) + 1
        excerpts.append(Passage.of(point, len(excerpts) + 1))
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
            chunk_number=_chunk_number(rel),
        )
        for number, (rel, rel_hops, seed) in enumerate(chosen, start=1)
    ]
    return GraphAnswer(
        seeds=list(seeds), relationships=relationships, excerpts=excerpts, hops=hops,
        absent_names=absent,
    )
