"""The AER tables: sync (idempotent, latest release wins), search (exact count and totals over
the whole match set, old headings, vocabulary) and the totals check; on SQLite and on
Postgres (a fresh database per session on ``KB_TEST_POSTGRES_URL``; skipped with the reason
when it is unset, a failure under ``KB_REQUIRE_SERVICES=1``).

Expected numbers come from the cells the fixture writer wrote (``WrittenCell``) and the
fixture's series, never from the reader or the store."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from benchmarks.aer_workbooks import WrittenCell
from kb_shared.errors import QueryError, SchemaMissingError
from kb_shared.market.aer import AerWorkbook
from kb_shared.market.aer_layout import find_workbooks, read_workbook
from kb_shared.stores.catalog import Catalog, aer_performance
from kb_shared.stores.sql import apply_sql_files, make_engine
from tests.conftest import REPO_ROOT
from tests.market.aer_fixtures import (
    AGL,
    DISCONNECTED,
    DISCONNECTED_REWORDED,
    DISCONNECTION_RATE,
    HARDSHIP,
    NATIONAL_Q3_2025_26,
    Q3_2025_26,
    Q4_2025_26,
    RECONNECTED,
    quarters_of,
    series_value,
    write_release,
)
from tests.market.test_aer_reader import as_decimal
from tests.stores.test_catalog_contract import fresh_postgres_database

SAME_METRIC = {DISCONNECTED_REWORDED: DISCONNECTED}


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Both releases written once: their parsed workbooks and the cells written."""
    root = tmp_path_factory.mktemp("aer_store")
    out: dict[str, Any] = {}
    for label, quarter in (("q3", Q3_2025_26), ("q4", Q4_2025_26)):
        written = write_release(root / label, quarter)
        out[label] = [read_workbook(p) for p in find_workbooks(root / label)]
        out[f"{label}_cells"] = [c for cells in written.values() for c in cells]
    return out


def _schedule(cell: WrittenCell) -> str:
    return cell.file.split()[1]


def _key(cell: WrittenCell) -> tuple:
    """A figure's identity across releases (the reworded heading is the same metric)."""
    heading = SAME_METRIC.get(cell.heading, cell.heading)
    return (_schedule(cell), cell.sheet, heading, cell.jurisdiction, cell.retailer, cell.period)


def _valued(cells: list[WrittenCell]) -> dict[tuple, WrittenCell]:
    return {_key(c): c for c in cells if c.value is not None}


def _stored(catalog: Catalog) -> set[tuple]:
    return {(o.source_file, o.sheet, o.cell, o.jurisdiction, o.retailer, o.is_total, o.period,
             o.heading, o.value) for o in catalog.list_aer_observations()}


def _as_stored(cells: list[WrittenCell]) -> set[tuple]:
    return {(c.file, c.sheet, c.cell, c.jurisdiction, c.retailer, c.is_total, c.period,
             c.heading, as_decimal(c.value)) for c in cells if c.value is not None}


# --- sync ------------------------------------------------------------------------------------


def test_first_sync_stores_every_figure(catalog: Catalog, releases: dict) -> None:
    cells = releases["q3_cells"]
    counts = catalog.sync_aer(releases["q3"])
    expected = _as_stored(cells)
    assert (counts.read, counts.inserted, counts.updated, counts.deleted, counts.unchanged) == (
        len(expected), len(expected), 0, 0, 0)
    assert counts.releases == ("Q3 2025-26",) and counts.files == 3
    assert _stored(catalog) == expected
    assert {(h.schedule, h.metric_key) for h in counts.new_metrics} == {
        ("2", "customer_numbers"), ("2", "market_contract_customers"),
        ("3", "customers_disconnected_for_non_payment"), ("3", "disconnection_rate"),
        ("4", "hardship_customers"), ("4", "hardship_participation_rate"),
    }
    assert [h.heading for h in counts.new_headings] == ["Number of small business customers"]


def test_resyncing_the_same_workbooks_changes_nothing(catalog: Catalog, releases: dict) -> None:
    first = catalog.sync_aer(releases["q3"])
    before = catalog.list_aer_observations()
    again = catalog.sync_aer(releases["q3"])
    assert (again.inserted, again.updated, again.deleted, again.values_changed) == (0, 0, 0, 0)
    assert again.unchanged == first.inserted
    assert (again.new_metrics, again.new_headings) == ((), ())
    assert catalog.list_aer_observations() == before
    assert again.synced_at > first.synced_at
    assert catalog.search_aer(limit=1).synced_at == again.synced_at


def test_a_newer_release_replaces_the_quarters_it_republishes(catalog: Catalog,
                                                              releases: dict) -> None:
    old, new = _valued(releases["q3_cells"]), _valued(releases["q4_cells"])
    catalog.sync_aer(releases["q3"])
    counts = catalog.sync_aer(releases["q4"])
    overlap = old.keys() & new.keys()
    revised = {k for k in overlap if old[k].value != new[k].value}
    assert (counts.inserted, counts.updated, counts.deleted, counts.unchanged) == (
        len(new.keys() - old.keys()), len(overlap), 0, 0)
    assert counts.values_changed == len(revised) == 8  # AGL NSW, NSW, National: count and rate
    assert {(k[2], k[3], k[4]) for k in revised} == {
        (h, j, r) for h in (DISCONNECTED, DISCONNECTION_RATE)
        for j, r in (("NSW", AGL), ("NSW", "NSW Total"), ("National", AGL),
                     ("National", "National Total"))
    }
    [metric] = counts.new_metrics
    assert (metric.metric_key, metric.heading, metric.aliased) == (
        "residential_customers_reconnected_after_disconnection", RECONNECTED, False)
    assert [h.heading for h in counts.new_headings] == [DISCONNECTED_REWORDED]
    # Latest release wins; Q3 2024-25, which only the older release has, stays.
    only_old = [c for c in releases["q3_cells"] if c.period == "Q3 2024-25"]
    assert _stored(catalog) == _as_stored(releases["q4_cells"]) | _as_stored(only_old)
    [agl] = [o for o in catalog.list_aer_observations()
             if (o.retailer, o.jurisdiction, o.period, o.metric_key)
             == (AGL, "NSW", "Q3 2025-26", "customers_disconnected_for_non_payment")]
    assert (agl.value, agl.release, agl.heading) == (Decimal(1852), "Q4 2025-26",
                                                     DISCONNECTED_REWORDED)
    # Syncing the older release again is superseded, quarter by quarter.
    stale = catalog.sync_aer(releases["q3"])
    assert (stale.inserted, stale.updated, stale.deleted) == (0, 0, 0)
    assert stale.unchanged == len(_as_stored(only_old))
    assert stale.superseded == stale.read - stale.unchanged


def test_release_order_does_not_matter(catalog: Catalog, releases: dict) -> None:
    catalog.sync_aer(releases["q4"] + releases["q3"])
    together = _stored(catalog)
    counts = catalog.sync_aer(releases["q3"])
    assert counts.superseded > 0 and counts.updated == counts.inserted == 0
    only_old = [c for c in releases["q3_cells"] if c.period == "Q3 2024-25"]
    assert together == _as_stored(releases["q4_cells"]) | _as_stored(only_old)


def test_a_figure_dropped_by_the_newer_release_is_deleted(catalog: Catalog,
                                                          releases: dict) -> None:
    catalog.sync_aer(releases["q3"])
    s4 = next(b for b in releases["q3"] if b.schedule == "4")
    keep = tuple(o for o in s4.observations
                 if not (o.retailer == AGL and o.jurisdiction == "QLD" and o.heading == HARDSHIP))
    fewer = AerWorkbook(s4.path, s4.schedule, s4.release, keep, s4.headings, s4.sheets)
    counts = catalog.sync_aer([fewer])
    assert (counts.deleted, counts.inserted, counts.updated) == (5, 0, 0)  # five quarters


def test_two_values_for_one_figure_write_nothing(catalog: Catalog, releases: dict) -> None:
    s3 = next(b for b in releases["q3"] if b.schedule == "3")
    first = s3.observations[0]
    changed = (first.__class__(**{**{f: getattr(first, f) for f in first.__slots__},
                                  "value": first.value + 1}),)
    twin = AerWorkbook(s3.path.with_name("copy.xlsm"), s3.schedule, s3.release, changed,
                       s3.headings, s3.sheets)
    with pytest.raises(ValueError, match="release Q3 2025-26 gives two values for one figure"):
        catalog.sync_aer([s3, twin])
    with pytest.raises(ValueError, match="no AER workbooks to sync"):
        catalog.sync_aer([])
    assert catalog.list_aer_observations() == []
    assert catalog.search_aer().has_data is False


# --- search ----------------------------------------------------------------------------------


@pytest.fixture
def synced(catalog: Catalog, releases: dict) -> Catalog:
    catalog.sync_aer(releases["q3"])
    catalog.sync_aer(releases["q4"])
    return catalog


def _final(series: str, jurisdiction: str, retailer: str, quarter) -> Any:
    """A figure as the store should hold it: Q3 2024-25 from the older release, the rest
    from the newer one."""
    release = Q3_2025_26 if quarter == quarters_of(Q3_2025_26)[0] else Q4_2025_26
    return series_value(series, jurisdiction, retailer, quarter, release)


def test_count_and_total_for_one_metric_in_one_jurisdiction(synced: Catalog) -> None:
    result = synced.search_aer(metric="customers_disconnected_for_non_payment",
                               jurisdiction="NSW")
    quarters = [quarters_of(Q3_2025_26)[0], *quarters_of(Q4_2025_26)]
    retailers = ("AGL Sales Pty Ltd", "EnergyAustralia Pty Ltd",
                 "Origin Energy Electricity Limited")
    per_quarter = {q.label: sum(_final("disconnections", "NSW", r, q) for r in retailers)
                   for q in quarters}
    assert result.count == len(quarters) * len(retailers) == 18
    assert result.total == sum(per_quarter.values())
    assert {p.period: (p.total, p.rows) for p in result.period_totals} == {
        q: (t, 3) for q, t in per_quarter.items()}
    assert per_quarter["Q3 2025-26"] == 1852 + 1502 + 2113
    assert result.metric is not None and result.metric.headings == (
        DISCONNECTED, DISCONNECTED_REWORDED)
    assert {(o.retailer, o.value) for o in result.region_totals
            if o.period == "Q3 2025-26"} == {("NSW Total", Decimal(5467))}
    assert result.total_note is None and not result.truncated


def test_national_figures_and_no_double_counting(synced: Catalog) -> None:
    q3 = synced.search_aer(metric="hardship customers", period_from="Q3 2025-26",
                           period_to="Q3 2025-26")
    # Every jurisdiction: the National rows repeat NSW + QLD and are left out of the total.
    assert q3.count == 4 + 6  # four national retailers, six state ones
    assert q3.total == NATIONAL_Q3_2025_26["hardship"] == 150_486
    assert "National rows are left out" in (q3.total_note or "")
    national = synced.search_aer(metric="hardship_customers", jurisdiction="national",
                                 period_from="Q3 2025-26", period_to="Q3 2025-26")
    assert (national.count, national.total, national.total_note) == (4, 150_486, None)
    assert [(o.retailer, o.value) for o in national.region_totals] == [
        ("National Total", Decimal(150_486))]
    customers = synced.search_aer(metric="Number of residential customers", fuel="elec",
                                  customer_type="Resi", jurisdiction="National",
                                  period_from=dt.date(2026, 2, 1), period_to="Q3 2025-26")
    assert customers.total == NATIONAL_Q3_2025_26["res_elec_customers"] == 7_060_625
    disconnections = synced.search_aer(metric=DISCONNECTED, schedule="Schedule 3",
                                       jurisdiction="National", period_from="Q3 2025-26",
                                       period_to="Q3 2025-26")
    assert disconnections.total == 8_724 + 12  # revised by the Q4 release


def test_old_heading_new_heading_and_key_return_the_same_rows(synced: Catalog) -> None:
    by_old = synced.search_aer(metric=DISCONNECTED.upper(), limit=500)
    by_new = synced.search_aer(metric=DISCONNECTED_REWORDED, limit=500)
    by_key = synced.search_aer(metric="customers_disconnected_for_non_payment", limit=500)
    assert by_old.rows == by_new.rows == by_key.rows
    assert by_old.count == by_key.count == len(by_old.rows) > 0
    assert by_old.total == by_key.total


def test_count_and_total_cover_every_match_not_the_capped_rows(synced: Catalog,
                                                               releases: dict) -> None:
    every = synced.search_aer(limit=10_000)
    final = _valued(releases["q4_cells"]) | {
        k: c for k, c in _valued(releases["q3_cells"]).items() if c.period == "Q3 2024-25"}
    retailer_rows = [c for c in final.values() if not c.is_total]
    assert every.limit == 500 and len(every.rows) == 500
    assert every.count == len(retailer_rows) > 500 and every.truncated
    assert every.metric is None and every.total is None
    one = synced.search_aer(metric="market_contract_customers", limit=1)
    contracts = [c for c in retailer_rows if c.heading == "Customers on market retail contracts"
                 and c.jurisdiction != "National"]
    assert len(one.rows) == 1
    assert one.total == sum(c.value for c in contracts)
    assert one.rows[0].period == "Q4 2025-26"  # latest quarter first


def test_a_rate_has_no_total(synced: Catalog) -> None:
    result = synced.search_aer(metric="disconnection rate", jurisdiction="NSW",
                               retailer="agl sales pty ltd", period_from="Q3 2025-26",
                               period_to="Q3 2025-26")
    assert result.count == 1
    assert result.rows[0].value == (Decimal(1852) / Decimal(
        _final("res_elec_customers", "NSW", AGL, Q3_2025_26))).quantize(Decimal("1e-10"))
    assert (result.total, result.period_totals) == (None, ())
    assert result.total_note == "disconnection_rate is a rate or an average: its figures do " \
                                "not add up"


def test_no_match_is_distinct_from_no_data(catalog: Catalog, releases: dict) -> None:
    empty = catalog.search_aer(metric="hardship customers")
    assert (empty.count, empty.has_data, empty.synced_at) == (0, False, None)
    assert empty.vocabulary.metrics == ()
    catalog.sync_aer(releases["q3"])
    none = catalog.search_aer(retailer="Nobody Energy")
    assert (none.count, none.rows, none.has_data) == (0, (), True)
    assert none.synced_at is not None
    vocabulary = none.vocabulary
    assert vocabulary.retailers == ("AGL Sales Pty Ltd", "Alinta Energy Retail Sales Pty Ltd",
                                    "EnergyAustralia Pty Ltd",
                                    "Origin Energy Electricity Limited")
    assert vocabulary.jurisdictions == ("NSW", "National", "QLD")
    assert (vocabulary.fuels, vocabulary.customer_types) == (
        ("electricity", "gas"), ("residential", "small business"))
    assert [p.label for p in vocabulary.periods] == [q.label for q in quarters_of(Q3_2025_26)]
    assert vocabulary.schedules == ("2", "3", "4")
    headings = {(m.schedule, m.metric_key): m.headings for m in vocabulary.metrics}
    assert headings["2", "customer_numbers"] == ("Number of residential customers",
                                                 "Number of small business customers")
    assert catalog.search_aer(metric="no such metric").count == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit": 0}, "limit must be a whole number of at least 1"),
        ({"period_from": "Q5 2025-26"}, "period_from must be a quarter like 'Q3 2025-26'"),
        ({"period_from": "Q4 2025-26", "period_to": "Q1 2025-26"}, "is after period_to"),
        ({"retailer": 7}, "retailer must be text"),
    ],
)
def test_bad_filters_are_refused(catalog: Catalog, kwargs: dict, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        catalog.search_aer(**kwargs)


# --- totals check ----------------------------------------------------------------------------


def test_published_totals_match_their_parts(synced: Catalog, releases: dict) -> None:
    check = synced.check_aer_totals()
    assert check.passed and check.failures == ()
    final = _valued(releases["q4_cells"]) | {
        k: c for k, c in _valued(releases["q3_cells"]).items() if c.period == "Q3 2024-25"}
    additive_totals = [c for c in final.values() if c.is_total and c.heading not in (
        DISCONNECTION_RATE, "Hardship program participation rate")]
    national_totals = [c for c in additive_totals if c.jurisdiction == "National"]
    assert check.checked == len(additive_totals) + len(national_totals)


def test_a_doctored_total_fails_the_check(synced: Catalog) -> None:
    table = aer_performance
    where = sa.and_(table.c.retailer == "NSW Total", table.c.period == "Q3 2025-26",
                    table.c.metric_key == "hardship_customers")
    with synced.engine.begin() as conn:
        cell = conn.execute(sa.select(table.c.cell).where(where)).scalar_one()
        conn.execute(table.update().where(where).values(value=table.c.value + 100))
    check = synced.check_aer_totals()
    assert not check.passed
    assert sorted((f.kind, f.jurisdiction, f.cell, f.published, f.computed)
                  for f in check.failures) == [
        ("jurisdictions", "National", "E10", Decimal(150_486), Decimal(150_586)),
        ("retailers", "NSW", cell, Decimal(93_770 + 100), Decimal(93_770)),
    ]
    message = next(f for f in check.failures if f.kind == "retailers").message
    assert message == (
        "Schedule 4 - Quarter 4 2025-26 Retail Performance Data.xlsx · Hardship numbers!"
        f"{cell}: NSW total of hardship_customers (electricity, residential, Q3 2025-26) is "
        "93870 but its retailers sum to 93770 (3 values; tolerance 2)"
    )


# --- schema ----------------------------------------------------------------------------------


def test_tables_of_the_old_shape_are_refused(tmp_path: Path, releases: dict) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'old.sqlite'}")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE aer_performance (id INTEGER PRIMARY KEY, schedule TEXT, retailer TEXT, "
            "jurisdiction TEXT, fuel TEXT, metric TEXT, period TEXT, value NUMERIC)"
        )
    catalog = Catalog(engine)
    catalog.ensure_schema()
    with pytest.raises(SchemaMissingError, match="aer_performance has the shape it had before "
                                                 "the AER sync .*DROP TABLE aer_performance"):
        catalog.sync_aer(releases["q3"])
    engine.dispose()


@pytest.mark.services
def test_sql_files_schema_and_the_reader_role(releases: dict) -> None:
    """Built from sql/*.sql: the owner syncs, kb_reader (the MCP server's role) searches."""
    with fresh_postgres_database("kb_test_aer_files") as url:
        owner = make_engine(url)
        apply_sql_files(owner, REPO_ROOT / "sql")
        Catalog(owner).sync_aer(releases["q3"])
        reader = make_engine(url)

        @sa.event.listens_for(reader, "connect")
        def _become_reader(dbapi_connection: Any, _record: Any) -> None:
            with dbapi_connection.cursor() as cursor:
                cursor.execute("SET ROLE kb_reader")
            dbapi_connection.commit()

        try:
            result = Catalog(reader).search_aer(metric="hardship customers",
                                                jurisdiction="National",
                                                period_from="Q3 2025-26")
            assert (result.count, result.total) == (4, 150_486)
            assert Catalog(reader).check_aer_totals().passed
            with pytest.raises(Exception, match="permission denied"):
                Catalog(reader).sync_aer(releases["q3"])
        finally:
            reader.dispose()
            owner.dispose()
