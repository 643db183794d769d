"""Arguments a model sends to ``search_aer`` written other ways than the workbooks: a retailer
without "Pty Ltd" or with other punctuation, a retailer label with a footnote mark in one
quarter's workbook, a financial year ("2025-26"), a quarter with a calendar year ("Q3 2023").
Each finds the figures the published name or quarter finds, or is refused saying what to send;
never a silently partial or empty answer. On SQLite and on Postgres (``catalog`` fixture).

Workbooks: ``aer_fixtures``' Q3 2025-26 release (Q3 2024-25 .. Q3 2025-26); expected counts are
the cells the writer wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openpyxl
import pytest

from kb_shared.errors import QueryError
from kb_shared.market.aer_layout import find_workbooks, read_workbook
from kb_shared.stores.catalog import Catalog
from kb_shared.stores.catalog.aer_search import retailer_key
from tests.market.aer_fixtures import (
    AGL,
    HARDSHIP,
    ORIGIN,
    Q3_2025_26,
    write_release,
    write_schedule,
)


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("aer_arguments")
    written = write_release(root, Q3_2025_26)
    return {"books": [read_workbook(p) for p in find_workbooks(root)],
            "cells": [c for cells in written.values() for c in cells if c.value is not None]}


def _count(cells: list, **wanted: Any) -> int:
    return sum(1 for c in cells if not c.is_total
               and all(getattr(c, name) == value for name, value in wanted.items()))


@pytest.mark.parametrize(
    "name",
    [AGL, "AGL Sales Pty. Ltd.", "agl sales", "AGL Sales Pty Limited", " AGL SALES PTY LTD "],
)
def test_a_retailer_named_another_way_finds_its_figures(catalog: Catalog, release: dict,
                                                        name: str) -> None:
    catalog.sync_aer(release["books"])
    found = catalog.search_aer(retailer=name, limit=500)
    assert found.count == _count(release["cells"], retailer=AGL) == 150
    assert {o.retailer for o in found.rows} == {AGL}


def test_a_retailer_matches_its_own_name_only(catalog: Catalog, release: dict) -> None:
    catalog.sync_aer(release["books"])
    assert catalog.search_aer(retailer="Origin Energy Electricity Ltd").count == _count(
        release["cells"], retailer=ORIGIN) == 148
    assert catalog.search_aer(retailer="Origin Energy").count == 0
    assert catalog.search_aer(retailer="AGL").count == 0
    assert catalog.search_aer(retailer="Pty Ltd").count == 0


def test_a_footnote_mark_on_a_label_does_not_hide_its_rows(catalog: Catalog, release: dict,
                                                           tmp_path: Path) -> None:
    def mark(book: openpyxl.Workbook) -> None:
        book["Hardship numbers"]["A11"] = f"{AGL} (b)"  # AGL's NSW row

    path, cells = write_schedule(tmp_path, Q3_2025_26, "4", edit=mark)
    catalog.sync_aer([read_workbook(path)])
    nsw = catalog.search_aer(retailer=AGL, jurisdiction="NSW", metric="hardship_customers")
    assert {o.retailer for o in nsw.rows} == {f"{AGL} (b)"}
    assert nsw.count == 5 and nsw.total == sum(
        c.value for c in cells if (c.heading, c.retailer, c.jurisdiction)
        == (HARDSHIP, AGL, "NSW")) == 29_956 + 30_268 + 30_580 + 30_892 + 31_204
    assert catalog.search_aer(retailer=AGL).count == _count(
        [c for c in cells if c.value is not None], retailer=AGL) == 30


def test_retailer_key() -> None:
    assert retailer_key("EnergyAustralia Pty Ltd (b)") == "energy australia"
    assert retailer_key("Energy Australia") == "energy australia"
    assert retailer_key("Origin Energy Electricity Limited*") == "origin energy electricity"
    assert retailer_key("Alinta Energy (SA)") == "alinta energy sa"
    assert retailer_key("--") is None


@pytest.mark.parametrize("year", ["2025-26", "FY2025-26", "2025\u201326", "2025/26", "2025-2026"])
def test_a_financial_year_covers_its_four_quarters(catalog: Catalog, release: dict,
                                                   year: str) -> None:
    catalog.sync_aer(release["books"])
    found = catalog.search_aer(period_from=year, period_to=year, limit=500)
    quarters = ("Q1 2025-26", "Q2 2025-26", "Q3 2025-26")  # Q4 is not published yet
    assert found.count == sum(_count(release["cells"], period=q) for q in quarters) == 298
    assert {o.period for o in found.rows} == set(quarters)
    assert found.filters["period_from"].isoformat() == "2025-07-01"
    assert found.filters["period_to"].isoformat() == "2026-06-30"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("Q3 2023", "period_from: 'Q3 2023' names a calendar year, but the AER numbers quarters "
         "within the financial year (1 July to 30 June): Q3 2022-23 is Jan-Mar 2023, and the "
         "calendar quarter Jul-Sep 2023 is Q1 2023-24; send one of those, or a date as "
         "YYYY-MM-DD"),
        ("q1 2026", "Q1 2025-26 is Jul-Sep 2025, and the calendar quarter Jan-Mar 2026 is "
         "Q3 2025-26"),
        ("2025-27", "period_from must be a quarter like 'Q3 2025-26' or a date as YYYY-MM-DD"),
    ],
)
def test_a_quarter_with_a_calendar_year_names_the_two_it_may_mean(catalog: Catalog, value: str,
                                                                  message: str) -> None:
    with pytest.raises(QueryError) as caught:
        catalog.search_aer(period_from=value)
    assert message in str(caught.value)
