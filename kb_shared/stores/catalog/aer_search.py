"""``search_aer``: every stored AER figure matching a set of filters, with the exact count and,
for one metric, the exact total and per-quarter totals, computed in SQL over the whole match
set (never from the capped rows), plus the vocabulary present so a wrong filter is corrected
in one retry. For the MCP tool ``search_aer_performance`` (issue 11, "MCP tools").

Matching rules:

* ``retailer``: the same name, ignoring case, spacing, punctuation, legal-form endings and
  footnote marks (``retailer_key``: "AGL Sales Pty. Ltd." and "agl sales" find "AGL Sales Pty
  Ltd" and "AGL Sales Pty Ltd (b)"). ``jurisdiction``, ``fuel``,
  ``customer_type``: any spelling the workbooks use ("New South Wales", "elec", "Resi").
  ``schedule``: ``3`` or ``"Schedule 3"``.
* ``metric``: a metric key, any heading it has been published under (``aer_metrics``) or
  any wording the alias table gives it (``aer_metrics.METRIC_ALIASES``, also wordings of
  template versions kb never synced), ignoring case, spacing and punctuation
  (``aer_metrics.normalize_heading``). The answer names the headings the matching figures
  were published under, with their quarters (``headings``); when none meets the other
  filters, the metric's headings and quarters without them (``headings_outside``), so
  "nothing found" is never the whole answer when the metric has figures.
* ``period_from``/``period_to``: a quarter label (``"Q3 2025-26"``), a financial year
  (``"2025-26"``: from its first quarter, to its last) or a date; quarters overlapping the
  range, inclusive. A quarter with one calendar year (``"Q3 2023"``) is refused with the two
  quarters it may mean.

Rows are retailers' figures; the published ``<Region> Total`` rows matching the same filters
(the retailer aside) come separately in ``region_totals``, so nothing is counted twice. For
the same reason the total over several jurisdictions leaves out the National rows, which
repeat ACT + NSW + QLD + SA + TAS (``total_note`` says so when it happens).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from kb_shared.errors import QueryError
from kb_shared.market.aer import (
    NATIONAL,
    AerObservation,
    Quarter,
    normalize_customer_type,
    normalize_fuel,
    normalize_jurisdiction,
    normalize_words,
    stored_value,
    strip_footnote,
)
from kb_shared.market.aer_metrics import METRIC_ALIASES, normalize_heading
from kb_shared.stores.catalog.aer import (
    AER_SOURCE,
    aer_metrics,
    aer_performance,
    aer_sync_state,
    observation_from_row,
)
from kb_shared.stores.catalog.common import (
    CatalogBase,
    SearchResult,
    capped_limit,
    clean_filters,
    date_filter,
    given_filters,
    last_synced,
)
from kb_shared.stores.catalog.compliance import normalize_organisation

#: Rows returned by default, and at most (issue 11: "limit=100", "cap 500").
DEFAULT_LIMIT = 100
MAX_LIMIT = 500
#: Longest filter value accepted, in characters.
FILTER_MAX = 500


@dataclass(frozen=True, slots=True)
class AerMetricInfo:
    """A metric of one schedule: its key, whether it adds up across retailers, and every
    heading it has been published under (oldest first), first and last seen (releases)."""

    schedule: str
    metric_key: str
    additive: bool
    headings: tuple[str, ...]
    first_seen: str
    last_seen: str


@dataclass(frozen=True, slots=True)
class AerPeriod:
    """A quarter present in the store: its label and first and last days."""

    label: str
    start: dt.date
    end: dt.date


@dataclass(frozen=True, slots=True)
class AerVocabulary:
    """The values present in the whole store, each sorted (periods by date)."""

    schedules: tuple[str, ...]
    retailers: tuple[str, ...]
    jurisdictions: tuple[str, ...]
    fuels: tuple[str, ...]
    customer_types: tuple[str, ...]
    periods: tuple[AerPeriod, ...]
    metrics: tuple[AerMetricInfo, ...]


@dataclass(frozen=True, slots=True)
class AerHeadingMatch:
    """A heading the matching figures were published under: its metric, the first and last
    quarter (labels) of those figures, and how many there are (retailer rows)."""

    schedule: str
    metric_key: str
    heading: str
    first_period: str
    last_period: str
    rows: int


@dataclass(frozen=True, slots=True)
class AerPeriodTotal:
    """The sum of one metric's matching figures in one quarter, over ``rows`` figures."""

    period: str
    period_start: dt.date
    period_end: dt.date
    total: Decimal
    rows: int


@dataclass(frozen=True, slots=True)
class AerSearchResult(SearchResult[AerObservation]):
    """What ``search_aer`` found (``SearchResult``'s fields, then these).

    ``rows``: matching retailer figures, latest quarter first. ``metric``: the metric when the
    matches have exactly one (else None); ``total`` and ``period_totals`` (oldest first) then
    sum it over the whole match set, when it is additive (a rate or average has no total:
    ``total_note`` says why it is None, or that National rows were left out). ``region_totals``:
    the published ``<Region> Total`` figures for the same filters, retailer aside (up to
    ``limit``). ``has_data`` False means nothing has been synced, as opposed to "no rows match
    these filters". ``vocabulary`` lists what is present. ``headings``: with a ``metric``
    filter, the headings of the matching figures (schedule, key, heading order); when nothing
    matches, those of the metric's figures regardless of the other filters, and then
    ``headings_outside`` is True.
    """

    metric: AerMetricInfo | None
    headings: tuple[AerHeadingMatch, ...]
    headings_outside: bool
    total: Decimal | None
    period_totals: tuple[AerPeriodTotal, ...]
    total_note: str | None
    region_totals: tuple[AerObservation, ...]
    vocabulary: AerVocabulary
    has_data: bool


def retailer_key(name: str) -> str | None:
    """What a retailer filter and a stored retailer are compared on: the words of the name
    (``aer.normalize_words``: case, punctuation and camel case folded) with its footnote marks
    (``aer.strip_footnote``) and legal-form endings (``compliance.normalize_organisation``:
    Pty, Ltd, Limited...) dropped; ``"EnergyAustralia Pty Ltd (b)"`` -> ``"energy
    australia"``. None for a name without letters or digits."""
    return normalize_organisation(normalize_words(strip_footnote(name)))


def _retailer_names(conn: Connection, wanted: str) -> list[str]:
    """The stored retailer labels (totals aside) whose ``retailer_key`` is that of ``wanted``."""
    key = retailer_key(wanted)
    if key is None:
        return []
    query = sa.select(aer_performance.c.retailer).where(
        sa.not_(aer_performance.c.is_total)).distinct()
    return sorted(name for name in conn.execute(query).scalars() if retailer_key(name) == key)


def _schedule_text(value: Any) -> Any:
    """A schedule given as a number (``3``) as text; anything else as given."""
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


def _bound(value: Any, name: str, end: bool) -> dt.date | None:
    """A quarter label's first (or, with ``end``, last) day, or a date as given."""

    def parse(text: str) -> dt.date:
        try:
            quarter = Quarter.parse(text)
        except ValueError:
            year = Quarter.financial_year(text)
            if year is not None:
                return year[1].end if end else year[0].start
            return dt.date.fromisoformat(text.strip())
        return quarter.end if end else quarter.start

    if value is not None and not isinstance(value, (str, dt.date)):
        raise QueryError(f"{name} must be a quarter like 'Q3 2025-26' or a date, got {value!r}")
    hint = Quarter.calendar_quarter_hint(value) if isinstance(value, str) else None
    if hint is not None:
        raise QueryError(f"{name}: {hint}; send one of those, or a date as YYYY-MM-DD")
    expected = "a quarter like 'Q3 2025-26' or a date as YYYY-MM-DD"
    return date_filter(value, name, parse, expected)


def _metric_infos(conn: Connection) -> list[AerMetricInfo]:
    rows = conn.execute(
        sa.select(aer_metrics).order_by(
            aer_metrics.c.schedule, aer_metrics.c.metric_key, aer_metrics.c.first_seen_end,
            aer_metrics.c.heading,
        )
    ).mappings()
    grouped: dict[tuple[str, str], list[Any]] = {}
    for row in rows:
        grouped.setdefault((row["schedule"], row["metric_key"]), []).append(row)
    infos = []
    for (schedule, key), headings in grouped.items():
        first = min(headings, key=lambda r: r["first_seen_end"])
        last = max(headings, key=lambda r: r["last_seen_end"])
        infos.append(AerMetricInfo(
            schedule=schedule,
            metric_key=key,
            additive=all(bool(r["additive"]) for r in headings),
            headings=tuple(r["heading"] for r in headings),
            first_seen=first["first_seen"],
            last_seen=last["last_seen"],
        ))
    return infos


def _matching_metrics(metric: str, infos: list[AerMetricInfo]) -> list[AerMetricInfo]:
    """The metrics whose key, one of whose stored headings or one of whose wordings in the
    alias table is ``metric`` (normalised)."""
    wanted = normalize_heading(metric)
    aliased = {(a.schedule, a.key) for a in METRIC_ALIASES
               if any(normalize_heading(h) == wanted for h in a.headings)}
    return [
        info for info in infos
        if normalize_heading(info.metric_key) == wanted
        or any(normalize_heading(h) == wanted for h in info.headings)
        or (info.schedule, info.metric_key) in aliased
    ]


def _heading_matches(
    conn: Connection, where: list[sa.ColumnElement[bool]], labels: dict[dt.date, str]
) -> tuple[AerHeadingMatch, ...]:
    """Per (schedule, metric key, heading as published) of the rows ``where`` selects: the
    first and last quarter and the row count; ``labels`` maps a quarter's start to its label."""
    table = aer_performance
    first = sa.func.min(table.c.period_start)
    query = (
        sa.select(table.c.schedule, table.c.metric_key, table.c.heading, first,
                  sa.func.max(table.c.period_start), sa.func.count())
        .where(*where)
        .group_by(table.c.schedule, table.c.metric_key, table.c.heading)
        .order_by(table.c.schedule, table.c.metric_key, first, table.c.heading)
    )
    return tuple(
        AerHeadingMatch(schedule, key, heading, labels[start], labels[end], int(rows))
        for schedule, key, heading, start, end, rows in conn.execute(query)
    )


def _vocabulary(conn: Connection, infos: list[AerMetricInfo]) -> AerVocabulary:
    table = aer_performance

    def distinct(column: sa.Column[Any], *where: sa.ColumnElement[bool]) -> tuple[str, ...]:
        query = sa.select(column).where(*where).distinct().order_by(column)
        return tuple(conn.execute(query).scalars())

    periods = conn.execute(
        sa.select(table.c.period, table.c.period_start, table.c.period_end)
        .distinct().order_by(table.c.period_start)
    ).all()
    return AerVocabulary(
        schedules=distinct(table.c.schedule),
        retailers=distinct(table.c.retailer, sa.not_(table.c.is_total)),
        jurisdictions=distinct(table.c.jurisdiction),
        fuels=distinct(table.c.fuel),
        customer_types=distinct(table.c.customer_type),
        periods=tuple(AerPeriod(label, start, end) for label, start, end in periods),
        metrics=tuple(infos),
    )


def _period_totals(
    conn: Connection, where: list[sa.ColumnElement[bool]]
) -> tuple[tuple[AerPeriodTotal, ...], bool]:
    """Per quarter, the sum of the matching retailer figures, without the National rows
    when other jurisdictions' rows are there too; and whether any were left out."""
    table = aer_performance
    national = (table.c.jurisdiction == NATIONAL).label("national")
    query = (
        sa.select(table.c.period, table.c.period_start, table.c.period_end, national,
                  sa.func.sum(table.c.value), sa.func.count())
        .where(*where)
        .group_by(table.c.period, table.c.period_start, table.c.period_end, national)
        .order_by(table.c.period_start)
    )
    groups: dict[tuple[str, dt.date, dt.date], dict[bool, tuple[Decimal, int]]] = {}
    for period, start, end, is_national, total, rows in conn.execute(query):
        groups.setdefault((period, start, end), {})[bool(is_national)] = (
            stored_value(Decimal(total)), int(rows))
    totals = []
    left_out = False
    for (period, start, end), parts in groups.items():
        if False in parts:
            total, rows = parts[False]
            left_out = left_out or True in parts
        else:
            total, rows = parts[True]
        totals.append(AerPeriodTotal(period, start, end, total, rows))
    return tuple(totals), left_out


class AerSearchCatalog(CatalogBase):
    """The read side of the AER tables (see the module docstring)."""

    def search_aer(
        self,
        *,
        retailer: str | None = None,
        jurisdiction: str | None = None,
        fuel: str | None = None,
        customer_type: str | None = None,
        schedule: str | int | None = None,
        metric: str | None = None,
        period_from: str | dt.date | None = None,
        period_to: str | dt.date | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> AerSearchResult:
        """Every stored AER figure matching all the given filters (see the module docstring
        for how each matches), with exact counts and totals over the whole match set.

        ``limit`` is ``capped_limit``'s, up to ``MAX_LIMIT``: ``count`` and the totals
        always cover every match. The answer is read in one snapshot (``_snapshot``).

        Raises:
            QueryError: a filter of the wrong type, a bad quarter or date, ``period_from``
                after ``period_to``, or a bad ``limit``.
            SchemaMissingError, StoreUnavailableError, StoreError: as every catalog read.
        """
        capped = capped_limit(limit, MAX_LIMIT)
        given = {
            "retailer": retailer,
            "jurisdiction": jurisdiction,
            "fuel": fuel,
            "customer_type": customer_type,
            "schedule": _schedule_text(schedule),
            "metric": metric,
        }
        text = clean_filters(given, FILTER_MAX)
        start = _bound(period_from, "period_from", end=False)
        end = _bound(period_to, "period_to", end=True)
        if start is not None and end is not None and start > end:
            raise QueryError(f"period_from {period_from!r} is after period_to {period_to!r}")
        table = aer_performance
        shared: list[sa.ColumnElement[bool]] = []
        if text["jurisdiction"]:
            code = normalize_jurisdiction(text["jurisdiction"]) or text["jurisdiction"]
            shared.append(table.c.jurisdiction == code)
        if text["fuel"]:
            shared.append(table.c.fuel == (normalize_fuel(text["fuel"]) or text["fuel"].lower()))
        if text["customer_type"]:
            kind = normalize_customer_type(text["customer_type"]) or text["customer_type"]
            shared.append(table.c.customer_type == kind.lower())
        if text["schedule"]:
            number = re.sub(r"(?i)^schedule\s*", "", text["schedule"])
            shared.append(table.c.schedule == (str(int(number)) if number.isdigit() else number))
        if start is not None:
            shared.append(table.c.period_end >= start)
        if end is not None:
            shared.append(table.c.period_start <= end)
        with self._snapshot() as conn:
            infos = _metric_infos(conn)
            metric_condition: sa.ColumnElement[bool] | None = None
            if text["metric"]:
                chosen = _matching_metrics(text["metric"], infos)
                metric_condition = sa.tuple_(table.c.schedule, table.c.metric_key).in_(
                    [(m.schedule, m.metric_key) for m in chosen]
                ) if chosen else sa.false()
                shared.append(metric_condition)
            where = [*shared, sa.not_(table.c.is_total)]
            if text["retailer"]:
                names = _retailer_names(conn, text["retailer"])
                where.append(table.c.retailer.in_(names) if names else sa.false())
            found = self._run(conn, where, [*shared, table.c.is_total], infos, capped,
                              metric_condition)
        echo = given_filters({**text, "period_from": start, "period_to": end})
        return AerSearchResult(**found, limit=capped, filters=echo)

    def _run(
        self,
        conn: Connection,
        where: list[sa.ColumnElement[bool]],
        totals_where: list[sa.ColumnElement[bool]],
        infos: list[AerMetricInfo],
        limit: int,
        metric_condition: sa.ColumnElement[bool] | None,
    ) -> dict[str, Any]:
        table = aer_performance
        order = (table.c.period_start.desc(), table.c.schedule, table.c.metric_key, table.c.fuel,
                 table.c.customer_type, table.c.jurisdiction, table.c.retailer)
        count = int(conn.execute(sa.select(sa.func.count()).select_from(table).where(*where))
                    .scalar_one())
        rows = [observation_from_row(r) for r in conn.execute(
            sa.select(table).where(*where).order_by(*order).limit(limit)
        ).mappings()]
        region_totals = [observation_from_row(r) for r in conn.execute(
            sa.select(table).where(*totals_where).order_by(*order).limit(limit)
        ).mappings()]
        metrics = conn.execute(
            sa.select(table.c.schedule, table.c.metric_key).where(*where).distinct().limit(2)
        ).all()
        metric = None
        total: Decimal | None = None
        period_totals: tuple[AerPeriodTotal, ...] = ()
        note = None
        if len(metrics) == 1:
            metric = next((i for i in infos if (i.schedule, i.metric_key) == tuple(metrics[0])),
                          None)
            if metric is not None and metric.additive:
                period_totals, left_out = _period_totals(conn, where)
                total = stored_value(sum((p.total for p in period_totals), Decimal(0)))
                if left_out:
                    note = ("National rows are left out of the totals: they repeat the "
                            "jurisdictions' figures (National = ACT + NSW + QLD + SA + TAS)")
            elif metric is not None:
                note = f"{metric.metric_key} is a rate or an average: its figures do not add up"
        has_data = count > 0 or conn.execute(sa.select(sa.exists().select_from(table))).scalar()
        vocabulary = _vocabulary(conn, infos)
        headings: tuple[AerHeadingMatch, ...] = ()
        outside = False
        if metric_condition is not None:
            labels = {p.start: p.label for p in vocabulary.periods}
            if count:
                headings = _heading_matches(conn, where, labels)
            else:
                headings = _heading_matches(
                    conn, [metric_condition, sa.not_(table.c.is_total)], labels)
                outside = bool(headings)
        return {
            "rows": tuple(rows),
            "count": count,
            "metric": metric,
            "headings": headings,
            "headings_outside": outside,
            "total": total,
            "period_totals": period_totals,
            "total_note": note,
            "region_totals": tuple(region_totals),
            "vocabulary": vocabulary,
            "has_data": bool(has_data),
            "synced_at": last_synced(conn, aer_sync_state, AER_SOURCE),
        }
