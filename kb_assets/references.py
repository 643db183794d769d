"""Registered live reference pages (MCP ``add_reference`` / ``find_reference``): the
``reference_sensor``, the ``index_references`` job it requests, and removal.

What is indexed is a descriptor — title, description and URL, as the caller wrote them —
never the page's text, so a queued page is registered without review: the job records every
pending request in ``reference_sources`` (status ``approved``) and upserts one point of kind
``reference`` per page (id ``identity.reference_id(n)``, document ``REFERENCE_DOCUMENT``).
Nothing is downloaded. An operator removes a page with ``kb references remove ID``
(``kb_assets.cli.references``). Each run also re-indexes a registered page whose point is
missing (after ``kb rebuild embeddings --all --reset``) and deletes a point whose page is gone,
so the index holds exactly one point per registered page. Issue 12, "find_reference /
add_reference".
"""

# No `from __future__ import annotations` in asset, op and sensor modules: Dagster reads the
# parameter annotations as classes when it decorates them, to find config and resources.

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg

from kb_assets.resources import Providers, StoresResource
from kb_shared.identity import REFERENCE_DOCUMENT, reference_id
from kb_shared.providers.base import Embedder
from kb_shared.stores.catalog import ReferenceSourceRow
from kb_shared.stores.vectors import KIND_REFERENCE, Point, VectorIndex

#: The Dagster job that indexes the queue.
INDEX_JOB = "index_references"

#: Seconds between sensor ticks (two catalog queries and one id listing each).
SENSOR_INTERVAL = 30


@dataclass(frozen=True)
class ReferenceSync:
    """What one ``index_references`` did.

    Attributes:
        registered: the pages registered (or re-described) from pending requests.
        restored: registered pages whose missing point was indexed again.
        deleted: points of pages no longer registered, deleted.
    """

    registered: tuple[ReferenceSourceRow, ...]
    restored: tuple[ReferenceSourceRow, ...]
    deleted: int


def descriptor_text(source: ReferenceSourceRow) -> str:
    """What a page's point embeds and stores: title, description and URL, a blank line apart."""
    return f"{source.title}\n\n{source.description}\n\n{source.url}"


def reference_points(
    sources: Sequence[ReferenceSourceRow], embedder: Embedder
) -> list[Point]:
    """One point of kind ``reference`` per page, embedded document-side in one batch; payload
    ``reference_id``, ``url``, ``title``, ``description`` (what find_reference returns).

    Raises:
        EmbeddingError: the embedder failed.
    """
    if not sources:
        return []
    texts = [descriptor_text(source) for source in sources]
    vectors = embedder.embed_documents(texts, [source.title for source in sources])
    return [
        Point(
            id=reference_id(source.id),
            document=REFERENCE_DOCUMENT,
            kind=KIND_REFERENCE,
            text=text,
            dense=vector,
            payload={
                "reference_id": source.id, "url": source.url, "title": source.title,
                "description": source.description,
            },
        )
        for source, text, vector in zip(sources, texts, vectors, strict=True)
    ]


def indexed_reference_ids(index: VectorIndex) -> set[str]:
    """The reference point ids the index holds."""
    return set(index.list_ids(REFERENCE_DOCUMENT, KIND_REFERENCE))


def index_references(stores: StoresResource, embedder: Embedder) -> ReferenceSync:
    """Register every pending reference request and make the index hold exactly one point per
    registered page (module docstring). Requests are marked ``approved`` only after their
    points are written, so a failed run leaves them pending for the next.

    Raises:
        EmbeddingError: the embedder failed (nothing was written to the index).
        EmbeddingMismatchError: the index holds another model's vectors.
    """
    catalog = stores.catalog()
    pending = catalog.list_reference_requests("pending")
    registered = [
        catalog.upsert_reference_source(r.url, r.title, r.description) for r in pending
    ]
    index = stores.vectors(embedder.model, embedder.dimension)
    present = indexed_reference_ids(index)
    fresh = {source.id for source in registered}
    sources = catalog.list_reference_sources()
    restored = [
        s for s in sources if s.id not in fresh and reference_id(s.id) not in present
    ]
    index.upsert(reference_points([*registered, *restored], embedder))
    keep = {reference_id(s.id) for s in sources}
    deleted = index.delete_ids(sorted(present - keep))
    for request in pending:
        catalog.set_reference_request_status(request.id, "approved")
    return ReferenceSync(tuple(registered), tuple(restored), deleted)


def remove_reference(stores: StoresResource, source_id: int) -> ReferenceSourceRow:
    """Unregister page ``source_id`` and delete its point (if an index exists); returns the
    page as it was. A point left behind by a failure here is deleted by the next
    ``index_references`` run, which the sensor requests when the counts differ.

    Raises:
        ReferenceNotFoundError: no registered page has that id (nothing changed).
    """
    removed = stores.catalog().remove_reference_source(source_id)
    index = stores.existing_vectors()
    if index is not None:
        index.delete_ids([reference_id(source_id)])
    return removed


# --- Dagster -----------------------------------------------------------------------------------


@dg.op(description="Index the queued reference pages' descriptors (never their text).")
def index_references_op(
    context: dg.OpExecutionContext, stores: StoresResource, providers: dg.ResourceParam[Providers]
) -> dg.Output[int]:
    """``index_references`` with the run's embedder; output: pages registered."""
    sync = index_references(stores, providers.embedder())
    context.log.info(
        "%d reference page(s) registered, %d re-indexed, %d stale point(s) deleted",
        len(sync.registered), len(sync.restored), sync.deleted,
    )
    return dg.Output(
        len(sync.registered),
        metadata={
            "registered": [s.url for s in sync.registered],
            "restored": [s.url for s in sync.restored],
            "deleted": sync.deleted,
        },
    )


@dg.job(
    name=INDEX_JOB,
    description=(
        "Register the reference pages queued by the MCP tool add_reference: index each one's "
        "title, description and URL (never the page) as a `reference` point for "
        "find_reference. The reference_sensor requests it; it takes no config."
    ),
)
def index_references_job() -> None:
    """One op: ``index_references_op``."""
    index_references_op()


def sensor_run_key(pending: Sequence[int], missing: Sequence[str], stray: Sequence[str]) -> str:
    """``references:<sha256>`` of the pending request ids and the missing and stray point
    ids: one run per state of the queue and index, so a failed run is not requested again
    until something changes."""
    state = "|".join(",".join(map(str, sorted(part))) for part in (pending, missing, stray))
    return "references:" + hashlib.sha256(state.encode("utf-8")).hexdigest()


@dg.sensor(
    job=index_references_job,
    minimum_interval_seconds=SENSOR_INTERVAL,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Requests an index_references run when add_reference queued a page, or when the "
        "vector index's reference points no longer match the registered pages."
    ),
)
def reference_sensor(
    context: dg.SensorEvaluationContext, stores: StoresResource
) -> dg.SensorResult:
    """One tick: reads the pending requests, the registered pages and the ids of the index's
    reference points; writes nothing."""
    catalog = stores.catalog()
    pending = [request.id for request in catalog.list_reference_requests("pending")]
    wanted = {reference_id(source.id) for source in catalog.list_reference_sources()}
    index = stores.existing_vectors()
    present = indexed_reference_ids(index) if index is not None else set()
    missing, stray = sorted(wanted - present), sorted(present - wanted)
    if not pending and not missing and not stray:
        return dg.SensorResult(skip_reason="the reference index matches the registered pages")
    context.log.info(
        "%d queued reference page(s); %d point(s) missing, %d stray",
        len(pending), len(missing), len(stray),
    )
    run = dg.RunRequest(run_key=sensor_run_key(pending, missing, stray))
    return dg.SensorResult(run_requests=[run])
