"""The kb MCP tools, one module each with a ``register(server, …)``; ``kb_mcp.server`` calls
them. What they share is here: the server and context types, the read-only annotations, the
registration decorator that applies ``kb_mcp.errors.tool_errors``, and the argument types
(the query, bounded, validated and choice integers, required and optional text, the
``documents`` and ``category`` filters).

The tool modules do not use ``from __future__ import annotations``: their signatures carry
bounds taken from settings (the query length), which pydantic must resolve from the enclosing
function's locals, and string annotations would be resolved in module globals only.

Argument bounds (issue 16, "Bad input"): the input schema publishes every bound (``maximum``,
``enum``, ``maxItems``, …) so a client can see it, but the bounds of ``top_k``, ``offset``,
``hops``, the chunk list and the query are checked by the tool itself (``check_range``,
``check_choice``, ``check_search_query``), so a value out of range gets one plain sentence
naming the argument, the range and what was sent instead of pydantic's validation report.
"""

import unicodedata
from collections.abc import Callable, Collection
from typing import Annotated, Any, TypeAlias, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from kb_mcp.errors import ToolProblem, reported
from kb_mcp.state import ServerState
from kb_shared.search.retrieval import check_query
from kb_shared.stores.catalog.documents import CATEGORY_MAX

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
CATEGORY_HELP = "Only this folder path and below, e.g. 'aemo'."

#: That ``category`` argument's type: a folder path of 1 to ``CATEGORY_MAX`` characters (the
#: catalog's bound), or ``None`` for every category; pydantic's validation refuses the rest.
CategoryArg: TypeAlias = Annotated[
    str | None,
    Field(min_length=1, max_length=CATEGORY_MAX, description=CATEGORY_HELP),
]

#: Most names the ``documents`` argument takes (input schema ``maxItems``).
MAX_DOCUMENT_FILTER = 20

#: The ``documents`` argument of search_docs and display_process: at most
#: ``MAX_DOCUMENT_FILTER`` names or doc_ids of 1 to ``MAX_NAME_CHARS`` characters, or ``None``
#: for every served document; pydantic's validation refuses anything else.
DocumentsArg: TypeAlias = Annotated[
    list[Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS)]] | None,
    Field(
        max_length=MAX_DOCUMENT_FILTER,
        description="Names or doc_ids (list_documents).",
    ),
]

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
        lean_published_schemas(server, name)
        return fn

    return register


#: Schema keys whose values are data, not schemas: never searched for prose to drop.
_DATA_KEYS = frozenset({"default", "enum", "const", "examples"})
#: Schema keys that map names to schemas: the names are kept whatever they are.
_NAMED_SCHEMAS = frozenset({"properties", "$defs", "definitions", "patternProperties"})


def without_prose(schema: Any, keys: frozenset[str]) -> Any:
    """A copy of the JSON schema ``schema`` without the string values of ``keys`` (e.g.
    ``title``, ``description``) in any schema object of it; property names and data
    (``default``, ``enum``, ``const``, ``examples``) are kept as they are."""
    if isinstance(schema, list):
        return [without_prose(item, keys) for item in schema]
    if not isinstance(schema, dict):
        return schema
    lean: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _NAMED_SCHEMAS and isinstance(value, dict):
            lean[key] = {name: without_prose(sub, keys) for name, sub in value.items()}
        elif key in keys and isinstance(value, str):
            continue
        else:
            lean[key] = value if key in _DATA_KEYS else without_prose(value, keys)
    return lean


def without_null_defaults(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (an input schema) without ``"default": null`` on its optional top-level
    properties: a property that is not required and not sent is ``None`` to the tool anyway."""
    required = set(schema.get("required", ()))
    properties = {
        name: {k: v for k, v in sub.items() if not (k == "default" and v is None)}
        if name not in required and isinstance(sub, dict) else sub
        for name, sub in schema.get("properties", {}).items()
    }
    return {**schema, "properties": properties} if "properties" in schema else schema


def lean_published_schemas(server: KbServer, name: str) -> None:
    """Publish tool ``name`` with what a model reads and nothing it does not (issue 28, "a
    tool list a model can afford"): its input schema without pydantic's per-field titles (the
    property names say the same; the descriptions stay) nor null defaults, and its output
    schema without titles and descriptions (those document ``kb_mcp.schemas`` for people).
    Arguments and results are still validated by the models themselves.

    Raises:
        LookupError: no tool ``name`` is registered on ``server``.
    """
    tool = server._tool_manager.get_tool(name)  # the SDK's registry; it has no public setter
    if tool is None:
        raise LookupError(f"tool {name!r} was not registered")
    tool.parameters = without_null_defaults(without_prose(tool.parameters, frozenset({"title"})))
    metadata = tool.fn_metadata  # FuncMetadata: its fields are read live (SDK docstring)
    if metadata.output_schema is not None:
        metadata.output_schema = without_prose(
            metadata.output_schema, frozenset({"title", "description"})
        )


def query_type(max_chars: int) -> Any:
    """The ``query`` argument of the search tools: at most ``max_chars`` characters
    (``Settings.max_query_chars``), published as ``maxLength`` in the input schema."""
    return Annotated[
        str,
        Field(
            description="A question, key terms, a code or clause number.",
            json_schema_extra={"maxLength": max_chars, "minLength": 1},
        ),
    ]


#: The advice every refused query ends with.
QUERY_HINT = "pass the words, clause number or code to look for"


def check_search_query(query: str, max_chars: int) -> str:
    """The stripped ``query`` when it has something to search for.

    ``kb_shared.search.retrieval.check_query`` refuses an empty query and one over ``max_chars``;
    this also refuses one made only of control or invisible characters (Unicode categories
    ``C*`` and whitespace) and one with no letter or digit (categories ``L*``/``N*``), which
    no index can match.

    Raises:
        QueryError: empty or too long (``check_query``).
        ToolProblem: only control characters, or no letters or digits.
    """
    text = check_query(query, max_chars)
    categories = [unicodedata.category(ch) for ch in text if not ch.isspace()]
    if all(category.startswith("C") for category in categories):
        raise ToolProblem(
            "the query holds only control or invisible characters (such as NUL, ESC or a "
            f"zero-width space), so there is nothing to search for; {QUERY_HINT}"
        )
    if not any(category[0] in "LN" for category in categories):
        raise ToolProblem(
            "the query has no letters or digits, only punctuation or symbols, so there is "
            f"nothing to search for; {QUERY_HINT}"
        )
    return text


def bounded_int(low: int, high: int, description: str) -> Any:
    """An integer argument whose range ``low``..``high`` the input schema publishes
    (``minimum``/``maximum``) and the tool checks with ``check_range`` (module docstring)."""
    return Annotated[
        int,
        Field(description=description, json_schema_extra={"minimum": low, "maximum": high}),
    ]


def validated_int(low: int, high: int, description: str) -> Any:
    """An integer argument of ``low``..``high`` published as ``minimum``/``maximum`` and
    checked by pydantic's validation (the market tools' ``limit``), unlike ``bounded_int``."""
    return Annotated[int, Field(ge=low, le=high, description=description)]


def required_text(max_chars: int, description: str) -> Any:
    """A text argument a call must give, of 1 to ``max_chars`` characters: published as
    ``minLength``/``maxLength`` in the input schema, and other text is refused by validation."""
    return Annotated[str, Field(min_length=1, max_length=max_chars, description=description)]


def optional_text(max_chars: int, description: str) -> Any:
    """A text argument that may be absent (``None``), of at most ``max_chars`` characters:
    published as ``maxLength`` in the input schema, and longer text is refused by validation."""
    return Annotated[
        Annotated[str, Field(max_length=max_chars)] | None, Field(description=description)
    ]


def check_range(name: str, value: int, low: int, high: int, hint: str = "") -> int:
    """``value`` when ``low <= value <= high``.

    Raises:
        ToolProblem: "top_k must be between 1 and 25; you sent 500", then the sentence
            ``hint`` when given.
    """
    if low <= value <= high:
        return value
    raise ToolProblem(
        f"{name} must be between {low:,} and {high:,}; you sent {value:,}" + _then(hint)
    )


def choice_int(choices: Collection[int], description: str) -> Any:
    """An integer argument that takes one of ``choices``, published as the schema's ``enum``
    and checked by the tool with ``check_choice`` (module docstring)."""
    return Annotated[
        int, Field(description=description, json_schema_extra={"enum": list(choices)})
    ]


def check_choice(name: str, value: int, choices: Collection[int], hint: str = "") -> int:
    """``value`` when it is one of ``choices``.

    Raises:
        ToolProblem: "hops must be 1 or 2; you sent 3", then the sentence ``hint`` when given.
    """
    if value in choices:
        return value
    *rest, last = [f"{choice:,}" for choice in choices]
    allowed = f"{', '.join(rest)} or {last}" if rest else last
    raise ToolProblem(f"{name} must be {allowed}; you sent {value:,}" + _then(hint))


def _then(hint: str) -> str:
    """``hint`` as the sentence after an error's first one ("" when there is none)."""
    return f". {hint}" if hint else ""
