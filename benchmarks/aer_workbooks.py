"""Write workbooks in the AER retail-performance layout, for the AER tests
(``tests/market/aer_fixtures.py`` gives the data) and ``benchmarks/market_sync.py``.

The layout is the one ``kb_shared/market/aer_layout.py`` documents: a title in B3, headings
merged over five quarter columns in row 4 (an empty spacer column after a block when asked),
quarter labels in row 5, ``A4`` "National", ``A5`` "Retailer"; column A holds the National
block first (each retailer's national figure a ``SUM`` formula over its jurisdiction rows),
then one block per jurisdiction, each closed by a ``<Region> Total`` row (a ``SUM`` formula).
A rate block's retailer cells are formulas dividing the same row's count cell (``numerator``)
by the retailer's denominator (``=B11/1402311``); its ``<Region> Total`` cells are literal
fractions, as the AER publishes them. openpyxl writes formulas without their results, so the
results are added to the saved file afterwards, as Excel stores them (``<v>`` beside ``<f>``).

``write_workbook`` returns every value cell it wrote (``WrittenCell``), which is what a test
compares the reader against.
"""

from __future__ import annotations

import re
import zipfile
from xml.sax.saxutils import escape
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import openpyxl
from openpyxl.utils import get_column_letter

from kb_shared.market.aer import NATIONAL, Quarter

#: What a value function returns for one cell: a number, a "not reported" text ("-",
#: "n/a") or None for an empty cell.
Value = int | float | str | None
ValueFn = Callable[[str, str, Quarter], Value]

_MAIN_XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"
_MAIN_XLSM = "application/vnd.ms-excel.sheet.macroEnabled.main+xml"
_FORMULA_CELL = re.compile(r'<c r="([A-Z]+[0-9]+)"([^>]*)><f>([^<]*)</f><v\s*/>')


@dataclass(frozen=True)
class BlockSpec:
    """One heading and its five quarter columns.

    ``value`` gives a jurisdiction retailer's cell; national and total cells are ``SUM``
    formulas over it. With ``ratio=(numerator, denominator)`` instead, every cell (national
    and totals too) is the fraction of the summed numerator over the summed denominator, "-"
    where the numerator is not reported; with ``numerator`` (the index of the sheet's block
    that publishes the numerator) a retailer's fraction is a formula over that block's cell
    in the same row and quarter, else a literal. Totals are always literal.
    """

    heading: str
    value: ValueFn | None = None
    ratio: tuple[ValueFn, ValueFn] | None = None
    spacer_after: bool = False
    numerator: int | None = None


@dataclass(frozen=True)
class SheetSpec:
    """One data sheet: its name, its B3 title, its blocks; ``blank_row_between_blocks``
    leaves an empty row after each ``<Region> Total``."""

    name: str
    title: str
    blocks: tuple[BlockSpec, ...]
    blank_row_between_blocks: bool = False


@dataclass(frozen=True)
class WrittenCell:
    """A value cell as written: where, under which heading, for whom, which quarter, and the
    value Excel would show (None when the cell says "not reported" or is empty)."""

    file: str
    sheet: str
    cell: str
    heading: str
    jurisdiction: str
    retailer: str
    is_total: bool
    period: str
    value: int | float | None
    formula: bool


def _number(value: Value) -> int | float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class _SheetWriter:
    def __init__(
        self,
        file: str,
        ws: openpyxl.worksheet.worksheet.Worksheet,
        spec: SheetSpec,
        quarters: Sequence[Quarter],
        retailers: Mapping[str, Sequence[str]],
    ) -> None:
        self.file, self.ws, self.spec = file, ws, spec
        self.quarters, self.retailers = quarters, retailers
        self.cells: list[WrittenCell] = []
        self.cached: dict[str, int | float] = {}
        #: block -> the first column of its quarters
        self.first_columns: dict[int, int] = {}

    def write(self) -> None:
        ws, spec = self.ws, self.spec
        ws["B3"] = spec.title
        ws["A4"] = NATIONAL
        ws["A5"] = "Retailer"
        columns: list[tuple[BlockSpec, list[int]]] = []
        column = 2
        for block in spec.blocks:
            block_columns = list(range(column, column + len(self.quarters)))
            ws.cell(4, column, block.heading)
            ws.merge_cells(start_row=4, start_column=column, end_row=4,
                           end_column=block_columns[-1])
            for c, quarter in zip(block_columns, self.quarters, strict=True):
                ws.cell(5, c, quarter.label)
            self.first_columns[len(columns)] = column
            columns.append((block, block_columns))
            column = block_columns[-1] + (2 if block.spacer_after else 1)
        national = sorted({r for names in self.retailers.values() for r in names})
        layout: list[tuple[str, list[str]]] = [(NATIONAL, national)]
        layout += [(region, list(names)) for region, names in self.retailers.items()]
        rows: dict[tuple[str, str], int] = {}
        row = 6
        for region, names in layout:
            for name in names:
                rows[region, name] = row
                row += 1
            rows[region, ""] = row  # the total row
            row += 2 if spec.blank_row_between_blocks else 1
        for region, names in layout:
            total_row = rows[region, ""]
            first = rows[region, names[0]]
            for name in names:
                self.ws.cell(rows[region, name], 1, name)
            self.ws.cell(total_row, 1, f"{region} Total")
            for block, block_columns in columns:
                for c, quarter in zip(block_columns, self.quarters, strict=True):
                    for name in names:
                        self._retailer_cell(block, region, name, quarter, rows, c)
                    self._total_cell(block, region, names, quarter, first, total_row, c)

    def _put(self, row: int, column: int, block: BlockSpec, region: str, retailer: str,
             is_total: bool, quarter: Quarter, value: Value, formula: str | None) -> None:
        ref = f"{get_column_letter(column)}{row}"
        number = _number(value)
        if formula is not None:
            self.ws[ref] = formula
            assert number is not None
            self.cached[ref] = number
        elif value is not None:
            self.ws[ref] = value
        self.cells.append(WrittenCell(self.file, self.spec.name, ref, block.heading, region,
                                      f"{region} Total" if is_total else retailer, is_total,
                                      quarter.label, number, formula is not None))

    def _sums(self, block: BlockSpec, pairs: list[tuple[str, str]], quarter: Quarter
              ) -> tuple[float | int | None, float | int | None, bool]:
        """(numerator sum, denominator sum, any marker) over (region, retailer) pairs."""
        assert block.ratio is not None
        numerator, denominator = block.ratio
        num: float | int | None = None
        den: float | int | None = None
        marker = False
        for region, name in pairs:
            n = numerator(region, name, quarter)
            if _number(n) is None:
                marker = marker or n is not None
                continue
            num = (num or 0) + n  # type: ignore[operator]
            den = (den or 0) + (_number(denominator(region, name, quarter)) or 0)
        return num, den, marker

    def _ratio_value(self, block: BlockSpec, pairs: list[tuple[str, str]], quarter: Quarter
                     ) -> Value:
        num, den, marker = self._sums(block, pairs, quarter)
        if num is None or not den:
            return "-" if marker or num is not None else None
        return num / den

    def _ratio_formula(self, block: BlockSpec, pairs: list[tuple[str, str]], quarter: Quarter,
                       row: int, column: int) -> str | None:
        """``=<numerator cell>/<denominator>`` for a retailer's fraction, or None when the
        block has no ``numerator`` or the fraction is not a number."""
        if block.numerator is None:
            return None
        num, den, _ = self._sums(block, pairs, quarter)
        if num is None or not den:
            return None
        offset = column - self.first_columns[self.spec.blocks.index(block)]
        source = get_column_letter(self.first_columns[block.numerator] + offset)
        return f"={source}{row}/{den!r}"

    def _state_pairs(self, name: str) -> list[tuple[str, str]]:
        return [(region, name) for region, names in self.retailers.items() if name in names]

    def _retailer_cell(self, block: BlockSpec, region: str, name: str, quarter: Quarter,
                       rows: dict[tuple[str, str], int], column: int) -> None:
        row = rows[region, name]
        if block.ratio is not None:
            pairs = self._state_pairs(name) if region == NATIONAL else [(region, name)]
            value = self._ratio_value(block, pairs, quarter)
            formula = self._ratio_formula(block, pairs, quarter, row, column)
            self._put(row, column, block, region, name, False, quarter, value, formula)
            return
        assert block.value is not None
        if region != NATIONAL:
            value = block.value(region, name, quarter)
            self._put(row, column, block, region, name, False, quarter, value, None)
            return
        parts = [block.value(r, n, quarter) for r, n in self._state_pairs(name)]
        numbers = [p for p in (_number(v) for v in parts) if p is not None]
        if not numbers:
            marker = next((p for p in parts if p is not None), None)
            self._put(row, column, block, region, name, False, quarter, marker, None)
            return
        letter = get_column_letter(column)
        refs = ",".join(f"{letter}{rows[r, n]}" for r, n in self._state_pairs(name))
        self._put(row, column, block, region, name, False, quarter, sum(numbers),
                  f"=SUM({refs})")

    def _total_cell(self, block: BlockSpec, region: str, names: list[str], quarter: Quarter,
                    first: int, total_row: int, column: int) -> None:
        if block.ratio is not None:
            pairs = ([p for n in names for p in self._state_pairs(n)] if region == NATIONAL
                     else [(region, n) for n in names])
            value = self._ratio_value(block, pairs, quarter)
            self._put(total_row, column, block, region, "", True, quarter, value, None)
            return
        assert block.value is not None
        if region == NATIONAL:
            pairs = [pair for name in names for pair in self._state_pairs(name)]
            parts = [block.value(r, n, quarter) for r, n in pairs]
        else:
            parts = [block.value(region, n, quarter) for n in names]
        total = sum(p for p in (_number(v) for v in parts) if p is not None)
        letter = get_column_letter(column)
        self._put(total_row, column, block, region, "", True, quarter, total,
                  f"=SUM({letter}{first}:{letter}{total_row - 1})")


def write_workbook(
    path: str | Path,
    sheets: Sequence[SheetSpec],
    quarters: Sequence[Quarter],
    retailers: Mapping[str, Sequence[str]],
    *,
    extra_sheets: Sequence[str] = (),
    cache_formulas: bool = True,
    edit: Callable[[openpyxl.Workbook], None] | None = None,
    results: Mapping[tuple[str, str], int | float | str] | None = None,
) -> list[WrittenCell]:
    """Write an AER-layout workbook at ``path`` (``.xlsx``, or ``.xlsm`` with the
    macro-enabled content type) and return every value cell written.

    Args:
        sheets: the data sheets, in order, after ``extra_sheets`` (empty non-data sheets such
            as "Contents").
        quarters: the quarter columns of every block, oldest first.
        retailers: jurisdiction -> its retailers (the National block is their union).
        cache_formulas: store each formula's result as Excel does; False leaves them without
            one (a workbook openpyxl wrote and nobody opened in Excel).
        edit: called on the workbook before saving, to break the layout on purpose.
        results: (sheet, cell) -> the stored result of a formula that ``edit`` wrote.
    """
    path = Path(path)
    book = openpyxl.Workbook()
    book.remove(book.active)
    for name in extra_sheets:
        book.create_sheet(name)["A1"] = f"{name} of this workbook"
    written: list[WrittenCell] = []
    cached: dict[int, dict[str, int | float | str]] = {}
    for spec in sheets:
        ws = book.create_sheet(spec.name)
        writer = _SheetWriter(path.name, ws, spec, quarters, retailers)
        writer.write()
        written += writer.cells
        cached[book.sheetnames.index(spec.name) + 1] = writer.cached
    if edit is not None:
        edit(book)
    for (sheet, ref), value in (results or {}).items():
        cached.setdefault(book.sheetnames.index(sheet) + 1, {})[ref] = value
    book.save(path)
    _store_results(path, cached if cache_formulas else {}, path.suffix.lower() == ".xlsm")
    return written


def _store_results(path: Path, cached: dict[int, dict[str, int | float | str]],
                   macro: bool) -> None:
    """Rewrite the saved file with each formula's result in its ``<v>`` (and, for ``.xlsm``,
    the macro-enabled workbook content type)."""
    if not cached and not macro:
        return
    with zipfile.ZipFile(path) as source:
        parts = [(info, source.read(info.filename)) for info in source.infolist()]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as target:
        for info, data in parts:
            match = re.fullmatch(r"xl/worksheets/sheet(\d+)\.xml", info.filename)
            if match and int(match.group(1)) in cached:
                results = cached[int(match.group(1))]

                def fill(m: re.Match[str], results: dict[str, int | float | str] = results) -> str:
                    value = results.get(m.group(1))
                    if value is None:
                        return m.group(0)
                    ref, attributes, formula = m.groups()
                    if isinstance(value, str):
                        return (f'<c r="{ref}"{attributes} t="str"><f>{formula}</f>'
                                f"<v>{escape(value)}</v>")
                    return f'<c r="{ref}"{attributes}><f>{formula}</f><v>{value!r}</v>'

                data = _FORMULA_CELL.sub(fill, data.decode("utf-8")).encode("utf-8")
            elif macro and info.filename == "[Content_Types].xml":
                data = data.replace(_MAIN_XLSX.encode(), _MAIN_XLSM.encode())
            target.writestr(info, data)
