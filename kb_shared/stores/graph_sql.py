"""The embedded graph store: two tables in the catalog database (SQLite or Postgres).

Tables (on their own ``GRAPH_METADATA``, which ``factory.ensure_sql_schema`` creates beside
the catalog's; the same DDL for DBAs is ``sql/002_graph.sql``):

* ``graph_entities(key PK, name, type, description, vector, dimension)`` — ``vector`` is the
  entity-name embedding as little-endian float32 bytes (``dimension`` values), or NULL.
* ``graph_relationships(id PK, source_key FK, target_key FK, type, description, source_doc,
  chunk_id)`` — ``id`` is ``Relationship.id`` (a hash of the six fields, so the same edge
  given twice in one document is stored once); indexed on ``source_doc``, ``source_key`` and
  ``target_key``.

Similarity search loads every stored vector and computes cosine similarity with numpy: one
full read of ``N × dimension × 4`` bytes per query. That is fine to about 100,000 entities
(384-dim: ~150 MB read, a second or two); past that use the Neo4j backend and its vector index.

Walks are a breadth-first search in Python over SQL neighbour queries (one query per hop),
undirected, with Neo4j's relationship-uniqueness rule (no relationship twice in one path;
nodes may repeat, e.g. ``A→B→A`` over two different edges) and the order of
``walk_order_key``. Every write is one transaction (``_write``: ``BEGIN IMMEDIATE`` on
SQLite, as the catalog's ``sql.write_transaction``: a deferred transaction that read before
another connection committed cannot become a writer in WAL mode, and SQLite then answers
"database is locked" at once instead of waiting; benchmarks/results/
partitions-2026-12-02-all-10k.md lost a document to it). On Postgres the
foreign keys also guard concurrent writers: a writer that would delete an entity another
transaction has just linked fails (and rolls back) instead of leaving a dangling edge.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import numpy as np
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from kb_shared.errors import EmbeddingMismatchError, StoreError
from kb_shared.graph_model import Entity, Relationship
from kb_shared.stores.graph import (
    EdgeFilter,
    EntityHit,
    GraphCounts,
    GraphPath,
    GraphStore,
    entity_vectors,
    walk_order_key,
)
from kb_shared.stores.sql import WRITE_OPTION, guard, in_batches, safe_url, upsert

GRAPH_METADATA = sa.MetaData()

GRAPH_ENTITIES = sa.Table(
    "graph_entities",
    GRAPH_METADATA,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("type", sa.Text, nullable=False),
    sa.Column("description", sa.Text, nullable=False, server_default=""),
    sa.Column("vector", sa.LargeBinary, nullable=True),
    sa.Column("dimension", sa.Integer, nullable=True),
)

GRAPH_RELATIONSHIPS = sa.Table(
    "graph_relationships",
    GRAPH_METADATA,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column(
        "source_key",
        sa.Text,
        sa.ForeignKey("graph_entities.key", name="fk_graph_relationships_source_key"),
        nullable=False,
    ),
    sa.Column(
        "target_key",
        sa.Text,
        sa.ForeignKey("graph_entities.key", name="fk_graph_relationships_target_key"),
        nullable=False,
    ),
    sa.Column("type", sa.Text, nullable=False),
    sa.Column("description", sa.Text, nullable=False, server_default=""),
    sa.Column("source_doc", sa.Text, nullable=False),
    sa.Column("chunk_id", sa.Text, nullable=False),
    sa.Index("ix_graph_relationships_source_doc", "source_doc"),
    sa.Index("ix_graph_relationships_source_key", "source_key"),
    sa.Index("ix_graph_relationships_target_key", "target_key"),
)

_E = GRAPH_ENTITIES.c
_R = GRAPH_RELATIONSHIPS.c


#: The ``Relationship`` fields stored in columns of their own name (``source``/``target`` are
#: ``source_key``/``target_key``).
_SAME_NAMED = ("type", "description", "source_doc", "chunk_id")


def _relationship(row: sa.Row) -> Relationship:
    values = row._mapping
    return Relationship(
        source=values["source_key"],
        target=values["target_key"],
        **{name: values[name] for name in _SAME_NAMED},
    )


def _edge_conditions(where: EdgeFilter) -> list[sa.ColumnElement[bool]]:
    """SQL conditions on ``graph_relationships`` for ``where`` (none for an empty filter);
    the entity type is matched through a correlated ``EXISTS`` per endpoint."""
    conditions: list[sa.ColumnElement[bool]] = []
    if where.documents is not None:
        conditions.append(_R.source_doc.in_(sorted(where.documents)))
    if where.relationship_type is not None:
        conditions.append(_R.type == where.relationship_type)
    if where.entity_type is not None:
        # one EXISTS per endpoint: SQLite 3.40 returned each row twice for a single EXISTS
        # with ``key = source_key OR key = target_key`` inside (its OR-by-union plan)
        conditions.append(
            sa.or_(
                *(
                    sa.exists().where(_E.key == end, _E.type == where.entity_type)
                    for end in (_R.source_key, _R.target_key)
                )
            )
        )
    return conditions


def _relationship_values(rel: Relationship) -> dict[str, str]:
    """The ``graph_relationships`` row of ``rel``."""
    same = {name: getattr(rel, name) for name in _SAME_NAMED}
    return {"id": rel.id, "source_key": rel.source, "target_key": rel.target, **same}


class SqlGraphStore(GraphStore):
    """``GraphStore`` over the ``graph_entities`` / ``graph_relationships`` tables.

    Args:
        engine: a SQLAlchemy 2 engine on SQLite or Postgres (the catalog's). The caller owns
            it: ``close`` does not dispose it.

    The constructor does no I/O. Errors: ``StoreUnavailableError`` when the database cannot
    be reached; ``SchemaMissingError`` before ``kb db init``; ``StoreError`` for other
    database failures; ``ValueError`` for bad input (nothing written);
    ``EmbeddingMismatchError`` when a vector's dimension is not the stored vectors'.
    """

    def __init__(self, engine: sa.Engine) -> None:
        if engine.dialect.name not in ("sqlite", "postgresql"):
            raise ValueError(
                f"SqlGraphStore supports SQLite and Postgres, not {engine.dialect.name!r}"
            )
        self.engine = engine
        self._dimension: int | None = None
        self._where = safe_url(engine)

    # -- plumbing ------------------------------------------------------------------------

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Translate database errors (``sql.guard``: unreachable, schema missing, permission
        denied); any other SQLAlchemy error becomes a ``StoreError`` naming the action."""
        try:
            with guard(self.engine, "graph", action):
                yield
        except sa.exc.SQLAlchemyError as exc:
            raise StoreError(f"graph store {self._where}: {action} failed: {exc}") from exc

    @contextmanager
    def _write(self) -> Iterator[sa.Connection]:
        """A connection in one write transaction, taking SQLite's write lock at ``BEGIN``
        (``sql.WRITE_OPTION``; waits up to the busy timeout for another writer)."""
        with self.engine.connect().execution_options(**{WRITE_OPTION: True}) as conn:
            with conn.begin():
                yield conn

    def _insert(self) -> postgresql.Insert | sqlite.Insert:
        """The dialect's INSERT with ``ON CONFLICT`` support."""
        return upsert(GRAPH_ENTITIES, self.engine.dialect.name)

    def _stored_dimension(self, conn: sa.Connection) -> int | None:
        return conn.execute(
            sa.select(_E.dimension).where(_E.dimension.is_not(None)).limit(1)
        ).scalar()

    # -- schema --------------------------------------------------------------------------

    def _ensure_schema(self, dimension: int | None) -> None:
        """Create the two tables and their indexes if missing (idempotent)."""
        with self._errors("creating the graph tables"):
            GRAPH_METADATA.create_all(self.engine, checkfirst=True)
            with self.engine.connect() as conn:
                stored = self._stored_dimension(conn)
        if dimension is not None and stored is not None and stored != dimension:
            raise EmbeddingMismatchError(
                f"the graph store {self._where} holds {stored}-dim entity vectors, not "
                f"{dimension}: re-embed everything after changing the embedding model: "
                "`kb rebuild embeddings --all --reset`"
            )
        self._dimension = dimension if dimension is not None else stored

    # -- writes --------------------------------------------------------------------------

    def _merge(self, conn: sa.Connection, entities: Iterable[Entity]) -> None:
        rows = [
            {
                "key": entity.key,
                "name": entity.name,
                "type": entity.type,
                "description": entity.description,
                "vector": (
                    None
                    if entity.vector is None
                    else np.asarray(entity.vector, dtype="<f4").tobytes()
                ),
                "dimension": None if entity.vector is None else len(entity.vector),
            }
            for entity in entities
        ]
        if not rows:
            return
        insert = self._insert()
        existing = GRAPH_ENTITIES.c
        statement = insert.on_conflict_do_update(
            index_elements=[existing.key],
            set_={
                "description": sa.case(
                    (existing.description == "", insert.excluded.description),
                    else_=existing.description,
                ),
                "vector": sa.func.coalesce(existing.vector, insert.excluded.vector),
                "dimension": sa.func.coalesce(existing.dimension, insert.excluded.dimension),
            },
        )
        conn.execute(statement, rows)

    def _delete_edges(self, conn: sa.Connection, document: str) -> tuple[int, set[str]]:
        """Delete a document's relationships; return how many and their endpoint keys."""
        ends: set[str] = set()
        for source, target in conn.execute(
            sa.select(_R.source_key, _R.target_key).where(_R.source_doc == document)
        ):
            ends.update((source, target))
        deleted = conn.execute(
            sa.delete(GRAPH_RELATIONSHIPS).where(_R.source_doc == document)
        ).rowcount
        return deleted, ends

    def _delete_orphans(self, conn: sa.Connection, candidates: Iterable[str]) -> int:
        """Delete the ``candidates`` no relationship touches any more; return how many."""
        removed = 0
        touched = sa.or_(
            sa.exists().where(_R.source_key == _E.key),
            sa.exists().where(_R.target_key == _E.key),
        )
        for batch in in_batches(sorted(set(candidates))):
            removed += conn.execute(
                sa.delete(GRAPH_ENTITIES).where(_E.key.in_(batch), sa.not_(touched))
            ).rowcount
        return removed

    def _replace_document(
        self, document: str, entities: dict[str, Entity], relationships: list[Relationship]
    ) -> GraphCounts:
        """One write transaction (``_write``); vectors are checked against the stored ones
        inside it."""
        with self._errors(f"replacing the graph of {document!r}"), self._write() as conn:
            dimension = self._dimension or self._stored_dimension(conn)
            entity_vectors(entities.values(), dimension)
            self._merge(conn, entities.values())
            _, old_ends = self._delete_edges(conn, document)
            if relationships:
                conn.execute(
                    sa.insert(GRAPH_RELATIONSHIPS),
                    [_relationship_values(rel) for rel in relationships],
                )
            self._delete_orphans(conn, old_ends | entities.keys())
            return self._count_in(conn, EdgeFilter(documents=frozenset({document})))

    def delete_document(self, document: str) -> GraphCounts:
        """Delete a document's relationships, then orphaned entities; return what went."""
        with self._errors(f"deleting the graph of {document!r}"), self._write() as conn:
            deleted, ends = self._delete_edges(conn, document)
            orphans = self._delete_orphans(conn, ends)
        return GraphCounts(entities=orphans, relationships=deleted)

    def clear(self) -> GraphCounts:
        """Delete every relationship, then every entity, in one transaction."""
        with self._errors("clearing the graph"), self._write() as conn:
            relationships = conn.execute(GRAPH_RELATIONSHIPS.delete()).rowcount
            entities = conn.execute(GRAPH_ENTITIES.delete()).rowcount
        self._dimension = None
        return GraphCounts(entities=entities, relationships=relationships)

    # -- reads ---------------------------------------------------------------------------

    def _similar_entities(self, query: np.ndarray, k: int) -> list[EntityHit]:
        """Exact cosine similarity over every stored vector (one full read, numpy)."""
        with self._errors("searching entity vectors"), self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(_E.key, _E.name, _E.type, _E.vector, _E.dimension).where(
                    _E.vector.is_not(None)
                )
            ).all()
        if not rows:
            return []
        dims = {row.dimension for row in rows}
        if dims != {query.size}:
            raise EmbeddingMismatchError(
                f"query vector has {query.size} dimensions; stored entity vectors have "
                f"{sorted(dims)}: re-embed everything after changing the embedding model: "
                "`kb rebuild embeddings --all --reset`"
            )
        matrix = np.frombuffer(b"".join(row.vector for row in rows), dtype="<f4").reshape(
            len(rows), query.size
        )
        norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(query)
        scores = (matrix @ query) / norms
        order = sorted(range(len(rows)), key=lambda i: (-float(scores[i]), rows[i].key))[:k]
        return [
            EntityHit(key=rows[i].key, name=rows[i].name, type=rows[i].type, score=float(scores[i]))
            for i in order
        ]

    def _adjacency(
        self, conn: sa.Connection, keys: Iterable[str]
    ) -> dict[str, list[tuple[str, Relationship]]]:
        """For each key, ``(neighbour, relationship)`` over every edge touching it, either
        direction. A self-loop appears once."""
        adjacency: dict[str, list[tuple[str, Relationship]]] = defaultdict(list)
        wanted = sorted(set(keys))
        for batch in in_batches(wanted):
            rows = conn.execute(
                sa.select(GRAPH_RELATIONSHIPS).where(
                    sa.or_(_R.source_key.in_(batch), _R.target_key.in_(batch))
                )
            )
            members = set(batch)
            for row in rows:
                rel = _relationship(row)
                if rel.source in members:
                    adjacency[rel.source].append((rel.target, rel))
                if rel.target in members and rel.target != rel.source:
                    adjacency[rel.target].append((rel.source, rel))
        return adjacency

    def _walk(self, seeds: list[str], hops: int, limit: int) -> list[GraphPath]:
        """Breadth-first over SQL neighbour queries, one query per hop."""
        with self._errors("walking the graph"), self.engine.connect() as conn:
            adjacency = self._adjacency(conn, seeds)
            first: list[list[GraphPath]] = []
            for index, seed in enumerate(seeds):
                paths = [GraphPath((seed, nb), (rel,)) for nb, rel in adjacency.get(seed, ())]
                paths.sort(key=lambda p, i=index: walk_order_key(i, p))
                first.append(paths)
            result = [path for paths in first for path in paths]
            if hops == 1 or len(result) >= limit:
                return result[:limit]
            middles = {path.nodes[1] for path in result} - set(seeds)
            adjacency.update(self._adjacency(conn, middles))
        for index, paths in enumerate(first):
            second = [
                GraphPath((*path.nodes, end), (*path.relationships, rel))
                for path in paths
                for end, rel in adjacency.get(path.nodes[1], ())
                if rel.id != path.relationships[0].id
            ]
            second.sort(key=lambda p, i=index: walk_order_key(i, p))
            result.extend(second)
            if len(result) >= limit:
                break
        return result[:limit]

    def _degree_cte(self) -> sa.CTE:
        """``degree(key, n)``: every entity's degree, from one ``UNION ALL`` of both endpoint
        columns (a self-loop counts twice)."""
        ends = sa.union_all(
            sa.select(_R.source_key.label("key")), sa.select(_R.target_key.label("key"))
        ).subquery("ends")
        return sa.select(ends.c.key, sa.func.count().label("n")).group_by(ends.c.key).cte("degree")

    def _overview(self, limit: int, where: EdgeFilter) -> list[Relationship]:
        """The degree CTE joined once per endpoint, filtered, ordered and capped in SQL."""
        degree = self._degree_cte()
        source_degree = degree.alias("source_degree")
        target_degree = degree.alias("target_degree")
        combined = (source_degree.c.n + target_degree.c.n).label("combined")
        statement = (
            sa.select(GRAPH_RELATIONSHIPS, combined)
            .join(source_degree, source_degree.c.key == _R.source_key)
            .join(target_degree, target_degree.c.key == _R.target_key)
            .where(*_edge_conditions(where))
            .order_by(combined.desc(), _R.id)
            .limit(limit)
        )
        with self._errors("reading the graph overview"), self.engine.connect() as conn:
            return [_relationship(row) for row in conn.execute(statement)]

    def _touching(self, keys: list[str], where: EdgeFilter) -> list[Relationship]:
        """One query per ``sql.IN_BATCH`` keys on either endpoint column."""
        found: dict[str, Relationship] = {}
        conditions = _edge_conditions(where)
        with self._errors("reading a neighbourhood"), self.engine.connect() as conn:
            for batch in in_batches(keys):
                touching = sa.or_(_R.source_key.in_(batch), _R.target_key.in_(batch))
                for row in conn.execute(
                    sa.select(GRAPH_RELATIONSHIPS).where(touching, *conditions)
                ):
                    rel = _relationship(row)
                    found[rel.id] = rel
        return list(found.values())

    def _degrees(self, keys: list[str]) -> dict[str, int]:
        """One grouped ``UNION ALL`` query per ``sql.IN_BATCH`` keys."""
        degrees: dict[str, int] = {}
        with self._errors("reading degrees"), self.engine.connect() as conn:
            for batch in in_batches(keys):
                ends = sa.union_all(
                    sa.select(_R.source_key.label("key")).where(_R.source_key.in_(batch)),
                    sa.select(_R.target_key.label("key")).where(_R.target_key.in_(batch)),
                ).subquery("ends")
                rows = conn.execute(
                    sa.select(ends.c.key, sa.func.count().label("n")).group_by(ends.c.key)
                )
                degrees.update({row.key: row.n for row in rows})
        return degrees

    def relationships_for_document(self, document: str) -> list[Relationship]:
        """``GraphReader.relationships_for_document``."""
        with self._errors(f"reading the graph of {document!r}"), self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(GRAPH_RELATIONSHIPS).where(_R.source_doc == document).order_by(_R.id)
            )
            return [_relationship(row) for row in rows]

    def _entities(self, keys: list[str]) -> dict[str, Entity]:
        """One ``IN`` query per ``sql.IN_BATCH`` keys."""
        found: dict[str, Entity] = {}
        with self._errors("reading entities"), self.engine.connect() as conn:
            for batch in in_batches(keys):
                for row in conn.execute(
                    sa.select(_E.key, _E.name, _E.type, _E.description).where(_E.key.in_(batch))
                ):
                    found[row.key] = Entity(
                        name=row.name, type=row.type, description=row.description
                    )
        return found

    def _count_in(self, conn: sa.Connection, where: EdgeFilter) -> GraphCounts:
        if where.is_empty:
            entities = conn.execute(
                sa.select(sa.func.count()).select_from(GRAPH_ENTITIES)
            ).scalar_one()
            relationships = conn.execute(
                sa.select(sa.func.count()).select_from(GRAPH_RELATIONSHIPS)
            ).scalar_one()
            return GraphCounts(entities=entities, relationships=relationships)
        kept = _edge_conditions(where)
        ends = sa.union(
            sa.select(_R.source_key.label("key")).where(*kept),
            sa.select(_R.target_key.label("key")).where(*kept),
        ).subquery()
        entities = conn.execute(sa.select(sa.func.count()).select_from(ends)).scalar_one()
        relationships = conn.execute(
            sa.select(sa.func.count()).select_from(GRAPH_RELATIONSHIPS).where(*kept)
        ).scalar_one()
        return GraphCounts(entities=entities, relationships=relationships)

    def _counts(self, where: EdgeFilter) -> GraphCounts:
        """``GraphReader.counts``: two counting queries."""
        with self._errors("counting the graph"), self.engine.connect() as conn:
            return self._count_in(conn, where)
