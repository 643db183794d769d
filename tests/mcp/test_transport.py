"""Defect 5 of issue 10: the stateless transport answers every request to ``/mcp`` at once.

kb serves Streamable HTTP statelessly (one JSON answer per POST), so it offers no SSE stream:
``GET /mcp`` is a 405 with ``Allow: POST`` (MCP spec 2025-06-18, "Listening for Messages from
the Server": a server that offers no stream at the endpoint MUST answer GET with 405), and so
is every other method it does not serve. The tests run the real Starlette app under uvicorn on
a loopback port, so a held-open stream shows up as a client timeout (a correctness bound of a
few seconds, not a timing measurement).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from benchmarks.mcp_server import free_port, serving_in_thread
from kb_mcp.http import build_app
from tests.mcp.corpus import HashingEmbedder, corpus_settings

#: Longest a test waits for one answer: far above a complete answer, far below a held stream.
CLIENT_TIMEOUT = httpx.Timeout(5.0)

#: Concurrent clients of the load case (issue 10, defect 5).
CLIENTS = 16


@pytest.fixture(scope="module")
def base(corpus_home: Path, embedder: HashingEmbedder) -> Iterator[str]:
    """``http://127.0.0.1:{port}`` of the kb app served by uvicorn in a background thread."""
    port = free_port()
    settings = corpus_settings(corpus_home, mcp_port=port)
    with serving_in_thread(build_app(settings, embedder=embedder, warm=False), port) as url:
        yield url


@pytest.mark.parametrize("accept", ["text/event-stream", "*/*"])
def test_get_mcp_is_a_complete_405_naming_post(base: str, accept: str) -> None:
    with httpx.Client(timeout=CLIENT_TIMEOUT) as client:
        response = client.get(f"{base}/mcp", headers={"Accept": accept})
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.headers.get("content-type", "").startswith("application/json")
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": "GET is not served: kb's MCP endpoint is stateless and answers POST only.",
        },
    }


@pytest.mark.parametrize("method", ["DELETE", "PUT", "PATCH", "HEAD", "OPTIONS"])
def test_other_methods_are_refused_at_once(base: str, method: str) -> None:
    with httpx.Client(timeout=CLIENT_TIMEOUT) as client:
        response = client.request(method, f"{base}/mcp", headers={"Accept": "*/*"})
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


def test_sixteen_concurrent_gets_each_get_a_405(base: str) -> None:
    async def one(client: httpx.AsyncClient, results: list[tuple[int, str | None]]) -> None:
        response = await client.get(f"{base}/mcp", headers={"Accept": "text/event-stream"})
        results.append((response.status_code, response.headers.get("allow")))

    async def run() -> list[tuple[int, str | None]]:
        results: list[tuple[int, str | None]] = []
        limits = httpx.Limits(max_connections=CLIENTS)
        async with httpx.AsyncClient(timeout=CLIENT_TIMEOUT, limits=limits) as client:
            async with anyio.create_task_group() as group:
                for _ in range(CLIENTS):
                    group.start_soon(one, client, results)
        return results

    assert anyio.run(run) == [(405, "POST")] * CLIENTS


def test_post_still_answers_with_one_json_body(base: str) -> None:
    initialize = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    with httpx.Client(timeout=CLIENT_TIMEOUT) as client:
        response = client.post(f"{base}/mcp", json=initialize, headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["id"] == 1 and body["result"]["serverInfo"]["name"] == "kb"
