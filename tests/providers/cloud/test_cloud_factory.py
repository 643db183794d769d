"""The factory picks the cloud providers from keys alone (no request is made to build them),
and what every cloud provider shares (``cloud_common.CloudProvider``)."""

from __future__ import annotations

import cohere
import httpx
import httpx2
import pytest

from kb_shared.errors import EmbeddingError, ProviderError, RerankError
from kb_shared.providers import factory
from kb_shared.providers.base import HeadingPathContextualiser
from kb_shared.providers.cloud_common import close_client
from kb_shared.providers.cloud_context import ClaudeContextualiser, GeminiContextualiser
from kb_shared.providers.cloud_embeddings import GeminiEmbedder
from kb_shared.providers.cloud_figures import GeminiFigureLocator
from kb_shared.providers.cloud_graph import ClaudeGraphExtractor
from kb_shared.providers.cloud_markdown import ClaudeMarkdownConverter
from kb_shared.providers.cloud_rerank import CohereReranker
from kb_shared.settings import ProviderChoice, Settings

from .conftest import Recorder, anthropic_client, claude_message


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
    assert reranker.reorders


def test_names_and_usage_meters_of_the_cloud_providers() -> None:
    settings = _settings(anthropic_api_key="a-key", gemini_api_key="g-key", cohere_api_key="c-key")
    built = [
        factory.markdown_converter(settings), factory.embedder(settings),
        factory.contextualiser(settings), factory.figure_locator(settings),
        factory.reranker(settings),
    ]
    assert [(p.name, p.usage()["provider"], p.usage()["requests"]) for p in built] == [
        ("claude:claude-sonnet-5-5", "claude-markdown", 0),
        ("gemini-embeddings:gemini-embedding-001", "gemini-embeddings", 0),
        ("claude-context:claude-haiku-4-5", "claude-context", 0),
        ("gemini-figures:gemini-2.5-flash", "gemini-figures", 0),
        ("cohere:rerank-v3.5", "cohere-rerank", 0),
    ]
    assert ClaudeGraphExtractor.from_settings(settings).name == "claude-graph:claude-sonnet-5-5"


def test_a_missing_key_fails_with_the_role_s_error_naming_what_needs_it() -> None:
    with pytest.raises(EmbeddingError, match=(
        r"^GEMINI_API_KEY \(or GOOGLE_API_KEY\) is not set; Gemini embeddings needs it$"
    )):
        GeminiEmbedder.from_settings(_settings())
    with pytest.raises(RerankError, match=r"^COHERE_API_KEY is not set; Cohere rerank needs it$"):
        CohereReranker.from_settings(_settings())
    with pytest.raises(ProviderError, match=r"^ANTHROPIC_API_KEY is not set; the Claude converter"):
        ClaudeMarkdownConverter.from_settings(_settings())


def test_close_closes_the_client_the_provider_built_but_not_one_it_was_given() -> None:
    built = ClaudeMarkdownConverter.from_settings(_settings(anthropic_api_key="a-key"))
    assert not built.client.is_closed()
    built.close()
    assert built.client.is_closed()
    built.close()  # a second close is harmless
    given = anthropic_client(Recorder(lambda r, i: httpx2.Response(200, json=claude_message("ok"))))
    ClaudeMarkdownConverter(given).close()
    assert not given.is_closed()


def test_a_cohere_client_is_closed_through_its_context_exit() -> None:
    http = httpx.Client()
    close_client("Cohere", cohere.ClientV2(api_key="test-cohere-key", httpx_client=http))
    assert http.is_closed


def test_only_a_gemini_key_contextualises_with_gemini() -> None:
    assert isinstance(factory.contextualiser(_settings(gemini_api_key="g-key")), GeminiContextualiser)
    assert isinstance(factory.contextualiser(_settings()), HeadingPathContextualiser)


def test_forcing_cloud_without_a_key_names_the_keys() -> None:
    settings = Settings(anthropic_api_key=None, gemini_api_key=None,
                        contextualise_provider=ProviderChoice.CLOUD)
    with pytest.raises(ProviderError, match=r"ANTHROPIC_API_KEY \(or GEMINI_API_KEY\) is not set"):
        factory.contextualiser(settings)


def test_the_model_setting_selects_the_multimodal_embedder_and_its_images_reach_the_request() -> None:
    """Two stages, offline: the factory builds the model the setting names, and that same
    embedder sends each figure's PNG beside its text (its client swapped for a recorder)."""
    import base64  # noqa: PLC0415
    import json  # noqa: PLC0415

    from kb_shared.providers.base import FigureInput  # noqa: PLC0415

    from .conftest import genai_client  # noqa: PLC0415

    settings = _settings(gemini_api_key="g-key").model_copy(
        update={"gemini_embedding_model": "gemini-embedding-2"}
    )
    embedder = factory.embedder(settings)
    assert isinstance(embedder, GeminiEmbedder)
    assert (embedder.model, embedder.multimodal) == ("gemini-embedding-2@1536", True)

    def vectors(request: httpx2.Request, _: int) -> httpx2.Response:
        entries = json.loads(request.content)["requests"]
        return httpx2.Response(200, json={"embeddings": [{"values": [1.0] + [0.0] * 1535}] * len(entries)})

    recorder = Recorder(vectors)
    embedder.close()
    embedder.client = genai_client(recorder)
    embedder.embed_figures([FigureInput(text="Figure 1 flow", png=b"\x89PNG-bytes")])
    (body,) = recorder.bodies()
    parts = body["requests"][0]["content"]["parts"]
    assert str(recorder.requests[0].url).endswith("/models/gemini-embedding-2:batchEmbedContents")
    assert parts[0] == {"text": "title: none | text: Figure 1 flow"}
    assert parts[1]["inline_data"]["mime_type"] == "image/png"
    assert base64.urlsafe_b64decode(parts[1]["inline_data"]["data"]) == b"\x89PNG-bytes"
