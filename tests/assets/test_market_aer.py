"""``kb sync aer`` end to end: the CLI materialises ``aer_performance`` as a run on the
KB_HOME instance (SQLite store in a temp KB_HOME; one test on the real Postgres), over
workbooks the test writes in the AER layout (``tests/market/aer_fixtures.py``).

Expected numbers come from the cells the fixture writer wrote and the fixture's series, never
from the reader or the store."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import dagster as dg
import openpyxl
import pytest
from typer.testing import CliRunner

from kb_assets.cli import main as cli
from kb_assets.constants import AER_PERFORMANCE, CHECK_AER_TOTALS
from kb_assets.instance import dagster_instance
from kb_assets.market import assets
from kb_assets.market.assets import aer_sources, workbook_paths
from kb_assets.market.operations import plain
from kb_assets.resources import StoresResource
from kb_shared.market.aer_source import download_release
from kb_shared.settings import Settings
from tests.assets.test_url_intake import LocalSite, local_site
from tests.market.aer_fixtures import (
    FILE_NAMES,
    Q3_2025_26,
    Q4_2025_26,
    RETAILERS,
    quarters_of,
    series_value,
    write_release,
    write_schedule,
)
from tests.market.test_aer_source import METADATA_LINK, release_routes, site_policy
from tests.stores.test_catalog_contract import fresh_postgres_database

DISCONNECTIONS = "customers_disconnected_for_non_payment"


def run_kb(*args: str, env: dict[str, str] | None = None) -> Any:
    """``kb ARGS`` in-process; the result's output holds stdout and stderr."""
    return CliRunner().invoke(cli.app, list(args), env=env)


def flat(text: str) -> str:
    """``text`` with every run of whitespace made one space (rich wraps long lines)."""
    return " ".join(text.split())


def table_values(output: str) -> dict[str, str]:
    """The ``label -> value`` rows of the table ``kb sync`` printed."""
    rows: dict[str, str] = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) == 4 and cells[1]:
            rows[cells[1]] = cells[2]
    return rows


def latest(asset: str) -> dict[str, Any]:
    """Metadata of ``asset``'s latest materialisation on the KB_HOME instance."""
    instance = dagster_instance(Settings())
    event = instance.get_latest_materialization_event(dg.AssetKey(asset))
    assert event is not None and event.asset_materialization is not None
    return plain(event.asset_materialization.metadata)


def check_results(check: str, asset: str) -> list[str]:
    """The status of each execution of ``check`` on ``asset`` in the KB_HOME instance
    (``SUCCEEDED`` = ran and passed, ``FAILED`` = ran and failed, ``SKIPPED``), oldest first."""
    instance = dagster_instance(Settings())
    records = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey(asset), check), limit=100
    )
    return [r.status.value for r in reversed(records)]


@pytest.fixture(scope="module")
def q3_cells(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    """The Q3 2025-26 release written once: its folder and the value cells written."""
    folder = tmp_path_factory.mktemp("aer") / "q3"
    written = write_release(folder, Q3_2025_26)
    return folder, [c for cells in written.values() for c in cells if c.value is not None]


def nsw_disconnections(release) -> tuple[int, int]:
    """Count and total of NSW retailers' disconnections over the release's five quarters."""
    values = [series_value("disconnections", "NSW", r, q, release)
              for r in RETAILERS["NSW"] for q in quarters_of(release)]
    return len(values), sum(values)


# --- sync -------------------------------------------------------------------------------------


def test_sync_stores_every_figure_then_a_rerun_changes_nothing(q3_cells) -> None:
    folder, cells = q3_cells
    first = run_kb("sync", "aer", str(folder))
    assert first.exit_code == 0, first.output
    table = table_values(first.output)
    assert (table["workbooks"], table["releases"]) == ("3", "Q3 2025-26")
    assert (table["rows read"], table["inserted"], table["updated"], table["deleted"]) == (
        str(len(cells)), str(len(cells)), "0", "0")
    assert table["not reported (not stored)"] == "10"
    assert "check aer_totals_match_their_parts: passed" in first.output

    catalog = StoresResource().catalog()
    assert len(catalog.list_aer_observations()) == len(cells) == 640
    found = catalog.search_aer(metric=DISCONNECTIONS, jurisdiction="NSW")
    # 5 quarters x 3 retailers; (1840 + 1502 + 2113) x 5 less 2% a quarter back: 27,275 - 1,091
    assert (found.count, found.total) == nsw_disconnections(Q3_2025_26) == (15, 26_184)
    meta = latest(AER_PERFORMANCE)
    assert (meta["rows_read"], meta["rows_inserted"], meta["new_metrics"]) == (640, 640, 6)
    assert meta["releases"] == "Q3 2025-26"
    assert abs((meta["synced_at"] - found.synced_at).total_seconds()) < 0.001

    again = run_kb("sync", "aer", str(folder))
    assert again.exit_code == 0, again.output
    table = table_values(again.output)
    assert (table["inserted"], table["updated"], table["deleted"], table["unchanged"]) == (
        "0", "0", "0", "640")
    meta = latest(AER_PERFORMANCE)
    assert (meta["rows_inserted"], meta["rows_updated"], meta["rows_deleted"]) == (0, 0, 0)
    assert meta["new_metrics"] == 0 and meta["new_metric_list"] == []
    assert len(catalog.list_aer_observations()) == 640
    assert check_results(CHECK_AER_TOTALS, AER_PERFORMANCE) == ["SUCCEEDED", "SUCCEEDED"]


def test_a_newer_release_revises_and_reports_its_new_metric(q3_cells, tmp_path: Path) -> None:
    folder, _ = q3_cells
    assert run_kb("sync", "aer", str(folder)).exit_code == 0
    q4 = tmp_path / "q4"
    write_release(q4, Q4_2025_26)
    result = run_kb("sync", "aer", str(q4))
    assert result.exit_code == 0, result.output
    # AGL NSW Q3 2025-26 revised 1,840 -> 1,852: its count and rate, the NSW and National
    # rows of both (tests/market/test_aer_store.py counts them)
    assert table_values(result.output)["of which values changed"] == "8"
    assert ("new metric residential_customers_reconnected_after_disconnection (schedule 3): "
            "'Residential customers reconnected after disconnection' (no alias") in flat(
                result.output)
    found = StoresResource().catalog().search_aer(
        metric=DISCONNECTIONS, jurisdiction="NSW", period_from="Q3 2025-26",
        period_to="Q3 2025-26")
    assert (found.count, found.total) == (3, 1852 + 1502 + 2113)


def test_the_setting_is_the_default_source_and_unset_it_skips(
    q3_cells, monkeypatch: pytest.MonkeyPatch
) -> None:
    skipped = run_kb("sync", "aer")
    assert skipped.exit_code == 2
    assert "skipped aer_performance: no AER source: set KB_AER_SOURCE" in flat(skipped.output)
    instance = dagster_instance(Settings())
    assert instance.get_latest_materialization_event(dg.AssetKey(AER_PERFORMANCE)) is None
    [observation] = instance.fetch_observations(dg.AssetKey(AER_PERFORMANCE), limit=5).records
    reason = observation.asset_observation.metadata["skipped"].value
    assert reason.startswith("no AER source: set KB_AER_SOURCE")

    folder, cells = q3_cells
    monkeypatch.setenv("KB_AER_SOURCE", str(folder))
    synced = run_kb("sync", "aer")
    assert synced.exit_code == 0, synced.output
    assert table_values(synced.output)["inserted"] == str(len(cells))


def test_a_refused_workbook_names_its_cell_and_nothing_of_the_run_is_written(
    q3_cells, tmp_path: Path
) -> None:
    folder, _ = q3_cells
    assert run_kb("sync", "aer", str(folder)).exit_code == 0
    catalog = StoresResource().catalog()
    before = catalog.list_aer_observations()

    def numeric_heading(book: openpyxl.Workbook) -> None:
        book["Hardship numbers"]["B4"] = 2024

    q4 = tmp_path / "q4"
    write_release(q4, Q4_2025_26)
    write_schedule(q4, Q4_2025_26, "4", edit=numeric_heading)  # replaces Schedule 4
    result = run_kb("sync", "aer", str(q4))
    assert result.exit_code == 1
    text = flat(result.output)
    assert ("failed aer_performance: 1 of 3 workbook(s) do not fit the AER layout; nothing was "
            "written (a run applies all of its workbooks or none)") in text
    assert (f"- {FILE_NAMES[Q4_2025_26]['4']}, sheet 'Hardship numbers', cell B4: the heading "
            "is a number (2024), not text") in text
    # Schedules 2 and 3 of the same release were readable, and were not applied either.
    assert catalog.list_aer_observations() == before
    assert latest(AER_PERFORMANCE)["releases"] == "Q3 2025-26"


# --- release page URLs ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def release_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSite]:
    """The Q3 2025-26 release served over HTTPS (``tests/market/test_aer_source.py``)."""
    routes = release_routes(tmp_path_factory.mktemp("aer-release"))
    with local_site(tmp_path_factory.mktemp("aer-release-tls"), routes) as running:
        yield running


@pytest.fixture
def reach_release(release_site: LocalSite, monkeypatch: pytest.MonkeyPatch) -> LocalSite:
    """The sync downloads release pages from ``release_site`` for this test."""
    monkeypatch.setattr(assets, "downloader_for", lambda settings: partial(
        download_release, settings=settings, policy=site_policy(release_site),
        resolver=release_site.resolve))
    return release_site


def test_a_release_page_url_syncs_the_workbooks_it_links(q3_cells, reach_release) -> None:
    _, cells = q3_cells
    url = reach_release.url("/release.html")
    result = run_kb("sync", "aer", url)
    assert result.exit_code == 0, result.output
    table = table_values(result.output)
    assert (table["workbooks"], table["releases"]) == ("3", "Q3 2025-26")
    assert (table["rows read"], table["inserted"], table["updated"]) == ("640", "640", "0")
    assert "check aer_totals_match_their_parts: passed" in result.output
    catalog = StoresResource().catalog()
    assert len(catalog.list_aer_observations()) == len(cells) == 640
    found = catalog.search_aer(metric=DISCONNECTIONS, jurisdiction="NSW")
    assert (found.count, found.total) == nsw_disconnections(Q3_2025_26) == (15, 26_184)
    assert latest(AER_PERFORMANCE)["sources"] == url


def test_a_workbook_link_to_the_metadata_address_is_refused_and_nothing_stored(
    reach_release,
) -> None:
    result = run_kb("sync", "aer", reach_release.url("/hostile.html"))
    assert result.exit_code == 1
    text = flat(result.output)
    assert flat(
        f"download of {METADATA_LINK} refused: 169.254.169.254 is a link-local address "
        "(where cloud metadata services live)") in text
    assert "nothing was written" in text
    assert StoresResource().catalog().list_aer_observations() == []


def test_a_release_page_without_workbook_links_says_so(reach_release) -> None:
    url = reach_release.url("/empty.html")
    result = run_kb("sync", "aer", env={"KB_AER_SOURCE": url})
    assert result.exit_code == 1
    assert flat(
        f"{url} links no .xlsx or .xlsm workbook, so there is nothing to sync; give the "
        "release page that lists the workbooks, or their file or folder") in flat(result.output)
    assert StoresResource().catalog().list_aer_observations() == []


def test_a_plain_http_url_is_refused_by_the_production_fetcher() -> None:
    result = run_kb("sync", "aer", "http://www.aer.gov.au/industry/registers/resources/x")
    assert result.exit_code == 1
    assert flat(
        "download of http://www.aer.gov.au/industry/registers/resources/x refused: "
        "http://www.aer.gov.au/industry/registers/resources/x is plain http; only https is "
        "fetched") in flat(result.output)
    assert "nothing was written" in flat(result.output)
    assert StoresResource().catalog().list_aer_observations() == []


def test_the_totals_check_fails_on_a_doctored_total(tmp_path: Path) -> None:
    def doctored(book: openpyxl.Workbook) -> None:
        book["Hardship numbers"]["F14"] = 93_870  # NSW Total, Q3 2025-26: its retailers 93,770

    folder = tmp_path / "doctored"
    write_release(folder, Q3_2025_26)
    write_schedule(folder, Q3_2025_26, "4", edit=doctored)
    result = run_kb("sync", "aer", str(folder))
    assert result.exit_code == 1
    text = flat(result.output)
    assert "check aer_totals_match_their_parts: failed (ERROR) — checked 160, failures 2" in text
    assert flat(
        f"{FILE_NAMES[Q3_2025_26]['4']} · Hardship numbers!F14: NSW total of hardship_customers "
        "(electricity, residential, Q3 2025-26) is 93870 but its retailers sum to 93770 "
        "(3 values; tolerance 2)") in text
    assert "Hardship numbers!F10: National total of hardship_customers" in text
    assert check_results(CHECK_AER_TOTALS, AER_PERFORMANCE) == ["FAILED"]
    # the figures are stored as published: the check reports, the sync applied them
    assert table_values(result.output)["inserted"] == "640"


# --- sources ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("configured", "setting", "expected"),
    [
        ([], None, []),
        ([], "  ", []),
        ([" "], "/data/aer", ["/data/aer"]),
        (["/a", "/b"], "/data/aer", ["/a", "/b"]),
        ([], " /data/aer ", ["/data/aer"]),
    ],
)
def test_sources_come_from_the_run_config_else_the_setting(
    configured: list[str], setting: str | None, expected: list[str]
) -> None:
    assert aer_sources(configured, setting) == expected


def test_workbook_paths_are_listed_once_and_urls_refused(q3_cells) -> None:
    folder, _ = q3_cells
    s2 = folder / FILE_NAMES[Q3_2025_26]["2"]
    paths = workbook_paths([str(s2), str(folder)])
    assert [p.name for p in paths] == [FILE_NAMES[Q3_2025_26][s] for s in ("2", "3", "4")]
    with pytest.raises(ValueError, match=re.escape("ftp://host/x.xlsx is a URL")):
        workbook_paths(["ftp://host/x.xlsx"])
    with pytest.raises(FileNotFoundError, match="does not exist"):
        workbook_paths([str(folder / "missing")])


# --- Postgres ---------------------------------------------------------------------------------


@pytest.mark.services
def test_sync_on_postgres(q3_cells, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, cells = q3_cells
    with fresh_postgres_database("kb_sync_aer") as url:
        monkeypatch.setenv("KB_DATABASE_URL", url)
        first = run_kb("sync", "aer", str(folder))
        assert first.exit_code == 0, first.output
        stores = StoresResource()
        try:
            found = stores.catalog().search_aer(metric=DISCONNECTIONS, jurisdiction="NSW")
            assert (found.count, found.total) == nsw_disconnections(Q3_2025_26)
            assert len(stores.catalog().list_aer_observations()) == len(cells)
            again = run_kb("sync", "aer", str(folder))
            assert again.exit_code == 0, again.output
            assert (latest(AER_PERFORMANCE)["rows_inserted"],
                    latest(AER_PERFORMANCE)["rows_unchanged"]) == (0, len(cells))
            assert "check aer_totals_match_their_parts: passed" in again.output
        finally:
            stores.close()
