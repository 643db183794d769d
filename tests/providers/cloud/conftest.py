"""Offline harness for the cloud providers: each SDK runs for real over a mock transport.

anthropic and google-genai send through ``httpx2``, so their clients get an
``httpx2.Client(transport=httpx2.MockTransport(handler))``; cohere sends through ``httpx``
and is mocked with respx (``notes/library-facts.md``, "HTTP mocking"). Nothing here opens a
socket. The response bodies follow the shapes the APIs document and return (Anthropic
Messages API ``message`` object, Gemini ``GenerateContentResponse`` /
``BatchEmbedContentsResponse``, Cohere ``V2RerankResponse``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import anthropic
import httpx2
import pytest
import tenacity
from google import genai
from google.genai import types

from kb_shared.providers.cloud_common import RetryPolicy

Handler = Callable[[httpx2.Request], httpx2.Response]


class Recorder:
    """A MockTransport handler that records every request (thread-safe) and answers with
    ``respond(request, index)``, ``index`` counting requests from 0 in arrival order."""

    def __init__(self, respond: Callable[[httpx2.Request, int], httpx2.Response]) -> None:
        self.respond = respond
        self.requests: list[httpx2.Request] = []
        self._lock = threading.Lock()

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        with self._lock:
            index = len(self.requests)
            self.requests.append(request)
        return self.respond(request, index)

    def bodies(self) -> list[dict[str, Any]]:
        """The JSON body of every request, in arrival order."""
        return [json.loads(r.content) for r in self.requests]


def anthropic_client(handler: Handler) -> anthropic.Anthropic:
    """A real ``anthropic.Anthropic`` whose HTTP goes to ``handler``."""
    return anthropic.Anthropic(
        api_key="test-anthropic-key",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )


def genai_client(handler: Handler) -> genai.Client:
    """A real ``google.genai.Client`` whose HTTP goes to ``handler``."""
    return genai.Client(
        api_key="test-gemini-key",
        http_options=types.HttpOptions(
            httpx_client=httpx2.Client(transport=httpx2.MockTransport(handler))
        ),
    )


def no_wait(max_retries: int = 2) -> RetryPolicy:
    """Retries without sleeping (``wait_none``; ``sleep`` never called with > 0)."""
    return RetryPolicy(max_retries=max_retries, wait=tenacity.wait_none(), sleep=lambda s: None)


# ------------------------------------------------------------------ recorded-shape bodies
def claude_message(
    text: str,
    *,
    model: str = "claude-sonnet-5-5",
    stop_reason: str = "end_turn",
    input_tokens: int = 1200,
    output_tokens: int = 300,
    cache_read: int | None = 0,
    cache_write: int | None = 0,
) -> dict[str, Any]:
    """An Anthropic Messages API response (``type: message``)."""
    usage: dict[str, Any] = {"input_tokens": input_tokens, "output_tokens": output_tokens}
    if cache_read is not None:
        usage["cache_read_input_tokens"] = cache_read
    if cache_write is not None:
        usage["cache_creation_input_tokens"] = cache_write
    usage["service_tier"] = "standard"
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


def claude_error(status: int, kind: str, message: str) -> httpx2.Response:
    """An Anthropic error response (``{"type": "error", "error": {...}}``)."""
    return httpx2.Response(
        status,
        json={"type": "error", "error": {"type": kind, "message": message},
              "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"},
    )


def gemini_generate(
    text: str, *, prompt_tokens: int | None = 1290, cached_tokens: int | None = None,
    output_tokens: int = 58,
) -> dict[str, Any]:
    """A Gemini ``generateContent`` response."""
    body: dict[str, Any] = {
        "candidates": [
            {
                "content": {"parts": [{"text": text}], "role": "model"},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "modelVersion": "gemini-2.5-flash",
        "responseId": "mOoPaa2XGdvrkdUPk4mEqAs",
    }
    if prompt_tokens is not None:
        usage: dict[str, Any] = {
            "promptTokenCount": prompt_tokens,
            "candidatesTokenCount": output_tokens,
            "totalTokenCount": prompt_tokens + output_tokens,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt_tokens}],
        }
        if cached_tokens is not None:
            usage["cachedContentTokenCount"] = cached_tokens
        body["usageMetadata"] = usage
    return body


def gemini_error(status: int, code_name: str, message: str) -> httpx2.Response:
    """A Google API error response (``{"error": {"code", "message", "status"}}``)."""
    return httpx2.Response(
        status, json={"error": {"code": status, "message": message, "status": code_name}}
    )


@pytest.fixture(scope="session")
def sample_pdf() -> bytes:
    """The six-page sample procedure (A4, figure on page 3); built once (~3 s)."""
    from kb_assets.sample_pdf import sample_pdf_bytes

    return sample_pdf_bytes()
