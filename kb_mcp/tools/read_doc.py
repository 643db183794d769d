"""The ``read_doc`` tool: whole chunks of one ready document by number (``kb_mcp.documents``).
No ``from __future__ import annotations`` here (see ``kb_mcp.tools``)."""

from typing import Annotated

from mcp.types import CallToolResult
from pydantic import Field

from kb_mcp import documents, render
from kb_mcp.errors import ToolProblem
from kb_mcp.links import Links
from kb_mcp.schemas import ReadDocOutput
from kb_mcp.tools import MAX_NAME_CHARS, KbContext, KbServer, kb_tool, required_text, state_of

DESCRIPTION = """\
Read up to 5 whole chunks of one document, with their pages and headings: what comes before
or after a search_docs result (chunk n-1, n+1) or a passage in full.
"""


def register(server: KbServer, *, links: Links) -> None:
    """Register ``read_doc`` on ``server``; citations link through ``links``."""

    @kb_tool(server, "read_doc", title="Read document chunks", description=DESCRIPTION)
    def read_doc(
        document: required_text(MAX_NAME_CHARS, "Name or doc_id, as list_documents shows."),
        chunk_numbers: Annotated[
            list[Annotated[int, Field(json_schema_extra={"minimum": 0})]],
            Field(
                json_schema_extra={"minItems": 1, "maxItems": documents.MAX_READ_CHUNKS},
                description="0-based, as in a result's 'chunk n of …'.",
            ),
        ],
        ctx: KbContext,
    ) -> Annotated[CallToolResult, ReadDocOutput]:
        check_chunk_numbers(chunk_numbers)
        state = state_of(ctx)
        answer = documents.read_doc(state.catalog, state.vectors(), document, chunk_numbers)
        return render.read_result(answer, links)


def check_chunk_numbers(numbers: list[int]) -> list[int]:
    """``numbers`` when it holds 1 to ``MAX_READ_CHUNKS`` chunk numbers, none negative (the
    bounds the input schema publishes, checked here so a bad list gets a plain-language error:
    ``kb_mcp.tools`` module docstring).

    Raises:
        ToolProblem: an empty list, too many numbers (with how many were sent) or a negative
            number.
    """
    most = documents.MAX_READ_CHUNKS
    if not numbers:
        raise ToolProblem(
            f"chunk_numbers is empty; pass 1 to {most} chunk numbers (0-based), e.g. [0, 1]"
        )
    if len(numbers) > most:
        raise ToolProblem(
            f"read_doc reads at most {most} chunks per call; you sent {len(numbers):,} chunk "
            f"numbers. Ask for {most} at a time, e.g. {list(range(most))}, then "
            f"{list(range(most, 2 * most))}"
        )
    negative = [n for n in numbers if n < 0]
    if negative:
        raise ToolProblem(
            f"chunk numbers start at 0; you sent {negative[0]:,}. Search results name each "
            "passage's chunk as 'chunk n of {doc_id}'"
        )
    return numbers
