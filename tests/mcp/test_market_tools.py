"""``search_aer_performance`` and ``search_compliance`` through the SDK's in-memory client
(``Client(server)``) on a KB_HOME filled by the real syncs: ``Catalog.sync_aer`` of the two
fixture releases (``tests/market/aer_fixtures.py``) and ``sync_notion`` of tracker pages
written here, served by the mock Notion API (``tests/market/notion_server.py``).

Expected counts and totals are computed in the test: for the AER from the cells the fixture
writer wrote (``WrittenCell``), for the tracker from the fines written below; never from kb.
The Postgres variant (the ``kb_reader`` role) is ``test_market_postgres.py``, which reuses the
builders and checks of this module.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client

from benchmarks.aer_workbooks import WrittenCell
from kb_mcp.render_market import AER_ATTRIBUTION
from kb_mcp.server import build_server
from kb_shared.market.aer_layout import find_workbooks, read_workbook
from kb_shared.market.notion import NotionTracker, sync_notion
from kb_shared.settings import Settings
from kb_shared.stores import factory
from kb_shared.stores.catalog import Catalog
from tests.mcp.corpus import HashingEmbedder, corpus_settings
from tests.market.aer_fixtures import (
    AGL,
    ALINTA,
    DISCONNECTED,
    DISCONNECTED_REWORDED,
    ENERGYAUSTRALIA,
    HARDSHIP,
    HARDSHIP_RATE,
    ORIGIN,
    Q3_2025_26,
    Q4_2025_26,
    quarters_of,
    write_release,
    write_schedule,
)
from tests.market.notion_server import API_URL, DATA_SOURCE_ID, TOKEN, FakeNotion, tracker_page

pytestmark = pytest.mark.anyio

PREFIX = "Error executing tool {tool}: "
AER = "search_aer_performance"
COMPLIANCE = "search_compliance"
#: The one quarter the newer release does not republish: its figures stay the older release's.
OLDEST = quarters_of(Q3_2025_26)[0].label
DISCONNECTION_HEADINGS = {DISCONNECTED, DISCONNECTED_REWORDED}


# ---------------------------------------------------------------------------------------------
# Filling a KB_HOME (shared with the Postgres variant)
# ---------------------------------------------------------------------------------------------


def write_aer(catalog: Catalog, folder: Path) -> list[WrittenCell]:
    """Sync both fixture releases (older first) and return the cells that should be stored:
    the newer release's, plus the older release's for the quarter it alone publishes."""
    cells: dict[str, list[WrittenCell]] = {}
    for label, quarter in (("q3", Q3_2025_26), ("q4", Q4_2025_26)):
        written = write_release(folder / label, quarter)
        cells[label] = [c for file_cells in written.values() for c in file_cells]
        catalog.sync_aer([read_workbook(p) for p in find_workbooks(folder / label)])
    older = [c for c in cells["q3"] if c.period == OLDEST]
    return [c for c in cells["q4"] + older if c.value is not None]


def fine_pages() -> list[dict[str, Any]]:
    """The tracker of the compliance tests; every fine is written here."""
    return [
        tracker_page("agl-hardship", summary="Failed to apply hardship protections",
                     organisation="AGL Energy Limited", sector="Retail", date="2025-02-14",
                     regulatory_body="AER", status="Paid", fine=1_500_000,
                     source="https://www.aer.gov.au/news/agl-hardship",
                     misconduct=("Hardship", "Disconnection")),
        tracker_page("agl-life-support", summary="Wrongful disconnection of a life support "
                     "customer", organisation="AGL Sales Pty Ltd", sector="Retail",
                     date="2023-05-02", regulatory_body="AER", status="Paid", fine=250_000.10,
                     misconduct=("Life support",)),
        tracker_page("agl-billing", summary="Investigation into billing",
                     organisation="agl energy ltd", sector="Retail", date="2025-09-30",
                     regulatory_body="ESC", status="Open", fine=None,
                     misconduct=("Billing",)),
        tracker_page("origin", summary="Life support register breaches",
                     organisation="Origin Energy Retail Pty Ltd", sector="Retail",
                     date="2024-10-01", regulatory_body="AER", status="Paid",
                     fine=2_000_000.50, misconduct=("Life support",)),
        tracker_page("red", summary="Misleading discounts; no penalty imposed",
                     organisation="Red Energy Pty Ltd", sector="Retail", date="2022-01-10",
                     regulatory_body="ACCC", status="Closed", fine=0,
                     misconduct=("Misleading conduct",)),
        tracker_page("energyaustralia", summary="Hardship policy not followed",
                     organisation="EnergyAustralia Pty Ltd", sector="Retail",
                     regulatory_body="AER", status="Paid", fine=1_200_000,
                     misconduct=("Hardship",)),
        tracker_page("trashed", summary="Duplicate entry", organisation="AGL Energy Limited",
                     regulatory_body="AER", status="Paid", fine=9_999_999, in_trash=True),
    ]


#: Actions of one made-up regulator, to pass the 200-row cap: fine i * $1,000.25.
BULK = 230
BULK_BODY = "Bulk Regulator"


def bulk_pages() -> list[dict[str, Any]]:
    """``BULK`` actions of ``BULK_BODY``, one a day from 2020-01-01 (fines i * $1,000.25)."""
    return [
        tracker_page(f"bulk-{i}", summary=f"Late reporting {i}",
                     organisation=f"Bulk Retailer {i:03d}", sector="Wholesale",
                     date=f"2020-{1 + (i - 1) // 28:02d}-{1 + (i - 1) % 28:02d}",
                     regulatory_body=BULK_BODY, status="Closed", fine=i * 1000.25)
        for i in range(1, BULK + 1)
    ]


def write_tracker(catalog: Catalog) -> None:
    """Sync ``fine_pages() + bulk_pages()`` from the mock Notion API (the trashed page is
    served flagged, as API 2025-09-03 may)."""
    fake = FakeNotion(fine_pages() + bulk_pages())
    fake.serve_trashed = True
    with httpx.Client(transport=httpx.MockTransport(fake.handle)) as http:
        tracker = NotionTracker(TOKEN, DATA_SOURCE_ID, api_url=API_URL, http_client=http,
                                sleep=lambda _: None)
        sync_notion(catalog, tracker)


def make_server(settings: Settings, embedder: HashingEmbedder):
    """A server on ``settings`` (the market tools need neither the index nor the model)."""
    return build_server(settings, embedder=embedder, warm=False)


def text_of(result) -> str:
    """The first text block of a tool result."""
    return result.content[0].text


async def call(server, tool: str, **arguments):
    async with Client(server) as client:
        return await client.call_tool(tool, arguments)


# ---------------------------------------------------------------------------------------------
# Expected values, from the written cells
# ---------------------------------------------------------------------------------------------


def nsw_disconnections(cells: Iterable[WrittenCell]) -> list[WrittenCell]:
    """NSW retailers' disconnection figures (either heading), as stored."""
    return [c for c in cells if c.heading in DISCONNECTION_HEADINGS and c.jurisdiction == "NSW"
            and not c.is_total]


def per_period(cells: Iterable[WrittenCell]) -> dict[str, Decimal]:
    totals: dict[str, Decimal] = {}
    for cell in cells:
        totals[cell.period] = totals.get(cell.period, Decimal(0)) + Decimal(str(cell.value))
    return totals


def check_nsw_disconnections(result, cells: list[WrittenCell]) -> None:
    """The exact count, total, per-quarter totals, rows and provenance of
    ``metric=<old heading>, jurisdiction=nsw`` against the written cells."""
    expected = nsw_disconnections(cells)
    by_cell = {(c.file, c.sheet, c.cell): c for c in expected}
    periods = per_period(expected)
    total = sum(periods.values(), Decimal(0))
    structured = result.structured_content
    assert result.is_error is False
    assert structured["status"] == "ok"
    assert structured["count"] == len(expected) == 18  # 3 retailers x 6 quarters
    assert Decimal(structured["total"]) == total == Decimal(31_760)
    assert {p["period"]: (Decimal(p["total"]), p["rows"]) for p in structured["period_totals"]} \
        == {period: (value, 3) for period, value in periods.items()}
    assert periods["Q3 2025-26"] == 1_852 + 1_502 + 2_113  # AGL revised 1,840 -> 1,852
    rows = structured["rows"]
    assert [r["number"] for r in rows] == list(range(1, 19))
    for row in rows:
        cell = by_cell[(row["source_file"], row["sheet"], row["cell"])]
        assert (row["retailer"], row["period"], Decimal(row["value"])) == (
            cell.retailer, cell.period, Decimal(str(cell.value)))
        assert row["release"] == ("Q3 2025-26" if cell.period == OLDEST else "Q4 2025-26")
    # the published NSW Total of each quarter equals the quarter's total
    assert {t["period"]: Decimal(t["value"]) for t in structured["region_totals"]} == periods
    assert structured["metric"]["headings"] == [DISCONNECTED, DISCONNECTED_REWORDED]
    text = text_of(result)
    assert (
        f"Total over all 18 matching figures: {total:,} (a sum over 6 quarters: right for "
        "events such as disconnections; for a count at each quarter's end, such as customer "
        "numbers, read the per-quarter totals)."
    ) in text
    agl = next(c for c in expected if c.retailer == AGL and c.period == "Q3 2025-26")
    assert (f"[4] Q3 2025-26 · NSW · {AGL} · electricity, residential · 1,852 — "
            f"{agl.file} · {agl.sheet}!{agl.cell} (release Q4 2025-26)") in text
    assert text.rstrip().endswith(AER_ATTRIBUTION)
    assert structured["synced_at"] is not None and "Last synced: 20" in text


def check_tracker_totals(result) -> None:
    """The whole tracker's count and fine total: the six live actions plus the bulk ones."""
    structured = result.structured_content
    bulk_total = sum((Decimal(i) * Decimal("1000.25") for i in range(1, BULK + 1)), Decimal(0))
    fines = Decimal("1500000") + Decimal("250000.10") + Decimal("2000000.50") + 0 \
        + Decimal("1200000") + bulk_total
    assert result.is_error is False
    assert (structured["count"], Decimal(structured["fine_total"])) == (6 + BULK, fines)
    assert (structured["with_fine"], structured["without_fine"]) == (5 + BULK, 1)


# ---------------------------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def market_home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[WrittenCell]]:
    """A KB_HOME with both AER releases and the tracker synced; the AER cells stored."""
    home = tmp_path_factory.mktemp("kbmarket")
    catalog = factory.open_catalog(corpus_settings(home))
    try:
        cells = write_aer(catalog, home / "aer")
        write_tracker(catalog)
    finally:
        catalog.close()
    return home, cells


@pytest.fixture(scope="module")
def server(market_home: tuple[Path, list[WrittenCell]], embedder: HashingEmbedder):
    """The server on ``market_home``, one per module (each client session opens the stores
    anew; see ``server`` in tests/mcp/conftest.py)."""
    return make_server(corpus_settings(market_home[0]), embedder)


@pytest.fixture
def cells(market_home: tuple[Path, list[WrittenCell]]) -> list[WrittenCell]:
    return market_home[1]


@pytest.fixture(scope="module")
def empty_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A KB_HOME whose catalog exists but has never been synced."""
    home = tmp_path_factory.mktemp("kbempty")
    factory.open_catalog(corpus_settings(home)).close()
    return home


# ---------------------------------------------------------------------------------------------
# Listing
# ---------------------------------------------------------------------------------------------


async def test_both_tools_are_listed_read_only_with_bounded_arguments(server) -> None:
    async with Client(server) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    for name, cap in ((AER, 500), (COMPLIANCE, 200)):
        tool = tools[name]
        assert (tool.annotations.read_only_hint, tool.annotations.idempotent_hint,
                tool.annotations.open_world_hint) == (True, True, False)
        properties = tool.input_schema["properties"]
        limit = properties["limit"]
        assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, cap, 100)
        assert "required" not in tool.input_schema  # every filter is optional
        for argument, schema in properties.items():
            strings = [s for s in schema.get("anyOf", [schema]) if s.get("type") == "string"]
            assert all("maxLength" in s for s in strings), argument
    aer = tools[AER].input_schema["properties"]
    assert set(aer) == {"retailer", "jurisdiction", "fuel", "customer_type", "schedule",
                        "metric", "period_from", "period_to", "limit"}
    assert aer["metric"]["anyOf"][0]["maxLength"] == 500
    compliance = tools[COMPLIANCE].input_schema["properties"]
    assert compliance["query"]["anyOf"][0]["maxLength"] == 2000
    assert compliance["min_fine"]["anyOf"][0]["minimum"] == 0
    # each description says when to use which tool
    assert "Use it for numbers about the market. Use search_compliance for enforcement " \
           "actions" in tools[AER].description
    assert "search_docs for what the rules require" in tools[AER].description
    assert "Use it for enforcement actions" in tools[COMPLIANCE].description
    assert "search_aer_performance for numbers about the market" in tools[COMPLIANCE].description
    assert ("For numbers about the market use\nsearch_aer_performance; for enforcement actions "
            "(fines, penalties) use search_compliance.") in tools["search_docs"].description
    # the structured rows carry no prose: no summary, no published heading
    outputs = {name: tools[name].output_schema["$defs"] for name in (AER, COMPLIANCE)}
    assert "heading" not in outputs[AER]["AerFigureRef"]["properties"]
    assert "summary" not in outputs[COMPLIANCE]["ComplianceActionRef"]["properties"]


# ---------------------------------------------------------------------------------------------
# search_aer_performance
# ---------------------------------------------------------------------------------------------


async def test_one_metric_in_one_jurisdiction_has_the_exact_count_and_total(
    server, cells: list[WrittenCell]
) -> None:
    result = await call(server, AER, metric=DISCONNECTED, jurisdiction="nsw")
    check_nsw_disconnections(result, cells)


async def test_an_old_heading_a_new_heading_and_the_key_return_the_same_rows(
    server, cells: list[WrittenCell]
) -> None:
    expected = [c for c in cells if c.heading in DISCONNECTION_HEADINGS and not c.is_total]
    by_old = await call(server, AER, metric=DISCONNECTED.upper(), limit=500)
    by_new = await call(server, AER, metric=DISCONNECTED_REWORDED, limit=500)
    by_key = await call(server, AER, metric="customers_disconnected_for_non_payment", limit=500)
    rows = [r.structured_content["rows"] for r in (by_old, by_new, by_key)]
    assert rows[0] == rows[1] == rows[2]
    # 6 quarters of 3 NSW, 3 QLD and 4 national retailers, less Alinta's "-" in QLD and in
    # the National block for Q3 2024-25
    assert len(rows[0]) == by_old.structured_content["count"] == len(expected) == 58
    assert by_old.structured_content["total"] == by_key.structured_content["total"]


async def test_filters_ignore_case_and_accept_other_spellings(server, cells) -> None:
    result = await call(server, AER, retailer="agl sales pty ltd", jurisdiction="New South Wales",
                        fuel="Elec", customer_type="Resi", schedule=3, metric=DISCONNECTED,
                        period_from="Q3 2025-26", period_to="2026-03-31")
    structured = result.structured_content
    assert structured["count"] == 1
    assert Decimal(structured["total"]) == 1_852
    assert structured["filters"] == {
        "retailer": "agl sales pty ltd", "jurisdiction": "New South Wales", "fuel": "Elec",
        "customer_type": "Resi", "schedule": "3", "metric": DISCONNECTED,
        "period_from": "2026-01-01", "period_to": "2026-03-31",
    }
    assert structured["region_totals"][0]["retailer"] == "NSW Total"


async def test_several_metrics_have_a_count_but_no_total(server, cells) -> None:
    result = await call(server, AER, jurisdiction="QLD", period_from="Q4 2025-26")
    expected = [c for c in cells if c.jurisdiction == "QLD" and not c.is_total
                and c.period == "Q4 2025-26"]
    structured = result.structured_content
    # 3 retailers x (Schedule 2: 3 sheets x 2 blocks + Schedule 3: 3 + Schedule 4: 2)
    assert structured["count"] == len(expected) == 3 * (6 + 3 + 2)
    assert (structured["metric"], structured["total"]) == (None, None)
    assert "span several metrics, so there is no total" in text_of(result)
    # with several metrics each line names the heading as published
    assert '· Schedule 3 "Residential customers reconnected after disconnection" = ' \
        in text_of(result)


async def test_a_rate_is_listed_without_a_total(server) -> None:
    result = await call(server, AER, metric="disconnection rate", jurisdiction="NSW",
                        retailer=AGL, period_from="Q3 2025-26", period_to="Q3 2025-26")
    structured = result.structured_content
    assert (structured["count"], structured["total"]) == (1, None)
    assert Decimal(structured["rows"][0]["value"]) == (
        Decimal(1_852) / Decimal(1_402_311)).quantize(Decimal("1e-10"))
    assert "disconnection_rate is a rate or an average" in text_of(result)


async def test_no_match_lists_every_value_present(server) -> None:
    result = await call(server, AER, retailer="Nobody Energy", metric="disconnections")
    structured = result.structured_content
    assert result.is_error is False
    assert (structured["status"], structured["count"], structured["rows"]) == ("no_match", 0, [])
    assert structured["region_totals"] == []
    text = text_of(result)
    assert text.startswith("No rows match these filters (retailer='Nobody Energy', "
                           "metric='disconnections'); kb does hold AER data")
    assert "has been synced" not in text
    vocabulary = structured["vocabulary"]
    assert vocabulary["retailers"] == sorted([AGL, ALINTA, ENERGYAUSTRALIA, ORIGIN])
    assert (vocabulary["jurisdictions"], vocabulary["fuels"], vocabulary["customer_types"]) == (
        ["NSW", "National", "QLD"], ["electricity", "gas"], ["residential", "small business"])
    assert vocabulary["periods"] == [q.label for q in quarters_of(Q3_2025_26)] + ["Q4 2025-26"]
    for name in vocabulary["retailers"] + vocabulary["periods"]:
        assert name in text
    assert (f'- customers_disconnected_for_non_payment (Schedule 3): "{DISCONNECTED}" | '
            f'"{DISCONNECTED_REWORDED}"') in text
    assert "fuels: electricity, gas · customer types: residential, small business" in text


async def test_the_row_list_is_capped_but_the_count_is_not(server, cells) -> None:
    result = await call(server, AER, limit=500)
    retailer_cells = [c for c in cells if not c.is_total]
    structured = result.structured_content
    assert (structured["returned"], structured["limit"], structured["truncated"]) == (
        500, 500, True)
    assert structured["count"] == len(retailer_cells) > 500
    assert (f"{len(retailer_cells):,} AER figure(s) match no filters: the first 500 listed "
            "(latest quarter first); the count and totals cover all") in text_of(result)
    assert text_of(result).count("\n[") >= 500


async def test_structured_content_does_not_repeat_the_text(server) -> None:
    result = await call(server, AER, metric=DISCONNECTED, jurisdiction="NSW")
    dumped = json.dumps(result.structured_content, ensure_ascii=False)
    assert " · " not in dumped  # the provenance line is only in the text
    assert "No rows match" not in dumped and "Total over all" not in dumped
    assert "heading" not in result.structured_content["rows"][0]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"limit": 501}, "less than or equal to 500"),
        ({"limit": 0}, "greater than or equal to 1"),
        ({"retailer": "x" * 501}, "at most 500 characters"),
        ({"period_from": "Q5 2025-26"}, "period_from must be a quarter like 'Q3 2025-26' or a "
                                        "date as YYYY-MM-DD, got 'Q5 2025-26'"),
        ({"period_from": "Q4 2025-26", "period_to": "Q1 2025-26"},
         "period_from 'Q4 2025-26' is after period_to 'Q1 2025-26'"),
    ],
)
async def test_bad_aer_arguments_are_errors_that_say_what_to_send(
    server, arguments: dict, message: str
) -> None:
    result = await call(server, AER, **arguments)
    assert result.is_error is True
    assert message in text_of(result)


async def test_no_aer_data_is_told_apart_from_no_match(empty_home: Path, embedder) -> None:
    server = make_server(corpus_settings(empty_home), embedder)
    result = await call(server, AER, metric=DISCONNECTED)
    assert result.is_error is False
    assert (result.structured_content["status"], result.structured_content["count"]) == (
        "no_data", 0)
    assert result.structured_content["synced_at"] is None
    text = text_of(result)
    assert text.startswith("No AER retail performance data has been synced into kb")
    assert "`kb sync aer SOURCE`" in text and "No rows match" not in text


async def test_a_catalog_without_tables_names_the_commands(tmp_path: Path, embedder) -> None:
    server = make_server(corpus_settings(tmp_path), embedder)  # nothing ever created here
    result = await call(server, AER)
    assert result.is_error is True
    assert text_of(result).startswith(PREFIX.format(tool=AER) + "The AER tables do not exist")
    assert "`kb db init`, then sync with `kb sync aer SOURCE`" in text_of(result)


#: AGL in each block of "Hardship numbers", Q3 2025-26 (the Q4 2025-26 release's workbook:
#: Q3 2025-26 is column E of the count block and J of the rate block): its count, its rate
#: (count over its residential electricity customers), the block's Total count and rate, the
#: block's column-A cells and AGL's row. E.g. 31,204 / 1,402,311 = 0.02225184.
AGL_HARDSHIP = {
    "National": (48_544, "0.0219176004", 150_486, "0.0213134106", "A6:A10", 6),
    "NSW": (31_204, "0.02225184", 93_770, "0.0222802878", "A11:A14", 11),
    "QLD": (17_340, "0.0213407505", 56_716, "0.0198865908", "A15:A18", 15),
}


async def test_a_total_that_leaves_out_the_national_rows_says_how_many_figures_it_sums(
    server,
) -> None:
    result = await call(server, AER, metric=HARDSHIP, period_from="Q3 2025-26",
                        period_to="Q3 2025-26")
    structured = result.structured_content
    national = [r for r in structured["rows"] if r["jurisdiction"] == "National"]
    summed = [r for r in structured["rows"] if r["jurisdiction"] != "National"]
    assert (structured["count"], len(national), len(summed)) == (10, 4, 6)
    assert Decimal(structured["total"]) == sum(Decimal(r["value"]) for r in summed) == 150_486
    text = text_of(result)
    assert "Total over 6 of the 10 matching figures: 150,486." in text
    assert "Total over all" not in text


@pytest.mark.parametrize("jurisdiction", sorted(AGL_HARDSHIP))
async def test_a_retailers_rate_count_and_total_come_from_their_own_rows(
    server, jurisdiction: str
) -> None:
    count, rate, total, total_rate, block, row = AGL_HARDSHIP[jurisdiction]
    total_row = block.split(":")[1]
    for metric, value, total_value, column in ((HARDSHIP, count, total, "E"),
                                               (HARDSHIP_RATE, rate, total_rate, "J")):
        result = await call(server, AER, retailer=AGL, jurisdiction=jurisdiction, metric=metric,
                            period_from="Q3 2025-26", period_to="Q3 2025-26")
        structured = result.structured_content
        assert structured["count"] == 1
        [figure] = structured["rows"]
        assert (figure["retailer"], Decimal(figure["value"]), figure["period"]) == (
            AGL, Decimal(value), "Q3 2025-26")
        assert (figure["sheet"], figure["cell"], figure["label_cell"], figure["block"],
                figure["is_total"]) == ("Hardship numbers", f"{column}{row}", f"A{row}", block,
                                        False)
        [published] = structured["region_totals"]
        assert (published["retailer"], Decimal(published["value"]), published["label_cell"],
                published["block"], published["is_total"]) == (
            f"{jurisdiction} Total", Decimal(total_value), total_row, block, True)
        assert [h["heading"] for h in structured["matched_headings"]] == [metric]
        assert (f"· Hardship numbers!{column}{row} (release Q4 2025-26) [label A{row}, "
                f"{jurisdiction} block {block}]") in text_of(result)


async def test_an_old_heading_over_the_rewording_names_both_headings(server) -> None:
    result = await call(server, AER, metric=DISCONNECTED, jurisdiction="NSW",
                        period_from="Q3 2024-25", period_to="Q4 2024-25")
    structured = result.structured_content
    # 3 NSW retailers x 2 quarters; Q3 2024-25 is only in the older release (old heading)
    assert (structured["count"], Decimal(structured["total"])) == (6, 5_019 + 5_128)
    assert [(h["heading"], h["first_period"], h["last_period"], h["rows"])
            for h in structured["matched_headings"]] == [
        (DISCONNECTED, "Q3 2024-25", "Q3 2024-25", 3),
        (DISCONNECTED_REWORDED, "Q4 2024-25", "Q4 2024-25", 3)]
    assert structured["matched_outside_filters"] is False
    assert (f'Matched heading(s) as published: "{DISCONNECTED}" '
            "(customers_disconnected_for_non_payment, Schedule 3): Q3 2024-25, 3 figures; "
            f'"{DISCONNECTED_REWORDED}" (customers_disconnected_for_non_payment, Schedule 3): '
            "Q4 2024-25, 3 figures.") in text_of(result)


REWORDED = "Residential customers in hardship programs at the end of the quarter"


@pytest.fixture(scope="module")
def reworded_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A KB_HOME with Schedule 4 of both releases, the newer rewording the hardship count's
    heading with no alias in aer_metrics.METRIC_ALIASES."""
    home = tmp_path_factory.mktemp("kbreworded")

    def reword(book) -> None:
        book["Hardship numbers"]["B4"] = REWORDED

    older, _ = write_schedule(home / "aer" / "q3", Q3_2025_26, "4")
    newer, _ = write_schedule(home / "aer" / "q4", Q4_2025_26, "4", edit=reword)
    catalog = factory.open_catalog(corpus_settings(home))
    try:
        catalog.sync_aer([read_workbook(older)])
        catalog.sync_aer([read_workbook(newer)])
    finally:
        catalog.close()
    return home


async def test_an_old_heading_reworded_without_an_alias_still_answers(
    reworded_home: Path, embedder
) -> None:
    server = make_server(corpus_settings(reworded_home), embedder)
    result = await call(server, AER, metric=HARDSHIP, period_from="Q1 2025-26",
                        period_to="Q4 2025-26")
    structured = result.structured_content
    # the old heading's own quarters (Q1-Q3 2025-26) of 4 national and 6 state retailers
    assert (structured["status"], structured["count"]) == ("ok", 30)
    assert {p["period"]: Decimal(p["total"]) for p in structured["period_totals"]}[
        "Q3 2025-26"] == 150_486
    assert [(h["heading"], h["first_period"], h["last_period"], h["rows"])
            for h in structured["matched_headings"]] == [(HARDSHIP, "Q1 2025-26", "Q3 2025-26",
                                                          30)]
    assert (f'Matched heading(s) as published: "{HARDSHIP}" (hardship_customers, Schedule 4): '
            "Q1 2025-26 to Q3 2025-26, 30 figures.") in text_of(result)
    # asked past its last quarter: no match, but the answer names its heading and quarters
    # and, in the list of metrics, the new heading's release
    later = await call(server, AER, metric=HARDSHIP, period_from="Q4 2025-26")
    structured = later.structured_content
    assert (structured["status"], structured["matched_outside_filters"]) == ("no_match", True)
    assert [(h["heading"], h["first_period"], h["last_period"], h["rows"])
            for h in structured["matched_headings"]] == [(HARDSHIP, "Q3 2024-25", "Q3 2025-26",
                                                          48)]
    text = text_of(later)
    assert (f'The metric matched "{HARDSHIP}" (hardship_customers, Schedule 4): Q3 2024-25 to '
            "Q3 2025-26, 48 figures; none of those figures meets the other filters") in text
    assert (f'- residential_customers_in_hardship_programs_at_the_end_of_the_quarter '
            f'(Schedule 4): "{REWORDED}" — Q4 2025-26') in text


# ---------------------------------------------------------------------------------------------
# search_compliance
# ---------------------------------------------------------------------------------------------


async def test_the_whole_tracker_has_the_exact_count_and_fine_total(server) -> None:
    check_tracker_totals(await call(server, COMPLIANCE, limit=200))


async def test_a_retailer_in_another_case_with_pty_ltd_matches(server) -> None:
    result = await call(server, COMPLIANCE, query="AGL ENERGY PTY LTD")
    structured = result.structured_content
    # AGL Energy Limited ($1,500,000) and agl energy ltd (no fine); the trashed page is gone
    assert (structured["count"], Decimal(structured["fine_total"])) == (2, Decimal("1500000"))
    assert (structured["with_fine"], structured["without_fine"]) == (1, 1)
    text = text_of(result)
    assert "Fines: $1,500,000.00 in total over the 1 matching action(s) with a fine recorded; " \
           "1 has no fine recorded (not counted, and not $0" in text
    first, second = (r for r in structured["rows"])
    assert (first["organisation"], first["fine"]) == ("agl energy ltd", None)
    assert (second["organisation"], Decimal(second["fine"])) == ("AGL Energy Limited", 1_500_000)
    assert ("[1] 2025-09-30 · agl energy ltd · ESC · Open · no fine recorded · Billing — "
            f"Investigation into billing — Notion: {first['notion_url']}") in text
    assert ("[2] 2025-02-14 · AGL Energy Limited · AER · Paid · $1,500,000.00 · Disconnection, "
            "Hardship — Failed to apply hardship protections — Notion: "
            f"{second['notion_url']} · Source: https://www.aer.gov.au/news/agl-hardship") in text
    assert second["source_url"] == "https://www.aer.gov.au/news/agl-hardship"
    assert second["notion_url"].startswith("https://app.notion.com/p/")


async def test_a_zero_fine_is_a_fine_and_a_null_fine_is_none(server) -> None:
    zero = await call(server, COMPLIANCE, organisation="red energy")
    assert (zero.structured_content["count"], zero.structured_content["with_fine"]) == (1, 1)
    assert Decimal(zero.structured_content["rows"][0]["fine"]) == 0
    assert "· $0.00 ·" in text_of(zero)
    at_least = await call(server, COMPLIANCE, min_fine=0, regulatory_body="esc")
    assert at_least.structured_content["status"] == "no_match"  # no fine is not $0


async def test_filters_combine_and_are_echoed(server) -> None:
    result = await call(server, COMPLIANCE, regulatory_body="aer", status="PAID",
                        misconduct_type="hardship", date_from="2025-01-01",
                        date_to="2025-12-31", min_fine=1000)
    structured = result.structured_content
    assert [r["organisation"] for r in structured["rows"]] == ["AGL Energy Limited"]
    assert structured["filters"] == {
        "regulatory_body": "aer", "status": "PAID", "misconduct_type": "hardship",
        "date_from": "2025-01-01", "date_to": "2025-12-31", "min_fine": "1000.00",
    }
    facets = structured["facets"]
    assert facets["misconduct_type"]["values"] == [
        {"value": "Disconnection", "count": 1}, {"value": "Hardship", "count": 1}]
    assert "misconduct type: Disconnection (1), Hardship (1)" in text_of(result)


async def test_the_row_list_is_capped_at_200_but_the_totals_are_not(server) -> None:
    result = await call(server, COMPLIANCE, regulatory_body=BULK_BODY.lower(), limit=200)
    structured = result.structured_content
    fines = sum((Decimal(i) * Decimal("1000.25") for i in range(1, BULK + 1)), Decimal(0))
    assert (structured["count"], structured["returned"], structured["truncated"]) == (
        BULK, 200, True)
    assert Decimal(structured["fine_total"]) == fines == Decimal("26571641.25")  # 26,565 x 1,000.25
    assert "230 enforcement action(s) match regulatory_body='bulk regulator': the first 200 " \
           "listed (newest first)" in text_of(result)
    assert structured["facets"]["organisation"]["distinct"] == BULK
    assert len(structured["facets"]["organisation"]["values"]) == 50
    assert "… and 180 more" in text_of(result)
    too_many = await call(server, COMPLIANCE, limit=201)
    assert too_many.is_error is True
    assert "less than or equal to 200" in text_of(too_many)


async def test_no_match_lists_the_values_present(server) -> None:
    result = await call(server, COMPLIANCE, organisation="Nobody Energy")
    structured = result.structured_content
    assert (structured["status"], structured["count"], structured["facets_scope"]) == (
        "no_match", 0, "all")
    text = text_of(result)
    assert text.startswith("No enforcement action matches these filters "
                           "(organisation='Nobody Energy'); the tracker is synced")
    assert "Values present in the whole tracker (nothing matched)" in text
    assert f"regulatory body: {BULK_BODY} (230), AER (4), ACCC (1), ESC (1)" in text
    assert "has not been synced" not in text


async def test_structured_compliance_does_not_repeat_the_summaries(server) -> None:
    result = await call(server, COMPLIANCE, query="life support")
    assert result.structured_content["count"] == 2
    dumped = json.dumps(result.structured_content)
    assert "Life support register breaches" in text_of(result)
    assert "register breaches" not in dumped and "Wrongful disconnection" not in dumped


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"date_from": "2025-13-01"}, "date_from must be a date as YYYY-MM-DD, got '2025-13-01'"),
        ({"date_from": "2025-06-01", "date_to": "2025-01-01"},
         "date_from 2025-06-01 is after date_to 2025-01-01"),
        ({"min_fine": -1}, "greater than or equal to 0"),
        ({"query": "!!!"}, "query '!!!' has no letters or digits to match"),
        ({"query": "x" * 2001}, "at most 2000 characters"),
    ],
)
async def test_bad_compliance_arguments_are_errors_that_say_what_to_send(
    server, arguments: dict, message: str
) -> None:
    result = await call(server, COMPLIANCE, **arguments)
    assert result.is_error is True
    assert message in text_of(result)


async def test_no_compliance_data_is_told_apart_from_no_match(empty_home: Path, embedder) -> None:
    server = make_server(corpus_settings(empty_home), embedder)
    result = await call(server, COMPLIANCE, query="agl")
    structured = result.structured_content
    assert (structured["status"], structured["count"], structured["synced_at"]) == (
        "no_data", 0, None)
    text = text_of(result)
    assert text.startswith("The compliance tracker has not been synced into kb")
    assert "`kb sync notion`" in text and "No enforcement action matches" not in text
