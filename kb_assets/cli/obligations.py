"""``kb obligations [--party P] [--document D] [--modality M] [--csv FILE]`` — the obligations
register of the served documents (issue 26) as a table, or as a CSV a team imports into its
own register: one row per obligation, with the same link to the PDF page the MCP server's
``search_obligations`` gives (``kb_mcp.links``).

It reads what the ``obligations`` asset filed, through the tool's own document rule
(``kb_mcp.tools.search_obligations.register_keys``), so the CLI and the tool count alike. Heavy
modules are imported when the command runs (issue 28: ``kb --help`` starts at once). Exit
status: 0 listed (also when nothing matches); 2 a bad filter or an unknown or unready document
(the reason is printed).
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Annotated, Any

import typer

from kb_assets.cli.common import text_option

#: The CSV's columns, in order (issue 26: the register's fields plus the PDF link).
CSV_COLUMNS = (
    "number", "document", "doc_id", "version", "page", "reference", "section", "party", "role",
    "modality", "text", "action", "deadline", "chunk_id", "pdf_link",
)


def obligations_command(
    party: text_option("Bound party or role, e.g. 'retailer' (any case).") = None,
    document: text_option("One document: file name or doc_id (`kb status`).") = None,
    modality: text_option("must, 'must not', should or 'should not'.") = None,
    query: text_option("Words that must all appear in the sentence.") = None,
    csv_file: Annotated[
        Path | None,
        typer.Option("--csv", help="Write the register as CSV to FILE ('-' for standard output)."),
    ] = None,
) -> None:
    """The obligations register: every must / must not / should sentence and numbered command
    ("3.1.1 Limit system access …") of the served documents."""
    from kb_assets.cli.common import console, err
    from kb_mcp.errors import ToolProblem
    from kb_mcp.links import links_for
    from kb_mcp.tools.search_obligations import register_keys
    from kb_shared.errors import KbError, QueryError
    from kb_shared.settings import Settings
    from kb_shared.stores import factory

    settings = Settings()
    catalog = factory.open_catalog(settings)
    try:
        keys = register_keys(catalog, document)
        rows = list(_every_row(catalog, keys, party=party, modality=modality, query=query))
        documents = {row.doc_id: row for row in catalog.list_documents()}
    except (ToolProblem, QueryError, KbError) as exc:
        err.print(f"[red]{exc}[/red]", soft_wrap=True)
        raise typer.Exit(2) from exc
    finally:
        catalog.close()
    links = links_for(settings)
    if csv_file is not None:
        if str(csv_file) == "-":
            write_csv(sys.stdout, rows, documents, links)
        else:
            with csv_file.open("w", newline="", encoding="utf-8") as out:
                write_csv(out, rows, documents, links)
            err.print(f"{len(rows)} obligations written to {csv_file}")
        return
    _print_table(console, rows, documents)


def _every_row(catalog: Any, keys: list[str], **filters: Any) -> Iterator[Any]:
    """Every matching ``ObligationRow``, page after page (the store caps one page)."""
    from kb_shared.stores.catalog.obligations import MAX_LIMIT

    offset: int | None = 0
    while offset is not None:
        found = catalog.search_obligations(keys, offset=offset, limit=MAX_LIMIT, **filters)
        yield from found.rows
        offset = found.next_offset


def write_csv(out: IO[str], rows: list[Any], documents: dict[str, Any], links: Any) -> None:
    """The register as CSV (``CSV_COLUMNS``, a header row first) to ``out``."""
    from kb_shared import layout
    from kb_shared.search.citations import heading_label

    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for number, row in enumerate(rows, 1):
        doc = documents.get(row.doc_id)
        writer.writerow([
            number, doc.name if doc is not None else row.doc_id, row.doc_id, row.version,
            row.page or "", row.reference or "", heading_label(row.heading), row.party,
            row.role or "",
            row.modality, row.text, row.action, row.deadline or "", row.chunk_id,
            links.page(layout.pdf_key(row.version_key), row.page) or "",
        ])


def _print_table(console: Any, rows: list[Any], documents: dict[str, Any]) -> None:
    from rich.markup import escape
    from rich.table import Table

    from kb_mcp.render_obligations import party_label

    if not rows:
        console.print("No obligation matches.")
        return
    table = Table(title=f"{len(rows)} obligations", show_lines=False)
    for column in ("#", "document", "page", "clause", "party", "modality", "deadline", "text"):
        table.add_column(column, overflow="fold")
    for number, row in enumerate(rows, 1):
        doc = documents.get(row.doc_id)
        table.add_row(
            str(number), escape(doc.name if doc is not None else row.doc_id),
            str(row.page or ""), escape(row.reference or ""), escape(party_label(row)),
            row.modality, escape(row.deadline or ""), escape(row.text),
        )
    console.print(table)
