"""Chunking: the single source of truth for chunk boundaries and ids.

``chunk_markdown`` turns a converted document's Markdown into the chunks that are embedded,
fed to graph extraction and cited. The embeddings and graph assets both derive from its
output, so every ``chunk_id`` stored on a graph edge resolves in the vector index
(``DESIGN.md``, "Identity"). Changing a rule here moves chunk ids: it needs a full re-ingest,
not a re-embed. The rules, all deterministic (same Markdown -> byte-identical chunks):

**Input.** Markdown as our converters emit it (``providers.base.ConvertedDocument``):
``<!-- page N -->`` lines (1-based) before each page's content, ATX headings ``#``..``######``,
paragraphs, lists, pipe tables (header row, alignment row such as ``|---|:--:|``, body rows),
``[Figure: …]`` marker lines and possibly fenced code blocks. ``\\r\\n`` and lone ``\\r``
become ``\\n``. Setext headings and indented code blocks are not recognised (the converters do
not emit them); their lines are treated as paragraph text.

**Words.** A *word* is a maximal run of characters that are neither whitespace nor ``|``
(``count_words``). For prose that is exactly the whitespace-separated token. The ``|`` rule
matters for tables: pymupdf4llm writes rows without spaces (``|**Bulli Creek**|132|QBK2|``),
so a whitespace count sees a 5-column row as ~4 "words". Measured on the 2020-21 loss-factor
report at budget 300: table parts of up to 5,344 characters with a whitespace count against
2,193 with this one (prose chunks reach ~2,000), and a part covering ~100 rows is the
oversized-table problem the budget exists to prevent (``reference/mcp-utilities-README.txt``,
"Chunking, and the table problem"). Cells count as words; a bare ``|`` does not.

**Page markers.** A line that is only ``<!-- page N -->`` (any case, any surrounding
whitespace; ``N`` >= 1) sets the current page and is removed from chunk text, wherever it is:
between blocks, inside a paragraph (the paragraph continues across the page break), between
table rows, even inside a fenced code block (the converter writes markers between pages
regardless of what is open). Content before the first marker counts as page 1 when the
Markdown has markers; with no markers at all every chunk has ``page_start = page_end = None``.
A chunk's span is the smallest and largest page of the lines its text came from.
A marker may carry the page's printed label (``/PageLabels``) when it differs from the
physical number: ``<!-- page 6 (p. iv) -->`` (``page_marker``). The chunk then carries the
labels of its first and last page (``page_label_start`` / ``page_label_end``; ``""`` where a
page has none), so citations can read "p. iv (PDF page 6)" while links keep ``#page=6``.

**Blocks.** Lines are grouped into blocks: a heading line (always its own block); a fenced
code block; a pipe table (see below); otherwise a run of non-blank lines (a paragraph or a
list), ended by a blank line or by a heading, fence or table that starts on the next line.
Every line keeps its own text except that trailing whitespace is trimmed, so quotes taken from
the document still match chunk text.

**Fences** (CommonMark 0.31, section 4.5). A fence opens at a line of 3 or more backticks or
tildes indented at most 3 columns (a backtick fence's info string holds no backtick) and
closes at the next line of the same character, at least as long, with nothing after it and
indented at most 3 columns; everything between, blank lines included, is code. So a fence of
four backticks holds lines of three, a ``~~~`` fence holds backtick lines, and a ``#`` line
inside a fence is code, never a heading: a fence never starts a section (nor ends one).
Unclosed, a fence runs to the end of the document. Inside a list (after a list block, through
the blank lines and indented blocks that follow it) a fence may be indented further, as list
items' code is; it then closes at a fence indented at most 3 columns more than its opening
one and, left unclosed, ends before the first line indented less than its opening fence (the
item's end). Outside a list a fence line indented 4 or more columns is paragraph text. The
same rules hold for every converter's Markdown: PDF conversions may emit fences too.

**Packing.** Blocks are packed greedily, in order, into a chunk while its word count stays
<= ``budget_words``; blocks in one chunk are joined by a blank line. Each heading starts a new
chunk and its line is the first line of that chunk, except that a chunk holding nothing but
heading lines so far is not closed by a deeper heading
(``## 3 Dispatch`` directly followed by ``### 3.1 Bids`` gives one chunk starting with both,
not a chunk that is only a heading; its path is the deeper one). An unnumbered heading
directly under a same-level heading that has no text of its own is that heading's sub-part:
NIST's ``###### 3.1.5 Employ the principle of least privilege…`` followed by
``###### DISCUSSION`` gives the path ``(…, "3.1.5 Employ…", "DISCUSSION")`` and one chunk,
so the requirement's number stays with its discussion. A numbered heading (``3.4 …``,
``A.2``, ``Appendix B``) after an empty numbered one is its sibling, and a heading of the
same or a higher rank than every heading in the chunk closes it. Headings
directly before a table lead the table's first part (see "Tables").
``heading_path`` is the stack of headings in force, outermost first, including the chunk's
own heading: a heading of level L pops every heading of level >= L, then is pushed. Titles are
the heading text without the ``#`` marks (nor an optional closing ``#`` sequence), with one
wrapping emphasis (``**…**``, ``__…__``, ``*…*``, ``_…_``) removed because pymupdf4llm bolds
every heading; an empty title pops but is not shown. A heading is prose for splitting. A block
that does not fit in the room left starts a new chunk.

**Long prose.** A non-table, non-code block over the budget is cut, each level used only on
parts still over the budget: (1) a list between its top-level items; (2) sentences: after
``.``, ``!`` or ``?`` (plus closing quotes, brackets or emphasis marks) followed by whitespace
and then an upper-case letter or a digit (optionally behind an opening quote, bracket or
emphasis mark), so ``e.g. the`` and ``3.1.2`` never cut; (3) line breaks; (4) as the last
resort, runs of exactly ``budget_words`` words. The pieces are then packed like blocks, so the
first sentences of a long paragraph may fill the room left in the previous chunk. Pieces are
substrings of the block; two pieces of one block in one chunk are rendered as the original
substring between them. No text chunk exceeds the budget, except a chunk that is one fenced
code block larger than the budget: code is the only unsplittable unit (cutting it would leave
an unbalanced fence and code that means something else), so such a block is one chunk of its
own, whatever its size, and the chunk in progress before it is closed first.

**Tables.** A table starts at a line containing ``|`` followed by an alignment row (a row of
``-``/``:`` cells containing ``|``). Body rows follow: non-blank lines containing ``|``. After
blank lines and at least one page marker (and nothing else), the table continues when the next
line starts with ``|`` and is either a row without an alignment row under it, or a header row
equal to this table's header (cells compared without emphasis marks, case-folded, whitespace
collapsed) followed by an alignment row: a table the converter
cut at a page break is merged back into one logical table, and the repeated header and
alignment rows are dropped (every part repeats them anyway). A table is never mixed with prose:
the chunk in progress is closed and every table part is its own chunk of kind ``"table"``,
except that heading lines directly above the table (a chunk in progress holding only headings,
often the table's caption such as ``###### **Table 6 Scaled factors**``) become the first
lines of its first part, so no chunk is only a heading; they count against that part's budget
and their pages join its span. When even the first part cannot take them within the budget,
they stay a text chunk of their own.
A table whose words fit the budget, or with fewer than 3 body rows, is one part. Otherwise it
is split between rows, never within one: each part is the header row, the alignment row and as
many following rows as fit the budget (greedy), so each part is still a readable table; one row
that alone with the header busts the budget is a part of its own. A part's page span comes
from its own body rows (the header's page only for a table without body rows), so a cited part
names the page the matched rows are on.

**Ids.** ``identity.chunk_id(document, index)`` with ``index`` 0, 1, … in text order. Empty or
whitespace-only Markdown (or Markdown of page markers only) gives ``[]``.
"""

from __future__ import annotations

import bisect
import itertools
import re
from dataclasses import dataclass, field

from kb_shared.identity import chunk_id

KIND_TEXT = "text"
KIND_TABLE = "table"

#: Separator of the contextual prefix (``"Title › Section › Subsection"``, DESIGN.md's
#: contextualisation row).
PATH_SEPARATOR = " › "

#: Below this many body rows a table is never split: with one or two rows there is nothing to
#: gain and each part would be mostly header (mcp-utilities README, "the table problem").
MIN_ROWS_TO_SPLIT = 3

_WORD = re.compile(r"[^\s|]+")
_PAGE_MARKER = re.compile(
    r"^\s*<!--\s*page\s+(\d+)(?:\s+\(p\.\s+(.*?)\))?\s*-->\s*$", re.IGNORECASE
)
_DASH_RUN = re.compile(r"-{2,}")
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*))?$")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE_OPEN = re.compile(r"^([ \t]*)(`{3,}|~{3,})(.*)$")
_FENCE_CLOSE = re.compile(r"^([ \t]*)(`{3,}|~{3,})[ \t]*$")
#: Indentation (columns) up to which a line still opens a fence, a heading or a closing fence
#: outside a list (CommonMark 0.31, sections 4.2 and 4.5).
_MAX_INDENT = 3
_LEADING = re.compile(r"[ \t]*")
_ALIGNMENT_ROW = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_PIPE_ROW_START = re.compile(r"^ {0,3}\|")
_LIST_ITEM = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
_SENTENCE_END = re.compile(r"[.!?][\"'”’)\]*_]*(\s+)[\"“‘'(\[*_]*([^\W_])")
_EMPHASIS_WRAPPERS = ("**", "__", "*", "_")
_EMPHASIS_MARKS = re.compile(r"\*\*|__|(?<!\w)[*_]|[*_](?!\w)")
_CELL_SEPARATOR = re.compile(r"(?<!\\)\|")
#: A heading title that carries its own number ("3.4 Conditions", "A.2", "Appendix B"):
#: a sibling, never a sub-part, of the heading before it.
_NUMBERED_TITLE = re.compile(
    r"^(?:\d+(?:\.\d+)*\.?(?:\s|$)|[A-Z](?:\.\d+)+\.?(?:\s|$)|[IVXLC]+\.\s"
    r"|(?:appendix|annex|schedule|attachment|part|chapter|section)\b)",
    re.IGNORECASE,
)


def page_marker(number: int, label: str = "") -> str:
    """The marker converters write before page ``number`` (1-based) with its printed
    ``label`` when that differs (``(6, "iv")`` -> ``"<!-- page 6 (p. iv) -->"``, ``(3, "3")``
    -> ``"<!-- page 3 -->"``); label whitespace collapsed, ``--`` runs made ``-`` so it cannot
    end the comment. Raises ``ValueError`` for ``number`` < 1."""
    if number < 1:
        raise ValueError(f"page numbers are 1-based, got {number}")
    label = _DASH_RUN.sub("-", " ".join(label.split()))
    if not label or label == str(number):
        return f"<!-- page {number} -->"
    return f"<!-- page {number} (p. {label}) -->"


def count_words(text: str) -> int:
    """Number of words in ``text``: maximal runs of characters that are neither whitespace nor
    ``|`` (module docstring, "Words"). ``"| a | b c |"`` -> 3; ``"|x|y|"`` -> 2; ``""`` -> 0."""
    return len(_WORD.findall(text))


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk of a document's Markdown.

    Attributes:
        id: ``identity.chunk_id(document, index)``.
        document: the ``doc_id``.
        index: 0-based position in the document.
        text: the chunk's Markdown (page markers removed).
        heading_path: headings above the chunk, outermost first, e.g. ``("3 Dispatch", "3.1 Bids")``.
        page_start / page_end: 1-based page span from ``<!-- page N -->`` markers; ``None`` when
            the Markdown has no markers.
        kind: ``"text"`` or ``"table"``.
        page_label_start / page_label_end: first/last page's printed label, ``""`` if none.
        page_runs: ``((offset, page), ...)`` where the text's part on each page starts, found
            in the PDF's text layer (``kb_shared.ingest.page_location``); ``()`` when not located.
        located: the text was verified on its pages in the PDF; ``None`` when not checked.
    """

    id: str
    document: str
    index: int
    text: str
    heading_path: tuple[str, ...]
    page_start: int | None
    page_end: int | None
    kind: str
    page_label_start: str = ""
    page_label_end: str = ""
    page_runs: tuple[tuple[int, int], ...] = ()
    located: bool | None = None


# --------------------------------------------------------------------------- parsing


@dataclass(slots=True)
class _Block:
    """A Markdown block: its content lines (markers removed, right-trimmed) and their pages.

    For a table, ``lines[0]`` is the header row, ``lines[1]`` the alignment row and the rest
    the body rows (the repeated header/alignment rows of a merged continuation are dropped).
    """

    kind: str  # "heading" | "code" | "table" | "prose"
    lines: list[str]
    pages: list[int | None]
    level: int = 0
    title: str = ""
    is_list: bool = False
    text: str = ""
    line_starts: list[int] = field(default_factory=list)

    def finish(self) -> _Block:
        """Compute ``text`` (lines joined by ``\\n``) and the offset of each line in it."""
        self.text = "\n".join(self.lines)
        offset = 0
        self.line_starts = []
        for line in self.lines:
            self.line_starts.append(offset)
            offset += len(line) + 1
        return self

    def page_span(self, start: int, end: int) -> tuple[int | None, int | None]:
        """Smallest and largest page of the lines overlapping ``text[start:end]``."""
        first = bisect.bisect_right(self.line_starts, start) - 1
        last = bisect.bisect_right(self.line_starts, max(start, end - 1)) - 1
        pages = [p for p in self.pages[first : last + 1] if p is not None]
        if not pages:
            return None, None
        return min(pages), max(pages)


class _Lines:
    """The document's lines with, for each, whether it is a page marker, whether it is blank,
    and the page its content is on."""

    def __init__(self, markdown: str) -> None:
        self.raw = markdown.split("\n")
        self.marker: list[bool] = []
        self.page: list[int | None] = []
        self.labels: dict[int, str] = {}  # page -> its printed label, from labelled markers
        has_markers = any(_PAGE_MARKER.match(line) for line in self.raw)
        page: int | None = 1 if has_markers else None
        for number, line in enumerate(self.raw, start=1):
            match = _PAGE_MARKER.match(line)
            if match:
                page = int(match.group(1))
                if page < 1:
                    raise ValueError(
                        f"page markers are 1-based, but line {number} is {line.strip()!r}; "
                        "the converter must number pages from 1"
                    )
                if match.group(2):
                    self.labels[page] = match.group(2).strip()
            self.marker.append(match is not None)
            self.page.append(page)
        self.text = [line.rstrip() for line in self.raw]

    def __len__(self) -> int:
        return len(self.raw)

    def blank(self, i: int) -> bool:
        return not self.marker[i] and not self.text[i]

    def content(self, i: int) -> bool:
        return not self.marker[i] and bool(self.text[i])

    def heading(self, i: int) -> re.Match[str] | None:
        return _HEADING.match(self.text[i]) if self.content(i) else None

    def fence(self, i: int, in_list: bool = False) -> re.Match[str] | None:
        """The opening fence on line ``i`` (groups: indentation, fence, info string), or
        ``None``. Indented over 3 columns it opens a fence only ``in_list`` (a list item's
        fenced code; elsewhere such a line is paragraph text)."""
        if not self.content(i):
            return None
        match = _FENCE_OPEN.match(self.text[i])
        if match is None or (_indent(match.group(1)) > _MAX_INDENT and not in_list):
            return None
        if match.group(2)[0] == "`" and "`" in match.group(3):
            return None  # a backtick fence's info string cannot contain a backtick
        return match

    def table_start(self, i: int) -> bool:
        """Line ``i`` is a header row: it holds ``|`` and the next line is an alignment row."""
        return (
            self.content(i)
            and "|" in self.text[i]
            and i + 1 < len(self)
            and self.content(i + 1)
            and "|" in self.text[i + 1]
            and _ALIGNMENT_ROW.match(self.text[i + 1]) is not None
        )

    def interrupts(self, i: int, in_list: bool = False) -> bool:
        """Line ``i`` starts a block that ends a paragraph or a table (``in_list``: see
        ``fence``)."""
        return bool(self.heading(i) or self.fence(i, in_list) or self.table_start(i))


def _indent(whitespace: str) -> int:
    """Width in columns of a line's leading spaces and tabs (tab stops of 4, CommonMark)."""
    return len(whitespace.expandtabs(4))


def _heading_title(raw: str | None) -> str:
    """A heading's title: no closing ``#`` run, trimmed, one wrapping emphasis removed."""
    title = _CLOSING_HASHES.sub("", (raw or "").strip()).strip()
    for mark in _EMPHASIS_WRAPPERS:
        inner = title[len(mark) : -len(mark)]
        if len(title) > 2 * len(mark) and title.startswith(mark) and title.endswith(mark):
            if mark not in inner:
                title = inner.strip()
            break
    return title


def _parse(lines: _Lines) -> list[_Block]:
    """Group the document's lines into blocks (module docstring, "Blocks" and "Tables")."""
    blocks: list[_Block] = []
    i, n = 0, len(lines)
    in_list = False  # inside a list: after a list block, through its indented blocks
    while i < n:
        if not lines.content(i):
            i += 1
            continue
        heading = lines.heading(i)
        fence = lines.fence(i, in_list)
        if heading:
            blocks.append(
                _Block(
                    "heading",
                    [lines.text[i]],
                    [lines.page[i]],
                    level=len(heading.group(1)),
                    title=_heading_title(heading.group(2)),
                )
            )
            i += 1
            in_list = False
        elif fence:
            i = _parse_fence(lines, i, fence, blocks)
        elif lines.table_start(i):
            i = _parse_table(lines, i, blocks)
            in_list = False
        else:
            i = _parse_prose(lines, i, blocks, in_list)
            block = blocks[-1]
            in_list = block.is_list or (in_list and block.lines[0][:1] in (" ", "\t"))
    return [block.finish() for block in blocks]


def _parse_fence(lines: _Lines, i: int, opening: re.Match[str], blocks: list[_Block]) -> int:
    """A fenced code block from line ``i`` to its closing fence: the same character, at least
    as long, nothing after it. Unclosed, it runs to the end of the document, or, when the
    opening fence is indented over 3 columns (inside a list item), to the last line before
    one indented less than the opening fence (where the item ends)."""
    indent, opener = _indent(opening.group(1)), opening.group(2)
    nested = indent > _MAX_INDENT
    close_limit = indent + _MAX_INDENT if nested else _MAX_INDENT
    block = _Block("code", [lines.text[i]], [lines.page[i]])
    j = i + 1
    while j < len(lines):
        if lines.marker[j]:
            j += 1
            continue
        text = lines.text[j]
        close = _FENCE_CLOSE.match(text)
        closes = (
            close is not None
            and _indent(close.group(1)) <= close_limit
            and close.group(2)[0] == opener[0]
            and len(close.group(2)) >= len(opener)
        )
        if not closes and nested and text and _indent(_LEADING.match(text).group()) < indent:
            break  # the list item (and with it the unclosed fence) ended
        block.lines.append(text)
        block.pages.append(lines.page[j])
        j += 1
        if closes:
            break
    while block.lines and not block.lines[-1]:  # an unclosed fence running into blank lines
        block.lines.pop()
        block.pages.pop()
    blocks.append(block)
    return j


def _parse_prose(lines: _Lines, i: int, blocks: list[_Block], in_list: bool) -> int:
    block = _Block("prose", [], [])
    in_list = in_list or _LIST_ITEM.match(lines.text[i]) is not None
    j = i
    while j < len(lines):
        if lines.marker[j]:
            j += 1
            continue
        if lines.blank(j) or (j > i and lines.interrupts(j, in_list)):
            break
        block.lines.append(lines.text[j])
        block.pages.append(lines.page[j])
        j += 1
    block.is_list = _LIST_ITEM.match(block.lines[0]) is not None
    blocks.append(block)
    return j


def _row_key(row: str) -> tuple[str, ...]:
    """A row's cells without emphasis marks, case-folded, whitespace collapsed: ``"| **Code**
    | Party |"`` and ``"|Code|party|"`` are one header."""
    cells = _CELL_SEPARATOR.split(row.strip().strip("|"))
    return tuple(" ".join(_EMPHASIS_MARKS.sub("", c).casefold().split()) for c in cells)


def _parse_table(lines: _Lines, i: int, blocks: list[_Block]) -> int:
    header = lines.text[i]
    block = _Block("table", [header, lines.text[i + 1]], [lines.page[i], lines.page[i + 1]])
    j = i + 2
    n = len(lines)
    while j < n:
        k, saw_marker, saw_blank = j, False, False
        while k < n and not lines.content(k):
            saw_marker = saw_marker or lines.marker[k]
            saw_blank = saw_blank or lines.blank(k)
            k += 1
        if k >= n:
            break
        if saw_marker and _PIPE_ROW_START.match(lines.text[k]):
            if lines.table_start(k):
                if _row_key(lines.text[k]) != _row_key(header):
                    break  # a different table begins on the next page
                j = k + 2  # the same table continued: drop its repeated header rows
                continue
        elif saw_blank or saw_marker or "|" not in lines.text[k] or lines.interrupts(k):
            break
        block.lines.append(lines.text[k])
        block.pages.append(lines.page[k])
        j = k + 1
    blocks.append(block)
    return j


# --------------------------------------------------------------------------- splitting


def sentence_starts(text: str) -> list[int]:
    """Offsets in ``text`` where a sentence after the first begins, by the "Long prose" rule
    of this module's docstring (``.``/``!``/``?``, closing quotes (straight or curly),
    brackets or emphasis marks, whitespace, then an upper-case letter or a digit behind any
    opening mark). ``kb_shared.search.retrieval_features.units`` cuts prose by the same rule."""
    return _sentence_cuts(text, 0, len(text))


def _sentence_cuts(text: str, start: int, end: int) -> list[int]:
    """Starts of the sentences after the first (a match must go on with an upper-case
    letter or a digit; matches may not overlap, which is fine: a sentence has >= 1 word)."""
    return [
        m.end(1)
        for m in _SENTENCE_END.finditer(text, start, end)
        if m.group(2).isupper() or m.group(2).isdigit()
    ]


def _line_cuts(text: str, start: int, end: int) -> list[int]:
    cuts = []
    position = text.find("\n", start, end)
    while position != -1:
        first = position + 1
        while first < end and text[first].isspace():
            first += 1
        if first < end:
            cuts.append(first)
        position = text.find("\n", position + 1, end)
    return cuts


def _item_cuts(text: str, start: int, end: int) -> list[int]:
    """Starts of the top-level list items (indent <= the first item's) after the first."""
    first = _LIST_ITEM.match(text, start)
    if first is None:
        return []
    base = len(first.group(1).expandtabs(4))
    cuts = []
    position = text.find("\n", start, end)
    while position != -1:
        item = _LIST_ITEM.match(text, position + 1, end)
        if item and len(item.group(1).expandtabs(4)) <= base:
            cuts.append(position + 1 + len(item.group(1)))
        position = text.find("\n", position + 1, end)
    return cuts


def _word_cuts(text: str, start: int, end: int, budget: int) -> list[int]:
    words = list(_WORD.finditer(text, start, end))
    return [words[k].start() for k in range(budget, len(words), budget)]


def _split(
    text: str, start: int, end: int, budget: int, levels: tuple[str, ...]
) -> list[tuple[int, int]]:
    """Cut ``text[start:end]`` into spans of <= ``budget`` words, trying the cut levels in
    order and using each only on the spans still over budget. Spans start on a non-space
    character and are right-trimmed, so only whitespace is left between them."""
    if not levels or count_words(text[start:end]) <= budget:
        return [(start, end)]
    level, rest = levels[0], levels[1:]
    if level == "items":
        cuts = _item_cuts(text, start, end)
    elif level == "sentences":
        cuts = _sentence_cuts(text, start, end)
    elif level == "lines":
        cuts = _line_cuts(text, start, end)
    else:
        cuts = _word_cuts(text, start, end, budget)
    bounds = [start, *[c for c in cuts if start < c < end], end]
    spans: list[tuple[int, int]] = []
    for left, right in itertools.pairwise(bounds):
        right = left + len(text[left:right].rstrip())
        if right > left:
            spans.extend(_split(text, left, right, budget, rest))
    return spans


# --------------------------------------------------------------------------- assembling


@dataclass(slots=True)
class _Piece:
    block: _Block
    start: int
    end: int
    words: int


class _Builder:
    """Packs pieces into chunks and numbers them."""

    def __init__(self, document: str, budget: int, labels: dict[int, str]) -> None:
        self.document = document
        self.budget = budget
        self.labels = labels  # page -> printed label
        self.chunks: list[Chunk] = []
        self.pending: list[_Piece] = []
        self.words = 0
        self.path: tuple[str, ...] = ()

    def add(self, piece: _Piece, path: tuple[str, ...]) -> None:
        """Add a piece to the chunk in progress, closing it first when the piece won't fit."""
        if self.pending and self.words + piece.words > self.budget:
            self.flush()
        if not self.pending or (piece.block.kind == "heading" and self.only_headings()):
            self.path = path
        self.pending.append(piece)
        self.words += piece.words

    def only_headings(self) -> bool:
        """The chunk in progress holds heading lines and nothing else (or nothing at all)."""
        return all(piece.block.kind == "heading" for piece in self.pending)

    def top_heading_level(self) -> int:
        """Highest rank (smallest level number) among the headings of the chunk in progress,
        0 when it holds none."""
        levels = [piece.block.level for piece in self.pending if piece.block.kind == "heading"]
        return min(levels) if levels else 0

    def flush(self) -> None:
        """Close the chunk in progress (if any) as a text chunk."""
        if not self.pending:
            return
        # Consecutive pieces of one block are rendered as the block's text from the first
        # piece's start to the last one's end, so the whitespace between them is the original.
        runs: list[list[_Piece]] = []
        for piece in self.pending:
            if runs and runs[-1][0].block is piece.block:
                runs[-1].append(piece)
            else:
                runs.append([piece])
        parts: list[str] = []
        pages: list[int] = []
        for run in runs:
            block, start, end = run[0].block, run[0].start, run[-1].end
            parts.append(block.text[start:end])
            pages.extend(p for p in block.page_span(start, end) if p is not None)
        self._emit("\n\n".join(parts), self.path, pages, KIND_TEXT)
        self.pending = []
        self.words = 0

    def table(self, block: _Block, path: tuple[str, ...]) -> None:
        """Emit a table as one or more table chunks (module docstring, "Tables")."""
        head, rows = block.lines[:2], block.lines[2:]
        row_pages = block.pages[2:]
        head_words = count_words("\n".join(head))
        row_words = [count_words(row) for row in rows]
        lead_words = self.words if self.pending and self.only_headings() else 0
        groups = self._row_groups(head_words, row_words, lead_words)
        first_words = lead_words + head_words + sum(row_words[i] for i in groups[0])
        lead, lead_pages = "", []
        if lead_words and first_words <= self.budget:
            # Headings directly above the table (often its caption) lead its first part
            # instead of becoming a chunk that is only a heading.
            lead = "\n\n".join(p.block.text[p.start : p.end] for p in self.pending)
            lead_pages = [
                page
                for p in self.pending
                for page in p.block.page_span(p.start, p.end)
                if page is not None
            ]
            path = self.path
            self.pending, self.words = [], 0
        elif lead_words:
            groups = self._row_groups(head_words, row_words, 0)
        self.flush()
        for number, group in enumerate(groups):
            text = "\n".join(head + [rows[index] for index in group])
            pages = [row_pages[index] for index in group] if group else block.pages[:1]
            pages = [p for p in pages if p is not None]
            if number == 0 and lead:
                text = f"{lead}\n\n{text}"
                pages = lead_pages + pages
            self._emit(text, path, pages, KIND_TABLE)

    def _row_groups(
        self, head_words: int, row_words: list[int], lead_words: int
    ) -> list[list[int]]:
        """Row indexes of each part: greedy to the budget, the first part's room reduced by
        ``lead_words``; one part when the table fits or has fewer than 3 body rows."""
        if (
            len(row_words) < MIN_ROWS_TO_SPLIT
            or lead_words + head_words + sum(row_words) <= self.budget
        ):
            return [list(range(len(row_words)))]
        groups: list[list[int]] = []
        current: list[int] = []
        words = lead_words + head_words
        for index, size in enumerate(row_words):
            if current and words + size > self.budget:
                groups.append(current)
                current, words = [], head_words
            current.append(index)
            words += size
        groups.append(current)
        return groups

    def _emit(self, text: str, path: tuple[str, ...], pages: list[int], kind: str) -> None:
        index = len(self.chunks)
        first = min(pages) if pages else None
        last = max(pages) if pages else None
        self.chunks.append(
            Chunk(
                id=chunk_id(self.document, index),
                document=self.document,
                index=index,
                text=text,
                heading_path=path,
                page_start=first,
                page_end=last,
                kind=kind,
                page_label_start=self.labels.get(first or 0, ""),  # no page 0: no label
                page_label_end=self.labels.get(last or 0, ""),
            )
        )


def chunk_markdown(markdown: str, document: str, budget_words: int = 300) -> list[Chunk]:
    """Split a document's Markdown into chunks (rules in the module docstring).

    Args:
        markdown: converter output with ``<!-- page N -->`` markers (may have none).
        document: the document's ``doc_id``; chunk ids are ``f"{document}-{index}"``.
        budget_words: the most words (``count_words``) a chunk may hold. The default 300 is
            about 2,000 characters of prose, the chunk size of the reference system
            (mcp-utilities README) and what ``sparse.AVERAGE_DOCUMENT_TOKENS`` assumes.
            Exceptions: an oversized fenced code block, a table with fewer than 3 body rows,
            and a table part made of the header rows plus one body row.

    Returns:
        The chunks in text order, ``index`` 0, 1, …; ``[]`` for empty or whitespace-only
        Markdown or Markdown of page markers only.

    Raises:
        ValueError: ``budget_words`` < 1, or a page marker numbered 0.
    """
    if budget_words < 1:
        raise ValueError(f"budget_words must be >= 1, got {budget_words}")
    markdown = markdown.replace("\r\n", "\n").replace("\r", "\n")
    if not markdown.strip():
        return []
    lines = _Lines(markdown)
    builder = _Builder(document, budget_words, lines.labels)
    headings: list[tuple[int, str]] = []
    path: tuple[str, ...] = ()
    for block in _parse(lines):
        if block.kind == "table":
            builder.table(block, path)
            continue
        if block.kind == "heading":
            heading_run = bool(builder.pending) and builder.only_headings()
            # An unnumbered heading right under a same-level heading with no text of its own
            # is that heading's sub-part (NIST: "3.1.5 Employ …" then "DISCUSSION"), so the
            # path keeps both and they share a chunk.
            sub_part = (
                heading_run
                and bool(headings)
                and int(headings[-1][0]) == block.level
                and not _NUMBERED_TITLE.match(block.title)
            )
            if not heading_run or (
                block.level <= builder.top_heading_level() and not sub_part
            ):
                builder.flush()
            level: float = headings[-1][0] + 0.5 if sub_part else block.level
            while headings and headings[-1][0] >= level:
                headings.pop()
            headings.append((level, block.title))
            path = tuple(title for _, title in headings if title)
        if block.kind == "code":
            spans = [(0, len(block.text))]
        else:
            levels = (
                ("items", "sentences", "lines", "words")
                if block.is_list
                else (
                    "sentences",
                    "lines",
                    "words",
                )
            )
            spans = _split(block.text, 0, len(block.text), budget_words, levels)
        for start, end in spans:
            builder.add(_Piece(block, start, end, count_words(block.text[start:end])), path)
    builder.flush()
    return builder.chunks


def markdown_headings(markdown: str) -> list[tuple[int, str]]:
    """The ATX headings the chunker sees in ``markdown``, in order, as ``(level, title)``
    (titles as in ``heading_path``; ``#`` lines inside fences are not headings), e.g.
    ``"# Guide\\n\\n```\\n# x\\n```\\n## Setup"`` -> ``[(1, "Guide"), (2, "Setup")]``.

    Raises:
        ValueError: a page marker numbered 0.
    """
    markdown = markdown.replace("\r\n", "\n").replace("\r", "\n")
    return [
        (block.level, block.title)
        for block in _parse(_Lines(markdown))
        if block.kind == "heading"
    ]


def section_label(chunk: Chunk) -> str:
    """The chunk's heading path joined with ``" › "`` (``""`` for a chunk under no heading),
    e.g. ``"3 Dispatch › 3.1 Bids"``; used in citations."""
    return PATH_SEPARATOR.join(chunk.heading_path)
