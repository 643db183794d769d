"""The resources: ``kb://documents`` (the document list as compact JSON) and two templates,
``kb://documents/{doc_id}`` (one ready document's entry) and ``kb://categories/{+category}``
(the document list of one category, e.g. ``kb://categories/aemo/procedures``). Clients
complete their ``doc_id`` and ``category`` through ``kb_mcp.completions``.

A static resource gets no MCP ``Context`` (mcp 2.3 refuses it), so every resource reads the
live state from the ``StateHolder`` the lifespan fills.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from kb_mcp import render
from kb_mcp.documents import READY, document_list, not_ready, resolve_document
from kb_mcp.errors import ToolProblem
from kb_mcp.links import Links
from kb_mcp.state import StateHolder
from kb_mcp.tools import KbServer
from kb_mcp.tools.list_documents import listing_output
from kb_shared.stores.readers import CatalogReader

log = logging.getLogger(__name__)

T = TypeVar("T")

DOCUMENTS_URI = "kb://documents"
#: One document's entry; ``doc_id`` as list_documents shows it (a file name is accepted too).
DOCUMENT_TEMPLATE = "kb://documents/{doc_id}"
#: The documents filed under a category or below it; ``+`` lets the value hold ``/``.
CATEGORY_TEMPLATE = "kb://categories/{+category}"


def register(server: KbServer, *, holder: StateHolder, links: Links) -> None:
    """Register ``kb://documents`` and the two templates on ``server``; they read the state
    ``holder`` publishes."""

    @server.resource(
        DOCUMENTS_URI,
        name="documents",
        title="Indexed documents",
        description=(
            "Every ready document (doc_id, name, title, version, pages, chunk and figure counts, "
            "PDF URL, updated_at) plus pending/failed counts and the series of documents "
            "linked as editions, as compact JSON."
        ),
        mime_type="application/json",
    )
    def documents_resource() -> str:
        try:
            output = listing_output(document_list(holder.state.catalog), links)
        except Exception as exc:
            log.warning("%s failed: %s", DOCUMENTS_URI, exc)
            raise ResourceError(f"cannot read the catalog: {exc}") from exc
        return output.model_dump_json()

    @server.resource(
        DOCUMENT_TEMPLATE,
        name="document",
        title="One indexed document",
        description=(
            "One ready document's entry (as in kb://documents) by doc_id, as compact JSON."
        ),
        mime_type="application/json",
    )
    def document_resource(doc_id: str) -> str:
        catalog = _catalog(holder)
        row = _read_catalog(DOCUMENT_TEMPLATE, lambda: resolve_document(catalog, doc_id))
        if row.status != READY:
            raise ResourceNotFoundError(str(not_ready([row], "read")))
        return render.document_ref(row, links).model_dump_json()

    @server.resource(
        CATEGORY_TEMPLATE,
        name="category",
        title="Documents of one category",
        description=(
            "The documents filed under a category or below it (e.g. aemo matches "
            "aemo/procedures), in the shape of kb://documents, as compact JSON."
        ),
        mime_type="application/json",
    )
    def category_resource(category: str) -> str:
        catalog = _catalog(holder)
        listing = _read_catalog(CATEGORY_TEMPLATE, lambda: document_list(catalog, category))
        if not (listing.ready or listing.pending or listing.failed):
            raise ResourceNotFoundError(
                f"no document is filed under category {category!r}; read kb://documents for "
                "every document and its category"
            )
        return listing_output(listing, links).model_dump_json()


def _read_catalog(template: str, read: Callable[[], T]) -> T:
    """``read()`` for a resource template, with its errors as MCP resource errors.

    Raises:
        ResourceNotFoundError: ``read`` raised a ``ToolProblem`` (unknown document or category).
        ResourceError: any other failure (the catalog is unreadable), logged with ``template``.
    """
    try:
        return read()
    except ToolProblem as exc:
        raise ResourceNotFoundError(str(exc)) from exc
    except Exception as exc:
        log.warning("%s failed: %s", template, exc)
        raise ResourceError(f"cannot read the catalog: {exc}") from exc


def _catalog(holder: StateHolder) -> CatalogReader:
    """The live catalog.

    Raises:
        ResourceError: the server is starting or stopping.
    """
    try:
        return holder.state.catalog
    except ToolProblem as exc:
        raise ResourceError(str(exc)) from exc
