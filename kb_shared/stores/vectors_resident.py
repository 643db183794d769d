"""The bookkeeping the embedded index's process-local copies share: the codes and float
copies (``kb_shared.stores.vectors_codes``) and the postings copy
(``kb_shared.stores.vectors_postings``).

Each copy is keyed by the SQLite file's ``(epoch, generation)``: every committed write moves
the generation and logs the rowids it removed in ``{name}_removed``; a dropped and re-created
index gets a new epoch. A copy at an older generation of the same epoch applies only the
delta (the rowids removed since, then the rows written since); another epoch loads afresh.
The copies that append (postings, float) give each point a *position* in the order they
first saw it: a point written again gets a new position and its old one dies
(``Positions``). Searches on other threads read an immutable snapshot; ``refresh`` is the
one locking rule by which a search brings a copy to its transaction's key or falls back to
the file.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

#: Seconds a search waits for another thread's update of a process-local copy before the
#: file answers it instead (a delta of a few documents takes milliseconds, a load seconds).
LOCK_WAIT = 0.05

#: The appended rows or dead positions, as a share of a copy, past which the next refresh
#: loads the copy afresh instead of applying the delta (bounds the delta's per-search cost
#: and the dead positions' memory).
RELOAD_FRACTION = 0.25

Key = tuple[str, int]
#: The checked filters of a search as the copies take them: ``kb_shared.stores.vectors.Filters``
#: (``("document", names)`` and/or ``("kind", names)``, each only when given); empty: none.
CheckedFilters = Sequence[tuple[str, Sequence[str]]]
B = TypeVar("B")
C = TypeVar("C")


class Numbering:
    """Numbers for names (documents or kinds), shared by a cache's snapshots: a name keeps
    its number, and the tables only grow, so a snapshot's number arrays stay valid."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.numbers: dict[str, int] = {}

    def numbered(self, values: Iterable[str]) -> np.ndarray:
        """The numbers of ``values`` (int32, numbering names not seen before)."""
        out = []
        for value in values:
            number = self.numbers.get(value)
            if number is None:
                number = self.numbers[value] = len(self.names)
                self.names.append(value)
            out.append(number)
        return np.asarray(out, dtype=np.int32)

    def mask(self, numbers: np.ndarray, names: Sequence[str]) -> np.ndarray:
        """Which of ``numbers`` (int32) name one of ``names`` (bool, same shape; names never
        seen match nothing)."""
        wanted = [self.numbers[name] for name in names if name in self.numbers]
        return np.isin(numbers, np.asarray(wanted, dtype=np.int32))


def filter_mask(filters: CheckedFilters, documents: np.ndarray, kinds: np.ndarray,
                document_numbering: Numbering, kind_numbering: Numbering) -> np.ndarray:
    """Which points pass every one of ``filters``, given each point's ``documents`` and
    ``kinds`` (int32 numbers of ``document_numbering`` / ``kind_numbering``, same shape):
    bool, one per point; a name never numbered matches nothing (``Numbering.mask``).

    Raises:
        ValueError: a filter on a field other than ``document`` or ``kind``.
    """
    held = {"document": (documents, document_numbering), "kind": (kinds, kind_numbering)}
    scope = np.ones(documents.size, dtype=bool)
    for name, values in filters:
        if name not in held:
            raise ValueError(f"the resident copies filter by document or kind, not {name!r}")
        numbers, numbering = held[name]
        scope &= numbering.mask(numbers, values)
    return scope


@dataclass(frozen=True, eq=False)
class PositionsSnapshot:
    """One immutable state of an appending copy (its cache builds them; nothing changes one).

    Per *position*: ``rowids`` (int64), ``ids`` (point ids), ``documents`` / ``kinds``
    (int32 numbers of the cache's ``document_numbering`` / ``kind_numbering``), ``alive``
    (bool); ``live`` counts the alive ones; ``key`` is the ``(epoch, generation)`` held.
    """

    key: Key | None
    rowids: np.ndarray
    ids: list[str]
    documents: np.ndarray
    kinds: np.ndarray
    alive: np.ndarray
    live: int
    document_numbering: Numbering = field(repr=False)
    kind_numbering: Numbering = field(repr=False)

    @property
    def dead(self) -> int:
        """Positions whose point was removed or written again."""
        return int(self.alive.size - self.live)

    def in_scope(self, positions: np.ndarray | None, filters: CheckedFilters) -> np.ndarray:
        """Which of ``positions`` (int, or ``None``: every position held) hold a point that
        passes ``filters`` (``filter_mask``): bool, one per position, alive or not."""
        held_documents = self.documents if positions is None else self.documents[positions]
        held_kinds = self.kinds if positions is None else self.kinds[positions]
        return filter_mask(filters, held_documents, held_kinds, self.document_numbering,
                           self.kind_numbering)


class Positions:
    """rowid -> the position of its live point in an appending copy (-1: none), as one
    int64 array indexed by rowid (8 bytes per rowid up to the largest seen).

    Args:
        rowids: the rowids at positions 0, 1, … of a freshly loaded copy (distinct).
    """

    def __init__(self, rowids: np.ndarray) -> None:
        self._of = np.full(int(rowids.max(initial=0)) + 1, -1, dtype=np.int64)
        self._of[rowids] = np.arange(rowids.size)

    def appended(self, alive: np.ndarray, removed: Iterable[int],
                 rowids: np.ndarray) -> np.ndarray:
        """The alive flags after a delta: ``alive`` (bool, one per position held) followed by
        ``rowids.size`` live positions for the rows written since (int64, distinct), with
        the positions of ``removed`` rowids and of rewritten ones killed; the rows written
        now take the new positions. ``alive`` itself is not changed."""
        first = alive.size
        alive = np.concatenate([alive, np.ones(rowids.size, dtype=bool)])
        gone = np.fromiter(removed, dtype=np.int64)
        top = int(max(rowids.max(initial=0), gone.max(initial=0)))
        if top >= self._of.size:
            grown = np.full(max(top + 1, 2 * self._of.size), -1, dtype=np.int64)
            grown[: self._of.size] = self._of
            self._of = grown
        for dropped in (gone, rowids):
            if dropped.size:
                held = self._of[dropped]
                alive[held[held >= 0]] = False
                self._of[dropped] = -1
        self._of[rowids] = np.arange(first, first + rowids.size)
        return alive


class Snapshot(Protocol):
    """An immutable state of a copy: the ``(epoch, generation)`` it holds (``None``
    before the first load)."""

    @property
    def key(self) -> Key | None: ...


S = TypeVar("S", bound=Snapshot)


class Copy(Protocol[S]):
    """What ``refresh`` needs of a copy: its update ``lock`` and its current ``snapshot``
    (replaced whole under the lock)."""

    lock: threading.Lock

    @property
    def snapshot(self) -> S: ...


def refresh(copy: Copy[S], key: Key, update: Callable[[Key | None], S | None]) -> S | None:
    """``copy``'s snapshot at ``key`` (the ``(epoch, generation)`` the caller's read
    transaction sees), or ``None`` when the file must answer instead.

    A snapshot already at ``key`` is returned without locking. Otherwise ``copy.lock`` is
    taken, waiting at most ``LOCK_WAIT`` (``None`` when another thread holds it longer,
    loading); under it a copy already past ``key`` in the same epoch gives ``None`` (the
    transaction started before another thread's refresh), and any other key calls
    ``update(held)`` (``held``: the key the copy holds), whose answer is returned.
    Exceptions from ``update`` propagate, with the lock released.
    """
    snapshot = copy.snapshot  # immutable, replaced whole: safe to read unlocked
    if snapshot.key == key:
        return snapshot
    if not copy.lock.acquire(timeout=LOCK_WAIT):
        return None  # another thread is loading the copy
    try:
        snapshot = copy.snapshot
        held = snapshot.key
        if held == key:
            return snapshot
        if held is not None and held[0] == key[0] and held[1] > key[1]:
            return None
        return update(held)
    finally:
        copy.lock.release()


class CopyTables(Generic[C]):
    """The tables of the SQLite index ``name`` a copy is read from (``codes``, ``removed``,
    ``points``, ``meta``: ``kb_shared.stores.vectors_sqlite``) and this process's copy of
    them, ``cache`` (``None`` until made, or once let go)."""

    def __init__(self, name: str) -> None:
        self.codes = f"{name}_codes"
        self.removed = f"{name}_removed"
        self.points = f"{name}_points"
        self.meta = f"{name}_meta"
        self.cache: C | None = None
        self._lock = threading.Lock()

    def forget(self, cache: C | None = None) -> None:
        """Let the copy go (``cache``: only if it is still that one); the next refresh
        makes a new one."""
        with self._lock:
            if cache is None or self.cache is cache:
                self.cache = None


def removed_since(conn: Any, removed: str, generation: int) -> list[int]:
    """The rowids the table ``removed`` (``{name}_removed``) logs after ``generation``,
    read in ``conn``'s transaction."""
    return [r[0] for r in conn.execute(
        f"SELECT rowid FROM {removed} WHERE generation > ?", (generation,))]


def fetch_batches(cursor: Any, size: int, columns: Callable[..., B], width: int) -> Iterator[B]:
    """The rows of ``cursor`` ``size`` at a time, each batch as ``columns(*lists)`` (one list
    per column of the ``width`` selected); the cursor is closed at the end, or when the
    caller stops early."""
    try:
        while rows := cursor.fetchmany(size):
            yield columns(*([row[i] for row in rows] for i in range(width)))
    finally:
        cursor.close()
