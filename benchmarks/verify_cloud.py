"""Verify the cloud providers against the real APIs: one small real call per provider.

Run: ``.venv/bin/python benchmarks/verify_cloud.py`` (``make verify-cloud``).

Keys are read the way kb reads them (``kb_shared.settings.Settings``: ``ANTHROPIC_API_KEY``,
``GEMINI_API_KEY``/``GOOGLE_API_KEY``, ``COHERE_API_KEY``). A provider whose key is not set
prints ``skipped: KEY not set``. Each check asserts what the offline tests cannot: that the
model id exists for this key, that the request shape is accepted, and that the answer parses
(page markers, vector size and unit length, a relationship from the vocabulary, a box on the
figure's page, a rerank order). Usage and cost of each call are printed.

Exit status: 0 when every provider with a key passed (or all were skipped), 1 when any
failed. Cost of a full run with all keys: well under one US cent at list prices.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np
import pymupdf
import typer

from kb_assets.sample_pdf import FIGURE_CAPTION, FIGURE_PAGE, sample_pdf_bytes
from kb_shared.ingest.chunking import Chunk
from kb_shared.providers.base import FigureRegion
from kb_shared.settings import Settings

app = typer.Typer(add_completion=False, help=__doc__.split("\n\n", 1)[0])

ANTHROPIC = "ANTHROPIC_API_KEY"
GEMINI = "GEMINI_API_KEY (or GOOGLE_API_KEY)"
COHERE = "COHERE_API_KEY"

CHUNK = Chunk(
    id="verify-0", document="verify", index=0,
    text="The Retailer must notify the Distributor of a new Life Support Customer within "
    "2 business days of registration.",
    heading_path=("4 Notifications",), page_start=1, page_end=1, kind="text",
)


def _first_page(pdf: bytes) -> bytes:
    with pymupdf.open(stream=pdf, filetype="pdf") as doc, pymupdf.open() as one:
        one.insert_pdf(doc, from_page=0, to_page=0)
        return one.tobytes()


def check_markdown(settings: Settings, pdf: bytes) -> str:
    """Claude PDF -> Markdown on the sample's first page: page marker and text come back."""
    from kb_shared.providers.cloud_markdown import ClaudeMarkdownConverter

    converter = ClaudeMarkdownConverter.from_settings(settings)
    result = converter.convert(_first_page(pdf), "sample-page-1.pdf")
    assert result.markdown.startswith("<!-- page 1 -->"), result.markdown[:80]
    assert "Retail" in result.markdown, result.markdown[:200]
    return f"{len(result.markdown)} chars, title {result.title!r}; {_usage(converter.usage())}"


def check_context(settings: Settings, pdf: bytes) -> str:
    """Claude contextualisation of one chunk, with the prompt-cache report."""
    from kb_shared.providers.cloud_context import ClaudeContextualiser

    contextualiser = ClaudeContextualiser.from_settings(settings)
    markdown = "<!-- page 1 -->\n\n# Sample Retail Market Procedure\n\n## 4 Notifications\n\n" + CHUNK.text
    [context] = contextualiser.contexts("Sample Retail Market Procedure", markdown, [CHUNK])
    assert context, "empty context"
    report = contextualiser.last_cache_report
    return f"{context[:70]!r}…; {report.message() if report else ''}; {_usage(contextualiser.usage())}"


def check_graph(settings: Settings, pdf: bytes) -> str:
    """Claude graph extraction on one obligation chunk: at least one relationship."""
    from kb_shared.providers.cloud_graph import ClaudeGraphExtractor

    extractor = ClaudeGraphExtractor.from_settings(settings)
    result = extractor.extract("verify", "Sample Retail Market Procedure", [CHUNK])
    assert result.relationships, "no relationship extracted"
    edges = ", ".join(f"({r.source})-{r.type}->({r.target})" for r in result.relationships[:3])
    return f"{edges}; {_usage(extractor.usage())}"


def check_embeddings(settings: Settings, pdf: bytes) -> str:
    """Gemini document and query embeddings: shapes, unit length, their cosine."""
    from kb_shared.providers.cloud_embeddings import GeminiEmbedder

    embedder = GeminiEmbedder.from_settings(settings)
    documents = embedder.embed_documents([CHUNK.text], titles=["Sample Retail Market Procedure"])
    query = embedder.embed_query("how fast must a retailer tell the distributor about life support")
    assert documents.shape == (1, embedder.dimension) and query.shape == (embedder.dimension,)
    assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-5
    cosine = float(documents[0] @ query)
    return f"{embedder.model}, cosine(query, chunk) = {cosine:.3f}; {_usage(embedder.usage())}"


def check_figures(settings: Settings, pdf: bytes) -> str:
    """Gemini figure boxes on the sample's diagram page."""
    from kb_shared.providers.cloud_figures import GeminiFigureLocator

    locator = GeminiFigureLocator.from_settings(settings)
    boxes = locator.locate(pdf, [FigureRegion(page=FIGURE_PAGE, bbox=None, caption=FIGURE_CAPTION)])
    assert boxes and all(b.page == FIGURE_PAGE for b in boxes), boxes
    shown = "; ".join(f"{tuple(round(v) for v in b.bbox)} {b.caption[:40]!r}" for b in boxes)
    return f"{shown}; {_usage(locator.usage())}"


def check_rerank(settings: Settings, pdf: bytes) -> str:
    """Cohere rerank puts the life-support chunk first."""
    from kb_shared.providers.cloud_rerank import CohereReranker

    reranker = CohereReranker.from_settings(settings)
    texts = ["The change register lists version 1.2.", CHUNK.text, "Appendix A is a worked example."]
    ranked = reranker.rerank("life support notification deadline", texts, top_n=3)
    assert ranked and ranked[0][0] == 1, ranked
    return f"order {[i for i, _ in ranked]}, top score {ranked[0][1]:.3f}; {_usage(reranker.usage())}"


def _usage(usage: dict) -> str:
    return (
        f"{usage['requests']} request(s), {usage['input_tokens']} in / {usage['output_tokens']} "
        f"out tokens, ${usage['cost_usd']:.5f}, key {usage['key']}"
    )


CHECKS: list[tuple[str, str, Callable[[Settings], bool], Callable[[Settings, bytes], str]]] = [
    ("markdown (Claude)", ANTHROPIC, lambda s: s.anthropic_api_key is not None, check_markdown),
    ("contextualise (Claude)", ANTHROPIC, lambda s: s.anthropic_api_key is not None, check_context),
    ("graph (Claude)", ANTHROPIC, lambda s: s.anthropic_api_key is not None, check_graph),
    ("embeddings (Gemini)", GEMINI, lambda s: s.gemini_api_key is not None, check_embeddings),
    ("figures (Gemini)", GEMINI, lambda s: s.gemini_api_key is not None, check_figures),
    ("rerank (Cohere)", COHERE, lambda s: s.cohere_api_key is not None, check_rerank),
]


@app.command()
def main() -> None:
    """Run one real call per cloud provider whose key is set."""
    settings = Settings()
    pdf: bytes | None = None
    failed = 0
    for label, key, has_key, check in CHECKS:
        if not has_key(settings):
            print(f"{label}: skipped: {key} not set")
            continue
        if pdf is None:
            pdf = sample_pdf_bytes()
        try:
            print(f"{label}: ok: {check(settings, pdf)}")
        except Exception as exc:  # noqa: BLE001 - report every provider, then fail
            failed += 1
            print(f"{label}: FAILED: {type(exc).__name__}: {exc}")
    raise typer.Exit(1 if failed else 0)


if __name__ == "__main__":
    sys.exit(app())
