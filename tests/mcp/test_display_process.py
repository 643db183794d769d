"""display_process, the MCP App (issue 13): the tool and its ``ui://`` resource through the
SDK's in-memory client, the answer without a UI-capable host (search_docs' figure answer), and
the viewer in a real Chromium inside a small test host page that plays the host's side of the
postMessage protocol with a real tool result, its full-resolution images served by the real
HTTP app under uvicorn."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.extension import advertise
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID

from kb_mcp.server import build_server
from kb_mcp.tools import display_process
from kb_shared import layout
from kb_shared.search.citations import FigurePayload
from kb_shared.identity import figure_id
from kb_shared.providers.graph_vocabulary import DEFINED_AS
from kb_shared.stores import factory
from kb_shared.stores.vectors import KIND_FIGURE, Point
from tests.browser import browser_page, chromium  # noqa: F401 - fixtures
from tests.mcp.corpus import (
    RETAIL_ID,
    HashingEmbedder,
    corpus_settings,
    payload,
    served,
    tiny_png,
    write_corpus,
    write_home_graph,
)

#: The client capability a UI-capable host declares (MCP Apps, "Client capabilities").
APPS_CLIENT = [advertise(EXTENSION_ID, {"mimeTypes": [APP_MIME_TYPE]})]

FIGURE_3_TEXT = "Figure 3: Flow of a planned interruption notice"

#: Sizes of the PNGs this module stores: figure 1 wide (a process diagram), figure 3 small.
FULL_1, INLINE_1 = (1600, 240), (1024, 154)
FULL_3, INLINE_3 = (300, 200), (150, 100)


@pytest.fixture(scope="module")
def figure_home(tmp_path_factory: pytest.TempPathFactory, embedder: HashingEmbedder) -> Path:
    """The corpus of ``tests/mcp/corpus.py`` with figure 1 as a wide diagram (1600×240 PNG,
    1024×154 inline copy) and a figure 3 on page 2 (300×200, inline 150×100)."""
    return figure_corpus(tmp_path_factory.mktemp("kbfigures"), embedder)


@pytest.fixture(scope="module")
def acronym_home(tmp_path_factory: pytest.TempPathFactory, embedder: HashingEmbedder) -> Path:
    """``figure_home``'s corpus whose graph says "PIN" is defined as "planned interruption
    notice" (the abbreviation pair search_docs expands)."""
    home = figure_corpus(tmp_path_factory.mktemp("kbacronyms"), embedder)
    write_home_graph(corpus_settings(home), embedder, {RETAIL_ID: (
        ("PIN", DEFINED_AS, "planned interruption notice", "planned interruption notice (PIN)", 1),
    )})
    return home


def figure_corpus(home: Path, embedder: HashingEmbedder) -> Path:
    """Write ``figure_home``'s corpus into ``home`` and return it."""
    settings = corpus_settings(home)
    write_corpus(settings, embedder, graph=False)
    blobs = factory.open_blob_store(settings)
    first, third = layout.figure_keys(RETAIL_ID, 1), layout.figure_keys(RETAIL_ID, 3)
    blobs.put(first.stored, tiny_png(*FULL_1))
    blobs.put(first.inline, tiny_png(*INLINE_1))
    blobs.put(third.stored, tiny_png(*FULL_3))
    blobs.put(third.inline, tiny_png(*INLINE_3))
    figure = FigurePayload(
        number=3, caption=FIGURE_3_TEXT.split(": ", 1)[1], stored_key=third.stored,
        inline_key=third.inline, width_px=FULL_3[0], height_px=FULL_3[1],
    )
    index = factory.open_vector_index(settings)
    index.open(embedder.model, embedder.dimension)
    index.upsert([Point(
        id=figure_id(RETAIL_ID, 3), document=RETAIL_ID, kind=KIND_FIGURE, text=FIGURE_3_TEXT,
        dense=embedder.embed_documents([FIGURE_3_TEXT])[0],
        payload=payload(RETAIL_ID, (2, 2), figure=figure),
    )])
    index.close()
    return home


@pytest.fixture(scope="module")
def live(figure_home: Path, embedder: HashingEmbedder) -> Iterator[str]:
    """The kb HTTP app on ``figure_home`` under uvicorn (it serves the figures' ``/files``
    links); yields its base URL, which is also the base of the links the tool hands out."""
    with served(figure_home, embedder) as base:
        yield base


def server_for(home: Path, embedder: HashingEmbedder, base: str = "http://127.0.0.1:8765"):
    """An in-process kb server on ``home`` whose links point at ``base``."""
    port = int(base.rsplit(":", 1)[1])
    return build_server(corpus_settings(home, mcp_port=port), embedder=embedder, warm=False)


async def call(server, tool: str, *, apps: bool, **arguments):
    async with Client(server, extensions=APPS_CLIENT if apps else None) as client:
        return await client.call_tool(tool, arguments)


async def figures_both_ways(server, query: str):
    """``query`` asked of display_process (no UI host) and of search_docs for its 4 best
    figures: ``(display_process result, search_docs result)``."""
    shown = await call(server, "display_process", apps=False, query=query)
    docs = await call(server, "search_docs", apps=False, query=query, kind="figure", top_k=4)
    return shown, docs


# ---------------------------------------------------------------------------------------------
# The tool and its resource
# ---------------------------------------------------------------------------------------------


def test_the_viewer_html_is_the_version_the_uri_names() -> None:
    html = display_process.viewer_html()
    assert hashlib.sha256(html.encode("utf-8")).hexdigest() == display_process.UI_SHA256, (
        "kb_mcp/ui/display_process.html changed: bump UI_VERSION (hosts cache the resource by "
        "URI) and record the new SHA-256 in UI_SHA256"
    )
    assert display_process.UI_URI == f"ui://kb/display-process/v{display_process.UI_VERSION}"
    # self-contained: no external script, style sheet or font (the product runs offline)
    for external in ("<script src", "<link", "@import", "url(http", "//cdn"):
        assert external not in html


@pytest.mark.anyio
async def test_tool_is_bound_to_its_ui_resource_served_as_an_mcp_app(
    figure_home: Path, embedder: HashingEmbedder
) -> None:
    server = server_for(figure_home, embedder)
    async with Client(server, extensions=APPS_CLIENT) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        listed = {r.uri: r for r in (await client.list_resources()).resources}
        read = await client.read_resource(display_process.UI_URI)
    tool = tools["display_process"]
    assert tool.meta == {"ui": {"resourceUri": "ui://kb/display-process/v1"}}
    assert (tool.annotations.read_only_hint, tool.annotations.idempotent_hint,
            tool.annotations.open_world_hint) == (True, True, False)
    assert set(tool.input_schema["properties"]) == {"query", "documents"}
    assert tool.input_schema["required"] == ["query"]
    assert tool.input_schema["properties"]["query"]["maxLength"] == 2000
    assert set(tool.output_schema["properties"]) == {
        "query", "figures", "low_confidence", "best_similarity", "view",
    }
    ui_meta = {"ui": {"csp": {"resourceDomains": ["http://127.0.0.1:8765"]}, "prefersBorder": True}}
    assert (listed[display_process.UI_URI].mime_type, listed[display_process.UI_URI].meta) == (
        "text/html;profile=mcp-app", ui_meta,
    )
    [content] = read.contents
    assert (content.mime_type, content.meta) == ("text/html;profile=mcp-app", ui_meta)
    assert content.text == display_process.viewer_html()


def test_stdio_links_declare_no_origin() -> None:
    """A stdio server's links are file:// ones, which no CSP can declare: the view then keeps
    to its data: images."""
    from kb_mcp.links import Links  # noqa: PLC0415

    assert display_process.resource_csp(Links("file:///kb/blobs", route="/")) is None
    csp = display_process.resource_csp(Links("https://kb.example.org/kb"))
    assert csp is not None and csp.resource_domains == ["https://kb.example.org"]


@pytest.mark.anyio
async def test_without_a_ui_host_it_answers_as_search_docs_does_for_figures(
    figure_home: Path, embedder: HashingEmbedder
) -> None:
    server = server_for(figure_home, embedder)
    shown, docs = await figures_both_ways(server, "notification flow")
    assert shown.is_error is False
    # the same text and image content search_docs gives for figure results
    assert [b.model_dump() for b in shown.content] == [b.model_dump() for b in docs.content]
    assert [b.type for b in shown.content] == ["text", "text", "image", "text", "image"]
    text = shown.content[0].text
    assert "[Open figure](http://127.0.0.1:8765/files/figures/retail-rules.pdf/figure-1.png)" in text
    inline = (figure_home / "blobs/figures/retail-rules.pdf/figure-1.inline.png").read_bytes()
    images = [b for b in shown.content if b.type == "image"]
    assert base64.b64decode(images[0].data) == inline
    structured = shown.structured_content
    assert structured["view"] is False
    # no data: URLs for a client without a view: the images are in the content already
    assert [f["image"] for f in structured["figures"]] == [None, None, None]


@pytest.mark.anyio
async def test_an_acronym_finds_the_figure_that_spells_it_out_as_in_search_docs(
    acronym_home: Path, embedder: HashingEmbedder
) -> None:
    server = server_for(acronym_home, embedder)
    shown, docs = await figures_both_ways(server, "What is the PIN?")
    # "PIN" is on no figure; asked about, it adds the long form the graph pairs it with, which
    # figure 3's caption spells out
    first = shown.structured_content["figures"][0]
    assert (first["figure_number"], first["page"]) == (3, 2)
    assert [b.model_dump() for b in shown.content] == [b.model_dump() for b in docs.content]


@pytest.mark.anyio
async def test_a_ui_host_gets_text_content_and_everything_the_view_renders(
    figure_home: Path, embedder: HashingEmbedder
) -> None:
    server = server_for(figure_home, embedder)
    result = await call(server, "display_process", apps=True, query="notification flow")
    assert result.is_error is False
    [block] = result.content
    assert block.type == "text"
    assert block.text.startswith("Results 1–3 (hybrid dense + keyword search, fused by rank).")
    assert block.text.endswith(display_process.VIEW_NOTE)
    assert "More results" not in block.text
    structured = result.structured_content
    assert (structured["query"], structured["view"], structured["low_confidence"]) == (
        "notification flow", True, False,
    )
    figures = {f["figure_number"]: f for f in structured["figures"]}
    assert structured["figures"][0]["figure_number"] == 1
    base = "http://127.0.0.1:8765/files"
    assert figures[1] == {
        "number": 1,
        "id": "retail-rules.pdf#figure-1",
        "doc_id": "retail-rules.pdf",
        "title": "Retail Market Rules",
        "version": "Version 2.1",
        "figure_number": 1,
        "page": 3,
        "caption": "Life support notification flow from retailer to distributor",
        "description": "Figure 1: Life support notification flow from retailer to distributor",
        "citation": "[1] Retail Market Rules — Version 2.1 — p. 3",
        "figure_url": f"{base}/figures/retail-rules.pdf/figure-1.png",
        "page_url": f"{base}/pdfs/retail-rules.pdf#page=3",
        "image": figures[1]["image"],
        "width_px": None,
        "height_px": None,
    }
    prefix = "data:image/png;base64,"
    assert figures[1]["image"].startswith(prefix)
    inline = (figure_home / "blobs/figures/retail-rules.pdf/figure-1.inline.png").read_bytes()
    assert base64.b64decode(figures[1]["image"][len(prefix):]) == inline
    assert (figures[3]["page"], figures[3]["width_px"], figures[3]["height_px"]) == (2, 300, 200)
    # figure 2 has no stored PNG: no image, its links kept, no page fragment
    assert figures[2]["image"] is None
    assert figures[2]["page_url"] == f"{base}/pdfs/retail-rules.pdf"


@pytest.mark.anyio
async def test_documents_filter_and_bad_arguments(figure_home: Path, embedder: HashingEmbedder) -> None:
    server = server_for(figure_home, embedder)
    none = await call(
        server, "display_process", apps=True, query="notification flow",
        documents=["Dispatch Procedure.pdf"],
    )
    assert none.is_error is False
    assert none.structured_content["figures"] == []
    assert none.content[0].text.startswith("No passage matched this query.")
    unknown = await call(server, "display_process", apps=True, query="flow", documents=["nope.pdf"])
    assert unknown.is_error is True
    assert unknown.content[0].text.startswith(
        "Error executing tool display_process: unknown document 'nope.pdf'"
    )
    empty = await call(server, "display_process", apps=False, query="   ")
    assert empty.is_error is True
    assert "the query is empty" in empty.content[0].text


@pytest.mark.anyio
async def test_low_confidence_is_flagged_and_the_model_gets_no_image(
    figure_home: Path, embedder: HashingEmbedder
) -> None:
    server = server_for(figure_home, embedder)
    query = "origami crane folding instructions"
    plain, docs = await figures_both_ways(server, query)
    assert [b.model_dump() for b in plain.content] == [b.model_dump() for b in docs.content]
    assert [b.type for b in plain.content] == ["text"]
    assert plain.content[0].text.startswith("The corpus has nothing that clearly matches this query")
    viewed = await call(server, "display_process", apps=True, query=query)
    [block] = viewed.content
    assert block.text == plain.content[0].text  # no "cite them" note under a low-confidence answer
    structured = viewed.structured_content
    assert structured["low_confidence"] is True
    # the view still shows the closest figures (under its "no figure clearly matches" notice)
    assert len(structured["figures"]) == 3
    assert sum(f["image"] is not None for f in structured["figures"]) == 2

# ---------------------------------------------------------------------------------------------
# The viewer in Chromium, inside a test host
# ---------------------------------------------------------------------------------------------

#: A minimal MCP Apps host: the View in a sandboxed iframe (scripts only, opaque origin) whose
#: CSP is built from the resource's ``_meta.ui.csp`` the way a host does; it answers
#: ``ui/initialize`` (offering ``openLinks``), sends the tool input and result once the View
#: says ``initialized``, and records what the View asks of it.
HOST_PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>test host</title></head>
<body><iframe id="view" sandbox="allow-scripts" style="width:800px;height:760px;border:0"></iframe>
<script>
window.host = { received: [], opened: [], sizes: [] };
window.startView = ({ html, csp, args, result }) => {
  const frame = document.getElementById("view");
  const images = ["data:"].concat((csp && csp.resourceDomains) || []).join(" ");
  const policy = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; " +
                 "img-src " + images + "; connect-src 'none'";
  const meta = '<meta http-equiv="Content-Security-Policy" content="' + policy + '">';
  window.addEventListener("message", (event) => {
    if (event.source !== frame.contentWindow) return;
    const message = event.data;
    window.host.received.push(message.method || "response");
    const reply = (body) => frame.contentWindow.postMessage(
      Object.assign({ jsonrpc: "2.0", id: message.id }, body), "*");
    if (message.method === "ui/initialize") {
      reply({ result: { protocolVersion: message.params.protocolVersion,
                        hostInfo: { name: "kb-test-host", version: "1" },
                        hostCapabilities: { openLinks: {} }, hostContext: {} } });
    } else if (message.method === "ui/notifications/initialized") {
      const send = (method, params) =>
        frame.contentWindow.postMessage({ jsonrpc: "2.0", method, params }, "*");
      send("ui/notifications/tool-input", { arguments: args });
      send("ui/notifications/tool-result", result);
    } else if (message.method === "ui/open-link") {
      window.host.opened.push(message.params.url);
      reply({ result: {} });
    } else if (message.method === "ui/notifications/size-changed") {
      window.host.sizes.push(message.params.height);
    }
  });
  frame.srcdoc = html.replace("<head>", "<head>" + meta);
};
</script></body></html>"""


def _tool_result_and_view(home: Path, embedder: HashingEmbedder, base: str) -> tuple[dict, dict]:
    """A real display_process result (as the host receives it, camelCase JSON) and the
    viewer resource (text and CSP), read with the in-process client of a server whose links
    point at ``base``."""

    async def fetch() -> tuple[dict, dict]:
        server = server_for(home, embedder, base)
        async with Client(server, extensions=APPS_CLIENT) as client:
            result = await client.call_tool("display_process", {"query": "notification flow"})
            read = await client.read_resource(display_process.UI_URI)
        [content] = read.contents
        wire = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        return wire, {"html": content.text, "csp": content.meta["ui"]["csp"]}

    # Playwright's sync API keeps an event loop running in this thread: run the client in another
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, fetch).result()


def _image(frame: Any) -> dict:
    return frame.locator("#figure").evaluate(
        "img => ({ natural: img.naturalWidth, shown: img.clientWidth, src: img.currentSrc, "
        "complete: img.complete })"
    )


def test_the_view_draws_toggles_switches_and_links_in_chromium(
    browser_page: Any, figure_home: Path, embedder: HashingEmbedder, live: str  # noqa: F811
) -> None:
    result, view = _tool_result_and_view(figure_home, embedder, live)
    assert view["csp"] == {"resourceDomains": [live]}
    page = browser_page
    page.set_content(HOST_PAGE)
    page.evaluate(
        "start => window.startView(start)",
        {**view, "args": {"query": "notification flow"}, "result": result},
    )
    frame = page.frame_locator("#view")
    files = f"{live}/files"

    # the best figure, drawn from its data: URL and fitted to the width
    frame.locator("#citation").wait_for()
    page.wait_for_function(
        "() => window.host.received.includes('ui/notifications/initialized')"
    )
    assert frame.locator("#status").text_content() == "3 figures for “notification flow”"
    assert frame.locator("#citation").text_content() == "[1] Retail Market Rules — Version 2.1 — p. 3"
    assert "Life support notification flow" in frame.locator("#description").text_content()
    frame.locator("#figure").evaluate("img => img.decode()")
    drawn = _image(frame)
    assert drawn["natural"] == INLINE_1[0]
    assert drawn["src"].startswith("data:image/png;base64,")
    assert 0 < drawn["shown"] < INLINE_1[0]  # fitted into the 800 px frame
    assert frame.locator("#crop-link").get_attribute("href") == (
        f"{files}/figures/retail-rules.pdf/figure-1.png"
    )
    assert frame.locator("#page-link").get_attribute("href") == (
        f"{files}/pdfs/retail-rules.pdf#page=3"
    )
    assert frame.locator("#page-link").text_content() == "Source page 3"

    # full resolution: the stored crop from the declared origin, at its natural size
    toggle = frame.locator("#toggle")
    assert toggle.get_attribute("aria-pressed") == "false"
    toggle.click()
    assert toggle.get_attribute("aria-pressed") == "true"
    assert toggle.text_content() == "Fit to width"
    frame.locator("#figure").evaluate("img => img.decode()")
    full = _image(frame)
    assert (full["natural"], full["shown"]) == (FULL_1[0], FULL_1[0])
    assert full["src"] == f"{files}/figures/retail-rules.pdf/figure-1.png"
    assert frame.locator("#full-note").is_hidden()
    toggle.click()
    frame.locator("#figure").evaluate("img => img.decode()")
    assert _image(frame)["shown"] < INLINE_1[0]

    # thumbnails: one per figure; a click switches the figure, its description and links
    thumbs = frame.locator("#thumbs button")
    assert thumbs.count() == 3
    labels = [thumbs.nth(i).locator("span").text_content() for i in range(3)]
    third = next(i for i, label in enumerate(labels) if "Figure 3" in label)
    thumbs.nth(third).click()
    assert thumbs.nth(third).get_attribute("aria-current") == "true"
    assert frame.locator("#citation").text_content().endswith("Retail Market Rules — Version 2.1 — p. 2")
    assert frame.locator("#description").text_content() == FIGURE_3_TEXT
    frame.locator("#figure").evaluate("img => img.decode()")
    assert _image(frame)["natural"] == INLINE_3[0]
    assert frame.locator("#crop-link").get_attribute("href") == (
        f"{files}/figures/retail-rules.pdf/figure-3.png"
    )
    assert frame.locator("#page-link").get_attribute("href") == f"{files}/pdfs/retail-rules.pdf#page=2"

    # figure 2 has no stored image: a placeholder, and its page link names the whole PDF
    second = next(i for i, label in enumerate(labels) if "Figure 2" in label)
    assert thumbs.nth(second).locator(".none").text_content() == "no image"
    thumbs.nth(second).click()
    assert frame.locator("#placeholder").is_visible()
    assert frame.locator("#figure").is_hidden()
    assert frame.locator("#page-link").text_content() == "Source PDF"

    # links open through the host's ui/open-link
    first = next(i for i, label in enumerate(labels) if "Figure 1" in label)
    thumbs.nth(first).click()
    frame.locator("#crop-link").click()
    frame.locator("#page-link").click()
    page.wait_for_function("() => window.host.opened.length === 2")
    assert page.evaluate("() => window.host.opened") == [
        f"{files}/figures/retail-rules.pdf/figure-1.png", f"{files}/pdfs/retail-rules.pdf#page=3",
    ]
    received = page.evaluate("() => window.host.received")
    assert received[:2] == ["ui/initialize", "ui/notifications/initialized"]
    assert page.evaluate("() => window.host.sizes.length") > 0
    assert page.kb_errors == []


def test_full_resolution_falls_back_to_the_inline_copy_when_the_origin_is_blocked(
    browser_page: Any, figure_home: Path, embedder: HashingEmbedder, live: str  # noqa: F811
) -> None:
    """A host that ignores the declared origin blocks the crop (CSP img-src data: only): the
    view says so and shows the inline copy at its natural size instead of an empty frame."""
    result, view = _tool_result_and_view(figure_home, embedder, live)
    page = browser_page
    page.set_content(HOST_PAGE)
    page.evaluate(
        "start => window.startView(start)",
        {"html": view["html"], "csp": None, "args": {}, "result": result},
    )
    frame = page.frame_locator("#view")
    frame.locator("#citation").wait_for()
    frame.locator("#toggle").click()
    frame.locator("#full-note").wait_for()
    assert frame.locator("#full-note").text_content().startswith(
        "The full-resolution image could not be loaded here"
    )
    frame.locator("#figure").evaluate("img => img.decode()")
    shown = _image(frame)
    assert (shown["natural"], shown["shown"]) == (INLINE_1[0], INLINE_1[0])
    assert shown["src"].startswith("data:image/png;base64,")
    assert page.kb_errors and all("Content Security Policy" in e for e in page.kb_errors)


def test_an_error_result_is_shown_as_its_message(browser_page: Any) -> None:  # noqa: F811
    page = browser_page
    page.set_content(HOST_PAGE)
    message = "Error executing tool display_process: unknown document 'nope.pdf'"
    error = {"content": [{"type": "text", "text": message}], "isError": True}
    page.evaluate(
        "start => window.startView(start)",
        {"html": display_process.viewer_html(), "csp": None, "args": {}, "result": error},
    )
    status = page.frame_locator("#view").locator("#status")
    page.wait_for_function("() => window.host.received.includes('ui/notifications/initialized')")
    status.filter(has_text="nope.pdf").wait_for()
    assert status.text_content() == message
    assert page.frame_locator("#view").locator("#viewer").is_hidden()
    assert page.kb_errors == []


