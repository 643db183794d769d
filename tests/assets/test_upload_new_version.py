"""The upload page's new-version route (issue 16, "leftovers"): a file whose name is already in
the corpus is offered as that document's next version ("Upload as new version"), sent with
``PUT /api/files?new_version=1`` and admitted by ``intake.admit(new_version=True)`` as ``kb add
--new-version`` does; the page then says "version 2 of …; build requested". The HTTP API
through Starlette's test client, and the button clicked in Chromium (``tests/browser.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
from starlette.testclient import TestClient

from kb_assets.sensors import intake_sensor
from kb_assets.upload.app import build_app
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

#: What the page says of a name already in the corpus whose document is built.
READY_DUPLICATE = (
    f"{EXISTING!r} is already in the corpus (doc_id {EXISTING_ID}, ready). To add it as a new "
    "version: Upload as new version; to replace it entirely: delete it first"
)


def built(kb: Corpus) -> None:  # noqa: F811
    """``EXISTING`` as if its build had finished: version 1 serves."""
    kb.stores.catalog().mark_ready(EXISTING_ID, pages=1, chunk_count=1)


def test_a_known_name_is_offered_and_added_as_the_next_version(kb: Corpus) -> None:  # noqa: F811
    built(kb)
    service = kb.service()
    client = TestClient(build_app(service), base_url="http://127.0.0.1:3001")
    files = [{"name": " existing RULES.pdf", "size": 900}]

    (plain,) = client.post("/api/check", json={"files": files}, headers=CHANGE).json()["files"]
    assert (plain["accepted"], plain["status"], plain["doc_id"], plain["reason"]) == (
        False, "duplicate", EXISTING_ID, READY_DUPLICATE,
    )
    assert plain["new_version_possible"] is True
    (asked,) = client.post(
        "/api/check", json={"files": files, "new_version": True}, headers=CHANGE
    ).json()["files"]
    assert (asked["accepted"], asked["status"], asked["doc_id"], asked["reason"]) == (
        True, None, EXISTING_ID, "",
    )

    data = tiny_pdf("existing, revised")
    refused = client.put("/api/files", params={"name": "existing rules.pdf"}, content=data,
                         headers=CHANGE)
    assert refused.status_code == 409
    assert refused.json()["file"]["reason"] == READY_DUPLICATE
    assert service.received == {}
    added = client.put("/api/files", params={"name": "existing rules.pdf", "new_version": "1"},
                       content=data, headers=CHANGE)
    assert added.status_code == 201
    outcome = added.json()["outcome"]
    assert (outcome["status"], outcome["doc_id"], outcome["version"], outcome["path"]) == (
        "added", EXISTING_ID, 2, "existing rules.pdf",
    )
    assert service.received == {"existing rules.pdf": len(data)}
    versions = kb.stores.catalog().versions(EXISTING_ID)
    # the file the fixture admitted: a new tiny_pdf("existing") can be a byte longer or
    # shorter (MuPDF writes a new trailer /ID on every save, not always of one length)
    admitted = (kb.home.parent / "in" / EXISTING).stat().st_size
    assert [(v.version, v.status, v.size_bytes) for v in versions] == [
        (1, "serving", admitted), (2, "pending", len(data)),
    ]
    # the intake sensor requests its build, as for `kb add --new-version`
    with dg.build_sensor_context(instance=kb.instance, resources={"stores": kb.stores}) as context:
        requests = intake_sensor(context).run_requests
    assert [r.partition_key for r in requests] == [EXISTING_ID]

    # another version before this one is built: refused before the transfer, with the reason
    again = client.put("/api/files", params={"name": EXISTING, "new_version": "1"},
                       content=tiny_pdf("third"), headers=CHANGE)
    assert again.status_code == 409
    assert again.json()["file"]["reason"] == (
        f"{EXISTING!r} is already in the corpus (doc_id {EXISTING_ID}, ready). Version 2 is "
        "waiting to be built; once it is, this file can be uploaded as a new version. To "
        "replace it entirely: delete it first"
    )
    assert again.json()["file"]["new_version_possible"] is False
    assert len(kb.stores.catalog().versions(EXISTING_ID)) == 2


def test_the_flag_on_a_new_name_adds_a_new_document_and_a_bad_flag_is_refused(
    kb: Corpus,  # noqa: F811
) -> None:
    service = kb.service()
    client = TestClient(build_app(service), base_url="http://127.0.0.1:3001")
    data = tiny_pdf("brand new")  # once: two pymupdf saves are not always byte-identical
    fresh = client.put("/api/files", params={"name": "Brand New.pdf", "new_version": "1"},
                       content=data, headers=CHANGE)
    assert fresh.status_code == 201
    outcome = fresh.json()["outcome"]
    assert (outcome["status"], outcome["doc_id"], outcome["version"]) == (
        "added", "brand-new.pdf", 1,
    )
    bad = client.put("/api/files", params={"name": "Other.pdf", "new_version": "maybe"},
                     content=tiny_pdf("other"), headers=CHANGE)
    assert (bad.status_code, bad.json()) == (
        400, {"error": "new_version must be 1 or 0, not 'maybe'"}
    )
    wrong = client.post("/api/check", json={"files": [], "new_version": "yes"}, headers=CHANGE)
    assert wrong.status_code == 400
    assert service.received == {"Brand New.pdf": len(data)}


def test_the_page_offers_upload_as_new_version_and_shows_the_result(
    kb: Corpus, browser_page: Any, tmp_path: Path,  # noqa: F811
) -> None:
    built(kb)
    service = kb.service()
    page = browser_page
    revised = tmp_path / "existing rules.pdf"
    revised.write_bytes(tiny_pdf("existing, revised"))
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if r.method == "PUT" else None)
    with serving(service) as base:
        page.goto(base + "/")
        page.set_input_files("#picker", [str(revised)])
        row = page.locator('.upload[data-name="existing rules.pdf"]')
        row.locator("button.new-version").wait_for()
        assert row.get_attribute("data-status") == "duplicate"
        assert row.locator(".why").inner_text() == f"name clash: {READY_DUPLICATE}"
        assert sent == []  # nothing is sent until asked
        page.screenshot(path=str(tmp_path / "offered.png"))
        row.locator("button.new-version").click()
        page.wait_for_selector('.upload[data-name="existing rules.pdf"][data-status="added"]')
        assert row.locator(".why").inner_text() == (
            "version 2 of existing rules.pdf; build requested (see Builds)"
        )
        assert row.locator("button.new-version").count() == 0
        assert row.locator("progress").get_attribute("data-percent") == "100"
        page.screenshot(path=str(tmp_path / "added.png"))
    assert sent == [f"{base}/api/files?name=existing%20rules.pdf&new_version=1"]
    assert [(v.version, v.status) for v in kb.stores.catalog().versions(EXISTING_ID)] == [
        (1, "serving"), (2, "pending"),
    ]
    assert page.kb_errors == []
