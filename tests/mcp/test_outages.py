"""While a store is down (issue 16, "Crash and outage recovery"): every MCP tool that needs it
answers with an ``isError`` result naming the store, the tools that do not keep answering, and
``/healthz`` reports each store (catalog, vectors, graph, blobs) as ``ok`` or ``down`` with the
reason, with HTTP 503 while any is down.

The fast cases point one store at a loopback port nothing listens on (or move the blob folder
away); the slow one stops and restarts the real Postgres and Neo4j of ``.ci/services.sh``
under a running server (``tests/stores/test_outages.py``'s ``Outage``).
"""

from __future__ import annotations

import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import anyio.to_thread
import pytest
from mcp import Client
from starlette.testclient import TestClient

from kb_mcp.http import build_app
from kb_mcp.server import build_server
from kb_shared.settings import Settings
from kb_shared.stores import factory
from tests.conftest import neo4j_uri, postgres_url
from tests.mcp.corpus import HashingEmbedder, corpus_settings, write_corpus
from tests.stores.test_outages import Outage

ORIGIN = "http://127.0.0.1:8765"
PREFIX = "Error executing tool {tool}: "
ROLES = ("catalog", "vectors", "graph", "blobs")

#: One call of each tool that reads the stores.
CALLS = {
    "list_documents": {},
    "search_docs": {"query": "retailer notify distributor"},
    "search_graph": {"query": "Retailer"},
    "read_doc": {"document": "Retail Rules.pdf", "chunk_numbers": [0]},
}


def text_of(result) -> str:
    return result.content[0].text if result.content else ""


def closed_port() -> int:
    """A loopback port nothing listens on (the OS picked it free and it was let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A fresh copy of the two-document corpus (a test may break its blob folder)."""
    write_corpus(corpus_settings(tmp_path), HashingEmbedder(256))
    return tmp_path


def health(settings: Settings) -> tuple[int, dict]:
    app = build_app(settings, embedder=HashingEmbedder(256), warm=False)
    with TestClient(app, base_url=ORIGIN) as client:
        response = client.get("/healthz")
    return response.status_code, response.json()


async def call_all(settings: Settings) -> dict:
    server = build_server(settings, embedder=HashingEmbedder(256), warm=False)
    async with Client(server) as client:
        return {tool: await client.call_tool(tool, args) for tool, args in CALLS.items()}


def assert_down(body: dict, down: dict[str, str]) -> None:
    """``/healthz``'s ``stores``: the roles of ``down`` down with a reason containing the
    given text, every other role ok."""
    for role in ROLES:
        report = body["stores"][role]
        if role in down:
            assert report["status"] == "down", role
            assert down[role] in report["reason"], (role, report["reason"])
        else:
            assert report == {"status": "ok"}, role
    assert body["status"] == "degraded"


def outage_settings(home: Path, store: str, port: int) -> Settings:
    if store == "graph":
        return corpus_settings(home, neo4j_uri=f"bolt://127.0.0.1:{port}")
    if store == "vectors":
        return corpus_settings(home, qdrant_url=f"http://127.0.0.1:{port}")
    if store == "catalog":
        return corpus_settings(
            home, reader_database_url=f"postgresql+psycopg://kb_reader:pw@127.0.0.1:{port}/kb"
        )
    shutil.move(home / "blobs", home / "blobs.away")
    return corpus_settings(home)


#: store → (what /healthz and the errors name, roles /healthz reports down, tools that fail,
#: the name the tool errors give the store). The SQL graph lives in the catalog database, so
#: the catalog down takes the graph with it.
CASES = {
    "graph": ("Neo4j at 127.0.0.1:{port} (database 'neo4j') is unreachable", ("graph",),
              ("search_graph",), "graph store"),
    "vectors": ("Qdrant at http://127.0.0.1:{port} is unreachable", ("vectors",),
                ("search_docs", "search_graph", "read_doc"), "vector index"),
    "catalog": ("catalog database postgresql+psycopg://kb_reader:***@127.0.0.1:{port}/kb is "
                "unavailable", ("catalog", "graph"), tuple(CALLS), "catalog"),
    "blobs": ("the stored PDF 'pdfs/dispatch-procedure.pdf' of 'dispatch-procedure.pdf' is "
              "missing from the blob store file://", ("blobs",), (), "blob store"),
}


@pytest.mark.parametrize("store", list(CASES))
def test_a_store_that_is_down_is_named_by_healthz_and_by_the_tools_that_need_it(
    store: str, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # nothing listens on the port: the reader's retries cannot succeed, only take time (the
    # driver's first retry waits ~1 s, its initial delay, whatever the cap): none
    monkeypatch.setattr(factory, "READER_RETRY_SECONDS", 0.0)
    port = closed_port()
    named, down, failing, role = CASES[store]
    named = named.format(port=port)
    settings = outage_settings(home, store, port)

    status, body = health(settings)
    assert status == 503
    assert_down(body, {r: (named if r == store else "") for r in down})
    assert ("documents" in body, "points" in body) == (store != "catalog", store != "vectors")
    if store == "catalog":  # the SQL graph shares the catalog's database: the same reason
        assert named.replace("catalog", "graph") in body["stores"]["graph"]["reason"]

    results = anyio.run(call_all, settings)
    for tool, result in results.items():
        text = text_of(result)
        if tool in failing:
            assert result.is_error is True, tool
            assert text.startswith(
                PREFIX.format(tool=tool) + f"A store kb reads from is unavailable (the {role}: "
            ), text
            assert named in text
            assert "pw" not in text and "Traceback" not in text
        else:
            assert result.is_error is False, (tool, text)
    answered = [t for t, r in results.items() if not r.is_error]
    assert answered == [t for t in CALLS if t not in failing]


def test_healthz_is_ok_again_once_the_blob_folder_is_back(home: Path) -> None:
    settings = outage_settings(home, "blobs", 0)
    assert health(settings)[0] == 503
    shutil.move(home / "blobs.away", home / "blobs")
    status, body = health(settings)
    assert status == 200
    assert body["status"] == "ok"
    assert body["stores"] == {role: {"status": "ok"} for role in ROLES}


@pytest.fixture
def server_stores(tmp_path: Path) -> Iterator[tuple[Settings, Outage, Outage]]:
    """The corpus in a fresh Postgres database (read as ``kb_reader``) and the real Neo4j,
    with an ``Outage`` for each server (both started again at teardown)."""
    from benchmarks.postgres import reader_database  # noqa: PLC0415

    uri = neo4j_uri()
    with reader_database(postgres_url(), "kb_outage_mcp") as (writer_url, reader_url):
        postgres, neo4j = Outage("postgres"), Outage("neo4j")
        fields = {"database_url": writer_url, "neo4j_uri": uri}
        write_corpus(corpus_settings(tmp_path, **fields), HashingEmbedder(256))
        settings = corpus_settings(tmp_path, reader_database_url=reader_url, **fields)
        try:
            yield settings, postgres, neo4j
        finally:
            postgres.start()
            neo4j.start()
            graph = factory.open_graph_store(settings)
            for document in ("retail-rules.pdf", "dispatch-procedure.pdf"):
                graph.delete_document(document)
            graph.close()


@pytest.mark.services
@pytest.mark.slow
@pytest.mark.anyio
async def test_real_servers_stopped_under_a_running_server_and_started_again(
    server_stores: tuple[Settings, Outage, Outage],
) -> None:
    settings, postgres, neo4j = server_stores
    bolt = settings.neo4j_uri.removeprefix("bolt://")
    server = build_server(settings, embedder=HashingEmbedder(256), warm=False)
    async with Client(server) as client:

        async def answers() -> dict[str, bool]:
            return {t: not (await client.call_tool(t, a)).is_error for t, a in CALLS.items()}

        assert await answers() == dict.fromkeys(CALLS, True)

        await anyio.to_thread.run_sync(neo4j.stop)
        graph = await client.call_tool("search_graph", CALLS["search_graph"])
        assert graph.is_error is True
        assert text_of(graph).startswith(
            PREFIX.format(tool="search_graph")
            + f"A store kb reads from is unavailable (the graph store: Neo4j at {bolt} "
        )
        assert await answers() == {**dict.fromkeys(CALLS, True), "search_graph": False}
        status, body = await anyio.to_thread.run_sync(health, settings)
        assert status == 503
        assert_down(body, {"graph": f"Neo4j at {bolt} (database 'neo4j') is unreachable"})
        await anyio.to_thread.run_sync(neo4j.start)
        assert await answers() == dict.fromkeys(CALLS, True)

        await anyio.to_thread.run_sync(postgres.stop)
        listing = await client.call_tool("list_documents", {})
        assert listing.is_error is True
        assert text_of(listing).startswith(
            PREFIX.format(tool="list_documents")
            + "A store kb reads from is unavailable (the catalog: catalog database "
            "postgresql+psycopg://kb_reader:***@127.0.0.1:"
        )
        status, body = await anyio.to_thread.run_sync(health, settings)
        assert status == 503
        assert_down(body, {"catalog": "is unavailable"})  # the graph is Neo4j's: still ok
        await anyio.to_thread.run_sync(postgres.start)
        assert await answers() == dict.fromkeys(CALLS, True)
    status, body = await anyio.to_thread.run_sync(health, settings)
    assert (status, body["stores"]) == (200, {role: {"status": "ok"} for role in ROLES})


def test_a_blob_store_read_error_names_the_blob_store() -> None:
    from mcp.server.mcpserver.exceptions import ToolError  # noqa: PLC0415

    from kb_mcp.errors import tool_errors  # noqa: PLC0415

    with pytest.raises(ToolError) as info, tool_errors("read_doc"):
        raise ConnectionRefusedError(111, "Connection refused")  # e.g. s3fs with no endpoint
    assert str(info.value) == (
        "A store kb reads from is unavailable (the blob store: [Errno 111] Connection refused). "
        "The MCP server is still running: retry in a moment; if it keeps failing, the operator "
        "must check the blob store (KB_BLOB_URL)."
    )
