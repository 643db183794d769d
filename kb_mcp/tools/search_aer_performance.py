"""The ``search_aer_performance`` tool: every AER retail-performance figure matching the filters,
with the exact count and, for one metric, the exact total and per-quarter totals
(``Catalog.search_aer``, computed in SQL over the whole match set), rendered by
``kb_mcp.render_market``. No ``from __future__ import annotations`` here (see
``kb_mcp.tools``)."""

from typing import Annotated

from mcp.types import CallToolResult
from pydantic import Field

from kb_mcp import render_market
from kb_mcp.schemas import SearchAerOutput
from kb_mcp.tools import KbContext, KbServer, kb_tool, optional_text, state_of, validated_int
from kb_shared.errors import SchemaMissingError
from kb_shared.stores.catalog.aer_search import DEFAULT_LIMIT, FILTER_MAX, MAX_LIMIT

#: Longest period bound accepted ("Q3 2025-26" or "2026-01-31" need far fewer).
MAX_PERIOD_CHARS = 32

DESCRIPTION = """\
Figures of the Australian retail energy market from the AER's quarterly "Retail energy market
performance update": customers, disconnections, payment plans, complaints, hardship; exact
counts and totals over every match, and with no match the values present to retry with.
Use it for numbers about the market. Use search_compliance for enforcement actions and
search_docs for what the rules require. Cite figures by "file · sheet!cell" and credit
"Source: AER © Commonwealth of Australia (CC BY 4.0)".
"""




def register(server: KbServer) -> None:
    """Register ``search_aer_performance`` on ``server``."""

    @kb_tool(
        server, "search_aer_performance", title="Search AER retail performance figures",
        description=DESCRIPTION,
    )
    def search_aer_performance(
        ctx: KbContext,
        # the filters: FILTER_MAX characters at most (the store's own bound)
        retailer: optional_text(FILTER_MAX, "As published, e.g. 'AGL Sales Pty Ltd'.") = None,
        jurisdiction: optional_text(FILTER_MAX, "ACT, NSW, QLD, SA, TAS or National.") = None,
        fuel: optional_text(FILTER_MAX, "electricity or gas.") = None,
        customer_type: optional_text(FILTER_MAX, "residential or small business.") = None,
        schedule: Annotated[
            int | Annotated[str, Field(max_length=FILTER_MAX)] | None,
            Field(description="2, 3, 4 or 6."),
        ] = None,
        metric: optional_text(
            FILTER_MAX, "A metric key or any heading it was published under."
        ) = None,
        # a period bound: a quarter label or a date
        period_from: optional_text(
            MAX_PERIOD_CHARS, "Quarter ('Q3 2024-25') or YYYY-MM-DD."
        ) = None,
        period_to: optional_text(MAX_PERIOD_CHARS, "Inclusive.") = None,
        limit: validated_int(1, MAX_LIMIT, "Figures listed; totals cover all.") = DEFAULT_LIMIT,
    ) -> Annotated[CallToolResult, SearchAerOutput]:
        state = state_of(ctx)
        try:
            found = state.catalog.search_aer(
                retailer=retailer, jurisdiction=jurisdiction, fuel=fuel,
                customer_type=customer_type, schedule=schedule, metric=metric,
                period_from=period_from, period_to=period_to, limit=limit,
            )
        except SchemaMissingError as exc:
            raise render_market.tables_missing(
                "AER", render_market.AER_SYNC_COMMAND, "AER figures", exc
            ) from exc
        return render_market.aer_result(found)
