"""Names used in more than one place of the code location, typed once."""

from __future__ import annotations

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

#: Blob key layout (relative to the blob root). ``{doc}`` is the doc_id.
PDF_KEY = "pdfs/{doc}"
MARKDOWN_KEY = "markdown/{doc}.md"
MARKDOWN_META_KEY = "markdown/{doc}.json"
CHUNKS_KEY = "chunks/{doc}.parquet"
ASSET_OUTPUT_KEY = "assets/{asset}/{doc}.json"
FIGURES_PREFIX = "figures/{doc}/"
