"""PDF → Markdown with Claude (anthropic SDK, PDF ``document`` content block).

``ClaudeMarkdownConverter`` produces the same output contract as the local converter
(``providers.base.ConvertedDocument``): ``<!-- page N -->`` before each page's content
(1-based, global page numbers), ``[Figure: description]`` lines where an informative picture
is, pipe tables, no running headers or footers; a title and a version; one ``FigureRegion``
(page known, ``bbox=None``) per figure marker, for the cloud figure locator to place. The
PDF is opened, refused, titled, versioned and page-labelled by the local converter's own
public helpers (``kb_shared.ingest.pdf.open_pdf``, ``extract_title``, ``extract_version``,
``page_labels``), so both converters agree on those; the version falls back to the Markdown
when the PDF has no text layer.

**Page ranges.** A request carries at most 100 PDF pages and 32 MB (Anthropic API docs, "PDF
support": "Maximum request size 32MB, maximum pages per request 100"), and its answer is
capped by ``max_tokens``. Non-streaming requests above ~21,333 ``max_tokens`` are refused by
the SDK itself ("Streaming is required for operations that may take longer than 10
minutes"), so each request is a sub-PDF of :data:`PAGES_PER_REQUEST` pages with
:data:`MAX_OUTPUT_TOKENS`. A range whose answer stops at ``max_tokens`` is split in two and
each half asked again; a single page that still does not fit is an error. A range whose
bytes would pass the request size (base64 grows it by 4/3) is split the same way. Ranges
are converted in parallel (up to the provider's concurrency) and stitched in page order.

**Page numbers.** The model numbers the pages of the sub-PDF it sees from 1 (``<!-- page
1 -->`` …); the converter maps them to global numbers (first page of the range + k - 1).
Markers out of range or out of order are an error (a wrong number would be a wrong
citation); a page the model gave no marker gets an empty marker, with a warning.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pymupdf

from kb_shared.ingest.chunking import page_marker
from kb_shared.errors import ConversionError, ProviderError
from kb_shared.models import CLAUDE_DOCUMENT_MODEL
from kb_shared.ingest.pdf import extract_title, extract_version, open_pdf, page_labels
from kb_shared.providers.base import ConvertedDocument, FigureRegion, MarkdownConverter
from kb_shared.providers.cloud_common import (
    CloudProvider,
    anthropic_text,
    claude_message,
    strip_code_fence,
)

if TYPE_CHECKING:
    import anthropic

log = logging.getLogger(__name__)

#: Pages per request. Regulatory pages come out at roughly 500-1,500 Markdown tokens each
#: (dense tables more), so 10 pages fit :data:`MAX_OUTPUT_TOKENS` with room for adaptive
#: thinking; a range that does not fit is split (module docstring).
PAGES_PER_REQUEST = 10
#: ``max_tokens`` per request: under the SDK's non-streaming ceiling of 21,333
#: (``60 * 60 * max_tokens / 128_000`` must stay under 600 s; anthropic ``_base_client``).
MAX_OUTPUT_TOKENS = 20_000
#: Hard API limits of one request with a PDF (Anthropic API docs, "PDF support").
MAX_PDF_PAGES_PER_REQUEST = 100
MAX_REQUEST_BYTES = 32 * 1024 * 1024
#: Bytes kept free in a request for the prompt and the JSON around the document.
REQUEST_OVERHEAD_BYTES = 256 * 1024

#: PyMuPDF must not be used from two threads at once (PyMuPDF docs, "Multithreading"), and
#: page ranges are converted on several threads: every pymupdf call here holds this lock.
_PDF_LOCK = threading.Lock()

#: A marker line of our own output (one per page, on its own line).
_PAGE_MARKER = re.compile(r"^[ \t]*<!--\s*page\s+(\d+)\s*-->[ \t]*$", re.IGNORECASE | re.MULTILINE)
#: A marker anywhere in the model's answer (it may put one mid-line).
_ANY_MARKER = re.compile(r"<!--\s*page\s+(\d+)\s*-->", re.IGNORECASE)
_FIGURE = re.compile(r"^\s*\[Figure:\s*(.*?)\]\s*$", re.IGNORECASE)
_VERSION = re.compile(
    r"\b(?:version|ver\.|revision|rev\.|issue)\s*(?:no\.?|number)?\s*[:#\-]?\s*"
    r"(v?\d+(?:\.\d+){0,3}[a-z]?)\b",
    re.IGNORECASE,
)

PROMPT = """Transcribe this PDF into GitHub-flavoured Markdown. The PDF has {pages} page(s); \
number them from 1 in the order they appear.

1. Before each page's content write a line that is exactly <!-- page K --> where K is that \
page's position in this PDF (1 for the first page). Write one such line for every page, blank \
pages included, in order.
2. Keep all body text in reading order, word for word. Do not summarise, translate, correct \
or add anything.
3. Write headings as ATX headings (#, ##, ###) that follow the document's own numbering and \
hierarchy.
4. Write tables as pipe tables with a header row and an alignment row. A table continued \
from the previous page repeats its header row.
5. Where a page shows a diagram, chart, flowchart, map, photograph or other picture that \
carries information, write one line [Figure: …] that gives its caption and says in one or two \
sentences what it shows. Logos, signatures, stamps, watermarks and decorative images get no \
marker.
6. Leave out running headers, running footers and page numbers that repeat on every page.
7. Answer with the Markdown only: no commentary and no code fence around it."""


@dataclass(frozen=True, slots=True)
class _Range:
    """Pages ``first``..``last`` (1-based, inclusive) of the source PDF."""

    first: int
    last: int

    @property
    def pages(self) -> int:
        return self.last - self.first + 1

    def halves(self) -> tuple[_Range, _Range]:
        middle = self.first + self.pages // 2 - 1
        return _Range(self.first, middle), _Range(middle + 1, self.last)

    def __str__(self) -> str:
        if self.first == self.last:
            return f"page {self.first}"
        return f"pages {self.first}-{self.last}"


class ClaudeMarkdownConverter(CloudProvider, MarkdownConverter):
    """``MarkdownConverter`` that asks Claude to transcribe each page range of a PDF;
    ``from_settings`` (``ANTHROPIC_API_KEY``), ``usage()`` and ``close()`` as
    :class:`~kb_shared.providers.cloud_common.CloudProvider`.

    Args:
        client: an ``anthropic.Anthropic`` client (tests inject one whose ``http_client``
            has an ``httpx2.MockTransport``). It should have ``max_retries=0``: retries are
            :class:`~kb_shared.providers.cloud_calls.ProviderCalls`'.
        model: Claude model id; ``None`` = :data:`kb_shared.models.CLAUDE_DOCUMENT_MODEL`.
        pages_per_request: pages per request, 1..100 (:data:`PAGES_PER_REQUEST`).
        max_output_tokens: ``max_tokens`` per request (:data:`MAX_OUTPUT_TOKENS`).
        concurrency: page ranges converted at once.
        retry: retry policy for transient failures.
        key: where the key came from + its fingerprint, logged as the payer.

    Raises:
        ValueError: ``pages_per_request`` outside 1..100 or ``max_output_tokens`` < 1.
    """

    vendor = "Anthropic"
    provider = "claude-markdown"
    name_prefix = "claude"
    default_model = CLAUDE_DOCUMENT_MODEL
    needed_by = "the Claude converter"

    def __init__(
        self,
        client: anthropic.Anthropic,
        *,
        pages_per_request: int = PAGES_PER_REQUEST,
        max_output_tokens: int = MAX_OUTPUT_TOKENS,
        key: str = "",
        **options: Any,
    ) -> None:
        if not 1 <= pages_per_request <= MAX_PDF_PAGES_PER_REQUEST:
            raise ValueError(
                f"pages_per_request must be 1..{MAX_PDF_PAGES_PER_REQUEST}, got {pages_per_request}"
            )
        if max_output_tokens < 1:
            raise ValueError(f"max_output_tokens must be >= 1, got {max_output_tokens}")
        super().__init__(client, key=key, **options)
        self.pages_per_request = pages_per_request
        self.max_output_tokens = max_output_tokens
        self.key = key

    # ------------------------------------------------------------------ public
    def convert(self, pdf: bytes, filename: str) -> ConvertedDocument:
        """Convert one PDF.

        Args:
            pdf: the PDF bytes.
            filename: the upload's file name (for messages).

        Returns:
            ``ConvertedDocument`` with global ``<!-- page N -->`` markers, ``figures`` from
            the ``[Figure: …]`` markers (``bbox=None``), ``converter`` = ``"claude:<model>"``.

        Raises:
            ConversionError: refused by ``kb_shared.ingest.pdf.open_pdf`` (empty, not a PDF,
                damaged, truncated, password-protected, no pages), one page too large for a
                request, or the model returned no text at all. A PDF without a text layer
                (scanned) is *not* refused: Claude reads the page images.
            ProviderError: the API refused or kept failing, a single page's Markdown does
                not fit ``max_output_tokens``, or the page markers are out of order.
        """
        started = time.perf_counter()
        before = self.meter.snapshot()
        doc = open_pdf(pdf, filename)
        with doc:
            page_count = doc.page_count
            ranges = [
                _Range(first, min(first + self.pages_per_request - 1, page_count))
                for first in range(1, page_count + 1, self.pages_per_request)
            ]
            parts = self.calls.map(lambda r: self._convert_range(doc, r, filename), ranges)
            markdown = "".join(part for group in parts for part in group).strip() + "\n"
            if not _has_text(markdown):
                raise ConversionError(
                    f"{filename}: Claude returned no text for any of its {page_count} pages; "
                    "the PDF may be blank or unreadable"
                )
            with _PDF_LOCK:
                title = extract_title(
                    (doc.metadata or {}).get("title") or "", _page_text(markdown, 1), doc[0]
                )
                version = extract_version(doc) or _version(markdown)
                labels = page_labels(doc)
        figures = tuple(_figure_regions(markdown))
        markdown = _PAGE_MARKER.sub(
            lambda m: page_marker(int(m[1]), labels[int(m[1]) - 1]), markdown
        )
        seconds = time.perf_counter() - started
        after = self.meter.snapshot()
        spent: dict[str, float] = {
            k: float(after[k]) - float(before[k])
            for k in ("requests", "retries", "input_tokens", "output_tokens", "cost_usd")
        }
        log.info(
            "%s: %d pages to Markdown with %s in %d requests (%d retries); %d input + %d output "
            "tokens, $%.4f, billed to %s",
            filename, page_count, self.model, spent["requests"], spent["retries"],
            spent["input_tokens"], spent["output_tokens"], spent["cost_usd"],
            self.key or "the Anthropic key of the injected client",
        )
        return ConvertedDocument(
            markdown=markdown,
            pages=page_count,
            title=title,
            version=version,
            converter=self.name,
            figures=figures,
            seconds=seconds,
        )

    # ------------------------------------------------------------------ ranges
    def _convert_range(self, doc: pymupdf.Document, pages: _Range, filename: str) -> list[str]:
        """Markdown of ``pages`` (global markers), as a list of per-range pieces in order."""
        data = _sub_pdf(doc, pages)
        if len(data) * 4 / 3 > MAX_REQUEST_BYTES - REQUEST_OVERHEAD_BYTES:
            if pages.pages == 1:
                raise ConversionError(
                    f"{filename}: page {pages.first} alone is {len(data) / 1e6:.1f} MB, too large "
                    f"for one Claude request ({MAX_REQUEST_BYTES // (1024 * 1024)} MB with "
                    "base64); use the local converter for this document"
                )
            first, second = pages.halves()
            return self._convert_range(doc, first, filename) + self._convert_range(
                doc, second, filename
            )
        pdf = {
            "type": "base64",
            "media_type": "application/pdf",
            "data": base64.standard_b64encode(data).decode("ascii"),
        }
        content = [
            {"type": "document", "source": pdf},
            {"type": "text", "text": PROMPT.format(pages=pages.pages)},
        ]
        message, _ = claude_message(
            self, f"converting {filename} {pages} to Markdown", content, self.max_output_tokens
        )
        if message.stop_reason == "max_tokens":
            if pages.pages == 1:
                raise ProviderError(
                    f"{filename}: Claude's Markdown for page {pages.first} does not fit "
                    f"max_tokens={self.max_output_tokens}; raise max_output_tokens or use the "
                    "local converter for this document"
                )
            log.info("%s: Markdown of %s hit max_tokens; converting each half", filename, pages)
            first, second = pages.halves()
            return self._convert_range(doc, first, filename) + self._convert_range(
                doc, second, filename
            )
        text = anthropic_text(message)
        return [renumber_pages(text, pages.first, pages.pages, f"{filename} {pages}")]


# --------------------------------------------------------------------------------------
# Helpers (module level so they are tested without a client)
# --------------------------------------------------------------------------------------
def _sub_pdf(doc: pymupdf.Document, pages: _Range) -> bytes:
    """Pages ``pages`` of ``doc`` as a PDF of their own (thread-safe: holds ``_PDF_LOCK``)."""
    with _PDF_LOCK:
        sub = pymupdf.open()
        try:
            sub.insert_pdf(doc, from_page=pages.first - 1, to_page=pages.last - 1)
            return sub.tobytes(garbage=3, deflate=True)
        finally:
            sub.close()


def renumber_pages(text: str, first_page: int, page_count: int, where: str) -> str:
    """Turn a range's answer into Markdown with global page markers.

    The model numbered the ``page_count`` pages of the sub-PDF it saw 1..``page_count``;
    each ``<!-- page k -->`` becomes ``<!-- page first_page + k - 1 -->``. Text before the
    first marker belongs to the range's first page. A page with no marker gets an empty one,
    placed after the previous page's content (logged as a warning).

    Args:
        text: the model's answer (a code fence around all of it is removed).
        first_page: global number of the range's first page (1-based).
        page_count: pages in the range.
        where: file and range, for messages.

    Returns:
        ``"<!-- page N -->\\n\\n{content}\\n\\n"`` for each page of the range, in order.

    Raises:
        ProviderError: a marker outside ``1..page_count``, a repeated marker, markers out of
            order, or no marker at all in a range of more than one page.
    """
    body = strip_code_fence(text.strip())
    matches = list(_ANY_MARKER.finditer(body))
    numbers = [int(m.group(1)) for m in matches]
    if not matches and page_count > 1:
        raise ProviderError(
            f"{where}: Claude's answer has no <!-- page N --> markers, so its {page_count} "
            "pages cannot be told apart; convert the document again"
        )
    bad = [n for n in numbers if not 1 <= n <= page_count]
    if bad:
        raise ProviderError(
            f"{where}: Claude wrote page markers {bad} outside 1..{page_count}; the page "
            "numbers (and so the citations) would be wrong"
        )
    if any(b <= a for a, b in zip(numbers, numbers[1:])):
        raise ProviderError(
            f"{where}: Claude's page markers are repeated or out of order ({numbers}); the "
            "page numbers (and so the citations) would be wrong"
        )
    content: dict[int, str] = {}
    lead = body[: matches[0].start()] if matches else body
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(body)
        content[numbers[i]] = body[match.end() : end].strip()
    if lead.strip():
        content[1] = (lead.strip() + "\n\n" + content.get(1, "")).strip()
    missing = [k for k in range(1, page_count + 1) if k not in content]
    if missing:
        log.warning(
            "%s: Claude wrote no marker for page(s) %s of the range; they are left empty and "
            "their text (if any) counts as the page before",
            where, [first_page + k - 1 for k in missing],
        )
    pieces = []
    for k in range(1, page_count + 1):
        page_text = content.get(k, "")
        body = f"{page_text}\n\n" if page_text else ""
        pieces.append(f"<!-- page {first_page + k - 1} -->\n\n{body}")
    return "".join(pieces)


def _has_text(markdown: str) -> bool:
    return bool(_PAGE_MARKER.sub("", markdown).strip())


def _paged_lines(markdown: str, page: int) -> Iterator[tuple[int, str]]:
    """``(page, line)`` for every line that is not a page marker; lines before the first
    marker get ``page``."""
    for line in markdown.splitlines():
        marker = _PAGE_MARKER.match(line)
        if marker:
            page = int(marker.group(1))
        else:
            yield page, line


def _figure_regions(markdown: str) -> list[FigureRegion]:
    """One ``FigureRegion(page, None, caption)`` per ``[Figure: …]`` line, in page order."""
    regions: list[FigureRegion] = []
    for page, line in _paged_lines(markdown, 1):
        figure = _FIGURE.match(line)
        if figure:
            regions.append(FigureRegion(page=page, bbox=None, caption=figure.group(1).strip()))
    return regions


def _page_text(markdown: str, page: int) -> str:
    """The Markdown between ``<!-- page {page} -->`` and the next marker."""
    return "\n".join(line for current, line in _paged_lines(markdown, 0) if current == page)


def _version(markdown: str) -> str:
    """The first "Version 3.2" / "Rev. 4" / "Issue 2" statement in the Markdown of the first
    two pages: the fallback when the PDF has no text layer for ``extract_version`` to read
    (a scanned PDF, which Claude reads from the page images)."""
    head: list[str] = []
    for line in markdown.splitlines():
        marker = _PAGE_MARKER.match(line)
        if marker and int(marker.group(1)) > 2:
            break
        head.append(line.replace("*", ""))
    match = _VERSION.search("\n".join(head))
    return match.group(1) if match else ""
