"""The structured content of each tool result (pydantic models; the SDK publishes their JSON
schema as the tool's ``outputSchema``).

They carry ids, citation fields, scores and URLs only, never the chunk text a second time: the
text is rendered once, in the text content (mcp-utilities README, "What a response costs").
"""

from __future__ import annotations

from pydantic import BaseModel, Field

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
