"""``kb-mcp serve --workers N``: a real two-worker server on the small corpus of
``tests/mcp/corpus.py`` (written with the local embedding model, so the workers' model matches
the index): both workers answer, each reports itself on ``/healthz``, searches succeed whichever
worker takes them, and SIGTERM stops every worker within 10 s. Plus the quick checks of the
option, the setting and the ``worker`` field of ``/healthz``."""

from __future__ import annotations

import os
import pickle
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from benchmarks.common import PROVIDER_ROLES
from benchmarks.mcp_server import Server, running_server, server_env
from kb_mcp.cli import WorkerApp, WorkerListener, reserve_port, worker_settings, worker_threads
from kb_mcp.cli import app as cli
from kb_mcp.http import build_app
from kb_shared.errors import SettingsError
from kb_shared.providers import factory as providers
from kb_shared.settings import Settings
from tests.mcp.corpus import RETAIL_ID, HashingEmbedder, corpus_settings, write_corpus

#: Every provider role forced local (no cloud key may leak into the servers).
LOCAL = {f"KB_{role}_PROVIDER": "local" for role in PROVIDER_ROLES}

#: MCP Streamable HTTP: a POST accepts JSON and SSE (MCP spec, "Transports").
POST_HEADERS = {"Accept": "application/json, text/event-stream"}

ORIGIN = "http://127.0.0.1:8765"


@pytest.fixture(scope="module")
def local_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """KB_HOME with the small corpus embedded by the local model the servers load."""
    home = tmp_path_factory.mktemp("workers")
    settings = Settings(home=home, embedding_provider="local")
    embedder = providers.embedder(settings)
    try:
        write_corpus(settings, embedder)
    finally:
        embedder.close()
    return home


@pytest.fixture
def two_workers(local_home: Path, tmp_path: Path) -> Iterator[Server]:
    """``kb-mcp serve --workers 2`` on ``local_home`` (INFO log in ``tmp_path/server.log``)."""
    with running_server(local_home, tmp_path / "server.log", "--workers", "2", "--log-level",
                        "info", env=server_env(local_home, **LOCAL)) as server:
        yield server


def _parent_pid(pid: int) -> int:
    """The parent of ``pid`` (``proc(5)``, ``/proc/<pid>/stat`` field 4)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _health(base: str) -> dict:
    """One ``/healthz`` on a fresh connection (so any worker may accept it)."""
    response = httpx.get(f"{base}/healthz", headers={"Connection": "close"}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def _search(base: str, number: int) -> dict:
    """One ``search_docs`` call, posted as plain JSON-RPC on a fresh connection."""
    body = {"jsonrpc": "2.0", "id": number, "method": "tools/call",
            "params": {"name": "search_docs", "arguments": {"query": "IN008-24", "top_k": 2}}}
    response = httpx.post(f"{base}/mcp", json=body, timeout=60,
                          headers={**POST_HEADERS, "Connection": "close"})
    assert response.status_code == 200, response.text
    return response.json()["result"]


def _answering_pids(base: str, wanted: int, attempts: int = 40) -> set[int]:
    """pids that answered ``/healthz``: rounds of 8 concurrent requests until ``wanted``
    distinct workers answered or ``attempts`` rounds were sent."""
    seen: set[int] = set()
    with ThreadPoolExecutor(8) as pool:
        for _ in range(attempts):
            for body in pool.map(lambda _: _health(base), range(8)):
                assert body["status"] == "ok"
                assert body["worker"]["ready"] is True and body["worker"]["workers"] == 2
                seen.add(body["worker"]["pid"])
            if len(seen) >= wanted:
                break
    return seen


@pytest.mark.slow
def test_two_workers_each_load_the_model_and_both_answer(two_workers: Server) -> None:
    # the server is up once one worker answers; until the other has bound its socket, the
    # kernel gives every connection to the first: wait for both (within 40 rounds of 8)
    assert len(_answering_pids(two_workers.base, wanted=2)) == 2
    # 16 keep-alive connections opened one after another: each worker listens on its own
    # SO_REUSEPORT socket, so the kernel spreads them by address hash (all 16 on one worker:
    # p = 2 / 2**16)
    clients = [httpx.Client(base_url=two_workers.base, timeout=30) for _ in range(16)]
    try:
        answers = [client.get("/healthz").json()["worker"] for client in clients]
        # a connection stays with the worker that accepted it
        again = [client.get("/healthz").json()["worker"]["pid"] for client in clients]
    finally:
        for client in clients:
            client.close()
    pids = {answer["pid"] for answer in answers}
    assert len(pids) == 2
    assert again == [answer["pid"] for answer in answers]
    assert all(answer["ready"] is True and answer["workers"] == 2 for answer in answers)
    # the workers are children of the kb-mcp process, which itself answers nothing
    assert {_parent_pid(pid) for pid in pids} == {two_workers.process.pid}
    assert two_workers.process.pid not in pids
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda n: _search(two_workers.base, n), range(16)))
    assert [r.get("isError", False) for r in results] == [False] * 16
    assert {r["structuredContent"]["results"][0]["doc_id"] for r in results} == {RETAIL_ID}
    # the embedding model loaded once in each worker, never in the supervisor
    assert two_workers.log_path.read_text().count("kb MCP server ready") == 2


@pytest.mark.slow
def test_sigterm_stops_every_worker_within_ten_seconds(two_workers: Server) -> None:
    pids = _answering_pids(two_workers.base, wanted=2)
    assert len(pids) == 2
    started = time.monotonic()
    two_workers.process.send_signal(signal.SIGTERM)
    try:
        code = two_workers.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pytest.fail("kb-mcp --workers 2 still running 10 s after SIGTERM")
    assert code == 0
    assert time.monotonic() - started < 10
    assert [pid for pid in pids if Path(f"/proc/{pid}").exists()] == []
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{two_workers.base}/healthz", timeout=5)


def test_healthz_names_the_answering_worker_and_the_worker_count(
    corpus_home: Path, embedder: HashingEmbedder
) -> None:
    settings = corpus_settings(corpus_home, mcp_workers=3)
    app = WorkerApp(settings, False, "WARNING")
    # the factory travels to the spawned workers by pickle, settings and all
    restored = pickle.loads(pickle.dumps(app))
    assert restored == app and restored.settings.mcp_workers == 3
    with TestClient(build_app(settings, embedder=embedder, warm=False), base_url=ORIGIN) as client:
        ready = client.get("/healthz")
    assert ready.status_code == 200 and ready.json()["points"] == 7
    assert ready.json()["worker"] == {"pid": os.getpid(), "ready": True, "workers": 3}


def test_each_worker_gets_its_own_reuse_port_tcp_socket_and_a_taken_port_is_refused() -> None:
    anchor = reserve_port("127.0.0.1", 0)
    port = anchor.getsockname()[1]
    try:
        # what a spawned worker gets when it unpickles the supervisor's listener
        mine = pickle.loads(pickle.dumps(WorkerListener("127.0.0.1", port)))
        try:
            assert isinstance(mine, socket.socket)
            assert mine.getsockname() == ("127.0.0.1", port)
            assert mine.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) == 1
            assert mine.proto == socket.IPPROTO_TCP  # asyncio then sets TCP_NODELAY
            mine.listen()
            # a second server on the same port is refused, even by a SO_REUSEPORT group
            with pytest.raises(OSError, match="Address already in use"):
                reserve_port("127.0.0.1", port)
        finally:
            mine.close()
    finally:
        anchor.close()


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_taken_port_is_refused_before_anything_is_served_or_loaded(
    tmp_path: Path, workers: str
) -> None:
    taken = socket.create_server(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    try:
        result = CliRunner().invoke(cli, ["serve", "--port", str(port), "--workers", workers,
                                          "--home", str(tmp_path)])
    finally:
        taken.close()
    assert result.exit_code == 3  # uvicorn's STARTUP_FAILURE
    assert (f"kb-mcp: cannot listen on 127.0.0.1:{port}: [Errno 98] Address already in use; "
            "stop what holds it or choose another port (--port, KB_MCP_PORT)") in result.output
    assert "MCP endpoint" not in result.output  # no server announced that never started
    assert list(tmp_path.iterdir()) == []  # refused before any store was opened


def test_workers_setting_defaults_to_one_and_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KB_MCP_WORKERS", raising=False)
    assert Settings().mcp_workers == 1
    monkeypatch.setenv("KB_MCP_WORKERS", "4")
    assert Settings().mcp_workers == 4
    monkeypatch.setenv("KB_MCP_WORKERS", "0")
    with pytest.raises(SettingsError, match="KB_MCP_WORKERS"):
        Settings()


def test_cli_refuses_workers_on_stdio_and_a_public_bind_without_tokens(tmp_path: Path) -> None:
    runner = CliRunner()
    stdio = runner.invoke(cli, ["serve", "--transport", "stdio", "--workers", "2",
                                "--home", str(tmp_path)])
    assert stdio.exit_code == 2
    assert "kb-mcp: --workers applies to HTTP; stdio serves one client" in stdio.output
    exposed = runner.invoke(cli, ["serve", "--host", "0.0.0.0", "--workers", "2",
                                  "--home", str(tmp_path)])
    assert exposed.exit_code == 2
    assert "kb-mcp: refusing to serve on '0.0.0.0' without authentication" in exposed.output
    too_many = runner.invoke(cli, ["serve", "--workers", "65", "--home", str(tmp_path)])
    assert too_many.exit_code == 2


def test_workers_share_the_cores_among_their_embedding_threads(corpus_home: Path) -> None:
    # N workers never run more embedding threads than there are cores, and each leaves one
    # core of its share to the thread that searches while the query is embedded
    assert [worker_threads(n, cores=2) for n in (1, 2, 3)] == [1, 1, 1]
    assert [worker_threads(n, cores=8) for n in (1, 2, 3, 16)] == [7, 3, 1, 1]
    cores = len(os.sched_getaffinity(0))
    two = worker_settings(corpus_settings(corpus_home, mcp_workers=2))
    assert two.local_embedding_threads == max(1, cores // 2 - 1)
    one = worker_settings(corpus_settings(corpus_home))
    assert one.local_embedding_threads == max(1, cores - 1)
    assert two.mcp_workers == 2 and two.home == corpus_home
    # an operator's own value is kept
    chosen = corpus_settings(corpus_home, mcp_workers=2, local_embedding_threads=3)
    assert worker_settings(chosen).local_embedding_threads == 3


def test_the_embedding_threads_setting_reaches_the_local_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KB_LOCAL_EMBEDDING_THREADS", "1")
    settings = Settings(home=tmp_path, embedding_provider="local")
    assert settings.local_embedding_threads == 1
    model = providers.embedder(settings)
    assert model.threads == 1  # type: ignore[attr-defined]
    monkeypatch.setenv("KB_LOCAL_EMBEDDING_THREADS", "0")
    with pytest.raises(SettingsError, match="KB_LOCAL_EMBEDDING_THREADS"):
        Settings(home=tmp_path)
