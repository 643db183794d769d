"""The ``find_reference`` tool: route a question to the registered live reference pages whose
descriptions match it best (dense search over points of kind ``reference`` only), returning
their URLs and descriptions for the caller to fetch itself. kb holds only the descriptors
that ``add_reference`` queued and ``kb_assets.references`` indexed, never a page's text.
Issue 12, "find_reference / add_reference". No ``from __future__ import annotations`` here
(see ``kb_mcp.tools``).
"""

from typing import Annotated

from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from kb_mcp.render import tool_result
from kb_mcp.tools import (
    KbContext,
    KbServer,
    bounded_int,
    check_range,
    check_search_query,
    kb_tool,
    query_type,
    state_of,
)
from kb_shared.errors import EmptyCorpusError
from kb_shared.search.retrieval import NOTHING_FOUND_SIMILARITY
from kb_shared.stores.vectors import KIND_REFERENCE, Hit

#: Most pages one call returns (input schema ``maximum``).
MAX_TOP_K = 10

DESCRIPTION = """\
Find registered live reference pages (API documentation, specifications) whose descriptions
match a question, with their URLs. kb does not hold their text: fetch the URL yourself and
cite it. Use search_docs for the indexed documents.
"""

NONE_REGISTERED = (
    "No reference pages are registered yet, so there is nothing to route to. add_reference "
    "registers one (its description is indexed shortly after)."
)


class ReferencePage(BaseModel):
    """One registered reference page."""

    reference_id: int = Field(description="The page's id, as `kb references list` shows it.")
    url: str = Field(description="Fetch this yourself to read the page.")
    title: str
    description: str
    similarity: float = Field(description="Cosine similarity of description and question.")


class FindReferenceOutput(BaseModel):
    """Structured content of find_reference."""

    results: list[ReferencePage] = Field(description="Best match first.")
    low_confidence: bool = Field(
        False,
        description=(
            "No registered page clearly matches: the best similarity is below the threshold "
            "search_docs uses for 'not covered'. Do not fetch these on the strength of this."
        ),
    )


def reference_pages(hits: list[Hit]) -> list[ReferencePage]:
    """The pages of ``hits`` (points of kind ``reference``; payload ``reference_id``, ``url``,
    ``title``, ``description`` as ``kb_assets.references`` writes it), in hit order."""
    return [
        ReferencePage(
            reference_id=hit.point.payload["reference_id"],
            url=hit.point.payload["url"],
            title=hit.point.payload["title"],
            description=hit.point.payload["description"],
            similarity=round(hit.score, 3),
        )
        for hit in hits
    ]


def is_low_confidence(pages: list[ReferencePage]) -> bool:
    """No page's description is close enough to the question: the best similarity is below
    ``kb_shared.search.retrieval.NOTHING_FOUND_SIMILARITY`` (the calibrated "nothing relevant"
    threshold of search_docs, same embedding model)."""
    return bool(pages) and pages[0].similarity < NOTHING_FOUND_SIMILARITY


def answer_text(question: str, pages: list[ReferencePage]) -> str:
    """The tool's text: numbered pages, each title, URL, description and similarity, then
    the reminder that kb has only descriptions; a low-confidence answer says so first."""
    if not pages:
        return NONE_REGISTERED
    if is_low_confidence(pages):
        lines = [
            f'No registered reference page clearly matches "{question}" (best similarity '
            f"{pages[0].similarity:.2f}, below {NOTHING_FOUND_SIMILARITY:.2f}). Tell the user no "
            "registered page covers it; add_reference can register one. Closest pages, probably "
            "unrelated:"
        ]
    else:
        lines = [f'Registered reference pages for "{question}", best match first:']
    for n, page in enumerate(pages, start=1):
        lines += [
            f"[{n}] {page.title} — {page.url}",
            f"    {page.description}",
            f"    (reference #{page.reference_id}, similarity {page.similarity:.2f})",
        ]
    lines.append(
        "kb keeps only these descriptions, not the pages: fetch the URL of a page that fits "
        "to read it, and cite it by its URL."
    )
    return "\n".join(lines)


def register(server: KbServer, *, max_query_chars: int) -> None:
    """Register ``find_reference`` on ``server``; questions up to ``max_query_chars``."""

    @kb_tool(
        server, "find_reference", title="Find a reference page", description=DESCRIPTION
    )
    def find_reference(
        question: query_type(max_query_chars),
        ctx: KbContext,
        top_k: bounded_int(1, MAX_TOP_K, "Pages to return.") = 5,
    ) -> Annotated[CallToolResult, FindReferenceOutput]:
        text = check_search_query(question, max_query_chars)
        check_range("top_k", top_k, 1, MAX_TOP_K)
        state = state_of(ctx)
        try:
            index = state.vectors()
        except EmptyCorpusError:  # no index yet: nothing registered either
            hits = []
        else:
            vector = state.embedder.embed_query(text)
            hits = index.dense_search(vector, top_k, kinds=[KIND_REFERENCE])
        pages = reference_pages(hits)
        return tool_result(
            answer_text(text, pages),
            FindReferenceOutput(results=pages, low_confidence=is_low_confidence(pages)),
        )
