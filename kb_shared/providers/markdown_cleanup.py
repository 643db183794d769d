"""Clean-up of pymupdf4llm's layout-mode pages into the Markdown kb stores.

``providers.local_markdown`` runs pymupdf4llm and hands each page's layout boxes (class,
bbox, span of Markdown) to the steps here, in this order:

1. :func:`pages_from_chunks`: one :class:`Page` of :class:`Block` per layout box.
2. :func:`remove_furniture`: running headers/footers, page numbers and repeated logos. A box
   is a furniture *candidate* when layout classed it ``page-header`` / ``page-footer`` or it
   lies entirely within the top or bottom :data:`MARGIN_BAND` of its page. Its key is
   :func:`furniture_key` (text case-folded, Markdown marks removed, digit runs and standalone
   roman numerals dropped, so "Page 3 of 67" and "Page 4 of 67" match); a picture's key is its
   position rounded to :data:`PICTURE_KEY_GRID` pt. Every candidate whose key occurs on at
   least :data:`FURNITURE_PAGE_SHARE` of the pages (and on at least 2 pages) is removed, all
   occurrences including the first, with one exception: a *numbered section heading*
   ("Part 12 – Registration", "CHAPTER THREE", "3.1 Scope"; see :func:`is_numbered_heading`)
   is kept, as a Markdown heading, where its exact text first occurs, because that is where
   its section begins; its later copies are removed. Text in the body of a page is never
   removed, so a cover title that is also the running header survives once.
3. :func:`remove_contents`: tables of contents and lists of tables/figures.
4. Per page, ``markdown_regions.add_missed_tables`` (tables layout returned as one big box)
   and ``markdown_regions.add_figures`` (``[Figure: …]`` markers and their ``FigureRegion``);
   then ``markdown_regions.join_split_tables`` (a table cut by a page break is one table).
5. :func:`apply_outline`: when the PDF has an outline (bookmarks), its entries' headings and
   levels are used.
6. :func:`resolve_line_breaks`: words hyphenated at a line end are joined or keep their hyphen
   (``providers.hyphenation.resolve_break``).
7. :func:`page_markdown`: the kept blocks joined by blank lines. Tables stay pipe tables with
   ``<br>`` inside cells replaced by a space and rows split at a wrapped cell merged back;
   private-use glyphs and U+FFFD are dropped; ``<u>``/``<mark>`` tags are unwrapped;
   pymupdf4llm's image links and picture-text comments are removed. Code (monospaced) boxes
   are fenced so that no line inside can close the fence (:func:`fence_code`) and their lines
   are kept verbatim; a listing cut by a page break is one fence (:func:`split_fence`).
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import pymupdf

from kb_shared.ingest.pdf import MARKDOWN_MARKS, drop_unmapped
from kb_shared.providers.hyphenation import BlockLines, line_breaks, resolve_break

logger = logging.getLogger(__name__)

#: A box counts as furniture only if it repeats on at least this share of the pages.
FURNITURE_PAGE_SHARE = 0.5

#: Top and bottom bands (fraction of the page height) where running headers/footers live.
#: AEMO and NIST headers/footers sit within 0-10 % and 94-100 % of the page (portrait and
#: landscape); body text starts below 11 %.
MARGIN_BAND = 0.12

#: Grid (points) that picture positions are rounded to before comparing across pages.
PICTURE_KEY_GRID = 10.0

_IMAGE_LINK = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_UNWRAP_TAGS = re.compile(r"</?(?:u|mark)>", re.IGNORECASE)
_LINE_BREAK_TAG = re.compile(r"[ \t]*<br\s*/?>[ \t]*", re.IGNORECASE)
_ALIGNMENT_ONLY = re.compile(r"\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?")
_DIGITS = re.compile(r"\d+")
_WORD_OF_ROMAN_LETTERS = re.compile(r"\b[mdclxvi]+\b")
_STRICT_ROMAN = re.compile(r"m{0,4}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})")

#: Words that name a numbered division of a regulatory text ("Part 12", "Schedule 3",
#: "Appendix B", "CHAPTER THREE"), and their German equivalents.
_DIVISION_WORDS = (
    "part|chapter|section|subpart|division|subdivision|schedule|appendix|annex|attachment|"
    "article|clause|rule|regulation|item|kapitel|teil|abschnitt|anhang|anlage"
)
_HEADING_KINDS = ("title", "section-header")
_NUMBER_WORDS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve".split()
)
_NUMBERED_HEADING = re.compile(
    rf"^(?:(?:{_DIVISION_WORDS})\s+(?P<label>\d+[a-z]?(?:\.\d+)*|[a-z]+)(?!\w)"
    r"|\d+(?:\.\d+)*\.?\s+[^\W\d]"
    r"|(?P<roman>[ivxlcdm]+)[.)]\s+[^\W\d])",
    re.IGNORECASE,
)


# --------------------------------------------------------------------------------------
# Pages and blocks
# --------------------------------------------------------------------------------------
@dataclass(slots=True)
class Block:
    """One piece of a page: a layout box (possibly rewritten) or an inserted table/figure.

    ``kind`` is pymupdf4llm's layout class (``"text"``, ``"section-header"``, ``"table"``,
    ``"picture"``, ``"page-header"``, …) or ``"figure"`` once a marker replaced it; ``rect``
    is in PDF points, page coordinates; ``removed`` blocks are left out of the Markdown.
    """

    kind: str  # layout class ("text", "table", "picture", ...) or "figure" once marked
    rect: pymupdf.Rect
    markdown: str
    removed: bool = False
    caption: str = ""  # figure blocks: the marker's content


@dataclass(slots=True)
class Page:
    """One PDF page's blocks in reading order; ``number`` is 1-based, ``rect`` in points."""

    number: int  # 1-based
    rect: pymupdf.Rect
    blocks: list[Block] = field(default_factory=list)


def clean_text(markdown: str) -> str:
    """Drop image links, HTML comments, PUA glyphs, U+FFFD and ``<u>``/``<mark>`` tags;
    ``<br>`` becomes a space (in table cells and formula boxes alike); lines right-stripped,
    the whole stripped."""
    markdown = _IMAGE_LINK.sub("", markdown)
    markdown = _HTML_COMMENT.sub("", markdown)
    markdown = _UNWRAP_TAGS.sub("", markdown)
    markdown = _LINE_BREAK_TAG.sub(" ", markdown)
    markdown = drop_unmapped(markdown)
    lines = [line.rstrip() for line in markdown.strip().splitlines()]
    return "\n".join(lines).strip()


_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def _split_row(line: str) -> list[str]:
    return _CELL_SPLIT.split(line.strip())[1:-1]


def _starts_lowercase(cell: str) -> bool:
    letters = [ch for ch in MARKDOWN_MARKS.sub("", cell) if ch.isalpha()]
    return bool(letters) and letters[0].islower()


def _join_cells(first: str, second: str) -> str:
    for mark in ("**", "_"):  # "**Scaling for AGC ramp**" + "**rates**" -> one bold run
        if first.endswith(mark) and second.startswith(mark):
            return f"{first[: -len(mark)]} {second[len(mark):]}"
    return f"{first} {second}"


def _merge_continuation_rows(lines: list[str]) -> list[str]:
    """Undo rows that layout split at a line break inside one cell.

    A body row with exactly one non-empty cell, whose text starts in lower case, below a
    row where that cell is also filled, is the wrapped end of that cell: FCAS Model in
    NEMDE, Table 1 comes out as ``|Scaling for AGC ramp|All|First|None|`` followed by
    ``|rates||||``.
    """
    out: list[str] = []
    previous: list[str] | None = None
    for index, line in enumerate(lines):
        cells = _split_row(line)
        filled = [i for i, c in enumerate(cells) if c.strip()]
        if (
            index >= 3  # header row, alignment row and one body row come first
            and previous is not None
            and len(cells) == len(previous)
            and len(filled) == 1
            and previous[filled[0]].strip()
            and _starts_lowercase(cells[filled[0]])
        ):
            j = filled[0]
            previous[j] = _join_cells(previous[j].strip(), cells[j].strip())
            out[-1] = "|" + "|".join(previous) + "|"
            continue
        out.append(line)
        previous = cells if index >= 2 else None
    return out


def clean_table(markdown: str) -> str:
    """A pymupdf4llm pipe table: ``<br>`` cell breaks turned into spaces, rows split at a
    wrapped cell merged back (``_merge_continuation_rows``); blank lines dropped."""
    lines = [line for line in clean_text(markdown).splitlines() if line.strip()]
    return "\n".join(_merge_continuation_rows(lines))


def pages_from_chunks(doc: pymupdf.Document, chunks: Sequence[dict]) -> list[Page]:
    """One ``Page`` per pymupdf4llm page chunk (``page_chunks=True`` in layout mode), one
    ``Block`` per entry of its ``page_boxes`` (``class``, ``bbox``, ``pos`` span of ``text``)."""
    pages = []
    for number, chunk in enumerate(chunks, start=1):
        page = Page(number=number, rect=doc[number - 1].rect)
        text = chunk["text"]
        for box in chunk["page_boxes"]:
            start, stop = box["pos"]
            page.blocks.append(Block(box["class"], pymupdf.Rect(box["bbox"]), text[start:stop]))
        pages.append(page)
    return pages


# --------------------------------------------------------------------------------------
# Furniture
# --------------------------------------------------------------------------------------
def _roman_to_hash(match: re.Match[str]) -> str:
    word = match.group()
    return "#" if _STRICT_ROMAN.fullmatch(word) else word


def furniture_key(text: str) -> str:
    """Comparison key of a header/footer line: Markdown marks and tags removed, case-folded,
    digit runs and standalone roman numerals dropped, whitespace collapsed; a line that was
    only numbers (a bare page number) is ``"#"``.

    Dropping the numbers rather than marking their place lets the left- and right-hand
    versions of one running footer match: Solar Victoria's ``"**Solar Victoria** Notice to
    Market 2025–26 **1**"`` and ``"**2 Solar Victoria** Notice to Market 2025–26"`` each occur
    on half the pages, and only together reach :data:`FURNITURE_PAGE_SHARE`.
    ``"**Page 12** of 67"`` -> ``"page of"``; ``"PAGE iv"`` -> ``"page"``; ``"17"`` -> ``"#"``.
    """
    plain = MARKDOWN_MARKS.sub(" ", clean_text(text)).casefold()
    plain = _WORD_OF_ROMAN_LETTERS.sub(_roman_to_hash, _DIGITS.sub("#", plain))
    words = [w for w in plain.replace("#", " ").split()]
    if not words and "#" in plain:
        return "#"
    return " ".join(words)


def in_margin_band(rect: pymupdf.Rect, page_rect: pymupdf.Rect) -> bool:
    """True when ``rect`` lies entirely in the top or bottom :data:`MARGIN_BAND` of the page."""
    band = MARGIN_BAND * page_rect.height
    return rect.y1 <= page_rect.y0 + band or rect.y0 >= page_rect.y1 - band


def plain_text(markdown: str) -> str:
    """A block's text without Markdown marks or tags, whitespace collapsed."""
    return " ".join(MARKDOWN_MARKS.sub(" ", clean_text(markdown)).split())


def _has_section_number(text: str, *, division_only: bool) -> bool:
    """``text`` starts with a section number (see ``is_numbered_heading``); with
    ``division_only``, only in the division-word form ("Part 12", "CHAPTER THREE")."""
    match = _NUMBERED_HEADING.match(text)
    if match is None:
        return False
    if match["roman"]:
        return not division_only and bool(_STRICT_ROMAN.fullmatch(match["roman"].casefold()))
    label = (match["label"] or "").casefold()
    if not label:  # a decimal number and a word
        return not division_only
    return (
        label[0].isdigit()
        or len(label) == 1
        or label in _NUMBER_WORDS
        or bool(_STRICT_ROMAN.fullmatch(label))
    )


def is_numbered_heading(block: Block, page_rect: pymupdf.Rect) -> bool:
    """True when ``block`` (on a page of ``page_rect``) reads as a numbered section heading.

    Either layout classed it a heading (``title``/``section-header``) and its text starts
    with a section number: a division word and its label (``Part 12 – …``, ``Schedule 3``,
    ``Part IV``, ``Appendix B``, ``CHAPTER THREE``), a decimal number and a word
    (``12 Registration``, ``3.1. Scope``), or a roman numeral, ``.`` or ``)`` and a word
    (``IV. Compliance``). Or it opens the page (layout class ``page-header``, or a ``text``
    box within the top :data:`MARGIN_BAND`) and starts with a division word and its label:
    layout often classes a heading repeated atop every page of its part as a page header,
    while a bare number or a date up there is a page number or a running date.
    """
    text = plain_text(block.markdown)
    if block.kind in _HEADING_KINDS:
        return _has_section_number(text, division_only=False)
    at_top = block.kind == "page-header" or (
        block.kind == "text" and block.rect.y1 <= page_rect.y0 + MARGIN_BAND * page_rect.height
    )
    return at_top and _has_section_number(text, division_only=True)


def _heading_level(markdown: str) -> int:
    """Level of an ATX heading (``## …`` is 2); 0 when ``markdown`` is not one."""
    match = re.match(r"\s*(#{1,6})\s", markdown)
    return len(match.group(1)) if match else 0


def _division_levels(pages: Sequence[Page]) -> dict[str, int]:
    """Division word -> the heading level layout gave most often to headings that start
    with it ("part" -> 1 when "# Part 11 – General" is how parts are headed)."""
    levels: dict[str, Counter[int]] = defaultdict(Counter)
    for page in pages:
        for block in page.blocks:
            level = _heading_level(block.markdown)
            text = plain_text(block.markdown)
            if level and _has_section_number(text, division_only=True):
                levels[text.split()[0].casefold()][level] += 1
    return {word: counts.most_common(1)[0][0] for word, counts in levels.items()}


def _as_heading(block: Block, level: int) -> None:
    """Make a block layout did not class as a heading (a page header) an ATX heading."""
    block.markdown = "#" * level + " " + " ".join(block.markdown.split())
    block.kind = "section-header"


def _block_key(block: Block) -> str:
    if block.kind == "picture":
        g = PICTURE_KEY_GRID
        return "picture@" + ",".join(str(round(v / g)) for v in block.rect)
    return furniture_key(block.markdown)


def remove_furniture(pages: Sequence[Page]) -> int:
    """Mark repeated headers/footers/page numbers/logos as removed (module docstring, 2).

    A candidate whose key repeats on at least ``FURNITURE_PAGE_SHARE`` of the pages is
    removed, except the first occurrence of each numbered section heading's exact text
    (:func:`is_numbered_heading`): "Part 12 – Registration" atop every page of part 12 is
    kept on the page where part 12 begins and removed from the pages after it, so the
    part's chunks still carry it as their section (issue 10, defect 6). A kept one that
    layout did not class as a heading becomes an ATX heading of the level its siblings
    have ("# Part 11 – General" gives parts level 1; level 1 when it has none).

    Returns:
        The number of blocks removed.
    """
    threshold = max(2, math.ceil(FURNITURE_PAGE_SHARE * len(pages)))
    seen: dict[str, set[int]] = defaultdict(set)
    candidates: list[tuple[Block, str, pymupdf.Rect]] = []
    for page in pages:
        for block in page.blocks:
            header_class = block.kind in ("page-header", "page-footer")
            if header_class or in_margin_band(block.rect, page.rect):
                key = _block_key(block)
                if key:
                    seen[key].add(page.number)
                    candidates.append((block, key, page.rect))
    removed = 0
    opened: set[str] = set()  # numbered headings kept where their section begins
    levels: dict[str, int] | None = None
    for block, key, page_rect in candidates:
        if len(seen[key]) < threshold:
            continue
        if is_numbered_heading(block, page_rect):
            text = plain_text(block.markdown).casefold()
            if text not in opened:
                opened.add(text)
                if block.kind not in _HEADING_KINDS:
                    levels = _division_levels(pages) if levels is None else levels
                    _as_heading(block, levels.get(text.split()[0], 1))
                continue
        block.removed = True
        removed += 1
    return removed


# --------------------------------------------------------------------------------------
# Tables of contents
# --------------------------------------------------------------------------------------
#: Front-matter pages where an undotted contents table ("|1.2|Scope|6|") is expected: the
#: first this many pages, or the first :data:`CONTENTS_PAGE_SHARE` of a long document.
CONTENTS_FRONT_PAGES = 8
CONTENTS_PAGE_SHARE = 0.1
#: A block is a contents listing when at least this share of its lines are entries.
CONTENTS_ENTRY_SHARE = 0.7
#: ... and it has at least this many entries.
CONTENTS_MIN_ENTRIES = 3

_LEADER_ENTRY = re.compile(r"(?:(?:\.\s*){4,}|…{2,}|_{4,})\s*\**\s*(\d{1,4})\b")
_PAGE_CELL = re.compile(r"\d{1,4}")
_CONTENTS_HEADING = re.compile(
    r"^#+\s*\W*(?:table of contents|contents|list of (?:tables|figures)|tables|figures)\W*$",
    re.IGNORECASE,
)


def contents_entries(markdown: str, pages: int) -> tuple[int, int, bool] | None:
    """Read a block as (part of) a table-of-contents listing.

    An *entry* is a title followed by a dotted leader and a page number (several may share
    one line when layout joined them), or a table row whose own last cell is a page number;
    page numbers above ``pages`` do not count. Returns ``(entries, lines, dotted)`` — entry
    count, non-empty lines (alignment rows not counted), whether most entries have a dotted
    leader — or ``None`` when the entries' page numbers go backwards (a contents listing
    only moves forward).
    """
    numbers: list[int] = []
    lines = 0
    dotted = 0
    for raw in markdown.splitlines():
        line = raw.strip()
        if not line or _ALIGNMENT_ONLY.fullmatch(line):
            continue
        lines += 1
        leaders = [int(m.group(1)) for m in _LEADER_ENTRY.finditer(line)]
        leaders = [n for n in leaders if 1 <= n <= pages]
        if leaders:
            numbers.extend(leaders)
            dotted += len(leaders)
            continue
        cells = [c.strip(" *_") for c in line.strip("|").split("|")] if "|" in line else []
        if len(cells) >= 2 and _PAGE_CELL.fullmatch(cells[-1]) and 1 <= int(cells[-1]) <= pages:
            numbers.append(int(cells[-1]))
    if any(later < earlier for earlier, later in zip(numbers, numbers[1:])):
        return None
    return len(numbers), lines, dotted * 2 >= len(numbers) > 0


def remove_contents(pages: Sequence[Page]) -> int:
    """Drop tables of contents (and lists of tables/figures): they repeat every heading
    with a page number, so retrieval returned them for any section query and citations
    pointed at the contents page instead of the section.

    On each page, the blocks that read as listings (``contents_entries``: page numbers never
    going back, entries at least ``CONTENTS_ENTRY_SHARE`` of the lines) are dropped when
    together they hold at least ``CONTENTS_MIN_ENTRIES`` entries and either most of those
    have dotted leaders or the page is front matter (``CONTENTS_FRONT_PAGES``). A
    "Contents" / "List of tables" heading right before a dropped block goes with it.

    Returns:
        The number of blocks removed.
    """
    front = max(CONTENTS_FRONT_PAGES, math.ceil(CONTENTS_PAGE_SHARE * len(pages)))
    removed = 0
    for page in pages:
        listings: list[tuple[Block, Block | None]] = []
        entries = dotted = 0
        previous: Block | None = None
        for block in page.blocks:
            if block.removed or block.kind in ("picture", "figure"):
                continue
            reading = contents_entries(block.markdown, len(pages))
            if reading is not None and reading[0] and reading[0] >= CONTENTS_ENTRY_SHARE * reading[1]:
                listings.append((block, previous))
                entries += reading[0]
                dotted += reading[0] if reading[2] else 0
            previous = block
        if entries < CONTENTS_MIN_ENTRIES or not (dotted * 2 >= entries or page.number <= front):
            continue
        for block, before in listings:
            block.removed = True
            removed += 1
            if before is not None and not before.removed and _CONTENTS_HEADING.match(
                clean_text(before.markdown).strip()
            ):
                before.removed = True
                removed += 1
    return removed


# --------------------------------------------------------------------------------------
# Outlines
# --------------------------------------------------------------------------------------
_QUOTES_AND_DASHES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"',
                                     "\u2013": "-", "\u2014": "-", "\u2010": "-", "\u2011": "-"})
#: A block matched to an outline entry may hold at most this many characters more than the
#: entry's title (a heading layout joined with a page number or a trailing mark).
OUTLINE_TITLE_SLACK = 12
_TEXT_CLASSES = frozenset(("title", "section-header", "text", "page-header", "list-item"))


def _outline_key(text: str) -> str:
    """Comparison key of a heading and an outline title: marks removed, quotes and dashes
    plain, case-folded, whitespace collapsed."""
    return " ".join(plain_text(text).translate(_QUOTES_AND_DASHES).casefold().split())


def apply_outline(pages: Sequence[Page], outline: Sequence[Sequence]) -> int:
    """Use the PDF's outline (``doc.get_toc()``: ``[level, title, page, ...]`` rows, 1-based
    page, level 1 outermost) for the headings.

    Each entry is looked for on its page among the kept text blocks: the first whose
    ``_outline_key`` equals the title's, or starts with it and is at most
    :data:`OUTLINE_TITLE_SLACK` characters longer, becomes an ATX heading of the entry's level
    (capped at 6) with the block's own text. A heading layout found that is not in the outline
    is kept but placed under the outline heading in force (its level is raised to at least
    that heading's level + 1), so the outline's structure is what sections follow. Entries
    without a page, or whose title is on no block of their page, change nothing.

    Returns:
        The number of outline entries applied.
    """
    by_page: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for entry in outline:
        level, title, number = int(entry[0]), str(entry[1]), int(entry[2])
        if level >= 1 and 1 <= number <= len(pages) and _outline_key(title):
            by_page[number].append((level, _outline_key(title)))
    if not by_page:
        return 0
    applied = 0
    current = 0  # level of the outline heading in force
    for page in pages:
        wanted = list(by_page.get(page.number, ()))
        for block in page.blocks:
            if block.removed or block.kind not in _TEXT_CLASSES:
                continue
            if _FENCED_BOX.match(block.markdown):
                continue  # code is never a heading
            key = _outline_key(block.markdown)
            match = next(
                (
                    (level, title)
                    for level, title in wanted
                    if key == title
                    or (key.startswith(title) and len(key) <= len(title) + OUTLINE_TITLE_SLACK)
                ),
                None,
            )
            if match is not None:
                wanted.remove(match)
                current = min(match[0], 6)
                block.markdown = "#" * current + " " + plain_text(block.markdown)
                block.kind = "section-header"
                applied += 1
                continue
            level = _heading_level(block.markdown)
            if level and current and level <= current:
                block.markdown = "#" * min(6, current + 1) + block.markdown.lstrip()[level:]
    return applied


# --------------------------------------------------------------------------------------
# Words broken at a line end (the word rules live in providers.hyphenation)
# --------------------------------------------------------------------------------------
def resolve_line_breaks(
    page: Page, lines: BlockLines, vocabulary: Counter[str], words: frozenset[str]
) -> int:
    """Rewrite each word broken at a line end on ``page`` (``line_breaks`` of its PDF page's
    ``lines``, ``hyphenation.block_lines``) as
    ``resolve_break`` decides (an address keeps its hyphen), in the text block that holds the
    broken line, whichever way pymupdf4llm left it (joined "wellknown" or "1,2dichloroethane",
    or "a- b" / "2- octanone" for a short head). Tables, figures and code are not touched.

    Returns:
        The number of breaks rewritten.
    """
    changed = 0
    offsets: dict[int, int] = {}
    for where, head, tail, literal in line_breaks(lines):
        block = next(
            (
                b
                for b in page.blocks
                if not b.removed and b.kind in _TEXT_CLASSES and b.rect.contains(where)
                and not _FENCED_BOX.match(b.markdown)
            ),
            None,
        )
        if block is None:
            continue
        # an emphasis mark ("_semischeduled_") is no part of the word: "_" is no letter here
        pattern = re.compile(
            rf"(?<![^\W_])(?<!-){re.escape(head)}(?:-[ \t]*\n?[ \t]*|[ \t]+)?"
            rf"{re.escape(tail)}(?![^\W_]|-)"
        )
        start = offsets.get(id(block), 0)
        match = pattern.search(block.markdown, start)
        if match is None:
            continue
        word = f"{head}-{tail}" if literal else resolve_break(head, tail, vocabulary, words)
        block.markdown = block.markdown[: match.start()] + word + block.markdown[match.end() :]
        offsets[id(block)] = match.start() + len(word)
        changed += word != match.group()
    return changed


# --------------------------------------------------------------------------------------
# Code
# --------------------------------------------------------------------------------------
#: A code box as pymupdf4llm writes it: a line of three backticks, the lines, the same line
#: (a box whose closing line is missing is code to its end).
_FENCED_BOX = re.compile(
    r"\A\s*```[ \t]*\n(?P<code>.*?)\n?(?:^[ \t]*```[ \t]*)?\s*\Z", re.DOTALL | re.MULTILINE
)
_BACKTICK_RUN = re.compile(r"`+")


def code_box(markdown: str) -> str | None:
    """The code lines of a monospaced box as pymupdf4llm wrote it (fenced with three
    backticks, possibly unclosed), ``None`` for any other block."""
    match = _FENCED_BOX.match(markdown)
    return None if match is None else match.group("code")


def split_fence(parts: Sequence[Block]) -> None:
    """Write the code boxes ``parts`` (one listing cut by page breaks, in order) as one fence:
    one fence length for all (``fence_code``), opened in the first part only and closed in
    the last only. Their kind becomes ``"code"``, which ``page_markdown`` writes as is."""
    codes = [code_box(block.markdown) or "" for block in parts]
    fence = fence_code("\n".join(codes)).split("\n", 1)[0]
    for index, (block, code) in enumerate(zip(parts, codes)):
        lines = fence_code(code).split("\n")[1:-1]
        if index == 0:
            lines.insert(0, fence)
        if index == len(parts) - 1:
            lines.append(fence)
        block.markdown = "\n".join(lines)
        block.kind = "code"


def fence_code(code: str) -> str:
    """``code`` (lines of a monospaced box) as a fenced block that nothing inside can close or
    reopen: the fence is one backtick longer than the longest backtick run in the code, and at
    least three (CommonMark 0.31, section 4.5). Lines are kept verbatim except that trailing
    whitespace and unmapped glyphs are dropped, so a ``#`` line stays code."""
    lines = [drop_unmapped(line).rstrip() for line in code.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    longest = max((len(run) for run in _BACKTICK_RUN.findall(code)), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([fence, *lines, fence])


# --------------------------------------------------------------------------------------
# Assembly
# --------------------------------------------------------------------------------------
def page_markdown(page: Page) -> str:
    """The page's kept blocks as Markdown, separated by blank lines ("" when none is kept)."""
    parts = []
    for block in page.blocks:
        if block.removed:
            continue
        code = code_box(block.markdown)
        if block.kind == "table":
            text = clean_table(block.markdown)
        elif block.kind in ("figure", "code"):
            text = block.markdown
        elif code is not None:
            text = fence_code(code)
        else:
            text = clean_text(block.markdown)
        if text:
            parts.append(text)
    return "\n\n".join(parts)


__all__ = [
    "FURNITURE_PAGE_SHARE",
    "MARGIN_BAND",
    "OUTLINE_TITLE_SLACK",
    "Block",
    "Page",
    "apply_outline",
    "contents_entries",
    "clean_table",
    "clean_text",
    "code_box",
    "fence_code",
    "line_breaks",
    "resolve_break",
    "resolve_line_breaks",
    "split_fence",
    "furniture_key",
    "in_margin_band",
    "is_numbered_heading",
    "page_markdown",
    "pages_from_chunks",
    "plain_text",
    "remove_contents",
    "remove_furniture",
]
