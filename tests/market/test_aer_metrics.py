"""Heading -> metric key: the alias table matched on normalised text, otherwise a key made
from the heading's own words; which metrics add up."""

from __future__ import annotations

import pytest

from kb_shared.market.aer_metrics import (
    KEY_MAX,
    METRIC_ALIASES,
    MetricAlias,
    alias_index,
    derived_key,
    is_additive,
    map_heading,
    normalize_heading,
)


@pytest.mark.parametrize(
    "heading",
    [
        "Residential customers disconnected for non-payment",
        "RESIDENTIAL customers disconnected for non\u2013payment ",
        "Residential  customers\ndisconnected for non payment",
        "Residential customers disconnected for non-payment in the quarter",
    ],
)
def test_every_wording_of_an_aliased_metric_maps_to_its_key(heading: str) -> None:
    mapped = map_heading("3", heading)
    assert (mapped.metric_key, mapped.additive, mapped.aliased, mapped.heading) == (
        "customers_disconnected_for_non_payment", True, True, heading)


def test_an_alias_belongs_to_its_schedule() -> None:
    elsewhere = map_heading("4", "Residential customers disconnected for non-payment")
    assert (elsewhere.metric_key, elsewhere.aliased) == (
        "residential_customers_disconnected_for_non_payment", False)


def test_an_unmapped_heading_gets_a_key_from_its_words() -> None:
    mapped = map_heading("6", "Life support customers (with medical confirmation) & other %")
    assert mapped.metric_key == "life_support_customers_with_medical_confirmation_and_other_percent"
    assert (mapped.aliased, mapped.additive) == (False, False)


@pytest.mark.parametrize(
    ("heading", "additive"),
    [
        ("Number of residential customers", True),
        ("Total hardship debt ($)", True),
        ("Disconnection rate", False),
        ("Average debt on entry to hardship program", False),
        ("Customers on hardship programs (% of customers)", False),
        ("Complaints per 10,000 customers", False),
        ("Proportion of customers on market contracts", False),
    ],
)
def test_rates_and_averages_are_not_additive(heading: str, additive: bool) -> None:
    assert is_additive(heading) is additive


def test_long_headings_get_a_bounded_unique_key() -> None:
    a = "Number of " + "very " * 40 + "long heading A"
    b = "Number of " + "very " * 40 + "long heading B"
    assert len(derived_key(a)) == len(derived_key(b)) == KEY_MAX
    assert derived_key(a) != derived_key(b)
    with pytest.raises(ValueError, match="has no letters or digits"):
        derived_key(" -- ")


def test_normalize_heading() -> None:
    assert normalize_heading("  Cust#s & Mkt Contr (%)") == "cust s and mkt contr percent"


def test_the_alias_table_is_consistent() -> None:
    index = alias_index(METRIC_ALIASES)
    assert len(index) == sum(len(a.headings) for a in METRIC_ALIASES)
    clash = (MetricAlias("3", "a", True, ("Same words",)),
             MetricAlias("3", "b", True, ("same  WORDS",)))
    with pytest.raises(ValueError, match="is an alias of both 'a' and 'b' in schedule 3"):
        alias_index(clash)
