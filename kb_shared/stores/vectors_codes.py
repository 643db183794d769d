"""Binary codes of the embedded index's dense vectors, and the in-memory copy a process
searches by Hamming distance before rescoring the candidates with the float vectors.

One bit per dimension: bit ``i`` is set when component ``i`` of the unit vector is positive
(sign / binary quantisation, the rule of sqlite-vec's ``vec_quantize_binary``); a
384-dimensional vector becomes 48 bytes, so a million codes (48 MB) are compared in a few
numpy passes where the float vectors (1.5 GB) would be scanned. Each bit says on which side
of one coordinate hyperplane the vector lies, so the Hamming distance is a coarse proxy for
the angle (for random hyperplanes its expectation is proportional to it: Charikar 2002,
"Similarity estimation techniques from rounding algorithms"); it only picks candidates, and
their exact cosine decides. How many candidates keep recall@10 >= 0.95:
benchmarks/results/scale-2026-12-01-ann.md.

``CodeCache`` is the process-local copy: arrays of rowids, codes, document and kind numbers,
kept in step with the SQLite tables by the write *generation* the writer bumps in every
transaction (``kb_shared.stores.vectors_sqlite``), so a reader in another process picks up
committed writes by reading only the rows written since its copy. ``CodeTables`` holds the
SQL of the codes tables next to that copy.

``DenseCache`` is the other process-local copy, used below ``exact_below`` live points (where
dense searches are exact): the live points' float32 vectors from ``{name}_codes.dense`` as
one matrix, kept in step the same way (``DenseTables``), so an exact search is one
matrix-vector product instead of vec0's scan of the file. It is never read at or past that
bound, and is let go once the index grows past it. Thread-safe like the postings copy
(``kb_shared.stores.vectors_postings``; the bookkeeping both share is
``kb_shared.stores.vectors_resident``): updates publish a new immutable ``DenseSnapshot``.
Figures: benchmarks/results/dense-resident-2026-12-02.md.
"""

from __future__ import annotations

import math
import secrets
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from kb_shared.stores.vectors_resident import (
    RELOAD_FRACTION,
    CheckedFilters,
    CopyTables,
    Numbering,
    Positions,
    PositionsSnapshot,
    fetch_batches,
    filter_mask,
    refresh,
    removed_since,
)


def binary_code(dense: np.ndarray) -> bytes:
    """The sign code of a float vector (shape ``(dimension,)``): ``ceil(dimension / 8)``
    bytes, most significant bit first, bit set where the component is > 0."""
    return np.packbits(np.asarray(dense) > 0).tobytes()


def binary_codes(dense: np.ndarray) -> np.ndarray:
    """Sign codes of a ``(n, dimension)`` float matrix, shape ``(n, ceil(dimension / 8))``
    uint8 (row ``i`` equals ``binary_code(dense[i])``)."""
    return np.packbits(np.asarray(dense) > 0, axis=1)


class CodeRows(NamedTuple):
    """Rows read from the index: rowids (int64), codes (bytes each), documents, kinds."""

    rowids: list[int]
    codes: list[bytes]
    documents: list[str]
    kinds: list[str]


class _Snapshot(NamedTuple):
    rowids: np.ndarray  # (n,) int64, ascending
    words: np.ndarray  # (w, n) uint64: word j of every code in row j (zero-padded codes)
    documents: np.ndarray  # (n,) int32 index into CodeCache.documents.names
    kinds: np.ndarray  # (n,) int32 index into CodeCache.kinds.names
    alive: np.ndarray  # (n,) bool: False once removed


class CodeCache:
    """The in-memory codes of one index, updated by deltas.

    ``key`` is ``(epoch, generation)`` of the state it holds (``None`` when empty); the
    owner compares it with the index's and calls ``load`` (another epoch: a dropped and
    re-created index) or ``apply`` (rows written and rowids removed since ``generation``).
    Thread-safe: updates replace one immutable snapshot under a lock; searches read the
    snapshot they started with.
    """

    def __init__(self, code_bytes: int) -> None:
        self.code_bytes = code_bytes
        self.key: tuple[str, int] | None = None
        self.lock = threading.Lock()
        self.documents = Numbering()
        self.kinds = Numbering()
        self._snapshot = self._arrays(CodeRows([], [], [], []))

    @property
    def size(self) -> int:
        """How many live codes the copy holds."""
        return int(self._snapshot.alive.sum())

    def _arrays(self, rows: CodeRows) -> _Snapshot:
        words = -(-self.code_bytes // 8)
        padded = np.zeros((len(rows.codes), words * 8), dtype=np.uint8)
        if rows.codes:
            padded[:, : self.code_bytes] = np.frombuffer(
                b"".join(rows.codes), dtype=np.uint8
            ).reshape(len(rows.codes), self.code_bytes)
        return _Snapshot(
            rowids=np.asarray(rows.rowids, dtype=np.int64),
            words=np.ascontiguousarray(padded.view(np.uint64).reshape(len(rows.codes), words).T),
            documents=self.documents.numbered(rows.documents),
            kinds=self.kinds.numbered(rows.kinds),
            alive=np.ones(len(rows.codes), dtype=bool),
        )

    def load(self, key: tuple[str, int], rows: CodeRows) -> None:
        """Replace the copy with ``rows`` (every live code of the index at ``key``)."""
        order = np.argsort(np.asarray(rows.rowids, dtype=np.int64), kind="stable")
        ordered = CodeRows(*([column[i] for i in order] for column in rows))
        self._snapshot = self._arrays(ordered)
        self.key = key

    def apply(self, key: tuple[str, int], removed: Iterable[int], rows: CodeRows) -> None:
        """Bring the copy to ``key``: mark ``removed`` rowids dead, then put ``rows`` (rows
        written since; a row present now is live whatever was removed before it)."""
        old = self._snapshot
        alive = old.alive.copy()
        removed_ids = np.fromiter(removed, dtype=np.int64)
        if removed_ids.size:
            at = np.searchsorted(old.rowids, removed_ids)
            hit = at < old.rowids.size
            hit[hit] &= old.rowids[at[hit]] == removed_ids[hit]
            alive[at[hit]] = False
        fresh = self._arrays(rows)
        at = np.searchsorted(old.rowids, fresh.rowids)
        known = at < old.rowids.size
        known[known] &= old.rowids[at[known]] == fresh.rowids[known]
        words, documents, kinds = old.words.copy(), old.documents.copy(), old.kinds.copy()
        words[:, at[known]] = fresh.words[:, known]
        documents[at[known]] = fresh.documents[known]
        kinds[at[known]] = fresh.kinds[known]
        alive[at[known]] = True
        new = ~known
        merged = _Snapshot(
            rowids=np.concatenate([old.rowids, fresh.rowids[new]]),
            words=np.concatenate([words, fresh.words[:, new]], axis=1),
            documents=np.concatenate([documents, fresh.documents[new]]),
            kinds=np.concatenate([kinds, fresh.kinds[new]]),
            alive=np.concatenate([alive, fresh.alive[new]]),
        )
        if merged.rowids.size > 1 and np.any(np.diff(merged.rowids) < 0):
            order = np.argsort(merged.rowids, kind="stable")
            merged = _Snapshot(
                rowids=merged.rowids[order],
                words=np.ascontiguousarray(merged.words[:, order]),
                documents=merged.documents[order],
                kinds=merged.kinds[order],
                alive=merged.alive[order],
            )
        self._snapshot = merged
        self.key = key

    def candidates(self, code: bytes, count: int, filters: CheckedFilters = ()) -> list[int]:
        """Rowids of the (at most) ``count`` live codes nearest ``code`` by Hamming distance
        among those passing ``filters`` (``filter_mask``; empty: any), nearest first (ties by
        rowid).
        """
        snap = self._snapshot
        eligible = snap.alive
        if filters:
            eligible = eligible & filter_mask(filters, snap.documents, snap.kinds,
                                              self.documents, self.kinds)
        chosen = int(eligible.sum())
        if chosen == 0 or count <= 0:
            return []
        padded = np.zeros(snap.words.shape[0] * 8, dtype=np.uint8)
        padded[: self.code_bytes] = np.frombuffer(code, dtype=np.uint8)
        bits = self.code_bytes * 8
        if chosen * 4 < eligible.size:  # a narrow filter: only its columns
            positions = np.flatnonzero(eligible)
            distances = _hamming(snap.words[:, positions], padded.view(np.uint64), bits)
            rowids = snap.rowids[positions]
        else:  # all columns; the others get a distance past any real one
            distances = _hamming(snap.words, padded.view(np.uint64), bits)
            if chosen < eligible.size:
                distances[~eligible] = bits + 1
            rowids = snap.rowids
        if count < chosen:
            # the smallest distance d with at least `count` codes at d or nearer
            reach = np.cumsum(np.bincount(distances, minlength=bits + 2))
            picked = np.flatnonzero(distances <= int(np.searchsorted(reach, count)))
        else:
            picked = np.flatnonzero(distances <= bits)
        order = np.lexsort((rowids[picked], distances[picked]))[:count]
        return rowids[picked[order]].tolist()


def _hamming(words: np.ndarray, query: np.ndarray, bits: int) -> np.ndarray:
    """Hamming distances of the codes in ``words`` (shape ``(w, n)`` uint64) to ``query``
    (``(w,)`` uint64): shape ``(n,)``, int16 (int32 past 32,767 bits). Word by word over
    contiguous rows: ~5× faster than one pass over ``(n, w)`` rows (6 against 29 ms CPU for
    a million 384-bit codes)."""
    total = np.zeros(words.shape[1], dtype=np.int16 if bits < 2**15 else np.int32)
    for row, word in zip(words, query, strict=True):
        total += np.bitwise_count(row ^ word)
    return total


#: Codes back-filled per batch when a version-2 file is upgraded (bounds memory, not speed).
BACKFILL_BATCH = 5_000


class CodeTables(CopyTables[CodeCache]):
    """The codes tables of the SQLite index ``name`` and this process's ``CodeCache`` of them.

    Tables: ``{name}_codes(rowid, code, dense, generation)`` (sign code, float32 copy for
    rescoring, write generation) and ``{name}_removed(rowid, generation)`` (deleted rowids);
    the generation and the epoch (a random token per created layout) live in ``{name}_meta``.
    Every method takes the caller's connection and runs inside its transaction; SQLite errors
    propagate (``SqliteVectorIndex`` turns them into ``StoreError``).
    """

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.vec = f"{name}_vec"

    def create(self, conn: Any) -> None:
        """Create both tables and fill the codes from the vec0 float vectors (an upgrade from
        layout 2), then set generation 0 and a new epoch in the meta table."""
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {self.codes} (rowid INTEGER PRIMARY KEY, "
            "code BLOB NOT NULL, dense BLOB NOT NULL, generation INTEGER NOT NULL)"
        )
        conn.execute(f"CREATE INDEX IF NOT EXISTS {self.codes}_generation "
                     f"ON {self.codes}(generation)")
        conn.execute(f"CREATE TABLE IF NOT EXISTS {self.removed} "
                     "(rowid INTEGER NOT NULL, generation INTEGER NOT NULL)")
        conn.execute(f"CREATE INDEX IF NOT EXISTS {self.removed}_generation "
                     f"ON {self.removed}(generation)")
        after = 0
        while rows := conn.execute(
            f"SELECT rowid, embedding FROM {self.vec} WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (after, BACKFILL_BATCH),
        ).fetchall():
            dense = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
            self.write(conn, [r[0] for r in rows], dense.reshape(len(rows), -1), 0)
            after = rows[-1][0]
        conn.executemany(
            f"INSERT OR REPLACE INTO {self.meta}(key, value) VALUES (?, ?)",
            [("generation", "0"), ("epoch", secrets.token_hex(8))],
        )

    def next_generation(self, conn: Any) -> int:
        """Bump and return the write generation (call once per write transaction)."""
        return int(
            conn.execute(
                f"UPDATE {self.meta} SET value = CAST(value AS INTEGER) + 1 "
                "WHERE key = 'generation' RETURNING value"
            ).fetchone()[0]
        )

    def write(self, conn: Any, rowids: Sequence[int], dense: np.ndarray, generation: int) -> None:
        """Insert or replace the codes of ``rowids`` from their float32 vectors ``dense``
        (shape ``(len(rowids), dimension)``)."""
        codes = binary_codes(dense)
        conn.executemany(
            f"INSERT OR REPLACE INTO {self.codes}(rowid, code, dense, generation) "
            "VALUES (?, ?, ?, ?)",
            [
                (rowid, code.tobytes(), vector.astype(np.float32).tobytes(), generation)
                for rowid, code, vector in zip(rowids, codes, dense, strict=True)
            ],
        )

    def delete(self, conn: Any, rowids: Sequence[int], removed_at: int | None) -> None:
        """Delete the codes of ``rowids``; with ``removed_at`` (a generation) log them as
        removed, for other processes' copies."""
        conn.executemany(f"DELETE FROM {self.codes} WHERE rowid = ?", [(r,) for r in rowids])
        if removed_at is not None:
            conn.executemany(f"INSERT INTO {self.removed}(rowid, generation) VALUES (?, ?)",
                             [(r, removed_at) for r in rowids])

    def refreshed(self, conn: Any, code_bytes: int) -> CodeCache:
        """This process's copy brought up to the state ``conn`` reads (call inside one read
        transaction, on a layout that has the tables)."""
        state = dict(conn.execute(
            f"SELECT key, value FROM {self.meta} WHERE key IN ('epoch', 'generation')"
        ).fetchall())
        key = (state["epoch"], int(state["generation"]))
        with self._lock:
            if self.cache is None:
                self.cache = CodeCache(code_bytes)
            cache = self.cache
        with cache.lock:
            if cache.key is None or cache.key[0] != key[0] or cache.key[1] > key[1]:
                cache.load(key, self._rows(conn, None))
            elif cache.key != key:
                cache.apply(key, removed_since(conn, self.removed, cache.key[1]),
                            self._rows(conn, cache.key[1]))
        return cache

    def _rows(self, conn: Any, after: int | None) -> CodeRows:
        """Codes with their document and kind: all, or those written after ``after``."""
        where = "" if after is None else " WHERE c.generation > ?"
        rows = conn.execute(
            f"SELECT c.rowid, c.code, p.document, p.kind FROM {self.codes} AS c "
            f"JOIN {self.points} AS p ON p.rowid = c.rowid{where}",
            () if after is None else (after,),
        ).fetchall()
        return CodeRows(*([row[i] for row in rows] for i in range(4)))


# -- the float copy searched exactly below ``exact_below`` live points ----------------------

#: Points read per batch while the float copy loads (bounds the vector blobs held at once).
DENSE_BATCH = 2_000


class DenseRows(NamedTuple):
    """Rows read for the float copy: rowids, point ids, documents, kinds and float32
    vectors (``4 * dimension`` bytes each), one entry per point."""

    rowids: list[int]
    ids: list[str]
    documents: list[str]
    kinds: list[str]
    dense: list[bytes]


def magnitudes(vectors: np.ndarray) -> np.ndarray:
    """``sqrt`` of each row's float32 sum of squares, as float64 (shape ``(n,)`` for
    ``(n, dimension)`` float32): the vector lengths sqlite-vec's cosine divides by."""
    return np.sqrt(np.einsum("ij,ij->i", vectors, vectors).astype(np.float64))


def cosine_distances(vectors: np.ndarray, lengths: np.ndarray, query: np.ndarray) -> np.ndarray:
    """sqlite-vec's cosine distance of each row of ``vectors`` (float32 ``(n, dimension)``,
    ``lengths`` their ``magnitudes``) to ``query`` (float32 ``(dimension,)``): float32
    ``(n,)``, computed as ``distance_cosine_float`` in sqlite-vec.c does (float32 sums, the
    quotient ``1 - dot / (|a| |b|)`` in double, rounded to float32). The sums run in BLAS's
    order, not vec0's one-by-one loop, so a distance can differ from vec0's in its last bits
    (about 1e-6 at most: dense-resident-2026-12-02.md). One BLAS dot per row (``vecdot``),
    not a threaded matrix-vector product: OpenBLAS waking its threads made that erratic on a
    busy machine (dense-resident-2026-12-02.md)."""
    dots = np.vecdot(vectors, query)
    length = math.sqrt(float(np.dot(query, query)))
    return (1.0 - dots / (lengths * length)).astype(np.float32)


class _GrowingRows:
    """A float32 ``(rows, dimension)`` array appended to in place. Appends write past every
    row handed out and growth copies into a new array, so a view of the first rows taken
    earlier (a snapshot's) never changes. Capacity doubles while a load fills it (then
    ``trim``) and grows by a quarter for deltas (at least ``DENSE_BATCH`` rows each time):
    a copy near ``exact_below`` points is ~30 MB at 384 dimensions."""

    def __init__(self, dimension: int) -> None:
        self.data = np.empty((0, dimension), dtype=np.float32)
        self.size = 0
        self.growth = 1.0  # spare capacity added, as a share of the size

    def extend(self, rows: np.ndarray) -> None:
        """Append ``rows`` (float32, shape ``(m, dimension)``)."""
        end = self.size + rows.shape[0]
        if end > self.data.shape[0]:
            spare = int(self.size * self.growth) + DENSE_BATCH
            grown = np.empty((max(end, self.size + spare), self.data.shape[1]),
                             dtype=np.float32)
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[self.size:end] = rows
        self.size = end

    def trim(self) -> None:
        """Give back the spare capacity (after a load, whose size was not known ahead);
        from now on grow by a quarter."""
        self.data = self.data[: self.size].copy()
        self.growth = 0.25

    def view(self) -> np.ndarray:
        """The rows appended so far (a view)."""
        return self.data[: self.size]


@dataclass(frozen=True, eq=False)
class DenseSnapshot(PositionsSnapshot):
    """One immutable state of the float copy (``DenseCache`` builds them): the
    ``PositionsSnapshot`` of its points (a point written again gets a new position and the
    old dies), with ``vectors`` (float32 ``(positions, dimension)``) and their ``lengths``
    (``magnitudes``).
    """

    vectors: np.ndarray
    lengths: np.ndarray

    def search(
        self, query: np.ndarray, limit: int, filters: CheckedFilters = ()
    ) -> list[tuple[int, float]]:
        """``(rowid, cosine distance)`` of the ``limit`` live points nearest ``query``
        (float32 ``(dimension,)``) among those passing ``filters`` (``in_scope``; empty: any),
        nearest first, equal distances by point id (``cosine_distances``; exact: every
        eligible point is scored)."""
        eligible = self.alive
        if filters:
            eligible = eligible & self.in_scope(None, filters)
        chosen = int(np.count_nonzero(eligible))
        if chosen == 0 or limit <= 0:
            return []
        if chosen * 4 < eligible.size:  # a narrow filter: only its rows
            positions = np.flatnonzero(eligible)
            distances = cosine_distances(self.vectors[positions], self.lengths[positions], query)
        else:  # every row; the others get a distance past any real one
            positions = np.arange(eligible.size)
            distances = cosine_distances(self.vectors, self.lengths, query)
            distances[~eligible] = np.inf
        if limit < chosen:  # the best `limit` and every point tied with the last of them
            picked = np.flatnonzero(distances <= np.partition(distances, limit - 1)[limit - 1])
        else:
            picked = np.flatnonzero(distances < np.inf)
        at = positions[picked].tolist()
        ids = self.ids
        ranked = sorted(zip(distances[picked].tolist(), (ids[p] for p in at), at,
                            strict=True))[:limit]
        rowids = self.rowids
        return [(int(rowids[p]), distance) for distance, _, p in ranked]


class DenseCache:
    """The float copy of one index; ``snapshot`` is its current state.

    ``load`` replaces it, ``apply`` brings it forward by a delta (positions only appended;
    ``worth_reloading`` says when the dead ones call for a fresh load); both run under
    ``lock`` (``DenseTables.refreshed`` holds it) and publish a new snapshot at the end, so
    searches on other threads never see a half-applied change.
    """

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self.lock = threading.Lock()
        self.documents = Numbering()
        self.kinds = Numbering()
        self._buffer = _GrowingRows(dimension)
        self._positions = Positions(np.zeros(0, dtype=np.int64))
        self.snapshot = self._snapshot(None, np.zeros(0, dtype=np.int64), [], np.zeros(0),
                                       np.zeros(0, np.int32), np.zeros(0, np.int32),
                                       np.zeros(0, dtype=bool))

    @property
    def key(self) -> tuple[str, int] | None:
        """``(epoch, generation)`` of the state held; ``None`` before the first load."""
        return self.snapshot.key

    def _snapshot(self, key: tuple[str, int] | None, rowids: np.ndarray, ids: list[str],
                  lengths: np.ndarray, documents: np.ndarray, kinds: np.ndarray,
                  alive: np.ndarray) -> DenseSnapshot:
        return DenseSnapshot(
            key=key, rowids=rowids, ids=ids, vectors=self._buffer.view(), lengths=lengths,
            documents=documents, kinds=kinds, alive=alive, live=int(np.count_nonzero(alive)),
            document_numbering=self.documents, kind_numbering=self.kinds,
        )

    def _read(self, buffer: _GrowingRows, batches: Iterable[DenseRows]) -> tuple[
            list[int], list[str], np.ndarray, np.ndarray, np.ndarray]:
        """Append the vectors of ``batches`` to ``buffer``; their rowids, ids, lengths,
        document and kind numbers."""
        rowids: list[int] = []
        ids: list[str] = []
        lengths, documents, kinds = [np.zeros(0)], [np.zeros(0, np.int32)], [np.zeros(0, np.int32)]
        for batch in batches:
            vectors = np.frombuffer(b"".join(batch.dense), dtype=np.float32).reshape(
                len(batch.dense), self.dimension)
            buffer.extend(vectors)
            lengths.append(magnitudes(vectors))
            rowids.extend(batch.rowids)
            ids.extend(batch.ids)
            documents.append(self.documents.numbered(batch.documents))
            kinds.append(self.kinds.numbered(batch.kinds))
        return rowids, ids, *(np.concatenate(parts) for parts in (lengths, documents, kinds))

    def load(self, key: tuple[str, int], batches: Iterable[DenseRows]) -> None:
        """Replace the copy with the rows of ``batches`` (every live point at ``key``)."""
        buffer = _GrowingRows(self.dimension)
        rowids, ids, lengths, documents, kinds = self._read(buffer, batches)
        buffer.trim()
        self._buffer = buffer  # only now: a failed read leaves the copy as it was
        held = np.asarray(rowids, dtype=np.int64)
        self._positions = Positions(held)
        self.snapshot = self._snapshot(key, held, ids, lengths, documents, kinds,
                                       np.ones(len(rowids), dtype=bool))

    def worth_reloading(self) -> bool:
        """Whether dead positions are more than ``RELOAD_FRACTION`` of the copy (then a
        fresh load gives back their memory and scan time)."""
        snap = self.snapshot
        return snap.dead > RELOAD_FRACTION * snap.alive.size

    def apply(self, key: tuple[str, int], removed: Iterable[int],
              batches: Iterable[DenseRows]) -> None:
        """Bring the copy to ``key``: kill the positions of ``removed`` rowids, then append
        the rows of ``batches`` (rows written since; a rowid written again kills its old
        position)."""
        old = self.snapshot
        first = old.alive.size
        try:
            rowids, ids, lengths, documents, kinds = self._read(self._buffer, batches)
        except BaseException:
            self._buffer.size = first  # rows appended past the snapshot's are dropped
            raise
        written = np.asarray(rowids, dtype=np.int64)
        alive = self._positions.appended(old.alive, removed, written)
        self.snapshot = self._snapshot(
            key, np.concatenate([old.rowids, written]), old.ids + ids,
            np.concatenate([old.lengths, lengths]),
            np.concatenate([old.documents, documents]), np.concatenate([old.kinds, kinds]),
            alive,
        )


class DenseTables(CopyTables[DenseCache]):
    """Reads the float copy's rows from the SQLite index ``name`` (``CodeTables``' codes
    table joined to ``{name}_points``) and keeps this process's ``DenseCache``. Methods take
    the caller's connection inside its read transaction; SQLite errors propagate."""

    def refreshed(self, conn: Any, key: tuple[str, int], most: int,
                  dimension: int) -> DenseSnapshot | None:
        """The copy brought to ``key`` (the ``(epoch, generation)`` ``conn``'s transaction
        reads), or ``None`` when vec0 must scan instead: more than ``most`` live points
        (the copy is let go; never more than ``most + 1`` vectors are read to find out),
        the copy is already past ``key`` (an older transaction), or another thread has held
        the copy's lock for ``vectors_resident.LOCK_WAIT`` (loading it)."""
        if most <= 0:
            return None
        with self._lock:
            cache = self.cache
            if cache is None or cache.dimension != dimension:
                cache = self.cache = DenseCache(dimension)

        def update(held: tuple[str, int] | None) -> DenseSnapshot | None:
            try:
                self._update(conn, cache, key, held, most)
            except BaseException:
                self.forget(cache)  # a half-read update: the next search loads afresh
                raise
            if cache.snapshot.live > most:
                self.forget(cache)
                return None
            return cache.snapshot

        return refresh(cache, key, update)

    def _update(self, conn: Any, cache: DenseCache, key: tuple[str, int],
                held: tuple[str, int] | None, most: int) -> None:
        """Under ``cache.lock``, the copy at ``held``: apply the delta since its generation,
        or load afresh (another epoch, ``worth_reloading``, or a delta of more than ``most``
        points)."""
        delta = None
        if held is not None and held[0] == key[0] and not cache.worth_reloading():
            delta = list(self._rows(conn, held[1], most))
            if sum(len(batch.rowids) for batch in delta) > most:
                delta = None
        if delta is None:
            cache.load(key, self._rows(conn, None, most))
        else:
            cache.apply(key, removed_since(conn, self.removed, held[1]), delta)

    def _rows(self, conn: Any, after: int | None, most: int) -> Iterator[DenseRows]:
        """Every live point by rowid (``after`` is ``None``) or those written after
        generation ``after``, ``DENSE_BATCH`` a batch, at most ``most + 1`` points (the
        query runs now, the batches are read as iterated)."""
        where = "" if after is None else " WHERE c.generation > ?"
        order = " ORDER BY c.rowid" if after is None else ""
        cursor = conn.execute(
            f"SELECT c.rowid, p.id, p.document, p.kind, c.dense FROM {self.codes} AS c "
            f"JOIN {self.points} AS p ON p.rowid = c.rowid{where}{order} LIMIT ?",
            (most + 1,) if after is None else (after, most + 1),
        )
        return fetch_batches(cursor, DENSE_BATCH, DenseRows, 5)
