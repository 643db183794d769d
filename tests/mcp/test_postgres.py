"""With Postgres the server reads as ``kb_reader`` (``KB_READER_DATABASE_URL``): it answers
from the catalog and the SQL graph, and its connection cannot write. Needs
``KB_TEST_POSTGRES_URL`` (skipped with that reason otherwise; a failure under
``KB_REQUIRE_SERVICES=1``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from benchmarks.postgres import reader_database
from kb_mcp.server import build_server
from kb_mcp.state import open_state
from kb_shared.errors import StoreError
from tests.conftest import postgres_url
from tests.mcp.corpus import HashingEmbedder, corpus_settings, write_corpus

pytestmark = [pytest.mark.services, pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def databases() -> Iterator[tuple[str, str]]:
    """``(writer URL, kb_reader URL)`` of a fresh database built from ``sql/``."""
    with reader_database(postgres_url(), "kb_mcp") as urls:
        yield urls


async def test_server_reads_catalog_and_graph_as_kb_reader(
    databases: tuple[str, str], tmp_path: Path
) -> None:
    writer_url, reader_url = databases
    embedder = HashingEmbedder(256)
    write_corpus(corpus_settings(tmp_path, database_url=writer_url), embedder)
    settings = corpus_settings(tmp_path, database_url=writer_url, reader_database_url=reader_url)

    server = build_server(settings, embedder=embedder, warm=False)
    async with Client(server) as client:
        listing = await client.call_tool("list_documents", {})
        graph = await client.call_tool("search_graph", {"query": "Retailer"})
        docs = await client.call_tool("search_docs", {"query": "IN008-24", "documents": ["Retail Rules.pdf"]})
    assert [d["doc_id"] for d in listing.structured_content["documents"]] == [
        "dispatch-procedure.pdf", "retail-rules.pdf",
    ]
    assert [r["type"] for r in graph.structured_content["relationships"]] == ["DEFINES", "MUST_NOTIFY"]
    assert docs.structured_content["results"][0]["id"] == "retail-rules.pdf-2"

    state = open_state(settings, embedder=embedder)
    try:
        assert state.catalog.engine.url.username == "kb_reader"
        with pytest.raises(StoreError, match="permission denied"):
            state.catalog.mark_failed("retail-rules.pdf", "a reader must not write")
    finally:
        state.close()
