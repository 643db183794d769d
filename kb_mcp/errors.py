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
``reported(name)`` applies it to a whole tool function at registration.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

from mcp.server.mcpserver.exceptions import ToolError

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
