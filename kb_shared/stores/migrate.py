"""Copy the configured stores into other backends: what ``kb migrate`` runs (issue 15, "A
production deployment"; docs/deploy.md "From an embedded corpus to the servers").

Four moves, each optional, each from the store ``Settings`` configures to a target:

* catalog: every row of every catalog table (``CATALOG_METADATA``; a table the source lacks,
  e.g. ``document_versions`` in an older database, is skipped), in foreign-key order, upserted
  by primary key; on Postgres the id sequences are moved past the copied ids.
* vectors: every point of the SQLite index with its stored dense vector, payload and sparse
  terms (nothing is re-embedded) into Qdrant (a server URL, or a folder for Qdrant's local
  mode); the recorded embedding model and dimension carry over.
* graph: the SQL graph, document by document (``GraphStore.replace_document``, entities with
  their name vectors), into Neo4j, or into the SQL tables of the target catalog when only the
  catalog moves (the SQL graph lives in the catalog database).
* blobs: every key, byte for byte, into another fsspec URL.

Every move is idempotent and resumable: an item the target already holds with the same
values is skipped, the rest is upserted in batches, so running again after a failure or a
success writes only what is missing. Before anything is written each target is compared with
its source; a target that holds an item the source lacks, or the same item with other values
(another embedding model, another relationship set for a document, another blob size), is
refused with ``MigrationRefusedError`` unless ``replace`` is given, which first removes it
(catalog rows, the Qdrant collection, the graph, the extra blobs). After copying, the counts
of every store are compared (``MigrationReport.counts``); a mismatch raises
``MigrationError``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
import sqlalchemy as sa
from pydantic import SecretStr
from sqlalchemy.engine import Engine

from kb_shared.errors import EmbeddingMismatchError, MigrationError, MigrationRefusedError
from kb_shared.graph_model import Entity, Relationship
from kb_shared.settings import Settings
from kb_shared.search.sparse import fts_document, tokenize
from kb_shared.stores.blobs import BlobStore
from kb_shared.stores.catalog import CATALOG_METADATA
from kb_shared.stores.factory import init_database, open_engine, open_graph_store
from kb_shared.stores.graph import GraphCounts, GraphStore
from kb_shared.stores.graph_sql import GRAPH_ENTITIES, GRAPH_RELATIONSHIPS, SqlGraphStore
from kb_shared.stores.sql import in_batches, safe_url, upsert
from kb_shared.stores.vectors import KINDS, Point, VectorIndex
from kb_shared.stores.vectors_sqlite import SqliteVectorIndex

#: Rows, points or documents per write (one transaction / request each).
BATCH = 500

#: A callback that is told what is happening, one line at a time (the CLI prints it).
Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class MigrationTargets:
    """Where ``migrate`` copies to; a ``None`` target leaves that store where it is.

    Attributes:
        catalog_url: SQLAlchemy URL of the target catalog (``postgresql://…``).
        qdrant: ``http(s)://`` URL of a Qdrant server, or a folder for Qdrant's local mode.
        qdrant_api_key: the server's API key, if it needs one.
        qdrant_collection: collection name; default ``Settings.qdrant_collection``.
        neo4j_uri: Bolt URI of the target Neo4j; ``neo4j_user``/``neo4j_password``/
            ``neo4j_database`` as in ``Settings``.
        blob_url: fsspec URL of the target blob root.
    """

    catalog_url: str | None = None
    qdrant: str | None = None
    qdrant_api_key: str | None = None
    qdrant_collection: str | None = None
    neo4j_uri: str | None = None
    neo4j_user: str = "neo4j"
    neo4j_password: str | None = None
    neo4j_database: str = "neo4j"
    blob_url: str | None = None

    @property
    def empty(self) -> bool:
        """True when no store has a target."""
        return not (self.catalog_url or self.qdrant or self.neo4j_uri or self.blob_url)


@dataclass(frozen=True, slots=True)
class StoreCount:
    """One line of the verification table: how many ``item``s of ``store`` each side holds."""

    store: str
    item: str
    source: int
    target: int

    @property
    def ok(self) -> bool:
        """True when both sides hold the same number."""
        return self.source == self.target


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """What ``migrate`` did.

    Attributes:
        counts: the verification table, every line ``ok`` (else ``MigrationError``).
        written: items written per store (0 for a store that was already complete).
        replaced: the stores whose differing target data was removed first (``replace``).
        targets: each moved store's target, passwords hidden.
    """

    counts: list[StoreCount]
    written: dict[str, int] = field(default_factory=dict)
    replaced: list[str] = field(default_factory=list)
    targets: dict[str, str] = field(default_factory=dict)


def migrate(
    settings: Settings,
    targets: MigrationTargets,
    *,
    replace: bool = False,
    batch: int = BATCH,
    progress: Progress | None = None,
) -> MigrationReport:
    """Copy the stores ``settings`` configures to ``targets`` (module docstring).

    Args:
        settings: the source (the current ``KB_HOME`` and ``KB_*`` settings).
        targets: where each store goes; stores without a target are not touched.
        replace: remove target data that differs from the source instead of refusing.
        batch: items per write, >= 1.
        progress: told one line per step.

    Returns:
        The report; its counts all match.

    Raises:
        ValueError: no target, or ``batch`` < 1.
        MigrationRefusedError: a target holds other data and ``replace`` is false (no data
            was written, only the targets' schema; the message lists every difference).
        MigrationError: a target is the source itself, the source is a backend this copy
            does not read (vectors already in Qdrant, graph already in Neo4j), or the counts
            differ after copying.
        StoreUnavailableError: a source or target cannot be reached.
    """
    if targets.empty:
        raise ValueError("name at least one target (catalog, Qdrant, Neo4j or blobs)")
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    say = progress or (lambda _line: None)
    with ExitStack() as stack:
        moves = _open_moves(settings, targets, stack, say)
        differences = [line for move in moves for line in move.differences()]
        if differences and not replace:
            raise MigrationRefusedError(
                "the target already holds other data; no data was written:\n  "
                + "\n  ".join(differences)
                + "\nRun again with --replace to overwrite it, or choose empty targets."
            )
        replaced = []
        for move in moves:
            if replace and move.differs:
                say(f"{move.store}: removing the target's differing data (--replace)")
                move.clear()
                replaced.append(move.store)
        written = {}
        for move in moves:
            say(f"{move.store}: copying to {move.where}")
            written[move.store] = move.copy(batch, say)
        counts = [line for move in moves for line in move.counts()]
    wrong = [c for c in counts if not c.ok]
    if wrong:
        raise MigrationError(
            "the counts differ after copying: "
            + "; ".join(f"{c.store} {c.item}: source {c.source}, target {c.target}" for c in wrong)
        )
    return MigrationReport(
        counts=counts,
        written=written,
        replaced=replaced,
        targets={move.store: move.where for move in moves},
    )


def sparse_source_text(terms: str) -> str:
    """A text whose ``kb_shared.search.sparse.tokenize`` terms are exactly ``terms`` (the FTS5
    terms the SQLite index stored, space-separated), so the sparse side moves without the
    original text: ``tokenize`` emits a compound followed by its parts, so keeping each
    compound and skipping the parts that follow it gives the terms back (checked here).

    Raises:
        MigrationError: the terms cannot be rebuilt (they were not made by this tokenizer).
    """
    stored = terms.split(" ") if terms else []
    kept: list[str] = []
    position = 0
    while position < len(stored):
        term = stored[position]
        kept.append(term)
        position += max(1, len(tokenize(term)))
    text = " ".join(kept)
    if fts_document(text) != terms:
        raise MigrationError(
            f"the stored sparse terms {terms[:80]!r}… cannot be rebuilt by this kb's tokenizer; "
            "rebuild the index (`kb rebuild embeddings --all --reset`) and migrate again"
        )
    return text


# --------------------------------------------------------------------------------------------
# Opening the moves
# --------------------------------------------------------------------------------------------


def _target_settings(settings: Settings, targets: MigrationTargets) -> Settings:
    """``settings`` with the catalog, Neo4j and blob locations of ``targets``."""
    update: dict[str, Any] = {}
    if targets.catalog_url:
        update["database_url"] = targets.catalog_url
    if targets.neo4j_uri:
        password = targets.neo4j_password
        update.update(
            neo4j_uri=targets.neo4j_uri,
            neo4j_user=targets.neo4j_user,
            neo4j_password=SecretStr(password) if password is not None else None,
            neo4j_database=targets.neo4j_database,
        )
    if targets.blob_url:
        update["blob_url"] = targets.blob_url
    return settings.model_copy(update=update)


def _open_moves(
    settings: Settings, targets: MigrationTargets, stack: ExitStack, say: Progress
) -> list[_Move[Any, Any]]:
    """Open every source and target store named by ``targets`` (closed by ``stack``)."""
    after = _target_settings(settings, targets)
    moves: list[_Move[Any, Any]] = []
    source_url = sa.make_url(settings.resolved_database_url)
    if source_url.get_backend_name() == "sqlite" and not Path(source_url.database or "").is_file():
        raise MigrationError(
            f"no catalog at {source_url.database}: is KB_HOME ({settings.home}) the corpus to copy?"
        )
    source_engine = open_engine(settings)
    stack.callback(source_engine.dispose)
    target_engine: Engine | None = None
    if targets.catalog_url:
        if safe_url(targets.catalog_url) == safe_url(source_engine):
            raise MigrationError(f"the target catalog {safe_url(source_engine)} is the source")
        say("creating the target schema (kb db init)")
        init_database(after)
        target_engine = open_engine(after)
        stack.callback(target_engine.dispose)
        moves.append(_CatalogMove(source_engine, target_engine))
    if targets.qdrant:
        if settings.qdrant_url:
            raise MigrationError(
                "the configured vector index is already Qdrant (KB_QDRANT_URL); kb migrate "
                "copies the embedded SQLite index"
            )
        source = stack.enter_context(SqliteVectorIndex(settings.resolved_vector_path))
        target = stack.enter_context(_open_qdrant(settings, targets))
        moves.append(_VectorMove(source, target))
    if targets.neo4j_uri or (targets.catalog_url and not settings.neo4j_uri):
        if settings.neo4j_uri:
            raise MigrationError(
                "the configured graph is already in Neo4j (KB_NEO4J_URI); kb migrate copies "
                "the embedded SQL graph"
            )
        graph = stack.enter_context(open_graph_store(after, target_engine))
        where = targets.neo4j_uri or f"the graph tables of {safe_url(after.resolved_database_url)}"
        moves.append(_GraphMove(source_engine, graph, str(where)))
    if targets.blob_url:
        source_blobs = BlobStore(settings.resolved_blob_url)
        target_blobs = BlobStore(targets.blob_url)
        if target_blobs.root_url.rstrip("/") == source_blobs.root_url.rstrip("/"):
            raise MigrationError(f"the target blob store {targets.blob_url} is the source")
        moves.append(_BlobMove(source_blobs, target_blobs))
    return moves


def _open_qdrant(settings: Settings, targets: MigrationTargets) -> VectorIndex:
    """The target Qdrant collection: a server for an ``http(s)://`` URL, else local mode in
    the folder ``targets.qdrant``."""
    from qdrant_client import QdrantClient  # noqa: PLC0415 - only when Qdrant is a target

    from kb_shared.stores.vectors_qdrant import QdrantVectorIndex  # noqa: PLC0415

    location = targets.qdrant or ""
    if location.startswith(("http://", "https://")):
        client = QdrantClient(url=location, api_key=targets.qdrant_api_key)
    else:
        client = QdrantClient(path=location)
    return QdrantVectorIndex(client, targets.qdrant_collection or settings.qdrant_collection)


# --------------------------------------------------------------------------------------------
# The moves
# --------------------------------------------------------------------------------------------


#: The store a move reads from and the one it writes to.
SourceT = TypeVar("SourceT")
TargetT = TypeVar("TargetT")


class _Move(ABC, Generic[SourceT, TargetT]):
    """One store's copy from ``source`` into ``target`` (``where``: the target, passwords
    hidden). ``migrate`` calls ``differences`` on every move before any data is written (it
    may create the target's schema), then ``clear`` where ``replace`` applies, then ``copy``
    (idempotent), then ``counts``."""

    #: the store's name in messages and the report
    store = ""
    #: set by ``differences``: the target holds data the source does not
    differs = False

    def __init__(self, source: SourceT, target: TargetT, where: str) -> None:
        self.source = source
        self.target = target
        self.where = where

    @abstractmethod
    def differences(self) -> list[str]:
        """One line per kind of difference between target and source (empty: none)."""

    @abstractmethod
    def clear(self) -> None:
        """Remove the target data that differs (``replace``)."""

    @abstractmethod
    def copy(self, batch: int, say: Progress) -> int:
        """Write what the target lacks or holds otherwise, ``batch`` items per write;
        returns how many items were written."""

    @abstractmethod
    def counts(self) -> list[StoreCount]:
        """The verification lines of this store."""


def _count_rows(conn: sa.Connection, table: sa.Table) -> int:
    return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


class _CatalogMove(_Move[Engine, Engine]):
    """Every catalog table, row by row, keyed by primary key."""

    store = "catalog"

    def __init__(self, source: Engine, target: Engine) -> None:
        super().__init__(source, target, safe_url(target))
        present = {
            name: {column["name"] for column in sa.inspect(source).get_columns(name)}
            for name in sa.inspect(source).get_table_names()
        }
        #: (table, the columns the source has) in foreign-key order
        self.tables = [
            (table, [c for c in table.columns if c.name in present[table.name]])
            for table in CATALOG_METADATA.sorted_tables
            if table.name in present
        ]

    def _rows(self, engine: Engine, table: sa.Table, columns: list[sa.Column]) -> Iterator[tuple]:
        """Every row of ``table`` as a tuple of ``columns`` (streamed)."""
        with engine.connect() as conn:
            result = conn.execution_options(yield_per=BATCH).execute(sa.select(*columns))
            yield from (tuple(row) for row in result)

    def _held(self, table: sa.Table, columns: list[sa.Column]) -> dict[tuple, tuple]:
        """The target's rows of ``table`` by primary key (values in ``columns`` order)."""
        keys = [columns.index(c) for c in columns if c.primary_key]
        return {tuple(row[i] for i in keys): row for row in self._rows(self.target, table, columns)}

    def differences(self) -> list[str]:
        found = []
        for table, columns in self.tables:
            held = self._held(table, columns)
            if not held:
                continue
            keys = [columns.index(c) for c in columns if c.primary_key]
            changed = 0
            for row in self._rows(self.source, table, columns):
                other = held.pop(tuple(row[i] for i in keys), None)
                changed += other is not None and other != row
            if changed or held:
                found.append(
                    f"catalog table {table.name}: {len(held)} rows the source lacks, "
                    f"{changed} rows with other values"
                )
        self.differs = bool(found)
        return found

    def clear(self) -> None:
        with self.target.begin() as conn:
            for table, _ in reversed(self.tables):
                conn.execute(table.delete())

    def copy(self, batch: int, say: Progress) -> int:
        written = 0
        dialect = self.target.dialect.name
        for table, columns in self.tables:
            keys = [c.name for c in columns if c.primary_key]
            names = [c.name for c in columns]
            insert = upsert(table, dialect)
            others = {n: insert.excluded[n] for n in names if n not in keys}
            statement = (
                insert.on_conflict_do_update(index_elements=keys, set_=others)
                if others
                else insert.on_conflict_do_nothing(index_elements=keys)
            )
            held = self._held(table, columns)
            positions = [names.index(k) for k in keys]
            rows = 0
            pending: list[dict[str, Any]] = []
            for row in self._rows(self.source, table, columns):
                if held.get(tuple(row[i] for i in positions)) == row:
                    continue
                pending.append(dict(zip(names, row, strict=True)))
                if len(pending) >= batch:
                    rows += self._write(statement, pending)
            rows += self._write(statement, pending)
            self._advance_sequence(table, keys)
            say(f"catalog: {table.name}: {rows} rows written")
            written += rows
        return written

    def _write(self, statement: Any, pending: list[dict[str, Any]]) -> int:
        """Upsert ``pending`` in one transaction and empty it; returns how many."""
        if not pending:
            return 0
        with self.target.begin() as conn:
            conn.execute(statement, pending)
        count = len(pending)
        pending.clear()
        return count

    def _advance_sequence(self, table: sa.Table, keys: list[str]) -> None:
        """On Postgres, move an integer id's sequence past the copied ids (ids inserted
        explicitly do not advance it, so the next row the app inserts would collide)."""
        if self.target.dialect.name != "postgresql" or len(keys) != 1:
            return
        if table.c[keys[0]].type.python_type is not int:
            return
        with self.target.begin() as conn:
            conn.execute(
                sa.text(
                    f"SELECT setval(pg_get_serial_sequence(:table, :column), "
                    f"coalesce(max({keys[0]}), 1), max({keys[0]}) IS NOT NULL) FROM {table.name}"
                ),
                {"table": table.name, "column": keys[0]},
            )

    def counts(self) -> list[StoreCount]:
        lines = []
        with self.source.connect() as source, self.target.connect() as target:
            for table, _ in self.tables:
                held = (_count_rows(source, table), _count_rows(target, table))
                lines.append(StoreCount("catalog", table.name, *held))
        return lines


class _VectorMove(_Move[SqliteVectorIndex, VectorIndex]):
    """Every point of the SQLite index, with its stored vectors, into another index."""

    store = "vectors"

    def __init__(self, source: SqliteVectorIndex, target: VectorIndex) -> None:
        super().__init__(source, target, target.location)
        self.info = source.describe()
        if self.info is not None:
            source.open(self.info.model, self.info.dimension, create=False)

    def differences(self) -> list[str]:
        recorded = self.target.describe()
        if recorded is None:
            return []
        if self.info is None:
            self.differs = True
            return [f"vectors: {self.where} holds a collection; the source has no index"]
        try:
            self.target.open(self.info.model, self.info.dimension, create=False)
        except EmbeddingMismatchError:
            self.differs = True
            return [
                f"vectors: {self.where} holds {recorded.model!r} ({recorded.dimension} "
                f"dimensions); the source holds {self.info.model!r} ({self.info.dimension})"
            ]
        ids = self.source.list_ids()
        extra = set(self.target.list_ids()) - set(ids)
        changed = sum(len(self._compare(list(part))[1]) for part in in_batches(ids))
        self.differs = bool(extra or changed)
        if not self.differs:
            return []
        return [f"vectors: {len(extra)} points the source lacks, {changed} with other values"]

    def _compare(self, ids: list[str]) -> tuple[set[str], set[str]]:
        """``(missing, changed)``: the ids of ``ids`` the target lacks, and those it holds
        with another document, kind, text or payload."""
        mine = {p.id: p for p in self.source.fetch(ids)}
        theirs = {p.id: p for p in self.target.fetch(ids)}
        missing = mine.keys() - theirs.keys()
        changed = {i for i, point in mine.items() if i in theirs and theirs[i] != point}
        return set(missing), changed

    def clear(self) -> None:
        self.target.drop()

    def copy(self, batch: int, say: Progress) -> int:
        if self.info is None:
            say("vectors: the source has no index; nothing to copy")
            return 0
        self.target.open(self.info.model, self.info.dimension)
        written = 0
        after: str | None = None
        while page := self.source.export_points(after, batch):
            after = page[-1].point.id
            missing, changed = self._compare([item.point.id for item in page])
            wanted = missing | changed
            points = [
                Point(
                    id=item.point.id,
                    document=item.point.document,
                    kind=item.point.kind,
                    text=item.point.text,
                    dense=item.dense,
                    payload=item.point.payload,
                    sparse_text=sparse_source_text(item.terms),
                )
                for item in page
                if item.point.id in wanted
            ]
            if points:
                written += self.target.upsert(points)
                say(f"vectors: {written} points written (up to {after})")
        return written

    def counts(self) -> list[StoreCount]:
        if self.info is None:
            return []
        return [
            StoreCount("vectors", f"points ({kind})", self.source.count(kind=kind),
                       self.target.count(kind=kind))
            for kind in KINDS
        ]


class _GraphMove(_Move[Engine, GraphStore]):
    """The SQL graph of the source catalog database, document by document."""

    store = "graph"

    def __init__(self, source: Engine, target: GraphStore, where: str) -> None:
        super().__init__(source, target, where)
        self.reader = SqlGraphStore(source)
        self.documents: list[str] = []
        self.dimension: int | None = None
        #: a database the graph asset never wrote to has no graph tables: nothing to copy
        self.present = sa.inspect(source).has_table(GRAPH_RELATIONSHIPS.name)
        if not self.present:
            return
        with source.connect() as conn:
            self.documents = list(
                conn.execute(
                    sa.select(GRAPH_RELATIONSHIPS.c.source_doc)
                    .distinct()
                    .order_by(GRAPH_RELATIONSHIPS.c.source_doc)
                ).scalars()
            )
            self.dimension = conn.execute(
                sa.select(GRAPH_ENTITIES.c.dimension)
                .where(GRAPH_ENTITIES.c.dimension.is_not(None))
                .limit(1)
            ).scalar()

    def _edges(self, document: str) -> dict[str, Relationship]:
        return {rel.id: rel for rel in self.reader.relationships_for_document(document)}

    def differences(self) -> list[str]:
        found = []
        try:
            self.target.ensure_schema(self.dimension)
        except EmbeddingMismatchError as exc:
            found.append(f"graph: {exc}")
        total = self.target.counts()
        if total.relationships or total.entities:
            seen = 0
            other = 0
            for document in self.documents:
                held = {rel.id for rel in self.target.relationships_for_document(document)}
                seen += len(held)
                other += bool(held - self._edges(document).keys())
            if other:
                found.append(f"graph: {other} documents with relationships the source lacks")
            if total.relationships > seen:
                found.append(
                    f"graph: {total.relationships - seen} relationships of documents the "
                    "source lacks"
                )
        self.differs = bool(found)
        return found

    def clear(self) -> None:
        self.target.clear()
        self.target.ensure_schema(self.dimension)

    def copy(self, batch: int, say: Progress) -> int:
        self.target.ensure_schema(self.dimension)
        written = 0
        for number, document in enumerate(self.documents, start=1):
            edges = self._edges(document)
            held = {rel.id for rel in self.target.relationships_for_document(document)}
            if held == edges.keys():
                continue
            keys = sorted({end for rel in edges.values() for end in (rel.source, rel.target)})
            entities = self._entities(keys)
            self.target.replace_document(document, entities, list(edges.values()))
            written += len(edges)
            if number % batch == 0 or number == len(self.documents):
                say(f"graph: {number} of {len(self.documents)} documents")
        return written

    def _entities(self, keys: list[str]) -> list[Entity]:
        """The stored entities of ``keys`` with their name vectors.

        Raises:
            MigrationError: a stored key is not the key of its stored name.
        """
        found = []
        columns = GRAPH_ENTITIES.c
        with self.source.connect() as conn:
            for part in in_batches(keys):
                for row in conn.execute(sa.select(GRAPH_ENTITIES).where(columns.key.in_(part))):
                    vector = (
                        None
                        if row.vector is None
                        else tuple(float(x) for x in np.frombuffer(row.vector, dtype="<f4"))
                    )
                    entity = Entity(row.name, row.type, row.description, vector)
                    if entity.key != row.key:
                        raise MigrationError(
                            f"graph entity {row.key!r} is stored under another key than its "
                            f"name {row.name!r} gives; rebuild the graph and migrate again"
                        )
                    found.append(entity)
        return found

    def counts(self) -> list[StoreCount]:
        source = self.reader.counts() if self.present else GraphCounts(0, 0)
        target = self.target.counts()
        return [
            StoreCount("graph", "entities", source.entities, target.entities),
            StoreCount("graph", "relationships", source.relationships, target.relationships),
        ]


class _BlobMove(_Move[BlobStore, BlobStore]):
    """Every blob key, byte for byte (a key the target holds at the same size is kept)."""

    store = "blobs"

    def __init__(self, source: BlobStore, target: BlobStore) -> None:
        super().__init__(source, target, target.root_url)
        self.extra: list[str] = []

    def differences(self) -> list[str]:
        mine = set(self.source.list())
        theirs = set(self.target.list())
        self.extra = sorted(theirs - mine)
        resized = [k for k in sorted(mine & theirs) if self.source.size(k) != self.target.size(k)]
        self.differs = bool(self.extra or resized)
        if not self.differs:
            return []
        return [f"blobs: {len(self.extra)} keys the source lacks, {len(resized)} of another size"]

    def clear(self) -> None:
        for key in self.extra:
            self.target.delete(key)

    def copy(self, batch: int, say: Progress) -> int:
        written = 0
        for key in self.source.list():
            if self.target.exists(key) and self.target.size(key) == self.source.size(key):
                continue
            local = self.source.local_path(key)
            if local is not None:
                self.target.put_file(key, local)
            else:
                self.target.put(key, self.source.get(key))
            written += 1
            if written % batch == 0:
                say(f"blobs: {written} written")
        return written

    def counts(self) -> list[StoreCount]:
        return [StoreCount("blobs", "keys", len(self.source.list()), len(self.target.list()))]

