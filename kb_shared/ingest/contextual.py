"""What is embedded for a chunk: its text behind a contextual prefix of the document title and
heading path (DESIGN.md, contextualisation: "heading path (Title › Section › Subsection)").
The embeddings asset embeds ``embedding_text``; readers of the stored index recover the same
text from a point's payload with ``stored_embedding_text``.
"""

from __future__ import annotations

from kb_shared.ingest.chunking import PATH_SEPARATOR, Chunk
from kb_shared.search.citations import ISSUE_OF_COMPANY, PointPayload


def prefix_title(title: str) -> str:
    """The title a chunk's contextual prefix carries: ``title``, or none for an SEC filing or
    a press release titled from its lead (``ISSUE_OF_COMPANY``). A filing's title, whole or
    cut to its registrant, ranked worse than no title on the set it was not written for
    (benchmarks/results/titles-2026-12-07.md), and so did a release's
    (benchmarks/results/titles-2026-12-07-releases.md)."""
    title = title.strip()
    return "" if ISSUE_OF_COMPANY.search(title) else title


def embedding_text(chunk: Chunk, title: str = "") -> str:
    """The text to embed for a chunk: a contextual prefix, a blank line, then the chunk text.

    The prefix is the document ``title`` (when given; ``prefix_title`` of it) followed by the
    heading path, joined with ``" › "``, e.g. ``"SO_OP_3705 Dispatch › 3 Dispatch › 3.1
    Bids"`` (DESIGN.md, contextualisation: "heading path (Title › Section › Subsection)"). A
    title equal to the outermost heading is not repeated. With neither title nor headings the
    result is the chunk text alone.
    """
    return _prefixed(chunk.text, chunk.heading_path, title)


def stored_embedding_text(text: str, payload: PointPayload) -> str:
    """What the embeddings asset embedded, and indexed as sparse text, for a stored chunk
    point: ``embedding_text`` of a chunk with this ``text``, the payload's heading path
    (``section`` split on ``" › "``) and the payload's title.

    The contextualiser's context is not stored, so this is the embedded text only where the
    context is empty (offline: ``HeadingPathContextualiser``, always).
    """
    path = tuple(payload.section.split(PATH_SEPARATOR)) if payload.section else ()
    return _prefixed(text, path, payload.title)


def _prefixed(text: str, heading_path: tuple[str, ...], title: str) -> str:
    parts = list(heading_path)
    title = prefix_title(title)
    if title and (not parts or parts[0] != title):
        parts.insert(0, title)
    prefix = PATH_SEPARATOR.join(parts)
    return f"{prefix}\n\n{text}" if prefix else text
