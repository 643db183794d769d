"""The six per-document corpus assets, one module each, in build order."""

from kb_assets.assets import chunks, embeddings, figures, graph, markdown, record

CORPUS_ASSETS = [
    markdown.markdown,
    chunks.chunks,
    embeddings.embeddings,
    graph.graph,
    figures.figures,
    record.record,
]

__all__ = ["CORPUS_ASSETS"]
