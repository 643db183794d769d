"""Where a passage is in the PDF: its words found in the text layer, page by page.

A chunk's pages come first from the converter's ``<!-- page N -->`` markers, which a layout
converter can misplace (a paragraph carried over a page break, a table moved, a running
header). This module locates a passage in PyMuPDF's own plain text of each page (not in the
Markdown), so a citation names the pages a reader who opens the PDF will see the text on
(issue 25, "Citations that are true to the page").

**Words.** Lower-cased ``[0-9a-z]`` runs, everything else separates (the shared corpus's
rule, ``../shared/corpus/README.md``); a non-ASCII character is first compatibility-normalised
on its own (NFKC: the text layer's ligature "ﬁ" is the Markdown's "fi"). Lines that are only a
link or an image, and the ``[Figure: …]`` lines the converter writes where a figure stands
(``markdown_regions``; not text of the page), are left out of a chunk before it is checked, and
inline HTML tags and ``<!-- … -->`` comments the converter writes (``<sup>``, ``<br>``,
"Start of picture text") are not words (``passage_words``).

**Locating** (``locate``). Every position of the passage's words is tagged with the pages on
which the ``GRAM``-word runs covering it occur, each page weighted by the share of those runs
it holds (a phrase repeated in another context on the next page weighs less there than where
its whole run is); a dynamic programme then picks one page per
position, never going back to an earlier page (a passage is read in order), that agrees with
the most tags, paying ``SWITCH_COST`` tags for each change of page so a stray run (a running
header repeated on every page) does not split it. The result is a list of *page runs*: the
character offset in the passage at which each page's part starts. A passage the converter's
markers put on pages where it verifies keeps to those pages and their neighbours: a copy of it
further away (a list printed twice, a table of contents) does not move it.

**Verified** (``verified``), the rule kb is measured by (issue 25): take three ``WINDOW``-word
windows of the passage (start, middle, end); it is verified on a set of pages when 2 of them
occur in the pages' plain text, or when at least ``WORD_SHARE`` of its distinct words of
``MIN_WORD_CHARS``+ characters do. A passage too short for three windows is checked whole.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from kb_shared.ingest.chunking import Chunk

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
#: Tags a change of page costs in ``locate``: more than a page-number line ("Page 6 of 40",
#: two runs of its own) earns, less than one table row whose whole run is on the other page
#: while its phrase recurs on the next (tests/test_page_location.py; trust-2026-12-06.md).
SWITCH_COST = 1.5

_WORD = re.compile(r"[0-9a-z]+")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_LINK_LINE = re.compile(r"^\s*!?\[[^\]]*\]\([^)]*\)\s*$")
#: The line the converter writes where a figure stands (``markdown_regions``): no page text.
FIGURE_LINE = re.compile(r"^\s*\[Figure: [^\n]*\]\s*$")
#: Inline HTML tags the converter writes (``<sup>``, ``<br>``): no words of the page.
INLINE_TAG = re.compile(r"</?(?:sup|sub|br|b|i|u|em|strong|span)\b[^>]*>", re.IGNORECASE)
#: A word broken by a hyphen at a line end, its next line starting in lower case.
_LINE_END_HYPHEN = re.compile(r"([0-9A-Za-z])[-\u00ad\u2010][ \t]*\n[ \t]*([a-z])")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


@lru_cache(maxsize=4096)
def _fold_char(char: str) -> str:
    """One character lower-cased after compatibility normalisation (NFKC: the ligature "ﬁ" is
    "fi", a full-width digit a digit): PyMuPDF's plain text keeps ligatures that pymupdf4llm's
    Markdown spells out (``long_pypdf_GeoTopo-komprimiert_de.pdf`` in the shared corpus)."""
    return unicodedata.normalize("NFKC", char).lower()


def _fold(text: str) -> str:
    """``text`` lower-cased, each non-ASCII character by ``_fold_char``."""
    if text.isascii():
        return text.lower()
    return _NON_ASCII.sub(lambda m: _fold_char(m.group()), text).lower()


def words_with_offsets(text: str) -> list[tuple[str, int]]:
    """``text``'s words (module docstring, "Words") with the character offset of each in
    ``text`` (a folded character may be longer than the original: "ﬁ", "İ")."""
    if text.isascii():
        return [(m.group(), m.start()) for m in _WORD.finditer(text.lower())]
    folded: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        piece = char.lower() if char.isascii() else _fold_char(char)
        folded.append(piece)
        origin.extend([index] * len(piece))
    return [(m.group(), origin[m.start()]) for m in _WORD.finditer("".join(folded))]


def page_words(text: str) -> list[str]:
    """A page's plain text reduced to its words."""
    return _WORD.findall(_fold(text))


def passage_words(text: str) -> list[str]:
    """The words of a chunk's Markdown that the PDF's text layer can hold: without link-only
    lines, ``[Figure: …]`` marker lines and the converter's ``<!-- … -->`` comments (module
    docstring, "Words")."""
    return page_words(_masked(text))


def _blank(match: re.Match[str]) -> str:
    return " " * len(match.group())


def _masked(text: str) -> str:
    """``text`` with what ``passage_words`` leaves out blanked by as many spaces, so the
    offsets of the words left stay those of ``text``."""
    lines = [
        " " * len(line) if _LINK_LINE.match(line) or FIGURE_LINE.match(line) else line
        for line in text.splitlines(keepends=True)
    ]
    return INLINE_TAG.sub(_blank, _COMMENT.sub(_blank, "".join(lines)))


class PageText:
    """The plain-text words of a document's pages, indexed for look-ups.

    A word hyphenated at a line end ("regu-" / "lation") is a syllable break the converter
    joins ("regulation") or a compound it keeps ("n-octanal", two words by the word rule), so
    such a page is read both ways: a run or word is on the page when either reading holds it.

    Args:
        words: per 1-based page number, its words (``page_words``); pages without text may be
            present with no words.
        rejoined: per page, its words with line-end hyphenated words joined, for the pages
            that have any (``from_texts``).
    """

    def __init__(
        self,
        words: Mapping[int, Sequence[str]],
        rejoined: Mapping[int, Sequence[str]] | None = None,
    ) -> None:
        self.words = {page: list(page_list) for page, page_list in words.items()}
        readings = {p: [w] for p, w in self.words.items()}
        for page, page_list in (rejoined or {}).items():
            readings.setdefault(page, []).append(list(page_list))
        # a run's words joined by spaces -> its page, or the set of its pages when on several
        # (most runs are on one page: a set for each would double the memory)
        self._grams: dict[str, int | set[int]] = {}
        grams = self._grams
        for page, page_list in ((p, r) for p, rs in readings.items() for r in rs):
            for i in range(len(page_list) - GRAM + 1):
                key = " ".join(page_list[i : i + GRAM])
                held = grams.get(key)
                if held is None:
                    grams[key] = page
                elif isinstance(held, set):
                    held.add(page)
                elif held != page:
                    grams[key] = {held, page}
        # each reading of a page on a line of its own: a run never matches across two readings
        self._joined = {
            p: "\n".join(" " + " ".join(r) + " " for r in rs) for p, rs in readings.items()
        }
        self._sets = {p: frozenset(w for r in rs for w in r) for p, rs in readings.items()}

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> PageText:
        """From each page's plain text in page order (page 1 first); a page with a word
        hyphenated at a line end is also read with the word joined (class docstring)."""
        words: dict[int, list[str]] = {}
        rejoined: dict[int, list[str]] = {}
        for number, text in enumerate(texts, start=1):
            words[number] = page_words(text)
            if _LINE_END_HYPHEN.search(text):
                rejoined[number] = page_words(_LINE_END_HYPHEN.sub(r"\1\2", text))
        return cls(words, rejoined)

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
        held = self._grams.get(" ".join(gram))
        if held is None:
            return set()
        return {held} if isinstance(held, int) else held

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
            on 1-based ``page`` starts (its first word, or the start of that word's line when
            only markup precedes it), offsets ascending from 0, pages ascending; ``()`` when
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
            unknown); ties go to pages nearest this span, a passage that verifies on it is
            placed within one page of it (module docstring, "Locating"), and a passage that
            verifies only with these pages added keeps them.

    Returns:
        a ``Location``; ``located`` is False when the passage verifies neither on the pages
        found nor on those with the hint's added.
    """
    tokens = words_with_offsets(_masked(text))
    tags = _tags([w for w, _ in tokens], page_text)
    check_words = [w for w, _ in tokens]  # the same as passage_words(text)
    first, last = hint
    hinted = list(range(first, (last or first) + 1)) if first is not None else []
    counts: dict[int, int] = {}
    for tag in tags:
        for page in tag:
            counts[page] = counts.get(page, 0) + 1
    near = dict(zip(counts, _nearness(list(counts), hinted), strict=True))
    candidates = sorted(sorted(counts, key=lambda p: (-counts[p], -near[p], p))[:MAX_CANDIDATES])
    if not candidates:
        if hinted and verified(check_words, page_text, hinted):
            return Location(((0, hinted[0]),), tuple(hinted), True)
        return Location((), (), False)
    runs = _runs(text, tokens, _best_path(tags, candidates, hinted))
    pages = tuple(p for _, p in runs)
    if hinted and any(not min(hinted) - 1 <= p <= max(hinted) + 1 for p in pages) and verified(
        check_words, page_text, hinted
    ):
        # the markers' pages show the passage: a copy of it far away (the same list printed
        # twice, a table of contents) does not move it there
        close = sorted(p for p in counts if min(hinted) - 1 <= p <= max(hinted) + 1)
        if not close:
            return Location(((0, hinted[0]),), tuple(hinted), True)
        runs = _runs(text, tokens, _best_path(tags, close[:MAX_CANDIDATES], hinted))
        pages = tuple(p for _, p in runs)
    if verified(check_words, page_text, pages):
        return Location(tuple(runs), pages, True)
    merged = tuple(sorted(set(pages) | set(hinted)))
    if hinted and verified(check_words, page_text, merged):
        return Location(tuple(runs), merged, True)
    return Location(tuple(runs), pages, False)


def _runs(
    text: str, tokens: Sequence[tuple[str, int]], chosen: Sequence[int]
) -> list[tuple[int, int]]:
    """``Location.runs`` of ``text`` from the page ``chosen`` for each of its ``tokens``."""
    runs: list[tuple[int, int]] = []
    for (_word, offset), page in zip(tokens, chosen, strict=True):
        if not runs:
            runs.append((0, page))
        elif page != runs[-1][1]:
            runs.append((_line_start(text, offset), page))
    return runs


def _line_start(text: str, offset: int) -> int:
    """The start of the line holding ``offset`` when nothing before it on that line is a
    letter or digit (a table row's ``|``, a heading's ``#``, a list's ``-``), else ``offset``:
    a page's part starts with its row or line, not after its markup."""
    start = text.rfind("\n", 0, offset) + 1
    return start if not any(ch.isalnum() for ch in text[start:offset]) else offset


def _tags(words: Sequence[str], page_text: PageText) -> list[dict[int, float]]:
    """For each word position, the pages holding a ``GRAM``-word run that covers it, each
    weighted by the share of the runs covering the position that it holds: a row whose
    words also stand, in another context, on the next page leans to the page where its
    whole run is (module docstring, "Locating")."""
    tags: list[dict[int, float]] = [{} for _ in words]
    if len(words) < GRAM:
        if words:
            whole = {p: 1.0 for p in page_text.pages if page_text.contains(words, [p])}
            for tag in tags:
                tag.update(whole)
        return tags
    last = len(words) - GRAM
    for i in range(last + 1):
        found = page_text.gram_pages(tuple(words[i : i + GRAM]))
        for j in range(i, i + GRAM):
            covering = min(j, last) - max(0, j - GRAM + 1) + 1  # runs that cover position j
            for page in found:
                tags[j][page] = tags[j].get(page, 0.0) + 1.0 / covering
    return tags


def _best_path(
    tags: Sequence[dict[int, float]], candidates: Sequence[int], hinted: Sequence[int]
) -> list[int]:
    """One page per position, never decreasing, agreeing with the most tags less
    ``SWITCH_COST`` per change (module docstring); ties go to pages nearest ``hinted``."""
    near = _nearness(candidates, hinted)
    k = len(candidates)
    score = [near[j] + tags[0].get(candidates[j], 0.0) for j in range(k)]
    back: list[list[int]] = []
    for tag in tags[1:]:
        new = [0.0] * k
        step = [0] * k
        best_before, best_index = float("-inf"), -1  # best path on an earlier page
        for j in range(k):
            switch = best_before - SWITCH_COST
            # on a tie switch late: a phrase on both pages goes with the text before it
            if switch >= score[j]:
                new[j], step[j] = switch, best_index
            else:
                new[j], step[j] = score[j], j
            new[j] += tag.get(candidates[j], 0.0)
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
