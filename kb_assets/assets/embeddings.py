"""The ``embeddings`` asset: chunks → dense vectors + sparse terms in the vector index.

Order of writes (DESIGN.md): upsert the new and changed points first, then delete the
document's chunk ids that are no longer produced, so a query never sees the document with
zero vectors. A chunk whose embedding input (model, contextual text, payload) is unchanged
is not embedded again.
"""

# No `from __future__ import annotations` in asset, op and sensor modules: Dagster reads the
# parameter annotations as classes when it decorates them, to find config and resources.

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import dagster as dg

from kb_assets.assets.common import (
    BuildConfig,
    check_chunks_of,
    corpus_asset,
    fingerprint,
    point_payload,
    provider_usage,
    timing,
    version_of,
)
from kb_assets.constants import CHECK_INDEX_MATCHES_CHUNKS, CHUNKS, EMBEDDINGS, MARKDOWN
from kb_assets.outputs import MarkdownDocument, StepSummary
from kb_assets.resources import Providers, StoresResource
from kb_shared.ingest.chunking import Chunk
from kb_shared.ingest.contextual import embedding_text
from kb_shared.search.citations import PointPayload
from kb_shared.stores.catalog import DocumentVersionRow
from kb_shared.stores.vectors import KIND_TABLE, KIND_TEXT, Point, VectorIndex


@dataclass(frozen=True)
class ChunkInput:
    """One chunk ready to embed.

    Attributes:
        chunk: the chunk.
        text: the text to embed (``kb_shared.ingest.contextual.embedding_text``: title and heading
            path in front of the chunk).
        payload: its citation payload, ``fingerprint`` set.
    """

    chunk: Chunk
    text: str
    payload: PointPayload


def chunk_inputs(
    document: MarkdownDocument,
    chunk_list: list[Chunk],
    model: str,
    of_version: DocumentVersionRow | None = None,
) -> list[ChunkInput]:
    """Each chunk with its embedding text and payload (of ``of_version``, see
    ``common.point_payload``), the payload's fingerprint set.

    The fingerprint covers the model, the embedding text and the citation payload, so a
    change to any of them (a new title, a moved page) re-embeds that chunk.
    """
    prepared = []
    for chunk in chunk_list:
        text = embedding_text(chunk, document.title)
        payload = point_payload(
            document,
            of_version=of_version,
            page_start=chunk.page_start,
            page_end=chunk.page_end,
            page_label_start=chunk.page_label_start,
            page_label_end=chunk.page_label_end,
            page_runs=chunk.page_runs,
            located=chunk.located,
            heading_path=chunk.heading_path,
            chunk_index=chunk.index,
        )
        stamped = payload.with_fingerprint(fingerprint(model, text, payload.to_payload()))
        prepared.append(ChunkInput(chunk, text, stamped))
    return prepared


def indexed_chunk_ids(index: VectorIndex, doc_id: str) -> set[str]:
    """The chunk ids (text and table points, not figures) the index holds for ``doc_id``."""
    return set(index.list_ids(doc_id, KIND_TEXT)) | set(index.list_ids(doc_id, KIND_TABLE))


@corpus_asset(
    EMBEDDINGS,
    kinds={"python"},
    inputs={"document": MARKDOWN, "chunk_list": CHUNKS},
    checks={
        CHECK_INDEX_MATCHES_CHUNKS:
            "The index holds exactly the chunk ids the chunks asset produced.",
    },
    description=(
        "Dense vectors (local model, or Gemini when its key is set) and sparse terms for "
        "every chunk, with the heading path as contextual prefix; upsert, then delete the "
        "document's stale chunk ids."
    ),
)
def embeddings(
    config: BuildConfig,
    stores: StoresResource,
    providers: dg.ResourceParam[Providers],
    document: MarkdownDocument,
    chunk_list: list[Chunk],
) -> Iterator[Any]:
    """Embed changed chunks, upsert them, delete stale ids, then check the index. The points
    are the version's (``version_of``): ``document`` is its key, so a new version's points
    sit beside the served version's until ``record`` switches."""
    started = time.perf_counter()
    embedder = providers.embedder()
    index = stores.vectors(embedder.model, embedder.dimension)
    version = version_of(stores, document)
    check_chunks_of(version, chunk_list)
    prepared = chunk_inputs(document, chunk_list, embedder.model, version)

    stored = {
        p.id: PointPayload.from_payload(p.payload).fingerprint
        for p in index.fetch([c.id for c in chunk_list])
    }
    todo = [
        item
        for item in prepared
        if config.force or stored.get(item.chunk.id) != item.payload.fingerprint
    ]

    contextualiser = providers.contextualiser()
    contexts = (
        contextualiser.contexts(document.title, document.markdown, [item.chunk for item in todo])
        if todo
        else []
    )
    texts = [
        (f"{ctx.strip()}\n\n{item.text}" if ctx.strip() else item.text)
        for ctx, item in zip(contexts, todo, strict=True)
    ]
    vectors = (
        embedder.embed_documents(texts, titles=[document.title] * len(texts)) if texts else []
    )
    points = [
        Point(
            id=item.chunk.id,
            document=version.key,
            kind=item.chunk.kind,
            text=item.chunk.text,
            dense=vector,
            payload=item.payload.to_payload(),
            sparse_text=item.text,
        )
        for item, vector in zip(todo, vectors, strict=True)
    ]
    if points:
        index.upsert(points)

    wanted = {c.id for c in chunk_list}
    stale = sorted(indexed_chunk_ids(index, version.key) - wanted)
    if stale:
        index.delete_ids(stale)

    after = indexed_chunk_ids(index, version.key)
    missing = sorted(wanted - after)
    extra = sorted(after - wanted)
    seconds = time.perf_counter() - started
    summary = StepSummary(
        doc_id=document.doc_id,
        counts={"chunks": len(chunk_list), "embedded": len(points), "deleted": len(stale)},
        fingerprint=fingerprint(embedder.model, [item.payload.fingerprint for item in prepared]),
        details={"model": embedder.model, "dimension": embedder.dimension, "key": version.key},
    )
    yield dg.Output(
        summary,
        metadata={
            "model": embedder.model,
            "dimension": embedder.dimension,
            "chunks": len(chunk_list),
            "embedded": len(points),
            "reused": len(chunk_list) - len(points),
            "embedding_calls": 1 if points else 0,
            "contextualised": contextualiser.adds_context and bool(points),
            "stale_deleted": len(stale),
            **timing(seconds, document.pages),
            **provider_usage(embedder, contextualiser),
        },
    )
    yield dg.AssetCheckResult(
        check_name=CHECK_INDEX_MATCHES_CHUNKS,
        passed=not missing and not extra,
        metadata={
            "expected": len(wanted),
            "indexed": len(after),
            "missing": ", ".join(missing[:20]),
            "unexpected": ", ".join(extra[:20]),
        },
    )
