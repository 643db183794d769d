"""Workbooks of the AER layout that differ the way a next quarter's files may: a total row
written another way, a title or heading that contradicts the sheet name, a formula that
stored the empty text, a number stored as text. Each gives the right figures or a refusal
that names the cell and what to do, never a figure in the wrong jurisdiction or of the wrong
fuel.

The workbooks are ``aer_fixtures``' Schedule 4 (``Hardship numbers``: National A6:A10, NSW
A11:A14 with AGL, EnergyAustralia and Origin, QLD A15:A18) edited before saving; the expected
figures are the cells the writer says it wrote.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import openpyxl
import pytest

from benchmarks.aer_workbooks import WrittenCell
from kb_shared.errors import AerWorkbookError
from kb_shared.market.aer import AerObservation
from kb_shared.market.aer_layout import read_workbook
from tests.market.aer_fixtures import FILE_NAMES, Q3_2025_26, write_schedule

SHEET = "Hardship numbers"
S4_FILE = FILE_NAMES[Q3_2025_26]["4"]
#: QLD retailers none of which is in the NSW block, so a block left open above them is not
#: refused for a retailer appearing twice.
QLD_OTHERS = {"A15": "Ergon Energy Queensland Pty Ltd", "A16": "Red Energy Pty Ltd",
              "A17": "Simply Energy"}


def _row(cell: str) -> int:
    return int(cell.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))


def _s4(tmp_path: Path, cells: dict[str, object],
        results: dict[tuple[str, str], object] | None = None) -> tuple[Path, list[WrittenCell]]:
    def edit(book: openpyxl.Workbook) -> None:
        for ref, value in cells.items():
            book[SHEET][ref] = value

    return write_schedule(tmp_path, Q3_2025_26, "4", edit=edit, results=results)


def _refusal(path: Path) -> AerWorkbookError:
    with pytest.raises(AerWorkbookError) as caught:
        read_workbook(path)
    return caught.value


def _by_cell(observations: tuple[AerObservation, ...]) -> dict[str, AerObservation]:
    return {o.cell: o for o in observations if o.sheet == SHEET}


# --- total rows --------------------------------------------------------------------------------


@pytest.mark.parametrize("label", ["NSW Total*", "Total NSW", "NSW Total (a)", "NSW Total\u00b9"])
def test_a_total_row_written_another_way_closes_its_own_block(tmp_path: Path,
                                                              label: str) -> None:
    path, written = _s4(tmp_path, {"A14": label, **QLD_OTHERS})
    read = _by_cell(read_workbook(path).observations)
    nsw = [c for c in written if c.sheet == SHEET and 11 <= _row(c.cell) <= 14
           and c.value is not None]
    assert len(nsw) == 38  # 4 rows x 2 blocks x 5 quarters, less EnergyAustralia's "n/a", "-"
    for cell in nsw:
        obs = read[cell.cell]
        assert (obs.jurisdiction, obs.is_total, obs.block) == ("NSW", _row(cell.cell) == 14,
                                                               "A11:A14")
        assert obs.value == Decimal(repr(cell.value)).quantize(Decimal("1e-10"))
    assert read["F14"].retailer == label and read["F14"].value == 93_770
    assert read["F11"].retailer == "AGL Sales Pty Ltd" and read["F11"].value == 31_204
    assert {read[f"F{row}"].jurisdiction for row in (15, 16, 17, 18)} == {"QLD"}
    assert read["F15"].retailer == "Ergon Energy Queensland Pty Ltd"


@pytest.mark.parametrize(
    ("label", "reason"),
    [
        ("NSW Sub-total", "'NSW Sub-total' reads as the total row of NSW but is not written "
         "'NSW Total': rename it 'NSW Total'"),
        ("NSW Totals", "'NSW Totals' reads as the total row of NSW"),
        ("Total", "'Total' is not the total of a known region: a block closes with "
         "'<Region> Total' (National, ACT, NSW, QLD, SA, TAS, VIC), e.g. 'NSW Total'"),
        ("Grand Total", "'Grand Total' is not the total of a known region"),
    ],
)
def test_a_label_reading_as_a_total_of_no_known_block_is_refused(tmp_path: Path, label: str,
                                                                 reason: str) -> None:
    path, _ = _s4(tmp_path, {"A14": label, **QLD_OTHERS})
    error = _refusal(path)
    assert (error.file, error.sheet, error.cell) == (S4_FILE, SHEET, "A14")
    assert reason in error.reason


def test_a_retailer_whose_name_starts_with_total_is_a_retailer(tmp_path: Path) -> None:
    path, _ = _s4(tmp_path, {"A16": "TotalEnergies Retail Pty Ltd"})
    read = _by_cell(read_workbook(path).observations)
    assert (read["F16"].retailer, read["F16"].jurisdiction, read["F16"].is_total,
            read["F16"].value) == ("TotalEnergies Retail Pty Ltd", "QLD", False, 9_118)


# --- fuel and customer type ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sheet", "cells", "cell", "reason"),
    [
        (SHEET, {"B4": "Small business customers on hardship programs"}, "B4",
         "the heading 'Small business customers on hardship programs' names the customer type "
         "small business, but the title 'Residential electricity customers on hardship "
         "programs' names residential: correct the one that is wrong"),
        ("Res Elec Hardship", {"B3": "Residential gas customers on hardship programs"}, "B3",
         "the title 'Residential gas customers on hardship programs' names the fuel gas, but "
         "the sheet name 'Res Elec Hardship' names electricity: correct the one that is wrong"),
    ],
)
def test_a_source_naming_another_fuel_or_customer_type_is_refused(
    tmp_path: Path, sheet: str, cells: dict[str, str], cell: str, reason: str
) -> None:
    def edit(book: openpyxl.Workbook) -> None:
        book[SHEET].title = sheet
        for ref, value in cells.items():
            book[sheet][ref] = value

    path, _ = write_schedule(tmp_path, Q3_2025_26, "4", edit=edit)
    error = _refusal(path)
    assert (error.sheet, error.cell, error.reason) == (sheet, cell, reason)


# --- stored results ----------------------------------------------------------------------------


def test_a_formula_that_stored_the_empty_text_is_not_reported(tmp_path: Path) -> None:
    plain, _ = write_schedule(tmp_path / "plain", Q3_2025_26, "4")
    before = read_workbook(plain)
    # H11 held AGL's NSW rate for Q4 2024-25 (=C11/1389690); now Excel shows it empty.
    path, _ = _s4(tmp_path / "blank", {"H11": '=IFERROR(C11/0,"")'},
                  results={(SHEET, "H11"): ""})
    book = read_workbook(path)
    assert _by_cell(before.observations)["H11"].value == Decimal("0.0217803971")
    assert "H11" not in _by_cell(book.observations)
    assert book.not_reported == before.not_reported + 1 == 5
    kept = {c: o for c, o in _by_cell(before.observations).items() if c != "H11"}
    assert _by_cell(book.observations) == kept


def test_an_empty_stored_result_its_formula_does_not_give_is_refused(tmp_path: Path) -> None:
    path, _ = _s4(tmp_path, {"H11": "=C11/1389690"}, results={(SHEET, "H11"): ""})
    error = _refusal(path)
    assert (error.sheet, error.cell) == (SHEET, "H11")
    assert error.reason.startswith("stores an empty result but its formula =C11/1389690 gives "
                                   "0.02178039")
    assert "the stored result is stale" in error.reason


# --- text where a number belongs ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("2.16%", "holds the text '2.16%' where a number or '-' was expected: a number "
         "stored as text, which kb does not convert (its units and marks are a guess); store "
         "it as a number in Excel and sync again"),
        ("*", "holds the text '*' where a number or '-' was expected: write '-' (or 'n/a') "
         "where the figure is not reported, else the number"),
    ],
)
def test_text_in_a_value_cell_is_refused_saying_what_to_write(tmp_path: Path, text: str,
                                                              reason: str) -> None:
    # G14, the NSW Total's rate for Q3 2024-25, is a literal no formula reads
    path, _ = _s4(tmp_path, {"G14": text})
    error = _refusal(path)
    assert (error.sheet, error.cell, error.reason) == (SHEET, "G14", reason)


def test_notes_below_a_total_row_are_read_past(tmp_path: Path) -> None:
    plain, _ = write_schedule(tmp_path / "plain", Q3_2025_26, "4")
    path, _ = _s4(tmp_path / "notes", {"B19": "Source: AER", "C20": "n/a = not available",
                                       "M21": "Figures may be revised."})
    assert read_workbook(path).observations == read_workbook(plain).observations


@pytest.mark.parametrize(("cells", "cell"), [
    ({"B19": 5}, "B19"),  # a number without a retailer, below the table
    ({"B19": "=B18"}, "B19"),  # a formula
])
def test_a_figure_without_a_retailer_below_the_table_is_refused(tmp_path: Path,
                                                                 cells: dict, cell: str) -> None:
    path, _ = _s4(tmp_path, cells, results={(SHEET, "B19"): 16646})
    error = _refusal(path)
    assert (error.sheet, error.cell) == (SHEET, cell)
    assert error.reason.startswith("holds a value but A19 names no retailer")


def test_a_units_row_is_refused_saying_where_units_belong(tmp_path: Path) -> None:
    # under the quarter labels, before the first block: "$'000" would change every figure
    def units(book: openpyxl.Workbook) -> None:
        book[SHEET].insert_rows(6)
        book[SHEET]["B6"], book[SHEET]["G6"] = "$'000", "%"

    path, _ = write_schedule(tmp_path, Q3_2025_26, "4", edit=units, cache_formulas=False)
    error = _refusal(path)
    assert (error.sheet, error.cell, error.reason) == (
        SHEET, "B6", "holds a value but A6 names no retailer: name the retailer in A6, or "
        "clear the row (a units row such as \"$'000\" or '%' belongs in the heading; a note, "
        "text alone, may follow a '<Region> Total' row)")


@pytest.mark.parametrize(("rows", "cell", "advice"), [
    (1, "A6", "the table is 1 row(s) lower than the AER layout (title in row 3, headings in "
     "row 4, quarters in row 5); delete 1 row(s) above it"),
    (-2, "A3", "the table is 2 row(s) higher than the AER layout (title in row 3, headings in "
     "row 4, quarters in row 5); insert 2 row(s) above it"),
])
def test_a_table_moved_up_or_down_is_refused_saying_by_how_much(tmp_path: Path, rows: int,
                                                                cell: str, advice: str) -> None:
    def move(book: openpyxl.Workbook) -> None:
        if rows > 0:
            book[SHEET].insert_rows(1, rows)
        else:
            book[SHEET].delete_rows(1, -rows)

    path, _ = write_schedule(tmp_path, Q3_2025_26, "4", edit=move)
    error = _refusal(path)
    assert (error.sheet, error.cell) == (SHEET, cell)
    assert error.reason == f"'Retailer' is in {cell}, not A5: {advice}, so no figure is read " \
                           "under another row's heading"


def test_a_quarter_label_with_a_footnote_mark_is_its_quarter(tmp_path: Path) -> None:
    plain, _ = write_schedule(tmp_path / "plain", Q3_2025_26, "4")
    path, _ = _s4(tmp_path / "marked", {"F5": "Q3 2025-26*", "K5": "Q3 2025-26 (p)"})
    marked = read_workbook(path)
    assert marked.observations == read_workbook(plain).observations
    assert (_by_cell(marked.observations)["F11"].period, marked.release) == ("Q3 2025-26",
                                                                           Q3_2025_26)
