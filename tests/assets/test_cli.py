"""The ``kb`` CLI: ``kb ui`` launches ``dagster dev`` on this KB_HOME's instance; a rebuild
refuses documents that never built."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kb_assets import serve
from kb_assets.cli import main as cli
from kb_assets.resources import StoresResource


def test_ui_runs_dagster_dev_from_the_instance_folder_with_absolute_homes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KB_HOME", "relative-home")  # relative to the caller's directory
    calls: list[Sequence[serve.ServerCommand]] = []

    def fake_serve(commands: Sequence[serve.ServerCommand]) -> tuple[int, str]:
        calls.append(commands)
        return 0, "stopping (SIGTERM)"

    monkeypatch.setattr(serve, "serve", fake_serve)
    result = CliRunner().invoke(cli.app, ["ui", "--port", "3111"])
    assert result.exit_code == 0, result.output
    [[server, upload]] = calls  # the Dagster UI, and the upload page beside it
    command = list(server.argv)
    home = tmp_path / "relative-home"
    assert upload.argv[1:3] == ["-m", "kb_assets.upload"]
    assert upload.argv[upload.argv.index("--port") + 1] == "3001"
    assert upload.argv[upload.argv.index("--dagster-url") + 1] == "http://127.0.0.1:3111"
    assert upload.env["KB_HOME"] == str(home)
    assert command[1:4] == ["-m", "dagster", "dev"]
    assert command[command.index("-p") + 1] == "3111"
    workspace = Path(command[command.index("-w") + 1])
    assert workspace.is_absolute() and workspace.name == "workspace.yaml"
    # run from DAGSTER_HOME, where the repository's dagster.yaml was copied: Dagster then
    # uses it without warning that a dagster.yaml in the working directory is ignored
    assert server.cwd == home / "dagster"
    assert (home / "dagster" / "dagster.yaml").is_file()
    assert server.env["KB_HOME"] == str(home)
    assert server.env["DAGSTER_HOME"] == str(home / "dagster")


def test_rebuild_of_a_failed_document_is_refused_and_keeps_its_reason(tmp_path: Path) -> None:
    fake = tmp_path / "notes.pdf"
    fake.write_text("hello, this is not a PDF\n", encoding="utf-8")
    runner = CliRunner()
    assert runner.invoke(cli.app, ["add", str(fake)]).exit_code == 0
    built = runner.invoke(cli.app, ["build"])
    assert built.exit_code == 1
    stores = StoresResource()
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
    from kb_assets.sample_pdf import build_sample_pdf

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


def test_status_writes_nothing_and_repair_is_an_explicit_command(tmp_path: Path) -> None:
    from kb_assets.constants import DOCUMENTS
    from kb_assets.instance import dagster_instance
    from kb_shared.settings import Settings
    from tests.fakes import tiny_pdf

    home = tmp_path / "kb"
    env = {"KB_HOME": str(home)}
    pdf = tmp_path / "in" / "Lost Partition.pdf"
    pdf.parent.mkdir()
    pdf.write_bytes(tiny_pdf("lost"))
    runner = CliRunner()
    assert runner.invoke(cli.app, ["add", str(pdf)], env=env).exit_code == 0
    instance = dagster_instance(Settings(home=home))
    instance.delete_dynamic_partition(DOCUMENTS, "lost-partition.pdf")  # KB_HOME/dagster reset

    status = runner.invoke(cli.app, ["status"], env=env)
    assert status.exit_code == 0, status.output
    assert (
        "1 document(s) have no Dagster partition (Lost Partition.pdf); `kb repair` restores them"
        in " ".join(status.output.split())
    )
    assert instance.get_dynamic_partitions(DOCUMENTS) == []

    assert "add a partition for every document" in " ".join(
        runner.invoke(cli.app, ["repair", "--help"]).output.split()
    )
    repaired = runner.invoke(cli.app, ["repair"], env=env)
    assert repaired.exit_code == 0
    assert "added 1 partition(s): lost-partition.pdf" in repaired.output
    assert instance.get_dynamic_partitions(DOCUMENTS) == ["lost-partition.pdf"]
    again = runner.invoke(cli.app, ["repair"], env=env)
    assert "nothing to repair" in again.output


def test_status_shows_a_new_version_waiting_beside_the_served_one(tmp_path: Path) -> None:
    import json

    from kb_assets.resources import StoresResource
    from tests.fakes import tiny_pdf

    home = tmp_path / "kb"
    env = {"KB_HOME": str(home), "COLUMNS": "200"}
    pdf = tmp_path / "in" / "Rules.pdf"
    pdf.parent.mkdir()
    pdf.write_bytes(tiny_pdf("rules, first"))
    runner = CliRunner()
    assert runner.invoke(cli.app, ["add", str(pdf)], env=env).exit_code == 0
    stores = StoresResource(home=str(home))
    stores.catalog().mark_ready("rules.pdf", pages=1, chunk_count=1)  # as if built
    pdf.write_bytes(tiny_pdf("rules, revised"))
    added = runner.invoke(cli.app, ["add", "--new-version", str(pdf)], env=env)
    assert added.exit_code == 0, added.output

    table = runner.invoke(cli.app, ["status"], env=env)
    assert table.exit_code == 0, table.output
    assert "ready (version 2 pending)" in table.output
    (row,) = json.loads(runner.invoke(cli.app, ["status", "--json"], env=env).output)
    assert (row["status"], row["serving_version"]) == ("ready", 1)
    assert row["next_version"] == {"version": 2, "state": "pending", "reason": ""}

    stores.catalog().fail_version("rules.pdf", 2, "markdown: the PDF is truncated")
    failed = runner.invoke(cli.app, ["status"], env=env)
    assert "ready (version 2 failed: markdown: the PDF is truncated)" in " ".join(
        failed.output.split()
    )
    stores.close()


def test_a_pending_version_with_a_step_in_progress_is_building() -> None:
    import datetime as dt

    from kb_assets.operations import next_version, status_text
    from kb_shared.stores.catalog import DocumentVersionRow

    def version(number: int, status: str, reason: str | None = None) -> DocumentVersionRow:
        return DocumentVersionRow(
            doc_id="rules.pdf", version=number, name="Rules.pdf", sha256=f"{number}" * 64,
            size_bytes=10, blob_key="pdfs/rules.pdf", label=None, status=status,
            failure_reason=reason, added_at=dt.datetime(2026, 12, 1, tzinfo=dt.UTC),
            superseded_at=None,
        )

    history = [version(1, "superseded"), version(2, "serving"), version(3, "pending")]
    steps = {"markdown": "materialized", "chunks": "in_progress", "embeddings": "missing"}
    building = next_version(history, steps)
    assert building == {"version": 3, "state": "building", "reason": ""}
    assert next_version(history, {"markdown": "materialized"})["state"] == "pending"
    assert next_version(history[:2], steps) is None  # the newest version serves
    assert next_version([version(1, "pending")], steps) is None  # a first build: status says it
    row = {"status": "ready", "reason": "", "next_version": building}
    assert status_text(row) == "ready (version 3 building)"
    assert status_text({"status": "failed", "reason": "embeddings: down"}) == (
        "failed (embeddings: down)"
    )
