"""The HTTP app: ``/files`` (content types, 404s, path traversal), ``/healthz``, bearer tokens,
Host checks, the refusal to expose a non-loopback address, and the CLI's refusal message.

Traversal paths are sent as raw ASGI requests: an HTTP client would normalise ``..`` away
before the app saw it, and the point is what the app does when it does see it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from kb_mcp.cli import app as cli
from kb_mcp.http import (
    ExposureError,
    allowed_hosts,
    build_app,
    exposure_problem,
    host_allowed,
    media_type,
    servable_key,
)
from kb_mcp.links import Links, base_url, file_signature, links_for, signing_key
from kb_shared.settings import Settings
from tests.mcp.corpus import HashingEmbedder, corpus_settings

ORIGIN = "http://127.0.0.1:8765"


@pytest.fixture(scope="module")
def client(corpus_home: Path, embedder: HashingEmbedder) -> Iterator[TestClient]:
    """A test client of the kb app on the corpus, one per module: the tests only send
    requests, and the app (built, its stores opened by its lifespan) costs more than they do
    (benchmarks/results/test-lanes.md, 2026-12-07). It sets no cookie without tokens."""
    app = build_app(corpus_settings(corpus_home), embedder=embedder, warm=False)
    with TestClient(app, base_url=ORIGIN) as test_client:
        yield test_client


async def _raw_get(app, path: str, raw_path: bytes, headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": path, "raw_path": raw_path, "query_string": b"",
        "root_path": "", "headers": headers, "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8765),
    }
    sent: list[dict] = []
    requested = False
    done = anyio.Event()

    async def receive() -> dict:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await done.wait()  # like a server: the client disconnects once the response is sent
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            done.set()

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, body


def raw_get(client: TestClient, path: str, raw_path: bytes | None = None) -> tuple[int, bytes]:
    """GET ``path`` exactly as given (no normalisation), inside the running app's event loop."""
    headers = [(b"host", b"127.0.0.1:8765")]
    return client.portal.call(_raw_get, client.app, path, raw_path or path.encode("latin-1"), headers)


def test_files_serves_stored_pdfs_and_pngs_with_their_types(client: TestClient, corpus_home: Path) -> None:
    pdf = client.get("/files/pdfs/retail-rules.pdf")
    assert pdf.status_code == 200
    assert pdf.headers["content-type"] == "application/pdf"
    assert pdf.headers["x-content-type-options"] == "nosniff"
    assert pdf.headers["content-disposition"] == 'inline; filename="retail-rules.pdf"'
    assert pdf.content == (corpus_home / "blobs/pdfs/retail-rules.pdf").read_bytes()
    png = client.get("/files/figures/retail-rules.pdf/figure-1.png")
    assert (png.status_code, png.headers["content-type"]) == (200, "image/png")
    assert png.content.startswith(b"\x89PNG\r\n\x1a\n")
    assert client.head("/files/pdfs/dispatch-procedure.pdf").status_code == 200


def test_files_answers_404_for_missing_and_private_keys(client: TestClient) -> None:
    assert client.get("/files/pdfs/missing.pdf").status_code == 404
    assert client.get("/files/figures/retail-rules.pdf/figure-2.png").status_code == 404
    assert client.get("/files/pdfs").status_code == 404  # a folder, not a file
    # stored, but not under a served prefix
    assert client.get("/files/markdown/retail-rules.pdf.md").status_code == 404
    assert client.post("/files/pdfs/retail-rules.pdf").status_code == 405


@pytest.mark.parametrize(
    ("path", "raw"),
    [
        ("/files/../kb.sqlite", None),
        ("/files/pdfs/../../kb.sqlite", None),
        ("/files/pdfs/../pdfs/retail-rules.pdf", None),
        ("/files/../kb.sqlite", b"/files/%2e%2e/kb.sqlite"),  # what a server decodes %2e%2e to
        ("/files/pdfs/%2e%2e/%2e%2e/kb.sqlite", None),  # double-encoded stays literal, not found
        ("/files//etc/passwd", None),
        ("/files/%2Fetc%2Fpasswd", None),
        ("/files/pdfs\\..\\..\\kb.sqlite", None),
        ("/files/figures/../../vectors.sqlite", None),
        ("/files/pdfs/retail-rules.pdf\x00.png", None),
        ("/files/" + str(Path("/etc/passwd")), None),
    ],
)
def test_path_traversal_is_impossible(client: TestClient, path: str, raw: bytes | None) -> None:
    assert raw_get(client, "/files/pdfs/retail-rules.pdf")[0] == 200  # the route is live
    status, body = raw_get(client, path, raw)
    assert status == 404
    assert body == b"Not Found"


def test_servable_keys_are_plain_keys_under_served_prefixes() -> None:
    assert servable_key("pdfs/a.pdf") == "pdfs/a.pdf"
    assert servable_key("figures/a.pdf/figure-1.inline.png") == "figures/a.pdf/figure-1.inline.png"
    for bad in ("../pdfs/a.pdf", "pdfs/../x", "/pdfs/a.pdf", "pdfs\\a.pdf", "pdfs//a.pdf",
                "markdown/a.md", "assets/x.json", "pdfs/.kb-tmp-1", ""):
        assert servable_key(bad) is None, bad


def test_media_types_come_from_extension_then_signature() -> None:
    assert media_type("pdfs/a.pdf", b"") == "application/pdf"
    assert media_type("figures/a/figure-1.png", b"") == "image/png"
    assert media_type("pdfs/report", b"%PDF-1.7") == "application/pdf"
    assert media_type("pdfs/blob", b"\x00\x01") == "application/octet-stream"


def test_healthz_reports_counts_without_a_token(corpus_home: Path, embedder: HashingEmbedder) -> None:
    settings = corpus_settings(corpus_home, mcp_tokens="s3cret")
    with TestClient(build_app(settings, embedder=embedder, warm=False), base_url=ORIGIN) as client:
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok", "documents": 2, "pending": 1, "failed": 1,
        "embedding_model": "test-hashing-256", "points": 7,
        "worker": {"pid": os.getpid(), "ready": True, "workers": 1},
        "stores": {role: {"status": "ok"} for role in ("catalog", "vectors", "graph", "blobs")},
    }


def test_bearer_tokens_guard_mcp_and_files(corpus_home: Path, embedder: HashingEmbedder) -> None:
    settings = corpus_settings(corpus_home, mcp_tokens="s3cret, other-token")
    with TestClient(build_app(settings, embedder=embedder, warm=False), base_url=ORIGIN) as client:
        assert client.get("/files/pdfs/retail-rules.pdf").status_code == 401
        wrong = client.get("/files/pdfs/retail-rules.pdf", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        assert wrong.headers["www-authenticate"] == 'Bearer realm="kb"'
        basic = client.get("/files/pdfs/retail-rules.pdf", headers={"Authorization": "Basic s3cret"})
        assert basic.status_code == 401
        for token in ("s3cret", "other-token"):
            ok = client.get("/files/pdfs/retail-rules.pdf", headers={"Authorization": f"Bearer {token}"})
            assert ok.status_code == 200
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        assert client.post("/mcp", json=initialize).status_code == 401


def test_signed_citation_links_open_their_own_file_only(
    corpus_home: Path, embedder: HashingEmbedder
) -> None:
    settings = corpus_settings(corpus_home, mcp_tokens="s3cret")
    key = signing_key(["s3cret"])
    links = Links("http://127.0.0.1:8765", key)
    url = links.page("pdfs/retail-rules.pdf", 3)
    signature = file_signature(key, "pdfs/retail-rules.pdf")
    assert url == f"http://127.0.0.1:8765/files/pdfs/retail-rules.pdf?sig={signature}#page=3"
    assert len(signature) == 32
    with TestClient(build_app(settings, embedder=embedder, warm=False), base_url=ORIGIN) as client:
        ok = client.get(f"/files/pdfs/retail-rules.pdf?sig={signature}")
        assert ok.status_code == 200 and ok.content.startswith(b"%PDF-")
        # the same signature does not open another file, a tampered one opens nothing
        assert client.get(f"/files/pdfs/other.pdf?sig={signature}").status_code == 401
        assert client.get("/files/pdfs/retail-rules.pdf?sig=" + "0" * 32).status_code == 401
        # and it is no key to the MCP endpoint
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        assert client.post(f"/mcp?sig={signature}", json=ping).status_code == 401
    # rotating the tokens revokes old links
    assert file_signature(signing_key(["new-token"]), "pdfs/retail-rules.pdf") != signature
    # without tokens, links carry no signature
    assert Links("http://h:1", signing_key([])).file("pdfs/a.pdf") == "http://h:1/files/pdfs/a.pdf"


def test_dns_rebinding_protection_checks_host_on_mcp_and_files(client: TestClient) -> None:
    evil = {"Host": "evil.example:8765"}
    assert client.get("/files/pdfs/retail-rules.pdf", headers=evil).status_code == 421
    request = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    assert client.post("/mcp", json=request, headers=evil).status_code == 421
    assert client.get("/files/pdfs/retail-rules.pdf", headers={"Host": "localhost:8765"}).status_code == 200


def test_allowed_hosts_add_configured_names(corpus_home: Path, embedder: HashingEmbedder) -> None:
    settings = corpus_settings(
        corpus_home, mcp_allowed_hosts="kb.example.com, docs.example.org:443",
        public_url="https://public.example.net/kb",
    )
    hosts = allowed_hosts(settings)
    assert hosts == [
        "127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]", "[::1]:*",
        "public.example.net", "public.example.net:*", "kb.example.com", "kb.example.com:*",
        "docs.example.org:443",
    ]
    assert host_allowed("kb.example.com", hosts) and host_allowed("kb.example.com:8443", hosts)
    assert not host_allowed("docs.example.org:80", hosts)
    assert not host_allowed("127.0.0.1.evil.example:80", hosts)
    assert not host_allowed(None, hosts)
    with TestClient(build_app(settings, embedder=embedder, warm=False), base_url="http://kb.example.com") as c:
        assert c.get("/files/pdfs/retail-rules.pdf").status_code == 200


def test_non_loopback_binds_need_tokens_or_public() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "localhost", "::1", "[::1]"):
        assert exposure_problem(host, [], public=False) is None
    assert exposure_problem("0.0.0.0", ["t"], public=False) is None
    assert exposure_problem("0.0.0.0", [], public=True) is None
    message = exposure_problem("0.0.0.0", [], public=False)
    assert message == (
        "refusing to serve on '0.0.0.0' without authentication: a non-loopback address "
        "exposes the corpus to the network. Set KB_MCP_TOKENS to one or more comma-separated "
        "bearer tokens (clients send 'Authorization: Bearer <token>'), or pass --public to "
        "serve it openly on purpose, or bind 127.0.0.1."
    )
    with pytest.raises(ExposureError, match="refusing to serve on '10.0.0.5'"):
        build_app(Settings(mcp_host="10.0.0.5"), embedder=HashingEmbedder(), warm=False)


def test_cli_refuses_a_public_bind_without_tokens(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["serve", "--host", "0.0.0.0", "--home", str(tmp_path)])
    assert result.exit_code == 2
    assert "kb-mcp: refusing to serve on '0.0.0.0' without authentication" in result.output


def test_citation_links_use_the_public_url_or_the_bind_address() -> None:
    assert base_url(Settings()) == "http://127.0.0.1:8765"
    assert base_url(Settings(mcp_host="::1", mcp_port=9000)) == "http://[::1]:9000"
    assert base_url(Settings(public_url="https://kb.example.com/")) == "https://kb.example.com"
    links = Links("https://kb.example.com")
    assert links.page("pdfs/a b#1.pdf", 4) == "https://kb.example.com/files/pdfs/a%20b%231.pdf#page=4"
    assert links.page("pdfs/a.pdf", None) == "https://kb.example.com/files/pdfs/a.pdf"
    assert links.file(None) is None


def test_stdio_links_point_at_local_files_unless_a_public_url_is_set(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", mcp_tokens="t1")
    blobs = (tmp_path / "home" / "blobs").as_uri()
    assert links_for(settings, stdio=True).page("pdfs/a b.pdf", 2) == f"{blobs}/pdfs/a%20b.pdf#page=2"
    # over HTTP the same settings give signed /files links
    assert links_for(settings).file("pdfs/a.pdf") == (
        "http://127.0.0.1:8765/files/pdfs/a.pdf?sig=" + file_signature(signing_key(["t1"]), "pdfs/a.pdf")
    )
    public = Settings(home=tmp_path / "home", public_url="https://kb.example.com")
    assert links_for(public, stdio=True).file("pdfs/a.pdf") == "https://kb.example.com/files/pdfs/a.pdf"
    remote = Settings(home=tmp_path / "home", blob_url="memory://kb")
    assert links_for(remote, stdio=True).file("pdfs/a.pdf") == "http://127.0.0.1:8765/files/pdfs/a.pdf"


@pytest.mark.parametrize(("level", "expected"), [("INFO", "WARNING"), ("DEBUG", "NOTSET")])
def test_per_request_transport_endings_are_not_logged_at_info(
    corpus_home: Path, embedder: HashingEmbedder, level: str, expected: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # From a new-user trial: every stateless call logged "Terminating session: None".
    import logging

    from kb_mcp.http import STREAMABLE_HTTP_LOGGER

    logger = logging.getLogger(STREAMABLE_HTTP_LOGGER)
    monkeypatch.setattr(logger, "level", logging.NOTSET)
    build_app(corpus_settings(corpus_home), embedder=embedder, warm=False, log_level=level)
    assert logging.getLevelName(logger.level) == expected


@pytest.mark.parametrize("columns", [80, 120])
def test_serve_help_wraps_at_the_terminal_width_not_the_source_lines(columns: int) -> None:
    result = CliRunner().invoke(cli, ["serve", "--help"], env={"COLUMNS": str(columns)})
    assert result.exit_code == 0
    lines = [line.strip() for line in result.output.splitlines()]
    start = next(n for n, line in enumerate(lines) if line.startswith("Exits with status 2"))
    paragraph = lines[start:lines.index("", start)]
    assert " ".join(paragraph) == (
        "Exits with status 2 (and says why) when asked to bind a non-loopback address without "
        "KB_MCP_TOKENS and without --public, or when --workers above 1 is given with "
        "--transport stdio; with status 3 when the port cannot be bound (checked before the "
        "model loads)."
    )
    # each line is filled to the width before the next begins (no break after "without")
    assert all(len(line) + len(next_line.split()[0]) + 1 > columns - 4
               for line, next_line in zip(paragraph, paragraph[1:]))
