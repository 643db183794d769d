"""Provider interfaces: every model call in kb goes through one of these.

Each role has a local implementation that needs no network and no key, and a cloud one that
is chosen when its key is set (``kb_shared.providers.factory``). Downstream code sees only
these types, so switching provider changes nothing after it.

Every role's ABC is a :class:`Provider`, so callers use ``name``, ``usage()``, ``warm()`` and
``close()`` on any provider without checking what it is. The two optional roles have null
objects instead of ``None``: :class:`HeadingPathContextualiser` (no context beyond the heading
path) and :class:`FusionOrderReranker` (fusion order stands).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from kb_shared.ingest.chunking import Chunk
from kb_shared.graph_model import Entity, Relationship


# --------------------------------------------------------------------------------------
# What every provider offers
# --------------------------------------------------------------------------------------
class Provider(ABC):
    """What a caller may use on any provider, whatever its role; the base of every role's ABC.

    The defaults fit a local provider: it counts nothing, has nothing to load ahead of time
    and holds nothing to release. Cloud providers override ``usage()`` and ``close()``
    (``cloud_common.CloudProvider``); local embedders override ``warm()``.

    Attributes:
        name: short id of the backend (and its model or version), e.g.
            ``"claude:claude-sonnet-5-5"`` or ``"pymupdf4llm-layout-r3"``; it keys the usage
            metadata and names the provider in messages.
    """

    name: str

    def usage(self) -> dict[str, object]:
        """Requests, tokens and cost so far, flat and JSON-serialisable (Dagster asset
        metadata). Default ``{}``: the provider counts nothing."""
        return {}

    def warm(self) -> None:
        """Load now what the first call would load (model weights), so that call is not
        slow. Default: nothing to load. Raises what the first call would raise."""

    def close(self) -> None:
        """Release the provider's clients or sessions; safe to call twice. Default: nothing
        to release."""


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


class LayoutStore(ABC):
    """Where a converter keeps the layout analysis of one PDF between conversions, so that a
    change to the rules applied after it (a converter revision) does not run it again.

    Bound to one file (the caller checks which); ``engine`` names what produced the pages
    (library versions and options), and ``load`` returns only pages ``engine`` produced.
    ``pages`` are JSON values (lists, dicts, strings, numbers).
    """

    @abstractmethod
    def load(self, engine: str, pages: int) -> list[dict] | None:
        """The ``pages`` pages saved by ``engine`` for this file, or ``None`` (none, another
        engine, another page count, unreadable)."""

    @abstractmethod
    def save(self, engine: str, pages: list[dict]) -> None:
        """Keep ``pages`` as ``engine``'s analysis of this file, replacing what was kept."""


class MarkdownConverter(Provider):
    """PDF bytes → ``ConvertedDocument``.

    Raises ``kb_shared.errors.ConversionError`` for a PDF that cannot be converted (scanned,
    encrypted, corrupt, empty, not a PDF, unmappable font) with a message a person can act on.
    """

    @abstractmethod
    def convert(self, pdf: bytes, filename: str) -> ConvertedDocument:
        """Convert one PDF."""

    def convert_reusing(
        self, pdf: bytes, filename: str, layouts: LayoutStore
    ) -> ConvertedDocument:
        """``convert``, reusing the layout analysis ``layouts`` holds for this PDF where the
        converter runs one (and saving it there when it had to run it); the output is the
        same either way. Default: ``convert`` (no layout step worth keeping)."""
        return self.convert(pdf, filename)


# --------------------------------------------------------------------------------------
# Embeddings
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class FigureInput:
    """A figure to embed: its text (caption + nearby text) and its 768 px PNG."""

    text: str
    png: bytes | None = None


class Embedder(Provider):
    """Dense embeddings. Vectors are float32, L2-normalised, shape ``(n, dimension)``.

    ``model`` is recorded in the vector index; querying an index built by another model is
    refused (``EmbeddingMismatchError``). ``name`` (from :class:`Provider`) names the backend
    for usage metadata and messages. Failures raise ``kb_shared.errors.EmbeddingError``.
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
class Contextualiser(Provider):
    """One short context string per chunk, prefixed to the chunk before embedding.

    Attributes:
        adds_context: ``False`` when every context is empty (:class:`HeadingPathContextualiser`),
            for callers that report whether chunks were contextualised.
    """

    adds_context: bool = True

    @abstractmethod
    def contexts(self, title: str, markdown: str, chunks: Sequence[Chunk]) -> list[str]:
        """Return ``len(chunks)`` context strings (may be empty strings)."""


class HeadingPathContextualiser(Contextualiser):
    """The offline contextualiser: the context is the heading path alone.

    ``kb_shared.ingest.contextual.embedding_text`` already puts the title and heading path in front of
    every chunk, so this adds nothing: every context is ``""`` and no model is called.
    """

    name = "heading-path"
    adds_context = False

    def contexts(self, title: str, markdown: str, chunks: Sequence[Chunk]) -> list[str]:
        """``[""] * len(chunks)``."""
        return [""] * len(chunks)


# --------------------------------------------------------------------------------------
# Graph extraction
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Extraction:
    """Entities and relationships from one document's chunks (vectors not yet filled)."""

    entities: tuple[Entity, ...]
    relationships: tuple[Relationship, ...]
    stats: dict[str, float] = field(default_factory=dict)


class GraphExtractor(Provider):
    """Chunks → entities + typed relationships; every relationship keeps its ``chunk_id``.

    ``extract`` checks the arguments and times the call; a backend implements ``_extract``.
    """

    def extract(self, document: str, title: str, chunks: Sequence[Chunk]) -> Extraction:
        """Extract entities and relationships from one document's chunks.

        Args:
            document: the ``doc_id``; every relationship's ``source_doc``.
            title: the document's title (the ``Document`` entity of the document itself).
            chunks: the document's chunks in order (``kb_shared.ingest.chunking.chunk_markdown``).

        Returns:
            ``Extraction`` with the entities that are endpoints of a relationship (first-seen
            order) and the relationships (chunk order); ``stats`` holds the backend's counts
            and ``seconds``, the wall-clock time of the call rounded to milliseconds.

        Raises:
            ValueError: ``document`` is empty, or a chunk belongs to another document.
            ProviderError: the backend failed (model missing, call failed); nothing is
                returned for the document then.
        """
        started = time.perf_counter()
        if not document or not document.strip():
            raise ValueError("document (the doc_id) must not be empty")
        for chunk in chunks:
            if chunk.document != document:
                raise ValueError(
                    f"chunk {chunk.id!r} belongs to {chunk.document!r}, not {document!r}"
                )
        result = self._extract(document, title, chunks)
        stats = {**result.stats, "seconds": round(time.perf_counter() - started, 3)}
        return Extraction(result.entities, result.relationships, stats)

    @abstractmethod
    def _extract(self, document: str, title: str, chunks: Sequence[Chunk]) -> Extraction:
        """The backend's extraction, with arguments ``extract`` has checked (``stats``
        without ``seconds``)."""


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


class FigureLocator(Provider):
    """Find informative figures on pages of a PDF."""

    @abstractmethod
    def locate(self, pdf: bytes, regions: Sequence[FigureRegion]) -> list[FigureBox]:
        """Boxes for the figures the converter reported (local: from layout regions and
        drawing clusters; cloud: a vision model per page)."""


# --------------------------------------------------------------------------------------
# Rerank
# --------------------------------------------------------------------------------------
class Reranker(Provider):
    """Re-order candidate texts for a query. Failures raise ``kb_shared.errors.RerankError``.

    Attributes:
        reorders: ``False`` for :class:`FusionOrderReranker`, which keeps the candidates'
            order; a caller that has better scores of its own (fused ranks) keeps them then.
    """

    reorders: bool = True

    @abstractmethod
    def rerank(self, query: str, texts: Sequence[str], top_n: int) -> list[tuple[int, float]]:
        """Return ``[(index into texts, relevance), …]`` best first, at most ``top_n``."""


class FusionOrderReranker(Reranker):
    """The offline reranker: the fused order stands (no cross-encoder ships its weights on
    PyPI, so there is no local model to re-order with)."""

    name = "fusion-order"
    reorders = False

    def rerank(self, query: str, texts: Sequence[str], top_n: int) -> list[tuple[int, float]]:
        """The first ``top_n`` texts in their given order.

        Returns:
            ``[(0, 1.0), (1, 0.5), (2, 0.333…), …]``: relevance ``1 / (position + 1)``, a rank
            and not a model's judgement, so it only says that the order is kept.

        Raises:
            ValueError: ``top_n`` < 1.
        """
        if top_n < 1:
            raise ValueError(f"top_n must be >= 1, got {top_n}")
        return [(i, 1.0 / (i + 1)) for i in range(min(top_n, len(texts)))]
