"""The ``changes`` asset: what changed since the document's previous issue (issue 27) — its
previous version, or for a first version the edition it is an edition of
(``Catalog.previous_issue``).

Each build stores the version's *snapshot* (its sections and sentences with their pages,
``kb_shared.compliance.changes.Snapshot``) under ``layout.snapshot_key(version key)``; snapshots outlive
their version (``record`` removes an old version's points and file, not its snapshot), so the
next issue can be compared with it. The comparison (``kb_shared.compliance.changes.compare``) is filed in
the catalog (``catalog/changes.py``) for ``compare_versions`` and ``kb diff`` to read.

A previous issue built before snapshots existed has none: an edition that is still served is
snapshotted from its stored chunks; an earlier version of the same document (whose chunks the
new build has replaced) cannot be, and the step says so in its metadata and files no changes.
Rebuilding only this asset re-compares (``kb rebuild changes DOC``).
"""

# No `from __future__ import annotations` in asset, op and sensor modules: Dagster reads the
# parameter annotations as classes when it decorates them, to find config and resources.

import time

import dagster as dg

from kb_assets.assets.common import (
    check_chunks_of,
    corpus_asset,
    timing,
    version_of,
)
from kb_assets.constants import CHANGES, CHUNKS, MARKDOWN
from kb_assets.io_manager import chunks_from_parquet
from kb_assets.outputs import MarkdownDocument, StepSummary
from kb_assets.resources import StoresResource
from kb_shared import layout
from kb_shared.compliance.changes import Snapshot, compare
from kb_shared.ingest.chunking import Chunk
from kb_shared.identity import version_key


def previous_snapshot(stores: StoresResource, doc_id: str, version: int) -> Snapshot | None:
    """The stored snapshot of ``doc_id``'s ``version``; for a served edition without one (built
    before snapshots existed), one made from its stored chunks (and stored); else ``None``."""
    blobs = stores.blobs()
    key = version_key(doc_id, version)
    if blobs.exists(layout.snapshot_key(key)):
        return Snapshot.from_json(blobs.get(layout.snapshot_key(key)))
    row = stores.catalog().find_by_doc_id(doc_id)
    chunks_at = layout.chunks_key(doc_id)
    if row is None or not blobs.exists(chunks_at):
        return None
    stored = chunks_from_parquet(blobs.get(chunks_at))
    if not stored or any(c.document != key for c in stored):  # the chunks of another version
        return None
    snapshot = Snapshot.from_chunks(doc_id, version, row.name, stored)
    blobs.put(layout.snapshot_key(key), snapshot.to_json())
    return snapshot


@corpus_asset(
    CHANGES,
    kinds={"sql"},
    inputs={"document": MARKDOWN, "chunk_list": CHUNKS},
    description=(
        "What changed since the previous issue (the previous version, or the edition this one "
        "follows): sections matched by heading and content, sentence-level differences, each "
        "flagged when it touches an obligation or a number; filed in the catalog for "
        "compare_versions and `kb diff`. Stores this version's snapshot for the next issue."
    ),
)
def changes(
    context: dg.AssetExecutionContext,
    stores: StoresResource,
    document: MarkdownDocument,
    chunk_list: list[Chunk],
) -> dg.Output[StepSummary]:
    """Store this version's snapshot, compare it with the previous issue's and file the
    changes (replacing any filed for this version), or file none when there is no previous
    issue or its snapshot is gone.

    Raises:
        dagster.Failure: the chunks are of another version (``check_chunks_of``).
    """
    started = time.perf_counter()
    version = version_of(stores, document)
    check_chunks_of(version, chunk_list)
    snapshot = Snapshot.from_chunks(version.doc_id, version.version, version.name, chunk_list)
    stores.blobs().put(layout.snapshot_key(version.key), snapshot.to_json())
    catalog = stores.catalog()
    previous = catalog.previous_issue(version.doc_id, version.version)
    summary: dict[str, int] = {}
    note = ""
    if previous is None:
        catalog.clear_changes(version.doc_id, version.version)
        note = "no previous issue: nothing to compare"
    else:
        before = previous_snapshot(stores, *previous)
        if before is None:
            catalog.clear_changes(version.doc_id, version.version)
            note = (
                f"the previous issue ({previous[0]} version {previous[1]}) was built before kb "
                "kept snapshots, and its text is gone: no comparison"
            )
        else:
            found = compare(before, snapshot)
            catalog.replace_changes(version.doc_id, version.version, *previous, found)
            summary = found.summary
            note = f"compared with {previous[0]} version {previous[1]}"
    context.log.info("%s: %s", version.key, note)
    seconds = time.perf_counter() - started
    return dg.Output(
        StepSummary(
            doc_id=document.doc_id,
            counts={"changes": sum(summary.get(k, 0) for k in ("added", "removed", "changed",
                                                               "moved"))},
            details={"key": version.key, "previous": list(previous) if previous else None,
                     "summary": summary},
        ),
        metadata={
            "previous_issue": f"{previous[0]} v{previous[1]}" if previous else "none",
            "comparison": note,
            "sections": len(snapshot.sections),
            **{k: v for k, v in summary.items()},
            **timing(seconds, document.pages),
        },
    )
