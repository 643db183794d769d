"""The embedded vector index: one SQLite file with sqlite-vec (dense) and FTS5 (sparse).

Tables, all prefixed with the index ``name`` (default ``chunks``):

* ``{name}_meta(key, value)`` — the embedding ``model`` and ``dimension`` the file was built
  with (``open`` refuses another model with ``EmbeddingMismatchError``).
* ``{name}_points(rowid INTEGER PRIMARY KEY, id TEXT UNIQUE, document, kind, text, payload)``
  — the stored point; ``payload`` is JSON text.
* ``{name}_vec`` — a sqlite-vec ``vec0`` virtual table, ``embedding float[DIM]
  distance_metric=cosine`` plus ``document`` and ``kind`` *metadata columns*. sqlite-vec
  0.1.9 applies ``document IN (…)`` / ``kind IN (…)`` constraints on metadata columns inside
  the KNN scan, so a filtered search returns the ``k`` nearest points *that match* (measured:
  a document whose points are the farthest from the query still fills ``k``). Partition-key
  columns were probed too and rejected: with ``IN (a, b)`` on a partition key 0.1.9 returned
  ``k`` rows per partition (2k in all). vec0 caps ``k`` at 4096, so a search returns at most
  ``MAX_KNN`` hits.
* ``{name}_fts`` — an FTS5 table over ``kb_shared.search.sparse.fts_document(point.terms_source)``.
  It stores its text (not ``content=''``): a contentless table with ``contentless_delete=1``
  cannot take a deleted row's tokens off FTS5's totals, so after re-embedding a document
  BM25's average length and document count drifted and the same corpus ranked differently
  when rebuilt from scratch (measured: "swamping" scored 20.6 after three rebuilds, 15.4
  fresh). A stored row is deleted exactly, so a rebuilt index ranks like a fresh one (tested). Its tokenizer is ``unicode61`` with
  ``tokenchars '-_./'`` (joiners stay inside a token), ``categories 'L* M* N* Co'`` (marks
  are token characters, so Arabic harakat do not split a word) and ``remove_diacritics 0``
  (``ä`` stays ``ä``), so every term of our tokenizer is exactly one FTS5 token — the FTS5
  vocabulary equals the set of ``kb_shared.search.sparse.tokenize`` terms (tested). FTS5 matches;
  its ``bm25()`` picks the candidates, which are ranked by the score Qdrant computes for the
  same points (``kb_shared.stores.vectors_sparse``), so a migrated index answers alike.

* ``{name}_codes`` / ``{name}_removed`` — the sign code of each dense vector (1 bit per
  dimension) with a plain float32 copy for rescoring, and the log of deleted rowids
  (``kb_shared.stores.vectors_codes.CodeTables``). Every write transaction bumps
  ``generation`` in ``{name}_meta``, so each process keeps an in-memory copy of the codes
  and reads only what changed since. From ``EXACT_BELOW`` live points on, a dense search
  ranks the codes by Hamming distance, takes ``max(OVERSAMPLE * limit, MIN_RESCORE,
  RESCORE_SHARE * live points)`` candidates (of the filtered documents / kinds only) and orders them by exact cosine; below
  it the search is exact: one matrix-vector product over this process's in-memory copy of
  the live float vectors (``kb_shared.stores.vectors_codes.DenseTables``, kept in step by the
  same generations and let go past ``EXACT_BELOW``), or vec0's scan on a file not yet
  upgraded. The float copy in the table exists because reading a vec0 row by rowid cost ~80×
  more CPU (125 ms against 1.6 ms for 800 rows). Figures: benchmarks/results/
  scale-2026-12-01-ann.md, dense-resident-2026-12-02.md.

A sparse search on a file with the codes tables and at most ``resident_points`` live points
is answered from a process-local copy of the FTS5 terms as postings lists
(``kb_shared.stores.vectors_postings``, kept in step by the same generations), scoring every
match exactly; past that, or on a version-2 file, FTS5 picks the candidates
(``kb_shared.stores.vectors_sparse``). Both give the same ids and scores.
The rows of the points either side finds come from a process-local copy of the rows read at
the transaction's generation (``kb_shared.stores.vectors_rows``), the rest from SQLite.

The rowid of a point is shared by the tables. Writes run in one ``BEGIN IMMEDIATE``
transaction each (all or nothing); the file is in WAL mode, so readers in other threads and
processes keep reading the last committed state while a writer commits. Each thread gets its
own connection (``check_same_thread`` semantics of sqlite3 are kept per thread).

``pysqlite3`` (the pysqlite3-binary wheel, SQLite 3.51) is used instead of the standard
library ``sqlite3`` because the latter cannot load extensions on this Python build.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pysqlite3.dbapi2 as sqlite3
import sqlite_vec

from kb_shared.errors import StoreError, StoreUnavailableError
from kb_shared.search.sparse import fts_document, fts_query
from kb_shared.stores.vectors import (
    CheckedPoint,
    CollectionInfo,
    Filters,
    Hit,
    Point,
    StoredPoint,
    VectorIndex,
    check_points,
)
from kb_shared.stores.vectors_codes import CodeCache, CodeTables, DenseTables, binary_code
from kb_shared.stores.vectors_postings import RESIDENT_POINTS, PostingsTables
from kb_shared.stores.vectors_rows import RowCache
from kb_shared.stores.vectors_sparse import ScoredRow, SparseScorer

#: vec0's upper bound on ``k`` in a KNN query (sqlite-vec 0.1.9: "k value in knn query too
#: large, … the limit is 4096").
MAX_KNN = 4096

#: How long a connection waits for another writer's lock before failing (SQLite
#: ``busy_timeout``), in milliseconds.
BUSY_TIMEOUT_MS = 30_000

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")
#: Layout version recorded in ``{name}_meta``; 2 = FTS5 table that stores its terms, 3 = plus
#: the binary codes tables. A version-2 file is read as it is (exact dense scan) and upgraded
#: by the first writer (``open(create=True)`` or a write).
SCHEMA_VERSION = "3"
_READABLE_VERSIONS = ("2", SCHEMA_VERSION)

#: Dense searches on fewer live points than this scan every float vector (exact); from it on
#: they rank binary codes first (benchmarks/results/scale-2026-12-01-ann.md).
EXACT_BELOW = 20_000
#: Candidates per wanted hit taken from the Hamming ranking for float rescoring, and the
#: fewest candidates ever rescored (benchmarks/results/scale-2026-12-01-ann.md: recall@10
#: against the exact scan by candidate count).
OVERSAMPLE = 16
MIN_RESCORE = 800
#: The share of the live points always rescored, so recall holds as the index grows
#: (benchmarks/results/scale-2026-12-02-1M.md, "Dense recall at 1M": 800 candidates gave
#: recall@10 0.650 at 1M points, 6,400 gave 0.986).
RESCORE_SHARE = 0.0065

_FTS_TOKENIZER = "unicode61 remove_diacritics 0 categories 'L* M* N* Co' tokenchars '-_./'"


class _ThreadConnection:
    """One thread's connection, held in its ``threading.local`` slot only: when the thread
    ends, or ``SqliteVectorIndex.close`` lets go of the slots, the holder goes and the
    connection is closed once no call still uses it (the last reference closes it)."""

    __slots__ = ("conn",)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn


class SqliteVectorIndex(VectorIndex):
    """``VectorIndex`` over one SQLite file (sqlite-vec ``vec0`` + FTS5).

    Args:
        path: the SQLite file; created with its parent folder by ``open(create=True)``.
        name: table prefix, ``[a-z][a-z0-9_]*``; several indexes can share one file.
        exact_below, oversample, min_rescore, rescore_share: dense search tuning
            (``EXACT_BELOW``, ``OVERSAMPLE``, ``MIN_RESCORE``, ``RESCORE_SHARE``).
        resident_points: the most live points for which sparse searches use the in-memory
            postings (``kb_shared.stores.vectors_postings.RESIDENT_POINTS``); 0 keeps them
            on FTS5.
        resident_dense: exact dense searches (below ``exact_below``) from the in-memory
            float copy; ``False`` keeps them on vec0's scan (what benchmarks compare with).

    The constructor does no I/O. Errors: ``StoreUnavailableError`` when the file cannot be
    opened or stays locked longer than ``BUSY_TIMEOUT_MS``; ``StoreError`` for other SQLite
    failures and for use before ``open``; ``ValueError`` for bad input (nothing is written).
    """

    def __init__(
        self,
        path: str | Path,
        name: str = "chunks",
        *,
        exact_below: int = EXACT_BELOW,
        oversample: int = OVERSAMPLE,
        min_rescore: int = MIN_RESCORE,
        rescore_share: float = RESCORE_SHARE,
        resident_points: int = RESIDENT_POINTS,
        resident_dense: bool = True,
    ) -> None:
        if not _NAME.match(name):
            raise ValueError(f"index name {name!r} must match [a-z][a-z0-9_]* (max 41 chars)")
        self.path = Path(path)
        self.name = name
        self.info = None
        self.label = f"vector index {name!r} in {self.path}"
        self.location = str(self.path)
        self._meta = f"{name}_meta"
        self._points = f"{name}_points"
        self._vec = f"{name}_vec"
        self._fts = f"{name}_fts"
        #: dense search tuning (module constants by default; the scale benchmark varies them)
        self.exact_below, self.oversample, self.min_rescore = exact_below, oversample, min_rescore
        self.rescore_share = rescore_share
        self.resident_points, self.resident_dense = resident_points, resident_dense
        self._fresh_copies()
        self._local = threading.local()

    # -- connections ---------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        """This thread's connection, opened (extension loaded, WAL, busy timeout) on first use.

        It lives as long as the thread: when a thread ends, its thread-local holder goes and
        the connection is closed with it (the MCP server's worker threads come and go; keeping
        their connections leaked a file descriptor per thread: soak-2026-12-01-bursts.md)."""
        holder = getattr(self._local, "holder", None)
        if holder is not None:
            return holder.conn
        try:
            conn = sqlite3.connect(
                str(self.path),
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,  # we issue BEGIN/COMMIT ourselves
                check_same_thread=False,  # only so close() may run on another thread
            )
            conn.enable_load_extension(True)
            sqlite_vec.load(conn)
            conn.enable_load_extension(False)
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.Error as exc:
            raise StoreUnavailableError(
                f"cannot open the SQLite vector index {self.path}: {exc}"
            ) from exc
        self._local.holder = _ThreadConnection(conn)
        return conn

    @contextmanager
    def _errors(self, action: str) -> Iterator[None]:
        """Turn SQLite errors into ``StoreError``s that name the file and the action."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise StoreUnavailableError(
                    f"the SQLite vector index {self.path} stayed locked by another writer "
                    f"for {BUSY_TIMEOUT_MS // 1000} s while {action}: {exc}"
                ) from exc
            raise StoreError(f"SQLite vector index {self.path}: {action} failed: {exc}") from exc
        except sqlite3.Error as exc:
            raise StoreError(f"SQLite vector index {self.path}: {action} failed: {exc}") from exc

    @contextmanager
    def _write(self, action: str) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back on any error."""
        conn = self._connection()
        with self._errors(action):
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:  # SQLite may already have rolled back (e.g. disk full)
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def close(self) -> None:
        """Let go of every connection this object opened and of its in-memory copies; safe
        to call twice, and while other threads search (use after it opens afresh).

        This thread's connection is closed now; another thread's when nothing uses it any
        more: at once if idle, else when its call returns. Closing a connection under a
        running statement crashed the process (a segmentation fault in SQLite's module).
        The copies (rows, postings, codes, floats) go too: a file put back from a copy can
        reach a generation this process has seen with other contents.
        """
        mine = getattr(self._local, "holder", None)
        self._local = threading.local()  # the other threads' slots go with the old one
        if mine is not None:
            mine.conn.close()
        self._fresh_copies()

    def _fresh_copies(self) -> None:
        """Empty process-local copies of the file's contents (filled again on first use)."""
        self._code_tables = CodeTables(self.name)
        self._dense_copy = DenseTables(self.name)
        self._scorer = SparseScorer(self._fts, self._points, self._meta)
        self._postings = PostingsTables(self.name)
        self._row_cache = RowCache()

    # -- collection ----------------------------------------------------------------------

    def _read_info(self, conn: sqlite3.Connection) -> CollectionInfo | None:
        exists = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (self._meta,)
        ).fetchone()
        if not exists:
            return None
        try:
            rows = dict(conn.execute(f"SELECT key, value FROM {self._meta}").fetchall())
        except sqlite3.OperationalError as exc:  # dropped by a writer since the check above
            if "no such table" in str(exc):
                return None
            raise
        if "model" not in rows or "dimension" not in rows:
            return None
        return CollectionInfo(model=rows["model"], dimension=int(rows["dimension"]))

    def describe(self) -> CollectionInfo | None:
        """The recorded model and dimension; ``None`` for a missing file or an empty one.

        A missing file is not created.
        """
        if not self.path.exists():
            return None
        with self._errors("reading the recorded model"):
            return self._read_info(self._connection())

    def _create(self, model: str, dimension: int) -> CollectionInfo:
        """Create the file's folder and the tables in one transaction, unless another process
        created them first (then their record is returned)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._write("creating the index") as conn:
            recorded = self._read_info(conn)  # another process may have won the race
            if recorded is None:
                self._create_schema(conn, model, dimension)
                recorded = CollectionInfo(model=model, dimension=dimension)
        return recorded

    def open(self, model: str, dimension: int, *, create: bool = True) -> CollectionInfo:
        """``VectorIndex.open``; with ``create`` (the writer) a version-2 file is also upgraded
        to ``SCHEMA_VERSION`` (codes back-filled from the stored floats, one transaction).
        Without ``create`` nothing is written: an old file is searched exactly until upgraded.
        """
        info = super().open(model, dimension, create=create)
        if create and self._layout_version(self._connection()) != SCHEMA_VERSION:
            with self._write("upgrading the index layout") as conn:
                self._ensure_codes(conn)
        return info

    def _layout_version(self, conn: sqlite3.Connection) -> str | None:
        """The ``schema_version`` recorded in ``{name}_meta`` (``None`` if none)."""
        with self._errors("reading the layout version"):
            row = conn.execute(
                f"SELECT value FROM {self._meta} WHERE key = 'schema_version'"
            ).fetchone()
        return None if row is None else row[0]

    def _check_layout(self) -> None:
        """Refuse a file of a layout version this code cannot read (rebuild it). A writer
        that drops the index after ``describe`` read it makes it absent (``absent()``), as
        ``_read_info`` treats a drop between its two reads."""
        try:
            version = self._layout_version(self._connection())
        except StoreError as exc:
            if "no such table" in str(exc.__cause__):
                raise self.absent() from exc
            raise
        if version not in _READABLE_VERSIONS:
            raise StoreError(
                f"the vector index {self.path} has layout version "
                f"{version or 'unknown'}, this kb needs {SCHEMA_VERSION}: "
                "rebuild it with `kb rebuild embeddings --all --reset`"
            )

    def _create_schema(self, conn: sqlite3.Connection, model: str, dimension: int) -> None:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {self._meta} (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
        )
        conn.execute(
            f"""CREATE TABLE IF NOT EXISTS {self._points} (
                rowid INTEGER PRIMARY KEY,
                id TEXT NOT NULL UNIQUE,
                document TEXT NOT NULL,
                kind TEXT NOT NULL,
                text TEXT NOT NULL,
                payload TEXT NOT NULL CHECK (json_valid(payload))
            )"""
        )
        conn.execute(
            f"CREATE INDEX IF NOT EXISTS {self._points}_document_kind "
            f"ON {self._points}(document, kind)"
        )
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {self._vec} USING vec0("
            f"embedding float[{dimension}] distance_metric=cosine, document text, kind text)"
        )
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {self._fts} USING fts5("
            f"terms, tokenize=\"{_FTS_TOKENIZER}\")"
        )
        conn.executemany(
            f"INSERT INTO {self._meta}(key, value) VALUES (?, ?)",
            [("model", model), ("dimension", str(dimension)), ("schema_version", "2")],
        )
        self._ensure_codes(conn)

    def _ensure_codes(self, conn: sqlite3.Connection) -> None:
        """Inside a write transaction: give a version-2 layout the codes tables, filled from
        the stored float vectors (nothing to do on a current one)."""
        if self._layout_version(conn) != SCHEMA_VERSION:
            self._code_tables.create(conn)
            conn.execute(f"UPDATE {self._meta} SET value = ? WHERE key = 'schema_version'",
                         (SCHEMA_VERSION,))

    def _next_generation(self, conn: sqlite3.Connection) -> int:
        """Inside a write transaction: upgrade an old layout, then bump and return the write
        generation."""
        self._ensure_codes(conn)
        return self._code_tables.next_generation(conn)

    def drop(self) -> bool:
        """Drop the index's tables in one transaction (the file stays). Returns whether
        there was an index."""
        self.info = None
        if not self.path.exists():
            return False
        with self._write("dropping the index") as conn:
            existed = self._read_info(conn) is not None
            tables = (self._code_tables.codes, self._code_tables.removed)
            for table in (self._fts, self._vec, *tables, self._points, self._meta):
                conn.execute(f"DROP TABLE IF EXISTS {table}")
        return existed

    # -- writes --------------------------------------------------------------------------

    def upsert(self, points: Sequence[Point]) -> int:
        """``VectorIndex.upsert`` in one transaction (all or nothing)."""
        info = self._require_open()
        rows = [_Row(checked) for checked in check_points(points, info.dimension, sort_keys=True)]
        if not rows:
            return 0
        with self._write(f"upserting {len(rows)} points") as conn:
            generation = self._next_generation(conn)
            ids = json.dumps([row.id for row in rows])
            existing = dict(
                conn.execute(
                    f"SELECT id, rowid FROM {self._points} "
                    "WHERE id IN (SELECT value FROM json_each(?))",
                    (ids,),
                ).fetchall()
            )
            self._delete_rowids(conn, list(existing.values()), points_too=False,
                                generation=generation)
            next_rowid = conn.execute(
                f"SELECT coalesce(max(rowid), 0) FROM {self._points}"
            ).fetchone()[0]
            rowids: list[int] = []
            for row in rows:
                if row.id in existing:
                    rowids.append(existing[row.id])
                else:
                    next_rowid += 1
                    rowids.append(next_rowid)
            conn.executemany(
                f"INSERT OR REPLACE INTO {self._points}"
                "(rowid, id, document, kind, text, payload) VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (rowid, r.id, r.document, r.kind, r.text, r.payload)
                    for rowid, r in zip(rowids, rows, strict=True)
                ],
            )
            conn.executemany(
                f"INSERT INTO {self._vec}(rowid, embedding, document, kind) VALUES (?, ?, ?, ?)",
                [
                    (rowid, r.dense.tobytes(), r.document, r.kind)
                    for rowid, r in zip(rowids, rows, strict=True)
                ],
            )
            conn.executemany(
                f"INSERT INTO {self._fts}(rowid, terms) VALUES (?, ?)",
                [(rowid, r.terms) for rowid, r in zip(rowids, rows, strict=True)],
            )
            self._code_tables.write(conn, rowids, np.stack([r.dense for r in rows]), generation)
        return len(rows)

    def _delete_rowids(
        self, conn: sqlite3.Connection, rowids: list[int], *, points_too: bool,
        generation: int | None,
    ) -> None:
        """Delete ``rowids`` from the vector, FTS and codes tables (and the points table if
        ``points_too``, logging them in ``{name}_removed`` at ``generation``)."""
        if not rowids:
            return
        params = [(rowid,) for rowid in rowids]
        conn.executemany(f"DELETE FROM {self._vec} WHERE rowid = ?", params)
        conn.executemany(f"DELETE FROM {self._fts} WHERE rowid = ?", params)
        self._code_tables.delete(conn, rowids, generation if points_too else None)
        if points_too:
            conn.executemany(f"DELETE FROM {self._points} WHERE rowid = ?", params)

    def _delete_ids(self, ids: list[str]) -> int:
        """Delete the stored ones of ``ids`` in one transaction; returns how many."""
        return self._delete_points(
            f"deleting {len(ids)} ids", "id IN (SELECT value FROM json_each(?))", json.dumps(ids)
        )

    def _delete_document(self, document: str) -> int:
        """Delete every point of ``document`` in one transaction; returns how many (0 if none)."""
        return self._delete_points(f"deleting document {document!r}", "document = ?", document)

    def _delete_points(self, action: str, where: str, value: str) -> int:
        """Delete the points matching ``where`` (SQL on the points table, one ``?`` bound to
        ``value``) in one transaction at a new generation; returns how many."""
        with self._write(action) as conn:
            generation = self._next_generation(conn)
            query = f"SELECT rowid FROM {self._points} WHERE {where}"
            rowids = [r[0] for r in conn.execute(query, (value,))]
            self._delete_rowids(conn, rowids, points_too=True, generation=generation)
        return len(rowids)

    # -- reads ---------------------------------------------------------------------------

    def _fetch(self, ids: Sequence[str]) -> list[StoredPoint]:
        """Stored points for ``ids`` in the order asked; unknown ids are skipped."""
        with self._errors("fetching points"):
            rows = (
                self._connection()
                .execute(
                    f"SELECT p.id, p.document, p.kind, p.text, p.payload "
                    f"FROM json_each(?) AS wanted JOIN {self._points} AS p ON p.id = wanted.value "
                    "ORDER BY wanted.key",
                    (json.dumps(list(ids)),),
                )
                .fetchall()
            )
        return [_stored(row) for row in rows]

    def _count(self, document: str | None, kind: str | None) -> int:
        """Number of points, optionally of one document and/or one kind."""
        where, params = _equals_filter(document, kind)
        with self._errors("counting points"):
            return (
                self._connection()
                .execute(f"SELECT count(*) FROM {self._points}{where}", params)
                .fetchone()[0]
            )

    def _list_ids(self, document: str | None, kind: str | None) -> list[str]:
        """Point ids sorted ascending, optionally of one document and/or one kind."""
        where, params = _equals_filter(document, kind)
        with self._errors("listing ids"):
            rows = (
                self._connection()
                .execute(f"SELECT id FROM {self._points}{where} ORDER BY id", params)
                .fetchall()
            )
        return [row[0] for row in rows]

    def _dense_search(self, query: np.ndarray, limit: int, filters: Filters) -> list[Hit]:
        """The ``limit`` (at most ``MAX_KNN``) nearest points that pass ``filters``: exact
        below ``exact_below`` live points or on a version-2 file, else the best of the
        binary-code candidates by exact cosine (see the module docstring).

        ``Hit.score`` is the cosine similarity ``1 - cosine distance``; ties are ordered by id.
        """
        limit = min(limit, MAX_KNN)
        candidates = self._code_candidates(query, limit, filters)
        if candidates is None:
            return self._exact_dense_search(query, limit, filters)
        self._dense_copy.forget()  # past exact_below: the float copy is let go
        sql = (
            f"WITH scored AS (SELECT c.value AS rowid, "
            f"vec_distance_cosine(v.dense, ?) AS distance "
            f"FROM json_each(?) AS c JOIN {self._code_tables.codes} AS v ON v.rowid = c.value "
            "ORDER BY distance, c.value LIMIT ?) "
            "SELECT p.id, p.document, p.kind, p.text, p.payload, scored.distance "
            f"FROM scored JOIN {self._points} AS p ON p.rowid = scored.rowid "
            "ORDER BY scored.distance, p.id"
        )
        with self._errors("dense search"):
            rows = (
                self._connection()
                .execute(sql, (query.tobytes(), json.dumps(candidates), limit))
                .fetchall()
            )
        return [Hit(point=_stored(row[:5]), score=1.0 - float(row[5])) for row in rows]

    def _code_candidates(
        self, query: np.ndarray, limit: int, filters: Filters
    ) -> list[int] | None:
        """Rowids to rescore for a dense search, nearest codes first; ``None`` when the
        search should scan exactly (no codes yet, or fewer than ``exact_below`` points)."""
        cache = self._refreshed_codes()
        if cache is None or cache.size < self.exact_below:
            return None
        return cache.candidates(
            binary_code(query),
            max(self.oversample * limit, self.min_rescore,
                math.ceil(self.rescore_share * cache.size)),
            filters=filters,
        )

    def _refreshed_codes(self) -> CodeCache | None:
        """This process's copy of the codes as of the last committed write (read in one read
        transaction, a consistent snapshot); ``None`` on a version-2 file."""
        conn = self._connection()
        code_bytes = -(-self._require_open().dimension // 8)
        with self._errors("reading the binary codes"):
            conn.execute("BEGIN")
            try:
                if self._layout_version(conn) != SCHEMA_VERSION:
                    return None
                return self._code_tables.refreshed(conn, code_bytes)
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")

    def _exact_dense_search(self, query: np.ndarray, limit: int, filters: Filters) -> list[Hit]:
        """The exact answer for ``_dense_search``, in one read transaction: from this
        process's float copy (``_resident_dense``), else vec0's KNN scan of every vector."""
        clauses, params = _in_filters(filters)
        sql = (
            f"WITH knn AS (SELECT rowid, distance FROM {self._vec} "
            f"WHERE embedding MATCH ? AND k = ?{''.join(' AND ' + c for c in clauses)}) "
            f"SELECT p.id, p.document, p.kind, p.text, p.payload, knn.distance "
            f"FROM knn JOIN {self._points} AS p ON p.rowid = knn.rowid "
            "ORDER BY knn.distance, p.id"
        )
        conn = self._connection()
        with self._errors("dense search"):
            conn.execute("BEGIN")
            try:
                key = self._generation_key(conn) if self.resident_dense else None
                ranked = self._resident_dense(conn, key, query, limit, filters)
                if ranked is not None:
                    rows = self._rows_by_rowid(conn, key, [rowid for rowid, _ in ranked])
                    return [Hit(point=_stored(row), score=1.0 - distance)
                            for row, (_, distance) in zip(rows, ranked, strict=True)]
                rows = conn.execute(sql, (query.tobytes(), min(limit, MAX_KNN), *params)
                                    ).fetchall()
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")
        return [Hit(point=_stored(row[:5]), score=1.0 - float(row[5])) for row in rows]

    def _resident_dense(
        self, conn: sqlite3.Connection, key: tuple[str, int] | None, query: np.ndarray,
        limit: int, filters: Filters,
    ) -> list[tuple[int, float]] | None:
        """Inside a read transaction at ``key`` (``_generation_key``): ``(rowid, cosine
        distance)`` of the exact answer from the float copy brought to the transaction's
        generation, or ``None`` when vec0 must scan (``resident_dense`` off, a version-2 file,
        ``exact_below`` live points or more, an older transaction or another thread loading:
        ``DenseTables.refreshed``)."""
        if key is None or not self.resident_dense:
            return None
        dimension = self._require_open().dimension
        snapshot = self._dense_copy.refreshed(conn, key, self.exact_below - 1, dimension)
        if snapshot is None:
            return None
        return snapshot.search(query, limit, filters)

    def _generation_key(self, conn: sqlite3.Connection) -> tuple[str, int] | None:
        """``(epoch, generation)`` the read transaction sees; ``None`` on a version-2 file."""
        state = dict(conn.execute(
            f"SELECT key, value FROM {self._meta} "
            "WHERE key IN ('schema_version', 'epoch', 'generation')"
        ).fetchall())
        if state.get("schema_version") != SCHEMA_VERSION or "epoch" not in state:
            return None
        return state["epoch"], int(state["generation"])

    def _rows_by_rowid(
        self, conn: sqlite3.Connection, key: tuple[str, int] | None, rowids: list[int]
    ) -> list[Any]:
        """The points' rows ``(id, document, kind, text, payload)`` in the order of
        ``rowids`` (all of them exist in the caller's read transaction, at ``key``): from
        this process's copy of the rows read at ``key`` (``RowCache``), the rest from SQLite."""
        return self._row_cache.rows(key, rowids, partial(self._read_rows, conn))

    def _read_rows(self, conn: sqlite3.Connection, rowids: list[int]) -> list[Any]:
        """``_rows_by_rowid``'s read from SQLite."""
        return conn.execute(
            f"SELECT p.id, p.document, p.kind, p.text, p.payload "
            f"FROM json_each(?) AS wanted JOIN {self._points} AS p "
            "ON p.rowid = wanted.value ORDER BY wanted.key",
            (json.dumps(rowids),),
        ).fetchall()

    def _sparse_search(self, text: str, limit: int, filters: Filters) -> list[Hit]:
        """Best points by Qdrant's sparse score for ``text``, so both backends rank alike:
        from the in-memory postings (``_resident_search``) or over FTS5's matches
        (``kb_shared.stores.vectors_sparse``), the same answer either way.

        ``Hit.score`` is the score Qdrant gives the same point; ties are ordered by id. A text
        with no terms returns ``[]``. Statistics, candidates and rows come from one read
        snapshot.
        """
        if fts_query(text) is None:
            return []
        conn = self._connection()
        with self._errors("sparse search"):
            self._scorer.prepare(conn)  # for the FTS5 path (and benchmarks); ~3 µs when done
            conn.execute("BEGIN")
            try:
                key = self._generation_key(conn)
                scored = self._resident_search(conn, key, text, limit, filters)
                if scored is None:
                    clauses, params = _in_filters(filters, prefix="p.")
                    scored = self._scorer.search(conn, text, limit, clauses, params)
                rows = self._rows_by_rowid(conn, key, [row.rowid for row in scored])
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")
        return [
            Hit(point=_stored(row), score=hit.score)
            for row, hit in zip(rows, scored, strict=True)
        ]

    def _resident_search(
        self, conn: sqlite3.Connection, key: tuple[str, int] | None, text: str, limit: int,
        filters: Filters,
    ) -> list[ScoredRow] | None:
        """Inside a read transaction at ``key`` (``_generation_key``): the answer from this
        process's postings copy brought to the transaction's generation, or ``None`` when FTS5
        must answer (a version-2 file, more than ``resident_points`` live points, another
        thread moved the copy past this transaction's snapshot or is loading it:
        ``PostingsTables.refreshed``)."""
        if key is None or self.resident_points <= 0:
            return None
        snapshot = self._postings.refreshed(conn, key, self.resident_points)
        if snapshot is None:
            return None
        return snapshot.search(text, limit, filters)

    def export_points(self, after: str | None = None, limit: int = 500) -> list[ExportedPoint]:
        """Up to ``limit`` stored points with id greater than ``after`` (``None``: from the
        first), in id order, each with its dense vector and its FTS5 terms: what a copy to
        another backend needs without re-embedding (``kb_shared.stores.migrate``).

        Raises:
            ValueError: ``limit`` < 1.
            StoreError: before ``open``, or SQLite failed.
        """
        if limit < 1:
            raise ValueError(f"limit must be at least 1, got {limit}")
        self._require_open()
        with self._errors("exporting points"):
            rows = (
                self._connection()
                .execute(
                    f"SELECT p.id, p.document, p.kind, p.text, p.payload, v.embedding, f.terms "
                    f"FROM {self._points} AS p JOIN {self._vec} AS v ON v.rowid = p.rowid "
                    f"JOIN {self._fts} AS f ON f.rowid = p.rowid "
                    "WHERE p.id > ? ORDER BY p.id LIMIT ?",
                    ("" if after is None else after, limit),
                )
                .fetchall()
            )
        return [
            ExportedPoint(_stored(row[:5]), np.frombuffer(row[5], dtype=np.float32), row[6])
            for row in rows
        ]


class ExportedPoint(NamedTuple):
    """A point as ``SqliteVectorIndex.export_points`` reads it: the stored point, its dense
    vector (float32, shape ``(dimension,)``, unit length as stored) and its FTS5 terms
    (``kb_shared.search.sparse.fts_document`` of the text its sparse side indexed)."""

    point: StoredPoint
    dense: np.ndarray
    terms: str


class _Row:
    """A checked point ready for SQL (payload as sorted-key JSON text, FTS5 terms)."""

    __slots__ = ("id", "document", "kind", "text", "payload", "dense", "terms")

    def __init__(self, checked: CheckedPoint) -> None:
        point = checked.point
        self.dense, self.payload = checked.dense, checked.payload
        self.id = point.id
        self.document = point.document
        self.kind = point.kind
        self.text = point.text
        self.terms = fts_document(point.terms_source)


#: Distinct payload texts ``_decoded_payload`` keeps decoded (a search reads ~400 candidates,
#: the same few thousand points again and again; benchmarks/results/
#: serving-2026-12-01-latency.md).
PAYLOAD_CACHE = 8192


@lru_cache(maxsize=PAYLOAD_CACHE)
def _decoded_payload(payload: str) -> dict[str, Any]:
    return json.loads(payload)


def _stored(row: Sequence[Any]) -> StoredPoint:
    point_id, document, kind, text, payload = row
    # a copy per point: the cached dict is never handed out, so no caller can change it
    return StoredPoint(
        id=point_id, document=document, kind=kind, text=text,
        payload=dict(_decoded_payload(payload)),
    )


def _equals_filter(document: str | None, kind: str | None) -> tuple[str, tuple[str, ...]]:
    given = [(column, value) for column, value in (("document", document), ("kind", kind))
             if value is not None]
    where = " AND ".join(f"{column} = ?" for column, _ in given)
    return (f" WHERE {where}" if given else ""), tuple(value for _, value in given)


def _in_filters(filters: Filters, prefix: str = "") -> tuple[list[str], list[str]]:
    """SQL ``IN`` clauses for checked ``filters``.

    Values travel as one JSON array parameter each (``json_each``), so any number of
    documents fits without hitting SQLite's bound-parameter limit.
    """
    clauses = [f"{prefix}{column} IN (SELECT value FROM json_each(?))" for column, _ in filters]
    return clauses, [json.dumps(values) for _, values in filters]
