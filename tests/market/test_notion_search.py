"""``Catalog.search_compliance`` (the future MCP tool's query) on SQLite and Postgres: exact
counts, fine totals and facets over the whole match set whatever the row cap, name matching
that forgives case and "Pty Ltd"/"Limited", and the Postgres ``kb_reader`` role."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
import sqlalchemy as sa

from kb_shared.errors import QueryError, StoreError
from kb_shared.stores.catalog import Catalog, ComplianceAction
from kb_shared.stores.catalog.compliance_search import FACET_MAX, MAX_LIMIT
from kb_shared.stores.sql import apply_sql_files, make_engine
from tests.conftest import REPO_ROOT
from tests.stores.test_catalog_contract import fresh_postgres_database


def action(key: str, organisation: str | None, fine: Any, date: str | None, **kw: Any):
    return ComplianceAction(
        page_id=key,
        notion_url=f"https://app.notion.com/p/{key}",
        organisation=organisation,
        fine=fine,
        action_date=dt.date.fromisoformat(date) if date else None,
        **kw,
    )


TRACKER = [
    action("a1", "AGL Energy Limited", Decimal("1500000"), "2025-02-14", regulatory_body="AER",
           status="Paid", summary="Failed to apply hardship protections",
           misconduct_types=("Hardship", "Disconnection"), sector="Retail"),
    action("a2", "AGL Sales Pty Ltd", Decimal("250000.10"), "2023-05-02", regulatory_body="AER",
           status="Paid", summary="Wrongful disconnection of a life support customer",
           misconduct_types=("Life support",), sector="Retail"),
    action("a3", "agl energy ltd", None, "2025-09-30", regulatory_body="ESC", status="Open",
           summary="Investigation into billing", misconduct_types=("Billing",), sector="Retail"),
    action("o1", "Origin Energy Retail Pty Ltd", Decimal("2000000.50"), "2024-10-01",
           regulatory_body="AER", status="Paid", summary="Life support register breaches",
           misconduct_types=("Life support",), sector="Retail"),
    action("r1", "Red Energy Pty Ltd", Decimal("0"), "2022-01-10", regulatory_body="ACCC",
           status="Closed", summary="Misleading discounts; no penalty imposed",
           misconduct_types=("Misleading conduct",), sector="Retail"),
    action("e1", "EnergyAustralia Pty Ltd", Decimal("1200000"), None, regulatory_body="AER",
           status="Paid", summary="Hardship policy not followed",
           misconduct_types=("Hardship",), sector="Retail"),
    action("n1", None, None, None, summary=None),  # a row someone has only just started
]


@pytest.fixture
def tracker(catalog: Catalog) -> Catalog:
    catalog.replace_compliance_actions(TRACKER, data_source_id="ds")
    return catalog


def test_nothing_synced_is_told_apart_from_no_match(catalog: Catalog) -> None:
    empty = catalog.search_compliance("agl")
    assert (empty.count, empty.synced_at, empty.rows) == (0, None, ())
    catalog.replace_compliance_actions(TRACKER)
    none = catalog.search_compliance("nonexistent")
    assert none.count == 0 and none.synced_at is not None


def test_everything_counts_and_totals(tracker: Catalog) -> None:
    found = tracker.search_compliance()
    # 1,500,000 + 250,000.10 + 2,000,000.50 + 0 + 1,200,000 (two rows have no fine)
    assert (found.count, found.fine_total, found.with_fine, found.without_fine) == (
        7, Decimal("4950000.60"), 5, 2,
    )
    assert [r.page_id for r in found.rows] == ["a3", "a1", "o1", "a2", "r1", "e1", "n1"]
    assert found.facets_scope == "matches" and not found.truncated


@pytest.mark.parametrize(
    "query", ["agl energy", "AGL ENERGY PTY LTD", "agl energy limited", "Agl Energy Ltd."]
)
def test_a_retailer_matches_in_any_case_and_with_any_suffix(tracker: Catalog, query: str) -> None:
    found = tracker.search_compliance(query)
    assert sorted(r.page_id for r in found.rows) == ["a1", "a3"]
    assert (found.count, found.fine_total, found.without_fine) == (2, Decimal("1500000.00"), 1)


def test_the_organisation_filter_matches_a_name_phrase(tracker: Catalog) -> None:
    brand = tracker.search_compliance(organisation="AGL")
    assert (brand.count, brand.fine_total) == (3, Decimal("1750000.10"))
    exact = tracker.search_compliance(organisation="origin energy retail limited")
    assert [r.page_id for r in exact.rows] == ["o1"]
    assert tracker.search_compliance(organisation="energy retail origin").count == 0
    assert tracker.search_compliance(organisation="Energy").count == 4  # AGL x2, Origin, Red


def test_query_words_match_summary_and_organisation_word_starts(tracker: Catalog) -> None:
    life = tracker.search_compliance("life support")
    assert sorted(r.page_id for r in life.rows) == ["a2", "o1"]
    assert life.fine_total == Decimal("2250000.60")
    assert tracker.search_compliance("hardship").count == 2
    assert tracker.search_compliance("disconnect").count == 1  # "disconnection"
    assert tracker.search_compliance("onnection").count == 0  # not the middle of a word
    assert tracker.search_compliance("hardship energyaustralia").count == 1


def test_filters_combine(tracker: Catalog) -> None:
    found = tracker.search_compliance(
        regulatory_body="aer", status="PAID", misconduct_type="hardship",
        date_from="2025-01-01", date_to=dt.date(2025, 12, 31),
    )
    assert [r.page_id for r in found.rows] == ["a1"]
    assert tracker.search_compliance(sector="retail").count == 6
    assert tracker.search_compliance(misconduct_type="Life Support").count == 2
    big = tracker.search_compliance(min_fine="1200000")
    assert (big.count, big.fine_total) == (3, Decimal("4700000.50"))
    zero = tracker.search_compliance(min_fine=0)
    assert (zero.count, zero.without_fine) == (5, 0)  # "no fine recorded" is not $0


def test_facets_cover_the_match_set(tracker: Catalog) -> None:
    found = tracker.search_compliance(regulatory_body="AER")
    assert found.count == 4
    facets = {name: [(v.value, v.count) for v in f.values] for name, f in found.facets.items()}
    assert facets["status"] == [("Paid", 4)]
    assert facets["misconduct_type"] == [
        ("Hardship", 2), ("Life support", 2), ("Disconnection", 1),
    ]
    assert facets["organisation"][0] == ("AGL Energy Limited", 1)
    assert found.facets["organisation"].distinct == 4


def test_no_match_gives_the_whole_vocabulary(tracker: Catalog) -> None:
    found = tracker.search_compliance(regulatory_body="Australian Energy Regulator")
    assert (found.count, found.facets_scope) == (0, "all")
    bodies = [(v.value, v.count) for v in found.facets["regulatory_body"].values]
    assert bodies == [("AER", 4), ("ACCC", 1), ("ESC", 1), (None, 1)]


def test_counts_and_totals_cover_every_match_past_the_cap(catalog: Catalog) -> None:
    many = [action(f"m{i:03}", f"Retailer {i % 60}", i, "2024-01-01") for i in range(250)]
    catalog.replace_compliance_actions(many)
    found = catalog.search_compliance(limit=1000)
    # fines 0 + 1 + ... + 249 dollars = 249 * 250 / 2
    assert (found.count, found.fine_total, len(found.rows), found.limit) == (
        250, Decimal("31125.00"), MAX_LIMIT, MAX_LIMIT,
    )
    assert found.truncated
    assert [r.fine for r in found.rows[:2]] == [Decimal("249.00"), Decimal("248.00")]
    retailers = found.facets["organisation"]
    assert (len(retailers.values), retailers.distinct) == (FACET_MAX, 60)
    one = catalog.search_compliance(limit=1)
    assert (one.count, one.fine_total, len(one.rows)) == (250, Decimal("31125.00"), 1)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit": 0}, "limit must be a whole number of at least 1"),
        ({"limit": True}, "limit must be a whole number"),
        ({"date_from": "last year"}, "date_from must be a date as YYYY-MM-DD"),
        ({"date_from": "2025-02-01", "date_to": "2025-01-01"}, "date_from 2025-02-01 is after"),
        ({"min_fine": -1}, "min_fine must be a number of dollars of at least 0"),
        ({"min_fine": "a lot"}, "min_fine must be a number of dollars"),
        ({"query": "!!!"}, "has no letters or digits"),
        ({"status": 3}, "status must be text"),
        ({"query": "x" * 2001}, "query is 2001 characters; send at most 2000"),
    ],
)
def test_bad_filters_are_explained(tracker: Catalog, kwargs: dict, message: str) -> None:
    with pytest.raises(QueryError, match=message):
        tracker.search_compliance(**kwargs)


def test_the_answer_echoes_its_filters(tracker: Catalog) -> None:
    found = tracker.search_compliance("  AGL  ", min_fine=1000.005, date_to="2025-12-31")
    assert found.filters == {
        "query": "AGL", "date_to": dt.date(2025, 12, 31), "min_fine": Decimal("1000.01"),
    }


# --- Postgres: the schema from sql/ and the kb_reader role ----------------------------------


@pytest.fixture
def files_database() -> Iterator[sa.Engine]:
    with fresh_postgres_database("kb_notion_files") as url:
        engine = make_engine(url)
        yield engine
        engine.dispose()


@pytest.mark.services
def test_reader_role_searches_a_schema_built_from_sql_files(files_database: sa.Engine) -> None:
    """sql/001 replaces the empty pre-Notion table; kb_reader can search but not sync."""
    with files_database.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE compliance_actions (id varchar(200) PRIMARY KEY, entity_name text "
            "NOT NULL, source varchar(64) NOT NULL, synced_at timestamptz NOT NULL)"
        )
    apply_sql_files(files_database, REPO_ROOT / "sql")
    Catalog(files_database).replace_compliance_actions(TRACKER, data_source_id="ds")
    reader = make_engine(files_database.url)

    @sa.event.listens_for(reader, "connect")
    def _become_reader(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SET ROLE kb_reader")
        dbapi_connection.commit()

    try:
        found = Catalog(reader).search_compliance("agl energy pty ltd")
        assert (found.count, found.fine_total, found.synced_at is not None) == (
            2, Decimal("1500000.00"), True,
        )
        with pytest.raises(StoreError, match="permission denied"):
            Catalog(reader).replace_compliance_actions([], force=True)
    finally:
        reader.dispose()
