"""The ``search_aer_performance`` tool: every AER retail-performance figure matching the filters,
with the exact count and, for one metric, the exact total and per-quarter totals
(``Catalog.search_aer``, computed in SQL over the whole match set), rendered by
``kb_mcp.render_market``. No ``from __future__ import annotations`` here (see
``kb_mcp.tools``)."""

from typing import Annotated

from mcp.types import CallToolResult
from pydantic import Field

from kb_mcp import render_market
from kb_mcp.errors import ToolProblem
from kb_mcp.schemas import SearchAerOutput
from kb_mcp.tools import KbContext, KbServer, kb_tool, state_of
from kb_shared.errors import SchemaMissingError
from kb_shared.stores.catalog.aer_search import DEFAULT_LIMIT, FILTER_MAX, MAX_LIMIT

#: Longest period bound accepted ("Q3 2025-26" or "2026-01-31" need far fewer).
MAX_PERIOD_CHARS = 32

DESCRIPTION = """\
Numbers about the Australian retail energy market, from the AER's quarterly "Retail energy
market performance update" (Schedules 2, 3, 4 and 6): customer numbers and market contracts,
disconnections, payment plans, complaints, hardship programs, per retailer, jurisdiction,
fuel, customer type and quarter, exactly as published.

Returns every matching figure (up to limit) as "[n] quarter · jurisdiction · retailer · fuel,
customer type · value — file · sheet!cell (release) [label A11, NSW block A11:A14]" (the
row's label cell and its jurisdiction block), the exact count of all matches and, when the
matches are one metric, its exact total and per-quarter totals over the whole match set
(never a sample). Published "<Region> Total" rows come apart as [Tn]. Filters ignore case;
metric takes a metric key or any heading the metric has been published under, including
past ones, and the answer names the headings it matched with their quarters (a reworded
heading is listed with the releases each wording was published in). An answer with no
match lists every value present (retailers,
jurisdictions, fuels, customer types, quarters, metrics with their headings): retry with
one of them. It says apart "no rows match" and "no data has been synced".

Use it for numbers about the market. Use search_compliance for enforcement actions (fines,
penalties, who was pursued) and search_docs for what the rules require. Cite figures by
their "file · sheet!cell" and credit "Source: AER © Commonwealth of Australia (CC BY 4.0)".
Tool results are not shown to the user: put the figures and the credit in your reply.
"""


#: A text filter: at most ``FILTER_MAX`` characters (the store's own bound), or absent.
TextFilter = Annotated[str, Field(max_length=FILTER_MAX)] | None
#: A period bound: a quarter label or a date, or absent.
PeriodBound = Annotated[str, Field(max_length=MAX_PERIOD_CHARS)] | None


def register(server: KbServer) -> None:
    """Register ``search_aer_performance`` on ``server``."""

    @kb_tool(
        server, "search_aer_performance", title="Search AER retail performance figures",
        description=DESCRIPTION,
    )
    def search_aer_performance(
        ctx: KbContext,
        retailer: Annotated[
            TextFilter,
            Field(description="Retailer name as published, e.g. 'AGL Sales Pty Ltd' (any case)."),
        ] = None,
        jurisdiction: Annotated[
            TextFilter,
            Field(description="ACT, NSW, QLD, SA, TAS or National (= ACT+NSW+QLD+SA+TAS); "
                              "full names work too."),
        ] = None,
        fuel: Annotated[TextFilter, Field(description="'electricity' or 'gas'.")] = None,
        customer_type: Annotated[
            TextFilter, Field(description="'residential' or 'small business'.")
        ] = None,
        schedule: Annotated[
            int | Annotated[str, Field(max_length=FILTER_MAX)] | None,
            Field(description="AER schedule: 2, 3, 4 or 6 (or 'Schedule 3')."),
        ] = None,
        metric: Annotated[
            TextFilter,
            Field(description="A metric key (e.g. 'customers_disconnected_for_non_payment') or "
                              "any heading it has been published under, current or past."),
        ] = None,
        period_from: Annotated[
            PeriodBound,
            Field(description="First quarter, 'Q3 2024-25' (financial year), or a date "
                              "YYYY-MM-DD; quarters overlapping the range count."),
        ] = None,
        period_to: Annotated[
            PeriodBound, Field(description="Last quarter or date, inclusive.")
        ] = None,
        limit: Annotated[
            int,
            Field(ge=1, le=MAX_LIMIT,
                  description="Figures to list; count and totals always cover every match."),
        ] = DEFAULT_LIMIT,
    ) -> Annotated[CallToolResult, SearchAerOutput]:
        state = state_of(ctx)
        try:
            found = state.catalog.search_aer(
                retailer=retailer, jurisdiction=jurisdiction, fuel=fuel,
                customer_type=customer_type, schedule=schedule, metric=metric,
                period_from=period_from, period_to=period_to, limit=limit,
            )
        except SchemaMissingError as exc:
            raise ToolProblem(
                f"The AER tables do not exist in kb's catalog ({exc}). The operator must run "
                f"`kb db init`, then sync with {render_market.AER_SYNC_COMMAND}; until then kb "
                "has no AER figures."
            ) from exc
        return render_market.aer_result(found)
