"""Build a corpus with the real pipeline (``kb_assets``: intake, then one Dagster run per
document) for the end-to-end and retrieval tests, and run ``kb-mcp serve`` against it.

Tests may use ``kb_assets``; only ``kb_mcp`` may not (``tests/test_import_rules.py``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

#: The console script pyproject installs next to the interpreter.
KB_MCP = str(Path(sys.executable).with_name("kb-mcp"))

#: How long a server may take to answer /healthz (loading the offline model takes seconds;
#: on a loaded CI machine much longer).
STARTUP_SECONDS = 180


def build_corpus(home: Path, pdfs: Sequence[Path]) -> list:
    """Add ``pdfs`` to a fresh ``home`` and build them; returns the build outcomes.

    Raises:
        AssertionError: a file was not added or a build failed (with the reason).
    """
    from kb_assets import operations  # noqa: PLC0415 - heavy, only for the tests that build
    from kb_assets.instance import dagster_instance  # noqa: PLC0415
    from kb_assets.intake import ADDED, intake_files  # noqa: PLC0415
    from kb_assets.resources import StoresResource  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415

    home.mkdir(parents=True, exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KB_HOME", str(home))
        patch.setenv("DAGSTER_HOME", str(home / "dagster"))
        settings = Settings()
        stores = StoresResource(home=str(home))
        outcomes = intake_files(list(pdfs), stores.catalog(), stores.blobs(), settings)
        assert [o.status for o in outcomes] == [ADDED] * len(pdfs), outcomes
        instance = dagster_instance(settings)
        built = operations.build_documents(stores, instance, [o.doc_id for o in outcomes])
        stores.close()
    failed = [(b.name, b.reason) for b in built if b.status != "ready"]
    assert not failed, failed
    return built


def free_port() -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a server subprocess: this one, minus other KB_ settings, plus
    ``KB_HOME``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env["KB_HOME"] = str(home)
    env.update(extra)
    return env


@contextmanager
def running_server(home: Path, log: Path, *args: str, **env: str) -> Iterator[str]:
    """Run ``kb-mcp serve`` on a free port; yield its base URL once /healthz answers 200.

    The process is terminated (then killed) on exit; its stdout/stderr go to ``log``.
    """
    port = free_port()
    with log.open("wb") as output:
        process = subprocess.Popen(
            [KB_MCP, "serve", "--port", str(port), "--log-level", "warning", *args],
            env=server_env(home, **env),
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + STARTUP_SECONDS
            while True:
                if process.poll() is not None:
                    raise AssertionError(f"kb-mcp exited with {process.returncode}: {log.read_text()}")
                try:
                    if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise AssertionError(f"kb-mcp did not answer /healthz: {log.read_text()}")
                time.sleep(0.25)
            yield base
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
