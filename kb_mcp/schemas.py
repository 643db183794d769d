"""The structured content of each tool result (pydantic models; the SDK publishes their JSON
schema as the tool's ``outputSchema``).

They carry ids, citation fields, scores and URLs only, never the chunk text a second time: the
text is rendered once, in the text content (mcp-utilities README, "What a response costs").
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Literal

from pydantic import BaseModel, Field

#: The names and clause numbers a query asks about that no searched passage mentions
#: (``kb_shared.search.subjects``): search_docs' and search_graph's.
AbsentNames = Annotated[
    list[str],
    Field(description="Names or clause numbers the query asks about that no searched passage "
          "mentions."),
]

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
    page_start: int | None = Field(
        None, description="1-based first page the passage is on; null when unknown."
    )
    page_end: int | None = Field(None, description="Last page the passage is on.")
    section: str | None = Field(None, description="Heading path, outermost first.")
    score: float | None = Field(
        None, description="Fused reciprocal-rank score (or rerank relevance); higher is better."
    )
    similarity: float | None = Field(
        None, description="Cosine similarity of the query and this result's dense vector."
    )
    quote: str | None = Field(
        None, description="Verbatim best-matching sentence or table row (<= 300 chars)."
    )
    quote_page: int | None = Field(None, description="1-based page the quote is on.")
    url: str | None = Field(None, description="The source PDF, at the quote's page when known.")
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
    edition_note: str | None = Field(
        None,
        description=(
            "Set when the query asks for an edition, year or version the corpus does not hold "
            "but a neighbouring one exists: what to tell the user (the results are that other "
            "edition; do not answer from them as if they were the one asked for)."
        ),
    )
    absent_names: AbsentNames = []


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
    absent_names: AbsentNames = []


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
    category: str | None = Field(
        None, description="Folder path it was filed under, e.g. 'aemo/procedures'."
    )


class ListDocumentsOutput(BaseModel):
    """Structured content of list_documents (and the kb://documents resource)."""

    documents: list[DocumentRef]
    pending: int = Field(description="Documents added but not built yet.")
    failed: int = Field(description="Documents whose build failed.")


# ---------------------------------------------------------------------------------------------
# Market data (search_aer_performance, search_compliance)
# ---------------------------------------------------------------------------------------------

#: What an answer found: figures/actions, none for these filters, or nothing synced at all.
MarketStatus = Literal["ok", "no_match", "no_data"]


class AerMetricRef(BaseModel):
    """A metric of one schedule with every heading it has been published under."""

    schedule: str
    metric_key: str = Field(description="Stable key; the metric filter takes it.")
    additive: bool = Field(description="True when figures add up (counts, dollars).")
    headings: list[str] = Field(description="Every published heading, oldest first.")
    first_seen: str = Field(description="Release the metric first appeared in.")
    last_seen: str


class AerVocabularyRef(BaseModel):
    """The values present in the whole store (what each filter can match)."""

    schedules: list[str]
    retailers: list[str]
    jurisdictions: list[str]
    fuels: list[str]
    customer_types: list[str]
    periods: list[str] = Field(description="Quarter labels, oldest first.")
    metrics: list[AerMetricRef]


class AerFigureRef(BaseModel):
    """One figure ``[number]`` (retailer rows) or ``[T<number>]`` (published region totals).
    Its published heading is in ``vocabulary.metrics``."""

    number: int
    schedule: str
    period: str = Field(description="Quarter label, e.g. 'Q3 2025-26'.")
    period_start: str = Field(description="ISO 8601 date.")
    period_end: str
    retailer: str = Field(description="The retailer, or '<Region> Total' for a total row.")
    jurisdiction: str
    fuel: str
    customer_type: str
    metric_key: str
    value: Decimal = Field(description="Exact value as published (rates are fractions).")
    source_file: str
    sheet: str
    cell: str
    release: str = Field(description="The quarterly update that published the workbook.")
    is_total: bool = Field(description="True for a published '<Region> Total' row.")
    label_cell: str = Field(description="The column-A cell of the row's label, e.g. 'A11'.")
    block: str = Field(
        description="Column-A cells of the jurisdiction block the row is in, from its first "
                    "row to its '<Region> Total' row, e.g. 'A11:A14' ('' if not recorded)."
    )


class AerHeadingMatchRef(BaseModel):
    """A heading the matching figures were published under, and their quarters."""

    schedule: str
    metric_key: str
    heading: str = Field(description="As published in row 4 of the workbook.")
    first_period: str
    last_period: str
    rows: int = Field(description="Retailer figures under this heading.")


class AerPeriodTotalRef(BaseModel):
    """The exact sum of the metric's matching figures in one quarter."""

    period: str
    total: Decimal
    rows: int = Field(description="Figures summed.")


class MarketSearchOutput(BaseModel):
    """What every market-data search's structured content starts with: its ``status``, the
    ``count`` of every match, the rows ``returned`` (at most ``limit``) and whether the list
    was ``truncated``. Each tool's output extends it (and describes its own ``count``)."""

    status: MarketStatus
    count: int
    returned: int
    truncated: bool
    limit: int


class SearchAerOutput(MarketSearchOutput):
    """Structured content of search_aer_performance (exact over the whole match set)."""

    count: int = Field(description="Every matching retailer figure (not only those returned).")
    metric: AerMetricRef | None = Field(
        None, description="The one metric of the matches; null when they span several."
    )
    total: Decimal | None = Field(
        None, description="Exact sum over every match; null unless one additive metric."
    )
    period_totals: list[AerPeriodTotalRef] = Field(default_factory=list)
    total_note: str | None = None
    matched_headings: list[AerHeadingMatchRef] = Field(
        default_factory=list,
        description="With a metric filter: the headings the matching figures were published "
                    "under; when none match, the metric's headings over all its quarters "
                    "(then matched_outside_filters is true).",
    )
    matched_outside_filters: bool = False
    rows: list[AerFigureRef]
    region_totals: list[AerFigureRef] = Field(
        description="Published '<Region> Total' figures for the same filters, retailer aside."
    )
    filters: dict[str, str] = Field(description="The filters as applied (normalised).")
    vocabulary: AerVocabularyRef
    synced_at: str | None = Field(None, description="Last AER sync, ISO 8601 UTC.")
    attribution: str


class ComplianceActionRef(BaseModel):
    """One enforcement action ``[number]`` (its summary is in the text content)."""

    number: int
    page_id: str = Field(description="Notion page id of the tracker row.")
    notion_url: str | None = None
    source_url: str | None = Field(None, description="The regulator's notice.")
    organisation: str | None = None
    sector: str | None = None
    regulatory_body: str | None = None
    status: str | None = None
    action_date: str | None = Field(None, description="ISO 8601 date; null when undated.")
    action_date_end: str | None = None
    fine: Decimal | None = Field(None, description="Dollars; null = no fine recorded (not $0).")
    misconduct_types: list[str]


class FacetValueRef(BaseModel):
    """A value of a facet and how many actions have it (null = not set)."""

    value: str | None
    count: int


class FacetRef(BaseModel):
    """The most frequent values of one column; ``distinct`` counts them all."""

    values: list[FacetValueRef]
    distinct: int


class SearchComplianceOutput(MarketSearchOutput):
    """Structured content of search_compliance (exact over the whole match set)."""

    count: int = Field(description="Every matching action (not only those returned).")
    fine_total: Decimal = Field(description="Exact dollars over the matches with a fine.")
    with_fine: int
    without_fine: int = Field(description="Matches with no fine recorded (not counted as $0).")
    rows: list[ComplianceActionRef]
    facets: dict[str, FacetRef]
    facets_scope: Literal["matches", "all"] = Field(
        description="'all' when nothing matched: the facets then list the whole tracker."
    )
    filters: dict[str, str]
    synced_at: str | None = Field(None, description="Last Notion sync, ISO 8601 UTC.")


class ObligationRef(BaseModel):
    """One obligation of search_obligations (its sentence is in ``text``: the register is the
    answer, not a pointer to one)."""

    number: int
    party: str
    role: str | None = None
    modality: str
    text: str
    action: str
    deadline: str | None = None
    reference: str | None = None
    doc_id: str
    version: int
    page: int | None = None
    chunk_id: str
    section: str | None = None
    url: str | None = None


class SearchObligationsOutput(BaseModel):
    """Structured content of search_obligations (counts exact over every match)."""

    count: int
    by_party: dict[str, int]
    by_document: dict[str, int]
    offset: int
    next_offset: int | None = None
    filters: dict[str, str | bool]
    obligations: list[ObligationRef]


class ChangeSideRef(BaseModel):
    """One side of a change: the changed sentences, their pages, the PDF at the first."""

    text: str
    pages: list[int]
    url: str | None = None


class ChangeRef(BaseModel):
    """One change of compare_versions."""

    number: int
    kind: Literal["added", "removed", "changed", "moved"]
    section_before: str | None = None
    section_after: str | None = None
    before: ChangeSideRef
    after: ChangeSideRef
    obligation: bool
    numbers: list[list[str | None]]


class CompareVersionsOutput(BaseModel):
    """Structured content of compare_versions (the summary counts every change)."""

    doc_id: str
    version: int
    previous_doc_id: str
    previous_version: int
    summary: dict[str, int]
    offset: int
    next_offset: int | None = None
    changes: list[ChangeRef]
