"""What every cloud provider shares: retries, a concurrency limit, usage and cost counters,
and errors a person can act on.

Each cloud provider (``cloud_markdown``, ``cloud_embeddings``, ``cloud_context``,
``cloud_graph``, ``cloud_figures``, ``cloud_rerank``) sends every API call through one
:class:`ProviderCalls`:

* **Retries** (tenacity): a call that fails with HTTP 408, 429, 500, 502, 503, 504 or 529
  (Anthropic's "overloaded"), a timeout or a dropped connection is retried with exponential
  backoff and jitter (``wait_exponential_jitter``: 1 s, 2 s, 4 s … capped at 60 s, plus up to
  1 s of jitter), waiting at least as long as a ``Retry-After`` header asks (capped at 60 s).
  Every other status is final at once. The SDKs' own retries are switched off (``from_settings``
  passes ``max_retries=0``) so one policy, with one count, applies everywhere.
* **Concurrency**: at most ``concurrency`` calls of one provider are in flight at once (a
  bounded semaphore, taken per attempt, never held while backing off). Providers are built
  once per Dagster run, so this is a per-run limit (``Settings.provider_concurrency``).
* **Usage**: requests, retries, tokens (input, output, cache read, cache write), Cohere search
  units and the cost they add up to at :data:`PRICES`; :meth:`UsageMeter.snapshot` is a flat
  ``dict`` of numbers and strings that a Dagster asset can put in its metadata as is.
* **Errors**: a rejected key (401), a refused permission (403), a missing model (404), any
  other refusal and exhausted retries all become :class:`kb_shared.errors.ProviderError` with a
  message naming the vendor, the key's setting, the model and what to do.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
import httpx2
import tenacity

from kb_shared.errors import ProviderError

if TYPE_CHECKING:
    import anthropic
    from google import genai
    from pydantic import SecretStr

    from kb_shared.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

#: HTTP statuses worth retrying: request timeout, rate limit, server errors and Anthropic's
#: 529 "overloaded_error" (Anthropic API docs, "Errors"; Gemini API docs, "Troubleshooting":
#: 429 RESOURCE_EXHAUSTED, 500 INTERNAL, 503 UNAVAILABLE, 504 DEADLINE_EXCEEDED; Cohere API
#: docs, "Errors": 429, 500, 503, 504).
RETRYABLE_STATUS: frozenset[int] = frozenset({408, 429, 500, 502, 503, 504, 529})

#: First backoff, cap and jitter of the default wait (seconds).
RETRY_INITIAL_S = 1.0
RETRY_MAX_S = 60.0
RETRY_JITTER_S = 1.0
#: Longest ``Retry-After`` honoured (seconds); a longer hint is cut to this.
RETRY_AFTER_CAP_S = 60.0

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(.*?)\n\s*```\s*$", re.DOTALL)


# --------------------------------------------------------------------------------------
# Prices and usage
# --------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Price:
    """List price of one model, in US dollars.

    Attributes:
        input: per million input (prompt) tokens not served from a cache.
        output: per million output tokens.
        cache_read: per million input tokens read from a prompt cache (``None`` = same as
            ``input``).
        cache_write: per million input tokens written to a prompt cache (``None`` = same as
            ``input``).
        per_search_unit: per Cohere search unit (one rerank call of up to 100 documents).
    """

    input: float = 0.0
    output: float = 0.0
    cache_read: float | None = None
    cache_write: float | None = None
    per_search_unit: float = 0.0


#: List prices of the default cloud models (``kb_shared.models``), checked 2026-11-30. A model
#: missing here is still counted in tokens, but its cost is reported as not priced.
#: Sources: Anthropic model pages (platform.claude.com/docs/en/models/sonnet-5-5/overview:
#: $2 in, $10 out, $2.50 5-minute cache write, $0.20 cache read; pricing page for Haiku 4.5:
#: $1 / $5 / $1.25 / $0.10); Google AI pricing (ai.google.dev/gemini-api/docs/pricing:
#: gemini-2.5-flash $0.30 in, $2.50 out, $0.03 cached; gemini-embedding-001 $0.15 in;
#: gemini-embedding-2 $0.20 in); Cohere pricing (cohere.com/pricing: Rerank 3.5 $2.00 per
#: 1,000 searches).
PRICES: dict[str, Price] = {
    "claude-sonnet-5-5": Price(input=2.0, output=10.0, cache_read=0.20, cache_write=2.50),
    "claude-haiku-4-5": Price(input=1.0, output=5.0, cache_read=0.10, cache_write=1.25),
    "gemini-2.5-flash": Price(input=0.30, output=2.50, cache_read=0.03),
    "gemini-embedding-001": Price(input=0.15),
    "gemini-embedding-2": Price(input=0.20),
    "rerank-v3.5": Price(per_search_unit=0.002),
}


def key_fingerprint(key: str) -> str:
    """A short, non-reversible name for an API key: ``"sha256:"`` + 8 hex characters.

    Logged instead of the key so a person can tell which key paid for a run without the key
    (or any part of it) appearing in logs or metadata.
    """
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:8]


class UsageMeter:
    """Thread-safe counters of one provider's calls, tokens and cost.

    Args:
        provider: the provider's name, e.g. ``"claude-markdown"``.
        model: the API model id, used to look up :data:`PRICES`.
        key: where the key came from and its :func:`key_fingerprint`, e.g.
            ``"ANTHROPIC_API_KEY sha256:1a2b3c4d"`` (``""`` when unknown, e.g. in tests).
    """

    def __init__(self, provider: str, model: str, key: str = "") -> None:
        self.provider = provider
        self.model = model
        self.key = key
        self._lock = threading.Lock()
        self._counts: dict[str, float] = dict.fromkeys(
            (
                "requests", "retries", "failures", "input_tokens", "output_tokens",
                "cache_read_tokens", "cache_write_tokens", "search_units",
                "requests_without_usage",
            ),
            0,
        )
        self._cost = 0.0

    def add_request(self) -> None:
        """Count one attempt sent to the API."""
        with self._lock:
            self._counts["requests"] += 1

    def add_retry(self) -> None:
        """Count one retry (an attempt after a transient failure)."""
        with self._lock:
            self._counts["retries"] += 1

    def add_failure(self) -> None:
        """Count one call that failed for good."""
        with self._lock:
            self._counts["failures"] += 1

    def add_usage(
        self,
        *,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        cache_read_tokens: int | None = None,
        cache_write_tokens: int | None = None,
        search_units: float | None = None,
    ) -> None:
        """Add what one response reported; ``None`` everywhere counts a response without usage.

        ``input_tokens`` are the prompt tokens *not* read from or written to a cache (the
        Anthropic convention; Gemini callers pass ``prompt - cached``).
        """
        values = {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_read_tokens": cache_read_tokens,
            "cache_write_tokens": cache_write_tokens,
            "search_units": search_units,
        }
        price = PRICES.get(self.model)
        with self._lock:
            if all(v is None for v in values.values()):
                self._counts["requests_without_usage"] += 1
                return
            for name, value in values.items():
                if value:
                    self._counts[name] += value
            if price is not None:
                read = price.input if price.cache_read is None else price.cache_read
                write = price.input if price.cache_write is None else price.cache_write
                self._cost += (
                    (input_tokens or 0) * price.input
                    + (output_tokens or 0) * price.output
                    + (cache_read_tokens or 0) * read
                    + (cache_write_tokens or 0) * write
                ) / 1_000_000 + (search_units or 0) * price.per_search_unit

    def snapshot(self) -> dict[str, str | int | float]:
        """Counters so far, flat and JSON-serialisable (Dagster asset metadata).

        Keys: ``provider``, ``model``, ``key``, ``requests``, ``retries``, ``failures``,
        ``input_tokens``, ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens``,
        ``search_units``, ``requests_without_usage``, ``cost_usd`` (rounded to 6 places) and
        ``priced`` (``"yes"``, or ``"no"`` when :data:`PRICES` has no entry for the model, in
        which case ``cost_usd`` is 0).
        """
        with self._lock:
            counts = {
                k: (int(v) if k != "search_units" else float(v)) for k, v in self._counts.items()
            }
            cost = round(self._cost, 6)
        return {
            "provider": self.provider,
            "model": self.model,
            "key": self.key,
            **counts,
            "cost_usd": cost,
            "priced": "yes" if self.model in PRICES else "no",
        }


# --------------------------------------------------------------------------------------
# Error classification
# --------------------------------------------------------------------------------------
def http_status(exc: BaseException) -> int | None:
    """The HTTP status an SDK exception carries, or ``None``.

    anthropic and cohere errors have ``status_code``; google-genai's ``APIError`` has
    ``code``; httpx/httpx2 ``HTTPStatusError`` has ``response.status_code``.
    """
    for attr in ("status_code", "code"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and 100 <= value <= 599:
            return value
    response = getattr(exc, "response", None)
    value = getattr(response, "status_code", None)
    if isinstance(value, int) and 100 <= value <= 599:
        return value
    return None


_TRANSPORT_ERRORS: tuple[type[BaseException], ...] = (
    httpx.TransportError,
    httpx2.TransportError,
    TimeoutError,
    ConnectionError,
)


def is_transient(exc: BaseException, extra: tuple[type[BaseException], ...] = ()) -> bool:
    """True for a failure worth retrying: a :data:`RETRYABLE_STATUS`, a timeout or a lost
    connection (httpx/httpx2 transport errors, plus the SDK's own wrappers in ``extra``,
    e.g. ``anthropic.APIConnectionError``)."""
    status = http_status(exc)
    if status is not None:
        return status in RETRYABLE_STATUS
    return isinstance(exc, _TRANSPORT_ERRORS + extra)


def retry_after_seconds(exc: BaseException | None) -> float | None:
    """The delay a ``Retry-After`` (or ``retry-after-ms``) header of ``exc`` asks for.

    Reads ``exc.response.headers`` (anthropic, google-genai, httpx) or ``exc.headers``
    (cohere). Only the delay-seconds form is read (RFC 9110 §10.2.3); an HTTP-date is ignored.
    """
    if exc is None:
        return None
    headers: Any = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        headers = getattr(exc, "headers", None)
    if not headers:
        return None
    try:
        lowered = {str(k).lower(): str(v) for k, v in dict(headers).items()}
    except (TypeError, ValueError):
        return None
    try:
        if "retry-after-ms" in lowered:
            return max(0.0, float(lowered["retry-after-ms"]) / 1000.0)
        if "retry-after" in lowered:
            return max(0.0, float(lowered["retry-after"]))
    except ValueError:
        return None
    return None


def error_message(exc: BaseException, limit: int = 300) -> str:
    """The vendor's own message for ``exc``, on one line, without a final full stop, at most
    ``limit`` characters."""
    message: Any = None
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):  # anthropic {"error": {"message"}}, cohere {"message"}
        nested = body.get("error")
        if isinstance(nested, Mapping):
            message = nested.get("message")
        if not isinstance(message, str) or not message:
            message = body.get("message")
    if not isinstance(message, str) or not message:
        message = getattr(exc, "message", None)  # google-genai APIError.message
    if not isinstance(message, str) or not message:
        message = str(exc) or type(exc).__name__
    message = " ".join(message.split()).rstrip(" .")  # callers add their own full stop
    return message if len(message) <= limit else message[: limit - 1] + "…"


# --------------------------------------------------------------------------------------
# Retry policy and the call gate
# --------------------------------------------------------------------------------------
class _WaitWithRetryAfter(tenacity.wait.wait_base):
    """The larger of a base wait and the response's ``Retry-After`` (capped)."""

    def __init__(self, base: tenacity.wait.wait_base) -> None:
        self.base = base

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        delay = self.base(retry_state)
        outcome = retry_state.outcome
        hinted = retry_after_seconds(outcome.exception() if outcome is not None else None)
        if hinted is not None:
            delay = max(delay, min(hinted, RETRY_AFTER_CAP_S))
        return delay


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How transient failures are retried.

    Attributes:
        max_retries: retries after the first attempt (``Settings.provider_max_retries``);
            0 = one attempt only.
        wait: tenacity wait strategy. ``None`` = exponential backoff with jitter
            (:data:`RETRY_INITIAL_S` doubling to :data:`RETRY_MAX_S`, + up to
            :data:`RETRY_JITTER_S`) that also honours ``Retry-After``. Tests pass
            ``tenacity.wait_none()`` so nothing sleeps.
        sleep: the function that sleeps (``time.sleep``); tests may record calls instead.
    """

    max_retries: int = 5
    wait: tenacity.wait.wait_base | None = None
    sleep: Callable[[float], None] = field(default=time.sleep)

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {self.max_retries}")

    def strategy(self) -> tenacity.wait.wait_base:
        """The wait strategy in force."""
        if self.wait is not None:
            return self.wait
        return _WaitWithRetryAfter(
            tenacity.wait_exponential_jitter(
                initial=RETRY_INITIAL_S, max=RETRY_MAX_S, exp_base=2, jitter=RETRY_JITTER_S
            )
        )


class ProviderCalls:
    """The gate every API call of one provider goes through.

    Args:
        vendor: ``"Anthropic"``, ``"Gemini"`` or ``"Cohere"`` (for messages).
        model: the API model id (for messages and prices).
        key_name: the setting that holds the key, e.g. ``"ANTHROPIC_API_KEY"`` (for messages).
        meter: where usage is counted.
        concurrency: most calls in flight at once (>= 1).
        retry: the retry policy (default :class:`RetryPolicy` ()).
        transport_errors: SDK exception types that mean "no response" (timeouts, lost
            connections) besides httpx/httpx2's own, e.g. ``anthropic.APIConnectionError``.

    Raises:
        ValueError: ``concurrency`` < 1.
    """

    def __init__(
        self,
        *,
        vendor: str,
        model: str,
        key_name: str,
        meter: UsageMeter,
        concurrency: int = 4,
        retry: RetryPolicy | None = None,
        transport_errors: tuple[type[BaseException], ...] = (),
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.vendor = vendor
        self.model = model
        self.key_name = key_name
        self.meter = meter
        self.concurrency = concurrency
        self.retry = retry or RetryPolicy()
        self.transport_errors = transport_errors
        self._slots = threading.BoundedSemaphore(concurrency)

    # ------------------------------------------------------------------ one call
    def call(self, what: str, fn: Callable[[], T]) -> T:
        """Run ``fn`` (one SDK request) under the concurrency limit, retrying transient
        failures.

        Args:
            what: what the call does, for messages ("embedding 100 chunks").
            fn: makes the request and returns the SDK's response.

        Raises:
            ProviderError: a bad key (401), refused permission (403), unknown model (404),
                another refusal (4xx), or a transient failure still failing after
                ``retry.max_retries`` retries. The SDK's exception is the ``__cause__``.
            Exception: anything ``fn`` raises that is not an HTTP or transport error
                (a programming error) propagates unchanged.
        """
        attempts = 0

        def attempt() -> T:
            nonlocal attempts
            attempts += 1
            with self._slots:
                self.meter.add_request()
                return fn()

        def before_sleep(state: tenacity.RetryCallState) -> None:
            self.meter.add_retry()
            exc = state.outcome.exception() if state.outcome is not None else None
            status = http_status(exc) if exc is not None else None
            reason = f"HTTP {status}" if status is not None else type(exc).__name__
            delay = state.next_action.sleep if state.next_action is not None else 0.0
            log.warning(
                "%s %s: %s (%s); retry %d of %d in %.1f s",
                self.vendor, what, reason, error_message(exc) if exc else "",
                state.attempt_number, self.retry.max_retries, delay,
            )

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.retry.max_retries + 1),
            wait=self.retry.strategy(),
            retry=tenacity.retry_if_exception(lambda e: is_transient(e, self.transport_errors)),
            sleep=self.retry.sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            return retrying(attempt)
        except Exception as exc:  # noqa: BLE001 - translated below or re-raised
            error = self._translate(exc, what, attempts)
            if error is None:
                raise
            self.meter.add_failure()
            raise error from exc

    def _translate(self, exc: Exception, what: str, attempts: int) -> ProviderError | None:
        status = http_status(exc)
        message = error_message(exc)
        if is_transient(exc, self.transport_errors):
            reason = f"HTTP {status}" if status is not None else type(exc).__name__
            return ProviderError(
                f"{self.vendor} {what}: still failing after {attempts} attempts "
                f"({self.retry.max_retries} retries); last error {reason}: {message}. "
                "The service is rate-limiting or unavailable; re-run later or lower "
                "KB_PROVIDER_CONCURRENCY."
            )
        # Gemini answers a bad key with 400 INVALID_ARGUMENT "API key not valid" (reason
        # API_KEY_INVALID) rather than 401.
        if status == 401 or (status == 400 and "api key" in message.lower()):
            return ProviderError(
                f"{self.vendor} rejected the API key in {self.key_name} (HTTP {status}) while "
                f"{what}: {message}. Check that the key is current and copied whole."
            )
        if status == 403:
            return ProviderError(
                f"{self.vendor} refused access (HTTP 403) while {what} with model "
                f"{self.model!r}: {message}. The key in {self.key_name} lacks permission for "
                "this model or region; use a key or model your account is allowed."
            )
        if status == 404:
            return ProviderError(
                f"{self.vendor} has no model {self.model!r} (HTTP 404) while {what}: "
                f"{message}. Set a model id your account can use (defaults live in "
                "kb_shared/models.py)."
            )
        if status is not None:
            return ProviderError(
                f"{self.vendor} refused the request (HTTP {status}) while {what} with model "
                f"{self.model!r}: {message}"
            )
        return None

    # ------------------------------------------------------------------ many calls
    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[fn(item) for item in items]`` on up to ``concurrency`` threads, in order.

        The first exception (in item order) is raised after cancelling what has not
        started; results of calls already made are discarded with it.
        """
        if self.concurrency == 1 or len(items) <= 1:
            return [fn(item) for item in items]
        with ThreadPoolExecutor(
            max_workers=min(self.concurrency, len(items)), thread_name_prefix="kb-provider"
        ) as pool:
            futures = [pool.submit(fn, item) for item in items]
            try:
                return [future.result() for future in futures]
            except BaseException:
                for future in futures:
                    future.cancel()
                raise


# --------------------------------------------------------------------------------------
# Building providers
# --------------------------------------------------------------------------------------
#: The setting that holds each vendor's API key (named in messages and usage metadata).
KEY_NAMES: dict[str, str] = {
    "Anthropic": "ANTHROPIC_API_KEY",
    "Gemini": "GEMINI_API_KEY",
    "Cohere": "COHERE_API_KEY",
}

#: Client timeout of one Gemini request, milliseconds (google-genai ``HttpOptions.timeout``).
GEMINI_REQUEST_TIMEOUT_MS = 120_000


def provider_calls(
    vendor: str,
    provider: str,
    model: str,
    *,
    key: str = "",
    concurrency: int = 4,
    retry: RetryPolicy | None = None,
) -> ProviderCalls:
    """The :class:`ProviderCalls` gate of one provider, with a fresh :class:`UsageMeter`
    (``calls.meter``).

    Args:
        vendor: ``"Anthropic"``, ``"Gemini"`` or ``"Cohere"``; picks the key's setting from
            :data:`KEY_NAMES`. Anthropic calls also retry ``anthropic.APIConnectionError``
            (the SDK is imported here, so it loads only when an Anthropic provider is built).
        provider: the meter's provider name, e.g. ``"claude-markdown"``.
        model: the API model id.
        key, concurrency, retry: as :class:`UsageMeter` and :class:`ProviderCalls`.

    Raises:
        KeyError: an unknown ``vendor``.
        ValueError: ``concurrency`` < 1.
    """
    transport_errors: tuple[type[BaseException], ...] = ()
    if vendor == "Anthropic":
        import anthropic  # noqa: PLC0415 - the SDK loads only when this provider is chosen

        transport_errors = (anthropic.APIConnectionError,)
    return ProviderCalls(
        vendor=vendor,
        model=model,
        key_name=KEY_NAMES[vendor],
        meter=UsageMeter(provider, model, key),
        concurrency=concurrency,
        retry=retry,
        transport_errors=transport_errors,
    )


def api_key(value: SecretStr | None, missing: str) -> str:
    """The key's text.

    Raises:
        ProviderError: ``value`` is ``None`` (the key is not set); ``missing`` is the message.
    """
    if value is None:
        raise ProviderError(missing)
    return value.get_secret_value()


def call_options(settings: Settings, key_name: str, secret: str) -> dict[str, Any]:
    """The constructor keywords every cloud provider takes from settings: ``concurrency``
    (``Settings.provider_concurrency``), ``retry`` (``Settings.provider_max_retries``) and
    ``key`` (``"{key_name} {key_fingerprint(secret)}"``, never the key itself)."""
    return {
        "concurrency": settings.provider_concurrency,
        "retry": RetryPolicy(max_retries=settings.provider_max_retries),
        "key": f"{key_name} {key_fingerprint(secret)}",
    }


def anthropic_client(
    settings: Settings, needed_by: str
) -> tuple[anthropic.Anthropic, dict[str, Any]]:
    """A real ``anthropic.Anthropic`` client from ``settings.anthropic_api_key``, with the
    SDK's own retries off (``max_retries=0``: :class:`ProviderCalls` retries), and the
    :func:`call_options` for the provider's constructor.

    Raises:
        ProviderError: no Anthropic key is set (``"ANTHROPIC_API_KEY is not set; {needed_by}
            needs it"``).
    """
    import anthropic  # noqa: PLC0415 - the SDK loads only when this provider is chosen

    name = KEY_NAMES["Anthropic"]
    secret = api_key(settings.anthropic_api_key, f"{name} is not set; {needed_by} needs it")
    return anthropic.Anthropic(api_key=secret, max_retries=0), call_options(settings, name, secret)


def gemini_client(
    settings: Settings, timeout_ms: int = GEMINI_REQUEST_TIMEOUT_MS
) -> tuple[genai.Client, dict[str, Any]]:
    """A real ``google.genai.Client`` from ``settings.gemini_api_key`` with a request timeout
    of ``timeout_ms`` milliseconds, and the :func:`call_options` for the provider's
    constructor.

    Raises:
        ProviderError: no Gemini key is set.
    """
    from google import genai  # noqa: PLC0415 - the SDK loads only when this provider is chosen
    from google.genai import types  # noqa: PLC0415

    name = KEY_NAMES["Gemini"]
    secret = api_key(settings.gemini_api_key, f"{name} (or GOOGLE_API_KEY) is not set")
    client = genai.Client(api_key=secret, http_options=types.HttpOptions(timeout=timeout_ms))
    return client, call_options(settings, name, secret)


# --------------------------------------------------------------------------------------
# Usage of one response
# --------------------------------------------------------------------------------------
def record_anthropic_usage(meter: UsageMeter, message: Any) -> Any:
    """Count what an Anthropic ``Message`` reports (input, output, cache read and cache write
    tokens) on ``meter``; a message without ``usage`` counts as a response without usage.

    Returns:
        The message's ``usage`` object, or ``None``.
    """
    usage = getattr(message, "usage", None)
    if usage is None:
        meter.add_usage()
        return None
    meter.add_usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_input_tokens,
        cache_write_tokens=usage.cache_creation_input_tokens,
    )
    return usage


def record_gemini_usage(meter: UsageMeter, response: Any) -> tuple[int | None, int | None]:
    """Count what a Gemini ``GenerateContentResponse`` reports on ``meter``: uncached prompt
    tokens (``promptTokenCount - cachedContentTokenCount``), output tokens
    (``candidatesTokenCount``) and cache reads. Gemini omits a count that is zero, so a
    missing cached or output count is 0; a response without ``promptTokenCount`` counts as
    a response without usage.

    Returns:
        ``(prompt tokens, cached tokens)``, both ``None`` when the prompt count is missing.
    """
    usage = getattr(response, "usage_metadata", None)
    prompt = getattr(usage, "prompt_token_count", None) if usage is not None else None
    if prompt is None:
        meter.add_usage()
        return None, None
    cached = getattr(usage, "cached_content_token_count", None) or 0
    meter.add_usage(
        input_tokens=prompt - cached,
        output_tokens=getattr(usage, "candidates_token_count", None) or 0,
        cache_read_tokens=cached,
    )
    return prompt, cached


# --------------------------------------------------------------------------------------
# Model output helpers
# --------------------------------------------------------------------------------------
def anthropic_text(message: Any) -> str:
    """The text of an Anthropic ``Message``: its ``text`` content blocks joined (thinking
    and other blocks are skipped)."""
    return "".join(b.text for b in message.content if getattr(b, "type", "") == "text")


def strip_code_fence(text: str) -> str:
    """``text`` without one Markdown code fence wrapped around all of it (models add one
    now and then even when told not to)."""
    match = _FENCE.match(text)
    return match.group(1) if match else text


def parse_json_object(text: str, vendor: str, what: str) -> dict[str, Any]:
    """Parse a model's JSON answer, which must be one object.

    Raises:
        ProviderError: the text is not valid JSON or not an object; the message names the
            call and quotes the start of the text.
    """
    body = strip_code_fence(text.strip())
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        start = " ".join(body[:160].split())
        raise ProviderError(
            f"{vendor} returned malformed JSON for {what}: {exc.msg} at line {exc.lineno} "
            f"column {exc.colno}; the answer began: {start!r}"
        ) from exc
    if not isinstance(value, dict):
        raise ProviderError(
            f"{vendor} returned JSON for {what} that is a {type(value).__name__}, not an object"
        )
    return value
