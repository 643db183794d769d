"""The ``chunks`` asset: Markdown → chunks with heading paths and page spans
(``kb_shared.ingest.chunking`` is the single source of truth for boundaries and ids), each located in
the PDF's own text layer (``kb_shared.ingest.page_location``) so citations name the pages a reader
sees the text on; the ``chunks_located_in_pdf`` check reports the share located."""

# No `from __future__ import annotations` in asset, op and sensor modules: Dagster reads the
# parameter annotations as classes when it decorates them, to find config and resources.

import statistics
import time
from collections.abc import Iterator
from typing import Any

import dagster as dg

from kb_assets.assets.common import corpus_asset, version_of
from kb_assets.constants import CHECK_CHUNKS_LOCATED, CHUNKS, MARKDOWN
from kb_assets.outputs import MarkdownDocument
from kb_assets.resources import StoresResource
from kb_shared import layout
from kb_shared.ingest.chunking import KIND_TABLE, chunk_markdown
from kb_shared.ingest.page_location import PageText, locate_chunks
from kb_shared.providers.text_markdown import is_text_document

#: Least share of a PDF's chunks that must be found in its text layer for the located check
#: to pass, set under the shares measured per PDF: benchmarks/results/trust-2026-12-06.md.
LOCATED_FLOOR = 0.9


@corpus_asset(
    CHUNKS,
    kinds={"parquet"},
    inputs={"document": MARKDOWN},
    description=(
        "Markdown → chunks: block boundaries, greedy packing to the word budget, a new chunk "
        "at each heading, oversized tables split between rows with the header repeated; "
        "each chunk keeps its heading path and the pages its text is found on in the PDF's "
        "text layer. Same Markdown, same chunk ids."
    ),
    warning_checks={
        CHECK_CHUNKS_LOCATED: (
            f"At least {LOCATED_FLOOR:.0%} of a PDF's chunks are found on their pages in the "
            "PDF's own text layer (citations of the others fall back to the converter's page "
            "markers)."
        ),
    },
)
def chunks(stores: StoresResource, document: MarkdownDocument) -> Iterator[Any]:
    """Chunk the document, then locate each chunk in the PDF's text layer (a ``.md``/``.txt``
    document has none: its chunks stay unlocated, ``located`` unset). Chunking is cheap and
    deterministic, so it always re-runs. Chunk ids are built from the version's key
    (``version_of``), so no two versions share one.

    Yields:
        the chunks' ``Output``, then the ``chunks_located_in_pdf`` check (passed, with
        ``located_share`` unset, for a document that is no PDF).
    """
    budget = stores.settings.chunk_words
    key = version_of(stores, document).key
    started = time.perf_counter()
    result = chunk_markdown(document.markdown, key, budget_words=budget)
    if not result:
        raise dg.Failure(
            description=f"{document.name}: the Markdown has no text to chunk", allow_retries=False
        )
    is_pdf = not is_text_document(document.name)
    if is_pdf:
        result = locate_chunks(result, PageText.from_pdf(stores.blobs().get(layout.pdf_key(key))))
    seconds = time.perf_counter() - started
    words = [len(c.text.split()) for c in result]
    located = sum(1 for c in result if c.located)
    share = located / len(result)
    yield dg.Output(
        result,
        metadata={
            "chunks": len(result),
            "table_chunks": sum(1 for c in result if c.kind == KIND_TABLE),
            "budget_words": budget,
            "words_min": min(words),
            "words_median": float(statistics.median(words)),
            "words_max": max(words),
            "pages": document.pages,
            "located": located if is_pdf else None,
            "seconds": round(seconds, 3),
            "chunks_key": layout.chunks_key(document.doc_id),
        },
    )
    missed = [c.index for c in result if not c.located]
    yield dg.AssetCheckResult(
        check_name=CHECK_CHUNKS_LOCATED,
        passed=not is_pdf or share >= LOCATED_FLOOR,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={  # the document named: Dagster's check history shows no partition
            "document": document.name,
            "located_share": round(share, 4) if is_pdf else None,
            "floor": LOCATED_FLOOR,
            "chunks": len(result),
            "not_located": ", ".join(str(i) for i in missed[:30]) if is_pdf else "",
        },
    )
