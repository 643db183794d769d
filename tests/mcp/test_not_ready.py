"""Defect 7 of issue 10: a document that is not ``ready`` is never served, by any tool.

The corpus is the two-document corpus of ``tests/mcp/corpus.py`` after a failed re-build of
``Retail Rules.pdf``: the catalog marks it failed while its chunks, figures and graph edges
are still in the stores (as after ``kb build --force`` under a mismatched embedding model).
Only ``Dispatch Procedure.pdf`` may come back.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from kb_mcp.server import build_server
from kb_shared.stores import factory
from tests.mcp.corpus import (
    DISPATCH_ID,
    RETAIL_ID,
    HashingEmbedder,
    corpus_settings,
    write_corpus,
)

pytestmark = pytest.mark.anyio

PREFIX = "Error executing tool {tool}: "
REASON = "embeddings: the vector index holds another model"


def text_of(result) -> str:
    """The first text block of a tool result."""
    return result.content[0].text


def _mark_failed(home: Path, documents: list[str]) -> None:
    catalog = factory.open_catalog(corpus_settings(home))
    try:
        for document in documents:
            catalog.mark_failed(document, REASON)
    finally:
        catalog.close()


@pytest.fixture(scope="module")
def failed_home(tmp_path_factory: pytest.TempPathFactory, embedder: HashingEmbedder) -> Path:
    """The corpus with Retail Rules failed but still indexed (chunks, figures, graph)."""
    home = tmp_path_factory.mktemp("kbfailed")
    write_corpus(corpus_settings(home), embedder)
    _mark_failed(home, [RETAIL_ID])
    return home


@pytest.fixture(scope="module")
def server(failed_home: Path, embedder: HashingEmbedder):
    """The server on ``failed_home``, one per module: each client session opens the stores
    anew (see ``server`` in tests/mcp/conftest.py)."""
    return build_server(corpus_settings(failed_home), embedder=embedder, warm=False)


async def call(server, tool: str, **arguments):
    async with Client(server) as client:
        return await client.call_tool(tool, arguments)


async def test_unfiltered_search_docs_serves_only_ready_documents(server) -> None:
    result = await call(server, "search_docs", query="retailer notify distributor life support", top_k=25)
    assert result.is_error is False
    # every result is Dispatch Procedure's (its two chunks; it has no figures)
    assert sorted(r["id"] for r in result.structured_content["results"]) == [
        f"{DISPATCH_ID}-0", f"{DISPATCH_ID}-1",
    ]
    text = text_of(result)
    assert "within 5 business days" not in text
    assert "Retail Market Rules" not in text


async def test_an_exact_code_of_a_failed_document_is_not_found(server) -> None:
    result = await call(server, "search_docs", query="IN008-24", top_k=5)
    structured = result.structured_content
    assert structured["exact_terms"] == []
    assert RETAIL_ID not in {r["doc_id"] for r in structured["results"]}


async def test_figures_of_a_failed_document_are_not_served(server) -> None:
    result = await call(server, "search_docs", query="notification flow", kind="figure")
    assert result.is_error is False
    assert result.structured_content["results"] == []
    assert [block.type for block in result.content] == ["text"]  # no image either
    assert text_of(result).startswith("No passage matched this query.")


async def test_a_filter_naming_the_failed_document_is_refused(server) -> None:
    result = await call(server, "search_docs", query="retailer", documents=["Retail Rules.pdf"])
    assert result.is_error is True
    assert text_of(result) == PREFIX.format(tool="search_docs") + (
        f"document 'Retail Rules.pdf' is failed: {REASON}. Only ready documents can be "
        "searched; call list_documents to see which are ready."
    )


async def test_search_graph_serves_no_edge_or_excerpt_of_a_failed_document(server) -> None:
    retail = await call(server, "search_graph", query="Retailer", hops=2)
    assert retail.is_error is False
    structured = retail.structured_content
    assert structured["relationships"] == []
    assert structured["excerpts"] == []
    assert structured["seeds"] == []  # Retailer is known only from the failed document
    assert RETAIL_ID not in text_of(retail)
    dispatch = await call(server, "search_graph", query="Scheduled generator")
    assert [(r["type"], r["doc_id"]) for r in dispatch.structured_content["relationships"]] == [
        ("MUST_CONFORM_TO", DISPATCH_ID),
    ]
    assert [e["id"] for e in dispatch.structured_content["excerpts"]] == [f"{DISPATCH_ID}-0"]


async def test_read_doc_refuses_the_failed_document(server) -> None:
    result = await call(server, "read_doc", document="retail-rules.pdf", chunk_numbers=[1])
    assert result.is_error is True
    assert text_of(result) == PREFIX.format(tool="read_doc") + (
        f"document 'Retail Rules.pdf' is failed: {REASON}. Only ready documents can be read; "
        "call list_documents to see which are ready."
    )


async def test_list_documents_lists_it_as_failed(server) -> None:
    result = await call(server, "list_documents")
    structured = result.structured_content
    assert [d["doc_id"] for d in structured["documents"]] == [DISPATCH_ID]
    assert (structured["pending"], structured["failed"]) == (1, 2)


async def test_with_no_ready_document_the_searches_say_so(
    tmp_path: Path, embedder: HashingEmbedder
) -> None:
    write_corpus(corpus_settings(tmp_path), embedder)
    _mark_failed(tmp_path, [RETAIL_ID, DISPATCH_ID])
    server = build_server(corpus_settings(tmp_path), embedder=embedder, warm=False)
    expected = (
        "no document is ready to search: 1 pending, 3 failed (their indexed content is not "
        "served until they build again). Call list_documents to see each one's status and "
        "failure reason."
    )
    async with Client(server) as client:
        docs = await client.call_tool("search_docs", {"query": "retailer"})
        graph = await client.call_tool("search_graph", {"query": "Retailer"})
    assert docs.is_error is True
    assert text_of(docs) == PREFIX.format(tool="search_docs") + expected
    assert graph.is_error is True
    assert text_of(graph) == PREFIX.format(tool="search_graph") + expected
