"""The upload page's HTTP server: a Starlette app that serves the page (``static/``, no CDN)
and its JSON API over ``UploadService``.

Routes (JSON unless said otherwise):

* ``GET /`` — the page; ``/static/…`` its script and style.
* ``GET /api/config`` — the size limit, the document suffixes, the Dagster UI's URL.
* ``POST /api/check`` ``{"files": [{"name", "size", "sha256"?}], "new_version": false}`` —
  each file's verdict before any byte is sent (``checks.check_files``); a name already in the
  corpus says whether it can be sent as a new version (``new_version_possible``) and whether
  it is a name clash or a duplicate (``name_clash``; ``null`` until a SHA-256 tells).
* ``PUT /api/files?name=…[&new_version=1 | &edition_of=DOC]`` — one file's bytes as the
  request body (``Content-Length`` required); checked again, streamed to a temporary file
  (stopped past the limit), admitted (``intake.admit``; with ``new_version=1`` as the next
  version of the document of that name, as ``kb add --new-version``; with ``edition_of`` as
  the next edition of that document, as ``kb add --edition-of``). 201 added
  (``outcome.version`` is the version it became), 200 duplicate, 400 an edition link refused
  before reading the body, 409 refused before reading the body, 413 over the limit, 422
  refused after the transfer.
* ``GET /api/builds?hours=`` — ``builds.recent_builds``; ``GET /api/tasks`` — the worker.
* ``POST /api/runs/{run_id}/retry``, ``POST /api/documents/{doc}/rebuild/{asset}``,
  ``POST /api/documents/{doc}/build`` (a pending document, when no sensor builds it),
  ``POST /api/requests/{id}/approve`` — queued on the worker (202 with the task).
* ``GET /api/documents/{doc}/changes`` — what changed in its serving version since the
  previous issue (``UploadService.changes``: compare_versions' structured content).
* ``GET /api/documents``, ``DELETE /api/documents/{doc}``, ``GET /api/requests``,
  ``POST /api/requests/{id}/reject`` ``{"reason"}``.

Access (``UploadAccess``) follows the MCP server's rules (``kb_shared.access``): loopback
only unless tokens (``KB_MCP_TOKENS``) or ``public``; with tokens every ``/api`` request needs
``Authorization: Bearer``; every request's Host header must be allowed (DNS rebinding). A
request that changes something must also carry ``X-KB-Upload: 1``: a header a cross-site
form cannot send and a cross-site script cannot add without a CORS preflight this server
never grants, so another web page cannot upload or delete through a person's browser.
"""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio.to_thread
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from kb_assets.constants import CORPUS_ASSETS, REBUILDABLE
from kb_assets.intake import IntakeStatus
from kb_assets.upload.service import DEFAULT_HOURS, UploadService
from kb_shared.access import bearer_authorised, exposure_problem, host_allowed, host_patterns
from kb_shared.errors import (
    DocumentBusyError,
    DocumentNotFoundError,
    ExposureError,
    IntakeError,
    KbError,
    RequestNotFoundError,
    RequestRefusedError,
    StoreError,
)
from kb_shared.providers.text_markdown import DOCUMENT_SUFFIXES
from kb_shared.settings import Settings

#: The page's files (package data: ``kb_assets/upload/static/*``).
STATIC = Path(__file__).resolve().parent / "static"

#: The header every changing request carries (module docstring).
CHANGE_HEADER = "x-kb-upload"

#: Most hours of builds one listing may ask for.
MAX_HOURS = 7 * 24.0

#: HTTP status of an upload's outcome.
OUTCOME_CODES = {IntakeStatus.ADDED: 201, IntakeStatus.DUPLICATE: 200, IntakeStatus.REFUSED: 422}

_SAFE_METHODS = ("GET", "HEAD")

#: The page loads nothing from elsewhere (no CDN: the product runs offline).
PAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-cache",
}


class UploadAccess:
    """Host check on every request, bearer tokens on ``/api`` (when configured) and the
    change header on every request that is not GET/HEAD (module docstring)."""

    def __init__(self, app: ASGIApp, tokens: list[str], hosts: list[str]) -> None:
        self.app = app
        self.tokens = [t.encode("utf-8") for t in tokens]
        self.hosts = hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        path: str = scope.get("path", "")
        refusal: Response | None = None
        if not host_allowed(headers.get("host"), self.hosts):
            refusal = PlainTextResponse("Invalid Host header", status_code=421)
        elif path.startswith("/api/") and self.tokens and not bearer_authorised(
            headers.get("authorization", ""), self.tokens
        ):
            refusal = JSONResponse(
                {"error": "unauthorized: send 'Authorization: Bearer <token>' (KB_MCP_TOKENS)"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="kb"'},
            )
        elif scope.get("method") not in _SAFE_METHODS and headers.get(CHANGE_HEADER) != "1":
            refusal = JSONResponse(
                {"error": f"a change needs the {CHANGE_HEADER} header (sent by the page)"},
                status_code=403,
            )
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _call(function: Callable[..., Any], *args: Any) -> Any:
    return await anyio.to_thread.run_sync(lambda: function(*args))


def _guarded(
    handler: Callable[[Request, UploadService], Awaitable[Response]], service: UploadService
) -> Callable[[Request], Awaitable[Response]]:
    """``handler`` with kb's errors as JSON answers: not found 404, refused or busy 409, bad
    input 400, the catalog or instance unreachable 503."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request, service)
        except (DocumentNotFoundError, RequestNotFoundError) as error:
            return _error(404, str(error))
        except (RequestRefusedError, DocumentBusyError) as error:
            return _error(409, str(error))
        except (IntakeError, StoreError) as error:
            return _error(503, str(error))
        except (ValueError, KbError) as error:
            return _error(400, str(error))

    return endpoint


async def _page(request: Request) -> Response:
    return FileResponse(STATIC / "index.html", media_type="text/html", headers=PAGE_HEADERS)


def gallery_template(settings: Settings) -> str:
    """URL of a document's figure gallery on the MCP server (``kb_mcp.pages.gallery``), with
    ``{doc_id}`` to fill in: ``KB_PUBLIC_URL`` or the server's own address."""
    host = settings.mcp_host if ":" not in settings.mcp_host else f"[{settings.mcp_host}]"
    base = (settings.public_url or f"http://{host}:{settings.mcp_port}").rstrip("/")
    return f"{base}/documents/{{doc_id}}/figures"


async def _config(request: Request, service: UploadService) -> Response:
    return JSONResponse(
        {
            "max_bytes": service.max_bytes,
            "suffixes": list(DOCUMENT_SUFFIXES),
            "dagster_url": service.dagster_url,
            "gallery_url": gallery_template(service.settings),
            "hours": DEFAULT_HOURS,
            "assets": list(CORPUS_ASSETS),
            "rebuildable": list(REBUILDABLE),
        }
    )


#: The query values of ``new_version`` on ``PUT /api/files``.
FLAG_VALUES = {"": False, "0": False, "false": False, "1": True, "true": True}


async def _check(request: Request, service: UploadService) -> Response:
    body = await request.json()
    files = body.get("files") if isinstance(body, dict) else None
    new_version = body.get("new_version", False) if isinstance(body, dict) else False
    if not isinstance(files, list) or not isinstance(new_version, bool) or not all(
        isinstance(f, dict) and isinstance(f.get("name"), str) and _is_size(f.get("size"))
        and _is_digest(f.get("sha256"))
        for f in files
    ):
        return _error(
            400,
            'send {"files": [{"name": "<file name>", "size": <bytes>, "sha256": "<optional: 64 '
            'hex digits>"}, …]} and optionally "new_version": true',
        )
    pairs = [(f["name"], f["size"]) for f in files]
    digests = [f["sha256"].lower() if f.get("sha256") else None for f in files]
    checks = await _call(
        lambda: service.check(pairs, new_version=new_version, sha256s=digests)
    )
    return JSONResponse({"files": [c.as_dict() for c in checks]})


def _is_size(value: object) -> bool:
    """Whether ``value`` is a file size: a whole number of bytes, 0 or more (JSON ``true`` is
    no size, though Python counts ``bool`` as ``int``)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_digest(value: object) -> bool:
    """Whether ``value`` is absent (``None``) or a SHA-256 hex digest (64 hex digits)."""
    if value is None:
        return True
    return isinstance(value, str) and len(value) == 64 and all(
        c in "0123456789abcdefABCDEF" for c in value
    )


async def _upload(request: Request, service: UploadService) -> Response:
    name = request.query_params.get("name", "")
    length = request.headers.get("content-length", "")
    if not length.isdigit():
        return _error(411, "send the file's size (Content-Length) with its bytes")
    size = int(length)
    flag = request.query_params.get("new_version", "").lower()
    if flag not in FLAG_VALUES:
        return _error(400, f"new_version must be 1 or 0, not {flag!r}")
    new_version = FLAG_VALUES[flag]
    edition_of = request.query_params.get("edition_of", "").strip() or None
    await _call(lambda: service.check_edition(edition_of, new_version=new_version))
    (check,) = await _call(lambda: service.check([(name, size)], new_version=new_version))
    if not check.accepted:
        return JSONResponse({"file": check.as_dict()}, status_code=409)
    with tempfile.TemporaryDirectory(prefix="kb-upload-") as folder:
        path = Path(folder) / name.strip()
        received = 0
        with path.open("wb") as out:
            async for block in request.stream():
                received += len(block)
                service.received[name] = received
                if received > service.max_bytes:
                    return _error(
                        413, f"over the {service.max_bytes:,}-byte limit (KB_MAX_UPLOAD_BYTES)"
                    )
                out.write(block)
        if received != size:
            return _error(
                400, f"the upload stopped after {received:,} of {size:,} bytes; send it again"
            )
        outcome = await _call(
            lambda: service.admit_file(path, new_version=new_version, edition_of=edition_of)
        )
    shown = {**outcome.as_dict(), "path": name}
    return JSONResponse({"outcome": shown}, status_code=OUTCOME_CODES[outcome.status])


async def _builds(request: Request, service: UploadService) -> Response:
    raw = request.query_params.get("hours", str(DEFAULT_HOURS))
    try:
        hours = float(raw)
    except ValueError:
        return _error(400, f"hours must be a number, not {raw!r}")
    if not 0 < hours <= MAX_HOURS:
        return _error(400, f"hours must be more than 0 and at most {MAX_HOURS:g}")
    return JSONResponse({"hours": hours, "builds": await _call(service.builds, hours)})


async def _tasks(request: Request, service: UploadService) -> Response:
    return JSONResponse({"tasks": service.tasks()})


async def _retry(request: Request, service: UploadService) -> Response:
    task = await _call(service.retry, request.path_params["run_id"])
    return JSONResponse({"task": task.as_dict()}, status_code=202)


async def _build(request: Request, service: UploadService) -> Response:
    task = await _call(service.build_pending, request.path_params["doc_id"])
    return JSONResponse({"task": task.as_dict()}, status_code=202)


async def _rebuild(request: Request, service: UploadService) -> Response:
    params = request.path_params
    task = await _call(service.rebuild, params["doc_id"], params["asset"])
    return JSONResponse({"task": task.as_dict()}, status_code=202)


async def _documents(request: Request, service: UploadService) -> Response:
    return JSONResponse({"documents": await _call(service.documents)})


async def _changes(request: Request, service: UploadService) -> Response:
    return JSONResponse(await _call(service.changes, request.path_params["doc_id"]))


async def _delete(request: Request, service: UploadService) -> Response:
    report = await _call(service.delete, request.path_params["doc_id"])
    return JSONResponse({"deleted": vars(report)})


async def _requests(request: Request, service: UploadService) -> Response:
    return JSONResponse({"requests": await _call(service.requests)})


async def _approve(request: Request, service: UploadService) -> Response:
    body = await request.json() if await request.body() else {}
    if not isinstance(body, dict) or not all(
        isinstance(body.get(key), str | None) for key in ("url", "name")
    ):
        return _error(400, 'send {} or {"url": "https://…", "name": "<document name>"}')
    task = await _call(
        lambda: service.approve(
            request.path_params["request_id"], url=body.get("url") or None,
            name=body.get("name") or None,
        )
    )
    return JSONResponse({"task": task.as_dict()}, status_code=202)


async def _reject(request: Request, service: UploadService) -> Response:
    body = await request.json() if await request.body() else {}
    reason = body.get("reason") if isinstance(body, dict) else None
    if not isinstance(reason, str) or not reason.strip():
        return _error(400, "a rejection needs a reason")
    row = await _call(service.reject, request.path_params["request_id"], reason)
    return JSONResponse({"request": row})


def build_app(
    service: UploadService, *, host: str = "127.0.0.1", public: bool = False
) -> Starlette:
    """The upload page's app on ``service``, for a server bound to ``host``.

    Args:
        public: the operator's consent to serve a non-loopback ``host`` without tokens.

    Raises:
        ExposureError: non-loopback ``host`` without tokens and without ``public``.
    """
    settings = service.settings
    problem = exposure_problem(host, settings.token_list, public, public_flag="--upload-public")
    if problem:
        raise ExposureError(problem)

    def api(handler: Callable[[Request, UploadService], Awaitable[Response]]) -> Any:
        return _guarded(handler, service)

    routes = [
        Route("/", _page, methods=["GET"]),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
        Route("/api/config", api(_config), methods=["GET"]),
        Route("/api/check", api(_check), methods=["POST"]),
        Route("/api/files", api(_upload), methods=["PUT"]),
        Route("/api/builds", api(_builds), methods=["GET"]),
        Route("/api/tasks", api(_tasks), methods=["GET"]),
        Route("/api/runs/{run_id}/retry", api(_retry), methods=["POST"]),
        Route("/api/documents", api(_documents), methods=["GET"]),
        Route("/api/documents/{doc_id}", api(_delete), methods=["DELETE"]),
        Route("/api/documents/{doc_id}/build", api(_build), methods=["POST"]),
        Route("/api/documents/{doc_id}/changes", api(_changes), methods=["GET"]),
        Route("/api/documents/{doc_id}/rebuild/{asset}", api(_rebuild), methods=["POST"]),
        Route("/api/requests", api(_requests), methods=["GET"]),
        Route("/api/requests/{request_id:int}/approve", api(_approve), methods=["POST"]),
        Route("/api/requests/{request_id:int}/reject", api(_reject), methods=["POST"]),
    ]
    hosts = host_patterns(
        host, public_url=None, extra=(settings.mcp_allowed_hosts or "").split(",")
    )
    app = Starlette(routes=routes)
    app.add_middleware(UploadAccess, tokens=settings.token_list, hosts=hosts)
    return app
