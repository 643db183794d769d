"""The one Retry-After reading (kb_shared.retry_after), and both retrying clients using it."""

from __future__ import annotations

import httpx
import pytest

from kb_shared.market import notion
from kb_shared.providers.cloud_calls import exception_retry_after
from kb_shared.retry_after import retry_after_seconds

#: 2026-12-06 12:00:00 UTC, in Unix seconds.
NOON = 1796558400.0


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"Retry-After": "0.25"}, 0.25),
        ({"RETRY-AFTER": "-3"}, 0.0),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
        ({"Retry-After": "Sun, 06 Dec 2026 12:01:30 GMT"}, 90.0),
        ({"Retry-After": "Sun, 06 Dec 2026 11:59:00 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({"x-other": "1"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_retry_after_values(headers: dict[str, str] | None, seconds: float | None) -> None:
    assert retry_after_seconds(headers, now=lambda: NOON) == seconds


def test_httpx_headers_are_read_whatever_their_case() -> None:
    headers = httpx.Headers([("Retry-After", "12")])
    assert retry_after_seconds(headers) == 12.0


class _SdkError(Exception):
    """An SDK error carrying its response (anthropic, google-genai, httpx style)."""

    def __init__(self, headers: dict[str, str]) -> None:
        super().__init__("rate limited")
        self.response = httpx.Response(429, headers=headers)


class _CohereError(Exception):
    """An SDK error carrying the headers itself (cohere style)."""

    def __init__(self, headers: dict[str, str]) -> None:
        super().__init__("rate limited")
        self.headers = headers


def test_cloud_calls_read_the_response_or_the_error_headers() -> None:
    assert exception_retry_after(_SdkError({"retry-after-ms": "250"})) == 0.25
    assert exception_retry_after(_CohereError({"Retry-After": "3"})) == 3.0
    assert exception_retry_after(_SdkError({})) is None
    assert exception_retry_after(ValueError("no response")) is None
    assert exception_retry_after(None) is None


def test_notion_sync_uses_the_same_reading() -> None:
    assert notion.retry_after_seconds is retry_after_seconds
