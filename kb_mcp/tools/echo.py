"""The ``echo`` tool: a connection check that reads nothing.
No ``from __future__ import annotations`` here (see ``kb_mcp.tools``)."""

from typing import Annotated

from pydantic import Field

from kb_mcp.tools import KbServer, kb_tool

#: Longest message echoed (input schema ``maxLength``).
MAX_ECHO_CHARS = 10_000

DESCRIPTION = """\
Echo a message back unchanged: a check of the connection to kb.
"""


def register(server: KbServer) -> None:
    """Register ``echo`` on ``server`` (plain text, no output schema)."""

    @kb_tool(server, "echo", title="Echo", description=DESCRIPTION, structured=False)
    def echo(
        message: Annotated[str, Field(max_length=MAX_ECHO_CHARS, description="Any text.")],
    ) -> str:
        return message
