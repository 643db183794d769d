"""What an AER workbook stored in each cell of one sheet, for ``aer_layout``'s reader (which
takes positions, merged ranges, formulas and cell types from openpyxl).

fastexcel (calamine, into a polars frame) gives the values, including the result Excel stored
for each formula. One stored result neither reader tells apart from no result at all: the
empty text a formula such as ``=IFERROR(F11/F20,"")`` shows as an empty cell. Excel types it
``str`` (``<c t="str"><f>...</f><v></v></c>``), where a formula saved by a tool that does not
compute has no type; openpyxl's read-only values mode reports that type, so the sheet is read
that way once, on the first formula found without a result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fastexcel
import openpyxl

from kb_shared.errors import AerWorkbookError


class StoredValues:
    """The values of one sheet, addressed by Excel row and column (1-based): each cell as a
    float (exact; None for text and empty cells) and as text (fastexcel writes floats to
    text with 9 decimals only, so text is used for text cells alone); and which formulas
    stored the empty text (``is_empty_text``).

    Args:
        numbers, texts: the sheet's columns, as fastexcel read them.
        path: the workbook file, read again only by ``is_empty_text``.
        sheet: the sheet's name.
    """

    def __init__(self, numbers: list[list[float | None]], texts: list[list[str | None]],
                 path: Path, sheet: str) -> None:
        self._numbers = numbers
        self._texts = texts
        self._path = path
        self._sheet = sheet
        self._empty_texts: frozenset[str] | None = None

    @staticmethod
    def _get(columns: list[list[Any]], row: int, column: int) -> Any:
        if column > len(columns):
            return None
        values = columns[column - 1]
        return values[row - 1] if row <= len(values) else None

    def number(self, row: int, column: int) -> float | None:
        """The cell's number, or None for text, an error or an empty cell."""
        return self._get(self._numbers, row, column)

    def text(self, row: int, column: int) -> str | None:
        """The cell's value as text, or None for an empty cell."""
        return self._get(self._texts, row, column)

    def is_empty_text(self, ref: str) -> bool:
        """Whether the cell ``ref`` (``"H12"``) stored the empty text as a formula's result
        (see the module docstring); the sheet is read for it on the first call."""
        if self._empty_texts is None:
            book = openpyxl.load_workbook(self._path, read_only=True, data_only=True,
                                          keep_links=False)
            try:
                self._empty_texts = frozenset(
                    cell.coordinate for row in book[self._sheet].iter_rows() for cell in row
                    if cell.data_type == "str" and cell.value in (None, "")
                )
            finally:
                book.close()
        return ref in self._empty_texts


def read_stored_values(
    values: fastexcel.ExcelReader, path: Path, sheet: str
) -> StoredValues:
    """The ``StoredValues`` of ``sheet`` in the workbook ``values`` opened (from ``path``).

    Raises:
        AerWorkbookError: fastexcel cannot read the sheet (the message names file and sheet).
    """
    columns: dict[str, list[list[Any]]] = {}
    for dtype in ("float", "string"):
        try:
            loaded = values.load_sheet_by_name(sheet, header_row=None, skip_rows=0, dtypes=dtype)
            frame = loaded.to_polars()
        except fastexcel.FastExcelError as exc:
            raise AerWorkbookError(path.name, sheet, None, f"cannot be read ({exc})") from exc
        columns[dtype] = [frame.to_series(i).to_list() for i in range(frame.width)]
    return StoredValues(columns["float"], columns["string"], path, sheet)
