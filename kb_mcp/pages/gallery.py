"""The figure gallery (issue 13, "Figure gallery"): one document's figures as thumbnails, read
from the vector index, each with its page and description and links to the full-resolution
PNG and to its source page.

Routes (``register``):

* ``GET /documents/{doc_id}/figures`` — an HTML page (no script; styles inline);
  ``?format=json`` gives the JSON instead.
* ``GET /api/documents/{doc_id}/figures`` — the JSON (``gallery_json``).

A doc_id that is unknown or not ``ready`` is a 404 (the serving rule of ``kb_mcp.documents``:
a document that is not ready is never served). Links are the citation links the server hands
out (``kb_mcp.links.links_for``): ``/files/…``, signed when bearer tokens are set, so the
images open in a browser without the token. Access rules are the ``/files`` ones
(``kb_mcp.http.AccessMiddleware``, ``PAGE_PREFIXES``).
"""

from __future__ import annotations

import html
import logging
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from kb_mcp.documents import serving_keys
from kb_mcp.links import Links, links_for
from kb_mcp.pages.style import BASE_STYLE
from kb_mcp.state import ServerState, StateHolder
from kb_mcp.tools import KbServer
from kb_shared import layout
from kb_shared.search.citations import PointPayload
from kb_shared.errors import EmptyCorpusError, KbError, SchemaMissingError
from kb_shared.identity import is_doc_id
from kb_shared.settings import Settings
from kb_shared.stores.catalog import DocumentRow, DocumentStatus
from kb_shared.stores.vectors import KIND_FIGURE

log = logging.getLogger(__name__)

#: The HTML page; ``{doc_id}`` is one path segment (doc_ids match ``^[a-z0-9][a-z0-9._-]*$``,
#: ``kb_shared.identity.doc_id``).
PAGE_PATH = "/documents/{doc_id}/figures"

#: The JSON of the same gallery.
API_PATH = "/api/documents/{doc_id}/figures"


@dataclass(frozen=True, slots=True)
class GalleryFigure:
    """One figure of the gallery.

    Attributes:
        id: figure id ``{doc_id}#figure-{n}``.
        number: 1-based figure number in the document (``None`` when not recorded).
        page: 1-based page the figure is on, ``None`` when unknown.
        caption / description: the caption found near it and its indexed description.
        figure_url: the full-resolution PNG; ``thumbnail_url``: its inline copy (1024 px at
            most), the full PNG when there is none; ``page_url``: the PDF at ``page``.
        width_px / height_px: size of the full-resolution PNG when recorded, else ``None``.
    """

    id: str
    number: int | None
    page: int | None
    page_label: str
    caption: str
    description: str
    figure_url: str | None
    thumbnail_url: str | None
    page_url: str | None
    width_px: int | None
    height_px: int | None


@dataclass(frozen=True, slots=True)
class Gallery:
    """A ready document and its figures, in figure-number order."""

    document: DocumentRow
    url: str | None
    figures: list[GalleryFigure]


def gallery_figure(
    point_id: str, payload: PointPayload, text: str, links: Links, present: Collection[str]
) -> GalleryFigure:
    """The gallery entry of one stored figure point; ``present`` holds the blob keys that
    exist, so a figure whose PNG was never stored gets no image link (a dead link helps no
    one)."""
    figure = payload.figure
    stored = figure.stored_key if figure is not None and figure.stored_key in present else ""
    inline = figure.inline_key if figure is not None and figure.inline_key in present else ""
    inline = inline or stored
    return GalleryFigure(
        id=point_id,
        number=figure.number if figure is not None else None,
        page=payload.page_start,
        page_label=payload.page_label_start,
        caption=figure.caption if figure is not None else "",
        description=text.strip(),
        figure_url=links.file(stored),
        thumbnail_url=links.file(inline),
        page_url=links.page(payload.pdf_key, payload.page_start),
        width_px=(figure.width_px or None) if figure is not None else None,
        height_px=(figure.height_px or None) if figure is not None else None,
    )


def read_gallery(state: ServerState, doc_id: str, links: Links) -> Gallery | None:
    """The gallery of ``doc_id``, or ``None`` when no ready document has that doc_id (and,
    without asking the catalog, when ``doc_id`` is not shaped like one: ``is_doc_id``; a
    path segment may hold anything, a NUL that Postgres refuses in a query included).

    Raises:
        StoreError / StoreUnavailableError / EmbeddingMismatchError: a store failed.
        OSError: the blob store could not list the document's figure renders.
    """
    if not is_doc_id(doc_id):
        return None
    try:
        row = state.catalog.find_by_doc_id(doc_id)
    except SchemaMissingError:  # a fresh KB_HOME: nothing added yet
        return None
    if row is None or row.status != DocumentStatus.READY:
        return None
    # a new version's points and renders live under its version key (``doc@v2``)
    key = serving_keys(state.catalog).get(doc_id, doc_id)
    try:
        index = state.vectors()
    except EmptyCorpusError:  # a ready text document before any index exists: no figures
        points = []
    else:
        points = index.fetch(index.list_ids(document=key, kind=KIND_FIGURE))
    present = set(state.blobs.list(layout.figures_prefix(key))) if points else set()
    figures = [
        gallery_figure(p.id, PointPayload.from_payload(p.payload), p.text, links, present)
        for p in points
    ]
    figures.sort(key=lambda f: (f.number is None, f.number or 0, f.id))
    return Gallery(document=row, url=links.file(row.blob_key), figures=figures)


def gallery_json(gallery: Gallery) -> dict[str, Any]:
    """The JSON body: the document's ids, title and PDF URL, and each figure's fields
    (``GalleryFigure``)."""
    row = gallery.document
    return {
        "doc_id": row.doc_id,
        "name": row.name,
        "title": row.title or row.name,
        "version": row.version or None,
        "pages": row.pages,
        "url": gallery.url,
        "figures": [
            {
                "id": f.id, "number": f.number, "page": f.page, "page_label": f.page_label or None,
                "caption": f.caption,
                "description": f.description, "figure_url": f.figure_url,
                "thumbnail_url": f.thumbnail_url, "page_url": f.page_url,
                "width_px": f.width_px, "height_px": f.height_px,
            }
            for f in gallery.figures
        ],
    }


_STYLE = BASE_STYLE + """ul { list-style: none; padding: 0; display: grid; gap: 16px;
     grid-template-columns: repeat(auto-fill, minmax(260px, 1fr)); }
li { border: 1px solid #d5dae3; border-radius: 8px; padding: 10px; }
li img { display: block; max-width: 100%; max-height: 220px; margin: 0 auto 8px; background: #fff; }
li p { margin: 4px 0; white-space: pre-wrap; }
"""


def _attr(value: str | None) -> str:
    return html.escape(value or "", quote=True)


def _page_name(figure: GalleryFigure) -> str:
    """``"page 6"``, or ``"page iv (PDF page 6)"`` when the printed label differs (issue 16,
    "Printed page labels")."""
    label = figure.page_label.strip()
    if not label or label == str(figure.page):
        return f"page {figure.page}"
    return f"page {label} (PDF page {figure.page})"


def _figure_html(figure: GalleryFigure) -> str:
    label = f"Figure {figure.number}" if figure.number is not None else "Figure"
    where = f" · {_page_name(figure)}" if figure.page is not None else " · page unknown"
    image = (
        f'<a href="{_attr(figure.figure_url)}"><img src="{_attr(figure.thumbnail_url)}" '
        f'alt="{_attr(figure.caption or label)}" loading="lazy"></a>'
        if figure.thumbnail_url
        else '<p class="muted">No image stored.</p>'
    )
    description = figure.description
    if figure.caption and figure.caption not in description:
        description = f"{figure.caption}\n{description}".strip()
    links = []
    if figure.figure_url:
        links.append(f'<a class="full" href="{_attr(figure.figure_url)}">Full resolution</a>')
    if figure.page_url:
        page = f"Source {_page_name(figure)}" if figure.page is not None else "Source PDF"
        links.append(f'<a class="source" href="{_attr(figure.page_url)}">{page}</a>')
    return (
        f'<li id="{_attr(figure.id)}">{image}<p><strong>{html.escape(label)}</strong>'
        f'<span class="muted">{html.escape(where)}</span></p>'
        f"<p>{html.escape(description)}</p><p>{' · '.join(links)}</p></li>"
    )


def gallery_html(gallery: Gallery) -> str:
    """The gallery page: the document's title and PDF link, then one card per figure."""
    row = gallery.document
    title = row.title or row.name
    version = f" — {row.version}" if row.version else ""
    count = len(gallery.figures)
    cards = "".join(_figure_html(f) for f in gallery.figures)
    body = f"<ul>{cards}</ul>" if cards else '<p class="muted">This document has no figures.</p>'
    pdf = f' · <a href="{_attr(gallery.url)}">PDF</a>' if gallery.url else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<link rel="icon" href="data:,">'  # no /favicon.ico request (the server has none)
        f"<title>Figures — {html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}{html.escape(version)}</h1>"
        f'<p class="muted">{count} figure{"" if count == 1 else "s"} of {html.escape(row.name)}'
        f' ({html.escape(row.doc_id)}){pdf} · <a href="?format=json">JSON</a></p>'
        f"{body}</body></html>"
    )


def _problem(status: int, message: str, as_json: bool) -> Response:
    if as_json:
        return JSONResponse({"error": message}, status_code=status)
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>kb figures</title>'
        f"</head><body><p>{html.escape(message)}</p></body></html>"
    )
    return HTMLResponse(page, status_code=status)


def register(mcp: KbServer, *, holder: StateHolder, settings: Settings) -> None:
    """Add the gallery routes (module docstring) to ``mcp``; they read the state ``holder``
    publishes and link through ``links_for(settings)``."""
    links = links_for(settings)

    async def answer(request: Request, as_json: bool) -> Response:
        doc_id = request.path_params["doc_id"]
        if not holder.ready:
            return _problem(503, "the server is starting or stopping; retry in a moment", as_json)
        try:
            gallery = await anyio.to_thread.run_sync(read_gallery, holder.state, doc_id, links)
        except (KbError, OSError) as exc:
            log.warning("figure gallery of %s failed: %s", doc_id, exc)
            return _problem(503, f"the figures cannot be read now: {exc}", as_json)
        if gallery is None:
            return _problem(404, f"no ready document has doc_id {doc_id!r}", as_json)
        if as_json:
            return JSONResponse(gallery_json(gallery))
        return HTMLResponse(gallery_html(gallery))

    @mcp.custom_route(PAGE_PATH, methods=["GET"])
    async def figures_page(request: Request) -> Response:
        return await answer(request, request.query_params.get("format") == "json")

    @mcp.custom_route(API_PATH, methods=["GET"])
    async def figures_api(request: Request) -> Response:
        return await answer(request, True)
