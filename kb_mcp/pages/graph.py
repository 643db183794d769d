"""The knowledge-graph page: ``GET /graph`` (the page), ``GET /api/graph`` (its JSON,
``kb_mcp.pages.graph_data``) and ``GET /graph/static/…`` (its script, style and the vendored
sigma.js / graphology files, ``kb_mcp/static/vendor/README.md``), served from the package: no
CDN, so the page works offline.

Access is the ``/files`` rule (``kb_mcp.http.AccessMiddleware`` covers ``/graph`` and
``/api/``). The page gets a Content-Security-Policy that allows its own origin only, plus
``blob:`` workers (the ForceAtlas2 layout runs in a web worker built from a blob URL).
"""

from __future__ import annotations

import logging
from pathlib import Path

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response

from kb_mcp.errors import ToolProblem
from kb_mcp.links import links_for
from kb_mcp.pages.graph_data import GraphQuery, graph_view
from kb_mcp.state import StateHolder
from kb_mcp.tools import KbServer
from kb_shared.errors import KbError
from kb_shared.settings import Settings

log = logging.getLogger(__name__)

PAGE_PATH = "/graph"
API_PATH = "/api/graph"
STATIC_PATH = "/graph/static"

#: The package folder the static route serves (the page's own files and ``vendor/``).
STATIC_ROOT = Path(__file__).resolve().parent.parent / "static"

#: The page's HTML, under ``STATIC_ROOT``.
PAGE_FILE = "graph/index.html"

#: Content types by extension of the files ``STATIC_ROOT`` holds.
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".md": "text/plain; charset=utf-8",
}

#: The page's policy: own origin only; blob: workers for the layout (module docstring).
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; worker-src blob:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)

_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}


def static_files(root: Path = STATIC_ROOT) -> dict[str, Path]:
    """Every servable file under ``root`` by its ``/``-separated relative path. The route
    looks names up here, so no request path can reach outside ``root``."""
    return {
        path.relative_to(root).as_posix(): path
        for path in sorted(root.rglob("*"))
        if path.is_file() and path.suffix in CONTENT_TYPES
    }


def register(mcp: KbServer, *, holder: StateHolder, settings: Settings) -> None:
    """Add ``/graph``, ``/api/graph`` and ``/graph/static/{path}`` to ``mcp``'s routes.

    ``/api/graph`` answers 400 with a plain-text reason for a bad query
    (``GraphQuery.parse``, an unknown or unready document), 503 while the server starts or a
    store is unreachable.
    """
    files = static_files()
    links = links_for(settings)

    @mcp.custom_route(PAGE_PATH, methods=["GET"])
    async def graph_page(_: Request) -> Response:
        if PAGE_FILE not in files:  # an install without the package data
            return PlainTextResponse(
                f"the graph page is not installed ({STATIC_ROOT / PAGE_FILE} is missing)",
                status_code=500,
            )
        return FileResponse(
            files[PAGE_FILE],
            media_type=CONTENT_TYPES[".html"],
            headers={**_HEADERS, "Content-Security-Policy": CONTENT_SECURITY_POLICY},
        )

    @mcp.custom_route(STATIC_PATH + "/{name:path}", methods=["GET"])
    async def graph_static(request: Request) -> Response:
        path = files.get(request.path_params.get("name", ""))
        if path is None:
            return PlainTextResponse("Not Found", status_code=404)
        return FileResponse(path, media_type=CONTENT_TYPES[path.suffix], headers=_HEADERS)

    @mcp.custom_route(API_PATH, methods=["GET"])
    async def graph_api(request: Request) -> Response:
        try:
            query = GraphQuery.parse(dict(request.query_params))
        except ValueError as exc:
            return PlainTextResponse(str(exc), status_code=400)
        try:
            state = holder.state
        except ToolProblem as exc:
            return PlainTextResponse(str(exc), status_code=503)
        try:
            body = await anyio.to_thread.run_sync(graph_view, state, query, links)
        except ValueError as exc:
            return PlainTextResponse(str(exc), status_code=400)
        except KbError as exc:
            log.warning("graph view failed: %s", exc)
            return PlainTextResponse(f"the graph cannot be read: {exc}", status_code=503)
        return JSONResponse(body, headers=_HEADERS)
