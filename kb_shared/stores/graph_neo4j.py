"""The distributed graph store: Neo4j through the official ``neo4j`` driver (6.x).

Model: ``(:Entity {key, name, type, description, embedding})-[:RELATES {id, type,
description, sourceDoc, chunkId}]->(:Entity)``, with

* a uniqueness constraint ``entity_key`` on ``Entity.key`` (which also indexes it),
* a relationship property index ``relates_source_doc`` on ``RELATES.sourceDoc`` (document
  replace, delete and counts start from it),
* the vector index ``entity_names`` on ``Entity.embedding`` (cosine; the dimension comes from
  ``ensure_schema``), queried with ``db.index.vector.queryNodes``. Quantization is off
  (``vector.quantization.enabled: false``, a 5.x vector-2.0 index option): with it on,
  scores drift by ~1e-3 (measured: 0.8016 for an exact 0.8), and entity names are few enough
  that full float32 vectors cost little. Neo4j reports cosine
  scores rescaled to ``(1 + cos) / 2`` (Neo4j Cypher manual, "Vector indexes", similarity
  functions); ``similar_entities`` maps them back to the cosine the contract promises.

Walks are Cypher variable-length undirected patterns ``(s)-[:RELATES*1..N]-(:Entity)``, so
Neo4j's relationship-uniqueness rule (no relationship twice in one match) is the path rule;
they are ordered and capped in Cypher, then ``GraphReader.walk`` sorts them with
``graph.walk_order_key`` as it does every backend's. ``replace_document`` runs in one
``execute_write`` transaction function (retried by the driver on transient errors, all or
nothing).

Cypher text lives in the module constants below, apart from the code that runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any, TypeVar

import neo4j
import numpy as np
from neo4j.exceptions import AuthError, DriverError, Neo4jError, ServiceUnavailable, SessionExpired

from kb_shared.errors import EmbeddingMismatchError, StoreError, StoreUnavailableError
from kb_shared.graph_model import Entity, Relationship
from kb_shared.stores.graph import (
    EdgeFilter,
    EntityHit,
    GraphCounts,
    GraphPath,
    GraphStore,
    entity_vectors,
)

T = TypeVar("T")

#: Name of the entity-name vector index.
VECTOR_INDEX = "entity_names"

#: Seconds ``ensure_schema`` waits for new indexes to come online (``db.awaitIndexes``).
INDEX_ONLINE_TIMEOUT_S = 300

# -- schema -------------------------------------------------------------------------------

CREATE_KEY_CONSTRAINT = (
    "CREATE CONSTRAINT entity_key IF NOT EXISTS FOR (e:Entity) REQUIRE e.key IS UNIQUE"
)
CREATE_SOURCE_DOC_INDEX = (
    "CREATE INDEX relates_source_doc IF NOT EXISTS FOR ()-[r:RELATES]-() ON (r.sourceDoc)"
)
CREATE_VECTOR_INDEX = (
    "CREATE VECTOR INDEX entity_names IF NOT EXISTS FOR (e:Entity) ON e.embedding "
    "OPTIONS {indexConfig: {`vector.dimensions`: $dimension, "
    "`vector.similarity_function`: 'cosine', `vector.quantization.enabled`: false}}"
)
DROP_VECTOR_INDEX = "DROP INDEX entity_names IF EXISTS"
CLEAR_GRAPH = """
MATCH (e:Entity)
OPTIONAL MATCH (e)-[r:RELATES]->()
WITH collect(DISTINCT e) AS entities, count(DISTINCT r) AS relationships
FOREACH (e IN entities | DETACH DELETE e)
RETURN size(entities) AS entities, relationships
"""
VECTOR_INDEX_OPTIONS = (
    "SHOW VECTOR INDEXES YIELD name, options WHERE name = $name RETURN options"
)
STORED_DIMENSION = (
    "MATCH (e:Entity) WHERE e.embedding IS NOT NULL RETURN size(e.embedding) AS dimension LIMIT 1"
)
AWAIT_INDEXES = "CALL db.awaitIndexes($seconds)"

# -- writes -------------------------------------------------------------------------------

MERGE_ENTITIES = """
UNWIND $entities AS row
MERGE (e:Entity {key: row.key})
ON CREATE SET e.name = row.name, e.type = row.type, e.description = row.description,
              e.embedding = row.embedding
ON MATCH SET e.description = CASE WHEN coalesce(e.description, '') = ''
                                  THEN row.description ELSE e.description END,
             e.embedding = coalesce(e.embedding, row.embedding)
"""

DELETE_DOCUMENT_EDGES = """
MATCH (a:Entity)-[r:RELATES]->(b:Entity)
WHERE r.sourceDoc = $document
WITH r, a.key AS source, b.key AS target
DELETE r
RETURN source, target
"""

CREATE_EDGES = """
UNWIND $relationships AS row
MATCH (a:Entity {key: row.source})
MATCH (b:Entity {key: row.target})
CREATE (a)-[:RELATES {id: row.id, type: row.type, description: row.description,
                      sourceDoc: row.source_doc, chunkId: row.chunk_id}]->(b)
"""

DELETE_ORPHANS = """
UNWIND $keys AS key
MATCH (e:Entity {key: key})
WHERE NOT EXISTS { (e)-[:RELATES]-() }
DELETE e
RETURN count(*) AS removed
"""

# -- reads --------------------------------------------------------------------------------

GRAPH_COUNTS = """
CALL () { MATCH (e:Entity) RETURN count(e) AS entities }
CALL () { MATCH ()-[r:RELATES]->() RETURN count(r) AS relationships }
RETURN entities, relationships
"""

DOCUMENT_COUNTS = """
MATCH (a:Entity)-[r:RELATES]->(b:Entity)
WHERE r.sourceDoc = $document
UNWIND [a, b] AS e
RETURN count(DISTINCT e) AS entities, count(DISTINCT r) AS relationships
"""

SIMILAR_ENTITIES = """
CALL db.index.vector.queryNodes($index, $k, $vector) YIELD node, score
RETURN node.key AS key, node.name AS name, node.type AS type, score
"""

#: A relationship as a map whose keys are the ``Relationship`` fields.
_RELATIONSHIP_MAP = (
    "{source: startNode(r).key, target: endNode(r).key, type: r.type, "
    "description: r.description, source_doc: r.sourceDoc, chunk_id: r.chunkId}"
)

_WALK = """
UNWIND range(0, size($seeds) - 1) AS seedIndex
MATCH (s:Entity {key: $seeds[seedIndex]})
MATCH p = (s)-[:RELATES*1..HOPS]-(:Entity)
WITH seedIndex, p
ORDER BY length(p), seedIndex, [n IN nodes(p) | n.key], [r IN relationships(p) | r.id]
LIMIT $limit
RETURN seedIndex, [n IN nodes(p) | n.key] AS nodes,
       [r IN relationships(p) | RELATIONSHIP_MAP] AS relationships
""".replace("RELATIONSHIP_MAP", _RELATIONSHIP_MAP)

#: Walk queries by maximum hops (Cypher does not accept a parameter as a length bound).
WALK = {1: _WALK.replace("HOPS", "1"), 2: _WALK.replace("HOPS", "2")}

#: The ``EdgeFilter`` test on ``r`` between ``a`` and ``b`` (null parameters filter nothing).
_EDGE_FILTER = (
    "($documents IS NULL OR r.sourceDoc IN $documents) "
    "AND ($relationshipType IS NULL OR r.type = $relationshipType) "
    "AND ($entityType IS NULL OR a.type = $entityType OR b.type = $entityType)"
)

OVERVIEW = """
MATCH (a:Entity)-[r:RELATES]->(b:Entity)
WHERE EDGE_FILTER
WITH a, r, b,
     COUNT { (a)-[:RELATES]->() } + COUNT { (a)<-[:RELATES]-() }
     + COUNT { (b)-[:RELATES]->() } + COUNT { (b)<-[:RELATES]-() } AS combined
ORDER BY combined DESC, r.id
LIMIT $limit
RETURN RELATIONSHIP_MAP AS relationship
""".replace("RELATIONSHIP_MAP", _RELATIONSHIP_MAP).replace("EDGE_FILTER", _EDGE_FILTER)

TOUCHING = """
UNWIND $keys AS key
MATCH (a:Entity {key: key})-[r:RELATES]-(b:Entity)
WHERE EDGE_FILTER
WITH DISTINCT r
RETURN RELATIONSHIP_MAP AS relationship
""".replace("RELATIONSHIP_MAP", _RELATIONSHIP_MAP).replace("EDGE_FILTER", _EDGE_FILTER)

DEGREES = """
UNWIND $keys AS key
MATCH (e:Entity {key: key})
RETURN key, COUNT { (e)-[:RELATES]->() } + COUNT { (e)<-[:RELATES]-() } AS degree
"""

FILTERED_COUNTS = """
MATCH (a:Entity)-[r:RELATES]->(b:Entity)
WHERE EDGE_FILTER
UNWIND [a, b] AS e
RETURN count(DISTINCT e) AS entities, count(DISTINCT r) AS relationships
""".replace("EDGE_FILTER", _EDGE_FILTER)

RELATIONSHIPS_FOR_DOCUMENT = f"""
MATCH ()-[r:RELATES]->()
WHERE r.sourceDoc = $document
RETURN {_RELATIONSHIP_MAP} AS relationship
ORDER BY r.id
"""

ENTITIES_BY_KEY = """
UNWIND $keys AS key
MATCH (e:Entity {key: key})
RETURN e.key AS key, e.name AS name, e.type AS type, e.description AS description
"""


def _filter_parameters(where: EdgeFilter) -> dict[str, Any]:
    """The ``_EDGE_FILTER`` parameters of ``where`` (``None`` where it filters nothing)."""
    return {
        "documents": None if where.documents is None else sorted(where.documents),
        "entityType": where.entity_type,
        "relationshipType": where.relationship_type,
    }


def _edge_row(rel: Relationship) -> dict[str, str]:
    """The ``CREATE_EDGES`` row of ``rel``: its fields and its ``id``."""
    return {"id": rel.id, **asdict(rel)}


class Neo4jGraphStore(GraphStore):
    """``GraphStore`` on a Neo4j 5 database.

    Args:
        driver: an open ``neo4j.Driver``.
        database: the database name (Neo4j's default is ``neo4j``).
        owns_driver: ``close`` closes the driver too (the factory's stores own theirs; a
            driver passed in by a test or another owner stays open).
        read_only: every query and session runs in READ access mode, so the server itself
            refuses a write (``StoreError``); the MCP server opens its graph this way.

    The constructor does no I/O. Errors: ``StoreUnavailableError`` (naming the server
    address) when Neo4j is unreachable or refuses the credentials; ``StoreError`` for other
    Neo4j failures; ``ValueError`` for bad input (nothing written); ``EmbeddingMismatchError``
    from ``ensure_schema`` when stored vectors have another dimension.
    """

    def __init__(
        self,
        driver: neo4j.Driver,
        database: str = "neo4j",
        *,
        owns_driver: bool = False,
        read_only: bool = False,
    ) -> None:
        self.driver = driver
        self.database = database
        self.read_only = read_only
        self._owns_driver = owns_driver
        self._dimension: int | None = None

    def close(self) -> None:
        """Close the driver if this store owns it (safe to call twice)."""
        if self._owns_driver:
            self.driver.close()

    # -- plumbing ------------------------------------------------------------------------

    @property
    def _where(self) -> str:
        return f"Neo4j at {self.driver.address} (database {self.database!r})"

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Turn driver errors into ``StoreError``s naming the server and the action."""
        try:
            yield
        except (ServiceUnavailable, SessionExpired) as exc:
            raise StoreUnavailableError(
                f"{self._where} is unreachable while {action}: {exc}"
            ) from exc
        except AuthError as exc:
            raise StoreUnavailableError(
                f"{self._where} refused the credentials while {action} "
                f"(check KB_NEO4J_USER / KB_NEO4J_PASSWORD): {exc}"
            ) from exc
        except (Neo4jError, DriverError) as exc:
            raise StoreError(f"{self._where}: {action} failed: {exc}") from exc

    def _read(self, query: str, **parameters: Any) -> list[neo4j.Record]:
        records, _, _ = self.driver.execute_query(
            query, parameters, database_=self.database, routing_=neo4j.RoutingControl.READ
        )
        return records

    def _run(self, query: str, **parameters: Any) -> list[neo4j.Record]:
        routing = neo4j.RoutingControl.READ if self.read_only else neo4j.RoutingControl.WRITE
        records, _, _ = self.driver.execute_query(
            query, parameters, database_=self.database, routing_=routing
        )
        return records

    @contextmanager
    def _session(self) -> Iterator[neo4j.Session]:
        # Sharing execute_query's bookmark manager makes session writes and execute_query
        # reads causally consistent on a cluster (read-your-writes).
        with self.driver.session(
            database=self.database,
            bookmark_manager=self.driver.execute_query_bookmark_manager,
            default_access_mode=neo4j.READ_ACCESS if self.read_only else neo4j.WRITE_ACCESS,
        ) as session:
            yield session

    def _transaction(self, session: neo4j.Session, work: Callable[..., T], *args: Any) -> T:
        """``work`` in a managed write transaction; on a read-only store in a read one,
        where the server refuses any write (``Neo.ClientError.Statement.AccessMode``)."""
        run = session.execute_read if self.read_only else session.execute_write
        return run(work, *args)

    def _index_dimension(self) -> int | None:
        records = self._read(VECTOR_INDEX_OPTIONS, name=VECTOR_INDEX)
        if not records:
            return None
        return int(records[0]["options"]["indexConfig"]["vector.dimensions"])

    # -- schema --------------------------------------------------------------------------

    def _ensure_schema(self, dimension: int | None) -> None:
        """Create the key constraint, the ``sourceDoc`` index and (with ``dimension``) the
        ``entity_names`` vector index, idempotently, and wait until they are online.

        An existing vector index of another dimension is recreated when no entity holds a
        vector yet.
        """
        with self._errors("creating the graph schema"):
            self._run(CREATE_KEY_CONSTRAINT)
            self._run(CREATE_SOURCE_DOC_INDEX)
            indexed = self._index_dimension()
            if dimension is not None and indexed not in (None, dimension):
                stored = self._read(STORED_DIMENSION)
                if stored:
                    raise EmbeddingMismatchError(
                        f"{self._where} holds {stored[0]['dimension']}-dim entity vectors "
                        f"(index {VECTOR_INDEX!r} has {indexed}), not {dimension}: re-embed "
                        "everything after changing the embedding model: "
                        "`kb rebuild embeddings --all --reset`"
                    )
                self._run(DROP_VECTOR_INDEX)
                indexed = None
            if dimension is not None and indexed is None:
                self._run(CREATE_VECTOR_INDEX, dimension=dimension)
                indexed = dimension
            self._run(AWAIT_INDEXES, seconds=INDEX_ONLINE_TIMEOUT_S)
        self._dimension = indexed

    # -- writes --------------------------------------------------------------------------

    @staticmethod
    def _replace_tx(
        tx: neo4j.ManagedTransaction,
        document: str,
        entities: list[dict[str, Any]],
        edges: list[dict[str, str]],
    ) -> GraphCounts:
        tx.run(MERGE_ENTITIES, entities=entities).consume()
        old_ends = set()
        for record in tx.run(DELETE_DOCUMENT_EDGES, document=document):
            old_ends.update((record["source"], record["target"]))
        created = tx.run(CREATE_EDGES, relationships=edges).consume().counters
        if created.relationships_created != len(edges):
            # Cannot happen after validation unless an endpoint vanished mid-transaction;
            # raising rolls the whole transaction back.
            raise StoreError(
                f"created {created.relationships_created} of {len(edges)} relationships for "
                f"{document!r}; nothing was written"
            )
        keys = sorted(old_ends | {row["key"] for row in entities})
        tx.run(DELETE_ORPHANS, keys=keys).consume()
        record = tx.run(DOCUMENT_COUNTS, document=document).single(strict=True)
        return GraphCounts(entities=record["entities"], relationships=record["relationships"])

    def _replace_document(
        self, document: str, entities: dict[str, Entity], relationships: list[Relationship]
    ) -> GraphCounts:
        """One ``execute_write`` transaction function.

        Raises:
            StoreError: entity vectors given but no vector index exists yet (call
                ``ensure_schema(dimension)`` first).
        """
        dimension = entity_vectors(entities.values(), self._dimension)
        if dimension is not None and self._dimension is None:
            raise StoreError(
                f"{self._where} has no {VECTOR_INDEX!r} vector index: call "
                f"ensure_schema(dimension={dimension}) before writing entity vectors"
            )
        rows = [
            {
                "key": key,
                "name": entity.name,
                "type": entity.type,
                "description": entity.description,
                "embedding": None if entity.vector is None else [float(x) for x in entity.vector],
            }
            for key, entity in entities.items()
        ]
        edges = [_edge_row(rel) for rel in relationships]
        with self._errors(f"replacing the graph of {document!r}"), self._session() as session:
            return self._transaction(session, self._replace_tx, document, rows, edges)

    @staticmethod
    def _delete_tx(tx: neo4j.ManagedTransaction, document: str) -> GraphCounts:
        ends: set[str] = set()
        deleted = 0
        for record in tx.run(DELETE_DOCUMENT_EDGES, document=document):
            ends.update((record["source"], record["target"]))
            deleted += 1
        removed = tx.run(DELETE_ORPHANS, keys=sorted(ends)).single(strict=True)["removed"]
        return GraphCounts(entities=removed, relationships=deleted)

    def delete_document(self, document: str) -> GraphCounts:
        """Delete a document's relationships, then orphaned entities; return what went."""
        with self._errors(f"deleting the graph of {document!r}"), self._session() as session:
            return self._transaction(session, self._delete_tx, document)

    def clear(self) -> GraphCounts:
        """Delete every entity with its relationships in one transaction, then drop the
        ``entity_names`` vector index (``ensure_schema(dimension)`` creates it again)."""
        with self._errors("clearing the graph"), self._session() as session:
            record = self._transaction(session, lambda tx: tx.run(CLEAR_GRAPH).single())
        with self._errors("dropping the entity vector index"):
            self._run(DROP_VECTOR_INDEX)
        self._dimension = None
        return GraphCounts(
            entities=int(record["entities"]) if record else 0,
            relationships=int(record["relationships"]) if record else 0,
        )

    # -- reads ---------------------------------------------------------------------------

    def _similar_entities(self, query: np.ndarray, k: int) -> list[EntityHit]:
        """From the ``entity_names`` vector index (approximate on large graphs: HNSW)."""
        if self._dimension is None:
            with self._errors("reading the vector index"):
                self._dimension = self._index_dimension()
            if self._dimension is None:
                return []
        if query.size != self._dimension:
            raise EmbeddingMismatchError(
                f"query vector has {query.size} dimensions; the {VECTOR_INDEX!r} index has "
                f"{self._dimension}"
            )
        with self._errors("searching entity vectors"):
            records = self._read(
                SIMILAR_ENTITIES, index=VECTOR_INDEX, k=k, vector=[float(x) for x in query]
            )
        hits = [
            EntityHit(
                key=record["key"],
                name=record["name"],
                type=record["type"],
                score=2.0 * float(record["score"]) - 1.0,
            )
            for record in records
        ]
        hits.sort(key=lambda hit: (-hit.score, hit.key))
        return hits[:k]

    def _walk(self, seeds: list[str], hops: int, limit: int) -> list[GraphPath]:
        """One variable-length Cypher match, ordered and capped in Cypher."""
        with self._errors("walking the graph"):
            records = self._read(WALK[hops], seeds=seeds, limit=limit)
        return [
            GraphPath(
                nodes=tuple(record["nodes"]),
                relationships=tuple(Relationship(**r) for r in record["relationships"]),
            )
            for record in records
        ]

    def _overview(self, limit: int, where: EdgeFilter) -> list[Relationship]:
        """Degrees from ``COUNT`` subqueries on both endpoints."""
        with self._errors("reading the graph overview"):
            records = self._read(OVERVIEW, limit=limit, **_filter_parameters(where))
        return [Relationship(**record["relationship"]) for record in records]

    def _touching(self, keys: list[str], where: EdgeFilter) -> list[Relationship]:
        """One undirected match from the ``keys`` (``WITH DISTINCT r``: each edge once)."""
        with self._errors("reading a neighbourhood"):
            records = self._read(TOUCHING, keys=keys, **_filter_parameters(where))
        return [Relationship(**record["relationship"]) for record in records]

    def _degrees(self, keys: list[str]) -> dict[str, int]:
        """``COUNT`` subqueries per key, both directions (a self-loop counts twice)."""
        with self._errors("reading degrees"):
            records = self._read(DEGREES, keys=keys)
        return {record["key"]: record["degree"] for record in records}

    def relationships_for_document(self, document: str) -> list[Relationship]:
        """``GraphReader.relationships_for_document``."""
        with self._errors(f"reading the graph of {document!r}"):
            records = self._read(RELATIONSHIPS_FOR_DOCUMENT, document=document)
        return [Relationship(**record["relationship"]) for record in records]

    def _entities(self, keys: list[str]) -> dict[str, Entity]:
        """One ``UNWIND`` query over ``keys``."""
        with self._errors("reading entities"):
            records = self._read(ENTITIES_BY_KEY, keys=keys)
        return {
            record["key"]: Entity(
                name=record["name"], type=record["type"], description=record["description"] or ""
            )
            for record in records
        }

    def _counts(self, where: EdgeFilter) -> GraphCounts:
        """``GraphReader.counts``: node and relationship counts, or the kept edges and
        their distinct endpoints."""
        with self._errors("counting the graph"):
            if where.is_empty:
                record = self._read(GRAPH_COUNTS)[0]
            else:
                record = self._read(FILTERED_COUNTS, **_filter_parameters(where))[0]
        return GraphCounts(entities=record["entities"], relationships=record["relationships"])
