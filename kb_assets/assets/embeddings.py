"""The ``embeddings`` asset: chunks → dense vectors + sparse terms in the vector index.

Order of writes (DESIGN.md): upsert the new and changed points first, then delete the
document's chunk ids that are no longer produced, so a query never sees the document with
zero vectors. A chunk whose embedding input (model, contextual text, payload) is unchanged
is not embedded again.
"""


import time

import dagster as dg

from kb_assets.assets.common import BuildConfig, fingerprint, provider_usage
from kb_assets.constants import (
    CHECK_INDEX_MATCHES_CHUNKS,
    CHUNKS,
    CORPUS_GROUP,
    EMBEDDINGS,
    MARKDOWN,
    MARKDOWN_KEY,
    PDF_KEY,
)
from kb_assets.outputs import MarkdownDocument, StepSummary
from kb_assets.partitions import documents_partitions
from kb_assets.resources import ProvidersResource, StoresResource
from kb_shared import citations
from kb_shared.chunking import Chunk, embedding_text
from kb_shared.stores.vectors import KIND_TABLE, KIND_TEXT, Point


def chunk_points_input(document: MarkdownDocument, chunk_list: list[Chunk], model: str) -> list[
    tuple[Chunk, str, dict[str, object]]
]:
    """For each chunk: ``(chunk, text to embed, payload)`` with the payload's fingerprint set.

    The fingerprint covers the model, the embedding text and the citation payload, so a
    change to any of them (a new title, a moved page) re-embeds that chunk.
    """
    prepared = []
    for chunk in chunk_list:
        text = embedding_text(chunk, document.title)
        payload = citations.citation_payload(
            doc_id=document.doc_id,
            name=document.name,
            title=document.title,
            version=document.version,
            page_start=chunk.page_start,
            page_end=chunk.page_end,
            heading_path=chunk.heading_path,
            chunk_index=chunk.index,
            pdf_key=PDF_KEY.format(doc=document.doc_id),
            markdown_key=MARKDOWN_KEY.format(doc=document.doc_id),
        )
        payload[citations.FINGERPRINT] = fingerprint(model, text, payload)
        prepared.append((chunk, text, payload))
    return prepared


@dg.asset(
    name=EMBEDDINGS,
    partitions_def=documents_partitions,
    group_name=CORPUS_GROUP,
    kinds={"python"},
    io_manager_key="blob_io",
    ins={"document": dg.AssetIn(MARKDOWN), "chunk_list": dg.AssetIn(CHUNKS)},
    check_specs=[
        dg.AssetCheckSpec(
            CHECK_INDEX_MATCHES_CHUNKS,
            asset=EMBEDDINGS,
            blocking=True,
            description="The index holds exactly the chunk ids the chunks asset produced.",
        )
    ],
    description=(
        "Dense vectors (local model, or Gemini when its key is set) and sparse terms for "
        "every chunk, with the heading path as contextual prefix; upsert, then delete the "
        "document's stale chunk ids."
    ),
)
def embeddings(
    context: dg.AssetExecutionContext,
    config: BuildConfig,
    stores: StoresResource,
    providers: ProvidersResource,
    document: MarkdownDocument,
    chunk_list: list[Chunk],
):
    """Embed changed chunks, upsert them, delete stale ids, then check the index."""
    started = time.perf_counter()
    embedder = providers.embedder()
    index = stores.vectors(embedder.model, embedder.dimension)
    prepared = chunk_points_input(document, chunk_list, embedder.model)

    stored = {p.id: p.payload.get(citations.FINGERPRINT) for p in index.fetch([c.id for c in chunk_list])}
    todo = [
        item
        for item in prepared
        if config.force or stored.get(item[0].id) != item[2][citations.FINGERPRINT]
    ]

    contexts: list[str] = [""] * len(todo)
    contextualiser = providers.contextualiser()
    if contextualiser is not None and todo:
        contexts = contextualiser.contexts(
            document.title, document.markdown, [item[0] for item in todo]
        )
    texts = [
        (f"{ctx.strip()}\n\n{text}" if ctx.strip() else text)
        for ctx, (_, text, _) in zip(contexts, todo, strict=True)
    ]
    vectors = (
        embedder.embed_documents(texts, titles=[document.title] * len(texts)) if texts else []
    )
    points = [
        Point(
            id=chunk.id,
            document=document.doc_id,
            kind=chunk.kind,
            text=chunk.text,
            dense=vector,
            payload=payload,
            sparse_text=text,
        )
        for (chunk, text, payload), vector in zip(todo, vectors, strict=True)
    ]
    if points:
        index.upsert(points)

    wanted = {c.id for c in chunk_list}
    present = set(index.list_ids(document.doc_id, KIND_TEXT)) | set(
        index.list_ids(document.doc_id, KIND_TABLE)
    )
    stale = sorted(present - wanted)
    if stale:
        index.delete_ids(stale)

    after = set(index.list_ids(document.doc_id, KIND_TEXT)) | set(
        index.list_ids(document.doc_id, KIND_TABLE)
    )
    missing = sorted(wanted - after)
    extra = sorted(after - wanted)
    seconds = time.perf_counter() - started
    summary = StepSummary(
        doc_id=document.doc_id,
        counts={"chunks": len(chunk_list), "embedded": len(points), "deleted": len(stale)},
        fingerprint=fingerprint(embedder.model, [item[2][citations.FINGERPRINT] for item in prepared]),
        details={"model": embedder.model, "dimension": embedder.dimension},
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
            "contextualised": contextualiser is not None and bool(points),
            "stale_deleted": len(stale),
            "seconds": round(seconds, 3),
            "seconds_per_page": round(seconds / document.pages, 4) if document.pages else 0.0,
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
