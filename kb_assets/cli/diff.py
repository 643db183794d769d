"""``kb diff NAME [--from N --to M | --against OTHER] [--json]`` — what changed in a document
since its previous issue (issue 27): the same comparison, text and JSON the MCP tool
``compare_versions`` gives (``kb_mcp.render_changes``), read from what the ``changes`` asset
stored. Heavy modules are imported when the command runs (issue 28). Exit status: 0 shown;
2 no such document or version, no previous issue, or a comparison not built yet (the reason
says what to do).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from kb_assets.cli.common import json_option, text_option


def diff_command(
    name: Annotated[str, typer.Argument(help="The document: file name or doc_id.")],
    from_version: Annotated[
        int | None, typer.Option("--from", min=1, help="Older version (default: the one before).")
    ] = None,
    to_version: Annotated[
        int | None, typer.Option("--to", min=1, help="Newer version (default: the served one).")
    ] = None,
    against: text_option("The other edition of the series (file name or doc_id).") = None,
    as_json: json_option("Print the structured result.") = False,
) -> None:
    """What changed since the document's previous issue (version or edition)."""
    from kb_assets.cli.common import err
    from kb_mcp.errors import ToolProblem
    from kb_mcp.links import links_for
    from kb_mcp.render_changes import MAX_LIMIT, comparison_output, comparison_text, find_comparison
    from kb_shared.errors import KbError
    from kb_shared.settings import Settings
    from kb_shared.stores import factory

    settings = Settings()
    catalog = factory.open_catalog(settings)
    try:
        comparison = find_comparison(
            catalog, name, from_version=from_version, to_version=to_version, against=against
        )
    except (ToolProblem, KbError) as exc:
        err.print(f"[red]{exc}[/red]", soft_wrap=True)
        raise typer.Exit(2) from exc
    finally:
        catalog.close()
    links = links_for(settings)
    everything = len(comparison.stored.changes) or 1
    if as_json:
        output = comparison_output(comparison, links, 0, max(everything, MAX_LIMIT))
        print(json.dumps(output.model_dump(mode="json"), indent=2, ensure_ascii=False))
    else:
        print(comparison_text(comparison, links, 0, max(everything, MAX_LIMIT)))
