"""Names used in more than one place of the code location, typed once."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kb_shared.stores.catalog import DocumentStatus  # noqa: F401 - re-exported below


def __getattr__(name: str) -> Any:
    """``DocumentStatus``, re-exported from ``kb_shared.stores.catalog`` on first use: the
    catalog imports SQLAlchemy, which ``kb --help`` does not need (issue 28).

    Raises:
        AttributeError: any other missing name.
    """
    if name == "DocumentStatus":
        from kb_shared.stores.catalog import DocumentStatus

        return DocumentStatus
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

#: Name of the dynamic partitions definition; its keys are ``doc_id``s.
DOCUMENTS = "documents"

#: Asset group of the per-document corpus build.
CORPUS_GROUP = "corpus"

#: Resource key of the IO manager that keeps the corpus assets' outputs in blobs.
BLOB_IO = "blob_io"

#: Asset names, in build order.
MARKDOWN = "markdown"
CHUNKS = "chunks"
OBLIGATIONS = "obligations"
CHANGES = "changes"
EMBEDDINGS = "embeddings"
GRAPH = "graph"
FIGURES = "figures"
RECORD = "record"
CORPUS_ASSETS = (MARKDOWN, CHUNKS, OBLIGATIONS, CHANGES, EMBEDDINGS, GRAPH, FIGURES, RECORD)

#: Each corpus asset's upstream corpus assets: the dependencies of its definition in
#: ``kb_assets.assets`` (tests/assets/test_status_not_run.py checks that they agree), typed
#: here so that ``kb status`` reads them without loading the code location.
CORPUS_UPSTREAM: dict[str, tuple[str, ...]] = {
    MARKDOWN: (),
    CHUNKS: (MARKDOWN,),
    OBLIGATIONS: (MARKDOWN, CHUNKS),
    CHANGES: (MARKDOWN, CHUNKS),
    EMBEDDINGS: (MARKDOWN, CHUNKS),
    GRAPH: (MARKDOWN, CHUNKS, EMBEDDINGS),
    FIGURES: (MARKDOWN,),
    RECORD: (MARKDOWN, OBLIGATIONS, CHANGES, EMBEDDINGS, GRAPH, FIGURES),
}

#: Assets ``kb rebuild`` may target (each re-materialised with ``record`` only).
REBUILDABLE = (OBLIGATIONS, CHANGES, EMBEDDINGS, GRAPH, FIGURES)

#: Jobs.
BUILD_JOB = "build_documents"
ADD_JOB = "add_documents"

#: Asset check names.
CHECK_INDEX_MATCHES_CHUNKS = "index_matches_chunks"
CHECK_EDGES_RESOLVE = "edge_chunk_ids_resolve"
CHECK_CHUNKS_LOCATED = "chunks_located_in_pdf"

#: The run tag that names a run's partition (Dagster's own key for it): its doc_id.
PARTITION_TAG = "dagster/partition"

#: Sub-folders of the inbox that files move to once the add run has taken them (never
#: scanned again); a file that was not added gets a ``<name>.reason.txt`` beside it.
INBOX_ADDED = "added"
INBOX_REFUSED = "refused"

#: Asset group of the structured market data: non-partitioned assets synced on schedules.
MARKET_DATA_GROUP = "market_data"
#: Group of the corpus-quality assets (DESIGN.md: ``retrieval_eval``).
QUALITY_GROUP = "quality"
RETRIEVAL_EVAL = "retrieval_eval"

#: Market-data asset names (each the catalog table it fills).
AER_PERFORMANCE = "aer_performance"
COMPLIANCE_ACTIONS = "compliance_actions"
MARKET_ASSETS = (AER_PERFORMANCE, COMPLIANCE_ACTIONS)

#: Jobs that sync one market-data asset (its checks run in the same run).
AER_SYNC_JOB = "aer_sync"
NOTION_SYNC_JOB = "notion_sync"

#: Market-data asset check names.
CHECK_AER_TOTALS = "aer_totals_match_their_parts"
CHECK_COMPLIANCE_COUNT = "compliance_count_matches_read"

#: Market-data schedules.
AER_SYNC_SCHEDULE = "aer_sync_schedule"
NOTION_SYNC_SCHEDULE = "notion_sync_schedule"
