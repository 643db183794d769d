"""``search_compliance``: every enforcement action matching a set of filters, with the exact
count, the exact fine total and the facets of the whole match set, computed in SQL (never
from the capped rows), on SQLite and Postgres.

Matching rules (the reasons are in issue 11, "MCP tools"):

* ``query``: every word (``compliance.query_words``: case and accents folded, "Pty"/"Ltd"/
  "Limited" and a few function words dropped) must start a word of the summary or the
  organisation.
* ``organisation``: its words, without legal-form endings, appear as a phrase in the
  organisation's name (``normalize_organisation``): "agl energy pty ltd" and "AGL" both find
  "AGL Energy Limited".
* ``regulatory_body``, ``status``, ``sector``, ``misconduct_type``: equal, ignoring case.
* ``date_from``/``date_to``: the action's (start) date, inclusive; undated actions never match
  a date filter. ``min_fine``: fines of at least that many dollars; "no fine recorded" never
  matches it.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from kb_shared.errors import QueryError
from kb_shared.stores.catalog.common import (
    CatalogBase,
    SearchResult,
    capped_limit,
    clean_filters,
    date_filter,
    given_filters,
    last_synced,
)
from kb_shared.stores.catalog.compliance import (
    FINE_CENTS_MAX,
    NOTION_SOURCE,
    ComplianceAction,
    cents_to_fine,
    compliance_action_misconduct_types,
    compliance_actions,
    compliance_sync_state,
    misconduct_by_page,
    normalize_organisation,
    query_words,
    row_to_action,
)

#: Rows returned by default, and at most (issue 11: "limit=100", "cap 200 rendered").
DEFAULT_LIMIT = 100
MAX_LIMIT = 200
#: Values listed per facet (the most frequent first); ``Facet.distinct`` counts them all.
FACET_MAX = 50
#: Longest free-text query accepted, in characters (the MCP server's own cap is
#: ``Settings.max_query_chars``).
QUERY_MAX = 2000
#: The facets every answer carries, by name.
FACETS = ("organisation", "sector", "regulatory_body", "status", "misconduct_type")


@dataclass(frozen=True, slots=True)
class FacetValue:
    """One value of a facet and how many matching actions have it (``None`` = not set)."""

    value: str | None
    count: int


@dataclass(frozen=True, slots=True)
class Facet:
    """The values of one column over the match set, most frequent first: at most
    ``FACET_MAX`` of them in ``values``; ``distinct`` counts every one."""

    values: tuple[FacetValue, ...]
    distinct: int


@dataclass(frozen=True, slots=True)
class ComplianceSearchResult(SearchResult[ComplianceAction]):
    """What ``search_compliance`` found (``SearchResult``'s fields, then these).

    ``rows``: matches newest first (undated last), then the largest fine. ``fine_total``: exact
    sum in dollars of the matches with a fine (``with_fine`` of them; ``without_fine`` have none
    recorded). ``facets``: name (see ``FACETS``) -> ``Facet`` over the whole match set, or over
    the whole table when nothing matched (``facets_scope`` is then ``"all"``, so a wrong filter
    can be corrected). ``synced_at`` ``None`` means nothing has ever been synced, as opposed to
    "no rows match".
    """

    fine_total: Decimal
    with_fine: int
    without_fine: int
    facets: Mapping[str, Facet]
    facets_scope: str


@dataclass(frozen=True, slots=True)
class _Filters:
    words: tuple[str, ...] = ()
    organisation_key: str | None = None
    equals: tuple[tuple[str, str], ...] = ()
    misconduct_type: str | None = None
    date_from: dt.date | None = None
    date_to: dt.date | None = None
    min_fine_cents: int | None = None

    def conditions(self) -> list[sa.ColumnElement[bool]]:
        table = compliance_actions
        where: list[sa.ColumnElement[bool]] = [
            table.c.search_text.like(f"% {word}%") for word in self.words
        ]
        if self.organisation_key is not None:
            padded = sa.literal(" ") + table.c.organisation_key + sa.literal(" ")
            where.append(padded.like(f"% {self.organisation_key} %"))
        for column, value in self.equals:
            where.append(sa.func.lower(table.c[column]) == value)
        if self.misconduct_type is not None:
            # An alias, so the facet query that joins the link table does not correlate it.
            link = compliance_action_misconduct_types.alias("wanted_type")
            where.append(
                sa.exists().where(
                    link.c.page_id == table.c.page_id,
                    sa.func.lower(link.c.misconduct_type) == self.misconduct_type,
                )
            )
        if self.date_from is not None:
            where.append(table.c.action_date >= self.date_from)
        if self.date_to is not None:
            where.append(table.c.action_date <= self.date_to)
        if self.min_fine_cents is not None:
            where.append(table.c.fine_cents >= self.min_fine_cents)
        return where


def _min_fine_cents(value: Any) -> int | None:
    if value is None or value == "":
        return None
    try:
        amount = Decimal(str(value)) if not isinstance(value, Decimal) else value
    except (InvalidOperation, ValueError):
        raise QueryError(f"min_fine must be a number of dollars, got {value!r}") from None
    if isinstance(value, bool) or not amount.is_finite() or amount < 0:
        raise QueryError(f"min_fine must be a number of dollars of at least 0, got {value!r}")
    cents = math.ceil(amount * 100)
    if cents > FINE_CENTS_MAX:  # no stored fine is larger; the bound would not fit the column
        raise QueryError(f"min_fine must be at most {cents_to_fine(FINE_CENTS_MAX)} dollars (the "
                         f"largest fine kb stores), got {value!r}")
    return cents


def _iso_date(text: str) -> dt.date:
    return dt.date.fromisoformat(text.strip())


def _checked_filters(
    given: Mapping[str, Any], date_from: Any, date_to: Any, min_fine: Any
) -> tuple[_Filters, dict[str, Any]]:
    """The checked filters (``given``: the text filters by name) and a plain echo of them
    (only those given) for the answer.

    Raises:
        QueryError: a filter of the wrong type, a bad date, ``date_from`` after ``date_to``,
            a negative ``min_fine``, or a query with nothing to match.
    """
    text = clean_filters(given, QUERY_MAX)
    start = date_filter(date_from, "date_from", _iso_date, "a date as YYYY-MM-DD")
    end = date_filter(date_to, "date_to", _iso_date, "a date as YYYY-MM-DD")
    if start is not None and end is not None and start > end:
        raise QueryError(f"date_from {start} is after date_to {end}")
    cents = _min_fine_cents(min_fine)
    words = tuple(query_words(text["query"]))
    if text["query"] is not None and not words:
        raise QueryError(f"query {text['query']!r} has no letters or digits to match")
    filters = _Filters(
        words=words,
        organisation_key=normalize_organisation(text["organisation"]),
        equals=tuple(
            (name, text[name].lower())  # type: ignore[union-attr]
            for name in ("regulatory_body", "status", "sector")
            if text[name] is not None
        ),
        misconduct_type=text["misconduct_type"].lower() if text["misconduct_type"] else None,
        date_from=start,
        date_to=end,
        min_fine_cents=cents,
    )
    echo = {**text, "date_from": start, "date_to": end, "min_fine": cents_to_fine(cents)}
    return filters, given_filters(echo)


def _facets(conn: Connection, where: list[sa.ColumnElement[bool]]) -> dict[str, Facet]:
    table = compliance_actions
    link = compliance_action_misconduct_types
    facets: dict[str, Facet] = {}
    for name in FACETS:
        if name == "misconduct_type":
            column = link.c.misconduct_type
            source = link.join(table, link.c.page_id == table.c.page_id)
        else:
            column = table.c[name]
            source = table
        number = sa.func.count().label("n")
        query = (
            sa.select(column, number)
            .select_from(source)
            .where(*where)
            .group_by(column)
            .order_by(number.desc(), column.asc().nulls_last())
        )
        counted = [FacetValue(value, int(n)) for value, n in conn.execute(query)]
        facets[name] = Facet(values=tuple(counted[:FACET_MAX]), distinct=len(counted))
    return facets


def run_search(conn: Connection, filters: _Filters, limit: int) -> dict[str, Any]:
    """The fields of a ``ComplianceSearchResult`` (all but ``limit`` and ``filters``) for
    ``filters``, read in ``conn``'s transaction."""
    table = compliance_actions
    where = filters.conditions()
    count, cents, with_fine = conn.execute(
        sa.select(
            sa.func.count(), sa.func.sum(table.c.fine_cents), sa.func.count(table.c.fine_cents)
        )
        .select_from(table)
        .where(*where)
    ).one()
    rows = list(
        conn.execute(
            sa.select(table)
            .where(*where)
            .order_by(
                table.c.action_date.desc().nulls_last(),
                table.c.fine_cents.desc().nulls_last(),
                table.c.page_id,
            )
            .limit(limit)
        ).mappings()
    )
    kinds = misconduct_by_page(conn, [r["page_id"] for r in rows])
    scope = "matches" if count or not where else "all"
    return {
        "rows": tuple(row_to_action(r, kinds.get(r["page_id"], ())) for r in rows),
        "count": int(count),
        "fine_total": cents_to_fine(int(cents or 0)),
        "with_fine": int(with_fine),
        "without_fine": int(count) - int(with_fine),
        "facets": _facets(conn, where if scope == "matches" else []),
        "facets_scope": scope,
        "synced_at": last_synced(conn, compliance_sync_state, NOTION_SOURCE),
    }


class ComplianceSearchCatalog(CatalogBase):
    """The read side of the compliance tables (see the module docstring)."""

    def search_compliance(
        self,
        query: str | None = None,
        *,
        organisation: str | None = None,
        regulatory_body: str | None = None,
        status: str | None = None,
        misconduct_type: str | None = None,
        sector: str | None = None,
        date_from: dt.date | str | None = None,
        date_to: dt.date | str | None = None,
        min_fine: Decimal | float | int | str | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> ComplianceSearchResult:
        """Every compliance action matching all the given filters (see the module docstring
        for how each matches), with exact totals over the whole match set.

        Args:
            limit: rows to return (``capped_limit``; at most ``MAX_LIMIT``). ``count``, the
                totals and the facets always cover every match.

        Returns:
            A ``ComplianceSearchResult`` whose parts all come from one snapshot
            (``CatalogBase._snapshot``).

        Raises:
            QueryError: a bad filter or ``limit`` (the message says what to send).
            SchemaMissingError / StoreUnavailableError / StoreError: as every catalog read.
        """
        capped = capped_limit(limit, MAX_LIMIT)
        text = {
            "query": query,
            "organisation": organisation,
            "regulatory_body": regulatory_body,
            "status": status,
            "misconduct_type": misconduct_type,
            "sector": sector,
        }
        filters, echo = _checked_filters(text, date_from, date_to, min_fine)
        with self._snapshot() as conn:
            found = run_search(conn, filters, capped)
        return ComplianceSearchResult(**found, limit=capped, filters=echo)
