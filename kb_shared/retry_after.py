"""The wait a rate-limited or overloaded HTTP response asks for: one reading of the
``Retry-After`` header for every client kb retries with (the cloud providers'
``kb_shared.providers.cloud_calls`` and the Notion sync's ``kb_shared.market.notion``)."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable, Mapping
from typing import Any


def retry_after_seconds(
    headers: Mapping[str, Any] | None, now: Callable[[], float] = time.time
) -> float | None:
    """Seconds to wait before retrying, from a response's ``headers`` (names in any case).

    ``retry-after-ms`` (milliseconds; sent by Anthropic's API and read by its SDK) wins when
    it is a number; else ``Retry-After`` as delay-seconds (decimals accepted) or an HTTP-date
    (RFC 9110 §10.2.3; measured from ``now``, Unix seconds). Never negative; ``None`` when
    neither header is there or readable (bad input is no hint, never an error).
    """
    if not headers:
        return None
    try:
        lowered = {str(name).lower(): str(value) for name, value in dict(headers).items()}
    except (TypeError, ValueError):
        return None
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - now())
