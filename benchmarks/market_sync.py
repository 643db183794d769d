"""Benchmark 6 — the AER retail-performance sync: parse + sync rows per second on workbooks of
at least 20,000 observations.

Run from the repository root (not part of the unit test run; about a minute)::

    .venv/bin/python -m benchmarks.market_sync
    .venv/bin/python -m benchmarks.market_sync --retailers 120 --postgres "$KB_TEST_POSTGRES_URL"

It writes two releases of Schedule 2, 3 and 4 workbooks in the real layout
(``benchmarks/aer_workbooks.py``: five jurisdictions of ``--retailers`` retailers each, the
National block, ``SUM`` formulas with stored results, five quarters per block) into
``benchmarks/work/market_sync``, then times, per backend (SQLite always; Postgres with
``--postgres URL``, in a fresh database it drops afterwards):

1. ``parse``: ``read_workbook`` of the first release (openpyxl + fastexcel);
2. ``first sync``: ``Catalog.sync_aer`` into empty tables (all inserts);
3. ``re-sync``: the same workbooks again (every row compared, nothing written);
4. ``next release``: the second release (four quarters updated, one inserted);
5. ``totals check`` and one ``search_aer`` over a metric.

The report goes to ``benchmarks/results/market-sync-<date>.md``.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

from benchmarks.aer_workbooks import BlockSpec, SheetSpec, write_workbook
from benchmarks.common import Report, Stopwatch, fresh_dir, log
from benchmarks.postgres import scratch_database
from kb_shared.market.aer import AerWorkbook, Quarter
from kb_shared.market.aer_layout import read_workbook
from kb_shared.stores.catalog import Catalog
from kb_shared.stores.sql import make_engine

JURISDICTIONS = ("ACT", "NSW", "QLD", "SA", "TAS")
RELEASES = (Quarter(2025, 3), Quarter(2025, 4))


def _number(*parts: object, scale: int) -> int:
    """A deterministic pseudo-random whole number below ``scale``."""
    digest = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % scale


def _quarters(release: Quarter) -> list[Quarter]:
    out = [release]
    while len(out) < 5:
        q = out[0]
        out.insert(0, Quarter(q.year, q.number - 1) if q.number > 1 else Quarter(q.year - 1, 4))
    return out


def _retailers(per_jurisdiction: int) -> dict[str, list[str]]:
    pool = [f"Retailer {i:03d} Pty Ltd" for i in range(int(per_jurisdiction * 1.6) + 1)]
    return {
        j: sorted(pool, key=lambda name, j=j: _number(j, name, scale=10**9))[:per_jurisdiction]
        for j in JURISDICTIONS
    }


def _series(name: str, scale: int, release: Quarter):
    def value(j: str, r: str, q: Quarter) -> int:
        revised = 1 if release == RELEASES[1] and q == RELEASES[0] else 0
        return _number(name, j, r, q.label, scale=scale) + revised

    return value


def release_workbooks(folder: Path, release: Quarter, per_jurisdiction: int) -> list[Path]:
    """Write one release's Schedule workbooks (``per_jurisdiction`` retailers in each of the
    five jurisdictions) into ``folder`` and return their paths, named as the AER names them."""
    customers = _series("customers", 400_000, release)
    contracts = _series("contracts", 300_000, release)
    gas = _series("gas", 100_000, release)
    disconnections = _series("disconnections", 3_000, release)
    hardship = _series("hardship", 10_000, release)
    books = {
        2: [SheetSpec("ResElec Cust#s & Mkt Contr", "Residential electricity customers",
                      (BlockSpec("Number of residential customers", customers),
                       BlockSpec("Customers on market retail contracts", contracts))),
            SheetSpec("Res Gas Cust#s & Mkt Contr", "Residential gas customers",
                      (BlockSpec("Number of residential customers", gas),
                       BlockSpec("Customers on market retail contracts", contracts))),
            SheetSpec("SmlBiz Gas Cust#s & Mkt Contr", "Small business gas customers",
                      (BlockSpec("Number of small business customers", gas),
                       BlockSpec("Customers on market retail contracts", contracts)))],
        3: [SheetSpec("Disconnections Resi", "Residential electricity customers disconnected",
                      (BlockSpec("Residential customers disconnected for non-payment",
                                 disconnections, spacer_after=True),
                       BlockSpec("Disconnection rate", ratio=(disconnections, customers))))],
        4: [SheetSpec("Hardship numbers", "Residential electricity customers on hardship",
                      (BlockSpec("Residential customers on hardship programs", hardship),
                       BlockSpec("Hardship program participation rate",
                                 ratio=(hardship, customers))))],
    }
    paths = []
    for schedule, sheets in books.items():
        suffix = ".xlsm" if schedule == 3 else ".xlsx"
        path = folder / (f"Schedule {schedule} - Quarter {release.number} "
                         f"{release.year}-{(release.year + 1) % 100:02d} Retail Performance "
                         f"Data{suffix}")
        write_workbook(path, sheets, _quarters(release), _retailers(per_jurisdiction))
        paths.append(path)
    return paths


def _rate(rows: int, seconds: float) -> str:
    return f"{rows / seconds:,.0f}" if seconds > 0 else "n/a"


def _run_backend(label: str, url: str, first: list[AerWorkbook], second: list[AerWorkbook],
                 rows: list[tuple]) -> None:
    catalog = Catalog(make_engine(url))
    catalog.ensure_schema()
    read = sum(len(b.observations) for b in first)
    try:
        for phase, books in (("first sync", first), ("re-sync", first), ("next release", second)):
            with Stopwatch() as watch:
                counts = catalog.sync_aer(books)
            n = sum(len(b.observations) for b in books)
            changed = (f"+{counts.inserted} ~{counts.updated} -{counts.deleted} "
                       f"={counts.unchanged}")
            rows.append((label, phase, n, changed, f"{watch.seconds:.2f}",
                         _rate(n, watch.seconds)))
            log(f"{label} {phase}: {n} rows in {watch.seconds:.2f} s ({changed})")
        with Stopwatch() as watch:
            check = catalog.check_aer_totals()
        rows.append((label, f"totals check ({'passed' if check.passed else 'FAILED'})",
                     check.checked, "", f"{watch.seconds:.2f}", _rate(check.checked,
                                                                      watch.seconds)))
        with Stopwatch() as watch:
            found = catalog.search_aer(metric="customers_disconnected_for_non_payment")
        rows.append((label, "search_aer (one metric, all rows)", found.count, "",
                     f"{watch.seconds:.3f}", ""))
    finally:
        catalog.close()
    assert read > 0


def main() -> None:
    """Parse and sync generated releases on SQLite (and Postgres with ``--postgres``), then
    write the rows/s report to ``benchmarks/results/``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--retailers", type=int, default=60,
                        help="retailers per jurisdiction (60 gives about 20,000 observations)")
    parser.add_argument("--postgres", metavar="URL", help="also run on this Postgres server "
                        "(a superuser URL; a fresh database is created and dropped)")
    args = parser.parse_args()

    work = fresh_dir("market_sync")
    report = Report("market-sync", "AER retail-performance sync benchmark")
    report.fact("retailers per jurisdiction", args.retailers)
    report.fact("workbooks", work)

    parsed: dict[Quarter, list[AerWorkbook]] = {}
    parse_rows: list[tuple] = []
    for release in RELEASES:
        folder = work / release.label.replace(" ", "_")
        folder.mkdir()
        with Stopwatch() as writing:
            paths = release_workbooks(folder, release, args.retailers)
        with Stopwatch() as watch:
            parsed[release] = [read_workbook(p) for p in paths]
        n = sum(len(b.observations) for b in parsed[release])
        size = sum(p.stat().st_size for p in paths)
        parse_rows.append((release.label, len(paths), f"{size / 1e6:.1f} MB", n,
                           f"{writing.seconds:.1f}", f"{watch.seconds:.2f}",
                           _rate(n, watch.seconds)))
        log(f"parse {release.label}: {n} observations in {watch.seconds:.2f} s")

    sync_rows: list[tuple] = []
    _run_backend("SQLite", f"sqlite:///{work / 'catalog.sqlite'}", parsed[RELEASES[0]],
                 parsed[RELEASES[1]], sync_rows)
    if args.postgres:
        with scratch_database(args.postgres, "kb_bench_aer") as url:
            _run_backend("Postgres", url, parsed[RELEASES[0]], parsed[RELEASES[1]], sync_rows)

    report.heading("Parse (read_workbook: openpyxl for the layout, fastexcel for the values)")
    report.text("The first release's parse includes the one-off import of polars and openpyxl.")
    report.table(("release", "workbooks", "size", "observations", "write s", "parse s",
                  "observations/s"), parse_rows)
    report.heading("Sync (Catalog.sync_aer, one transaction)")
    report.text("changes: +inserted ~updated -deleted =unchanged. The next release "
                "republishes four quarters (every row's cell and release change: updates) and "
                "adds one (inserts).")
    report.table(("backend", "phase", "rows", "changes", "seconds", "rows/s"), sync_rows)
    first = parse_rows[0]
    sqlite_first = next(r for r in sync_rows if r[0] == "SQLite" and r[1] == "first sync")
    total = float(first[5]) + float(sqlite_first[4])
    report.heading("Parse + first sync on SQLite")
    report.text(f"{first[3]:,} observations in {total:.2f} s: "
                f"**{_rate(first[3], total)} rows/s** end to end.")
    report.write()


if __name__ == "__main__":
    main()
