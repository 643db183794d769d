"""The knowledge-graph page (issue 13): ``GET /api/graph`` without a browser (order, caps,
filters, neighbourhoods, provenance, 400s, tokens, Host check, the serving rule), and
``GET /graph`` in a real headless Chromium on the small corpus of ``tests/mcp/corpus.py``.

That corpus's graph (every entity a ``Role``):

    Retailer --MUST_NOTIFY--> Distributor --REFERS_TO--> Life support register  (retail-rules.pdf-1)
    Retailer --DEFINES--> Customer                      (retail-rules.pdf-99, not in the index)
    Scheduled generator --MUST_CONFORM_TO--> Dispatch instruction        (dispatch-procedure.pdf-0)

Degrees: retailer 2, distributor 2, the others 1; combined: MUST_NOTIFY 4, REFERS_TO 3,
DEFINES 3, MUST_CONFORM_TO 2.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pymupdf
import pytest
from starlette.testclient import TestClient

from kb_mcp.http import build_app
from kb_mcp.cli import page_lines
from kb_mcp.links import file_signature, page_signature, signing_key
from kb_mcp.pages.graph import CONTENT_SECURITY_POLICY, static_files
from kb_mcp.pages.graph_data import GraphQuery
from kb_shared.graph_model import Entity, Relationship
from kb_shared.identity import chunk_id, doc_id
from kb_shared.stores import factory
from tests.browser import browser_page, chromium  # noqa: F401 - fixtures
from tests.mcp.corpus import (
    HashingEmbedder,
    corpus_settings,
    served,
    write_corpus,
    write_home_graph,
)

ORIGIN = "http://127.0.0.1:8765"
FILES = ORIGIN + "/files/pdfs/"

NOTIFY = {
    "source": "retailer",
    "target": "distributor",
    "type": "MUST_NOTIFY",
    "description": "must notify the distributor within 5 business days",
    "document": "retail-rules.pdf",
    "document_name": "Retail Rules.pdf",
    "page": 1,
    "page_text": "p. 1",
    "chunk_id": "retail-rules.pdf-1",
    "citation": FILES + "retail-rules.pdf#page=1",
}


@pytest.fixture(scope="module")
def client(corpus_home: Path, embedder: HashingEmbedder) -> Iterator[TestClient]:
    """A test client of the kb app on the corpus, one per module: the tests only send
    requests, and the app (built, its stores opened by its lifespan) costs more than they do
    (benchmarks/results/test-lanes.md, 2026-12-07). It sets no cookie without tokens."""
    app = build_app(corpus_settings(corpus_home), embedder=embedder, warm=False)
    with TestClient(app, base_url=ORIGIN) as test_client:
        yield test_client


def edge_keys(body: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(e["source"], e["type"], e["target"]) for e in body["edges"]]


# -- the JSON -------------------------------------------------------------------------------


def test_whole_graph_in_degree_order_with_provenance(client: TestClient) -> None:
    response = client.get("/api/graph")
    assert response.status_code == 200
    body = response.json()
    assert edge_keys(body)[0] == ("retailer", "MUST_NOTIFY", "distributor")
    assert sorted(edge_keys(body)[1:3]) == [
        ("distributor", "REFERS_TO", "life support register"),
        ("retailer", "DEFINES", "customer"),
    ]
    assert edge_keys(body)[3] == ("scheduled generator", "MUST_CONFORM_TO", "dispatch instruction")
    notify = body["edges"][0]
    assert {k: v for k, v in notify.items() if k != "id"} == NOTIFY
    assert len(notify["id"]) == 16
    defines = next(e for e in body["edges"] if e["type"] == "DEFINES")
    # its chunk is not in the index: no page, the link opens the PDF itself
    assert (defines["page"], defines["citation"]) == (None, FILES + "retail-rules.pdf")
    conform = next(e for e in body["edges"] if e["type"] == "MUST_CONFORM_TO")
    assert (conform["document_name"], conform["page"]) == ("Dispatch Procedure.pdf", 1)
    assert body["truncated"] is False
    assert body["total"] == body["shown"] == {"nodes": 6, "edges": 4}
    assert body["limit"] == 2000
    retailer = next(n for n in body["nodes"] if n["key"] == "retailer")
    assert retailer == {
        "key": "retailer", "name": "Retailer", "type": "Role", "description": "", "degree": 2,
    }
    # the ready documents only (Queued.pdf is pending, Broken.pdf failed)
    assert body["documents"] == [
        {"doc_id": "dispatch-procedure.pdf", "name": "Dispatch Procedure.pdf",
         "title": "Dispatch Procedure SO_OP_3705"},
        {"doc_id": "retail-rules.pdf", "name": "Retail Rules.pdf", "title": "Retail Market Rules"},
    ]


def test_limit_caps_the_best_connected_edges_and_says_so(client: TestClient) -> None:
    body = client.get("/api/graph", params={"limit": "1"}).json()
    assert edge_keys(body) == [("retailer", "MUST_NOTIFY", "distributor")]
    assert [n["key"] for n in body["nodes"]] == ["retailer", "distributor"]
    assert body["truncated"] is True
    assert body["total"] == {"nodes": 6, "edges": 4}
    assert body["shown"] == {"nodes": 2, "edges": 1}
    assert client.get("/api/graph", params={"limit": "6000"}).json()["limit"] == 6000


def test_filters_by_document_and_types(client: TestClient) -> None:
    dispatch = client.get("/api/graph", params={"doc": "Dispatch Procedure.pdf"}).json()
    assert edge_keys(dispatch) == [
        ("scheduled generator", "MUST_CONFORM_TO", "dispatch instruction")
    ]
    assert dispatch["total"] == {"nodes": 2, "edges": 1}
    assert dispatch["query"]["doc"] == "dispatch-procedure.pdf"
    retail = client.get("/api/graph", params={"doc": "retail-rules.pdf"}).json()
    assert retail["total"] == {"nodes": 4, "edges": 3}
    refers = client.get("/api/graph", params={"relationship_type": "REFERS_TO"}).json()
    assert edge_keys(refers) == [("distributor", "REFERS_TO", "life support register")]
    roles = client.get("/api/graph", params={"entity_type": "Role"}).json()
    assert roles["total"] == {"nodes": 6, "edges": 4}
    none = client.get("/api/graph", params={"entity_type": "Organisation"}).json()
    assert (none["edges"], none["nodes"], none["total"]) == ([], [], {"nodes": 0, "edges": 0})


def test_seed_neighbourhood_by_name_and_depth(client: TestClient) -> None:
    one = client.get("/api/graph", params={"seed": "  RETAILER ", "depth": "1"}).json()
    assert edge_keys(one) == [
        ("retailer", "MUST_NOTIFY", "distributor"), ("retailer", "DEFINES", "customer"),
    ]
    assert one["query"]["seed"] == "retailer"
    assert one["total"] == {"nodes": 3, "edges": 2}
    two = client.get("/api/graph", params={"seed": "Retailer", "depth": "2"}).json()
    assert edge_keys(two)[2] == ("distributor", "REFERS_TO", "life support register")
    assert two["total"] == {"nodes": 4, "edges": 3}
    capped = client.get(
        "/api/graph", params={"seed": "Retailer", "depth": "2", "limit": "2"}
    ).json()
    assert (capped["truncated"], capped["shown"]["edges"], capped["total"]["edges"]) == (True, 2, 3)
    filtered = client.get(
        "/api/graph", params={"seed": "retailer", "relationship_type": "DEFINES"}
    ).json()
    assert edge_keys(filtered) == [("retailer", "DEFINES", "customer")]
    unknown = client.get("/api/graph", params={"seed": "Nobody"}).json()
    assert (unknown["nodes"], unknown["edges"], unknown["truncated"]) == ([], [], False)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"limit": "0"}, "limit must be a whole number from 1 to 6000, got '0'"),
        ({"limit": "6001"}, "limit must be a whole number from 1 to 6000, got '6001'"),
        ({"limit": "many"}, "limit must be a whole number from 1 to 6000, got 'many'"),
        ({"seed": "retailer", "depth": "3"}, "depth must be a whole number from 1 to 2, got '3'"),
        ({"depth": "1"}, "depth needs a seed: the entity whose neighbourhood to show"),
        ({"seed": "  "}, "seed must be 1 to 500 characters, or left out"),
        ({"nodes": "5"}, "unknown parameter 'nodes'; /api/graph accepts limit, doc, entity_type, "
                         "relationship_type, seed, depth"),
        ({"doc": "missing.pdf"}, "unknown document 'missing.pdf': give a doc_id or file name"),
        ({"doc": "Queued.pdf"}, "document 'Queued.pdf' is pending; only ready documents are shown"),
        ({"doc": "Broken.pdf"}, "document 'Broken.pdf' is failed; only ready documents are shown"),
    ],
)
def test_bad_queries_are_400_with_the_reason(
    client: TestClient, params: dict[str, str], message: str
) -> None:
    response = client.get("/api/graph", params=params)
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == message


def test_query_parse_defaults() -> None:
    assert GraphQuery.parse({}) == GraphQuery(limit=2000, depth=1)


def test_tokens_guard_the_page_and_its_json_and_links_are_signed(
    corpus_home: Path, embedder: HashingEmbedder
) -> None:
    settings = corpus_settings(corpus_home, mcp_tokens="s3cret")
    app = build_app(settings, embedder=embedder, warm=False)
    with TestClient(app, base_url=ORIGIN) as client:
        for path in ("/api/graph", "/graph", "/graph/static/graph/graph.js"):
            assert client.get(path).status_code == 401, path
        response = client.get("/api/graph", headers={"Authorization": "Bearer s3cret"})
        assert response.status_code == 200
        notify = response.json()["edges"][0]
        signature = file_signature(signing_key(["s3cret"]), "pdfs/retail-rules.pdf")
        assert notify["citation"] == f"{FILES}retail-rules.pdf?sig={signature}#page=1"
        # the signed link opens the PDF without the token
        assert client.get(notify["citation"].split("#")[0]).status_code == 200


def test_a_signed_page_link_opens_the_pages_in_a_browser_but_not_mcp_or_other_files(
    corpus_home: Path, embedder: HashingEmbedder
) -> None:
    settings = corpus_settings(corpus_home, mcp_tokens="s3cret")
    app = build_app(settings, embedder=embedder, warm=False)
    signature = page_signature(signing_key(["s3cret"]))
    with TestClient(app, base_url=ORIGIN) as client:
        assert client.get("/graph?sig=wrong").status_code == 401
        opened = client.get(f"/graph?sig={signature}")
        assert opened.status_code == 200
        assert opened.headers["set-cookie"] == (
            f"kb_pages={signature}; Path=/; HttpOnly; SameSite=Strict"
        )
        # the cookie now opens the page's script and JSON, as the browser would fetch them
        assert client.get("/graph/static/graph/graph.js").status_code == 200
        assert client.get("/api/graph").status_code == 200
        # but neither the MCP endpoint nor an unsigned file
        assert client.post("/mcp", json={}).status_code == 401
        assert client.get("/files/pdfs/retail-rules.pdf").status_code == 401
    assert page_lines(settings)[1] == f"knowledge graph {ORIGIN}/graph?sig={signature}"


def test_foreign_host_is_refused(client: TestClient) -> None:
    for path in ("/api/graph", "/graph"):
        response = client.get(path, headers={"Host": "attacker.example"})
        assert (response.status_code, response.text) == (421, "Invalid Host header")


def test_page_and_static_files(client: TestClient) -> None:
    page = client.get("/graph")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert '<script src="/graph/static/vendor/sigma-3.0.3.min.js">' in page.text
    script = client.get("/graph/static/vendor/sigma-3.0.3.min.js")
    assert (script.status_code, script.headers["content-type"]) == (
        200, "text/javascript; charset=utf-8"
    )
    assert client.get("/graph/static/vendor/licenses/sigma.txt").status_code == 200
    for missing in ("/graph/static/../pages/graph.py", "/graph/static/vendor/nothing.js",
                    "/graph/static/%2e%2e/pages/graph.py", "/graph/static/"):
        assert client.get(missing).status_code == 404, missing
    # every script the page names is served
    assert {"graph/index.html", "graph/graph.js", "graph/graph.css",
            "vendor/graphology-0.26.0.umd.min.js",
            "vendor/graphology-layout-forceatlas2-0.10.1.min.js"} <= set(static_files())


def test_edges_of_unready_documents_are_not_shown(
    tmp_path: Path, embedder: HashingEmbedder
) -> None:
    settings = corpus_settings(tmp_path)
    write_corpus(settings, embedder)
    # a failed re-build left Broken.pdf's edges in the graph
    broken = doc_id("Broken.pdf")
    store = factory.open_graph_store(settings)
    store.replace_document(
        broken,
        [Entity("Retailer", "Role"), Entity("Ombudsman", "Organisation")],
        [Relationship("retailer", "ombudsman", "REFERS_TO", "see the ombudsman", broken,
                      chunk_id(broken, 0))],
    )
    store.close()
    with TestClient(build_app(settings, embedder=embedder, warm=False), base_url=ORIGIN) as client:
        body = client.get("/api/graph").json()
        assert body["total"] == {"nodes": 6, "edges": 4}
        assert "ombudsman" not in {n["key"] for n in body["nodes"]}
        around = client.get("/api/graph", params={"seed": "retailer"}).json()
        assert [e["type"] for e in around["edges"]] == ["MUST_NOTIFY", "DEFINES"]
        retailer = next(n for n in around["nodes"] if n["key"] == "retailer")
        assert retailer["degree"] == 3  # degrees count the whole graph


# -- the page in Chromium --------------------------------------------------------------------


@pytest.fixture(scope="module")
def base(corpus_home: Path, embedder: HashingEmbedder) -> Iterator[str]:
    """``http://127.0.0.1:{port}`` of the kb app under uvicorn in a thread (links point here)."""
    with served(corpus_home, embedder) as url:
        yield url


def open_graph(page: Any, url: str) -> None:
    """Open the page and wait until its first load has finished."""
    page.goto(url)
    page.wait_for_function("() => window.kbGraph && window.kbGraph.ready")


def click_node(page: Any, key: str) -> None:
    """A real mouse click on ``key`` once nothing moves: the layout stopped, the camera back
    on the whole graph."""
    page.evaluate("kbGraph.stopLayout()")
    page.wait_for_function("() => !kbGraph.camera().isAnimated()")
    page.evaluate("kbGraph.camera().setState({x: 0.5, y: 0.5, ratio: 1, angle: 0})")
    # sigma finds the clicked node in what it last drew: let two frames draw the still graph
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    position = page.evaluate("key => kbGraph.nodePosition(key)", key)
    page.mouse.click(position["x"], position["y"])
    page.wait_for_function("key => kbGraph.selected() === key", arg=key)


def test_page_draws_the_graph(browser_page: Any, base: str) -> None:
    open_graph(browser_page, base + "/graph")
    assert browser_page.evaluate("[kbGraph.order(), kbGraph.size()]") == [6, 4]
    assert browser_page.inner_text("#counts") == "6 entities · 4 relationships shown"
    assert browser_page.is_hidden("#truncated")
    assert browser_page.inner_text("#legend") == "Role (6)"
    browser_page.wait_for_function("() => kbGraph.firstPaintMs !== null")
    # the drawing area is not blank: count the non-white pixels of a screenshot of it
    shot = pymupdf.Pixmap(browser_page.locator("#graph").screenshot())
    samples = shot.samples
    inked = sum(
        1 for i in range(0, len(samples), shot.n) if samples[i : i + 3] != b"\xff\xff\xff"
    )
    assert inked > 500

    # the layout can be stopped and run again
    browser_page.evaluate("kbGraph.stopLayout()")
    assert browser_page.inner_text("#layout-toggle") == "Run layout"
    browser_page.click("#layout-toggle")
    assert browser_page.evaluate("kbGraph.layoutRunning()") is True
    assert browser_page.inner_text("#layout-toggle") == "Stop layout"
    browser_page.click("#layout-toggle")
    assert browser_page.evaluate("kbGraph.layoutRunning()") is False
    assert browser_page.kb_errors == []


def test_search_finds_an_entity_and_a_click_lists_cited_relationships(
    browser_page: Any, base: str
) -> None:
    open_graph(browser_page, base + "/graph")
    browser_page.fill("#search-input", "life support")
    browser_page.click("#search button")
    browser_page.wait_for_function("() => kbGraph.selected() === 'life support register'")
    assert browser_page.inner_text("#details h2") == "Life support register"

    click_node(browser_page, "retailer")
    assert browser_page.inner_text("#details h2") == "Retailer"
    items = browser_page.locator("#details .relationships li")
    assert items.count() == 2  # by relationship type
    assert items.nth(0).inner_text().startswith("DEFINES → Customer")
    notify = items.nth(1).inner_text()
    assert "MUST_NOTIFY → Distributor" in notify
    assert "must notify the distributor within 5 business days" in notify
    assert "Retail Rules.pdf, p. 1 · chunk retail-rules.pdf-1" in notify
    links = browser_page.eval_on_selector_all(
        "#details a.citation", "links => links.map(a => a.href)"
    )
    assert links == [
        f"{base}/files/pdfs/retail-rules.pdf", f"{base}/files/pdfs/retail-rules.pdf#page=1",
    ]
    for link in links:
        response = httpx.get(link)
        assert (response.status_code, response.headers["content-type"]) == (200, "application/pdf")

    # a neighbour in the list is clickable
    browser_page.click("#details button[data-node='distributor']")
    browser_page.wait_for_function("() => kbGraph.selected() === 'distributor'")
    assert browser_page.locator("#details .relationships li").count() == 2
    assert browser_page.kb_errors == []


@pytest.fixture(scope="module")
def repeated_base(tmp_path_factory: pytest.TempPathFactory, embedder: HashingEmbedder) -> Iterator[str]:
    """The app on the corpus with a graph where Retailer MUST_NOTIFY Distributor was found in
    two chunks (1 and 2, on pp. 1 and 2) and Retailer DEFINES Customer in chunk 0."""
    home = tmp_path_factory.mktemp("kbrepeated")
    settings = corpus_settings(home)
    write_corpus(settings, embedder, graph=False)
    write_home_graph(settings, embedder, {"retail-rules.pdf": (
        ("Retailer", "MUST_NOTIFY", "Distributor",
         "must notify the distributor within 5 business days", 1),
        ("Retailer", "MUST_NOTIFY", "Distributor",
         "notices go to the distributor by market notice", 2),
        ("Retailer", "DEFINES", "Customer", "a customer is a person buying energy", 0),
    )})
    with served(home, embedder) as url:
        yield url


def test_a_relationship_found_in_several_chunks_is_one_item_with_each_citation(
    browser_page: Any, repeated_base: str
) -> None:
    open_graph(browser_page, repeated_base + "/graph")
    assert browser_page.evaluate("kbGraph.size()") == 3
    click_node(browser_page, "retailer")
    items = browser_page.locator("#details .relationships li")
    assert items.count() == 2
    assert items.nth(0).inner_text().startswith("DEFINES → Customer")
    notify = items.nth(1)
    assert notify.inner_text().startswith("MUST_NOTIFY → Distributor")
    assert notify.locator(".description").all_inner_texts() == [
        "must notify the distributor within 5 business days",
        "notices go to the distributor by market notice",
    ]
    assert notify.locator(".source").all_inner_texts() == [
        "Retail Rules.pdf, p. 1 · chunk retail-rules.pdf-1",
        "Retail Rules.pdf, p. 2 · chunk retail-rules.pdf-2",
    ]
    assert browser_page.inner_text("#details h3") == "2 relationships shown (3 citations)"
    assert browser_page.kb_errors == []


def test_document_filter_rebuilds_with_new_counts(browser_page: Any, base: str) -> None:
    open_graph(browser_page, base + "/graph")
    assert browser_page.inner_text("#counts") == "6 entities · 4 relationships shown"
    browser_page.select_option("#doc-filter", "dispatch-procedure.pdf")
    browser_page.wait_for_function("() => kbGraph.loads === 2")
    assert browser_page.inner_text("#counts") == "2 entities · 1 relationship shown"
    assert browser_page.evaluate("[kbGraph.order(), kbGraph.size()]") == [2, 1]
    assert "doc=dispatch-procedure.pdf" in browser_page.url
    browser_page.select_option("#doc-filter", "")
    browser_page.wait_for_function("() => kbGraph.loads === 3")
    assert browser_page.evaluate("kbGraph.size()") == 4
    assert browser_page.kb_errors == []


def test_truncated_view_says_so_and_expands_on_demand(browser_page: Any, base: str) -> None:
    open_graph(browser_page, base + "/graph?limit=1")
    assert browser_page.is_visible("#truncated")
    assert browser_page.inner_text("#truncated") == (
        "Truncated: showing the 1 best-connected of 4 relationships (limit 1). Filter by "
        "document or type, or search an entity, to see the rest."
    )
    assert browser_page.inner_text("#counts") == "2 entities · 1 relationship shown of 4"

    click_node(browser_page, "retailer")
    browser_page.click("#details button.expand")
    browser_page.wait_for_function("() => kbGraph.size() === 2")
    assert browser_page.locator("#details .relationships li").count() == 2

    # an entity outside the view is fetched as a neighbourhood
    browser_page.fill("#search-input", "Scheduled generator")
    browser_page.click("#search button")
    browser_page.wait_for_function("() => kbGraph.selected() === 'scheduled generator'")
    assert browser_page.evaluate("kbGraph.size()") == 3
    browser_page.fill("#search-input", "Nobody at all")
    browser_page.click("#search button")
    browser_page.wait_for_selector("#message:not([hidden])")
    assert browser_page.inner_text("#message") == (
        "No entity named \u201cNobody at all\u201d in this view or the graph."
    )
    assert browser_page.kb_errors == []


def test_bad_query_in_the_page_url_shows_the_reason(browser_page: Any, base: str) -> None:
    open_graph(browser_page, base + "/graph?limit=9999")
    assert browser_page.inner_text("#message") == (
        "The graph could not be loaded: limit must be a whole number from 1 to 6000, got '9999'"
    )
