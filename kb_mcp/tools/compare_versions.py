"""The ``compare_versions`` tool: what changed in a document since its previous issue (its
previous version, or the edition it follows), read from what the ``changes`` asset stored
(``kb_mcp.render_changes``). No ``from __future__ import annotations`` here (see
``kb_mcp.tools``)."""

from typing import Annotated

from mcp.types import CallToolResult
from pydantic import Field

from kb_mcp import render_changes
from kb_mcp.errors import ToolProblem
from kb_mcp.links import Links
from kb_mcp.schemas import CompareVersionsOutput
from kb_mcp.tools import (
    MAX_NAME_CHARS,
    KbContext,
    KbServer,
    bounded_int,
    check_range,
    kb_tool,
    optional_text,
    required_text,
    state_of,
)
from kb_shared.errors import SchemaMissingError

DESCRIPTION = """\
What changed between two issues of a document: its previous version, or last year's edition.
Returns a summary (changes to obligations or numbers first), then each change as "[C1]
changed · Section — p. 12 (v1) → p. 13 (v2)" with the before and after sentences and links.
Use it for "what changed / what is new / compared with last year's"; against names the other
edition. Use search_docs for what a clause says now.
"""


def register(server: KbServer, *, links: Links) -> None:
    """Register ``compare_versions`` on ``server``; PDF links go through ``links``."""

    @kb_tool(server, "compare_versions", title="Compare versions", description=DESCRIPTION)
    def compare_versions(
        ctx: KbContext,
        document: required_text(MAX_NAME_CHARS, "File name or doc_id (list_documents)."),
        from_version: Annotated[
            int | None, Field(ge=1, description="Older version number (default: the one before).")
        ] = None,
        to_version: Annotated[
            int | None, Field(ge=1, description="Newer version number (default: the served one).")
        ] = None,
        against: optional_text(MAX_NAME_CHARS, "The other edition's file name.") = None,
        offset: bounded_int(0, 100_000, "Skip this many changes (paging).") = 0,
        limit: bounded_int(1, render_changes.MAX_LIMIT, "Changes to list.") = (
            render_changes.DEFAULT_LIMIT
        ),
    ) -> Annotated[CallToolResult, CompareVersionsOutput]:
        check_range("offset", offset, 0, 100_000)
        check_range("limit", limit, 1, render_changes.MAX_LIMIT)
        catalog = state_of(ctx).catalog
        try:
            comparison = render_changes.find_comparison(
                catalog, document, from_version=from_version, to_version=to_version,
                against=against,
            )
        except SchemaMissingError as exc:
            raise ToolProblem(
                f"kb's catalog has no comparison tables ({exc}). The operator must run "
                "`kb db init`, then `kb rebuild changes --all`."
            ) from exc
        return render_changes.comparison_result(comparison, links, offset, limit)
