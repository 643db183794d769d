"""The HTTP face of the server: Streamable HTTP at ``/mcp``, stored files at ``/files/…``, and
``/healthz`` for probes, in one Starlette app.

Decisions (issue 4, "Behaviour that users rely on"; DESIGN.md "The MCP server"):

* **Stateless JSON.** ``stateless_http=True, json_response=True`` — the mcp SDK marks it as
  recommended for a simple server (python-sdk ``examples/snippets/servers/streamable_config.py``).
  kb keeps no per-session state: its tools only read, and it sends no server-to-client
  requests, progress or subscriptions, so every POST is answered on its own with one JSON body.
  That needs no session affinity behind a load balancer and survives restarts.
* **POST only.** Stateless means no server-to-client stream either, so ``/mcp`` answers every
  other method at once with 405 and ``Allow: POST`` (``PostOnlyMiddleware``); the SDK would
  otherwise hold a ``GET`` open as an idle SSE stream with keep-alive pings (issue 10, defect
  5). MCP spec 2025-06-18, "Listening for Messages from the Server": a server that offers no
  stream MUST answer GET with 405.
* **Files.** ``GET /files/{blob key}`` serves stored PDFs and figure PNGs read-only, so every
  citation link resolves. Keys go through ``kb_shared.stores.blobs.check_key`` (no ``..``,
  absolute paths, backslashes or control characters, after percent-decoding) and must be ones
  ``kb_shared.layout.is_served`` accepts; anything else is a 404, the same answer as a
  missing file, so nothing is learnt by probing; so is a file of a document whose ``kb
  delete`` has begun (catalog status ``deleting``: ``blob_withdrawn``), as everywhere else in
  kb_mcp (``kb_mcp.documents`` module docstring). The one exception: the stored file of a
  version a newer one superseded answers 410 Gone with a page naming the versions and linking
  the current PDF (``superseded_page``), so a citation handed out before the new version
  neither dead-ends nor silently opens the new file. The superseded PDF itself is kept as the
  "before" side of what changed (issue 27), and served only to a link that asks for it
  (``?before=1``, ``links.BEFORE_PARAM``: compare_versions' links). Every spelling of one
  file answers alike: ``@`` or ``%40`` (decoded once by the ASGI server, never twice), and
  ``@v1`` or none for version 1 (``stored_spelling``).
* **Exposure.** Binding a non-loopback address needs bearer tokens (``KB_MCP_TOKENS``) or an
  explicit ``--public``; tokens, when set, are required on ``/mcp`` and ``/files`` whatever
  the address, except that a ``/files`` link the server itself handed out carries an HMAC
  signature of its blob key (``?sig=``) that opens that file alone, so citation links work
  in a browser. DNS-rebinding protection stays on (the SDK's ``TransportSecuritySettings``):
  Host headers must be loopback, the bound host, the public URL's host, or one of
  ``KB_MCP_ALLOWED_HOSTS``; ``/files`` applies the same Host check.
* **Probes** use ``/healthz`` (JSON with counts and each store's ``ok``/``down`` with the
  reason; 503 while any store is down), never ``GET /mcp``.
"""

from __future__ import annotations

import hmac
import html
import logging
import mimetypes
import os
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import parse_qs

import anyio.to_thread
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request, cookie_parser
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from kb_mcp.images import PNG_SIGNATURE
from kb_mcp.links import (
    BEFORE_PARAM,
    PAGES_COOKIE,
    SIGNATURE_PARAM,
    Links,
    file_signature,
    links_for,
    page_signature,
    signing_key,
)
from kb_mcp.pages import register_pages
from kb_mcp.pages.style import NOTICE_STYLE, csp_hash
from kb_mcp.server import build_server
from kb_mcp.state import ServerState, StateHolder
from kb_shared import layout
from kb_shared.access import bearer_authorised, exposure_problem, host_allowed, host_patterns
from kb_shared.errors import EmptyCorpusError, ExposureError, KbError
from kb_shared.identity import VERSION_SEPARATOR, is_doc_id, split_version_key, version_key
from kb_shared.providers.base import Embedder
from kb_shared.settings import Settings
from kb_shared.stores.blobs import check_key
from kb_shared.stores.catalog import DocumentStatus, VersionStatus, serving_version

log = logging.getLogger(__name__)

#: The SDK module whose INFO lines say nothing useful for a stateless server.
STREAMABLE_HTTP_LOGGER = "mcp.server.streamable_http"

MCP_PATH = "/mcp"
FILES_PATH = "/files"
HEALTH_PATH = "/healthz"
#: Paths of the pages (``kb_mcp.pages``) and their JSON: the same access rules as ``/files``.
PAGE_PREFIXES = ("/graph", "/api/", "/documents/")

#: Content types by file signature, for keys without a telling extension (PDF 1.7, ISO
#: 32000-1 section 7.5.2 "%PDF-"; ``kb_mcp.images.PNG_SIGNATURE``).
_SIGNATURES = ((b"%PDF-", "application/pdf"), (PNG_SIGNATURE, "image/png"))

#: JSON-RPC 2.0 error code of a request the server will not process (JSON-RPC 2.0 spec, 5.1).
INVALID_REQUEST = -32600


def _is_mcp_path(path: str) -> bool:
    """``/mcp`` or anything below it."""
    return path == MCP_PATH or path.startswith(MCP_PATH + "/")


def allowed_hosts(settings: Settings) -> list[str]:
    """Host header values accepted for the MCP server (``kb_shared.access.host_patterns`` of
    its bound host, ``public_url`` and ``KB_MCP_ALLOWED_HOSTS``)."""
    return host_patterns(
        settings.mcp_host,
        public_url=settings.public_url,
        extra=(settings.mcp_allowed_hosts or "").split(","),
    )


def transport_security(settings: Settings) -> TransportSecuritySettings:
    """DNS-rebinding protection for ``/mcp``: allowed Host headers (``allowed_hosts``) and the
    matching ``http``/``https`` origins."""
    hosts = allowed_hosts(settings)
    origins = [f"{scheme}://{host}" for host in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


class AccessMiddleware:
    """Bearer tokens on ``/mcp``, ``/files`` and the pages (when configured) and the Host check
    on ``/files`` and the pages (``PAGE_PREFIXES``). Tokens and signatures are compared in
    constant time (``hmac.compare_digest``).

    A ``/files`` request may show, instead of the token, the ``?sig=`` signature of its own
    blob key that citation links carry (``kb_mcp.links.Links``), so a person can open a
    cited PDF or figure in a browser; the signature opens no other file. A page request may
    show the pages' signature (``kb_mcp.links.page_url``, printed by ``kb-mcp serve``): the
    response then sets the ``kb_pages`` cookie, which opens the pages and their JSON (never
    ``/mcp`` or ``/files``) for that browser.
    """

    def __init__(self, app: ASGIApp, tokens: Sequence[str], hosts: Sequence[str]) -> None:
        self.app = app
        self.tokens = [t.encode("utf-8") for t in tokens]
        self.hosts = list(hosts)
        self.signing_key = signing_key(list(tokens))

    def _signed(self, path: str, query: bytes) -> bool:
        if self.signing_key is None or not path.startswith(FILES_PATH + "/"):
            return False
        given = parse_qs(query.decode("latin-1")).get(SIGNATURE_PARAM, [""])[0]
        key = stored_spelling(path[len(FILES_PATH) + 1 :])  # the key the link was signed for
        expected = file_signature(self.signing_key, key)
        return bool(given) and hmac.compare_digest(given.encode(), expected.encode())

    def _page_pass(self, path: str, query: bytes, headers: Headers) -> str | None:
        """For a page path: ``"link"`` when the request carries the pages' signature
        (``?sig=``), ``"cookie"`` when it carries the cookie a signed link set, else ``None``."""
        if self.signing_key is None or not path.startswith(PAGE_PREFIXES):
            return None
        expected = page_signature(self.signing_key).encode()
        given = parse_qs(query.decode("latin-1")).get(SIGNATURE_PARAM, [""])[0]
        if given and hmac.compare_digest(given.encode(), expected):
            return "link"
        # starlette's lenient parser, as Request.cookies reads them: http.cookies gives up on
        # the whole header at the first cookie it cannot parse ("theme=dark mode", JSON), and
        # every site on this host name (any port) adds its cookies to the header
        cookie = cookie_parser(headers.get("cookie", "")).get(PAGES_COOKIE)
        if cookie is not None and hmac.compare_digest(cookie.encode(), expected):
            return "cookie"
        return None

    def _authorised(self, headers: Headers) -> bool:
        return bearer_authorised(headers.get("authorization", ""), self.tokens)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        served = path.startswith((FILES_PATH + "/", *PAGE_PREFIXES))
        protected = _is_mcp_path(path) or served
        headers = Headers(scope=scope)
        query = scope.get("query_string", b"")
        page_pass = self._page_pass(path, query, headers) if self.tokens else None
        if (
            protected
            and self.tokens
            and not self._authorised(headers)
            and not self._signed(path, query)
            and page_pass is None
        ):
            response: Response = JSONResponse(
                {"error": "unauthorized", "detail": "send 'Authorization: Bearer <token>'"},
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="kb"'},
            )
            await response(scope, receive, send)
            return
        if served and not host_allowed(headers.get("host"), self.hosts):
            await PlainTextResponse("Invalid Host header", status_code=421)(scope, receive, send)
            return
        if page_pass == "link" and self.signing_key is not None:
            send = _with_cookie(send, page_signature(self.signing_key))
        await self.app(scope, receive, send)


def _with_cookie(send: Send, value: str) -> Send:
    """``send`` that adds the pages' cookie (HttpOnly, SameSite=Strict, path /) to the
    response: a signed page link then also opens the page's script, style and JSON."""

    async def wrapped(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            cookie = f"{PAGES_COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict"
            message = {**message, "headers": [*message.get("headers", []),
                                              (b"set-cookie", cookie.encode("latin-1"))]}
        await send(message)

    return wrapped


class PostOnlyMiddleware:
    """Answers every request to ``/mcp`` that is not a POST at once: 405, ``Allow: POST`` and a
    JSON-RPC error body (module docstring, "POST only"). Other paths pass through."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") == "POST" or not _is_mcp_path(
            scope.get("path", "")
        ):
            await self.app(scope, receive, send)
            return
        method = scope.get("method", "")
        body = {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": INVALID_REQUEST,
                "message": (
                    f"{method} is not served: kb's MCP endpoint is stateless and answers POST "
                    "only."
                ),
            },
        }
        response = JSONResponse(body, status_code=405, headers={"Allow": "POST"})
        await response(scope, receive, send)


def media_type(key: str, head: bytes) -> str:
    """Content type of a blob: from its extension, else its signature, else octet-stream."""
    guessed, _ = mimetypes.guess_type(PurePosixPath(key).name)
    if guessed in ("application/pdf", "image/png"):
        return guessed
    for signature, kind in _SIGNATURES:
        if head.startswith(signature):
            return kind
    return guessed or "application/octet-stream"


def stored_spelling(key: str) -> str:
    """``key`` with its document segment (``pdfs/{doc}``, ``figures/{doc}/…``) spelled the way
    ``kb_shared.identity.version_key`` stores it: ``@v1`` dropped (version 1 is stored under
    the plain ``doc_id``) and leading zeros dropped (``@v02`` → ``@v2``). ``pdfs/a.pdf@v1`` and
    ``pdfs/a.pdf`` are then one file, answered alike (module docstring, "Files"). Any other
    key, or one whose document part is not a ``doc_id`` (``is_doc_id``), comes back as given.
    """
    prefix = next((p for p in layout.SERVED_PREFIXES if key.startswith(p)), None)
    if prefix is None:
        return key
    segment, slash, rest = key[len(prefix):].partition("/")
    doc, separator, number = segment.rpartition(VERSION_SEPARATOR)
    if not (separator and number.isascii() and number.isdigit() and is_doc_id(doc)):
        return key
    if int(number) < 1:
        return key
    return f"{prefix}{version_key(doc, int(number))}{slash}{rest}"


def download_name(key: str) -> str:
    """The file name a browser saves a served ``key`` under: its last segment, with a
    version suffix moved before the extension (``pdfs/rules.pdf@v2`` -> ``rules (v2).pdf``,
    not ``rules.pdf@v2``, which no program opens as a PDF)."""
    name = PurePosixPath(key).name
    document, version = split_version_key(name)
    if version == 1:
        return name
    stem = PurePosixPath(document)
    return f"{stem.stem} (v{version}){stem.suffix}"


def servable_key(key: str) -> str | None:
    """The stored key (``stored_spelling``) when ``/files`` may serve ``key``: a safe key,
    ``check_key``, before and after respelling, that ``kb_shared.layout.is_served`` (PDFs and
    figure renders; Markdown, chunk tables and step outputs stay private); else ``None``.
    The route gets ``key`` percent-decoded once by the ASGI server (``%40`` is ``@``) and
    decodes nothing again: ``%2540`` stays a literal ``%40`` and finds no file."""
    try:
        check_key(key)
        stored = check_key(stored_spelling(key))
    except ValueError:
        return None
    return stored if layout.is_served(stored) else None


def blob_document(key: str) -> str | None:
    """The doc_id whose file ``key`` is (``pdfs/{doc}`` or ``figures/{doc}/…``, ``doc`` a
    ``version_key``: ``kb_shared.layout``), or ``None`` for a key of neither shape."""
    if key.startswith(layout.PDFS):
        doc = key[len(layout.PDFS):]
    elif key.startswith(layout.FIGURES):
        doc = key[len(layout.FIGURES):].partition("/")[0]
    else:
        return None
    return split_version_key(doc)[0] if doc else None


def blob_withdrawn(state: ServerState, key: str) -> bool:
    """Whether ``key`` is a file of a document being deleted (catalog status ``deleting``):
    ``/files`` then answers 404 as for an unknown document. A catalog that cannot be read
    withdraws nothing (the file is served as before the check; ``/healthz`` names the
    outage)."""
    doc = blob_document(key)
    if doc is None:
        return False
    try:
        row = state.catalog.find_by_doc_id(doc)
    except (KbError, OSError):
        return False
    return row is not None and row.status == DocumentStatus.DELETING


#: The superseded-version page's only script: it carries the citation's ``#page=N`` (which a
#: browser never sends) over to the current PDF's link.
KEEP_PAGE_SCRIPT = (
    "const a = document.getElementById('current');"
    " if (location.hash) { a.href += location.hash; a.textContent = a.href; }"
)
#: The page's Content-Security-Policy: nothing but that script and the pages' shared style
#: (``kb_mcp.pages.style``), each by its hash (CSP level 2).
SUPERSEDED_CSP = (
    f"default-src 'none'; style-src {csp_hash(NOTICE_STYLE)}; "
    f"script-src {csp_hash(KEEP_PAGE_SCRIPT)}"
)


def superseded_page(
    state: ServerState, key: str, links: Links, *, as_html: bool
) -> Response | None:
    """410 Gone for the stored file of a superseded version (its PDF, kept for what changed,
    or one of its figure renders, removed), or ``None``.

    The answer says ``"This citation points at version N of X, superseded on <date> by version
    M; the current PDF is <link>"`` (plain text, or HTML whose link keeps the citation's
    ``#page=``); the link is the serving version's, signed like any citation link. Any other
    missing key (unknown, never served, a document without a serving version, a catalog that
    cannot be read) gives ``None``: the caller's 404.

    Args:
        key: a servable blob key (``servable_key``).
        links: the server's citation links (``links_for``).
        as_html: the client accepts HTML.
    """
    if key.startswith(layout.PDFS):
        figure, segment = False, key[len(layout.PDFS):]
    elif key.startswith(layout.FIGURES):
        figure, segment = True, key[len(layout.FIGURES):].partition("/")[0]
    else:
        return None
    doc, number = split_version_key(segment)
    try:
        history = state.catalog.versions(doc)
    except (KbError, OSError):
        return None
    old = next(
        (v for v in history if v.version == number and (figure or v.blob_key == key)), None
    )
    current = serving_version(history)
    if old is None or current is None or old.status != VersionStatus.SUPERSEDED:
        return None
    after = next(
        (
            v for v in history
            if v.version > old.version
            and v.status in (VersionStatus.SUPERSEDED, VersionStatus.SERVING)
        ),
        current,
    )
    url = links.file(current.blob_key) or ""
    when = f" on {old.superseded_at:%Y-%m-%d}" if old.superseded_at else ""
    which = "" if after.version == current.version else f" (version {current.version})"
    what = "a figure of " if figure else ""  # a new version renumbers figures: link its PDF
    lead = (
        f"This citation points at {what}version {old.version} of {current.name}, "
        f"superseded{when} by version {after.version}; the current PDF{which} is "
    )
    headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-cache"}
    if not as_html:
        return PlainTextResponse(lead + url + "\n", status_code=410, headers=headers)
    name = html.escape(current.name)
    body = (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>Superseded: version {old.version} of {name}</title>"
        f"<style>{NOTICE_STYLE}</style></head>"
        f"<body><h1>Version {old.version} of {name} is superseded</h1>"
        f"<p class=\"notice\">{html.escape(lead)}<a id=\"current\" href=\"{html.escape(url)}\">"
        f"{html.escape(url)}</a></p><script>{KEEP_PAGE_SCRIPT}</script></body></html>\n"
    )
    return Response(
        body, status_code=410, media_type="text/html",
        headers={**headers, "Content-Security-Policy": SUPERSEDED_CSP},
    )


def worker_status(settings: Settings, *, ready: bool) -> dict[str, Any]:
    """``/healthz``'s ``worker`` field: the answering worker process's ``pid``, whether it is
    ``ready`` (its lifespan finished: stores open, embedding model loaded) and how many
    ``workers`` the server was started with (``KB_MCP_WORKERS``, ``kb-mcp serve --workers``).
    Each worker knows only itself (uvicorn's supervisor pings them privately)."""
    return {"pid": os.getpid(), "ready": ready, "workers": settings.mcp_workers}


#: The stores ``/healthz`` probes, in the order it reports them (DESIGN.md "Stores and their
#: backends": the four store roles).
STORE_ROLES = ("catalog", "vectors", "graph", "blobs")

#: The key ``/healthz`` asks the blob store about when no stored PDF is known (the catalog is
#: down or empty): a reachability check only, it need not exist.
BLOB_PROBE_KEY = "pdfs/.healthz"


def _probe(role: str, read: Callable[[], Any], report: dict[str, dict[str, str]]) -> Any:
    """Run one store's ``read``; put ``{"status": "ok"}`` or ``{"status": "down", "reason"}``
    under ``report[role]``. Returns what ``read`` returned, or ``None`` when it failed."""
    try:
        value = read()
    except (KbError, OSError) as exc:
        report[role] = {"status": "down", "reason": str(exc) or type(exc).__name__}
        return None
    except Exception as exc:  # a probe must answer, whatever the backend raised
        log.warning("/healthz: probing the %s store failed", role, exc_info=True)
        report[role] = {"status": "down", "reason": f"{type(exc).__name__}: {exc}"}
        return None
    report[role] = {"status": "ok"}
    return value


def _check_blobs(state: ServerState, rows: list[Any] | None) -> None:
    """Raise ``FileNotFoundError`` when the first ready document's stored PDF is missing (a
    blob folder or bucket that is gone or not mounted); with none known, ask the store about
    ``BLOB_PROBE_KEY`` (raises only when the store cannot be reached)."""
    stored = next((r for r in rows or () if r.status == "ready" and r.blob_key), None)
    if stored is None:
        state.blobs.exists(BLOB_PROBE_KEY)
    elif not state.blobs.exists(stored.blob_key):
        raise FileNotFoundError(
            f"the stored PDF {stored.blob_key!r} of {stored.doc_id!r} is missing from the blob "
            f"store {state.blobs.root_url} (is the folder or bucket there?)"
        )


def _count_points(state: ServerState) -> int:
    try:
        return state.vectors().count()
    except EmptyCorpusError:  # no index yet: an empty corpus is healthy
        return 0


def _health(state: ServerState) -> tuple[dict[str, Any], bool]:
    """``/healthz``'s body and whether every store answered.

    Each store of ``STORE_ROLES`` is probed on its own (catalog: the document list; vectors:
    the point count; graph: its counts; blobs: ``_check_blobs``), so one that is down is
    named under ``stores`` with the reason while the others still report: ``{"status":
    "ok"|"degraded", "documents", "pending", "failed" (when the catalog answered),
    "embedding_model", "points" (when the vector index answered), "stores": {role:
    {"status": "ok"} | {"status": "down", "reason": str}}}``.
    """
    stores: dict[str, dict[str, str]] = {}
    rows = _probe("catalog", state.catalog.list_documents, stores)
    points = _probe("vectors", lambda: _count_points(state), stores)
    _probe("graph", state.graph.counts, stores)
    _probe("blobs", lambda: _check_blobs(state, rows), stores)
    healthy = all(report["status"] == "ok" for report in stores.values())
    body: dict[str, Any] = {"status": "ok" if healthy else "degraded"}
    if rows is not None:
        body["documents"] = sum(r.status == "ready" for r in rows)
        body["pending"] = sum(r.status == "pending" for r in rows)
        body["failed"] = sum(r.status == "failed" for r in rows)
    body["embedding_model"] = state.embedder.model
    if points is not None:
        body["points"] = points
    body["stores"] = {role: stores[role] for role in STORE_ROLES}
    return body, healthy


def build_app(
    settings: Settings,
    *,
    public: bool = False,
    embedder: Embedder | None = None,
    warm: bool = True,
    log_level: str = "INFO",
) -> Starlette:
    """The Starlette app ``kb-mcp serve --transport http`` runs.

    Args:
        settings: stores, host/port, tokens, allowed hosts, public URL.
        public: the operator's explicit consent to serve a non-loopback host without tokens.
        embedder / warm / log_level: passed to ``build_server``.

    Raises:
        ExposureError: non-loopback host without tokens and without ``public``.
    """
    problem = exposure_problem(settings.mcp_host, settings.token_list, public)
    if problem:
        raise ExposureError(problem)
    holder = StateHolder()
    links = links_for(settings)
    mcp = build_server(
        settings, holder=holder, embedder=embedder, warm=warm, log_level=log_level.upper()
    )
    if log_level.upper() != "DEBUG":
        # Stateless HTTP opens and ends a transport per request; the SDK logs each ending
        # ("Terminating session: None") at INFO, one useless line per call.
        logging.getLogger(STREAMABLE_HTTP_LOGGER).setLevel(logging.WARNING)

    @mcp.custom_route(HEALTH_PATH, methods=["GET"])
    async def healthz(_: Request) -> Response:
        worker = worker_status(settings, ready=holder.ready)
        if not holder.ready:
            return JSONResponse({"status": "starting", "worker": worker}, status_code=503)
        body, healthy = await anyio.to_thread.run_sync(_health, holder.state)
        return JSONResponse({**body, "worker": worker}, status_code=200 if healthy else 503)

    @mcp.custom_route(FILES_PATH + "/{key:path}", methods=["GET", "HEAD"])
    async def files(request: Request) -> Response:
        key = servable_key(request.path_params.get("key", ""))
        if (
            key is None
            or not holder.ready
            or await anyio.to_thread.run_sync(blob_withdrawn, holder.state, key)
        ):
            return PlainTextResponse("Not Found", status_code=404)
        if request.query_params.get(BEFORE_PARAM) != "1":
            # a superseded version's file is kept for what changed, not for old citations
            answer = await gone_or_missing(request, key, missing=False)
            if answer is not None:
                return answer
        blobs = holder.state.blobs
        headers = {
            "X-Content-Type-Options": "nosniff",
            "Content-Disposition": f"inline; filename=\"{download_name(key)}\"",
            "Cache-Control": "no-cache",
        }
        local = blobs.local_path(key)
        if local is not None:
            if not local.is_file():
                return await gone_or_missing(request, key)
            with local.open("rb") as handle:
                head = handle.read(8)
            return FileResponse(local, media_type=media_type(key, head), headers=headers)
        try:
            data = await anyio.to_thread.run_sync(blobs.get, key)
        except FileNotFoundError:
            return await gone_or_missing(request, key)
        except OSError as exc:
            log.warning("serving %s failed: %s", key, exc)
            return PlainTextResponse("Blob store unavailable", status_code=503)
        return Response(data, media_type=media_type(key, data[:8]), headers=headers)

    async def gone_or_missing(
        request: Request, key: str, *, missing: bool = True
    ) -> Response | None:
        """``superseded_page`` for a superseded version's file; else 404 when the file is
        ``missing``, ``None`` when it is there (to be served)."""
        if not key.startswith(layout.PDFS) and not missing:
            return None  # figure renders of superseded versions are removed: only PDFs stay
        as_html = "text/html" in request.headers.get("accept", "")
        answer = await anyio.to_thread.run_sync(
            lambda: superseded_page(holder.state, key, links, as_html=as_html)
        )
        if answer is not None or not missing:
            return answer
        return PlainTextResponse("Not Found", status_code=404)

    register_pages(mcp, holder=holder, settings=settings)

    app = mcp.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        transport_security=transport_security(settings),
        host=settings.mcp_host,
    )
    # the last added runs first: tokens and Host checks, then the method guard, then the SDK
    app.add_middleware(PostOnlyMiddleware)
    app.add_middleware(AccessMiddleware, tokens=settings.token_list, hosts=allowed_hosts(settings))
    return app
