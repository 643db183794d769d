"""Jobs: the per-document build and the Launchpad intake."""


from pathlib import Path

import dagster as dg
from pydantic import Field

from kb_assets.constants import ADD_JOB, BUILD_JOB, CORPUS_GROUP, DOCUMENTS
from kb_assets.intake import ADDED, intake_files
from kb_assets.resources import StoresResource


@dg.failure_hook(required_resource_keys={"stores"})
def record_build_failure(context: dg.HookContext) -> None:
    """Mark the document failed in the catalog with the step and its error, so ``kb status``
    and ``list_documents`` say why a build stopped."""
    run = context.instance.get_run_by_id(context.run_id)
    doc = run.tags.get("dagster/partition") if run else None
    if not doc:
        return
    error = context.op_exception
    reason = getattr(error, "description", None) or str(error) or type(error).__name__
    stores: StoresResource = context.resources.stores
    catalog = stores.catalog()
    if catalog.find_by_doc_id(doc) is not None:
        catalog.mark_failed(doc, f"{context.step_key}: {reason}")


build_documents_job = dg.define_asset_job(
    BUILD_JOB,
    selection=dg.AssetSelection.groups(CORPUS_GROUP),
    description="Build one document: markdown, chunks, embeddings, graph, figures, record.",
    hooks={record_build_failure},
)


class AddDocumentsConfig(dg.Config):
    """Launchpad config: server-side paths (files or folders) to add.

    The Dagster UI cannot send file bytes, so the files must already be on the machine that
    runs the code location (e.g. a shared folder).
    """

    paths: list[str] = Field(description="Files or folders on the server, e.g. /data/pdfs")


@dg.op(description="Apply the intake rules to the given paths and add the accepted files.")
def add_documents_op(
    context: dg.OpExecutionContext, config: AddDocumentsConfig, stores: StoresResource
) -> dg.Output[list[str]]:
    """Run the shared intake, add a partition per accepted file, and report every outcome.

    The ``intake_sensor`` then requests a build run for each new (pending) document.
    """
    missing = [p for p in config.paths if not Path(p).exists()]
    if missing:
        context.log.warning("not found on the server: %s", ", ".join(missing))
    outcomes = intake_files(config.paths, stores.catalog(), stores.blobs(), stores.settings)
    added = [o.doc_id for o in outcomes if o.status == ADDED and o.doc_id]
    if added:
        context.instance.add_dynamic_partitions(DOCUMENTS, added)
    for outcome in outcomes:
        line = f"{outcome.status}: {outcome.name}" + (
            f" ({outcome.reason})" if outcome.reason else f" -> {outcome.doc_id}"
        )
        (context.log.info if outcome.status == ADDED else context.log.warning)(line)
    table = "| file | status | id | reason |\n|---|---|---|---|\n" + "\n".join(
        f"| {o.name} | {o.status} | {o.doc_id or ''} | {o.reason} |" for o in outcomes
    )
    return dg.Output(
        added,
        metadata={
            "added": len(added),
            "duplicates": sum(o.status == "duplicate" for o in outcomes),
            "refused": sum(o.status == "refused" for o in outcomes),
            "outcomes": dg.MetadataValue.md(table),
        },
    )


@dg.job(name=ADD_JOB, description="Add PDFs from server-side paths (Launchpad config).")
def add_documents_job() -> None:
    """One op: ``add_documents_op``."""
    add_documents_op()
