"""Graph store role: entities and typed relationships extracted from chunks, with provenance.

Model: ``(:Entity {key, name, type, description, embedding})-[:RELATES {type, description,
sourceDoc, chunkId}]->(:Entity)``. Entities are shared across documents (identified by
``entity_key(name)``); relationships belong to exactly one document (``source_doc``) and
one chunk (``chunk_id``), which ``search_graph`` uses to fetch the supporting excerpt from
the vector index. Deleting or replacing a document removes its relationships, then every
entity no relationship touches any more (orphans).

``GraphStore`` is the role; its reads alone are ``GraphReader`` (what the MCP server holds).
Their public methods check the arguments and leave each backend ``_`` hooks. Views of the
graph (``overview``, ``neighbourhood``, ``counts``) take an ``EdgeFilter`` (documents, entity
type, relationship type) and order edges by the combined degree of their endpoints, degrees
always counted over the whole graph (so a filtered view keeps the same order). Backends:
``graph_sql.SqlGraphStore`` (tables in the catalog database; embedded default) and
``graph_neo4j.Neo4jGraphStore`` (official driver; vector index on entity names). The checks
and the walk order both backends apply (``validate_document_edges``, ``walk_order_key``,
``check_walk_args``, ``query_vector``, ``entity_vectors``, ``merge_entities``,
``unique_relationships``) are at the end of this module.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from kb_shared.errors import EmbeddingMismatchError
from kb_shared.graph_model import Entity, Relationship, entity_key
from kb_shared.stores.closing import ClosingStore


#: The ``hops`` values ``walk`` accepts (the GraphStore contract: 1–2).
MAX_HOPS = 2


@dataclass(frozen=True, slots=True)
class EntityHit:
    """An entity found by name-vector similarity (``score`` = cosine similarity)."""

    key: str
    name: str
    type: str
    score: float


@dataclass(frozen=True, slots=True)
class GraphPath:
    """A walk from a seed: ``relationships[i]`` joins ``nodes[i]`` and ``nodes[i+1]``.

    Edges are walked in either direction (Neo4j's undirected pattern), so a relationship's
    own ``source``/``target`` keep the stored direction while ``nodes`` give the walk order.
    No relationship appears twice in one path (Neo4j relationship-uniqueness semantics).
    """

    nodes: tuple[str, ...]
    relationships: tuple[Relationship, ...]

    @property
    def hops(self) -> int:
        """Number of relationships in the path (1 or 2)."""
        return len(self.relationships)


@dataclass(frozen=True, slots=True)
class GraphCounts:
    """Entity and relationship counts (for the whole graph or one document)."""

    entities: int
    relationships: int


@dataclass(frozen=True, slots=True)
class EdgeFilter:
    """Which relationships a view of the graph shows; a ``None`` field filters nothing.

    Attributes:
        documents: ``source_doc`` must be one of these (an empty set matches nothing).
        entity_type: at least one endpoint has this entity type (exact match).
        relationship_type: the relationship's type (exact match).
    """

    documents: frozenset[str] | None = None
    entity_type: str | None = None
    relationship_type: str | None = None

    def within(self, document: str | None) -> EdgeFilter:
        """This filter further narrowed to one document (``None``: unchanged)."""
        if document is None:
            return self
        allowed = frozenset({document})
        return replace(
            self, documents=allowed if self.documents is None else self.documents & allowed
        )

    @property
    def is_empty(self) -> bool:
        """True when it filters nothing."""
        return self == EdgeFilter()


#: The filter that keeps every relationship.
EVERY_EDGE = EdgeFilter()


class GraphReader(ClosingStore, ABC):
    """The reads of the graph store role: what a reader that must never write holds (the MCP
    server). Constructors do no I/O.

    The public reads check their arguments here, the same for every backend, then call the
    backend's hook (``_similar_entities``, ``_walk``, ``_overview``, ``_entities``,
    ``_degrees``, ``_touching``, ``_counts``).

    ``close()`` and ``with`` come from ``ClosingStore``. Errors: ``StoreUnavailableError``
    when the backend cannot be reached; ``ValueError`` for ``hops`` outside 1–2, a ``limit``
    or ``k`` below 1, or a bad query vector; ``EmbeddingMismatchError`` for a query vector
    whose dimension is not the stored vectors'.
    """

    def similar_entities(self, vector: Sequence[float] | np.ndarray, k: int) -> list[EntityHit]:
        """Top-``k`` entities by cosine similarity of their name vector, best first (ties by
        key). Entities without a vector are never returned.

        Raises:
            ValueError: ``k`` < 1; an empty, non-finite or zero query.
            EmbeddingMismatchError: the query's length is not the stored vectors' dimension
                (the embedding model changed since the graph was built).
        """
        return self._similar_entities(query_vector(vector, k), k)

    def walk(self, seeds: Sequence[str], hops: int = 1, limit: int = 200) -> list[GraphPath]:
        """Paths of exactly 1..``hops`` relationships from each seed key (either direction).

        Returns at most ``limit`` paths in ``walk_order_key`` order (shorter paths first,
        then by seed order); paths are deterministic for a given graph. Unknown seeds yield
        nothing.

        Raises:
            ValueError: ``hops`` not 1 or 2, or ``limit`` < 1.
        """
        check_walk_args(hops, limit)
        order = list(dict.fromkeys(seeds))
        if not order:
            return []
        position = {seed: index for index, seed in enumerate(order)}
        paths = self._walk(order, hops, limit)
        return sorted(paths, key=lambda path: walk_order_key(position[path.nodes[0]], path))

    def overview(
        self, limit: int = 2000, document: str | None = None, *, where: EdgeFilter = EVERY_EDGE
    ) -> list[Relationship]:
        """The whole graph (or the edges ``where`` and ``document`` keep) ordered by the
        combined degree of each relationship's endpoints, highest first, ties by relationship
        id, capped at ``limit`` — so a capped view is the well-connected core, not an
        arbitrary slice. Degrees count every relationship in the graph (a self-loop counts
        twice), whatever the filter.

        Raises:
            ValueError: ``limit`` < 1.
        """
        check_limit(limit)
        return self._overview(limit, where.within(document))

    def neighbourhood(
        self, seeds: Sequence[str], depth: int = 1, *, where: EdgeFilter = EVERY_EDGE
    ) -> list[Relationship]:
        """Every relationship ``where`` keeps within ``depth`` hops of the seed keys (either
        direction, walking kept edges only), ordered by hop (edges touching a seed first),
        then by combined endpoint degree (highest first), then id. Unknown seeds add nothing.
        Uncapped: callers that show it cap the list (two hops from a hub can reach most of
        the graph).

        Raises:
            ValueError: ``depth`` not 1 or 2.
        """
        if not 1 <= depth <= MAX_HOPS:
            raise ValueError(f"depth must be 1 or 2, got {depth}")
        reached: dict[str, tuple[int, Relationship]] = {}
        frontier = set(dict.fromkeys(seeds))
        seen = set(frontier)
        for hop in range(1, depth + 1):
            if not frontier:
                break
            found = self._touching(sorted(frontier), where)
            frontier = set()
            for rel in found:
                if rel.id in reached:
                    continue
                reached[rel.id] = (hop, rel)
                frontier.update({rel.source, rel.target} - seen)
            seen |= frontier
        degree = self.degrees([k for _, rel in reached.values() for k in (rel.source, rel.target)])
        return [
            rel
            for _, rel in sorted(
                reached.values(),
                key=lambda item: (
                    item[0],
                    -(degree.get(item[1].source, 0) + degree.get(item[1].target, 0)),
                    item[1].id,
                ),
            )
        ]

    def degrees(self, keys: Sequence[str]) -> dict[str, int]:
        """Degree of each known key over the whole graph (every relationship touching it, a
        self-loop twice); unknown keys are left out."""
        return self._degrees(sorted(set(keys))) if keys else {}

    @abstractmethod
    def relationships_for_document(self, document: str) -> list[Relationship]:
        """Every relationship whose ``source_doc`` is ``document``, in relationship-id order."""

    def entities(self, keys: Sequence[str]) -> list[Entity]:
        """Entities by key, in the order asked; unknown keys skipped (vectors omitted)."""
        found = self._entities(sorted(set(keys)))
        return [found[key] for key in keys if key in found]

    def counts(self, document: str | None = None, *, where: EdgeFilter = EVERY_EDGE) -> GraphCounts:
        """Counts for the whole graph (every entity, every relationship), or, with a
        ``document`` or a non-empty ``where``, for the relationships kept and their distinct
        endpoints."""
        return self._counts(where.within(document))

    # -- the backend's reads, called with checked arguments ---------------------------------

    @abstractmethod
    def _similar_entities(self, query: np.ndarray, k: int) -> list[EntityHit]:
        """``similar_entities`` for a checked float32 ``query`` (``query_vector``)."""

    @abstractmethod
    def _walk(self, seeds: list[str], hops: int, limit: int) -> list[GraphPath]:
        """``walk`` for distinct, non-empty ``seeds`` and checked ``hops``/``limit``: the
        first ``limit`` paths in ``walk_order_key`` order, each starting at its seed, in any
        order (``walk`` sorts them)."""

    @abstractmethod
    def _overview(self, limit: int, where: EdgeFilter) -> list[Relationship]:
        """``overview`` for a checked ``limit`` (the document folded into ``where``)."""

    @abstractmethod
    def _touching(self, keys: list[str], where: EdgeFilter) -> list[Relationship]:
        """The relationships ``where`` keeps with an endpoint among distinct ``keys``, each
        once, in any order."""

    @abstractmethod
    def _degrees(self, keys: list[str]) -> dict[str, int]:
        """``degrees`` for distinct, sorted, non-empty ``keys``."""

    @abstractmethod
    def _counts(self, where: EdgeFilter) -> GraphCounts:
        """``counts`` (the document folded into ``where``; ``where.is_empty``: the whole
        graph)."""

    @abstractmethod
    def _entities(self, keys: list[str]) -> dict[str, Entity]:
        """The stored ones of distinct ``keys``, by key (vectors omitted)."""


class GraphStore(GraphReader):
    """The graph store role: the reads of ``GraphReader`` plus the writes. Call
    ``ensure_schema`` first.

    Errors, besides ``GraphReader``'s: ``ValueError`` for a relationship whose endpoint is
    not among the given entities, or bad entity vectors; ``EmbeddingMismatchError`` for name
    vectors whose dimension is not the stored vectors'. Every write is one transaction: on
    error nothing of it is visible.
    """

    def ensure_schema(self, dimension: int | None = None) -> None:
        """Create tables / constraints / the entity vector index idempotently.

        ``dimension`` is the entity-name vector size (needed by Neo4j's vector index); later
        writes must match it.

        Raises:
            ValueError: ``dimension`` < 1.
            EmbeddingMismatchError: stored vectors have another dimension (re-embed with
                ``kb rebuild embeddings --all --reset`` after changing the embedding model).
        """
        if dimension is not None and dimension < 1:
            raise ValueError(f"dimension must be at least 1, got {dimension}")
        self._ensure_schema(dimension)

    def replace_document(
        self,
        document: str,
        entities: Sequence[Entity],
        relationships: Sequence[Relationship],
    ) -> GraphCounts:
        """In one transaction: merge ``entities`` by key (an existing entity keeps its name
        and type; a missing vector or description is filled in), delete this document's
        relationships, create ``relationships`` (all must have ``source_doc == document``),
        then delete orphan entities. Other documents' edges are untouched.

        Returns the document's counts afterwards (entities = distinct endpoints of its
        relationships).

        Raises:
            ValueError: a relationship of another document or with an endpoint not among
                ``entities``; inconsistent or bad vectors (checked before any write).
            EmbeddingMismatchError: vectors of another dimension than the stored ones.
        """
        validate_document_edges(document, entities, relationships)
        return self._replace_document(
            document, merge_entities(entities), unique_relationships(relationships)
        )

    @abstractmethod
    def delete_document(self, document: str) -> GraphCounts:
        """Delete a document's relationships, then orphan entities. Returns what was removed
        (relationships deleted, orphan entities deleted). Unknown documents remove nothing."""

    @abstractmethod
    def clear(self) -> GraphCounts:
        """Delete every relationship and entity in one transaction (and, on Neo4j, the entity
        vector index), so entity vectors of a new embedding model can be stored. Returns what
        was removed."""

    # -- the backend's writes, called with checked arguments --------------------------------

    @abstractmethod
    def _ensure_schema(self, dimension: int | None) -> None:
        """``ensure_schema`` for a checked ``dimension``."""

    @abstractmethod
    def _replace_document(
        self, document: str, entities: dict[str, Entity], relationships: list[Relationship]
    ) -> GraphCounts:
        """``replace_document`` for validated edges: ``entities`` merged by key
        (``merge_entities``), ``relationships`` without repeats (``unique_relationships``).
        Entity vectors are the backend's to check (``entity_vectors``)."""


def validate_document_edges(
    document: str, entities: Sequence[Entity], relationships: Sequence[Relationship]
) -> dict[str, Entity]:
    """Check a ``replace_document`` call before any write; return entities by key.

    Raises:
        ValueError: a relationship of another document, or one whose endpoint key is not
            among ``entities``.
    """
    by_key: dict[str, Entity] = {}
    for entity in entities:
        by_key.setdefault(entity.key, entity)
    for rel in relationships:
        if rel.source_doc != document:
            raise ValueError(
                f"relationship {rel.id} belongs to {rel.source_doc!r}, not {document!r}"
            )
        for end in (rel.source, rel.target):
            if end not in by_key:
                raise ValueError(f"relationship {rel.id} refers to unknown entity {end!r}")
    return by_key


def walk_order_key(seed_index: int, path: GraphPath) -> tuple:
    """The order ``GraphStore.walk`` returns paths in, shared by every backend.

    Shorter paths first, then by the seed's position in the (de-duplicated) seed list, then by
    the node keys along the path, then by the relationship ids (so parallel edges between the
    same nodes have a fixed order too).
    """
    return (
        path.hops,
        seed_index,
        path.nodes,
        tuple(rel.id for rel in path.relationships),
    )


def check_limit(limit: int) -> None:
    """Raise ``ValueError`` unless ``limit >= 1`` (``walk`` and ``overview``)."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")


def check_walk_args(hops: int, limit: int) -> None:
    """Raise ``ValueError`` unless ``1 <= hops <= MAX_HOPS`` and ``limit >= 1``."""
    if not 1 <= hops <= MAX_HOPS:
        raise ValueError(f"hops must be 1 or 2, got {hops}")
    check_limit(limit)


def query_vector(vector: Sequence[float] | np.ndarray, k: int) -> np.ndarray:
    """Check a similarity query and return it as a float32 array of shape ``(dimension,)``.

    Raises:
        ValueError: ``k`` < 1, an empty, non-finite or all-zero vector (cosine is undefined).
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    array = np.asarray(vector, dtype=np.float32).reshape(-1)
    if array.size == 0 or not np.all(np.isfinite(array)) or not np.any(array):
        raise ValueError("the query vector must be non-empty, finite and not all zeros")
    return array


def entity_vectors(entities: Iterable[Entity], dimension: int | None) -> int | None:
    """Check the name vectors of a write; return their common dimension (``None``: no vectors).

    Raises:
        ValueError: vectors of different lengths in this call, or a non-finite or all-zero
            vector.
        EmbeddingMismatchError: a length other than ``dimension`` (the store's, when known).
    """
    seen: int | None = None
    for entity in entities:
        if entity.vector is None:
            continue
        size = len(entity.vector)
        if size == 0 or not all(math.isfinite(x) for x in entity.vector) or not any(entity.vector):
            raise ValueError(f"entity {entity.name!r}: its vector must be finite and not all zeros")
        if seen is None:
            seen = size
        elif size != seen:
            raise ValueError(
                f"entity {entity.name!r} has a {size}-dim vector; others in this call have {seen}"
            )
    if seen is not None and dimension is not None and seen != dimension:
        raise EmbeddingMismatchError(
            f"entity vectors have {seen} dimensions but the graph store holds {dimension}-dim "
            "vectors (embed entity names with the same model, or rebuild the graph)"
        )
    return seen


def merge_entities(entities: Sequence[Entity]) -> dict[str, Entity]:
    """Collapse entities with the same key, in order: the first keeps its name and type, later
    ones fill in a missing description or vector (the ``replace_document`` merge rule)."""
    merged: dict[str, Entity] = {}
    for entity in entities:
        key = entity.key
        first = merged.get(key)
        if first is None:
            merged[key] = entity
            continue
        merged[key] = Entity(
            name=first.name,
            type=first.type,
            description=first.description or entity.description,
            vector=first.vector if first.vector is not None else entity.vector,
        )
    return merged


def unique_relationships(relationships: Sequence[Relationship]) -> list[Relationship]:
    """Drop repeats of the same edge (same ``id``: all six fields equal), keeping the order."""
    return list({rel.id: rel for rel in relationships}.values())
