"""Every spelling of one stored file answers alike on ``/files`` (a new-user trial found
``…%40v1`` answering a bare 404 where the same file's plain link answered 410): ``@`` or
``%40`` (uvicorn decodes the path once), version 1 with ``@v1`` or without, a version number
with leading zeros; a double-encoded ``%2540`` is decoded once only and finds nothing, and
the traversal checks hold after respelling. Requests go over a real socket to uvicorn, so the
paths are the ones a client's bytes become."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from kb_mcp.http import build_app, download_name, servable_key, stored_spelling
from kb_mcp.links import file_signature, signing_key
from tests.mcp.corpus import HashingEmbedder, corpus_settings, served
from tests.mcp.test_superseded_links import V3, three_versions  # noqa: F401 - the fixture
from tests.mcp.test_versions import Kb

DOC = "pdfs/life-support-rules.md"


def statuses(base: str, paths: list[str]) -> dict[str, int]:
    """``GET`` each raw path (sent as written: httpx keeps its percent-escapes)."""
    with httpx.Client(base_url=base, timeout=10) as client:
        return {path: client.get(path).status_code for path in paths}


@pytest.fixture(scope="module")
def superseded_base(
    three_versions: tuple[Kb, dict[int, str]],  # noqa: F811
    embedder: HashingEmbedder,
) -> Iterator[str]:
    kb, _ = three_versions
    with served(kb.home, embedder) as url:
        yield url


def test_each_spelling_of_a_version_answers_like_its_stored_key(superseded_base: str) -> None:
    spellings = {
        # version 1 (superseded): stored under the plain doc_id
        410: [f"/files/{DOC}", f"/files/{DOC}@v1", f"/files/{DOC}%40v1", f"/files/{DOC}%40v01",
              # version 2 (superseded)
              f"/files/{DOC}@v2", f"/files/{DOC}%40v2", f"/files/{DOC}%40v002"],
        # version 3 serves
        200: [f"/files/{DOC}@v3", f"/files/{DOC}%40v3", f"/files/{DOC}%40v03"],
        # decoded once only, no version 0 or 4, no other separator: no such file
        404: [f"/files/{DOC}%2540v1", f"/files/{DOC}%2540v3", f"/files/{DOC}@v0",
              f"/files/{DOC}%40v4", f"/files/{DOC}@V3", f"/files/{DOC}@v",
              "/files/pdfs/no-such-document.pdf@v1", "/files/pdfs/no-such-document.pdf%40v1"],
    }
    answers = statuses(superseded_base, [p for paths in spellings.values() for p in paths])
    assert answers == {p: code for code, paths in spellings.items() for p in paths}
    # the 410 page is the same page, whichever spelling asked
    with httpx.Client(base_url=superseded_base, timeout=10) as client:
        plain = client.get(f"/files/{DOC}").text
        assert client.get(f"/files/{DOC}%40v1").text == plain
        assert "points at version 1 of" in plain
        assert client.get(f"/files/{DOC}%40v03").text == V3


@pytest.fixture(scope="module")
def corpus_base(corpus_home: Path, embedder: HashingEmbedder) -> Iterator[str]:
    with served(corpus_home, embedder) as url:
        yield url


def test_a_document_never_versioned_serves_under_its_v1_spelling(
    corpus_base: str, corpus_home: Path
) -> None:
    pdf = (corpus_home / "blobs/pdfs/retail-rules.pdf").read_bytes()
    with httpx.Client(base_url=corpus_base, timeout=10) as client:
        for path in ("/files/pdfs/retail-rules.pdf@v1", "/files/pdfs/retail-rules.pdf%40v1"):
            answer = client.get(path)
            assert (answer.status_code, answer.content) == (200, pdf), path
            assert answer.headers["content-disposition"] == 'inline; filename="retail-rules.pdf"'
        figure = client.get("/files/figures/retail-rules.pdf%40v1/figure-1.png")
        assert figure.status_code == 200 and figure.content.startswith(b"\x89PNG")
        assert client.get("/files/pdfs/retail-rules.pdf%40v2").status_code == 404


def test_respelling_keeps_the_key_checks() -> None:
    assert stored_spelling("pdfs/a.pdf@v1") == "pdfs/a.pdf"
    assert stored_spelling("pdfs/a.pdf@v07") == "pdfs/a.pdf@v7"
    assert stored_spelling("figures/a.pdf@v1/figure-2.png") == "figures/a.pdf/figure-2.png"
    # not a doc_id before the separator, no number, or not a served prefix: as given
    for key in ("pdfs/..@v1", "pdfs/.@v1", "pdfs/A.pdf@v1", "pdfs/a.pdf@v", "pdfs/a.pdf@v0",
                "pdfs/a.pdf@v١", "markdown/a.pdf@v1", "pdfs/@v1"):
        assert stored_spelling(key) == key, key
    assert servable_key("pdfs/..@v1") == "pdfs/..@v1"  # a plain (missing) name, not a '..'
    for bad in ("pdfs/../a.pdf@v1", "../pdfs/a.pdf@v1", "/pdfs/a.pdf@v1",
                "pdfs//a.pdf@v1", "markdown/a.pdf@v1", "pdfs/a.pdf@v1/../../kb.sqlite"):
        assert servable_key(bad) is None, bad
    assert servable_key("pdfs/a.pdf@v01") == "pdfs/a.pdf"


def test_a_signed_link_opens_its_file_under_any_spelling_and_no_other_file(
    three_versions: tuple[Kb, dict[int, str]],  # noqa: F811
    embedder: HashingEmbedder,
) -> None:
    kb, _ = three_versions
    key = signing_key(["s3cret"])
    settings = corpus_settings(kb.home, mcp_tokens="s3cret")
    first, third = file_signature(key, DOC), file_signature(key, f"{DOC}@v3")
    app = build_app(settings, embedder=embedder, warm=False)
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        assert client.get(f"/files/{DOC}%40v1", params={"sig": first}).status_code == 410
        assert client.get(f"/files/{DOC}@v03", params={"sig": third}).status_code == 200
        # a signature opens the file it was made for, not another version
        assert client.get(f"/files/{DOC}%40v3", params={"sig": first}).status_code == 401
        assert client.get(f"/files/{DOC}%40v1", params={"sig": third}).status_code == 401


def test_a_versioned_file_downloads_under_a_name_with_its_extension() -> None:
    # the trial saved "…_2014.pdf@v2", which no program opens as a PDF
    assert download_name("pdfs/rules.pdf@v2") == "rules (v2).pdf"
    assert download_name("pdfs/rules.pdf@v12") == "rules (v12).pdf"
    assert download_name("pdfs/rules.pdf") == "rules.pdf"
    assert download_name("figures/rules.pdf@v2/figure-1.png") == "figure-1.png"
