"""Jobs: the per-document build (with the failure hook, the one writer of a failure reason),
the intake run (``add_documents``: the Launchpad, and the inbox sensor's requests), the
resource set every job runs on (``kb_resources``) and ``build_job``, the build job resolved
for runs the CLI, the upload page and batches start (``dagster.reconstructable``).

``kb_assets.definitions`` assembles the code location from these; nothing imports it."""

# No `from __future__ import annotations` in asset, op and sensor modules: Dagster reads the
# parameter annotations as classes when it decorates them, to find config and resources.

import functools
import shutil
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from kb_assets.constants import (
    ADD_JOB,
    BLOB_IO,
    BUILD_JOB,
    CORPUS_GROUP,
    INBOX_ADDED,
    INBOX_REFUSED,
    PARTITION_TAG,
)
from kb_assets.intake import IntakeOutcome, IntakeStatus, previous_edition
from kb_assets.url_intake import admit_sources, is_url
from kb_assets.assets import CORPUS_ASSETS
from kb_assets.assets.common import failure_text, version_being_built
from kb_assets.io_manager import BlobIOManager
from kb_assets.market.resources import NotionResource
from kb_assets.resources import Providers, ProvidersResource, StoresResource
from kb_shared.stores.catalog.documents import normalize_category


@dg.failure_hook(required_resource_keys={"stores"})
def record_build_failure(context: dg.HookContext) -> None:
    """Record in the catalog why a build stopped (the step and its error: ``failure_text``),
    so ``kb status``, ``kb versions`` and ``list_documents`` say so. The version being built
    (``version_being_built``: a new version, or the served one a partial rebuild worked on) is
    marked failed; the document too when none of its versions is served (a first build) or
    the served one was being rebuilt, else the served version stays served
    (``Catalog.fail_version``). A batched run's steps record their documents' failures
    themselves (``batch.record_document_failure``)."""
    run = context.instance.get_run_by_id(context.run_id)
    doc = run.tags.get(PARTITION_TAG) if run else None
    if not doc:
        return
    stores: StoresResource = context.resources.stores
    version = version_being_built(stores, doc, context.step_key)
    if version is not None:
        stores.catalog().fail_version(
            doc, version.version, failure_text(context.step_key, context.op_exception)
        )


build_documents_job = dg.define_asset_job(
    BUILD_JOB,
    selection=dg.AssetSelection.groups(CORPUS_GROUP),
    description=(
        "Build one document: markdown, chunks, obligations, changes, embeddings, graph, "
        "figures, record."
    ),
    hooks={record_build_failure},
)


class AddDocumentsConfig(dg.Config):
    """Launchpad config: server-side paths (files or folders) and https URLs of PDFs to add.

    The Dagster UI cannot send file bytes, so a file must already be on the machine that runs
    the code location (e.g. a shared folder), or be reachable by an https URL, which the run
    downloads through the safe fetcher (``kb_assets.url_intake.admit_sources``).
    """

    paths: list[str] = Field(
        description=(
            "What to add, one entry each: a file or folder on the server (e.g. /data/pdfs) or "
            "an https URL of a PDF (e.g. https://www.aemo.com.au/-/media/files/procedure.pdf). "
            "A URL is downloaded first (public https hosts only, a PDF under "
            "KB_MAX_UPLOAD_BYTES) and added under the file name it comes with."
        )
    )
    name: str | None = Field(
        None,
        description=(
            "Optional: the document name for a single URL in paths, e.g. 'B2B Procedure "
            "v3.2.pdf' (default: the name the download comes with; .pdf is added if missing)."
        ),
    )
    category: str | None = Field(
        None,
        description=(
            "Optional: the category of the added documents, e.g. 'aemo/procedures'. Files in "
            "subfolders of a folder in paths get their folder path below it added to it "
            "(without this, that folder path alone is their category)."
        ),
    )
    new_version: bool = Field(
        False,
        description=(
            "Add a file whose name is already in the corpus, with different content, as a new "
            "version of that document (rebuilt from it; the current version is served until "
            "the new one is ready). Without it such a file is reported as a duplicate."
        ),
    )
    edition_of: str | None = Field(
        None,
        description=(
            "Optional: the file name or doc_id of the document whose next edition the one "
            "document in paths is (a new issue under a new name, e.g. next year's Notice to "
            "Market); the two are then compared. Not with new_version."
        ),
    )
    from_inbox: bool = Field(
        False,
        description=(
            "The paths are files in KB_HOME/inbox (the intake sensor sets this): move each to "
            "inbox/added, or to inbox/refused with a .reason.txt."
        ),
    )


#: Why the inbox refuses a symbolic link: whoever may drop files there could otherwise have kb
#: store and serve any file the server can read (a link to its ``.env`` named ``notes.txt``).
INBOX_LINK_REASON = (
    "a symbolic link; the inbox takes files only: copy the file itself into the inbox"
)


@dg.op(description="Download the given URLs, apply the intake rules to them and the given paths, "
       "and add the accepted documents.")
def add_documents_op(
    context: dg.OpExecutionContext, config: AddDocumentsConfig, stores: StoresResource
) -> dg.Output[list[str]]:
    """Admit the files (catalog row, blob and partition each) and report every outcome; from
    the inbox a symbolic link is refused (``INBOX_LINK_REASON``) and filed away unread.

    The ``intake_sensor`` then requests a build run for each new (pending) document.
    """
    missing = [p for p in config.paths if not is_url(p) and not Path(p).exists()]
    if missing:
        context.log.warning("not found on the server: %s", ", ".join(missing))
    try:
        normalize_category(config.category)
    except ValueError as error:
        raise dg.Failure(description=f"category refused: {error}; nothing was added") from error
    try:
        previous_edition(stores, config.edition_of, config.new_version)
    except ValueError as error:
        raise dg.Failure(description=f"edition_of refused: {error}; nothing was added") from error
    paths, links = list(config.paths), []
    if config.from_inbox:  # a link dropped in the inbox would admit whatever it points to
        links = [p for p in paths if not is_url(p) and Path(p).is_symlink()]
        paths = [p for p in paths if p not in links]
    try:
        outcomes = admit_sources(
            paths, stores, context.instance, name=config.name, category=config.category,
            new_version=config.new_version, edition_of=config.edition_of,
        ) if paths else []
    except ValueError as error:
        fix = "remove name or list exactly one URL" if config.name else "nothing was added"
        raise dg.Failure(description=f"{error}; {fix}") from error
    outcomes += [
        IntakeOutcome(link, Path(link).name, IntakeStatus.REFUSED, reason=INBOX_LINK_REASON)
        for link in links
    ]
    if config.from_inbox:
        inbox = stores.settings.inbox.resolve()
        for outcome in outcomes:
            path = Path(outcome.path)
            if path.parent.resolve() == inbox and (path.is_file() or path.is_symlink()):
                file_away(path, inbox, outcome)
    added = [o.doc_id for o in outcomes if o.status == IntakeStatus.ADDED and o.doc_id]
    for outcome in outcomes:
        line = f"{outcome.label}: {outcome.name}" + (
            f" ({outcome.reason})" if outcome.reason else f" -> {outcome.doc_id}"
        )
        if outcome.version:
            line += f" (version {outcome.version})"
        if outcome.hint:
            line += f"; {outcome.hint}"
        (context.log.info if outcome.status == IntakeStatus.ADDED else context.log.warning)(line)
    table = "| file | status | id | reason |\n|---|---|---|---|\n" + "\n".join(
        f"| {o.name} | {o.label} | {o.doc_id or ''} | {o.reason} |" for o in outcomes
    )
    return dg.Output(
        added,
        metadata={
            "added": len(added),
            # a name clash (the name is taken by other content) is not a duplicate
            "duplicates": sum(
                o.status == IntakeStatus.DUPLICATE and not o.name_clash for o in outcomes
            ),
            "name_clashes": sum(o.name_clash for o in outcomes),
            "refused": sum(o.status == IntakeStatus.REFUSED for o in outcomes),
            "outcomes": dg.MetadataValue.md(table),
        },
    )


def file_away(path: Path, inbox: Path, outcome: IntakeOutcome) -> Path:
    """Move an inbox file the intake has decided to ``inbox/added`` or, with a
    ``<name>.reason.txt`` (``"<status>: <reason>"``), to ``inbox/refused``; a file of the same
    name there is replaced. Returns the new path."""
    added = outcome.status == IntakeStatus.ADDED
    folder = inbox / (INBOX_ADDED if added else INBOX_REFUSED)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / path.name
    if target.exists():
        target.unlink()
    shutil.move(str(path), target)
    if not added:
        note = folder / f"{path.name}.reason.txt"
        note.write_text(f"{outcome.status}: {outcome.reason}\n", encoding="utf-8")
    return target


@dg.job(
    name=ADD_JOB,
    description=(
        "Add documents from server-side paths or https URLs (Launchpad config), e.g.\n\n"
        "```yaml\nops:\n  add_documents_op:\n    config:\n      paths:\n"
        "        - /data/pdfs\n"
        "        - https://www.aemo.com.au/-/media/files/b2b-procedure-v3.2.pdf\n"
        "      category: aemo/procedures\n```"
    ),
)
def add_documents_job() -> None:
    """One op: ``add_documents_op``."""
    add_documents_op()


def kb_resources(
    stores: StoresResource, providers: Providers, notion: NotionResource | None = None
) -> dict[str, Any]:
    """The resource set of every job: ``stores``, ``providers``, ``blob_io`` on ``stores``
    and ``notion`` (default: from the environment); tests pass configured stores and fake
    providers here."""
    return {
        "stores": stores,
        "providers": providers,
        BLOB_IO: BlobIOManager(stores=stores),
        "notion": notion if notion is not None else NotionResource(),
    }


def launch_resources() -> dict[str, Any]:
    """``kb_resources`` as the code location and the runs kb starts use them: ``stores``
    configured at launch (from run config or the environment), providers and Notion from the
    environment."""
    return kb_resources(StoresResource.configure_at_launch(), ProvidersResource(), NotionResource())


@functools.cache
def _build_definitions() -> dg.Definitions:
    """The corpus assets and the build job on the environment's resources (``stores``
    configured at launch, as in the code location), once per process."""
    return dg.Definitions(
        assets=CORPUS_ASSETS,
        jobs=[build_documents_job],
        resources=launch_resources(),
        executor=dg.in_process_executor,
    )


def build_job() -> dg.JobDefinition:
    """The resolved build job; ``dagster.reconstructable(build_job)`` is what the CLI, the
    upload page and batches run with ``execute_job`` so runs land in the instance and can be
    re-executed from failure."""
    return _build_definitions().resolve_job_def(BUILD_JOB)
