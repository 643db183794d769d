"""``kb requests approve`` tells a skipped document from a failed one (a new-user trial of
2026-12-02 saw both reported as failed, exit 1): a download the corpus already holds as it is,
and a build left to a live run of another process, are reported as skipped with the reason,
exit 0, and the request is approved; the same content under another name is already present
too; a name clash, or a refusal under the download's own name, still fails (``request_jobs``,
``cli_requests``, the upload page's approval task).

Downloads come from the local HTTPS site of ``test_url_intake`` (``reach_site``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from kb_assets import operations
from kb_assets.constants import BUILD_JOB, DOCUMENTS, PARTITION_TAG
from kb_assets.live_runs import PROCESS_TAG, this_process
from kb_assets.request_jobs import approve_document_request_job
from kb_assets.resources import StoresResource
from kb_assets.upload.service import UploadService
from kb_shared.settings import Settings
from tests.assets.test_requests import flat, kb, only_request
from tests.assets.test_url_intake import (  # noqa: F401 - fixtures
    OTHER_PDF,
    PDF,
    LocalSite,
    home,
    instance,
    reach_site,
    site,
    stores,
)
from tests.fakes import tiny_pdf

#: The name the site's ``/files/b2b.pdf`` comes with (its Content-Disposition).
NAME = "B2B Procedure v3.2.pdf"
DOC = "b2b-procedure-v3.2.pdf"


def test_a_download_already_in_the_corpus_is_skipped_and_the_request_approved(
    reach_site: LocalSite, stores: StoresResource, instance: dg.DagsterInstance,  # noqa: F811
    home: Path, tmp_path: Path,  # noqa: F811
) -> None:
    catalog = stores.catalog()
    local = tmp_path / "server" / NAME
    local.parent.mkdir()
    local.write_bytes(PDF)  # the very file the request points at
    assert kb("add", str(local)).exit_code == 0
    catalog.mark_ready(DOC, pages=1, chunk_count=1)  # as if built
    url = reach_site.url("/files/b2b.pdf")
    request = catalog.add_document_request(
        "B2B Procedure v3.2", "needed", url, checked_indexed_documents=True
    )
    result = kb("requests", "approve", str(request.id))
    assert result.exit_code == 0, result.output
    output = flat(result.output)
    assert (
        f"skipped request #{request.id} ({url}): already present: {NAME!r} is already in the "
        f"corpus (doc_id {DOC}, ready) with the same content; to replace it entirely: `kb "
        f"delete {DOC}` first"
    ) in output
    assert (
        f"approved request #{request.id} with the document already in the corpus: {DOC} "
        "(nothing added, nothing to build)"
    ) in output
    assert "failed" not in output
    row = only_request(catalog)
    assert (row.status, row.doc_id, row.failure_reason, row.run_id) == (
        "approved", DOC, None, None,
    )
    assert [(d.doc_id, d.status) for d in catalog.list_documents()] == [(DOC, "ready")]
    assert len(catalog.versions(DOC)) == 1
    assert instance.get_runs() == []  # nothing was built

    # the upload page's approval of another request for it: a done task that says so
    again = catalog.add_document_request(
        "B2B Procedure", "asked again", url, checked_indexed_documents=True
    )
    service = UploadService(Settings(home=home), instance)
    service.approve(again.id)
    service.worker.close(timeout=60)
    (task,) = service.tasks()
    assert (task["state"], task["message"]) == (
        "done", f"skipped: already present as {DOC}; nothing added",
    )
    assert catalog.list_documents()[0].doc_id == DOC and len(catalog.list_documents()) == 1

    # and the Launchpad's approve_document_request job: a successful run, nothing added
    third = catalog.add_document_request("B2B", "asked once more", url,
                                         checked_indexed_documents=True)
    result = approve_document_request_job.execute_in_process(
        run_config={"ops": {"approve_document_request_op": {"config": {"request_id": third.id}}}},
        resources={"stores": StoresResource(home=str(home))},
        instance=instance,
    )
    assert result.success
    assert result.output_for_node("approve_document_request_op") == DOC
    decided = next(r for r in catalog.list_document_requests() if r.id == third.id)
    assert (decided.status, decided.doc_id, decided.run_id) == ("approved", DOC, None)
    assert len(catalog.list_documents()) == 1


def test_a_build_left_to_a_live_run_is_skipped_not_failed(
    reach_site: LocalSite, stores: StoresResource, instance: dg.DagsterInstance,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def must_not_build(*_: Any, **__: Any) -> None:
        raise AssertionError("a document a live run builds was built again")

    monkeypatch.setattr(operations, "build_one", must_not_build)
    # the intake sensor's run (this process stands in for the one running it) is on it
    instance.add_run(dg.DagsterRun(
        job_name=BUILD_JOB, run_id="1f2e3d4c-0000-4000-8000-00000000000a",
        status=dg.DagsterRunStatus.STARTED, tags={PARTITION_TAG: DOC, PROCESS_TAG: this_process()},
    ))
    catalog = stores.catalog()
    url = reach_site.url("/files/b2b.pdf")
    request = catalog.add_document_request(
        "B2B Procedure v3.2", "needed", url, checked_indexed_documents=True
    )
    result = kb("requests", "approve", str(request.id))
    assert result.exit_code == 0, result.output
    output = flat(result.output)
    run = "1f2e3d4c-0000-4000-8000-00000000000a"
    assert (
        f"skipped the build of {NAME}: left to a live run: run {run} (started) of this Dagster "
        "instance is building it"
    ) in output
    assert f"approved request #{request.id}: {NAME} added; run {run} builds it" in output
    assert "failed" not in output
    row = only_request(catalog)
    assert (row.status, row.doc_id, row.run_id) == ("approved", DOC, run)
    assert catalog.get(DOC).status == "pending"
    assert instance.get_dynamic_partitions(DOCUMENTS) == [DOC]


def test_content_held_under_another_name_is_skipped_and_a_waiting_version_still_fails(
    reach_site: LocalSite, stores: StoresResource, tmp_path: Path,  # noqa: F811
) -> None:
    catalog = stores.catalog()
    folder = tmp_path / "server"
    folder.mkdir()
    (folder / "Retail Guide (local copy).pdf").write_bytes(OTHER_PDF)
    (folder / NAME).write_bytes(tiny_pdf("procedure, first"))
    assert kb("add", str(folder)).exit_code == 0
    copy = catalog.resolve("Retail Guide (local copy).pdf")
    assert copy is not None

    url = reach_site.url("/docs/Retail%20Guide.pdf")  # OTHER_PDF as "Retail Guide.pdf"
    request = catalog.add_document_request(
        "Retail Guide", "needed", url, checked_indexed_documents=True
    )
    result = kb("requests", "approve", str(request.id))
    assert result.exit_code == 0, result.output
    assert (
        f"skipped request #{request.id} ({url}): already present: identical content is "
        f"already in the corpus as {copy.name!r}"
    ) in flat(result.output)
    assert (only_request(catalog).status, only_request(catalog).doc_id) == (
        "approved", copy.doc_id,
    )

    # the download under its own name, refused because that document's version 2 waits for
    # its build: a failure (the request's new content is not in kb), not a skip
    catalog.mark_ready(DOC, pages=1, chunk_count=1)
    (folder / NAME).write_bytes(tiny_pdf("procedure, second"))
    assert kb("add", "--new-version", str(folder / NAME)).exit_code == 0
    waiting = catalog.add_document_request(
        "B2B Procedure v3.2", "needed", reach_site.url("/files/b2b.pdf"),
        checked_indexed_documents=True,
    )
    refused = kb("requests", "approve", str(waiting.id), "--new-version")
    assert refused.exit_code == 1, refused.output
    row = next(r for r in catalog.list_document_requests() if r.id == waiting.id)
    assert (row.status, row.doc_id) == ("failed", None)
    assert "skipped" not in flat(refused.output)
    assert (
        f"request #{waiting.id} failed ({reach_site.url('/files/b2b.pdf')}): version 2 of "
        f"{NAME!r} is still waiting to be built; build it (`kb build {DOC}`) before adding "
        "another version"
    ) in flat(refused.output)
