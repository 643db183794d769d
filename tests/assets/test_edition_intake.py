"""Adding a document as the next edition of another (issue 27, "Editions"), through the one
admission function ``intake.admit``: ``kb add NEW --edition-of OLD`` (typer's runner), the
``add_documents`` Launchpad job's ``edition_of``, and the upload page's "Next edition of"
choice (Starlette's test client, and the page in Chromium). Refusals: with ``--new-version``,
an unknown previous edition, a batch of more than one document, a previous edition that
already has its next one; each says what to do and adds nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from kb_assets.cli import main as cli
from kb_assets.instance import dagster_instance
from kb_assets.intake import EDITION_OR_VERSION, IntakeStatus, admit
from kb_assets.jobs import add_documents_job
from kb_assets.resources import StoresResource
from kb_assets.upload.app import build_app
from kb_shared.settings import Settings
from tests.assets.test_upload_page import (  # noqa: F401 - the fixture
    CHANGE,
    EXISTING,
    EXISTING_ID,
    Corpus,
    kb,
    serving,
)
from tests.browser import browser_page, chromium  # noqa: F401 - fixtures
from tests.fakes import tiny_pdf

#: What every refused --edition-of with --new-version says.
BOTH = EDITION_OR_VERSION

UNKNOWN = (
    "no document 'Nothing.pdf' in the catalog to be the previous edition; add the earlier "
    "edition first, or give its file name or doc_id as `kb status` shows it"
)


def pdf(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(tiny_pdf(text))
    return folder / name


@pytest.fixture
def cli_home(tmp_path: Path) -> dict[str, str]:
    """KB_HOME (as the CLI's environment) holding ``Notice 2024.pdf``, added."""
    env = {"KB_HOME": str(tmp_path / "kb"), "COLUMNS": "200"}
    first = pdf(tmp_path / "in", "Notice 2024.pdf", "notice 2024")
    assert CliRunner().invoke(cli.app, ["add", str(first)], env=env).exit_code == 0
    return env


def catalog_rows(env: dict[str, str]) -> dict[str, str | None]:
    stores = StoresResource(home=env["KB_HOME"])
    try:
        return {r.doc_id: r.edition_of for r in stores.catalog().list_documents()}
    finally:
        stores.close()


def test_kb_add_edition_of_links_the_new_document_by_name_or_doc_id(
    cli_home: dict[str, str], tmp_path: Path
) -> None:
    runner = CliRunner()
    second = pdf(tmp_path / "in", "Notice 2025.pdf", "notice 2025")
    added = runner.invoke(
        cli.app, ["add", str(second), "--edition-of", "notice 2024"], env=cli_home
    )
    assert added.exit_code == 0, added.output
    assert "next edition of notice-2024.pdf" in added.output
    third = pdf(tmp_path / "in", "Notice 2026.pdf", "notice 2026")
    shown = runner.invoke(
        cli.app, ["add", str(third), "--edition-of", "notice-2025.pdf", "--json"], env=cli_home
    )
    assert shown.exit_code == 0, shown.output
    (outcome,) = json.loads(shown.output)
    assert (outcome["status"], outcome["doc_id"], outcome["edition_of"]) == (
        "added", "notice-2026.pdf", "notice-2025.pdf",
    )
    assert catalog_rows(cli_home) == {
        "notice-2024.pdf": None,
        "notice-2025.pdf": "notice-2024.pdf",
        "notice-2026.pdf": "notice-2025.pdf",
    }


def test_kb_add_refuses_edition_of_with_new_version(
    cli_home: dict[str, str], tmp_path: Path
) -> None:
    second = pdf(tmp_path / "in", "Notice 2025.pdf", "notice 2025")
    refused = CliRunner().invoke(
        cli.app, ["add", str(second), "--edition-of", "Notice 2024.pdf", "--new-version"],
        env=cli_home,
    )
    assert refused.exit_code == 2
    assert " ".join(refused.output.split()) == BOTH
    assert catalog_rows(cli_home) == {"notice-2024.pdf": None}


def test_kb_add_refuses_an_unknown_previous_edition(
    cli_home: dict[str, str], tmp_path: Path
) -> None:
    second = pdf(tmp_path / "in", "Notice 2025.pdf", "notice 2025")
    refused = CliRunner().invoke(
        cli.app, ["add", str(second), "--edition-of", "Nothing.pdf"], env=cli_home
    )
    assert refused.exit_code == 2
    assert " ".join(refused.output.split()) == UNKNOWN
    assert catalog_rows(cli_home) == {"notice-2024.pdf": None}


def test_kb_add_refuses_an_edition_link_for_a_batch_of_two(
    cli_home: dict[str, str], tmp_path: Path
) -> None:
    folder = tmp_path / "two"
    pdf(folder, "A.pdf", "a")
    pdf(folder, "B.pdf", "b")
    refused = CliRunner().invoke(
        cli.app, ["add", str(folder), "--edition-of", "Notice 2024.pdf"], env=cli_home
    )
    assert refused.exit_code == 2
    assert " ".join(refused.output.split()) == (
        "an edition link names the previous edition of one document; this batch has 2: add "
        "the new edition on its own"
    )
    assert catalog_rows(cli_home) == {"notice-2024.pdf": None}


def test_a_second_next_edition_is_refused_with_the_reason(
    cli_home: dict[str, str], tmp_path: Path
) -> None:
    runner = CliRunner()
    first = pdf(tmp_path / "in", "Notice 2025.pdf", "notice 2025")
    assert runner.invoke(
        cli.app, ["add", str(first), "--edition-of", "Notice 2024.pdf"], env=cli_home
    ).exit_code == 0
    other = pdf(tmp_path / "in", "Notice 2025b.pdf", "notice 2025 again")
    refused = runner.invoke(
        cli.app, ["add", str(other), "--edition-of", "Notice 2024.pdf", "--json"], env=cli_home
    )
    assert refused.exit_code == 1
    (outcome,) = json.loads(refused.output)
    assert (outcome["status"], outcome["doc_id"], outcome["edition_of"]) == (
        "refused", None, None,
    )
    assert outcome["reason"] == (
        "'Notice 2024.pdf' already has a next edition ('notice-2025.pdf'); a series is one "
        "edition after another, so link 'notice-2025b.pdf' to the newest edition of that "
        "series instead ('notice-2025.pdf' or a later one)"
    )
    assert "notice-2025b.pdf" not in catalog_rows(cli_home)


def test_the_launchpad_job_takes_edition_of(tmp_path: Path) -> None:
    home = tmp_path / "kb"
    stores = StoresResource(home=str(home))
    instance = dagster_instance(Settings(home=home))
    first = pdf(tmp_path / "in", "Notice 2024.pdf", "notice 2024")
    assert [o.status for o in admit([first], stores, instance)] == [IntakeStatus.ADDED]
    second = pdf(tmp_path / "in", "Notice 2025.pdf", "notice 2025")

    def run(**config: Any) -> dg.ExecuteInProcessResult:
        ops = {"add_documents_op": {"config": {"paths": [str(second)], **config}}}
        return add_documents_job.execute_in_process(
            run_config={"ops": ops}, instance=instance, resources={"stores": stores},
            raise_on_error=False,
        )

    both = run(edition_of="Notice 2024.pdf", new_version=True)
    assert not both.success
    failure = next(e for e in both.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    assert failure.step_failure_data.user_failure_data.description == (
        f"edition_of refused: {BOTH}; nothing was added"
    )
    assert stores.catalog().find_by_doc_id("notice-2025.pdf") is None
    linked = run(edition_of="Notice 2024.pdf")
    assert linked.success
    assert linked.output_for_node("add_documents_op") == ["notice-2025.pdf"]
    assert stores.catalog().get("notice-2025.pdf").edition_of == "notice-2024.pdf"
    stores.close()


def test_the_upload_api_adds_a_next_edition_and_refuses_a_bad_link_before_the_transfer(
    kb: Corpus,  # noqa: F811
) -> None:
    service = kb.service()
    client = TestClient(build_app(service), base_url="http://127.0.0.1:3001")
    data = tiny_pdf("existing, next year")
    unknown = client.put("/api/files", params={"name": "Next.pdf", "edition_of": "Nothing.pdf"},
                         content=data, headers=CHANGE)
    assert (unknown.status_code, unknown.json()) == (400, {"error": UNKNOWN})
    both = client.put(
        "/api/files", params={"name": "Next.pdf", "edition_of": EXISTING, "new_version": "1"},
        content=data, headers=CHANGE,
    )
    assert (both.status_code, both.json()) == (400, {"error": BOTH})
    assert service.received == {}  # neither read a byte of the body
    added = client.put("/api/files", params={"name": "Next.pdf", "edition_of": EXISTING},
                       content=data, headers=CHANGE)
    assert added.status_code == 201
    outcome = added.json()["outcome"]
    assert (outcome["status"], outcome["doc_id"], outcome["edition_of"]) == (
        "added", "next.pdf", EXISTING_ID,
    )
    documents = client.get("/api/documents").json()["documents"]
    listed = {d["doc_id"]: d["edition_of"] for d in documents}
    assert listed == {EXISTING_ID: None, "next.pdf": EXISTING_ID}


def test_the_page_adds_a_file_as_the_next_edition_of_the_chosen_document(
    kb: Corpus, browser_page: Any, tmp_path: Path,  # noqa: F811
) -> None:
    service = kb.service()
    page = browser_page
    upload = tmp_path / "Existing Rules 2025.pdf"
    upload.write_bytes(tiny_pdf("existing, next year"))
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if r.method == "PUT" else None)
    with serving(service) as base:
        page.goto(base + "/")
        page.wait_for_selector(f'#edition-of option[value="{EXISTING_ID}"]', state="attached")
        assert page.locator("#edition-of option").all_inner_texts() == [
            "— not an edition —", EXISTING,
        ]
        page.select_option("#edition-of", EXISTING_ID)
        page.set_input_files("#picker", [str(upload)])
        row = page.locator(f'.upload[data-name="{upload.name}"]')
        page.wait_for_selector(f'.upload[data-name="{upload.name}"][data-status="added"]')
        assert row.locator(".why").inner_text() == (
            f"added as existing-rules-2025.pdf, the next edition of {EXISTING_ID}; build "
            "requested (see Builds)"
        )
        assert page.locator("#edition-of").input_value() == ""  # for that file only
        note = page.locator('#corpus tr[data-doc="existing-rules-2025.pdf"] .edition-of')
        note.wait_for()
        assert note.inner_text() == f"next edition of {EXISTING}"
    assert sent == [
        f"{base}/api/files?name=Existing%20Rules%202025.pdf&edition_of={EXISTING_ID}"
    ]
    assert kb.stores.catalog().get("existing-rules-2025.pdf").edition_of == EXISTING_ID
    assert page.kb_errors == []
