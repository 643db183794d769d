"""The long-running servers of ``kb ui`` and ``kb demo`` (``dagster dev``, the upload page, the MCP
server), and how they stop.

Each server runs in its own session, so its process group holds it and everything it starts
(``dagster dev``'s webserver, daemon and code servers). ``kb`` installs its SIGINT/SIGTERM
handlers before starting any of them; on either signal — from a terminal's Ctrl-C or from a
process manager signalling ``kb``'s pid alone — it forwards the signal to every group, gives
them ``GRACE_SECONDS`` to exit, then kills what is left (SIGKILL to each group). A server
that exits on its own stops the others too.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from kb_assets.instance import prepare_dagster_home
from kb_shared.access import WILDCARD_HOSTS, bracket_host
from kb_shared.settings import Settings

#: Seconds each server group gets to exit after the forwarded signal before SIGKILL, so every
#: server is gone within the 10 s that issue 10 (defect 4) allows after kb is signalled.
GRACE_SECONDS = 5.0

#: How often the supervisor checks for a signal or a server that exited.
POLL_SECONDS = 0.2

#: The signals that stop the servers.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@dataclass(frozen=True)
class ServerCommand:
    """One server to run.

    Attributes:
        name: how messages name it (``"Dagster UI"``).
        argv: the command line.
        env: its complete environment.
        cwd: its working directory (``None`` = kb's).
        url: where it answers (``http://host:port``); when set, the supervisor says when the
            port first accepts a connection (``dagster dev`` takes a minute or more).
    """

    name: str
    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: Path | None = None
    url: str = ""


@dataclass
class _Running:
    command: ServerCommand
    process: subprocess.Popen[bytes]
    started: float = field(default_factory=time.monotonic)
    up: bool = False

    def check_up(self) -> bool:
        """Whether the server just became reachable at its ``url`` (once per server)."""
        if self.up or not self.command.url:
            return False
        where = urllib.parse.urlsplit(self.command.url)
        try:
            with socket.create_connection((where.hostname, where.port or 80), timeout=0.1):
                self.up = True
        except OSError:
            return False
        return True

    @property
    def group(self) -> int:
        # start_new_session: the server leads its own session and process group
        return self.process.pid


@dataclass
class Supervisor:
    """Starts servers in their own process groups and stops them all on SIGINT/SIGTERM.

    Use as a context manager: the handlers are installed on entry (before any ``start``) and
    the previous ones restored on exit, after every group has been stopped.

    Attributes:
        grace: seconds between the forwarded signal and SIGKILL.
        running: the servers started and not yet stopped.
        received: the stop signals received, in order.
    """

    grace: float = GRACE_SECONDS
    running: list[_Running] = field(default_factory=list, init=False)
    received: list[int] = field(default_factory=list, init=False)
    _previous: dict[int, object] = field(default_factory=dict, init=False, repr=False)

    def __enter__(self) -> Supervisor:
        for number in STOP_SIGNALS:
            self._previous[number] = signal.signal(number, self._on_signal)
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.stop(self.received[0] if self.received else signal.SIGTERM)
        finally:
            for number, handler in self._previous.items():
                signal.signal(number, handler)  # type: ignore[arg-type]

    def _on_signal(self, number: int, frame: FrameType | None) -> None:
        self.received.append(number)

    def start(self, command: ServerCommand) -> subprocess.Popen[bytes]:
        """Start ``command`` in a new session (its own process group)."""
        process = subprocess.Popen(
            list(command.argv), env=dict(command.env), cwd=command.cwd, start_new_session=True
        )
        self.running.append(_Running(command, process))
        return process

    def wait(self) -> tuple[int, str]:
        """Block until a stop signal arrives or a server exits; meanwhile print
        ``"<name> is up: <url> (<n> s)"`` when a server with a ``url`` first accepts a
        connection.

        Returns:
            ``(exit code for kb, message)``: ``0`` after a stop signal; a server's own exit
            code (1 if it was 0) when it exited by itself, the message naming it.
        """
        while True:
            if self.received:
                return 0, f"stopping ({signal.Signals(self.received[0]).name})"
            for server in self.running:
                code = server.process.poll()
                if code is not None:
                    return (code or 1), f"{server.command.name} exited with code {code}; stopping"
                if server.check_up():
                    took = time.monotonic() - server.started
                    print(f"{server.command.name} is up: {server.command.url} ({took:.0f} s)",
                          flush=True)
            time.sleep(POLL_SECONDS)

    def stop(self, number: int = signal.SIGTERM) -> None:
        """Send ``number`` to every server group, wait up to ``grace`` seconds for each group
        to empty (a second stop signal cuts the wait short), then SIGKILL what is left."""
        for server in self.running:
            _signal_group(server.group, number)
        seen = len(self.received)
        deadline = time.monotonic() + self.grace
        while time.monotonic() < deadline and len(self.received) == seen:
            for server in self.running:
                server.process.poll()  # reap the leader, so its group can empty
            if not any(_group_alive(server.group) for server in self.running):
                break
            time.sleep(POLL_SECONDS)
        for server in self.running:
            _signal_group(server.group, signal.SIGKILL)
            try:
                server.process.wait(timeout=self.grace)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
                print(f"{server.command.name} (pid {server.process.pid}) did not exit", file=sys.stderr)
        self.running.clear()


def _signal_group(group: int, number: int) -> None:
    try:
        os.killpg(group, number)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already empty


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a member we may not signal still exists
        return True
    return True


def serve(commands: Sequence[ServerCommand]) -> tuple[int, str]:
    """Run ``commands`` until SIGINT/SIGTERM or until one exits; stop them all either way.

    Returns:
        ``(kb's exit code, what happened)``: ``0`` when stopped by a signal, else the exit
        code of the server that exited by itself (``1`` if that was ``0``).
    """
    with Supervisor() as supervisor:
        for command in commands:
            supervisor.start(command)
        return supervisor.wait()


def server_url(host: str, port: int) -> str:
    """``http://host:port`` for a server bound to ``host``: a wildcard address is shown (and
    probed) as 127.0.0.1, an IPv6 literal goes in brackets."""
    shown = "127.0.0.1" if host in WILDCARD_HOSTS else bracket_host(host)
    return f"http://{shown}:{port}"


#: ``workspace.yaml`` at the repository root: the code location ``dagster dev`` loads.
WORKSPACE = Path(__file__).resolve().parents[1] / "workspace.yaml"


def dagster_ui(settings: Settings, *, host: str, port: int) -> ServerCommand:
    """``dagster dev -w workspace.yaml`` on ``settings``' instance (UI, daemon, sensor).

    It runs from ``DAGSTER_HOME``: from the repository root Dagster warns that the
    dagster.yaml there "will not be used", though its copy in ``DAGSTER_HOME`` is. ``dg dev``
    (which Dagster's deprecation notice suggests) needs another package, so that notice is
    silenced.
    """
    dagster_home = prepare_dagster_home(settings).resolve()
    env = dict(
        os.environ,
        KB_HOME=str(settings.home.resolve()),
        DAGSTER_HOME=str(dagster_home),
        PYTHONWARNINGS="ignore:Function `dev_command` is superseded",
    )
    argv = [
        sys.executable, "-m", "dagster", "dev", "-w", str(WORKSPACE), "-h", host, "-p", str(port),
    ]
    return ServerCommand("Dagster UI", argv, env, cwd=dagster_home, url=server_url(host, port))


def mcp_server(settings: Settings) -> ServerCommand:
    """``kb-mcp serve --transport http`` on ``settings``' stores (host and port from them)."""
    env = dict(
        os.environ,
        KB_HOME=str(settings.home.resolve()),
        KB_MCP_HOST=settings.mcp_host,
        KB_MCP_PORT=str(settings.mcp_port),
    )
    argv = [sys.executable, "-m", "kb_mcp.cli", "serve", "--transport", "http"]
    return ServerCommand(
        "MCP server", argv, env, url=server_url(settings.mcp_host, settings.mcp_port)
    )


def upload_page(
    settings: Settings, *, host: str, port: int, dagster_url: str, public: bool = False
) -> ServerCommand:
    """``python -m kb_assets.upload``: the upload page (``kb_assets.upload``) on ``settings``'
    stores and instance, its run links pointing at ``dagster_url``; ``public`` serves a
    non-loopback ``host`` without tokens."""
    env = dict(
        os.environ,
        KB_HOME=str(settings.home.resolve()),
        DAGSTER_HOME=str(prepare_dagster_home(settings).resolve()),
    )
    argv = [
        sys.executable, "-m", "kb_assets.upload", "--host", host, "--port", str(port),
        "--dagster-url", dagster_url,
    ]
    if public:
        argv.append("--public")
    return ServerCommand("upload page", argv, env, url=server_url(host, port))
