"""The ``record`` asset: the document's catalog row, marked ready with its counts."""

# No `from __future__ import annotations` in asset, op and sensor modules: Dagster reads the
# parameter annotations as classes when it decorates them, to find config and resources.

import dagster as dg

from kb_assets.assets.common import BuildConfig, corpus_asset, require_document
from kb_assets.constants import EMBEDDINGS, FIGURES, GRAPH, MARKDOWN, RECORD
from kb_assets.outputs import MarkdownDocument, StepSummary
from kb_assets.resources import StoresResource
from kb_shared import layout


@corpus_asset(
    RECORD,
    kinds={"sql"},
    inputs={"document": MARKDOWN, "embedded": EMBEDDINGS, "graphed": GRAPH, "figured": FIGURES},
    stored=False,
    description=(
        "The catalog row: name, doc_id, title, version, pages, chunk/figure/entity/"
        "relationship counts, size, sha256, blob and Markdown keys, timestamps."
    ),
)
def record(
    context: dg.AssetExecutionContext,
    config: BuildConfig,
    stores: StoresResource,
    document: MarkdownDocument,
    embedded: StepSummary,
    graphed: StepSummary,
    figured: StepSummary,
) -> dg.MaterializeResult:
    """Write the ready row (the document becomes visible to ``list_documents``)."""
    row = require_document(stores, document.doc_id)
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
    stores.catalog().mark_ready(document.doc_id, **fields)
    return dg.MaterializeResult(
        metadata={
            "name": row.name,
            "doc_id": row.doc_id,
            "sha256": row.sha256,
            "size_bytes": row.size_bytes,
            **{k: v for k, v in fields.items() if v is not None},
        }
    )
