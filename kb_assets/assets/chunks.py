"""The ``chunks`` asset: Markdown → chunks with heading paths and page spans
(``kb_shared.chunking`` is the single source of truth for boundaries and ids)."""

# No `from __future__ import annotations` in asset, op and sensor modules: Dagster reads the
# parameter annotations as classes when it decorates them, to find config and resources.

import statistics
import time

import dagster as dg

from kb_assets.assets.batch import run_documents
from kb_assets.assets.common import BuildConfig, corpus_asset, version_of
from kb_assets.constants import CHUNKS, MARKDOWN
from kb_assets.outputs import MarkdownDocument
from kb_assets.resources import StoresResource
from kb_shared import layout
from kb_shared.chunking import KIND_TABLE, Chunk, chunk_markdown


@corpus_asset(
    CHUNKS,
    kinds={"parquet"},
    inputs={"document": MARKDOWN},
    description=(
        "Markdown → chunks: block boundaries, greedy packing to the word budget, a new chunk "
        "at each heading, oversized tables split between rows with the header repeated; "
        "each chunk keeps its heading path and page span. Same Markdown, same chunk ids."
    ),
)
def chunks(
    context: dg.AssetExecutionContext,
    config: BuildConfig,
    stores: StoresResource,
    document: MarkdownDocument,
):
    """One document (``chunk_document``), or each of a batched run (``batch.run_documents``;
    ``document`` is then a ``Batch``, and so is the output: no return annotation)."""
    return run_documents(
        context, stores, lambda doc, document: chunk_document(stores, document),
        {"document": document},
    )


def chunk_document(stores: StoresResource, document: MarkdownDocument) -> dg.Output[list[Chunk]]:
    """Chunk the document. Chunking is cheap and deterministic, so it always re-runs. Chunk
    ids are built from the version's key (``version_of``), so no two versions share one."""
    budget = stores.settings.chunk_words
    key = version_of(stores, document).key
    started = time.perf_counter()
    result = chunk_markdown(document.markdown, key, budget_words=budget)
    seconds = time.perf_counter() - started
    if not result:
        raise dg.Failure(
            description=f"{document.name}: the Markdown has no text to chunk", allow_retries=False
        )
    words = [len(c.text.split()) for c in result]
    return dg.Output(
        result,
        metadata={
            "chunks": len(result),
            "table_chunks": sum(1 for c in result if c.kind == KIND_TABLE),
            "budget_words": budget,
            "words_min": min(words),
            "words_median": float(statistics.median(words)),
            "words_max": max(words),
            "pages": document.pages,
            "seconds": round(seconds, 3),
            "chunks_key": layout.chunks_key(document.doc_id),
        },
    )
