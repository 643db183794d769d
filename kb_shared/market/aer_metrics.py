"""AER metric headings -> stable metric keys.

A heading maps to a key in two steps, both deterministic:

1. the alias table ``METRIC_ALIASES``, matched on normalised text (case, spacing, dashes and
   punctuation ignored): every wording a metric has had, per schedule, so a question written
   with last year's heading still finds this year's figures;
2. otherwise the heading's own normalised words become its key (``"Disconnection rate"`` ->
   ``disconnection_rate``): a heading nobody has mapped is a new metric, and the sync reports
   it so a person can add it to the table if it renames an old one.

Headings change between template versions (v3 -> v4.1 -> v4.2 -> v4.5; the 2024 procedures,
effective 1 July 2025, added and renamed metrics: ``../shared/notes/next-capabilities.md``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass

from kb_shared.market.aer import AerHeading, normalize_words

#: Longest metric key; a longer derived key is cut and ends in 8 hex digits of its SHA-1.
KEY_MAX = 120

#: Words that make a heading a ratio (not additive): rates, shares and averages.
_RATIO_WORDS = re.compile(
    r"\b(?:rate|rates|percent|percentage|proportion|ratio|average|avg|mean|median|share|per)\b"
)


@dataclass(frozen=True, slots=True)
class MetricAlias:
    """One metric and every heading it has been published under, in one schedule.

    ``additive``: whether values add up across retailers (see ``AerHeading``).
    """

    schedule: str
    key: str
    additive: bool
    headings: tuple[str, ...]


#: The alias table: extend it when a sync reports a new metric that renames an old one (add
#: the new wording to the old metric's headings). The wordings are those of the 2025-26
#: templates as kb's test workbooks reproduce them (tests/market/aer_fixtures.py).
METRIC_ALIASES: tuple[MetricAlias, ...] = (
    MetricAlias(
        "2",
        "customer_numbers",
        True,
        (
            "Number of residential customers",
            "Number of small business customers",
            "Customer numbers",
        ),
    ),
    MetricAlias(
        "2",
        "market_contract_customers",
        True,
        ("Customers on market retail contracts", "Number of customers on market contracts"),
    ),
    MetricAlias(
        "3",
        "customers_disconnected_for_non_payment",
        True,
        (
            "Residential customers disconnected for non-payment",
            "Residential customers disconnected for non-payment in the quarter",
        ),
    ),
    MetricAlias(
        "3",
        "disconnection_rate",
        False,
        ("Disconnection rate", "Residential disconnection rate for non-payment"),
    ),
    MetricAlias(
        "4",
        "hardship_customers",
        True,
        ("Residential customers on hardship programs", "Customers on hardship programs"),
    ),
    MetricAlias(
        "4",
        "hardship_participation_rate",
        False,
        ("Hardship program participation rate", "Hardship participation rate"),
    ),
)


def normalize_heading(heading: str) -> str:
    """The text a heading is matched on: lower-case words, single spaces, ``&`` -> "and",
    ``%`` -> "percent", other punctuation dropped (``aer.normalize_words``)."""
    return normalize_words(heading)


def derived_key(heading: str) -> str:
    """The key a heading gets when no alias maps it: its normalised words joined by ``_``,
    cut to ``KEY_MAX`` characters with a hash suffix when longer.

    Raises:
        ValueError: the heading has no letters or digits.
    """
    words = normalize_heading(heading)
    if not words:
        raise ValueError(f"heading {heading!r} has no letters or digits")
    key = words.replace(" ", "_")
    if len(key) <= KEY_MAX:
        return key
    digest = hashlib.sha1(key.encode()).hexdigest()[:8]
    return f"{key[: KEY_MAX - 9]}_{digest}"


def is_additive(heading: str) -> bool:
    """False for a heading that names a rate, share or average (``_RATIO_WORDS``)."""
    return _RATIO_WORDS.search(normalize_heading(heading)) is None


def alias_index(aliases: Iterable[MetricAlias]) -> dict[tuple[str, str], MetricAlias]:
    """(schedule, normalised heading) -> alias.

    Raises:
        ValueError: one heading is an alias of two keys in the same schedule.
    """
    index: dict[tuple[str, str], MetricAlias] = {}
    for alias in aliases:
        for heading in alias.headings:
            slot = (alias.schedule, normalize_heading(heading))
            if slot in index and index[slot].key != alias.key:
                raise ValueError(
                    f"heading {heading!r} is an alias of both {index[slot].key!r} and "
                    f"{alias.key!r} in schedule {alias.schedule}"
                )
            index[slot] = alias
    return index


_INDEX = alias_index(METRIC_ALIASES)


def map_heading(schedule: str, heading: str) -> AerHeading:
    """The metric key (and additivity) of ``heading`` as published in ``schedule``.

    Raises:
        ValueError: the heading has no letters or digits.
    """
    alias = _INDEX.get((schedule, normalize_heading(heading)))
    if alias is not None:
        return AerHeading(schedule, alias.key, heading, alias.additive, aliased=True)
    return AerHeading(schedule, derived_key(heading), heading, is_additive(heading), aliased=False)

