"""The ``search_obligations`` tool: every obligation of the served documents' registers
(the ``obligations`` asset; ``Catalog.search_obligations``) matching the filters, with the
exact count and counts by party and document, rendered by ``kb_mcp.render_obligations``.
No ``from __future__ import annotations`` here (see ``kb_mcp.tools``)."""

from typing import Annotated, Literal

from mcp.types import CallToolResult
from pydantic import Field

from kb_mcp import render_obligations
from kb_mcp.documents import (
    READY,
    not_ready,
    read_serving_states,
    resolve_document,
    served_documents,
)
from kb_mcp.errors import ToolProblem
from kb_mcp.links import Links
from kb_mcp.schemas import SearchObligationsOutput
from kb_mcp.tools import (
    MAX_NAME_CHARS,
    KbContext,
    KbServer,
    bounded_int,
    check_range,
    kb_tool,
    optional_text,
    state_of,
)
from kb_shared.errors import SchemaMissingError
from kb_shared.stores.catalog import CatalogReader
from kb_shared.stores.catalog.obligations import DEFAULT_LIMIT, FILTER_MAX, MAX_LIMIT

DESCRIPTION = """\
The obligations register: every must / must not / should sentence or numbered command
("3.1.1 Limit access …"), one per bound party, with its role, deadline, clause and page. Returns every match (paged: next_offset continues), the
exact count, and counts by party and document, as "[O12] Retailer must — “sentence” — p. 14,
cl. 4.2". Use it for "all obligations of X", "what must a retailer do", "which have
deadlines". Use search_docs for one clause, search_graph for how parties relate. Quote the
sentences and pages in your reply.
"""

Modality = Literal["must", "must not", "should", "should not"]


def register(server: KbServer, *, links: Links) -> None:
    """Register ``search_obligations`` on ``server``; PDF links go through ``links``."""

    @kb_tool(
        server, "search_obligations", title="Search the obligations register",
        description=DESCRIPTION,
    )
    def search_obligations(
        ctx: KbContext,
        party: optional_text(
            FILTER_MAX, "Bound party or role, e.g. 'retailer', 'installer', 'AEMO'."
        ) = None,
        document: optional_text(
            MAX_NAME_CHARS, "One document's file name or doc_id (list_documents)."
        ) = None,
        modality: Annotated[Modality | None, Field(description="Only this modality.")] = None,
        query: optional_text(
            FILTER_MAX, "Words that must all appear in the sentence, e.g. 'notify'."
        ) = None,
        has_deadline: Annotated[
            bool | None, Field(description="true: only those with a deadline or condition.")
        ] = None,
        offset: bounded_int(0, 100_000, "Skip this many (paging).") = 0,
        limit: bounded_int(1, MAX_LIMIT, "Obligations to list; count covers all.") = DEFAULT_LIMIT,
    ) -> Annotated[CallToolResult, SearchObligationsOutput]:
        check_range("offset", offset, 0, 100_000)
        check_range("limit", limit, 1, MAX_LIMIT)
        catalog = state_of(ctx).catalog
        keys = register_keys(catalog, document)
        try:
            found = catalog.search_obligations(
                keys, party=party, modality=modality, query=query,
                has_deadline=has_deadline, offset=offset, limit=limit,
            )
        except SchemaMissingError as exc:
            raise ToolProblem(
                f"kb's catalog has no obligations table ({exc}). The operator must run "
                "`kb db init`, then `kb rebuild obligations --all`."
            ) from exc
        documents = {row.doc_id: row for row in catalog.list_documents()}
        return render_obligations.obligations_result(found, documents, links)


def register_keys(catalog: CatalogReader, document: str | None) -> list[str]:
    """The served version keys whose registers a search reads: every ready document's, or
    the named one's.

    Raises:
        EmptyCorpusError / ToolProblem: no document, or none ready (``served_documents``).
        ToolProblem: the named document is unknown, or is not ready (``not_ready``).
    """
    states = read_serving_states(catalog)
    served_documents(catalog, states)
    if document is None:
        return [row.key for row in states if row.status == READY]
    row = resolve_document(catalog, document)
    if row.status != READY:
        raise not_ready([row], "searched")
    return [state.key for state in states if state.doc_id == row.doc_id]
