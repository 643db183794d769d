"""Usage and cost of the cloud providers: list prices and a thread-safe counter per provider.

Every cloud provider owns one :class:`UsageMeter` (``ProviderCalls.meter``): requests,
retries, failures, tokens (input, output, cache read, cache write), Cohere search units and
the cost they add up to at :data:`PRICES`. :meth:`UsageMeter.snapshot` is a flat ``dict`` of
numbers and strings that a Dagster asset can put in its metadata as is.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from kb_shared import models


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


#: List prices of the default models (``kb_shared.models``), from the vendors' price pages
#: (Anthropic "Pricing", Google "Gemini API pricing", Cohere "Pricing"). An unlisted model is
#: still counted in tokens; its cost is reported as not priced.
PRICES: dict[str, Price] = {
    models.CLAUDE_DOCUMENT_MODEL: Price(input=2.0, output=10.0, cache_read=0.20, cache_write=2.50),
    models.CLAUDE_CONTEXT_MODEL: Price(input=1.0, output=5.0, cache_read=0.10, cache_write=1.25),
    models.GEMINI_VISION_MODEL: Price(input=0.30, output=2.50, cache_read=0.03),
    models.GEMINI_EMBEDDING_MODEL: Price(input=0.15),
    models.GEMINI_MULTIMODAL_EMBEDDING_MODEL: Price(input=0.20),
    models.COHERE_RERANK_MODEL: Price(per_search_unit=0.002),
}


class UsageMeter:
    """Thread-safe counters of one provider's calls, tokens and cost.

    Args:
        provider: the provider's name, e.g. ``"claude-markdown"``.
        model: the API model id, used to look up :data:`PRICES`.
        key: where the key came from and its fingerprint
            (``cloud_common.key_fingerprint``), e.g. ``"ANTHROPIC_API_KEY sha256:1a2b3c4d"``
            (``""`` when unknown, e.g. in tests).
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
