"""Run ``kb-mcp serve`` (HTTP) as a subprocess: start it on a free loopback port, wait for
``/healthz``, stop it; or serve an ASGI app in a thread (``serving_in_thread``). Used by the
serving and page benchmarks and by the end-to-end, page and retrieval tests, which may import
``benchmarks`` (``benchmarks`` never imports ``tests``)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any
from dataclasses import dataclass
from pathlib import Path

import httpx

#: The console script pyproject installs next to the interpreter.
KB_MCP = str(Path(sys.executable).with_name("kb-mcp"))

#: How long the server may take to answer ``/healthz`` (it loads the embedding model first;
#: on a loaded 2-core machine that has taken over a minute).
STARTUP_SECONDS = 180

#: How long a stopping server may take after SIGTERM before it is killed.
STOP_SECONDS = 20


def free_port() -> int:
    """A loopback TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serving_in_thread(app: Any, port: int, *, start_seconds: float = 60) -> Iterator[str]:
    """Serve the ASGI ``app`` with uvicorn on ``127.0.0.1:port`` in a daemon thread (lifespan
    on) and yield ``http://127.0.0.1:{port}``; stops it on exit.

    Raises:
        RuntimeError: uvicorn did not report started within ``start_seconds``.
    """
    import uvicorn  # noqa: PLC0415 - only the in-thread servers need it

    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="on", log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_seconds
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"uvicorn did not start on port {port}")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def server_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a server subprocess: this one without any other ``KB_`` setting,
    plus ``KB_HOME`` and ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env["KB_HOME"] = str(home)
    env.update(extra)
    return env


@dataclass
class Server:
    """A running ``kb-mcp serve``: its process, base URL, start-up time and log file.

    Attributes:
        startup_seconds: process start to the first ``/healthz`` 200.
    """

    process: subprocess.Popen[bytes]
    base: str
    startup_seconds: float
    log_path: Path

    def cpu_seconds(self) -> float:
        """User + system CPU seconds the server process has used (``proc(5)``
        ``/proc/<pid>/stat`` fields 14 and 15, in clock ticks)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks

    def memory(self) -> tuple[int | None, int | None]:
        """``(current RSS, peak RSS)`` in bytes from ``/proc/<pid>/status`` (``VmRSS``,
        ``VmHWM``); ``None`` where unavailable."""
        values: dict[str, int] = {}
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                key, _, rest = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    values[key] = int(rest.split()[0]) * 1024
        return values.get("VmRSS"), values.get("VmHWM")


@contextlib.contextmanager
def running_server(
    home: Path, log_path: Path, *args: str, env: Mapping[str, str] | None = None
) -> Iterator[Server]:
    """Run ``kb-mcp serve --home HOME`` on a free loopback port until the block ends; yield
    it once ``/healthz`` answers 200. On exit it is terminated, then killed after
    ``STOP_SECONDS``; its stdout and stderr go to ``log_path``.

    Args:
        args: more ``kb-mcp serve`` options.
        env: the server's environment (default ``server_env(home)``).

    Raises:
        RuntimeError: the console script is missing, or the server exited or did not answer
            ``/healthz`` within ``STARTUP_SECONDS`` (the message includes its log).
    """
    if not Path(KB_MCP).is_file():
        raise RuntimeError(f"{KB_MCP} is missing: install kb into this venv (make install)")
    port = free_port()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as output:
        started = time.monotonic()
        process = subprocess.Popen(
            [KB_MCP, "serve", "--port", str(port), "--home", str(home),
             "--log-level", "warning", *args],
            env=dict(env) if env is not None else server_env(home),
            stdout=output, stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            while True:
                if process.poll() is not None:
                    raise RuntimeError(
                        f"kb-mcp exited with {process.returncode}: {log_path.read_text()}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                        break
                if time.monotonic() - started > STARTUP_SECONDS:
                    raise RuntimeError(f"kb-mcp did not answer /healthz: {log_path.read_text()}")
                time.sleep(0.25)
            yield Server(process, base, time.monotonic() - started, log_path)
        finally:
            process.terminate()
            try:
                process.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
