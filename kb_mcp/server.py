"""The kb MCP server: ``build_server(settings)`` and its lifespan.

``build_server`` returns an ``MCPServer[ServerState]`` (mcp 2.x) whose lifespan opens the stores
through ``kb_shared`` (``kb_mcp.state.open_state``) and closes them when the server stops. The
tools live in ``kb_mcp.tools`` (one module each), the prompt in ``kb_mcp.prompts`` and the
resource in ``kb_mcp.resources``; hosting is in ``kb_mcp.http`` (Streamable HTTP + file
routes) and ``kb_mcp.cli``.

Tools (read-only, idempotent, closed-world): ``search_docs``, ``search_graph``,
``read_doc``, ``list_documents``, ``search_aer_performance``, ``search_compliance``,
``find_reference``, ``display_process`` (an MCP App: ``kb_mcp.tools.display_process``),
``echo``; and ``request_document`` and ``add_reference``, which only
queue a request (never fetch); prompt
``research-topic``; resource
``kb://documents`` and templates ``kb://documents/{doc_id}`` and ``kb://categories/{+category}``,
whose arguments ``completion/complete`` completes (``kb_mcp.completions``); ``logging/setLevel``
sets the server's log level (``serve_log_level``). Every failure comes back as an ``isError``
result with an actionable message (``kb_mcp.errors``), arguments that do not fit a tool
included (``kb_mcp.errors.check_arguments``).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from importlib import metadata
from typing import Literal

import anyio.to_thread
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.types import EmptyResult, LoggingLevel, SetLevelRequestParams

from kb_mcp import completions, prompts, resources
from kb_mcp.errors import check_arguments
from kb_mcp.links import links_for
from kb_mcp.state import ServerState, StateHolder, open_state, settle_interpreter
from kb_mcp.tools import (
    KbServer,
    add_reference,
    compare_versions,
    display_process,
    echo,
    find_reference,
    list_documents,
    read_doc,
    request_document,
    search_aer_performance,
    search_compliance,
    search_docs,
    search_graph,
    search_obligations,
)
from kb_shared.providers.base import Embedder, Reranker
from kb_shared.settings import Settings

log = logging.getLogger(__name__)

INSTRUCTIONS = """\
kb answers questions about an indexed collection of regulatory documents (PDFs), with
page-level citations. search_docs finds passages (meaning + exact codes and clause numbers);
search_graph follows relationships between parties, obligations and defined terms;
search_obligations lists every obligation (must / should) with an exact count, by party and
document; compare_versions says what changed since a document's previous issue; read_doc
reads chunks around a result; list_documents shows what is indexed; display_process
shows the figures (process diagrams) that match a question, in a viewer
where the host supports MCP Apps. Numbers about
the energy market (AER retail statistics) come from search_aer_performance and enforcement
actions (fines, penalties) from search_compliance, both with exact counts and totals. Cite
results by their [n] headers and page numbers. Tool results are not shown to the user: only
what you write in your reply is visible, so put citations and figure links into your reply.
When a search says low confidence or finds nothing, say the corpus does not cover it; do not
guess. If the user needs a document the corpus lacks (checked against kb://documents),
request_document logs a request for an operator; it does not make the document available.
find_reference routes a question to registered live reference pages (API docs,
specifications) by their descriptions and returns URLs for you to fetch; add_reference
registers one.
"""


def _version() -> str:
    try:
        return metadata.version("kb")
    except metadata.PackageNotFoundError:
        return "0"


def build_server(
    settings: Settings,
    *,
    holder: StateHolder | None = None,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    use_reranker: bool = True,
    warm: bool = True,
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO",
    stdio: bool = False,
) -> KbServer:
    """Create the kb MCP server.

    Args:
        settings: where the stores are, which providers, the query limit and the public URL
            citation links use.
        holder: receives the live state while the server runs (the HTTP routes read it);
            a private one is made when not given.
        embedder / reranker / use_reranker: passed to ``open_state`` (tests share a loaded
            embedder; ``use_reranker=False`` forces fusion order).
        warm: load the embedding model's weights when the server starts, so the first query
            does not pay for it (several seconds for the offline models), then
            ``settle_interpreter`` (a serving process; tests that start many servers pass False).
        log_level: level of the server's log (the SDK logs to stderr, never stdout).
        stdio: the server runs over stdio, so citation links point at local files rather
            than at an HTTP server that is not there (``kb_mcp.links.links_for``).

    Returns:
        An ``MCPServer[ServerState]`` whose lifespan yields the ``ServerState``. Nothing is
        opened until the server runs.
    """
    holder = holder if holder is not None else StateHolder()
    links = links_for(settings, stdio=stdio)

    @asynccontextmanager
    async def lifespan(_: KbServer) -> AsyncIterator[ServerState]:
        state = await anyio.to_thread.run_sync(
            partial(
                open_state, settings, embedder=embedder, reranker=reranker,
                use_reranker=use_reranker,
            )
        )
        try:
            if warm:
                await anyio.to_thread.run_sync(state.warm)
                settle_interpreter()
            holder.set(state)
            log.info("kb MCP server ready (embedding model %s)", state.embedder.model)
            yield state
        finally:
            holder.set(None)
            await anyio.to_thread.run_sync(state.close)

    max_chars = settings.max_query_chars
    apps = display_process.build_apps(links=links, max_query_chars=max_chars)
    server: KbServer = MCPServer[ServerState](
        "kb",
        title="kb — regulatory knowledge base",
        instructions=INSTRUCTIONS,
        version=_version(),
        lifespan=lifespan,
        log_level=log_level,
        extensions=[apps],
    )
    display_process.lean_schemas(server)  # the MCP App's tool, added by the extension above
    search_docs.register(server, links=links, max_query_chars=max_chars)
    search_graph.register(server, links=links, max_query_chars=max_chars)
    read_doc.register(server, links=links)
    list_documents.register(server, links=links)
    search_obligations.register(server, links=links)
    compare_versions.register(server, links=links)
    search_aer_performance.register(server)
    search_compliance.register(server, max_query_chars=max_chars)
    request_document.register(server)
    find_reference.register(server, max_query_chars=max_chars)
    add_reference.register(server)
    echo.register(server)
    prompts.register(server)
    resources.register(server, holder=holder, links=links)
    completions.register(server, holder=holder)
    serve_log_level(server)
    check_arguments(server)
    return server


#: The Python level of each MCP log level (the RFC 5424 severities of MCP spec 2025-06-18,
#: "Logging"); Python has no notice, alert or emergency, so each takes the next level up.
LOG_LEVELS: dict[LoggingLevel, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


def serve_log_level(server: KbServer) -> None:
    """Serve ``logging/setLevel``: the level a client sets becomes the server process's log
    level (the root logger's, which kb's and the SDK's loggers inherit), over stdio and HTTP
    alike; kb sends no log notifications, so nothing else depends on it."""

    async def set_level(
        _: ServerRequestContext[ServerState], params: SetLevelRequestParams
    ) -> EmptyResult:
        logging.getLogger().setLevel(LOG_LEVELS[params.level])
        log.info("log level set to %s by a client", params.level)
        return EmptyResult()

    # MCPServer has no decorator for this method (deprecated in the 2026-07-28 revision); the
    # SDK says to serve it through the low-level server's add_request_handler
    # (mcp.server.extension.MethodBinding docstring), as MCPServer.completion does itself.
    server._lowlevel_server.add_request_handler(  # noqa: SLF001
        "logging/setLevel", SetLevelRequestParams, set_level
    )
