"""The ``kb://documents`` resource: the document list as compact JSON.

A static resource gets no MCP ``Context`` (mcp 2.3 refuses it), so it reads the live state
from the ``StateHolder`` the lifespan fills.
"""

from __future__ import annotations

import logging

from mcp.server.mcpserver.exceptions import ResourceError

from kb_mcp import render
from kb_mcp.documents import document_list
from kb_mcp.links import Links
from kb_mcp.state import StateHolder
from kb_mcp.tools import KbServer

log = logging.getLogger(__name__)

DOCUMENTS_URI = "kb://documents"


def register(server: KbServer, *, holder: StateHolder, links: Links) -> None:
    """Register ``kb://documents`` on ``server``; it reads the state ``holder`` publishes."""

    @server.resource(
        DOCUMENTS_URI,
        name="documents",
        title="Indexed documents",
        description=(
            "Every ready document (doc_id, name, title, version, pages, chunk and figure counts, "
            "PDF URL, updated_at) plus pending/failed counts, as compact JSON."
        ),
        mime_type="application/json",
    )
    def documents_resource() -> str:
        try:
            output = render.document_list_output(document_list(holder.state.catalog), links)
        except Exception as exc:
            log.warning("%s failed: %s", DOCUMENTS_URI, exc)
            raise ResourceError(f"cannot read the catalog: {exc}") from exc
        return output.model_dump_json()
