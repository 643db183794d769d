"""Two AER releases of test workbooks in the real layout (written by
``benchmarks/aer_workbooks.py``), with the real national figures for Q3 2025-26 (residential
electricity; ``../shared/notes/next-capabilities.md``): 7,060,625 customers, 150,486 on
hardship programs, 8,724 disconnected in the quarter. The jurisdiction split, the other
quarters and the gas figures are made up, so that NSW + QLD (the two jurisdictions here) sum
to those national figures.

Release Q3 2025-26: Schedule 2 (``.xlsx``: a Contents sheet and three customer-number sheets),
Schedule 3 (``.xlsm``: ``Disconnections Resi`` with a spacer column) and Schedule 4 (``.xlsx``:
``Hardship numbers``), file names drifting as the AER's do. Release Q4 2025-26 republishes
Q4 2024-25 .. Q4 2025-26, rewords the disconnections heading (an alias in
``aer_metrics.METRIC_ALIASES``), adds an unmapped heading (a new metric), and revises NSW's
AGL disconnections for Q3 2025-26 from 1,840 to 1,852.

Rates (``Disconnection rate``, ``Hardship program participation rate``) are formulas over the
same row's count for every retailer row (``=B11/1402311``) and literal fractions on the
``<Region> Total`` rows, as the AER publishes them.

Not reported: QLD Alinta disconnections in Q3 2024-25 ("-"), NSW EnergyAustralia hardship in
Q4 2024-25 ("n/a"), QLD Origin small-business gas customers in Q1 2025-26 (empty).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.aer_workbooks import BlockSpec, SheetSpec, Value, WrittenCell, write_workbook
from kb_shared.market.aer import Quarter

AGL = "AGL Sales Pty Ltd"
ALINTA = "Alinta Energy Retail Sales Pty Ltd"
ENERGYAUSTRALIA = "EnergyAustralia Pty Ltd"
ORIGIN = "Origin Energy Electricity Limited"
RETAILERS = {"NSW": (AGL, ENERGYAUSTRALIA, ORIGIN), "QLD": (AGL, ALINTA, ORIGIN)}

Q3_2025_26 = Quarter(2025, 3)
Q4_2025_26 = Quarter(2025, 4)

#: Q3 2025-26 per (jurisdiction, retailer); each series' NSW + QLD is the national figure.
BASE: dict[str, dict[tuple[str, str], int]] = {
    "res_elec_customers": {
        ("NSW", AGL): 1_402_311, ("NSW", ENERGYAUSTRALIA): 1_288_940, ("NSW", ORIGIN): 1_517_402,
        ("QLD", AGL): 812_530, ("QLD", ALINTA): 402_118, ("QLD", ORIGIN): 1_637_324,
    },
    "hardship": {
        ("NSW", AGL): 31_204, ("NSW", ENERGYAUSTRALIA): 28_911, ("NSW", ORIGIN): 33_655,
        ("QLD", AGL): 17_340, ("QLD", ALINTA): 9_118, ("QLD", ORIGIN): 30_258,
    },
    "disconnections": {
        ("NSW", AGL): 1_840, ("NSW", ENERGYAUSTRALIA): 1_502, ("NSW", ORIGIN): 2_113,
        ("QLD", AGL): 1_011, ("QLD", ALINTA): 644, ("QLD", ORIGIN): 1_614,
    },
    "res_gas_customers": {
        ("NSW", AGL): 412_300, ("NSW", ENERGYAUSTRALIA): 288_150, ("NSW", ORIGIN): 351_020,
        ("QLD", AGL): 98_400, ("QLD", ALINTA): 31_250, ("QLD", ORIGIN): 60_115,
    },
    "sb_gas_customers": {
        ("NSW", AGL): 12_040, ("NSW", ENERGYAUSTRALIA): 8_115, ("NSW", ORIGIN): 10_930,
        ("QLD", AGL): 2_210, ("QLD", ALINTA): 905, ("QLD", ORIGIN): 1_780,
    },
}
NATIONAL_Q3_2025_26 = {"res_elec_customers": 7_060_625, "hardship": 150_486,
                       "disconnections": 8_724}
#: Change per quarter away from Q3 2025-26, as a fraction of the base.
GROWTH = {"res_elec_customers": 0.003, "hardship": 0.01, "disconnections": 0.02,
          "res_gas_customers": 0.002, "sb_gas_customers": 0.004}
NOT_REPORTED: dict[tuple[str, str, str, Quarter], Value] = {
    ("disconnections", "QLD", ALINTA, Quarter(2024, 3)): "-",
    ("hardship", "NSW", ENERGYAUSTRALIA, Quarter(2024, 4)): "n/a",
    ("sb_gas_customers", "QLD", ORIGIN, Quarter(2025, 1)): None,
}
#: (series, jurisdiction, retailer, quarter) -> value in the Q4 2025-26 release.
REVISIONS = {("disconnections", "NSW", AGL, Q3_2025_26): 1_852}

DISCONNECTED = "Residential customers disconnected for non-payment"
DISCONNECTED_REWORDED = "Residential customers disconnected for non-payment in the quarter"
DISCONNECTION_RATE = "Disconnection rate"
RECONNECTED = "Residential customers reconnected after disconnection"
CUSTOMERS = "Number of residential customers"
SB_CUSTOMERS = "Number of small business customers"
MARKET_CONTRACTS = "Customers on market retail contracts"
HARDSHIP = "Residential customers on hardship programs"
HARDSHIP_RATE = "Hardship program participation rate"

FILE_NAMES = {
    Q3_2025_26: {
        "2": "Schedule 2 - Quarter 3 2025-26 Retail Performance Data.xlsx",
        "3": "Schedule 3 - Quarter 3 2025\u201326 retail performance data.xlsm",
        "4": "Schedule 4 - Quarter 3  2025 \u2013 26 Retail Performance Data.xlsx",
    },
    Q4_2025_26: {
        "2": "Schedule 2 - Quarter 4 2025-26 Retail Performance Data.xlsx",
        "3": "Schedule 3 - Quarter 4 2025-26 Retail Performance Data.xlsm",
        "4": "Schedule 4 - Quarter 4 2025-26 Retail Performance Data.xlsx",
    },
}


def quarters_of(release: Quarter) -> list[Quarter]:
    """The five quarters a release publishes, oldest first (it republishes the previous four)."""
    out = [release]
    while len(out) < 5:
        last = out[0]
        out.insert(0, Quarter(last.year, last.number - 1) if last.number > 1
                   else Quarter(last.year - 1, 4))
    return out


def series_value(series: str, jurisdiction: str, retailer: str, quarter: Quarter,
                 release: Quarter) -> Value:
    """The figure ``release`` publishes for one retailer's cell (None: the retailer does not
    operate there)."""
    base = BASE[series].get((jurisdiction, retailer))
    if base is None:
        return None
    key = (series, jurisdiction, retailer, quarter)
    if key in NOT_REPORTED:
        return NOT_REPORTED[key]
    if release >= Q4_2025_26 and key in REVISIONS:
        return REVISIONS[key]
    offset = (quarter.year - Q3_2025_26.year) * 4 + quarter.number - Q3_2025_26.number
    return base + round(base * GROWTH[series] * offset)


def _fn(series: str, release: Quarter):
    return lambda j, r, q: series_value(series, j, r, q, release)


def _reconnections(release: Quarter):
    def value(j: str, r: str, q: Quarter) -> Value:
        disconnected = series_value("disconnections", j, r, q, release)
        return round(disconnected * 0.41) if isinstance(disconnected, int) else disconnected

    return value


def _market(series: str, release: Quarter):
    def value(j: str, r: str, q: Quarter) -> Value:
        customers = series_value(series, j, r, q, release)
        return round(customers * 0.83) if isinstance(customers, int) else customers

    return value


def release_sheets(release: Quarter) -> dict[str, list[SheetSpec]]:
    """Schedule -> the data sheets of that schedule's workbook in ``release``."""
    later = release >= Q4_2025_26
    elec, gas, sb = (_fn(s, release) for s in
                     ("res_elec_customers", "res_gas_customers", "sb_gas_customers"))
    disconnections = BlockSpec(DISCONNECTED_REWORDED if later else DISCONNECTED,
                               _fn("disconnections", release), spacer_after=True)
    rate = BlockSpec(DISCONNECTION_RATE, ratio=(_fn("disconnections", release), elec),
                     numerator=0)
    s3_blocks = (disconnections, rate)
    if later:
        s3_blocks += (BlockSpec(RECONNECTED, _reconnections(release)),)
    return {
        "2": [
            SheetSpec("ResElec Cust#s & Mkt Contr",
                      "Residential electricity customers and market retail contracts",
                      (BlockSpec(CUSTOMERS, elec),
                       BlockSpec(MARKET_CONTRACTS, _market("res_elec_customers", release)))),
            SheetSpec("Res Gas Cust#s & Mkt Contr",
                      "Residential gas customers and market retail contracts",
                      (BlockSpec(CUSTOMERS, gas),
                       BlockSpec(MARKET_CONTRACTS, _market("res_gas_customers", release))),
                      blank_row_between_blocks=True),
            SheetSpec("SmlBiz Gas Cust#s & Mkt Contr",
                      "Small business gas customers and market retail contracts",
                      (BlockSpec(SB_CUSTOMERS, sb),
                       BlockSpec(MARKET_CONTRACTS, _market("sb_gas_customers", release)))),
        ],
        "3": [SheetSpec("Disconnections Resi",
                        "Residential electricity customers disconnected for non-payment",
                        s3_blocks)],
        "4": [SheetSpec("Hardship numbers",
                        "Residential electricity customers on hardship programs",
                        (BlockSpec(HARDSHIP, _fn("hardship", release)),
                         BlockSpec(HARDSHIP_RATE, ratio=(_fn("hardship", release), elec),
                                   numerator=0)))],
    }


def write_release(folder: Path, release: Quarter, **options) -> dict[str, list[WrittenCell]]:
    """Write the three workbooks of ``release`` into ``folder``; file name -> cells written.
    ``options`` go to ``write_workbook`` (e.g. ``cache_formulas=False``, ``edit=...``)."""
    folder.mkdir(parents=True, exist_ok=True)
    written: dict[str, list[WrittenCell]] = {}
    for schedule, sheets in release_sheets(release).items():
        name = FILE_NAMES[release][schedule]
        extra = ("Contents",) if schedule == "2" else ()
        written[name] = write_workbook(folder / name, sheets, quarters_of(release), RETAILERS,
                                       extra_sheets=extra, **options)
    return written


def write_schedule(
    folder: Path, release: Quarter, schedule: str, **options
) -> tuple[Path, list[WrittenCell]]:
    """One schedule's workbook of ``release`` (path, cells written)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILE_NAMES[release][schedule]
    sheets = release_sheets(release)[schedule]
    return path, write_workbook(path, sheets, quarters_of(release), RETAILERS, **options)
