"""``benchmarks.mcp_server``: the start / wait for /healthz / stop lifecycle the serving
benchmark and the end-to-end tests share, run against a stand-in for the ``kb-mcp`` script."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx
import pytest

from benchmarks import mcp_server

#: A stand-in ``kb-mcp``: prints its arguments and KB_HOME, then answers GET /healthz.
FAKE_SERVER = """\
import os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

print("argv", sys.argv[1:], "home", os.environ.get("KB_HOME"), "extra",
      os.environ.get("KB_EXTRA"), flush=True)

class Health(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/healthz" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass

port = int(sys.argv[sys.argv.index("--port") + 1])
HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "kb-mcp"
    path.write_text(f"#!{sys.executable}\n{body}", encoding="utf-8")
    path.chmod(0o755)
    return path


def test_the_server_is_started_with_its_home_waited_for_and_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_server, "KB_MCP", str(_script(tmp_path, FAKE_SERVER)))
    home, log = tmp_path / "home", tmp_path / "logs" / "server.log"
    env = mcp_server.server_env(home, KB_EXTRA="yes")
    with mcp_server.running_server(home, log, "--flag", env=env) as server:
        assert httpx.get(f"{server.base}/healthz", timeout=5).status_code == 200
        assert server.process.poll() is None
        assert server.log_path == log
    assert server.process.returncode is not None
    line = log.read_text().splitlines()[0]
    port = server.base.rsplit(":", 1)[1]
    assert line == (
        f"argv ['serve', '--port', '{port}', '--home', '{home}', '--log-level', 'warning', "
        f"'--flag'] home {home} extra yes"
    )


def test_a_server_that_exits_at_start_is_reported_with_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = "import sys\nprint('no corpus here', flush=True)\nsys.exit(3)\n"
    monkeypatch.setattr(mcp_server, "KB_MCP", str(_script(tmp_path, body)))
    with pytest.raises(RuntimeError, match="kb-mcp exited with 3: no corpus here"):
        with mcp_server.running_server(tmp_path, tmp_path / "server.log"):
            pytest.fail("the block must not run")


def test_a_missing_console_script_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_server, "KB_MCP", str(tmp_path / "nowhere" / "kb-mcp"))
    with pytest.raises(RuntimeError, match=r"nowhere/kb-mcp is missing"):
        with mcp_server.running_server(tmp_path, tmp_path / "server.log"):
            pytest.fail("the block must not run")


def test_server_env_drops_other_kb_settings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KB_VECTOR_BACKEND", "qdrant")
    monkeypatch.setenv("PATH_FOR_TEST", "kept")
    env = mcp_server.server_env(tmp_path, KB_EMBEDDING_PROVIDER="local")
    assert {k: v for k, v in env.items() if k.startswith("KB_")} == {
        "KB_HOME": str(tmp_path), "KB_EMBEDDING_PROVIDER": "local",
    }
    assert env["PATH_FOR_TEST"] == "kept"
    assert env["PATH"] == os.environ["PATH"]
