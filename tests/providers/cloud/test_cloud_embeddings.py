"""GeminiEmbedder through the real google-genai SDK over httpx2.MockTransport."""

from __future__ import annotations

import base64
import json

import httpx2
import numpy as np
import pytest

from kb_shared.errors import EmbeddingError
from kb_shared.providers.base import FigureInput
from kb_shared.providers.cloud_embeddings import GeminiEmbedder

from .conftest import Recorder, gemini_error, genai_client, no_wait

URL = "https://generativelanguage.googleapis.com/v1/models/{model}:batchEmbedContents"


def _vectors(request: httpx2.Request, i: int) -> httpx2.Response:
    """One vector per entry: entry k of the request gets (k+1, 2(k+1), 0, 0, …) of the
    requested dimension, so normalisation and order can be checked."""
    body = json.loads(request.content)
    out = []
    for k, entry in enumerate(body["requests"]):
        values = [0.0] * entry["outputDimensionality"]
        values[0], values[1] = float(k + 1), float(2 * (k + 1))
        out.append({"values": values})
    return httpx2.Response(200, json={"embeddings": out})


def _embedder(recorder: Recorder, **kwargs) -> GeminiEmbedder:
    return GeminiEmbedder(genai_client(recorder), retry=kwargs.pop("retry", no_wait()), **kwargs)


def test_documents_use_retrieval_document_title_text_format_and_dimension() -> None:
    recorder = Recorder(_vectors)
    embedder = _embedder(recorder)

    vectors = embedder.embed_documents(
        ["The Retailer must notify the Distributor.", "Deadline: 2 business days."],
        titles=["Sample Retail Market Procedure", ""],
    )

    assert embedder.model == "gemini-embedding-001@1536"
    assert embedder.dimension == 1536
    assert len(recorder.requests) == 1
    request = recorder.requests[0]
    assert str(request.url) == URL.format(model="gemini-embedding-001")
    assert request.headers["x-goog-api-key"] == "test-gemini-key"
    assert recorder.bodies()[0] == {
        "requests": [
            {
                "content": {"parts": [{"text": "title: Sample Retail Market Procedure | text: The Retailer must notify the Distributor."}]},
                "taskType": "RETRIEVAL_DOCUMENT",
                "outputDimensionality": 1536,
                "model": "models/gemini-embedding-001",
            },
            {
                "content": {"parts": [{"text": "title: none | text: Deadline: 2 business days."}]},
                "taskType": "RETRIEVAL_DOCUMENT",
                "outputDimensionality": 1536,
                "model": "models/gemini-embedding-001",
            },
        ]
    }
    assert vectors.shape == (2, 1536) and vectors.dtype == np.float32
    # (1, 2, 0…) and (2, 4, 0…) both normalise to (1/√5, 2/√5, 0…)
    np.testing.assert_allclose(vectors[:, :2], [[1 / 5**0.5, 2 / 5**0.5]] * 2, rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), [1.0, 1.0], rtol=1e-6)


def test_query_uses_retrieval_query_and_the_search_result_prefix() -> None:
    recorder = Recorder(_vectors)
    vector = _embedder(recorder, dimension=768).embed_query("life support notification deadline")
    entry = recorder.bodies()[0]["requests"]
    assert entry == [
        {
            "content": {"parts": [{"text": "task: search result | query: life support notification deadline"}]},
            "taskType": "RETRIEVAL_QUERY",
            "outputDimensionality": 768,
            "model": "models/gemini-embedding-001",
        }
    ]
    assert vector.shape == (768,)
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0)


def test_entity_names_are_embedded_on_the_query_side() -> None:
    recorder = Recorder(_vectors)
    _embedder(recorder).embed_names(["Retailer", "AEMO"])
    entries = recorder.bodies()[0]["requests"]
    assert [e["content"]["parts"][0]["text"] for e in entries] == [
        "task: search result | query: Retailer", "task: search result | query: AEMO",
    ]
    assert {e["taskType"] for e in entries} == {"RETRIEVAL_QUERY"}


def test_texts_are_batched_at_100_per_request_in_order() -> None:
    recorder = Recorder(_vectors)
    texts = [f"chunk {i}" for i in range(205)]
    vectors = _embedder(recorder, concurrency=3).embed_documents(texts)

    bodies = recorder.bodies()
    assert sorted(len(b["requests"]) for b in bodies) == [5, 100, 100]
    sent = sorted(
        (int(e["content"]["parts"][0]["text"].rsplit(" ", 1)[1]) for b in bodies for e in b["requests"])
    )
    assert sent == list(range(205))
    assert vectors.shape == (205, 1536)


def test_figures_send_text_and_png_in_one_entry_at_most_four_per_request() -> None:
    recorder = Recorder(_vectors)
    embedder = _embedder(recorder, model="gemini-embedding-2", concurrency=1)
    figures = [FigureInput(text=f"Figure {n} flow", png=f"PNG-{n}".encode()) for n in range(1, 7)]
    figures[4] = FigureInput(text="Figure 5 without pixels", png=None)

    vectors = embedder.embed_figures(figures)

    assert embedder.model == "gemini-embedding-2@1536"
    assert [str(r.url) for r in recorder.requests] == [URL.format(model="gemini-embedding-2")] * 2
    batches = [b["requests"] for b in recorder.bodies()]
    assert [len(b) for b in batches] == [4, 2]
    entries = [e for b in batches for e in b]
    for n, entry in enumerate(entries, start=1):
        parts = entry["content"]["parts"]
        assert entry["taskType"] == "RETRIEVAL_DOCUMENT"
        assert entry["outputDimensionality"] == 1536
        if n == 5:
            assert parts == [{"text": "title: none | text: Figure 5 without pixels"}]
            continue
        # text and image of the same figure travel together, in figure order
        assert parts[0] == {"text": f"title: none | text: Figure {n} flow"}
        assert parts[1]["inline_data"]["mime_type"] == "image/png"
        assert base64.urlsafe_b64decode(parts[1]["inline_data"]["data"]) == f"PNG-{n}".encode()
    assert vectors.shape == (6, 1536)


def test_a_text_only_model_embeds_figures_from_their_text(caplog: pytest.LogCaptureFixture) -> None:
    recorder = Recorder(_vectors)
    embedder = _embedder(recorder)  # gemini-embedding-001 takes no images
    embedder.embed_figures([FigureInput(text=f"Figure {n}", png=b"PNG") for n in range(6)])
    batches = [b["requests"] for b in recorder.bodies()]
    assert [len(b) for b in batches] == [6]
    assert all(len(e["content"]["parts"]) == 1 for e in batches[0])
    assert "gemini-embedding-001 is a text-only embedding model" in caplog.text


def test_429_then_success_is_retried() -> None:
    def respond(request: httpx2.Request, i: int) -> httpx2.Response:
        if i == 0:
            return gemini_error(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted (e.g. check quota).")
        return _vectors(request, i)

    recorder = Recorder(respond)
    embedder = _embedder(recorder)
    vector = embedder.embed_query("q")
    assert len(recorder.requests) == 2 and vector.shape == (1536,)
    assert embedder.usage()["retries"] == 1


def test_500_exhausted_raises_after_the_configured_retries() -> None:
    recorder = Recorder(lambda r, i: gemini_error(500, "INTERNAL", "An internal error has occurred."))
    with pytest.raises(EmbeddingError) as caught:
        _embedder(recorder, retry=no_wait(max_retries=1)).embed_query("q")
    assert len(recorder.requests) == 2
    assert str(caught.value).startswith(
        "Gemini embedding a query (batch 1 of 1): still failing after 2 attempts (1 retries); "
        "last error HTTP 500: An internal error has occurred."
    )


def test_missing_model_and_bad_key_are_clear_errors() -> None:
    missing = Recorder(lambda r, i: gemini_error(
        404, "NOT_FOUND",
        "models/gemini-embedding-009 is not found for API version v1, or is not supported for embedContent.",
    ))
    with pytest.raises(EmbeddingError, match=r"^Gemini has no model 'gemini-embedding-009' \(HTTP 404\)"):
        _embedder(missing, model="gemini-embedding-009").embed_query("q")
    bad_key = Recorder(lambda r, i: gemini_error(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."))
    with pytest.raises(EmbeddingError) as caught:
        _embedder(bad_key).embed_query("q")
    assert str(caught.value) == (
        "Gemini rejected the API key in GEMINI_API_KEY (HTTP 400) while embedding a query "
        "(batch 1 of 1): API key not valid. Please pass a valid API key. Check that the key "
        "is current and copied whole."
    )
    assert len(bad_key.requests) == 1


def test_wrong_vector_size_or_count_is_an_error() -> None:
    short = Recorder(lambda r, i: httpx2.Response(200, json={"embeddings": [{"values": [0.1] * 3072}]}))
    with pytest.raises(EmbeddingError, match="asked for 1536-dimensional vectors, got 3072"):
        _embedder(short).embed_query("q")
    missing = Recorder(lambda r, i: httpx2.Response(200, json={"embeddings": []}))
    with pytest.raises(EmbeddingError, match="sent 1 entries but got 0 vectors"):
        _embedder(missing).embed_query("q")


def test_titles_must_match_texts() -> None:
    with pytest.raises(ValueError, match="1 titles for 2 texts"):
        _embedder(Recorder(_vectors)).embed_documents(["a", "b"], titles=["t"])
