"""The ``list_documents`` tool: the ready documents and how many are pending or failed, the
version history of documents that have more than one version, and the series of documents
linked as editions (issue 27); ``listing_output`` is also the ``kb://documents`` resource's
JSON. No ``from __future__ import annotations`` here (see ``kb_mcp.tools``)."""

from typing import Annotated

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from kb_mcp import render
from kb_mcp.documents import DocumentList, document_list, series_notes, version_notes
from kb_mcp.links import Links
from kb_mcp.schemas import ListDocumentsOutput
from kb_mcp.tools import CategoryArg, KbContext, KbServer, kb_tool, state_of

DESCRIPTION = """\
List the indexed documents (name, doc_id, title, version, counts, link) by category, with
those building or failed, versions and editions. Call it before concluding that a document
is missing (names rarely match official titles).
"""

#: Heads the version lines of the text content.
VERSIONS_HEADING = "Versions (search returns only the version serving):"

#: Heads the series lines of the text content.
SERIES_HEADING = "Series (documents that are editions of one document, oldest first):"


class EditionRef(BaseModel):
    """One edition of a series."""

    doc_id: str
    name: str
    status: str = Field(description="ready, pending or failed.")
    edition_of: str | None = Field(
        None, description="doc_id of the previous edition; null for the first."
    )


class SeriesRef(BaseModel):
    """Documents linked as editions of one document (``kb add --edition-of``)."""

    editions: list[EditionRef] = Field(description="Oldest edition first.")


class ListDocumentsSeriesOutput(ListDocumentsOutput):
    """Structured content of list_documents and the kb://documents resource: the document
    list plus its series."""

    series: list[SeriesRef] = Field(
        default_factory=list,
        description="Each series of two or more editions a listed document belongs to.",
    )


def listing_output(listing: DocumentList, links: Links) -> ListDocumentsSeriesOutput:
    """The structured form of ``listing`` (``render.document_list_output``) with its series."""
    base = render.document_list_output(listing, links)
    series = [
        SeriesRef(
            editions=[
                EditionRef(
                    doc_id=row.doc_id, name=row.name, status=row.status, edition_of=row.edition_of
                )
                for row in editions
            ]
        )
        for editions in listing.series
    ]
    return ListDocumentsSeriesOutput(**base.model_dump(), series=series)


def register(server: KbServer, *, links: Links) -> None:
    """Register ``list_documents`` on ``server``; PDF links go through ``links``."""

    @kb_tool(server, "list_documents", title="List documents", description=DESCRIPTION)
    def list_documents(
        ctx: KbContext,
        category: CategoryArg = None,
    ) -> Annotated[CallToolResult, ListDocumentsSeriesOutput]:
        listing = document_list(state_of(ctx).catalog, category)
        result = with_versions(render.document_list_result(listing, links, category), listing)
        return with_series(result, listing, links)


def with_versions(result: CallToolResult, listing: DocumentList) -> CallToolResult:
    """``result`` with ``version_notes(listing)`` appended to its text (unchanged when no
    listed document has more than one version)."""
    notes = version_notes(listing)
    first = result.content[0] if result.content else None
    if not notes or not isinstance(first, TextContent):
        return result
    text = first.text + "\n\n" + VERSIONS_HEADING + "\n" + "\n".join(f"- {n}" for n in notes)
    return result.model_copy(
        update={"content": [TextContent(type="text", text=text), *result.content[1:]]}
    )


def with_series(result: CallToolResult, listing: DocumentList, links: Links) -> CallToolResult:
    """``result`` with ``series_notes(listing)`` appended to its text (when there are any) and
    its structured content as ``listing_output``."""
    notes = series_notes(listing)
    content = list(result.content)
    first = content[0] if content else None
    if notes and isinstance(first, TextContent):
        text = first.text + "\n\n" + SERIES_HEADING + "\n" + "\n".join(f"- {n}" for n in notes)
        content[0] = TextContent(type="text", text=text)
    structured = listing_output(listing, links).model_dump(mode="json")
    return result.model_copy(update={"content": content, "structured_content": structured})
