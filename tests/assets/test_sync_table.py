"""``kb sync``'s counts table: one list of rows serves both syncs, and each sync's table has
the rows its run's metadata holds, in that list's order (the AER's and Notion's own rows
never show in the other's table)."""

from __future__ import annotations

import datetime as dt

import pytest
from rich.console import Console

from kb_assets.cli import sync
from kb_assets.market.operations import SyncOutcome, SyncStatus

SYNCED_AT = dt.datetime(2026, 12, 1, 6, 0, tzinfo=dt.UTC)

#: The metadata of a successful AER sync (``market.assets.aer_performance``).
AER_METADATA = {
    "sources": "/data/aer", "files": 3, "releases": "Q3 2025-26", "rows_read": 120,
    "rows_inserted": 100, "rows_updated": 12, "rows_deleted": 1, "rows_unchanged": 7,
    "values_changed": 8, "superseded": 2, "not_reported": 4, "new_metrics": 1,
    "new_metric_list": [], "new_headings": 0, "seconds": 1.25, "synced_at": SYNCED_AT,
}

#: The metadata of a successful Notion sync (``market.assets.compliance_actions``).
NOTION_METADATA = {
    "data_source_id": "ds-1", "rows_read": 40, "rows_inserted": 38, "rows_updated": 1,
    "rows_deleted": 0, "rows_unchanged": 1, "trashed": 2, "requests": 3, "force": False,
    "seconds": 0.5, "synced_at": SYNCED_AT,
}


def printed_rows(monkeypatch: pytest.MonkeyPatch, metadata: dict[str, object]) -> list[list[str]]:
    """The (label, value) rows of the table ``kb sync`` prints for a run with ``metadata``."""
    console = Console(width=200, record=True)
    monkeypatch.setattr(sync, "console", console)
    outcome = SyncOutcome(
        asset="a", status=SyncStatus.SYNCED, run_id="0123456789ab", metadata=metadata
    )
    sync._report("kb sync", outcome)
    rows = []
    for line in console.export_text().splitlines():
        cells = [cell.strip() for cell in line.split("│")]
        if len(cells) == 4 and cells[1]:
            rows.append(cells[1:3])
    return rows


def test_the_aer_table_has_the_aer_rows_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    assert printed_rows(monkeypatch, AER_METADATA) == [
        ["workbooks", "3"],
        ["releases", "Q3 2025-26"],
        ["rows read", "120"],
        ["inserted", "100"],
        ["updated", "12"],
        ["of which values changed", "8"],
        ["deleted", "1"],
        ["unchanged", "7"],
        ["superseded by a newer release", "2"],
        ["not reported (not stored)", "4"],
        ["new metrics", "1"],
        ["seconds", "1.25"],
        ["synced at", "2026-12-01T06:00:00+00:00"],
    ]


def test_the_notion_table_has_the_notion_rows_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    assert printed_rows(monkeypatch, NOTION_METADATA) == [
        ["data source", "ds-1"],
        ["rows read", "40"],
        ["inserted", "38"],
        ["updated", "1"],
        ["deleted", "0"],
        ["unchanged", "1"],
        ["pages in the trash", "2"],
        ["requests", "3"],
        ["seconds", "0.5"],
        ["synced at", "2026-12-01T06:00:00+00:00"],
    ]
