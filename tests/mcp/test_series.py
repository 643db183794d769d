"""Editions (issue 27) as the MCP server shows them: list_documents and the kb://documents
resource name the series of documents linked as editions, oldest first, in text and in
structured content; a document in no series is in none; a category filter keeps the whole
series of a listed document. The corpus of ``tests/mcp/corpus.py`` with its Retail Rules,
Dispatch Procedure and the pending Queued.pdf linked as one series, through the SDK's
in-memory client."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from kb_mcp.server import build_server
from kb_shared.identity import doc_id
from kb_shared.stores.factory import open_catalog
from tests.mcp.corpus import (
    DISPATCH_ID,
    RETAIL_ID,
    HashingEmbedder,
    corpus_settings,
    write_corpus,
)

pytestmark = pytest.mark.anyio

QUEUED_ID = doc_id("Queued.pdf")


@pytest.fixture(scope="module")
def series_home(tmp_path_factory: pytest.TempPathFactory, embedder: HashingEmbedder) -> Path:
    """The test corpus with Retail Rules → Dispatch Procedure → Queued.pdf (pending) linked
    as editions, and Retail Rules filed under category ``rules``."""
    home = tmp_path_factory.mktemp("kbseries")
    write_corpus(corpus_settings(home), embedder, graph=False)
    catalog = open_catalog(corpus_settings(home))
    catalog.set_edition_of(DISPATCH_ID, RETAIL_ID)
    catalog.set_edition_of(QUEUED_ID, DISPATCH_ID)
    catalog.set_category(RETAIL_ID, "rules")
    catalog.close()
    return home


@pytest.fixture(scope="module")
def series_server(series_home: Path, embedder: HashingEmbedder):
    """The server on ``series_home``, one per module: each client session opens the stores
    anew (see ``server`` in tests/mcp/conftest.py)."""
    return build_server(corpus_settings(series_home), embedder=embedder, warm=False)


EXPECTED_SERIES = [
    {
        "editions": [
            {"doc_id": RETAIL_ID, "name": "Retail Rules.pdf", "status": "ready",
             "edition_of": None},
            {"doc_id": DISPATCH_ID, "name": "Dispatch Procedure.pdf", "status": "ready",
             "edition_of": RETAIL_ID},
            {"doc_id": QUEUED_ID, "name": "Queued.pdf", "status": "pending",
             "edition_of": DISPATCH_ID},
        ]
    }
]


async def test_list_documents_shows_the_series_in_text_and_structured_content(
    series_server,
) -> None:
    async with Client(series_server) as client:
        result = await client.call_tool("list_documents", {})
    assert not result.is_error
    text = result.content[0].text
    assert text.endswith(
        "\n\nSeries (documents that are editions of one document, oldest first):\n"
        "- Retail Rules.pdf → Dispatch Procedure.pdf → Queued.pdf (pending)"
    )
    assert result.structured_content["series"] == EXPECTED_SERIES
    assert [d["doc_id"] for d in result.structured_content["documents"]] == [
        DISPATCH_ID, RETAIL_ID,
    ]
    assert result.structured_content["pending"] == 1


async def test_a_category_filter_keeps_the_whole_series_of_a_listed_document(
    series_server,
) -> None:
    async with Client(series_server) as client:
        result = await client.call_tool("list_documents", {"category": "rules"})
    assert [d["doc_id"] for d in result.structured_content["documents"]] == [RETAIL_ID]
    assert result.structured_content["series"] == EXPECTED_SERIES


async def test_the_documents_resource_carries_the_series(series_server) -> None:
    async with Client(series_server) as client:
        read = await client.read_resource("kb://documents")
    listing = json.loads(read.contents[0].text)
    assert listing["series"] == EXPECTED_SERIES
    assert listing["pending"] == 1


async def test_documents_in_no_series_show_none(corpus_home: Path, embedder) -> None:
    server = build_server(corpus_settings(corpus_home), embedder=embedder, warm=False)
    async with Client(server) as client:
        result = await client.call_tool("list_documents", {})
        read = await client.read_resource("kb://documents")
    assert "Series (" not in result.content[0].text
    assert result.structured_content["series"] == []
    assert json.loads(read.contents[0].text)["series"] == []


async def test_the_output_schema_publishes_the_series(series_server) -> None:
    async with Client(series_server) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    schema = tools["list_documents"].output_schema
    assert set(schema["properties"]) == {"documents", "pending", "failed", "series"}
    assert set(schema["$defs"]["EditionRef"]["properties"]) == {
        "doc_id", "name", "status", "edition_of",
    }
