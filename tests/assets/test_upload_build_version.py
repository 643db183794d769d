"""The upload page's build card names the version it builds (a new-user trial found a build of
version 2 shown only by the document's name): ``builds.run_version`` (the ``markdown`` step's
``document_version``, else the newest version added by the run's creation), the JSON of
``GET /api/builds``, and the card in Chromium after version 2 is uploaded and built."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from playwright.sync_api import expect

from kb_assets.upload.builds import run_version
from kb_assets.upload.service import UploadService
from kb_shared.stores.catalog import DocumentVersionRow
from tests.assets.test_upload_page import (  # noqa: F401 - the fixtures
    EXISTING,
    EXISTING_ID,
    Corpus,
    kb,
    served,
)
from tests.assets.test_upload_build_card import POLL_MS
from tests.browser import browser_page, chromium, run_timers_until  # noqa: F401 - fixtures
from tests.fakes import tiny_pdf

T0 = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)


def version(number: int, minutes: int) -> DocumentVersionRow:
    return DocumentVersionRow(
        doc_id="rules.pdf", version=number, name="Rules.pdf", sha256=f"{number:064x}",
        size_bytes=10, blob_key=f"pdfs/rules.pdf@v{number}", label=None, status="serving",
        failure_reason=None, added_at=T0 + dt.timedelta(minutes=minutes), superseded_at=None,
    )


def test_a_run_builds_the_version_it_converted_else_the_newest_one_added_before_it() -> None:
    versions = [version(1, 0), version(2, 30)]

    def at(minutes: int) -> str:
        return (T0 + dt.timedelta(minutes=minutes)).isoformat()

    assert run_version({"version": None, "created": at(10)}, versions) == 1
    assert run_version({"version": None, "created": at(30)}, versions) == 2
    assert run_version({"version": None, "created": at(45)}, versions) == 2
    assert run_version({"version": 1, "created": at(45)}, versions) == 1  # what it converted
    assert run_version({"version": None, "created": None}, versions) == 2
    assert run_version({"version": None, "created": at(45)}, []) is None  # deleted since


def wait_for_run(page: Any, doc: str, status: str, version: int) -> Any:
    card = page.locator(
        f'.build[data-doc="{doc}"][data-run-status="{status}"][data-version="{version}"]'
    )
    run_timers_until(page, card, POLL_MS, timeout_ms=60_000)
    card.wait_for(timeout=60_000)
    return card


def test_the_card_names_the_version_a_build_makes(
    kb: Corpus, served: tuple[str, UploadService], browser_page: Any, tmp_path: Path,  # noqa: F811
) -> None:
    base, service = served
    page = browser_page
    page.clock.install()  # wait_for_run moves the page's polls on
    page.goto(base + "/")
    waiting = page.locator(f'.build[data-doc="{EXISTING_ID}"]')
    waiting.wait_for()
    assert waiting.locator('[data-role="version"]').inner_text() == "v1"  # what a build makes
    waiting.locator("button.build-now").click()
    first = wait_for_run(page, EXISTING_ID, "success", 1)
    assert first.locator(".doc-name").inner_text() == EXISTING

    revised = tmp_path / "revised" / "existing rules.pdf"
    revised.parent.mkdir()
    revised.write_bytes(tiny_pdf("existing, revised"))
    page.set_input_files("#picker", [str(revised)])
    page.locator('.upload button.new-version').click()
    second = wait_for_run(page, EXISTING_ID, "success", 2)
    title = second.locator("h3")
    name = kb.stores.catalog().get(EXISTING_ID).name  # the document's name now (v2's file's)
    assert title.locator(".doc-name").inner_text() == name == "existing rules.pdf"
    assert title.locator('[data-role="version"]').inner_text() == "v2"
    assert second.locator("p.earlier").inner_text().endswith("(v1, success)")
    # the page's own task list names the versions too
    # (a locator assertion: the page's CSP refuses wait_for_function's string predicate)
    expect(page.locator("#tasks")).to_contain_text("build existing rules.pdf v2")
    assert f"build {EXISTING} v1" in page.locator("#tasks").inner_text()
    page.screenshot(path=str(tmp_path / "build-v2.png"), full_page=True)

    (build,) = [b for b in service.builds() if b["doc_id"] == EXISTING_ID]
    assert (build["name"], build["version"]) == (name, 2)
    assert [run["version"] for run in build["runs"]] == [2, 1]
    assert page.kb_errors == []
