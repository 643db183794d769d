"""What the ``kb`` command groups share: their two consoles, the stores and the Dagster instance
under ``KB_HOME``, the results table, and the option types more than one command declares
(``text_option``, ``json_option``).

Light to import (rich only): the stores, and Dagster with them, load when a command calls
``home_stores`` (``tests/test_cli_imports.py``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    import dagster as dg

    from kb_assets.resources import StoresResource
    from kb_shared.settings import Settings

#: Standard output and error. Piped output (CI logs, `| tee`) gets 200 columns instead of
#: rich's 80-column default, so tables stay wide.
console = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 200)


def home_stores() -> tuple[Settings, StoresResource]:
    """The settings (``KB_*`` environment) and the stores under their ``home``, created if
    missing; the first call imports Dagster.

    Raises:
        SettingsError: an invalid ``KB_*`` setting.
    """
    from kb_shared.settings import Settings

    settings = Settings()
    return settings, stores_under(settings)


def stores_under(settings: Settings) -> StoresResource:
    """The stores under ``settings.home`` (created if missing); the first call imports Dagster."""
    from kb_assets.resources import StoresResource

    settings.home.mkdir(parents=True, exist_ok=True)
    return StoresResource(home=str(settings.home))


def home_instance(settings: Settings) -> dg.DagsterInstance:
    """The Dagster instance under ``KB_HOME/dagster`` (``kb_assets.instance``); the first
    call imports Dagster."""
    from kb_assets.instance import dagster_instance

    return dagster_instance(settings)


def results_table(title: str, *columns: str) -> Table:
    """A results table whose text columns wrap (fold) instead of truncating names."""
    table = Table(title=title)
    for number, column in enumerate(columns):
        text = number == 0 or column in ("id", "reason", "status")
        table.add_column(column, overflow="fold", min_width=12 if text else None)
    return table


def count_text(value: int | None) -> str:
    """A count for a table cell: blank when unknown (``None``)."""
    return "" if value is None else str(value)


def text_option(help_text: str) -> Any:
    """The type of an optional text option (``str | None``; give it the default ``None``):
    its flag is the parameter's name with dashes (``to_catalog`` -> ``--to-catalog``), its
    help ``help_text``. Used as the annotation, like ``kb_mcp.tools.optional_text``."""
    return Annotated[str | None, typer.Option(help=help_text)]


def json_option(help_text: str) -> Any:
    """The type of a command's ``--json`` flag (``bool``; give it the default ``False``), its
    help ``help_text`` (what is printed as JSON)."""
    return Annotated[bool, typer.Option("--json", help=help_text)]

