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
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import numpy as np


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
    documents: np.ndarray  # (n,) int32 index into CodeCache.document_names
    kinds: np.ndarray  # (n,) int32 index into CodeCache.kind_names
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
        self.document_names: list[str] = []
        self.kind_names: list[str] = []
        self._document_numbers: dict[str, int] = {}
        self._kind_numbers: dict[str, int] = {}
        self._snapshot = self._arrays(CodeRows([], [], [], []))

    @property
    def size(self) -> int:
        """How many live codes the copy holds."""
        return int(self._snapshot.alive.sum())

    def _number(self, names: list[str], numbers: dict[str, int], value: str) -> int:
        number = numbers.get(value)
        if number is None:
            number = numbers[value] = len(names)
            names.append(value)
        return number

    def _arrays(self, rows: CodeRows) -> _Snapshot:
        words = -(-self.code_bytes // 8)
        padded = np.zeros((len(rows.codes), words * 8), dtype=np.uint8)
        if rows.codes:
            padded[:, : self.code_bytes] = np.frombuffer(
                b"".join(rows.codes), dtype=np.uint8
            ).reshape(len(rows.codes), self.code_bytes)
        documents = [
            self._number(self.document_names, self._document_numbers, d) for d in rows.documents
        ]
        kinds = [self._number(self.kind_names, self._kind_numbers, k) for k in rows.kinds]
        return _Snapshot(
            rowids=np.asarray(rows.rowids, dtype=np.int64),
            words=np.ascontiguousarray(padded.view(np.uint64).reshape(len(rows.codes), words).T),
            documents=np.asarray(documents, dtype=np.int32),
            kinds=np.asarray(kinds, dtype=np.int32),
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

    def candidates(
        self,
        code: bytes,
        count: int,
        documents: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
    ) -> list[int]:
        """Rowids of the (at most) ``count`` live codes nearest ``code`` by Hamming distance
        among those of ``documents`` / ``kinds`` (``None``: any), nearest first (ties by rowid).
        """
        snap = self._snapshot
        eligible = snap.alive
        if documents is not None:
            wanted = [self._document_numbers[d] for d in documents if d in self._document_numbers]
            eligible = eligible & np.isin(snap.documents, np.asarray(wanted, dtype=np.int32))
        if kinds is not None:
            wanted = [self._kind_numbers[k] for k in kinds if k in self._kind_numbers]
            eligible = eligible & np.isin(snap.kinds, np.asarray(wanted, dtype=np.int32))
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


class CodeTables:
    """The codes tables of the SQLite index ``name`` and this process's ``CodeCache`` of them.

    Tables: ``{name}_codes(rowid, code, dense, generation)`` (sign code, float32 copy for
    rescoring, write generation) and ``{name}_removed(rowid, generation)`` (deleted rowids);
    the generation and the epoch (a random token per created layout) live in ``{name}_meta``.
    Every method takes the caller's connection and runs inside its transaction; SQLite errors
    propagate (``SqliteVectorIndex`` turns them into ``StoreError``).
    """

    def __init__(self, name: str) -> None:
        self.codes = f"{name}_codes"
        self.removed = f"{name}_removed"
        self.meta = f"{name}_meta"
        self.points = f"{name}_points"
        self.vec = f"{name}_vec"
        self.cache: CodeCache | None = None
        self._lock = threading.Lock()

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
                removed = [r[0] for r in conn.execute(
                    f"SELECT rowid FROM {self.removed} WHERE generation > ?", (cache.key[1],))]
                cache.apply(key, removed, self._rows(conn, cache.key[1]))
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
