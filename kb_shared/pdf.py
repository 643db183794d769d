"""PDF inspection shared by both Markdown converters: open and refuse, title, version.

Nothing here converts: the local converter (``providers.local_markdown``) and the cloud one
(``providers.cloud_markdown``) both open a PDF with :func:`open_pdf`, and take its title and
version from :func:`extract_title` and :func:`extract_version`, so the two agree on those.

**Refusals** (each a ``ConversionError`` whose message names the file, says what is wrong and
what to do): empty bytes; not a PDF (no ``%PDF-`` header in the first 1,024 bytes: PDF
32000-1:2008 §7.5.2 puts it first, Annex H notes that Acrobat accepts it anywhere in the first
1,024 bytes); MuPDF cannot open it (damaged); truncated (MuPDF had to rebuild the
cross-reference table *and* there is no ``%%EOF`` in the last 1,024 bytes); password-protected
(``needs_pass``; owner-only permission passwords open fine); zero pages (all in
:func:`open_pdf`). The local converter also refuses a scanned PDF (no text layer on any page,
OCR is never run) and an unreadable text layer (at least :data:`UNMAPPED_SHARE_LIMIT` of the
characters have no Unicode mapping): :func:`unmapped_characters` counts, and
:func:`check_text_layer` decides. The cloud converter does not: Claude reads page images.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import pymupdf

from kb_shared.errors import ConversionError

#: How far into the file the ``%PDF-`` header may start (PDF 32000-1:2008 Annex H:
#: Acrobat accepts the header anywhere in the first 1,024 bytes).
HEADER_SEARCH_BYTES = 1024

#: The document is refused when at least this share of its non-space characters has no
#: Unicode mapping. Symbol-font bullets are a fraction of a percent in real documents; a
#: document in a font without a mapping is (nearly) 100 %.
UNMAPPED_SHARE_LIMIT = 0.3

#: A page whose only text is invisible (render mode 3, i.e. an OCR layer) has a text layer
#: only with at least this many non-space characters. OCR run over a scanned chart or
#: photo leaves a few dozen stray characters (77 on page 4 of the corpus's
#: ``scanned_ocrmypdf_multipage.pdf``); an OCR'd page of text has many hundreds.
MIN_INVISIBLE_TEXT_CHARS = 200

#: Pages searched for a version statement (cover, notice, version-control pages).
VERSION_SEARCH_PAGES = 4

#: Markdown emphasis, heading, table and quote marks and inline HTML tags (pymupdf4llm's
#: ``<u>``/``<mark>``); removed wherever Markdown is compared as plain text.
MARKDOWN_MARKS = re.compile(r"[*_`#|>~]+|</?[a-z]+>", re.IGNORECASE)

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


def is_unmapped_char(ch: str) -> bool:
    """True for a character without a Unicode meaning: U+FFFD or a private-use code point
    (the BMP area and planes 15-16, Unicode 15.1 §23.5), which symbol fonts use for bullets."""
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
                    bad = sum(1 for ch in text if is_unmapped_char(ch))
                    if bad:
                        unmapped += bad
                        per_font[font] += bad
        for font, pieces in suspect_text.items():
            text = "".join(pieces)
            letters = sum(1 for ch in text if unicodedata.category(ch).startswith("L"))
            trusted = suspects[font] and letters >= len(text) / 2
            bad = sum(map(is_unmapped_char, text)) if trusted else len(text)
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
            text = " ".join(MARKDOWN_MARKS.sub(" ", match.group(1)).split())
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


__all__ = [
    "HEADER_SEARCH_BYTES",
    "MARKDOWN_MARKS",
    "MIN_INVISIBLE_TEXT_CHARS",
    "UNMAPPED_SHARE_LIMIT",
    "VERSION_SEARCH_PAGES",
    "TextLayerStats",
    "check_text_layer",
    "extract_title",
    "extract_version",
    "is_unmapped_char",
    "open_pdf",
    "unmapped_characters",
]
