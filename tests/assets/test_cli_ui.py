"""``kb ui`` launches ``dagster dev`` on this KB_HOME's Dagster instance."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kb_assets import cli


def test_ui_runs_dagster_dev_from_the_instance_folder_with_absolute_homes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KB_HOME", "relative-home")  # relative to the caller's directory
    calls: list[tuple[list[str], dict[str, Any]]] = []

    def fake_call(command: list[str], **kwargs: Any) -> int:
        calls.append((command, kwargs))
        return 0

    monkeypatch.setattr(subprocess, "call", fake_call)
    result = CliRunner().invoke(cli.app, ["ui", "--port", "3111"])
    assert result.exit_code == 0, result.output
    [(command, kwargs)] = calls
    home = tmp_path / "relative-home"
    assert command[1:4] == ["-m", "dagster", "dev"]
    assert command[command.index("-p") + 1] == "3111"
    workspace = Path(command[command.index("-w") + 1])
    assert workspace.is_absolute() and workspace.name == "workspace.yaml"
    # run from DAGSTER_HOME, where the repository's dagster.yaml was copied: Dagster then
    # uses it without warning that a dagster.yaml in the working directory is ignored
    assert kwargs["cwd"] == home / "dagster"
    assert (home / "dagster" / "dagster.yaml").is_file()
    assert kwargs["env"]["KB_HOME"] == str(home)
    assert kwargs["env"]["DAGSTER_HOME"] == str(home / "dagster")
