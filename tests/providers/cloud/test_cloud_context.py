"""Contextualisers (Claude with cache_control, Gemini with implicit caching) over mock
transports: the cached prefix, first-call-alone ordering, and the cache log line."""

from __future__ import annotations

import json
import logging
import threading

import httpx2
import pytest

from kb_shared.ingest.chunking import Chunk
from kb_shared.errors import ProviderError
from kb_shared.providers.cloud_context import (
    ClaudeContextualiser,
    GeminiContextualiser,
    document_prefix,
)

from .conftest import Recorder, anthropic_client, claude_error, claude_message, gemini_generate, genai_client, no_wait

TITLE = "Sample Retail Market Procedure"
MARKDOWN = "<!-- page 1 -->\n\n# 1 Introduction\n\nThe Retailer must notify the Distributor.\n"


def _chunks(n: int) -> list[Chunk]:
    return [
        Chunk(id=f"srmp-{i}", document="srmp", index=i, text=f"Chunk number {i} text.",
              heading_path=("1 Introduction",), page_start=1, page_end=1, kind="text")
        for i in range(n)
    ]


def _chunk_of(body: dict) -> str:
    return body["messages"][0]["content"][1]["text"].split("<chunk>\n", 1)[1].split("\n</chunk>", 1)[0]


class _FirstAloneThenParallel:
    """Answers Claude requests; checks that chunk 0 is asked alone and first, and that the
    other requests are in flight together (a barrier they must all reach)."""

    def __init__(self, rest: int) -> None:
        self.first_done = threading.Event()
        self.barrier = threading.Barrier(rest, timeout=10)
        self.violations: list[str] = []

    def __call__(self, request: httpx2.Request, i: int) -> httpx2.Response:
        body = json.loads(request.content)
        chunk = _chunk_of(body)
        if i == 0:
            if chunk != "Chunk number 0 text.":
                self.violations.append(f"first request was for {chunk!r}")
            response = claude_message(f"Context for {chunk}", model="claude-haiku-4-5",
                                      input_tokens=40, output_tokens=20, cache_read=0, cache_write=5000)
            self.first_done.set()
            return httpx2.Response(200, json=response)
        if not self.first_done.is_set():
            self.violations.append(f"{chunk!r} was sent before the first answer")
        self.barrier.wait()  # raises BrokenBarrierError unless all the rest are in flight
        return httpx2.Response(200, json=claude_message(
            f"Context for {chunk}", model="claude-haiku-4-5",
            input_tokens=40, output_tokens=20, cache_read=5000, cache_write=0))


def test_claude_caches_the_document_prefix_and_asks_the_first_chunk_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    script = _FirstAloneThenParallel(rest=3)
    recorder = Recorder(script)
    contextualiser = ClaudeContextualiser(anthropic_client(recorder), concurrency=3, retry=no_wait())

    with caplog.at_level(logging.INFO, logger="kb_shared.providers.cloud_context"):
        contexts = contextualiser.contexts(TITLE, MARKDOWN, _chunks(4))

    assert script.violations == []
    assert contexts == [f"Context for Chunk number {i} text." for i in range(4)]
    bodies = recorder.bodies()
    assert len(bodies) == 4
    prefix_blocks = [b["messages"][0]["content"][0] for b in bodies]
    assert prefix_blocks[0] == {
        "type": "text",
        "text": f'<document title="{TITLE}">\n{MARKDOWN}\n</document>',
        "cache_control": {"type": "ephemeral"},
    }
    assert all(block == prefix_blocks[0] for block in prefix_blocks)  # byte-identical prefix
    raw_prefixes = {json.dumps(b["messages"][0]["content"][0], sort_keys=True) for b in bodies}
    assert len(raw_prefixes) == 1
    assert {b["model"] for b in bodies} == {"claude-haiku-4-5"}
    assert {b["max_tokens"] for b in bodies} == {200}
    # 4 x 40 uncached + 5000 written + 3 x 5000 read = 20160 prompt tokens, 15000 cached
    assert (
        f"contextualised 4 chunks of {TITLE!r} with claude-context:claude-haiku-4-5: "
        "20160 prompt tokens, 15000 cached (74.4%)"
    ) in caplog.text
    report = contextualiser.last_cache_report
    assert (report.prompt_tokens, report.cached_tokens) == (20160, 15000)
    usage = contextualiser.usage()
    assert usage["cache_read_tokens"] == 15000 and usage["cache_write_tokens"] == 5000
    assert usage["cost_usd"] == pytest.approx(
        (160 * 1.0 + 80 * 5.0 + 15000 * 0.10 + 5000 * 1.25) / 1e6
    )


def test_claude_without_cache_counts_says_so(caplog: pytest.LogCaptureFixture) -> None:
    recorder = Recorder(lambda r, i: httpx2.Response(
        200, json=claude_message("ctx", cache_read=None, cache_write=None)))
    contextualiser = ClaudeContextualiser(anthropic_client(recorder), retry=no_wait())
    with caplog.at_level(logging.INFO, logger="kb_shared.providers.cloud_context"):
        contextualiser.contexts(TITLE, MARKDOWN, _chunks(2))
    assert (
        "the provider reported no cache token counts, so whether the document prefix was "
        "served from the cache is unknown"
    ) in caplog.text


def test_claude_failure_after_retries_loses_the_whole_call() -> None:
    def respond(request: httpx2.Request, i: int) -> httpx2.Response:
        if _chunk_of(json.loads(request.content)) == "Chunk number 2 text.":
            return claude_error(529, "overloaded_error", "Overloaded")
        return httpx2.Response(200, json=claude_message("ctx"))

    recorder = Recorder(respond)
    contextualiser = ClaudeContextualiser(anthropic_client(recorder), concurrency=2, retry=no_wait(1))
    with pytest.raises(ProviderError, match=r"contextualising chunk srmp-2: still failing after 2 attempts"):
        contextualiser.contexts(TITLE, MARKDOWN, _chunks(3))


def test_gemini_sends_the_same_prefix_and_logs_cached_content_tokens(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def respond(request: httpx2.Request, i: int) -> httpx2.Response:
        # Gemini omits cachedContentTokenCount when nothing was cached (first call).
        cached = None if i == 0 else 1024
        return httpx2.Response(200, json=gemini_generate(f"context {i}", prompt_tokens=1500, cached_tokens=cached))

    recorder = Recorder(respond)
    contextualiser = GeminiContextualiser(genai_client(recorder), concurrency=2, retry=no_wait())
    with caplog.at_level(logging.INFO, logger="kb_shared.providers.cloud_context"):
        contexts = contextualiser.contexts(TITLE, MARKDOWN, _chunks(3))

    assert contexts[0] == "context 0"
    bodies = recorder.bodies()
    assert [str(r.url) for r in recorder.requests] == [
        "https://generativelanguage.googleapis.com/v1/models/gemini-2.5-flash:generateContent"
    ] * 3
    first_parts = [b["contents"][0]["parts"][0] for b in bodies]
    assert first_parts == [{"text": document_prefix(TITLE, MARKDOWN)}] * 3
    assert bodies[0]["contents"][0]["parts"][1]["text"].startswith(
        "Here is one chunk of the document above:\n<chunk>\nChunk number 0 text.\n</chunk>"
    )
    assert bodies[0]["generationConfig"] == {"maxOutputTokens": 200, "thinkingConfig": {"thinking_budget": 0}}
    assert "4500 prompt tokens, 2048 cached (45.5%)" in caplog.text


def test_gemini_without_usage_metadata_says_nothing_was_reported(caplog: pytest.LogCaptureFixture) -> None:
    recorder = Recorder(lambda r, i: httpx2.Response(200, json=gemini_generate("ctx", prompt_tokens=None)))
    contextualiser = GeminiContextualiser(genai_client(recorder), retry=no_wait())
    with caplog.at_level(logging.INFO, logger="kb_shared.providers.cloud_context"):
        contextualiser.contexts(TITLE, MARKDOWN, _chunks(1))
    assert "the provider reported no cache token counts" in caplog.text
    assert contextualiser.usage()["requests_without_usage"] == 1


def test_no_chunks_makes_no_call() -> None:
    recorder = Recorder(lambda r, i: httpx2.Response(500))
    assert ClaudeContextualiser(anthropic_client(recorder)).contexts(TITLE, MARKDOWN, []) == []
    assert recorder.requests == []


def test_a_document_over_the_limit_is_cut_at_a_line_and_still_shared(caplog: pytest.LogCaptureFixture) -> None:
    recorder = Recorder(lambda r, i: httpx2.Response(200, json=claude_message("ctx")))
    contextualiser = ClaudeContextualiser(anthropic_client(recorder), retry=no_wait(), max_document_chars=40)
    with caplog.at_level(logging.WARNING, logger="kb_shared.providers.cloud_context"):
        contextualiser.contexts(TITLE, MARKDOWN, _chunks(2))
    prefixes = {b["messages"][0]["content"][0]["text"] for b in recorder.bodies()}
    assert prefixes == {
        f'<document title="{TITLE}">\n<!-- page 1 -->\n\n# 1 Introduction\n\n'
        "[… the rest of the document is not shown …]\n</document>"
    }
    assert f"{TITLE!r} is 77 characters; contextualising its chunks against the first 40 only" in caplog.text
