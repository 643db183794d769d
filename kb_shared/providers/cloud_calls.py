"""The gate every cloud API call goes through: retries, a concurrency limit, usage counting,
and errors a person can act on.

Each cloud provider sends its calls through one :class:`ProviderCalls`, which
:func:`provider_calls` builds with a fresh ``cloud_usage.UsageMeter``:

* **Retries** (tenacity): a call that fails with HTTP 408, 429, 500, 502, 503, 504 or 529
  (Anthropic's "overloaded"), a timeout or a dropped connection is retried with exponential
  backoff and jitter (``wait_exponential_jitter``: 1 s, 2 s, 4 s … capped at 60 s, plus up to
  1 s of jitter), waiting at least as long as a ``Retry-After`` header asks (capped at 60 s).
  Every other status is final at once. The SDKs' own retries are switched off (clients are
  built with ``max_retries=0``) so one policy, with one count, applies everywhere.
* **Concurrency**: at most ``concurrency`` calls of one provider are in flight at once (a
  bounded semaphore, taken per attempt, never held while backing off). Providers are built
  once per Dagster run, so this is a per-run limit (``Settings.provider_concurrency``).
* **Errors**: a rejected key (401), a refused permission (403), a missing model (404), any
  other refusal and exhausted retries all become the provider's error type (a
  :class:`kb_shared.errors.ProviderError`; ``EmbeddingError`` for embedders, ``RerankError``
  for rerankers) with a message naming the vendor, the key's setting, the model and what to do.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import httpx2
import tenacity

from kb_shared.errors import ProviderError
from kb_shared.providers.cloud_usage import UsageMeter
from kb_shared.retry_after import retry_after_seconds

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

#: The setting that holds each vendor's API key (named in messages and usage metadata).
KEY_NAMES: dict[str, str] = {
    "Anthropic": "ANTHROPIC_API_KEY",
    "Gemini": "GEMINI_API_KEY",
    "Cohere": "COHERE_API_KEY",
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


def exception_retry_after(exc: BaseException | None) -> float | None:
    """The delay the response behind ``exc`` asks for (``kb_shared.retry_after``), or
    ``None``. Reads ``exc.response.headers`` (anthropic, google-genai, httpx) or
    ``exc.headers`` (cohere)."""
    if exc is None:
        return None
    headers: Any = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        headers = getattr(exc, "headers", None)
    return retry_after_seconds(headers)


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
        hinted = exception_retry_after(outcome.exception() if outcome is not None else None)
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
        error: the ``ProviderError`` subclass raised on failure (``EmbeddingError`` for an
            embedder, ``RerankError`` for a reranker; default ``ProviderError``).

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
        error: type[ProviderError] = ProviderError,
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
        self.error = error
        self._slots = threading.BoundedSemaphore(concurrency)

    # ------------------------------------------------------------------ one call
    def call(self, what: str, fn: Callable[[], T]) -> T:
        """Run ``fn`` (one SDK request) under the concurrency limit, retrying transient
        failures.

        Args:
            what: what the call does, for messages ("embedding 100 chunks").
            fn: makes the request and returns the SDK's response.

        Raises:
            ProviderError: ``self.error``, for a bad key (401), refused permission (403),
                unknown model (404), another refusal (4xx), or a transient failure still
                failing after ``retry.max_retries`` retries. The SDK's exception is the
                ``__cause__``.
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
            return self.error(
                f"{self.vendor} {what}: still failing after {attempts} attempts "
                f"({self.retry.max_retries} retries); last error {reason}: {message}. "
                "The service is rate-limiting or unavailable; re-run later or lower "
                "KB_PROVIDER_CONCURRENCY."
            )
        # Gemini answers a bad key with 400 INVALID_ARGUMENT "API key not valid" (reason
        # API_KEY_INVALID) rather than 401.
        if status == 401 or (status == 400 and "api key" in message.lower()):
            return self.error(
                f"{self.vendor} rejected the API key in {self.key_name} (HTTP {status}) while "
                f"{what}: {message}. Check that the key is current and copied whole."
            )
        if status == 403:
            return self.error(
                f"{self.vendor} refused access (HTTP 403) while {what} with model "
                f"{self.model!r}: {message}. The key in {self.key_name} lacks permission for "
                "this model or region; use a key or model your account is allowed."
            )
        if status == 404:
            return self.error(
                f"{self.vendor} has no model {self.model!r} (HTTP 404) while {what}: "
                f"{message}. Set a model id your account can use (defaults live in "
                "kb_shared/models.py)."
            )
        if status is not None:
            return self.error(
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



def provider_calls(
    vendor: str,
    provider: str,
    model: str,
    *,
    key: str = "",
    concurrency: int = 4,
    retry: RetryPolicy | None = None,
    error: type[ProviderError] = ProviderError,
) -> ProviderCalls:
    """The :class:`ProviderCalls` gate of one provider, with a fresh :class:`UsageMeter`
    (``calls.meter``).

    Args:
        vendor: ``"Anthropic"``, ``"Gemini"`` or ``"Cohere"``; picks the key's setting from
            :data:`KEY_NAMES`. Anthropic calls also retry ``anthropic.APIConnectionError``
            (the SDK is imported here, so it loads only when an Anthropic provider is built).
        provider: the meter's provider name, e.g. ``"claude-markdown"``.
        model: the API model id.
        key: as ``cloud_usage.UsageMeter``.
        concurrency, retry, error: as :class:`ProviderCalls`.

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
        error=error,
    )
