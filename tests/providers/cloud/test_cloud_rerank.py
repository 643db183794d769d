"""CohereReranker through the real cohere SDK (httpx), mocked with respx."""

from __future__ import annotations

import json

import cohere
import httpx
import pytest
import respx

from kb_shared.errors import RerankError
from kb_shared.providers.cloud_rerank import MAX_DOCUMENT_CHARS, CohereReranker, truncate

from .conftest import no_wait

URL = "https://api.cohere.com/v2/rerank"


def _ok(results: list[tuple[int, float]], units: float = 1.0) -> httpx.Response:
    return httpx.Response(200, json={
        "id": "07734bd2-2473-4f07-94e1-0d9f0e6843cf",
        "results": [{"index": i, "relevance_score": s} for i, s in results],
        "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": units}},
    })


def _reranker(**kwargs) -> CohereReranker:
    client = cohere.ClientV2(api_key="test-cohere-key", max_retries=0, httpx_client=httpx.Client())
    return CohereReranker(client, retry=kwargs.pop("retry", no_wait()), **kwargs)


@respx.mock
def test_request_shape_truncates_documents_and_maps_results() -> None:
    route = respx.post(URL).mock(return_value=_ok([(2, 0.91), (0, 0.42)]))
    long_doc = ("word " * 5000).strip()  # 24,999 characters
    reranker = _reranker()

    ranked = reranker.rerank("life support deadline", ["short one", "another", long_doc], top_n=2)

    assert ranked == [(2, 0.91), (0, 0.42)]
    request = route.calls.last.request
    assert request.headers["authorization"] == "Bearer test-cohere-key"
    body = json.loads(request.content)
    assert body["model"] == "rerank-v3.5"
    assert body["query"] == "life support deadline"
    assert body["top_n"] == 2
    assert body["max_tokens_per_doc"] == 4096
    assert body["documents"][:2] == ["short one", "another"]
    # cut to 16,384 characters (4 x 4,096 tokens), then back to the last space: 3,276 words
    assert MAX_DOCUMENT_CHARS == 16_384
    assert body["documents"][2] == long_doc[:16_379] == " ".join(["word"] * 3276)
    usage = reranker.usage()
    assert usage["search_units"] == 1.0 and usage["cost_usd"] == pytest.approx(0.002)


@respx.mock
def test_429_then_success() -> None:
    route = respx.post(URL).mock(side_effect=[
        httpx.Response(429, json={"message": "You are using a Trial key, which is limited to 10 API calls / minute."}),
        _ok([(1, 0.8)]),
    ])
    assert _reranker().rerank("q", ["a", "b"], top_n=1) == [(1, 0.8)]
    assert route.call_count == 2


@respx.mock
def test_500_exhausted_raises_after_the_configured_retries() -> None:
    route = respx.post(URL).mock(return_value=httpx.Response(500, json={"message": "internal server error"}))
    with pytest.raises(RerankError) as caught:
        _reranker(retry=no_wait(max_retries=2)).rerank("q", ["a"], top_n=1)
    assert route.call_count == 3
    assert str(caught.value).startswith(
        "Cohere reranking 1 documents: still failing after 3 attempts (2 retries); last error "
        "HTTP 500: internal server error."
    )


@respx.mock
def test_bad_key_and_malformed_answer() -> None:
    respx.post(URL).mock(return_value=httpx.Response(401, json={"message": "invalid api token"}))
    with pytest.raises(RerankError, match=r"^Cohere rejected the API key in COHERE_API_KEY \(HTTP 401\)"):
        _reranker().rerank("q", ["a"], top_n=1)
    respx.post(URL).mock(return_value=_ok([(7, 0.9)]))
    with pytest.raises(RerankError, match="returned index 7 for 1 documents"):
        _reranker().rerank("q", ["a"], top_n=1)


@respx.mock
def test_more_than_1000_documents_are_sent_in_requests_of_1000_and_merged() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        docs = json.loads(request.content)["documents"]
        # score = the number in the document / 10000, so the best overall is "doc 1499"
        return _ok([(i, int(d.split()[1]) / 10000) for i, d in enumerate(docs)][:3])

    route = respx.post(URL).mock(side_effect=answer)
    ranked = _reranker(concurrency=1).rerank("q", [f"doc {i}" for i in range(1500)], top_n=3)
    assert [len(json.loads(c.request.content)["documents"]) for c in route.calls] == [1000, 500]
    assert [json.loads(c.request.content)["top_n"] for c in route.calls] == [3, 3]
    assert ranked == [(1002, 0.1002), (1001, 0.1001), (1000, 0.1)]


def test_edge_cases_need_no_request() -> None:
    reranker = _reranker()
    assert reranker.rerank("q", [], top_n=5) == []
    with pytest.raises(ValueError, match="top_n must be >= 1, got 0"):
        reranker.rerank("q", ["a"], top_n=0)
    assert truncate("alpha beta gamma", 12) == "alpha beta"
    assert truncate("abcdefghijkl", 5) == "abcde"
