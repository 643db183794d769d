"""Stopping ``kb ui`` / ``kb demo`` (defect 4): a signal to kb's own pid stops every server it
started and everything those started, and frees their ports.

The supervisor is tested first on small Python processes; the slow tests then run the real
``kb demo`` (``dagster dev`` + the MCP server) and signal it as a process manager would.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from kb_assets.serve import ServerCommand, Supervisor

#: A server that starts a grandchild (in its process group), writes the grandchild's pid to
#: the file named by argv[1], then waits.
PARENT_WITH_CHILD = (
    "import pathlib, subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    "pathlib.Path(sys.argv[1]).write_text(str(child.pid))\n"
    "time.sleep(600)\n"
)
#: A server that ignores SIGTERM and SIGINT (only SIGKILL stops it); writes argv[1] once its
#: handlers are in place.
STUBBORN = (
    "import pathlib, signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "pathlib.Path(sys.argv[1]).write_text('ready')\n"
    "time.sleep(600)\n"
)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped is not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (children, their children, …), from ``/proc``."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (FileNotFoundError, ProcessLookupError):
                continue
            parents[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return {p for p in found if alive(p)}


def command(code: str, *args: str) -> ServerCommand:
    return ServerCommand("test server", [sys.executable, "-c", code, *args], dict(os.environ))


def written(path: Path) -> str:
    """The text of ``path`` once a server has written it."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} was never written")


def test_stop_ends_each_server_and_what_it_started(tmp_path: Path) -> None:
    with Supervisor(grace=5.0) as supervisor:
        server = supervisor.start(command(PARENT_WITH_CHILD, str(tmp_path / "child.pid")))
        grandchild = int(written(tmp_path / "child.pid"))
        assert alive(grandchild)
    # leaving the context stopped the server's whole process group
    assert server.returncode == -signal.SIGTERM
    assert not alive(grandchild)


def test_a_server_that_ignores_the_signal_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    with Supervisor(grace=0.5) as supervisor:
        server = supervisor.start(command(STUBBORN, str(tmp_path / "ready")))
        written(tmp_path / "ready")
        supervisor.stop(signal.SIGTERM)
        assert server.returncode == -signal.SIGKILL


def test_wait_returns_when_a_server_exits_by_itself() -> None:
    with Supervisor(grace=1.0) as supervisor:
        supervisor.start(command("import sys; sys.exit(3)"))
        code, message = supervisor.wait()
    assert (code, message) == (3, "test server exited with code 3; stopping")


def test_wait_returns_0_after_a_stop_signal() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with Supervisor(grace=1.0) as supervisor:
        supervisor.start(command("import time; time.sleep(600)"))
        os.kill(os.getpid(), signal.SIGTERM)  # handled by the supervisor, not fatal
        code, message = supervisor.wait()
    assert (code, message) == (0, "stopping (SIGTERM)")
    assert signal.getsignal(signal.SIGTERM) is before  # the old handler is back


# --------------------------------------------------------------------------------------
# The real `kb demo`: dagster dev (webserver, daemon, code server) and the MCP server
# --------------------------------------------------------------------------------------
KB = str(Path(sys.executable).with_name("kb"))


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, int, Path]]:
    """``kb demo`` on an empty folder (nothing to build) with free ports, started as its own
    session so that nothing here can leak past the test; yields once both servers answer."""
    ui_port, mcp_port = free_port(), free_port()
    empty = tmp_path / "no-pdfs"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KB_", "DAGSTER_"))}
    env.update(KB_HOME=str(tmp_path / "kb"), KB_MCP_PORT=str(mcp_port))
    log = tmp_path / "demo.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            # a free port for the upload page too: the default 3001 may be taken
            [
                KB, "demo", str(empty), "--ui-port", str(ui_port),
                "--upload-port", str(free_port()),
            ],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and process.poll() is None:
            if answers(f"http://127.0.0.1:{ui_port}/server_info") and answers(
                f"http://127.0.0.1:{mcp_port}/healthz"
            ):
                break
            time.sleep(1)
        else:
            pytest.fail(f"kb demo did not serve within 240 s:\n{log.read_text()[-3000:]}")
        yield process, ui_port, mcp_port, log
    finally:
        for pid in descendants(process.pid) | {process.pid}:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        process.wait()


@pytest.mark.slow
@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_to_kb_stops_every_server_and_frees_the_ports(demo, number: int) -> None:
    process, ui_port, mcp_port, log = demo
    # the folder the README tells a user to drop documents into exists, and the demo says where
    inbox = log.parent / "kb" / "inbox"
    assert inbox.is_dir() and f"Inbox: {inbox}" in log.read_text(), log.read_text()[-3000:]
    children = descendants(process.pid)
    # dagster dev, its webserver and daemon, the code server, and the MCP server at least
    assert len(children) >= 4, json.dumps(sorted(children))
    os.kill(process.pid, number)  # kb's pid only, as a process manager signals
    sent = time.monotonic()
    while time.monotonic() - sent < 10 and (process.poll() is None or any(map(alive, children))):
        time.sleep(0.2)
    assert process.poll() == 0, log.read_text()[-3000:]
    assert [pid for pid in children if alive(pid)] == []
    assert port_free(ui_port) and port_free(mcp_port)


def test_wait_says_when_a_server_first_answers_at_its_url(
    capsys: pytest.CaptureFixture[str],
) -> None:
    port = free_port()
    listen = (
        "import socket, time\n"
        f"s = socket.socket(); s.bind(('127.0.0.1', {port})); time.sleep(0.5); s.listen()\n"
        "time.sleep(1); raise SystemExit(3)\n"  # up for 1 s: ~5 of the supervisor's polls
    )
    with Supervisor(grace=1.0) as supervisor:
        supervisor.start(ServerCommand(
            "slow server", [sys.executable, "-c", listen], dict(os.environ),
            url=f"http://127.0.0.1:{port}",
        ))
        code, _ = supervisor.wait()
    assert code == 3
    said = capsys.readouterr().out.splitlines()
    assert len(said) == 1  # once, not at every poll
    assert said[0].startswith(f"slow server is up: http://127.0.0.1:{port} (")
