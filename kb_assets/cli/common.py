"""What the ``kb`` command groups share: their two consoles and the stores under ``KB_HOME``.

Light to import (rich only): the stores, and Dagster with them, load when a command calls
``home_stores`` (``tests/test_cli_imports.py``).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from rich.console import Console

if TYPE_CHECKING:
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
    from kb_assets.resources import StoresResource
    from kb_shared.settings import Settings

    settings = Settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    return settings, StoresResource(home=str(settings.home))
