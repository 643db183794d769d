"""A process-local copy of the embedded index's keyword side, searched exactly in memory.

``PostingsCache`` holds, per point (by *position*, the order the copy first saw it): its
rowid, point id, document and kind numbers, number of terms and an alive flag; per term, a
postings list of ``(position, tf)`` in numpy arrays. ``search`` scores every point holding a
query term with Qdrant's score (``kb_shared.stores.vectors_sparse``: a double-precision sum
over the query terms in ``term_index`` order of ``value * bm25_term_weight(tf, length)``,
each weight computed in ``kb_shared.search.sparse.bm25_term_weight``'s operation order, the sum
rounded to float32), so its answers equal the FTS5 path's and Qdrant's, ids and scores.

The copy follows the SQLite file like ``kb_shared.stores.vectors_codes.CodeCache`` (the
bookkeeping both share: ``kb_shared.stores.vectors_resident``): it is keyed by the file's
``(epoch, generation)``; another epoch (a dropped and re-created index) loads everything
again, a newer generation applies only the rowids logged in ``{name}_removed`` and the rows
whose ``{name}_codes.generation`` is newer (with their FTS5 ``terms``). A point written
again keeps its rowid in SQLite but gets a new position here (the old one dies), so postings
only ever grow by appending; the copy is loaded afresh when the appended or dead part grows
past ``RELOAD_FRACTION`` of it. Updates publish a new immutable ``PostingsSnapshot``; a
search reads the one it started with (document and kind names are numbered in tables shared
by the snapshots, which only ever grow). A search whose read transaction is older than the
copy, or that would wait past ``LOCK_WAIT`` for another thread's load, gets ``None`` and is
answered by the FTS5 path: the same answer, slower.

Sizes and times (memory per point, load time, search times against the FTS5 path):
benchmarks/results/sparse-resident-2026-12-02.md.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from kb_shared.search.sparse import AVERAGE_DOCUMENT_TOKENS, BM25_B, BM25_K1, tokenize
from kb_shared.stores import vectors_resident as resident
from kb_shared.stores.vectors_sparse import ScoredRow, query_terms, read_averages

#: The most live points the copy is kept for; past it the FTS5 path answers
#: (benchmarks/results/sparse-resident-2026-12-02.md and …-1M.md: memory and load time by
#: size; ~1 GiB and ~1 min of load at 1M synthetic points). ``KB_VECTOR_RESIDENT_POINTS``.
RESIDENT_POINTS = 1_000_000

#: Deltas smaller than this (postings, or dead positions) never force a fresh load.
RELOAD_MINIMUM = 50_000

#: Points read and tokenised per batch while loading (bounds the text held at once).
LOAD_BATCH = 2_000

#: FTS5's record of row count and token total (``FTS5_AVERAGES_ROWID`` in ``fts5_index.c``).
_AVERAGES_ROWID = 1


class PostingRows(NamedTuple):
    """Rows read from the index: rowids, point ids, documents, kinds and FTS5 ``terms``
    (space-separated ``kb_shared.search.sparse.fts_document`` terms), one entry per point."""

    rowids: list[int]
    ids: list[str]
    documents: list[str]
    kinds: list[str]
    terms: list[str]


class _Postings(NamedTuple):
    """Postings of many terms in one CSR layout: term ``t``'s entries are
    ``positions[offsets[t]:offsets[t + 1]]`` (ascending) with ``tfs`` alongside."""

    vocabulary: dict[str, int]
    offsets: np.ndarray  # (terms + 1,) int64
    positions: np.ndarray  # (postings,) int32
    tfs: np.ndarray  # (postings,) uint16, or int32 when a count exceeds 65,535

    def of(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """``(positions, tfs)`` of ``term``, or ``None`` when no point held it."""
        number = self.vocabulary.get(term)
        if number is None:
            return None
        start, end = self.offsets[number], self.offsets[number + 1]
        return self.positions[start:end], self.tfs[start:end]


class _Numbering(dict[str, int]):
    """term -> number, numbering an unseen term on first look-up (so a C-level ``map`` over
    a batch's terms fills it)."""

    def __missing__(self, term: str) -> int:
        number = self[term] = len(self)
        return number


class _Growing:
    """An int32 array appended to in place, its capacity doubled when full: one allocation
    that outgrows malloc's mmap threshold is given back to the system whole when freed,
    where a list of per-batch arrays left the heap fragmented (RSS stayed ~2x the copy's
    size after a load; benchmarks/results/sparse-resident-2026-12-02.md)."""

    def __init__(self, capacity: int = 1 << 16) -> None:
        self.data = np.empty(capacity, dtype=np.int32)
        self.size = 0

    def extend(self, values: np.ndarray) -> None:
        """Append ``values`` (cast to int32)."""
        end = self.size + values.size
        if end > self.data.size:
            grown = np.empty(max(end, 2 * self.data.size), dtype=np.int32)
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[self.size:end] = values
        self.size = end

    def view(self) -> np.ndarray:
        """The values appended so far (a view, valid until the next ``extend``)."""
        return self.data[: self.size]


class _Builder:
    """Postings of points fed in batches of FTS5 columns (``add``), positions numbered from
    ``first_position`` in the order fed; ``finish`` lays them out by term.

    Per batch the columns are split into one token list, numbered through one dict, and
    ``(term, point)`` pairs counted with ``np.unique`` (no Python loop per point or term:
    less than half the CPU of a ``Counter`` per point; benchmarks/results/
    sparse-resident-2026-12-02.md). The pairs wait in ``_Growing`` arrays until ``finish``
    scatters them into place batch by batch (a counting sort by term).
    """

    def __init__(self, first_position: int) -> None:
        self.first_position = first_position
        self.vocabulary = _Numbering()
        self.points = 0
        self._lengths = _Growing()
        self._terms, self._positions, self._tfs = _Growing(), _Growing(), _Growing()
        self._ends: list[int] = []  # where each batch's pairs end

    def add(self, terms: Sequence[str]) -> None:
        """Append points whose FTS5 columns are ``terms`` (space-separated terms; each
        point's length is its ``split(" ")`` count, as ``vectors_sparse.term_counts``)."""
        if not terms:
            return
        lengths = np.fromiter((stored.count(" ") + 1 for stored in terms), dtype=np.int64,
                              count=len(terms))
        tokens = " ".join(terms).split(" ")
        numbers = np.array(list(map(self.vocabulary.__getitem__, tokens)), dtype=np.int64)
        del tokens
        local = np.repeat(np.arange(len(terms), dtype=np.int64), lengths)
        pairs, tf = np.unique((numbers << 32) | local, return_counts=True)  # by term, point
        term = pairs >> 32
        position = (pairs & 0xFFFFFFFF) + (self.first_position + self.points)
        empty = self.vocabulary.get("")  # the empty column of a point without terms
        if empty is not None:
            kept = term != empty
            term, position, tf = term[kept], position[kept], tf[kept]
        self._terms.extend(term)
        self._positions.extend(position)
        self._tfs.extend(tf)
        self._ends.append(self._terms.size)
        self._lengths.extend(lengths)
        self.points += len(terms)

    def finish(self) -> tuple[_Postings, np.ndarray]:
        """The postings by term (positions ascending within a term) and each point's
        number of terms (int32)."""
        vocabulary = dict(self.vocabulary)
        vocabulary.pop("", None)
        size = len(self.vocabulary)
        term_all, position_all, tf_all = (
            self._terms.view(), self._positions.view(), self._tfs.view())
        offsets = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(np.bincount(term_all, minlength=size), out=offsets[1:])
        positions = np.empty(term_all.size, dtype=np.int32)
        small = int(tf_all.max(initial=0)) <= np.iinfo(np.uint16).max
        tfs = np.empty(term_all.size, dtype=np.uint16 if small else np.int32)
        cursor = offsets[:-1].copy()
        start = 0
        for end in self._ends:  # each batch sorted by term, then position
            term = term_all[start:end]
            starts = np.flatnonzero(np.r_[True, term[1:] != term[:-1]])
            run = np.arange(term.size) - np.repeat(starts, np.diff(np.r_[starts, term.size]))
            into = cursor[term] + run
            positions[into], tfs[into] = position_all[start:end], tf_all[start:end]
            cursor += np.bincount(term, minlength=size)
            start = end
        lengths = self._lengths.view().copy()
        self._terms = self._positions = self._tfs = self._lengths = _Growing(0)
        return _Postings(vocabulary, offsets, positions, tfs), lengths


@dataclass(frozen=True, eq=False)
class PostingsSnapshot(resident.PositionsSnapshot):
    """One immutable state of the copy (``PostingsCache`` builds them): the
    ``PositionsSnapshot`` of its points, with ``lengths`` (int32, terms of each point),
    ``base`` (the postings of a full load) and ``delta`` (each term's postings appended
    since, as tuples of ``(positions, tfs)`` parts, positions past every base one;
    ``delta_postings`` counts them).
    """

    lengths: np.ndarray
    base: _Postings
    delta: dict[str, tuple[tuple[np.ndarray, np.ndarray], ...]]
    delta_postings: int

    def _parts(self, term: str) -> list[tuple[np.ndarray, np.ndarray]]:
        found = self.base.of(term)
        return ([found] if found is not None else []) + list(self.delta.get(term, ()))

    def totals(self, text: str) -> np.ndarray | None:
        """Qdrant's score of every position for ``text`` before its float32 rounding: shape
        ``(positions,)`` float64, 0.0 where no query term is held (dead positions included:
        callers mask them); ``None`` when no live point holds a term of ``text``. ``df`` and
        ``N`` count the live points, as FTS5's statistics do."""
        alive, every = self.alive, self.live == self.alive.size
        parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        frequencies: dict[str, int] = {}
        for term in dict.fromkeys(tokenize(text)):
            found = self._parts(term)
            if found:
                parts[term] = found
                frequencies[term] = sum(
                    p.size if every else int(np.count_nonzero(alive[p])) for p, _ in found)
        terms = query_terms(text, frequencies, self.live)
        if not terms:
            return None
        scores = np.zeros(alive.size, dtype=np.float64)
        lengths = self.lengths
        for query in terms:  # term_index order: Qdrant's summation order
            for positions, tfs in parts[query.term]:  # a position is in one part only
                scores[positions] += query.value * bm25_weights(tfs, lengths[positions])
        return scores

    def search(
        self, text: str, limit: int, filters: resident.CheckedFilters = ()
    ) -> list[ScoredRow]:
        """The ``limit`` best live points for ``text`` by Qdrant's score (``totals`` rounded
        to float32), ties by point id, among those passing ``filters`` (``in_scope``; empty:
        any); ``[]`` when no point holds a term of ``text``. Filters narrow the answer, not
        the statistics, as on the FTS5 path."""
        scores = self.totals(text) if limit > 0 else None
        if scores is None:
            return []
        matched = np.flatnonzero(scores)
        if self.live < self.alive.size:
            matched = matched[self.alive[matched]]
        if filters:
            matched = matched[self.in_scope(matched, filters)]
        rounded = scores[matched].astype(np.float32)
        if matched.size > limit:  # keep the best limit and every point tied with the last
            cut = -np.partition(-rounded, limit - 1)[limit - 1]
            keep = rounded >= cut
            matched, rounded = matched[keep], rounded[keep]
        ids = self.ids
        ranked = sorted(
            zip((-rounded).tolist(), (ids[p] for p in matched.tolist()), matched.tolist(),
                strict=True))[:limit]
        rowids = self.rowids
        return [ScoredRow(int(rowids[p]), pid, -score) for score, pid, p in ranked]


def bm25_weights(tfs: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``kb_shared.search.sparse.bm25_term_weight(tf, length)`` elementwise, bit for bit: the same
    float64 operations in the same order (float64, shape of ``tfs``; ``tfs`` >= 1, ``lengths``
    the points' numbers of terms)."""
    tf = tfs.astype(np.float64)
    norm = (1.0 - BM25_B) + BM25_B * (lengths / AVERAGE_DOCUMENT_TOKENS)
    return tf * (BM25_K1 + 1.0) / (tf + BM25_K1 * norm)


class _Read(NamedTuple):
    """Points read in batches: postings, rowids (int64), ids, document and kind numbers
    (int32) and numbers of terms (int32), by position."""

    postings: _Postings
    rowids: np.ndarray
    ids: list[str]
    documents: np.ndarray
    kinds: np.ndarray
    lengths: np.ndarray


class PostingsCache:
    """The copy of one index (module docstring); ``snapshot`` is its current state.

    ``load`` replaces it, ``apply`` brings it forward by a delta; both run under ``lock``
    (the caller's: ``PostingsTables.refreshed``) and publish a new snapshot at the end, so
    searches on other threads never see a half-applied change. Rows come as an iterable of
    ``PostingRows`` batches, so a load never holds every point's text at once.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.documents = resident.Numbering()
        self.kinds = resident.Numbering()
        self._positions = resident.Positions(np.zeros(0, dtype=np.int64))
        self.snapshot = self._fresh(None, ())

    @property
    def key(self) -> tuple[str, int] | None:
        """``(epoch, generation)`` of the state held; ``None`` before the first load."""
        return self.snapshot.key

    def _read(self, first_position: int, batches: Iterable[PostingRows]) -> _Read:
        """The rows of ``batches`` as arrays, positions from ``first_position``; document
        and kind names numbered in this cache's tables."""
        builder = _Builder(first_position)
        rowids: list[int] = []
        ids: list[str] = []
        documents: list[np.ndarray] = [np.zeros(0, dtype=np.int32)]
        kinds: list[np.ndarray] = [np.zeros(0, dtype=np.int32)]
        for batch in batches:
            builder.add(batch.terms)
            rowids.extend(batch.rowids)
            ids.extend(batch.ids)
            documents.append(self.documents.numbered(batch.documents))
            kinds.append(self.kinds.numbered(batch.kinds))
        postings, lengths = builder.finish()
        return _Read(postings, np.asarray(rowids, dtype=np.int64), ids,
                     np.concatenate(documents), np.concatenate(kinds), lengths)

    def _fresh(self, key: tuple[str, int] | None,
               batches: Iterable[PostingRows]) -> PostingsSnapshot:
        """A snapshot of exactly the rows of ``batches`` (positions 0, 1, … in order)."""
        read = self._read(0, batches)
        self._positions = resident.Positions(read.rowids)
        return PostingsSnapshot(
            key=key, rowids=read.rowids, ids=read.ids, documents=read.documents,
            kinds=read.kinds, lengths=read.lengths,
            alive=np.ones(read.rowids.size, dtype=bool), base=read.postings, delta={},
            delta_postings=0, live=int(read.rowids.size),
            document_numbering=self.documents, kind_numbering=self.kinds,
        )

    def load(self, key: tuple[str, int], batches: Iterable[PostingRows]) -> None:
        """Replace the copy with the rows of ``batches`` (every live point at ``key``)."""
        self.snapshot = self._fresh(key, batches)

    def worth_reloading(self) -> bool:
        """Whether the appended postings or the dead positions have outgrown the copy
        (``RELOAD_FRACTION``, ``RELOAD_MINIMUM``)."""
        snap = self.snapshot
        appended = snap.delta_postings > max(RELOAD_MINIMUM,
                                             resident.RELOAD_FRACTION * snap.base.positions.size)
        dead = snap.dead > max(RELOAD_MINIMUM, resident.RELOAD_FRACTION * snap.alive.size)
        return appended or dead

    def apply(self, key: tuple[str, int], removed: Iterable[int],
              batches: Iterable[PostingRows]) -> None:
        """Bring the copy to ``key``: kill the positions of ``removed`` rowids, then append
        the rows of ``batches`` (rows written since; a rowid written again kills its old
        position)."""
        old = self.snapshot
        read = self._read(old.alive.size, batches)
        alive = self._positions.appended(old.alive, removed, read.rowids)
        appended = read.postings
        delta = dict(old.delta)
        for term, number in appended.vocabulary.items():
            start, end = appended.offsets[number], appended.offsets[number + 1]
            delta[term] = (*delta.get(term, ()), (appended.positions[start:end],
                                                  appended.tfs[start:end]))
        self.snapshot = PostingsSnapshot(
            key=key, rowids=np.concatenate([old.rowids, read.rowids]), ids=old.ids + read.ids,
            documents=np.concatenate([old.documents, read.documents]),
            kinds=np.concatenate([old.kinds, read.kinds]),
            lengths=np.concatenate([old.lengths, read.lengths]), alive=alive, base=old.base,
            delta=delta, delta_postings=old.delta_postings + appended.positions.size,
            live=int(np.count_nonzero(alive)),
            document_numbering=self.documents, kind_numbering=self.kinds,
        )


class PostingsTables(resident.CopyTables[PostingsCache]):
    """Reads the copy's rows from the SQLite index ``name`` and keeps this process's
    ``PostingsCache`` of them (tables: ``kb_shared.stores.vectors_sqlite`` and
    ``kb_shared.stores.vectors_codes.CodeTables``). Methods take the caller's connection
    inside its read transaction; SQLite errors propagate."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.fts = f"{name}_fts"

    def live_points(self, conn: Any) -> int:
        """The index's live points, from FTS5's averages record (one row read)."""
        row = conn.execute(
            f"SELECT block FROM {self.fts}_data WHERE id = ?", (_AVERAGES_ROWID,)).fetchone()
        return read_averages(row[0] if row else None)[0]

    def refreshed(self, conn: Any, key: tuple[str, int],
                  most: int) -> PostingsSnapshot | None:
        """The copy brought to ``key`` (the ``(epoch, generation)`` ``conn``'s transaction
        reads), or ``None`` when the FTS5 path must answer: more than ``most`` live points
        (the copy is then let go), the copy is already past ``key`` (this transaction
        started before another thread's refresh; its snapshot is not kept), or another
        thread has held the copy's lock for ``vectors_resident.LOCK_WAIT`` (a load takes
        seconds at 100k points; searches meanwhile are answered by FTS5 instead of waiting).
        """
        with self._lock:
            cache = self.cache
            if cache is None:
                if self.live_points(conn) > most:
                    return None
                cache = self.cache = PostingsCache()

        def update(held: tuple[str, int] | None) -> PostingsSnapshot | None:
            if held is None or held[0] != key[0] or cache.worth_reloading():
                if self.live_points(conn) > most:
                    self.forget(cache)
                    return None
                cache.load(key, self._rows(conn, None))
            else:
                cache.apply(key, resident.removed_since(conn, self.removed, held[1]),
                            self._rows(conn, held[1]))
                if cache.snapshot.live > most:
                    self.forget(cache)
                    return None
            return cache.snapshot

        return resident.refresh(cache, key, update)

    def _rows(self, conn: Any, after: int | None) -> Iterator[PostingRows]:
        """Every live point by rowid (``after`` is ``None``), or those written after
        generation ``after`` (through the generation index, in its order), with their FTS5
        terms, ``LOAD_BATCH`` points a batch."""
        if after is None:
            sql = (f"SELECT p.rowid, p.id, p.document, p.kind, f.terms FROM {self.points} AS p "
                   f"JOIN {self.fts} AS f ON f.rowid = p.rowid ORDER BY p.rowid")
            params: tuple[Any, ...] = ()
        else:
            sql = (f"SELECT c.rowid, p.id, p.document, p.kind, f.terms FROM {self.codes} AS c "
                   f"JOIN {self.points} AS p ON p.rowid = c.rowid "
                   f"JOIN {self.fts} AS f ON f.rowid = c.rowid "
                   "WHERE c.generation > ?")  # no ORDER BY: it scans every code
            params = (after,)
        return resident.fetch_batches(conn.execute(sql, params), LOAD_BATCH, PostingRows, 5)
