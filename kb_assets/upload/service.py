"""What the upload page does, as plain synchronous methods the HTTP routes call in a worker
thread (``kb_assets.upload.app``) and tests call directly.

Every change goes through the functions the CLI uses: ``kb_assets.intake.admit`` for files,
``kb_assets.operations`` for retries, rebuilds and deletes, ``kb_assets.request_jobs`` for
the request queue. Builds are requested the way ``kb add`` and the inbox request them: an
admitted document is ``pending`` with its partition, and the intake sensor (running under
``kb ui``'s ``dagster dev``) requests its build run within its 15 s interval. With
``build_uploads`` the server builds each admitted document itself instead, in-process on its
worker (``kb add --build``'s way; tests use it, since no daemon runs there).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg

from kb_assets import operations, request_jobs
from kb_assets.cli.requests import request_json
from kb_assets.constants import (
    CHANGES,
    CORPUS_ASSETS,
    OBLIGATIONS,
    PARTITION_TAG,
    RECORD,
    DocumentStatus,
)
from kb_assets.jobs import build_job
from kb_assets.intake import IntakeOutcome, IntakeStatus, admit, previous_edition
from kb_assets.partitions import documents_partitions
from kb_assets.resources import StoresResource
from kb_assets.upload.builds import recent_builds
from kb_assets.upload.checks import FileCheck, check_files
from kb_assets.upload.work import Task, Worker
from kb_shared.errors import SchemaMissingError
from kb_shared.settings import Settings
from kb_shared.stores.catalog import new_version_waits

#: How far back the page lists builds by default (a reload shows these, not just the tab's).
DEFAULT_HOURS = 6.0

#: The Dagster UI ``kb ui`` serves, where run links point by default.
DEFAULT_DAGSTER_URL = "http://127.0.0.1:3000"


@dataclass
class UploadService:
    """The upload page's operations on one ``KB_HOME`` and its Dagster instance.

    Attributes:
        settings: whose ``home`` the stores open (the rest from the environment, as the CLI).
        instance: the Dagster instance runs are read from and written to.
        dagster_url: the Dagster UI's base URL, for run links.
        job: module-level function returning the build job (``dagster.reconstructable``;
            tests pass one on fake providers).
        build_uploads: build each admitted document in-process instead of leaving it to the
            intake sensor (module docstring).
        worker: where retries, rebuilds, approvals and in-process builds run.
        received: bytes received per uploaded file name (what reached the server).
    """

    settings: Settings
    instance: dg.DagsterInstance
    dagster_url: str = DEFAULT_DAGSTER_URL
    job: Callable[[], dg.JobDefinition] = build_job
    build_uploads: bool = False
    worker: Worker = field(default_factory=Worker)
    received: dict[str, int] = field(default_factory=dict)
    _admitting: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _finished: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)
    _names: dict[str, str] = field(default_factory=dict, repr=False)

    @contextmanager
    def stores(self) -> Iterator[StoresResource]:
        """A ``StoresResource`` on ``settings.home`` for one operation, closed after it; its
        upload limit is ``settings``' too, so the check before transfer and ``admit`` agree."""
        resource = StoresResource(
            home=str(self.settings.home),
            overrides={"max_upload_bytes": str(self.settings.max_upload_bytes)},
        )
        try:
            yield resource
        finally:
            resource.close()

    @property
    def max_bytes(self) -> int:
        """The largest file accepted (``KB_MAX_UPLOAD_BYTES``)."""
        return self.settings.max_upload_bytes

    # --- intake ----------------------------------------------------------------------------
    def check(
        self, files: Sequence[tuple[str, int]], *, new_version: bool = False,
        sha256s: Sequence[str | None] | None = None,
    ) -> list[FileCheck]:
        """``checks.check_files`` of ``(name, size)`` pairs against the catalog
        (``new_version``: a known name is checked as that document's next version;
        ``sha256s``: the files' digests where the page sent them).

        Raises:
            IntakeError: the catalog could not be read.
        """
        with self.stores() as stores:
            return check_files(
                files, stores.catalog(), self.max_bytes, new_version=new_version, sha256s=sha256s
            )

    def check_edition(self, edition_of: str | None, *, new_version: bool = False) -> None:
        """Refuse an edition link before the file is sent (``intake.previous_edition``).

        Raises:
            ValueError: with ``new_version``; ``EditionLinkError``: an unknown document.
            IntakeError: the catalog could not be read.
        """
        with self.stores() as stores:
            previous_edition(stores, edition_of, new_version)

    def admit_file(
        self, path: Path, *, new_version: bool = False, edition_of: str | None = None
    ) -> IntakeOutcome:
        """Admit one received file with ``kb_assets.intake.admit`` (one at a time, so two
        uploads never race in the duplicate check); then, with ``build_uploads``, queue its
        build. With ``new_version`` a file whose name is a catalogued document's becomes its
        next version (``kb add --new-version``'s rule; the outcome's ``version`` says which);
        with ``edition_of`` (a name or doc_id) a new document becomes that one's next edition
        (``kb add --edition-of``; the outcome's ``edition_of`` names it).

        Raises:
            IntakeError: as ``admit``; nothing was added.
            ValueError: ``edition_of`` refused (``admit``); nothing was added.
        """
        with self._admitting, self.stores() as stores:
            (outcome,) = admit(
                [path], stores, self.instance, new_version=new_version, edition_of=edition_of
            )
        if outcome.status == IntakeStatus.ADDED and outcome.doc_id and self.build_uploads:
            self.build(outcome.doc_id, outcome.name, outcome.version)
        return outcome

    def build(self, doc_id: str, name: str, version: int | None = None) -> Task:
        """Queue an in-process build of every corpus asset of ``doc_id`` (``version``: the
        number of the version it makes, named in the task's label when given)."""
        label = f"build {name}" + (f" v{version}" if version else "")
        return self.worker.submit("build", label, lambda: self._run(doc_id), doc_id=doc_id)

    def build_pending(self, ref: str) -> Task:
        """Queue the in-process build of a pending document that has no run yet, or of a
        ready one's new version waiting for its build (``operations.documents_to_build``'s
        rule): the page's "Build now", for when no intake sensor is running (module docstring).

        Raises:
            DocumentNotFoundError: no such document.
            ValueError: the document is not pending and no new version of it waits (a failed
                one is retried, a ready one rebuilt).
        """
        with self.stores() as stores:
            row = operations.resolve_document(stores, ref)
            versions = stores.catalog().versions(row.doc_id)
        waiting = row.status == DocumentStatus.READY and new_version_waits(versions)
        if row.status != DocumentStatus.PENDING and not waiting:
            raise ValueError(
                f"{row.name} is {row.status}, not waiting for a build: retry its failed run or "
                "rebuild one of its assets"
            )
        return self.build(row.doc_id, row.name, versions[-1].version if versions else None)

    def _run(
        self, doc_id: str, *, assets: Sequence[str] | None = None, force: Sequence[str] = ()
    ) -> str:
        # no run config for the resources: the run reads KB_HOME and the rest from the
        # environment, as the runs the intake sensor requests do
        result = operations.run_build(
            self.instance, doc_id, assets=assets, force=force, job=self.job
        )
        if result.success:
            return f"ready (run {result.run_id})"
        raise RuntimeError(f"{operations.failure_reason(result)} (run {result.run_id})")

    # --- what the page lists ---------------------------------------------------------------
    def builds(self, hours: float = DEFAULT_HOURS) -> list[dict[str, Any]]:
        """``builds.recent_builds`` of the last ``hours`` (a document deleted since an earlier
        listing, or by ``delete``, keeps its name there)."""
        with self.stores() as stores:
            return recent_builds(
                self.instance, stores.catalog(), hours=hours, dagster_url=self.dagster_url,
                finished=self._finished, names=self._names,
            )

    def documents(self) -> list[dict[str, Any]]:
        """The corpus: ``operations.document_status`` rows (``kb status``) with each
        document's title, version, category, previous edition's doc_id (``edition_of``) and
        the summary of what changed in its serving version (``changes``: the counts of
        ``Catalog.change_set``, ``None`` when it has no stored comparison) from the catalog."""
        with self.stores() as stores:
            catalog = stores.catalog()
            rows = {r.doc_id: r for r in catalog.list_documents()}
            listed = operations.document_status(stores, self.instance)
            try:
                compared = {
                    doc_id: {s.version: s.summary for s in catalog.change_sets(doc_id)}
                    for doc_id in rows
                }
            except SchemaMissingError:  # a Postgres catalog before sql/009: no comparisons
                compared = {}
        for item in listed:
            row = rows.get(item["doc_id"])
            item["title"] = row.title if row else None
            item["version"] = row.version if row else None
            item["category"] = row.category if row else None
            item["edition_of"] = row.edition_of if row else None
            serving = item.get("serving_version")
            item["changes"] = compared.get(item["doc_id"], {}).get(serving) if serving else None
        return listed

    def changes(self, doc_id: str) -> dict[str, Any]:
        """What changed in ``doc_id``'s serving version since its previous issue: the
        ``compare_versions`` tool's structured content (every change), plus both sides'
        names and labels, with PDF links on the MCP server (``kb_mcp.links``).

        Raises:
            ValueError: unknown document, no previous issue, or no stored comparison (the
                message says what to do; ``kb_mcp.render_changes.find_comparison``).
        """
        from kb_mcp.errors import ToolProblem
        from kb_mcp.links import links_for
        from kb_mcp.render_changes import comparison_output, find_comparison

        with self.stores() as stores:
            try:
                comparison = find_comparison(stores.catalog(), doc_id)
            except ToolProblem as exc:
                raise ValueError(str(exc)) from exc
        every = max(len(comparison.stored.changes), 1)
        output = comparison_output(comparison, links_for(self.settings), 0, every)
        return {
            **output.model_dump(mode="json"),
            "name": comparison.after.document.name,
            "previous_name": comparison.before.document.name,
            "label": comparison.after.label,
            "previous_label": comparison.before.label,
        }

    def requests(self) -> list[dict[str, Any]]:
        """The document requests not rejected, oldest first (``kb requests list``)."""
        with self.stores() as stores:
            rows = stores.catalog().list_document_requests()
        return [request_json(r) for r in rows if r.status != request_jobs.REJECTED]

    def tasks(self) -> list[dict[str, object]]:
        """The worker's tasks, newest first."""
        return [t.as_dict() for t in self.worker.tasks()]

    # --- actions ---------------------------------------------------------------------------
    def retry(self, run_id: str) -> Task:
        """Queue the re-execution of failed run ``run_id`` from its failed step
        (``operations.retry_failed``: the steps that succeeded are not run again).

        Raises:
            ValueError: no such run, or it did not fail (nothing to resume).
        """
        run = self.instance.get_run_by_id(run_id)
        if run is None:
            raise ValueError(f"no run {run_id!r} in this Dagster instance")
        if run.status != dg.DagsterRunStatus.FAILURE:
            raise ValueError(
                f"run {run_id} did not fail ({run.status.value.lower()}); nothing to retry"
            )
        doc = run.tags.get(PARTITION_TAG)

        def work() -> str:
            result = operations.retry_failed(self.instance, run_id, job=self.job)
            if result.success:
                return f"ready (run {result.run_id})"
            raise RuntimeError(f"{operations.failure_reason(result)} (run {result.run_id})")

        label = f"retry {doc or run_id} from the failed step"
        return self.worker.submit("retry", label, work, doc_id=doc)

    def rebuild(self, ref: str, asset: str) -> Task:
        """Queue a rebuild of ``asset`` (and ``record``) for a document (``kb rebuild``):
        nothing upstream runs. A document that is not ready qualifies when the other assets
        all have stored outputs (``missing_inputs``), e.g. after a failed rebuild.

        Raises:
            ValueError: ``asset`` is not rebuildable, or the document lacks the stored outputs
                the rebuild reads.
            DocumentNotFoundError: no such document.
        """
        selection = operations.rebuild_selection(asset)
        with self.stores() as stores:
            row = operations.resolve_document(stores, ref)
        missing = self.missing_inputs(row.doc_id, asset)
        if row.status != DocumentStatus.READY and missing:
            reason = f" ({row.failure_reason})" if row.failure_reason else ""
            raise ValueError(
                f"{row.name} is {row.status}{reason}: a rebuild re-runs one asset from the stored "
                f"outputs of the others, and {', '.join(missing)} have none yet; retry the failed "
                "run instead"
            )
        return self.worker.submit(
            "rebuild", f"rebuild {asset} of {row.name}",
            lambda: self._run(row.doc_id, assets=selection, force=(asset,)), doc_id=row.doc_id,
        )

    def missing_inputs(self, doc_id: str, asset: str) -> list[str]:
        """The corpus assets besides ``asset`` and ``record`` that have no materialisation for
        ``doc_id``: what a rebuild of ``asset`` would lack (``obligations`` and ``changes``
        write the catalog and no step reads their output, so they are never lacking)."""
        unread = (asset, RECORD, OBLIGATIONS, CHANGES)
        needed = [a for a in CORPUS_ASSETS if a not in unread]
        missing = []
        for name in needed:
            states = self.instance.get_status_by_partition(
                dg.AssetKey(name), [doc_id], documents_partitions
            ) or {}
            if states.get(doc_id) != dg.AssetPartitionStatus.MATERIALIZED:
                missing.append(name)
        return missing

    def delete(self, ref: str) -> operations.DeleteReport:
        """Remove a document everywhere (``operations.delete_document``, ``kb delete``); its
        build card keeps its name (``builds``).

        Raises:
            DocumentNotFoundError: no such document.
            DocumentBusyError: a live run builds it (the page answers 409).
        """
        with self.stores() as stores:
            report = operations.delete_document(stores, self.instance, ref)
        self._names[report.doc_id] = report.name
        return report

    def approve(self, request_id: int, *, url: str | None = None, name: str | None = None) -> Task:
        """Queue the approval of request ``request_id`` (``request_jobs.approve_request``:
        download through the safe fetcher, admit); an added document is then built as an
        upload is (module docstring), a download already in the corpus is skipped (the task
        is done and says so).

        Raises:
            RequestNotFoundError: no such request (checked before queueing).
        """
        with self.stores() as stores:
            request_jobs.find_request(stores.catalog(), request_id)

        def work() -> str:
            with self._admitting, self.stores() as stores:
                approval = request_jobs.approve_request(
                    request_id, stores, self.instance, url=url, name=name
                )
            outcome = approval.outcome
            if approval.already_present:  # skipped, not failed (request_jobs)
                return f"skipped: already present as {outcome.doc_id}; nothing added"
            if not approval.added or outcome.doc_id is None:
                raise RuntimeError(f"request #{request_id} failed: {outcome.reason}")
            if self.build_uploads:
                self.build(outcome.doc_id, outcome.name, outcome.version)
            return f"added {outcome.name} as {outcome.doc_id}"

        return self.worker.submit("approve", f"approve request #{request_id}", work)

    def reject(self, request_id: int, reason: str) -> dict[str, Any]:
        """Reject request ``request_id`` with ``reason`` (``request_jobs.reject_request``).

        Raises:
            RequestNotFoundError, RequestRefusedError, ValueError: as ``reject_request``.
        """
        with self.stores() as stores:
            return request_json(request_jobs.reject_request(stores.catalog(), request_id, reason))
