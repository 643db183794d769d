"""The upload page (``kb_assets.upload``): the check before transfer, the access rules, the
upload route and the builds read from the Dagster instance through the app's JSON API, and the
page itself in a real headless Chromium (``tests/browser.py``): a duplicate name refused before
any byte is sent, a PDF sent with its progress bar reaching 100% and its six steps going green,
a scanned PDF showing why it failed, and a reload that keeps the list.

Builds run in-process on fake providers (``tests/assets/fake_providers.py``) whose converter
applies the real text-layer check (``kb_shared.ingest.pdf``), so the scanned PDF of the shared corpus
fails with the reason the real converter gives, in milliseconds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from playwright.sync_api import expect
from starlette.testclient import TestClient
from typer.testing import CliRunner

from benchmarks.mcp_server import free_port, serving_in_thread
from kb_assets import serve
from kb_assets.cli import main as cli
from kb_assets.assets import CORPUS_ASSETS
from kb_assets.constants import BUILD_JOB, DOCUMENTS
from kb_assets.jobs import kb_resources
from kb_assets.instance import dagster_instance
from kb_assets.intake import IntakeStatus, admit
from kb_assets.jobs import build_documents_job
from kb_assets.resources import StoresResource
from kb_assets.sensors import intake_sensor
from kb_assets.upload.app import CHANGE_HEADER, build_app
from kb_assets.upload.checks import check_files
from kb_assets.upload.service import UploadService
from kb_shared.errors import ExposureError
from kb_shared.ingest.pdf import check_text_layer, open_pdf, unmapped_characters
from kb_shared.providers.base import ConvertedDocument
from kb_shared.settings import Settings
from tests.assets.fake_providers import FakeProviders
from tests.browser import browser_page, chromium  # noqa: F401 - fixtures
from tests.fakes import SAMPLE_TITLE, SAMPLE_VERSION, FakeConverter, FlakyEmbedder, tiny_pdf

EXISTING = "Existing Rules.pdf"
EXISTING_ID = "existing-rules.pdf"
CHANGE = {CHANGE_HEADER: "1"}
SCANNED = "scanned_ocrmypdf_multipage.pdf"
SCANNED_REASON = (
    f"{SCANNED}: no text layer on any of 6 pages; OCR is not enabled. It looks scanned: run OCR "
    "on it (e.g. `ocrmypdf in.pdf out.pdf`) and add the result"
)


@dataclass
class TextLayerConverter(FakeConverter):
    """``FakeConverter`` after the real converter's refusal of a PDF without a readable text
    layer (``kb_shared.ingest.pdf``, milliseconds: it runs before any layout work)."""

    def convert(self, pdf: bytes, filename: str) -> ConvertedDocument:
        document = open_pdf(pdf, filename)
        try:
            check_text_layer(unmapped_characters(document), filename)
        finally:
            document.close()
        return super().convert(pdf, filename)


#: What ``upload_build_job`` runs on (a re-executable job is rebuilt from a module-level
#: function, ``dagster.reconstructable``).
FAKE_JOB: dict[str, Any] = {}


def upload_build_job() -> dg.JobDefinition:
    """The build job on ``FAKE_JOB``'s stores and providers."""
    defs = dg.Definitions(
        assets=CORPUS_ASSETS,
        jobs=[build_documents_job],
        resources=kb_resources(FAKE_JOB["stores"], FAKE_JOB["providers"]),
        executor=dg.in_process_executor,
    )
    return defs.resolve_job_def(BUILD_JOB)


@dataclass
class Corpus:
    """A KB_HOME with ``EXISTING`` admitted (pending), its instance and stores."""

    home: Path
    settings: Settings
    instance: dg.DagsterInstance
    stores: StoresResource

    def service(self, **fields: Any) -> UploadService:
        return UploadService(self.settings, self.instance, **fields)


#: The upload limit of these tests (the scanned corpus PDF is 1.1 MB).
LIMIT = 5_000_000


@pytest.fixture
def kb(tmp_path: Path) -> Iterator[Corpus]:
    home = tmp_path / "kb"
    settings = Settings(home=home, max_upload_bytes=LIMIT)
    instance = dagster_instance(settings)
    stores = StoresResource(home=str(home), overrides={"max_upload_bytes": str(LIMIT)})
    given = tmp_path / "in" / EXISTING
    given.parent.mkdir()
    given.write_bytes(tiny_pdf("existing"))
    assert [o.status for o in admit([given], stores, instance)] == [IntakeStatus.ADDED]
    FAKE_JOB.update(stores=stores, providers=FakeProviders(converter_=TextLayerConverter()))
    yield Corpus(home, settings, instance, stores)
    stores.close()


# --- the check before transfer ------------------------------------------------------------
def test_names_and_sizes_are_checked_with_the_intake_rules(kb: Corpus) -> None:
    checks = check_files(
        [
            ("New Guide.pdf", 1000),
            (" existing RULES.pdf", 1000),
            ("new guide.PDF", 1000),
            ("Notes.docx", 1000),
            ("Empty.pdf", 0),
            ("Huge.pdf", 200_001),
            ("existing-rules.pdf", 1000),
            ("../up.pdf", 10),
            ("nul\x00name.pdf", 10),
            ("x" * 300 + ".pdf", 10),
            ("....", 10),
            ("Readme.md", 10),
        ],
        kb.stores.catalog(),
        200_000,
    )
    assert [(c.accepted, c.status, c.doc_id, c.reason) for c in checks] == [
        (True, None, "new-guide.pdf", ""),
        (
            False, IntakeStatus.DUPLICATE, EXISTING_ID,
            f"{EXISTING!r} is already in the corpus (doc_id {EXISTING_ID}, pending). Version 1 "
            "is waiting to be built; once it is, this file can be uploaded as a new version. To "
            "replace it entirely: delete it first",
        ),
        (
            False, IntakeStatus.DUPLICATE, "new-guide.pdf",
            "same name as 'New Guide.pdf' earlier in this batch",
        ),
        (False, IntakeStatus.REFUSED, None, "not a document kb reads (.pdf, .md, .txt)"),
        (False, IntakeStatus.REFUSED, None, "the file is empty"),
        (
            False, IntakeStatus.REFUSED, None,
            "200,001 bytes is over the 200,000-byte limit (KB_MAX_UPLOAD_BYTES)",
        ),
        (
            False, IntakeStatus.REFUSED, None,
            f"its id {EXISTING_ID!r} is the same as 'existing RULES.pdf' earlier in this batch; "
            "rename one of them",
        ),
        (False, IntakeStatus.REFUSED, None, "'../up.pdf' is not a file name"),
        (False, IntakeStatus.REFUSED, None, "'nul\\x00name.pdf' holds a control character (U+0000)"),
        (
            False, IntakeStatus.REFUSED, None,
            "the name is 304 bytes long in UTF-8, over the 255 a file name may have",
        ),
        (False, IntakeStatus.REFUSED, None, "'....' is not a file name"),
        (True, None, "readme.md", ""),
    ]
    (alone,) = check_files([("existing-rules.pdf", 10)], kb.stores.catalog(), 200_000)
    assert (alone.accepted, alone.reason) == (
        False, f"its id {EXISTING_ID!r} is taken by {EXISTING!r}; rename the file",
    )


# --- access -------------------------------------------------------------------------------
def test_a_non_loopback_bind_needs_tokens_or_the_public_flag(kb: Corpus) -> None:
    with pytest.raises(ExposureError, match="pass --upload-public to serve it openly"):
        build_app(kb.service(), host="0.0.0.0")
    build_app(kb.service(), host="0.0.0.0", public=True)
    tokened = UploadService(Settings(home=kb.home, mcp_tokens="s3cret"), kb.instance)
    build_app(tokened, host="10.0.0.5")


def test_tokens_host_and_the_change_header_guard_the_api(kb: Corpus) -> None:
    service = UploadService(Settings(home=kb.home, mcp_tokens="s3cret"), kb.instance)
    client = TestClient(build_app(service), base_url="http://127.0.0.1:3001")
    assert client.get("/").status_code == 200  # the page itself holds no data
    assert client.get("/api/documents").status_code == 401
    bearer = {"Authorization": "Bearer s3cret"}
    assert client.get("/api/documents", headers=bearer).status_code == 200
    wrong = {"Authorization": "Bearer wrong"}
    assert client.get("/api/documents", headers=wrong).status_code == 401
    body = {"files": [{"name": "a.pdf", "size": 10}]}
    assert client.post("/api/check", json=body, headers=bearer).status_code == 403
    assert client.post("/api/check", json=body, headers=bearer | CHANGE).status_code == 200
    evil = {"Host": "evil.example:3001"} | bearer
    assert client.get("/api/documents", headers=evil).status_code == 421
    assert client.get("/", headers={"Host": "evil.example"}).status_code == 421


def test_kb_ui_refuses_a_public_upload_page_without_tokens_before_starting_anything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    started: list[object] = []
    monkeypatch.setattr(serve, "serve", lambda commands: started.append(commands) or (0, ""))
    result = CliRunner().invoke(cli.app, ["ui", "--upload-host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "upload page: refusing to serve on '0.0.0.0' without authentication" in result.output
    assert started == []


# --- the request queue --------------------------------------------------------------------
def test_requests_are_listed_and_rejected_with_a_reason(kb: Corpus) -> None:
    client = TestClient(build_app(kb.service()), base_url="http://127.0.0.1:3001")
    row = kb.stores.catalog().add_document_request(
        "B2B Procedure v3.2", "cited by the retailer guide", "https://example.org/b2b.pdf"
    )
    (listed,) = client.get("/api/requests").json()["requests"]
    assert (listed["id"], listed["title"], listed["status"], listed["source_url"]) == (
        row.id, "B2B Procedure v3.2", "pending", "https://example.org/b2b.pdf",
    )
    path = f"/api/requests/{row.id}"
    empty = client.post(f"{path}/reject", json={"reason": "  "}, headers=CHANGE)
    assert (empty.status_code, empty.json()) == (400, {"error": "a rejection needs a reason"})
    rejected = client.post(f"{path}/reject", json={"reason": "superseded"}, headers=CHANGE)
    assert rejected.json()["request"]["status"] == "rejected"
    assert client.get("/api/requests").json()["requests"] == []
    missing = client.post("/api/requests/999/approve", json={}, headers=CHANGE)
    assert missing.status_code == 404
    assert missing.json()["error"].startswith("no document request #999")


# --- the upload route ---------------------------------------------------------------------
def test_an_upload_is_admitted_and_left_for_the_intake_sensor_to_build(kb: Corpus) -> None:
    service = kb.service()
    client = TestClient(build_app(service), base_url="http://127.0.0.1:3001")
    refused = client.put(
        "/api/files", params={"name": "EXISTING rules.pdf"}, content=tiny_pdf("x"), headers=CHANGE
    )
    assert refused.status_code == 409
    assert refused.json()["file"]["status"] == "duplicate"
    assert service.received == {}  # refused before its body was read
    data = tiny_pdf("new")
    added = client.put("/api/files", params={"name": "New Guide.pdf"}, content=data, headers=CHANGE)
    assert added.status_code == 201
    outcome = added.json()["outcome"]
    assert (outcome["status"], outcome["doc_id"], outcome["path"]) == (
        "added", "new-guide.pdf", "New Guide.pdf",
    )
    assert service.received == {"New Guide.pdf": len(data)}
    assert kb.stores.catalog().get("new-guide.pdf").status == "pending"
    assert kb.instance.has_dynamic_partition(DOCUMENTS, "new-guide.pdf")
    # the build is requested the way every added document's is: by the intake sensor
    with dg.build_sensor_context(instance=kb.instance, resources={"stores": kb.stores}) as context:
        result = intake_sensor(context)
    assert sorted(r.partition_key for r in result.run_requests) == [EXISTING_ID, "new-guide.pdf"]
    builds = client.get("/api/builds").json()["builds"]
    assert {(b["doc_id"], b["status"], len(b["runs"])) for b in builds} == {
        (EXISTING_ID, "pending", 0), ("new-guide.pdf", "pending", 0),
    }
    same = client.put("/api/files", params={"name": "Copy.pdf"}, content=data, headers=CHANGE)
    assert same.status_code == 422  # the content check needs the bytes: after the transfer
    assert same.json()["outcome"]["reason"] == (
        "identical content is already in the corpus as 'New Guide.pdf'"
    )


def wait_for(condition: Callable[[], bool], seconds: float = 60) -> None:
    """Poll ``condition`` (a background run finishing) until true or fail."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail("timed out waiting for the background work")
        time.sleep(0.1)


@pytest.mark.slow
def test_builds_list_each_step_and_a_retry_resumes_from_the_failed_one(kb: Corpus) -> None:
    service = kb.service(job=upload_build_job, build_uploads=True)
    client = TestClient(build_app(service), base_url="http://127.0.0.1:3001")
    FAKE_JOB["providers"].converter_.refuse[EXISTING] = "Existing Rules.pdf: damaged (simulated)"
    assert client.post(f"/api/documents/{EXISTING_ID}/build", headers=CHANGE).status_code == 202
    wait_for(service.worker.idle)
    again = client.post(f"/api/documents/{EXISTING_ID}/build", headers=CHANGE)
    assert (again.status_code, again.json()["error"]) == (
        400, f"{EXISTING} is failed, not waiting for a build: retry its failed run or rebuild "
        "one of its assets",
    )
    (build,) = client.get("/api/builds").json()["builds"]
    (run,) = build["runs"]
    assert (build["status"], build["reason"]) == (
        "failed", "markdown: Existing Rules.pdf: damaged (simulated)",
    )
    assert run["status"] == "failure"
    assert run["url"] == f"http://127.0.0.1:3000/runs/{run['run_id']}"
    assert [(s["asset"], s["state"], s["attempts"]) for s in run["steps"]] == [
        ("markdown", "failed", 1), ("chunks", "not run", 0), ("obligations", "not run", 0),
        ("changes", "not run", 0), ("embeddings", "not run", 0), ("graph", "not run", 0),
        ("figures", "not run", 0), ("record", "not run", 0),
    ]
    assert run["steps"][0]["reason"] == "Existing Rules.pdf: damaged (simulated)"
    # the converter refused the file (a dagster.Failure): the page offers no retry for it
    assert [s["refused"] for s in run["steps"]] == [True] + [False] * 7
    rebuild = client.post(f"/api/documents/{EXISTING_ID}/rebuild/graph", headers=CHANGE)
    assert rebuild.status_code == 400
    assert "markdown, chunks, embeddings, figures have none yet" in rebuild.json()["error"]

    FAKE_JOB["providers"].converter_.refuse.clear()
    assert client.post(f"/api/runs/{run['run_id']}/retry", headers=CHANGE).status_code == 202
    wait_for(service.worker.idle)
    (build,) = client.get("/api/builds").json()["builds"]
    retried, first = build["runs"]
    assert (build["status"], retried["status"], retried["parent_run_id"]) == (
        "ready", "success", run["run_id"],
    )
    assert {s["state"] for s in retried["steps"]} == {"succeeded"}
    assert not any(s["refused"] for s in retried["steps"])
    assert first["run_id"] == run["run_id"]
    again = client.post(f"/api/runs/{retried['run_id']}/retry", headers=CHANGE)
    assert (again.status_code, again.json()["error"]) == (
        400, f"run {retried['run_id']} did not fail (success); nothing to retry",
    )

    graph = client.post(f"/api/documents/{EXISTING_ID}/rebuild/graph", headers=CHANGE)
    assert graph.status_code == 202
    wait_for(service.worker.idle)
    latest = client.get("/api/builds").json()["builds"][0]["runs"][0]
    assert latest["rebuild"] is True
    assert [(s["asset"], s["state"]) for s in latest["steps"]] == [
        ("markdown", "not selected"), ("chunks", "not selected"),
        ("obligations", "not selected"), ("changes", "not selected"),
        ("embeddings", "not selected"), ("graph", "succeeded"), ("figures", "not selected"),
        ("record", "succeeded"),
    ]
    (doc,) = client.get("/api/documents").json()["documents"]
    shown = ("name", "title", "version", "pages", "chunks", "figures")
    assert [doc[k] for k in shown] == [EXISTING, SAMPLE_TITLE, SAMPLE_VERSION, 2, 3, 1]
    deleted = client.delete(f"/api/documents/{EXISTING_ID}", headers=CHANGE)
    assert deleted.json()["deleted"]["partition"] is True
    assert client.get("/api/documents").json()["documents"] == []
    assert client.delete(f"/api/documents/{EXISTING_ID}", headers=CHANGE).status_code == 404


# --- the page in Chromium -----------------------------------------------------------------
@contextmanager
def serving(service: UploadService) -> Iterator[str]:
    """The upload page of ``service`` on a free loopback port (uvicorn in a thread); yields
    its base URL."""
    port = free_port()
    try:
        with serving_in_thread(build_app(service), port) as url:
            yield url
    finally:
        service.worker.close(timeout=60)


@pytest.fixture
def served(kb: Corpus) -> Iterator[tuple[str, UploadService]]:
    """The upload page building in-process on the fakes; yields its base URL and service."""
    service = kb.service(job=upload_build_job, build_uploads=True)
    with serving(service) as base:
        yield base, service


def test_the_page_asks_for_the_token_when_the_server_has_tokens(
    kb: Corpus, browser_page: Any,  # noqa: F811
) -> None:
    service = UploadService(Settings(home=kb.home, mcp_tokens="s3cret"), kb.instance)
    with serving(service) as base:
        page = browser_page
        page.goto(base + "/")
        page.wait_for_selector("#token-form:not([hidden])")
        assert page.locator("#message").inner_text() == "this server needs a token"
        page.fill("#token", "wrong")
        page.click("#token-form button")
        # a locator assertion, not wait_for_function: the page's CSP (no 'unsafe-eval')
        # refuses the string predicate Playwright evaluates when it has to poll
        expect(page.locator("#message")).not_to_be_empty()
        assert page.locator("#token-form").is_visible()
        page.fill("#token", "s3cret")
        page.click("#token-form button")
        # the builds list reads the Dagster instance: slow on a loaded machine
        page.wait_for_selector(f'.build[data-doc="{EXISTING_ID}"]', timeout=90_000)
        assert page.locator("#limit").inner_text() == ".pdf, .md, .txt up to 100.0 MB each"
        assert page.locator("#token-form").is_hidden()
    assert [e for e in page.kb_errors if "401" not in e] == []


def step_states(page: Any, doc: str) -> dict[str, str]:
    """The step rows of a document's latest build as the page shows them."""
    rows = page.locator(f'.build[data-doc="{doc}"] tr[data-step]')
    return {row.get_attribute("data-step"): row.get_attribute("data-state") for row in rows.all()}


def test_a_step_that_crashed_is_not_refused_and_can_be_retried(kb: Corpus) -> None:
    service = kb.service(job=upload_build_job, build_uploads=True)
    client = TestClient(build_app(service), base_url="http://127.0.0.1:3001")
    FAKE_JOB["providers"].embedder_ = FlakyEmbedder("embedding server went away")
    assert client.post(f"/api/documents/{EXISTING_ID}/build", headers=CHANGE).status_code == 202
    wait_for(service.worker.idle)
    (build,) = client.get("/api/builds").json()["builds"]
    (run,) = build["runs"]
    failed = [(s["asset"], s["reason"], s["refused"]) for s in run["steps"]
              if s["state"] == "failed"]
    assert failed == [("embeddings", "RuntimeError: embedding server went away", False)]
    # the page's rule: no refused step, so its card offers "Retry from the failed step"
    assert client.post(f"/api/runs/{run['run_id']}/retry", headers=CHANGE).status_code == 202
    wait_for(service.worker.idle)
    assert client.get("/api/builds").json()["builds"][0]["status"] == "ready"


@pytest.mark.slow
def test_the_page_uploads_checks_and_follows_builds_in_chromium(
    served: tuple[str, UploadService], browser_page: Any, corpus: Path,  # noqa: F811
    kb: Corpus, tmp_path: Path,
) -> None:
    scanned = corpus / "pdfs" / SCANNED
    base, service = served
    page = browser_page
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if r.method == "PUT" else None)
    page.goto(base + "/")
    page.wait_for_selector(f'.build[data-doc="{EXISTING_ID}"]')  # added earlier, no run yet
    assert page.locator("#tasks .hint").inner_text() == (
        "nothing started from this page yet: the rebuilds, retries and approved requests you "
        "start here are listed with their progress"
    )

    duplicate = tmp_path / "existing rules.pdf"
    duplicate.write_bytes(tiny_pdf("another existing"))
    fresh = tmp_path / "Network Guide.pdf"
    fresh.write_bytes(tiny_pdf("network"))
    page.set_input_files("#picker", [str(duplicate), str(fresh)])

    refused = page.locator('.upload[data-name="existing rules.pdf"]')
    refused.wait_for()
    assert refused.get_attribute("data-status") == "duplicate"
    assert refused.locator(".why").inner_text() == (
        f"name clash: {EXISTING!r} is already in the corpus (doc_id {EXISTING_ID}, pending). "
        "Version 1 is waiting to be built; once it is, this file can be uploaded as a new "
        "version. To replace it entirely: delete it first"
    )
    accepted = page.locator('.upload[data-name="Network Guide.pdf"]')
    page.wait_for_selector('.upload[data-name="Network Guide.pdf"][data-status="added"]')
    assert accepted.locator("progress").get_attribute("data-percent") == "100"
    assert accepted.locator(".why").inner_text() == (
        "added as network-guide.pdf; build requested (see Builds)"
    )
    page.wait_for_selector(
        '.build[data-doc="network-guide.pdf"][data-status="ready"][data-run-status="success"]',
        timeout=60_000,
    )
    assert step_states(page, "network-guide.pdf") == {a: "succeeded" for a in (
        "markdown", "chunks", "obligations", "changes", "embeddings", "graph", "figures",
        "record")}
    green = page.locator('.build[data-doc="network-guide.pdf"] tr[data-step="record"] .badge')
    assert green.evaluate("e => getComputedStyle(e).color") == "rgb(26, 127, 55)"
    # the duplicate's bytes never left the browser
    assert sent == [f"{base}/api/files?name=Network%20Guide.pdf"]
    assert service.received == {"Network Guide.pdf": fresh.stat().st_size}

    page.set_input_files("#picker", [str(scanned)])
    card = page.locator(f'.build[data-doc="{SCANNED}"][data-run-status="failure"]')
    card.wait_for(timeout=60_000)
    assert card.locator(".reason").inner_text() == f"markdown: {SCANNED_REASON}"
    assert step_states(page, SCANNED)["markdown"] == "failed"
    # the same file fails the same way again: no retry or rebuild offered, the reason says why
    assert card.locator("button.retry, button.rebuild").count() == 0
    assert card.locator('[data-role="refused"]').inner_text() == (
        "Running it again cannot help: kb refused this input. Do what the reason says."
    )
    first_run = card.locator("a.run-link").get_attribute("href")
    assert first_run.startswith("http://127.0.0.1:3000/runs/")
    # `kb retry` or the API still re-execute it from the failed step: it fails again
    run_id = first_run.rsplit("/", 1)[1]
    page.evaluate(
        "([url, header]) => fetch(url, {method: 'POST', headers: {[header]: '1'}})",
        [f"{base}/api/runs/{run_id}/retry", CHANGE_HEADER],
    )
    retried = page.locator(f'.build[data-doc="{SCANNED}"]:has(p.earlier)')
    retried.wait_for(timeout=60_000)
    page.wait_for_selector(
        f'.build[data-doc="{SCANNED}"][data-run-status="failure"]:has(p.earlier)'
    )
    assert retried.locator("h3").inner_text().endswith("re-executed from failure")
    assert retried.locator("p.earlier a").get_attribute("href") == first_run

    page.reload()
    page.wait_for_selector(f'.build[data-doc="{SCANNED}"][data-status="failed"]')
    shown = page.locator(".build").evaluate_all("cards => cards.map(c => c.dataset.doc)")
    assert sorted(shown) == sorted([SCANNED, "network-guide.pdf", EXISTING_ID])
    assert page.locator(".upload").count() == 0  # the tab's own rows went; the builds stayed
    corpus_rows = page.locator("#corpus tbody tr[data-doc]")
    corpus_rows.first.wait_for()
    assert sorted(corpus_rows.evaluate_all(
        "rows => rows.map(r => [r.dataset.doc, r.dataset.status])")) == [
        [EXISTING_ID, "pending"], ["network-guide.pdf", "ready"], [SCANNED, "failed"],
    ]
    # a ready document's figure count links to its gallery on the MCP server
    gallery = page.locator('#corpus tr[data-doc="network-guide.pdf"] a.gallery')
    assert gallery.inner_text() == "1 (gallery)"
    assert gallery.get_attribute("href") == (
        f"http://{service.settings.mcp_host}:{service.settings.mcp_port}"
        "/documents/network-guide.pdf/figures"
    )
    page.on("dialog", lambda dialog: dialog.accept())
    page.locator(f'#corpus tr[data-doc="{EXISTING_ID}"] button.delete').click()
    page.wait_for_selector(f'#corpus tr[data-doc="{EXISTING_ID}"]', state="detached")
    assert kb.stores.catalog().find_by_doc_id(EXISTING_ID) is None
    assert page.kb_errors == []


#: A file name without a space to wrap at, and a failure reason with a path like it.
UNBROKEN = "AEMO_Market_Settlement_and_Transfer_Solution_Procedures_v2.3_final_consolidated.pdf"


def test_the_corpus_table_shows_a_new_version_and_fits_1280_and_1000_px(
    kb: Corpus, browser_page: Any, tmp_path: Path,  # noqa: F811
) -> None:
    catalog = kb.stores.catalog()
    catalog.mark_ready(EXISTING_ID, pages=3, chunk_count=12345, figure_count=37,
                       title="Existing Rules", version="3.2")
    unbroken = tmp_path / "more" / UNBROKEN
    revised = tmp_path / "more" / EXISTING
    unbroken.parent.mkdir()
    unbroken.write_bytes(tiny_pdf("unbroken"))
    revised.write_bytes(tiny_pdf("existing, revised"))
    (added,) = admit([unbroken], kb.stores, kb.instance)
    catalog.mark_failed(added.doc_id, f"markdown: /home/kb/inbox/{UNBROKEN}: no text layer")
    (second,) = admit([revised], kb.stores, kb.instance, new_version=True)
    assert (second.status, second.version) == (IntakeStatus.ADDED, 2)

    with serving(kb.service()) as base:
        page = browser_page
        page.goto(base + "/")
        page.wait_for_selector(f'#corpus tr[data-doc="{added.doc_id}"]', timeout=60_000)
        page.screenshot(path=str(tmp_path / "corpus.png"), full_page=True)
        widths = page.evaluate(
            "() => ({page: document.documentElement.scrollWidth, table: Math.ceil("
            "document.getElementById('corpus').getBoundingClientRect().right), section: "
            "document.getElementById('corpus').parentElement.getBoundingClientRect().right})"
        )
        assert page.viewport_size["width"] == 1280
        assert widths["page"] == 1280  # no horizontal scrolling
        assert widths["table"] <= widths["section"]
        actions = page.locator(f'#corpus tr[data-doc="{EXISTING_ID}"] td.actions button')
        tops = actions.evaluate_all("buttons => buttons.map(b => b.getBoundingClientRect().top)")
        assert len(set(tops)) == 1  # the four buttons on one line where there is room
        page.set_viewport_size({"width": 1000, "height": 900})  # a laptop's half screen
        widths = page.evaluate(
            "() => ({page: document.documentElement.scrollWidth, table: Math.ceil("
            "document.getElementById('corpus').getBoundingClientRect().right), section: "
            "document.getElementById('corpus').parentElement.getBoundingClientRect().right})"
        )
        assert widths["page"] == 1000  # the action buttons wrap instead
        assert widths["table"] <= math.ceil(widths["section"])  # its right edge is x.5 px here
        boxes = actions.evaluate_all(
            "buttons => buttons.map(b => [b.getBoundingClientRect().top, "
            "b.getBoundingClientRect().height])"
        )
        assert len({top for top, _ in boxes}) > 1  # wrapped between buttons
        assert len({height for _, height in boxes}) == 1  # never inside one ("Rebuild / graph")
        version = page.locator(f'#corpus tr[data-doc="{EXISTING_ID}"] td.version')
        assert version.inner_text().split("\n") == ["v1 (3.2)", "v2 pending"]
        assert version.locator(".next-version").get_attribute("data-state") == "pending"
    assert page.kb_errors == []
