"""The ``kb`` CLI: ``kb ui`` launches ``dagster dev`` on this KB_HOME's instance; a rebuild
refuses documents that never built."""

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


def test_rebuild_of_a_failed_document_is_refused_and_keeps_its_reason(tmp_path: Path) -> None:
    fake = tmp_path / "notes.pdf"
    fake.write_text("hello, this is not a PDF\n", encoding="utf-8")
    runner = CliRunner()
    assert runner.invoke(cli.app, ["add", str(fake)]).exit_code == 0
    built = runner.invoke(cli.app, ["build"])
    assert built.exit_code == 1
    stores = cli.StoresResource()
    [before] = stores.catalog().list_documents()
    assert before.status == "failed"
    assert before.failure_reason is not None and before.failure_reason.startswith("markdown: ")

    rebuilt = runner.invoke(cli.app, ["rebuild", "graph", "notes.pdf"])
    assert rebuilt.exit_code == 1
    assert f"notes.pdf is failed ({before.failure_reason}): a rebuild re-runs one asset" in " ".join(
        rebuilt.output.split()
    )
    assert "kb build notes.pdf" in rebuilt.output
    [after] = stores.catalog().list_documents()
    assert (after.status, after.failure_reason) == ("failed", before.failure_reason)
    stores.close()


def test_add_exits_1_when_a_file_is_refused_and_0_for_a_repeat(tmp_path: Path) -> None:
    from kb_shared.sample_pdf import build_sample_pdf

    pdf = build_sample_pdf(tmp_path / "in" / "Procedure.pdf")
    empty = tmp_path / "in" / "empty.pdf"
    empty.write_bytes(b"")
    runner = CliRunner()
    first = runner.invoke(cli.app, ["add", str(pdf), str(empty)])
    assert first.exit_code == 1
    assert "1 added; run `kb build` to build them." in first.output
    assert "the file is empty" in first.output
    assert "1 file(s) refused; see the reasons above" in first.output
    again = runner.invoke(cli.app, ["add", str(pdf)])  # the same name again: a duplicate
    assert again.exit_code == 0, again.output
    assert "nothing added." in again.output
    nothing = runner.invoke(cli.app, ["add", str(tmp_path / "no-pdfs-here")])
    assert nothing.exit_code == 1
    assert "no such file" in nothing.output
