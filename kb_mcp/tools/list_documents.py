"""The ``list_documents`` tool: the ready documents and how many are pending or failed.
No ``from __future__ import annotations`` here (see ``kb_mcp.tools``)."""

from typing import Annotated

from mcp.types import CallToolResult

from kb_mcp import render
from kb_mcp.documents import document_list
from kb_mcp.links import Links
from kb_mcp.schemas import ListDocumentsOutput
from kb_mcp.tools import KbContext, KbServer, kb_tool, state_of

DESCRIPTION = """\
List the documents in the knowledge base: file name, doc_id, title, version, page, chunk and
figure counts, and a link to the PDF; also how many documents are still being built or
failed. Call it before concluding that the corpus lacks a document (a file name rarely
matches a document's official title), and to get the names search_docs (documents filter)
and read_doc accept. Use search_docs to search their content.
"""


def register(server: KbServer, *, links: Links) -> None:
    """Register ``list_documents`` on ``server``; PDF links go through ``links``."""

    @kb_tool(server, "list_documents", title="List documents", description=DESCRIPTION)
    def list_documents(ctx: KbContext) -> Annotated[CallToolResult, ListDocumentsOutput]:
        return render.document_list_result(document_list(state_of(ctx).catalog), links)
