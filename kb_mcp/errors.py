"""How failures reach the model: every tool turns them into an ``isError`` result whose text
says what went wrong and what to do next, never a stack trace (issue 4, "Behaviour that
users rely on"; mcp-utilities README: both search tools "catch errors into
``{ isError: true }`` rather than throwing").

The MCP SDK already turns a raised ``ToolError`` into ``CallToolResult(is_error=True)`` with
the message prefixed ``"Error executing tool <name>: "``; any other exception becomes an
``isError`` result with the message hidden. ``tool_errors`` sits in between so that the kb
errors that have a remedy (a store that is down, an index built by another model, an unknown
document) keep their message and gain the next step, and a genuine bug is logged here with its
traceback while the model gets a short, actionable line. The server process never stops.
``reported(name)`` applies it to a whole tool function at registration. ``check_arguments``
does the same for arguments that do not fit a tool (an unknown or missing name, a value of the
wrong type), which the SDK would otherwise answer with pydantic's validation report.
"""

from __future__ import annotations

import difflib
import functools
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolRequestParams, CallToolResult, TextContent
from pydantic import ValidationError

from kb_shared.errors import (
    DocumentNotFoundError,
    EmbeddingMismatchError,
    EmptyCorpusError,
    KbError,
    ProviderError,
    QueryError,
    StoreError,
    StoreUnavailableError,
)

log = logging.getLogger(__name__)

#: The hint every "the corpus is empty" message ends with.
ADD_DOCUMENTS_HINT = (
    "Add PDFs with `kb add PATH…` (the pipeline then builds them), and call list_documents to "
    "see what is indexed."
)

#: Message of every search over a corpus that has no vector index (or an empty one) yet.
EMPTY_CORPUS = (
    "The corpus is empty: no document has been indexed yet, so there is nothing to search. "
    + ADD_DOCUMENTS_HINT
)

P = ParamSpec("P")
R = TypeVar("R")


class ToolProblem(KbError):
    """A failure the caller can fix or act on (bad argument, unknown document, a document that
    is not ready).

    The message is shown to the model as is (after the SDK's ``Error executing tool`` prefix),
    so it must name the problem and the next step.
    """


def _provider_label(exc: ProviderError) -> str:
    """``"embedding model"``, ``"rerank model"``, …; ``"model"`` for an unnamed role."""
    return "model" if exc.role == ProviderError.role else f"{exc.role} model"


#: Each store's name in messages and the settings that locate it, found by what the store
#: adapters' messages start with (``kb_shared.stores.sql.guard``: "<store> database …";
#: ``Neo4jGraphStore``: "Neo4j at …"; ``QdrantVectorIndex``: "Qdrant at …";
#: ``SqliteVectorIndex``: "… SQLite vector index …").
STORE_MARKERS = (
    ("catalog database", ("catalog", "KB_DATABASE_URL / KB_READER_DATABASE_URL")),
    ("graph database", ("graph store", "KB_DATABASE_URL / KB_READER_DATABASE_URL")),
    ("Neo4j", ("graph store", "KB_NEO4J_URI, KB_NEO4J_USER, KB_NEO4J_PASSWORD")),
    ("Qdrant", ("vector index", "KB_QDRANT_URL, KB_QDRANT_API_KEY")),
    ("vector index", ("vector index", "KB_VECTOR_PATH")),
)
#: The blob store's name and setting (its failures are ``OSError``s from fsspec).
BLOB_STORE = ("blob store", "KB_BLOB_URL")
#: What an unavailable store no marker names is called.
ANY_STORE = (
    "store",
    "KB_DATABASE_URL / KB_READER_DATABASE_URL, KB_QDRANT_URL, KB_NEO4J_URI",
)


def store_of(exc: StoreUnavailableError) -> tuple[str, str]:
    """``(name, settings)`` of the store an error is about (``STORE_MARKERS``), e.g.
    ``("graph store", "KB_NEO4J_URI, …")``; ``ANY_STORE`` when the message names none."""
    text = str(exc)
    for marker, store in STORE_MARKERS:
        if marker in text:
            return store
    return ANY_STORE


@contextmanager
def tool_errors(tool: str) -> Iterator[None]:
    """Translate whatever a tool body raises into a ``ToolError`` with an actionable message.

    Args:
        tool: the tool's name, for the log line and the message of an unexpected failure.

    Raises:
        ToolError: always, when the body raised (``ToolError`` passes through unchanged).
    """
    try:
        yield
    except ToolError:
        raise
    except (ToolProblem, QueryError) as exc:
        raise ToolError(str(exc)) from exc
    except EmptyCorpusError as exc:
        raise ToolError(EMPTY_CORPUS) from exc
    except DocumentNotFoundError as exc:
        raise ToolError(f"{exc}. Call list_documents for the names and ids it accepts.") from exc
    except EmbeddingMismatchError as exc:
        raise ToolError(
            f"{exc} Until the operator re-embeds, search_docs and search_graph cannot answer; "
            "tell the user the index needs rebuilding rather than guessing."
        ) from exc
    except StoreUnavailableError as exc:
        log.warning("%s: a store is unavailable: %s", tool, exc)
        role, settings = store_of(exc)
        raise ToolError(
            f"A store kb reads from is unavailable (the {role}: {exc}). The MCP server is "
            f"still running: retry in a moment; tools that do not need the {role} keep "
            f"answering. If it keeps failing, the operator must check the {role} ({settings})."
        ) from exc
    except StoreError as exc:
        log.warning("%s: a store refused the request: %s", tool, exc)
        raise ToolError(f"A store refused the request: {exc}") from exc
    except OSError as exc:  # the blob store (stored PDFs, Markdown, figures) cannot be read
        log.warning("%s: the blob store failed: %s", tool, exc)
        raise ToolError(
            f"A store kb reads from is unavailable (the {BLOB_STORE[0]}: {exc}). The MCP server "
            "is still running: retry in a moment; if it keeps failing, the operator must check "
            f"the {BLOB_STORE[0]} ({BLOB_STORE[1]})."
        ) from exc
    except ProviderError as exc:
        label = _provider_label(exc)
        log.warning("%s: the %s failed: %s", tool, label, exc)
        raise ToolError(
            f"The {label} failed ({exc}). Retry in a moment; if it keeps failing the "
            "operator must fix the provider settings."
        ) from exc
    except Exception as exc:
        log.exception("%s failed unexpectedly", tool)
        raise ToolError(
            f"{tool} failed unexpectedly ({type(exc).__name__}); the details are in the server "
            "log. Retry once; if it fails again, report it to the operator."
        ) from exc


def reported(tool: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Decorator: run the function inside ``tool_errors(tool)``.

    The wrapper keeps the function's name, signature and annotations (``functools.wraps``),
    which the SDK reads to build the tool's input schema and to inject the ``Context``.
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            with tool_errors(tool):
                return fn(*args, **kwargs)

        return run

    return decorate


#: The prefix the SDK puts before every tool error; argument errors carry it too, so a model
#: reads every refusal the same way.
TOOL_ERROR_PREFIX = "Error executing tool {tool}: "

#: How pydantic's wrong-type errors read in a sentence (``"top_k must be a whole number"``);
#: the keys are pydantic's error types (https://docs.pydantic.dev/latest/errors/validation_errors/).
VALUE_KINDS = {
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "text",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
}

#: Longest value repeated back in an argument error; a longer one is described by its size.
SHOWN_VALUE_CHARS = 60


def _quoted(names: Sequence[str]) -> str:
    """``'a'``, ``'a' and 'b'``, ``'a', 'b' and 'c'``."""
    quoted = [f"'{name}'" for name in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _squashed(name: str) -> str:
    return name.lower().replace("_", "").replace("-", "")


def suggested_name(
    unknown: str, free: Sequence[str], *, missing: Sequence[str], unknown_count: int
) -> str | None:
    """The argument an unknown name most likely meant, or None.

    Args:
        unknown: the name the caller sent.
        free: the tool's argument names the caller did not send.
        missing: the required ones among them.
        unknown_count: how many unknown names the call had.

    Returns:
        The same name spelt another way (``topK`` → ``top_k``); a name that starts the other
        (``chunk`` → ``chunk_numbers``); the closest by ``difflib`` (ratio ≥ 0.6, its default);
        or, when one unknown name stands beside one missing required one, that one
        (``query`` → ``question``).
    """
    squashed = _squashed(unknown)
    for name in free:
        if _squashed(name) == squashed:
            return name
    for name in free:
        other = _squashed(name)
        if min(len(other), len(squashed)) >= 3 and (
            other.startswith(squashed) or squashed.startswith(other)
        ):
            return name
    close = difflib.get_close_matches(unknown, free, n=1)
    if close:
        return close[0]
    if unknown_count == 1 and len(missing) == 1:
        return missing[0]
    return None


def argument_name_problem(
    tool: str, schema: Mapping[str, Any], arguments: Mapping[str, Any]
) -> str | None:
    """The plain-language refusal of a call whose argument names do not fit the tool, or None.

    Args:
        tool: the tool's name.
        schema: its published input schema (JSON Schema: ``properties``, ``required``).
        arguments: the arguments the caller sent, by name.

    Returns:
        e.g. ``"read_doc takes document, chunk_numbers; got unknown argument 'chunk' — did you
        mean 'chunk_numbers'?"`` or ``"echo needs 'message' (it takes message)"``; None when
        every name is known and every required one is there.
    """
    names = list(schema.get("properties", {}))
    unknown = [name for name in arguments if name not in names]
    missing = [name for name in schema.get("required", []) if name not in arguments]
    if not unknown and not missing:
        return None
    takes = ", ".join(names) if names else "no arguments"
    if not unknown:
        return f"{tool} needs {_quoted(missing)} (it takes {takes})"
    free = [name for name in names if name not in arguments]
    meant = {
        name: suggested_name(name, free, missing=missing, unknown_count=len(unknown))
        for name in unknown
    }
    plural = "s" if len(unknown) > 1 else ""
    message = f"{tool} takes {takes}; got unknown argument{plural} {_quoted(unknown)}"
    guesses = [(name, guess) for name, guess in meant.items() if guess is not None]
    if len(unknown) == 1 and guesses:
        message += f" — did you mean '{guesses[0][1]}'?"
    elif guesses:
        message += " — did you mean " + ", ".join(f"'{g}' for '{n}'" for n, g in guesses) + "?"
    still_missing = [name for name in missing if name not in meant.values()]
    if still_missing:
        message += ("" if guesses else ".") + f" It also needs {_quoted(still_missing)}."
    return message


def _shown(value: Any) -> str:
    """``value`` as repeated back to the caller: its ``repr``, or its size when longer than
    ``SHOWN_VALUE_CHARS`` (``"3,000 characters"``, ``"a list of 1,000 items"``)."""
    text = repr(value)
    if len(text) <= SHOWN_VALUE_CHARS:
        return text
    if isinstance(value, str):
        return f"{len(value):,} characters"
    if isinstance(value, list | tuple | dict):
        return f"a {type(value).__name__} of {len(value):,} items"
    return text[: SHOWN_VALUE_CHARS - 1] + "…"


def argument_value_problem(tool: str, exc: ValidationError) -> str:
    """Pydantic's report on an argument's value, as one sentence per bad argument.

    Args:
        tool: the tool's name.
        exc: the ``ValidationError`` of the tool's argument model.

    Returns:
        e.g. ``"top_k must be a whole number; you sent 'ten'"``; an argument whose error type
        ``VALUE_KINDS`` does not name keeps pydantic's one-line message (``"kind: Input should
        be 'text', 'table' or 'figure'; you sent 'diagram'"``), never the whole report.
    """
    sentences = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or tool
        if error["type"] == "missing":
            sentences.append(f"{tool} needs '{where}'")
            continue
        kind = VALUE_KINDS.get(error["type"])
        sent = _shown(error.get("input"))
        if kind is None:
            sentences.append(f"{where}: {error['msg']}; you sent {sent}")
        else:
            sentences.append(f"{where} must be {kind}; you sent {sent}")
    return "; ".join(sentences)


def check_arguments(server: MCPServer[Any]) -> None:
    """Answer every ``tools/call`` whose arguments do not fit the tool with one plain sentence
    (``argument_name_problem``, ``argument_value_problem``) as an ``isError`` result, instead of
    the SDK's pydantic report (issue 16, "Bad input"); other calls reach the tool unchanged.

    Wraps whatever ``tools/call`` handler the server has installed (the SDK's, or its
    extensions' interceptor chain), so it is called once, after every tool is registered.
    """
    # no public hook wraps tools/call; kb_mcp.server.serve_log_level uses the same object
    lowlevel = server._lowlevel_server  # noqa: SLF001
    entry = lowlevel.get_request_handler("tools/call")
    if entry is None:
        raise RuntimeError("the MCP server has no tools/call handler to wrap")
    handle = entry.handler

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> Any:
        tool = server._tool_manager.get_tool(params.name)  # noqa: SLF001 (the arguments' model)
        if tool is None:
            return await handle(ctx, params)
        arguments = params.arguments or {}
        problem = argument_name_problem(params.name, tool.parameters, arguments)
        if problem is None:
            try:
                tool.fn_metadata.validate_arguments(arguments)
            except ValidationError as exc:
                problem = argument_value_problem(params.name, exc)
        if problem is None:
            return await handle(ctx, params)
        log.info("%s: refused its arguments: %s", params.name, problem)
        text = TOOL_ERROR_PREFIX.format(tool=params.name) + problem
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

    lowlevel.add_request_handler("tools/call", entry.params_type, call_tool)
