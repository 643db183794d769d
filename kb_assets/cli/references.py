"""``kb references`` — the live reference pages the MCP tool ``add_reference`` registered:
``kb references list [--json]`` and ``kb references remove ID``.

The ``reference_sensor`` indexes queued pages while the Dagster daemon runs (``kb ui``); the
list shows the registered pages, whether each has its point in the vector index, and the
requests still queued or failed. Removing unregisters the page and deletes its point
(``kb_assets.references.remove_reference``). Exit status: 0 done; 2 no such page.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from kb_assets.cli.common import console, err, home_stores, json_option
from kb_shared.errors import ReferenceNotFoundError
from kb_shared.identity import reference_id

references_app = typer.Typer(
    help="The live reference pages registered by the MCP tool add_reference.",
    no_args_is_help=True,
)


@references_app.command("list")
def list_references(
    as_json: json_option("Print JSON.") = False,
) -> None:
    """List the registered pages (id, title, URL, indexed, description) and the queued or
    failed requests."""
    from kb_assets import references

    _, stores = home_stores()
    try:
        catalog = stores.catalog()
        sources = catalog.list_reference_sources()
        waiting = [r for r in catalog.list_reference_requests() if r.status in ("pending", "failed")]
        index = stores.existing_vectors()
        indexed = references.indexed_reference_ids(index) if index is not None else set()
    finally:
        stores.close()
    if as_json:
        pages: list[dict[str, Any]] = [
            {"id": s.id, "url": s.url, "title": s.title, "description": s.description,
             "indexed": reference_id(s.id) in indexed, "updated_at": s.updated_at.isoformat()}
            for s in sources
        ]
        queued = [
            {"request_id": r.id, "url": r.url, "title": r.title, "status": r.status,
             "failure_reason": r.failure_reason}
            for r in waiting
        ]
        console.print_json(json.dumps({"references": pages, "requests": queued}))
        return
    if not sources:
        console.print("no reference pages registered")
    else:
        table = Table(title=f"kb references ({len(sources)})")
        for column in ("id", "title", "URL", "indexed", "description"):
            table.add_column(column, overflow="fold")
        for s in sources:
            flag = "[green]yes[/]" if reference_id(s.id) in indexed else "[yellow]not yet[/]"
            table.add_row(str(s.id), escape(s.title), escape(s.url), flag, escape(s.description))
        console.print(table)
    for r in waiting:
        state = "queued" if r.status == "pending" else f"failed: {r.failure_reason}"
        console.print(f"request #{r.id} {escape(r.url)} ({escape(r.title)}): {escape(state)}")


@references_app.command("remove")
def remove(
    source_id: Annotated[int, typer.Argument(help="The page's id (kb references list).")],
) -> None:
    """Unregister a page: find_reference stops returning it (its point is deleted)."""
    from kb_assets import references

    _, stores = home_stores()
    try:
        removed = references.remove_reference(stores, source_id)
    except ReferenceNotFoundError as error:
        err.print(f"[red]{escape(str(error))}[/red]")
        raise typer.Exit(2) from error
    finally:
        stores.close()
    console.print(f"removed reference #{removed.id}: {escape(removed.title)} ({escape(removed.url)})")
