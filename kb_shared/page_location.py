"""Where a passage is in the PDF: its words found in the text layer, page by page.

A chunk's pages come first from the converter's ``<!-- page N -->`` markers, which a layout
converter can misplace (a paragraph carried over a page break, a table moved, a running
header). This module locates a passage in PyMuPDF's own plain text of each page (not in the
Markdown), so a citation names the pages a reader who opens the PDF will see the text on
(issue 25, "Citations that are true to the page").

**Words.** Lower-cased ``[0-9a-z]`` runs, everything else separates (the shared corpus's
rule, ``../shared/corpus/README.md``). Lines that are only a link or an image, and the
``[Figure: …]`` lines the converter writes where a figure stands (``markdown_regions``; not
text of the page), are left out of a chunk before it is checked, and inline HTML tags the
converter writes (``<sup>``, ``<br>``) are not words (``passage_words``).

**Locating** (``locate``). Every position of the passage's words is tagged with the pages on
which the ``GRAM``-word run starting there occurs; a dynamic programme then picks one page per
position, never going back to an earlier page (a passage is read in order), that agrees with
the most tags, paying ``SWITCH_COST`` tags for each change of page so a stray run (a running
header repeated on every page) does not split it. The result is a list of *page runs*: the
character offset in the passage at which each page's part starts.

**Verified** (``verified``), the rule kb is measured by (issue 25): take three ``WINDOW``-word
windows of the passage (start, middle, end); it is verified on a set of pages when 2 of them
occur in the pages' plain text, or when at least ``WORD_SHARE`` of its distinct words of
``MIN_WORD_CHARS``+ characters do. A passage too short for three windows is checked whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from kb_shared.chunking import Chunk

#: Words per window of the verification rule (issue 25, "The rule kb is measured by").
WINDOW = 6
#: Windows that must be found of the three (issue 25).
WINDOWS_NEEDED = 2
#: Share of distinct words that verifies a passage whose windows do not (issue 25).
WORD_SHARE = 0.9
#: Shortest word the share counts (issue 25: "distinct words of 3+ characters").
MIN_WORD_CHARS = 3
#: Words per run used to tag a position with its pages: four words rarely repeat on other
#: pages by chance, and a table cell boundary breaks fewer of them than a longer run.
GRAM = 4
#: Tags a change of page costs in ``locate``: more than a three-word running header or page
#: number line can earn, less than a real paragraph.
SWITCH_COST = 3.0

_WORD = re.compile(r"[0-9a-z]+")
_LINK_LINE = re.compile(r"^\s*!?\[[^\]]*\]\([^)]*\)\s*$")
_FIGURE_LINE = re.compile(r"^\s*\[Figure: [^\n]*\]\s*$")
_HTML_TAG = re.compile(r"</?(?:sup|sub|br|b|i|u|em|strong|span)\b[^>]*>", re.IGNORECASE)


def words_with_offsets(text: str) -> list[tuple[str, int]]:
    """``text``'s words (module docstring, "Words") with the character offset of each."""
    return [(m.group(), m.start()) for m in _WORD.finditer(text.lower())]


def page_words(text: str) -> list[str]:
    """A page's plain text reduced to its words."""
    return _WORD.findall(text.lower())


def passage_words(text: str) -> list[str]:
    """The words of a chunk's Markdown that the PDF's text layer can hold: without link-only
    lines and ``[Figure: …]`` marker lines (module docstring, "Words")."""
    kept = [
        line for line in text.splitlines()
        if not _LINK_LINE.match(line) and not _FIGURE_LINE.match(line)
    ]
    return page_words(_HTML_TAG.sub(" ", "\n".join(kept)))


class PageText:
    """The plain-text words of a document's pages, indexed for look-ups.

    Args:
        words: per 1-based page number, its words (``page_words``); pages without text may be
            present with no words.
    """

    def __init__(self, words: Mapping[int, Sequence[str]]) -> None:
        self.words = {page: list(page_list) for page, page_list in words.items()}
        self._grams: dict[tuple[str, ...], set[int]] = {}
        for page, page_list in self.words.items():
            for i in range(len(page_list) - GRAM + 1):
                self._grams.setdefault(tuple(page_list[i : i + GRAM]), set()).add(page)
        self._joined = {p: " " + " ".join(w) + " " for p, w in self.words.items()}
        self._sets = {p: frozenset(w) for p, w in self.words.items()}

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> PageText:
        """From each page's plain text in page order (page 1 first)."""
        return cls({number: page_words(text) for number, text in enumerate(texts, start=1)})

    @classmethod
    def from_pdf(cls, pdf: bytes) -> PageText:
        """From a PDF's bytes: PyMuPDF's plain ``get_text()`` of each page.

        Raises:
            pymupdf.FileDataError: not a PDF PyMuPDF can open.
        """
        import pymupdf  # noqa: PLC0415  (only the readers of PDFs pay for it)

        with pymupdf.open(stream=pdf, filetype="pdf") as doc:
            return cls.from_texts([page.get_text() for page in doc])

    @property
    def pages(self) -> list[int]:
        """The page numbers, ascending."""
        return sorted(self.words)

    def gram_pages(self, gram: tuple[str, ...]) -> set[int]:
        """Pages whose words hold the ``GRAM``-word run ``gram``."""
        return self._grams.get(gram, set())

    def contains(self, run: Sequence[str], pages: Iterable[int]) -> bool:
        """Whether the word run occurs in the text of ``pages`` read in order (a run may
        cross from one page into the next)."""
        chosen = sorted(set(pages))
        if not run or not chosen:
            return False
        needle = " " + " ".join(run) + " "
        joined = self._joined
        if any(needle in joined.get(p, "") for p in chosen):
            return True
        together = " " + " ".join(" ".join(self.words.get(p, ())) for p in chosen) + " "
        return needle in together

    def word_set(self, pages: Iterable[int]) -> set[str]:
        """The distinct words of ``pages``."""
        found: set[str] = set()
        for page in pages:
            found |= self._sets.get(page, frozenset())
        return found


def windows(words: Sequence[str]) -> list[tuple[str, ...]]:
    """The start, middle and end ``WINDOW``-word windows of ``words`` (one window, the whole
    passage, when it has fewer than ``WINDOW`` words; ``[]`` when it has none)."""
    if not words:
        return []
    if len(words) <= WINDOW:
        return [tuple(words)]
    middle = (len(words) - WINDOW) // 2
    return [tuple(words[:WINDOW]), tuple(words[middle : middle + WINDOW]), tuple(words[-WINDOW:])]


def verified(words: Sequence[str], page_text: PageText, pages: Iterable[int]) -> bool:
    """Whether a passage's ``words`` (``passage_words``) are on ``pages`` by the rule of the
    module docstring. A passage without words is not verified."""
    chosen = [p for p in pages if p in page_text.words]
    spans = windows(words)
    if not spans or not chosen:
        return False
    needed = 1 if len(spans) == 1 else WINDOWS_NEEDED
    if sum(1 for span in spans if page_text.contains(span, chosen)) >= needed:
        return True
    distinct = {w for w in words if len(w) >= MIN_WORD_CHARS}
    if not distinct:
        return False
    present = page_text.word_set(chosen)
    return len(distinct & present) >= WORD_SHARE * len(distinct)


@dataclass(frozen=True, slots=True)
class Location:
    """Where a passage was found.

    Attributes:
        runs: ``((offset, page), ...)``: the passage's character ``offset`` at which the part
            on 1-based ``page`` starts, offsets ascending from 0, pages ascending; ``()`` when
            no word of the passage was found.
        pages: every page the passage is on, ascending (the runs' pages, plus marker pages
            the passage only verifies with).
        located: the passage is verified (``verified``) on ``pages``.
    """

    runs: tuple[tuple[int, int], ...]
    pages: tuple[int, ...]
    located: bool

    def page_at(self, offset: int) -> int | None:
        """The page of the run holding character ``offset`` (``None`` without runs)."""
        return page_at(self.runs, offset)


def page_at(runs: Sequence[Sequence[int]], offset: int) -> int | None:
    """The page of the last run of ``runs`` (``Location.runs``) starting at or before
    ``offset``; the first run's page for an offset before it; ``None`` without runs."""
    if not runs:
        return None
    page = int(runs[0][1])
    for start, run_page in runs:
        if start > offset:
            break
        page = int(run_page)
    return page


#: Most pages one passage's positions choose among: the pages with the most tags (a 4-word run
#: such as a statement's column heading can be on dozens of pages).
MAX_CANDIDATES = 8


def locate(
    text: str, page_text: PageText, hint: tuple[int | None, int | None] = (None, None)
) -> Location:
    """Locate passage ``text`` (Markdown) in ``page_text`` (module docstring, "Locating").

    Args:
        hint: the ``(first, last)`` pages the converter's markers gave (``None`` when
            unknown); ties go to pages nearest this span, and a passage that verifies only
            with these pages added keeps them.

    Returns:
        a ``Location``; ``located`` is False when the passage verifies neither on the pages
        found nor on those with the hint's added.
    """
    tokens = words_with_offsets(text)
    tags = _tags([w for w, _ in tokens], page_text)
    check_words = passage_words(text)
    first, last = hint
    hinted = list(range(first, (last or first) + 1)) if first is not None else []
    counts: dict[int, int] = {}
    for tag in tags:
        for page in tag:
            counts[page] = counts.get(page, 0) + 1
    candidates = sorted(sorted(counts, key=lambda p: (-counts[p], p))[:MAX_CANDIDATES])
    if not candidates:
        if hinted and verified(check_words, page_text, hinted):
            return Location(((0, hinted[0]),), tuple(hinted), True)
        return Location((), (), False)
    chosen = _best_path(tags, candidates, hinted)
    runs: list[tuple[int, int]] = []
    for (_word, offset), page in zip(tokens, chosen, strict=True):
        if not runs:
            runs.append((0, page))
        elif page != runs[-1][1]:
            runs.append((offset, page))
    pages = tuple(p for _, p in runs)
    if verified(check_words, page_text, pages):
        return Location(tuple(runs), pages, True)
    merged = tuple(sorted(set(pages) | set(hinted)))
    if hinted and verified(check_words, page_text, merged):
        return Location(tuple(runs), merged, True)
    return Location(tuple(runs), pages, False)


def _tags(words: Sequence[str], page_text: PageText) -> list[set[int]]:
    """For each word position, the pages holding a ``GRAM``-word run that covers it."""
    tags: list[set[int]] = [set() for _ in words]
    if len(words) < GRAM:
        if words:
            whole = {p for p in page_text.pages if page_text.contains(words, [p])}
            for tag in tags:
                tag.update(whole)
        return tags
    for i in range(len(words) - GRAM + 1):
        found = page_text.gram_pages(tuple(words[i : i + GRAM]))
        if found:
            for j in range(i, i + GRAM):
                tags[j] |= found
    return tags


def _best_path(
    tags: Sequence[set[int]], candidates: Sequence[int], hinted: Sequence[int]
) -> list[int]:
    """One page per position, never decreasing, agreeing with the most tags less
    ``SWITCH_COST`` per change (module docstring); ties go to pages nearest ``hinted``."""
    near = _nearness(candidates, hinted)
    k = len(candidates)
    score = [near[j] + (1.0 if candidates[j] in tags[0] else 0.0) for j in range(k)]
    back: list[list[int]] = []
    for tag in tags[1:]:
        new = [0.0] * k
        step = [0] * k
        best_before, best_index = float("-inf"), -1  # best path on an earlier page
        for j in range(k):
            switch = best_before - SWITCH_COST
            if switch > score[j]:
                new[j], step[j] = switch, best_index
            else:
                new[j], step[j] = score[j], j
            if candidates[j] in tag:
                new[j] += 1.0
            if score[j] > best_before:
                best_before, best_index = score[j], j
        back.append(step)
        score = new
    j = max(range(k), key=lambda i: (score[i] + near[i], -i))
    path = [j]
    for step in reversed(back):
        j = step[j]
        path.append(j)
    path.reverse()
    return [candidates[i] for i in path]


def _nearness(candidates: Sequence[int], hinted: Sequence[int]) -> list[float]:
    """A tie-breaker worth less than one tag: 0 for a page inside the ``hinted`` span, less
    the further a page is from it."""
    if not hinted:
        return [0.0] * len(candidates)
    low, high = min(hinted), max(hinted)
    out = []
    for page in candidates:
        distance = 0 if low <= page <= high else min(abs(page - low), abs(page - high))
        out.append(-0.5 * distance / (distance + 1))
    return out


def locate_chunks(chunks: Sequence[Chunk], page_text: PageText) -> list[Chunk]:
    """Each chunk with its pages as found in ``page_text`` (``locate``, the markers' span as
    the hint): ``page_runs`` and ``located`` set, and, when located, ``page_start`` /
    ``page_end`` (and their printed labels, from the labels the chunks already carry) replaced
    by the first and last page found. A chunk not located keeps its markers' span.
    """
    labels: dict[int, str] = {}
    for chunk in chunks:
        for page, label in ((chunk.page_start, chunk.page_label_start),
                            (chunk.page_end, chunk.page_label_end)):
            if page is not None and label:
                labels[page] = label
    out: list[Chunk] = []
    for chunk in chunks:
        found = locate(chunk.text, page_text, (chunk.page_start, chunk.page_end))
        if not found.located:
            out.append(replace(chunk, page_runs=found.runs, located=False))
            continue
        first, last = found.pages[0], found.pages[-1]
        out.append(replace(
            chunk, page_start=first, page_end=last, page_runs=found.runs, located=True,
            page_label_start=labels.get(first, ""), page_label_end=labels.get(last, ""),
        ))
    return out
