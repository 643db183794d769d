"""Reviewing the document-request queue (MCP tool ``request_document``): approve or reject a
request, from ``kb requests`` (``kb_assets.cli.requests``) or as the
``approve_document_request`` job from the Launchpad.

Approving is the only thing that downloads, and it re-derives everything instead of trusting
the request (issue 12, "request_document (MCP) and the review queue"; mcp-utilities README):
the URL is the operator's or else the request's, the name the operator's or else the
download's, the download goes through the safe fetcher and the bytes through the same
admission as any file (``kb_assets.url_intake.admit_sources``). An added document marks the
request ``approved`` with its ``doc_id``; then a build run makes it searchable and the run's id
is recorded too. A download whose content the corpus already holds (``held_by``: the same
file, or the same content under another name) is skipped, not failed: nothing is added and
the request is ``approved`` with that document's ``doc_id``. A refused or failed download, or
another refused admission (a name clash included: new content under a known name), flips
the request to ``failed`` with the reason, and leaves no catalog row, blob or partition.
"""

# No `from __future__ import annotations` in asset, op and sensor modules: Dagster reads the
# parameter annotations as classes when it decorates them, to find config and resources.

import logging
from dataclasses import dataclass

import dagster as dg
from pydantic import Field

from kb_assets.constants import DocumentStatus
from kb_assets.intake import IntakeOutcome, IntakeStatus
from kb_assets.url_intake import admit_sources, is_url
from kb_assets.resources import StoresResource
from kb_shared.errors import IntakeError, RequestNotFoundError, RequestRefusedError
from kb_shared.identity import normalize_name
from kb_shared.stores.catalog import Catalog, DocumentRequestRow, DocumentRow

log = logging.getLogger(__name__)

#: The Dagster job that approves one request.
APPROVE_JOB = "approve_document_request"

#: Request statuses (``kb_shared.stores.catalog.REQUEST_STATUSES``).
PENDING, APPROVED, REJECTED, FAILED = "pending", "approved", "rejected", "failed"


@dataclass(frozen=True)
class Approval:
    """What approving a request did.

    Attributes:
        request: the request row after the decision (``approved`` or ``failed``).
        outcome: what the intake made of the download.
        url: the URL that was downloaded (the operator's or the request's).
        already_present: the download was skipped because the corpus holds its content
            (``held_by``): the request is approved with ``outcome.doc_id``, nothing needs a
            build.
    """

    request: DocumentRequestRow
    outcome: IntakeOutcome
    url: str
    already_present: bool = False

    @property
    def added(self) -> bool:
        """Whether a document was added (and so needs a build)."""
        return self.outcome.status == IntakeStatus.ADDED


def held_by(outcome: IntakeOutcome, catalog: Catalog) -> DocumentRow | None:
    """The catalogued document that already holds the content of a file intake did not add,
    or ``None``: for a ``duplicate`` that is no name clash (the file as it is) the document
    it names; for a ``refused`` file the document it names when that document has another
    name, which only identical content refuses (``kb_assets.intake``: "identical content is
    already in the corpus as …"; a refusal under the file's own name is a version still
    waiting to be built). A name clash (new content under a known name: ``IntakeStatus``) and
    a document being deleted hold nothing."""
    if outcome.doc_id is None or outcome.status == IntakeStatus.ADDED or outcome.name_clash:
        return None
    row = catalog.find_by_doc_id(outcome.doc_id)
    if row is None or row.status == DocumentStatus.DELETING:
        return None
    if outcome.status == IntakeStatus.DUPLICATE:
        return row
    return row if normalize_name(row.name) != normalize_name(outcome.name) else None


def find_request(catalog: Catalog, request_id: int) -> DocumentRequestRow:
    """The document request with ``request_id``.

    Raises:
        RequestNotFoundError: no such request; the message says how to list them.
    """
    for row in catalog.list_document_requests():
        if row.id == request_id:
            return row
    raise RequestNotFoundError(f"no document request #{request_id}; `kb requests list --all` lists them")


def approve_request(
    request_id: int,
    stores: StoresResource,
    instance: dg.DagsterInstance,
    *,
    url: str | None = None,
    name: str | None = None,
    new_version: bool = False,
) -> Approval:
    """Approve request ``request_id``: download ``url`` (default: the request's source URL)
    and admit it under ``name`` (default: the download's name); with ``new_version`` a name
    already in the corpus is admitted as that document's next version
    (``kb_assets.intake``, "New versions"). The request becomes
    ``approved`` with the new ``doc_id`` (or, for a download whose content the corpus already
    holds, with that document's: ``held_by``), or ``failed`` with the reason the
    download or the admission gave; the caller builds an added document and records the run
    (``record_build``).

    Raises:
        RequestNotFoundError: no such request.
        RequestRefusedError: the request is already approved, or there is no URL to download
            (neither given nor on the request), or ``url`` is not a URL; the request is
            unchanged.
        IntakeError: the catalog or the Dagster instance failed during admission; the
            request is marked failed with that reason when the catalog still answers.
    """
    catalog = stores.catalog()
    request = find_request(catalog, request_id)
    if request.status == APPROVED:
        raise RequestRefusedError(
            f"request #{request_id} is already approved (document {request.doc_id}); nothing to do"
        )
    target = (url or request.source_url or "").strip()
    if not target:
        raise RequestRefusedError(
            f"request #{request_id} carries no source URL; find the PDF and approve it with "
            f"`kb requests approve {request_id} --url https://…`"
        )
    if not is_url(target):
        raise RequestRefusedError(f"{target!r} is not a URL; approving downloads an https URL")
    try:
        (outcome,) = admit_sources([target], stores, instance, name=name, new_version=new_version)
    except IntakeError as error:
        _fail_quietly(catalog, request_id, str(error))
        raise
    present = held_by(outcome, catalog) is not None
    if outcome.status == IntakeStatus.ADDED or present:
        decided = catalog.set_document_request_status(request_id, APPROVED, doc_id=outcome.doc_id)
    else:
        decided = catalog.set_document_request_status(request_id, FAILED, outcome.reason)
    return Approval(decided, outcome, target, already_present=present)


def record_build(
    catalog: Catalog, request_id: int, doc_id: str, run_id: str
) -> DocumentRequestRow:
    """Record on an approved request the Dagster run that built (or admitted) its document."""
    return catalog.set_document_request_status(request_id, APPROVED, doc_id=doc_id, run_id=run_id)


def reject_request(catalog: Catalog, request_id: int, reason: str) -> DocumentRequestRow:
    """Reject request ``request_id`` with ``reason`` (shown with ``kb requests list --all``).

    Raises:
        RequestNotFoundError: no such request.
        RequestRefusedError: it is already approved (its document is in the corpus; delete
            the document instead).
        ValueError: an empty reason.
    """
    request = find_request(catalog, request_id)
    if request.status == APPROVED:
        raise RequestRefusedError(
            f"request #{request_id} is already approved (document {request.doc_id}); "
            f"`kb delete {request.doc_id}` removes the document"
        )
    return catalog.set_document_request_status(request_id, REJECTED, reason)


def _fail_quietly(catalog: Catalog, request_id: int, reason: str) -> None:
    """Mark the request failed; if the catalog cannot take even that, the caller's error
    (which says why) is what the operator sees."""
    try:
        catalog.set_document_request_status(request_id, FAILED, reason)
    except Exception:  # noqa: BLE001 - the admission error being raised says what went wrong
        log.warning("could not mark request #%d failed", request_id, exc_info=True)


# --- the Dagster job ---------------------------------------------------------------------------


class ApproveRequestConfig(dg.Config):
    """Launchpad config: the request to approve, and optionally the URL and name to use."""

    request_id: int = Field(
        description="The request's id, as `kb requests list` shows it (e.g. 12).", ge=1
    )
    url: str | None = Field(
        None,
        description=(
            "An https URL of the PDF to use instead of the request's own source URL, e.g. "
            "https://www.aemo.com.au/-/media/files/b2b-procedure-v3.2.pdf (required when the "
            "request has none)."
        ),
    )
    name: str | None = Field(
        None,
        description=(
            "The document name, e.g. 'B2B Procedure v3.2.pdf' (default: the name the download "
            "comes with; .pdf is added if missing)."
        ),
    )
    new_version: bool = Field(
        False,
        description=(
            "The download is a new version of the document of that name already in the corpus "
            "(rebuilt from it; the current version is served until the new one is ready). "
            "Without it such a name fails the request as a duplicate."
        ),
    )


@dg.op(description="Download the request's PDF through the safe fetcher and admit it.")
def approve_document_request_op(
    context: dg.OpExecutionContext, config: ApproveRequestConfig, stores: StoresResource
) -> dg.Output[str]:
    """Approve one request (``approve_request``) and record this run on it; the intake
    sensor then requests the document's build run, as for every added document. A download
    the corpus already holds is skipped (logged; the run succeeds, nothing is added).

    Raises:
        dagster.Failure: the request is refused or its download/admission failed (the
            request is then ``failed`` with the same reason).
    """
    try:
        approval = approve_request(
            config.request_id, stores, context.instance, url=config.url, name=config.name,
            new_version=config.new_version,
        )
    except (RequestNotFoundError, RequestRefusedError, IntakeError) as error:
        raise dg.Failure(description=str(error)) from error
    outcome = approval.outcome
    if approval.already_present:
        assert outcome.doc_id is not None
        context.log.warning(
            "request #%d skipped: %s (%s); approved with %s", config.request_id,
            outcome.reason, approval.url, outcome.doc_id,
        )
        return dg.Output(
            outcome.doc_id,
            metadata={"request_id": config.request_id, "url": approval.url, "skipped": True,
                      "reason": outcome.reason},
        )
    if not approval.added:
        raise dg.Failure(
            description=f"request #{config.request_id} failed: {outcome.reason}",
            metadata={"url": approval.url},
        )
    assert outcome.doc_id is not None
    record_build(stores.catalog(), config.request_id, outcome.doc_id, context.run_id)
    context.log.info(
        "request #%d approved: %s added as %s", config.request_id, approval.url, outcome.doc_id
    )
    return dg.Output(
        outcome.doc_id,
        metadata={"request_id": config.request_id, "url": approval.url, "name": outcome.name},
    )


@dg.job(
    name=APPROVE_JOB,
    description=(
        "Approve a document request (MCP request_document): download its PDF through the safe "
        "fetcher, admit it like any file, and let the intake sensor build it. Launchpad "
        "config, e.g.\n\n```yaml\nops:\n  approve_document_request_op:\n    config:\n"
        "      request_id: 12\n      url: https://www.aemo.com.au/-/media/files/b2b.pdf\n```"
    ),
)
def approve_document_request_job() -> None:
    """One op: ``approve_document_request_op``."""
    approve_document_request_op()
