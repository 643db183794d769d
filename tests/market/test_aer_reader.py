"""The AER workbook reader: what it maps from the layout, and what it refuses (naming file,
sheet and cell). Workbooks come from ``aer_fixtures`` (the real layout, real national
figures); the expected observations are the cells the writer says it wrote."""

from __future__ import annotations

import datetime as dt
import shutil
from decimal import Decimal
from pathlib import Path

import openpyxl
import pytest

from benchmarks.aer_workbooks import WrittenCell
from kb_shared.errors import AerWorkbookError
from kb_shared.market.aer import AerWorkbook, Quarter, schedule_from_file_name, stored_value
from kb_shared.market.aer_layout import find_workbooks, read_workbook
from tests.conftest import corpus_dir
from tests.market.aer_fixtures import (
    AGL,
    ALINTA,
    DISCONNECTED,
    DISCONNECTION_RATE,
    ENERGYAUSTRALIA,
    FILE_NAMES,
    HARDSHIP,
    ORIGIN,
    Q3_2025_26,
    Q4_2025_26,
    write_release,
    write_schedule,
)

S3_FILE = FILE_NAMES[Q3_2025_26]["3"]


def as_decimal(value: int | float) -> Decimal:
    """What a written cell should read back as: the number to 10 decimal places."""
    return Decimal(value) if isinstance(value, int) else Decimal(repr(value)).quantize(
        Decimal("1e-10"))


def written_set(cells: list[WrittenCell]) -> set[tuple]:
    return {
        (c.sheet, c.cell, c.jurisdiction, c.retailer, c.is_total, c.period, c.heading,
         as_decimal(c.value))
        for c in cells if c.value is not None
    }


def read_set(book: AerWorkbook) -> set[tuple]:
    return {
        (o.sheet, o.cell, o.jurisdiction, o.retailer, o.is_total, o.period, o.heading, o.value)
        for o in book.observations
    }


@pytest.fixture(scope="module")
def release_q3(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("aer") / "q3"
    return folder, write_release(folder, Q3_2025_26)


@pytest.fixture(scope="module")
def release_q4(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("aer") / "q4"
    return folder, write_release(folder, Q4_2025_26)


# --- what is read ----------------------------------------------------------------------------


@pytest.mark.parametrize("release", ["release_q3", "release_q4"])
def test_every_written_value_is_read_back_from_its_cell(release: str,
                                                        request: pytest.FixtureRequest) -> None:
    folder, written = request.getfixturevalue(release)
    for name, cells in written.items():
        book = read_workbook(folder / name)
        assert read_set(book) == written_set(cells), name
        assert len(book.observations) == len(written_set(cells))
        assert any(c.formula for c in cells)  # formula results are read, not recomputed


def test_national_figures_of_q3_2025_26(release_q3: tuple[Path, dict]) -> None:
    folder, _ = release_q3
    found = {}
    for name in FILE_NAMES[Q3_2025_26].values():
        for o in read_workbook(folder / name).observations:
            if o.is_total and o.jurisdiction == "National" and o.period == "Q3 2025-26":
                found[o.sheet, o.heading] = (o.value, o.cell)
    assert found["ResElec Cust#s & Mkt Contr", "Number of residential customers"] == (
        Decimal(7_060_625), "F10")
    assert found["Hardship numbers", HARDSHIP] == (Decimal(150_486), "F10")
    assert found["Disconnections Resi", DISCONNECTED] == (Decimal(8_724), "F10")
    # Rates are fractions as published: count over customers.
    assert found["Hardship numbers", "Hardship program participation rate"][0] == (
        Decimal(150_486) / Decimal(7_060_625)).quantize(Decimal("1e-10"))
    assert found["Disconnections Resi", DISCONNECTION_RATE] == (Decimal("0.0012355847"), "L10")
    assert (Decimal(8_724) / Decimal(7_060_625)).quantize(Decimal("1e-10")) == Decimal(
        "0.0012355847")


def test_observation_fields(release_q3: tuple[Path, dict]) -> None:
    folder, _ = release_q3
    book = read_workbook(folder / S3_FILE)
    assert (book.schedule, book.release, book.source_file) == ("3", Q3_2025_26, S3_FILE)
    assert book.sheets == ("Disconnections Resi",)
    nsw_agl = [o for o in book.observations
               if (o.retailer, o.jurisdiction, o.period, o.heading)
               == (AGL, "NSW", "Q3 2025-26", DISCONNECTED)]
    assert len(nsw_agl) == 1
    o = nsw_agl[0]
    assert (o.schedule, o.period_start, o.period_end) == ("3", dt.date(2026, 1, 1),
                                                          dt.date(2026, 3, 31))
    assert (o.fuel, o.customer_type, o.metric_key) == (
        "electricity", "residential", "customers_disconnected_for_non_payment")
    assert (o.value, o.is_total, o.sheet, o.cell, o.release) == (
        Decimal(1840), False, "Disconnections Resi", "F11", "Q3 2025-26")
    assert o.provenance == f"{S3_FILE} · Disconnections Resi!F11"
    # The spacer column G: the rate block starts at H.
    rates = sorted({o.cell[0] for o in book.observations if o.heading == DISCONNECTION_RATE})
    assert rates == ["H", "I", "J", "K", "L"]
    totals = {(o.retailer, o.jurisdiction) for o in book.observations if o.is_total}
    assert totals == {("National Total", "National"), ("NSW Total", "NSW"),
                      ("QLD Total", "QLD")}


def test_dimensions_come_from_sheet_names_and_titles(release_q3: tuple[Path, dict]) -> None:
    folder, _ = release_q3
    book = read_workbook(folder / FILE_NAMES[Q3_2025_26]["2"])
    kinds = {(o.sheet, o.fuel, o.customer_type) for o in book.observations}
    assert kinds == {
        ("ResElec Cust#s & Mkt Contr", "electricity", "residential"),
        ("Res Gas Cust#s & Mkt Contr", "gas", "residential"),
        ("SmlBiz Gas Cust#s & Mkt Contr", "gas", "small business"),
    }
    assert book.skipped_sheets == (("Contents", "not a data sheet"),)
    hardship = read_workbook(folder / FILE_NAMES[Q3_2025_26]["4"])
    # "Hardship numbers" names neither: the B3 title does.
    assert {(o.fuel, o.customer_type) for o in hardship.observations} == {
        ("electricity", "residential")}


def test_not_reported_cells_are_not_stored(release_q3: tuple[Path, dict]) -> None:
    folder, written = release_q3
    q3_2024_25 = "Q3 2024-25"
    s3 = read_workbook(folder / S3_FILE)
    assert not [o for o in s3.observations
                if o.retailer == ALINTA and o.period == q3_2024_25]  # "-" (QLD and National)
    assert [o.value for o in s3.observations if o.retailer == "QLD Total"
            and o.period == q3_2024_25 and o.heading == DISCONNECTED] == [
        Decimal(1011 - round(1011 * 0.02 * 4) + 1614 - round(1614 * 0.02 * 4))]
    s4 = read_workbook(folder / FILE_NAMES[Q3_2025_26]["4"])
    assert not [o for o in s4.observations
                if o.retailer == ENERGYAUSTRALIA and o.period == "Q4 2024-25"]  # "n/a"
    s2 = read_workbook(folder / FILE_NAMES[Q3_2025_26]["2"])
    assert not [o for o in s2.observations if o.retailer == ORIGIN and o.jurisdiction == "QLD"
                and o.period == "Q1 2025-26" and o.sheet.startswith("SmlBiz")]  # empty
    # Two cells per sheet block: the retailer's and the National row that repeats it.
    assert (s3.not_reported, s4.not_reported, s2.not_reported) == (4, 4, 2)
    markers = [c for cells in written.values() for c in cells if c.value is None]
    assert len(markers) == 10


def test_xlsm_is_read_like_xlsx(release_q3: tuple[Path, dict]) -> None:
    folder, _ = release_q3
    path = folder / S3_FILE
    assert path.suffix == ".xlsm"
    assert read_workbook(path).observations


def test_reworded_heading_maps_to_the_same_metric_key(release_q3, release_q4) -> None:
    old = read_workbook(release_q3[0] / S3_FILE)
    new = read_workbook(release_q4[0] / FILE_NAMES[Q4_2025_26]["3"])
    old_keys = {h.heading: (h.metric_key, h.aliased) for h in old.headings}
    new_keys = {h.heading: (h.metric_key, h.aliased) for h in new.headings}
    assert old_keys[DISCONNECTED] == new_keys[
        "Residential customers disconnected for non-payment in the quarter"] == (
        "customers_disconnected_for_non_payment", True)
    assert new_keys["Residential customers reconnected after disconnection"] == (
        "residential_customers_reconnected_after_disconnection", False)


def test_find_workbooks(tmp_path: Path, release_q3: tuple[Path, dict]) -> None:
    folder, _ = release_q3
    found = find_workbooks(folder)
    assert [p.name for p in found] == sorted(FILE_NAMES[Q3_2025_26].values())
    (tmp_path / "~$Schedule 2.xlsx").write_bytes(b"lock")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="no .xlsx or .xlsm workbook in"):
        find_workbooks(tmp_path)
    with pytest.raises(ValueError, match="notes.txt: not an .xlsx or .xlsm workbook"):
        find_workbooks(tmp_path / "notes.txt")
    with pytest.raises(FileNotFoundError):
        find_workbooks(tmp_path / "missing")


# --- quarters and file names -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "start", "end"),
    [
        ("Q1 2025-26", dt.date(2025, 7, 1), dt.date(2025, 9, 30)),
        ("Q2 2025-26", dt.date(2025, 10, 1), dt.date(2025, 12, 31)),
        ("Q3 2025-26", dt.date(2026, 1, 1), dt.date(2026, 3, 31)),
        ("Q4 2025-26", dt.date(2026, 4, 1), dt.date(2026, 6, 30)),
        ("q3  2025\u201326", dt.date(2026, 1, 1), dt.date(2026, 3, 31)),
        ("Q3 2025 - 2026", dt.date(2026, 1, 1), dt.date(2026, 3, 31)),
        ("Q2 1999-00", dt.date(1999, 10, 1), dt.date(1999, 12, 31)),
    ],
)
def test_financial_year_quarters(label: str, start: dt.date, end: dt.date) -> None:
    quarter = Quarter.parse(label)
    assert (quarter.start, quarter.end) == (start, end)
    assert Quarter.parse(quarter.label) == quarter


@pytest.mark.parametrize("label", ["Q5 2025-26", "Q3 2025-27", "2025-26 Q3", "Q3", "Mar 2026"])
def test_bad_quarter_labels(label: str) -> None:
    with pytest.raises(ValueError):
        Quarter.parse(label)


@pytest.mark.parametrize(
    ("name", "schedule", "release"),
    [
        ("Schedule 2 - Quarter 3 2023-24 Retail Performance Data.xlsm", "2", "Q3 2023-24"),
        ("Schedule 3 - Quarter 1  2024\u201325 retail performance data.xlsm", "3", "Q1 2024-25"),
        ("Schedule 4 - Quarter 3 2025 \u2013 26 Retail Performance Data.xlsx", "4", "Q3 2025-26"),
    ],
)
def test_schedule_and_release_from_drifting_file_names(name: str, schedule: str,
                                                       release: str) -> None:
    assert schedule_from_file_name(name) == schedule
    found = Quarter.from_file_name(name)
    assert found is not None and found.label == release


def test_stored_value_keeps_excel_precision() -> None:
    assert stored_value(Decimal("0.1") + Decimal("0.2")) == Decimal("0.3")
    assert stored_value(Decimal(repr(0.1 + 0.2))) == Decimal("0.3000000000")
    assert stored_value(Decimal("7060625")) == Decimal("7060625.0000000000")
    with pytest.raises(ValueError, match="too large"):
        stored_value(Decimal("1e18"))


# --- refusals: file, sheet and cell named ----------------------------------------------------


def _refusal(path: Path) -> AerWorkbookError:
    with pytest.raises(AerWorkbookError) as caught:
        read_workbook(path)
    return caught.value


def _s4(tmp_path: Path, edit=None, **options) -> Path:
    path, _ = write_schedule(tmp_path, Q3_2025_26, "4", edit=edit, **options)
    return path


def _hardship(book: openpyxl.Workbook):
    return book["Hardship numbers"]


def test_formula_without_a_stored_result_is_refused(tmp_path: Path) -> None:
    error = _refusal(_s4(tmp_path, cache_formulas=False))
    assert (error.file, error.sheet, error.cell) == (
        FILE_NAMES[Q3_2025_26]["4"], "Hardship numbers", "B6")
    assert "formula with no stored result" in str(error)
    assert str(error).startswith(f"{FILE_NAMES[Q3_2025_26]['4']}, sheet 'Hardship numbers', "
                                 "cell B6: ")


def _empty_merged_heading(book: openpyxl.Workbook) -> None:
    _hardship(book)["G4"] = None


def _empty_unmerged_heading(book: openpyxl.Workbook) -> None:
    ws = _hardship(book)
    ws.unmerge_cells("G4:K4")
    ws["G4"] = None


def _empty_heading_after_unmerged(book: openpyxl.Workbook) -> None:
    _empty_unmerged_heading(book)
    _hardship(book).unmerge_cells("B4:F4")


def _numeric_heading(book: openpyxl.Workbook) -> None:
    _hardship(book)["B4"] = 2024


def _bad_label(book: openpyxl.Workbook) -> None:
    _hardship(book)["D5"] = "Quarter 1 2025"


def _numeric_label(book: openpyxl.Workbook) -> None:
    _hardship(book)["D5"] = 45000


def _text_value(book: openpyxl.Workbook) -> None:
    _hardship(book)["C12"] = "about 30,000"


def _unknown_region(book: openpyxl.Workbook) -> None:
    _hardship(book)["A14"] = "Northern Total"


def _unclosed_block(book: openpyxl.Workbook) -> None:
    _hardship(book)["A18"] = "Origin Energy Retail"


def _value_in_spacer(book: openpyxl.Workbook) -> None:
    _hardship(book)["L12"] = 5


def _value_without_retailer(book: openpyxl.Workbook) -> None:
    _hardship(book)["C20"] = 5


def _unknown_sheet(book: openpyxl.Workbook) -> None:
    book.create_sheet("Chart data")["A5"] = "Quarter"


def _swapped_quarters(book: openpyxl.Workbook) -> None:
    ws = _hardship(book)
    ws["C5"], ws["D5"] = ws["D5"].value, ws["C5"].value


def _no_fuel_anywhere(book: openpyxl.Workbook) -> None:
    _hardship(book)["B3"] = "Residential customers on hardship programs"


def _two_fuels_in_title(book: openpyxl.Workbook) -> None:
    _hardship(book)["B3"] = "Residential electricity and gas customers on hardship programs"


@pytest.mark.parametrize(
    ("edit", "cell", "reason"),
    [
        (_empty_merged_heading, "G4", "the merged heading G4:K4 is empty"),
        (_empty_unmerged_heading, "G5", "this quarter label has no heading above it in row 4"),
        (_empty_heading_after_unmerged, "G5",
         "repeats Q3 2024-25 of B5 under the heading in B4: the heading cell above this "
         "column's block is empty"),
        (_numeric_heading, "B4", "the heading is a number (2024), not text"),
        (_bad_label, "D5", "'Quarter 1 2025' is not a quarter label like 'Q3 2025-26'"),
        (_numeric_label, "D5", "the quarter label is 45000, not text"),
        (_text_value, "C12", "holds the text 'about 30,000' where a number or '-' was expected"),
        (_unknown_region, "A14", "'Northern Total' is not the total of a known region"),
        (_unclosed_block, "A15", "rows 15-18 are not closed by a '<Region> Total' row"),
        (_value_in_spacer, "L12", "holds a value in a column with no quarter label in row 5"),
        (_value_without_retailer, "C20", "holds a value but A20 names no retailer"),
        (_swapped_quarters, "D5", "Q4 2024-25 comes after Q1 2025-26 under the heading in B4"),
        (_two_fuels_in_title, "B3", "names more than one fuel"),
        (_no_fuel_anywhere, "B4", "neither the sheet name, the title (B3) nor this heading "
         "names the fuel (electricity or gas)"),
    ],
)
def test_layout_misfits_are_refused_with_their_cell(tmp_path: Path, edit, cell: str,
                                                    reason: str) -> None:
    error = _refusal(_s4(tmp_path, edit))
    assert (error.file, error.sheet, error.cell) == (
        FILE_NAMES[Q3_2025_26]["4"], "Hardship numbers", cell)
    assert reason in error.reason


def test_unknown_sheet_is_refused(tmp_path: Path) -> None:
    error = _refusal(_s4(tmp_path, _unknown_sheet))
    assert (error.sheet, error.cell) == ("Chart data", "A5")
    assert "reads 'Quarter', not 'Retailer': the sheet does not have the AER layout" in str(error)


def test_release_must_be_the_latest_quarter(tmp_path: Path, release_q3) -> None:
    source = release_q3[0] / FILE_NAMES[Q3_2025_26]["4"]
    renamed = tmp_path / "Schedule 4 - Quarter 4 2025-26 Retail Performance Data.xlsx"
    shutil.copy(source, renamed)
    error = _refusal(renamed)
    assert (error.sheet, error.cell) == ("Hardship numbers", "F5")
    assert "latest quarter in the sheets is Q3 2025-26 but the file name says the release is " \
           "Q4 2025-26" in str(error)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("hardship.xlsx", "neither the file name nor the title names the schedule"),
        ("Schedule 1 - Quarter 3 2025-26 glossary.xlsx", "schedule 1 holds no data"),
        ("Schedule 4 retail performance data.xlsx", "names the release quarter"),
    ],
)
def test_file_names_without_schedule_or_release(tmp_path: Path, release_q3, name: str,
                                                reason: str) -> None:
    target = tmp_path / name
    shutil.copy(release_q3[0] / FILE_NAMES[Q3_2025_26]["4"], target)
    error = _refusal(target)
    assert (error.file, error.sheet, error.cell) == (name, None, None)
    assert reason in str(error)


def test_a_damaged_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "Schedule 3 - Quarter 3 2025-26 data.xlsx"
    path.write_bytes(b"PK\x03\x04 not really a zip")
    assert "cannot be opened as a workbook" in str(_refusal(path))


def test_a_workbook_of_another_kind_is_refused_before_any_sheet_is_read_in_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    book = openpyxl.Workbook()
    book.active.title = "Sales"
    book.active["A5"] = "Region"
    for row in range(6, 2006):  # a sheet worth parsing only if it were AER data
        book.active.cell(row, 1, f"region {row}")
    named = tmp_path / "Sales 2025.xlsx"
    book.save(named)
    disguised = tmp_path / "Schedule 3 - Quarter 3 2025-26 Retail Performance Data.xlsx"
    book.save(disguised)
    opened: list[bool] = []
    load = openpyxl.load_workbook

    def recording(path, **options):  # which loads happened: read-only (lazy) or full
        opened.append(options.get("read_only", False))
        return load(path, **options)

    monkeypatch.setattr(openpyxl, "load_workbook", recording)
    assert "names the schedule" in str(_refusal(named))
    error = _refusal(disguised)
    assert (error.sheet, error.cell) == ("Sales", "A5")
    assert "reads 'Region', not 'Retailer'" in str(error)
    assert opened == [True, True]  # each refused from its outline, never loaded in full


@pytest.mark.corpus
def test_the_real_non_aer_workbook_is_refused_not_mapped(tmp_path: Path) -> None:
    found = sorted((corpus_dir() / "aer").glob("*.xlsx"))
    assert found, "expected the real workbook in ../shared/corpus/aer"
    error = _refusal(found[0])
    assert error.file == found[0].name
    assert "names the schedule" in str(error)
    # Even under an AER file name, its layout is refused at its first sheet's A5.
    disguised = tmp_path / "Schedule 3 - Quarter 3 2025-26 Retail Performance Data.xlsx"
    shutil.copy(found[0], disguised)
    error = _refusal(disguised)
    assert (error.sheet, error.cell) == ("in", "A5")
    assert "reads 'Alabama', not 'Retailer': the sheet does not have the AER layout" in str(error)


def _gas(book: openpyxl.Workbook):
    return book["Res Gas Cust#s & Mkt Contr"]


def test_region_header_rows_between_blocks_are_read(tmp_path: Path) -> None:
    plain, written = write_schedule(tmp_path / "plain", Q3_2025_26, "2")

    def headers(book: openpyxl.Workbook) -> None:
        _gas(book)["A11"] = "NSW"  # the blank rows after each total now head the next block
        _gas(book)["A16"] = "Queensland"

    headed, _ = write_schedule(tmp_path / "headed", Q3_2025_26, "2", edit=headers)
    assert read_set(read_workbook(headed)) == read_set(read_workbook(plain)) == written_set(
        written)


@pytest.mark.parametrize(
    ("cell", "value", "refused", "reason"),
    [
        ("A11", "QLD", "A15", "closes the block headed QLD with 'NSW Total'"),
        ("C13", "#DIV/0!", "C13", "holds the Excel error '#DIV/0!'"),
        ("C13", True, "C13", "holds True where a number was expected"),
        ("C13", dt.datetime(2025, 1, 1), "C13", "where a number was expected"),
        ("A13", 42, "A13", "is the number 42, not a retailer"),
        ("A13", "agl sales pty ltd", "A13", "retailer 'agl sales pty ltd' appears twice in one "
         "block"),
    ],
)
def test_more_misfits_on_a_sheet_with_blank_rows(tmp_path: Path, cell: str, value,
                                                 refused: str, reason: str) -> None:
    def edit(book: openpyxl.Workbook) -> None:
        _gas(book)[cell] = value

    path, _ = write_schedule(tmp_path, Q3_2025_26, "2", edit=edit)
    error = _refusal(path)
    assert (error.sheet, error.cell) == ("Res Gas Cust#s & Mkt Contr", refused)
    assert reason in error.reason


def test_a_retailer_name_written_by_formula_reads_as_its_result(tmp_path: Path) -> None:
    plain, written = write_schedule(tmp_path / "plain", Q3_2025_26, "4")

    def name_by_formula(book: openpyxl.Workbook) -> None:
        _hardship(book)["A11"] = '="AGL Sales "&"Pty Ltd"'

    stored = {("Hardship numbers", "A11"): AGL}
    path, _ = write_schedule(tmp_path / "formula", Q3_2025_26, "4", edit=name_by_formula,
                             results=stored)
    assert read_set(read_workbook(path)) == read_set(read_workbook(plain)) == written_set(
        written)
    # Without its stored result (a file openpyxl wrote and Excel never saved): refused.
    bare, _ = write_schedule(tmp_path / "bare", Q3_2025_26, "4", edit=name_by_formula)
    error = _refusal(bare)
    assert (error.cell, error.reason) == ("A11", "is a formula with no stored result")
