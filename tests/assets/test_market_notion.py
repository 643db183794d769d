"""``kb sync notion`` end to end: the CLI materialises ``compliance_actions`` as a run on the
KB_HOME instance, reading the tracker over HTTP from ``FakeNotion`` (respx at the HTTP edge,
so notion-client's own client is what talks to it); SQLite in a temp KB_HOME, and one test on
the real Postgres. Seed rows: the real FERC civil penalties in
../shared/corpus/notion/seed_enforcement_actions/ (114 rows) plus two without a fine."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from decimal import Decimal

import dagster as dg
import pytest
import respx

from kb_assets.constants import CHECK_COMPLIANCE_COUNT, COMPLIANCE_ACTIONS
from kb_assets.instance import dagster_instance
from kb_assets.market.operations import SyncStatus, run_sync
from kb_assets.market.resources import NotionResource
from kb_assets.resources import StoresResource
from kb_shared.settings import Settings
from tests.assets.test_market_aer import check_results, flat, latest, run_kb, table_values
from tests.conftest import corpus_dir
from tests.market.notion_server import API_URL, DATA_SOURCE_ID, TOKEN, FakeNotion, page_id
from tests.market.test_notion_sync import SEED, seed_pages, small_tracker
from tests.stores.test_catalog_contract import fresh_postgres_database


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeNotion]:
    """The tracker behind KB_NOTION_API_URL, and the settings that point the sync at it."""
    monkeypatch.setenv("NOTION_TOKEN", TOKEN)
    monkeypatch.setenv("KB_NOTION_DATA_SOURCE_ID", DATA_SOURCE_ID)
    monkeypatch.setenv("KB_NOTION_API_URL", API_URL)
    server = FakeNotion()
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        router.route(host="notion.test").mock(side_effect=server.handle)
        yield server


def seed_fine_total() -> Decimal:
    """Sum of the seed CSV's Penalty column, read here apart from kb."""
    with (corpus_dir() / SEED).open(encoding="utf-8", newline="") as handle:
        return sum((Decimal(row["Penalty"]) for row in csv.DictReader(handle)), Decimal(0))


def test_sync_gives_the_exact_count_and_fine_total(fake: FakeNotion) -> None:
    fake.pages = seed_pages()
    result = run_kb("sync", "notion")
    assert result.exit_code == 0, result.output
    table = table_values(result.output)
    assert (table["data source"], table["rows read"], table["inserted"], table["deleted"]) == (
        DATA_SOURCE_ID, "116", "116", "0")
    assert "check compliance_count_matches_read: passed — rows_read 116, rows_stored 116" in (
        result.output)
    found = StoresResource().catalog().search_compliance(limit=200)
    assert (found.count, found.with_fine, found.without_fine) == (116, 114, 2)
    assert found.fine_total == seed_fine_total() == Decimal("1613984835.16")
    meta = latest(COMPLIANCE_ACTIONS)
    assert (meta["rows_read"], meta["rows_inserted"], meta["force"]) == (116, 116, False)
    assert check_results(CHECK_COMPLIANCE_COUNT, COMPLIANCE_ACTIONS) == ["SUCCEEDED"]


def test_a_page_moved_to_the_trash_disappears_after_the_next_sync(fake: FakeNotion) -> None:
    fake.pages = small_tracker()
    assert run_kb("sync", "notion").exit_code == 0
    catalog = StoresResource().catalog()
    assert catalog.search_compliance("origin").count == 1
    fake.trash("origin")
    result = run_kb("sync", "notion")
    assert result.exit_code == 0, result.output
    table = table_values(result.output)
    assert (table["rows read"], table["deleted"], table["unchanged"]) == ("3", "1", "3")
    assert page_id("origin") not in [a.page_id for a in catalog.list_compliance_actions()]
    found = catalog.search_compliance()
    # AGL 1,500,000 + Alinta 400,000; Red Energy has no fine recorded
    assert (found.count, found.fine_total, found.without_fine) == (3, Decimal("1900000.00"), 1)


def test_an_empty_read_fails_with_the_counts_and_force_applies_it(fake: FakeNotion) -> None:
    fake.pages = small_tracker()
    assert run_kb("sync", "notion").exit_code == 0
    catalog = StoresResource().catalog()
    before = catalog.search_compliance()
    fake.pages = []
    result = run_kb("sync", "notion")
    assert result.exit_code == 1
    text = flat(result.output)
    assert ("failed compliance_actions: refusing an empty read: the tracker returned 0 pages "
            "but compliance_actions holds 4 rows") in text
    assert "(`kb sync notion --force`, or force: true in the run config)" in text
    after = catalog.search_compliance()
    assert (after.count, after.fine_total, after.synced_at) == (
        4, Decimal("3900000.50"), before.synced_at)
    # the same run through the operations layer: the counts are on the failure's metadata
    outcome = run_sync(dagster_instance(Settings()), COMPLIANCE_ACTIONS)
    assert outcome.status == SyncStatus.FAILED
    assert {k: outcome.metadata[k] for k in ("rows_read", "rows_stored", "would_delete")} == {
        "rows_read": 0, "rows_stored": 4, "would_delete": 4}

    forced = run_kb("sync", "notion", "--force")
    assert forced.exit_code == 0, forced.output
    assert table_values(forced.output)["deleted"] == "4"
    assert catalog.search_compliance().count == 0
    assert latest(COMPLIANCE_ACTIONS)["force"] is True


def test_a_renamed_property_fails_with_its_name(fake: FakeNotion) -> None:
    fake.pages = small_tracker()
    assert run_kb("sync", "notion").exit_code == 0
    catalog = StoresResource().catalog()
    before = catalog.list_compliance_actions()
    for page in fake.pages:
        page["properties"]["Penalty"] = page["properties"].pop("Fine")
    result = run_kb("sync", "notion")
    assert result.exit_code == 1
    text = flat(result.output)
    assert "failed compliance_actions:" in text
    assert "property 'Fine' (number) is missing. Its properties" in text
    assert "Penalty (number)" in text
    assert catalog.list_compliance_actions() == before


def test_unconfigured_it_skips_naming_both_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTION_TOKEN", raising=False)
    result = run_kb("sync", "notion")
    assert result.exit_code == 2
    assert ("skipped compliance_actions: the Notion sync needs NOTION_TOKEN and "
            "KB_NOTION_DATA_SOURCE_ID: set them") in flat(result.output)
    instance = dagster_instance(Settings())
    assert instance.get_latest_materialization_event(dg.AssetKey(COMPLIANCE_ACTIONS)) is None
    # planned with the run, never evaluated: its step was skipped with the asset
    assert check_results(CHECK_COMPLIANCE_COUNT, COMPLIANCE_ACTIONS) == ["PLANNED"]


def test_the_token_can_be_the_resources_own_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOTION_TOKEN", raising=False)
    monkeypatch.setenv("KB_NOTION_DATA_SOURCE_ID", DATA_SOURCE_ID)
    assert NotionResource().missing_settings() == ["NOTION_TOKEN"]
    assert NotionResource(notion_token=TOKEN).missing_settings() == []


@pytest.mark.services
def test_sync_on_postgres(fake: FakeNotion, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.pages = seed_pages()
    with fresh_postgres_database("kb_sync_notion") as url:
        monkeypatch.setenv("KB_DATABASE_URL", url)
        first = run_kb("sync", "notion")
        assert first.exit_code == 0, first.output
        stores = StoresResource()
        try:
            found = stores.catalog().search_compliance(limit=200)
            assert (found.count, found.fine_total) == (116, seed_fine_total())
            fake.trash("ferc-0")
            again = run_kb("sync", "notion")
            assert again.exit_code == 0, again.output
            assert table_values(again.output)["deleted"] == "1"
            assert stores.catalog().search_compliance().count == 115
            assert "check compliance_count_matches_read: passed" in again.output
        finally:
            stores.close()
