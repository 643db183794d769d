"""The upload page tells a duplicate from a name clash (``kb_assets.upload.checks``): a file
whose name the corpus holds is a name clash when its content is none of the document's
versions' (known from a size no version has, else from the SHA-256 the page computes and
sends), a duplicate when it is one of them (nothing is sent, not even as a new version). The
check's JSON, and the page in Chromium (``tests/browser.py``)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from kb_assets.intake import IntakeStatus
from kb_assets.upload.app import build_app
from kb_assets.upload.checks import check_files
from tests.assets.test_upload_page import (  # noqa: F401 - the fixture
    CHANGE,
    EXISTING,
    EXISTING_ID,
    LIMIT,
    Corpus,
    kb,
    serving,
)
from tests.browser import browser_page, chromium  # noqa: F401 - fixtures
from tests.fakes import tiny_pdf

#: What the page says of a file whose content is the document's own.
IDENTICAL = (
    f"identical content to a version of {EXISTING!r} already in the corpus; nothing new to add"
)


def stored(kb: Corpus) -> bytes:  # noqa: F811
    """``EXISTING``'s bytes as stored (two saves of one tiny PDF need not be identical)."""
    return kb.stores.blobs().get(f"pdfs/{EXISTING_ID}")


def test_the_check_tells_a_duplicate_from_a_name_clash(kb: Corpus) -> None:  # noqa: F811
    kb.stores.catalog().mark_ready(EXISTING_ID, pages=1, chunk_count=1)
    own = stored(kb)
    same, other = hashlib.sha256(own).hexdigest(), hashlib.sha256(b"other").hexdigest()
    catalog = kb.stores.catalog()
    files = [(EXISTING, len(own))] * 3 + [(EXISTING, len(own) + 1)]
    checks = [
        check_files([f], catalog, LIMIT, sha256s=[digest])[0]
        for f, digest in zip(files, [same, other, None, None], strict=True)
    ]
    assert [(c.status, c.name_clash, c.new_version_possible) for c in checks] == [
        (IntakeStatus.DUPLICATE, False, False),  # its own content: a duplicate
        (IntakeStatus.DUPLICATE, True, True),  # other content: a name clash
        (IntakeStatus.DUPLICATE, None, True),  # a version's size, no digest: cannot tell
        (IntakeStatus.DUPLICATE, True, True),  # a size no version has: other content
    ]
    assert checks[0].reason == IDENTICAL
    assert checks[1].reason.startswith(f"{EXISTING!r} is already in the corpus")
    # nothing to send as a new version either
    (again,) = check_files([(EXISTING, len(own))], catalog, LIMIT, new_version=True,
                           sha256s=[same])
    assert (again.accepted, again.status, again.reason) == (False, "duplicate", IDENTICAL)
    (new,) = check_files([(EXISTING, len(own))], catalog, LIMIT, new_version=True,
                         sha256s=[other])
    assert (new.accepted, new.doc_id) == (True, EXISTING_ID)
    # a name not in the corpus is no clash, whatever its digest
    (fresh,) = check_files([("Fresh.pdf", 10)], catalog, LIMIT, sha256s=[same])
    assert (fresh.accepted, fresh.name_clash) == (True, False)


def test_the_check_route_takes_an_optional_digest(kb: Corpus) -> None:  # noqa: F811
    client = TestClient(build_app(kb.service()), base_url="http://127.0.0.1:3001")
    own = stored(kb)
    digest = hashlib.sha256(own).hexdigest().upper()  # any case
    body = {"files": [{"name": EXISTING, "size": len(own), "sha256": digest},
                      {"name": "existing rules.PDF", "size": len(own) + 5}]}
    (same,) = client.post("/api/check", json={"files": body["files"][:1]}, headers=CHANGE).json()[
        "files"
    ]
    (clash,) = client.post("/api/check", json={"files": body["files"][1:]}, headers=CHANGE).json()[
        "files"
    ]
    assert (same["status"], same["name_clash"], same["reason"]) == ("duplicate", False, IDENTICAL)
    assert (clash["status"], clash["name_clash"]) == ("duplicate", True)
    for bad in ("abc", 42, "g" * 64):
        files = [{"name": EXISTING, "size": 10, "sha256": bad}]
        answer = client.post("/api/check", json={"files": files}, headers=CHANGE)
        assert answer.status_code == 400, bad
        assert "64 hex digits" in answer.json()["error"]


def test_the_page_labels_a_re_added_file_duplicate_and_a_changed_one_name_clash(
    kb: Corpus, browser_page: Any, tmp_path: Path,  # noqa: F811
) -> None:
    kb.stores.catalog().mark_ready(EXISTING_ID, pages=1, chunk_count=1)
    page = browser_page
    again = tmp_path / "again" / EXISTING
    again.parent.mkdir()
    again.write_bytes(stored(kb))
    changed = tmp_path / "changed" / EXISTING
    changed.parent.mkdir()
    changed.write_bytes(tiny_pdf("existing, revised"))
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if r.method == "PUT" else None)
    with serving(kb.service()) as base:
        page.goto(base + "/")
        page.set_input_files("#picker", [str(again)])
        row = page.locator(".upload").nth(0)
        row.wait_for()
        page.wait_for_selector('.upload[data-label="duplicate"]')
        assert row.get_attribute("data-status") == "duplicate"
        assert row.locator(".why").inner_text() == f"duplicate: {IDENTICAL}"
        assert row.locator("button.new-version").count() == 0  # nothing new to send

        page.set_input_files("#picker", [str(changed)])
        clash = page.locator(".upload").nth(1)
        clash.locator("button.new-version").wait_for()
        assert clash.get_attribute("data-label") == "name clash"
        assert clash.locator(".why").inner_text().startswith(
            f"name clash: {EXISTING!r} is already in the corpus (doc_id {EXISTING_ID}, ready). "
            "To add it as a new version: Upload as new version"
        )
        colours = [
            r.locator(".why").evaluate("e => getComputedStyle(e).color") for r in (row, clash)
        ]
        assert colours[0] != colours[1]  # a clash is shown as a refusal, a duplicate as a note
        page.set_viewport_size({"width": 1280, "height": 900})
        page.screenshot(path=str(tmp_path / "labels.png"))
    assert sent == []  # neither file was sent
    assert page.kb_errors == []
