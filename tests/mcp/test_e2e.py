"""End to end: a corpus built by the real pipeline (the generated sample PDF, plus the real
10-page AEMO fast-start PDF when ../shared/corpus is present), served by the installed
``kb-mcp serve`` as a subprocess and driven by the SDK's Streamable HTTP client, its stdio
client, a raw stdio session (stdout must carry JSON-RPC only) and the official MCP Inspector
in CLI mode."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp import Client, StdioServerParameters

from benchmarks.mcp_server import KB_MCP, server_env
from kb_assets.sample_pdf import SAMPLE_FILENAME
from tests.conftest import REPO_ROOT, copy_home, corpus_dir, require_services
from tests.mcp.pipeline import build_corpus, running_server

pytestmark = [pytest.mark.slow]

SAMPLE_ID = "sample-retail-market-procedure.pdf"
FAST_START = "aemo_Fast_Start_Unit_Inflexibility_Profile_Model_October_2014.pdf"


@pytest.fixture(scope="module")
def built_home(sample_home: tuple[Path, object], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """KB_HOME with the sample PDF (a copy of the session's ``sample_home``) and the
    fast-start PDF, when the corpus exists, built."""
    home = copy_home(sample_home[0], tmp_path_factory.mktemp("e2e") / "kb")
    real = Path(os.environ.get("KB_CORPUS_DIR", REPO_ROOT.parent / "shared" / "corpus"))
    if (real / "pdfs" / FAST_START).is_file():
        build_corpus(home, [real / "pdfs" / FAST_START])
    return home


@pytest.fixture(scope="module")
def http_url(built_home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A running ``kb-mcp serve`` (HTTP) on the built corpus; yields its base URL."""
    log = tmp_path_factory.mktemp("logs") / "http.log"
    with running_server(built_home, log) as base:
        yield base


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_streamable_http_client_searches_and_every_link_resolves(http_url: str) -> None:
    async with Client(f"{http_url}/mcp") as client:
        names = sorted(t.name for t in (await client.list_tools()).tools)
        code = await client.call_tool("search_docs", {"query": "IN008-24", "top_k": 3})
        figures = await client.call_tool(
            "search_docs", {"query": "notification flow diagram", "kind": "figure", "top_k": 2}
        )
        listing = await client.call_tool("list_documents", {})
    assert names == [
        "add_reference", "compare_versions", "display_process", "echo", "find_reference",
        "list_documents", "read_doc", "request_document", "search_aer_performance",
        "search_compliance", "search_docs", "search_graph", "search_obligations",
    ]
    assert code.is_error is False
    top = code.structured_content["results"][0]
    assert top["doc_id"] == SAMPLE_ID
    assert "in008-24" in code.structured_content["exact_terms"]
    assert code.content[0].text.startswith("Results 1–3")
    assert "[1] Sample Retail Market Procedure — Version 1.2 — " in code.content[0].text
    assert top["url"].startswith(f"{http_url}/files/pdfs/{SAMPLE_ID}#page=")
    async with httpx.AsyncClient() as http:
        pdf = await http.get(top["url"].split("#")[0])
        assert (pdf.status_code, pdf.headers["content-type"]) == (200, "application/pdf")
        assert pdf.content.startswith(b"%PDF-")
        figure = figures.structured_content["results"][0]
        assert figure["kind"] == "figure" and figure["image"] is True
        png = await http.get(figure["figure_url"])
        assert (png.status_code, png.headers["content-type"]) == (200, "image/png")
        for document in listing.structured_content["documents"]:
            assert (await http.get(document["url"])).status_code == 200
    assert [b.type for b in figures.content][:3] == ["text", "text", "image"]
    health = httpx.get(f"{http_url}/healthz").json()
    assert health["status"] == "ok" and health["documents"] == len(listing.structured_content["documents"])


@pytest.mark.anyio
async def test_stdio_client_searches_the_same_corpus(built_home: Path) -> None:
    params = StdioServerParameters(
        command=KB_MCP, args=["serve", "--transport", "stdio"], env=server_env(built_home)
    )
    async with Client(params) as client:
        result = await client.call_tool("search_docs", {"query": "IN008-24", "top_k": 2})
        document = await client.call_tool("read_doc", {"document": SAMPLE_FILENAME, "chunk_numbers": [0]})
    assert result.is_error is False
    assert result.structured_content["results"][0]["doc_id"] == SAMPLE_ID
    assert document.structured_content["chunks"][0]["id"] == f"{SAMPLE_ID}-0"
    # no HTTP server runs beside a stdio one: citations link to the stored file itself
    top = result.structured_content["results"][0]
    pdf = built_home / "blobs" / "pdfs" / SAMPLE_ID
    assert top["url"] == f"{pdf.as_uri()}#page={top['page_start']}"
    assert Path(pdf).is_file()


def test_stdio_stdout_carries_only_json_rpc(built_home: Path, tmp_path: Path) -> None:
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "kb-test", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "search_docs", "arguments": {"query": "Notification flow", "top_k": 3}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "search_graph", "arguments": {"query": "Retailer", "hops": 2}}},
    ]
    stderr = tmp_path / "stderr.log"
    with stderr.open("wb") as errors:
        process = subprocess.Popen(
            [KB_MCP, "serve", "--transport", "stdio"], env=server_env(built_home),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
        )
        assert process.stdin is not None and process.stdout is not None
        replies: dict[int, dict] = {}
        lines: list[bytes] = []
        for message in messages:
            process.stdin.write(json.dumps(message).encode() + b"\n")
            process.stdin.flush()
            if "id" not in message:
                continue
            while message["id"] not in replies:
                line = process.stdout.readline()
                assert line, f"server closed stdout early; stderr: {stderr.read_text()}"
                lines.append(line)
                reply = json.loads(line)
                if "id" in reply:
                    replies[reply["id"]] = reply
        process.stdin.close()
        lines += process.stdout.read().splitlines(keepends=True)
        assert process.wait(timeout=60) == 0
    for line in lines:  # every byte on stdout is a JSON-RPC message
        assert json.loads(line)["jsonrpc"] == "2.0", line
    assert replies[1]["result"]["serverInfo"]["name"] == "kb"
    assert replies[2]["result"]["isError"] is False
    assert replies[2]["result"]["structuredContent"]["results"]
    assert "result" in replies[3]


def test_mcp_inspector_cli_lists_tools_and_calls_search_docs(http_url: str) -> None:
    npx = shutil.which("npx")
    if npx is None:
        if require_services():
            pytest.fail("KB_REQUIRE_SERVICES=1 but npx (Node.js) is not installed")
        pytest.skip("the MCP Inspector CLI needs Node.js (npx), which is not installed")
    base = [npx, "-y", "@modelcontextprotocol/inspector", "--cli", f"{http_url}/mcp", "--transport", "http"]
    listed = subprocess.run([*base, "--method", "tools/list"], capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0, listed.stderr
    tools = json.loads(listed.stdout)["tools"]
    assert sorted(t["name"] for t in tools) == [
        "add_reference", "compare_versions", "display_process", "echo", "find_reference",
        "list_documents", "read_doc", "request_document", "search_aer_performance",
        "search_compliance", "search_docs", "search_graph", "search_obligations",
    ]
    called = subprocess.run(
        [*base, "--method", "tools/call", "--tool-name", "search_docs", "--tool-arg", "query=IN008-24"],
        capture_output=True, text=True, timeout=300,
    )
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    assert result["isError"] is False
    assert result["structuredContent"]["results"][0]["doc_id"] == SAMPLE_ID


def test_corpus_pdf_is_in_the_e2e_corpus_when_present(http_url: str) -> None:
    """With ../shared/corpus present the real fast-start PDF is served too (CI has it)."""
    corpus_dir()  # skips (or fails under KB_REQUIRE_SERVICES) without the corpus
    documents = httpx.get(f"{http_url}/healthz").json()["documents"]
    assert documents == 2
