"""Benchmark 7 — the market-data tools over HTTP: ``search_aer_performance`` and
``search_compliance`` latency through ``kb-mcp serve`` (uvicorn) and the SDK's Streamable HTTP
client, on loopback.

Run from the repository root (not part of the unit test run; a few minutes, most of it the
server loading its embedding model)::

    .venv/bin/python -m benchmarks.market_serving
    .venv/bin/python -m benchmarks.market_serving --calls 200 --postgres "$KB_TEST_POSTGRES_URL"

What it does, per backend (SQLite always; Postgres with ``--postgres URL``, in a fresh
database built from ``sql/`` and read as ``kb_reader``, dropped afterwards):

1. Fills the catalog: the two AER releases of ``benchmarks/market_sync.py`` (Schedules 2, 3
   and 4, five jurisdictions of ``--retailers`` retailers: about 20,000 observations per
   release) through ``Catalog.sync_aer``, and ``--actions`` made-up enforcement actions
   through ``Catalog.replace_compliance_actions`` (what the Notion sync applies).
2. Starts ``kb-mcp serve`` on a free loopback port with local providers
   (``benchmarks/mcp_server.py``) and opens one ``mcp.Client`` session to ``/mcp``.
3. Calls each tool ``--calls`` times, one call at a time, cycling through a fixed set of
   argument shapes (one metric in one jurisdiction, an old heading, one retailer, no filter,
   a no-match that returns the whole vocabulary, the 500-row cap; a word query, an
   organisation, a regulator and a date range, the 200-row cap, a no-match). Two untimed
   calls of each shape come first. Every answer is checked: no ``isError``, the count the
   shape expects to be non-zero is.
4. Reports p50/p95/p99/max per tool and per shape, with the size of the text answered.

Output: ``benchmarks/results/market-serving-<date>[-<variant>].md``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from mcp import Client

from benchmarks.common import (
    LATENCY_HEADERS,
    PROVIDER_ROLES,
    Report,
    fresh_dir,
    latency_summary,
    log,
)
from benchmarks.market_sync import RELEASES
from benchmarks.market_sync import release_workbooks as write_release_workbooks
from benchmarks.mcp_server import Server, running_server, server_env
from benchmarks.postgres import reader_database
from kb_shared.market.aer_layout import read_workbook
from kb_shared.stores.catalog import Catalog, ComplianceAction
from kb_shared.stores.sql import make_engine

#: The argument shapes each tool cycles through: (label, arguments, must match something).
AER_SHAPES: tuple[tuple[str, dict[str, Any], bool], ...] = (
    ("one metric, one jurisdiction",
     {"metric": "customers_disconnected_for_non_payment", "jurisdiction": "NSW"}, True),
    ("metric by heading, one quarter",
     {"metric": "Residential customers on hardship programs", "period_from": "Q3 2025-26",
      "period_to": "Q3 2025-26"}, True),
    ("one retailer", {"retailer": "retailer 007 pty ltd"}, True),
    ("no filter (100 rows)", {}, True),
    ("no match (full vocabulary)", {"retailer": "Nobody Energy"}, False),
    ("no filter, 500 rows", {"limit": 500}, True),
)
COMPLIANCE_SHAPES: tuple[tuple[str, dict[str, Any], bool], ...] = (
    ("word query", {"query": "hardship"}, True),
    ("organisation", {"organisation": "Retailer 012"}, True),
    ("regulator + dates + min fine",
     {"regulatory_body": "aer", "date_from": "2022-01-01", "date_to": "2024-12-31",
      "min_fine": 10000}, True),
    ("no filter, 200 rows", {"limit": 200}, True),
    ("no match (facets of all)", {"organisation": "Nobody Energy"}, False),
)
REGULATORS = ("AER", "ESC", "ACCC", "QCA", "ESCOSA")
STATUSES = ("Paid", "Open", "Closed", "Appealed")
MISCONDUCT = ("Hardship", "Disconnection", "Life support", "Billing", "Misleading conduct",
              "Explicit informed consent")


@dataclass
class Timed:
    """The calls of one (tool, shape): seconds each, text characters answered, failures."""

    seconds: list[float] = field(default_factory=list)
    text_chars: int = 0
    failures: list[str] = field(default_factory=list)


def made_up_actions(count: int) -> list[ComplianceAction]:
    """``count`` deterministic enforcement actions (about one in seven without a fine)."""
    actions = []
    for i in range(count):
        fine = None if i % 7 == 3 else Decimal(1000 + (i * 7919) % 2_000_000) + Decimal("0.5")
        actions.append(ComplianceAction(
            page_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"kb-bench-action-{i}")),
            notion_url=f"https://www.notion.so/bench-{i}",
            summary=f"{MISCONDUCT[i % len(MISCONDUCT)]} breaches found in review {i}",
            organisation=f"Retailer {i % 150:03d} Pty Ltd",
            sector="Retail",
            action_date=dt.date(2018, 1, 1) + dt.timedelta(days=(i * 37) % 2900),
            regulatory_body=REGULATORS[i % len(REGULATORS)],
            status=STATUSES[i % len(STATUSES)],
            fine=fine,
            source_url=f"https://example.org/notices/{i}",
            misconduct_types=(MISCONDUCT[i % len(MISCONDUCT)],),
        ))
    return actions


def fill(catalog: Catalog, work: Path, retailers: int, actions: int) -> tuple[int, int]:
    """Sync both AER releases and the actions into ``catalog``; (observations read, actions)."""
    read = 0
    for release in RELEASES:
        folder = work / release.label.replace(" ", "_")
        folder.mkdir(parents=True, exist_ok=True)
        books = [read_workbook(p) for p in write_release_workbooks(folder, release, retailers)]
        read += sum(len(b.observations) for b in books)
        catalog.sync_aer(books)
    catalog.replace_compliance_actions(made_up_actions(actions), data_source_id="bench")
    return read, actions


async def measure(server: Server, calls: int) -> dict[tuple[str, str], Timed]:
    """``calls`` timed calls per tool through one SDK session (see the module docstring)."""
    plan = [("search_aer_performance", shape) for shape in AER_SHAPES]
    plan += [("search_compliance", shape) for shape in COMPLIANCE_SHAPES]
    timed: dict[tuple[str, str], Timed] = {(tool, s[0]): Timed() for tool, s in plan}
    async with Client(f"{server.base}/mcp") as client:
        for tool, (_, arguments, _) in plan * 2:  # warm-up, untimed
            await client.call_tool(tool, arguments)
        for tool, shapes in (("search_aer_performance", AER_SHAPES),
                             ("search_compliance", COMPLIANCE_SHAPES)):
            for n in range(calls):
                label, arguments, matches = shapes[n % len(shapes)]
                started = time.perf_counter()
                result = await client.call_tool(tool, arguments)
                seconds = time.perf_counter() - started
                entry = timed[(tool, label)]
                entry.seconds.append(seconds)
                text = result.content[0].text if result.content else ""
                entry.text_chars = max(entry.text_chars, len(text))
                count = (result.structured_content or {}).get("count", 0)
                if result.is_error or bool(count) != matches:
                    entry.failures.append(text[:200])
    return timed


def report_backend(report: Report, label: str, timed: dict[tuple[str, str], Timed],
                   startup: float) -> int:
    """Add one backend's tables to ``report``; return the number of failed calls."""
    report.heading(f"{label}")
    report.text(f"Server start-up (process start to /healthz, embedding model loaded): "
                f"{startup:.1f} s.")
    rows = []
    for tool in ("search_aer_performance", "search_compliance"):
        seconds = [s for (t, _), entry in timed.items() if t == tool for s in entry.seconds]
        rows.append([tool, *latency_summary(seconds).cells()])
    report.table(("tool", *LATENCY_HEADERS), rows)
    shape_rows = []
    failed = 0
    for (tool, shape), entry in timed.items():
        failed += len(entry.failures)
        shape_rows.append([tool, shape, *latency_summary(entry.seconds).cells(),
                           f"{entry.text_chars:,}", len(entry.failures)])
    report.text("Per argument shape (text chars: the longest text answer of that shape):")
    report.table(("tool", "shape", *LATENCY_HEADERS, "text chars", "failed"), shape_rows)
    for (tool, shape), entry in timed.items():
        if entry.failures:
            report.text(f"Failures of {tool} / {shape}: {entry.failures[:2]}")
    return failed


def run_backend(report: Report, label: str, home: Path, work: Path, args: argparse.Namespace,
                env_extra: dict[str, str], writer_url: str) -> int:
    """Fill, serve, measure and report one backend; the number of failed calls."""
    catalog = Catalog(make_engine(writer_url))
    catalog.ensure_schema()
    try:
        read, actions = fill(catalog, work, args.retailers, args.actions)
    finally:
        catalog.close()
    log(f"{label}: synced {read:,} AER observations and {actions:,} actions")
    report.fact(f"{label} data", f"{read:,} AER observations read (two releases), "
                f"{actions:,} enforcement actions")
    local = {f"KB_{role}_PROVIDER": "local" for role in PROVIDER_ROLES}
    env = server_env(home, **local, **env_extra)
    with running_server(home, work / "server.log", env=env) as server:
        log(f"{label}: kb-mcp at {server.base} after {server.startup_seconds:.1f} s")
        timed = asyncio.run(measure(server, args.calls))
    failed = report_backend(report, label, timed, server.startup_seconds)
    for tool in ("search_aer_performance", "search_compliance"):
        seconds = [s for (t, _), e in timed.items() if t == tool for s in e.seconds]
        summary = latency_summary(seconds)
        print(f"{label} {tool}: p50 {summary.p50_ms:.1f} ms, p95 {summary.p95_ms:.1f} ms "
              f"({summary.n} calls)")
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    """Parse options and run (exit code 1 when any call failed or answered unexpectedly)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.market_serving",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=200, help="timed calls per tool")
    parser.add_argument("--retailers", type=int, default=60,
                        help="retailers per jurisdiction (60: about 20,000 observations)")
    parser.add_argument("--actions", type=int, default=2000, help="enforcement actions")
    parser.add_argument("--postgres", metavar="URL", help="also run on this Postgres server "
                        "(a superuser URL; a fresh database is created and dropped)")
    parser.add_argument("--variant", default="", help="report file suffix")
    args = parser.parse_args(argv)
    if args.calls < 1:
        parser.error("--calls must be at least 1")

    work = fresh_dir("market_serving")
    report = Report("market-serving", "Market-data tools over HTTP (kb-mcp serve)",
                    variant=args.variant)
    password = sa.make_url(args.postgres).password if args.postgres else None
    if password:  # the report is committed: never with the server's password
        report.command = report.command.replace(password, "***")
    report.fact("calls per tool", f"{args.calls}, one at a time, one SDK session "
                "(Streamable HTTP client) on loopback")
    report.fact("providers", "all local (KB_*_PROVIDER=local)")
    failed = 0
    sqlite_home = work / "sqlite"
    sqlite_home.mkdir()
    failed += run_backend(report, "SQLite", sqlite_home, sqlite_home, args, {},
                          f"sqlite:///{sqlite_home / 'kb.sqlite'}")
    if args.postgres:
        pg_home = work / "postgres"
        pg_home.mkdir()
        with reader_database(args.postgres, "kb_bench_market") as (writer_url, reader_url):
            failed += run_backend(
                report, "Postgres (kb_reader)", pg_home, pg_home, args,
                {"KB_DATABASE_URL": writer_url, "KB_READER_DATABASE_URL": reader_url},
                writer_url,
            )
    report.heading("Method")
    report.text(
        "Each call is timed in the client from `call_tool` to its parsed result (JSON-RPC "
        "over HTTP, pydantic validation of the result and its structuredContent included). "
        "The server is stateless JSON (`kb_mcp.http`); client and server share the machine's "
        "cores. Shapes are called in turn, so each tool's percentiles mix them; the "
        "per-shape table separates the cheap filters from the 500-row and vocabulary answers."
    )
    report.write()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
