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
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from mcp.server.mcpserver.exceptions import ToolError

from kb_shared.errors import (
    DocumentNotFoundError,
    EmbeddingMismatchError,
    KbError,
    ProviderError,
    StoreError,
    StoreUnavailableError,
)

log = logging.getLogger(__name__)

#: The hint every "the corpus is empty" message ends with.
ADD_DOCUMENTS_HINT = (
    "Add PDFs with `kb add PATH…` (the pipeline then builds them), and call list_documents to "
    "see what is indexed."
)


class ToolProblem(KbError):
    """A failure the caller can fix or act on (bad argument, unknown document, empty corpus).

    The message is shown to the model as is (after the SDK's ``Error executing tool`` prefix),
    so it must name the problem and the next step.
    """


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
    except ToolProblem as exc:
        raise ToolError(str(exc)) from exc
    except DocumentNotFoundError as exc:
        raise ToolError(f"{exc}. Call list_documents for the names and ids it accepts.") from exc
    except EmbeddingMismatchError as exc:
        raise ToolError(
            f"{exc} Until the operator re-embeds, search_docs and search_graph cannot answer; "
            "tell the user the index needs rebuilding rather than guessing."
        ) from exc
    except StoreUnavailableError as exc:
        log.warning("%s: a store is unavailable: %s", tool, exc)
        raise ToolError(
            f"A store kb reads from is unavailable ({exc}). The MCP server is still running: "
            "retry in a moment; if it keeps failing, the operator must check the database, "
            "vector index or graph server settings (KB_DATABASE_URL / KB_READER_DATABASE_URL, "
            "KB_QDRANT_URL, KB_NEO4J_URI)."
        ) from exc
    except StoreError as exc:
        log.warning("%s: a store refused the request: %s", tool, exc)
        raise ToolError(f"A store refused the request: {exc}") from exc
    except ProviderError as exc:
        log.warning("%s: the embedding provider failed: %s", tool, exc)
        raise ToolError(
            f"The embedding model failed ({exc}). Retry in a moment; if it keeps failing the "
            "operator must fix the provider settings."
        ) from exc
    except Exception as exc:
        log.exception("%s failed unexpectedly", tool)
        raise ToolError(
            f"{tool} failed unexpectedly ({type(exc).__name__}); the details are in the server "
            "log. Retry once; if it fails again, report it to the operator."
        ) from exc
