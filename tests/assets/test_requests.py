"""Reviewing document requests (issue 12, "request_document (MCP) and the review queue"):
``kb requests list|approve|reject`` and the ``approve_document_request`` job.

Approval downloads from the local HTTPS server of ``test_url_intake`` (``reach_site``) and
builds on the fake providers (``build_on_fakes`` stands in for ``operations.build_documents``:
the same build job, as a real run in the instance, with ``tests/fakes.py`` models).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from typer.testing import CliRunner

from kb_assets import operations
from kb_assets.cli import main as cli
from kb_assets.assets import CORPUS_ASSETS
from kb_assets.constants import BUILD_JOB, DOCUMENTS, DocumentStatus
from kb_assets.definitions import defs
from kb_assets.jobs import kb_resources
from kb_assets.jobs import build_documents_job
from kb_assets.request_jobs import APPROVE_JOB, ApproveRequestConfig
from kb_assets.resources import StoresResource
from kb_shared.stores.catalog import Catalog, DocumentRequestRow
from tests.assets.fake_providers import FakeProviders
from tests.assets.test_url_intake import (  # noqa: F401 - fixtures
    METADATA_URL,
    PDF,
    LocalSite,
    assert_nothing_written,
    home,
    instance,
    reach_site,
    site,
    stores,
)

#: The stores and providers ``fake_build_job`` builds with (``dagster.reconstructable`` needs a
#: module-level function, so they are handed over here).
FAKE_BUILD: dict[str, Any] = {}


def fake_build_job() -> dg.JobDefinition:
    """The real build job on ``FAKE_BUILD``'s stores and fake providers."""
    definitions = dg.Definitions(
        assets=CORPUS_ASSETS,
        jobs=[build_documents_job],
        resources=kb_resources(FAKE_BUILD["stores"], FAKE_BUILD["providers"]),
        executor=dg.in_process_executor,
    )
    return definitions.resolve_job_def(BUILD_JOB)


def build_on_fakes(
    stores: StoresResource, instance: dg.DagsterInstance, doc_ids: Sequence[str], **_: Any
) -> list[operations.BuildOutcome]:
    """``operations.build_documents`` on the fake providers: one run per document."""
    FAKE_BUILD.setdefault("stores", StoresResource(home=str(stores.settings.home)))
    FAKE_BUILD.setdefault("providers", FakeProviders())
    outcomes = []
    for doc in doc_ids:
        result = operations.run_build(instance, doc, job=fake_build_job)
        row = stores.catalog().get(doc)
        outcomes.append(
            operations.BuildOutcome(
                doc_id=doc, name=row.name, status=DocumentStatus(row.status),
                run_id=result.run_id, seconds=0.0, pages=row.pages, chunks=row.chunk_count,
                reason=row.failure_reason or "",
            )
        )
    return outcomes


@pytest.fixture
def fake_builds(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """``kb requests approve`` builds on the fake providers for this test."""
    monkeypatch.setattr(operations, "build_documents", build_on_fakes)
    yield FAKE_BUILD
    stores = FAKE_BUILD.pop("stores", None)
    FAKE_BUILD.clear()
    if stores is not None:
        stores.close()


def kb(*args: str) -> Any:
    """Run ``kb ARGS`` in-process."""
    return CliRunner().invoke(cli.app, list(args))


def flat(text: str) -> str:
    """``text`` with rich's line wrapping undone."""
    return " ".join(text.split())


def only_request(catalog: Catalog) -> DocumentRequestRow:
    [row] = catalog.list_document_requests()
    return row


# --- refused approvals -------------------------------------------------------------------------


def test_approval_of_a_metadata_url_is_refused_and_the_request_fails_with_the_reason(
    stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    catalog = stores.catalog()
    request = catalog.add_document_request(
        "Instance credentials", "asked by a model", METADATA_URL, checked_indexed_documents=True
    )
    result = kb("requests", "approve", str(request.id))
    assert result.exit_code == 1
    reason = (
        "download refused: 169.254.169.254 is a link-local address (where cloud metadata "
        "services live)"
    )
    assert f"request #{request.id} failed ({METADATA_URL}): {reason}" in flat(result.output)
    row = only_request(catalog)
    assert (row.status, row.failure_reason, row.doc_id, row.run_id) == (
        "failed", reason, None, None,
    )
    assert_nothing_written(stores, instance)
    # the operator's URL is re-checked just the same
    again = kb("requests", "approve", str(request.id), "--url", "https://127.0.0.1/x.pdf")
    assert again.exit_code == 1
    assert only_request(catalog).failure_reason == (
        "download refused: 127.0.0.1 is a loopback address"
    )
    assert_nothing_written(stores, instance)


def test_approval_without_a_url_or_of_an_unknown_request_changes_nothing(
    stores: StoresResource, instance: dg.DagsterInstance
) -> None:
    catalog = stores.catalog()
    request = catalog.add_document_request("Retail Code", "needed", checked_indexed_documents=True)
    result = kb("requests", "approve", str(request.id))
    assert result.exit_code == 2
    assert (
        f"request #{request.id} carries no source URL; find the PDF and approve it with "
        f"`kb requests approve {request.id} --url https://…`"
    ) in flat(result.output)
    not_a_url = kb("requests", "approve", str(request.id), "--url", "/etc/passwd")
    assert not_a_url.exit_code == 2
    assert "'/etc/passwd' is not a URL; approving downloads an https URL" in flat(not_a_url.output)
    assert only_request(catalog).status == "pending"
    unknown = kb("requests", "approve", "999")
    assert unknown.exit_code == 2
    assert "no document request #999; `kb requests list --all` lists them" in flat(unknown.output)
    assert_nothing_written(stores, instance)


# --- approve, build, record ----------------------------------------------------------------------


def test_approve_downloads_admits_builds_and_records_the_document_and_run(
    reach_site: LocalSite, fake_builds: dict, stores: StoresResource,
    instance: dg.DagsterInstance,
) -> None:
    catalog = stores.catalog()
    request = catalog.add_document_request(
        "B2B Procedure: Technical Delivery Specification", "needed for B2B questions",
        reach_site.url("/files/b2b.pdf"), checked_indexed_documents=True,
    )
    result = kb("requests", "approve", str(request.id), "--name", "B2B TDS v3.2")
    assert result.exit_code == 0, result.output
    row = only_request(catalog)
    assert (row.status, row.doc_id, row.failure_reason) == ("approved", "b2b-tds-v3.2.pdf", None)
    assert row.run_id is not None
    run = instance.get_run_by_id(row.run_id)
    assert run is not None and run.job_name == BUILD_JOB
    assert run.status == dg.DagsterRunStatus.SUCCESS
    document = catalog.get("b2b-tds-v3.2.pdf")
    assert (document.name, document.status, document.chunk_count) == (
        "B2B TDS v3.2.pdf", "ready", 3,
    )
    assert stores.blobs().get(document.blob_key) == PDF
    output = flat(result.output)
    assert (
        f"request #{request.id}: downloaded {reach_site.url('/files/b2b.pdf')} and added "
        "B2B TDS v3.2.pdf as b2b-tds-v3.2.pdf; building it"
    ) in output
    assert f"approved request #{request.id}: B2B TDS v3.2.pdf is ready (2 pages, 3 chunks; run " in output

    twice = kb("requests", "approve", str(request.id))
    assert twice.exit_code == 2
    assert "is already approved (document b2b-tds-v3.2.pdf); nothing to do" in flat(twice.output)
    refused = kb("requests", "reject", str(request.id), "--reason", "changed my mind")
    assert refused.exit_code == 2
    assert "`kb delete b2b-tds-v3.2.pdf` removes the document" in flat(refused.output)


def test_a_refused_admission_fails_the_request_and_a_retry_with_another_name_works(
    reach_site: LocalSite, fake_builds: dict, stores: StoresResource,
    instance: dg.DagsterInstance, tmp_path: Path,
) -> None:
    catalog = stores.catalog()
    local = tmp_path / "server" / "Metering Guide.pdf"
    local.parent.mkdir()
    local.write_bytes(b"%PDF-1.7\n% a different file\n%%EOF\n")
    assert kb("add", str(local)).exit_code == 0
    request = catalog.add_document_request(
        "Metering guide", "wanted", reach_site.url("/download"), checked_indexed_documents=True
    )
    clash = kb("requests", "approve", str(request.id), "--name", "metering guide.PDF")
    assert clash.exit_code == 1
    row = only_request(catalog)
    assert (row.status, row.failure_reason) == (
        "failed",
        "'Metering Guide.pdf' is already in the corpus (doc_id metering-guide.pdf, pending). "
        f"To add it as a new version: `kb add --new-version {reach_site.url('/download')}`; "
        "to replace it entirely: `kb delete metering-guide.pdf` first",
    )
    retry = kb("requests", "approve", str(request.id), "--name", "Metering Guide 2024.pdf")
    assert retry.exit_code == 0, retry.output
    row = only_request(catalog)
    assert (row.status, row.doc_id, row.failure_reason) == (
        "approved", "metering-guide-2024.pdf", None,
    )


# --- list and reject -------------------------------------------------------------------------------


def test_list_hides_rejected_requests_unless_all_and_flags_missing_links(
    stores: StoresResource,
) -> None:
    catalog = stores.catalog()
    linked = catalog.add_document_request(
        "Retail Energy Code", "hardship rules", "https://www.aer.gov.au/code.pdf",
        checked_indexed_documents=True,
    )
    unlinked = catalog.add_document_request("Gas Distribution Code", "gas questions")
    catalog.join_document_request("gas distribution code")
    assert kb("requests", "list").exit_code == 0

    rejected = kb("requests", "reject", str(unlinked.id), "--reason", "out of scope")
    assert rejected.exit_code == 0, rejected.output
    assert flat(rejected.output) == (
        f"rejected request #{unlinked.id} (Gas Distribution Code): out of scope"
    )
    listed = flat(kb("requests", "list").output)
    assert "Retail Energy Code" in listed and "Gas Distribution Code" not in listed
    assert "1 rejected request(s) hidden; `kb requests list --all` shows them" in listed

    everything = kb("requests", "list", "--all", "--json")
    rows = json.loads(everything.output)
    assert [(r["id"], r["status"], r["request_count"], r["failure_reason"]) for r in rows] == [
        (linked.id, "pending", 1, None),
        (unlinked.id, "rejected", 2, "out of scope"),
    ]
    assert rows[0]["source_url"] == "https://www.aer.gov.au/code.pdf"
    assert rows[1]["source_url"] is None and rows[1]["decided_at"] is not None
    default = json.loads(kb("requests", "list", "--json").output)
    assert [r["id"] for r in default] == [linked.id]

    table = kb("requests", "list", "--all").output
    assert "needs a link" in table and "out of scope" in table

    empty_reason = kb("requests", "reject", str(linked.id), "--reason", "  ")
    assert empty_reason.exit_code == 2
    assert "failure reason cannot be empty" in flat(empty_reason.output)


def test_list_on_an_empty_queue() -> None:
    result = kb("requests", "list")
    assert (result.exit_code, result.output.strip()) == (0, "no document requests")


# --- the Launchpad job ---------------------------------------------------------------------------


def test_approve_job_admits_records_its_run_and_describes_its_config(
    reach_site: LocalSite, stores: StoresResource, instance: dg.DagsterInstance, home: Path
) -> None:
    fields = ApproveRequestConfig.model_fields
    assert "as `kb requests list` shows it (e.g. 12)" in (fields["request_id"].description or "")
    assert "instead of the request's own source URL" in (fields["url"].description or "")
    assert "e.g. 'B2B Procedure v3.2.pdf'" in (fields["name"].description or "")
    job = defs.resolve_job_def(APPROVE_JOB)
    assert "request_id: 12" in (job.description or "")

    catalog = stores.catalog()
    good = catalog.add_document_request(
        "B2B procedure", "needed", reach_site.url("/files/b2b.pdf"), checked_indexed_documents=True
    )
    bad = catalog.add_document_request(
        "Metadata", "needed", METADATA_URL, checked_indexed_documents=True
    )

    def run(request_id: int) -> dg.ExecuteInProcessResult:
        return job.execute_in_process(
            run_config={
                "ops": {"approve_document_request_op": {"config": {"request_id": request_id}}},
                "resources": {"stores": {"config": {"home": str(home)}}},
            },
            instance=instance,
            raise_on_error=False,
        )

    approved = run(good.id)
    assert approved.success
    assert approved.output_for_node("approve_document_request_op") == "b2b-procedure-v3.2.pdf"
    rows = {r.id: r for r in catalog.list_document_requests()}
    assert (rows[good.id].status, rows[good.id].doc_id, rows[good.id].run_id) == (
        "approved", "b2b-procedure-v3.2.pdf", approved.run_id,
    )
    assert catalog.get("b2b-procedure-v3.2.pdf").status == "pending"  # the sensor builds it
    assert instance.has_dynamic_partition(DOCUMENTS, "b2b-procedure-v3.2.pdf")

    failed = run(bad.id)
    assert not failed.success
    [failure] = [e for e in failed.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failure.event_specific_data.user_failure_data.description == (
        f"request #{bad.id} failed: download refused: 169.254.169.254 is a link-local "
        "address (where cloud metadata services live)"
    )
    rows = {r.id: r for r in catalog.list_document_requests()}
    assert rows[bad.id].status == "failed"
    assert rows[bad.id].failure_reason == (
        "download refused: 169.254.169.254 is a link-local address (where cloud metadata "
        "services live)"
    )
    assert [d.doc_id for d in catalog.list_documents()] == ["b2b-procedure-v3.2.pdf"]
