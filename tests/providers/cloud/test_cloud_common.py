"""The shared call gate: retry policy, Retry-After, concurrency limit, usage, errors."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx2
import pytest

from kb_shared.errors import ProviderError, RerankError
from kb_shared.providers.cloud_calls import ProviderCalls, RetryPolicy
from kb_shared.providers.cloud_common import key_fingerprint, parse_json_object
from kb_shared.providers.cloud_usage import UsageMeter

from .conftest import Recorder, anthropic_client, claude_error, claude_message, no_wait


def _calls(**kwargs) -> ProviderCalls:
    return ProviderCalls(
        vendor="Anthropic", model="claude-haiku-4-5", key_name="ANTHROPIC_API_KEY",
        meter=UsageMeter("test", "claude-haiku-4-5"), **kwargs,
    )


def test_default_wait_honours_retry_after() -> None:
    def respond(request: httpx2.Request, i: int) -> httpx2.Response:
        if i == 0:
            response = claude_error(429, "rate_limit_error", "slow down")
            response.headers["retry-after"] = "7"
            return response
        return httpx2.Response(200, json=claude_message("ok"))

    slept: list[float] = []
    client = anthropic_client(Recorder(respond))
    calls = _calls(retry=RetryPolicy(max_retries=3, sleep=slept.append))
    message = calls.call("saying hello", lambda: client.messages.create(
        model="claude-haiku-4-5", max_tokens=10, messages=[{"role": "user", "content": "hi"}]))
    assert message.content[0].text == "ok"
    # exponential backoff would wait 1-2 s; the server asked for 7
    assert slept == [7.0]
    assert calls.meter.snapshot()["retries"] == 1


def test_forbidden_is_a_clear_error_without_retries() -> None:
    recorder = Recorder(lambda r, i: claude_error(403, "permission_error",
                                                  "Your API key does not have permission to use the specified resource."))
    client = anthropic_client(recorder)
    calls = _calls(retry=no_wait(5))
    with pytest.raises(ProviderError) as caught:
        calls.call("saying hello", lambda: client.messages.create(
            model="claude-haiku-4-5", max_tokens=10, messages=[{"role": "user", "content": "hi"}]))
    assert len(recorder.requests) == 1
    assert str(caught.value) == (
        "Anthropic refused access (HTTP 403) while saying hello with model 'claude-haiku-4-5': "
        "Your API key does not have permission to use the specified resource. The key in "
        "ANTHROPIC_API_KEY lacks permission for this model or region; use a key or model your "
        "account is allowed."
    )
    assert calls.meter.snapshot()["failures"] == 1


def test_a_programming_error_is_not_wrapped_or_retried() -> None:
    attempts = []

    def broken() -> None:
        attempts.append(1)
        raise KeyError("oops")

    with pytest.raises(KeyError):
        _calls(retry=no_wait(3)).call("x", broken)
    assert attempts == [1]


def test_no_more_calls_than_the_concurrency_limit_are_in_flight() -> None:
    calls = _calls(concurrency=2, retry=no_wait())
    pair = threading.Barrier(2, timeout=10)  # passes only when two calls are inside together
    lock = threading.Lock()
    inflight = peak = 0

    def work() -> str:
        nonlocal inflight, peak
        with lock:
            inflight += 1
            peak = max(peak, inflight)
        pair.wait()
        with lock:
            inflight -= 1
        return "done"

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda _: calls.call("working", work), range(6)))
    assert results == ["done"] * 6
    assert peak == 2


def test_map_keeps_order_and_raises_the_first_error() -> None:
    calls = _calls(concurrency=3)
    assert calls.map(lambda n: n * n, list(range(10))) == [n * n for n in range(10)]

    def fail_on_four(n: int) -> int:
        if n == 4:
            raise ProviderError("four")
        return n

    with pytest.raises(ProviderError, match="four"):
        calls.map(fail_on_four, list(range(8)))


def test_usage_meter_prices_known_models_and_flags_unknown_ones() -> None:
    meter = UsageMeter("x", "claude-sonnet-5-5", key="ANTHROPIC_API_KEY sha256:00000000")
    meter.add_usage(input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=500_000,
                    cache_write_tokens=200_000)
    meter.add_usage()
    snap = meter.snapshot()
    assert snap["cost_usd"] == pytest.approx(2.0 + 1.0 + 0.10 + 0.50)
    assert snap["requests_without_usage"] == 1
    assert snap["priced"] == "yes" and snap["key"] == "ANTHROPIC_API_KEY sha256:00000000"
    unknown = UsageMeter("x", "claude-next")
    unknown.add_usage(input_tokens=10)
    assert (unknown.snapshot()["cost_usd"], unknown.snapshot()["priced"]) == (0.0, "no")


def test_key_fingerprint_hides_the_key() -> None:
    fingerprint = key_fingerprint("sk-ant-api03-secret")
    assert fingerprint.startswith("sha256:") and len(fingerprint) == 15
    assert "secret" not in fingerprint and fingerprint == key_fingerprint("sk-ant-api03-secret")


def test_parse_json_object() -> None:
    assert parse_json_object('```json\n{"a": 1}\n```', "V", "w") == {"a": 1}
    with pytest.raises(ProviderError, match=r"^V returned JSON for w that is a list, not an object$"):
        parse_json_object("[1, 2]", "V", "w")
    with pytest.raises(ProviderError, match=r"^V returned malformed JSON for w: Expecting value at line 1 column 1"):
        parse_json_object("Sure! Here is the JSON", "V", "w")


def test_retry_policy_refuses_negative_retries() -> None:
    with pytest.raises(ValueError, match="max_retries must be >= 0, got -1"):
        RetryPolicy(max_retries=-1)


def test_a_provider_s_calls_fail_with_its_role_s_error_type() -> None:
    recorder = Recorder(lambda r, i: claude_error(404, "not_found_error", "model: claude-nope"))
    client = anthropic_client(recorder)
    calls = _calls(retry=no_wait(), error=RerankError)
    with pytest.raises(RerankError, match=r"^Anthropic has no model 'claude-haiku-4-5' \(HTTP 404\)") as caught:
        calls.call("saying hello", lambda: client.messages.create(
            model="claude-nope", max_tokens=10, messages=[{"role": "user", "content": "hi"}]))
    assert caught.value.role == "rerank"
