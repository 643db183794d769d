"""What the tools send back: the text a model reads and the structured content a program reads.
Pure formatting: every input (answers, links, loaded images) is given; nothing is read here.

Rules (mcp-utilities README, "What a response costs" and "Figures"; issue 4):

* A result's text is rendered once, in the text content. ``structuredContent``
  (``kb_mcp.schemas``) carries ids, citation fields, scores and URLs only.
* Every result starts with the numbered citation header of ``kb_shared.search.citations``
  (``[1] Title — Version — pp. 12–13 (answer on p. 13) — Section``: every page its passage is
  on, and its quote's page), the passage, then a ``Quote, [p. 13](….pdf#page=13): “…”`` line
  (``kb_shared.search.quotes``); a search ends with a deduplicated source list, one line per document
  with its file URL. A result's page link opens its quote's page.
* A figure result carries a line ``[Open figure](….png) · [Source page N](….pdf#page=N)``
  (no ``#page=`` when the page is unknown). Each inline image (``kb_mcp.images``) follows the
  text, preceded by a text block naming its result number (image content has no caption).
* A page whose printed label differs is named by the label with the physical page beside it
  (``p. iv (PDF page 6)``, ``[Source page iv (PDF page 6)](….pdf#page=6)``): links always
  use the physical page.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence

from mcp.types import CallToolResult, ContentBlock, ImageContent, TextContent
from pydantic import BaseModel

from kb_mcp.documents import DocumentList, ReadAnswer
from kb_mcp.graph_search import GRAPH_SEED_MIN_SIMILARITY, GraphAnswer, RankedRelationship
from kb_mcp.links import Links
from kb_mcp.schemas import (
    DocumentRef,
    ListDocumentsOutput,
    ReadDocOutput,
    RelationshipRef,
    ResultRef,
    SearchDocsOutput,
    SearchGraphOutput,
    SeedRef,
    SourceRef,
)
from kb_shared.search import citations
from kb_shared.search.citations import Citation
from kb_shared.identity import split_version_key
from kb_shared.search.quotes import Quote
from kb_shared.search.retrieval import NOTHING_FOUND_SIMILARITY, DocsAnswer, Passage
from kb_shared.search.subjects import absent_message
from kb_shared.stores.catalog import DocumentRow

#: How many closest matches a low-confidence answer still shows (clearly labelled).
LOW_CONFIDENCE_SHOWN = 3


# ---------------------------------------------------------------------------------------------
# Pieces shared by the search tools
# ---------------------------------------------------------------------------------------------


def shown_results(answer: DocsAnswer) -> list[Passage]:
    """The results a search_docs answer shows: all of the page, or the first
    ``LOW_CONFIDENCE_SHOWN`` of a low-confidence one."""
    return answer.results[:LOW_CONFIDENCE_SHOWN] if answer.low_confidence else answer.results


def result_ref(passage: Passage, links: Links, *, image: bool = False) -> ResultRef:
    """The structured form of one result."""
    cite = passage.citation
    figure = passage.payload.figure if passage.is_figure else None
    return ResultRef(
        number=passage.number,
        id=passage.point.id,
        doc_id=passage.payload.doc_id or passage.point.document,
        kind=passage.point.kind,
        chunk_number=passage.chunk_number,
        figure_number=passage.figure_number,
        title=cite.title,
        version=cite.version or None,
        page_start=cite.page_start,
        page_end=cite.page_end,
        section=cite.section or None,
        score=round(passage.score, 6) if passage.score else None,
        similarity=round(passage.similarity, 4) if passage.similarity is not None else None,
        quote=passage.quote.text if passage.quote is not None else None,
        quote_page=passage.quote.page if passage.quote is not None else None,
        url=links.page(passage.payload.pdf_key, _link_page(passage)),
        figure_url=links.file(figure.stored_key) if figure is not None else None,
        image=image,
    )


def figure_line(passage: Passage, links: Links) -> str:
    """``[Open figure](….png) · [Source page N](….pdf#page=N)``; the page link reads
    ``[Source PDF](….pdf)`` when the page is unknown, and parts without a stored key are left
    out."""
    parts: list[str] = []
    figure = passage.payload.figure
    url = links.file(figure.stored_key) if figure is not None else None
    if url:
        parts.append(f"[Open figure]({url})")
    parts.append(_source_link(passage, links, unpaged="Source PDF"))
    return " · ".join(p for p in parts if p)


def _locator(passage: Passage, links: Links) -> str:
    """``chunk 12 of doc_id · [Source page 12](….pdf#page=12)`` under a text result's header;
    a chunk without a page (a ``.md``/``.txt`` document, cited by its section) links the
    stored file: ``[Source file](…/guide.md)``."""
    parts = []
    if passage.chunk_number is not None:
        doc_id = passage.payload.doc_id or passage.point.document
        parts.append(f"chunk {passage.chunk_number} of {doc_id}")
    parts.append(_source_link(passage, links, unpaged="Source file"))
    return " · ".join(p for p in parts if p)


def _link_page(passage: Passage) -> int | None:
    """The page a result's link opens: its quote's page, else its first page."""
    if passage.quote is not None and passage.quote.page is not None:
        return passage.quote.page
    return passage.citation.page_start


def _source_link(passage: Passage, links: Links, *, unpaged: str) -> str:
    """``[Source page N](….pdf#page=N)`` at the quote's page (else the first page), or
    ``[{unpaged}](…)`` linking the whole stored file when the page is unknown; ``""`` when
    there is no stored file to link."""
    page = _link_page(passage)
    url = links.page(passage.payload.pdf_key, page)
    if not url:
        return ""
    if page is None:
        label = unpaged
    elif passage.quote is not None and passage.quote.page is not None:
        label = f"Source page {passage.quote.page_reference}"
    else:
        label = f"Source page {passage.citation.first_page_reference}"
    return f"[{label}]({url})"


def _quote_line(passage: Passage, quote: Quote, links: Links) -> str:
    """``Quote, [p. 8](….pdf#page=8): “…”`` (``Quote: “…”`` when the page or file is
    unknown)."""
    url = links.page(passage.payload.pdf_key, quote.page) if quote.page is not None else None
    where = f", [p. {quote.page_reference}]({url})" if url else (
        f", p. {quote.page_reference}" if quote.page is not None else "")
    return f"Quote{where}: \u201c{quote.text}\u201d"


def render_passage(passage: Passage, links: Links) -> str:
    """One result block: citation header (every page of the passage, and the answer's page
    when it spans several), locator or figure lines, the stored text, then the quote with a
    link to its page."""
    quote = passage.quote
    answer = quote.page_reference if quote is not None else ""
    lines = [passage.citation.header(passage.number, answer)]
    if passage.is_figure:
        number = passage.figure_number
        figure = passage.payload.figure
        caption = figure.caption if figure is not None else ""
        label = f"Figure {number}" if number is not None else "Figure"
        text = passage.point.text.strip()
        suffix = f": {caption}" if caption and caption not in text else ""
        lines.append(f"{label} of {passage.payload.doc_id or passage.point.document}{suffix}")
        if text:
            lines.append(text)
        line = figure_line(passage, links)
        if line:
            lines.append(line)
    else:
        locator = _locator(passage, links)
        if locator:
            lines.append(locator)
        lines.append(passage.point.text.strip())
        if quote is not None:
            lines.append(_quote_line(passage, quote, links))
    return "\n".join(lines)


def sources(passages: Iterable[Passage], links: Links) -> tuple[list[str], list[SourceRef]]:
    """The deduplicated source list (``kb_shared.search.citations.source_list`` lines) and its
    structured form, in first-cited order."""
    items = list(passages)
    pdf_key = {p.citation.doc_id: p.payload.pdf_key for p in reversed(items)}

    def url_for(cite: Citation) -> str | None:
        return links.file(pdf_key.get(cite.doc_id))

    cites = [p.citation for p in items]
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


def image_blocks(images: Sequence[tuple[Passage, bytes]]) -> list[ContentBlock]:
    """For each loaded image: a text block naming its result, then the image content."""
    blocks: list[ContentBlock] = []
    for passage, data in images:
        number = passage.figure_number
        pages = passage.citation.pages
        label = f"figure {number}" if number is not None else "figure"
        where = f", {pages}" if pages else ""
        blocks.append(
            TextContent(
                type="text",
                text=(
                    f"Image for result [{passage.number}]: {label} of "
                    f"{passage.citation.title}{where}"
                ),
            )
        )
        blocks.append(
            ImageContent(
                type="image", data=base64.b64encode(data).decode("ascii"), mime_type="image/png"
            )
        )
    return blocks


def tool_result(
    text: str, structured: BaseModel, extra: Sequence[ContentBlock] = ()
) -> CallToolResult:
    """The result of a tool with an output schema (every kb tool but ``echo``): ``text`` as
    the first content block, then ``extra`` (image blocks); ``structured`` (a
    ``kb_mcp.schemas`` model) as its structured content, dumped in JSON mode."""
    content: list[ContentBlock] = [TextContent(type="text", text=text), *extra]
    return CallToolResult(content=content, structured_content=structured.model_dump(mode="json"))


# ---------------------------------------------------------------------------------------------
# Tool results
# ---------------------------------------------------------------------------------------------


def docs_result(
    answer: DocsAnswer, links: Links, images: Sequence[tuple[Passage, bytes]] = ()
) -> CallToolResult:
    """The search_docs result: one text block, then each inline figure (label + image).

    Args:
        images: the loaded inline images of ``shown_results(answer)`` (``kb_mcp.images``);
            a low-confidence answer shows none.
    """
    shown = shown_results(answer)
    images = [] if answer.low_confidence else list(images)
    with_image = {passage.number for passage, _ in images}
    parts: list[str] = []
    if not shown:
        parts.append(
            "No passage matched this query. The corpus may not cover it: call list_documents "
            "to see what is indexed (a file name rarely matches a document's title), try other "
            "words, or tell the user it is not in the indexed documents. Do not invent an answer."
        )
    elif answer.edition_note is not None:
        parts.append(answer.edition_note)
        parts.append("Closest passages (another edition; for reference only):")
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
    if answer.absent_names and shown:
        parts.insert(0, absent_message(answer.absent_names))
    parts += [render_passage(passage, links) for passage in shown]
    source_lines, source_refs = sources(shown, links)
    if source_lines:
        parts.append("Sources:\n" + "\n".join(source_lines))
    next_offset = None if answer.low_confidence else answer.next_offset
    if next_offset is not None:
        parts.append(f"More results: call search_docs again with offset={next_offset}.")
    structured = SearchDocsOutput(
        results=[result_ref(p, links, image=p.number in with_image) for p in shown],
        sources=source_refs,
        next_offset=next_offset,
        low_confidence=answer.low_confidence,
        best_similarity=(
            round(answer.best_similarity, 4) if answer.best_similarity is not None else None
        ),
        exact_terms=answer.exact_terms,
        term_coverage=round(answer.coverage, 4),
        reranked=answer.reranked,
        edition_note=answer.edition_note,
        absent_names=list(answer.absent_names),
    )
    return tool_result("\n\n".join(parts), structured, image_blocks(images))


def _relationship_line(rel: RankedRelationship) -> str:
    edge = rel.relationship
    chunk = rel.chunk_number if rel.chunk_number is not None else edge.chunk_id
    line = (
        f"[R{rel.number}] {rel.source_name} —{edge.type}→ {rel.target_name} "
        f"({split_version_key(edge.source_doc)[0]}, chunk {chunk})"
    )
    if edge.description.strip():
        line += f": {edge.description.strip()}"
    if rel.excerpt is not None:
        return line + f" — excerpt [{rel.excerpt}]"
    return line + (
        f" — supporting excerpt missing: chunk {edge.chunk_id} is not in the vector "
        "index (the document's embeddings and graph are out of step; the operator "
        f"should run `kb rebuild embeddings {split_version_key(edge.source_doc)[0]}`)"
    )


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
    if answer.absent_names:
        parts.insert(0, absent_message(answer.absent_names, shown="relationships and excerpts"))
    if answer.seeds and not answer.relationships:
        parts.append(
            "No relationship touches these entities. The graph has nothing on this query: use "
            "search_docs for passages, or call list_documents to see what is indexed."
        )
    elif answer.relationships:
        lines = [_relationship_line(rel) for rel in answer.relationships]
        parts.append("Relationships (hop 1 first, then by seed similarity):\n" + "\n".join(lines))
    source_refs: list[SourceRef] = []
    if answer.excerpts:
        parts.append("Supporting excerpts:")
        parts += [render_passage(passage, links) for passage in answer.excerpts]
        source_lines, source_refs = sources(answer.excerpts, links)
        parts.append("Sources:\n" + "\n".join(source_lines))
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
                doc_id=split_version_key(rel.relationship.source_doc)[0],
                chunk_id=rel.relationship.chunk_id,
                hops=rel.hops,
                seed=rel.seed,
                seed_similarity=round(rel.seed_similarity, 4),
                excerpt=rel.excerpt,
            )
            for rel in answer.relationships
        ],
        excerpts=[result_ref(passage, links) for passage in answer.excerpts],
        sources=source_refs,
        absent_names=list(answer.absent_names),
    )
    return tool_result("\n\n".join(parts), structured)


def read_result(answer: ReadAnswer, links: Links) -> CallToolResult:
    """The read_doc result: each chunk with its header (``chunk n`` in place of a rank)."""
    row = answer.document
    parts = [render_passage(passage, links) for passage in answer.chunks]
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
        chunks=[result_ref(passage, links) for passage in answer.chunks],
        missing=answer.missing,
    )
    return tool_result("\n\n".join(parts), structured)


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
        category=row.category,
    )


def document_list_output(documents: DocumentList, links: Links) -> ListDocumentsOutput:
    """The document list's structured form (list_documents and kb://documents)."""
    return ListDocumentsOutput(
        documents=[document_ref(row, links) for row in documents.ready],
        pending=len(documents.pending),
        failed=len(documents.failed),
    )


def _by_category(rows: list[DocumentRow]) -> list[tuple[str | None, list[DocumentRow]]]:
    """``rows`` grouped by category (case-insensitive order; uncategorised last), each group
    in the given order; one ``None`` group when no row has a category."""
    groups: dict[str | None, list[DocumentRow]] = {}
    for row in rows:
        groups.setdefault(row.category, []).append(row)
    return sorted(groups.items(), key=lambda kv: (kv[0] is None, (kv[0] or "").casefold()))


def document_list_text(
    documents: DocumentList, links: Links, category: str | None = None
) -> str:
    """The text of the list_documents result (``kb_mcp.tools.list_documents`` adds the version
    and series notes); ready documents are grouped under their categories when any has one, and
    ``category`` (the filter applied, if any) is named when nothing matched."""
    parts: list[str] = []
    groups = _by_category(documents.ready)
    grouped = any(name is not None for name, _ in groups)
    if documents.ready:
        lines = []
        for row in [row for _, rows in groups for row in rows]:
            if grouped and (not lines or lines[-1][1] != row.category):
                lines.append((f"{row.category or '(no category)'}:", row.category))
            label = row.title or row.name
            if row.version:
                label += f" ({row.version})"
            # a text document (.md/.txt) has no pages (pages = 0): its size is its chunks
            counts = f"{row.pages} pages, " if row.pages else ""
            counts += f"{row.chunk_count} chunks"
            if row.figure_count:
                counts += f", {row.figure_count} figure" + ("s" if row.figure_count != 1 else "")
            url = links.file(row.blob_key)
            bullet = f"- {row.name} [{row.doc_id}] — {label} — {counts} — {url}"
            lines.append(("  " + bullet if grouped else bullet, row.category))
        by = " by category (search_docs, search_graph and list_documents take category=)"
        by = by if grouped else ""
        parts.append(
            f"{len(documents.ready)} document(s) ready to search{by} (file name [doc_id] — title "
            "— size — stored file). search_docs and read_doc take the file name or the "
            "doc_id:\n"
            + "\n".join(line for line, _ in lines)
        )
    elif category is not None:
        parts.append(f"No ready document is in category {category!r}.")
    else:
        parts.append("No document is ready to search yet.")
    if documents.pending:
        names = ", ".join(row.name for row in documents.pending)
        parts.append(f"{len(documents.pending)} pending (added, not built yet): {names}")
    if documents.failed:
        items = "; ".join(f"{row.name}: {row.failure_reason}" for row in documents.failed)
        parts.append(f"{len(documents.failed)} failed to build: {items}")
    if not (documents.ready or documents.pending or documents.failed) and category is None:
        parts = [
            "The corpus is empty: the catalog has no documents. Add PDFs with `kb add PATH…`."
        ]
    return "\n\n".join(parts)
