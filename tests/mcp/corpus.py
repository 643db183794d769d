"""A small corpus written straight into the stores through the kb_shared APIs (typed
``PointPayload``s, ``layout`` blob keys and ``identity`` ids, as the embeddings and figures
assets write them); the deterministic embedder the tool
tests use is ``tests.fakes.HashingEmbedder``, imported here for them.

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

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pymupdf

from kb_shared import layout
from kb_shared.search.citations import FigurePayload, PointPayload
from kb_shared.identity import chunk_id, doc_id, figure_id, sha256_bytes
from kb_shared.providers.base import Embedder
from kb_shared.settings import Settings
from kb_shared.stores import factory
from kb_shared.graph_model import Entity, Relationship, entity_key
from kb_shared.stores.vectors import KIND_FIGURE, KIND_TABLE, KIND_TEXT, Point
from tests.fakes import HashingEmbedder  # noqa: F401 - the MCP tests import it from here

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
    """A real PNG of a solid colour, ``width`` x ``height`` pixels. The pixmap is made from
    its samples (``Pixmap.set_rect`` fills pixel by pixel in Python; the same PNG bytes)."""
    samples = bytes((200, 30, 30)) * (width * height)
    return pymupdf.Pixmap(pymupdf.csRGB, width, height, samples, False).tobytes("png")


def payload(document: str, pages: tuple[int | None, int | None], heading: tuple[str, ...] = (),
            index: int | None = None, figure: FigurePayload | None = None) -> dict:
    """The stored payload of a chunk (``index``) or a figure (``figure``) of ``document``."""
    name, title, version, _ = META[document]
    return PointPayload.build(
        heading_path=heading, doc_id=document, name=name, title=title, version=version,
        page_start=pages[0], page_end=pages[1], chunk_index=index,
        pdf_key=layout.pdf_key(document), markdown_key=layout.markdown_key(document),
        figure=figure,
    ).to_payload()


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
            id=chunk_id(spec.document, spec.index), document=spec.document, kind=spec.kind,
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
        keys = layout.figure_keys(RETAIL_ID, number)
        figure = FigurePayload(
            number=number, caption=text.split(": ", 1)[1], stored_key=keys.stored,
            inline_key=keys.inline,
        )
        points.append(Point(
            id=figure_id(RETAIL_ID, number), document=RETAIL_ID, kind=KIND_FIGURE, text=text,
            dense=vector, payload=payload(RETAIL_ID, (page, page), figure=figure),
        ))
        if page is not None:  # figure 2 has no stored PNG: it must keep its links, no image
            blobs.put(keys.stored, tiny_png(80, 60))
            blobs.put(keys.inline, tiny_png(40, 30))
    index.upsert(points)
    index.close()

    for document, (name, title, version, pages) in META.items():
        data = tiny_pdf(pages, title)
        catalog.add_pending(name, document, sha256_bytes(data), len(data), layout.pdf_key(document))
        blobs.put(layout.pdf_key(document), data)
        chunk_count = sum(1 for c in CHUNKS if c.document == document)
        figure_count = 2 if document == RETAIL_ID else 0
        catalog.mark_ready(
            document, title=title, version=version or None, pages=pages, chunk_count=chunk_count,
            figure_count=figure_count, embedding_model=embedder.model,
        )
    for name, reason in (("Queued.pdf", None), ("Broken.pdf", "markdown: the PDF is encrypted")):
        data = tiny_pdf(1, name)
        catalog.add_pending(
            name, doc_id(name), sha256_bytes(data), len(data), layout.pdf_key(doc_id(name))
        )
        if reason:
            catalog.mark_failed(doc_id(name), reason)

    if graph:
        write_home_graph(settings, embedder, catalog=catalog)
    catalog.close()


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


#: Edges per document: ``(source name, type, target name, description, chunk index)``.
GraphEdges = Mapping[str, Sequence[tuple[str, str, str, str, int]]]


def write_graph(store, embedder: Embedder, graph: GraphEdges = GRAPH_EDGES) -> None:
    """Write ``graph`` (default ``GRAPH_EDGES``), each document's edges replacing its own,
    with entities (type "Role") whose name vectors come from ``embedder.embed_names``."""
    for document, edges in graph.items():
        names = list(dict.fromkeys(n for s, _, t, _, _ in edges for n in (s, t)))
        vectors = embedder.embed_names(names)
        entities = [Entity(name=n, type="Role", vector=tuple(float(x) for x in v))
                    for n, v in zip(names, vectors, strict=True)]
        relationships = [
            Relationship(source=entity_key(s), target=entity_key(t), type=kind, description=d,
                         source_doc=document, chunk_id=chunk_id(document, chunk))
            for s, kind, t, d, chunk in edges
        ]
        store.replace_document(document, entities, relationships)


def write_home_graph(
    settings: Settings, embedder: Embedder, graph: GraphEdges = GRAPH_EDGES, *, catalog=None
) -> None:
    """Write ``graph`` into the graph store of ``settings``' home (its schema made for
    ``embedder``'s dimension), through ``catalog``'s engine when given, else its own."""
    own = catalog is None
    catalog = factory.open_catalog(settings) if own else catalog
    store = factory.open_graph_store(settings, engine=catalog.engine)
    try:
        store.ensure_schema(embedder.dimension)
        write_graph(store, embedder, graph)
    finally:
        store.close()
        if own:
            catalog.close()


@contextmanager
def served(home: Path, embedder: Embedder, **fields) -> Iterator[str]:
    """The kb HTTP app on ``home`` (``corpus_settings`` with ``fields``, on a free port, the
    model not warmed) under uvicorn in a thread; yields its base URL, which is also the base
    of the links it hands out."""
    from benchmarks.mcp_server import free_port, serving_in_thread  # noqa: PLC0415
    from kb_mcp.http import build_app  # noqa: PLC0415

    port = free_port()
    app = build_app(corpus_settings(home, mcp_port=port, **fields), embedder=embedder, warm=False)
    with serving_in_thread(app, port) as url:
        yield url


def corpus_settings(home: Path, **fields) -> Settings:
    """Settings on ``home`` with the default host/port (links are http://127.0.0.1:8765)."""
    return Settings(home=home, **fields)
