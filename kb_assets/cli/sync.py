"""``kb sync`` — sync structured market data into the catalog: ``kb sync aer [SOURCE…]`` and
``kb sync notion [--force]``.

Each command materialises the same asset the schedules do, as a run on the instance under
``KB_HOME/dagster`` (the Dagster UI shows it, with its metadata and checks), then prints the
counts. Exit status: 0 synced and every check passed; 1 the sync failed (nothing written;
the reason is printed) or a check failed; 2 nothing to sync, because the source is not
configured (the message names the setting).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from kb_assets.cli.common import console, err, home_stores
from kb_assets.constants import AER_PERFORMANCE, COMPLIANCE_ACTIONS

if TYPE_CHECKING:  # Dagster and the market assets load when a sync runs, not for `kb --help`
    from kb_assets.market.operations import SyncOutcome

sync_app = typer.Typer(
    help="Sync structured market data into the catalog: AER retail performance statistics "
    "and the Notion compliance tracker.",
    no_args_is_help=True,
)


def _rows() -> tuple[tuple[str, str], ...]:
    """Rows of ``kb sync``'s table, in order: (label, metadata key of
    ``kb_assets.market.assets``). A sync's table has the rows its run's metadata holds: both
    syncs' row counts, seconds and time; the AER's files, releases and metric rows; Notion's
    data source, trash and requests."""
    from kb_assets.market import assets as keys

    return (
        ("data source", "data_source_id"),
        ("workbooks", "files"),
        ("releases", keys.RELEASES),
        ("rows read", keys.ROWS_READ),
        ("inserted", keys.ROWS_INSERTED),
        ("updated", keys.ROWS_UPDATED),
        ("  of which values changed", "values_changed"),
        ("deleted", keys.ROWS_DELETED),
        ("unchanged", keys.ROWS_UNCHANGED),
        ("superseded by a newer release", "superseded"),
        ("not reported (not stored)", "not_reported"),
        ("new metrics", keys.NEW_METRICS),
        ("pages in the trash", "trashed"),
        ("requests", "requests"),
        ("seconds", keys.SECONDS),
        ("synced at", keys.SYNCED_AT),
    )


def _run(asset: str, config: dict[str, Any]) -> SyncOutcome:
    from kb_assets.instance import dagster_instance
    from kb_assets.market.operations import run_sync
    from kb_assets.market.resources import NotionResource

    settings, stores = home_stores()
    resources: dict[str, Any] = {"stores": stores}
    if asset == COMPLIANCE_ACTIONS:
        resources["notion"] = NotionResource(home=str(settings.home))
    return run_sync(dagster_instance(settings), asset, config=config, settings=resources)


def _text(value: Any) -> str:
    """A metadata value as table text (rich markup in it escaped: names may hold brackets)."""
    if isinstance(value, dt.datetime):
        return value.isoformat(timespec="seconds")
    return "" if value is None else escape(str(value))


def _report(title: str, outcome: SyncOutcome) -> None:
    """Print the outcome (its table: ``_rows``); exit 1 (failed, or a check failed) or 2
    (skipped)."""
    from kb_assets.market.assets import NEW_METRIC_LIST
    from kb_assets.market.operations import SyncStatus

    if outcome.status == SyncStatus.SKIPPED:
        err.print(f"[yellow]skipped[/yellow] {outcome.asset}: {escape(outcome.reason)}")
        raise typer.Exit(2)
    if outcome.status == SyncStatus.FAILED:
        err.print(f"[red]failed[/red] {escape(outcome.reason)}")
        err.print(f"(run {outcome.run_id}; nothing was written)")
        raise typer.Exit(1)
    table = Table(title=f"{title} (run {outcome.run_id[:8]})")
    table.add_column("count", overflow="fold")
    table.add_column("value", overflow="fold", justify="right")
    for label, key in _rows():
        if key in outcome.metadata:
            table.add_row(label, _text(outcome.metadata[key]))
    console.print(table)
    for metric in outcome.metadata.get(NEW_METRIC_LIST) or []:
        note = "" if metric["aliased"] else (
            " (no alias: if it renames a metric, add it to aer_metrics.METRIC_ALIASES)")
        console.print(
            f"new metric {metric['metric_key']} (schedule {metric['schedule']}): "
            f"{metric['heading']!r}{note}",
            markup=False,
        )
    for check in outcome.checks:
        numbers = ", ".join(
            f"{k} {v}" for k, v in check.metadata.items() if not isinstance(v, str)
        )
        mark = "[green]passed[/green]" if check.passed else f"[red]failed[/red] ({check.severity})"
        console.print(f"check {check.name}: {mark}" + (f" — {numbers}" if numbers else ""))
        if not check.passed:
            detail = check.metadata.get("mismatches") or check.description
            if detail:
                err.print(detail, markup=False)
    if outcome.failed_checks:
        raise typer.Exit(1)


@sync_app.command("aer")
def sync_aer(
    sources: Annotated[
        list[str] | None,
        typer.Argument(
            help="AER workbooks (.xlsx/.xlsm), folders of them, or the https URL of a release "
            "page linking them (default: KB_AER_SOURCE).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Sync AER workbooks into aer_performance, then check the published totals.

    A workbook that does not fit the layout fails the sync naming its file, sheet and cell,
    and nothing is written (a run applies all of its workbooks or none). Exit 0 synced, 1
    failed (or a check failed), 2 no source given and KB_AER_SOURCE unset."""
    from kb_assets.market.assets import URL_PATTERN

    given = [s if URL_PATTERN.match(s) else str(Path(s).expanduser().resolve())
             for s in sources or []]
    _report("kb sync aer", _run(AER_PERFORMANCE, {"sources": given}))


@sync_app.command("notion")
def sync_notion_command(
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Apply even an empty read, or one deleting more than half the stored rows.",
        ),
    ] = False,
) -> None:
    """Sync the Notion compliance tracker into compliance_actions, then check the count.

    Needs NOTION_TOKEN and KB_NOTION_DATA_SOURCE_ID. An empty read, or one that would delete
    more than half the table, is refused with the counts unless --force. Exit 0 synced, 1
    failed (or a check failed), 2 not configured."""
    _report("kb sync notion", _run(COMPLIANCE_ACTIONS, {"force": force}))
