"""The ``record`` asset: the document's catalog row, marked ready with its counts, and the
switch to the version this build made.

Versions (issue 12, "New versions of a document"). Invariant: search serves exactly one
version of a document, the catalog's ``serving`` one, and its data is complete.

* Every step of a build writes under the version's key (``kb_shared.identity.version_key``):
  chunk and figure ids, the ``document`` of points, the ``sourceDoc`` of edges, the blob keys
  of its file and figures. A new version is therefore built beside the served one, and
  nothing it writes is served: readers filter every search to the catalog's serving keys
  (``kb_mcp.documents.served_documents``) whenever a document has more than one version.
* This step is the switch: ``Catalog.record_version`` makes the built version ``serving`` and
  the previous one ``superseded`` in one transaction, so a reader sees the old version or the
  new one, never both or neither. Only then are the older versions' points, edges, figures
  and obligations removed (their catalog rows stay as history); a pending version, and a
  newer failed one (a rebuild of the served version while a new version waits to be retried),
  are left alone. A superseded version keeps its file and its change snapshot: they are the
  "before" side of what changed (issue 27, ``changes`` asset); an older failed version's file
  is removed. A store that fails during the removal does not undo the switch: the step
  succeeds with a warning, and the next ``kb build`` or intake-sensor tick removes what is
  left (``kb_assets.operations.recover_interrupted``).
* A build that fails before this step changes nothing that is served: the failure hook
  (``kb_assets.jobs.record_build_failure``) marks the version ``failed`` with its reason, and
  the version served before it still is.

A search whose catalog read comes before the switch and whose index read comes after the
removal (the span of one query) finds no passage of that document; it never mixes versions.
"""

# No `from __future__ import annotations` in asset, op and sensor modules: Dagster reads the
# parameter annotations as classes when it decorates them, to find config and resources.

import dagster as dg

from kb_assets.assets.common import corpus_asset, version_of
from kb_assets.constants import (
    CHANGES,
    EMBEDDINGS,
    FIGURES,
    GRAPH,
    MARKDOWN,
    OBLIGATIONS,
    RECORD,
)
from kb_assets.io_manager import StepRecords
from kb_assets.outputs import MarkdownDocument, StepSummary
from kb_assets.resources import StoresResource
from kb_shared import layout
from kb_shared.errors import StoreError
from kb_shared.stores.catalog import DocumentVersionRow, VersionStatus


@corpus_asset(
    RECORD,
    kinds={"sql"},
    inputs={"document": MARKDOWN, "embedded": EMBEDDINGS, "graphed": GRAPH, "figured": FIGURES},
    after=[OBLIGATIONS, CHANGES],  # served with the version it switches to
    stored=False,
    description=(
        "The catalog row: name, doc_id, title, version, pages, chunk/figure/entity/"
        "relationship counts, size, sha256, blob and Markdown keys, timestamps. A new version "
        "of a document is switched to here, and its earlier versions' stored data removed."
    ),
)
def record(
    context: dg.AssetExecutionContext,
    stores: StoresResource,
    document: MarkdownDocument,
    embedded: StepSummary,
    graphed: StepSummary,
    figured: StepSummary,
) -> dg.MaterializeResult:
    """Write the ready row and serve the version this build made (the document becomes
    visible to ``list_documents``, or its new version replaces the old one in search), then
    remove the other versions' stored data (module docstring).

    Raises:
        dagster.Failure: a step's stored output (``StepSummary.details["key"]``) is of
            another version than the Markdown (a partial rebuild after a failed new version);
            the steps this one runs after (obligations, changes) are read from their stored
            outputs.
    """
    version = version_of(stores, document)
    records = StepRecords(stores.blobs())
    after = [(step, records.previous_summary(step, document.doc_id))
             for step in (OBLIGATIONS, CHANGES)]
    steps = [(EMBEDDINGS, embedded), (GRAPH, graphed), (FIGURES, figured), *after]
    other = [
        step
        for step, summary in steps
        if (summary.details.get("key", document.doc_id) if summary else document.doc_id)
        != version.key
    ]
    if other:
        raise dg.Failure(
            description=(
                f"the stored {', '.join(other)} output of {document.doc_id!r} belongs to another "
                f"version than its Markdown (version {version.version}); build every step: "
                f"`kb build {document.doc_id}`"
            ),
            allow_retries=False,
        )
    fields = {
        "title": document.title,
        "version": document.version,
        "pages": document.pages,
        "chunk_count": embedded.counts.get("chunks", 0),
        "figure_count": figured.counts.get("figures", 0),
        "entity_count": graphed.counts.get("entities", 0),
        "relationship_count": graphed.counts.get("relationships", 0),
        "markdown_key": layout.markdown_key(document.doc_id),
        "converter": document.converter,
        "embedding_model": embedded.details.get("model", ""),
    }
    row, others = stores.catalog().record_version(document.doc_id, version.version, **fields)
    older = [
        v for v in others if v.status != VersionStatus.PENDING and v.version < version.version
    ]
    try:
        removed = remove_version_data(stores, older)
    except (StoreError, OSError) as error:  # switched: what is left goes at the next recovery
        context.log.warning(
            "%s: version %d serves; removing the older versions' data failed (%s); the next "
            "`kb build` or intake-sensor tick removes it", row.doc_id, version.version, error,
        )
        removed = ""
    if removed:
        context.log.info("%s: removed the stored data of version(s) %s", row.doc_id, removed)
    return dg.MaterializeResult(
        metadata={
            "name": row.name,
            "doc_id": row.doc_id,
            "sha256": row.sha256,
            "size_bytes": row.size_bytes,
            "document_version": version.version,
            **{k: v for k, v in fields.items() if v is not None},
        }
    )


def versions_with_data_left(
    stores: StoresResource, versions: list[DocumentVersionRow]
) -> list[DocumentVersionRow]:
    """Those of ``versions`` (none served) that still hold what ``remove_version_data``
    removes: a switch killed before its removal ended. Points, edges, figure renders and
    obligations count, and a failed version's file; a superseded version's file does not (it
    is kept: module docstring). Reads only; the stores' own errors pass through."""
    if not versions:
        return []
    index = stores.existing_vectors()
    graph = stores.graph()
    graph.ensure_schema(None)
    blobs = stores.blobs()
    catalog = stores.catalog()

    def left(version: DocumentVersionRow) -> bool:
        return (
            (version.status == VersionStatus.FAILED and blobs.exists(version.blob_key))
            or (index is not None and index.count(version.key) > 0)
            or catalog.obligation_count(version.key) > 0
            or bool(blobs.list(layout.figures_prefix(version.key)))
            or graph.counts(version.key).relationships > 0
        )

    return [version for version in versions if left(version)]


def remove_version_data(stores: StoresResource, versions: list[DocumentVersionRow]) -> str:
    """Delete the points, edges (then orphan entities), figure renders and obligations of each
    of ``versions`` (none of them served), and the file of a failed one (a superseded version
    keeps its file: module docstring); their catalog rows stay. Returns the version numbers
    that had something to remove, comma-separated ("" when none had)."""
    index = stores.existing_vectors()
    graph = stores.graph()
    graph.ensure_schema(None)
    blobs = stores.blobs()
    touched: list[str] = []
    for version in versions:
        count = index.delete_document(version.key) if index is not None else 0
        count += graph.delete_document(version.key).relationships
        count += blobs.delete_prefix(layout.figures_prefix(version.key))
        if version.status == VersionStatus.FAILED:
            count += int(blobs.delete(version.blob_key))
        count += stores.catalog().delete_obligations(version_key=version.key)
        if count:
            touched.append(str(version.version))
    return ", ".join(touched)
