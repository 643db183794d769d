"""Citations: the payload every indexed point carries, and the numbered headers both search
tools render from it.

The payload is written once, at ingestion (``PointPayload``), so the MCP server never
re-derives a title, a version or a page span. A header reads::

    [1] Marginal Loss Factors for the 2020-21 Financial Year — Version 1.2 — pp. 12–13 — 3 Results › 3.1 Victoria

Parts that are unknown are left out rather than shown empty; the title falls back to the
file name; a bare version number reads "Version N"; a first heading that repeats the title
is not repeated in the section. Page ranges use an en dash (``pp. 12–13``), a single page ``p. 12``.
A page whose printed label (``/PageLabels``) differs from its physical number is cited by the
label with the physical page beside it: ``p. iv (PDF page 6)``, ``pp. iv–2 (PDF pages 6–9)``;
links keep ``#page=<physical>`` (issue 16, "Printed page labels").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kb_shared.ingest.page_location import INLINE_TAG, page_at

#: Separator between header parts and between heading-path levels.
PART_SEPARATOR = " — "
PATH_SEPARATOR = " › "

#: Markdown emphasis marks the converter writes around words (``**bold**``, ``_italic_``). A
#: single ``*`` is emphasis only where it opens after a space, the start, a cell's pipe or an
#: opening bracket or quote and closes before a space, the end, a pipe or punctuation: the
#: ``*`` of a formula ("1.1479E-03*(Flowt)", "(Nd)*NQt") is the page's own character.
_EMPHASIS = re.compile(
    r"\*\*|__|(?<![\w*])_(?=\S)|(?<=\S)_(?![\w*])"
    r"|(?<![^\s(\[{|\"'“‘])\*(?=\S)|(?<=\S)\*(?![^\s.,;:!?)\]}|\"'”’])"
)
#: A line break the converter writes inside a table cell: it separates words.
_LINE_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
#: Emphasis marks left at a word's edge once paired ones are gone ("*****NEW***" headings).
_STRAY_STARS = re.compile(r"(?<![\w*])\*+|\*+(?![\w*])")
#: A superscript in a heading: a footnote marker ("… platforms.<sup>23</sup>"), not its words.
_SUPERSCRIPT = re.compile(r"<sup\b[^>]*>.*?</sup>", re.IGNORECASE | re.DOTALL)


def readable(unit_text: str) -> str:
    """A sentence or pipe-table row as a reader sees it (``quotes.Quote.text``, not yet cut):
    emphasis marks and inline tags removed, whitespace collapsed, table cells joined by
    `` | ``."""
    text = INLINE_TAG.sub("", _LINE_BREAK.sub(" ", _EMPHASIS.sub("", unit_text)))
    stripped = text.strip()
    if stripped.startswith("|"):
        cells = [" ".join(cell.split()) for cell in stripped.strip("|").split("|")]
        return " | ".join(cell for cell in cells if cell)
    return " ".join(text.split())


def heading_label(heading: str) -> str:
    """A heading or " › "-joined heading path as a reader sees it: ``readable`` without its
    footnote markers (superscripts) and the stray emphasis marks a converter leaves around
    words ("*****UPDATED*** Rules**<sup>2</sup>" reads "UPDATED Rules")."""
    return " ".join(_STRAY_STARS.sub("", readable(_SUPERSCRIPT.sub("", heading))).split())


#: Payload keys (shared by the embeddings/figures assets and kb_mcp).
DOC_ID = "doc_id"
NAME = "name"
TITLE = "title"
VERSION = "version"
PAGE_START = "page_start"
PAGE_END = "page_end"
SECTION = "section"
CHUNK_INDEX = "chunk_index"
PDF_KEY = "pdf_key"
MARKDOWN_KEY = "markdown_key"
FIGURE_KEY = "figure_key"
FIGURE_INLINE_KEY = "figure_inline_key"
FINGERPRINT = "fingerprint"
FIGURE_NUMBER = "figure_number"
CAPTION = "caption"
FIGURE_EMBED_KEY = "figure_embed_key"
BBOX = "bbox"
WIDTH_PX = "width_px"
HEIGHT_PX = "height_px"
#: Printed page labels of the first/last page; written only when a label exists, so older
#: payloads (and documents without labels) read as "no labels".
PAGE_LABEL_START = "page_label_start"
PAGE_LABEL_END = "page_label_end"
#: Where a chunk's text on each page starts (``[[offset, page], ...]``) and whether it was
#: found in the PDF's text layer (``kb_shared.ingest.page_location``); written only for located
#: chunks' points, so older payloads read as "not located".
PAGE_RUNS = "page_runs"
LOCATED = "located"


#: An SEC form's name as a filing's title writes it ("10-K", "10-Q/A", "8-K", "S-1"); the cover
#: page reader (``kb_shared.ingest.pdf.sec_filing_title``) matches it case-blind.
SEC_FORM_NAME = r"\d{1,2}-[A-Z]{1,2}(?:/A)?|[SF]-\d{1,2}"
#: Where an SEC filing's title (``kb_shared.ingest.pdf.sec_filing_title``: "3M COMPANY Form
#: 10-K for the fiscal year ended December 31, 2018") ends its registrant's name.
FILING_FORM = re.compile(rf" Form (?:{SEC_FORM_NAME})(?: (?:for the|dated) [^›]*)?$")
#: Where a press release's title (``kb_shared.ingest.pdf.press_release_title``: "Johnson &
#: Johnson press release: results for second-quarter 2023") ends its issuer's name.
RELEASE_FORM = re.compile(r" press release: [^›]*$")
#: What follows the name of the company in a title read from a filing's cover or a release's
#: lead: the kind of document and the period, words every such title repeats.
ISSUE_OF_COMPANY = re.compile(f"{FILING_FORM.pattern}|{RELEASE_FORM.pattern}")


def naming_title(title: str) -> str:
    """The part of a document ``title`` that names the document: an SEC filing's registrant
    ("3M COMPANY") or a press release's issuer ("Johnson & Johnson"), any other title whole.
    A question is routed to a document by these words
    (``kb_shared.search.retrieval_features.routed_documents``), not by the form and period
    every such title repeats ("Form 10-K for the fiscal year ended …", ``ISSUE_OF_COMPANY``)."""
    return ISSUE_OF_COMPANY.sub("", title.strip())


@dataclass(frozen=True, slots=True)
class FigurePayload:
    """The figure part of a figure point's payload.

    Attributes:
        number: 1-based figure number within the document (``identity.figure_id``).
        caption: the caption found near the figure ("" when none).
        stored_key, inline_key, embed_key: blob keys of the renders (``layout.figure_keys``).
        bbox: ``(x0, y0, x1, y1)`` in PDF points on its page.
        width_px, height_px: size of the stored render in pixels.
    """

    number: int
    caption: str
    stored_key: str
    inline_key: str
    embed_key: str = ""
    bbox: tuple[float, ...] = ()
    width_px: int = 0
    height_px: int = 0


@dataclass(frozen=True, slots=True)
class CitedPages:
    """The document and pages one point or result cites, the first fields of both
    ``PointPayload`` and ``Citation``.

    Attributes:
        doc_id, name, title, version: the document (title falls back to the name on read).
        page_start, page_end: 1-based pages, ``None`` when unknown.
    """

    doc_id: str
    name: str
    title: str
    version: str
    page_start: int | None
    page_end: int | None


@dataclass(frozen=True, slots=True)
class PointPayload(CitedPages):
    """The typed payload of one indexed point (chunk or figure): the writer builds it, the
    reader parses it, and only ``to_payload``/``from_payload`` know the JSON keys.

    Attributes:
        doc_id … page_end: ``CitedPages``'s fields.
        section: heading path joined with ``PATH_SEPARATOR`` ("" when none).
        chunk_index: 0-based chunk index for chunk points, ``None`` for figures.
        pdf_key, markdown_key: blob keys (``kb_shared.layout``); URLs are made at serve time.
        fingerprint: hash of what was embedded, for skipping unchanged work (or ``None``).
        figure: the figure fields for figure points, ``None`` for chunks.
        page_label_start, page_label_end: printed labels of the first/last page (``"iv"``),
            ``""`` when the page has none (``chunking.Chunk``'s fields of the same names).
        page_runs, located: ``chunking.Chunk``'s fields of the same names (``()`` / ``None``
            for figures and for chunks indexed before pages were located).
    """

    section: str = ""
    chunk_index: int | None = None
    pdf_key: str = ""
    markdown_key: str | None = None
    fingerprint: str | None = None
    figure: FigurePayload | None = None
    page_label_start: str = ""
    page_label_end: str = ""
    page_runs: tuple[tuple[int, int], ...] = ()
    located: bool | None = None

    def __post_init__(self) -> None:
        if self.page_start is not None and self.page_end is None:
            object.__setattr__(self, "page_end", self.page_start)
        if self.page_start is not None and self.page_end is not None:
            if self.page_end < self.page_start:
                raise ValueError(f"page_end {self.page_end} is before page_start {self.page_start}")

    @classmethod
    def build(
        cls, *, heading_path: Sequence[str] = (), **fields: Any
    ) -> PointPayload:
        """Construct with the section given as a heading path (outermost first).

        Raises:
            ValueError: ``page_end < page_start``.
        """
        return cls(section=PATH_SEPARATOR.join(h for h in heading_path if h), **fields)

    def with_fingerprint(self, value: str) -> PointPayload:
        """A copy with ``fingerprint`` set."""
        return replace(self, fingerprint=value)

    @property
    def is_figure(self) -> bool:
        """Whether this is a figure point's payload."""
        return self.figure is not None

    @property
    def citation(self) -> Citation:
        """The citation fields of this point."""
        return Citation.from_payload(self.to_payload())

    def to_payload(self) -> dict[str, Any]:
        """The JSON-serialisable dict stored in the vector index (keys are this module's
        constants; figure fields are flat beside the citation fields)."""
        payload: dict[str, Any] = {
            DOC_ID: self.doc_id,
            NAME: self.name,
            TITLE: self.title,
            VERSION: self.version,
            PAGE_START: self.page_start,
            PAGE_END: self.page_end,
            SECTION: self.section,
            CHUNK_INDEX: self.chunk_index,
            PDF_KEY: self.pdf_key,
            MARKDOWN_KEY: self.markdown_key,
        }
        if self.fingerprint is not None:
            payload[FINGERPRINT] = self.fingerprint
        if self.page_label_start or self.page_label_end:
            payload[PAGE_LABEL_START] = self.page_label_start
            payload[PAGE_LABEL_END] = self.page_label_end
        if self.located is not None:
            payload[LOCATED] = self.located
            payload[PAGE_RUNS] = [list(run) for run in self.page_runs]
        if self.figure is not None:
            payload.update(
                {
                    FIGURE_NUMBER: self.figure.number,
                    CAPTION: self.figure.caption,
                    FIGURE_KEY: self.figure.stored_key,
                    FIGURE_INLINE_KEY: self.figure.inline_key,
                    FIGURE_EMBED_KEY: self.figure.embed_key,
                    BBOX: list(self.figure.bbox),
                    WIDTH_PX: self.figure.width_px,
                    HEIGHT_PX: self.figure.height_px,
                }
            )
        return payload

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> PointPayload:
        """Parse a stored payload (missing keys become empty/``None``; a payload with a
        ``figure_number`` is a figure's)."""
        figure = None
        if payload.get(FIGURE_NUMBER) is not None:
            figure = FigurePayload(
                number=int(payload[FIGURE_NUMBER]),
                caption=str(payload.get(CAPTION) or "").strip(),
                stored_key=str(payload.get(FIGURE_KEY) or ""),
                inline_key=str(payload.get(FIGURE_INLINE_KEY) or ""),
                embed_key=str(payload.get(FIGURE_EMBED_KEY) or ""),
                bbox=tuple(float(v) for v in payload.get(BBOX) or ()),
                width_px=int(payload.get(WIDTH_PX) or 0),
                height_px=int(payload.get(HEIGHT_PX) or 0),
            )
        index = payload.get(CHUNK_INDEX)
        return cls(
            doc_id=str(payload.get(DOC_ID) or ""),
            name=str(payload.get(NAME) or ""),
            title=str(payload.get(TITLE) or ""),
            version=str(payload.get(VERSION) or ""),
            page_start=_as_page(payload.get(PAGE_START)),
            page_end=_as_page(payload.get(PAGE_END)),
            section=str(payload.get(SECTION) or ""),
            chunk_index=None if index is None or index == "" else int(index),
            pdf_key=str(payload.get(PDF_KEY) or ""),
            markdown_key=payload.get(MARKDOWN_KEY) or None,
            fingerprint=payload.get(FINGERPRINT) or None,
            figure=figure,
            page_label_start=str(payload.get(PAGE_LABEL_START) or ""),
            page_label_end=str(payload.get(PAGE_LABEL_END) or ""),
            page_runs=tuple((int(a), int(b)) for a, b in payload.get(PAGE_RUNS) or ()),
            located=payload.get(LOCATED),
        )

    def page_at(self, offset: int) -> int | None:
        """The page the character ``offset`` of the point's text is on, from ``page_runs``
        (``kb_shared.ingest.page_location.page_at``); ``None`` when the payload has no runs."""
        return page_at(self.page_runs, offset)


def citation_payload(
    *, extra: Mapping[str, Any] | None = None, **fields: Any
) -> dict[str, Any]:
    """The JSON payload of ``PointPayload.build(**fields)`` plus ``extra`` keys, for callers
    that write payload dicts directly (tests, ``benchmarks/scale_corpus.py``).

    Args:
        fields: ``PointPayload.build``'s: ``doc_id``, ``name``, ``title``, ``version``,
            ``page_start``, ``page_end`` (defaults to ``page_start``), ``heading_path``,
            ``chunk_index``, ``pdf_key``, ``markdown_key``, ``page_label_start``/``_end``.
        extra: more keys (figure blob keys, a fingerprint); they may not override the above.

    Raises:
        ValueError: ``page_end < page_start``, or ``extra`` overriding a citation key.
    """
    payload = PointPayload.build(**fields).to_payload()
    for key, value in (extra or {}).items():
        if key in payload:
            raise ValueError(f"extra payload key {key!r} would override a citation field")
        payload[key] = value
    return payload


def format_pages(
    page_start: int | None, page_end: int | None, label_start: str = "", label_end: str = ""
) -> str:
    """``"p. 12"``, ``"pp. 12–13"`` or ``""`` when the page is unknown; with printed labels
    that differ from the physical pages, the labels first and the physical pages beside them:
    ``"p. iv (PDF page 6)"``, ``"pp. iv–2 (PDF pages 6–9)"`` (an end without a label shows its
    physical number)."""
    if page_start is None:
        return ""
    end = page_start if page_end is None else page_end
    first = label_start.strip() or str(page_start)
    last = label_end.strip() or str(end)
    if first == str(page_start) and last == str(end):
        return f"p. {page_start}" if end == page_start else f"pp. {page_start}\u2013{end}"
    if end == page_start:
        return f"p. {first} (PDF page {page_start})"
    printed = first if first == last else f"{first}\u2013{last}"
    return f"pp. {printed} (PDF pages {page_start}\u2013{end})"


def page_reference(page: int | None, label: str = "") -> str:
    """How a page is called in a link's text: its number (``"6"``), or its printed ``label``
    with the number beside it when they differ (``"iv (PDF page 6)"``); ``""`` for no page."""
    if page is None:
        return ""
    if not label or label == str(page):
        return str(page)
    return f"{label} (PDF page {page})"


@dataclass(frozen=True, slots=True)
class Citation(CitedPages):
    """The citation fields of one result, read from its payload: ``CitedPages``'s, then the
    section (as a reader sees it: ``heading_label``) and the printed page labels
    (``PointPayload``'s fields of the same names)."""

    section: str
    page_label_start: str = ""
    page_label_end: str = ""

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> Citation:
        """Read a payload written by ``PointPayload.to_payload`` (missing keys become empty)."""
        name = str(payload.get(NAME) or payload.get(DOC_ID) or "")
        return cls(
            doc_id=str(payload.get(DOC_ID) or ""),
            name=name,
            title=str(payload.get(TITLE) or "").strip() or name,
            version=str(payload.get(VERSION) or "").strip(),
            page_start=_as_page(payload.get(PAGE_START)),
            page_end=_as_page(payload.get(PAGE_END)),
            section=heading_label(str(payload.get(SECTION) or "")),
            page_label_start=str(payload.get(PAGE_LABEL_START) or "").strip(),
            page_label_end=str(payload.get(PAGE_LABEL_END) or "").strip(),
        )

    @property
    def pages(self) -> str:
        """``format_pages`` of this citation (printed labels included)."""
        return format_pages(
            self.page_start, self.page_end, self.page_label_start, self.page_label_end
        )

    @property
    def first_page_reference(self) -> str:
        """How the first page is called in a link's text: ``"iv (PDF page 6)"`` when its
        printed label differs, else ``"6"``; ``""`` when the page is unknown."""
        return page_reference(self.page_start, self.page_label_start)

    @property
    def version_label(self) -> str:
        """The version as a reader expects it: a bare number gets ``"Version "`` in front
        (``"1.2"`` -> ``"Version 1.2"``); a labelled one (``"Rev C"``) is kept."""
        if self.version and self.version[0].isdigit():
            return f"Version {self.version}"
        return self.version

    @property
    def section_label(self) -> str:
        """The section path without a leading heading that repeats the title (many
        documents' first heading is their title) or the name in it (``naming_title``: a
        filing's sections start with its registrant)."""
        for name in dict.fromkeys((self.title, naming_title(self.title))):
            if self.section == name:
                return ""
            if self.section.startswith(name + PATH_SEPARATOR):
                return self.section[len(name + PATH_SEPARATOR) :]
        return self.section

    def header(self, number: int | str, answer_page: str = "") -> str:
        """``[n] Title — Version 1.2 — pp. a–b — Section › Subsection`` with unknown parts
        left out; ``answer_page`` (a page reference, ``"8"``) adds ``(answer on p. 8)`` after
        a span of several pages (issue 25: every page of the passage, and the answer's)."""
        pages = self.pages
        if pages and answer_page and self.page_end is not None and self.page_end != self.page_start:
            pages = f"{pages} (answer on p. {answer_page})"
        parts = [p for p in (self.title, self.version_label, pages, self.section_label) if p]
        return f"[{number}] " + PART_SEPARATOR.join(parts)


def _as_page(value: Any) -> int | None:
    if value is None or value == "":
        return None
    return int(value)


def source_list(
    citations: Iterable[Citation], url_for: Callable[[Citation], str | None]
) -> list[str]:
    """One line per document, in first-cited order: ``- Title (Version 1.2) — URL``.

    Args:
        citations: the results' citations in rank order (duplicates collapse by ``doc_id``).
        url_for: maps a citation to its document URL, or ``None`` when there is none.
    """
    seen: set[str] = set()
    lines: list[str] = []
    for citation in citations:
        if citation.doc_id in seen:
            continue
        seen.add(citation.doc_id)
        label = citation.title + (f" ({citation.version_label})" if citation.version else "")
        url = url_for(citation)
        lines.append(f"- {label}" + (f" \u2014 {url}" if url else ""))
    return lines
