"""The short verbatim quote each search result carries, and the page it is on.

A result cites every page its passage is on ("pp. 7–8"); its quote is the sentence or table
row that best matches the question (``retrieval_features.best_units``), or the passage's
first one when none matches, cut to ``QUOTE_CHARS`` at a word boundary, with the page a reader
sees it on ("answer on p. 8"): the page the text runs of a located chunk say (``PointPayload.
page_runs``, from the PDF's text layer at build time, ``kb_shared.ingest.page_location``). A chunk
indexed before pages were located, or not located, falls back to finding the quote in the
document's Markdown (``MarkdownPages``, ``retrieval_features.unit_page``). Issue 25,
"Citations that are true to the page".
"""

from __future__ import annotations

import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from kb_shared.search.citations import Citation, PointPayload, page_reference, readable
from kb_shared.ingest.page_location import FIGURE_LINE
from kb_shared.search.retrieval_features import PagedText, Unit, UnitMatch, unit_page, units
from kb_shared.stores.blobs import BlobStore

#: Longest quote, in characters (issue 25: "a short verbatim quote … ≤ 300 characters").
QUOTE_CHARS = 300

@dataclass(frozen=True, slots=True)
class Quote:
    """A result's quote.

    Attributes:
        text: the sentence or row as the reader sees it (Markdown emphasis and inline tags
            removed, whitespace collapsed, table cells joined by `` | ``), at most
            ``QUOTE_CHARS`` characters.
        page: 1-based page it is on; ``None`` when the chunk's pages are unknown.
        page_label: that page's printed label when the payload knows it, else ``""``.
    """

    text: str
    page: int | None
    page_label: str = ""

    @property
    def page_reference(self) -> str:
        """``"8"``, or ``"iv (PDF page 6)"`` when the printed label differs
        (``citations.page_reference``)."""
        return page_reference(self.page, self.page_label)


def cut(text: str, limit: int = QUOTE_CHARS) -> str:
    """``text`` if it fits in ``limit`` characters, else its longest start that ends at a word
    boundary and fits (a single over-long word is cut at the limit)."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    space = head.rfind(" ")
    return head[:space].rstrip() if space > limit // 2 else head


def unit_offset(text: str, unit_text: str) -> int:
    """Character offset of ``unit_text`` in the chunk's ``text``, whitespace runs matching any
    whitespace (a sentence is joined from its lines); -1 when it is not there."""
    direct = text.find(unit_text)
    if direct >= 0:
        return direct
    words = unit_text.split()
    if not words:
        return -1
    pattern = r"\s+".join(re.escape(w) for w in words[:12])
    found = re.search(pattern, text)
    return found.start() if found else -1


def passage_quote(
    payload: PointPayload,
    text: str,
    match: UnitMatch | None,
    markdown: MarkdownPages | None = None,
) -> Quote | None:
    """The quote of a text or table result (module docstring); ``None`` for a chunk without a
    sentence or row.

    Args:
        payload: the point's payload (pages, page runs, labels, Markdown key).
        text: the point's stored text.
        match: its best unit for the question, ``None`` when no unit matched.
        markdown: the documents' Markdown, for chunks indexed without page runs.
    """
    unit = match.unit if match is not None else None
    if unit is None or FIGURE_LINE.match(unit.text):
        unit = _first_unit(text)  # a figure marker is the converter's, not the page's text
    if unit is None:
        return None
    shown = cut(readable(unit.text))
    if not shown:
        return None
    offset = unit_offset(text, unit.text)
    cite = payload.citation
    page = cite.page_start
    if payload.located and payload.page_runs and offset >= 0:
        # runs of a chunk that was not verified on its pages are no evidence (``locate``)
        # the page holding the middle of the quoted part: a sentence may cross a page break
        page = payload.page_at(offset + min(len(unit.text), QUOTE_CHARS) // 2)
    elif (
        markdown is not None and payload.markdown_key is not None and cite.page_start is not None
        and cite.page_end is not None and cite.page_end > cite.page_start
    ):
        found = _markdown_page(markdown, payload.markdown_key, cite.page_start, text, unit)
        if found is not None and cite.page_start <= found <= cite.page_end:
            page = found
    label = ""
    if page is not None and page == cite.page_start:
        label = cite.page_label_start
    elif page is not None and page == cite.page_end:
        label = cite.page_label_end
    elif page is not None:
        label = _label_between(cite, page)
    return Quote(shown, page, label)


def _label_between(cite: Citation, page: int) -> str:
    """The printed label of ``page``, strictly between the cited first and last pages, when
    both their labels are numbers that advance with the PDF pages ("8" on page 10 and "10" on
    page 12 make page 11 "9"); ``""`` otherwise (roman numerals, "A-3", a jump in the
    numbering), where only the PDF page number is shown."""
    first, last = cite.page_label_start, cite.page_label_end
    if (
        cite.page_start is None or cite.page_end is None
        or not (first.isdecimal() and last.isdecimal())
        or int(last) - int(first) != cite.page_end - cite.page_start
    ):
        return ""
    return str(int(first) + page - cite.page_start)


def _first_unit(text: str) -> Unit | None:
    """The chunk's first sentence or row that is not a ``[Figure: …]`` marker."""
    return next((u for u in units(text) if not FIGURE_LINE.match(u.text)), None)


def _markdown_page(
    markdown: MarkdownPages, key: str, page_start: int, text: str, unit: Unit
) -> int | None:
    """The page ``unit`` starts on in the document's Markdown; re-read once when the chunk's
    first line is not found (the Markdown was rebuilt since)."""
    for fresh in (False, True):
        paged = markdown.get(key, fresh=fresh)
        if paged is None:
            return None
        found = unit_page(paged, page_start, text, unit)
        if found is not None:
            return found[0]
    return None


#: Converted documents whose Markdown ``MarkdownPages`` keeps parsed.
MARKDOWN_CACHE = 16


class MarkdownPages:
    """The documents' Markdown, read by blob key and kept parsed (``PagedText``) for the last
    ``MARKDOWN_CACHE`` documents; what ``passage_quote`` looks a quote's page up in
    for chunks indexed without page runs.

    Args:
        read: blob key -> bytes (``BlobStore.get``); may raise ``FileNotFoundError``.
    """

    def __init__(self, read: Callable[[str], bytes]) -> None:
        self._read = read
        self._parsed: OrderedDict[str, PagedText] = OrderedDict()
        self._lock = threading.Lock()  # search_docs may run in several threads at once

    def get(self, key: str, *, fresh: bool = False) -> PagedText | None:
        """The parsed Markdown under ``key`` (re-read when ``fresh``); ``None`` when missing."""
        with self._lock:
            if not fresh and key in self._parsed:
                self._parsed.move_to_end(key)
                return self._parsed[key]
        try:
            paged = PagedText.parse(self._read(key).decode("utf-8", errors="replace"))
        except FileNotFoundError:
            return None
        with self._lock:
            self._parsed[key] = paged
            while len(self._parsed) > MARKDOWN_CACHE:
                self._parsed.popitem(last=False)
        return paged


_MARKDOWN_OF: weakref.WeakKeyDictionary[object, MarkdownPages] = weakref.WeakKeyDictionary()
_MARKDOWN_LOCK = threading.Lock()


def markdown_pages(blobs: BlobStore) -> MarkdownPages:
    """The one ``MarkdownPages`` of ``blobs`` (made on first use, dropped with the store), so
    a server keeps its parsed Markdown across calls: ``search_docs(..., markdown=
    markdown_pages(state.blobs))``."""
    with _MARKDOWN_LOCK:
        pages = _MARKDOWN_OF.get(blobs)
        if pages is None:
            pages = _MARKDOWN_OF[blobs] = MarkdownPages(blobs.get)
        return pages
