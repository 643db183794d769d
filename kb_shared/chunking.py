"""Chunking: the single source of truth for chunk boundaries and ids.

(Being implemented — see the docstring of ``chunk_markdown`` for the contract.)
"""

from __future__ import annotations

from dataclasses import dataclass

KIND_TEXT = "text"
KIND_TABLE = "table"


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk of a document's Markdown.

    Attributes:
        id: ``identity.chunk_id(document, index)``.
        document: the ``doc_id``.
        index: 0-based position in the document.
        text: the chunk's Markdown (page markers removed).
        heading_path: headings above the chunk, outermost first, e.g. ``("3 Dispatch", "3.1 Bids")``.
        page_start / page_end: 1-based page span from ``<!-- page N -->`` markers; ``None`` when
            the Markdown has no markers.
        kind: ``"text"`` or ``"table"``.
    """

    id: str
    document: str
    index: int
    text: str
    heading_path: tuple[str, ...]
    page_start: int | None
    page_end: int | None
    kind: str


def chunk_markdown(markdown: str, document: str, budget_words: int = 300) -> list[Chunk]:
    """Split a document's Markdown into chunks (contract in the module docstring)."""
    raise NotImplementedError
