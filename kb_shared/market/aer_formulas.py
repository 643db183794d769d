"""Compute the simple Excel formulas of AER workbooks, so the reader can check the result a
workbook stored for a formula against the formula itself.

A workbook stores each formula's last computed result (``<v>`` beside ``<f>``), and that is
what the reader takes; but a stored result can be stale (the inputs were changed by a tool
that does not recalculate) or a placeholder (XlsxWriter stores 0 for every formula: its docs,
"Working with Formulas"), and reading it would be a wrong figure with no sign of it.
Rates are such formulas (``=F11/1402311``, a count over customers), and so are the national
retailer rows (``=SUM(F16,F20)``).

The grammar kept is what those use: numbers, cell references (``B11``, ``$B$11``,
``'Other sheet'!B11``), ranges inside ``SUM``, ``+ - * /``, unary signs, a postfix ``%`` and
parentheses, evaluated as Excel does (an empty cell is 0; ``SUM`` skips text and empty
cells; text in arithmetic is its number, or ``#VALUE!``). Anything else (``IF``, names, links
to other workbooks, array formulas) raises ``FormulaUnsupported``: the stored result is then
taken unchecked.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from openpyxl.utils import column_index_from_string, get_column_letter

#: A cell's value as the evaluator sees it: a number, text, or None for an empty cell.
CellValue = float | str | None
#: Reads a cell: (sheet name or None for the formula's own sheet, "B11") -> its value.
CellReader = Callable[[str | None, str], CellValue]

_TOKEN = re.compile(
    r"\s*(?:"
    r"(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)"
    r"|(?P<ref>(?:(?:'(?:[^']|'')+'|[A-Za-z_][A-Za-z0-9_.]*)!)?"
    r"\$?[A-Za-z]{1,3}\$?\d+(?::\$?[A-Za-z]{1,3}\$?\d+)?)(?![A-Za-z0-9_(])"
    r"|(?P<function>[A-Za-z][A-Za-z0-9.]*)\s*\("
    r"|(?P<op>[-+*/%(),])"
    r")"
)
_CELL = re.compile(r"\$?([A-Za-z]{1,3})\$?(\d+)")
#: Largest range a SUM may cover, in cells (a whole-column range is not an AER formula).
MAX_RANGE_CELLS = 100_000


class FormulaUnsupported(ValueError):
    """The formula uses something this evaluator does not compute; ``str`` says what."""


class FormulaErrorValue(ValueError):
    """The formula evaluates to an Excel error (``#DIV/0!``, ``#VALUE!``); ``str`` names it."""


@dataclass(frozen=True, slots=True)
class _Ref:
    sheet: str | None
    first: tuple[int, int]
    last: tuple[int, int]

    def cells(self) -> list[str]:
        (col1, row1), (col2, row2) = self.first, self.last
        cols = range(min(col1, col2), max(col1, col2) + 1)
        rows = range(min(row1, row2), max(row1, row2) + 1)
        if len(cols) * len(rows) > MAX_RANGE_CELLS:
            raise FormulaUnsupported(f"a range of {len(cols) * len(rows):,} cells")
        return [f"{get_column_letter(c)}{r}" for r in rows for c in cols]


def _parse_ref(text: str) -> _Ref:
    sheet = None
    if "!" in text:
        sheet, text = text.rsplit("!", 1)
        if sheet.startswith("'"):
            sheet = sheet[1:-1].replace("''", "'")
        if sheet.startswith("["):
            raise FormulaUnsupported(f"a link to another workbook ({sheet})")
    ends = []
    for part in text.split(":"):
        match = _CELL.fullmatch(part)
        assert match is not None  # the token pattern only lets cell references through
        ends.append((column_index_from_string(match.group(1).upper()), int(match.group(2))))
    return _Ref(sheet, ends[0], ends[-1])


def _tokens(formula: str) -> list[tuple[str, str]]:
    text = formula[1:] if formula.startswith("=") else formula
    out: list[tuple[str, str]] = []
    position = 0
    while position < len(text):
        if not text[position:].strip():
            break
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise FormulaUnsupported(f"{text[position:position + 20]!r}")
        kind = match.lastgroup
        assert kind is not None
        out.append((kind, match.group(kind)))
        position = match.end()
    return out


def evaluate(formula: str, read: CellReader) -> float:
    """The value of ``formula`` (``"=F11/1402311"``), reading cells with ``read``.

    Raises:
        FormulaUnsupported: the formula uses anything outside the grammar above.
        FormulaErrorValue: it evaluates to an Excel error (division by zero, text in
            arithmetic).
    """
    parser = _Parser(_tokens(formula), read)
    value = parser.expression()
    if parser.position != len(parser.tokens):
        raise FormulaUnsupported(f"unexpected {parser.tokens[parser.position][1]!r}")
    return value


class _Parser:
    """Recursive descent over the tokens: expression := term (('+'|'-') term)*;
    term := unary (('*'|'/') unary)*; unary := ('+'|'-') unary | postfix;
    postfix := primary '%'*; primary := number | ref | SUM(args) | '(' expression ')'."""

    def __init__(self, tokens: list[tuple[str, str]], read: CellReader) -> None:
        self.tokens = tokens
        self.position = 0
        self.read = read

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _take(self) -> tuple[str, str]:
        token = self._peek()
        if token is None:
            raise FormulaUnsupported("the formula ends early")
        self.position += 1
        return token

    def _expect(self, op: str) -> None:
        kind, text = self._take()
        if (kind, text) != ("op", op):
            raise FormulaUnsupported(f"expected {op!r}, found {text!r}")

    def expression(self) -> float:
        value = self.term()
        while (token := self._peek()) in (("op", "+"), ("op", "-")):
            self.position += 1
            right = self.term()
            value = value + right if token[1] == "+" else value - right
        return value

    def term(self) -> float:
        value = self.unary()
        while (token := self._peek()) in (("op", "*"), ("op", "/")):
            self.position += 1
            right = self.unary()
            if token[1] == "*":
                value *= right
            elif right == 0:
                raise FormulaErrorValue("#DIV/0!")
            else:
                value /= right
        return value

    def unary(self) -> float:
        token = self._peek()
        if token in (("op", "+"), ("op", "-")):
            self.position += 1
            value = self.unary()
            return -value if token[1] == "-" else value
        value = self.primary()
        while self._peek() == ("op", "%"):
            self.position += 1
            value /= 100
        return value

    def primary(self) -> float:
        kind, text = self._take()
        if kind == "number":
            return float(text)
        if kind == "ref":
            ref = _parse_ref(text)
            if ref.first != ref.last:
                raise FormulaUnsupported(f"the range {text} outside SUM")
            return _number(self.read(ref.sheet, ref.cells()[0]))
        if kind == "function":
            if text.upper() != "SUM":
                raise FormulaUnsupported(f"the function {text.upper()}")
            return self._sum()
        if (kind, text) == ("op", "("):
            value = self.expression()
            self._expect(")")
            return value
        raise FormulaUnsupported(f"unexpected {text!r}")

    def _sum(self) -> float:
        total = 0.0
        if self._peek() == ("op", ")"):
            self.position += 1
            return total
        while True:
            token = self._peek()
            following = (self.tokens[self.position + 1] if self.position + 1 < len(self.tokens)
                         else None)
            if token is not None and token[0] == "ref" and following in (("op", ","),
                                                                         ("op", ")")):
                self.position += 1
                ref = _parse_ref(token[1])
                for cell in ref.cells():
                    value = self.read(ref.sheet, cell)
                    if isinstance(value, float):
                        total += value  # SUM skips text and empty cells in references
            else:
                total += self.expression()
            kind, text = self._take()
            if (kind, text) == ("op", ")"):
                return total
            if (kind, text) != ("op", ","):
                raise FormulaUnsupported(f"expected ',' or ')' in SUM, found {text!r}")


def _number(value: CellValue) -> float:
    """A referenced cell in arithmetic: empty is 0, text that reads as a number is that
    number (Excel converts it), other text is ``#VALUE!``."""
    if value is None:
        return 0.0
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise FormulaErrorValue(f"#VALUE! (a cell holds the text {value!r})") from None
        if not math.isfinite(number):
            raise FormulaErrorValue(f"#VALUE! (a cell holds the text {value!r})")
        return number
    return value
