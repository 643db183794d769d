"""``make bench-cloud`` (``benchmarks.retrieval --cloud``) offline: the real google-genai and
cohere SDKs answer from the HTTP edge (``conftest``: httpx2 MockTransport, respx) with
bodies of the documented shapes, computed from each request, so the benchmark's cloud
configurations run end to end and the requests they send can be checked."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import cohere
import httpx
import httpx2
import pytest
import respx

import benchmarks.retrieval as bench
from benchmarks.retrieval_cloud import (
    CLOUD_BOTH,
    CLOUD_CONFIGS,
    CLOUD_DENSE,
    CLOUD_RERANK_ONLY,
    CloudProviders,
    cloud_searches,
    missing_cloud_keys,
)
from kb_shared.search.citations import PointPayload
from kb_shared.providers.cloud_embeddings import GeminiEmbedder
from kb_shared.providers.cloud_rerank import CohereReranker
from kb_shared.settings import Settings
from kb_shared.stores.vectors import KIND_TEXT, Point
from kb_shared.stores.vectors_sqlite import SqliteVectorIndex
from tests.fakes import HashingEmbedder

from .conftest import Recorder, genai_client, no_wait

GEMINI_URL = "https://generativelanguage.googleapis.com/v1/models/gemini-embedding-001:batchEmbedContents"
COHERE_URL = "https://api.cohere.com/v2/rerank"
KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY", "KB_GEMINI_API_KEY", "COHERE_API_KEY",
                 "KB_COHERE_API_KEY")

TEXTS = {
    "rules-0": "The Retailer must notify the Distributor of a life support customer within "
               "2 business days of registration.",
    "rules-1": "Table 3 lists the loss factors of each connection point for 2020-21.",
    "rules-2": "A scheduled generator must follow a dispatch instruction within 5 minutes.",
    "rules-3": "The change register records every version of these rules since 2014.",
}


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _gemini_vectors(request: httpx2.Request, index: int) -> httpx2.Response:
    """``BatchEmbedContentsResponse``: per entry a bag-of-words vector of the requested
    dimension (texts sharing words point the same way), unnormalised as the API returns."""
    body = json.loads(request.content)
    out = []
    for entry in body["requests"]:
        values = [0.0] * entry["outputDimensionality"]
        for word in _words(entry["content"]["parts"][0]["text"].split(": ")[-1]):
            values[int(hashlib.sha256(word.encode()).hexdigest(), 16) % len(values)] += 3.0
        out.append({"values": values})
    return httpx2.Response(200, json={"embeddings": out})


def _cohere_order(request: httpx.Request) -> httpx.Response:
    """``V2RerankResponse``: documents by the share of the query's words they hold."""
    body = json.loads(request.content)
    query = _words(body["query"])
    scored = sorted(
        ((i, len(query & _words(doc)) / len(query)) for i, doc in enumerate(body["documents"])),
        key=lambda item: -item[1],
    )[: body["top_n"]]
    return httpx.Response(200, json={
        "id": "0f1e2d3c-4b5a-6978-8695-a4b3c2d1e0f9",
        "results": [{"index": i, "relevance_score": round(s, 4)} for i, s in scored],
        "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
    })


@pytest.fixture
def corpus(tmp_path: Path) -> tuple[SqliteVectorIndex, HashingEmbedder, list]:
    """Four text points in a local index (hashing vectors), as a built KB_HOME holds them."""
    local = HashingEmbedder(64)
    index = SqliteVectorIndex(tmp_path / "vectors.sqlite")
    index.open(local.model, local.dimension)
    index.upsert([
        Point(id=pid, document="rules.pdf", kind=KIND_TEXT, text=text,
              dense=local.embed_query(text),
              payload=PointPayload.build(doc_id="rules.pdf", name="rules.pdf",
                                         title="Retail Market Rules", version="2.1",
                                         page_start=n + 1, page_end=n + 1,
                                         heading_path=(f"{n + 1} Part",),
                                         chunk_index=n, pdf_key="pdfs/rules.pdf").to_payload())
        for n, (pid, text) in enumerate(TEXTS.items())
    ])
    yield index, local, index.fetch(list(TEXTS))
    index.close()


def _providers(recorder: Recorder) -> CloudProviders:
    return CloudProviders(
        GeminiEmbedder(genai_client(recorder), retry=no_wait()),
        CohereReranker(cohere.ClientV2(api_key="test-cohere-key", max_retries=0,
                                       httpx_client=httpx.Client()), retry=no_wait()),
    )


@respx.mock
def test_cloud_configurations_embed_with_gemini_and_let_cohere_order(
    corpus, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench, "WORK_DIR", tmp_path / "work")
    index, local, points = corpus
    rerank = respx.post(COHERE_URL).mock(side_effect=_cohere_order)
    recorder = Recorder(_gemini_vectors)
    providers = _providers(recorder)
    inputs = bench.embedding_inputs(points)

    added = cloud_searches("unit", index, local, points, inputs, providers)

    assert list(added.searches) == list(CLOUD_CONFIGS)
    documents = [entry for body in recorder.bodies() for entry in body["requests"]]
    assert [e["content"]["parts"][0]["text"] for e in documents] == [
        f"title: Retail Market Rules | text: {text}" for text, _, _ in inputs
    ]
    assert {(e["taskType"], e["model"], e["outputDimensionality"]) for e in documents} == {
        ("RETRIEVAL_DOCUMENT", "models/gemini-embedding-001", 1536)
    }
    assert all(str(r.url) == GEMINI_URL for r in recorder.requests)
    assert added.candidate.model == "gemini-embedding-001@1536"

    question = "How many business days does the Retailer have to notify a life support customer?"
    answer = added.searches[CLOUD_BOTH][1](question)
    query = recorder.bodies()[-1]["requests"]
    assert [(e["taskType"], e["content"]["parts"][0]["text"]) for e in query] == [
        ("RETRIEVAL_QUERY", f"task: search result | query: {question}")
    ]
    sent = json.loads(rerank.calls.last.request.content)
    assert rerank.calls.last.request.headers["authorization"] == "Bearer test-cohere-key"
    # search_docs asks for a page of 10 plus one; the reranker caps it at the 4 documents
    assert (sent["model"], sent["query"], sent["top_n"]) == ("rerank-v3.5", question, 4)
    assert sorted(sent["documents"]) == sorted(TEXTS.values())
    order = [sent["documents"][r["index"]] for r in
             json.loads(rerank.calls.last.response.content)["results"]]
    assert [p.text for p in answer.points] == order
    assert answer.points[0].id == "rules-0"

    dense = added.searches[CLOUD_DENSE][1]("dispatch instruction for a scheduled generator")
    assert dense.points[0].id == "rules-2"

    def backwards(request: httpx.Request) -> httpx.Response:  # the order sent, reversed
        count = len(json.loads(request.content)["documents"])
        return httpx.Response(200, json={
            "id": "5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d",
            "results": [{"index": i, "relevance_score": 0.1 * i} for i in reversed(range(count))],
            "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
        })

    rerank.side_effect = backwards
    reordered = added.searches[CLOUD_RERANK_ONLY][1](question)
    sent = json.loads(rerank.calls.last.request.content)
    assert [p.text for p in reordered.points] == sent["documents"][::-1]  # Cohere decides
    assert rerank.call_count == 2
    for opened in added.opened:
        opened.close()

    before = len(recorder.requests)
    again = cloud_searches("unit", index, local, points, inputs, providers)
    assert again.candidate.cached and len(recorder.requests) == before  # nothing re-embedded
    for opened in again.opened:
        opened.close()


@pytest.mark.parametrize(("present", "missing"), [
    ({}, ["GEMINI_API_KEY (or GOOGLE_API_KEY)", "COHERE_API_KEY"]),
    ({"GOOGLE_API_KEY": "g"}, ["COHERE_API_KEY"]),
    ({"COHERE_API_KEY": "c"}, ["GEMINI_API_KEY (or GOOGLE_API_KEY)"]),
])
def test_without_keys_bench_cloud_names_them_and_measures_nothing(
    present: dict[str, str], missing: list[str], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in present.items():
        monkeypatch.setenv(name, value)

    def no_build(*args, **kwargs):
        raise AssertionError("a corpus was built without keys")

    monkeypatch.setattr(bench, "ensure_corpus", no_build)

    assert missing_cloud_keys(Settings()) == missing
    assert bench.main(["--cloud"]) == 0
    assert capsys.readouterr().out == f"bench-cloud: nothing measured; not set: {', '.join(missing)}\n"
