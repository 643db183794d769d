"""GeminiFigureLocator through the real google-genai SDK: named box fields, sorted
min/max, whole-page fallback, decorative marks dropped."""

from __future__ import annotations

import base64
import json
import logging

import httpx2
import pymupdf
import pytest

from kb_shared.errors import ConversionError, ProviderError
from kb_shared.providers.base import FigureBox, FigureRegion
from kb_shared.providers.cloud_figures import GeminiFigureLocator, boxes_for_page

from .conftest import Recorder, gemini_error, gemini_generate, genai_client, no_wait

A4 = (0.0, 0.0, 595.0, 842.0)
CAPTION = "Figure 1 – Notification flow"


def _answer(figures: list[dict]) -> httpx2.Response:
    return httpx2.Response(200, json=gemini_generate(json.dumps({"figures": figures})))


def _locator(recorder: Recorder, **kwargs) -> GeminiFigureLocator:
    return GeminiFigureLocator(genai_client(recorder), retry=kwargs.pop("retry", no_wait()), **kwargs)


def test_request_shape_sends_the_page_png_and_asks_for_named_box_fields(sample_pdf: bytes) -> None:
    recorder = Recorder(lambda r, i: _answer([
        {"description": CAPTION, "decorative": False, "ymin": 100, "xmin": 100, "ymax": 500, "xmax": 900},
    ]))
    boxes = _locator(recorder).locate(sample_pdf, [FigureRegion(page=3, bbox=None, caption=CAPTION)])

    assert len(recorder.requests) == 1  # only the page the converter marked
    assert str(recorder.requests[0].url) == (
        "https://generativelanguage.googleapis.com/v1/models/gemini-2.5-flash:generateContent"
    )
    body = recorder.bodies()[0]
    image, prompt = body["contents"][0]["parts"]
    assert image["inlineData"]["mime_type"] == "image/png"
    png = base64.urlsafe_b64decode(image["inlineData"]["data"])  # google-genai sends URL-safe base64
    pixels = pymupdf.Pixmap(png)
    assert (pixels.width, pixels.height) == (1086, 1536)  # A4 with its long edge at 1536 px
    assert "page 3 of a PDF" in prompt["text"]
    assert f"- {CAPTION}" in prompt["text"]
    assert "ymin, xmin, ymax, xmax on a 0-1000 scale" in prompt["text"]
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["thinkingConfig"] == {"thinking_budget": 0}  # as google-genai 3.6 writes it
    assert config["maxOutputTokens"] == 4096
    item = config["responseJsonSchema"]["properties"]["figures"]["items"]
    assert item["required"] == ["description", "decorative", "ymin", "xmin", "ymax", "xmax"]
    assert item["properties"]["ymin"] == {"type": "integer", "minimum": 0, "maximum": 1000}
    # ymin=100 -> 84.2 pt, xmin=100 -> 59.5 pt, ymax=500 -> 421 pt, xmax=900 -> 535.5 pt
    assert boxes == [FigureBox(page=3, bbox=pytest.approx((59.5, 84.2, 535.5, 421.0)), caption=CAPTION)]


def test_a_transposed_box_is_sorted_not_trusted() -> None:
    boxes = boxes_for_page(3, A4, [
        {"description": "flow", "decorative": False, "ymin": 700, "xmin": 900, "ymax": 300, "xmax": 100},
    ])
    assert boxes == [FigureBox(page=3, bbox=pytest.approx((59.5, 252.6, 535.5, 589.4)), caption="flow")]


def test_an_unusable_box_falls_back_to_the_whole_page_with_its_raw_numbers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="kb_shared.providers.cloud_figures"):
        boxes = boxes_for_page(2, A4, [
            {"description": "flat", "decorative": False, "ymin": 400, "xmin": 100, "ymax": 400, "xmax": 900},
            {"description": "no numbers", "decorative": False, "ymin": "top", "xmin": 0, "ymax": None, "xmax": 1},
            {"description": "off the page", "decorative": False, "ymin": 1200, "xmin": 0, "ymax": 1500, "xmax": 900},
        ])
    assert boxes == [
        FigureBox(page=2, bbox=A4, caption="flat"),
        FigureBox(page=2, bbox=A4, caption="no numbers"),
        FigureBox(page=2, bbox=A4, caption="off the page"),
    ]
    assert (
        "page 2: figure 'flat' has an unusable box (ymin=400, xmin=100, ymax=400, xmax=900; "
        "missing, not numeric or degenerate); using the whole page"
    ) in caplog.text
    assert "ymin=top, xmin=0, ymax=None, xmax=1" in caplog.text


def test_a_box_under_three_percent_of_the_page_is_dropped_not_sent_to_the_whole_page(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="kb_shared.providers.cloud_figures"):
        boxes = boxes_for_page(2, A4, [
            # 2% of the page (0.02 x 1.0): a mark, dropped
            {"description": "sliver", "decorative": False, "ymin": 10, "xmin": 0, "ymax": 30, "xmax": 1000},
            # 4% of the page (0.2 x 0.2): a small figure, kept where it is
            {"description": "icon chart", "decorative": False, "ymin": 100, "xmin": 100, "ymax": 300, "xmax": 300},
        ])
    assert [b.caption for b in boxes] == ["icon chart"]
    assert boxes[0].bbox != A4
    assert (
        "page 2: dropped 'sliver', a box under 3% of the page (ymin=10, xmin=0, ymax=30, "
        "xmax=1000): a mark, not a figure"
    ) in caplog.text


def test_a_decorative_mark_is_dropped_not_sent_to_the_whole_page(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="kb_shared.providers.cloud_figures"):
        boxes = boxes_for_page(1, A4, [
            {"description": "AEMO logo", "decorative": True, "ymin": 10, "xmin": 10, "ymax": 40, "xmax": 120},
            {"description": "Signature", "decorative": True, "ymin": 0, "xmin": 0, "ymax": 0, "xmax": 0},
        ], captions=["Figure 2"])
    assert boxes == []
    assert "page 1: dropped a decorative mark (AEMO logo) at ymin=10, xmin=10, ymax=40, xmax=120" in caplog.text


def test_a_marked_page_where_nothing_is_found_gets_the_whole_page() -> None:
    assert boxes_for_page(4, A4, [], captions=["Figure 3", "Figure 4"]) == [
        FigureBox(page=4, bbox=A4, caption="Figure 3"), FigureBox(page=4, bbox=A4, caption="Figure 4"),
    ]


def test_pages_are_asked_once_each_and_returned_in_page_order(sample_pdf: bytes) -> None:
    def respond(request: httpx2.Request, i: int) -> httpx2.Response:
        text = json.loads(request.content)["contents"][0]["parts"][1]["text"]
        page = int(text.split("page ", 1)[1].split(" ", 1)[0])
        return _answer([{"description": f"figure on {page}", "decorative": False,
                         "ymin": 200, "xmin": 200, "ymax": 600, "xmax": 800}])

    recorder = Recorder(respond)
    regions = [FigureRegion(5, None, "b"), FigureRegion(2, None, "a"), FigureRegion(5, None, "c")]
    boxes = _locator(recorder, concurrency=2).locate(sample_pdf, regions)
    assert len(recorder.requests) == 2
    assert [(b.page, b.caption) for b in boxes] == [(2, "figure on 2"), (5, "figure on 5")]


def test_malformed_json_is_a_clear_error(sample_pdf: bytes) -> None:
    recorder = Recorder(lambda r, i: httpx2.Response(200, json=gemini_generate('{"figures": [{"ymin": 1')))
    with pytest.raises(ProviderError, match=r"^Gemini returned malformed JSON for locating figures on page 3: "):
        _locator(recorder).locate(sample_pdf, [FigureRegion(3, None, CAPTION)])


def test_429_then_success_and_500_exhausted(sample_pdf: bytes) -> None:
    def flaky(request: httpx2.Request, i: int) -> httpx2.Response:
        if i == 0:
            return gemini_error(429, "RESOURCE_EXHAUSTED", "Quota exceeded for requests per minute.")
        return _answer([])

    recorder = Recorder(flaky)
    assert _locator(recorder).locate(sample_pdf, [FigureRegion(3, None, CAPTION)]) == [
        FigureBox(page=3, bbox=(0.0, 0.0, 595.0, 842.0), caption=CAPTION)
    ]
    assert len(recorder.requests) == 2
    down = Recorder(lambda r, i: gemini_error(503, "UNAVAILABLE", "The model is overloaded."))
    with pytest.raises(ProviderError, match="still failing after 3 attempts"):
        _locator(down).locate(sample_pdf, [FigureRegion(3, None, CAPTION)])
    assert len(down.requests) == 3


def test_regions_beyond_the_pdf_are_refused(sample_pdf: bytes) -> None:
    recorder = Recorder(lambda r, i: _answer([]))
    with pytest.raises(ConversionError, match=r"pages \[9\] but the PDF has 6"):
        _locator(recorder).locate(sample_pdf, [FigureRegion(9, None, "x")])
    assert recorder.requests == []
