"""The ``add_reference`` tool: queue a live reference page (API documentation, a specification)
with a description the caller writes, so ``find_reference`` can route later questions to it.
It records and never fetches; the ``reference_sensor`` (``kb_assets.references``) indexes the
descriptor (title, description, URL), never the page's text. Rules: issue 12,
"find_reference / add_reference"; same caps and duplicate rules as ``request_document``'s queue
(``kb_shared.stores.catalog.requests``). No ``from __future__ import annotations`` here (see
``kb_mcp.tools``).
"""

from typing import Annotated

from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from kb_mcp.errors import ToolProblem
from kb_mcp.render import tool_result
from kb_mcp.tools import KbContext, KbServer, kb_tool, required_text, state_of
from kb_mcp.tools.request_document import QUEUE_WRITE, check_link, check_plain_text
from kb_shared.errors import DuplicateRequestError, QueueFullError
from kb_shared.stores.catalog import DEFAULT_MAX_PENDING, DESCRIPTION_MAX, TITLE_MAX, URL_MAX

DESCRIPTION = f"""\
Register a live reference page (API documentation, a specification) for find_reference. kb
stores only the URL, title and description and never downloads the page: describe what it
covers and which questions it answers. A document to
search passage by passage belongs in request_document.
"""


class AddReferenceOutput(BaseModel):
    """Structured content of add_reference."""

    request_id: int = Field(description="The queued reference request's id.")
    url: str
    title: str


def register(server: KbServer, *, max_pending: int = DEFAULT_MAX_PENDING) -> None:
    """Register ``add_reference`` on ``server``; at most ``max_pending`` pages wait."""

    @kb_tool(
        server, "add_reference", title="Register a reference page", description=DESCRIPTION,
        annotations=QUEUE_WRITE,
    )
    def add_reference(
        url: required_text(URL_MAX, "The page's https URL."),
        title: Annotated[
            str, Field(min_length=1, max_length=TITLE_MAX)
        ],
        description: required_text(DESCRIPTION_MAX, "What it covers, for routing."),
        ctx: KbContext,
    ) -> Annotated[CallToolResult, AddReferenceOutput]:
        unplain = "nothing was queued: {reason}."
        check_plain_text(title, "title", unplain)
        check_plain_text(description, "description", unplain, lines=True)
        state = state_of(ctx)
        link = check_link(
            state.settings, url,
            "nothing was queued: url is not a link kb accepts ({reason}). Give the page's "
            "https address on the publisher's site.",
        )
        registered = next(
            (row for row in state.references.list_reference_sources() if row.url == link), None
        )
        if registered is not None:
            raise ToolProblem(
                f"nothing was queued: {link} is already registered as reference "
                f'#{registered.id} ("{registered.title}"); find_reference routes to it.'
            )
        try:
            request = state.references.add_reference_request(
                link, title, description, max_pending=max_pending
            )
        except (DuplicateRequestError, QueueFullError, ValueError) as exc:
            raise ToolProblem(f"nothing was queued: {exc}") from exc
        text = (
            f'Reference request #{request.id} for "{request.title}" ({request.url}) was '
            "queued. Its description is indexed shortly, after which find_reference routes "
            "matching questions to it; nothing was downloaded."
        )
        structured = AddReferenceOutput(
            request_id=request.id, url=request.url, title=request.title
        )
        return tool_result(text, structured)
