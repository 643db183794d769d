"""``kb-mcp``: run the read-only MCP server.

``kb-mcp serve`` serves Streamable HTTP on ``127.0.0.1:8765`` at ``/mcp`` (plus ``/files`` and
``/healthz``); ``kb-mcp serve --transport stdio`` serves one client over stdin/stdout. Settings
come from the environment (``KB_*``, see ``kb_shared.settings``); the options override them.

``kb-mcp serve --workers N`` (``KB_MCP_WORKERS``) runs N worker processes on one port under
uvicorn's supervisor (``uvicorn.supervisors.Multiprocess``): the parent reserves the port and
spawns each worker (``multiprocessing`` "spawn": a fresh interpreter, nothing shared); each
worker listens on its own ``SO_REUSEPORT`` socket (``WorkerListener``), builds the app with
``WorkerApp`` (``kb_mcp.http.build_app`` on the same settings), and opens its own stores and
loads its own embedding model in its lifespan. The server is stateless JSON
(``kb_mcp.http``), so whichever worker the kernel gives a connection answers it. The
supervisor pings every worker over a pipe and replaces one that dies or stops answering; a
worker that fails during start-up stops the whole server. SIGTERM or SIGINT to ``kb-mcp`` stops
every worker: each gets SIGTERM, may finish requests for ``GRACEFUL_SECONDS`` and is killed if
still alive ``STOP_SECONDS`` after the signal.

On stdio, stdout carries only JSON-RPC: logging goes to stderr (the SDK installs a Rich
handler on stderr) and the SDK points file descriptor 1 at stderr while it serves, so stray
output from a library cannot corrupt the stream; kb_mcp itself never prints.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

log = logging.getLogger(__name__)

#: Seconds a stopping worker may spend finishing open requests (uvicorn's
#: ``timeout_graceful_shutdown``); a search answers in well under a second.
GRACEFUL_SECONDS = 5

#: Seconds after SIGTERM before the supervisor kills a worker that has not exited: bounds the
#: stop of the whole server under 10 s (issue 15, "A multi-worker MCP server").
STOP_SECONDS = 8

#: Seconds a worker may take to answer the supervisor's ping before it is killed and replaced
#: (uvicorn's ``timeout_worker_healthcheck``, default 5). Longer than the default because the
#: workers load their embedding models at the same time on a 2-core machine.
HEALTHCHECK_SECONDS = 30

app = typer.Typer(
    name="kb-mcp",
    help="The read-only MCP server of kb: search the corpus the pipeline built, with citations.",
    add_completion=False,
    no_args_is_help=True,
    # Markdown joins a docstring paragraph's lines, so help text wraps at the terminal's
    # width, never at the source's line ends (Typer's "rich" mode keeps every line break).
    rich_markup_mode="markdown",
)


class Transport(StrEnum):
    """How clients connect."""

    HTTP = "http"
    STDIO = "stdio"


class LogLevel(StrEnum):
    """Server log level (stderr)."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


@app.callback()
def main() -> None:
    """kb-mcp: the MCP server of kb (use `kb-mcp serve`)."""


@app.command()
def serve(
    transport: Annotated[
        Transport,
        typer.Option(help="http = Streamable HTTP at /mcp; stdio = one client on stdin/stdout."),
    ] = Transport.HTTP,
    host: Annotated[
        str | None, typer.Option(help="Address to bind (default KB_MCP_HOST, 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None, typer.Option(min=1, max=65535, help="Port (default KB_MCP_PORT, 8765).")
    ] = None,
    public: Annotated[
        bool,
        typer.Option(
            "--public",
            help="Serve a non-loopback address without bearer tokens (KB_MCP_TOKENS), on purpose.",
        ),
    ] = False,
    home: Annotated[
        Path | None, typer.Option(help="KB_HOME: root of the embedded stores (default ./.kb).")
    ] = None,
    log_level: Annotated[
        LogLevel, typer.Option(help="Log level (logs go to stderr).")
    ] = LogLevel.INFO,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1, max=64,
            help="HTTP worker processes, each with its own embedding model (default "
            "KB_MCP_WORKERS, 1).",
        ),
    ] = None,
) -> None:
    """Serve the corpus over MCP until interrupted.

    Exits with status 2 (and says why) when asked to bind a non-loopback address without
    KB_MCP_TOKENS and without --public, or when --workers above 1 is given with --transport
    stdio; with status 3 when the port cannot be bound (checked before the model loads).
    """
    from kb_shared.errors import SettingsError  # noqa: PLC0415 - keep `kb-mcp --help` fast
    from kb_shared.settings import Settings  # noqa: PLC0415

    overrides: dict[str, Any] = {}
    if host is not None:
        overrides["mcp_host"] = host
    if port is not None:
        overrides["mcp_port"] = port
    if home is not None:
        overrides["home"] = home
    if workers is not None:
        overrides["mcp_workers"] = workers
    try:
        settings = Settings(**overrides)
    except SettingsError as exc:
        typer.echo(f"kb-mcp: {exc}", err=True)
        raise typer.Exit(2) from exc

    if transport is Transport.STDIO and workers is not None and workers > 1:
        typer.echo("kb-mcp: --workers applies to HTTP; stdio serves one client", err=True)
        raise typer.Exit(2)
    if transport is Transport.STDIO:
        from kb_mcp.server import build_server  # noqa: PLC0415

        build_server(settings, log_level=log_level.name, stdio=True).run("stdio")
        return

    settings = worker_settings(settings)
    if settings.mcp_workers > 1:
        serve_workers(settings, public=public, log_level=log_level)
        return

    import uvicorn  # noqa: PLC0415

    from kb_mcp.http import ExposureError, build_app  # noqa: PLC0415

    try:
        asgi = build_app(settings, public=public, log_level=log_level.name)
    except ExposureError as exc:
        typer.echo(f"kb-mcp: {exc}", err=True)
        raise typer.Exit(2) from exc
    from uvicorn.config import STARTUP_FAILURE  # noqa: PLC0415

    try:  # before the app's lifespan loads the model: a taken port is refused in a moment
        listener = bind_listener(settings.mcp_host, settings.mcp_port, reuse_port=False)
    except OSError as exc:
        raise cannot_listen(settings, exc, STARTUP_FAILURE) from exc
    for line in page_lines(settings):
        typer.echo(f"kb-mcp: {line}", err=True)
    server = uvicorn.Server(uvicorn.Config(asgi, **server_options(settings, log_level)))
    try:
        server.run(sockets=[listener])
    except KeyboardInterrupt:  # a second Ctrl-C during the graceful stop
        pass
    finally:
        listener.close()
    if not server.started:  # the lifespan failed (uvicorn.run's own rule)
        raise typer.Exit(STARTUP_FAILURE)


def cannot_listen(settings: Any, error: OSError, status: int) -> typer.Exit:
    """Say on stderr that ``settings``' ``mcp_host:mcp_port`` cannot be bound (``error``: in
    use, not local, no permission) and what to do; returns the ``typer.Exit(status)`` to raise."""
    typer.echo(
        f"kb-mcp: cannot listen on {settings.mcp_host}:{settings.mcp_port}: {error}; stop what "
        "holds it or choose another port (--port, KB_MCP_PORT)",
        err=True,
    )
    return typer.Exit(status)


def server_options(settings: Any, log_level: LogLevel) -> dict[str, Any]:
    """The uvicorn options both ways of serving HTTP share (one process, ``serve_workers``):
    ``settings``' ``mcp_host`` and ``mcp_port``, the log level, the app's lifespan run,
    ``X-Forwarded-*`` headers not trusted (``proxy_headers``) and ``GRACEFUL_SECONDS``."""
    return {
        "host": settings.mcp_host,
        "port": settings.mcp_port,
        "log_level": log_level.value,
        "lifespan": "on",
        "proxy_headers": False,
        "timeout_graceful_shutdown": GRACEFUL_SECONDS,
    }


def worker_threads(workers: int, cores: int | None = None) -> int:
    """Threads each of ``workers`` processes gives one offline embedding: the usable cores
    (``os.sched_getaffinity``, or ``cores``) shared out, less the one the calling thread
    needs meanwhile (search_docs reads the catalog and searches the sparse side while its
    query is embedded), at least 1: N workers never run more embedding threads than there
    are cores (each extra thread only queues for one; benchmarks/results/
    serving-workers-2026-12-02.md, serving-2026-12-02-latency-round5.md)."""
    usable = cores if cores is not None else len(os.sched_getaffinity(0))
    return max(1, usable // max(1, workers) - 1)


def worker_settings(settings: Any) -> Any:
    """``settings`` as each worker gets them: ``local_embedding_threads`` filled in with
    ``worker_threads(mcp_workers)`` when the operator left it unset."""
    if settings.local_embedding_threads is not None:
        return settings
    return settings.model_copy(
        update={"local_embedding_threads": worker_threads(settings.mcp_workers)}
    )


@dataclass(frozen=True)
class WorkerApp:
    """The app factory every worker process calls once (uvicorn ``factory=True``): returns
    ``kb_mcp.http.build_app(settings, public=…, log_level=…)``. It is pickled into each spawned
    worker, so all workers serve the exact settings the parent resolved.

    Attributes:
        settings: the resolved ``kb_shared.settings.Settings`` (``mcp_workers`` included).
        public: the operator's ``--public``.
        log_level: ``build_server``'s level name (``"INFO"`` …).
    """

    settings: Any
    public: bool
    log_level: str

    def __call__(self) -> Any:
        """Build this worker's Starlette app (nothing is opened until its lifespan runs)."""
        from kb_mcp.http import build_app  # noqa: PLC0415 - imported in the worker only

        return build_app(self.settings, public=self.public, log_level=self.log_level)


def bind_listener(host: str, port: int, *, reuse_port: bool = True) -> socket.socket:
    """A TCP socket bound to ``host:port`` (not yet listening), with ``SO_REUSEPORT`` unless
    ``reuse_port`` is false.

    Created with ``IPPROTO_TCP`` so asyncio turns on ``TCP_NODELAY`` for the connections it
    accepts (uvicorn's own pre-bound socket leaves the protocol 0 and Nagle on: every
    keep-alive request past the first then waits for a delayed ACK, Kludex/uvicorn#3149).

    Raises:
        OSError: the address cannot be bound (in use, not local, no permission).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def reserve_port(host: str, port: int) -> socket.socket:
    """Hold ``host:port`` for the workers: first check that nothing listens there (a bind
    without ``SO_REUSEPORT`` fails even against a ``SO_REUSEPORT`` group, so a second kb-mcp on
    the port is refused instead of silently sharing it), then keep a bound, never-listening
    ``SO_REUSEPORT`` socket until the server stops (it takes no connections: Linux hands them
    only to listening sockets of the group).

    Raises:
        OSError: the address cannot be bound.
    """
    bind_listener(host, port, reuse_port=False).close()
    return bind_listener(host, port)


@dataclass(frozen=True)
class WorkerListener:
    """What the supervisor hands every worker in place of a shared listening socket: when a
    spawned worker unpickles it, it becomes that worker's own ``SO_REUSEPORT`` socket on
    ``host:port`` (``bind_listener``), so each worker has its own accept queue and Linux
    spreads new connections over the workers by a hash of their addresses. With one shared
    socket the worker that wakes first accepts every waiting connection, and keep-alive
    clients then stay on it (measured: one of two workers served all 16 clients,
    ``benchmarks/results/serving-workers-2026-12-01.md``; the same is reported in
    Kludex/uvicorn#2472). A worker the supervisor restarts binds its own socket the same way.
    """

    host: str
    port: int

    def __reduce__(self) -> tuple[Any, tuple[str, int]]:
        return (bind_listener, (self.host, self.port))


def serve_workers(settings: Any, *, public: bool, log_level: LogLevel) -> None:
    """Serve HTTP with ``settings.mcp_workers`` processes under uvicorn's supervisor until
    SIGTERM/SIGINT (module docstring). ``uvicorn.run`` takes workers only with an import
    string; the same supervisor is driven here with a ``WorkerApp`` so the settings reach the
    workers as they are (``serve`` resolved them with ``worker_settings``), not re-read from
    the environment.

    Raises:
        typer.Exit: status 2 when the bind is refused (``kb_shared.access.exposure_problem``);
            uvicorn's status 3 when a worker fails to start.
    """
    import uvicorn  # noqa: PLC0415
    from uvicorn.config import STARTUP_FAILURE  # noqa: PLC0415
    from uvicorn.supervisors import Multiprocess  # noqa: PLC0415

    from kb_shared.access import exposure_problem  # noqa: PLC0415

    problem = exposure_problem(settings.mcp_host, settings.token_list, public)
    if problem:
        typer.echo(f"kb-mcp: {problem}", err=True)
        raise typer.Exit(2)

    class Supervisor(Multiprocess):
        """uvicorn's supervisor whose stop is bounded: a worker still alive ``STOP_SECONDS``
        after the stop began is killed (uvicorn would wait for it forever)."""

        def join_all(self) -> None:
            deadline = time.monotonic() + STOP_SECONDS
            for worker in self.processes:
                worker.process.join(max(0.0, deadline - time.monotonic()))
                if worker.process.is_alive():
                    log.warning("worker %s did not stop in %s s: killed", worker.pid, STOP_SECONDS)
                    worker.kill()
                    worker.process.join()

    try:
        anchor = reserve_port(settings.mcp_host, settings.mcp_port)
    except OSError as exc:
        raise cannot_listen(settings, exc, STARTUP_FAILURE) from exc
    config = uvicorn.Config(
        WorkerApp(settings, public, log_level.name),
        factory=True,
        workers=settings.mcp_workers,
        timeout_worker_healthcheck=HEALTHCHECK_SECONDS,
        **server_options(settings, log_level),
    )
    for line in page_lines(settings):
        typer.echo(f"kb-mcp: {line}", err=True)
    typer.echo(f"kb-mcp: {settings.mcp_workers} workers", err=True)
    listener: Any = WorkerListener(settings.mcp_host, settings.mcp_port)
    supervisor = Supervisor(config, sockets=[listener])
    try:
        supervisor.run()
    finally:
        anchor.close()
    if any(worker.exitcode == STARTUP_FAILURE for worker in supervisor.processes):
        raise typer.Exit(STARTUP_FAILURE)


def page_lines(settings: Any) -> list[str]:
    """What ``serve`` prints at start: the MCP endpoint and the pages' URLs, signed with the
    pages' signature when bearer tokens are set (``kb_mcp.links.page_url``)."""
    from kb_mcp.links import base_url, page_url, signing_key  # noqa: PLC0415

    base, key = base_url(settings), signing_key(settings.token_list)
    return [
        f"MCP endpoint {base}/mcp",
        f"knowledge graph {page_url(base, '/graph', key)}",
        f"figure gallery {page_url(base, '/documents/<doc_id>/figures', key)}",
    ]


if __name__ == "__main__":  # pragma: no cover
    app()
