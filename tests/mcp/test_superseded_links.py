"""A citation link handed out before a new version (issue 16, "leftovers"): ``/files/<its
key>`` answers 410 Gone naming the versions and linking the current PDF (the citation's
``#page=`` carried over in a browser), never a bare 404 and never the new PDF under the old
link. The old PDF is kept as the "before" side of what changed (issue 27) and opens only for a
link that asks for it (``?before=1``). Text documents on fake providers, served by the
real HTTP app through Starlette's test client, and the HTML page in Chromium."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from benchmarks.mcp_server import free_port, serving_in_thread
from kb_assets.intake import admit
from kb_mcp.http import build_app
from kb_mcp.links import file_signature, signing_key
from tests.browser import browser_page, chromium  # noqa: F401 - fixtures
from tests.mcp.corpus import HashingEmbedder, corpus_settings
from tests.mcp.test_versions import DOC, NAME, V1, V2, Kb, write

ORIGIN = "http://127.0.0.1:8765"
V3 = V2.replace("five", "ten")
OLD = "pdfs/life-support-rules.md"
SECOND = "pdfs/life-support-rules.md@v2"
THIRD = "pdfs/life-support-rules.md@v3"


def add_and_build(kb: Kb, text: str, folder: str, number: int) -> None:
    (outcome,) = admit([write(kb.home / folder, text)], kb.stores, kb.instance, new_version=True)
    assert (outcome.status, outcome.version) == ("added", number)
    assert kb.build()


@pytest.fixture(scope="module")
def three_versions(tmp_path_factory: pytest.TempPathFactory, embedder: HashingEmbedder):
    """Versions 1 and 2 superseded (their files kept for what changed), version 3 serving;
    built once for the module (the tests only read)."""
    kb = Kb(tmp_path_factory.mktemp("superseded") / "home", embedder)
    add_and_build(kb, V2, "v2", 2)
    add_and_build(kb, V3, "v3", 3)
    history = kb.stores.catalog().versions(DOC)
    assert [(v.version, v.status, v.blob_key) for v in history] == [
        (1, "superseded", OLD), (2, "superseded", SECOND), (3, "serving", THIRD),
    ]
    blobs = kb.stores.blobs()
    assert (blobs.exists(OLD), blobs.exists(SECOND), blobs.exists(THIRD)) == (True, True, True)
    yield kb, {v.version: f"{v.superseded_at:%Y-%m-%d}" for v in history if v.superseded_at}
    kb.stores.close()


def test_an_old_citation_link_answers_410_with_the_current_pdf(
    three_versions: tuple[Kb, dict[int, str]], embedder: HashingEmbedder
) -> None:
    kb, dates = three_versions
    app = build_app(corpus_settings(kb.home), embedder=embedder, warm=False)
    with TestClient(app, base_url=ORIGIN) as client:
        first = client.get(f"/files/{OLD}")
        second = client.get("/files/pdfs/life-support-rules.md%40v2")
        current = client.get("/files/pdfs/life-support-rules.md%40v3")
        unknown = client.get("/files/pdfs/no-such-document.pdf")
        head = client.head(f"/files/{OLD}")
    assert first.status_code == 410
    assert first.headers["content-type"] == "text/plain; charset=utf-8"
    assert first.text == (
        f"This citation points at version 1 of {NAME}, superseded on {dates[1]} by version 2; "
        f"the current PDF (version 3) is {ORIGIN}/files/pdfs/life-support-rules.md%40v3\n"
    )
    assert second.status_code == 410
    assert second.text == (
        f"This citation points at version 2 of {NAME}, superseded on {dates[2]} by version 3; "
        f"the current PDF is {ORIGIN}/files/pdfs/life-support-rules.md%40v3\n"
    )
    # the current link serves the current file; nothing old is served under it, nor new under old
    assert current.status_code == 200 and current.text == V3
    assert V1 not in first.text and V3 not in first.text
    assert (unknown.status_code, unknown.text) == (404, "Not Found")
    assert head.status_code == 410


def test_a_before_link_opens_the_kept_superseded_file_and_nothing_else(
    three_versions: tuple[Kb, dict[int, str]], embedder: HashingEmbedder
) -> None:
    # compare_versions links the earlier issue with ?before=1 (kb_mcp.links.BEFORE_PARAM)
    kb, _ = three_versions
    app = build_app(corpus_settings(kb.home), embedder=embedder, warm=False)
    with TestClient(app, base_url=ORIGIN) as client:
        first = client.get(f"/files/{OLD}", params={"before": "1"})
        second = client.get("/files/pdfs/life-support-rules.md%40v2", params={"before": "1"})
        other = client.get(f"/files/{OLD}", params={"before": "yes"})
        unknown = client.get("/files/pdfs/no-such-document.pdf", params={"before": "1"})
    assert (first.status_code, first.text) == (200, V1)
    assert (second.status_code, second.text) == (200, V2)
    assert other.status_code == 410
    assert unknown.status_code == 404


def test_an_old_figure_link_answers_410_with_the_current_pdf(
    three_versions: tuple[Kb, dict[int, str]], embedder: HashingEmbedder
) -> None:
    # the trial's v1 figure link got a bare 404 where its PDF link explained itself
    kb, dates = three_versions
    app = build_app(corpus_settings(kb.home), embedder=embedder, warm=False)
    with TestClient(app, base_url=ORIGIN) as client:
        first = client.get("/files/figures/life-support-rules.md/figure-1.png")
        second = client.get("/files/figures/life-support-rules.md%40v2/figure-3.png")
        current = client.get("/files/figures/life-support-rules.md%40v3/figure-1.png")
        unknown = client.get("/files/figures/no-such-document.pdf/figure-1.png")
    assert first.status_code == 410
    assert first.text == (
        f"This citation points at a figure of version 1 of {NAME}, superseded on {dates[1]} "
        f"by version 2; the current PDF (version 3) is "
        f"{ORIGIN}/files/pdfs/life-support-rules.md%40v3\n"
    )
    assert second.status_code == 410 and "a figure of version 2" in second.text
    # a figure the serving version does not have is simply not there
    assert (current.status_code, unknown.status_code) == (404, 404)


def test_a_signed_old_link_gets_a_signed_current_link(
    three_versions: tuple[Kb, dict[int, str]], embedder: HashingEmbedder
) -> None:
    kb, dates = three_versions
    key = signing_key(["s3cret"])
    settings = corpus_settings(kb.home, mcp_tokens="s3cret")
    with TestClient(build_app(settings, embedder=embedder, warm=False), base_url=ORIGIN) as client:
        unsigned = client.get(f"/files/{OLD}")
        signed = client.get(f"/files/{OLD}", params={"sig": file_signature(key, OLD)})
    assert unsigned.status_code == 401  # a gone file is no way around the tokens
    assert signed.status_code == 410
    assert signed.text.endswith(
        f"the current PDF (version 3) is {ORIGIN}/files/pdfs/life-support-rules.md%40v3"
        f"?sig={file_signature(key, THIRD)}\n"
    )


def test_the_html_page_keeps_the_cited_page_on_the_current_link(
    three_versions: tuple[Kb, dict[int, str]], embedder: HashingEmbedder,
    browser_page: Any, tmp_path: Path,  # noqa: F811
) -> None:
    kb, dates = three_versions
    port = free_port()
    settings = corpus_settings(kb.home, mcp_port=port)
    page = browser_page
    with serving_in_thread(build_app(settings, embedder=embedder, warm=False), port) as base:
        response = page.goto(f"{base}/files/{OLD}#page=4")
        assert response is not None and response.status == 410
        link = page.locator("a#current")
        expected = f"{base}/files/pdfs/life-support-rules.md%40v3#page=4"
        assert link.get_attribute("href") == expected
        assert page.locator("p").inner_text() == (
            f"This citation points at version 1 of {NAME}, superseded on {dates[1]} by version "
            f"2; the current PDF (version 3) is {expected}"
        )
        page.screenshot(path=str(tmp_path / "superseded.png"))
    # the one console line is Chromium's note of the 410 itself; the script ran without error
    assert page.kb_errors == [
        "Failed to load resource: the server responded with a status of 410 (Gone)"
    ]


def test_the_html_page_has_the_look_of_kbs_other_pages(
    three_versions: tuple[Kb, dict[int, str]], embedder: HashingEmbedder,
    browser_page: Any, tmp_path: Path,  # noqa: F811
) -> None:
    kb, _ = three_versions
    port = free_port()
    settings = corpus_settings(kb.home, mcp_port=port)
    page = browser_page
    with serving_in_thread(build_app(settings, embedder=embedder, warm=False), port) as base:
        page.goto(f"{base}/files/{OLD}")
        assert page.locator("h1").inner_text() == f"Version 1 of {NAME} is superseded"
        look = page.evaluate(
            "() => { const body = getComputedStyle(document.body);"
            " const box = getComputedStyle(document.querySelector('p.notice'));"
            " return [body.fontFamily, body.maxWidth, box.borderTopStyle, box.borderRadius]; }"
        )
        page.screenshot(path=str(tmp_path / "superseded-styled.png"))
    # the gallery's type and width (kb_mcp.pages.style), applied: the CSP lets that style in
    assert look == [
        'system-ui, -apple-system, "Segoe UI", sans-serif', "1200px", "solid", "8px",
    ]
    assert page.kb_errors == [
        "Failed to load resource: the server responded with a status of 410 (Gone)"
    ]
