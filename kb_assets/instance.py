"""The Dagster instance kb uses: ``KB_HOME/dagster`` with the repository's ``dagster.yaml``."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg

from kb_shared.settings import Settings

#: The instance settings file shipped at the repository root.
DAGSTER_YAML = Path(__file__).resolve().parents[1] / "dagster.yaml"
_FALLBACK_YAML = "telemetry:\n  enabled: false\n"


def prepare_dagster_home(settings: Settings) -> Path:
    """Create ``settings.dagster_home`` with a ``dagster.yaml`` in it.

    Returns the directory. An existing ``dagster.yaml`` there is left alone (a person may
    have edited it). The environment is not touched: ``kb ui`` passes ``DAGSTER_HOME`` to
    ``dagster dev`` itself, and in-process builds are given the instance.
    """
    home = settings.dagster_home
    home.mkdir(parents=True, exist_ok=True)
    target = home / "dagster.yaml"
    if not target.exists():
        if DAGSTER_YAML.is_file():
            shutil.copyfile(DAGSTER_YAML, target)
        else:
            target.write_text(_FALLBACK_YAML, encoding="utf-8")
    return home


def dagster_instance(settings: Settings) -> dg.DagsterInstance:
    """The persistent instance under ``KB_HOME/dagster`` (SQLite run/event storage)."""
    return dg.DagsterInstance.from_config(str(prepare_dagster_home(settings)))
