"""Local PDF → Markdown: pymupdf4llm 2.0 in layout mode, plus the clean-up kb needs.

``PymupdfMarkdownConverter`` is the ``markdown`` asset's engine when no cloud key is set. It
needs no network and no model download (the layout model ships inside ``pymupdf-layout``).

Pipeline for one PDF (``convert``):

1. **Open and refuse what cannot be converted** (each a ``ConversionError`` whose message
   names the file, says what is wrong and what to do; nothing else is produced):
   empty bytes; not a PDF (no ``%PDF-`` header in the first 1,024 bytes: PDF
   32000-1:2008 §7.5.2 puts it first, Annex H notes that Acrobat accepts it anywhere in
   the first 1,024 bytes); MuPDF cannot open it (damaged);
   truncated (MuPDF had to rebuild the cross-reference table *and* there is no ``%%EOF``
   in the last 1,024 bytes); password-protected (``needs_pass``; owner-only permission
   passwords open fine); zero pages; scanned (no text layer on any page, OCR is never run
   here); unreadable text layer (at least :data:`UNMAPPED_SHARE_LIMIT` of the characters
   have no Unicode mapping, see :func:`unmapped_characters`).
2. **Layout**: ``pymupdf4llm.to_markdown(doc, page_chunks=True, use_ocr=False)``. OCR is
   always off: besides not being wanted, layout mode with OCR enabled prints a RapidOCR
   warning to stdout, which would corrupt an MCP stdio stream. Everything pymupdf4llm
   prints during the call is captured and logged at DEBUG, and PyMuPDF's own message
   stream is routed to the ``pymupdf`` logger, so **nothing is written to stdout**.
3. **Per page, per layout box** (``page_boxes``: class, bbox, span of Markdown):

   * ``picture`` boxes become a ``[Figure: …]`` marker line (caption text when a
     "Figure/Fig./Diagram/Chart/Graph/Exhibit/Abbildung N" caption is within
     :data:`CAPTION_DISTANCE_PT` above or below, else ``diagram on page N`` for a vector
     drawing or ``image on page N`` for a raster image), followed by the text found
     inside the picture as a plain paragraph (``Text in figure: …``). pymupdf4llm's own
     placeholders (``![](…)`` and ``<!-- Start of picture text -->`` comments) are removed.
     Each kept picture is returned as a ``FigureRegion``.
   * Vector drawings that layout did not box as a picture: a ``page.cluster_drawings()``
     cluster of at least :data:`MIN_DRAWING_CLUSTER_PT` on both sides, with at least
     :data:`MIN_DRAWING_PATHS` paths of which one is not axis-parallel (an arrowhead, a
     curve, a diagonal: table grids have none), outside tables, pictures and the margin
     bands and not touching the page edge (cover art, backgrounds), also gets a marker
     and a ``FigureRegion``.
   * Tables stay pymupdf4llm pipe tables, with ``<br>`` inside cells replaced by a space.
     Layout misses some tables drawn only with shaded cells (AEMO's CVP schedule) and
     returns them as one big text/list/picture box; such a box, on a page without layout
     tables, is searched with ``page.find_tables`` (see :func:`_add_missed_tables`) and a
     table found there replaces the boxes it covers, as a pipe table whose cells are the
     page's words.
   * Private-use glyphs (symbol-font bullets) and U+FFFD are dropped; ``<u>``/``<mark>``
     tags are unwrapped; ``<br>`` becomes a space.

4. **Page furniture** (running headers/footers, page numbers, repeated logos) is removed by
   this rule: a box is a furniture *candidate* when layout classed it ``page-header`` /
   ``page-footer`` or it lies entirely within the top or bottom :data:`MARGIN_BAND` of its
   page. Its key is its text case-folded, Markdown marks removed, every digit run and
   every standalone roman numeral replaced by ``#`` (so "Page 3 of 67" and "Page 4 of
   67" match); a picture's key is its position rounded to 10 pt. Every candidate whose key
   occurs on at least :data:`FURNITURE_PAGE_SHARE` of the pages (and on at least 2 pages)
   is removed, all occurrences including the first. Text in the body of a page is never
   removed, so a cover title that is also the running header survives once.
5. **Markdown**: ``<!-- page N -->`` (1-based) on its own line before each page's content,
   blocks separated by blank lines.
6. **Title and version**: see :func:`extract_title` and :func:`extract_version`.

Speed, measured on the 12 convertible corpus PDFs on 2 cores shared with other jobs (load
average ~10): whole conversions 1.5-3.1 s/page (CVP schedule 1.86, SO_OP_3705 1.60, FCAS
model 1.63, NIST SP 800-171 1.59), nearly all of it pymupdf4llm layout; the steps after
layout (checks, furniture, missed tables, figures, title, version) took 0.02-0.12 s/page.
The refusals cost milliseconds: they run before layout.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import re
import threading
import time
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pymupdf
import pymupdf4llm

from kb_shared.errors import ConversionError
from kb_shared.providers.base import ConvertedDocument, FigureRegion, MarkdownConverter

logger = logging.getLogger(__name__)

#: ``converter`` value recorded with every document this module converts.
CONVERTER_NAME = f"pymupdf4llm-{pymupdf4llm.__version__} layout"

#: How far into the file the ``%PDF-`` header may start (PDF 32000-1:2008 Annex H:
#: Acrobat accepts the header anywhere in the first 1,024 bytes).
HEADER_SEARCH_BYTES = 1024

#: A box counts as furniture only if it repeats on at least this share of the pages.
FURNITURE_PAGE_SHARE = 0.5

#: Top and bottom bands (fraction of the page height) where running headers/footers live.
#: AEMO and NIST headers/footers sit within 0-10 % and 94-100 % of the page (portrait and
#: landscape); body text starts below 11 %.
MARGIN_BAND = 0.12

#: Grid (points) that picture positions are rounded to before comparing across pages.
PICTURE_KEY_GRID = 10.0

#: The document is refused when at least this share of its non-space characters has no
#: Unicode mapping. Symbol-font bullets are a fraction of a percent in real documents; a
#: document in a font without a mapping is (nearly) 100 %.
UNMAPPED_SHARE_LIMIT = 0.3

#: A page whose only text is invisible (render mode 3, i.e. an OCR layer) has a text layer
#: only with at least this many non-space characters. OCR run over a scanned chart or
#: photo leaves a few dozen stray characters (77 on page 4 of the corpus's
#: ``scanned_ocrmypdf_multipage.pdf``); an OCR'd page of text has many hundreds.
MIN_INVISIBLE_TEXT_CHARS = 200

#: A figure caption is searched this far (points) above and below a picture.
CAPTION_DISTANCE_PT = 60.0

#: A drawing cluster must be at least this wide and high (points) to get a figure marker.
MIN_DRAWING_CLUSTER_PT = 72.0

#: ... and made of at least this many vector paths.
MIN_DRAWING_PATHS = 6

#: Pages with fewer vector paths than this are not searched for missed tables.
MIN_PATHS_FOR_TABLE_SEARCH = 6

#: A layout box is searched for a missed table only if it covers this share of the page
#: (the missed CVP tables were single boxes over 50 % of the page) ...
MIN_TABLE_BOX_SHARE = 0.15

#: ... and its vector paths have at least this many distinct horizontal and vertical edge
#: positions (a 2 x 2 table has 3 of each; a shaded note box has 2 vertical).
MIN_GRID_LINES = 3

#: Pages searched for a version statement (cover, notice, version-control pages).
VERSION_SEARCH_PAGES = 4

_FIGURE_CAPTION = re.compile(
    r"^(?:figure|fig\.|diagram|chart|graph|exhibit|abbildung|abb\.)\s*[A-Z]?\d+[\w.\-]*",
    re.IGNORECASE,
)
_IMAGE_LINK = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_PICTURE_TEXT = re.compile(
    r"<!--\s*Start of picture text\s*-->(.*?)<!--\s*End of picture text\s*-->", re.DOTALL
)
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_UNWRAP_TAGS = re.compile(r"</?(?:u|mark)>", re.IGNORECASE)
_LINE_BREAK_TAG = re.compile(r"[ \t]*<br\s*/?>[ \t]*", re.IGNORECASE)
_MD_MARKS = re.compile(r"[*_`#|>~]+|</?[a-z]+>", re.IGNORECASE)
_ALIGNMENT_ONLY = re.compile(r"\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?")
_DIGITS = re.compile(r"\d+")
_WORD_OF_ROMAN_LETTERS = re.compile(r"\b[mdclxvi]+\b")
_STRICT_ROMAN = re.compile(r"m{0,4}(?:cm|cd|d?c{0,3})(?:xc|xl|l?x{0,3})(?:ix|iv|v?i{0,3})")
_SUBSET_PREFIX = re.compile(r"^[A-Z]{6}\+")
_VERSION_VALUE = re.compile(r"^v?(\d+(?:\.\d+)*)[a-z]?$", re.IGNORECASE)
_VERSION_LABEL = re.compile(
    r"^(?:version(?:\s*(?:no\.?|number))?|revision|rev\.|issue(?:\s*no\.?)?)\s*[:.]?\s*(.*)$",
    re.IGNORECASE,
)
_DOCREF_LABEL = re.compile(
    r"^(?:doc(?:ument)?\.?\s*ref(?:erence)?(?:\s*no\.?)?)\s*[:.]?\s*(.*)$", re.IGNORECASE
)
_DOCREF_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_./-]*\d[A-Za-z0-9_./-]*$")
_VERSION_COLUMN = re.compile(r"^(?:version|ver\.?(?:rel\.?)?|rev\.?|revision|issue)$", re.I)
_VERSION_TABLE_NEIGHBOURS = {
    "date", "release", "changes", "change", "notes", "author", "description", "details",
    "amendment", "amendments", "comments", "effective", "status", "summary", "action", "by",
}  # fmt: skip
_PLACEHOLDER_TITLES = re.compile(
    r"^(?:untitled|title|document\d*|microsoft word\b.*|slide \d+|.*\.(?:docx?|pdf|pptx?|xlsx?))$",
    re.IGNORECASE,
)
_MAGIC = [
    (b"PK\x03\x04", "a ZIP archive or an Office document"),
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
    (b"\xd0\xcf\x11\xe0", "a legacy Office document"),
    (b"{\\rtf", "an RTF document"),
    (b"%!PS", "a PostScript file"),
]


# --------------------------------------------------------------------------------------
# Small value types
# --------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Block:
    """One piece of a page: a layout box (possibly rewritten) or an inserted table/figure."""

    kind: str  # layout class ("text", "table", "picture", ...) or "figure" once marked
    rect: pymupdf.Rect
    markdown: str
    removed: bool = False
    caption: str = ""  # figure blocks: the marker's content


@dataclass(slots=True)
class _Page:
    number: int  # 1-based
    rect: pymupdf.Rect
    blocks: list[_Block] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class TextLayerStats:
    """Character counts behind the scanned / unmappable-font checks.

    Attributes:
        pages: page count.
        pages_with_text: pages with a text layer: at least one visible non-space character,
            or at least ``MIN_INVISIBLE_TEXT_CHARS`` invisible ones (an OCR layer).
        characters: non-space characters in the text layer.
        unmapped: of those, characters without a Unicode mapping (U+FFFD, private-use
            code points, or glyphs of a font MuPDF cannot map, see ``unmapped_characters``).
        unmapped_fonts: font names with unmapped characters, most affected first.
    """

    pages: int
    pages_with_text: int
    characters: int
    unmapped: int
    unmapped_fonts: tuple[str, ...]

    @property
    def unmapped_share(self) -> float:
        """Unmapped characters as a share of all text-layer characters (0.0 with no text)."""
        return self.unmapped / self.characters if self.characters else 0.0


# --------------------------------------------------------------------------------------
# Output hygiene
# --------------------------------------------------------------------------------------
def _route_pymupdf_messages() -> None:
    """Send PyMuPDF's message and log streams to the ``pymupdf`` logger instead of stdout.

    PyMuPDF binds both streams to the ``sys.stdout`` object it saw at import, so
    ``redirect_stdout`` alone does not catch them. Idempotent.
    """
    pymupdf.set_messages(pylogging=True, pylogging_name="pymupdf")
    pymupdf.set_log(pylogging=True, pylogging_name="pymupdf")


#: ``redirect_stdout`` swaps the process-wide ``sys.stdout``; two threads nesting it out
#: of order would leave stdout pointing at a dead buffer, so layout runs one at a time
#: (pymupdf4llm serialises its layout model per page anyway).
_STDOUT_LOCK = threading.Lock()


@contextlib.contextmanager
def _stdout_to_log(filename: str) -> Iterator[None]:
    """Capture whatever is printed to stdout meanwhile and log it at DEBUG."""
    buffer = io.StringIO()
    with _STDOUT_LOCK, contextlib.redirect_stdout(buffer):
        yield
    printed = buffer.getvalue().strip()
    if printed:
        logger.debug("pymupdf4llm output while converting %s: %s", filename, printed)


# --------------------------------------------------------------------------------------
# Opening and the refusal checks
# --------------------------------------------------------------------------------------
def _describe_start(pdf: bytes) -> str:
    head = pdf[:16]
    for magic, what in _MAGIC:
        if pdf.startswith(magic):
            return f"{head!r}, {what}"
    sample = pdf[:512]
    if sample.lstrip().lower().startswith((b"<!doctype html", b"<html")):
        return f"{head!r}, an HTML page"
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError:
        return repr(head)
    return f"{head!r}, plain text"


def open_pdf(pdf: bytes, filename: str) -> pymupdf.Document:
    """Open PDF bytes, refusing what cannot be converted.

    Args:
        pdf: the file's bytes.
        filename: used in messages only.

    Returns:
        An open ``pymupdf.Document`` with at least one page (caller closes it).

    Raises:
        ConversionError: empty, not a PDF, damaged, truncated, password-protected or
            without pages; the message says which and what to do.
    """
    if not pdf:
        raise ConversionError(f"{filename} is empty (0 bytes); upload the PDF again")
    if b"%PDF-" not in pdf[:HEADER_SEARCH_BYTES]:
        raise ConversionError(
            f"{filename} is not a PDF (it starts with {_describe_start(pdf)}); "
            "export or save it as PDF and add that file"
        )
    try:
        doc = pymupdf.open(stream=pdf, filetype="pdf")
    except Exception as exc:  # pymupdf raises FileDataError/RuntimeError subclasses
        raise ConversionError(
            f"{filename} is damaged and cannot be opened as a PDF ({exc}); "
            "download or export it again"
        ) from exc
    try:
        if doc.needs_pass:
            raise ConversionError(
                f"{filename} is encrypted and needs a password to open; save a copy "
                "without the password (e.g. `qpdf --decrypt --password=… in.pdf out.pdf`) "
                "and add that"
            )
        if doc.is_repaired and b"%%EOF" not in pdf[-HEADER_SEARCH_BYTES:]:
            raise ConversionError(
                f"{filename} is truncated (it has no %%EOF end marker and its "
                f"cross-reference table had to be rebuilt; {len(pdf):,} bytes); "
                "download it again in full"
            )
        if doc.page_count == 0:
            raise ConversionError(f"{filename} has no pages; check the export")
    except BaseException:
        doc.close()
        raise
    return doc


def _font_has_no_mapping(doc: pymupdf.Document, xref: int, font_type: str, encoding: str) -> bool:
    """True when MuPDF cannot map this font's character codes to Unicode.

    Rules (PDF 32000-1:2008 §9.10.2, "Mapping character codes to Unicode values"): a font
    with a ``/ToUnicode`` CMap is mappable. Without one, a Type0 font with an
    ``Identity-H``/``Identity-V`` encoding and an ``Identity`` (or missing) CIDSystemInfo
    ordering has no mapping (its codes are glyph ids); a TrueType font with no
    ``/Encoding`` whose descriptor sets the Symbolic flag (bit 3) has codes that are only
    meaningful to its own built-in cmap. Type1 fonts are not suspected: their program
    carries glyph names, which MuPDF maps (TeX's CMR10/CMSY10 are symbolic Type1 fonts
    without ``/Encoding`` and extract correctly).
    """
    if xref <= 0:
        return False
    if doc.xref_get_key(xref, "ToUnicode")[0] != "null":
        return False
    if font_type == "Type0":
        if encoding not in ("Identity-H", "Identity-V"):
            return False
        descendants = doc.xref_get_key(xref, "DescendantFonts")
        ordering = ""
        if descendants[0] == "array":
            match = re.search(r"(\d+) 0 R", descendants[1])
            if match:
                info = doc.xref_get_key(int(match.group(1)), "CIDSystemInfo/Ordering")
                ordering = info[1].strip("()") if info[0] == "string" else ""
        return ordering in ("", "Identity")
    if font_type == "TrueType":
        if doc.xref_get_key(xref, "Encoding")[0] != "null":
            return False
        flags = doc.xref_get_key(xref, "FontDescriptor/Flags")
        try:
            symbolic = bool(int(flags[1]) & 4) if flags[0] == "int" else False
        except ValueError:
            symbolic = False
        basefont = _SUBSET_PREFIX.sub("", doc.xref_get_key(xref, "BaseFont")[1].lstrip("/"))
        return symbolic and basefont not in ("Symbol", "ZapfDingbats")
    return False


def _is_unmapped_char(ch: str) -> bool:
    code = ord(ch)
    return (
        ch == "\ufffd"
        or 0xE000 <= code <= 0xF8FF
        or 0xF0000 <= code <= 0xFFFFD
        or 0x100000 <= code <= 0x10FFFD
    )


def unmapped_characters(doc: pymupdf.Document) -> TextLayerStats:
    """Count the text layer's characters and those that have no Unicode mapping.

    A character is unmapped when it is U+FFFD or a private-use code point, or when it comes
    from a font without a mapping (``_font_has_no_mapping``): every character of a Type0
    font (its codes are glyph ids, which MuPDF turns into shifted nonsense such as
    ``4BNQMF`` for "Sample"), and every character of a simple symbolic font unless at
    least half of that font's characters on the page are letters. Glyph ids of small
    subsets land on punctuation, digits and control codes ("Phone" reads ``"7+%-``),
    while a symbolic font whose codes happen to be ASCII yields mostly letters and is
    trusted.
    """
    pages_with_text = 0
    total = 0
    unmapped = 0
    per_font: Counter[str] = Counter()
    for page in doc:
        suspects = {  # font name -> is a simple (single-byte) font
            _SUBSET_PREFIX.sub("", basefont): ftype != "Type0"
            for xref, _ext, ftype, basefont, _name, encoding, *_ in page.get_fonts(full=True)
            if _font_has_no_mapping(doc, xref, ftype, encoding)
        }
        page_chars = 0
        visible_chars = 0
        suspect_text: dict[str, list[str]] = defaultdict(list)
        for block in page.get_text("dict", flags=pymupdf.TEXTFLAGS_TEXT)["blocks"]:
            for line in block.get("lines", ()):
                for span in line["spans"]:
                    text = "".join(ch for ch in span["text"] if not ch.isspace())
                    if not text:
                        continue
                    page_chars += len(text)
                    if span.get("alpha", 255) > 0:
                        visible_chars += len(text)
                    font = _SUBSET_PREFIX.sub("", span["font"])
                    if font in suspects:
                        suspect_text[font].append(text)
                        continue
                    bad = sum(1 for ch in text if _is_unmapped_char(ch))
                    if bad:
                        unmapped += bad
                        per_font[font] += bad
        for font, pieces in suspect_text.items():
            text = "".join(pieces)
            letters = sum(1 for ch in text if unicodedata.category(ch).startswith("L"))
            trusted = suspects[font] and letters >= len(text) / 2
            bad = sum(map(_is_unmapped_char, text)) if trusted else len(text)
            unmapped += bad
            if bad:
                per_font[font] += bad
        total += page_chars
        pages_with_text += visible_chars > 0 or page_chars >= MIN_INVISIBLE_TEXT_CHARS
    return TextLayerStats(
        pages=doc.page_count,
        pages_with_text=pages_with_text,
        characters=total,
        unmapped=unmapped,
        unmapped_fonts=tuple(font for font, _ in per_font.most_common()),
    )


def check_text_layer(stats: TextLayerStats, filename: str) -> None:
    """Refuse a scanned PDF or one whose text layer cannot be read.

    Raises:
        ConversionError: "no text layer on any of N pages; OCR is not enabled" when no page
            has text; "the text layer cannot be read: N% of characters have no Unicode
            mapping (font …)" when ``stats.unmapped_share >= UNMAPPED_SHARE_LIMIT``.
    """
    if stats.pages_with_text == 0:
        pages = f"{stats.pages} page" + ("s" if stats.pages != 1 else "")
        raise ConversionError(
            f"{filename}: no text layer on any of {pages}; OCR is not enabled. "
            "It looks scanned: run OCR on it (e.g. `ocrmypdf in.pdf out.pdf`) and add the result"
        )
    if stats.unmapped_share >= UNMAPPED_SHARE_LIMIT:
        fonts = ", ".join(stats.unmapped_fonts[:3]) or "unknown"
        percent = math.floor(stats.unmapped_share * 100)
        raise ConversionError(
            f"{filename}: the text layer cannot be read: {percent}% of characters have no "
            f"Unicode mapping (font {fonts}); re-export the PDF with embedded Unicode fonts "
            "or OCR it"
        )


# --------------------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------------------
def _layout_chunks(doc: pymupdf.Document, filename: str) -> list[dict]:
    """pymupdf4llm layout-mode page chunks (``text`` + ``page_boxes``), stdout captured."""
    _route_pymupdf_messages()
    with _stdout_to_log(filename):
        return pymupdf4llm.to_markdown(
            doc,
            filename=filename,
            page_chunks=True,
            use_ocr=False,
            force_ocr=False,
            header=True,
            footer=True,
            write_images=False,
            embed_images=False,
            show_progress=False,
        )


def _clean_text(markdown: str) -> str:
    """Drop image links, HTML comments, PUA glyphs, U+FFFD and ``<u>``/``<mark>`` tags;
    ``<br>`` becomes a space (in table cells and formula boxes alike)."""
    markdown = _IMAGE_LINK.sub("", markdown)
    markdown = _HTML_COMMENT.sub("", markdown)
    markdown = _UNWRAP_TAGS.sub("", markdown)
    markdown = _LINE_BREAK_TAG.sub(" ", markdown)
    markdown = "".join(ch for ch in markdown if not _is_unmapped_char(ch))
    lines = [line.rstrip() for line in markdown.strip().splitlines()]
    return "\n".join(lines).strip()


_CELL_SPLIT = re.compile(r"(?<!\\)\|")


def _split_row(line: str) -> list[str]:
    return _CELL_SPLIT.split(line.strip())[1:-1]


def _starts_lowercase(cell: str) -> bool:
    letters = [ch for ch in _MD_MARKS.sub("", cell) if ch.isalpha()]
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


def _clean_table(markdown: str) -> str:
    """A pymupdf4llm pipe table: ``<br>`` cell breaks turned into spaces, rows split at a
    wrapped cell merged back (``_merge_continuation_rows``)."""
    lines = [line for line in _clean_text(markdown).splitlines() if line.strip()]
    return "\n".join(_merge_continuation_rows(lines))


def _picture_text(markdown: str) -> str:
    """The text pymupdf4llm found inside a picture box, one line per label, ``; ``-joined."""
    parts = []
    for body in _PICTURE_TEXT.findall(markdown):
        for piece in re.split(r"<br\s*/?>|\n", body):
            piece = " ".join(piece.split())
            if piece:
                parts.append(piece)
    return _clean_text("; ".join(parts))


def _pages_from_chunks(doc: pymupdf.Document, chunks: Sequence[dict]) -> list[_Page]:
    pages = []
    for number, chunk in enumerate(chunks, start=1):
        page = _Page(number=number, rect=doc[number - 1].rect)
        text = chunk["text"]
        for box in chunk["page_boxes"]:
            start, stop = box["pos"]
            page.blocks.append(_Block(box["class"], pymupdf.Rect(box["bbox"]), text[start:stop]))
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
    plain = _MD_MARKS.sub(" ", _clean_text(text)).casefold()
    plain = _WORD_OF_ROMAN_LETTERS.sub(_roman_to_hash, _DIGITS.sub("#", plain))
    words = [w for w in plain.replace("#", " ").split()]
    if not words and "#" in plain:
        return "#"
    return " ".join(words)


def _in_margin_band(rect: pymupdf.Rect, page_rect: pymupdf.Rect) -> bool:
    band = MARGIN_BAND * page_rect.height
    return rect.y1 <= page_rect.y0 + band or rect.y0 >= page_rect.y1 - band


def _block_key(block: _Block) -> str:
    if block.kind == "picture":
        g = PICTURE_KEY_GRID
        return "picture@" + ",".join(str(round(v / g)) for v in block.rect)
    return furniture_key(block.markdown)


def _remove_furniture(pages: Sequence[_Page]) -> int:
    """Mark repeated headers/footers/page numbers/logos as removed (module docstring, 4).

    Returns:
        The number of blocks removed.
    """
    threshold = max(2, math.ceil(FURNITURE_PAGE_SHARE * len(pages)))
    seen: dict[str, set[int]] = defaultdict(set)
    candidates: list[tuple[_Block, str]] = []
    for page in pages:
        for block in page.blocks:
            header_class = block.kind in ("page-header", "page-footer")
            if header_class or _in_margin_band(block.rect, page.rect):
                key = _block_key(block)
                if key:
                    seen[key].add(page.number)
                    candidates.append((block, key))
    removed = 0
    for block, key in candidates:
        if len(seen[key]) >= threshold:
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


def _remove_contents(pages: Sequence[_Page]) -> int:
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
        listings: list[tuple[_Block, _Block | None]] = []
        entries = dotted = 0
        previous: _Block | None = None
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
                _clean_text(before.markdown).strip()
            ):
                before.removed = True
                removed += 1
    return removed


# --------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------
def _caption_for(rect: pymupdf.Rect, blocks: Sequence[_Block]) -> str:
    """Nearest "Figure N …"-style caption within CAPTION_DISTANCE_PT above or below ``rect``."""
    best: tuple[float, str] | None = None
    for block in blocks:
        if block.removed or block.kind in ("picture", "figure", "table"):
            continue
        text = " ".join(_MD_MARKS.sub(" ", _clean_text(block.markdown)).split())
        if not _FIGURE_CAPTION.match(text):
            continue
        if block.rect.x1 < rect.x0 or block.rect.x0 > rect.x1:
            continue  # no horizontal overlap
        gap = max(block.rect.y0 - rect.y1, rect.y0 - block.rect.y1)
        if gap > CAPTION_DISTANCE_PT:
            continue
        if best is None or gap < best[0]:
            best = (gap, text)
    return best[1] if best else ""


def _raster_share(rect: pymupdf.Rect, images: Sequence[pymupdf.Rect]) -> float:
    area = rect.get_area() or 1.0
    return sum((rect & img).get_area() for img in images if rect.intersects(img)) / area


def _is_axis_parallel(item: tuple) -> bool:
    if item[0] == "l":
        p1, p2 = item[1], item[2]
        return abs(p1.x - p2.x) < 1 or abs(p1.y - p2.y) < 1
    return item[0] in ("re", "qu")


def _touches_edge(rect: pymupdf.Rect, page_rect: pymupdf.Rect, slack: float = 2.0) -> bool:
    return (
        rect.x0 <= page_rect.x0 + slack
        or rect.y0 <= page_rect.y0 + slack
        or rect.x1 >= page_rect.x1 - slack
        or rect.y1 >= page_rect.y1 - slack
    )


def _drawing_clusters(
    page: pymupdf.Page, paths: list[dict], taken: Sequence[pymupdf.Rect]
) -> list[pymupdf.Rect]:
    """Significant vector-drawing clusters that no picture/table box already covers."""
    if len(paths) < MIN_DRAWING_PATHS:
        return []
    found = []
    for cluster in page.cluster_drawings(drawings=paths):
        rect = pymupdf.Rect(cluster)
        if rect.width < MIN_DRAWING_CLUSTER_PT or rect.height < MIN_DRAWING_CLUSTER_PT:
            continue
        if _in_margin_band(rect, page.rect) or _touches_edge(rect, page.rect):
            continue  # running furniture, or cover art / a background bleeding off the page
        if any((rect & t).get_area() > 0.3 * rect.get_area() for t in taken if rect.intersects(t)):
            continue
        members = [p for p in paths if rect.contains(p["rect"])]
        if len(members) < MIN_DRAWING_PATHS:
            continue
        if all(_is_axis_parallel(item) for p in members for item in p["items"]):
            continue  # only rules and boxes: a table grid, shading or a frame
        found.append(rect)
    return found


def _figure_marker(caption: str) -> str:
    """``[Figure: caption]`` on one line; brackets in the caption become parentheses so
    the marker stays parseable."""
    return "[Figure: " + caption.replace("[", "(").replace("]", ")") + "]"


def _add_figures(page: _Page, pdf_page: pymupdf.Page, paths: list[dict]) -> list[FigureRegion]:
    """Turn picture boxes (and missed drawing clusters) into ``[Figure: …]`` blocks.

    Returns:
        One ``FigureRegion`` per marker, in block order.
    """
    images = [pymupdf.Rect(info["bbox"]) for info in pdf_page.get_image_info()]
    for block in page.blocks:
        if block.removed or block.kind != "picture":
            continue
        caption = _caption_for(block.rect, page.blocks)
        if not caption:
            what = "image" if _raster_share(block.rect, images) >= 0.5 else "diagram"
            caption = f"{what} on page {page.number}"
        inner = _picture_text(block.markdown)
        block.markdown = _figure_marker(caption) + (f"\n\nText in figure: {inner}" if inner else "")
        block.kind = "figure"
        block.caption = caption
    taken = [b.rect for b in page.blocks if not b.removed and b.kind in ("figure", "table")]
    for rect in _drawing_clusters(pdf_page, paths, taken):
        caption = _caption_for(rect, page.blocks) or f"diagram on page {page.number}"
        _insert_by_position(page, _Block("figure", rect, _figure_marker(caption), caption=caption))
    return [
        FigureRegion(page.number, tuple(b.rect), b.caption)
        for b in page.blocks
        if b.kind == "figure" and not b.removed
    ]


def _insert_by_position(page: _Page, new: _Block) -> None:
    """Insert before the first block that starts inside or below ``new``'s top edge."""
    for index, block in enumerate(page.blocks):
        if not block.removed and block.rect.y0 >= new.rect.y0 - 1:
            page.blocks.insert(index, new)
            return
    page.blocks.append(new)


# --------------------------------------------------------------------------------------
# Tables layout missed
# --------------------------------------------------------------------------------------
def _cell_text(words: Sequence[tuple], cell: Sequence[float] | None) -> str:
    if cell is None:
        return ""
    x0, y0, x1, y1 = cell
    parts = [
        w[4]
        for w in words
        if x0 <= (w[0] + w[2]) / 2 <= x1 and y0 <= (w[1] + w[3]) / 2 <= y1
    ]
    text = "".join(ch for ch in " ".join(parts) if not _is_unmapped_char(ch))
    return " ".join(text.split()).replace("|", "\\|")


def _table_markdown(rows: Sequence[Sequence[str]]) -> str:
    width = max(len(r) for r in rows)
    lines = []
    for i, row in enumerate(rows):
        cells = list(row) + [""] * (width - len(row))
        lines.append("|" + "|".join(cells) + "|")
        if i == 0:
            lines.append("|" + "|".join(["---"] * width) + "|")
    return "\n".join(lines)


def _grid_positions(paths: Sequence[dict]) -> tuple[int, int]:
    """Distinct y positions of horizontal edges and x positions of vertical edges (2 pt grid)
    among the page's straight lines and rectangles: a cheap test for a ruled table."""
    rows: set[int] = set()
    cols: set[int] = set()
    for path in paths:
        for item in path["items"]:
            if item[0] == "l":
                a, b = item[1], item[2]
                if abs(a.y - b.y) < 1 and abs(a.x - b.x) >= 20:
                    rows.add(round(a.y / 2))
                elif abs(a.x - b.x) < 1 and abs(a.y - b.y) >= 8:
                    cols.add(round(a.x / 2))
            elif item[0] == "re":
                r = item[1]
                if r.height < 3 and r.width >= 20:
                    rows.add(round(r.y0 / 2))
                elif r.width < 3 and r.height >= 8:
                    cols.add(round(r.x0 / 2))
                elif r.width >= 20 and r.height >= 8:
                    rows.update((round(r.y0 / 2), round(r.y1 / 2)))
                    cols.update((round(r.x0 / 2), round(r.x1 / 2)))
    return len(rows), len(cols)


def _add_missed_tables(page: _Page, pdf_page: pymupdf.Page, paths: Sequence[dict]) -> int:
    """Find tables layout did not see and put them in place of the boxes they cover.

    Layout misses some tables drawn only with shaded cells and hands them back as one big
    ``list-item``, ``text`` or ``picture`` box (AEMO's CVP schedule, pages 8-21). So, on a
    page where layout reported no table, each layout box covering at least
    :data:`MIN_TABLE_BOX_SHARE` of the page whose vector paths form a grid (at least
    ``MIN_GRID_LINES`` distinct horizontal and vertical edge positions) is searched with
    ``page.find_tables(clip=box, strategy="lines_strict", use_layout=False)``. The clip
    keeps the cost down: ``find_tables`` builds a Python object per character, 0.3-0.8 s
    for a whole page of text. A found table needs >= 2 rows and >= 2 columns with text.
    One lying inside a layout ``picture`` box replaces it only when it *is* the picture
    (covers >= 80 % of it) and is a real grid (>= 3 rows and >= 3 columns with text,
    >= half its cells filled): flow charts contain small boxed "tables" of one label.

    Returns:
        The number of tables added.
    """
    if any(b.kind == "table" for b in page.blocks) or len(paths) < MIN_PATHS_FOR_TABLE_SEARCH:
        return 0
    page_area = page.rect.get_area()
    regions = []
    for block in page.blocks:
        if block.removed or block.rect.get_area() < MIN_TABLE_BOX_SHARE * page_area:
            continue
        # the box grown to the drawings it touches (layout boxes hug the text, while the
        # table's shaded cells reach further, e.g. a first column of row numbers)
        region = pymupdf.Rect(block.rect)
        inside = [
            p
            for p in paths
            if p["rect"].intersects(block.rect) and p["rect"].get_area() < 0.9 * page_area
        ]
        for p in inside:
            region |= p["rect"]
        region = pymupdf.Rect(region.x0 - 3, region.y0 - 3, region.x1 + 3, region.y1 + 3)
        if min(_grid_positions(inside)) >= MIN_GRID_LINES:
            regions.append(region)
    if not regions:
        return 0
    tables = []
    for region in regions:
        try:
            found = pdf_page.find_tables(
                clip=region, strategy="lines_strict", use_layout=False
            )
        except Exception:  # a table finder failure must not lose the page's text
            logger.debug("find_tables failed on page %d", page.number, exc_info=True)
            continue
        tables.extend(found.tables)
    words = pdf_page.get_text("words")
    added = 0
    for table in tables:
        rect = pymupdf.Rect(table.bbox)
        if _in_margin_band(rect, page.rect):
            continue
        rows = [[_cell_text(words, cell) for cell in row.cells] for row in table.rows]
        width = max(len(r) for r in rows)
        filled_rows = sum(1 for r in rows if any(r))
        filled_cols = sum(1 for c in range(width) if any(c < len(r) and r[c] for r in rows))
        if filled_rows < 2 or filled_cols < 2:
            continue
        holders = [
            b
            for b in page.blocks
            if b.kind == "picture"
            and not b.removed
            and rect.intersects(b.rect)
            and (rect & b.rect).get_area() >= 0.5 * rect.get_area()
        ]
        if holders:
            cells = sum(len(r) for r in rows)
            filled = sum(1 for r in rows for c in r if c)
            is_grid = filled_rows >= 3 and filled_cols >= 3 and filled >= cells / 2
            is_the_picture = all(
                (rect & b.rect).get_area() >= 0.8 * b.rect.get_area() for b in holders
            )
            if not (is_grid and is_the_picture):
                continue
        grown = pymupdf.Rect(rect.x0 - 2, rect.y0 - 2, rect.x1 + 2, rect.y1 + 2)
        covered = [
            i
            for i, b in enumerate(page.blocks)
            if not b.removed
            and (b.kind != "picture" or b in holders)
            and grown.contains((b.rect.tl + b.rect.br) / 2)
        ]
        block = _Block("table", rect, _table_markdown(rows))
        if covered:
            for i in covered:
                page.blocks[i].removed = True
            page.blocks.insert(covered[0], block)
        else:
            _insert_by_position(page, block)
        added += 1
    return added


# --------------------------------------------------------------------------------------
# Title and version
# --------------------------------------------------------------------------------------
def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.casefold())


def extract_title(metadata_title: str, first_page_markdown: str, first_page: pymupdf.Page) -> str:
    """The document title.

    1. The PDF metadata title, when meaningful: not a placeholder (``Untitled``, a file
       name, ``Microsoft Word - …``), at least 4 characters, and at least 80 % of its
       words occur on page 1 (templates often carry another document's title: AEMO's
       Constraint Implementation Guidelines say "Victorian Transfer Limit Advice - Outages").
    2. Else the first level-1 or level-2 heading on page 1 (after furniture removal).
    3. Else the text in the largest font size on page 1.

    Returns ``""`` when none of these yields text with at least three letters.
    """
    title = " ".join((metadata_title or "").split())
    page_words = set(_words(first_page.get_text()))
    if len(title) >= 4 and not _PLACEHOLDER_TITLES.match(title):
        words = _words(title)
        if words and sum(w in page_words for w in words) >= 0.8 * len(words):
            return title
    for line in first_page_markdown.splitlines():
        match = re.match(r"^#{1,2}\s+(.*)$", line)
        if match:
            text = " ".join(_MD_MARKS.sub(" ", match.group(1)).split())
            if sum(ch.isalpha() for ch in text) >= 3:
                return text
    spans = [
        span
        for block in first_page.get_text("dict")["blocks"]
        for line in block.get("lines", ())
        for span in line["spans"]
        if span["text"].strip()
    ]
    if spans:
        largest = max(round(s["size"], 1) for s in spans)
        biggest = [s["text"] for s in spans if round(s["size"], 1) == largest]
        text = " ".join(" ".join(biggest).split())
        if sum(ch.isalpha() for ch in text) >= 3:
            return text[:300]
    return ""


def _version_from_lines(
    lines: Sequence[str], label: re.Pattern[str], value: re.Pattern[str]
) -> str:
    for i, line in enumerate(lines):
        match = label.match(line)
        if not match:
            continue
        rest = match.group(1).strip()
        if not rest:  # value on the next non-empty line ("Version:" / "94")
            rest = next((nxt.strip() for nxt in lines[i + 1 : i + 3] if nxt.strip()), "")
        if value.match(rest):
            return rest
    return ""


def _version_from_table(page: pymupdf.Page) -> str:
    """Latest version in a version-control table: the largest number in a column headed
    "Version"/"Ver.Rel"/"Rev"/"Issue" next to a "Date"/"Changes"/"Notes"/… header."""
    words = page.get_text("words")
    found: list[tuple[tuple[int, ...], str]] = []
    for head in words:
        if not _VERSION_COLUMN.match(head[4]):
            continue
        mid = (head[1] + head[3]) / 2
        same_line = [
            w[4].casefold().strip(":")
            for w in words
            if w is not head and abs((w[1] + w[3]) / 2 - mid) <= 3
        ]
        if not any(w in _VERSION_TABLE_NEIGHBOURS for w in same_line):
            continue
        for w in words:
            if not (head[3] < w[1] < head[3] + 350):
                continue
            if w[2] < head[0] - 6 or w[0] > head[2] + 6:
                continue
            match = _VERSION_VALUE.match(w[4])
            if match:
                found.append((tuple(int(p) for p in match.group(1).split(".")), w[4]))
    return max(found)[1] if found else ""


def extract_version(doc: pymupdf.Document) -> str:
    """The version the document states about itself, else its document reference, else "".

    Searched on the first ``VERSION_SEARCH_PAGES`` pages, page by page:

    1. a ``Version``/``Version No.``/``Revision``/``Rev.``/``Issue`` label followed (on the
       same or next line) by a version number (``94``, ``1.2``, ``v3``);
    2. a version-control table: the highest number in its version column.

    If no page has either, a ``Doc ref``/``Document reference`` label followed by a code
    containing a digit (``SO_OP_3705``). Placeholders such as "Enter Version Number" are
    not version numbers, so a template nobody filled in gives "".
    """
    pages = [doc[i] for i in range(min(VERSION_SEARCH_PAGES, doc.page_count))]
    for page in pages:
        lines = page.get_text().splitlines()
        version = _version_from_lines(lines, _VERSION_LABEL, _VERSION_VALUE)
        if version:
            return version
        version = _version_from_table(page)
        if version:
            return version
    for page in pages:
        ref = _version_from_lines(page.get_text().splitlines(), _DOCREF_LABEL, _DOCREF_VALUE)
        if ref:
            return ref
    return ""


# --------------------------------------------------------------------------------------
# The converter
# --------------------------------------------------------------------------------------
def _page_markdown(page: _Page) -> str:
    parts = []
    for block in page.blocks:
        if block.removed:
            continue
        if block.kind == "table":
            text = _clean_table(block.markdown)
        elif block.kind == "figure":
            text = block.markdown
        else:
            text = _clean_text(block.markdown)
        if text:
            parts.append(text)
    return "\n\n".join(parts)


class PymupdfMarkdownConverter(MarkdownConverter):
    """PDF bytes → ``ConvertedDocument`` with pymupdf4llm 2.0 layout mode (module docstring).

    Stateless and offline. ``convert`` raises ``ConversionError`` for a PDF it refuses and
    writes nothing to stdout. Side effect: the first conversion routes PyMuPDF's message
    and log streams to the ``pymupdf`` logger for the whole process (they are bound to
    stdout by default). Conversions in several threads are safe; their layout steps run
    one at a time.
    """

    #: Provider name stored with every converted document; the ``markdown`` asset reuses
    #: stored Markdown only while it matches. The ``rN`` suffix is the revision of the rules
    #: in this module: bump it when a rule changes the output, so documents are converted
    #: again (r2: dropped tables of contents, number-free furniture keys).
    name = "pymupdf4llm-layout-r2"

    def convert(self, pdf: bytes, filename: str) -> ConvertedDocument:
        """Convert one PDF.

        Args:
            pdf: the PDF's bytes.
            filename: shown in error messages (and passed to pymupdf4llm as the name).

        Returns:
            ``ConvertedDocument``: Markdown with ``<!-- page N -->`` markers (``pages``
            of them, in order), figure markers and pipe tables; title, version,
            ``converter = CONVERTER_NAME``, one ``FigureRegion`` per figure marker
            (bbox in PDF points, page coordinates), wall-clock seconds.

        Raises:
            ConversionError: see ``open_pdf`` and ``check_text_layer``; also when MuPDF
                fails on a page during layout (the file is damaged).
        """
        started = time.perf_counter()
        doc = open_pdf(pdf, filename)
        try:
            try:
                check_text_layer(unmapped_characters(doc), filename)
                metadata_title = (doc.metadata or {}).get("title", "")
                chunks = _layout_chunks(doc, filename)
            except ConversionError:
                raise
            except Exception as exc:
                raise ConversionError(
                    f"{filename} is damaged: MuPDF failed while reading it ({exc}); "
                    "download or export it again"
                ) from exc
            if len(chunks) != doc.page_count:
                raise ConversionError(
                    f"{filename} is damaged: {len(chunks)} of {doc.page_count} pages could be "
                    "read; download or export it again"
                )
            pages = _pages_from_chunks(doc, chunks)
            _remove_furniture(pages)
            _remove_contents(pages)
            figures: list[FigureRegion] = []
            for page in pages:
                pdf_page = doc[page.number - 1]
                paths = pdf_page.get_drawings()
                _add_missed_tables(page, pdf_page, paths)
                figures.extend(_add_figures(page, pdf_page, paths))
            bodies = [_page_markdown(page) for page in pages]
            markdown = "\n\n".join(
                f"<!-- page {page.number} -->" + (f"\n\n{body}" if body else "")
                for page, body in zip(pages, bodies)
            )
            title = extract_title(metadata_title, bodies[0], doc[0])
            version = extract_version(doc)
        finally:
            doc.close()
        return ConvertedDocument(
            markdown=markdown + "\n",
            pages=len(pages),
            title=title,
            version=version,
            converter=CONVERTER_NAME,
            figures=tuple(figures),
            seconds=time.perf_counter() - started,
        )


__all__ = [
    "CONVERTER_NAME",
    "PymupdfMarkdownConverter",
    "TextLayerStats",
    "check_text_layer",
    "extract_title",
    "extract_version",
    "contents_entries",
    "furniture_key",
    "open_pdf",
    "unmapped_characters",
]

