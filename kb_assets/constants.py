"""Names used in more than one place of the code location, typed once."""

from __future__ import annotations

from kb_shared.stores.catalog import DocumentStatus  # noqa: F401 - re-exported for kb_assets

#: Name of the dynamic partitions definition; its keys are ``doc_id``s.
DOCUMENTS = "documents"

#: Asset group of the per-document corpus build.
CORPUS_GROUP = "corpus"

#: Asset names, in build order.
MARKDOWN = "markdown"
CHUNKS = "chunks"
EMBEDDINGS = "embeddings"
GRAPH = "graph"
FIGURES = "figures"
RECORD = "record"
CORPUS_ASSETS = (MARKDOWN, CHUNKS, EMBEDDINGS, GRAPH, FIGURES, RECORD)

#: Assets ``kb rebuild`` may target (each re-materialised with ``record`` only).
REBUILDABLE = (EMBEDDINGS, GRAPH, FIGURES)

#: Jobs.
BUILD_JOB = "build_documents"
ADD_JOB = "add_documents"

#: Asset check names.
CHECK_INDEX_MATCHES_CHUNKS = "index_matches_chunks"
CHECK_EDGES_RESOLVE = "edge_chunk_ids_resolve"

#: The run tag that names a run's partition (Dagster's own key for it): its doc_id.
PARTITION_TAG = "dagster/partition"

#: Sub-folders of the inbox that files move to once the add run has taken them (never
#: scanned again); a file that was not added gets a ``<name>.reason.txt`` beside it.
INBOX_ADDED = "added"
INBOX_REFUSED = "refused"
