"""Hostile JSON at the upload page's API (the 2026-12-07 audit): a file size that is negative
or a JSON ``true`` is no size, and an approval's ``url`` or ``name`` that is not text is
refused with the shape to send (400) before anything is queued; the request stays pending.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
from starlette.testclient import TestClient

from kb_assets.upload.app import CHANGE_HEADER, build_app
from kb_assets.upload.service import UploadService
from kb_shared.settings import Settings
from kb_shared.stores.catalog import Catalog

CHANGE = {CHANGE_HEADER: "1"}
CHECK_SHAPE = (
    'send {"files": [{"name": "<file name>", "size": <bytes>, "sha256": "<optional: 64 hex '
    'digits>"}, …]} and optionally "new_version": true'
)
APPROVE_SHAPE = 'send {} or {"url": "https://…", "name": "<document name>"}'


@pytest.fixture
def page(tmp_path: Path) -> Iterator[tuple[TestClient, UploadService]]:
    """The upload page's app on an empty KB_HOME, and its service."""
    with dg.DagsterInstance.ephemeral() as instance:
        service = UploadService(Settings(home=tmp_path / "kb"), instance)
        with TestClient(build_app(service), base_url="http://127.0.0.1:3001") as client:
            yield client, service


@pytest.mark.parametrize("size", [-5, True, 1.5, "10"])
def test_a_size_that_is_no_size_is_refused_by_the_check(
    page: tuple[TestClient, UploadService], size: object
) -> None:
    client, _ = page
    answer = client.post(
        "/api/check", json={"files": [{"name": "rules.pdf", "size": size}]}, headers=CHANGE
    )
    assert (answer.status_code, answer.json()) == (400, {"error": CHECK_SHAPE})


def test_a_size_of_zero_is_checked_as_an_empty_file(page: tuple[TestClient, UploadService]) -> None:
    client, _ = page
    answer = client.post(
        "/api/check", json={"files": [{"name": "rules.pdf", "size": 0}]}, headers=CHANGE
    )
    assert answer.status_code == 200
    (verdict,) = answer.json()["files"]
    assert (verdict["accepted"], verdict["reason"]) == (False, "the file is empty")


@pytest.mark.parametrize(
    "body", [{"url": 5}, {"name": ["rules.pdf"]}, {"url": {"href": "https://example.org/a.pdf"}}]
)
def test_an_approval_whose_url_or_name_is_not_text_is_refused_and_nothing_queued(
    page: tuple[TestClient, UploadService], body: dict
) -> None:
    client, service = page
    with service.stores() as stores:
        catalog: Catalog = stores.catalog()
        request = catalog.add_document_request("Gas Code", "for the audit")
    answer = client.post(f"/api/requests/{request.id}/approve", json=body, headers=CHANGE)
    assert (answer.status_code, answer.json()) == (400, {"error": APPROVE_SHAPE})
    assert service.tasks() == []
    with service.stores() as stores:
        (row,) = stores.catalog().list_document_requests()
    assert (row.id, row.status) == (request.id, "pending")
