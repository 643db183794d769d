"""The upload page's build card in the two states a new-user trial (2026-12-02) misread: while
version 2 of a served document builds, the card read "v2 · ready · starting" as if v2 were
ready (it now says "v2 building — v1 is served"); and after ``kb delete`` it showed the bare
``doc_id`` (it now keeps the name the document had and says it was deleted).
``builds.recent_builds`` through the service, and the card in Chromium at 1,280 px.

Runs are added to the Dagster instance as the intake sensor's would be (no daemon here), so
the card shows a build in progress without one running.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
from playwright.sync_api import expect
from starlette.testclient import TestClient

from kb_assets import operations
from kb_assets.constants import BUILD_JOB, PARTITION_TAG
from kb_assets.intake import IntakeStatus, admit
from kb_assets.upload.app import build_app
from tests.assets.test_upload_page import (  # noqa: F401 - the fixture
    CHANGE,
    EXISTING,
    EXISTING_ID,
    Corpus,
    kb,
    serving,
    upload_build_job,
)
from tests.browser import browser_page, chromium, run_timers_until  # noqa: F401 - fixtures
from tests.fakes import tiny_pdf

#: How often the page asks for the builds and tasks (``POLL_MS`` in upload.js): the step by
#: which these tests move the page's clock (``tests.browser.run_timers_until``).
POLL_MS = 2_000


def add_run(kb: Corpus, run_id: str, status: dg.DagsterRunStatus) -> None:  # noqa: F811
    """A build run of ``EXISTING`` in ``status``, as the intake sensor's run would be."""
    kb.instance.add_run(dg.DagsterRun(
        job_name=BUILD_JOB, run_id=run_id, status=status, tags={PARTITION_TAG: EXISTING_ID},
    ))


def serve_version_1(kb: Corpus) -> None:  # noqa: F811
    """``EXISTING`` as if its build had finished: version 1 serves."""
    kb.stores.catalog().mark_ready(EXISTING_ID, pages=1, chunk_count=1)


def add_version_2(kb: Corpus, tmp_path: Path) -> None:  # noqa: F811
    """Version 2 of ``EXISTING`` added (``kb add --new-version``), waiting for a build."""
    revised = tmp_path / "revised" / EXISTING
    revised.parent.mkdir()
    revised.write_bytes(tiny_pdf("existing, revised"))
    (added,) = admit([revised], kb.stores, kb.instance, new_version=True)
    assert (added.status, added.version) == (IntakeStatus.ADDED, 2)


def test_a_new_version_waiting_or_building_is_not_shown_as_ready(
    kb: Corpus, browser_page: Any, tmp_path: Path,  # noqa: F811
) -> None:
    serve_version_1(kb)
    add_version_2(kb, tmp_path)
    service = kb.service()
    (waiting,) = service.builds()
    assert (waiting["status"], waiting["version"], waiting["serving_version"]) == ("ready", 2, 1)

    page = browser_page
    page.clock.install()  # the test moves the page's polls on (run_timers_until)
    with serving(service) as base:
        page.goto(base + "/")
        card = page.locator(f'.build[data-doc="{EXISTING_ID}"]')
        card.wait_for()
        title = card.locator("h3")
        expect(title.locator('[data-role="doc-status"]')).to_have_text("pending")
        assert title.locator('[data-role="version"]').inner_text() == "v2"
        assert title.locator('[data-role="served"]').inner_text() == "— v1 is served"

        add_run(kb, "0a1b2c3d-0000-4000-8000-000000000001", dg.DagsterRunStatus.STARTING)
        building = page.locator(f'.build[data-doc="{EXISTING_ID}"][data-run-status="starting"]')
        run_timers_until(page, building, POLL_MS, timeout_ms=30_000)
        expect(building).to_have_count(1, timeout=30_000)
        title = building.locator("h3")
        assert title.locator('[data-role="version"]').inner_text() == "v2"
        assert title.locator('[data-role="doc-status"]').inner_text() == "building"
        assert title.locator('[data-role="served"]').inner_text() == "— v1 is served"
        assert title.locator('[data-role="run-status"]').inner_text() == "starting"
        assert "ready" not in title.inner_text()
        assert building.get_attribute("data-serving") == "1"
        page.screenshot(path=str(tmp_path / "building-v2.png"), full_page=True)
        assert page.evaluate("() => document.documentElement.scrollWidth") == 1280

        kb.instance.report_run_failed(kb.instance.get_run_by_id(
            "0a1b2c3d-0000-4000-8000-000000000001"
        ))
        failed = page.locator(f'.build[data-doc="{EXISTING_ID}"][data-run-status="failure"]')
        run_timers_until(page, failed, POLL_MS, timeout_ms=30_000)
        expect(failed).to_have_count(1, timeout=30_000)
        assert failed.locator('[data-role="doc-status"]').inner_text() == "failed"
        assert failed.locator('[data-role="served"]').inner_text() == "— v1 is served"
    assert page.kb_errors == []


def test_a_deleted_document_keeps_its_name_on_its_card(
    kb: Corpus, browser_page: Any, tmp_path: Path,  # noqa: F811
) -> None:
    add_run(kb, "0a1b2c3d-0000-4000-8000-000000000002", dg.DagsterRunStatus.SUCCESS)
    service = kb.service()
    page = browser_page
    page.clock.install()  # the test moves the page's polls on (run_timers_until)
    with serving(service) as base:
        page.goto(base + "/")
        card = page.locator(f'.build[data-doc="{EXISTING_ID}"]')
        expect(card.locator(".doc-name")).to_have_text(EXISTING)
        operations.delete_document(kb.stores, kb.instance, EXISTING_ID)  # as `kb delete` does
        gone = page.locator(f'.build[data-doc="{EXISTING_ID}"][data-status="deleted"]')
        run_timers_until(page, gone, POLL_MS, timeout_ms=30_000)
        expect(gone).to_have_count(1, timeout=30_000)
        assert gone.locator(".doc-name").inner_text() == EXISTING
        assert gone.locator('[data-role="doc-status"]').inner_text() == "deleted"
        assert gone.locator("p.deleted").inner_text() == (
            f"{EXISTING} was deleted from the corpus; its runs stay in the Dagster UI"
        )
        assert gone.locator("button").count() == 0  # nothing left to build or retry
        page.screenshot(path=str(tmp_path / "deleted.png"), full_page=True)
    (build,) = service.builds()
    assert (build["doc_id"], build["name"], build["status"]) == (EXISTING_ID, EXISTING, "deleted")
    assert page.kb_errors == []


def test_a_delete_from_the_page_names_the_document_in_a_fresh_listing(kb: Corpus) -> None:  # noqa: F811
    add_run(kb, "0a1b2c3d-0000-4000-8000-000000000003", dg.DagsterRunStatus.FAILURE)
    service = kb.service()
    assert service.delete(EXISTING_ID).name == EXISTING  # no listing before it
    (build,) = service.builds()
    assert (build["name"], build["status"], build["serving_version"]) == (
        EXISTING, "deleted", None,
    )
    # a server that never saw the document lists the run under its doc_id
    (unknown,) = kb.service().builds()
    assert (unknown["name"], unknown["status"]) == (EXISTING_ID, "deleted")


def test_build_now_builds_a_new_version_waiting_beside_the_served_one(
    kb: Corpus, tmp_path: Path,  # noqa: F811
) -> None:
    serve_version_1(kb)
    service = kb.service(job=upload_build_job)
    client = TestClient(build_app(service), base_url="http://127.0.0.1:3001")
    path = f"/api/documents/{EXISTING_ID}/build"
    refused = client.post(path, headers=CHANGE)
    assert (refused.status_code, refused.json()["error"]) == (
        400, f"{EXISTING} is ready, not waiting for a build: retry its failed run or rebuild one "
        "of its assets",
    )
    add_version_2(kb, tmp_path)
    queued = client.post(path, headers=CHANGE)  # the card's "Build now" (no sensor running)
    assert queued.status_code == 202, queued.json()
    service.worker.close(timeout=60)
    assert [t["label"] for t in service.tasks()] == [f"build {EXISTING} v2"]
    assert [(v.version, v.status) for v in kb.stores.catalog().versions(EXISTING_ID)] == [
        (1, "superseded"), (2, "serving"),
    ]
