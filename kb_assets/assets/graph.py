"""The ``graph`` asset: chunks → entities and typed relationships in the graph store.

Every relationship keeps ``sourceDoc`` (the version's key: ``kb_shared.identity.version_key``)
and ``chunkId``; this version's edges are replaced in one transaction and orphan entities
dropped, other documents and versions untouched. It runs after
``embeddings`` in a full build (an ordering dependency only) so its check — every
``chunkId`` resolves in the vector index — sees this build's chunks.
"""

# No `from __future__ import annotations` in asset, op and sensor modules: Dagster reads the
# parameter annotations as classes when it decorates them, to find config and resources.

import dataclasses
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import dagster as dg

from kb_assets.assets.common import (
    BuildConfig,
    check_chunks_of,
    corpus_asset,
    fingerprint,
    provider_usage,
    timing,
    version_of,
)
from kb_assets.constants import CHECK_EDGES_RESOLVE, CHUNKS, EMBEDDINGS, GRAPH, MARKDOWN
from kb_assets.io_manager import StepRecords
from kb_assets.outputs import MarkdownDocument, StepSummary
from kb_assets.resources import Providers, StoresResource
from kb_shared.ingest.chunking import Chunk


@corpus_asset(
    GRAPH,
    kinds={"python"},
    inputs={"document": MARKDOWN, "chunk_list": CHUNKS},
    after=[EMBEDDINGS],
    checks={
        CHECK_EDGES_RESOLVE: "Every chunkId on this document's edges exists in the vector index.",
    },
    description=(
        "Entities (defined terms, roles, organisations, documents, codes) and typed "
        "relationships from the chunks, each with sourceDoc and chunkId; entity-name vectors "
        "for seeding; replaces only this document's edges."
    ),
)
def graph(
    context: dg.AssetExecutionContext,
    config: BuildConfig,
    stores: StoresResource,
    providers: dg.ResourceParam[Providers],
    document: MarkdownDocument,
    chunk_list: list[Chunk],
) -> Iterator[Any]:
    """Extract, embed entity names, replace this version's edges, check provenance. The edges'
    ``sourceDoc`` is the version's key (``version_of``), so a new version's edges sit beside
    the served version's until ``record`` switches."""
    started = time.perf_counter()
    extractor = providers.extractor()
    embedder = providers.embedder()
    store = stores.graph()
    store.ensure_schema(embedder.dimension)
    version = version_of(stores, document)
    check_chunks_of(version, chunk_list)
    key = version.key

    inputs = fingerprint(
        extractor.name, embedder.model, [(c.id, c.text) for c in chunk_list], document.title
    )
    previous = None if config.force else StepRecords(stores.blobs()).reusable_summary(
        GRAPH, document.doc_id, inputs, "relationships", lambda: store.counts(key).relationships
    )
    reused = previous is not None
    if previous is not None:
        context.log.info("%s: chunks unchanged since the last extraction; keeping edges", key)
        summary = dataclasses.replace(previous, details={**previous.details, "reused": True})
        types: dict[str, int] = previous.details.get("types", {})
        extraction_calls = 0
    else:
        extraction = extractor.extract(key, document.title, chunk_list)
        names = [e.name for e in extraction.entities]
        vectors = embedder.embed_names(names)
        entities = [
            dataclasses.replace(entity, vector=tuple(float(x) for x in vector))
            for entity, vector in zip(extraction.entities, vectors, strict=True)
        ]
        counts = store.replace_document(key, entities, list(extraction.relationships))
        types = dict(Counter(r.type for r in extraction.relationships).most_common())
        summary = StepSummary(
            doc_id=document.doc_id,
            counts={"entities": counts.entities, "relationships": counts.relationships},
            fingerprint=inputs,
            details={"extractor": extractor.name, "types": types, "reused": False, "key": key},
        )
        extraction_calls = 1

    edge_chunks = sorted({r.chunk_id for r in store.relationships_for_document(key)})
    index = stores.existing_vectors()
    present = {p.id for p in index.fetch(edge_chunks)} if index is not None else set()
    missing = [c for c in edge_chunks if c not in present]
    seconds = time.perf_counter() - started

    yield dg.Output(
        summary,
        metadata={
            "extractor": extractor.name,
            "entities": summary.counts.get("entities", 0),
            "relationships": summary.counts.get("relationships", 0),
            "relationship_types": dg.MetadataValue.json(types),
            "reused": reused,
            "extraction_calls": extraction_calls,
            **timing(seconds, document.pages),
            **provider_usage(extractor, embedder),
        },
    )
    yield dg.AssetCheckResult(
        check_name=CHECK_EDGES_RESOLVE,
        passed=not missing,
        metadata={
            "edge_chunk_ids": len(edge_chunks),
            "missing": len(missing),
            "missing_ids": ", ".join(missing[:20]),
        },
    )
