"""Read an AER retail-performance workbook (``.xlsx``/``.xlsm``) into observations, mapped
from its layout alone, and refuse whatever does not fit it.

The layout (``../shared/notes/next-capabilities.md`` "AER retail performance data"): one sheet
per subject whose name gives the fuel and customer type; row 3 a title; row 4 metric headings,
each (usually merged) over a block of quarter columns, blocks sometimes separated by an empty
spacer column; row 5 quarter labels (``Q3 2025-26``), the latest last in each block; column A
retailers in one block per jurisdiction, each closed by a ``<Region> Total`` row (``Total
<Region>`` and a footnote mark after it are read too; any other label reading as a total is
refused, never taken for a retailer); ``A4``
reads "National" and ``A5`` "Retailer". Blocks are found from the headings, never by offset.

Two readers, each for what it does well: openpyxl (formulas not evaluated) gives positions,
merged ranges, which cells are formulas and each cell's type; fastexcel (calamine, into a
polars frame, ``aer_values``) gives the values, including the result Excel stored for each
formula. A formula without a stored result is refused: real workbooks are saved by Excel,
which stores them (an empty text it stored reads as "not reported", as an empty cell). A
stored result is checked against its formula where ``aer_formulas`` can compute it (rates,
sums), and a stale one is refused: it would be a wrong figure with no sign of it.

Every refusal is an ``AerWorkbookError`` naming the file, the sheet and the cell.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, TypeVar

import fastexcel
import openpyxl
from openpyxl.utils import column_index_from_string, get_column_letter
from openpyxl.utils.cell import coordinate_from_string
from openpyxl.utils.exceptions import InvalidFileException
from openpyxl.worksheet.worksheet import Worksheet

from kb_shared.errors import AerWorkbookError
from kb_shared.market.aer import (
    CUSTOMER_TYPE_WORDS,
    DATA_SCHEDULES,
    FUEL_WORDS,
    AerHeading,
    AerObservation,
    AerWorkbook,
    Quarter,
    normalize_jurisdiction,
    normalize_words,
    schedule_from_file_name,
    stored_value,
    strip_footnote,
    total_row_region,
    words_naming,
)
from kb_shared.market.aer_formulas import (
    CellValue,
    FormulaErrorValue,
    FormulaUnsupported,
    evaluate,
)
from kb_shared.market.aer_metrics import map_heading
from kb_shared.market.aer_values import StoredValues, read_stored_values

#: File types read (the AER publishes ``.xlsx`` and macro-enabled ``.xlsm``).
WORKBOOK_SUFFIXES = (".xlsx", ".xlsm")
#: Rows of the layout (1-based, as Excel numbers them).
TITLE_ROW, HEADING_ROW, LABEL_ROW, FIRST_DATA_ROW = 3, 4, 5, 6
#: Rows of column A read before any sheet is parsed in full (to find a table moved down).
OUTLINE_ROWS = 10
#: ``A5`` of every data sheet.
RETAILER_HEADER = "retailer"
#: Cell texts meaning "not reported" (stored as nothing, never as 0).
NOT_REPORTED = frozenset({"-", "\u2013", "\u2014", "n/a", "na", "n.a."})
#: How far a formula's stored result may be from what its formula computes (relative; the
#: order of additions may differ from Excel's, nothing more).
FORMULA_TOLERANCE = 1e-9
#: A number written as text ("30,268", "$1.5", "2.1%"), named as such when refused.
_NUMBER_AS_TEXT = re.compile(r"[-+]?\$?\s*(?:\d[\d,]*(?:\.\d*)?|\.\d+)\s*%?")
#: Names (normalised) of sheets that carry no data: skipped, and listed in the result.
NON_DATA_SHEETS = frozenset(
    {
        "contents",
        "table of contents",
        "index",
        "cover",
        "notes",
        "explanatory notes",
        "read me",
        "readme",
        "introduction",
        "about",
        "glossary",
        "definitions",
        "disclaimer",
    }
)


def find_workbooks(source: str | Path) -> list[Path]:
    """The workbooks at ``source``: the file itself, or every ``.xlsx``/``.xlsm`` directly in
    the folder (Excel's ``~$`` lock files left out), sorted by name.

    Raises:
        FileNotFoundError: ``source`` does not exist.
        ValueError: a file that is not ``.xlsx``/``.xlsm``, or a folder without one.
    """
    path = Path(source).expanduser()
    if not path.exists():
        raise FileNotFoundError(f"AER source {str(path)!r} does not exist")
    if path.is_file():
        if path.suffix.lower() not in WORKBOOK_SUFFIXES:
            raise ValueError(f"{path.name}: not an .xlsx or .xlsm workbook")
        return [path]
    found = sorted(
        p
        for p in path.iterdir()
        if p.is_file() and p.suffix.lower() in WORKBOOK_SUFFIXES and not p.name.startswith("~$")
    )
    if not found:
        raise ValueError(f"no .xlsx or .xlsm workbook in {str(path)!r}")
    return found


def read_workbooks(paths: Iterable[str | Path]) -> list[AerWorkbook]:
    """``read_workbook`` for each path, in order; the first refusal propagates."""
    return [read_workbook(p) for p in paths]


def read_workbook(path: str | Path) -> AerWorkbook:
    """Every observation in one AER workbook.

    The schedule and the release quarter come from the file name (or the document title);
    the release must be the latest quarter in the sheets. Hidden sheets and sheets named like
    a contents or notes page (``NON_DATA_SHEETS``) are skipped and listed. Name, title and
    every sheet's A5 are checked before any sheet is read in full, so a workbook with several
    faults is refused for the first of those before any fault inside a data sheet.

    Raises:
        AerWorkbookError: the file is not a workbook, or anything in it does not fit the
            layout (the message names file, sheet and cell). Nothing is returned then.
        OSError: the file cannot be read (missing, no permission).
    """
    path = Path(path)
    name = path.name
    if path.suffix.lower() not in WORKBOOK_SUFFIXES:
        raise AerWorkbookError(name, None, None, "not an .xlsx or .xlsm workbook")
    # name, title and each sheet's A5 decide before any sheet is parsed in full (``_outline``)
    title, outline = _opening(name, lambda: _outline(path))
    schedule = schedule_from_file_name(path.stem) or schedule_from_file_name(title)
    if schedule is None:
        raise AerWorkbookError(
            name, None, None, "neither the file name nor the title names the schedule "
            "('Schedule 2', 'Schedule 3', ...): not an AER retail performance workbook"
        )
    if schedule not in DATA_SCHEDULES:
        raise AerWorkbookError(
            name, None, None, f"schedule {schedule} holds no data (data schedules are "
            f"{', '.join(DATA_SCHEDULES)})"
        )
    try:
        release = Quarter.from_file_name(path.stem) or Quarter.from_file_name(title)
    except ValueError as exc:
        raise AerWorkbookError(name, None, None, str(exc)) from exc
    if release is None:
        raise AerWorkbookError(
            name, None, None, "neither the file name nor the title names the release quarter "
            "('Quarter 3 2025-26')"
        )
    skipped: list[tuple[str, str]] = []
    data_sheets: list[str] = []
    for sheet, state, column_a in outline:
        a5 = column_a[LABEL_ROW - 1] if len(column_a) >= LABEL_ROW else None
        if state != "visible":
            skipped.append((sheet, "hidden"))
        elif a5 is not None and a5.casefold() == RETAILER_HEADER:
            data_sheets.append(sheet)
        elif normalize_words(sheet) in NON_DATA_SHEETS:
            skipped.append((sheet, "not a data sheet"))
        else:
            raise _moved_table(name, sheet, column_a) or AerWorkbookError(
                name, sheet, "A5", f"reads {a5!r}, not 'Retailer': the sheet does not have "
                "the AER layout (A4 'National', A5 'Retailer', headings in row 4, quarters in "
                "row 5); if it holds no data add its name to NON_DATA_SHEETS"
            )
    if not data_sheets:
        raise AerWorkbookError(name, None, None, "no sheet has the AER layout ('Retailer' in A5)")
    book = _opening(name, lambda: openpyxl.load_workbook(path, data_only=False, keep_links=False))
    values = _opening(name, lambda: fastexcel.read_excel(path))
    sheets = [
        _SheetReader(name, schedule, release, book[sheet],
                     read_stored_values(values, path, sheet)).read()
        for sheet in data_sheets
    ]

    latest, latest_at = max((s.latest, (s.sheet, s.latest_cell)) for s in sheets)
    if latest != release:
        raise AerWorkbookError(
            name, latest_at[0], latest_at[1], f"the latest quarter in the sheets is "
            f"{latest.label} but the file name says the release is {release.label}"
        )
    observations: list[AerObservation] = []
    seen: dict[tuple[str, ...], str] = {}
    headings: dict[str, AerHeading] = {}
    for result in sheets:
        for obs in result.observations:
            key = (obs.metric_key, obs.fuel, obs.customer_type, obs.jurisdiction,
                   obs.retailer.casefold(), obs.period)
            where = f"{obs.sheet}!{obs.cell}"
            if key in seen:
                raise AerWorkbookError(
                    name, obs.sheet, obs.cell, f"holds the same figure as {seen[key]} (metric "
                    f"{obs.metric_key!r}, {obs.fuel}, {obs.customer_type}, {obs.jurisdiction}, "
                    f"{obs.retailer!r}, {obs.period}); give one of the headings its own key in "
                    "aer_metrics.METRIC_ALIASES"
                )
            seen[key] = where
            observations.append(obs)
        for heading in result.headings:
            headings.setdefault(heading.heading, heading)
    return AerWorkbook(
        path=path,
        schedule=schedule,
        release=release,
        observations=tuple(observations),
        headings=tuple(headings.values()),
        sheets=tuple(s.sheet for s in sheets),
        skipped_sheets=tuple(skipped),
        not_reported=sum(s.not_reported for s in sheets),
    )


_Loaded = TypeVar("_Loaded")


def _outline(path: Path) -> tuple[str, list[tuple[str, str, list[str | None]]]]:
    """The workbook's title property ("" when unset) and each sheet's (name, state, texts of
    A1 to A``OUTLINE_ROWS``), read without parsing the sheets further (openpyxl's read-only
    mode reads rows lazily): enough to refuse a workbook of another kind in milliseconds, not
    after seconds of loading every cell."""
    book = openpyxl.load_workbook(path, read_only=True, keep_links=False)
    try:
        sheets = [
            (ws.title, ws.sheet_state, [_text(row[0]) if row else None for row in ws.iter_rows(
                min_row=1, max_row=OUTLINE_ROWS, max_col=1, values_only=True)])
            for ws in book.worksheets
        ]
        return book.properties.title or "", sheets
    finally:
        book.close()


def _moved_table(file: str, sheet: str, column_a: list[str | None]) -> AerWorkbookError | None:
    """The refusal of a sheet whose 'Retailer' cell is in column A but not in A5 (rows added
    or removed above the table), or None when column A has no 'Retailer' in its first rows."""
    row = next((r for r, text in enumerate(column_a, start=1)
                if text is not None and text.casefold() == RETAILER_HEADER), None)
    if row is None:
        return None
    shift = row - LABEL_ROW
    return AerWorkbookError(
        file, sheet, f"A{row}", f"'Retailer' is in A{row}, not A{LABEL_ROW}: the table is "
        f"{abs(shift)} row(s) {'lower' if shift > 0 else 'higher'} than the AER layout (title "
        f"in row {TITLE_ROW}, headings in row {HEADING_ROW}, quarters in row {LABEL_ROW}); "
        f"{'delete' if shift > 0 else 'insert'} {abs(shift)} row(s) above it, so no figure is "
        "read under another row's heading"
    )


def _opening(name: str, load: Callable[[], _Loaded]) -> _Loaded:
    """``load()`` (opening workbook ``name``), with every way a file fails to open as a
    workbook raised as ``AerWorkbookError`` (``OSError``, a missing or unreadable file, as is).
    """
    try:
        return load()
    except (InvalidFileException, zipfile.BadZipFile, fastexcel.FastExcelError) as exc:
        raise AerWorkbookError(name, None, None, f"cannot be opened as a workbook ({exc})") from exc
    except OSError:
        raise
    except Exception as exc:  # openpyxl raises KeyError, ValueError, ParseError... on bad parts
        raise AerWorkbookError(
            name, None, None, f"is a damaged workbook ({type(exc).__name__}: {exc})"
        ) from exc


# --------------------------------------------------------------------------------------------
# One sheet
# --------------------------------------------------------------------------------------------


@dataclass
class _Block:
    """A heading and the quarter columns under it."""

    heading: AerHeading
    cell: str
    first: int
    last: int
    fuel: str = ""
    customer_type: str = ""
    quarters: dict[int, Quarter] = field(default_factory=dict)


@dataclass
class _SheetResult:
    sheet: str
    observations: list[AerObservation]
    headings: list[AerHeading]
    not_reported: int
    latest: Quarter
    latest_cell: str


def _text(value: Any) -> str | None:
    """A cell's text with whitespace collapsed, or None when it holds no text."""
    if value is None:
        return None
    clean = " ".join(str(value).split())
    return clean or None


class _SheetReader:
    def __init__(
        self, file: str, schedule: str, release: Quarter, ws: Worksheet, frame: StoredValues
    ) -> None:
        self.file = file
        self.schedule = schedule
        self.release = release
        self.ws = ws
        self.frame = frame
        self.not_reported = 0
        self._computed: dict[tuple[str, str], float | None] = {}

    def refuse(self, cell: str | None, reason: str) -> AerWorkbookError:
        return AerWorkbookError(self.file, self.ws.title, cell, reason)

    def read(self) -> _SheetResult:
        self._check_alignment()
        blocks = self._blocks()
        self._read_labels(blocks)
        self._assign_dimensions(blocks)
        observations = self._read_rows(blocks)
        latest_block = max(blocks, key=lambda b: max(b.quarters.values()))
        latest_column, latest = max(latest_block.quarters.items(), key=lambda kv: kv[1])
        return _SheetResult(
            sheet=self.ws.title,
            observations=observations,
            headings=[b.heading for b in blocks],
            not_reported=self.not_reported,
            latest=latest,
            latest_cell=f"{get_column_letter(latest_column)}{LABEL_ROW}",
        )

    def _check_alignment(self) -> None:
        """The two readers must agree on where A4 and A5 are (fastexcel's frame starts at the
        first used row and column; column A is always used on a data sheet)."""
        for row in (HEADING_ROW, LABEL_ROW):
            ours = _text(self.ws.cell(row, 1).value)
            theirs = _text(self.frame.text(row, 1))
            if ours != theirs:
                raise self.refuse(
                    f"A{row}", f"openpyxl reads {ours!r} but fastexcel {theirs!r}: the readers "
                    "disagree about cell positions"
                )
        a4 = _text(self.ws.cell(HEADING_ROW, 1).value)
        if a4 is not None and normalize_jurisdiction(a4) is None:
            raise self.refuse("A4", f"reads {a4!r}, not a region such as 'National'")

    def _blocks(self) -> list[_Block]:
        """Row-4 headings and the columns each spans: a merged heading its merged range; an
        unmerged one up to the column before the next heading (trimmed to its labels later)."""
        merges = {}
        for rng in self.ws.merged_cells.ranges:
            if rng.min_row <= HEADING_ROW <= rng.max_row and rng.max_col >= 2:
                merges[rng.min_col] = rng
        covered = {c for rng in merges.values() for c in range(rng.min_col + 1, rng.max_col + 1)}
        blocks: list[_Block] = []
        for column in range(2, self.ws.max_column + 1):
            if column in covered:
                continue
            rng = merges.get(column)
            row = rng.min_row if rng is not None else HEADING_ROW
            cell = self.ws.cell(row, column)
            ref = cell.coordinate
            if cell.data_type == "f":
                raise self.refuse(ref, "the heading is a formula, not text")
            if isinstance(cell.value, (int, float, Decimal, dt.date)) and not isinstance(
                cell.value, bool
            ):
                raise self.refuse(ref, f"the heading is a number ({cell.value!r}), not text")
            text = _text(cell.value)
            if text is None:
                if rng is not None:
                    raise self.refuse(ref, f"the merged heading {rng.coord} is empty")
                continue
            try:
                Decimal(text.replace(",", ""))
            except InvalidOperation:
                pass
            else:
                raise self.refuse(ref, f"the heading is a number ({text!r}), not text")
            try:
                heading = map_heading(self.schedule, text)
            except ValueError as exc:
                raise self.refuse(ref, str(exc)) from exc
            last = rng.max_col if rng is not None else self.ws.max_column
            if blocks and blocks[-1].last >= column:
                blocks[-1].last = column - 1
            blocks.append(_Block(heading, ref, column, last))
        if not blocks:
            raise self.refuse("B4", "row 4 has no metric headings")
        return blocks

    def _read_labels(self, blocks: list[_Block]) -> None:
        """Row-5 quarter labels into their blocks; every label under a heading, at least one
        per heading, ascending within a block, none twice."""
        for column in range(2, self.ws.max_column + 1):
            cell = self.ws.cell(LABEL_ROW, column)
            ref = cell.coordinate
            value = cell.value
            if value is None or _text(value) is None:
                continue
            if not isinstance(value, str):
                raise self.refuse(
                    ref, f"the quarter label is {value!r}, not text like 'Q3 2025-26'"
                )
            block = next((b for b in blocks if b.first <= column <= b.last), None)
            if block is None:
                raise self.refuse(ref, "this quarter label has no heading above it in row 4")
            try:
                quarter = Quarter.parse(strip_footnote(value))  # "Q3 2025-26*" is Q3 2025-26
            except ValueError as exc:
                raise self.refuse(ref, str(exc)) from exc
            for other_column, other in block.quarters.items():
                if other == quarter:
                    raise self.refuse(
                        ref, f"repeats {quarter.label} of {get_column_letter(other_column)}5 "
                        f"under the heading in {block.cell}: the heading cell above this "
                        "column's block is empty"
                    )
                if other > quarter:
                    raise self.refuse(
                        ref, f"{quarter.label} comes after {other.label} under the heading in "
                        f"{block.cell}; quarters must ascend"
                    )
            block.quarters[column] = quarter
        for block in blocks:
            if not block.quarters:
                raise self.refuse(block.cell, "no quarter labels under this heading in row 5")

    def _assign_dimensions(self, blocks: list[_Block]) -> None:
        """Fuel and customer type of each block: from the sheet name, else the row-3 title,
        else the heading; a source naming two (or none of them naming one) is refused, and so
        is a later source naming only another one (the title of a gas sheet left on an
        electricity sheet): one of them is wrong, and kb cannot tell which."""
        title, title_ref = self._title()
        for block in blocks:
            for attribute, table, what in (
                ("fuel", FUEL_WORDS, "fuel (electricity or gas)"),
                ("customer_type", CUSTOMER_TYPE_WORDS, "customer type (residential or small "
                 "business)"),
            ):
                sources = [(self.ws.title, None, "the sheet name"), (title, title_ref, "the title"),
                           (block.heading.heading, block.cell, "the heading")]
                chosen: tuple[str, str, str] | None = None  # value, source, its text
                for text, ref, source in sources:
                    found = words_naming(text, table) if text else set()
                    if chosen is None:
                        if len(found) > 1:
                            raise self.refuse(ref, f"{source} {text!r} names more than one {what}")
                        if found:
                            chosen = (found.pop(), source, str(text))
                            setattr(block, attribute, chosen[0])
                    elif len(found) == 1 and chosen[0] not in found:
                        raise self.refuse(
                            ref or block.cell, f"{source} {text!r} names the "
                            f"{what.split(' (')[0]} {found.pop()}, but {chosen[1]} "
                            f"{chosen[2]!r} names {chosen[0]}: correct the one that is wrong"
                        )
                if chosen is None:
                    raise self.refuse(
                        block.cell, f"neither the sheet name, the title ({title_ref}) nor this "
                        f"heading names the {what}"
                    )

    def _title(self) -> tuple[str | None, str | None]:
        for column in range(1, self.ws.max_column + 1):
            text = _text(self.ws.cell(TITLE_ROW, column).value)
            if text is not None:
                return text, f"{get_column_letter(column)}{TITLE_ROW}"
        return None, f"B{TITLE_ROW}"

    def _value(self, row: int, column: int, cell: Any) -> Decimal | None:
        """The number in a value cell (a formula's stored result for a formula); None, and
        counted, for "-", "n/a" or empty. openpyxl's cell type decides what a cell is."""
        kind = cell.data_type
        if kind == "e":
            raise self.refuse(cell.coordinate, f"holds the Excel error {cell.value!r}")
        if kind == "b" or isinstance(cell.value, (bool, dt.date)):
            raise self.refuse(cell.coordinate, f"holds {cell.value!r} where a number was expected")
        if kind == "s":
            text = _text(cell.value)
            if text is None or text.casefold() in NOT_REPORTED:
                self.not_reported += 1
                return None
            if _NUMBER_AS_TEXT.fullmatch(text):
                raise self.refuse(
                    cell.coordinate, f"holds the text {text!r} where a number or '-' was "
                    "expected: a number stored as text, which kb does not convert (its units "
                    "and marks are a guess); store it as a number in Excel and sync again"
                )
            raise self.refuse(
                cell.coordinate, f"holds the text {text!r} where a number or '-' was expected: "
                "write '-' (or 'n/a') where the figure is not reported, else the number"
            )
        number = self.frame.number(row, column)
        text = _text(self.frame.text(row, column)) if kind == "f" or number is None else None
        if number is not None and text not in ("true", "false"):
            if kind == "f":
                self._check_formula(cell, number)
            try:
                return stored_value(Decimal(repr(number)))
            except ValueError as exc:
                raise self.refuse(cell.coordinate, str(exc)) from exc
        if kind == "f" and text is None:
            if self._stored_empty_text(cell):
                self.not_reported += 1
                return None
            raise self.refuse(
                cell.coordinate, "is a formula with no stored result (or an Excel error): open "
                "and save the workbook in Excel so it stores the computed values"
            )
        if text is None or text.casefold() in NOT_REPORTED:
            self.not_reported += 1
            return None
        raise self.refuse(cell.coordinate, f"holds {text!r}, which is not a number")

    def _stored_empty_text(self, cell: Any) -> bool:
        """Whether the formula in ``cell`` stored the empty text as its result (an empty cell
        to the eye, as ``=IFERROR(F11/F20,"")`` shows one; ``StoredValues.is_empty_text``).

        Raises:
            AerWorkbookError: the formula is one ``aer_formulas`` computes, to a number or an
                error: the empty result is stale.
        """
        if not self.frame.is_empty_text(cell.coordinate):
            return False
        try:
            computed: object = self._compute(self.ws.title, cell.coordinate)
        except FormulaUnsupported:
            return True
        except FormulaErrorValue as exc:
            computed = exc
        raise self.refuse(
            cell.coordinate, f"stores an empty result but its formula {cell.value} gives "
            f"{computed}: the stored result is stale; open and save the workbook in Excel so "
            "it stores the computed values"
        )

    def _check_formula(self, cell: Any, stored: float) -> None:
        """Refuse a formula cell whose stored result is not what its formula computes; one
        ``aer_formulas`` cannot compute is taken as stored."""
        try:
            computed = self._compute(self.ws.title, cell.coordinate)
        except FormulaUnsupported:
            return
        except FormulaErrorValue as exc:
            raise self.refuse(
                cell.coordinate, f"stores the result {stored!r} but its formula {cell.value} "
                f"gives {exc}: the stored result is stale"
            ) from exc
        if not math.isclose(stored, computed, rel_tol=FORMULA_TOLERANCE, abs_tol=1e-12):
            raise self.refuse(
                cell.coordinate, f"stores the result {stored!r} but its formula {cell.value} "
                f"computes {computed!r}: the stored result is stale (or a placeholder); open "
                "and save the workbook in Excel so it stores the computed values"
            )

    def _compute(self, sheet: str, ref: str) -> float:
        """The value of the formula in ``sheet!ref``, its referenced formulas computed too
        (never their stored results).

        Raises:
            FormulaUnsupported, FormulaErrorValue: as ``aer_formulas.evaluate``; also for a
                circular reference.
        """
        key = (sheet, ref)
        if key in self._computed:
            value = self._computed[key]
            if value is None:
                raise FormulaUnsupported(f"a circular reference through {sheet}!{ref}")
            return value
        formula = self.ws.parent[sheet][ref].value
        if not isinstance(formula, str):
            raise FormulaUnsupported(f"an array or table formula in {sheet}!{ref}")
        self._computed[key] = None
        try:
            value = evaluate(formula, lambda other, at: self._cell_value(other or sheet, at))
        except (FormulaUnsupported, FormulaErrorValue):
            del self._computed[key]
            raise
        self._computed[key] = value
        return value

    def _cell_value(self, sheet: str, ref: str) -> CellValue:
        """A referenced cell for ``_compute``: a number, text or None; a formula computed."""
        if sheet not in self.ws.parent.sheetnames:
            raise FormulaErrorValue(f"#REF! (no sheet {sheet!r})")
        ws = self.ws.parent[sheet]
        letters, row = coordinate_from_string(ref)
        if row > ws.max_row or column_index_from_string(letters) > ws.max_column:
            return None  # outside the used range: empty (and reading it would add a cell)
        cell = ws[ref]
        kind, value = cell.data_type, cell.value
        if kind == "f":
            return self._compute(sheet, ref)
        if value is None:
            return None
        if kind == "s":
            return str(value)
        if kind == "n" and isinstance(value, (int, float, Decimal)) and not isinstance(value, bool):
            return float(value)
        # an Excel error or a date: not computed here (a value cell holding one is refused
        # at its own cell)
        raise FormulaUnsupported(f"{sheet}!{ref} holds {value!r}")

    def _read_rows(self, blocks: list[_Block]) -> list[AerObservation]:
        """Column A from row 6: retailer rows gathered until a ``<Region> Total`` row closes
        their block and gives them its jurisdiction. A row reading a region's name or
        "Retailer" heads the next block; rows without a name must hold no values; rows left
        unclosed at the end may only be notes (no values)."""
        value_columns = {c: b for b in blocks for c in b.quarters}
        letters = {c: get_column_letter(c) for c in value_columns}
        expected = normalize_jurisdiction(_text(self.ws.cell(HEADING_ROW, 1).value) or "")
        done: set[str] = set()
        pending: list[tuple[int, str, dict[int, Decimal]]] = []
        block_start: int | None = None  # the first row of the block being read
        observations: list[AerObservation] = []
        rows = self.ws.iter_rows(min_row=FIRST_DATA_ROW, max_row=self.ws.max_row,
                                 max_col=max(max(value_columns), self.ws.max_column))
        for row, cells in enumerate(rows, start=FIRST_DATA_ROW):
            label_value = cells[0].value
            if cells[0].data_type == "f":  # a name copied by formula: its stored result
                label_value = self.frame.text(row, 1)
                if label_value is None:
                    raise self.refuse(f"A{row}", "is a formula with no stored result")
            if isinstance(label_value, (int, float)) and not isinstance(label_value, bool):
                raise self.refuse(f"A{row}", f"is the number {label_value!r}, not a retailer")
            label = _text(label_value)
            if label is None:
                notes = bool(done) and not any(v for _, _, v in pending)
                self._check_unnamed_row(row, cells, value_columns, notes)
                continue
            region = self._total_region(label, row)
            header = region is None and (
                label.casefold() == RETAILER_HEADER or normalize_jurisdiction(label) is not None
            )
            values: dict[int, Decimal] = {}
            for cell in cells[1:]:
                column = cell.column
                if column not in value_columns or header:
                    if cell.value is not None and _text(cell.value) is not None and (
                        not header or cell.data_type not in ("s",)
                    ):
                        raise self.refuse(
                            cell.coordinate, "holds a number in a block's header row"
                            if header else "holds a value in a column with no quarter label "
                            "in row 5"
                        )
                    continue
                number = self._value(row, column, cell)
                if number is not None:
                    values[column] = number
            if header:
                if any(v for _, _, v in pending):
                    raise self.refuse(
                        f"A{row}", f"{label!r} starts a block before the block above it was "
                        "closed by a '<Region> Total' row"
                    )
                pending = []  # note rows between blocks
                block_start = row
                expected = normalize_jurisdiction(label) or expected
                continue
            if region is None:
                if any(label.casefold() == other.casefold() for _, other, _ in pending):
                    raise self.refuse(f"A{row}", f"retailer {label!r} appears twice in one block")
                pending.append((row, label, values))
                block_start = row if block_start is None else block_start
                continue
            if region in done:
                raise self.refuse(f"A{row}", f"a second {region} block")
            if expected is not None and region != expected:
                raise self.refuse(
                    f"A{row}", f"closes the block headed {expected} with {label!r}"
                )
            done.add(region)
            expected = None
            cells_a = f"A{row if block_start is None else block_start}:A{row}"
            for retailer_row, retailer, retailer_values in pending:
                observations += self._observations(
                    value_columns, letters, retailer_row, retailer, region, cells_a,
                    retailer_values, False
                )
            observations += self._observations(
                value_columns, letters, row, label, region, cells_a, values, True
            )
            pending = []
            block_start = None
        if any(v for _, _, v in pending):
            raise self.refuse(
                f"A{pending[0][0]}", f"rows {pending[0][0]}-{pending[-1][0]} are not closed by "
                "a '<Region> Total' row"
            )
        if not done:
            raise self.refuse(f"A{FIRST_DATA_ROW}", "no '<Region> Total' row in column A")
        return observations

    def _check_unnamed_row(self, row: int, cells: tuple[Any, ...],
                           value_columns: dict[int, _Block], notes: bool) -> None:
        """A row with nothing in column A must hold nothing at all (a spacer row), or, with
        ``notes`` (after a ``<Region> Total`` row, nothing pending), text alone: a note such
        as "Source: AER" in column B. Before the first block text is refused too: a units
        row ("$'000") there would change what every figure means."""
        for cell in cells[1:]:
            if cell.value is not None and _text(cell.value) is not None or (
                cell.column in value_columns and _text(self.frame.text(row, cell.column))
            ):
                if notes and cell.data_type == "s":
                    continue
                raise self.refuse(
                    cell.coordinate, f"holds a value but A{row} names no retailer: name the "
                    f"retailer in A{row}, or clear the row (a units row such as \"$'000\" or "
                    "'%' belongs in the heading; a note, text alone, may follow a '<Region> "
                    "Total' row)"
                )

    def _total_region(self, label: str, row: int) -> str | None:
        """``aer.total_row_region`` of the label in ``A{row}``, its refusal naming the cell."""
        try:
            return total_row_region(label)
        except ValueError as exc:
            raise self.refuse(f"A{row}", str(exc)) from exc

    def _observations(
        self,
        value_columns: dict[int, _Block],
        letters: dict[int, str],
        row: int,
        retailer: str,
        region: str,
        block_cells: str,
        values: dict[int, Decimal],
        is_total: bool,
    ) -> list[AerObservation]:
        out: list[AerObservation] = []
        for column, value in values.items():
            block = value_columns[column]
            quarter = block.quarters[column]
            out.append(
                AerObservation(
                    schedule=self.schedule,
                    period=quarter.label,
                    period_start=quarter.start,
                    period_end=quarter.end,
                    retailer=retailer,
                    jurisdiction=region,
                    fuel=block.fuel,
                    customer_type=block.customer_type,
                    metric_key=block.heading.metric_key,
                    heading=block.heading.heading,
                    value=value,
                    is_total=is_total,
                    source_file=self.file,
                    sheet=self.ws.title,
                    cell=f"{letters[column]}{row}",
                    release=self.release.label,
                    block=block_cells,
                )
            )
        return out
