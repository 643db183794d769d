"""The ``figures`` asset: crops of informative figures, stored as PNGs and indexed as
``kind="figure"`` points in the same vector space as the chunks.

Figure ids (``{doc_id}#figure-{n}``) live in their own namespace, so adding or removing
figures never moves a chunk id. Each figure is rendered three times from the PDF (stored
2048 px, inline 1024 px, embedding 768 px; see ``kb_shared.ingest.figures``). A ``.md``/``.txt``
document has no figures: the step stores none (and removes any stale ones) without opening a
PDF or calling the locator.
"""

# No `from __future__ import annotations` in asset, op and sensor modules: Dagster reads the
# parameter annotations as classes when it decorates them, to find config and resources.

import dataclasses
import time

import dagster as dg
import pymupdf

from kb_assets.assets.common import (
    BuildConfig,
    corpus_asset,
    fingerprint,
    point_payload,
    provider_usage,
    timing,
    version_of,
)
from kb_assets.constants import FIGURES, MARKDOWN
from kb_assets.io_manager import StepRecords
from kb_assets.outputs import MarkdownDocument, StepSummary
from kb_assets.resources import Providers, StoresResource
from kb_shared import layout
from kb_shared.search.citations import FigurePayload
from kb_shared.ingest.figures import figure_text, render_all_sizes, text_near_box
from kb_shared.identity import figure_id
from kb_shared.providers.base import FigureBox, FigureInput
from kb_shared.providers.text_markdown import is_text_document
from kb_shared.search.retrieval_features import PagedText
from kb_shared.stores.vectors import KIND_FIGURE, Point


@corpus_asset(
    FIGURES,
    kinds={"png"},
    inputs={"document": MARKDOWN},
    description=(
        "Crops of informative figures (layout picture regions and drawing clusters; under "
        "3% of the page dropped), stored at 2048/1024/768 px, embedded with their caption "
        "and nearby text as kind=figure points in the chunk index."
    ),
)
def figures(
    context: dg.AssetExecutionContext,
    config: BuildConfig,
    stores: StoresResource,
    providers: dg.ResourceParam[Providers],
    document: MarkdownDocument,
) -> dg.Output[StepSummary]:
    """Locate, crop, store and index the figures of the version being built (``version_of``:
    ids, points and blob keys use its key); drop stale ones."""
    started = time.perf_counter()
    doc_id = document.doc_id
    row = version_of(stores, document)
    key = row.key
    locator = providers.figure_locator()
    embedder = providers.embedder()
    index = stores.vectors(embedder.model, embedder.dimension)
    blobs = stores.blobs()

    # printed page labels (``<!-- page 6 (p. iv) -->``), cited as chunks cite them
    parsed = PagedText.parse(document.markdown)
    labels = {page: label for page, label in zip(parsed.pages, parsed.labels) if label}
    inputs = fingerprint(
        row.sha256,
        locator.name,
        embedder.model,
        [dataclasses.astuple(f) for f in document.figures],
        document.title,
        document.version,
        *([sorted(labels.items())] if labels else []),  # unlabelled: the fingerprint as before
    )
    previous = None if config.force else StepRecords(blobs).reusable_summary(
        FIGURES, doc_id, inputs, "figures", lambda: index.count(key, KIND_FIGURE)
    )
    if previous is not None:
        context.log.info("%s: PDF and figure regions unchanged; keeping figures", doc_id)
        return dg.Output(
            previous,
            metadata={"figures": previous.counts.get("figures", 0), "reused": True,
                      "embedding_calls": 0, "seconds": 0.0},
        )

    boxes: list[FigureBox] = []
    pdf = b""
    if not is_text_document(row.name):  # a text document has no figures and no PDF
        pdf = blobs.get(row.blob_key)
        boxes = [b for b in locator.locate(pdf, document.figures) if not b.decorative]
    points: list[Point] = []
    inputs_to_embed: list[FigureInput] = []
    written: set[str] = set()
    if boxes:  # open the PDF only when there is a figure to render
        with pymupdf.open(stream=pdf, filetype="pdf") as pdf_doc:
            for number, box in enumerate(boxes, start=1):
                page = pdf_doc[box.page - 1]
                renders = render_all_sizes(page, box.bbox)
                keys = layout.figure_keys(key, number)
                blobs.put(keys.stored, renders.stored.png)
                blobs.put(keys.inline, renders.inline.png)
                blobs.put(keys.embed, renders.embed.png)
                written.update(keys.all())
                text = figure_text(box.caption, text_near_box(page, box.bbox)) or (
                    f"Figure on page {box.page} of {document.title or document.name}"
                )
                payload = point_payload(
                    document,
                    of_version=row,
                    page_start=box.page,
                    page_end=box.page,
                    page_label_start=labels.get(box.page, ""),
                    page_label_end=labels.get(box.page, ""),
                    figure=FigurePayload(
                        number=number,
                        caption=box.caption,
                        stored_key=keys.stored,
                        inline_key=keys.inline,
                        embed_key=keys.embed,
                        bbox=tuple(box.bbox),
                        width_px=renders.stored.width,
                        height_px=renders.stored.height,
                    ),
                )
                inputs_to_embed.append(FigureInput(text=text, png=renders.embed.png))
                points.append(
                    Point(
                        id=figure_id(key, number),
                        document=key,
                        kind=KIND_FIGURE,
                        text=text,
                        dense=(),
                        payload=payload.to_payload(),
                    )
                )
    if points:
        vectors = embedder.embed_figures(inputs_to_embed)
        points = [
            dataclasses.replace(point, dense=vector)
            for point, vector in zip(points, vectors, strict=True)
        ]
        index.upsert(points)
    keep = {p.id for p in points}
    stale = [i for i in index.list_ids(key, KIND_FIGURE) if i not in keep]
    if stale:
        index.delete_ids(stale)
    for blob in blobs.list(layout.figures_prefix(key)):
        if blob not in written:
            blobs.delete(blob)
    seconds = time.perf_counter() - started
    pages_with_figures = sorted({b.page for b in boxes})
    summary = StepSummary(
        doc_id=doc_id,
        counts={"figures": len(points)},
        fingerprint=inputs,
        details={"locator": locator.name, "pages": pages_with_figures, "key": key},
    )
    return dg.Output(
        summary,
        metadata={
            "figures": len(points),
            "pages_with_figures": ", ".join(map(str, pages_with_figures)),
            "locator": locator.name,
            "reused": False,
            "embedding_calls": 1 if points else 0,
            "stale_deleted": len(stale),
            **timing(seconds, document.pages),
            **provider_usage(locator, embedder),
        },
    )
