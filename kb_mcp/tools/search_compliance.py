"""The ``search_compliance`` tool: every enforcement action of the Notion Compliance Tracker
matching the filters, with the exact count, the exact fine total and the facets of the whole
match set (``Catalog.search_compliance``), rendered by ``kb_mcp.render_market``.
No ``from __future__ import annotations`` here (see ``kb_mcp.tools``)."""

from typing import Annotated

from mcp.types import CallToolResult
from pydantic import Field

from kb_mcp import render_market
from kb_mcp.schemas import SearchComplianceOutput
from kb_mcp.tools import KbContext, KbServer, kb_tool, optional_text, state_of, validated_int
from kb_shared.errors import SchemaMissingError
from kb_shared.stores.catalog.compliance import OPTION_MAX
from kb_shared.stores.catalog.compliance_search import DEFAULT_LIMIT, MAX_LIMIT

#: Longest date accepted (YYYY-MM-DD needs 10).
MAX_DATE_CHARS = 32
#: Largest min_fine accepted, in dollars: the store keeps fines as 64-bit cents.
MAX_FINE = 9e16

DESCRIPTION = """\
Enforcement actions against energy businesses (Compliance Tracker, Notion): who, by which
regulator, for what, when, status and fine, with the exact count and fine total (no fine
recorded is counted apart, never as $0). Use it for enforcement actions: has a retailer been
fined, how often, how much. Use search_aer_performance for numbers about the market and
search_docs for what the rules require.
"""



def register(server: KbServer, *, max_query_chars: int) -> None:
    """Register ``search_compliance`` on ``server``; ``query`` takes at most
    ``max_query_chars`` characters (``Settings.max_query_chars``)."""
    @kb_tool(
        server, "search_compliance", title="Search enforcement actions", description=DESCRIPTION
    )
    def search_compliance(
        ctx: KbContext,
        query: optional_text(max_query_chars, "Words of summary or organisation.") = None,
        # the filters: OPTION_MAX characters at most (the tracker's own bound)
        organisation: optional_text(OPTION_MAX, "Name or part of it, e.g. 'AGL'.") = None,
        regulatory_body: optional_text(OPTION_MAX, "e.g. AER, ESC, ACCC.") = None,
        status: optional_text(OPTION_MAX, "e.g. Paid, Open.") = None,
        misconduct_type: optional_text(OPTION_MAX, "e.g. Hardship.") = None,
        sector: optional_text(OPTION_MAX, "e.g. Retail.") = None,
        date_from: optional_text(MAX_DATE_CHARS, "YYYY-MM-DD, inclusive.") = None,
        date_to: optional_text(MAX_DATE_CHARS, "YYYY-MM-DD, inclusive.") = None,
        min_fine: Annotated[
            float | None,
            Field(ge=0, le=MAX_FINE,
                  description="Dollars."),
        ] = None,
        limit: validated_int(1, MAX_LIMIT, "Actions listed; totals cover all.") = DEFAULT_LIMIT,
    ) -> Annotated[CallToolResult, SearchComplianceOutput]:
        state = state_of(ctx)
        try:
            found = state.catalog.search_compliance(
                query, organisation=organisation, regulatory_body=regulatory_body,
                status=status, misconduct_type=misconduct_type, sector=sector,
                date_from=date_from, date_to=date_to, min_fine=min_fine, limit=limit,
            )
        except SchemaMissingError as exc:
            raise render_market.tables_missing(
                "compliance", render_market.NOTION_SYNC_COMMAND, "enforcement data", exc
            ) from exc
        return render_market.compliance_result(found)
