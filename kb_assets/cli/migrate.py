"""``kb migrate`` — copy the corpus of the current ``KB_HOME`` (its embedded stores) into
server backends: ``--to-catalog`` (Postgres), ``--to-qdrant`` (a Qdrant server URL, or a
folder for Qdrant's local mode), ``--to-neo4j`` and ``--to-blobs`` (any fsspec URL), any
subset of them. The copy is ``kb_shared.stores.migrate.migrate``: idempotent, resumable,
verified by counts afterwards; docs/deploy.md "From an embedded corpus to the servers".

Credentials come from the settings, never from the command line: the Neo4j target logs in
with ``KB_NEO4J_USER`` / ``KB_NEO4J_PASSWORD`` (database ``KB_NEO4J_DATABASE``) and a Qdrant
server with ``KB_QDRANT_API_KEY`` (collection ``KB_QDRANT_COLLECTION``); a Postgres URL
carries its own. Exit status: 0 copied and every count matches; 1 the copy failed or a count
differs (the message says which); 2 nothing to do, or a target holds other data and
``--replace`` was not given (nothing was written).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from kb_assets.cli.common import console, err, json_option, text_option
from kb_shared.errors import KbError, MigrationRefusedError

if TYPE_CHECKING:  # the migration imports every backend: only `kb migrate` loads it
    from kb_shared.stores.migrate import MigrationReport

#: The setting that points kb at each moved store, for the closing hint.
SETTING_OF = {
    "catalog": "KB_DATABASE_URL",
    "vectors": "KB_QDRANT_URL",
    "graph": "KB_NEO4J_URI",
    "blobs": "KB_BLOB_URL",
}


def migrate_command(
    to_catalog: text_option("Target catalog URL (postgresql://user:pw@host/db).") = None,
    to_qdrant: text_option("Target Qdrant: server URL, or a folder (local mode).") = None,
    to_neo4j: text_option("Target Neo4j Bolt URI (login: KB_NEO4J_USER/PASSWORD).") = None,
    to_blobs: text_option("Target blob root (any fsspec URL).") = None,
    replace: Annotated[
        bool,
        typer.Option("--replace", help="Overwrite target data that differs from the source."),
    ] = False,
    batch: Annotated[
        int | None,
        typer.Option(
            min=1, help="Rows/points per write (default: kb_shared.stores.migrate.BATCH, 500).",
            show_default=False,
        ),
    ] = None,
    as_json: json_option("Print the counts as JSON.") = False,
) -> None:
    """Copy the embedded stores of KB_HOME into server backends (any subset), then verify
    the counts. Running it again copies only what is missing."""
    from kb_shared.settings import Settings
    from kb_shared.stores.migrate import BATCH, MigrationTargets, migrate

    settings = Settings()
    targets = MigrationTargets(
        catalog_url=to_catalog,
        qdrant=to_qdrant,
        qdrant_api_key=_secret(settings.qdrant_api_key),
        qdrant_collection=settings.qdrant_collection,
        neo4j_uri=to_neo4j,
        neo4j_user=settings.neo4j_user,
        neo4j_password=_secret(settings.neo4j_password),
        neo4j_database=settings.neo4j_database,
        blob_url=to_blobs,
    )
    if targets.empty:
        err.print("name a target: --to-catalog, --to-qdrant, --to-neo4j and/or --to-blobs")
        raise typer.Exit(2)
    # Neo4j warns about property keys an empty database has not seen yet; not news here.
    logging.getLogger("neo4j.notifications").setLevel(logging.ERROR)
    try:
        report = migrate(
            settings,
            targets,
            replace=replace,
            batch=BATCH if batch is None else batch,
            progress=lambda line: err.print(escape(line)),
        )
    except MigrationRefusedError as refused:
        err.print(escape(str(refused)))
        raise typer.Exit(2) from refused
    except KbError as failed:
        err.print(f"migration failed: {escape(str(failed))}")
        raise typer.Exit(1) from failed
    if as_json:
        console.print_json(json.dumps(_as_dict(report)))
        return
    console.print(_table(report))
    for store, where in report.targets.items():
        local_qdrant = store == "vectors" and not (to_qdrant or "").startswith("http")
        hint = (
            "Qdrant local mode: for checking; kb serves from a Qdrant server"
            if local_qdrant
            else f"point kb at it with {SETTING_OF[store]}"
        )
        written = report.written.get(store, 0)
        console.print(f"{store}: {written} written to {escape(where)} ({hint})")


def _secret(value: object) -> str | None:
    """The plain text of a ``SecretStr`` setting (``None`` when unset)."""
    return None if value is None else value.get_secret_value()  # type: ignore[attr-defined]


def _table(report: MigrationReport) -> Table:
    """The verification table: store, item, source count, target count, match."""
    table = Table(title="kb migrate: counts after copying")
    for column in ("store", "item", "source", "target", "match"):
        table.add_column(column, justify="right" if column in ("source", "target") else "left")
    for line in report.counts:
        table.add_row(
            line.store, line.item, str(line.source), str(line.target), "✓" if line.ok else "✗"
        )
    return table


def _as_dict(report: MigrationReport) -> dict[str, object]:
    """The report as JSON-ready data."""
    return {
        "counts": [
            {"store": c.store, "item": c.item, "source": c.source, "target": c.target}
            for c in report.counts
        ],
        "written": report.written,
        "replaced": report.replaced,
        "targets": report.targets,
    }
