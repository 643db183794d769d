"""The ``list_documents`` tool: the ready documents and how many are pending or failed.
No ``from __future__ import annotations`` here (see ``kb_mcp.tools``)."""

from typing import Annotated

from mcp.types import CallToolResult
from pydantic import Field

from kb_mcp import render
from kb_mcp.documents import document_list
from kb_mcp.links import Links
from kb_mcp.schemas import ListDocumentsOutput
from kb_mcp.tools import CATEGORY_HELP, KbContext, KbServer, kb_tool, state_of
from kb_shared.stores.catalog.documents import CATEGORY_MAX

DESCRIPTION = """\
List the documents in the knowledge base: file name, doc_id, title, version, page, chunk and
figure counts, and a link to the PDF, grouped by category (the folder a document was filed
under, e.g. aemo/procedures; pass category to list one); also how many documents are still
being built or failed. Call it before concluding that the corpus lacks a document (a file name rarely
matches a document's official title), and to get the names search_docs (documents filter)
and read_doc accept. Use search_docs to search their content.
"""


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
        return render.document_list_result(listing, links, category)
