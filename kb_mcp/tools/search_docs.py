"""The ``search_docs`` tool: hybrid passage search with page-level citations
(``kb_shared.search.retrieval``), over the documents that may be served (``kb_mcp.documents``).
No ``from __future__ import annotations`` here (see ``kb_mcp.tools``)."""

from dataclasses import replace
from typing import Annotated, Any, Literal

from mcp.types import CallToolResult
from pydantic import Field

from kb_mcp import images, render
from kb_mcp.documents import read_serving_states, search_scope
from kb_mcp.links import Links
from kb_mcp.schemas import SearchDocsOutput
from kb_mcp.state import ServerState
from kb_mcp.tools import (
    CategoryArg,
    DocumentsArg,
    KbContext,
    KbServer,
    bounded_int,
    check_range,
    check_search_query,
    kb_tool,
    query_type,
    state_of,
)
from kb_shared.search import quotes, retrieval
from kb_shared.search.query import start_query_embedding

#: Upper bounds of the arguments (input schema ``maximum``/``maxItems``).
MAX_TOP_K = 25
MAX_OFFSET = 200

#: What the out-of-range errors of top_k and offset add (``kb_mcp.tools.check_range``).
TOP_K_HINT = "For more results, page on with offset=next_offset."
OFFSET_HINT = (
    "Pass the next_offset of the previous page; to reach further, narrow the query or filter "
    "by documents or category."
)

DESCRIPTION = """\
Search the regulatory documents for passages that answer a question, with page citations;
codes and clause numbers (IN008-24, 3.1.5) match verbatim. Use it for what a rule, clause,
definition or table says. Use search_graph instead for how parties or obligations relate.
For numbers about the market use
search_aer_performance; for enforcement actions (fines, penalties) use search_compliance.
If the answer is flagged low confidence, the corpus does not cover the question: say so
rather than guess. Cite the [n] with their pages in your reply.
"""


def register(server: KbServer, *, links: Links, max_query_chars: int) -> None:
    """Register ``search_docs`` on ``server``; citations link through ``links``."""
    query_arg = query_type(max_query_chars)

    @kb_tool(server, "search_docs", title="Search documents", description=DESCRIPTION)
    def search_docs(
        query: query_arg,
        ctx: KbContext,
        top_k: bounded_int(1, MAX_TOP_K, "Results per page.") = 8,
        documents: DocumentsArg = None,
        kind: Annotated[
            Literal["text", "table", "figure"] | None,
            Field(description="Only this kind."),
        ] = None,
        offset: bounded_int(0, MAX_OFFSET, "The previous answer's next_offset.") = 0,
        category: CategoryArg = None,
    ) -> Annotated[CallToolResult, SearchDocsOutput]:
        text = check_search_query(query, max_query_chars)
        check_range("top_k", top_k, 1, MAX_TOP_K, TOP_K_HINT)
        check_range("offset", offset, 0, MAX_OFFSET, OFFSET_HINT)
        return answer_search(
            state_of(ctx), links, text, top_k=top_k, offset=offset, documents=documents,
            kind=kind, category=category,
        )


def run_search(
    state: ServerState,
    text: str,
    *,
    top_k: int = 8,
    offset: int = 0,
    documents: list[str] | None = None,
    kind: str | None = None,
    category: str | None = None,
) -> retrieval.DocsAnswer:
    """The search both search_docs and display_process answer from, for a checked query
    ``text``: the query embedded on a worker thread while the catalog is read once (the
    scope's and the acronym table's serving states), then
    ``kb_shared.search.retrieval.search_docs`` with the server's Markdown pages (page-precise
    quotes) and acronym table. No ``next_offset`` past ``MAX_OFFSET``, which the tool refuses.

    Raises:
        ToolProblem / EmptyCorpusError / store and provider errors: as ``search_scope`` and
            ``kb_shared.search.retrieval.search_docs``.
    """
    vector = start_query_embedding(state.embedder, text)  # while the catalog is read
    states = read_serving_states(state.catalog)  # the scope's and the acronyms' one read
    scope = search_scope(state.catalog, documents, category, states)
    answer = retrieval.search_docs(
        state.vectors(),
        state.embedder,
        text,
        top_k=top_k,
        offset=offset,
        documents=scope,
        kind=kind,
        reranker=state.reranker,
        markdown=quotes.markdown_pages(state.blobs),
        vector=vector,
        acronyms=state.acronyms(states),
    )
    if answer.next_offset is not None and answer.next_offset > MAX_OFFSET:
        answer = replace(answer, next_offset=None)  # a page the tool would refuse to give
    return answer


def answer_search(state: ServerState, links: Links, text: str, **search: Any) -> CallToolResult:
    """The body of the ``search_docs`` tool for a checked query ``text``: ``run_search`` with
    the checked arguments ``search`` (its keyword arguments), then the rendered result with its
    figure images. The serving benchmark profiles this very call.

    Raises:
        ToolProblem / EmptyCorpusError / store and provider errors: as ``run_search``.
    """
    answer = run_search(state, text, **search)
    shown = [] if answer.low_confidence else render.shown_results(answer)
    return render.docs_result(answer, links, images.figure_images(state.blobs, shown))
