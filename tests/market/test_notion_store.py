"""The compliance tables' snapshot write (``Catalog.replace_compliance_actions``), on SQLite
and Postgres: idempotent, exact, guarded, all-or-nothing. Moved here from
tests/stores/test_catalog_contract.py with the table (reshaped for the Notion tracker)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
import sqlalchemy as sa

from kb_shared.errors import SchemaMissingError, SyncRefusedError
from kb_shared.stores.catalog import (
    Catalog,
    ComplianceAction,
    compliance_action_misconduct_types,
)
from kb_shared.stores.catalog.compliance import (
    normalize_organisation,
    query_words,
    search_words,
)
from kb_shared.stores.sql import make_engine

UTC = dt.UTC
FIRST = "1a2b3c4d-0000-4000-8000-000000000001"
SECOND = "1a2b3c4d-0000-4000-8000-000000000002"


def _actions() -> list[ComplianceAction]:
    edited = dt.datetime(2025, 3, 1, 9, 30, tzinfo=dt.timezone(dt.timedelta(hours=11)))
    return [
        ComplianceAction(
            page_id=FIRST,
            notion_url="https://app.notion.com/p/1a2b3c4d000040008000000000000001",
            summary="Failed to apply hardship protections",
            organisation="Example Energy Pty Ltd",
            sector="Energy retail",
            regulatory_body="AER",
            status="Paid",
            fine=Decimal("1500000"),
            action_date=dt.date(2025, 2, 14),
            source_url="https://www.aer.gov.au/news/example",
            misconduct_types=("Hardship", "Disconnection", "Hardship"),
            last_edited_time=edited,
        ),
        ComplianceAction(
            page_id=SECOND,
            organisation="Other Retail Ltd",
            fine=12_600.505,  # type: ignore[arg-type] # a JSON number arrives as a float
            action_date=dt.date(2024, 11, 2),
        ),
    ]


def _ids(catalog: Catalog) -> list[str]:
    return [a.page_id for a in catalog.list_compliance_actions()]


def test_replace_is_idempotent_and_exact(catalog: Catalog) -> None:
    first = catalog.replace_compliance_actions(_actions(), data_source_id="ds-1")
    assert (first.read, first.inserted, first.updated, first.deleted, first.unchanged) == (
        2, 2, 0, 0, 0,
    )
    rows = catalog.list_compliance_actions()
    again = catalog.replace_compliance_actions(_actions(), data_source_id="ds-1")
    assert (again.read, again.inserted, again.updated, again.deleted, again.unchanged) == (
        2, 0, 0, 0, 2,
    )
    assert catalog.list_compliance_actions() == rows
    strip = [(r.page_id[-2:], r.organisation, r.fine, r.action_date) for r in rows]
    assert strip == [
        ("01", "Example Energy Pty Ltd", Decimal("1500000.00"), dt.date(2025, 2, 14)),
        ("02", "Other Retail Ltd", Decimal("12600.50"), dt.date(2024, 11, 2)),  # half-even
    ]
    assert rows[0].misconduct_types == ("Disconnection", "Hardship")
    assert rows[0].last_edited_time == dt.datetime(2025, 2, 28, 22, 30, tzinfo=UTC)
    assert (rows[1].summary, rows[1].fine is None, rows[1].misconduct_types) == (None, False, ())
    state = catalog.compliance_sync_state()
    assert state is not None and state.synced_at == again.synced_at
    assert (state.read, state.unchanged, state.data_source_id) == (2, 2, "ds-1")
    assert again.synced_at > first.synced_at


def test_replace_updates_changed_rows_and_deletes_missing_ones(catalog: Catalog) -> None:
    catalog.replace_compliance_actions(_actions())
    third = ComplianceAction(page_id="third", organisation="Third Energy", fine=None)
    changed = ComplianceAction(
        page_id=FIRST, organisation="Example Energy Pty Ltd", fine=Decimal("2000000.00"),
        misconduct_types=("Hardship",),
    )
    counts = catalog.replace_compliance_actions([changed, third, _actions()[1]])
    assert (counts.inserted, counts.updated, counts.deleted, counts.unchanged) == (1, 1, 0, 1)
    rows = {a.page_id: a for a in catalog.list_compliance_actions()}
    assert (rows[FIRST].fine, rows[FIRST].regulatory_body, rows[FIRST].misconduct_types) == (
        Decimal("2000000.00"), None, ("Hardship",),
    )
    counts = catalog.replace_compliance_actions([changed, third])
    assert (counts.deleted, counts.unchanged) == (1, 2)
    assert _ids(catalog) == [FIRST, "third"]
    with catalog.engine.connect() as conn:  # the deleted page's types went with it
        kinds = conn.execute(sa.select(compliance_action_misconduct_types.c.page_id)).scalars()
        assert sorted(kinds) == [FIRST]


def test_an_empty_read_is_refused_with_the_counts_and_changes_nothing(catalog: Catalog) -> None:
    applied = catalog.replace_compliance_actions(_actions())
    with pytest.raises(SyncRefusedError) as info:
        catalog.replace_compliance_actions([])
    assert (info.value.read, info.value.stored, info.value.would_delete) == (0, 2, 2)
    assert str(info.value).startswith(
        "refusing an empty read: the tracker returned 0 pages but compliance_actions holds 2 rows"
    )
    assert _ids(catalog) == [FIRST, SECOND]
    state = catalog.compliance_sync_state()
    assert state is not None and state.synced_at == applied.synced_at
    forced = catalog.replace_compliance_actions([], force=True)
    assert (forced.read, forced.deleted) == (0, 2) and _ids(catalog) == []


def test_an_empty_read_of_an_empty_table_is_applied(catalog: Catalog) -> None:
    counts = catalog.replace_compliance_actions([])
    assert (counts.read, counts.deleted) == (0, 0)
    assert catalog.compliance_sync_state() is not None


def test_deleting_more_than_half_is_refused_then_forced(catalog: Catalog) -> None:
    six = [ComplianceAction(page_id=f"p{i}", fine=i) for i in range(6)]
    catalog.replace_compliance_actions(six)
    half = catalog.replace_compliance_actions(six[:3])  # exactly half: applied
    assert half.deleted == 3
    catalog.replace_compliance_actions(six)
    with pytest.raises(SyncRefusedError, match="refusing to delete 4 of 6 stored rows") as info:
        catalog.replace_compliance_actions(six[:2])
    assert (info.value.read, info.value.stored, info.value.would_delete) == (2, 6, 4)
    assert _ids(catalog) == [f"p{i}" for i in range(6)]
    forced = catalog.replace_compliance_actions(six[:2], force=True)
    assert (forced.deleted, forced.unchanged) == (4, 2) and _ids(catalog) == ["p0", "p1"]


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ({"fine": -5}, "fine cannot be negative"),
        ({"fine": "lots"}, "fine must be a number"),
        ({"fine": True}, "fine must be a number"),
        ({"organisation": " "}, None),  # blank is "not set", not an error
        ({"misconduct_types": ("ok", " ")}, "misconduct type cannot be empty"),
        ({"misconduct_types": "Hardship"}, "misconduct_types must be a sequence"),
        ({"last_edited_time": dt.datetime(2025, 1, 1)}, "last_edited_time must be a timezone-"),
        ({"action_date": "2025-01-01"}, "action_date must be a date"),
        ({"page_id": " "}, "page_id cannot be empty"),
    ],
)
def test_a_bad_action_writes_nothing(catalog: Catalog, field: dict, message: str | None) -> None:
    good = ComplianceAction(page_id="ok-1", organisation="Good Ltd")
    bad = ComplianceAction(**{"page_id": "bad-1", "organisation": "Bad Ltd", **field})
    if message is None:
        assert catalog.replace_compliance_actions([good, bad]).inserted == 2
        return
    with pytest.raises(ValueError, match=message):
        catalog.replace_compliance_actions([good, bad])
    assert _ids(catalog) == [] and catalog.compliance_sync_state() is None


def test_one_page_twice_with_different_content_is_refused(catalog: Catalog) -> None:
    rows = [ComplianceAction(page_id="x", summary="A"), ComplianceAction(page_id="x", summary="B")]
    with pytest.raises(ValueError, match="compliance action 'x' appears twice, differently"):
        catalog.replace_compliance_actions(rows)
    assert _ids(catalog) == []
    same = [ComplianceAction(page_id="x", summary="A"), ComplianceAction(page_id="x", summary="A")]
    assert catalog.replace_compliance_actions(same).read == 1


def test_the_pre_notion_table_shape_is_named(tmp_path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'old.sqlite'}")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE compliance_actions (id varchar(200) PRIMARY KEY, entity_name text "
            "NOT NULL, source varchar(64) NOT NULL, synced_at timestamp NOT NULL)"
        )
    Catalog(engine).ensure_schema()  # creates the other tables, leaves this one
    with pytest.raises(SchemaMissingError, match=r"Drop it \(DROP TABLE compliance_actions\)"):
        Catalog(engine).replace_compliance_actions([ComplianceAction(page_id="p")])
    engine.dispose()


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("AGL Energy Limited", "agl energy"),
        ("agl energy pty. ltd.", "agl energy"),
        ("AGL ENERGY", "agl energy"),
        ("Origin Energy Retail Pty Ltd", "origin energy retail"),
        ("Lumo Energy (SA) Pty Ltd", "lumo energy sa"),
        ("Gold Mines NL", "gold mines"),
        ("Gold Mines No Liability", "gold mines"),
        ("Énergie Électrique Inc.", "energie electrique"),
        ("Pty Ltd", "pty ltd"),
        ("  ", None),
        (None, None),
    ],
)
def test_normalize_organisation(name: str | None, key: str | None) -> None:
    assert normalize_organisation(name) == key


def test_query_words_drop_suffixes_and_function_words() -> None:
    assert query_words("Fines for AGL Energy Pty Ltd, AGL") == ["fines", "agl", "energy"]
    assert query_words("Limited") == ["limited"]
    assert search_words("Red_Energy's  2024-25") == ["red", "energy", "s", "2024", "25"]
