"""A process-local copy of the point rows that searches of the embedded index read.

A search reads the rows ``(id, document, kind, text, payload)`` of ~400 candidates (both sides
of the hybrid search and the identifier and definition look-ups), mostly the same few
thousand points again and again; reading them from SQLite was ~2 ms of every search
(benchmarks/results/serving-2026-12-02-latency-round6.md). ``RowCache`` keeps the rows it was
handed under the ``(epoch, generation)`` of the read transaction that read them. Every
committed write moves the generation (``SqliteVectorIndex._next_generation``) and a dropped
and re-created index gets a new epoch, so a row kept under a key is exactly the row any read
transaction at that key reads. A transaction at another key starts a new copy (the old one is
let go); one with no key (a version-2 file) reads SQLite every time.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from itertools import islice
from typing import Any

#: Rows the copy keeps at most (the oldest read are let go first): ~2 KB of text each, so at
#: most ~16 MB per index per process.
ROW_CACHE = 8192

#: A point's row as the points table holds it: ``(id, document, kind, text, payload JSON)``.
Row = tuple[Any, ...]


class RowCache:
    """Point rows by rowid for one ``(epoch, generation)`` key; safe to share between threads.

    Args:
        capacity: rows kept at most (``ROW_CACHE``); >= 1.

    Raises:
        ValueError: ``capacity`` < 1.
    """

    def __init__(self, capacity: int = ROW_CACHE) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = capacity
        self._key: tuple[str, int] | None = None
        self._rows: dict[int, Row] = {}
        self._lock = threading.Lock()

    def rows(
        self,
        key: tuple[str, int] | None,
        rowids: Sequence[int],
        read: Callable[[list[int]], list[Row]],
    ) -> list[Row]:
        """The rows of ``rowids`` in that order, inside the caller's read transaction at
        ``key``: kept rows from the copy, the others from ``read`` (the transaction's own
        read of the rows of the rowids it is given, in their order; every one exists).
        ``key`` ``None``: all from ``read``, nothing kept."""
        if key is None:
            return read(list(rowids))
        with self._lock:
            if key != self._key:
                self._key, self._rows = key, {}
            kept = self._rows
            have = {r: kept[r] for r in rowids if r in kept}
        missing = [r for r in dict.fromkeys(rowids) if r not in have]
        if missing:
            found = dict(zip(missing, read(missing), strict=True))
            have.update(found)
            with self._lock:
                if self._key == key:
                    overflow = len(kept) + len(found) - self.capacity
                    for rowid in list(islice(kept, max(overflow, 0))):
                        del kept[rowid]
                    kept.update(islice(found.items(), self.capacity))
        return [have[r] for r in rowids]
