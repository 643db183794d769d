"""``kb`` — the pipeline CLI: add, build, rebuild, retry, delete, inspect and repair documents,
serve the Dagster UI (``kb ui``, ``kb demo``; process handling in ``kb_assets.serve``), and
sync market data (``kb sync aer|notion``, in ``kb_assets.cli.sync``) and review document
requests (``kb requests list|approve|reject``, in ``kb_assets.cli.requests``).

Every command reads settings from the environment (``KB_*``, see the README) and works on
the Dagster instance under ``KB_HOME/dagster``, so what it does shows up in the Dagster UI.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated
from urllib.parse import quote

import typer

from kb_assets.cli import documents
from kb_assets.cli.common import (
    console,
    count_text,
    err,
    home_instance,
    home_stores,
    json_option,
    results_table,
    stores_under,
    text_option,
)
from kb_assets.cli.diff import diff_command
from kb_assets.cli.migrate import migrate_command
from kb_assets.cli.obligations import obligations_command
from kb_assets.cli.references import references_app
from kb_assets.cli.requests import requests_app
from kb_assets.cli.sync import sync_app
from kb_assets.constants import PARTITION_TAG, REBUILDABLE
from kb_shared.access import exposure_problem
from kb_shared.errors import DocumentBusyError, DocumentNotFoundError, IntakeError, KbError

if TYPE_CHECKING:
    import dagster as dg

    from kb_assets import operations, serve
    from kb_assets.intake import IntakeOutcome
    from kb_assets.resources import StoresResource
    from kb_shared.settings import Settings

# Dagster, PyMuPDF, SQLAlchemy and the models are imported by the commands that use them, so
# `kb --help` and a refused `kb add` answer at once (issue 28; tests/test_cli_imports.py).

app = typer.Typer(
    help="kb: build a searchable corpus of regulatory PDFs (Dagster assets per document).",
    no_args_is_help=True,
    add_completion=False,
    # Markdown: a docstring's line breaks are soft (Typer's "rich" mode keeps them in the
    # command list, cutting sentences), and `code` shows as code.
    rich_markup_mode="markdown",
)
db_app = typer.Typer(help="Catalog database commands.", no_args_is_help=True)

#: ``kb --help`` lists the commands in these panels, in this order (each panel's commands in
#: the order they are registered: the decorated ones below, then ``_register_the_rest``).
DOCUMENTS_PANEL, SERVING_PANEL, MARKET_PANEL, MAINTENANCE_PANEL = (
    "Documents", "Serving", "Market data and requests", "Maintenance"
)



@app.command(rich_help_panel=DOCUMENTS_PANEL)
def add(
    paths: Annotated[
        list[str],
        typer.Argument(help="Documents: files, folders (recursive) or https URLs of PDFs."),
    ],
    build: Annotated[bool, typer.Option("--build", help=(
        "Build the added documents now, as many at once as `kb build` (KB_BUILD_WORKERS)."
    ))] = False,
    name: text_option("The document name for a single URL (default: the download's own).") = None,
    category: text_option(
        "Category of the added documents, e.g. aemo/procedures; files in subfolders of a folder "
        "add their folder path below it (default: that folder path alone)."
    ) = None,
    new_version: Annotated[
        bool,
        typer.Option(
            "--new-version",
            help="A file whose name is already in the corpus, with new content, becomes a new "
            "version of that document (rebuilt from it; search keeps the current version "
            "until the new one is ready).",
        ),
    ] = False,
    edition_of: text_option(
        "Add the one new document as the next edition of this one (its file name or doc_id), "
        "e.g. next year's issue under a new name; `kb diff` compares the two."
    ) = None,
    as_json: json_option(
        "Print each file's outcome as JSON (status, name_clash, doc_id, reason, hint, version) "
        "instead of the table."
    ) = False,
) -> None:
    """Add documents: identity rules, copy to blobs, add the partition (then `kb build`).

    A URL is downloaded first through the safe fetcher (https, public addresses only, a PDF
    under KB_MAX_UPLOAD_BYTES) and then added like a file of its name. Exits 1 when any file
    or URL was refused (not a document, empty, unreadable, a refused download, or its content
    is already in the corpus under another name), and when a file's name is in the corpus with
    other content (a "name clash": its hint names --new-version); a file already in the corpus
    as it is, is a duplicate, reported but not an error, so adding a folder again is safe.
    --json prints the outcomes (a name clash has status "duplicate" and "name_clash": true)
    and cannot be combined with --build (`kb build --json` then). A file found in a
    folder is filed under its folder path below it (`kb add docs/` files docs/aemo/x.pdf
    under aemo); `kb categorize` moves a document later. With --new-version a changed file of
    a catalogued name is added as that document's next version (`kb versions NAME` lists
    them); with --edition-of OLD a file of another name is added as OLD's next edition (a
    version keeps the name, an edition has its own: the two flags do not combine)."""
    if as_json and build:
        err.print("[red]--json lists what was added; build them with `kb build --json`[/red]")
        raise typer.Exit(2)
    from kb_assets.intake import IntakeStatus
    from kb_assets.url_intake import admit_sources_opening
    from kb_shared.settings import Settings

    settings = Settings()
    opened: list[StoresResource] = []  # none when every source was a refused URL

    def target() -> tuple[StoresResource, dg.DagsterInstance]:
        opened.append(stores_under(settings))
        return opened[-1], home_instance(settings)

    try:
        outcomes = admit_sources_opening(
            paths, settings, target, name=name, category=category,
            new_version=new_version, edition_of=edition_of,
        )
    except ValueError as error:
        err.print(f"[red]{error}[/red]")
        raise typer.Exit(2) from error
    except IntakeError as error:
        err.print(f"[red]refused the whole batch:[/red] {error}")
        raise typer.Exit(1) from error
    added = _added(outcomes)
    refused = sum(1 for o in outcomes if o.status == IntakeStatus.REFUSED)
    # new content under a catalogued name was not added: the user's change is not in kb
    changed = sum(1 for o in outcomes if o.name_clash)
    for stores in opened:
        stores.close()
    if as_json:
        console.print_json(json.dumps([o.as_dict() for o in outcomes]))
        if refused or changed:
            raise typer.Exit(1)
        return
    table = results_table("kb add", "file", "status", "id", "reason")
    for o in outcomes:
        reason = o.reason or (f"version {o.version}" if o.version and o.version > 1 else "")
        reason = reason or (f"next edition of {o.edition_of}" if o.edition_of else "")
        table.add_row(o.name, f"[{_colour(o)}]{o.label}[/]", o.doc_id or "", reason)
    if outcomes:
        console.print(table)
    for o in outcomes:
        if o.hint:
            console.print(f"{o.name}: {o.hint}")
    if not outcomes:
        console.print("no documents found in " + ", ".join(str(p) for p in paths))
    elif added:
        then = "building them." if build else "run `kb build` to build them."
        console.print(f"{len(added)} added; {then}")
    else:
        console.print("nothing added.")
    if build and added:  # as `kb build` would: KB_BUILD_WORKERS documents at once
        from kb_assets.build_workers import resolve_workers

        workers = resolve_workers(settings.build_workers, len(added))
        _build(settings, opened[0], added, workers=workers)
    if refused:
        err.print(f"{refused} file(s) refused; see the reasons above")
    if changed:
        err.print(
            f"{changed} file(s) not added: their names are in the corpus with other content "
            "(add each with --new-version, or delete the old one first)"
        )
    if refused or changed:
        raise typer.Exit(1)


def _colour(outcome: IntakeOutcome) -> str:
    """A ``kb add`` row's colour: green added, yellow duplicate, red refused or name clash
    (both make ``kb add`` exit 1)."""
    from kb_assets.intake import IntakeStatus

    if outcome.status == IntakeStatus.ADDED:
        return "green"
    return "red" if outcome.name_clash or outcome.status == IntakeStatus.REFUSED else "yellow"


def _added(outcomes: list[IntakeOutcome]) -> list[str]:
    from kb_assets.intake import IntakeStatus

    return [o.doc_id for o in outcomes if o.status == IntakeStatus.ADDED and o.doc_id]


def _status_style(status: str) -> str:
    """How `kb build`'s table shows an outcome's status: ready green, left to another run
    yellow, any other red."""
    from kb_assets.constants import DocumentStatus
    from kb_assets.live_runs import BUILDING_ELSEWHERE

    styles = {DocumentStatus.READY: "[green]{}[/]", BUILDING_ELSEWHERE: "[yellow]{}[/]"}
    return styles.get(status, "[red]{}[/]").format(status)


def _build(
    settings: Settings,
    stores: StoresResource,
    doc_ids: list[str],
    *,
    assets: list[str] | None = None,
    force: tuple[str, ...] = (),
    as_json: bool = False,
    batch: int = 1,
    workers: int = 1,
) -> None:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from kb_assets import backfill, operations
    from kb_assets.constants import DocumentStatus

    instance = home_instance(settings)
    names = {r.doc_id: r.name for r in stores.catalog().list_documents()}
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=err,
        transient=False,
        disable=as_json,
    )
    with progress:
        task = progress.add_task("building", total=len(doc_ids))

        def done(outcome: operations.BuildOutcome) -> None:
            did = "left" if outcome.status == operations.BUILDING_ELSEWHERE else "built"
            progress.update(task, advance=1, description=f"{did} {outcome.name}")

        progress.update(task, description=f"building {names.get(doc_ids[0], doc_ids[0])}")
        if batch > 1:  # KB_BACKFILL_BATCH documents a run (kb_assets.backfill)
            outcomes = backfill.build_batches(
                stores, instance, doc_ids, assets=assets, force=force, on_done=done, batch=batch
            )
        else:
            outcomes = operations.build_documents(
                stores, instance, doc_ids, assets=assets, force=force, on_done=done,
                workers=workers,
            )
    stores.close()
    if as_json:
        console.print_json(json.dumps([o.as_dict() for o in outcomes]))
    else:
        table = results_table(
            "kb build", "document", "pages", "chunks", "entities", "relationships",
            "figures", "seconds", "status",
        )
        for o in outcomes:
            status = _status_style(o.status)
            table.add_row(
                o.name, count_text(o.pages), count_text(o.chunks), count_text(o.entities), count_text(o.relationships),
                count_text(o.figures), f"{o.seconds:.1f}", status,
            )
        console.print(table)
    for o in outcomes:  # exit 0: another run builds it (operations.build_documents)
        if o.status == operations.BUILDING_ELSEWHERE:
            err.print(f"[yellow]{o.status}[/yellow] {o.name}: {o.reason}")
    failed = [o for o in outcomes if o.status == DocumentStatus.FAILED]
    for o in failed:
        err.print(f"[red]failed[/red] {o.name}: {o.reason}")
    if failed:
        raise typer.Exit(1)


@app.command(rich_help_panel=DOCUMENTS_PANEL)
def build(
    names: Annotated[
        list[str] | None, typer.Argument(help="Documents to build (default: pending + failed).")
    ] = None,
    everything: Annotated[bool, typer.Option("--all", help="Build every document.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Redo every step even if its inputs are unchanged.")
    ] = False,
    as_json: json_option("Print results as JSON.") = False,
    workers: Annotated[int | None, typer.Option("--workers", min=1, max=64, help=(
        "Documents built at once, each in a worker process (default: KB_BUILD_WORKERS, else 2 "
        "on a machine of 2 cores or more; 1 = one after another in this process)."))] = None,
) -> None:
    """Materialise every pending or failed document, `--workers` at once, then print a table.

    Exits 1 when any document failed, naming each with its reason. SIGTERM or Ctrl-C stops
    it within 10 s (``stopping.stop_guard``); the next `kb build` builds the documents that
    were in progress again.
    """
    from kb_assets import operations
    from kb_assets.build_workers import resolve_workers

    settings, stores = home_stores()
    operations.recover_interrupted(stores, home_instance(settings))  # a killed kb's leftovers
    try:
        doc_ids = (
            [operations.resolve_document(stores, n).doc_id for n in names]
            if names
            else operations.documents_to_build(stores, everything=everything)
        )
    except DocumentNotFoundError as error:
        err.print(f"[red]{error}[/red]")
        raise typer.Exit(2) from error
    if not doc_ids:
        console.print("nothing to build: every document is ready (use --all to rebuild)")
        return
    force_assets = tuple(operations.CORPUS_ASSETS) if force else ()
    at_once = resolve_workers(workers or settings.build_workers, len(doc_ids))
    _build(settings, stores, doc_ids, force=force_assets, as_json=as_json, workers=at_once)


@app.command(rich_help_panel=DOCUMENTS_PANEL)
def rebuild(
    asset: Annotated[str, typer.Argument(help=f"One of: {', '.join(REBUILDABLE)}.")],
    names: Annotated[list[str] | None, typer.Argument(help="Documents (or use --all).")] = None,
    everything: Annotated[bool, typer.Option("--all", help="Every ready document.")] = False,
    reset: Annotated[
        bool,
        typer.Option(
            "--reset",
            help="With `embeddings --all`: drop the vector index and the graph first and "
            "rebuild embeddings, graph and figures (after changing the embedding model).",
        ),
    ] = False,
) -> None:
    """Re-materialise only ASSET (and `record`) for the named documents; nothing upstream
    runs, because upstream outputs are read from the blob store. With --all, KB_BACKFILL_BATCH
    documents per run (the backfill policy's runs, executed by this process; a document
    that fails in its batch is run again alone)."""
    from kb_assets import operations
    from kb_assets.constants import DocumentStatus

    settings, stores = home_stores()
    try:
        selection = operations.rebuild_selection(asset)
    except ValueError as error:
        err.print(f"[red]{error}[/red]")
        raise typer.Exit(2) from error
    if reset:
        if asset != "embeddings" or not everything or names:
            err.print("--reset goes with `kb rebuild embeddings --all` only")
            raise typer.Exit(2)
        dropped, removed = operations.reset_for_new_model(stores)
        console.print(
            f"dropped the vector index ({'it existed' if dropped else 'there was none'}) and "
            f"{removed} graph relationships; re-embedding every ready document"
        )
        doc_ids = [r.doc_id for r in stores.catalog().list_documents(status=DocumentStatus.READY)]
        if doc_ids:
            _build(
                settings, stores, doc_ids, assets=operations.RESET_SELECTION,
                force=tuple(operations.RESET_SELECTION), batch=settings.backfill_batch,
            )
        return
    if names:
        rows = [operations.resolve_document(stores, n) for n in names]
        unready = [r for r in rows if r.status != DocumentStatus.READY]
        for row in unready:
            reason = f" ({row.failure_reason})" if row.failure_reason else ""
            err.print(
                f"{row.name} is {row.status}{reason}: a rebuild re-runs one asset from the "
                "stored outputs of the others, which it does not have yet. Build it with "
                f"`kb build {row.name}` (after fixing the file) or remove it with `kb delete`."
            )
        if unready:
            raise typer.Exit(1)
        doc_ids = [r.doc_id for r in rows]
    elif everything:
        doc_ids = [r.doc_id for r in stores.catalog().list_documents(status=DocumentStatus.READY)]
    else:
        err.print("name one or more documents, or pass --all")
        raise typer.Exit(2)
    if not doc_ids:
        console.print("no ready documents to rebuild")
        return
    batch = settings.backfill_batch if everything else 1
    _build(settings, stores, doc_ids, assets=selection, force=(asset,), batch=batch)


@app.command(rich_help_panel=DOCUMENTS_PANEL)
def retry(
    name: Annotated[str, typer.Argument(help="A document whose last build failed.")],
) -> None:
    """Re-execute a document's last failed run from the failed step (earlier steps such as
    the PDF conversion are not re-run)."""
    from kb_assets import operations
    from kb_assets.constants import DocumentStatus
    from kb_shared.stores.catalog import deleting_message

    settings, stores = home_stores()
    instance = home_instance(settings)
    row = operations.resolve_document(stores, name)
    if row.status == DocumentStatus.DELETING:
        err.print(deleting_message(row))
        raise typer.Exit(2)
    import dagster as dg

    runs = instance.get_runs(
        filters=dg.RunsFilter(tags={PARTITION_TAG: row.doc_id}), limit=1
    )
    if not runs or runs[0].status != dg.DagsterRunStatus.FAILURE:
        err.print(f"{row.name}: its last run did not fail; use `kb build {row.doc_id}`")
        raise typer.Exit(2)
    result = operations.retry_failed(instance, runs[0].run_id)
    if result.success:
        console.print(f"[green]ready[/green] {row.name} (run {result.run_id})")
        return
    err.print(f"[red]failed[/red] {row.name}: {operations.failure_reason(result)}")
    raise typer.Exit(1)


@app.command(rich_help_panel=DOCUMENTS_PANEL)
def delete(
    names: Annotated[list[str], typer.Argument(help="Documents by file name or id.")],
) -> None:
    """Remove documents: blobs, catalog row, vectors, graph edges and the partition. Each is
    marked `deleting` first (no longer served or built); run it again if it was stopped."""
    from kb_assets import operations

    settings, stores = home_stores()
    instance = home_instance(settings)
    status = 0
    for name in names:
        try:
            report = operations.delete_document(stores, instance, name)
        except (DocumentNotFoundError, DocumentBusyError) as error:
            err.print(f"[red]{error}[/red]")
            status = 1
            continue
        done = (
            f"finished deleting {report.name} (an earlier delete of it did not finish)"
            if report.resumed
            else f"deleted {report.name}"
        )
        console.print(
            f"{done}: {report.vectors} vectors, {report.relationships} "
            f"relationships, {report.orphan_entities} orphan entities, {report.blobs} blobs"
        )
    stores.close()
    raise typer.Exit(status)


@db_app.command("init")
def db_init() -> None:
    """Create the catalog and graph schema (idempotent); on Postgres also apply `sql/`."""
    from kb_shared.stores.factory import init_database

    settings, _ = home_stores()
    done = init_database(settings)
    if done.sql_files:
        # one line however many files: a log reader greps it (soft_wrap: no folding)
        console.print(f"applied sql/: {', '.join(done.sql_files)}", soft_wrap=True)
    console.print(f"schema ready at {done.database}", soft_wrap=True)


@app.command("sample-pdf", rich_help_panel=SERVING_PANEL)
def sample_pdf(
    path: Annotated[Path, typer.Argument(help="Where to write the sample PDF.")],
) -> None:
    """Write the sample regulatory PDF the demo builds (generated from kb's own text)."""
    from kb_assets.sample_pdf import build_sample_pdf

    console.print(str(build_sample_pdf(path)))


#: Where the upload page listens unless told otherwise (``kb_assets.upload``).
UPLOAD_HOST, UPLOAD_PORT = "127.0.0.1", 3001
#: Figure-gallery URLs ``kb demo`` prints (one per ready document, at most this many).
DEMO_GALLERIES = 5


@app.command(rich_help_panel=SERVING_PANEL)
def ui(
    port: Annotated[int, typer.Option(help="Dagster UI port.")] = 3000,
    host: Annotated[str, typer.Option(help="Dagster UI host.")] = "127.0.0.1",
    upload_port: Annotated[int, typer.Option(help="Upload page port.")] = UPLOAD_PORT,
    upload_host: Annotated[str, typer.Option(help="Upload page host.")] = UPLOAD_HOST,
    upload_public: Annotated[
        bool,
        typer.Option(help="Serve the upload page on a non-loopback host without KB_MCP_TOKENS."),
    ] = False,
) -> None:
    """Serve the Dagster UI and daemon (`dagster dev -w workspace.yaml`) on KB_HOME, and beside
    it the upload page (http://127.0.0.1:3001: add documents from a browser and watch them
    build). SIGINT or SIGTERM to kb stops both and everything they started."""
    from kb_assets import serve
    from kb_shared.settings import Settings

    settings = Settings()
    dagster_url = _url(host, port)
    upload = _upload_page(settings, upload_host, upload_port, dagster_url, upload_public)
    console.print(
        f"Dagster UI: {dagster_url}\nUpload page: {_url(upload_host, upload_port)}  "
        f"(Ctrl-C stops both; each says when it is up)\n{_inbox_line(settings)}",
        soft_wrap=True,
    )
    _serve([serve.dagster_ui(settings, host=host, port=port), upload])


def _inbox_line(settings: Settings) -> str:
    """Create ``settings.inbox`` (the folder the intake sensor of ``kb ui``/``kb demo`` reads;
    nothing else makes it) and say where it is."""
    settings.inbox.mkdir(parents=True, exist_ok=True)
    return f"Inbox: {settings.inbox}  (drop documents here: they are added and built)"


def _url(host: str, port: int) -> str:
    """``kb_assets.serve.server_url``: the http URL a server on ``host``:``port`` answers at."""
    from kb_assets import serve

    return serve.server_url(host, port)


def _upload_page(
    settings: Settings, host: str, port: int, dagster_url: str, public: bool
) -> serve.ServerCommand:
    """The upload page's command; exits 2 first when ``host`` may not be served
    (``kb_shared.access.exposure_problem``), before any server starts."""
    from kb_assets import serve

    problem = exposure_problem(host, settings.token_list, public, public_flag="--upload-public")
    if problem:
        err.print(f"[red]upload page: {problem}[/red]")
        raise typer.Exit(2)
    return serve.upload_page(settings, host=host, port=port, dagster_url=dagster_url, public=public)


def _serve(commands: list[serve.ServerCommand]) -> None:
    from kb_assets import serve

    code, message = serve.serve(commands)
    if code:
        err.print(f"[red]{message}[/red]")
    raise typer.Exit(code)


@app.command(rich_help_panel=SERVING_PANEL)
def demo(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(help="PDFs or folders to build (default: the generated sample PDF)."),
    ] = None,
    serve_after: Annotated[
        bool,
        typer.Option("--serve/--no-serve", help="Serve the Dagster UI and MCP server after."),
    ] = True,
    ui_port: Annotated[int, typer.Option(help="Dagster UI port.")] = 3000,
    upload_port: Annotated[int, typer.Option(help="Upload page port.")] = UPLOAD_PORT,
) -> None:
    """The README's first command: add PDFs (or the sample), build them, then serve the
    Dagster UI (http://127.0.0.1:3000), the upload page (http://127.0.0.1:3001) and the MCP
    server (http://127.0.0.1:8765/mcp) until Ctrl-C (or SIGTERM), which stops them all and
    everything they started."""
    from kb_assets import operations, serve
    from kb_assets.intake import IntakeStatus, admit

    settings, stores = home_stores()
    if not paths:
        from kb_assets.sample_pdf import SAMPLE_FILENAME, build_sample_pdf

        paths = [build_sample_pdf(settings.home / "sample" / SAMPLE_FILENAME)]
        console.print(f"no DOCS given: using the generated sample {paths[0]}")
    for o in admit(paths, stores, home_instance(settings)):
        if o.status != IntakeStatus.ADDED:
            console.print(f"{o.name}: {o.status} ({o.reason})")
    todo = operations.documents_to_build(stores)
    try:
        if todo:
            _build(settings, stores, todo)
    except typer.Exit as stop:
        if not serve_after:
            raise
        err.print(f"some documents failed (exit {stop.exit_code}); serving the rest")
    ready = [row.doc_id for row in stores.catalog().list_documents("ready")]
    stores.close()
    if not serve_after:
        return
    dagster_url = _url(UPLOAD_HOST, ui_port)
    upload = _upload_page(settings, UPLOAD_HOST, upload_port, dagster_url, False)
    mcp_base = f"http://{settings.mcp_host}:{settings.mcp_port}"
    galleries = "".join(
        f"\n  figures of {doc_id}: {mcp_base}/documents/{quote(doc_id)}/figures"
        for doc_id in ready[:DEMO_GALLERIES]
    )
    console.print(
        f"MCP server: {mcp_base}/mcp  (files under /files, health at /healthz)\n"
        f"Knowledge graph: {mcp_base}/graph\n"
        f"Figure galleries: {mcp_base}/documents/<doc_id>/figures{galleries}\n"
        f"Dagster UI: {dagster_url}\n"
        f"Upload page: {_url(UPLOAD_HOST, upload_port)}  (Ctrl-C stops them all)\n"
        f"{_inbox_line(settings)}\n"
        "Starting them; each prints '… is up' when it answers (the Dagster UI takes a minute "
        "or two).",
        soft_wrap=True,
    )
    _serve([
        serve.mcp_server(settings),
        serve.dagster_ui(settings, host=UPLOAD_HOST, port=ui_port),
        upload,
    ])


def _register_the_rest() -> None:
    """Register the commands defined in other modules, after this module's own, so that
    ``kb --help`` lists the everyday ones first."""
    for command, name in (
        (documents.status, None),
        (documents.versions, None),
        (diff_command, "diff"),
        (obligations_command, "obligations"),
        (documents.categorize, None),
    ):
        app.command(name, rich_help_panel=DOCUMENTS_PANEL)(command)
    app.command("move", help="Same as `kb categorize`.", rich_help_panel=DOCUMENTS_PANEL)(
        documents.categorize
    )
    app.add_typer(sync_app, name="sync", rich_help_panel=MARKET_PANEL)
    app.add_typer(requests_app, name="requests", rich_help_panel=MARKET_PANEL)
    app.add_typer(references_app, name="references", rich_help_panel=MARKET_PANEL)
    app.command("migrate", rich_help_panel=MAINTENANCE_PANEL)(migrate_command)
    app.command(rich_help_panel=MAINTENANCE_PANEL)(documents.repair)
    app.add_typer(db_app, name="db", rich_help_panel=MAINTENANCE_PANEL)


_register_the_rest()


def main() -> None:
    """Entry point that turns any deliberate ``KbError`` into a one-line message."""
    try:
        app()
    except KbError as error:
        err.print(f"[red]{error}[/red]")
        sys.exit(1)


if __name__ == "__main__":
    main()
