"""The ``list_documents`` tool: the ready documents and how many are pending or failed, the
version history of documents that have more than one version, and the series of documents
linked as editions (issue 27); ``listing_output`` is also the ``kb://documents`` resource's
JSON. No ``from __future__ import annotations`` here (see ``kb_mcp.tools``)."""

from typing import Annotated

from mcp.types import CallToolResult
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
        text = render.document_list_text(listing, links, category) + listing_notes(listing)
        return render.tool_result(text, listing_output(listing, links))


def listing_notes(listing: DocumentList) -> str:
    """What the list_documents text adds after the list: ``version_notes(listing)`` under
    ``VERSIONS_HEADING``, then ``series_notes(listing)`` under ``SERIES_HEADING``, each only
    when it has notes ("" when neither has)."""
    sections = ((VERSIONS_HEADING, version_notes(listing)), (SERIES_HEADING, series_notes(listing)))
    return "".join(
        f"\n\n{heading}\n" + "\n".join(f"- {note}" for note in notes)
        for heading, notes in sections
        if notes
    )
