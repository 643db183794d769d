"""The kb MCP tools, one module each with a ``register(server, …)``; ``kb_mcp.server`` calls
them. What they share is here: the server and context types, the read-only annotations, the
registration decorator that applies ``kb_mcp.errors.tool_errors``, and the query argument.

The tool modules do not use ``from __future__ import annotations``: their signatures carry
bounds taken from settings (the query length), which pydantic must resolve from the enclosing
function's locals, and string annotations would be resolved in module globals only.
"""

from collections.abc import Callable
from typing import Annotated, Any, TypeAlias, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from kb_mcp.errors import reported
from kb_mcp.state import ServerState

#: The kb server: its lifespan yields a ``ServerState``.
KbServer: TypeAlias = MCPServer[ServerState]

#: What a tool receives to reach the lifespan's ``ServerState``.
KbContext: TypeAlias = Context[ServerState, Any]

#: A tool that only reads, answers the same for the same corpus, and touches nothing outside
#: kb (MCP spec 2025-06-18, "Tool annotations"); every tool but the intake queues'.
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)

#: Longest document name or doc_id a tool accepts.
MAX_NAME_CHARS = 1024

#: The ``category`` argument of search_docs, search_graph and list_documents (issue 12).
CATEGORY_HELP = (
    "Only documents filed under this category or below it, e.g. 'aemo' (matches "
    "'aemo/procedures'); whole folder names, any case. list_documents shows the categories."
)

F = TypeVar("F", bound=Callable[..., Any])


def state_of(ctx: KbContext) -> ServerState:
    """The lifespan's ``ServerState`` for this request."""
    return ctx.request_context.lifespan_context


def kb_tool(
    server: KbServer,
    name: str,
    *,
    title: str,
    description: str,
    structured: bool = True,
    annotations: ToolAnnotations = READ_ONLY,
) -> Callable[[F], F]:
    """Decorator: register the function as tool ``name`` (read-only annotations unless
    ``annotations`` says otherwise), with its failures translated by ``tool_errors(name)``,
    so the name is written once.

    Args:
        structured: ``False`` for a tool that returns plain text (no output schema).
        annotations: the hints of a tool that writes (the intake queues).
    """

    def register(fn: F) -> F:
        server.tool(
            name=name, title=title, description=description, annotations=annotations,
            structured_output=None if structured else False,
        )(reported(name)(fn))
        return fn

    return register


def query_type(max_chars: int) -> Any:
    """The ``query`` argument of the search tools: at most ``max_chars`` characters
    (``Settings.max_query_chars``), published as ``maxLength`` in the input schema."""
    return Annotated[
        str,
        Field(
            description=(
                "What to look for: a question, key terms, or a code / clause number "
                f"(at most {max_chars:,} characters)."
            ),
            json_schema_extra={"maxLength": max_chars, "minLength": 1},
        ),
    ]
