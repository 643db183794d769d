"""``kb obligations``: the register of the served documents as a table and as CSV (one row per
obligation with the PDF link the MCP server gives), counted like search_obligations, and the
refusal of an unknown document with exit status 2."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from typer.testing import CliRunner

from kb_assets.cli import main as cli
from kb_assets.cli.obligations import CSV_COLUMNS
from kb_shared.stores import factory
from tests.mcp.corpus import DISPATCH_ID, RETAIL_ID, HashingEmbedder, corpus_settings, write_corpus
from tests.mcp.test_search_obligations import DISPATCH_REGISTER, RETAIL_REGISTER

LINK = "http://127.0.0.1:8765/files/pdfs/retail-rules.pdf#page=2"


def _home(tmp_path: Path) -> dict[str, str]:
    settings = corpus_settings(tmp_path)
    write_corpus(settings, HashingEmbedder(256), graph=False)
    catalog = factory.open_catalog(settings)
    try:
        catalog.replace_obligations(RETAIL_ID, 1, RETAIL_ID, RETAIL_REGISTER)
        catalog.replace_obligations(DISPATCH_ID, 1, DISPATCH_ID, DISPATCH_REGISTER)
        catalog.replace_obligations(RETAIL_ID, 2, f"{RETAIL_ID}@v2", RETAIL_REGISTER)  # unserved
    finally:
        catalog.close()
    return {"KB_HOME": str(tmp_path), "COLUMNS": "200"}


def test_the_register_as_csv_has_every_obligation_of_the_party_with_its_link(
    tmp_path: Path,
) -> None:
    env = _home(tmp_path)
    result = CliRunner().invoke(
        cli.app, ["obligations", "--party", "retailer", "--csv", "-"], env=env
    )
    assert result.exit_code == 0, result.output
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert len(rows) == 4  # header + the 3 Retailer obligations of the served version
    first = dict(zip(CSV_COLUMNS, rows[1], strict=True))
    assert first == {
        "number": "1", "document": "Retail Rules.pdf", "doc_id": RETAIL_ID, "version": "1",
        "page": "2", "reference": "4.2", "section": "4 Obligations › 4.2 Notices",
        "party": "The Retailer", "role": "Retailer", "modality": "must",
        "text": "The Retailer must notify the Distributor within 5 business days.",
        "action": "notify the Distributor within 5 business days.",
        "deadline": "within 5 business days", "chunk_id": "c-0", "pdf_link": LINK,
    }
    assert [r[9] for r in rows[1:]] == ["must", "must not", "should"]


def test_the_table_lists_the_whole_register_and_a_file_is_written(tmp_path: Path) -> None:
    env = _home(tmp_path)
    runner = CliRunner()
    table = runner.invoke(cli.app, ["obligations"], env=env)
    assert table.exit_code == 0, table.output
    assert "6 obligations" in table.stdout
    assert "Bids must be submitted by 12:30 pm." in table.stdout
    out = tmp_path / "register.csv"
    written = runner.invoke(
        cli.app, ["obligations", "--document", "dispatch-procedure.pdf", "--csv", str(out)], env=env
    )
    assert written.exit_code == 0, written.output
    assert "2 obligations written to" in written.stderr
    assert [r[2] for r in csv.reader(out.open(encoding="utf-8"))][1:] == [DISPATCH_ID] * 2


def test_an_unknown_document_exits_2_with_the_reason(tmp_path: Path) -> None:
    env = _home(tmp_path)
    result = CliRunner().invoke(cli.app, ["obligations", "--document", "nope.pdf"], env=env)
    assert result.exit_code == 2
    assert "unknown document 'nope.pdf'" in result.stderr
