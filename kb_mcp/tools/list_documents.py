"""The ``list_documents`` tool: the ready documents and how many are pending or failed, and
the version history of documents that have more than one version.
No ``from __future__ import annotations`` here (see ``kb_mcp.tools``)."""

from typing import Annotated

from mcp.types import CallToolResult, TextContent
from pydantic import Field

from kb_mcp import render
from kb_mcp.documents import DocumentList, document_list, version_notes
from kb_mcp.links import Links
from kb_mcp.schemas import ListDocumentsOutput
from kb_mcp.tools import CATEGORY_HELP, KbContext, KbServer, kb_tool, state_of
from kb_shared.stores.catalog.documents import CATEGORY_MAX

DESCRIPTION = """\
List the documents in the knowledge base: file name, doc_id, title, version, page, chunk and
figure counts, and a link to the PDF, grouped by category (the folder a document was filed
under, e.g. aemo/procedures; pass category to list one); also how many documents are still
being built or failed, and for a document with several versions which one is served, how many
earlier ones exist and whether a newer one is being built or failed. Call it before concluding
that the corpus lacks a document (a file name rarely
matches a document's official title), and to get the names search_docs (documents filter)
and read_doc accept. Use search_docs to search their content.
"""

#: Heads the version lines of the text content.
VERSIONS_HEADING = "Versions (search returns only the version serving):"


def register(server: KbServer, *, links: Links) -> None:
    """Register ``list_documents`` on ``server``; PDF links go through ``links``."""

    @kb_tool(server, "list_documents", title="List documents", description=DESCRIPTION)
    def list_documents(
        ctx: KbContext,
        category: Annotated[
            str | None,
            Field(min_length=1, max_length=CATEGORY_MAX, description=CATEGORY_HELP),
        ] = None,
    ) -> Annotated[CallToolResult, ListDocumentsOutput]:
        listing = document_list(state_of(ctx).catalog, category)
        return with_versions(render.document_list_result(listing, links, category), listing)


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
