"""``kb requests`` — review the document requests the MCP tool ``request_document`` logged:
``kb requests list [--all] [--json]``, ``kb requests approve ID [--url URL] [--name NAME]``
and ``kb requests reject ID --reason TEXT``.

Approving downloads the PDF through the safe fetcher, admits it like any file and builds it
in-process (a run in the instance under ``KB_HOME/dagster``), then records the document and the
run on the request (``kb_assets.request_jobs``). Exit status: 0 done, skips included (a
download whose content the corpus already holds, as it is or under another name, or a build
left to a live run of another process: each reported as skipped with its reason, and the
request approved); 1 the download, the admission or the build failed
(the reason is printed, and a failed download or admission is on the request as ``failed``);
2 nothing was done (no such request, no URL to download, an already approved request).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from kb_assets.cli.common import console, err, home_stores, json_option, text_option
from kb_shared.errors import IntakeError, RequestNotFoundError, RequestRefusedError

if TYPE_CHECKING:  # Dagster and the stores load when a command runs, not for `kb --help`
    from kb_assets.resources import StoresResource
    from kb_shared.settings import Settings
    from kb_shared.stores.catalog import DocumentRequestRow

requests_app = typer.Typer(
    help="Review the document requests logged by the MCP tool request_document.",
    no_args_is_help=True,
)

#: Colour of each request status in the table.
STATUS_COLOURS = {"pending": "yellow", "approved": "green", "failed": "red", "rejected": "dim"}


def request_json(row: DocumentRequestRow) -> dict[str, Any]:
    """A request as JSON-serialisable values (times in ISO 8601)."""
    values = asdict(row)
    for key in ("created_at", "decided_at"):
        if values[key] is not None:
            values[key] = values[key].isoformat()
    return values


def _outcome(row: DocumentRequestRow) -> str:
    """The decision column: the document and run, or why it failed or was rejected."""
    from kb_assets import request_jobs

    if row.status == request_jobs.APPROVED:
        return f"{row.doc_id or ''}" + (f" (run {row.run_id[:8]})" if row.run_id else "")
    return row.failure_reason or ""


@requests_app.command("list")
def list_requests(
    everything: Annotated[
        bool, typer.Option("--all", help="Include rejected requests (hidden by default).")
    ] = False,
    as_json: json_option("Print JSON.") = False,
) -> None:
    """List the requests, oldest first (rejected ones only with --all).

    A request without a source URL is flagged: it needs a link before it can be approved."""
    from kb_assets import request_jobs

    _, stores = home_stores()
    rows = stores.catalog().list_document_requests()
    stores.close()
    rejected = sum(1 for r in rows if r.status == request_jobs.REJECTED)
    shown = rows if everything else [r for r in rows if r.status != request_jobs.REJECTED]
    if as_json:
        console.print_json(json.dumps([request_json(r) for r in shown]))
        return
    if not shown:
        console.print("no document requests" + ("" if everything or not rejected else " to review"))
    else:
        table = Table(title=f"kb requests ({len(shown)})")
        for column in ("id", "title", "asks", "status", "source URL", "reason", "document / why"):
            table.add_column(column, overflow="fold")
        for r in shown:
            colour = STATUS_COLOURS.get(r.status, "white")
            link = escape(r.source_url) if r.source_url else "[red]needs a link[/]"
            table.add_row(
                str(r.id), escape(r.title), str(r.request_count), f"[{colour}]{r.status}[/]",
                link, escape(r.reason), escape(_outcome(r)),
            )
        console.print(table)
    if rejected and not everything:
        console.print(f"{rejected} rejected request(s) hidden; `kb requests list --all` shows them")


@requests_app.command("approve")
def approve(
    request_id: Annotated[int, typer.Argument(help="The request's id (kb requests list).")],
    url: text_option("The https URL of the PDF (default: the request's own).") = None,
    name: text_option("The document name (default: the download's own).") = None,
    new_version: Annotated[
        bool,
        typer.Option(
            "--new-version",
            help="The download is a new version of the document of the same name already in "
            "the corpus (rebuilt from it; the current version is served until it is ready).",
        ),
    ] = False,
) -> None:
    """Download, add and build the requested PDF.

    The request's URL (or --url) is downloaded through the safe fetcher and added like any
    file (named --name, or as the download is), then built; the request records the document
    and the run. A refused download or admission marks the request failed with the reason.
    A download whose content is already in the corpus, or a build another live run is
    doing, is skipped with the reason (exit 0). With --new-version a name already in the corpus becomes
    that document's next version."""
    settings, stores = home_stores()
    try:
        _approve(request_id, url, name, settings, stores, new_version=new_version)
    finally:
        stores.close()


def _approve(
    request_id: int,
    url: str | None,
    name: str | None,
    settings: Settings,
    stores: StoresResource,
    *,
    new_version: bool = False,
) -> None:
    from kb_assets import operations, request_jobs
    from kb_assets.constants import DocumentStatus
    from kb_assets.instance import dagster_instance

    instance = dagster_instance(settings)
    try:
        approval = request_jobs.approve_request(
            request_id, stores, instance, url=url, name=name, new_version=new_version
        )
    except (RequestNotFoundError, RequestRefusedError) as error:
        err.print(f"[red]{escape(str(error))}[/red]")
        raise typer.Exit(2) from error
    except IntakeError as error:
        err.print(f"[red]request #{request_id} failed:[/red] {escape(str(error))}")
        raise typer.Exit(1) from error
    outcome = approval.outcome
    if approval.already_present:
        err.print(
            f"[yellow]skipped[/yellow] request #{request_id} ({escape(approval.url)}): already "
            f"present: {escape(outcome.reason)}"
        )
        console.print(
            f"[green]approved[/green] request #{request_id} with the document already in the "
            f"corpus: {escape(outcome.doc_id or '')} (nothing added, nothing to build)"
        )
        return
    if not approval.added:
        err.print(
            f"[red]request #{request_id} failed[/red] ({escape(approval.url)}): "
            f"{escape(outcome.reason)}"
        )
        if outcome.hint:
            err.print(
                f"to add the download as a new version of {outcome.doc_id}: "
                f"`kb requests approve {request_id} --new-version`"
            )
        raise typer.Exit(1)
    doc = outcome.doc_id
    assert doc is not None
    as_what = f"version {outcome.version} of {doc}" if (outcome.version or 1) > 1 else doc
    console.print(
        f"request #{request_id}: downloaded {escape(approval.url)} and added "
        f"{escape(outcome.name)} as {as_what}; building it"
    )
    (built,) = operations.build_documents(stores, instance, [doc])
    request_jobs.record_build(stores.catalog(), request_id, doc, built.run_id)
    if built.status == operations.BUILDING_ELSEWHERE:  # `kb build`'s rule: not a failure
        err.print(
            f"[yellow]skipped[/yellow] the build of {escape(built.name)}: left to a live run: "
            f"{escape(built.reason)}"
        )
        console.print(
            f"[green]approved[/green] request #{request_id}: {escape(built.name)} added; run "
            f"{built.run_id} builds it"
        )
        return
    if built.status != DocumentStatus.READY:
        err.print(
            f"[red]the build of {escape(built.name)} failed[/red] (run {built.run_id}): "
            f"{escape(built.reason)}; `kb retry {doc}` resumes it"
        )
        raise typer.Exit(1)
    console.print(
        f"[green]approved[/green] request #{request_id}: {escape(built.name)} is ready "
        f"({built.pages} pages, {built.chunks} chunks; run {built.run_id})"
    )


@requests_app.command("reject")
def reject(
    request_id: Annotated[int, typer.Argument(help="The request's id (kb requests list).")],
    reason: Annotated[str, typer.Option("--reason", help="Why it is rejected (kept on record).")],
) -> None:
    """Reject a request with a reason (hidden from `kb requests list` unless --all)."""
    from kb_assets import request_jobs

    _, stores = home_stores()
    try:
        row = request_jobs.reject_request(stores.catalog(), request_id, reason)
    except (RequestNotFoundError, RequestRefusedError, ValueError) as error:
        err.print(f"[red]{escape(str(error))}[/red]")
        raise typer.Exit(2) from error
    finally:
        stores.close()
    console.print(f"rejected request #{row.id} ({escape(row.title)}): {escape(reason.strip())}")
