"""``kb-mcp``: run the read-only MCP server.

``kb-mcp serve`` serves Streamable HTTP on ``127.0.0.1:8765`` at ``/mcp`` (plus ``/files`` and
``/healthz``); ``kb-mcp serve --transport stdio`` serves one client over stdin/stdout. Settings
come from the environment (``KB_*``, see ``kb_shared.settings``); the options override them.

On stdio, stdout carries only JSON-RPC: logging goes to stderr (the SDK installs a Rich
handler on stderr) and the SDK points file descriptor 1 at stderr while it serves, so stray
output from a library cannot corrupt the stream; kb_mcp itself never prints.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

app = typer.Typer(
    name="kb-mcp",
    help="The read-only MCP server of kb: search the corpus the pipeline built, with citations.",
    add_completion=False,
    no_args_is_help=True,
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
) -> None:
    """Serve the corpus over MCP until interrupted.

    Exits with status 2 (and says why) when asked to bind a non-loopback address without
    KB_MCP_TOKENS and without --public.
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
    try:
        settings = Settings(**overrides)
    except SettingsError as exc:
        typer.echo(f"kb-mcp: {exc}", err=True)
        raise typer.Exit(2) from exc

    if transport is Transport.STDIO:
        from kb_mcp.server import build_server  # noqa: PLC0415

        build_server(settings, log_level=log_level.name, stdio=True).run("stdio")
        return

    import uvicorn  # noqa: PLC0415

    from kb_mcp.http import ExposureError, build_app  # noqa: PLC0415

    try:
        asgi = build_app(settings, public=public, log_level=log_level.name)
    except ExposureError as exc:
        typer.echo(f"kb-mcp: {exc}", err=True)
        raise typer.Exit(2) from exc
    for line in page_lines(settings):
        typer.echo(f"kb-mcp: {line}", err=True)
    uvicorn.run(
        asgi,
        host=settings.mcp_host,
        port=settings.mcp_port,
        log_level=log_level.value,
        lifespan="on",
        proxy_headers=False,
    )


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
