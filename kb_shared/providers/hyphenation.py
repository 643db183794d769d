"""Words hyphenated at a line end: which line ends break a word, and how to join them.

A syllable break is joined ("cli-" + "mate" -> "climate"), a real compound keeps its hyphen
whether the break falls at its hyphen or not, and so does a prefix of one letter or a locant
("n-octanal", "1,2-dichloroethane"); the document's own words decide first, then
spaCy's English word list (issue 16, "Reading hard PDFs correctly"). The Markdown rewrite
that applies these rules to a page's blocks is ``markdown_cleanup.resolve_line_breaks``.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import pymupdf

from kb_shared.models import SPACY_MODEL_PACKAGE, SPACY_MODEL_VERSION

logger = logging.getLogger(__name__)

#: One item of a chemical locant: a number with an optional letter ("2", "4a") or a letter,
#: either with primes ("2′", "N'").
_LOCANT_ITEM = r"(?:\d+[^\W\d_]?|[^\W\d_])['′]*"
#: A locant ("2", "1,2", "N,N", "2′"): comma-separated items.
_LOCANT = re.compile(rf"{_LOCANT_ITEM}(?:,{_LOCANT_ITEM})*")
_HEAD_PART = rf"(?:[^\W\d_]+|{_LOCANT.pattern})"
#: A line's last token ending in a hyphen after a word or a locant ("cli-", "state-of-the-",
#: "n-", "1,2-", "COVID-19-").
_BROKEN_HEAD = re.compile(rf"({_HEAD_PART}(?:-{_HEAD_PART})*)-$")
#: The next line's first token when it starts with a letter ("mate", "known,", "Conforming").
_BROKEN_TAIL = re.compile(r"^([^\W\d_][^\W\d_'’-]*)")
_VOCABULARY_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)*")


@functools.lru_cache(maxsize=1)
def english_words() -> frozenset[str]:
    """Lower-case alphabetic entries of the offline spaCy model's vocabulary
    (``kb_shared.models.SPACY_MODEL_PACKAGE`` ``vocab/strings.json``, ~49,000 words), read
    without importing spaCy; empty (with a warning) when the model is not installed, and the
    document's own vocabulary then decides alone."""
    spec = importlib.util.find_spec(SPACY_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        logger.warning("%s is not installed: hyphenation uses the document's words only",
                       SPACY_MODEL_PACKAGE)
        return frozenset()
    root = Path(next(iter(spec.submodule_search_locations)))
    path = root / f"{SPACY_MODEL_PACKAGE}-{SPACY_MODEL_VERSION}" / "vocab" / "strings.json"
    try:
        strings = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        logger.warning("cannot read %s: hyphenation uses the document's words only", path)
        return frozenset()
    return frozenset(w.casefold() for w in strings if isinstance(w, str) and w.isalpha())


def document_vocabulary(texts: Iterable[str]) -> Counter[str]:
    """Case-folded words (letters, hyphenated compounds whole) of ``texts``, counted; the
    fragments of words broken at a line end are not words and should not be passed in."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update(w.casefold() for w in _VOCABULARY_WORD.findall(text))
    return counts


def resolve_break(head: str, tail: str, vocabulary: Counter[str], words: frozenset[str]) -> str:
    """The word a line-end break ``head`` + "-" / ``tail`` stands for.

    ``head`` is the text before the hyphen ("cli", "well", "state-of-the"), ``tail`` the
    next line's first word ("mate"). Only the last part of ``head`` and ``tail`` are weighed
    (``last``, ``tail``). In order: the document's own vocabulary (``vocabulary``, the words
    outside line breaks) decides when it holds ``last-tail`` or ``lasttail`` (the more
    frequent wins; a tie keeps the hyphen); else ``last`` a single letter or a locant ("n",
    "α", "2", "1,2", "N,N") keeps it ("n-octanal", "2-octanone", "x-ray"), and so does a
    capitalised tail ("Non-Conforming": a syllable break never starts a capital); typesetters
    leave at least two letters before a syllable break (``\\lefthyphenmin=2`` in plain TeX, The
    TeXbook, appendix B) and never break a number; else the word list ``words``
    (``english_words``):
    ``lasttail`` a word -> joined ("climate", "procedures"); ``last`` an acronym ("VPP"), or
    ``last`` and ``tail`` both words, or a prefix whose last vowel the tail repeats ("co" +
    "optimising": English keeps that hyphen) -> a compound that keeps its hyphen
    ("VPP-capable", "well-known", "self-assessment", "state-of-the-art"); otherwise joined
    (a syllable break).
    """
    last = head.rsplit("-", 1)[-1]
    joined, hyphenated = head + tail, f"{head}-{tail}"
    pair_joined = (last + tail).casefold()
    seen_joined = vocabulary.get(pair_joined, 0)
    compounds = {f"{last}-{tail}".casefold(), hyphenated.casefold()}  # "the-art", "state-of-…"
    seen_hyphenated = sum(vocabulary.get(word, 0) for word in compounds)
    if seen_joined or seen_hyphenated:
        return joined if seen_joined > seen_hyphenated else hyphenated
    if _LOCANT.fullmatch(last) or tail[:1].isupper():
        return hyphenated
    if pair_joined in words:
        return joined
    acronym = len(last) >= 2 and last.isupper()
    vowel = last[-1:].casefold()
    doubled_vowel = vowel in ("a", "e", "i", "o", "u") and tail[:1].casefold() == vowel
    if acronym or doubled_vowel or (last.casefold() in words and tail.casefold() in words):
        return hyphenated
    return joined


#: A page's text lines as MuPDF reads them: per block, ``(bbox, text)`` per line.
BlockLines = list[list[tuple[pymupdf.Rect, str]]]


def block_lines(pdf_page: pymupdf.Page) -> BlockLines:
    """MuPDF's text lines (bbox, text) per block, without de-hyphenation: what
    ``line_breaks`` and ``break_words`` read (one extraction of the page serves both)."""
    return [
        [
            (pymupdf.Rect(line["bbox"]), "".join(span["text"] for span in line["spans"]))
            for line in block.get("lines", ())
        ]
        for block in pdf_page.get_text("dict")["blocks"]
    ]


#: A token that is an address (URL, path, e-mail): a hyphen at its line end is its own.
_ADDRESS = re.compile(r"/|@|^www\.", re.IGNORECASE)


def _break(upper: str, lower: str) -> tuple[str, str, bool] | None:
    """``(head, tail, literal)`` when line ``upper`` ends in a word broken by a hyphen and
    ``lower`` goes on with a letter (its rest, or a capitalised part: "Non-" / "Conforming");
    ``literal`` when the broken token is an address, whose hyphen is part of it."""
    tokens = upper.split()
    head = _BROKEN_HEAD.search(tokens[-1]) if tokens else None
    tail = _BROKEN_TAIL.match(lower.lstrip())
    if head and tail and tail.group(1)[0].isalpha():
        return head.group(1), tail.group(1), bool(_ADDRESS.search(tokens[-1]))
    return None


#: How far below a block's last line the next block's first line may start and still go on
#: with the same paragraph, in that line's heights: a word processor's paragraph set at 1.5
#: line spacing comes out of MuPDF as one block a line (a 12 pt line every 18 pt leaves a gap
#: of half a line), and a paragraph gap is at least a line.
NEXT_BLOCK_GAP_LINES = 0.75


def _goes_on(upper: pymupdf.Rect, lower: pymupdf.Rect) -> bool:
    """Whether ``lower``, the first line of the next block, carries on ``upper``, the last
    line of a block: it starts below it within ``NEXT_BLOCK_GAP_LINES`` of its height and
    shares at least half the narrower line's width."""
    gap = lower.y0 - upper.y1
    overlap = min(upper.x1, lower.x1) - max(upper.x0, lower.x0)
    narrower = min(upper.width, lower.width)
    return (
        -0.5 * upper.height < gap <= NEXT_BLOCK_GAP_LINES * upper.height
        and narrower > 0 and overlap >= narrower / 2
    )


def _consecutive(lines_of_page: BlockLines) -> list[tuple[int, int]]:
    """Index pairs ``(i, i + 1)`` of the page's lines (numbered across its blocks, in order)
    where the second goes on from the first: the next line of the same block, or the first
    line of the next block when ``_goes_on`` says it carries on the paragraph."""
    pairs = []
    index = 0
    previous: pymupdf.Rect | None = None
    for lines in lines_of_page:
        for position, (rect, _text) in enumerate(lines):
            if index > 0 and (position > 0 or (previous is not None and _goes_on(previous, rect))):
                pairs.append((index - 1, index))
            previous = rect
            index += 1
    return pairs


def _page_lines(lines_of_page: BlockLines) -> list[tuple[pymupdf.Rect, str]]:
    return [line for lines in lines_of_page for line in lines]


def line_breaks(lines_of_page: BlockLines) -> list[tuple[pymupdf.Point, str, str, bool]]:
    """The words broken at a line end on a page (its ``block_lines``):
    ``(where, head, tail, literal)`` for each
    text line whose last token ends in a hyphen after a letter and whose next line (in the
    same MuPDF block, or the next block's first when it carries on the paragraph:
    ``NEXT_BLOCK_GAP_LINES``) starts with a letter; ``where`` is the middle of the broken line
    (to find its layout box); ``literal`` when the token is a URL, path or e-mail address
    (its hyphen stays)."""
    lines = _page_lines(lines_of_page)
    found = []
    for upper, lower in _consecutive(lines_of_page):
        rect, text = lines[upper]
        pair = _break(text, lines[lower][1])
        if pair is not None:
            found.append(((rect.tl + rect.br) / 2, *pair))
    return found


def break_words(lines_of_page: BlockLines) -> list[str]:
    """The page's lines (its ``block_lines``) with the two fragments of every line-end break
    left out (what ``document_vocabulary`` should count)."""
    lines = _page_lines(lines_of_page)
    broken = {
        upper for upper, lower in _consecutive(lines_of_page)
        if _break(lines[upper][1], lines[lower][1]) is not None
    }
    texts = []
    for index, (_, line) in enumerate(lines):
        tokens = line.split()
        if index in broken:
            tokens = tokens[:-1]  # its last word goes on on the next line
        if index - 1 in broken:
            tokens = tokens[1:]  # its first word is the end of the line before's
        texts.append(" ".join(tokens))
    return texts
