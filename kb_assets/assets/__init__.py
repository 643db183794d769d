"""The per-document corpus assets, one module each, in build order."""

from kb_assets.assets import (
    changes,
    chunks,
    embeddings,
    figures,
    graph,
    markdown,
    obligations,
    record,
)

CORPUS_ASSETS = [
    markdown.markdown,
    chunks.chunks,
    obligations.obligations,
    changes.changes,
    embeddings.embeddings,
    graph.graph,
    figures.figures,
    record.record,
]

__all__ = ["CORPUS_ASSETS"]
