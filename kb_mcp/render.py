"""What the tools send back: the text a model reads, the structured content a program reads,
and the figure images.

Rules (mcp-utilities README, "What a response costs" and "Figures"; issue 4):

* A result's text is rendered once, in the text content. ``structuredContent`` carries ids,
  citation fields, scores and URLs only — never the chunk text a second time (dropping the
  copy halved responses in the reference system).
* Every result starts with the numbered citation header of ``kb_shared.citations``
  (``[1] Title — Version — pp. 12–13 — Section``), and a search ends with a deduplicated
  source list, one line per document with its file URL.
* A figure result carries a line ``[Open figure](….png) · [Source page N](….pdf#page=N)``
  (no ``#page=`` when the page is unknown: ``#page=N`` is a PDF Open Parameters convention
  and ``#page=None`` would be junk). Up to ``MAX_INLINE_IMAGES`` figures also come back as
  image content, the 1024 px inline copy, each under ``MAX_INLINE_IMAGE_BYTES`` and preceded
  by a text block naming its result number (image content has no caption field).
* Links point at this server's read-only ``/files/{blob key}`` route, so they resolve.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import logging
from collections.abc import Iterable, Sequence
from urllib.parse import quote

from mcp.types import CallToolResult, ContentBlock, ImageContent, TextContent
from pydantic import BaseModel, Field

from kb_mcp.search import (
    GRAPH_SEED_MIN_SIMILARITY,
    NOTHING_FOUND_SIMILARITY,
    Catalogue,
    DocsAnswer,
    Found,
    GraphAnswer,
    ReadAnswer,
)
from kb_shared import citations
from kb_shared.citations import Citation, format_pages
from kb_shared.settings import Settings
from kb_shared.stores.blobs import BlobStore
from kb_shared.stores.catalog import DocumentRow

log = logging.getLogger(__name__)

#: At most this many figures per response come back as image content (mcp-utilities README,
#: MAX_INLINE_FIGURE_IMAGES = 4: base64 inflates ~1.33x and the transport buffers the whole
#: response).
MAX_INLINE_IMAGES = 4

#: Largest PNG returned inline, in bytes (mcp-utilities README, MAX_INLINE_FIGURE_BYTES,
#: "1.5 MB"); a larger one keeps its link and is not inlined.
MAX_INLINE_IMAGE_BYTES = 1_500_000

#: How many closest matches a low-confidence answer still shows (clearly labelled).
LOW_CONFIDENCE_SHOWN = 3

#: The 8-byte PNG signature (PNG specification, section 5.2).
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

FILES_ROUTE = "/files/"

#: Payload keys the figures asset adds to a figure point (``kb_assets/assets/figures.py``).
FIGURE_NUMBER = "figure_number"
CAPTION = "caption"


# ---------------------------------------------------------------------------------------------
# Links
# ---------------------------------------------------------------------------------------------


def base_url(settings: Settings) -> str:
    """``settings.public_url`` or ``http://{mcp_host}:{mcp_port}`` (IPv6 hosts bracketed),
    without a trailing slash."""
    if settings.public_url:
        return settings.public_url.rstrip("/")
    host = settings.mcp_host
    try:
        if ipaddress.ip_address(host).version == 6:
            host = f"[{host}]"
    except ValueError:
        pass
    return f"http://{host}:{settings.mcp_port}"


#: Query parameter carrying a file link's signature.
SIGNATURE_PARAM = "sig"


def signing_key(tokens: Sequence[str]) -> bytes | None:
    """The key file links are signed with: SHA-256 over the configured bearer tokens
    (sorted, NUL-separated), ``None`` when the server has no tokens (links need no
    signature then). Rotating the tokens invalidates every link handed out before."""
    if not tokens:
        return None
    return hashlib.sha256("\0".join(sorted(tokens)).encode("utf-8")).digest()


def file_signature(key: bytes, blob_key: str) -> str:
    """HMAC-SHA256 of one blob key, hex, first 32 characters (128 bits; RFC 2104 HMAC,
    truncation as RFC 2104 section 5 allows)."""
    return hmac.new(key, blob_key.encode("utf-8"), hashlib.sha256).hexdigest()[:32]


def links_for(settings: Settings, *, stdio: bool = False) -> Links:
    """The citation links a server with these settings hands out.

    Over HTTP: ``{base_url}/files/{key}``, signed when bearer tokens are set. Over stdio
    there is no HTTP server to open them, so unless ``public_url`` names one, a local blob
    store (``file://``) gives ``file://`` links straight to the stored files — the stdio
    client runs on the same machine. Other blob stores keep the HTTP form.
    """
    if stdio and not settings.public_url:
        root = settings.resolved_blob_url
        if root.startswith("file://"):
            return Links(root, route="/")
    return Links(base_url(settings), signing_key(settings.token_list))


class Links:
    """Builds the URLs citations point at: ``{base}/files/{percent-encoded blob key}``.

    With bearer tokens configured, a browser opening a citation link cannot send the token,
    so each link carries ``?sig=`` — an HMAC of its own blob key (``file_signature``) that
    ``/files`` accepts instead of the token. A signed link opens that one file and no other;
    it does not expire (a citation is meant to be shared), and rotating the tokens revokes it.
    """

    def __init__(self, base: str, key: bytes | None = None, *, route: str = FILES_ROUTE) -> None:
        self.base = base.rstrip("/")
        self.key = key
        self.route = route

    def file(self, key: str | None) -> str | None:
        """URL of a stored blob, ``None`` without a key."""
        if not key:
            return None
        url = self.base + self.route + quote(key, safe="/")
        if self.key is not None:
            url += f"?{SIGNATURE_PARAM}={file_signature(self.key, key)}"
        return url

    def page(self, key: str | None, page: int | None) -> str | None:
        """URL of a stored PDF opened at ``page`` (``#page=N``; no fragment when unknown)."""
        url = self.file(key)
        if url is None or page is None:
            return url
        return f"{url}#page={page}"


# ---------------------------------------------------------------------------------------------
# Structured content models
# ---------------------------------------------------------------------------------------------


class ResultRef(BaseModel):
    """One numbered result: where it is and how it scored (its text is in the text content)."""

    number: int = Field(description="The n of the [n] citation header in the text content.")
    id: str = Field(description="Chunk id '{doc_id}-{n}' or figure id '{doc_id}#figure-{n}'.")
    doc_id: str
    kind: str = Field(description="'text', 'table' or 'figure'.")
    chunk_number: int | None = Field(
        None, description="0-based chunk number (what read_doc takes); null for figures."
    )
    figure_number: int | None = None
    title: str
    version: str | None = None
    page_start: int | None = Field(None, description="1-based first page; null when unknown.")
    page_end: int | None = None
    section: str | None = Field(None, description="Heading path, outermost first.")
    score: float | None = Field(
        None, description="Fused reciprocal-rank score (or rerank relevance); higher is better."
    )
    similarity: float | None = Field(
        None, description="Cosine similarity of the query and this result's dense vector."
    )
    url: str | None = Field(None, description="The source PDF, at the page when known.")
    figure_url: str | None = Field(None, description="The stored figure PNG (figures only).")
    image: bool = Field(False, description="True when the figure is also attached as an image.")


class SourceRef(BaseModel):
    """One cited document (deduplicated, in first-cited order)."""

    doc_id: str
    title: str
    version: str | None = None
    url: str | None = None


class SearchDocsOutput(BaseModel):
    """Structured content of search_docs."""

    results: list[ResultRef]
    sources: list[SourceRef]
    next_offset: int | None = Field(
        None, description="Pass as offset to get the next page; null on the last page."
    )
    low_confidence: bool = Field(
        description="True when nothing in the corpus clearly matches: do not answer from it."
    )
    best_similarity: float | None = Field(
        None, description="Best cosine similarity of the query to any indexed point."
    )
    exact_terms: list[str] = Field(
        default_factory=list, description="Codes or clause numbers of the query found verbatim."
    )
    term_coverage: float = Field(
        0.0, description="Best share of the query's terms found in one result (0-1)."
    )
    reranked: bool = False


class SeedRef(BaseModel):
    """An entity the graph walk started from."""

    key: str
    name: str
    type: str
    similarity: float


class RelationshipRef(BaseModel):
    """One relationship ``R{number}`` (its description is in the text content)."""

    number: int = Field(description="The n of [Rn] in the text content.")
    id: str
    source: str
    type: str
    target: str
    doc_id: str
    chunk_id: str = Field(description="The chunk it was extracted from.")
    hops: int = Field(description="1 = touches a seed entity, 2 = one edge further out.")
    seed: str
    seed_similarity: float
    excerpt: int | None = Field(
        None, description="Number of the supporting excerpt [n]; null when the chunk is missing."
    )


class SearchGraphOutput(BaseModel):
    """Structured content of search_graph."""

    seeds: list[SeedRef]
    relationships: list[RelationshipRef]
    excerpts: list[ResultRef]
    sources: list[SourceRef]


class ReadDocOutput(BaseModel):
    """Structured content of read_doc."""

    doc_id: str
    name: str
    title: str
    version: str | None = None
    chunk_count: int | None = None
    url: str | None = None
    chunks: list[ResultRef]
    missing: list[int] = Field(
        default_factory=list, description="Requested chunk numbers that do not exist."
    )


class DocumentRef(BaseModel):
    """One ready document of the catalog."""

    doc_id: str
    name: str
    title: str | None = None
    version: str | None = None
    pages: int | None = None
    chunk_count: int | None = None
    figure_count: int | None = None
    url: str | None = None
    updated_at: str = Field(description="ISO 8601, UTC.")


class ListDocumentsOutput(BaseModel):
    """Structured content of list_documents (and the kb://documents resource)."""

    documents: list[DocumentRef]
    pending: int = Field(description="Documents added but not built yet.")
    failed: int = Field(description="Documents whose build failed.")


# ---------------------------------------------------------------------------------------------
# Pieces shared by the search tools
# ---------------------------------------------------------------------------------------------


def _payload_int(found: Found, key: str) -> int | None:
    value = found.point.payload.get(key)
    return None if value is None or value == "" else int(value)


def result_ref(found: Found, links: Links, *, image: bool = False) -> ResultRef:
    """The structured form of one result."""
    payload = found.point.payload
    cite = found.citation
    return ResultRef(
        number=found.number,
        id=found.point.id,
        doc_id=found.point.document,
        kind=found.point.kind,
        chunk_number=found.chunk_number,
        figure_number=_payload_int(found, FIGURE_NUMBER) if found.is_figure else None,
        title=cite.title,
        version=cite.version or None,
        page_start=cite.page_start,
        page_end=cite.page_end,
        section=cite.section or None,
        score=round(found.score, 6) if found.score else None,
        similarity=round(found.similarity, 4) if found.similarity is not None else None,
        url=links.page(payload.get(citations.PDF_KEY), cite.page_start),
        figure_url=links.file(payload.get(citations.FIGURE_KEY)) if found.is_figure else None,
        image=image,
    )


def figure_line(found: Found, links: Links) -> str:
    """``[Open figure](….png) · [Source page N](….pdf#page=N)``; the page link reads
    ``[Source PDF](….pdf)`` when the page is unknown, and parts without a stored key are left
    out."""
    payload = found.point.payload
    parts: list[str] = []
    figure = links.file(payload.get(citations.FIGURE_KEY))
    if figure:
        parts.append(f"[Open figure]({figure})")
    page = found.citation.page_start
    source = links.page(payload.get(citations.PDF_KEY), page)
    if source:
        label = f"Source page {page}" if page is not None else "Source PDF"
        parts.append(f"[{label}]({source})")
    return " · ".join(parts)


def _locator(found: Found, links: Links) -> str:
    """``chunk 12 of doc_id · [Source page 12](….pdf#page=12)`` under a text result's header."""
    parts = []
    if found.chunk_number is not None:
        parts.append(f"chunk {found.chunk_number} of {found.point.document}")
    page = found.citation.page_start
    url = links.page(found.point.payload.get(citations.PDF_KEY), page)
    if url and page is not None:
        parts.append(f"[Source page {page}]({url})")
    return " · ".join(parts)


def render_found(found: Found, links: Links) -> str:
    """One result block: citation header, locator or figure lines, then the stored text."""
    lines = [found.citation.header(found.number)]
    if found.is_figure:
        number = _payload_int(found, FIGURE_NUMBER)
        caption = str(found.point.payload.get(CAPTION) or "").strip()
        label = f"Figure {number}" if number is not None else "Figure"
        text = found.point.text.strip()
        shown_caption = caption and caption not in text
        suffix = f": {caption}" if shown_caption else ""
        lines.append(f"{label} of {found.point.document}{suffix}")
        if text:
            lines.append(text)
        line = figure_line(found, links)
        if line:
            lines.append(line)
    else:
        locator = _locator(found, links)
        if locator:
            lines.append(locator)
        lines.append(found.point.text.strip())
    return "\n".join(lines)


def sources(found: Iterable[Found], links: Links) -> tuple[list[str], list[SourceRef]]:
    """The deduplicated source list (``kb_shared.citations.source_list`` lines) and its
    structured form, in first-cited order."""
    items = list(found)
    pdf_key = {f.point.document: f.point.payload.get(citations.PDF_KEY) for f in reversed(items)}

    def url_for(cite: Citation) -> str | None:
        return links.file(pdf_key.get(cite.doc_id))

    cites = [f.citation for f in items]
    lines = citations.source_list(cites, url_for)
    refs: list[SourceRef] = []
    seen: set[str] = set()
    for cite in cites:
        if cite.doc_id in seen:
            continue
        seen.add(cite.doc_id)
        refs.append(
            SourceRef(
                doc_id=cite.doc_id, title=cite.title, version=cite.version or None,
                url=url_for(cite),
            )
        )
    return lines, refs


def figure_images(
    blobs: BlobStore, results: Sequence[Found]
) -> list[tuple[Found, bytes]]:
    """The inline PNG of up to ``MAX_INLINE_IMAGES`` figure results, in result order.

    The 1024 px inline copy is used; a figure stored before inline copies existed falls back
    to its stored PNG. A figure whose PNG is missing, over ``MAX_INLINE_IMAGE_BYTES``, not a
    PNG, or unreadable is skipped (it keeps its links): an image never fails a search.
    """
    images: list[tuple[Found, bytes]] = []
    for found in results:
        if len(images) >= MAX_INLINE_IMAGES:
            break
        if not found.is_figure:
            continue
        payload = found.point.payload
        for key in (payload.get(citations.FIGURE_INLINE_KEY), payload.get(citations.FIGURE_KEY)):
            if not key:
                continue
            try:
                if blobs.size(key) > MAX_INLINE_IMAGE_BYTES:
                    continue
                data = blobs.get(key)
            except (OSError, ValueError) as exc:
                log.info("figure %s: %s not inlined: %s", found.point.id, key, exc)
                continue
            if data.startswith(PNG_SIGNATURE) and len(data) <= MAX_INLINE_IMAGE_BYTES:
                images.append((found, data))
                break
    return images


def image_blocks(images: Sequence[tuple[Found, bytes]]) -> list[ContentBlock]:
    """For each image: a text block naming its result, then the image content."""
    blocks: list[ContentBlock] = []
    for found, data in images:
        number = _payload_int(found, FIGURE_NUMBER)
        pages = format_pages(found.citation.page_start, found.citation.page_end)
        label = f"figure {number}" if number is not None else "figure"
        where = f", {pages}" if pages else ""
        blocks.append(
            TextContent(
                type="text",
                text=f"Image for result [{found.number}]: {label} of {found.citation.title}{where}",
            )
        )
        blocks.append(
            ImageContent(
                type="image", data=base64.b64encode(data).decode("ascii"), mime_type="image/png"
            )
        )
    return blocks


# ---------------------------------------------------------------------------------------------
# Tool results
# ---------------------------------------------------------------------------------------------


def docs_result(answer: DocsAnswer, links: Links, blobs: BlobStore) -> CallToolResult:
    """The search_docs result: one text block, then each inline figure (label + image)."""
    shown = answer.results[:LOW_CONFIDENCE_SHOWN] if answer.low_confidence else answer.results
    images = [] if answer.low_confidence else figure_images(blobs, shown)
    with_image = {found.number for found, _ in images}
    parts: list[str] = []
    if not shown:
        parts.append(
            "No passage matched this query. The corpus may not cover it: call list_documents "
            "to see what is indexed (a file name rarely matches a document's title), try other "
            "words, or tell the user it is not in the indexed documents. Do not invent an answer."
        )
    elif answer.low_confidence:
        best = f"{answer.best_similarity:.2f}" if answer.best_similarity is not None else "n/a"
        parts.append(
            "The corpus has nothing that clearly matches this query: the closest passage has "
            f"cosine similarity {best} (below {NOTHING_FOUND_SIMILARITY:.2f}), none contains "
            f"most of the query's words ({answer.coverage:.0%} at best) and no code or clause "
            "number in the query matched verbatim. Do not answer from the passages below; tell "
            "the user the indexed documents do not seem to cover it, call list_documents to "
            "check what is indexed, or search again with other words."
        )
        parts.append("Closest passages (low confidence, probably unrelated):")
    else:
        first, last = shown[0].number, shown[-1].number
        how = "reranked" if answer.reranked else "hybrid dense + keyword search, fused by rank"
        parts.append(f"Results {first}–{last} ({how}). Cite them by their [n] headers and pages.")
    parts += [render_found(found, links) for found in shown]
    source_lines, source_refs = sources(shown, links)
    if source_lines:
        parts.append("Sources:\n" + "\n".join(source_lines))
    next_offset = None if answer.low_confidence else answer.next_offset
    if next_offset is not None:
        parts.append(f"More results: call search_docs again with offset={next_offset}.")
    structured = SearchDocsOutput(
        results=[result_ref(f, links, image=f.number in with_image) for f in shown],
        sources=source_refs,
        next_offset=next_offset,
        low_confidence=answer.low_confidence,
        best_similarity=(
            round(answer.best_similarity, 4) if answer.best_similarity is not None else None
        ),
        exact_terms=answer.exact_terms,
        term_coverage=round(answer.coverage, 4),
        reranked=answer.reranked,
    )
    content: list[ContentBlock] = [TextContent(type="text", text="\n\n".join(parts))]
    content += image_blocks(images)
    return CallToolResult(content=content, structured_content=structured.model_dump(mode="json"))


def graph_result(answer: GraphAnswer, links: Links) -> CallToolResult:
    """The search_graph result: seeds, ``[Rn]`` relationship lines, ``[n]`` excerpts, sources."""
    if not answer.seeds:
        closest = answer.closest
        detail = (
            f" (the closest is {closest.name!r}, similarity {closest.score:.2f}, below "
            f"{GRAPH_SEED_MIN_SIMILARITY:.2f})"
            if closest is not None
            else ""
        )
        parts = [
            f"No entity in the knowledge graph is close to this query{detail}, so the graph "
            "has nothing on it. Use search_docs for passages, or call list_documents to see "
            "what is indexed; do not invent relationships."
        ]
    else:
        seeds = ", ".join(f"{s.name} ({s.score:.2f})" for s in answer.seeds)
        parts = [f"Seed entities (similarity to the query): {seeds}. Walked {answer.hops} hop(s)."]
    if answer.seeds and not answer.relationships:
        parts.append(
            "No relationship touches these entities. The graph has nothing on this query: use "
            "search_docs for passages, or call list_documents to see what is indexed."
        )
    elif answer.relationships:
        lines = []
        for rel in answer.relationships:
            edge = rel.relationship
            chunk = edge.chunk_id.removeprefix(f"{edge.source_doc}-")
            line = (
                f"[R{rel.number}] {rel.source_name} —{edge.type}→ {rel.target_name} "
                f"({edge.source_doc}, chunk {chunk})"
            )
            if edge.description.strip():
                line += f": {edge.description.strip()}"
            if rel.excerpt is not None:
                line += f" — excerpt [{rel.excerpt}]"
            else:
                line += (
                    f" — supporting excerpt missing: chunk {edge.chunk_id} is not in the vector "
                    "index (the document's embeddings and graph are out of step; the operator "
                    f"should run `kb rebuild embeddings {edge.source_doc}`)"
                )
            lines.append(line)
        parts.append("Relationships (hop 1 first, then by seed similarity):\n" + "\n".join(lines))
    if answer.excerpts:
        parts.append("Supporting excerpts:")
        parts += [render_found(found, links) for found in answer.excerpts]
        source_lines, source_refs = sources(answer.excerpts, links)
        parts.append("Sources:\n" + "\n".join(source_lines))
    else:
        source_refs = []
    structured = SearchGraphOutput(
        seeds=[
            SeedRef(key=s.key, name=s.name, type=s.type, similarity=round(s.score, 4))
            for s in answer.seeds
        ],
        relationships=[
            RelationshipRef(
                number=rel.number,
                id=rel.relationship.id,
                source=rel.source_name,
                type=rel.relationship.type,
                target=rel.target_name,
                doc_id=rel.relationship.source_doc,
                chunk_id=rel.relationship.chunk_id,
                hops=rel.hops,
                seed=rel.seed,
                seed_similarity=round(rel.seed_similarity, 4),
                excerpt=rel.excerpt,
            )
            for rel in answer.relationships
        ],
        excerpts=[result_ref(found, links) for found in answer.excerpts],
        sources=source_refs,
    )
    return CallToolResult(
        content=[TextContent(type="text", text="\n\n".join(parts))],
        structured_content=structured.model_dump(mode="json"),
    )


def read_result(answer: ReadAnswer, links: Links) -> CallToolResult:
    """The read_doc result: each chunk with its header (``chunk n`` in place of a rank)."""
    row = answer.document
    parts = []
    for found in answer.chunks:
        block = render_found(found, links)
        parts.append(block)
    if answer.missing:
        last = (row.chunk_count or 0) - 1
        parts.append(
            f"Not found: chunk {', '.join(map(str, answer.missing))} (this document has "
            f"{row.chunk_count} chunks, numbered 0–{last})."
        )
    structured = ReadDocOutput(
        doc_id=row.doc_id,
        name=row.name,
        title=(row.title or row.name),
        version=row.version or None,
        chunk_count=row.chunk_count,
        url=links.file(row.blob_key),
        chunks=[result_ref(found, links) for found in answer.chunks],
        missing=answer.missing,
    )
    return CallToolResult(
        content=[TextContent(type="text", text="\n\n".join(parts))],
        structured_content=structured.model_dump(mode="json"),
    )


def document_ref(row: DocumentRow, links: Links) -> DocumentRef:
    """The structured form of one catalog row."""
    return DocumentRef(
        doc_id=row.doc_id,
        name=row.name,
        title=row.title or None,
        version=row.version or None,
        pages=row.pages,
        chunk_count=row.chunk_count,
        figure_count=row.figure_count,
        url=links.file(row.blob_key),
        updated_at=row.updated_at.isoformat(),
    )


def catalogue_output(cat: Catalogue, links: Links) -> ListDocumentsOutput:
    """The catalog's structured form (list_documents and kb://documents)."""
    return ListDocumentsOutput(
        documents=[document_ref(row, links) for row in cat.ready],
        pending=len(cat.pending),
        failed=len(cat.failed),
    )


def catalogue_result(cat: Catalogue, links: Links) -> CallToolResult:
    """The list_documents result."""
    parts: list[str] = []
    if cat.ready:
        lines = []
        for row in cat.ready:
            label = row.title or row.name
            if row.version:
                label += f" ({row.version})"
            counts = f"{row.pages} pages, {row.chunk_count} chunks"
            if row.figure_count:
                counts += f", {row.figure_count} figures"
            url = links.file(row.blob_key)
            lines.append(f"- {row.name} [{row.doc_id}] — {label} — {counts} — {url}")
        parts.append(
            f"{len(cat.ready)} document(s) ready to search (file name [doc_id] — title — size — "
            "PDF). search_docs and read_doc take the file name or the doc_id:\n"
            + "\n".join(lines)
        )
    else:
        parts.append("No document is ready to search yet.")
    if cat.pending:
        names = ", ".join(row.name for row in cat.pending)
        parts.append(f"{len(cat.pending)} pending (added, not built yet): {names}")
    if cat.failed:
        items = "; ".join(f"{row.name}: {row.failure_reason}" for row in cat.failed)
        parts.append(f"{len(cat.failed)} failed to build: {items}")
    if not (cat.ready or cat.pending or cat.failed):
        parts = [
            "The corpus is empty: the catalog has no documents. Add PDFs with `kb add PATH…`."
        ]
    return CallToolResult(
        content=[TextContent(type="text", text="\n\n".join(parts))],
        structured_content=catalogue_output(cat, links).model_dump(mode="json"),
    )
