"""``add_reference`` and ``find_reference`` over MCP (issue 12, "find_reference /
add_reference"): pages queued by the tool, indexed by ``kb_assets.references`` with the real
offline embedder, are found for a paraphrased question; search_docs never returns one; bad
URLs, duplicates and a full queue are refused and queue nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from kb_assets.references import index_references
from kb_assets.resources import StoresResource
from kb_mcp.server import build_server
from kb_shared.providers.local_embeddings import load_local_embedder
from kb_shared.search import retrieval
from kb_shared.settings import Settings
from kb_shared.stores.catalog import DEFAULT_MAX_PENDING, reference_requests, reference_sources
from kb_shared.stores.vectors import DOCUMENT_KINDS, KIND_REFERENCE
from tests.mcp.corpus import HashingEmbedder, corpus_settings

pytestmark = pytest.mark.anyio

PREFIX = "Error executing tool add_reference: "

PAGES = [
    {
        "url": "https://www.aemo.com.au/developer/b2b-api",
        "title": "AEMO B2B e-Hub API reference",
        "description": "REST endpoints for submitting meter data notifications and service "
        "orders to the market operator's B2B e-Hub, with authentication and error codes.",
    },
    {
        "url": "https://qdrant.tech/documentation/concepts/filtering/",
        "title": "Qdrant payload filtering",
        "description": "How to filter vector search results by payload fields in the Qdrant "
        "vector database: match, range and nested conditions.",
    },
    {
        "url": "https://www.aer.gov.au/retail-guidelines/hardship",
        "title": "AER customer hardship policy guideline",
        "description": "What energy retailers must offer customers in financial hardship: "
        "payment plans, debt relief and disconnection protections.",
    },
]


def text_of(result) -> str:
    return result.content[0].text


@pytest.fixture(scope="module")
def minilm():
    """The real offline embedder (loads in well under a second)."""
    embedder = load_local_embedder("minilm-int8")
    yield embedder
    embedder.close()


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """An empty KB_HOME whose catalog schema exists (the pipeline creates it)."""
    stores = StoresResource(home=str(tmp_path))
    stores.catalog()
    stores.close()
    yield tmp_path


async def test_a_paraphrased_question_finds_the_registered_page(home: Path, minilm) -> None:
    server = build_server(Settings(home=home), embedder=minilm, warm=False)
    async with Client(server) as client:
        before = await client.call_tool("find_reference", {"question": "anything"})
        queued = [await client.call_tool("add_reference", page) for page in PAGES]
    assert not before.is_error
    assert before.structured_content == {"results": [], "low_confidence": False}
    assert text_of(before).startswith("No reference pages are registered yet")
    assert [q.structured_content["request_id"] for q in queued] == [1, 2, 3]
    assert text_of(queued[0]) == (
        'Reference request #1 for "AEMO B2B e-Hub API reference" '
        "(https://www.aemo.com.au/developer/b2b-api) was queued. Its description is indexed "
        "shortly, after which find_reference routes matching questions to it; nothing was "
        "downloaded."
    )

    stores = StoresResource(home=str(home))
    sync = index_references(stores, minilm)
    stores.close()
    assert [s.url for s in sync.registered] == [p["url"] for p in PAGES]

    async with Client(server) as client:
        found = await client.call_tool(
            "find_reference",
            {"question": "How do I send metering readings to AEMO through its web service?",
             "top_k": 2},
        )
        hardship = await client.call_tool(
            "find_reference",
            {"question": "which support must a power company give people who cannot pay their bills",
             "top_k": 1},
        )
        cake = await client.call_tool(
            "find_reference", {"question": "chocolate cake recipe with buttercream icing"}
        )
    assert not found.is_error, text_of(found)
    assert found.structured_content["low_confidence"] is False
    assert cake.structured_content["low_confidence"] is True
    assert text_of(cake).startswith(
        'No registered reference page clearly matches "chocolate cake recipe with buttercream '
        'icing" (best similarity '
    )
    results = found.structured_content["results"]
    assert len(results) == 2
    assert (results[0]["url"], results[0]["reference_id"]) == (PAGES[0]["url"], 1)
    assert results[0]["description"] == PAGES[0]["description"]
    assert results[0]["similarity"] > results[1]["similarity"]
    assert hardship.structured_content["results"][0]["url"] == PAGES[2]["url"]
    text = text_of(found)
    assert text.startswith(
        'Registered reference pages for "How do I send metering readings to AEMO through its '
        'web service?", best match first:\n[1] AEMO B2B e-Hub API reference — '
        "https://www.aemo.com.au/developer/b2b-api\n"
    )
    assert text.endswith(
        "kb keeps only these descriptions, not the pages: fetch the URL of a page that fits "
        "to read it, and cite it by its URL."
    )


async def test_listing_says_which_tool_writes(server) -> None:
    async with Client(server) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    add, find = tools["add_reference"], tools["find_reference"]
    assert (add.annotations.read_only_hint, add.annotations.destructive_hint) == (False, False)
    assert (find.annotations.read_only_hint, find.annotations.idempotent_hint) == (True, True)
    assert sorted(add.input_schema["required"]) == ["description", "title", "url"]
    props = add.input_schema["properties"]
    assert (props["url"]["maxLength"], props["title"]["maxLength"]) == (2048, 300)
    assert props["description"]["maxLength"] == 2000
    top_k = find.input_schema["properties"]["top_k"]
    assert (top_k["minimum"], top_k["maximum"], top_k["default"]) == (1, 10, 5)
    assert "never downloads the page" in " ".join(add.description.split())
    assert "fetch the URL yourself" in " ".join(find.description.split())


async def test_search_docs_never_returns_a_reference(
    corpus_home: Path, embedder: HashingEmbedder
) -> None:
    settings = corpus_settings(corpus_home)
    stores = StoresResource(home=str(corpus_home))
    catalog = stores.catalog()
    # the descriptor repeats search words of the corpus, so it would rank if it were searched
    catalog.add_reference_request(
        "https://example.org/life-support",
        "Life support equipment notification",
        "Life support equipment: notify the distributor, register the customer, IN008-24.",
    )
    index_references(stores, embedder)
    index = stores.vectors(embedder.model, embedder.dimension)
    assert index.count(kind=KIND_REFERENCE) == 1
    # the retrieval itself, with no document filter (the tool adds one: the ready documents)
    direct = retrieval.search_docs(
        index, embedder, "life support equipment notification IN008-24", top_k=25
    )
    server = build_server(settings, embedder=embedder, warm=False)
    try:
        async with Client(server) as client:
            found = await client.call_tool(
                "search_docs", {"query": "life support equipment notification", "top_k": 25}
            )
            routed = await client.call_tool(
                "find_reference", {"question": "life support equipment notification"}
            )
    finally:
        with catalog.engine.begin() as conn:
            conn.execute(reference_requests.delete())
            conn.execute(reference_sources.delete())
        stores.close()
    assert direct.results and {p.point.kind for p in direct.results} <= set(DOCUMENT_KINDS)
    assert not found.is_error, text_of(found)
    results = found.structured_content["results"]
    assert results and all(not r["doc_id"].startswith("#") for r in results)
    assert "example.org" not in text_of(found)
    assert routed.structured_content["results"][0]["url"] == "https://example.org/life-support"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"url": "http://127.0.0.1/api"}, "nothing was queued: url is not a link kb accepts "
         "(refused: 127.0.0.1 is a loopback address"),
        ({"url": "https://169.254.169.254/latest"}, "nothing was queued: url is not a link kb "
         "accepts (refused: 169.254.169.254 is a link-local address"),
        ({"url": "file:///etc/passwd"}, "uses file scheme; only https is fetched"),
        ({"title": "t" * 301}, "String should have at most 300 characters"),
        ({"description": "d" * 2001}, "String should have at most 2000 characters"),
        ({"description": "   "}, "nothing was queued: description"),
    ],
)
async def test_bad_fields_queue_nothing(home: Path, arguments: dict, message: str) -> None:
    server = build_server(Settings(home=home), embedder=HashingEmbedder(32), warm=False)
    async with Client(server) as client:
        result = await client.call_tool("add_reference", {**PAGES[0], **arguments})
    assert result.is_error
    assert message in text_of(result)
    stores = StoresResource(home=str(home))
    assert stores.catalog().list_reference_requests() == []
    stores.close()


async def test_duplicates_and_a_full_queue_are_refused(home: Path) -> None:
    embedder = HashingEmbedder(32)
    server = build_server(Settings(home=home), embedder=embedder, warm=False)
    async with Client(server) as client:
        await client.call_tool("add_reference", PAGES[0])
        again = await client.call_tool("add_reference", {**PAGES[0], "title": "Other title"})
    assert text_of(again) == PREFIX + (
        "nothing was queued: a request for https://www.aemo.com.au/developer/b2b-api is "
        "already pending (request #1)"
    )
    stores = StoresResource(home=str(home))
    index_references(stores, embedder)
    async with Client(server) as client:
        registered = await client.call_tool("add_reference", PAGES[0])
    assert text_of(registered) == PREFIX + (
        "nothing was queued: https://www.aemo.com.au/developer/b2b-api is already registered "
        'as reference #1 ("AEMO B2B e-Hub API reference"); find_reference routes to it.'
    )
    with stores.catalog().engine.begin() as conn:
        conn.execute(
            reference_requests.insert(),
            [{"url": f"https://example.org/{n}", "title": f"Page {n}", "description": "d"}
             for n in range(DEFAULT_MAX_PENDING)],
        )
    async with Client(server) as client:
        full = await client.call_tool("add_reference", PAGES[1])
    assert text_of(full) == PREFIX + (
        "nothing was queued: the reference request queue already holds 200 pending requests "
        "(the ceiling is 200); an operator must review them before more can be added"
    )
    assert len(stores.catalog().list_reference_requests("pending")) == 200
    stores.close()
