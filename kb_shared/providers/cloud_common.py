"""What every cloud provider shares: the :class:`CloudProvider` base, API keys and SDK clients,
one-turn requests (:func:`claude_message`, :func:`gemini_content`), and readers of the
vendors' responses.

The cloud providers (``cloud_markdown``, ``cloud_embeddings``, ``cloud_context``,
``cloud_graph``, ``cloud_figures``, ``cloud_rerank``) are :class:`CloudProvider` s: each holds
its SDK client, its model and one ``cloud_calls.ProviderCalls`` gate (retries, concurrency
limit, errors a person can act on) with its ``cloud_usage.UsageMeter`` (tokens and cost).
``from_settings`` builds the real client from the vendor's key; tests inject a client over a
mock transport instead. The key itself never leaves the client: usage metadata and logs show
its :func:`key_fingerprint`.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import TYPE_CHECKING, Any, ClassVar, Self

from kb_shared.errors import ProviderError
from kb_shared.providers.base import Provider
from kb_shared.providers.cloud_calls import KEY_NAMES, RetryPolicy, provider_calls
from kb_shared.providers.cloud_usage import UsageMeter

if TYPE_CHECKING:
    from collections.abc import Callable

    from pydantic import SecretStr

    from kb_shared.settings import Settings

#: Client timeout of one Gemini request, milliseconds (google-genai ``HttpOptions.timeout``).
GEMINI_REQUEST_TIMEOUT_MS = 120_000
#: Client timeout of one Cohere request, seconds (``cohere.ClientV2(timeout=…)``).
COHERE_REQUEST_TIMEOUT_S = 60.0

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(.*?)\n\s*```\s*$", re.DOTALL)


# --------------------------------------------------------------------------------------
# Keys and clients
# --------------------------------------------------------------------------------------
def key_fingerprint(key: str) -> str:
    """A short, non-reversible name for an API key: ``"sha256:"`` + 8 hex characters.

    Logged instead of the key so a person can tell which key paid for a run without the key
    (or any part of it) appearing in logs or metadata.
    """
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:8]


def api_key(
    value: SecretStr | None, missing: str, error: type[ProviderError] = ProviderError
) -> str:
    """The key's text.

    Raises:
        ProviderError: (``error``) ``value`` is ``None`` (the key is not set); ``missing`` is
            the message.
    """
    if value is None:
        raise error(missing)
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
    settings: Settings, needed_by: str, error: type[ProviderError] = ProviderError
) -> tuple[Any, dict[str, Any]]:
    """A real ``anthropic.Anthropic`` client from ``settings.anthropic_api_key``, with the
    SDK's own retries off (``max_retries=0``: ``ProviderCalls`` retries), and the
    :func:`call_options` for the provider's constructor.

    Raises:
        ProviderError: (``error``) no Anthropic key is set (``"ANTHROPIC_API_KEY is not set;
            {needed_by} needs it"``).
    """
    import anthropic  # noqa: PLC0415 - the SDK loads only when this provider is chosen

    name = KEY_NAMES["Anthropic"]
    secret = api_key(settings.anthropic_api_key, f"{name} is not set; {needed_by} needs it", error)
    return anthropic.Anthropic(api_key=secret, max_retries=0), call_options(settings, name, secret)


def gemini_client(
    settings: Settings, needed_by: str, error: type[ProviderError] = ProviderError
) -> tuple[Any, dict[str, Any]]:
    """A real ``google.genai.Client`` from ``settings.gemini_api_key`` with a request timeout
    of :data:`GEMINI_REQUEST_TIMEOUT_MS`, and the :func:`call_options` for the provider's
    constructor.

    Raises:
        ProviderError: (``error``) no Gemini key is set (``"GEMINI_API_KEY (or
            GOOGLE_API_KEY) is not set; {needed_by} needs it"``).
    """
    from google import genai  # noqa: PLC0415 - the SDK loads only when this provider is chosen
    from google.genai import types  # noqa: PLC0415

    name = KEY_NAMES["Gemini"]
    secret = api_key(
        settings.gemini_api_key, f"{name} (or GOOGLE_API_KEY) is not set; {needed_by} needs it",
        error,
    )
    options = types.HttpOptions(timeout=GEMINI_REQUEST_TIMEOUT_MS)
    return genai.Client(api_key=secret, http_options=options), call_options(settings, name, secret)


def cohere_client(
    settings: Settings, needed_by: str, error: type[ProviderError] = ProviderError
) -> tuple[Any, dict[str, Any]]:
    """A real ``cohere.ClientV2`` from ``settings.cohere_api_key`` with the SDK's retries off
    and a request timeout of :data:`COHERE_REQUEST_TIMEOUT_S`, and the :func:`call_options`
    for the provider's constructor.

    Raises:
        ProviderError: (``error``) no Cohere key is set (``"COHERE_API_KEY is not set;
            {needed_by} needs it"``).
    """
    import cohere  # noqa: PLC0415 - the SDK loads only when this provider is chosen

    name = KEY_NAMES["Cohere"]
    secret = api_key(settings.cohere_api_key, f"{name} is not set; {needed_by} needs it", error)
    client = cohere.ClientV2(api_key=secret, max_retries=0, timeout=COHERE_REQUEST_TIMEOUT_S)
    return client, call_options(settings, name, secret)


_CLIENT_BUILDERS: dict[str, Callable[..., tuple[Any, dict[str, Any]]]] = {
    "Anthropic": anthropic_client,
    "Gemini": gemini_client,
    "Cohere": cohere_client,
}


def close_client(vendor: str, client: Any) -> None:
    """Close an SDK client's connection pool. ``anthropic.Anthropic`` and
    ``google.genai.Client`` have ``close()``; ``cohere.ClientV2`` closes on leaving its
    context (``__exit__``), having no ``close()`` of its own."""
    if vendor == "Cohere":
        client.__exit__(None, None, None)
    else:
        client.close()


# --------------------------------------------------------------------------------------
# The base of every cloud provider
# --------------------------------------------------------------------------------------
class CloudProvider(Provider):
    """A provider backed by a vendor's API: an SDK client, a model and one call gate.

    A cloud provider is ``class X(CloudProvider, <role ABC>)`` and sets the class attributes
    below; one with constructor arguments of its own validates them and calls
    ``super().__init__``, and one with role settings overrides :meth:`settings_options`.

    Class attributes:
        vendor: ``"Anthropic"``, ``"Gemini"`` or ``"Cohere"`` (messages, key, client).
        provider: the usage meter's name, e.g. ``"claude-markdown"``.
        name_prefix: ``name`` is ``"{name_prefix}:{model}"``; ``""`` means ``provider``.
        default_model: the API model id used when ``model`` is ``None`` (``kb_shared.models``).
        needed_by: what needs the key, for the message when it is missing.
        error: the ``ProviderError`` subclass every failure raises (``EmbeddingError`` for an
            embedder, ``RerankError`` for a reranker).

    Args:
        client: the SDK client (``anthropic.Anthropic``, ``google.genai.Client`` or
            ``cohere.ClientV2``) with the SDK's own retries off (``max_retries=0``). A client
            passed in (tests: one over a mock transport) stays its owner's to close.
        model: API model id; ``None`` = ``default_model``.
        concurrency: calls in flight at once, >= 1.
        retry: retry policy (default ``RetryPolicy()``).
        key: the key's setting and :func:`key_fingerprint`, for usage metadata.

    Attributes:
        client, model, name: as above.
        calls: the ``ProviderCalls`` gate every request goes through.
        meter: ``calls.meter``, the provider's ``UsageMeter``.

    Raises:
        ValueError: ``concurrency`` < 1.
    """

    vendor: ClassVar[str]
    provider: ClassVar[str]
    name_prefix: ClassVar[str] = ""
    default_model: ClassVar[str]
    needed_by: ClassVar[str]
    error: ClassVar[type[ProviderError]] = ProviderError

    def __init__(
        self,
        client: Any,
        *,
        model: str | None = None,
        concurrency: int = 4,
        retry: RetryPolicy | None = None,
        key: str = "",
    ) -> None:
        self.client = client
        self.model = self.default_model if model is None else model
        self.name = f"{self.name_prefix or self.provider}:{self.model}"
        self.calls = provider_calls(
            self.vendor, self.provider, self.model,
            key=key, concurrency=concurrency, retry=retry, error=self.error,
        )
        self.meter: UsageMeter = self.calls.meter
        self._owns_client = False

    @classmethod
    def settings_options(cls, settings: Settings) -> dict[str, Any]:
        """Constructor keywords of this role taken from ``settings`` (besides concurrency,
        retries and key, which every cloud provider takes). Default: none."""
        return {}

    @classmethod
    def from_settings(cls, settings: Settings) -> Self:
        """Build with a real client from the vendor's key in ``settings``; the provider owns
        that client and :meth:`close` closes it.

        Raises:
            ProviderError: (``cls.error``) the vendor's key is not set.
        """
        client, options = _CLIENT_BUILDERS[cls.vendor](settings, cls.needed_by, cls.error)
        provider = cls(client, **cls.settings_options(settings), **options)
        provider._owns_client = True
        return provider

    def call_model(self, what: str, method: Callable[..., Any], **arguments: Any) -> Any:
        """``method(model=self.model, **arguments)`` (an SDK request) through :attr:`calls`:
        retried, within the concurrency limit, failures raised as ``error`` naming ``what``."""
        return self.calls.call(what, lambda: method(model=self.model, **arguments))

    def usage(self) -> dict[str, object]:
        """Requests, retries, tokens and cost so far (``UsageMeter.snapshot``)."""
        return dict(self.meter.snapshot())

    def close(self) -> None:
        """Close the client this provider built (:meth:`from_settings`); a client passed in is
        left open. Safe to call twice."""
        if self._owns_client:
            self._owns_client = False
            close_client(self.vendor, self.client)


# --------------------------------------------------------------------------------------
# One request of a single user turn
# --------------------------------------------------------------------------------------
def claude_message(
    provider: CloudProvider,
    what: str,
    content: str | list[dict[str, Any]],
    max_tokens: int,
    **options: Any,
) -> tuple[Any, Any]:
    """One Claude Messages request through ``provider.calls``: a single user turn holding
    ``content`` (text, or content blocks), at most ``max_tokens`` out, and any further
    ``messages.create`` keywords in ``options``; its usage is counted on ``provider.meter``.

    Returns:
        ``(message, usage)``: the ``Message`` and its ``usage`` (``None`` when it had none).

    Raises:
        ProviderError: (``provider.error``) the call failed for good; ``what`` names it.
    """
    message = provider.call_model(
        what,
        provider.client.messages.create,
        max_tokens=max_tokens,
        messages=[{"role": "user", "content": content}],
        **options,
    )
    return message, record_anthropic_usage(provider.meter, message)


def gemini_content(
    provider: CloudProvider, what: str, parts: list[Any], config: Any
) -> tuple[Any, int | None, int | None]:
    """One Gemini ``generate_content`` request through ``provider.calls``: a single user turn
    of ``parts`` (``types.Part``) with ``config`` (``types.GenerateContentConfig``); its usage
    is counted on ``provider.meter``.

    Returns:
        ``(response, prompt tokens, cached tokens)`` (counts as :func:`record_gemini_usage`).

    Raises:
        ProviderError: (``provider.error``) the call failed for good; ``what`` names it.
    """
    from google.genai import types  # noqa: PLC0415 - the SDK loads only when Gemini is used

    turn = types.Content(role="user", parts=parts)
    response = provider.call_model(
        what, provider.client.models.generate_content, contents=[turn], config=config
    )
    return (response, *record_gemini_usage(provider.meter, response))


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
