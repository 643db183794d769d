"""The stored comparisons (``kb_shared.stores.catalog.changes``, issue 27): one transaction per
rewrite, read back as ``compare`` returned them, dropped with either document of the pair.
Runs on SQLite and, under the ``services`` mark, on Postgres (the ``catalog`` fixture)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa

from kb_shared import identity
from kb_shared.compliance.changes import ADDED, CHANGED, MOVED, REMOVED, Change, ChangeSet, Side
from kb_shared.stores.catalog import Catalog, ChangeSetRow, change_sets, document_changes

RULES = ChangeSet(
    (
        Change(1, CHANGED, "5 Settlement", "5 Settlement",
               Side("Payment is due within 4 business days.", (12,)),
               Side("Payment is due within 5 business days.", (12, 13)), False,
               (("4 business days", "5 business days"),)),
        Change(2, ADDED, "6 Records", "6 Records", Side("", (14,)),
               Side("The retailer must keep each record for seven years.", (15,)), True),
        Change(3, REMOVED, "7 Old rule", None, Side("Each retailer must lodge the old form.", (16,)),
               Side("", (17,)), True),
        Change(4, MOVED, "4.2 Fees", "4.3 Fees", Side("", (9,)), Side("", (10,)), False),
        Change(5, CHANGED, "8 Ratings", "8 Ratings", Side("A 5 kW limit and 90 per cent.", (20,)),
               Side("A 10 kW limit.", (21,)), False, (("5 kW", "10 kW"), ("90 per cent", None))),
    ),
    unchanged_sections=41,
)


def _add(catalog: Catalog, name: str, sha: str) -> str:
    doc = identity.doc_id(name)
    catalog.add_pending(name, doc, sha, 1000, f"pdfs/{doc}")
    return doc


def test_a_stored_change_set_reads_back_as_compare_returned_it(catalog: Catalog) -> None:
    before = dt.datetime.now(dt.UTC)
    row = catalog.replace_changes("notice-2026.pdf", 1, "notice-2025.pdf", 1, RULES)
    assert row == ChangeSetRow(
        "notice-2026.pdf", 1, "notice-2025.pdf", 1, 1, 1, 2, 1, 41, 2, 2, row.computed_at)
    stored = catalog.change_set("notice-2026.pdf", 1)
    assert stored is not None
    assert stored.change_set == RULES
    assert stored.summary == RULES.summary == {
        "added": 1, "removed": 1, "changed": 2, "moved": 1, "unchanged_sections": 41,
        "obligations_changed": 2, "numbers_changed": 2,
    }
    assert (stored.previous_doc_id, stored.previous_version) == ("notice-2025.pdf", 1)
    slack = dt.timedelta(seconds=5)
    assert before - slack <= stored.computed_at <= dt.datetime.now(dt.UTC) + slack
    assert stored.computed_at.tzinfo is not None
    assert catalog.change_set("notice-2026.pdf", 2) is None
    assert catalog.change_set("other.pdf", 1) is None


def test_a_rewrite_replaces_every_row_of_that_version_only(catalog: Catalog) -> None:
    catalog.replace_changes("proc.pdf", 2, "proc.pdf", 1, RULES)
    catalog.replace_changes("proc.pdf", 3, "proc.pdf", 2, RULES)
    fewer = ChangeSet(RULES.changes[:1], unchanged_sections=3)
    catalog.replace_changes("proc.pdf", 3, "proc.pdf", 2, fewer)
    assert catalog.change_set("proc.pdf", 3).change_set == fewer  # type: ignore[union-attr]
    assert catalog.change_set("proc.pdf", 2).change_set == RULES  # type: ignore[union-attr]
    assert [(r.version, r.changed, r.unchanged_sections) for r in catalog.change_sets("proc.pdf")] == [
        (2, 2, 41), (3, 1, 3)]
    assert catalog.change_sets("other.pdf") == []
    with catalog.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(document_changes)).scalar() == 6
    empty = ChangeSet((), unchanged_sections=50)
    catalog.replace_changes("proc.pdf", 3, "proc.pdf", 2, empty)
    assert catalog.change_set("proc.pdf", 3).change_set == empty  # type: ignore[union-attr]


def test_clearing_a_versions_comparison_leaves_the_others(catalog: Catalog) -> None:
    catalog.replace_changes("proc.pdf", 2, "proc.pdf", 1, RULES)
    catalog.replace_changes("proc.pdf", 3, "proc.pdf", 2, RULES)
    assert catalog.clear_changes("proc.pdf", 3) is True
    assert catalog.clear_changes("proc.pdf", 3) is False
    assert catalog.change_set("proc.pdf", 3) is None
    assert [r.version for r in catalog.change_sets("proc.pdf")] == [2]
    assert catalog.change_set("proc.pdf", 2).change_set == RULES  # type: ignore[union-attr]


class _InsertRefused(Exception):
    pass


@contextmanager
def _refusing_change_inserts(engine: sa.Engine) -> Iterator[None]:
    """Every INSERT into ``document_changes`` on ``engine`` fails while this is open."""

    def refuse(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO DOCUMENT_CHANGES"):
            raise _InsertRefused(statement[:40])

    sa.event.listen(engine, "before_cursor_execute", refuse)
    try:
        yield
    finally:
        sa.event.remove(engine, "before_cursor_execute", refuse)


def test_a_rewrite_that_fails_half_way_leaves_the_old_rows(catalog: Catalog) -> None:
    catalog.replace_changes("proc.pdf", 2, "proc.pdf", 1, RULES)
    with _refusing_change_inserts(catalog.engine), pytest.raises(_InsertRefused):
        catalog.replace_changes("proc.pdf", 2, "proc.pdf", 1, ChangeSet(RULES.changes[:2], 7))
    stored = catalog.change_set("proc.pdf", 2)
    assert stored is not None and stored.change_set == RULES


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("proc.pdf", 0, "proc.pdf", 1, RULES), "version must be a whole number of at least 1"),
        (("proc.pdf", 2, "proc.pdf", True, RULES), "previous_version must be a whole number"),
        (("proc.pdf", 2, "proc.pdf", 2, RULES), "cannot be compared with itself"),
        (("  ", 2, "proc.pdf", 1, RULES), "doc_id cannot be empty"),
        (("proc.pdf", 2, "proc.pdf", 1, ChangeSet(RULES.changes[1:], 0)),
         r"numbered 1, 2, … in order, got \[2, 3, 4, 5\]"),
        (("proc.pdf", 2, "proc.pdf", 1,
          ChangeSet((Change(1, "renamed", "a", "b", Side("", ()), Side("", ()), False),), 0)),
         "kind must be one of"),
        (("proc.pdf", 2, "proc.pdf", 1,
          ChangeSet((Change(1, ADDED, None, "a", Side("", (0,)), Side("x", (1,)), False),), 0)),
         "a page must be a whole number of at least 1"),
    ],
)
def test_bad_input_is_refused_and_nothing_is_written(
    catalog: Catalog, args: tuple[Any, ...], message: str
) -> None:
    catalog.replace_changes("proc.pdf", 2, "proc.pdf", 1, RULES)
    with pytest.raises(ValueError, match=message):
        catalog.replace_changes(*args)
    assert catalog.change_set("proc.pdf", 2).change_set == RULES  # type: ignore[union-attr]
    assert [r.version for r in catalog.change_sets("proc.pdf")] == [2]


def test_deleting_a_document_drops_its_comparisons_and_those_made_against_it(catalog: Catalog) -> None:
    old = _add(catalog, "Notice 2025.pdf", "a" * 64)
    new = _add(catalog, "Notice 2026.pdf", "b" * 64)
    kept = _add(catalog, "Procedure.pdf", "c" * 64)
    catalog.replace_changes(old, 2, old, 1, RULES)
    catalog.replace_changes(new, 1, old, 2, RULES)
    catalog.replace_changes(kept, 2, kept, 1, RULES)
    assert catalog.delete(old) is True
    assert catalog.change_sets(old) == [] and catalog.change_set(old, 2) is None
    assert catalog.change_set(new, 1) is None  # compared with a document that is gone
    assert catalog.change_set(kept, 2).change_set == RULES  # type: ignore[union-attr]
    with catalog.engine.connect() as conn:
        left = conn.execute(sa.select(document_changes.c.doc_id).distinct()).scalars().all()
        heads = conn.execute(sa.select(change_sets.c.doc_id)).scalars().all()
    assert (left, heads) == ([kept], [kept])
    assert catalog.delete(kept) is True
    assert catalog.change_sets(kept) == []
