"""Choose each provider from settings alone.

Rule (DESIGN.md "Providers"): a cloud provider is used only when its key is set (``auto``)
or when forced (``KB_<ROLE>_PROVIDER=cloud``, which then requires the key); otherwise the
local implementation, which needs no network and no key. Backends are imported inside the
functions so an optional SDK loads only when it is chosen. Every function returns a provider,
never ``None``: the optional roles (contextualiser, reranker) have null objects offline.
"""

from __future__ import annotations

from kb_shared.errors import ProviderError
from kb_shared.providers.base import (
    Contextualiser,
    Embedder,
    FigureLocator,
    FusionOrderReranker,
    GraphExtractor,
    HeadingPathContextualiser,
    MarkdownConverter,
    Reranker,
)
from kb_shared.settings import ProviderChoice, Settings


def _use_cloud(choice: ProviderChoice, key_present: bool, role: str, key_names: str) -> bool:
    if choice is ProviderChoice.LOCAL:
        return False
    if choice is ProviderChoice.CLOUD:
        if not key_present:
            raise ProviderError(
                f"KB_{role.upper()}_PROVIDER=cloud but {key_names} is not set; set the key "
                f"or use KB_{role.upper()}_PROVIDER=local"
            )
        return True
    return key_present


def markdown_converter(settings: Settings) -> MarkdownConverter:
    """PDF → Markdown: Claude when ``ANTHROPIC_API_KEY`` is set, else pymupdf4llm layout."""
    if _use_cloud(
        settings.markdown_provider, settings.anthropic_api_key is not None, "markdown",
        "ANTHROPIC_API_KEY",
    ):
        from kb_shared.providers.cloud_markdown import ClaudeMarkdownConverter

        return ClaudeMarkdownConverter.from_settings(settings)
    from kb_shared.providers.local_markdown import PymupdfMarkdownConverter

    return PymupdfMarkdownConverter()


def embedder(settings: Settings) -> Embedder:
    """Dense embeddings: Gemini when ``GEMINI_API_KEY``/``GOOGLE_API_KEY`` is set, else the
    local model named by ``KB_LOCAL_EMBEDDING_MODEL`` with ``KB_LOCAL_EMBEDDING_THREADS``."""
    if _use_cloud(
        settings.embedding_provider, settings.gemini_api_key is not None, "embedding",
        "GEMINI_API_KEY (or GOOGLE_API_KEY)",
    ):
        from kb_shared.providers.cloud_embeddings import GeminiEmbedder

        return GeminiEmbedder.from_settings(settings)
    from kb_shared.providers.local_embeddings import load_local_embedder

    return load_local_embedder(
        settings.local_embedding_model, threads=settings.local_embedding_threads
    )


def contextualiser(settings: Settings) -> Contextualiser:
    """Per-chunk context: Claude (explicit prompt caching) when ``ANTHROPIC_API_KEY`` is set,
    else Gemini (implicit prefix caching) when only ``GEMINI_API_KEY`` is set.

    Offline, a ``HeadingPathContextualiser`` (``adds_context`` false, every context ``""``):
    the local context is the heading path, which ``kb_shared.ingest.contextual.embedding_text``
    already puts in front of every chunk.
    """
    if _use_cloud(
        settings.contextualise_provider,
        settings.anthropic_api_key is not None or settings.gemini_api_key is not None,
        "contextualise", "ANTHROPIC_API_KEY (or GEMINI_API_KEY)",
    ):
        from kb_shared.providers.cloud_context import ClaudeContextualiser, GeminiContextualiser

        if settings.anthropic_api_key is not None:
            return ClaudeContextualiser.from_settings(settings)
        return GeminiContextualiser.from_settings(settings)
    return HeadingPathContextualiser()


def graph_extractor(settings: Settings) -> GraphExtractor:
    """Entities + relationships: Claude with JSON-schema output when its key is set, else
    spaCy + rules."""
    if _use_cloud(
        settings.graph_provider, settings.anthropic_api_key is not None, "graph",
        "ANTHROPIC_API_KEY",
    ):
        from kb_shared.providers.cloud_graph import ClaudeGraphExtractor

        return ClaudeGraphExtractor.from_settings(settings)
    from kb_shared.providers.local_graph import SpacyGraphExtractor

    return SpacyGraphExtractor()


def figure_locator(settings: Settings) -> FigureLocator:
    """Figure boxes: Gemini vision when its key is set, else layout regions + drawings."""
    if _use_cloud(
        settings.figure_provider, settings.gemini_api_key is not None, "figure",
        "GEMINI_API_KEY (or GOOGLE_API_KEY)",
    ):
        from kb_shared.providers.cloud_figures import GeminiFigureLocator

        return GeminiFigureLocator.from_settings(settings)
    from kb_shared.providers.local_figures import LayoutFigureLocator

    return LayoutFigureLocator()


def reranker(settings: Settings) -> Reranker:
    """Cohere rerank when ``COHERE_API_KEY`` is set; offline a ``FusionOrderReranker``
    (``reorders`` false: fusion order stands, since no cross-encoder ships its weights on
    PyPI)."""
    if _use_cloud(
        settings.rerank_provider, settings.cohere_api_key is not None, "rerank",
        "COHERE_API_KEY",
    ):
        from kb_shared.providers.cloud_rerank import CohereReranker

        return CohereReranker.from_settings(settings)
    return FusionOrderReranker()
