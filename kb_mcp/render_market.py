"""What the market-data tools send back: the text a model reads and cites, and the structured
content a program reads (``kb_mcp.schemas``). Pure formatting, like ``kb_mcp.render``.

Rules (issue 11, "MCP tools"; mcp-utilities README, "What a response costs"):

* one numbered line per figure or action, with its provenance (``file · sheet!cell`` and
  release; the Notion page and the regulator's notice);
* the exact count and totals first, said to cover every match even when the rows are capped;
* "no rows match these filters" worded apart from "no data has been synced" (which names the
  command that syncs), and a no-match answer lists every value present so one retry fixes it;
* a fine that is not recorded reads "no fine recorded", never $0;
* structured content carries ids, numbers, provenance fields, the vocabulary and
  ``synced_at``; the prose (summaries, published headings per row, messages) is only in the
  text;
* AER figures carry the licence's credit line (CC BY 4.0: "Source: AER © Commonwealth of
  Australia"; ``../shared/notes/next-capabilities.md``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from mcp.types import CallToolResult

from kb_mcp.errors import ToolProblem
from kb_mcp.render import tool_result
from kb_mcp.schemas import (
    AerFigureRef,
    AerHeadingMatchRef,
    AerMetricRef,
    AerPeriodTotalRef,
    AerVocabularyRef,
    ComplianceActionRef,
    FacetRef,
    FacetValueRef,
    MarketStatus,
    SearchAerOutput,
    SearchComplianceOutput,
)
from kb_shared.market.aer import AerObservation
from kb_shared.stores.catalog import (
    AerMetricInfo,
    AerSearchResult,
    AerVocabulary,
    ComplianceAction,
    ComplianceSearchResult,
    Facet,
)
from kb_shared.stores.catalog.aer_search import MAX_LIMIT as AER_MAX_LIMIT
from kb_shared.stores.catalog.common import SearchResult
from kb_shared.stores.catalog.compliance_search import MAX_LIMIT as COMPLIANCE_MAX_LIMIT

#: The credit the data's licence asks for (CC BY 4.0), on every answer that shows AER figures.
AER_ATTRIBUTION = "Source: AER © Commonwealth of Australia (CC BY 4.0)"

#: The commands that fill each table (``kb sync``, issue 11 "In Dagster").
AER_SYNC_COMMAND = "`kb sync aer SOURCE`"
NOTION_SYNC_COMMAND = "`kb sync notion`"

#: Characters of an action's summary shown in its line (the tracker allows far longer ones).
SUMMARY_SHOWN = 500

#: Facet names as the text writes them.
FACET_LABELS = {
    "organisation": "organisation",
    "sector": "sector",
    "regulatory_body": "regulatory body",
    "status": "status",
    "misconduct_type": "misconduct type",
}

NO_AER_DATA = (
    "No AER retail performance data has been synced into kb, so there is nothing to search "
    "(this is not a \"no match\": the table is empty). The operator loads the AER's quarterly "
    f"\"Retail energy market performance update\" workbooks with {AER_SYNC_COMMAND} (SOURCE: "
    "a downloaded workbook or a folder of them; or set KB_AER_SOURCE and let the daily "
    "schedule run). Tell the user kb has no AER figures yet; do not answer from memory "
    "as if kb had them."
)

NO_COMPLIANCE_DATA = (
    "The compliance tracker has not been synced into kb, so there is nothing to search (this "
    "is not a \"no match\": the table is empty). The operator syncs the Notion Compliance "
    f"Tracker with {NOTION_SYNC_COMMAND} (it needs NOTION_TOKEN and KB_NOTION_DATA_SOURCE_ID). "
    "Tell the user kb has no enforcement data yet; do not answer from memory as if kb had it."
)


def tables_missing(tables: str, sync_command: str, lacking: str, error: Exception) -> ToolProblem:
    """What a market tool answers when its ``tables`` are not in the catalog (``error``, a
    ``SchemaMissingError``): the commands that make them (``kb db init``) and fill them
    (``sync_command``), and that kb has no ``lacking`` until then."""
    return ToolProblem(
        f"The {tables} tables do not exist in kb's catalog ({error}). The operator must run "
        f"`kb db init`, then sync with {sync_command}; until then kb has no {lacking}."
    )


# ---------------------------------------------------------------------------------------------
# Shared formatting
# ---------------------------------------------------------------------------------------------


def format_number(value: Decimal) -> str:
    """An exact decimal as written for people: thousands separators, no exponent, no
    trailing zeros (``Decimal("7060625.0000000000")`` -> ``"7,060,625"``, ``0.0213000000``
    -> ``"0.0213"``)."""
    return f"{exact(value):,f}"


def exact(value: Decimal) -> Decimal:
    """The same number without the store's padding zeros, for structured content
    (``7060625.0000000000`` -> ``7060625``, ``0.0213000000`` -> ``0.0213``)."""
    normal = value.normalize()
    return normal.quantize(Decimal(1)) if normal == normal.to_integral_value() else normal


def format_money(value: Decimal | None) -> str:
    """Dollars to the cent (``"$1,500,000.00"``), or ``"no fine recorded"`` for ``None``."""
    return "no fine recorded" if value is None else f"${value:,.2f}"


def format_synced(when: dt.datetime | None) -> str:
    """``"2026-12-01 13:24 UTC"``, or ``"never"``."""
    if when is None:
        return "never"
    return when.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _iso(when: dt.date | dt.datetime | None) -> str | None:
    return None if when is None else when.isoformat()


def echo_filters(filters: Mapping[str, Any]) -> dict[str, str]:
    """The filters as applied, every value as text (dates ISO 8601, amounts exact)."""
    out: dict[str, str] = {}
    for name, value in filters.items():
        if isinstance(value, (dt.date, dt.datetime)):
            out[name] = value.isoformat()
        else:
            out[name] = str(value)
    return out


def _filters_phrase(filters: Mapping[str, str]) -> str:
    if not filters:
        return "no filters"
    return ", ".join(f"{name}={value!r}" for name, value in filters.items())


def _status(count: int, has_data: bool) -> MarketStatus:
    if count:
        return "ok"
    return "no_match" if has_data else "no_data"


def _counts(found: SearchResult[Any], status: MarketStatus) -> dict[str, Any]:
    """The fields every ``MarketSearchOutput`` starts with, as keyword arguments."""
    return {
        "status": status,
        "count": found.count,
        "returned": len(found.rows),
        "truncated": found.truncated,
        "limit": found.limit,
    }


def _shown(returned: int, count: int, order: str, cap: int) -> str:
    """The clause that says how many rows the answer lists."""
    if returned >= count:
        return f"all {count:,} listed ({order})"
    return (
        f"the first {returned:,} listed ({order}); the count and totals cover all {count:,}: "
        f"raise limit (at most {cap}) or narrow the filters to list the rest"
    )


# ---------------------------------------------------------------------------------------------
# search_aer_performance
# ---------------------------------------------------------------------------------------------


def _metric_ref(info: AerMetricInfo) -> AerMetricRef:
    return AerMetricRef(
        schedule=info.schedule, metric_key=info.metric_key, additive=info.additive,
        headings=list(info.headings), first_seen=info.first_seen, last_seen=info.last_seen,
    )


def _figure_ref(number: int, obs: AerObservation) -> AerFigureRef:
    return AerFigureRef(
        number=number, schedule=obs.schedule, period=obs.period,
        period_start=obs.period_start.isoformat(), period_end=obs.period_end.isoformat(),
        retailer=obs.retailer, jurisdiction=obs.jurisdiction, fuel=obs.fuel,
        customer_type=obs.customer_type, metric_key=obs.metric_key, value=exact(obs.value),
        source_file=obs.source_file, sheet=obs.sheet, cell=obs.cell, release=obs.release,
        is_total=obs.is_total, label_cell=obs.label_cell, block=obs.block,
    )


def _vocabulary_ref(vocabulary: AerVocabulary) -> AerVocabularyRef:
    return AerVocabularyRef(
        schedules=list(vocabulary.schedules),
        retailers=list(vocabulary.retailers),
        jurisdictions=list(vocabulary.jurisdictions),
        fuels=list(vocabulary.fuels),
        customer_types=list(vocabulary.customer_types),
        periods=[p.label for p in vocabulary.periods],
        metrics=[_metric_ref(m) for m in vocabulary.metrics],
    )


def _headings_phrase(info: AerMetricInfo) -> str:
    return " | ".join(f'"{heading}"' for heading in info.headings)


def figure_line(label: str, obs: AerObservation, *, with_heading: bool) -> str:
    """``[1] Q3 2025-26 · NSW · AGL Sales Pty Ltd · electricity, residential · 1,852 —
    file · sheet!cell (release Q4 2025-26) [label A11, NSW block A11:A14]``: the row's label
    cell and its jurisdiction block show which row of which block the figure is;
    ``with_heading`` adds the schedule and the heading as published before the value."""
    parts = [f"[{label}] {obs.period}", obs.jurisdiction, obs.retailer,
             f"{obs.fuel}, {obs.customer_type}"]
    value = format_number(obs.value)
    if with_heading:
        parts.append(f'Schedule {obs.schedule} "{obs.heading}" = {value}')
    else:
        parts.append(value)
    where = f"label {obs.label_cell}"
    if obs.block:
        where += f", {obs.jurisdiction} block {obs.block}"
    return " · ".join(parts) + f" — {obs.provenance} (release {obs.release}) [{where}]"


def vocabulary_lines(vocabulary: AerVocabulary, *, headings: bool) -> list[str]:
    """The values present, one line per filter. ``headings``: every past heading of every
    metric (a no-match answer); otherwise the metric keys by schedule."""
    periods = [p.label for p in vocabulary.periods]
    lines = [
        "Values present in kb's AER data (filters ignore case; metric takes a key or any "
        "heading the metric has had):",
        "schedules: " + ", ".join(vocabulary.schedules)
        + " · jurisdictions: " + ", ".join(vocabulary.jurisdictions)
        + " · fuels: " + ", ".join(vocabulary.fuels)
        + " · customer types: " + ", ".join(vocabulary.customer_types),
        f"quarters ({len(periods)}): " + ", ".join(periods),
        f"retailers ({len(vocabulary.retailers)}): " + "; ".join(vocabulary.retailers),
    ]
    if headings:
        lines.append(f"metrics ({len(vocabulary.metrics)}), key (schedule): headings — "
                     "releases published in:")
        lines += [
            f"- {m.metric_key} (Schedule {m.schedule}): {_headings_phrase(m)} — "
            f"{_span(m.first_seen, m.last_seen)}"
            for m in vocabulary.metrics
        ]
    else:
        by_schedule: dict[str, list[str]] = {}
        for m in vocabulary.metrics:
            by_schedule.setdefault(m.schedule, []).append(m.metric_key)
        lines.append(
            f"metrics ({len(vocabulary.metrics)}) by schedule: "
            + "; ".join(f"Schedule {s}: {', '.join(keys)}" for s, keys in by_schedule.items())
        )
    return lines


def _span(first: str, last: str) -> str:
    return first if first == last else f"{first} to {last}"


def _matched_headings(found: AerSearchResult) -> str | None:
    """The line naming the headings the metric filter matched, with their quarters."""
    if not found.headings:
        return None
    listed = "; ".join(
        f'"{h.heading}" ({h.metric_key}, Schedule {h.schedule}): '
        f"{_span(h.first_period, h.last_period)}, {h.rows:,} figure{'s' if h.rows != 1 else ''}"
        for h in found.headings
    )
    if found.headings_outside:
        return (f"The metric matched {listed}; none of those figures meets the other filters: "
                "widen the quarters (or other filters) to them.")
    return f"Matched heading(s) as published: {listed}."


def _region_totals(found: AerSearchResult) -> tuple[AerObservation, ...]:
    """The published totals an answer lists: none when no retailer figure matched (the
    answer is then about correcting the filters)."""
    return found.region_totals if found.count else ()


def _aer_totals(found: AerSearchResult) -> list[str]:
    metric = found.metric
    if metric is None:
        return ["The matches span several metrics, so there is no total: filter on one metric "
                "to get its exact total and per-quarter totals."]
    lines = [f"Metric: {metric.metric_key} (Schedule {metric.schedule}), published as "
             f"{_headings_phrase(metric)}."]
    if found.total is not None:
        summed = sum(p.rows for p in found.period_totals)  # National rows are left out
        over = (f"all {found.count:,} matching figures" if summed == found.count
                else f"{summed:,} of the {found.count:,} matching figures")
        quarters = len(found.period_totals)
        across = (
            f" (a sum over {quarters} quarters: right for events such as disconnections; for "
            "a count at each quarter's end, such as customer numbers, read the per-quarter "
            "totals)" if quarters > 1 else ""
        )
        lines.append(f"Total over {over}: {format_number(found.total)}{across}.")
        lines.append("Per quarter: " + "; ".join(
            f"{p.period} {format_number(p.total)} ({p.rows} figure{'s' if p.rows != 1 else ''})"
            for p in found.period_totals
        ) + ".")
    if found.total_note:
        lines.append(found.total_note + ".")
    return lines


def aer_text(found: AerSearchResult, filters: Mapping[str, str]) -> str:
    """The text of a search_aer_performance answer (see the module docstring)."""
    status = _status(found.count, found.has_data)
    if status == "no_data":
        return NO_AER_DATA
    footer = f"Last synced: {format_synced(found.synced_at)}. {AER_ATTRIBUTION}"
    if status == "no_match":
        parts = [
            f"No rows match these filters ({_filters_phrase(filters)}); kb does hold AER data "
            "(this is not \"no data\"). Retry with the values present below, or tell the user "
            "kb's AER figures do not cover it.",
            "\n".join(vocabulary_lines(found.vocabulary, headings=True)),
            footer,
        ]
        outside = _matched_headings(found)
        if outside is not None:
            parts.insert(1, outside)
        return "\n\n".join(parts)
    one_metric = found.metric is not None
    parts = [
        f"{found.count:,} AER figure(s) match {_filters_phrase(filters)}: "
        f"{_shown(len(found.rows), found.count, 'latest quarter first', AER_MAX_LIMIT)}. "
        "Figures are retailers' own; published <Region> Total rows are listed apart and not "
        "counted.",
        "\n".join(line for line in (*_aer_totals(found), _matched_headings(found)) if line),
        "Figures (rates are fractions as published: 0.0213 = 2.13%); cite as "
        "\"file · sheet!cell\":\n" + "\n".join(
            figure_line(str(n), obs, with_heading=not one_metric)
            for n, obs in enumerate(found.rows, 1)
        ),
    ]
    if found.region_totals:
        parts.append("Published totals for the same filters (retailer aside):\n" + "\n".join(
            figure_line(f"T{n}", obs, with_heading=not one_metric)
            for n, obs in enumerate(_region_totals(found), 1)
        ))
    parts.append("\n".join(vocabulary_lines(found.vocabulary, headings=False)))
    parts.append(footer)
    return "\n\n".join(parts)


def aer_result(found: AerSearchResult) -> CallToolResult:
    """The search_aer_performance result: ``aer_text`` plus ``SearchAerOutput``."""
    filters = echo_filters(found.filters)
    structured = SearchAerOutput(
        **_counts(found, _status(found.count, found.has_data)),
        metric=_metric_ref(found.metric) if found.metric is not None else None,
        total=exact(found.total) if found.total is not None else None,
        period_totals=[
            AerPeriodTotalRef(period=p.period, total=exact(p.total), rows=p.rows)
            for p in found.period_totals
        ],
        total_note=found.total_note,
        matched_headings=[
            AerHeadingMatchRef(schedule=h.schedule, metric_key=h.metric_key, heading=h.heading,
                               first_period=h.first_period, last_period=h.last_period,
                               rows=h.rows)
            for h in found.headings
        ],
        matched_outside_filters=found.headings_outside,
        rows=[_figure_ref(n, obs) for n, obs in enumerate(found.rows, 1)],
        region_totals=[
            _figure_ref(n, obs) for n, obs in enumerate(_region_totals(found), 1)
        ],
        filters=filters,
        vocabulary=_vocabulary_ref(found.vocabulary),
        synced_at=_iso(found.synced_at),
        attribution=AER_ATTRIBUTION,
    )
    return tool_result(aer_text(found, filters), structured)


# ---------------------------------------------------------------------------------------------
# search_compliance
# ---------------------------------------------------------------------------------------------


def _action_ref(number: int, action: ComplianceAction) -> ComplianceActionRef:
    return ComplianceActionRef(
        number=number, page_id=action.page_id, notion_url=action.notion_url,
        source_url=action.source_url, organisation=action.organisation, sector=action.sector,
        regulatory_body=action.regulatory_body, status=action.status,
        action_date=_iso(action.action_date), action_date_end=_iso(action.action_date_end),
        fine=action.fine, misconduct_types=list(action.misconduct_types),
    )


def _summary(text: str | None) -> str:
    clean = " ".join((text or "").split())
    if not clean:
        return "(no summary)"
    if len(clean) > SUMMARY_SHOWN:
        return clean[:SUMMARY_SHOWN].rstrip() + "… (cut; the Notion page has the rest)"
    return clean


def action_line(number: int, action: ComplianceAction) -> str:
    """``[1] 2025-02-14 · AGL Energy Limited · AER · Paid · $1,500,000.00 · Hardship — summary
    — Notion: url · Source: url`` (unset fields say so)."""
    when = action.action_date.isoformat() if action.action_date else "undated"
    if action.action_date_end:
        when += f" to {action.action_date_end.isoformat()}"
    parts = [
        f"[{number}] {when}",
        action.organisation or "(organisation not set)",
        action.regulatory_body or "(regulatory body not set)",
        action.status or "(status not set)",
        format_money(action.fine),
    ]
    if action.misconduct_types:
        parts.append(", ".join(action.misconduct_types))
    links = [f"Notion: {action.notion_url or 'page ' + action.page_id}"]
    if action.source_url:
        links.append(f"Source: {action.source_url}")
    return " · ".join(parts) + f" — {_summary(action.summary)} — " + " · ".join(links)


def _facet_line(name: str, facet: Facet) -> str:
    values = ", ".join(
        f"{value.value if value.value is not None else '(not set)'} ({value.count})"
        for value in facet.values
    )
    more = facet.distinct - len(facet.values)
    if more > 0:
        values += f", … and {more} more"
    return f"{FACET_LABELS.get(name, name)}: {values or '(none)'}"


def facet_lines(found: ComplianceSearchResult) -> list[str]:
    """The facets, one line each, introduced by what they cover."""
    scope = (
        "Values in these matches" if found.facets_scope == "matches"
        else "Values present in the whole tracker (nothing matched)"
    )
    return [f"{scope}; filters take them in any case:"] + [
        _facet_line(name, facet) for name, facet in found.facets.items()
    ]


def _fines(found: ComplianceSearchResult) -> str:
    line = (f"Fines: {format_money(found.fine_total)} in total over the {found.with_fine:,} "
            "matching action(s) with a fine recorded")
    if found.without_fine:
        verb = "has" if found.without_fine == 1 else "have"
        line += (f"; {found.without_fine:,} {verb} no fine recorded (not counted, and not $0: "
                 "the tracker does not say)")
    return line + "."


def _compliance_status(found: ComplianceSearchResult) -> MarketStatus:
    # With no match the facets cover the whole table, so an empty table has no facet value.
    return _status(found.count, any(facet.distinct for facet in found.facets.values()))


def compliance_text(found: ComplianceSearchResult, filters: Mapping[str, str]) -> str:
    """The text of a search_compliance answer (see the module docstring)."""
    status = _compliance_status(found)
    if status == "no_data":
        return NO_COMPLIANCE_DATA
    footer = f"Last synced: {format_synced(found.synced_at)} (Notion Compliance Tracker)."
    if status == "no_match":
        return "\n\n".join([
            f"No enforcement action matches these filters ({_filters_phrase(filters)}); the "
            "tracker is synced (this is not \"no data\"). Retry with the values present below. "
            "If none fits, say kb's tracker records no such action, which does not prove none "
            "happened.",
            "\n".join(facet_lines(found)),
            footer,
        ])
    parts = [
        f"{found.count:,} enforcement action(s) match {_filters_phrase(filters)}: "
        f"{_shown(len(found.rows), found.count, 'newest first', COMPLIANCE_MAX_LIMIT)}.",
        _fines(found),
        "Actions (date · organisation · regulator · status · fine · misconduct — summary — "
        "links):\n" + "\n".join(action_line(n, a) for n, a in enumerate(found.rows, 1)),
        "\n".join(facet_lines(found)),
        footer,
    ]
    return "\n\n".join(parts)


def _facet_refs(facets: Mapping[str, Facet]) -> dict[str, FacetRef]:
    return {
        name: FacetRef(
            values=[FacetValueRef(value=v.value, count=v.count) for v in facet.values],
            distinct=facet.distinct,
        )
        for name, facet in facets.items()
    }


def compliance_result(found: ComplianceSearchResult) -> CallToolResult:
    """The search_compliance result: ``compliance_text`` plus ``SearchComplianceOutput``."""
    filters = echo_filters(found.filters)
    structured = SearchComplianceOutput(
        **_counts(found, _compliance_status(found)),
        fine_total=found.fine_total,
        with_fine=found.with_fine,
        without_fine=found.without_fine,
        rows=[_action_ref(n, a) for n, a in enumerate(found.rows, 1)],
        facets=_facet_refs(found.facets),
        facets_scope="all" if found.facets_scope == "all" else "matches",
        filters=filters,
        synced_at=_iso(found.synced_at),
    )
    return tool_result(compliance_text(found, filters), structured)
