"""Offline, the factory returns a provider for every role, never ``None``: the optional roles
are null objects that callers can call like any other provider."""

from __future__ import annotations

import pytest

from kb_shared.ingest.chunking import Chunk
from kb_shared.identity import chunk_id
from kb_shared.providers import factory
from kb_shared.providers.base import (
    FusionOrderReranker,
    HeadingPathContextualiser,
    Provider,
)
from kb_shared.settings import Settings


def _offline() -> Settings:
    return Settings(
        anthropic_api_key=None, gemini_api_key=None, cohere_api_key=None,
        local_embedding_model="minilm-int8",
    )


def _chunk(index: int) -> Chunk:
    return Chunk(
        id=chunk_id("srmp", index), document="srmp", index=index, text=f"chunk {index}",
        heading_path=("1 Scope",), page_start=1, page_end=1, kind="text",
    )


def test_offline_the_optional_roles_are_null_objects() -> None:
    contextualiser = factory.contextualiser(_offline())
    reranker = factory.reranker(_offline())
    assert isinstance(contextualiser, HeadingPathContextualiser)
    assert isinstance(reranker, FusionOrderReranker)
    assert (contextualiser.name, contextualiser.adds_context) == ("heading-path", False)
    assert (reranker.name, reranker.reorders) == ("fusion-order", False)


def test_the_heading_path_contextualiser_adds_an_empty_context_per_chunk() -> None:
    contexts = HeadingPathContextualiser().contexts("Title", "# 1 Scope\n\nchunk", [_chunk(0), _chunk(1)])
    assert contexts == ["", ""]
    assert HeadingPathContextualiser().contexts("Title", "", []) == []


def test_the_fusion_order_reranker_keeps_the_order_and_cuts_at_top_n() -> None:
    reranker = FusionOrderReranker()
    assert reranker.rerank("q", ["a", "b", "c", "d"], top_n=3) == [(0, 1.0), (1, 0.5), (2, 1 / 3)]
    assert reranker.rerank("q", ["a", "b"], top_n=5) == [(0, 1.0), (1, 0.5)]
    assert reranker.rerank("q", [], top_n=5) == []
    with pytest.raises(ValueError, match="top_n must be >= 1, got 0"):
        reranker.rerank("q", ["a"], top_n=0)


def test_local_providers_offer_the_provider_defaults() -> None:
    settings = _offline()
    built = [
        factory.markdown_converter(settings), factory.embedder(settings),
        factory.contextualiser(settings), factory.figure_locator(settings),
        factory.reranker(settings),
    ]
    assert [p.name for p in built] == [
        "pymupdf4llm-layout-r8", "minilm-int8", "heading-path", "pymupdf-layout", "fusion-order",
    ]
    for provider in built:
        assert isinstance(provider, Provider)
        assert provider.usage() == {}
        provider.close()
    embedder = built[1]
    assert not embedder.loaded  # the factory builds; warm() loads
