"""The ``search_graph`` tool: relationships between entities, each with its supporting excerpt
(``kb_mcp.graph_search``), from documents that may be served only.
No ``from __future__ import annotations`` here (see ``kb_mcp.tools``)."""

from typing import Annotated

from mcp.types import CallToolResult

from kb_mcp import graph_search, render
from kb_mcp.documents import category_documents, category_prefix, served_documents
from kb_mcp.links import Links
from kb_mcp.schemas import SearchGraphOutput
from kb_mcp.tools import (
    CategoryArg,
    KbContext,
    KbServer,
    bounded_int,
    check_choice,
    check_range,
    check_search_query,
    choice_int,
    kb_tool,
    query_type,
    state_of,
)

#: Most relationships one call returns (input schema ``maximum``).
MAX_GRAPH_TOP_K = 30
#: How far the walk may go from a seed entity (input schema ``enum``).
HOPS = (1, 2)

DESCRIPTION = """\
Search the knowledge graph: entities (terms, roles, organisations) and typed relationships
between them (obligations, definitions, references), each with the excerpt it came from. Use it for relational questions: who must notify whom, what depends on what, links
across documents. Use search_docs instead for what a passage or clause says. Cite the
excerpts in your reply.
"""


def register(server: KbServer, *, links: Links, max_query_chars: int) -> None:
    """Register ``search_graph`` on ``server``; citations link through ``links``."""
    query_arg = query_type(max_query_chars)

    @kb_tool(server, "search_graph", title="Search the knowledge graph", description=DESCRIPTION)
    def search_graph(
        query: query_arg,
        ctx: KbContext,
        hops: choice_int(
            HOPS, "2 = one edge further."
        ) = 1,
        top_k: bounded_int(1, MAX_GRAPH_TOP_K, "Relationships to return.") = 10,
        category: CategoryArg = None,
    ) -> Annotated[CallToolResult, SearchGraphOutput]:
        text = check_search_query(query, max_query_chars)
        check_choice("hops", hops, HOPS, "hops=2 reaches one edge further than hops=1.")
        check_range("top_k", top_k, 1, MAX_GRAPH_TOP_K)
        state = state_of(ctx)
        only = served_documents(state.catalog).only
        if category_prefix(category) is not None:
            only = category_documents(state.catalog, category or "")
        answer = graph_search.search_graph(
            state.graph, state.vectors(), state.embedder, text, hops=hops, top_k=top_k,
            only=only,
        )
        return render.graph_result(answer, links)
