"""Inputs a hostile (or careless) tracker and a model send the compliance side: a Fine past
what kb stores typed into Notion, a ``min_fine`` past it, a possessive in the query ("AGL's
fine"). Each gets a clear error or the right actions; nothing crashes and nothing is written.
Notion is ``FakeNotion`` at the HTTP edge (pages in the recorded responses' shape); SQLite and
Postgres (``catalog`` fixture)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from kb_shared.errors import NotionSchemaError, QueryError
from kb_shared.market.notion import NotionTracker, sync_notion
from kb_shared.stores.catalog import Catalog
from tests.market.notion_server import API_URL, DATA_SOURCE_ID, TOKEN, FakeNotion, tracker_page


def _tracker() -> NotionTracker:
    return NotionTracker(TOKEN, DATA_SOURCE_ID, api_url=API_URL, sleep=lambda s: None)


def _pages(fine: float | None) -> list[dict]:
    return [
        tracker_page("agl", summary="Hardship breaches", organisation="AGL Energy Limited",
                     regulatory_body="AER", status="Paid", fine=1_500_000, date="2025-02-14"),
        tracker_page("red", summary="Misleading conduct", organisation="Red Energy Pty Ltd",
                     regulatory_body="ACCC", status="Open", fine=fine, date="2025-06-30"),
    ]


@pytest.mark.parametrize("fine", [1e30, 1e17])
def test_a_fine_past_what_kb_stores_is_refused_naming_the_page(catalog: Catalog,
                                                              fake: FakeNotion,
                                                              fine: float) -> None:
    fake.pages = _pages(250_000)
    sync_notion(catalog, _tracker())
    before = catalog.list_compliance_actions()
    fake.pages = _pages(fine)
    with pytest.raises(NotionSchemaError) as caught:
        sync_notion(catalog, _tracker())
    message = str(caught.value)
    assert f"'Fine' is too large to store, got {fine!r}; fix it in Notion. Nothing was " \
           "written." in message
    assert fake.pages[1]["url"] in message
    assert catalog.list_compliance_actions() == before


def test_a_min_fine_past_every_storable_fine_is_refused(catalog: Catalog,
                                                        fake: FakeNotion) -> None:
    fake.pages = _pages(250_000)
    sync_notion(catalog, _tracker())
    largest = catalog.search_compliance(min_fine="92233720368547758.07")
    assert largest.count == 0
    for value in ("1e30", 1e19, Decimal("92233720368547758.08")):
        with pytest.raises(QueryError, match=r"min_fine must be at most 92233720368547758\.07 "
                                             r"dollars \(the largest fine kb stores\)"):
            catalog.search_compliance(min_fine=value)


@pytest.mark.parametrize("query", ["AGL's hardship", "AGL\u2019s breaches", "agl's"])
def test_a_possessive_in_the_query_finds_the_action(catalog: Catalog, fake: FakeNotion,
                                                    query: str) -> None:
    fake.pages = _pages(250_000)
    sync_notion(catalog, _tracker())
    found = catalog.search_compliance(query)
    assert (found.count, found.fine_total) == (1, Decimal("1500000.00"))
    assert found.rows[0].organisation == "AGL Energy Limited"


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("summary", "Hardship\x00breaches", "summary cannot contain NUL characters"),
        ("source", "https://www.aer.gov.au/" + "a" * 2100,
         "source_url is 2123 characters; the limit is 2048"),
    ],
)
def test_a_value_the_store_refuses_fails_the_sync_naming_the_page(
    catalog: Catalog, fake: FakeNotion, field: str, value: str, reason: str
) -> None:
    fake.pages = _pages(250_000)
    sync_notion(catalog, _tracker())
    before = catalog.list_compliance_actions()
    fake.pages = [*_pages(250_000)[:1], tracker_page(
        "red", **{"summary": "Misleading conduct", field: value}, organisation="Red Energy")]
    with pytest.raises(NotionSchemaError) as caught:
        sync_notion(catalog, _tracker())
    assert str(caught.value) == (
        f"Notion page {fake.pages[1]['url']}: compliance action {fake.pages[1]['id']!r}: "
        f"{reason}; fix it in Notion. Nothing was written.")
    assert catalog.list_compliance_actions() == before
