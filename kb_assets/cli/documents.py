"""``kb status``, ``kb versions``, ``kb categorize`` and ``kb repair``: what the corpus holds
and small fixes to its records (no build). ``kb_assets.cli.main`` registers them.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
from collections.abc import Iterator
from dataclasses import asdict
from typing import Annotated

import typer

from kb_assets.cli.common import (
    console,
    count_text,
    err,
    home_instance,
    home_stores,
    json_option,
    results_table,
)

#: One mark per asset state in `kb status`.
STATE_MARKS = {
    "materialized": "✓", "failed": "✗", "in_progress": "…", "missing": "·", "not_run": "-"
}
#: The letter of each asset in `kb status`'s legend, in build order (``d``: changes, a diff).
ASSET_LETTERS = {
    "markdown": "m", "chunks": "c", "obligations": "o", "changes": "d", "embeddings": "e",
    "graph": "g", "figures": "f", "record": "r",
}


def versions(
    name: Annotated[str, typer.Argument(help="The document, by file name or id.")],
    as_json: json_option("Print JSON.") = False,
) -> None:
    """List a document's versions, oldest first: label read from the document, status
    (serving, superseded, pending, failed with the reason), sha256, added and superseded."""
    _settings, stores = home_stores()
    try:
        row = stores.catalog().resolve(name)
        history = stores.catalog().versions(row.doc_id) if row is not None else []
    finally:
        stores.close()
    if row is None:
        err.print(f"[red]no document {name!r} in the catalog; `kb status` lists them[/red]")
        raise typer.Exit(1)
    if as_json:
        console.print_json(json.dumps([
            {**asdict(v), "added_at": v.added_at.isoformat(),
             "superseded_at": v.superseded_at.isoformat() if v.superseded_at else None}
            for v in history
        ]))
        return
    table = results_table(
        f"kb versions {row.name} ({row.doc_id})", "version", "label", "status", "sha256",
        "added", "superseded", "file",
    )
    for v in history:
        state = v.status + (f": {v.failure_reason}" if v.failure_reason else "")
        table.add_row(
            str(v.version), v.label or "", state, v.sha256[:12], f"{v.added_at:%Y-%m-%d %H:%M}",
            f"{v.superseded_at:%Y-%m-%d %H:%M}" if v.superseded_at else "", v.name,
        )
    console.print(table)


def categorize(
    name: Annotated[str, typer.Argument(help="The document, by file name or id.")],
    category: Annotated[
        str, typer.Argument(help="Its new category, e.g. aemo/procedures; \"\" for none.")
    ],
) -> None:
    """Move a document to another category: the catalog row only, nothing is rebuilt (search
    filters read categories from the catalog)."""
    _settings, stores = home_stores()
    catalog = stores.catalog()
    try:
        row = catalog.resolve(name)
        if row is None:
            err.print(f"[red]no document {name!r} in the catalog; `kb status` lists them[/red]")
            raise typer.Exit(1)
        try:
            moved = catalog.set_category(row.doc_id, category)
        except ValueError as error:
            err.print(f"[red]category refused: {error}[/red]")
            raise typer.Exit(2) from error
    finally:
        stores.close()
    before, after = row.category or "(none)", moved.category or "(none)"
    console.print(f"{moved.name}: category {before} -> {after} (nothing rebuilt)")


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Run the body (a read-only command's imports, store and instance opening, and queries)
    with Python's cyclic garbage collector off, and skip the collections at interpreter exit
    (``gc.freeze`` run by ``atexit``, before them).

    Importing Dagster and opening its instance leave ~186k objects that live until the process
    ends, and every full collection walks them again: with the collector on, `kb status` spent
    about half its CPU time collecting, during the run and at exit
    (benchmarks/results/cli-2026-12-06.md). The garbage the body leaves comes from a fixed
    number of queries, not from the corpus's size. When the body ends, what it made goes to
    the oldest generation unwalked (``gc.freeze`` then ``gc.unfreeze``; else the next young
    collection would walk all of it) and the collector's previous state is restored (an
    in-process caller, such as a test, keeps its own).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if was_enabled:
            gc.enable()


def status(
    as_json: json_option("Print JSON.") = False,
) -> None:
    """List documents with their per-asset state and counts (reads only; writes nothing)."""
    with _collector_paused():
        from kb_assets import operations
        from kb_assets.constants import DocumentStatus

        settings, stores = home_stores()
        try:
            rows = operations.document_status(stores, home_instance(settings))
        finally:
            stores.close()
    if as_json:
        console.print_json(json.dumps(rows))
        return
    legend = " ".join(ASSET_LETTERS.get(a, "?") for a in rows[0]["assets"]) if rows else ""
    table = results_table(
        f"kb status ({len(rows)} document{'s' if len(rows) != 1 else ''})", "document", "status",
        "pages", "chunks", "entities", "relationships", "figures", f"assets ({legend})",
    )
    for r in rows:
        assets = "".join(STATE_MARKS.get(v, "?") for v in r["assets"].values())
        table.add_row(
            r["name"], operations.status_text(r),
            count_text(r["pages"]), count_text(r["chunks"]), count_text(r["entities"]), count_text(r["relationships"]),
            count_text(r["figures"]), assets,
        )
    console.print(table)
    deleting = [r["name"] for r in rows if r["status"] == DocumentStatus.DELETING]
    if deleting:
        err.print(
            f"{len(deleting)} document(s) are being deleted ({', '.join(deleting)}): they are "
            "no longer served; if no `kb delete` is running, run `kb delete NAME` (or `kb "
            "build`) to finish"
        )
    lost = [
        r["name"] for r in rows if not r["partition"] and r["status"] != DocumentStatus.DELETING
    ]
    if lost:
        err.print(
            f"{len(lost)} document(s) have no Dagster partition ({', '.join(lost)}); "
            "`kb repair` restores them"
        )


def repair() -> None:
    """Make the Dagster partition set match the catalog: add a partition for every document
    that lost it (e.g. after KB_HOME/dagster was deleted) and remove partitions of documents
    that are no longer in the catalog. Needed only after such drift; `kb status` reports it."""
    from kb_assets import operations

    settings, stores = home_stores()
    report = operations.repair_partitions(stores, home_instance(settings))
    stores.close()
    if not report.added and not report.removed:
        console.print("nothing to repair: every catalog document has its partition")
        return
    if report.added:
        console.print(f"added {len(report.added)} partition(s): {', '.join(report.added)}")
    if report.removed:
        console.print(f"removed {len(report.removed)} partition(s): {', '.join(report.removed)}")
