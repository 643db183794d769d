"""What kb reads out of the AER's retail-performance workbooks: the observation, the workbook,
the financial-year quarter, and the vocabulary (jurisdictions, fuels, customer types) the
reader maps labels onto and the store's filters accept.

The workbooks are the AER's quarterly "Retail energy market performance update" data,
Schedules 2, 3, 4 and 6 (``../shared/notes/next-capabilities.md`` "AER retail performance
data"). Reading them is ``kb_shared.market.aer_layout.read_workbook``; heading -> metric key is
``kb_shared.market.aer_metrics``. This module imports neither polars nor openpyxl, so the
catalog and the MCP server can use its types without loading them.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Context, Decimal, InvalidOperation
from pathlib import Path

#: Schedules that hold data. Schedule 1 is the glossary (notes, "AER retail performance data").
DATA_SCHEDULES = ("2", "3", "4", "6")

#: Jurisdiction codes as stored. "National" is ACT + NSW + QLD + SA + TAS in the AER's tables
#: (Victoria reports to its own regulator, the ESC); VIC is accepted should a workbook hold it.
NATIONAL = "National"
JURISDICTIONS = (NATIONAL, "ACT", "NSW", "QLD", "SA", "TAS", "VIC")
_JURISDICTION_NAMES = {
    "national": NATIONAL,
    "act": "ACT",
    "australian capital territory": "ACT",
    "nsw": "NSW",
    "new south wales": "NSW",
    "qld": "QLD",
    "queensland": "QLD",
    "sa": "SA",
    "south australia": "SA",
    "tas": "TAS",
    "tasmania": "TAS",
    "vic": "VIC",
    "victoria": "VIC",
}

ELECTRICITY = "electricity"
GAS = "gas"
RESIDENTIAL = "residential"
SMALL_BUSINESS = "small business"

#: Words in a sheet name, sheet title or heading that name a fuel or a customer type, as the
#: AER abbreviates them ("ResElec", "Res Gas", "SmlBiz Gas", "Disconnections Resi").
FUEL_WORDS = {
    ELECTRICITY: re.compile(r"\b(?:elec|electricity|electric)\b"),
    GAS: re.compile(r"\bgas\b"),
}
CUSTOMER_TYPE_WORDS = {
    RESIDENTIAL: re.compile(r"\b(?:res|resi|residential)\b"),
    SMALL_BUSINESS: re.compile(r"\b(?:sml ?biz|small ?biz|small business|smlbus|sb)\b"),
}

#: Excel keeps 15 significant digits (Microsoft, "Excel specifications and limits"); values
#: are rounded to that, then to ``VALUE_SCALE`` places, identically on SQLite and Postgres.
SIGNIFICANT_DIGITS = 15
VALUE_SCALE = 10
#: Largest magnitude a stored value may have (the column is numeric(28, 10)).
VALUE_LIMIT = Decimal(10) ** 18

#: Footnote marks that may end a label in column A: asterisks, superscript digits, one letter
#: or up to two digits in brackets ("NSW Total*", "AGL Sales Pty Ltd (b)", "Origin\u00b9").
FOOTNOTE_MARK = re.compile(
    r"(?:\s*(?:\*+|[\u00b9\u00b2\u00b3\u2070-\u2079]+|\((?:[a-z]|\d{1,2})\)"
    r"|\[(?:[a-z]|\d{1,2})\]))+$",
    re.IGNORECASE,
)

_QUARTER = re.compile(
    r"^q\s*([1-4])\s*(?:fy\s*)?(\d{4})\s*[-\u2010-\u2015/]\s*(\d{2}|\d{4})$", re.IGNORECASE
)
_FINANCIAL_YEAR = re.compile(
    r"^(?:fy\s*)?(\d{4})\s*[-\u2010-\u2015/]\s*(\d{2}|\d{4})$", re.IGNORECASE
)
_CALENDAR_QUARTER = re.compile(r"^q\s*([1-4])\s*(\d{4})$", re.IGNORECASE)
_FILE_QUARTER = re.compile(
    r"\b(?:quarter|q)\s*([1-4])\b[\s_,-]*(\d{4})\s*[-\u2010-\u2015_]\s*(\d{2}|\d{4})\b",
    re.IGNORECASE,
)
_FILE_SCHEDULE = re.compile(r"\bschedule[\s_-]*(\d{1,2})\b", re.IGNORECASE)
_QUARTER_START_MONTH = {1: 7, 2: 10, 3: 1, 4: 4}
_QUARTER_END = {1: (9, 30), 2: (12, 31), 3: (3, 31), 4: (6, 30)}


@dataclass(frozen=True, slots=True, order=True)
class Quarter:
    """A quarter of the Australian financial year (1 July - 30 June): Q1 = Jul-Sep, Q2 =
    Oct-Dec, Q3 = Jan-Mar, Q4 = Apr-Jun. ``year`` is the calendar year the financial year
    starts in (2025 for 2025-26). Orders chronologically."""

    year: int
    number: int

    @classmethod
    def parse(cls, text: str) -> Quarter:
        """``"Q3 2025-26"`` (also ``Q3 2025–26``, ``Q3 2025 - 26``, ``Q3 2025-2026``).

        Raises:
            ValueError: anything else, or a second year that does not follow the first.
        """
        clean = " ".join(str(text).split())
        match = _QUARTER.match(clean)
        if match is None:
            raise ValueError(f"{text!r} is not a quarter label like 'Q3 2025-26'")
        return cls._from_parts(text, *match.groups())

    @classmethod
    def from_file_name(cls, name: str) -> Quarter | None:
        """The release quarter in an AER file name or title ("... Quarter 3 2025-26 ...",
        "...Quarter 1  2024–25...", "...Quarter 3 2025 – 26..."), or ``None`` if absent.

        Raises:
            ValueError: a quarter whose second year does not follow the first.
        """
        match = _FILE_QUARTER.search(name)
        return None if match is None else cls._from_parts(name, *match.groups())

    @classmethod
    def _from_parts(cls, text: str, number: str, first: str, second: str) -> Quarter:
        year = int(first)
        follows = (year + 1) % 100 if len(second) == 2 else year + 1
        if int(second) != follows:
            raise ValueError(f"{text!r}: financial year {first}-{second} is not two years in a row")
        return cls(year, int(number))

    @classmethod
    def financial_year(cls, text: str) -> tuple[Quarter, Quarter] | None:
        """The first and last quarters of a financial year written ``"2025-26"`` (also
        ``FY2025-26``, ``2025\u201326``, ``2025/26``, ``2025-2026``), or None when ``text`` is
        not written so.

        Raises:
            ValueError: a second year that does not follow the first.
        """
        match = _FINANCIAL_YEAR.match(" ".join(str(text).split()))
        if match is None:
            return None
        first = cls._from_parts(text, "1", *match.groups())
        return first, cls(first.year, 4)

    @staticmethod
    def calendar_quarter_hint(text: str) -> str | None:
        """For a quarter written with one calendar year (``"Q3 2023"``), which is ambiguous
        here, the two labels it may mean, as a sentence; None for any other text."""
        match = _CALENDAR_QUARTER.match(" ".join(str(text).split()))
        if match is None:
            return None
        number, year = int(match.group(1)), int(match.group(2))
        within = Quarter(year - 1, number)  # the quarter numbered so in the year ending then
        calendar = Quarter(year - 1, number + 2) if number <= 2 else Quarter(year, number - 2)
        return (
            f"{text!r} names a calendar year, but the AER numbers quarters within the "
            f"financial year (1 July to 30 June): {within.label} is "
            f"{within.start:%b}-{within.end:%b %Y}, and the calendar quarter "
            f"{calendar.start:%b}-{calendar.end:%b %Y} is {calendar.label}"
        )

    @property
    def label(self) -> str:
        """The AER's label, ``"Q3 2025-26"``."""
        return f"Q{self.number} {self.year}-{(self.year + 1) % 100:02d}"

    @property
    def start(self) -> dt.date:
        """First day of the quarter (``Q3 2025-26`` -> 2026-01-01)."""
        calendar_year = self.year if self.number <= 2 else self.year + 1
        return dt.date(calendar_year, _QUARTER_START_MONTH[self.number], 1)

    @property
    def end(self) -> dt.date:
        """Last day of the quarter (``Q3 2025-26`` -> 2026-03-31)."""
        calendar_year = self.year if self.number <= 2 else self.year + 1
        month, day = _QUARTER_END[self.number]
        return dt.date(calendar_year, month, day)

    def __str__(self) -> str:
        return self.label


def schedule_from_file_name(name: str) -> str | None:
    """The schedule number in an AER file name or title (``"Schedule 3 - Quarter ..."`` ->
    ``"3"``), or ``None`` if it names none."""
    match = _FILE_SCHEDULE.search(name)
    return None if match is None else str(int(match.group(1)))


def normalize_words(text: str) -> str:
    """Lower-case words separated by single spaces: NFKC, camel case split ("ResElec" ->
    "res elec"), ``&`` -> "and", ``%`` -> "percent", every other non-alphanumeric a space."""
    clean = unicodedata.normalize("NFKC", str(text))
    clean = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", clean)
    clean = clean.replace("&", " and ").replace("%", " percent ").casefold()
    return " ".join(re.sub(r"[^0-9a-z]+", " ", clean).split())


def strip_footnote(label: str) -> str:
    """``label`` without the footnote marks that end it (``FOOTNOTE_MARK``): ``"NSW Total*"``
    -> ``"NSW Total"``; a label made only of marks is returned as it is."""
    return FOOTNOTE_MARK.sub("", label).strip() or label


#: Words (normalised) that make a column-A label read as a total row.
_TOTAL_WORDS = frozenset({"total", "totals", "subtotal"})


def total_row_region(label: str) -> str | None:
    """The jurisdiction a column-A total row closes the block of: ``"<Region> Total"`` or
    ``"Total <Region>"``, in any case, a footnote mark after it ignored (``"NSW Total*"``);
    None for any other label (a retailer's, even ``"TotalEnergies Retail"``).

    Raises:
        ValueError: a label that reads as a total but names no known region that way
            (``"NSW Sub-total"``, ``"Total"``, ``"Northern Total"``): read as a retailer's,
            it would give its block's rows to the region whose total comes next.
    """
    words = normalize_words(strip_footnote(label)).split()
    if not _TOTAL_WORDS.intersection(words):
        return None
    for region_words in (words[:-1] if words[-1] == "total" else None,
                         words[1:] if words[0] == "total" else None):
        region = normalize_jurisdiction(" ".join(region_words)) if region_words else None
        if region is not None:
            return region
    rest = [w for w in words if w not in _TOTAL_WORDS and w not in ("sub", "grand")]
    named = normalize_jurisdiction(" ".join(rest)) if rest else None
    if named is not None:
        raise ValueError(
            f"{label!r} reads as the total row of {named} but is not written '{named} Total': "
            f"rename it '{named} Total' so kb knows which block it closes"
        )
    if words[-1] in _TOTAL_WORDS or not rest:
        raise ValueError(
            f"{label!r} is not the total of a known region: a block closes with "
            f"'<Region> Total' ({', '.join(JURISDICTIONS)}), e.g. 'NSW Total'"
        )
    return None


def normalize_jurisdiction(text: str) -> str | None:
    """The jurisdiction code for a name or code in any case ("New South Wales", "nsw" ->
    ``"NSW"``), or ``None`` if it is not one."""
    return _JURISDICTION_NAMES.get(normalize_words(text))


def words_naming(text: str, table: dict[str, re.Pattern[str]]) -> set[str]:
    """Which entries of ``table`` (``FUEL_WORDS`` or ``CUSTOMER_TYPE_WORDS``) ``text`` names."""
    words = normalize_words(text)
    return {name for name, pattern in table.items() if pattern.search(words)}


def normalize_fuel(text: str) -> str | None:
    """``"electricity"`` or ``"gas"`` for a fuel written any way the AER writes it, else None."""
    found = words_naming(text, FUEL_WORDS)
    return found.pop() if len(found) == 1 else None


def normalize_customer_type(text: str) -> str | None:
    """``"residential"`` or ``"small business"`` for a customer type written any way the AER
    writes it ("Resi", "SmlBiz", "small_business"), else None."""
    found = words_naming(text, CUSTOMER_TYPE_WORDS)
    return found.pop() if len(found) == 1 else None


def stored_value(number: Decimal) -> Decimal:
    """``number`` rounded half-even to 15 significant digits, then to 10 decimal places: what
    the store keeps, so SQLite (binary floats) and Postgres (exact numerics) hold the same.

    Raises:
        ValueError: not finite, or 10**18 or more in magnitude.
    """
    if not number.is_finite():
        raise ValueError(f"{number} is not a finite number")
    rounded = Context(prec=SIGNIFICANT_DIGITS, rounding=ROUND_HALF_EVEN).plus(number)
    if abs(rounded) >= VALUE_LIMIT:
        raise ValueError(f"{number} is too large to store (limit 10**18)")
    try:
        return rounded.quantize(Decimal(1).scaleb(-VALUE_SCALE), rounding=ROUND_HALF_EVEN)
    except InvalidOperation as exc:  # pragma: no cover - excluded by VALUE_LIMIT
        raise ValueError(f"{number} cannot be stored") from exc


@dataclass(frozen=True, slots=True)
class AerObservation:
    """One published figure: ``value`` of metric ``metric_key`` for one retailer (or, with
    ``is_total``, the ``<Region> Total`` row, whose label is kept in ``retailer``) in one
    jurisdiction, fuel, customer type and quarter, with its cell of origin.

    ``value`` is a ``Decimal`` as published (rates are fractions, 0.0213 not 2.13), rounded by
    ``stored_value``. ``period`` is the quarter label, ``period_start``/``period_end`` its first
    and last days; ``release`` the label of the quarter whose update published the workbook.
    ``heading`` is the row-4 heading as the workbook wrote it; ``cell`` e.g. ``"G17"``;
    ``block`` the column-A cells of the jurisdiction block the row is in, from its first row
    (a region heading or its first retailer) to its ``<Region> Total`` row (``"A11:A14"``;
    empty for figures stored before kb recorded it). ``retailer`` is the row's label there.
    """

    schedule: str
    period: str
    period_start: dt.date
    period_end: dt.date
    retailer: str
    jurisdiction: str
    fuel: str
    customer_type: str
    metric_key: str
    heading: str
    value: Decimal
    is_total: bool
    source_file: str
    sheet: str
    cell: str
    release: str
    block: str

    @property
    def provenance(self) -> str:
        """``"<file> · <sheet>!<cell>"``, for citing the figure."""
        return f"{self.source_file} · {self.sheet}!{self.cell}"

    @property
    def label_cell(self) -> str:
        """The column-A cell holding the row's label (``"A17"`` for ``cell`` ``"G17"``)."""
        return "A" + self.cell.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


@dataclass(frozen=True, slots=True)
class AerHeading:
    """A metric heading as a workbook published it, and the metric key kb maps it to.

    ``additive``: values of the metric add up across retailers (counts, dollar amounts), so
    totals can be checked and summed; rates and averages do not. ``aliased``: the key came
    from the alias table (``aer_metrics.METRIC_ALIASES``), not from the heading's own words.
    """

    schedule: str
    metric_key: str
    heading: str
    additive: bool
    aliased: bool


@dataclass(frozen=True, slots=True)
class AerWorkbook:
    """Everything read from one workbook, ready for ``Catalog.sync_aer``.

    ``release`` is the quarter of the update that published it (from the file name or the
    document title, and equal to the latest quarter in its sheets). ``sheets`` are the data
    sheets read; ``skipped_sheets`` the (name, reason) of sheets that hold no data (a contents
    or notes page, a hidden sheet); ``not_reported`` counts the ``-``/``n/a``/empty cells,
    which are not observations.
    """

    path: Path
    schedule: str
    release: Quarter
    observations: tuple[AerObservation, ...]
    headings: tuple[AerHeading, ...]
    sheets: tuple[str, ...]
    skipped_sheets: tuple[tuple[str, str], ...] = ()
    not_reported: int = 0

    @property
    def source_file(self) -> str:
        """The workbook's file name (what observations cite)."""
        return self.path.name
