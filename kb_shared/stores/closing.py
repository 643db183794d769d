"""``ClosingStore``: the ``close`` / ``with`` protocol the store roles share (vector index,
graph store, catalog), so a store is released the same way whichever role it plays."""

from __future__ import annotations

from typing import Self


class ClosingStore:
    """A store that may hold connections: ``close()`` releases them and ``with store:``
    closes it on leaving the block. A subclass that holds something overrides ``close``."""

    def close(self) -> None:
        """Release connections; safe to call twice. Default: nothing to release."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
