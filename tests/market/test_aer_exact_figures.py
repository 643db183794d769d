"""Issue 25, "Exact market figures": a retailer's rate, count and total in every jurisdiction
block answer with that row's own figure (never the block's Total), formula results are read
only when they are what their formula computes, and a metric asked for by a heading it no
longer has (a rewording without an alias, or a wording only the alias table knows) still
finds its figures, with the headings it matched named.

The workbooks are ``aer_fixtures``' (rates are formulas over the same row's count, Totals
literal, as the AER publishes them). Figures written here are Q3 2025-26 of the Q3 2025-26
release: the fixture's series (``aer_fixtures.BASE``), worked by hand, e.g. AGL's NSW hardship
rate is 31,204 / 1,402,311 = 0.0222518400 and the national hardship rate 150,486 / 7,060,625
= 0.0213134106 (the published 2.131341%).
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import openpyxl
import pytest

from kb_shared.errors import AerWorkbookError
from kb_shared.market.aer_formulas import FormulaErrorValue, FormulaUnsupported, evaluate
from kb_shared.market.aer_layout import find_workbooks, read_workbook
from kb_shared.stores.catalog import Catalog
from kb_shared.stores.sql import make_engine
from tests.market.aer_fixtures import (
    AGL,
    ALINTA,
    DISCONNECTED,
    DISCONNECTION_RATE,
    ENERGYAUSTRALIA,
    FILE_NAMES,
    HARDSHIP,
    HARDSHIP_RATE,
    ORIGIN,
    Q3_2025_26,
    Q4_2025_26,
    RETAILERS,
    write_release,
    write_schedule,
)

Q3 = "Q3 2025-26"
RATE_SHEETS = {"Disconnections Resi": (DISCONNECTED, DISCONNECTION_RATE),
               "Hardship numbers": (HARDSHIP, HARDSHIP_RATE)}
#: Every block of the two rate sheets and its retailers (the National block holds them all).
BLOCKS = {"National": sorted({r for names in RETAILERS.values() for r in names}), **RETAILERS}

#: (sheet, jurisdiction) -> AGL's count, AGL's rate, the Total's count, the Total's rate, the
#: block's column-A cells, AGL's row; Q3 2025-26 as the Q3 2025-26 release publishes it.
AGL_Q3: dict[tuple[str, str], tuple[int, str, int, str, str, int]] = {
    ("Hardship numbers", "National"): (48_544, "0.0219176004", 150_486, "0.0213134106",
                                       "A6:A10", 6),
    ("Hardship numbers", "NSW"): (31_204, "0.0222518400", 93_770, "0.0222802878", "A11:A14", 11),
    ("Hardship numbers", "QLD"): (17_340, "0.0213407505", 56_716, "0.0198865908", "A15:A18", 15),
    ("Disconnections Resi", "National"): (2_851, "0.0012872256", 8_724, "0.0012355847",
                                          "A6:A10", 6),
    ("Disconnections Resi", "NSW"): (1_840, "0.0013121198", 5_455, "0.0012961392", "A11:A14",
                                     11),
    ("Disconnections Resi", "QLD"): (1_011, "0.0012442618", 3_269, "0.0011462244", "A15:A18",
                                     15),
}


@pytest.fixture(scope="module")
def q3_catalog(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    """The Q3 2025-26 release synced into a fresh SQLite catalog."""
    root = tmp_path_factory.mktemp("aer_exact")
    write_release(root / "q3", Q3_2025_26)
    catalog = Catalog(make_engine(f"sqlite:///{root / 'catalog.sqlite'}"))
    catalog.ensure_schema()
    catalog.sync_aer([read_workbook(p) for p in find_workbooks(root / "q3")])
    return catalog


def _one(catalog: Catalog, retailer: str, jurisdiction: str, heading: str):
    return catalog.search_aer(retailer=retailer, jurisdiction=jurisdiction, metric=heading,
                              period_from=Q3, period_to=Q3)


# --- a retailer's own row, in every block ----------------------------------------------------


@pytest.mark.parametrize(("sheet", "jurisdiction"), sorted(AGL_Q3))
def test_agl_rate_count_and_total_in_each_block(q3_catalog: Catalog, sheet: str,
                                                jurisdiction: str) -> None:
    count_heading, rate_heading = RATE_SHEETS[sheet]
    count, rate, total, total_rate, block, row = AGL_Q3[sheet, jurisdiction]
    total_row = int(block.split(":A")[1])
    for heading, value, total_value, column in ((count_heading, Decimal(count), Decimal(total),
                                                 "F"),
                                                (rate_heading, Decimal(rate),
                                                 Decimal(total_rate), None)):
        found = _one(q3_catalog, AGL, jurisdiction, heading)
        assert found.count == 1
        [figure] = found.rows
        assert (figure.retailer, figure.jurisdiction, figure.period, figure.value) == (
            AGL, jurisdiction, Q3, value)
        assert (figure.sheet, figure.label_cell, figure.block, figure.is_total) == (
            sheet, f"A{row}", block, False)
        if column is not None:
            assert figure.cell == f"{column}{row}"
        [published] = found.region_totals
        assert (published.retailer, published.value, published.label_cell, published.block,
                published.is_total) == (f"{jurisdiction} Total", total_value, f"A{total_row}",
                                        block, True)
        assert figure.value != published.value


@pytest.mark.parametrize("sheet", sorted(RATE_SHEETS))
def test_every_retailer_in_every_block_gets_its_own_rate_and_count(q3_catalog: Catalog,
                                                                   sheet: str) -> None:
    """Each retailer's rate equals its own count over its own customers, in every block;
    rows are told apart by their label inside their block."""
    count_heading, rate_heading = RATE_SHEETS[sheet]
    customers = {
        (figure.jurisdiction, figure.retailer): figure.value
        for figure in q3_catalog.search_aer(metric="Number of residential customers",
                                            fuel="electricity", customer_type="residential",
                                            period_from=Q3, period_to=Q3, limit=500).rows
    }
    seen = 0
    for jurisdiction, retailers in BLOCKS.items():
        for retailer in retailers:
            count = _one(q3_catalog, retailer, jurisdiction, count_heading)
            rate = _one(q3_catalog, retailer, jurisdiction, rate_heading)
            assert (count.count, rate.count) == (1, 1), (jurisdiction, retailer)
            own = count.rows[0].value / customers[jurisdiction, retailer]
            assert rate.rows[0].value == own.quantize(Decimal("1e-10"))
            assert rate.rows[0].value != rate.region_totals[0].value
            assert count.rows[0].label_cell == rate.rows[0].label_cell
            first, last = (int(x) for x in rate.rows[0].block[1:].split(":A"))
            assert first <= int(rate.rows[0].label_cell[1:]) < last
            seen += 1
    assert seen == 4 + 3 + 3  # every retailer row of the three blocks


def test_alinta_is_not_in_the_nsw_block(q3_catalog: Catalog) -> None:
    found = _one(q3_catalog, ALINTA, "NSW", HARDSHIP_RATE)
    assert (found.count, found.rows, found.headings_outside) == (0, (), True)
    # the heading is named with every quarter it has, though none meets the filters
    assert [(h.heading, h.first_period, h.last_period) for h in found.headings] == [
        (HARDSHIP_RATE, "Q3 2024-25", Q3)]


# --- formula results -------------------------------------------------------------------------


def test_retailer_rates_are_formulas_and_totals_literal(tmp_path: Path) -> None:
    _, cells = write_schedule(tmp_path, Q3_2025_26, "4")
    rates = {(c.jurisdiction, c.retailer): c for c in cells
             if c.heading == HARDSHIP_RATE and c.period == Q3}
    assert rates["NSW", AGL].formula and rates["National", ORIGIN].formula
    assert not rates["NSW", "NSW Total"].formula
    book = openpyxl.load_workbook(tmp_path / FILE_NAMES[Q3_2025_26]["4"])
    assert book["Hardship numbers"]["K11"].value == "=F11/1402311"
    assert book["Hardship numbers"]["K6"].value == "=F6/2214841"  # AGL, NSW + QLD customers


def _refusal(path: Path) -> AerWorkbookError:
    with pytest.raises(AerWorkbookError) as caught:
        read_workbook(path)
    return caught.value


@pytest.mark.parametrize(
    ("stored", "shown"),
    [(0.0222802878, "0.0222802878"),  # the NSW Total's rate stored for AGL's row
     (0, "0.0")],  # the placeholder XlsxWriter stores for every formula
)
def test_a_stored_result_its_formula_does_not_give_is_refused(tmp_path: Path, stored,
                                                              shown: str) -> None:
    path, _ = write_schedule(tmp_path, Q3_2025_26, "4",
                             results={("Hardship numbers", "K11"): stored})
    error = _refusal(path)
    assert (error.sheet, error.cell) == ("Hardship numbers", "K11")
    assert error.reason.startswith(f"stores the result {shown} but its formula =F11/1402311 "
                                   "computes 0.022251839998402637: ")
    assert "stale" in error.reason


def test_a_stale_count_under_a_sum_is_refused(tmp_path: Path) -> None:
    path, _ = write_schedule(tmp_path, Q3_2025_26, "4",
                             results={("Hardship numbers", "F6"): 48_000})
    error = _refusal(path)
    assert error.cell == "F6"
    assert "stores the result 48000.0 but its formula =SUM(F11,F15) computes 48544.0" in str(
        error)


def test_a_formula_kb_cannot_compute_is_taken_as_stored(tmp_path: Path) -> None:
    def guarded(book: openpyxl.Workbook) -> None:
        book["Hardship numbers"]["K11"] = '=IF(F11="-","-",F11/1402311)'

    path, _ = write_schedule(tmp_path, Q3_2025_26, "4", edit=guarded,
                             results={("Hardship numbers", "K11"): 0.0222518400})
    [figure] = [o for o in read_workbook(path).observations if o.cell == "K11"]
    assert figure.value == Decimal("0.0222518400")


def _cells(values: dict[tuple[str | None, str], float | str | None]):
    return lambda sheet, ref: values.get((sheet, ref))


@pytest.mark.parametrize(
    ("formula", "value"),
    [
        ("=F11/1402311", 31_204 / 1_402_311),
        ("=SUM(F11,F15)", 48_544.0),
        ("=SUM(F11:F15)", 48_544.0),  # text and empty cells in a range are skipped
        ("=SUM($F$11, F15, 6) * 2", 97_100.0),
        ("=-F11 + 2 * (3 - 1)", -31_200.0),
        ("=50%", 0.5),
        ("='Res Gas'!B6/4", 25.0),
        ("=F12 + 1", 1.0),  # an empty cell is 0
        ("=1.5e3 - .5", 1_499.5),
        ("=F14 * 2", 2_468.0),  # a number stored as text counts as that number in arithmetic
        ("=SUM(F14, 1)", 1.0),  # ... but a SUM over references skips it, as Excel does
    ],
)
def test_evaluate(formula: str, value: float) -> None:
    cells = {(None, "F11"): 31_204.0, (None, "F15"): 17_340.0, (None, "F13"): "Retailer",
             (None, "F14"): " 1234", ("Res Gas", "B6"): 100.0}
    assert evaluate(formula, _cells(cells)) == value


@pytest.mark.parametrize(
    ("formula", "error", "message"),
    [
        ("=F11/0", FormulaErrorValue, "#DIV/0!"),
        ("=F13*2", FormulaErrorValue, "#VALUE! (a cell holds the text 'Retailer')"),
        ("=ROUND(F11/1402311, 4)", FormulaUnsupported, "the function ROUND"),
        ("=[1]Sheet1!B6", FormulaUnsupported, "'[1]Sheet1!B6'"),
        ('="a"&"b"', FormulaUnsupported, "'\"a\"&\"b\"'"),
        ("=F11:F15", FormulaUnsupported, "the range F11:F15 outside SUM"),
        ("=(F11", FormulaUnsupported, "the formula ends early"),
        ("=SUM(A1:XFD1048576)", FormulaUnsupported, "a range of"),
    ],
)
def test_evaluate_refuses(formula: str, error: type, message: str) -> None:
    cells = {(None, "F11"): 31_204.0, (None, "F13"): "Retailer"}
    with pytest.raises(error) as caught:
        evaluate(formula, _cells(cells))
    assert message in str(caught.value)


# --- a heading reworded without an alias -----------------------------------------------------

REWORDED = "Residential customers in hardship programs at the end of the quarter"


@pytest.fixture(scope="module")
def reworded_books(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Schedule 4 of both releases, the newer one rewording B4 with no alias for it."""
    root = tmp_path_factory.mktemp("aer_reworded")

    def reword(book: openpyxl.Workbook) -> None:
        book["Hardship numbers"]["B4"] = REWORDED

    older, _ = write_schedule(root / "q3", Q3_2025_26, "4")
    newer, _ = write_schedule(root / "q4", Q4_2025_26, "4", edit=reword)
    return older, newer


@pytest.fixture
def reworded(catalog: Catalog, reworded_books: tuple[Path, Path]) -> Catalog:
    """Both releases of ``reworded_books`` synced, older first (SQLite and Postgres)."""
    older, newer = reworded_books
    catalog.sync_aer([read_workbook(older)])
    counts = catalog.sync_aer([read_workbook(newer)])
    # the old key's 4 republished quarters x (10 retailer + 3 Total rows), less
    # EnergyAustralia's "n/a" in Q4 2024-25 (NSW and National): kept, not deleted
    assert (counts.deleted, counts.unchanged) == (0, 4 * 13 - 2)
    assert [(m.metric_key, m.aliased) for m in counts.new_metrics] == [
        ("residential_customers_in_hardship_programs_at_the_end_of_the_quarter", False)]
    return catalog


def test_the_old_heading_over_the_rewording_returns_its_own_quarters(reworded: Catalog) -> None:
    old = reworded.search_aer(metric=HARDSHIP, period_from="Q1 2025-26", period_to="Q4 2025-26")
    assert old.count == 3 * 10  # Q1-Q3 2025-26, 4 national + 6 state retailers
    assert sorted({o.period for o in old.rows}) == ["Q1 2025-26", "Q2 2025-26", Q3]
    assert [(h.heading, h.metric_key, h.first_period, h.last_period, h.rows)
            for h in old.headings] == [
        (HARDSHIP, "hardship_customers", "Q1 2025-26", Q3, 30)]
    assert old.headings_outside is False
    assert {(o.jurisdiction, o.period): o.value for o in old.rows if o.retailer == AGL}[
        "NSW", Q3] == Decimal(31_204)
    # national retailers are left out of the total: NSW + QLD
    assert {p.period: p.total for p in old.period_totals}[Q3] == 150_486
    new = reworded.search_aer(metric=REWORDED, period_from="Q1 2025-26",
                              period_to="Q4 2025-26")
    assert new.count == 4 * 10
    assert [(h.heading, h.first_period, h.last_period, h.rows) for h in new.headings] == [
        (REWORDED, "Q1 2025-26", "Q4 2025-26", 40)]
    # a wording only the alias table knows finds the old key's figures too
    alias = reworded.search_aer(metric="Customers on hardship programs",
                                period_from="Q1 2025-26", period_to="Q4 2025-26")
    assert alias.rows == old.rows and alias.count == 30


def test_nothing_in_range_names_the_quarters_the_heading_has(reworded: Catalog) -> None:
    found = reworded.search_aer(metric=HARDSHIP, period_from="Q4 2025-26")
    assert (found.count, found.headings_outside) == (0, True)
    assert [(h.heading, h.first_period, h.last_period, h.rows) for h in found.headings] == [
        (HARDSHIP, "Q3 2024-25", Q3, 48)]  # 5 quarters x 10 rows, less the two "n/a"


def test_resyncing_the_reworded_release_changes_nothing(reworded: Catalog,
                                                       reworded_books: tuple[Path, Path]
                                                       ) -> None:
    before = reworded.list_aer_observations()
    counts = reworded.sync_aer([read_workbook(reworded_books[1])])
    assert (counts.inserted, counts.updated, counts.deleted) == (0, 0, 0)
    assert reworded.list_aer_observations() == before
    # 13 rows (10 retailers, 3 Totals) a quarter and heading: Q3 2024-25 of the older release
    # (2 headings), the old key's 4 kept quarters, the newer release's 5 quarters x 2
    # headings; less the "n/a" of EnergyAustralia in Q4 2024-25 (NSW, National; count and
    # rate wherever published)
    assert len(before) == 26 + (4 * 13 - 2) + (5 * 26 - 4) == 202


def test_an_alias_never_synced_finds_its_metric(q3_catalog: Catalog) -> None:
    found = q3_catalog.search_aer(metric="Residential disconnection rate for non-payment",
                                  retailer=AGL, jurisdiction="NSW", period_from=Q3,
                                  period_to=Q3)
    assert (found.count, found.rows[0].value) == (1, Decimal("0.0013121198"))
    assert [(h.heading, h.rows) for h in found.headings] == [(DISCONNECTION_RATE, 1)]
    assert ENERGYAUSTRALIA in found.vocabulary.retailers
