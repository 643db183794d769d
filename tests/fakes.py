"""Hand-written fakes of the provider interfaces (no model, no network, no mock library), shared
by the asset tests and the MCP tests; they import nothing of Dagster (``FakeProviders``, the
asset tests' resource, is in ``tests/assets/fake_providers.py``).

* ``HashingEmbedder``: deterministic bag-of-words vectors; counts its calls.
* ``FakeConverter``: fixed Markdown with page markers (``SAMPLE_MARKDOWN``); counts calls and
  refuses the names it is told to.
* ``FakeExtractor``: one ``MUST_NOTIFY`` edge Retailer → Distributor per chunk naming both.
* ``FakeFigureLocator``: one figure box per converter region that has a bbox.
* ``tiny_pdf``: a real PDF (pymupdf) with a drawn box, so the figures asset can crop it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import time
from collections.abc import Sequence
from pathlib import Path
from dataclasses import dataclass, field

import numpy as np
import pymupdf

from kb_shared.ingest.chunking import Chunk
from kb_shared.errors import ConversionError
from kb_shared.graph_model import Entity, Relationship, entity_key
from kb_shared.providers.base import (
    ConvertedDocument,
    Embedder,
    Extraction,
    FigureBox,
    FigureInput,
    FigureLocator,
    FigureRegion,
    GraphExtractor,
    MarkdownConverter,
)
from kb_shared.search.sparse import tokenize


class HashingEmbedder(Embedder):
    """Deterministic bag-of-words embedder: each sparse term adds ±1 to one of ``dimension``
    buckets chosen by SHA-256, then the vector is L2-normalised. Texts sharing words get a
    high cosine, texts sharing none ~0 — enough to test ranking and thresholds offline.

    Attributes:
        calls: how many texts each ``embed_documents`` call got, in order.
    """

    def __init__(self, dimension: int = 64, model: str = "test-hashing") -> None:
        self.dimension = dimension
        self.model = f"{model}-{dimension}"
        self.name = self.model
        self.calls: list[int] = []

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dimension, dtype=np.float32)
        for term in tokenize(text):
            digest = hashlib.sha256(term.encode("utf-8")).digest()
            bucket = int.from_bytes(digest[:4], "big") % self.dimension
            vector[bucket] += 1.0 if digest[4] % 2 else -1.0
        if not vector.any():
            vector[0] = 1.0
        return vector / np.linalg.norm(vector)

    def embed_documents(self, texts: Sequence[str], titles: Sequence[str] | None = None) -> np.ndarray:
        self.calls.append(len(texts))
        return np.stack([self._vector(t) for t in texts]) if texts else np.zeros((0, self.dimension), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)


#: What ``FakeConverter`` returns: two pages, three sections, one figure marker on page 2.
SAMPLE_TITLE = "Fake Retail Procedure"
SAMPLE_VERSION = "2.0"
SAMPLE_MARKDOWN = """<!-- page 1 -->
# Fake Retail Procedure

## 1 Notifications

The Retailer must notify the Distributor within 2 business days after a customer registers life support equipment.

## 2 Records

The Distributor keeps the register of every site and reports it monthly.

<!-- page 2 -->
## 3 Flow

[Figure: Figure 1 – Notification flow]

The Retailer must notify the Distributor again when the customer leaves the site.
"""
#: The figure region ``FakeConverter`` reports (page 2, PDF points; ``tiny_pdf`` draws it).
SAMPLE_FIGURE = FigureRegion(page=2, bbox=(72.0, 150.0, 400.0, 400.0), caption="Figure 1 – Notification flow")


@dataclass
class FakeConverter(MarkdownConverter):
    """Returns ``markdown`` (``SAMPLE_MARKDOWN``) for any PDF, except names in ``refuse``.

    Attributes:
        calls: file names converted, in order.
        refuse: file name → the ``ConversionError`` message to raise for it.
        markdown: what every conversion returns (a test may change it between runs).
    """

    name: str = "fake-converter"
    calls: list[str] = field(default_factory=list)
    refuse: dict[str, str] = field(default_factory=dict)
    markdown: str = SAMPLE_MARKDOWN

    def convert(self, pdf: bytes, filename: str) -> ConvertedDocument:
        self.calls.append(filename)
        if filename in self.refuse:
            raise ConversionError(self.refuse[filename])
        return ConvertedDocument(
            markdown=self.markdown,
            pages=2,
            title=SAMPLE_TITLE,
            version=SAMPLE_VERSION,
            converter="fake 1.0",
            figures=(SAMPLE_FIGURE,),
        )


@dataclass
class FakeExtractor(GraphExtractor):
    """One ``MUST_NOTIFY`` edge Retailer → Distributor for every chunk that names both.

    Attributes:
        calls: documents extracted, in order.
        dangling: also emit one edge on a chunk id that does not exist (``{doc}-99``).
    """

    name: str = "fake-extractor"
    calls: list[str] = field(default_factory=list)
    dangling: bool = False

    def _extract(self, document: str, title: str, chunks: Sequence[Chunk]) -> Extraction:
        self.calls.append(document)
        source, target = entity_key("Retailer"), entity_key("Distributor")
        chunk_ids = [c.id for c in chunks if "Retailer" in c.text and "Distributor" in c.text]
        if self.dangling:
            chunk_ids.append(f"{document}-99")
        edges = tuple(
            Relationship(source, target, "MUST_NOTIFY", "must notify", document, chunk_id)
            for chunk_id in chunk_ids
        )
        entities = (Entity("Retailer", "Role"), Entity("Distributor", "Role")) if edges else ()
        return Extraction(entities=entities, relationships=edges)


@dataclass
class FakeFigureLocator(FigureLocator):
    """A box for every region with a bbox, captioned as the region.

    Attributes:
        calls: how many regions each call got.
    """

    name: str = "fake-locator"
    calls: list[int] = field(default_factory=list)

    def locate(self, pdf: bytes, regions: Sequence[FigureRegion]) -> list[FigureBox]:
        self.calls.append(len(regions))
        return [FigureBox(r.page, r.bbox, r.caption) for r in regions if r.bbox is not None]


def _sample_page_text(number: int) -> str:
    """The words ``SAMPLE_MARKDOWN`` puts on page ``number`` (Markdown marks and figure
    markers left out), one block a line."""
    pages = SAMPLE_MARKDOWN.split("<!-- page ")
    for part in pages[1:]:
        head, _, body = part.partition(" -->")
        if int(head) == number:
            lines = [line.lstrip("# ").strip() for line in body.splitlines()]
            return "\n".join(line for line in lines if line and not line.startswith("[Figure"))
    return ""


def tiny_pdf(label: str, pages: int = 2) -> bytes:
    """A real PDF: a line of text per page, then that page's text of ``SAMPLE_MARKDOWN`` (so
    the chunks of the fake conversion are found on their pages), and, on page 2, the box of
    ``SAMPLE_FIGURE`` drawn with a caption under it. ``label`` makes the bytes (and so the
    sha256) differ; so does each call, as each save of a PDF does (a new trailer ``/ID``).

    The pages are drawn once per ``(label, pages)`` and process (``_tiny_pdf_drawn``; most of
    its CPU is MuPDF measuring Helvetica's glyphs for a new document) and each call saves
    that document again, 30 times cheaper (benchmarks/results/test-lanes.md, 2026-12-07)."""
    with pymupdf.open(stream=_tiny_pdf_drawn(label, pages), filetype="pdf") as pdf:
        return pdf.tobytes()


@functools.cache
def _tiny_pdf_drawn(label: str, pages: int) -> bytes:
    """The PDF ``tiny_pdf`` describes, as first saved."""
    with pymupdf.open() as pdf:
        for number in range(1, pages + 1):
            page = pdf.new_page()
            page.insert_text((72, 72), f"{label} page {number}")
            page.insert_textbox(pymupdf.Rect(72, 90, 540, 300), _sample_page_text(number),
                                fontsize=10)
            if number == SAMPLE_FIGURE.page:
                page.draw_rect(pymupdf.Rect(*SAMPLE_FIGURE.bbox), color=(0, 0, 1), fill=(0.8, 0.9, 1))
                page.insert_text((72, 420), SAMPLE_FIGURE.caption)
        return pdf.tobytes()


class FlakyEmbedder(HashingEmbedder):
    """A ``HashingEmbedder`` whose next chunk-embedding calls (``embed_documents``) fail, one
    per message in ``failures`` (``RuntimeError(message)``), then work again; figures are
    embedded normally."""

    def __init__(self, *failures: str, dimension: int = 32) -> None:
        super().__init__(dimension)
        self.failures = list(failures)

    def embed_documents(self, texts: Sequence[str], titles: Sequence[str] | None = None) -> np.ndarray:
        if self.failures:
            raise RuntimeError(self.failures.pop(0))
        return super().embed_documents(texts, titles)

    def embed_figures(self, figures: Sequence[FigureInput]) -> np.ndarray:
        return HashingEmbedder.embed_documents(self, [f.text for f in figures])


def settled(path: Path) -> Path:
    """``path`` as an inbox file the intake sensor takes: last written a minute ago
    (``kb_assets.sensors.INBOX_SETTLE_SECONDS``: a fresher file may still be being copied)."""
    past = time.time() - 60
    os.utime(path, (past, past))
    return path
