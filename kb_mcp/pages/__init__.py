"""The pages kb's read-only HTTP server shows people, beside ``/mcp`` and ``/files``: each
module adds its routes with ``register(mcp, holder=…, settings=…)`` and ``register_pages``
calls them all. Access rules are the ``/files`` ones (``kb_mcp.http.AccessMiddleware``,
``PAGE_PREFIXES``).
"""

from __future__ import annotations

from kb_mcp.pages import gallery, graph
from kb_mcp.state import StateHolder
from kb_mcp.tools import KbServer
from kb_shared.settings import Settings


def register_pages(mcp: KbServer, *, holder: StateHolder, settings: Settings) -> None:
    """Add every page's routes to ``mcp`` (custom routes of its Starlette app)."""
    gallery.register(mcp, holder=holder, settings=settings)
    graph.register(mcp, holder=holder, settings=settings)
