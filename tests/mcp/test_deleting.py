"""A document whose ``kb delete`` stopped half way (status ``deleting``) is served by nothing:
every tool, resource and page behaves as if it were gone (issue 16, "Crash and outage
recovery"; ``kb_mcp/documents.py`` module docstring).

The corpus is the one of ``tests/mcp/corpus.py`` with ``Retail Rules.pdf`` marked ``deleting``
and everything of it still in the stores (a delete killed right after its first step), so
each check below would find it if the serving rule let it through.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from starlette.testclient import TestClient

from kb_mcp.documents import document_list, search_scope, served_documents
from kb_mcp.http import build_app
from kb_mcp.server import build_server
from kb_shared.stores import factory
from tests.mcp.corpus import (
    DISPATCH_ID,
    RETAIL,
    RETAIL_ID,
    HashingEmbedder,
    corpus_settings,
    write_corpus,
)

PREFIX = "Error executing tool {tool}: "
ORIGIN = "http://127.0.0.1:8765"


@pytest.fixture(scope="module")
def deleting_home(tmp_path_factory: pytest.TempPathFactory, embedder: HashingEmbedder) -> Path:
    """The corpus with Retail Rules ``deleting`` and all its chunks, figures and edges kept."""
    home = tmp_path_factory.mktemp("kbdeleting")
    write_corpus(corpus_settings(home), embedder)
    catalog = factory.open_catalog(corpus_settings(home))
    try:
        assert catalog.mark_deleting(RETAIL_ID).status == "deleting"
    finally:
        catalog.close()
    return home


@pytest.fixture(scope="module")
def server(deleting_home: Path, embedder: HashingEmbedder):
    """The server on ``deleting_home``, one per module: each client session opens the stores
    anew (see ``server`` in tests/mcp/conftest.py)."""
    return build_server(corpus_settings(deleting_home), embedder=embedder, warm=False)


async def call(server, tool: str, **arguments):
    async with Client(server) as client:
        return await client.call_tool(tool, arguments)


def unknown(tool: str, name: str = RETAIL) -> str:
    """The refusal of ``name``, which resolves only to the deleting document."""
    return PREFIX.format(tool=tool) + (
        f"unknown document {name!r}: give a file name or doc_id exactly as list_documents "
        "shows them; call list_documents to see them"
    )


def test_the_serving_filter_excludes_it_though_every_other_document_is_ready(
    deleting_home: Path,
) -> None:
    catalog = factory.open_catalog(corpus_settings(deleting_home), reader=True)
    try:
        # without the deleting row the ready/total comparison would turn filtering off
        assert served_documents(catalog).only == frozenset({DISPATCH_ID})
        assert search_scope(catalog, None) == [DISPATCH_ID]
        listing = document_list(catalog)
    finally:
        catalog.close()
    assert [r.doc_id for r in listing.ready] == [DISPATCH_ID]
    assert RETAIL_ID not in {r.doc_id for r in [*listing.pending, *listing.failed]}
    assert RETAIL_ID not in listing.versions


@pytest.mark.anyio
async def test_search_docs_returns_nothing_of_it(server) -> None:
    result = await call(
        server, "search_docs", query="retailer notify distributor life support", top_k=25
    )
    assert result.is_error is False
    assert sorted(r["id"] for r in result.structured_content["results"]) == [
        f"{DISPATCH_ID}-0", f"{DISPATCH_ID}-1",
    ]
    assert "within 5 business days" not in result.content[0].text
    figures = await call(server, "search_docs", query="notification flow", kind="figure")
    assert figures.structured_content["results"] == []
    code = await call(server, "search_docs", query="IN008-24", top_k=5)
    assert RETAIL_ID not in {r["doc_id"] for r in code.structured_content["results"]}


@pytest.mark.anyio
async def test_naming_it_in_a_tool_is_an_unknown_document(server) -> None:
    search = await call(server, "search_docs", query="retailer", documents=[RETAIL])
    read = await call(server, "read_doc", document=RETAIL_ID.upper(), chunk_numbers=[1])
    assert (search.is_error, search.content[0].text) == (True, unknown("search_docs"))
    assert read.is_error is True
    assert read.content[0].text == unknown("read_doc", RETAIL_ID.upper())


@pytest.mark.anyio
async def test_search_graph_serves_no_edge_of_it(server) -> None:
    retail = await call(server, "search_graph", query="Retailer", hops=2)
    assert retail.is_error is False
    assert retail.structured_content["relationships"] == []
    assert retail.structured_content["excerpts"] == []
    assert RETAIL_ID not in retail.content[0].text


@pytest.mark.anyio
async def test_list_documents_and_the_resources_leave_it_out(server) -> None:
    listed = await call(server, "list_documents")
    structured = listed.structured_content
    assert [d["doc_id"] for d in structured["documents"]] == [DISPATCH_ID]
    assert (structured["pending"], structured["failed"]) == (1, 1)  # Queued.pdf, Broken.pdf
    assert RETAIL not in listed.content[0].text
    async with Client(server) as client:
        everything = (await client.read_resource("kb://documents")).contents[0].text
        with pytest.raises(MCPError) as raised:
            await client.read_resource(f"kb://documents/{RETAIL_ID}")
    assert str(raised.value) == (
        f"unknown document {RETAIL_ID!r}: give a file name or doc_id exactly as list_documents "
        "shows them; call list_documents to see them"
    )
    data = json.loads(everything)
    assert [d["doc_id"] for d in data["documents"]] == [DISPATCH_ID]
    assert (data["pending"], data["failed"]) == (1, 1)
    assert RETAIL not in everything


@pytest.fixture
def pages(deleting_home: Path, embedder: HashingEmbedder) -> Iterator[TestClient]:
    app = build_app(corpus_settings(deleting_home), embedder=embedder, warm=False)
    with TestClient(app, base_url=ORIGIN) as client:
        yield client


def test_the_graph_page_and_the_gallery_do_not_show_it(pages: TestClient) -> None:
    body = pages.get("/api/graph").json()
    assert {e["document"] for e in body["edges"]} == {DISPATCH_ID}
    assert [d["doc_id"] for d in body["documents"]] == [DISPATCH_ID]
    named = pages.get("/api/graph", params={"doc": RETAIL_ID})
    assert named.status_code == 400
    gallery = pages.get(f"/api/documents/{RETAIL_ID}/figures")
    assert gallery.status_code == 404
    assert gallery.json() == {"error": f"no ready document has doc_id '{RETAIL_ID}'"}


def test_files_answers_its_pdf_and_figures_as_for_an_unknown_document(
    pages: TestClient, deleting_home: Path
) -> None:
    # the files are still stored (the delete stopped before removing them) ...
    assert (deleting_home / "blobs" / "pdfs" / RETAIL_ID).is_file()
    assert (deleting_home / "blobs" / "figures" / RETAIL_ID / "figure-1.png").is_file()
    unknown_pdf = pages.get("/files/pdfs/no-such-document.pdf")
    assert (unknown_pdf.status_code, unknown_pdf.text) == (404, "Not Found")
    # ... and answered exactly like that unknown document's
    for key in (f"pdfs/{RETAIL_ID}", f"figures/{RETAIL_ID}/figure-1.png"):
        for method in (pages.get, pages.head):
            answer = method(f"/files/{key}")
            assert answer.status_code == 404, key
        assert pages.get(f"/files/{key}").text == "Not Found"
    assert pages.get(f"/files/pdfs/{DISPATCH_ID}").status_code == 200  # the others still open
