"""ClaudeMarkdownConverter through the real anthropic SDK over httpx2.MockTransport."""

from __future__ import annotations

import base64
import logging
import re

import httpx2
import pymupdf
import pytest

from kb_shared.errors import ConversionError, ProviderError
from kb_shared.providers.base import FigureRegion
from kb_shared.providers.cloud_markdown import ClaudeMarkdownConverter, renumber_pages

from .conftest import Recorder, anthropic_client, claude_error, claude_message, no_wait

FOOTER = re.compile(r"Page (\d+) of 6")


def _pages_in(request: httpx2.Request) -> list[int]:
    """The global page numbers of the sub-PDF in a request (from each page's footer)."""
    body = request.read()
    import json

    block = json.loads(body)["messages"][0]["content"][0]
    pdf = base64.b64decode(block["source"]["data"])
    with pymupdf.open(stream=pdf, filetype="pdf") as doc:
        return [int(FOOTER.search(page.get_text()).group(1)) for page in doc]


def _answer_for(pages: list[int]) -> str:
    """What Claude would write for a sub-PDF: local markers 1..n, text naming global pages."""
    parts = []
    for local, page in enumerate(pages, start=1):
        parts.append(f"<!-- page {local} -->\n\n## Section on page {page}\n\nBody text of page {page}.")
        if page == 3:
            parts.append("[Figure: Figure 1 – Notification flow from Retailer to Distributor]")
    return "\n\n".join(parts)


def _converter(recorder: Recorder, **kwargs) -> ClaudeMarkdownConverter:
    return ClaudeMarkdownConverter(
        anthropic_client(recorder), retry=kwargs.pop("retry", no_wait()), **kwargs
    )


def test_request_shape_is_a_base64_pdf_document_block_and_the_prompt(sample_pdf: bytes) -> None:
    recorder = Recorder(
        lambda request, i: httpx2.Response(200, json=claude_message(_answer_for(_pages_in(request))))
    )
    _converter(recorder, pages_per_request=10).convert(sample_pdf, "sample.pdf")

    assert len(recorder.requests) == 1
    request = recorder.requests[0]
    assert request.method == "POST"
    assert str(request.url) == "https://api.anthropic.com/v1/messages"
    body = recorder.bodies()[0]
    assert body["model"] == "claude-sonnet-5-5"
    assert body["max_tokens"] == 20_000
    assert "temperature" not in body  # Sonnet 5.x refuses a non-default temperature
    content = body["messages"][0]["content"]
    assert body["messages"][0]["role"] == "user"
    assert content[0]["type"] == "document"
    assert content[0]["source"]["type"] == "base64"
    assert content[0]["source"]["media_type"] == "application/pdf"
    assert base64.b64decode(content[0]["source"]["data"]).startswith(b"%PDF-")
    assert content[1]["type"] == "text"
    assert "The PDF has 6 page(s)" in content[1]["text"]
    assert "<!-- page K -->" in content[1]["text"]
    assert "[Figure: …]" in content[1]["text"]


def test_long_pdf_is_split_into_page_ranges_and_stitched_in_order(
    sample_pdf: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder(
        lambda request, i: httpx2.Response(200, json=claude_message(_answer_for(_pages_in(request))))
    )
    converter = _converter(recorder, pages_per_request=4, concurrency=2,
                           key="ANTHROPIC_API_KEY sha256:1a2b3c4d")

    with caplog.at_level(logging.INFO, logger="kb_shared.providers.cloud_markdown"):
        result = converter.convert(sample_pdf, "sample.pdf")

    assert sorted(_pages_in(r) for r in recorder.requests) == [[1, 2, 3, 4], [5, 6]]
    markers = [int(n) for n in re.findall(r"<!-- page (\d+) -->", result.markdown)]
    assert markers == [1, 2, 3, 4, 5, 6]
    for page in range(1, 7):  # each page's text sits under its own global marker
        assert f"<!-- page {page} -->\n\n## Section on page {page}\n\nBody text of page {page}." in result.markdown
    assert result.pages == 6
    assert result.converter == "claude:claude-sonnet-5-5"
    assert result.figures == (
        FigureRegion(page=3, bbox=None, caption="Figure 1 – Notification flow from Retailer to Distributor"),
    )
    assert result.title == "Sample Retail Market Procedure"  # PDF metadata title
    assert (  # which key paid, per document
        "sample.pdf: 6 pages to Markdown with claude-sonnet-5-5 in 2 requests (0 retries); "
        "2400 input + 600 output tokens, $0.0108, billed to ANTHROPIC_API_KEY sha256:1a2b3c4d"
    ) in caplog.text
    usage = converter.usage()
    assert usage["requests"] == 2
    assert usage["input_tokens"] == 2400 and usage["output_tokens"] == 600
    assert usage["cost_usd"] == pytest.approx((2400 * 2.0 + 600 * 10.0) / 1e6)


def test_a_range_cut_off_at_max_tokens_is_converted_again_in_halves(sample_pdf: bytes) -> None:
    def respond(request: httpx2.Request, i: int) -> httpx2.Response:
        pages = _pages_in(request)
        if len(pages) > 2:
            return httpx2.Response(200, json=claude_message("<!-- page 1 -->\n\n# Cut", stop_reason="max_tokens"))
        return httpx2.Response(200, json=claude_message(_answer_for(pages)))

    recorder = Recorder(respond)
    result = _converter(recorder, pages_per_request=6, concurrency=1).convert(sample_pdf, "s.pdf")

    assert [_pages_in(r) for r in recorder.requests] == [
        [1, 2, 3, 4, 5, 6], [1, 2, 3], [1], [2, 3], [4, 5, 6], [4], [5, 6],
    ]
    assert [int(n) for n in re.findall(r"<!-- page (\d+) -->", result.markdown)] == [1, 2, 3, 4, 5, 6]
    assert "# Cut" not in result.markdown


def test_title_and_version_use_the_local_helpers_then_the_markdown(sample_pdf: bytes) -> None:
    recorder = Recorder(
        lambda request, i: httpx2.Response(200, json=claude_message(_answer_for(_pages_in(request))))
    )
    result = _converter(recorder).convert(sample_pdf, "s.pdf")
    # from the PDF: metadata title, "Version: 1.2" on the cover (local_markdown helpers)
    assert (result.title, result.version) == ("Sample Retail Market Procedure", "1.2")

    with pymupdf.open() as doc:  # a PDF whose text layer states neither (as if scanned)
        doc.new_page().insert_text((72, 72), "x")
        bare = doc.tobytes()
    answer = "<!-- page 1 -->\n\n# Connection Guideline\n\n**Version:** 3.1\n\nText."
    recorder = Recorder(lambda request, i: httpx2.Response(200, json=claude_message(answer)))
    result = _converter(recorder).convert(bare, "scan.pdf")
    assert (result.title, result.version) == ("Connection Guideline", "3.1")


def test_429_then_success_is_retried(sample_pdf: bytes) -> None:
    def respond(request: httpx2.Request, i: int) -> httpx2.Response:
        if i == 0:
            return claude_error(429, "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit")
        return httpx2.Response(200, json=claude_message(_answer_for(_pages_in(request))))

    recorder = Recorder(respond)
    converter = _converter(recorder)
    result = converter.convert(sample_pdf, "s.pdf")

    assert len(recorder.requests) == 2
    assert result.markdown.count("<!-- page ") == 6
    assert converter.usage()["retries"] == 1


def test_500_exhausted_raises_provider_error_after_the_configured_retries(sample_pdf: bytes) -> None:
    recorder = Recorder(lambda request, i: claude_error(500, "api_error", "Internal server error"))
    with pytest.raises(ProviderError) as caught:
        _converter(recorder, retry=no_wait(max_retries=3)).convert(sample_pdf, "s.pdf")
    assert len(recorder.requests) == 4
    assert str(caught.value) == (
        "Anthropic converting s.pdf pages 1-6 to Markdown: still failing after 4 attempts "
        "(3 retries); last error HTTP 500: Internal server error. The service is "
        "rate-limiting or unavailable; re-run later or lower KB_PROVIDER_CONCURRENCY."
    )


def test_a_timeout_is_retried(sample_pdf: bytes) -> None:
    def respond(request: httpx2.Request, i: int) -> httpx2.Response:
        if i == 0:
            raise httpx2.ReadTimeout("timed out", request=request)
        return httpx2.Response(200, json=claude_message(_answer_for(_pages_in(request))))

    recorder = Recorder(respond)
    result = _converter(recorder).convert(sample_pdf, "s.pdf")
    assert len(recorder.requests) == 2 and result.pages == 6


def test_bad_key_is_a_clear_error_and_not_retried(sample_pdf: bytes) -> None:
    recorder = Recorder(lambda request, i: claude_error(401, "authentication_error", "invalid x-api-key"))
    with pytest.raises(ProviderError) as caught:
        _converter(recorder).convert(sample_pdf, "s.pdf")
    assert len(recorder.requests) == 1
    assert str(caught.value) == (
        "Anthropic rejected the API key in ANTHROPIC_API_KEY (HTTP 401) while converting "
        "s.pdf pages 1-6 to Markdown: invalid x-api-key. Check that the key is current and "
        "copied whole."
    )


def test_missing_model_is_a_clear_error(sample_pdf: bytes) -> None:
    recorder = Recorder(lambda request, i: claude_error(404, "not_found_error", "model: claude-nope"))
    with pytest.raises(ProviderError, match=r"Anthropic has no model 'claude-nope' \(HTTP 404\)"):
        _converter(recorder, model="claude-nope").convert(sample_pdf, "s.pdf")


def test_encrypted_and_non_pdf_input_are_conversion_errors(sample_pdf: bytes) -> None:
    recorder = Recorder(lambda request, i: httpx2.Response(500))
    converter = _converter(recorder)
    with pytest.raises(ConversionError, match=r"^x.pdf is not a PDF"):
        converter.convert(b"hello, not a pdf", "x.pdf")
    with pymupdf.open(stream=sample_pdf, filetype="pdf") as doc:
        locked = doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="u", owner_pw="o")
    with pytest.raises(ConversionError, match=r"^locked.pdf is encrypted and needs a password"):
        converter.convert(locked, "locked.pdf")
    assert recorder.requests == []


def test_renumber_pages_maps_local_markers_to_global_ones() -> None:
    text = "```markdown\nintro\n<!-- page 1 -->\none\n<!-- page 3 -->\nthree\n```"
    assert renumber_pages(text, 11, 3, "x") == (
        "<!-- page 11 -->\n\nintro\n\none\n\n<!-- page 12 -->\n\n<!-- page 13 -->\n\nthree\n\n"
    )


def test_renumber_pages_finds_a_marker_written_mid_line() -> None:
    assert renumber_pages("<!-- page 1 -->one <!-- page 2 --> two", 3, 2, "x") == (
        "<!-- page 3 -->\n\none\n\n<!-- page 4 -->\n\ntwo\n\n"
    )


def test_renumber_pages_warns_about_a_missing_marker(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        renumber_pages("<!-- page 1 -->\na\n<!-- page 3 -->\nc", 5, 3, "f.pdf pages 5-7")
    assert "f.pdf pages 5-7: Claude wrote no marker for page(s) [6]" in caplog.text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<!-- page 2 -->\nb\n<!-- page 1 -->\na", r"repeated or out of order \(\[2, 1\]\)"),
        ("<!-- page 1 -->\na\n<!-- page 4 -->\nd", r"page markers \[4\] outside 1..3"),
        ("no markers at all", r"has no <!-- page N --> markers"),
    ],
)
def test_renumber_pages_refuses_markers_that_would_mis_cite(text: str, message: str) -> None:
    with pytest.raises(ProviderError, match=message):
        renumber_pages(text, 1, 3, "f.pdf")
