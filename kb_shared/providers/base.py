"""Provider interfaces: every model call in kb goes through one of these.

Each role has a local implementation that needs no network and no key, and a cloud one that
is chosen when its key is set (``kb_shared.providers.factory``). Downstream code sees only
these types, so switching provider changes nothing after it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from kb_shared.chunking import Chunk
from kb_shared.graph_model import Entity, Relationship


# --------------------------------------------------------------------------------------
# PDF -> Markdown
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FigureRegion:
    """Where the converter saw a picture or a vector drawing.

    Attributes:
        page: 1-based page number.
        bbox: ``(x0, y0, x1, y1)`` in PDF points, page coordinates (origin top-left, as
            pymupdf reports), or ``None`` when the converter only knows the page (cloud).
        caption: caption or marker text (``[Figure: …]`` content), may be empty.
    """

    page: int
    bbox: tuple[float, float, float, float] | None
    caption: str = ""


@dataclass(frozen=True, slots=True)
class ConvertedDocument:
    """Output contract of every PDF → Markdown converter.

    Attributes:
        markdown: Markdown with ``<!-- page N -->`` (1-based) before each page's content,
            ``[Figure: …]`` markers where a picture is, tables as pipe tables, running
            headers/footers removed.
        pages: page count of the PDF.
        title: document title (from metadata or the first heading), may be empty.
        version: version / doc-ref string when the document states one, else ``""``.
        converter: name + version of the converter, e.g. ``"pymupdf4llm-2.0 layout"``.
        figures: picture regions, in page order.
        seconds: wall-clock conversion time.
    """

    markdown: str
    pages: int
    title: str
    version: str
    converter: str
    figures: tuple[FigureRegion, ...] = ()
    seconds: float = 0.0


class MarkdownConverter(ABC):
    """PDF bytes → ``ConvertedDocument``.

    Raises ``kb_shared.errors.ConversionError`` for a PDF that cannot be converted (scanned,
    encrypted, corrupt, empty, not a PDF, unmappable font) with a message a person can act on.
    """

    name: str

    @abstractmethod
    def convert(self, pdf: bytes, filename: str) -> ConvertedDocument:
        """Convert one PDF."""


# --------------------------------------------------------------------------------------
# Embeddings
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FigureInput:
    """A figure to embed: its text (caption + nearby text) and its 768 px PNG."""

    text: str
    png: bytes | None = None


class Embedder(ABC):
    """Dense embeddings. Vectors are float32, L2-normalised, shape ``(n, dimension)``.

    ``model`` is recorded in the vector index; querying an index built by another model is
    refused (``EmbeddingMismatchError``).
    """

    model: str
    dimension: int

    @abstractmethod
    def embed_documents(
        self, texts: Sequence[str], titles: Sequence[str] | None = None
    ) -> np.ndarray:
        """Embed document-side texts (chunks). ``titles`` (same length) when the model uses them."""

    @abstractmethod
    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query with the model's query-side convention; shape ``(dimension,)``."""

    def embed_figures(self, figures: Sequence[FigureInput]) -> np.ndarray:
        """Embed figures into the same space as chunks. Default: text only."""
        return self.embed_documents([f.text for f in figures])

    def embed_names(self, names: Sequence[str]) -> np.ndarray:
        """Embed entity names for graph seeding (matched later against query vectors).

        Default: one batched ``embed_documents`` call, right for symmetric models; a model
        with asymmetric query/passage prefixes overrides this to use its query side.
        """
        if not names:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self.embed_documents(list(names))


# --------------------------------------------------------------------------------------
# Contextualisation
# --------------------------------------------------------------------------------------
class Contextualiser(ABC):
    """One short context string per chunk, prefixed to the chunk before embedding."""

    name: str

    @abstractmethod
    def contexts(self, title: str, markdown: str, chunks: Sequence[Chunk]) -> list[str]:
        """Return ``len(chunks)`` context strings (may be empty strings)."""


# --------------------------------------------------------------------------------------
# Graph extraction
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Extraction:
    """Entities and relationships from one document's chunks (vectors not yet filled)."""

    entities: tuple[Entity, ...]
    relationships: tuple[Relationship, ...]
    stats: dict[str, float] = field(default_factory=dict)


class GraphExtractor(ABC):
    """Chunks → entities + typed relationships; every relationship keeps its ``chunk_id``."""

    name: str

    @abstractmethod
    def extract(self, document: str, title: str, chunks: Sequence[Chunk]) -> Extraction:
        """Extract from one document. Relationships' ``source_doc`` is ``document``."""


# --------------------------------------------------------------------------------------
# Figure boxes
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FigureBox:
    """A figure found on a page.

    Attributes:
        page: 1-based page number.
        bbox: ``(x0, y0, x1, y1)`` in PDF points (origin top-left).
        caption: description / caption text.
        decorative: a logo, signature, stamp or similar that should not be kept.
    """

    page: int
    bbox: tuple[float, float, float, float]
    caption: str = ""
    decorative: bool = False


class FigureLocator(ABC):
    """Find informative figures on pages of a PDF."""

    name: str

    @abstractmethod
    def locate(self, pdf: bytes, regions: Sequence[FigureRegion]) -> list[FigureBox]:
        """Boxes for the figures the converter reported (local: from layout regions and
        drawing clusters; cloud: a vision model per page)."""


# --------------------------------------------------------------------------------------
# Rerank
# --------------------------------------------------------------------------------------
class Reranker(ABC):
    """Re-order candidate texts for a query."""

    name: str

    @abstractmethod
    def rerank(self, query: str, texts: Sequence[str], top_n: int) -> list[tuple[int, float]]:
        """Return ``[(index into texts, relevance), …]`` best first, at most ``top_n``."""
