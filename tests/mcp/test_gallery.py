"""The figure gallery (issue 13): ``/documents/{doc_id}/figures`` and its JSON on the real HTTP
app under uvicorn — the small corpus of ``tests/mcp/corpus.py`` in Chromium, 404s, the token
rule — and the sample corpus built by the real pipeline (slow)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.mcp_server import free_port, serving_in_thread
from kb_mcp.http import build_app
from kb_mcp.links import file_signature, signing_key
from tests.browser import browser_page, chromium  # noqa: F401 - fixtures
from tests.mcp.corpus import HashingEmbedder, served

TOKEN = "gallery-token"

#: Figure 1 of the small corpus: its 80×60 PNG and 40×30 inline copy (``tests/mcp/corpus.py``).
FIGURE_1_INLINE_WIDTH = 40


@pytest.fixture(scope="module")
def base(corpus_home: Path, embedder: HashingEmbedder) -> Iterator[str]:
    """The kb HTTP app on the small corpus, without tokens."""
    with served(corpus_home, embedder) as url:
        yield url


@pytest.fixture(scope="module")
def guarded(corpus_home: Path, embedder: HashingEmbedder) -> Iterator[str]:
    """The same app with a bearer token set."""
    with served(corpus_home, embedder, mcp_tokens=TOKEN) as url:
        yield url


def expected_json(base: str, sig: dict[str, str] | None = None) -> dict[str, Any]:
    """The gallery JSON of retail-rules.pdf served at ``base``; ``sig`` maps a blob key to
    the ``?sig=`` its link carries."""

    def url(key: str) -> str:
        return f"{base}/files/{key}" + (f"?sig={sig[key]}" if sig else "")

    return {
        "doc_id": "retail-rules.pdf",
        "name": "Retail Rules.pdf",
        "title": "Retail Market Rules",
        "version": "Version 2.1",
        "pages": 3,
        "url": url("pdfs/retail-rules.pdf"),
        "figures": [
            {
                "id": "retail-rules.pdf#figure-1",
                "number": 1,
                "page": 3,
                "page_label": None,
                "caption": "Life support notification flow from retailer to distributor",
                "description": (
                    "Figure 1: Life support notification flow from retailer to distributor"
                ),
                "figure_url": url("figures/retail-rules.pdf/figure-1.png"),
                "thumbnail_url": url("figures/retail-rules.pdf/figure-1.inline.png"),
                "page_url": url("pdfs/retail-rules.pdf") + "#page=3",
                "width_px": None,
                "height_px": None,
            },
            {
                # figure 2 was indexed but its PNG never stored: no image links, the PDF kept
                "id": "retail-rules.pdf#figure-2",
                "number": 2,
                "page": None,
                "page_label": None,
                "caption": "Organisation chart of the market operator",
                "description": "Figure 2: Organisation chart of the market operator",
                "figure_url": None,
                "thumbnail_url": None,
                "page_url": url("pdfs/retail-rules.pdf"),
                "width_px": None,
                "height_px": None,
            },
        ],
    }


def test_gallery_json_lists_the_documents_figures_from_the_index(base: str) -> None:
    with httpx.Client() as client:
        api = client.get(f"{base}/api/documents/retail-rules.pdf/figures")
        page_json = client.get(f"{base}/documents/retail-rules.pdf/figures?format=json")
        none = client.get(f"{base}/api/documents/dispatch-procedure.pdf/figures")
    assert api.status_code == 200
    assert api.json() == expected_json(base)
    assert page_json.json() == api.json()
    assert none.json()["figures"] == []


@pytest.mark.parametrize(
    "path",
    [
        "/documents/no-such.pdf/figures",
        "/api/documents/no-such.pdf/figures",
        "/documents/queued.pdf/figures",  # pending: never served
        "/api/documents/broken.pdf/figures",  # failed: never served
    ],
)
def test_unknown_or_unready_documents_are_404(base: str, path: str) -> None:
    with httpx.Client() as client:
        response = client.get(base + path)
    assert response.status_code == 404
    doc_id = path.split("/")[-2]
    if path.startswith("/api/"):
        assert response.json() == {"error": f"no ready document has doc_id '{doc_id}'"}
    else:
        assert response.headers["content-type"].startswith("text/html")
        assert f"no ready document has doc_id &#x27;{doc_id}&#x27;" in response.text


def test_tokens_guard_the_gallery_and_its_links_are_signed(guarded: str) -> None:
    key = signing_key([TOKEN])
    assert key is not None
    with httpx.Client() as client:
        for path in ("/documents/retail-rules.pdf/figures", "/api/documents/retail-rules.pdf/figures"):
            assert client.get(guarded + path).status_code == 401
        api = client.get(
            f"{guarded}/api/documents/retail-rules.pdf/figures",
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        assert api.status_code == 200
        keys = (
            "pdfs/retail-rules.pdf", "figures/retail-rules.pdf/figure-1.png",
            "figures/retail-rules.pdf/figure-1.inline.png",
        )
        assert api.json() == expected_json(guarded, {k: file_signature(key, k) for k in keys})
        # the signed image link opens in a browser without the token
        image = client.get(api.json()["figures"][0]["figure_url"])
    assert (image.status_code, image.headers["content-type"]) == (200, "image/png")


def test_the_gallery_page_shows_figures_with_working_links_in_chromium(
    browser_page: Any, base: str  # noqa: F811
) -> None:
    page = browser_page
    response = page.goto(f"{base}/documents/retail-rules.pdf/figures")
    assert response is not None and response.status == 200
    assert page.title() == "Figures — Retail Market Rules"
    cards = page.locator("li")
    assert cards.count() == 2
    first = page.locator('li[id="retail-rules.pdf#figure-1"]')
    image = first.locator("img")
    image.evaluate("img => img.decode()")
    assert image.evaluate("img => img.naturalWidth") == FIGURE_1_INLINE_WIDTH
    files = f"{base}/files"
    assert image.get_attribute("src") == f"{files}/figures/retail-rules.pdf/figure-1.inline.png"
    assert first.locator("a.full").get_attribute("href") == (
        f"{files}/figures/retail-rules.pdf/figure-1.png"
    )
    assert first.locator("a.source").text_content() == "Source page 3"
    assert first.locator("a.source").get_attribute("href") == f"{files}/pdfs/retail-rules.pdf#page=3"
    assert "Life support notification flow" in first.text_content()
    second = page.locator('li[id="retail-rules.pdf#figure-2"]')
    assert second.locator("img").count() == 0
    assert "page unknown" in second.text_content()
    assert page.kb_errors == []
    # the full-resolution link opens the PNG (Chromium then asks for /favicon.ico: not ours)
    first.locator("a.full").click()
    page.wait_for_url(f"{files}/figures/retail-rules.pdf/figure-1.png")
    assert page.locator("img").evaluate("img => img.naturalWidth") == 80


# ---------------------------------------------------------------------------------------------
# The sample corpus, built by the real pipeline
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample_home_base(sample_home: tuple[Path, Any]) -> Iterator[tuple[str, Path]]:
    """The kb HTTP app (real embedder) on the session's sample PDF built by the real pipeline
    (``sample_home``; the app only reads it)."""
    from kb_shared.settings import Settings  # noqa: PLC0415

    home, _ = sample_home
    port = free_port()
    app = build_app(Settings(home=home, mcp_port=port), warm=False)
    with serving_in_thread(app, port) as url:
        yield url, home


@pytest.mark.slow
def test_the_sample_corpus_figure_is_in_its_gallery(
    browser_page: Any, sample_home_base: tuple[str, Path]  # noqa: F811
) -> None:
    from kb_assets.sample_pdf import FIGURE_PAGE  # noqa: PLC0415

    base, home = sample_home_base
    doc = "sample-retail-market-procedure.pdf"
    page = browser_page
    assert page.goto(f"{base}/documents/{doc}/figures").status == 200
    cards = page.locator("li")
    assert cards.count() >= 1
    first = cards.first
    image = first.locator("img")
    image.evaluate("img => img.decode()")
    assert image.evaluate("img => img.naturalWidth") > 0
    files = f"{base}/files"
    assert first.locator("a.full").get_attribute("href") == f"{files}/figures/{doc}/figure-1.png"
    assert (home / "blobs" / "figures" / doc / "figure-1.png").is_file()
    assert "Notification flow" in first.text_content()
    assert first.locator("a.source").get_attribute("href") == (
        f"{files}/pdfs/{doc}#page={FIGURE_PAGE}"
    )
    assert page.kb_errors == []


def test_a_figure_on_a_labelled_page_names_the_printed_label_and_the_pdf_page() -> None:
    import datetime as dt

    from kb_mcp.links import Links
    from kb_mcp.pages.gallery import Gallery, gallery_figure, gallery_html
    from kb_shared.search.citations import FigurePayload, PointPayload
    from kb_shared.stores.catalog import DocumentRow

    payload = PointPayload(
        doc_id="manual.pdf", name="Manual.pdf", title="Manual", version="",
        page_start=2, page_end=2, page_label_start="ii", page_label_end="ii",
        pdf_key="pdfs/manual.pdf",
        figure=FigurePayload(
            number=1, caption="Figure 1 Flow", stored_key="", inline_key=""
        ),
    )
    figure = gallery_figure(
        "manual.pdf#figure-1", payload, "A flow chart.", Links("http://127.0.0.1:8765"), present=set()
    )
    assert (figure.page, figure.page_label) == (2, "ii")
    now = dt.datetime(2026, 12, 1, tzinfo=dt.timezone.utc)
    row = DocumentRow(
        doc_id="manual.pdf", name="Manual.pdf", normalized_name="manual.pdf", sha256="0" * 64,
        status="ready", failure_reason=None, title="Manual", version=None, pages=2,
        chunk_count=1, figure_count=1, entity_count=0, relationship_count=0, size_bytes=1,
        blob_key="pdfs/manual.pdf", markdown_key=None, converter=None, embedding_model=None,
        created_at=now, updated_at=now,
    )
    page = gallery_html(Gallery(document=row, url=None, figures=[figure]))
    assert " · page ii (PDF page 2)" in page
    assert "Source page ii (PDF page 2)</a>" in page
