"""The ``display_process`` tool: figure search shown in an MCP App (issue 13).

It runs search_docs' search (``kb_mcp.tools.search_docs.run_search``: the same query embedding,
scope, acronym table and page-precise quotes) over figures only and is bound to the viewer
``UI_URI`` (``kb_mcp/ui/display_process.html``, served as ``text/html;profile=mcp-app``
through the SDK's ``mcp.server.apps``).

Rules (MCP Apps extension ``io.modelcontextprotocol/ui``, spec 2026-01-26;
``../shared/notes/next-capabilities.md``, "MCP Apps"):

* ``content`` stands alone: the text search_docs gives for figure results
  (``kb_mcp.render.docs_result``). A client that did not negotiate MCP Apps also gets the
  inline images search_docs gives; a UI-capable host gets the text only, since its view shows
  the images.
* ``structuredContent`` (``DisplayProcessOutput``) carries everything the view renders. For a
  UI-capable host each figure's inline copy is a ``data:`` URL (the default CSP allows
  ``data:`` images); its full-resolution crop is ``figure_url`` on this server, an origin the
  resource declares in ``_meta.ui.csp.resourceDomains`` (an undeclared origin fails silently).
* Hosts cache the resource by URI: ``UI_VERSION`` changes whenever the HTML does
  (``tests/mcp/test_display_process.py`` pins its SHA-256).

No ``from __future__ import annotations`` here (see ``kb_mcp.tools``).
"""

import base64
import dataclasses
from collections.abc import Sequence
from importlib import resources
from typing import Annotated
from urllib.parse import urlsplit

from mcp.server.apps import Apps, ResourceCsp, client_supports_apps
from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from kb_mcp import images, render
from kb_mcp.errors import reported
from kb_mcp.links import Links
from kb_mcp.tools import (
    READ_ONLY,
    DocumentsArg,
    KbContext,
    KbServer,
    check_search_query,
    lean_published_schemas,
    query_type,
    state_of,
)
from kb_mcp.tools.search_docs import run_search
from kb_shared.search.retrieval import DocsAnswer, Passage
from kb_shared.stores.vectors import KIND_FIGURE

NAME = "display_process"

#: Version of the viewer HTML; part of ``UI_URI``, so hosts never show a cached old copy.
UI_VERSION = 1

#: The viewer's ``ui://`` resource URI (``_meta.ui.resourceUri`` of the tool).
UI_URI = f"ui://kb/display-process/v{UI_VERSION}"

#: SHA-256 of ``kb_mcp/ui/display_process.html`` at ``UI_VERSION``; a test fails when the HTML
#: changes without a new version.
UI_SHA256 = "d138e28fa867791d9d4b81bfd5c869dad477ee28e84cab1af60188ad8942dd89"

#: Figures per answer: the inline-image cap (``kb_mcp.images.MAX_INLINE_IMAGES``), so every
#: figure the view shows can carry its image.
FIGURES_SHOWN = images.MAX_INLINE_IMAGES

#: The line a UI-capable host's text content ends with.
VIEW_NOTE = (
    "The figures are shown to the user in the display_process view (the best match large, "
    "the others as thumbnails); cite them by their [n] headers and pages."
)

DESCRIPTION = """\
Show the figures (process diagrams, flow charts) that best match a question, in a viewer
where the host supports MCP Apps, else as search_docs answers for figures. Use search_docs
for text and tables. Quote the [n] citations with their pages in your reply.
"""


class FigureView(BaseModel):
    """One figure as the viewer shows it."""

    number: int = Field(description="The n of the [n] citation header in the text content.")
    id: str = Field(description="Figure id '{doc_id}#figure-{n}'.")
    doc_id: str
    title: str = Field(description="The document's title.")
    version: str | None = None
    figure_number: int | None = Field(None, description="1-based figure number in the document.")
    page: int | None = Field(None, description="1-based page the figure is on; null when unknown.")
    caption: str = Field("", description="The caption found near the figure.")
    description: str = Field("", description="The figure's indexed description.")
    citation: str = Field(description="The citation header '[n] Title — Version — p. N'.")
    figure_url: str | None = Field(None, description="The full-resolution figure PNG.")
    page_url: str | None = Field(None, description="The source PDF at the figure's page.")
    image: str | None = Field(
        None,
        description=(
            "The figure's inline copy as a data:image/png URL, for an MCP Apps view; null for "
            "clients without one (they get the image as image content) or when it cannot be "
            "inlined."
        ),
    )
    width_px: int | None = Field(None, description="Width of the full-resolution PNG, pixels.")
    height_px: int | None = Field(None, description="Height of the full-resolution PNG, pixels.")


class DisplayProcessOutput(BaseModel):
    """Structured content of display_process: what its viewer renders."""

    query: str
    figures: list[FigureView] = Field(description="Best match first.")
    low_confidence: bool = Field(
        description="True when no figure clearly matches: the figures are the closest ones."
    )
    best_similarity: float | None = Field(
        None, description="Best cosine similarity of the query to any indexed figure."
    )
    view: bool = Field(
        description="True when the images are embedded for an MCP Apps view (data: URLs)."
    )


def viewer_html() -> str:
    """The viewer document, ``kb_mcp/ui/display_process.html`` (UTF-8 text)."""
    return resources.files("kb_mcp").joinpath("ui", "display_process.html").read_text("utf-8")


def resource_csp(links: Links) -> ResourceCsp | None:
    """The viewer's CSP declarations: the origin of ``links`` (where ``figure_url`` points) as
    a resource domain when it is an http(s) origin; ``None`` otherwise (a stdio server's
    ``file://`` links cannot be declared, so the view keeps to its ``data:`` images)."""
    parts = urlsplit(links.base)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return None
    return ResourceCsp(resource_domains=[f"{parts.scheme}://{parts.netloc}"])


def data_url(png: bytes) -> str:
    """``data:image/png;base64,…`` for PNG bytes (RFC 2397)."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def figure_view(passage: Passage, links: Links, png: bytes | None) -> FigureView:
    """The view of one figure result; ``png`` is its loaded inline copy, if embedded."""
    figure = passage.payload.figure
    cite = passage.citation
    return FigureView(
        number=passage.number,
        id=passage.point.id,
        doc_id=passage.point.document,
        title=cite.title,
        version=cite.version or None,
        figure_number=passage.figure_number,
        page=cite.page_start,
        caption=figure.caption if figure is not None else "",
        description=passage.point.text.strip(),
        citation=cite.header(passage.number),
        figure_url=links.file(figure.stored_key) if figure is not None else None,
        page_url=links.page(passage.payload.pdf_key, cite.page_start),
        image=data_url(png) if png is not None else None,
        width_px=(figure.width_px or None) if figure is not None else None,
        height_px=(figure.height_px or None) if figure is not None else None,
    )


def display_result(
    query: str,
    answer: DocsAnswer,
    links: Links,
    loaded: Sequence[tuple[Passage, bytes]],
    *,
    view: bool,
) -> CallToolResult:
    """The display_process result (module docstring).

    Args:
        query: the checked query.
        answer: a figure-only search_docs answer (its ``next_offset`` is not offered: the
            tool has no paging).
        loaded: the loaded inline images of the shown figures (``kb_mcp.images``).
        view: the client negotiated MCP Apps: images go to ``structuredContent`` as ``data:``
            URLs and the text content carries no image blocks.
    """
    answer = dataclasses.replace(answer, next_offset=None)
    # under a view the images travel in the structured content only: none as image blocks
    docs = render.docs_result(answer, links, () if view else loaded)
    by_number = {passage.number: png for passage, png in loaded}
    shown = render.shown_results(answer)
    structured = DisplayProcessOutput(
        query=query,
        figures=[
            figure_view(p, links, by_number.get(p.number) if view else None) for p in shown
        ],
        low_confidence=answer.low_confidence,
        best_similarity=(
            round(answer.best_similarity, 4) if answer.best_similarity is not None else None
        ),
        view=view,
    )
    first = docs.content[0]  # the text block (``render.tool_result``), then the images
    text = first.text if isinstance(first, TextContent) else ""
    if not view:
        return render.tool_result(text, structured, docs.content[1:])
    noted = shown and not answer.low_confidence  # no "cite them" under a low-confidence one
    return render.tool_result(f"{text}\n\n{VIEW_NOTE}" if noted else text, structured)


def lean_schemas(server: KbServer) -> None:
    """Publish ``display_process`` (added to ``server`` by the ``Apps`` extension, not by
    ``kb_tool``) with the lean schemas of every other tool (``lean_published_schemas``)."""
    lean_published_schemas(server, NAME)


def build_apps(*, links: Links, max_query_chars: int) -> Apps:
    """The MCP Apps extension holding ``display_process`` and its viewer resource; pass it to
    ``MCPServer(extensions=[…])``. Citations link through ``links``."""
    apps = Apps()
    query_arg = query_type(max_query_chars)

    def display_process(
        query: query_arg,
        ctx: KbContext,
        documents: DocumentsArg = None,
    ) -> Annotated[CallToolResult, DisplayProcessOutput]:
        state = state_of(ctx)
        text = check_search_query(query, max_query_chars)
        answer = run_search(
            state, text, top_k=FIGURES_SHOWN, documents=documents, kind=KIND_FIGURE
        )
        shown = render.shown_results(answer)
        view = client_supports_apps(ctx)
        # a low-confidence answer inlines no image for the model; the view still shows them
        wanted = shown if view or not answer.low_confidence else []
        loaded = images.figure_images(state.blobs, wanted)
        return display_result(text, answer, links, loaded, view=view)

    apps.tool(
        resource_uri=UI_URI,
        name=NAME,
        title="Display process figures",
        description=DESCRIPTION,
        annotations=READ_ONLY,
    )(reported(NAME)(display_process))
    apps.add_html_resource(
        UI_URI,
        viewer_html(),
        name="display-process",
        title="kb figure viewer",
        description="Shows display_process results: the best figure large, the others as "
        "thumbnails, with descriptions and links to the crop and its source page.",
        csp=resource_csp(links),
        prefers_border=True,
    )
    return apps
