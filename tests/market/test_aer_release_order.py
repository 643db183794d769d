"""A metric a newer release no longer publishes (its heading reworded with no alias, so a new
metric key) keeps the figures the older release gave it for the quarters both publish, however
the releases reach the store: one after the other, newest first, or together in one sync
(``kb sync aer FOLDER`` with both releases). On SQLite and on Postgres (``catalog`` fixture).

Workbooks: ``aer_fixtures``' Schedule 4 of the Q3 and the Q4 2025-26 releases; the Q4 one
rewords the rate heading (G4) to one no alias maps. Expected figures are the cells the
writer wrote.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import openpyxl
import pytest

from kb_shared.market.aer_layout import read_workbook
from kb_shared.stores.catalog import Catalog
from tests.market.aer_fixtures import (
    AGL,
    HARDSHIP_RATE,
    Q3_2025_26,
    Q4_2025_26,
    quarters_of,
    write_schedule,
)

REWORDED = "Share of residential customers in hardship programs"


def _reword(book: openpyxl.Workbook) -> None:
    book["Hardship numbers"]["G4"] = REWORDED


@pytest.fixture(scope="module")
def books(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("aer_order")
    q3, q3_cells = write_schedule(root / "q3", Q3_2025_26, "4")
    q4, q4_cells = write_schedule(root / "q4", Q4_2025_26, "4", edit=_reword)
    return {"q3": read_workbook(q3), "q4": read_workbook(q4), "q3_cells": q3_cells,
            "q4_cells": q4_cells}


def _old_rate(books: dict[str, Any]) -> dict[str, Decimal]:
    """AGL's NSW hardship rate per quarter, as the Q3 release wrote it."""
    return {c.period: Decimal(repr(c.value)).quantize(Decimal("1e-10"))
            for c in books["q3_cells"] if (c.heading, c.jurisdiction, c.retailer)
            == (HARDSHIP_RATE, "NSW", AGL) and c.value is not None}


def _stored_rate(catalog: Catalog) -> dict[str, Decimal]:
    found = catalog.search_aer(metric=HARDSHIP_RATE, jurisdiction="NSW", retailer=AGL)
    assert found.count == len(found.rows)
    return {o.period: o.value for o in found.rows}


def _everything(catalog: Catalog) -> set[tuple]:
    return {tuple(getattr(o, f) for f in o.__slots__) for o in catalog.list_aer_observations()}


def _valued(cells: list, keep=lambda cell: True) -> int:
    return sum(1 for c in cells if c.value is not None and keep(c))


@pytest.mark.parametrize("order", ["newest first", "together"])
def test_a_dropped_metric_keeps_its_figures_in_any_order(catalog: Catalog, books: dict,
                                                          order: str) -> None:
    republished = {q.label for q in quarters_of(Q4_2025_26)} & {
        q.label for q in quarters_of(Q3_2025_26)}
    old_counts = _valued(books["q3_cells"], lambda c: c.period in republished
                         and c.heading != HARDSHIP_RATE)
    old_rates = _valued(books["q3_cells"], lambda c: c.period in republished
                        and c.heading == HARDSHIP_RATE)
    if order == "newest first":
        catalog.sync_aer([books["q4"]])
        counts = catalog.sync_aer([books["q3"]])
        # Q3 2024-25 (only Q3 has it) and the rates of the quarters both publish are new
        assert counts.inserted == _valued(books["q3_cells"], lambda c: c.period not in
                                          republished) + old_rates
        assert (counts.updated, counts.deleted) == (0, 0)
    else:
        counts = catalog.sync_aer([books["q3"], books["q4"]])
    # only the Q3 release's counts of the republished quarters give way to Q4's
    # 13 rows a quarter; in Q4 2024-25 EnergyAustralia (NSW and National) reads "n/a"
    assert counts.superseded == old_counts == 3 * 13 + 11
    expected = _old_rate(books)
    assert list(expected) == [q.label for q in quarters_of(Q3_2025_26)]
    assert expected["Q3 2025-26"] == Decimal("0.0222518400")  # 31,204 / 1,402,311
    assert _stored_rate(catalog) == expected


def test_every_order_stores_the_same_figures(catalog: Catalog, books: dict,
                                             tmp_path: Path) -> None:
    from kb_shared.stores.sql import make_engine  # noqa: PLC0415

    catalog.sync_aer([books["q3"]])
    catalog.sync_aer([books["q4"]])
    in_turn = _everything(catalog)
    together = Catalog(make_engine(f"sqlite:///{tmp_path / 'together.sqlite'}"))
    together.ensure_schema()
    together.sync_aer([books["q4"], books["q3"]])
    assert _everything(together) == in_turn
    # all of Q4; of Q3, its oldest quarter and its rates, which Q4 no longer publishes
    assert len(in_turn) == _valued(books["q4_cells"]) + _valued(
        books["q3_cells"], lambda c: c.period == "Q3 2024-25" or c.heading == HARDSHIP_RATE)
