"""Qdrant's keyword score over the SQLite index's FTS5 table, so both backends rank alike.

``kb migrate`` copies the SQLite index into Qdrant; for search_docs to answer the same before
and after, SQLite's ``sparse_search`` must rank by the score Qdrant computes for the same
points (benchmarks/results/migrate-2026-12-01-scorer.md). Qdrant (``Modifier.IDF`` over
``kb_shared.search.sparse.sparse_vector``) scores a point ``d`` for a query ``q`` as

    score(q, d) = float32( sum over the terms t of q, by term_index ascending,
                           of (w(t, q) * idf(t)) * w(t, d) )
    idf(t) = ln((N - df(t) + 0.5) / (df(t) + 0.5) + 1)

with ``w(t, x) = kb_shared.search.sparse.bm25_term_weight(tf of t in x, number of terms of x)``,
``N`` the points of the index and ``df(t)`` the points whose sparse text holds ``t``
(Qdrant's "IDF Modifier" documentation, v1.10; qdrant-client 1.20's local mode
``LocalCollection._compute_idf`` / ``_rescore_idf``, which sums in double precision and rounds
the sum to float32, as done here). Ties are ordered by point id on both backends.

``SparseScorer.search`` keeps FTS5 as the matcher: it takes FTS5's best ``depth`` matches by
``bm25()`` as candidates, re-scores them with the formula above (``df`` from an
``fts5vocab`` table, ``N`` and the average length from FTS5's own averages record) and checks
a bound: no match outside the candidates can score above the ``limit``-th candidate
(``outside_bound``). When the bound fails the depth is multiplied by ``DEPTH_GROWTH`` up to
``MAX_DEPTH``; a candidate list shorter than the depth holds every match, so it is exact.
Past ``MAX_DEPTH`` the answer is the best of ``MAX_DEPTH`` candidates (counted in
``SparseScorer.capped``). Each point's term counts, the ``df`` look-ups and the longest
point are cached per snapshot of the index (``ScorerCache``). Known difference: Qdrant
merges two terms whose ``term_index`` collide (31-bit hash; ~1e-5 chance for a pair in a
100k-term vocabulary), FTS5 does not.
"""

from __future__ import annotations

import json
import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kb_shared.search.sparse import (
    AVERAGE_DOCUMENT_TOKENS,
    BM25_B,
    BM25_K1,
    bm25_term_weight,
    term_index,
    tokenize,
)

#: Candidates taken from FTS5's ``bm25()`` order per wanted hit, the fewest ever taken, and
#: the most (benchmarks/results/migrate-2026-12-01-scorer.md: how deep the bound needs).
DEPTH_FACTOR = 4
MIN_DEPTH = 256
MAX_DEPTH = 4096
DEPTH_GROWTH = 4

#: Points whose term counts ``ScorerCache`` keeps per index (memory bound in its docstring).
CACHE_POINTS = 8192

#: FTS5's floor for a non-positive IDF (``fts5Bm25GetData`` in SQLite's ``fts5_aux.c``).
FTS5_MIN_IDF = 1e-6

#: Query terms per ``df`` look-up (below SQLite's oldest bound-parameter limit, 999).
_TERMS_PER_QUERY = 500

#: FTS5's record of row count and token total (``FTS5_AVERAGES_ROWID`` in ``fts5_index.c``).
_AVERAGES_ROWID = 1


@dataclass(frozen=True, slots=True)
class QueryTerm:
    """One distinct term of a query with what both scores need.

    Attributes:
        term: the ``kb_shared.search.sparse.tokenize`` term.
        index: its ``term_index`` (Qdrant's sum runs in this order).
        value: ``bm25_term_weight(tf in the query, query terms) * idf`` — the query vector's
            value after Qdrant's IDF rescoring.
        fts_idf: FTS5's IDF of the term, ``max(ln((N - df + 0.5) / (df + 0.5)), 1e-6)``.
        df: points holding the term.
    """

    term: str
    index: int
    value: float
    fts_idf: float
    df: int


def match_expression(terms: Sequence[QueryTerm]) -> str:
    """The FTS5 ``MATCH`` of ``terms``: each term as an FTS5 string (``"`` doubled), joined
    with ``OR`` (``kb_shared.search.sparse.fts_query`` of the terms some point holds)."""
    return " OR ".join('"' + t.term.replace('"', '""') + '"' for t in terms)


def qdrant_idf(df: int, n: int) -> float:
    """Qdrant's IDF: ``ln((n - df + 0.5) / (df + 0.5) + 1)`` (module docstring), always > 0."""
    return math.log((n - df + 0.5) / (df + 0.5) + 1.0)


def fts5_idf(df: int, n: int) -> float:
    """FTS5 ``bm25()``'s IDF: ``ln((n - df + 0.5) / (df + 0.5))``, at least ``FTS5_MIN_IDF``."""
    idf = math.log((n - df + 0.5) / (df + 0.5))
    return idf if idf > 0.0 else FTS5_MIN_IDF


def query_terms(text: str, frequencies: dict[str, int], n: int) -> list[QueryTerm]:
    """The distinct terms of ``text`` held by at least one point, by ``term_index`` ascending.

    Args:
        frequencies: ``df`` of each term (absent or 0: no point holds it).
        n: points in the index.
    """
    terms = tokenize(text)
    out: list[QueryTerm] = []
    for term, tf in Counter(terms).items():
        df = frequencies.get(term, 0)
        if df > 0:
            value = bm25_term_weight(tf, len(terms)) * qdrant_idf(df, n)
            out.append(QueryTerm(term, term_index(term), value, fts5_idf(df, n), df))
    out.sort(key=lambda q: q.index)
    return out


def point_score(terms: Sequence[QueryTerm], stored: str) -> float:
    """Qdrant's score of the point whose FTS5 column is ``stored`` (``fts_document`` terms,
    space-separated), rounded to float32 as Qdrant returns it; 0.0 when no term is held.
    (Counts only the query's terms: cheaper than ``term_counts`` for a point seen once.)"""
    padded = f" {stored} "
    tokens: list[str] | None = None
    total = 0.0
    for query in terms:
        if f" {query.term} " in padded:
            if tokens is None:
                tokens = stored.split(" ")
            total += query.value * bm25_term_weight(tokens.count(query.term), len(tokens))
    return float(np.float32(total))


def term_counts(stored: str) -> tuple[dict[str, int], int]:
    """``(tf of each term, number of terms)`` of an FTS5 column ``stored`` (space-separated
    ``fts_document`` terms)."""
    tokens = stored.split(" ")
    return Counter(tokens), len(tokens)


def counted_score(terms: Sequence[QueryTerm], counts: dict[str, int], length: int) -> float:
    """``point_score`` from a point's ``term_counts``: the same sum, in ``terms``' order,
    rounded to float32."""
    total = 0.0
    for query in terms:
        tf = counts.get(query.term)
        if tf:
            total += query.value * bm25_term_weight(tf, length)
    return float(np.float32(total))


def length_ratio(longest: int, average_length: float) -> float:
    """The most a term's Qdrant weight can exceed its FTS5 weight in a point of at most
    ``longest`` terms: ``max(1, D_R / D_256)`` at ``tf = 1``, ``dl = longest``, where
    ``D_a = tf + k1 * (1 - b + b * dl / a)`` is the BM25 denominator (the ratio grows with
    ``dl`` and shrinks with ``tf``). ``inf`` for an empty index."""
    if average_length <= 0:
        return math.inf

    def denominator(average: float) -> float:
        return 1.0 + BM25_K1 * (1.0 - BM25_B + BM25_B * longest / average)

    return max(1.0, denominator(average_length) / denominator(AVERAGE_DOCUMENT_TOKENS))


def outside_bound(terms: Sequence[QueryTerm], fts_floor: float, rho: float) -> float:
    """The highest Qdrant score a point can have when its FTS5 ``bm25()`` score (positive) is
    at most ``fts_floor`` and its Qdrant term weights are at most ``rho`` times its FTS5 ones
    (``length_ratio``).

    A term's Qdrant weight ``w`` is below ``k1 + 1`` and ``sum(fts_idf * w) <= rho *
    fts_floor``; the bound maximises ``sum(value * w)`` under that budget (a fractional
    knapsack: best ``value / fts_idf`` first).
    """
    budget = rho * fts_floor * (1.0 + 1e-9)
    cap = BM25_K1 + 1.0
    bound = 0.0
    for query in sorted(terms, key=lambda q: q.value / q.fts_idf, reverse=True):
        cost = query.fts_idf * cap
        if cost <= budget:
            bound += query.value * cap
            budget -= cost
        else:
            bound += query.value * budget / query.fts_idf
            break
    return bound


def read_varints(block: bytes, count: int) -> list[int]:
    """The first ``count`` SQLite varints of ``block`` (big-endian 7-bit groups with the high
    bit set on all but the last; a 9th byte gives 8 bits), the integer format of FTS5's
    records (``sqlite3Fts5GetVarint``).

    Raises:
        ValueError: ``block`` holds fewer than ``count`` varints.
    """
    values: list[int] = []
    position = 0
    while len(values) < count:
        value = 0
        for step in range(9):
            if position >= len(block):
                raise ValueError(f"FTS5 record too short for {count} varints: {block!r}")
            byte = block[position]
            position += 1
            if step == 8:
                value = (value << 8) | byte
                break
            value = (value << 7) | (byte & 0x7F)
            if not byte & 0x80:
                break
        values.append(value)
    return values


def read_averages(block: bytes | None) -> tuple[int, int]:
    """``(rows, tokens)`` from FTS5's averages record: the row count, then one token total
    per column (``fts5_index.c``); ``(0, 0)`` for an empty table.

    Raises:
        ValueError: a record too short to hold both.
    """
    if not block:
        return 0, 0
    rows, tokens = read_varints(block, 2)
    return rows, tokens


@dataclass(frozen=True, slots=True)
class ScoredRow:
    """A hit of ``SparseScorer.search``: the point's rowid and id, and its Qdrant score."""

    rowid: int
    id: str
    score: float


class ScorerCache:
    """What ``SparseScorer`` re-reads per search, kept for one snapshot of the index.

    ``points`` maps a rowid to ``(point id, FTS5 column)`` after its first read and to
    ``(point id, *term_counts of the column)`` once read again, at most ``capacity`` points,
    least recently stored dropped first (counted: ~7 KB a point measured on the regulatory
    build, ~100 terms a point, so ~60 MB at the default); ``frequencies`` maps a
    term to its ``df`` (at most ``capacity * 16`` terms, then emptied); ``longest`` is the
    longest point's terms. ``key`` names the snapshot: the file's schema version (a dropped
    and re-created index restarts its generation and rowids), the write generation (bumped
    by every write) and FTS5's row and token totals (for files without a generation); a
    search that sees another key starts a new cache, so a search still reading an older
    snapshot only ever writes into that one's.
    Numbers: benchmarks/results/migrate-2026-12-01-scorer.md ("Making it cheap").
    """

    def __init__(self, key: tuple[Any, ...] | None, capacity: int = CACHE_POINTS) -> None:
        self.key, self.capacity = key, capacity
        self.points: OrderedDict[int, tuple[Any, ...]] = OrderedDict()
        self.frequencies: dict[str, int] = {}
        self.longest: int | None = None
        self._lock = threading.Lock()

    def keep(self, found: dict[int, tuple[Any, ...]]) -> None:
        """Store ``found`` (rowid -> entry), dropping the oldest entries past ``capacity``
        (under a lock: the MCP server's threads share one index)."""
        with self._lock:
            self.points.update(found)
            for rowid in found:
                self.points.move_to_end(rowid)
            while len(self.points) > self.capacity:
                self.points.popitem(last=False)


class SparseScorer:
    """Qdrant's sparse score for one ``SqliteVectorIndex``'s tables (module docstring).

    Args:
        fts: the FTS5 table (``{name}_fts``); ``points``: the points table; ``meta``: the
            meta table holding the write ``generation``.
        depth_factor, min_depth, max_depth: candidate depth tuning (module constants).

    ``capped`` counts searches that hit ``max_depth`` with the bound still failing (their
    answer may differ from Qdrant's); ``deepened`` those that re-scored more than one batch.
    """

    def __init__(
        self,
        fts: str,
        points: str,
        meta: str,
        *,
        depth_factor: int = DEPTH_FACTOR,
        min_depth: int = MIN_DEPTH,
        max_depth: int = MAX_DEPTH,
    ) -> None:
        self.fts, self.points, self.meta = fts, points, meta
        self.vocab = f"{fts}_vocab"
        self.depth_factor, self.min_depth, self.max_depth = depth_factor, min_depth, max_depth
        self.capped = 0
        self.deepened = 0
        self.cache_points = CACHE_POINTS
        self.cache = ScorerCache(None, 0)

    def prepare(self, conn: Any) -> None:
        """Create the ``fts5vocab`` table the scorer reads ``df`` from in ``conn``'s ``temp``
        schema (nothing is written to the index file, so readers need no upgraded file);
        call outside a transaction, once per connection or more."""
        conn.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.{self.vocab} "
            f"USING fts5vocab(main, {self.fts}, row)"
        )

    def _statistics(
        self, conn: Any, text: str
    ) -> tuple[int, float, int, dict[str, int], ScorerCache]:
        """``(N, average length, longest point's terms, df of each distinct term of text,
        this snapshot's cache)``."""
        row = conn.execute(
            f"SELECT block FROM {self.fts}_data WHERE id = ?", (_AVERAGES_ROWID,)
        ).fetchone()
        rows, tokens = read_averages(row[0] if row else None)
        generation = conn.execute(
            f"SELECT value FROM {self.meta} WHERE key = 'generation'"
        ).fetchone()
        schema = conn.execute("PRAGMA main.schema_version").fetchone()
        cache, key = self.cache, (schema, generation, rows, tokens)
        if cache.key != key:
            cache = self.cache = ScorerCache(key, self.cache_points)
        elif len(cache.frequencies) > 16 * cache.capacity:
            cache.frequencies = {}
        frequencies = cache.frequencies
        wanted = [t for t in dict.fromkeys(tokenize(text)) if t not in frequencies]
        if wanted:
            # Read into a dict of this search's own, then publish every term at once: other
            # threads share ``frequencies`` and must never see a term before its df.
            read = dict.fromkeys(wanted, 0)
            for start in range(0, len(wanted), _TERMS_PER_QUERY):
                chunk = wanted[start:start + _TERMS_PER_QUERY]
                read.update(conn.execute(
                    f"SELECT term, doc FROM temp.{self.vocab} WHERE term IN "
                    f"({', '.join('?' * len(chunk))})",
                    chunk,
                ).fetchall())
            frequencies.update(read)
        if cache.longest is None:  # largest varint: longer ones hold larger values
            found = conn.execute(
                f"SELECT sz FROM {self.fts}_docsize ORDER BY length(sz) DESC, sz DESC LIMIT 1"
            ).fetchone()
            cache.longest = read_varints(found[0], 1)[0] if found else 0
        return rows, (tokens / rows if rows else 0.0), cache.longest, frequencies, cache

    def _ranked(
        self, conn: Any, match: str, depth: int, skip: int, clauses: Sequence[str],
        params: Sequence[Any],
    ) -> Any:
        """A cursor over FTS5's matches by ``bm25()``, best first (ties by rowid), after the
        best ``skip``, at most ``depth``: rows ``(rowid, fts score > 0)``. (One query for
        ``max_depth`` up front costs more than a second query when needed: the sorter's
        work grows with the limit; "Making it cheap" in the report.)"""
        if clauses:
            sql = (
                f"SELECT f.rowid, -bm25({self.fts}) AS score FROM {self.fts} AS f "
                f"JOIN {self.points} AS p ON p.rowid = f.rowid "
                f"WHERE {self.fts} MATCH ?{''.join(' AND ' + c for c in clauses)} "
                "ORDER BY score DESC, f.rowid LIMIT ? OFFSET ?"
            )
        else:
            sql = (
                f"SELECT rowid, -bm25({self.fts}) AS score FROM {self.fts} "
                f"WHERE {self.fts} MATCH ? ORDER BY score DESC, rowid LIMIT ? OFFSET ?"
            )
        return conn.execute(sql, (match, *params, depth, skip))

    def _stored(self, conn: Any, rowids: Sequence[int]) -> list[tuple[int, str, str]]:
        """``(rowid, FTS5 terms, point id)`` of ``rowids``."""
        return conn.execute(
            f"SELECT f.rowid, f.terms, p.id FROM json_each(?) AS wanted "
            f"JOIN {self.fts} AS f ON f.rowid = wanted.value "
            f"JOIN {self.points} AS p ON p.rowid = wanted.value",
            (json.dumps(list(rowids)),),
        ).fetchall()

    def _score(
        self, conn: Any, terms: Sequence[QueryTerm], batch: Sequence[tuple[int, float]],
        scored: list[ScoredRow], cache: ScorerCache,
    ) -> None:
        """Re-score ``batch`` (``(rowid, fts score)``) into ``scored``, kept best first;
        points' terms from ``cache``, the rest read and cached."""
        if not batch:
            return
        found, read, counted = {}, {}, {}
        for rowid, _ in batch:
            entry = cache.points.get(rowid)
            if entry is None:
                continue
            if isinstance(entry[1], str):  # seen once before: count its terms now
                entry = counted[rowid] = (entry[0], *term_counts(entry[1]))
            found[rowid] = entry
        missing = [rowid for rowid, _ in batch if rowid not in found]
        if missing:
            for rowid, stored, point_id in self._stored(conn, missing):
                read[rowid] = (point_id, stored)
        if read or counted:
            cache.keep({**counted, **read})
        scored.extend(
            ScoredRow(rowid, point_id, counted_score(terms, counts, length))
            for rowid, (point_id, counts, length) in found.items()
        )
        scored.extend(
            ScoredRow(rowid, point_id, point_score(terms, stored))
            for rowid, (point_id, stored) in read.items()
        )
        scored.sort(key=lambda r: (-r.score, r.id))

    @staticmethod
    def _cut(
        terms: Sequence[QueryTerm], ranked: Sequence[tuple[int, float]], start: int, end: int,
        rho: float, kth: float,
    ) -> int:
        """The first position in ``ranked[start:end]`` from which ``outside_bound`` stays
        below ``kth`` (FTS5 scores fall along ``ranked``, so the bound does too); ``end``
        when there is none."""
        threshold = kth * (1.0 - 1e-6)
        low, high = start, end
        while low < high:
            middle = (low + high) // 2
            if outside_bound(terms, ranked[middle][1], rho) < threshold:
                high = middle
            else:
                low = middle + 1
        return low

    def search(
        self,
        conn: Any,
        text: str,
        limit: int,
        clauses: Sequence[str] = (),
        params: Sequence[Any] = (),
    ) -> list[ScoredRow]:
        """The ``limit`` best points for ``text`` by Qdrant's score, ties by id.

        FTS5 ranks ``depth_factor * limit`` (at least ``min_depth``) matches by ``bm25()``.
        The first ``limit`` are re-scored from their stored terms; then the candidates down
        to where ``outside_bound`` falls below the ``limit``-th score, at most
        ``DEPTH_GROWTH`` times as many as so far per round. When the FTS5 list runs out
        before that, FTS5 is asked once more, for the rest up to ``max_depth`` (rows read
        as the rounds need them).

        Args:
            conn: a connection to the index file, ``prepare``d, inside a read transaction
                (statistics and candidates from one snapshot).
            clauses, params: SQL filters on ``p.`` (the points table) and their parameters.
        """
        n, average_length, longest, frequencies, cache = self._statistics(conn, text)
        terms = query_terms(text, frequencies, n)
        if not terms:
            return []
        match = match_expression(terms)
        rho = length_ratio(longest, average_length)
        first = max(self.depth_factor * limit, self.min_depth, limit)
        total = max(first, self.max_depth)
        ranked = self._ranked(conn, match, first, 0, clauses, params).fetchall()
        requested, deeper = first, None  # deeper: FTS5's next candidates, read as needed
        scored: list[ScoredRow] = []
        done, end = 0, limit  # score the first limit, then only what the bound cannot rule out
        try:
            while True:
                end = min(end, len(ranked))
                if len(scored) >= limit:
                    cut = self._cut(terms, ranked, done, end, rho, scored[limit - 1].score)
                    if cut < end:  # no point at or below ranked[cut] can enter the top
                        self._score(conn, terms, ranked[done:cut], scored, cache)
                        done = cut
                        break
                self._score(conn, terms, ranked[done:end], scored, cache)
                done = end
                if done == len(ranked) < requested:
                    break  # every match is scored: exact
                if done == len(ranked) and requested >= total:
                    self.capped += 1
                    break
                end = max(done * DEPTH_GROWTH, first)
                if end > len(ranked) and len(ranked) == requested < total:  # more to read
                    if deeper is None:  # FTS5 again, past what it gave (it ranks every match)
                        deeper = self._ranked(
                            conn, match, total - len(ranked), len(ranked), clauses, params)
                    requested = min(end, total)
                    ranked.extend(deeper.fetchmany(requested - len(ranked)))
        finally:
            if deeper is not None:
                deeper.close()
        if done > first:
            self.deepened += 1
        return scored[:limit]
