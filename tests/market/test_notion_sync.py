"""The whole Notion sync (``sync_notion``): read over HTTP from ``FakeNotion`` (respx), map,
apply, on SQLite and Postgres. Seed rows: the real FERC civil penalties in
../shared/corpus/notion/seed_enforcement_actions/ (114 rows), as tracker pages."""

from __future__ import annotations

import csv
from decimal import Decimal

import pytest

from kb_shared.errors import NotionSchemaError, NotionSyncError, SyncRefusedError
from kb_shared.market.notion import NotionTracker, sync_notion
from kb_shared.stores.catalog import Catalog
from tests.conftest import corpus_dir
from tests.market.notion_server import (
    API_URL,
    DATA_SOURCE_ID,
    TOKEN,
    FakeNotion,
    error,
    load_json,
    page_id,
    tracker_page,
)

SEED = "notion/seed_enforcement_actions/ferc_cleaned-ferc-civil-penalties.csv"
RECORDED_2025 = (
    "notion/notion_data_sources_query_response_3rows__api-2025-09-03__notion-sdk-py.json"
)


def tracker() -> NotionTracker:
    return NotionTracker(TOKEN, DATA_SOURCE_ID, api_url=API_URL, sleep=lambda s: None)


def seed_pages() -> list[dict]:
    """The 114 FERC penalties as tracker pages, plus two actions with no fine recorded."""
    with (corpus_dir() / SEED).open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    pages = [
        tracker_page(
            f"ferc-{i}",
            summary=f"FERC civil penalty: {row['Subject'].strip()}",
            organisation=row["Subject"].strip(),
            sector="Energy",
            date=f"{row['Year']}-01-01",
            regulatory_body="FERC",
            status="Closed",
            fine=float(row["Penalty"]),
            misconduct=("California crisis",) if row["Linked to Calif."] == "y" else (),
        )
        for i, row in enumerate(rows)
    ]
    pages += [
        tracker_page("open-1", summary="Investigation opened: Entergy", organisation="Entergy",
                     regulatory_body="FERC", status="Open"),
        tracker_page("open-2", summary="Show cause order", organisation="Westar Energy",
                     regulatory_body="FERC", status="Open", date="2018-05-01"),
    ]
    return pages


def small_tracker() -> list[dict]:
    return [
        tracker_page("agl", summary="Hardship breaches", organisation="AGL Energy Limited",
                     regulatory_body="AER", status="Paid", fine=1_500_000, date="2025-02-14",
                     misconduct=("Hardship",), source="https://www.aer.gov.au/news/agl"),
        tracker_page("origin", summary="Life support failures",
                     organisation="Origin Energy Retail Pty Ltd", regulatory_body="AER",
                     status="Paid", fine=2_000_000.5, date="2024-10-01"),
        tracker_page("red", summary="Misleading conduct", organisation="Red Energy Pty Ltd",
                     regulatory_body="ACCC", status="Open", fine=None, date="2025-06-30"),
        tracker_page("alinta", summary="Disconnection breaches", organisation="Alinta Energy",
                     regulatory_body="AER", status="Paid", fine=400_000, date="2023-08-09"),
    ]


def test_seed_sync_gives_the_exact_count_and_fine_total(
    catalog: Catalog, fake: FakeNotion
) -> None:
    fake.pages = seed_pages()
    result = sync_notion(catalog, tracker(), page_size=40)
    assert (result.read, result.inserted, result.requests, result.trashed) == (116, 116, 3, 0)
    assert result.data_source_id == DATA_SOURCE_ID
    found = catalog.search_compliance(limit=200)
    # Sum of the Penalty column of the seed CSV, computed apart from kb: $1,613,984,835.16.
    assert (found.count, found.fine_total) == (116, Decimal("1613984835.16"))
    assert (found.with_fine, found.without_fine) == (114, 2)
    assert found.synced_at == result.synced_at
    entergy = catalog.search_compliance("entergy")
    assert (entergy.count, entergy.fine_total, entergy.without_fine) == (
        4, Decimal("4375000.00"), 1,
    )
    california = catalog.search_compliance(misconduct_type="california CRISIS")
    assert (california.count, california.fine_total) == (11, Decimal("558394198.00"))
    years = catalog.search_compliance(date_from="2013-01-01", date_to="2014-12-31", limit=5)
    assert (years.count, years.fine_total, len(years.rows)) == (26, Decimal("489259062.83"), 5)
    assert years.truncated


def test_resync_changes_nothing_then_sees_an_edit(catalog: Catalog, fake: FakeNotion) -> None:
    fake.pages = small_tracker()
    sync_notion(catalog, tracker())
    again = sync_notion(catalog, tracker())
    assert (again.inserted, again.updated, again.deleted, again.unchanged) == (0, 0, 0, 4)
    fake.pages[2]["properties"]["Fine"]["number"] = 250_000
    edited = sync_notion(catalog, tracker())
    assert (edited.updated, edited.unchanged) == (1, 3)
    assert catalog.search_compliance(organisation="red energy").fine_total == Decimal("250000.00")


@pytest.mark.parametrize("notion_returns_it", [False, True])
def test_a_page_moved_to_the_trash_disappears_after_the_next_sync(
    catalog: Catalog, fake: FakeNotion, notion_returns_it: bool
) -> None:
    fake.pages = small_tracker()
    fake.serve_trashed = notion_returns_it  # flagged in_trash, or left out as Notion does
    sync_notion(catalog, tracker())
    assert catalog.search_compliance("origin").count == 1
    fake.trash("origin")
    result = sync_notion(catalog, tracker())
    assert (result.read, result.deleted, result.trashed) == (3, 1, int(notion_returns_it))
    assert catalog.search_compliance("origin").count == 0
    assert page_id("origin") not in [a.page_id for a in catalog.list_compliance_actions()]
    assert catalog.search_compliance().fine_total == Decimal("1900000.00")


def test_a_renamed_property_fails_naming_it_and_keeps_the_table(
    catalog: Catalog, fake: FakeNotion
) -> None:
    fake.pages = small_tracker()
    sync_notion(catalog, tracker())
    before = catalog.list_compliance_actions()
    for page in fake.pages:
        page["properties"]["Penalty"] = page["properties"].pop("Fine")
    with pytest.raises(NotionSchemaError) as info:
        sync_notion(catalog, tracker())
    message = str(info.value)
    assert f"(data source {DATA_SOURCE_ID}) no longer matches kb's schema: " in message
    assert "property 'Fine' (number) is missing. Its properties" in message
    assert "Penalty (number)" in message and message.endswith("Nothing was written.")
    assert catalog.list_compliance_actions() == before


def test_a_retyped_property_fails_naming_its_type(catalog: Catalog, fake: FakeNotion) -> None:
    fake.pages = small_tracker()
    organisation = fake.pages[0]["properties"]["Organisation"]
    organisation.pop("select")
    organisation.update(type="rich_text", rich_text=[])
    wanted = "property 'Organisation' is rich_text, expected select"
    with pytest.raises(NotionSchemaError, match=wanted):
        sync_notion(catalog, tracker())
    assert catalog.list_compliance_actions() == []


def test_the_recorded_response_is_refused_for_its_schema(
    catalog: Catalog, fake: FakeNotion
) -> None:
    fake.recorded[(DATA_SOURCE_ID, None)] = load_json(corpus_dir() / RECORDED_2025)
    with pytest.raises(NotionSchemaError) as info:
        sync_notion(catalog, tracker())
    message = str(info.value)
    missing = [("Summary", "title"), ("Fine", "number"), ("Misconduct Type", "multi_select")]
    for name, kind in missing:
        assert f"property {name!r} ({kind}) is missing" in message
    assert "Its properties (read on page https://app.notion.com/p/row-2-" in message
    assert ": Name (title). Rename them back in Notion" in message
    assert catalog.compliance_sync_state() is None


def test_an_empty_read_leaves_the_table_and_fails_with_the_counts(
    catalog: Catalog, fake: FakeNotion
) -> None:
    fake.pages = small_tracker()
    first = sync_notion(catalog, tracker())
    fake.pages = []
    with pytest.raises(SyncRefusedError) as info:
        sync_notion(catalog, tracker())
    assert (info.value.read, info.value.stored, info.value.would_delete) == (0, 4, 4)
    assert "returned 0 pages but compliance_actions holds 4 rows" in str(info.value)
    found = catalog.search_compliance()
    assert (found.count, found.fine_total, found.synced_at) == (
        4, Decimal("3900000.50"), first.synced_at,
    )


def test_deleting_more_than_half_is_refused_then_forced(
    catalog: Catalog, fake: FakeNotion
) -> None:
    fake.pages = small_tracker()
    sync_notion(catalog, tracker())
    fake.pages = fake.pages[:1]
    with pytest.raises(SyncRefusedError, match="refusing to delete 3 of 4 stored rows") as info:
        sync_notion(catalog, tracker())
    assert info.value.read == 1
    assert catalog.search_compliance().count == 4
    forced = sync_notion(catalog, tracker(), force=True)
    assert (forced.read, forced.deleted, forced.unchanged) == (1, 3, 1)
    assert catalog.search_compliance().count == 1


def test_a_failure_mid_read_leaves_the_previous_snapshot(
    catalog: Catalog, fake: FakeNotion
) -> None:
    fake.pages = small_tracker()
    sync_notion(catalog, tracker())
    before = catalog.list_compliance_actions()
    fake.pages.append(tracker_page("new", summary="New action", fine=1))
    fake.fail_after = len(fake.requests) + 1  # the second query page fails for good
    fake.fail_with = error(500, "internal_server_error", "Unexpected error.")
    with pytest.raises(NotionSyncError, match="Notion kept failing to query the tracker"):
        sync_notion(catalog, tracker(), page_size=3)
    assert catalog.list_compliance_actions() == before


def test_no_fine_is_not_zero_and_a_negative_fine_is_refused(
    catalog: Catalog, fake: FakeNotion
) -> None:
    fake.pages = small_tracker()
    sync_notion(catalog, tracker())
    red = catalog.search_compliance("red energy")
    assert (red.rows[0].fine, red.fine_total, red.with_fine, red.without_fine) == (
        None, Decimal("0.00"), 0, 1,
    )
    assert catalog.search_compliance("red energy", min_fine=0).count == 0
    fake.pages[0]["properties"]["Fine"]["number"] = -5
    with pytest.raises(NotionSchemaError) as info:
        sync_notion(catalog, tracker())
    url = f"https://app.notion.com/p/{page_id('agl').replace('-', '')}"
    assert str(info.value) == (
        f"Notion page {url}: 'Fine' cannot be negative, got -5; fix it in Notion. "
        "Nothing was written."
    )


def test_rows_keep_their_notion_and_source_links(catalog: Catalog, fake: FakeNotion) -> None:
    fake.pages = small_tracker()
    sync_notion(catalog, tracker())
    row = catalog.search_compliance(organisation="AGL Energy Pty Ltd").rows[0]
    assert row.notion_url == f"https://app.notion.com/p/{page_id('agl').replace('-', '')}"
    assert row.source_url == "https://www.aer.gov.au/news/agl"
    assert (row.summary, row.regulatory_body, row.misconduct_types) == (
        "Hardship breaches", "AER", ("Hardship",),
    )
