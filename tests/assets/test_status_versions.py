"""``kb status`` names the version kb serves once a document has several (a new-user trial of
2026-12-02 could not tell from "ready (version 2 pending)" which one search used): in the words
of ``kb versions`` and the MCP ``list_documents`` ("version 1 serving"); a document with one
version still reads "ready" alone (``operations.status_text``)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kb_assets.cli import main as cli
from kb_assets.operations import status_text
from kb_assets.resources import StoresResource
from tests.fakes import tiny_pdf


def status_cell(output: str) -> str:
    """The status column of the one document row of ``kb status``'s table."""
    (line,) = [line for line in output.splitlines() if "Rules.pdf" in line]
    return line.split("│")[2].strip()


def test_status_says_which_version_serves_beside_a_new_one(tmp_path: Path) -> None:
    home = tmp_path / "kb"
    env = {"KB_HOME": str(home), "COLUMNS": "200"}
    pdf = tmp_path / "in" / "Rules.pdf"
    pdf.parent.mkdir()
    pdf.write_bytes(tiny_pdf("rules, first"))
    runner = CliRunner()
    assert runner.invoke(cli.app, ["add", str(pdf)], env=env).exit_code == 0
    stores = StoresResource(home=str(home))
    try:
        catalog = stores.catalog()
        catalog.mark_ready("rules.pdf", pages=1, chunk_count=1)  # as if built
        one = runner.invoke(cli.app, ["status"], env=env)
        assert one.exit_code == 0, one.output
        assert status_cell(one.output) == "ready"  # one version: nothing to tell apart

        pdf.write_bytes(tiny_pdf("rules, revised"))
        assert runner.invoke(cli.app, ["add", "--new-version", str(pdf)], env=env).exit_code == 0
        pending = runner.invoke(cli.app, ["status"], env=env)
        assert status_cell(pending.output) == "ready (version 2 pending); version 1 serving"

        catalog.record_version("rules.pdf", 2, pages=1, chunk_count=1)  # version 2's build
        switched = runner.invoke(cli.app, ["status"], env=env)
        assert status_cell(switched.output) == "ready; version 2 serving"
        (row,) = json.loads(runner.invoke(cli.app, ["status", "--json"], env=env).output)
        assert (row["serving_version"], row["next_version"]) == (2, None)
        versions = runner.invoke(cli.app, ["versions", "Rules.pdf"], env=env)
        assert [line.split("│")[3].strip() for line in versions.output.splitlines()
                if line.startswith("│ 1") or line.startswith("│ 2")] == ["superseded", "serving"]
    finally:
        stores.close()


def test_status_text_of_a_failed_new_version_and_of_a_document_no_version_serves() -> None:
    failed = {"version": 3, "state": "failed", "reason": "embeddings: quota exceeded"}
    assert status_text(
        {"status": "ready", "reason": "", "serving_version": 2, "next_version": failed}
    ) == "ready (version 3 failed: embeddings: quota exceeded); version 2 serving"
    assert status_text(
        {"status": "failed", "reason": "markdown: scanned", "serving_version": None,
         "next_version": None}
    ) == "failed (markdown: scanned)"
    assert status_text(
        {"status": "pending", "reason": "", "serving_version": None, "next_version": None}
    ) == "pending"
