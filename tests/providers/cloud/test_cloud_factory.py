"""The factory picks the cloud providers from keys alone (no request is made to build them)."""

from __future__ import annotations

import pytest

from kb_shared.errors import ProviderError
from kb_shared.providers import factory
from kb_shared.providers.cloud_context import ClaudeContextualiser, GeminiContextualiser
from kb_shared.providers.cloud_embeddings import GeminiEmbedder
from kb_shared.providers.cloud_figures import GeminiFigureLocator
from kb_shared.providers.cloud_graph import ClaudeGraphExtractor
from kb_shared.providers.cloud_markdown import ClaudeMarkdownConverter
from kb_shared.providers.cloud_rerank import CohereReranker
from kb_shared.settings import ProviderChoice, Settings


def _settings(**keys: str | None) -> Settings:
    values = {"anthropic_api_key": None, "gemini_api_key": None, "cohere_api_key": None}
    values.update(keys)
    return Settings(**values)


def test_every_key_selects_its_cloud_provider() -> None:
    settings = _settings(anthropic_api_key="a-key", gemini_api_key="g-key", cohere_api_key="c-key")
    assert isinstance(factory.markdown_converter(settings), ClaudeMarkdownConverter)
    embedder = factory.embedder(settings)
    assert isinstance(embedder, GeminiEmbedder) and embedder.model == "gemini-embedding-001@1536"
    assert isinstance(factory.contextualiser(settings), ClaudeContextualiser)
    assert isinstance(factory.graph_extractor(settings), ClaudeGraphExtractor)
    assert isinstance(factory.figure_locator(settings), GeminiFigureLocator)
    reranker = factory.reranker(settings)
    assert isinstance(reranker, CohereReranker)
    usage = reranker.usage()
    assert usage["key"].startswith("COHERE_API_KEY sha256:") and "c-key" not in usage["key"]


def test_only_a_gemini_key_contextualises_with_gemini() -> None:
    assert isinstance(factory.contextualiser(_settings(gemini_api_key="g-key")), GeminiContextualiser)
    assert factory.contextualiser(_settings()) is None


def test_forcing_cloud_without_a_key_names_the_keys() -> None:
    settings = Settings(anthropic_api_key=None, gemini_api_key=None,
                        contextualise_provider=ProviderChoice.CLOUD)
    with pytest.raises(ProviderError, match=r"ANTHROPIC_API_KEY \(or GEMINI_API_KEY\) is not set"):
        factory.contextualiser(settings)
