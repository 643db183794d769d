"""A small corpus written straight into the stores through the kb_shared APIs (the same
payload keys the embeddings and figures assets write), and a deterministic embedder for fast
tool tests.

Documents:

* ``Retail Rules.pdf`` (doc_id ``retail-rules.pdf``), title "Retail Market Rules", version
  "Version 2.1", 3 pages: chunk 0 (p. 1, "1 Introduction"), chunk 1 (pp. 1–2,
  "2 Notifications", the life-support notice), chunk 2 (p. 2, a table with code IN008-24),
  figure 1 on p. 3 (with PNGs), figure 2 with no known page (no PNGs).
* ``Dispatch Procedure.pdf`` (``dispatch-procedure.pdf``), title "Dispatch Procedure
  SO_OP_3705", no version, 2 pages: chunk 0 (p. 1, conformance mode), chunk 1 (p. 2).
* ``Queued.pdf`` pending, ``Broken.pdf`` failed ("markdown: the PDF is encrypted").

Graph: Retailer —MUST_NOTIFY→ Distributor (retail-rules.pdf-1); Distributor —REFERS_TO→
Life support register (retail-rules.pdf-1); Retailer —DEFINES→ Customer (retail-rules.pdf-99,
a chunk that is not in the index); Scheduled generator —MUST_CONFORM_TO→ Dispatch instruction
(dispatch-procedure.pdf-0).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pymupdf

from kb_shared import citations
from kb_shared.identity import doc_id, figure_id, sha256_bytes
from kb_shared.providers.base import Embedder
from kb_shared.settings import Settings
from kb_shared.sparse import tokenize
from kb_shared.stores import factory
from kb_shared.graph_model import Entity, Relationship, entity_key
from kb_shared.stores.vectors import KIND_FIGURE, KIND_TABLE, KIND_TEXT, Point


class HashingEmbedder(Embedder):
    """Deterministic bag-of-words embedder: each sparse term adds ±1 to one of ``dimension``
    buckets chosen by SHA-256, then the vector is L2-normalised. Texts sharing words get a
    high cosine, texts sharing none ~0 — enough to test ranking and thresholds offline."""

    def __init__(self, dimension: int = 64, model: str = "test-hashing") -> None:
        self.dimension = dimension
        self.model = f"{model}-{dimension}"

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
        return np.stack([self._vector(t) for t in texts]) if texts else np.zeros((0, self.dimension), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._vector(text)


RETAIL = "Retail Rules.pdf"
DISPATCH = "Dispatch Procedure.pdf"
RETAIL_ID = doc_id(RETAIL)  # "retail-rules.pdf"
DISPATCH_ID = doc_id(DISPATCH)  # "dispatch-procedure.pdf"

NOTIFY_TEXT = (
    "The Retailer must notify the Distributor within 5 business days after a customer "
    "registers life support equipment, and keep the life support register up to date."
)
TABLE_TEXT = (
    "| Notice | Subject |\n|---|---|\n| IN008-24 | Retailer of last resort event |\n"
    "| IN009-24 | Metering data delay |"
)
CONFORMANCE_TEXT = (
    "A scheduled generator must conform to its dispatch instruction. Conformance mode 2 "
    "means the unit is in an aggregate and follows the aggregate target."
)


@dataclass(frozen=True)
class ChunkSpec:
    document: str
    index: int
    text: str
    heading: tuple[str, ...]
    pages: tuple[int | None, int | None]
    kind: str = KIND_TEXT


CHUNKS = (
    ChunkSpec(RETAIL_ID, 0, "These rules apply to every retailer selling energy to small customers.",
              ("1 Introduction",), (1, 1)),
    ChunkSpec(RETAIL_ID, 1, NOTIFY_TEXT, ("2 Notifications",), (1, 2)),
    ChunkSpec(RETAIL_ID, 2, TABLE_TEXT, ("3 Market notices",), (2, 2), KIND_TABLE),
    ChunkSpec(DISPATCH_ID, 0, CONFORMANCE_TEXT, ("4 Conformance",), (1, 1)),
    ChunkSpec(DISPATCH_ID, 1, "Dispatch intervals are five minutes long.", ("5 Intervals",), (2, 2)),
)

META = {
    RETAIL_ID: (RETAIL, "Retail Market Rules", "Version 2.1", 3),
    DISPATCH_ID: (DISPATCH, "Dispatch Procedure SO_OP_3705", "", 2),
}


def tiny_pdf(pages: int, label: str) -> bytes:
    """A real PDF with one line of text per page."""
    with pymupdf.open() as pdf:
        for number in range(1, pages + 1):
            page = pdf.new_page()
            page.insert_text((72, 72), f"{label} page {number}")
        return pdf.tobytes()


def tiny_png(width: int = 40, height: int = 30) -> bytes:
    """A real PNG of a solid colour."""
    pixmap = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, width, height), False)
    pixmap.set_rect(pixmap.irect, (200, 30, 30))
    return pixmap.tobytes("png")


def pdf_key(document: str) -> str:
    return f"pdfs/{document}"


def figure_keys(document: str, number: int) -> dict[str, str]:
    base = f"figures/{document}/figure-{number}"
    return {citations.FIGURE_KEY: f"{base}.png", citations.FIGURE_INLINE_KEY: f"{base}.inline.png"}


def payload(document: str, pages: tuple[int | None, int | None], heading: tuple[str, ...] = (),
            index: int | None = None, extra: dict | None = None) -> dict:
    name, title, version, _ = META[document]
    return citations.citation_payload(
        doc_id=document, name=name, title=title, version=version, page_start=pages[0],
        page_end=pages[1], heading_path=heading, chunk_index=index, pdf_key=pdf_key(document),
        markdown_key=f"markdown/{document}.md", extra=extra,
    )


def write_corpus(settings: Settings, embedder: Embedder, *, graph: bool = True) -> None:
    """Write the corpus of the module docstring into the stores ``settings`` points at."""
    catalog = factory.open_catalog(settings)
    blobs = factory.open_blob_store(settings)
    index = factory.open_vector_index(settings)
    index.open(embedder.model, embedder.dimension)

    points: list[Point] = []
    texts = [f"{META[c.document][1]} › {' › '.join(c.heading)}\n\n{c.text}" for c in CHUNKS]
    for spec, text, vector in zip(CHUNKS, texts, embedder.embed_documents(texts), strict=True):
        points.append(Point(
            id=f"{spec.document}-{spec.index}", document=spec.document, kind=spec.kind,
            text=spec.text, dense=vector,
            payload=payload(spec.document, spec.pages, spec.heading, spec.index),
            sparse_text=text,
        ))
    figure_texts = [
        "Figure 1: Life support notification flow from retailer to distributor",
        "Figure 2: Organisation chart of the market operator",
    ]
    figure_vectors = embedder.embed_documents(figure_texts)
    for number, (text, vector, page) in enumerate(zip(figure_texts, figure_vectors, (3, None), strict=True), 1):
        keys = figure_keys(RETAIL_ID, number)
        points.append(Point(
            id=figure_id(RETAIL_ID, number), document=RETAIL_ID, kind=KIND_FIGURE, text=text,
            dense=vector,
            payload=payload(RETAIL_ID, (page, page), extra={
                **keys, "figure_number": number, "caption": text.split(": ", 1)[1],
            }),
        ))
        if page is not None:  # figure 2 has no stored PNG: it must keep its links, no image
            blobs.put(keys[citations.FIGURE_KEY], tiny_png(80, 60))
            blobs.put(keys[citations.FIGURE_INLINE_KEY], tiny_png(40, 30))
    index.upsert(points)
    index.close()

    for document, (name, title, version, pages) in META.items():
        data = tiny_pdf(pages, title)
        catalog.add_pending(name, document, sha256_bytes(data), len(data), pdf_key(document))
        blobs.put(pdf_key(document), data)
        chunk_count = sum(1 for c in CHUNKS if c.document == document)
        figure_count = 2 if document == RETAIL_ID else 0
        catalog.mark_ready(
            document, title=title, version=version or None, pages=pages, chunk_count=chunk_count,
            figure_count=figure_count, embedding_model=embedder.model,
        )
    for name, reason in (("Queued.pdf", None), ("Broken.pdf", "markdown: the PDF is encrypted")):
        data = tiny_pdf(1, name)
        catalog.add_pending(name, doc_id(name), sha256_bytes(data), len(data), pdf_key(doc_id(name)))
        if reason:
            catalog.mark_failed(doc_id(name), reason)

    if graph:
        store = factory.open_graph_store(settings, engine=catalog.engine)
        store.ensure_schema(embedder.dimension)
        write_graph(store, embedder)
        store.close()
    catalog.engine.dispose()


GRAPH_EDGES = {
    RETAIL_ID: (
        ("Retailer", "MUST_NOTIFY", "Distributor", "must notify the distributor within 5 business days", 1),
        ("Distributor", "REFERS_TO", "Life support register", "keep the life support register", 1),
        ("Retailer", "DEFINES", "Customer", "a customer is a person buying energy", 99),
    ),
    DISPATCH_ID: (
        ("Scheduled generator", "MUST_CONFORM_TO", "Dispatch instruction",
         "must conform to its dispatch instruction", 0),
    ),
}


def write_graph(store, embedder: Embedder) -> None:
    """Write ``GRAPH_EDGES`` (entities with name vectors from ``embedder.embed_names``)."""
    for document, edges in GRAPH_EDGES.items():
        names = list(dict.fromkeys(n for s, _, t, _, _ in edges for n in (s, t)))
        vectors = embedder.embed_names(names)
        entities = [Entity(name=n, type="Role", vector=tuple(float(x) for x in v))
                    for n, v in zip(names, vectors, strict=True)]
        relationships = [
            Relationship(source=entity_key(s), target=entity_key(t), type=kind, description=d,
                         source_doc=document, chunk_id=f"{document}-{chunk}")
            for s, kind, t, d, chunk in edges
        ]
        store.replace_document(document, entities, relationships)


def corpus_settings(home: Path, **fields) -> Settings:
    """Settings on ``home`` with the default host/port (links are http://127.0.0.1:8765)."""
    return Settings(home=home, **fields)
