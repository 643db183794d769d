"""PDF inspection shared by both Markdown converters: open and refuse, title, version, page
labels.

Nothing here converts: the local converter (``providers.local_markdown``) and the cloud one
(``providers.cloud_markdown``) both open a PDF with :func:`open_pdf`, and take its title,
version and printed page labels from :func:`extract_title`, :func:`extract_version` and
:func:`page_labels`, so the two agree on those.

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

**Bounded work** (:func:`check_limits`, run by the ``markdown`` asset before either converter
and by :func:`open_pdf` when given :class:`PdfLimits`): too many pages; a stream that inflates
past its cap (read through a capped inflater, never whole); a page with more text than a page
holds (layout time grows with its square). Caps are ``KB_PDF_MAX_*`` settings; their defaults
are explained in ``benchmarks/results/pdf-limits-2026-12-01.md``.
"""

from __future__ import annotations

import base64
import binascii
import logging
import math
import re
import unicodedata
import zlib
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import pymupdf

from kb_shared.errors import ConversionError
from kb_shared.search.citations import SEC_FORM_NAME
from kb_shared.settings import Settings

logger = logging.getLogger(__name__)

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
#: A version table's header row has fewer words than this beside its version column ("Version |
#: Date | Author | Description of changes"); a longer line is prose.
VERSION_HEADER_WORDS = 12
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


def open_pdf(pdf: bytes, filename: str, limits: PdfLimits | None = None) -> pymupdf.Document:
    """Open PDF bytes, refusing what cannot be converted.

    Args:
        pdf: the file's bytes.
        filename: used in messages only.
        limits: also refuse what is over these caps (``check_limits``); ``None`` = no caps.

    Returns:
        An open ``pymupdf.Document`` with at least one page (caller closes it).

    Raises:
        ConversionError: empty, not a PDF, damaged, truncated, password-protected,
            without pages or over ``limits``; the message says which and what to do.
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
        if limits is not None:
            check_limits(doc, filename, limits)
    except BaseException:
        doc.close()
        raise
    return doc


# --------------------------------------------------------------------------------------
# Bounded work: page count, inflated streams, characters per page
# --------------------------------------------------------------------------------------
_MIB = 1024 * 1024

#: Stream filters that only re-encode bytes (PDF 32000-1:2008 §7.4.2-3): decoded in memory,
#: they shrink, so they need no cap of their own.
_ASCII_FILTERS = {"/ASCIIHexDecode", "/AHx", "/ASCII85Decode", "/A85"}

#: Image codecs (§7.4.6-10): their output is bounded by the image's declared size, and MuPDF
#: decodes them only to render; a stream ending in one is not inflated here.
_IMAGE_FILTERS = {"/DCTDecode", "/DCT", "/JPXDecode", "/JBIG2Decode", "/CCITTFaxDecode", "/CCF"}

_FILTER_NAME = re.compile(r"/[A-Za-z0-9]+")


@dataclass(frozen=True, slots=True)
class PdfLimits:
    """Caps on the work one PDF may cause (issue 16, "Work per input is bounded").

    Attributes:
        max_pages: pages.
        max_page_characters: non-space text characters on one page (``page.get_text``).
        max_stream_bytes: bytes one stream may inflate to.
        max_inflated_bytes: bytes all streams but images and attachments inflate to together.

    The defaults are the ``Settings`` defaults (``KB_PDF_MAX_*``, README's settings table).
    """

    max_pages: int = Settings.model_fields["pdf_max_pages"].default
    max_page_characters: int = Settings.model_fields["pdf_max_page_characters"].default
    max_stream_bytes: int = Settings.model_fields["pdf_max_stream_bytes"].default
    max_inflated_bytes: int = Settings.model_fields["pdf_max_inflated_bytes"].default

    @classmethod
    def from_settings(cls, settings: Settings) -> PdfLimits:
        """The caps ``settings`` give (``KB_PDF_MAX_PAGES`` and the rest)."""
        return cls(
            max_pages=settings.pdf_max_pages,
            max_page_characters=settings.pdf_max_page_characters,
            max_stream_bytes=settings.pdf_max_stream_bytes,
            max_inflated_bytes=settings.pdf_max_inflated_bytes,
        )


def _inflate_capped(data: bytes, cap: int) -> bytes | None:
    """``data`` FlateDecode-inflated, or ``None`` as soon as the output passes ``cap`` bytes:
    zlib's ``max_length`` hands out at most 1 MiB per call, so a bomb is never held whole. A
    damaged stream gives what inflated before the damage (MuPDF reads the same)."""
    inflater = zlib.decompressobj()
    parts: list[bytes] = []
    size = 0
    pending = data
    try:
        while pending and not inflater.eof:
            piece = inflater.decompress(pending, _MIB)
            size += len(piece)
            if size > cap:
                return None
            parts.append(piece)
            pending = inflater.unconsumed_tail
    except zlib.error:
        pass
    return b"".join(parts)


def _lzw_capped(data: bytes, cap: int) -> bytes | None:
    """``data`` LZWDecode-decoded (§7.4.4: MSB-first codes of 9 to 12 bits, 256 = clear,
    257 = end, EarlyChange 1), or ``None`` once the output passes ``cap`` bytes."""
    table = [bytes([i]) for i in range(256)] + [b"", b""]
    out = bytearray()
    width, buffer, bits, previous = 9, 0, 0, b""
    for byte in data:
        buffer, bits = (buffer << 8) | byte, bits + 8
        while bits >= width:
            bits -= width
            code = (buffer >> bits) & ((1 << width) - 1)
            if code == 256:
                del table[258:]
                width, previous = 9, b""
                continue
            if code == 257:
                return bytes(out)
            if code < len(table):
                entry = table[code]
            elif previous:
                entry = previous + previous[:1]
            else:
                return bytes(out)  # damaged: MuPDF stops here too
            if previous:
                table.append(previous + entry[:1])
            out += entry
            if len(out) > cap:
                return None
            previous = entry
            if len(table) + 1 >= 1 << width and width < 12:
                width += 1
    return bytes(out)


def _run_length_capped(data: bytes, cap: int) -> bytes | None:
    """``data`` RunLengthDecode-decoded (§7.4.5), or ``None`` once past ``cap`` bytes."""
    out = bytearray()
    i = 0
    while i < len(data) and data[i] != 128:
        length = data[i]
        if length < 128:
            out += data[i + 1 : i + 2 + length]
            i += 2 + length
        else:
            out += data[i + 1 : i + 2] * (257 - length)
            i += 2
        if len(out) > cap:
            return None
    return bytes(out)


def _decode_ascii(name: str, data: bytes) -> bytes:
    text = re.sub(rb"\s+", b"", data)
    try:
        if name in ("/ASCIIHexDecode", "/AHx"):
            text = text.split(b">", 1)[0]
            return binascii.unhexlify(text + b"0" * (len(text) % 2))
        return base64.a85decode(text.removeprefix(b"<~").split(b"~>", 1)[0])
    except ValueError:
        return b""


def stream_inflated_size(doc: pymupdf.Document, xref: int, cap: int) -> int | None:
    """Bytes stream ``xref`` decodes to through its ``/Filter`` chain, or ``None`` when that
    passes ``cap``; never holds more than ``cap`` + 1 MiB of output. The chain stops at an image
    codec (``_IMAGE_FILTERS``) or a filter MuPDF does not know; its size there is counted."""
    data = doc.xref_stream_raw(xref)  # decrypted, not decoded
    kind, value = doc.xref_get_key(xref, "Filter")
    names = _FILTER_NAME.findall(value) if kind in ("name", "array") else []
    for name in names:
        if name in _ASCII_FILTERS:
            data = _decode_ascii(name, data)
        elif name in ("/FlateDecode", "/Fl"):
            decoded = _inflate_capped(data, cap)
        elif name in ("/LZWDecode", "/LZW"):
            decoded = _lzw_capped(data, cap)
        elif name in ("/RunLengthDecode", "/RL"):
            decoded = _run_length_capped(data, cap)
        else:
            break
        if name not in _ASCII_FILTERS:
            if decoded is None:
                return None
            data = decoded
    return len(data) if len(data) <= cap else None


def _skipped_stream(doc: pymupdf.Document, xref: int) -> bool:
    """Images (decoded only to render, to their declared size) and attached files (never
    read: JavaScript and attachments are not kb's business)."""
    return (
        doc.xref_get_key(xref, "Subtype")[1] == "/Image"
        or doc.xref_get_key(xref, "Type")[1] == "/EmbeddedFile"
    )


def check_limits(doc: pymupdf.Document, filename: str, limits: PdfLimits) -> None:
    """Refuse a PDF that would cost unbounded work, before anything reads it whole: first the
    page count, then every stream but images and attachments through a capped inflater, then
    the text characters of each page.

    Raises:
        ConversionError: "N pages, over the M-page limit"; "object X inflates past N MiB"
            (a decompression bomb); "its streams inflate past N MiB in all"; "page N has M
            characters of text, over the K-character limit". Each names its setting.
    """
    if doc.page_count > limits.max_pages:
        raise ConversionError(
            f"{filename} has {doc.page_count:,} pages, over the {limits.max_pages:,}-page "
            "limit (KB_PDF_MAX_PAGES); split it into parts and add those"
        )
    total = 0
    for xref in range(1, doc.xref_length()):
        if not doc.xref_is_stream(xref) or _skipped_stream(doc, xref):
            continue
        size = stream_inflated_size(doc, xref, limits.max_stream_bytes)
        if size is None:
            raise ConversionError(
                f"{filename}: stream object {xref} inflates past the "
                f"{limits.max_stream_bytes // _MIB:,} MiB limit (KB_PDF_MAX_STREAM_BYTES), "
                "so it was not read: a decompression bomb or a damaged file; export it again"
            )
        total += size
        if total > limits.max_inflated_bytes:
            raise ConversionError(
                f"{filename}: its streams inflate past the "
                f"{limits.max_inflated_bytes // _MIB:,} MiB limit in all "
                "(KB_PDF_MAX_INFLATED_BYTES), so it was not read; split or re-export it"
            )
    for page in doc:
        characters = len("".join(page.get_text("text", flags=0).split()))
        if characters > limits.max_page_characters:
            raise ConversionError(
                f"{filename}: page {page.number + 1} has {characters:,} characters of text, "
                f"over the {limits.max_page_characters:,}-character limit per page "
                "(KB_PDF_MAX_PAGE_CHARACTERS; a dense page has about 5,000); "
                "export it with fewer characters per page"
            )


def check_pdf(pdf: bytes, filename: str, limits: PdfLimits) -> None:
    """``open_pdf`` with ``limits``, then close: the ``markdown`` asset's pre-flight, so the
    caps of the run's settings bound whichever converter runs next.

    Raises:
        ConversionError: as ``open_pdf``.
    """
    open_pdf(pdf, filename, limits).close()


def _font_has_no_mapping(doc: pymupdf.Document, xref: int, font_type: str, encoding: str) -> bool:
    """True when MuPDF cannot map this font's character codes to Unicode.

    Rules (PDF 32000-1:2008 §9.10.2, "Mapping character codes to Unicode values"): a font
    with a ``/ToUnicode`` CMap is mappable. Without one, a Type0 font with an
    ``Identity-H``/``Identity-V`` encoding and an ``Identity`` (or missing) CIDSystemInfo
    ordering has no mapping (its codes are glyph ids, or numbers the producer chose:
    ``_codes_are_glyph_ids`` tells which); a TrueType font with no
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
        descendant = _descendant_font(doc, xref)
        ordering = ""
        if descendant is not None:
            info = doc.xref_get_key(descendant, "CIDSystemInfo/Ordering")
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


#: Characters without a Unicode meaning: U+FFFD, or a private-use code point (the BMP area
#: and planes 15-16, Unicode 15.1 §23.5), which symbol fonts use for bullets. One pattern, so a
#: page's text is counted (:func:`count_unmapped`) and cleaned (:func:`drop_unmapped`) in one
#: C-level pass.
UNMAPPED_CHARS = re.compile("[\ufffd\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd]")


def count_unmapped(text: str) -> int:
    """How many of ``text``'s characters are unmapped (:data:`UNMAPPED_CHARS`)."""
    return len(UNMAPPED_CHARS.findall(text))


def drop_unmapped(text: str) -> str:
    """``text`` without its unmapped characters (:data:`UNMAPPED_CHARS`)."""
    return UNMAPPED_CHARS.sub("", text)


#: Characters MuPDF keeps of a font's name (``fz_font.name`` is ``char[32]``): a span's
#: ``font`` is the ``/BaseFont`` cut there, subset prefix included, then the prefix dropped.
FONT_NAME_CHARS = 31


def _span_font_name(basefont: str) -> str:
    """The ``font`` MuPDF gives the spans of a font whose ``/BaseFont`` is ``basefont``."""
    return _SUBSET_PREFIX.sub("", basefont[:FONT_NAME_CHARS])


def span_font(span: dict) -> str:
    """The font name of a MuPDF text span (``page.get_text("dict")``), subset prefix dropped."""
    return _SUBSET_PREFIX.sub("", span["font"])


def _descendant_font(doc: pymupdf.Document, xref: int) -> int | None:
    """The xref of a Type0 font's CIDFont (its ``/DescendantFonts`` entry), ``None`` if none."""
    kind, value = doc.xref_get_key(xref, "DescendantFonts")
    match = re.search(r"(\d+) 0 R", value) if kind == "array" else None
    return int(match.group(1)) if match else None


def _codes_are_glyph_ids(doc: pymupdf.Document, xref: int) -> bool:
    """True when an Identity-encoded Type0 font's codes are its glyph ids: a CIDFontType2
    whose ``/CIDToGIDMap`` is absent or ``/Identity``, or a CIDFontType0 (PDF 32000-1:2008
    §9.7.4.2, Table 117). A ``/CIDToGIDMap`` stream means the producer numbered the codes
    itself, often by Unicode code point, which MuPDF's plain text then reads as such."""
    descendant = _descendant_font(doc, xref)
    if descendant is None or doc.xref_get_key(descendant, "Subtype")[1] != "/CIDFontType2":
        return True
    return doc.xref_get_key(descendant, "CIDToGIDMap")[0] != "xref"


def _literal_spans(page: pymupdf.Page) -> set[tuple[float, float, str]]:
    """``(x, y, text)`` of the page's spans (origin rounded to 0.1 pt) read with
    ``/ActualText`` ignored. A span of the plain extraction not among them took its text from
    an ``/ActualText`` entry (PDF 32000-1:2008 §14.9.4), which is Unicode by definition."""
    flags = pymupdf.TEXTFLAGS_TEXT | pymupdf.TEXT_IGNORE_ACTUALTEXT
    return {
        (round(span["origin"][0], 1), round(span["origin"][1], 1), span["text"])
        for block in page.get_text("dict", flags=flags)["blocks"]
        for line in block.get("lines", ())
        for span in line["spans"]
    }


@dataclass(frozen=True, slots=True)
class PageTextLayer:
    """One page's text layer as ``unmapped_characters`` counts it (``TextLayerStats``).

    Attributes:
        characters: non-space characters; ``visible``: those not invisible (render mode 3).
        unmapped: characters without a Unicode mapping; ``unmapped_by_font``: font -> count.
        unreadable_fonts: fonts (``span_font`` names) whose every character counts as
            unmapped: their text in MuPDF's plain extraction is glyph-id nonsense.
    """

    characters: int
    visible: int
    unmapped: int
    unmapped_by_font: dict[str, int]
    unreadable_fonts: frozenset[str]

    @property
    def unmapped_share(self) -> float:
        """Unmapped characters as a share of the page's characters (0.0 with no text)."""
        return self.unmapped / self.characters if self.characters else 0.0


def read_page_text(doc: pymupdf.Document, page: pymupdf.Page) -> PageTextLayer:
    """Count one page's text-layer characters (MuPDF's plain extraction, ``TEXTFLAGS_TEXT``)
    and those without a Unicode mapping, by the rules of ``unmapped_characters``; a span
    whose text is its ``/ActualText`` (``_literal_spans``) is Unicode whatever its font."""
    suspects = {  # span font name -> character classes that may vouch for it ("" none)
        _span_font_name(basefont): (
            "L" if ftype != "Type0" else "" if _codes_are_glyph_ids(doc, xref) else "LN"
        )
        for xref, _ext, ftype, basefont, _name, encoding, *_ in page.get_fonts(full=True)
        if _font_has_no_mapping(doc, xref, ftype, encoding)
    }
    literal = _literal_spans(page) if suspects else set()
    characters = visible = unmapped = 0
    per_font: Counter[str] = Counter()
    suspect_text: dict[str, list[str]] = defaultdict(list)
    for block in page.get_text("dict", flags=pymupdf.TEXTFLAGS_TEXT)["blocks"]:
        for line in block.get("lines", ()):
            for span in line["spans"]:
                text = "".join(span["text"].split())  # str.split drops what isspace names
                if not text:
                    continue
                characters += len(text)
                if span.get("alpha", 255) > 0:
                    visible += len(text)
                font = span_font(span)
                origin = (round(span["origin"][0], 1), round(span["origin"][1], 1))
                if font in suspects and (*origin, span["text"]) in literal:
                    suspect_text[font].append(text)
                    continue
                bad = count_unmapped(text)
                if bad:
                    unmapped += bad
                    per_font[font] += bad
    unreadable = set()
    for font, pieces in suspect_text.items():
        text = "".join(pieces)
        vouching = suspects[font]
        words = sum(1 for ch in text if unicodedata.category(ch)[0] in vouching)
        trusted = bool(vouching) and words >= len(text) / 2
        bad = count_unmapped(text) if trusted else len(text)
        unmapped += bad
        if bad:
            per_font[font] += bad
        if not trusted:
            unreadable.add(font)
    return PageTextLayer(characters, visible, unmapped, dict(per_font), frozenset(unreadable))


def unmapped_characters(doc: pymupdf.Document) -> TextLayerStats:
    """Count the text layer's characters and those that have no Unicode mapping.

    A character is unmapped when it is U+FFFD or a private-use code point, or when it comes
    from a font without a mapping (``_font_has_no_mapping``): every character of a Type0
    font whose codes are its glyph ids (``_codes_are_glyph_ids``; MuPDF turns them into
    shifted nonsense such as ``4BNQMF`` for "Sample"), and every character of a simple
    symbolic font unless at least half of that font's characters on the page are letters,
    or of a Type0 font with codes of its own (a ``/CIDToGIDMap``) unless at least half are
    letters or digits. Glyph ids of small subsets land on punctuation, digits and control
    codes ("Phone" reads ``"7+%-``), and codes a producer numbers from 1 on control codes,
    while a font whose codes happen to be ASCII or Unicode yields mostly letters (and, in a
    datasheet's tables, digits) and is trusted. Per page: ``read_page_text``.
    """
    pages_with_text = total = unmapped = 0
    per_font: Counter[str] = Counter()
    for page in doc:
        layer = read_page_text(doc, page)
        total += layer.characters
        unmapped += layer.unmapped
        per_font.update(layer.unmapped_by_font)
        pages_with_text += layer.visible > 0 or layer.characters >= MIN_INVISIBLE_TEXT_CHARS
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


#: An SEC filing's cover page, as the forms lay it out (Form 10-K, 10-Q and 8-K cover pages,
#: sec.gov/files/form10-k.pdf and siblings): the commission's name, "FORM 10-K" on a line of
#: its own, and the registrant's name just above "(Exact name of registrant as specified in
#: its charter)", or else just below the "Commission file number" line.
_SEC_COMMISSION = re.compile(r"securities\s+and\s+exchange\s+commission", re.IGNORECASE)
_SEC_FORM = re.compile(rf"^form\s+({SEC_FORM_NAME})$", re.IGNORECASE)
_SEC_REGISTRANT_NOTE = re.compile(r"^\(?\s*exact\s+name\s+of\s+(?:the\s+)?registrant", re.I)
_SEC_FILE_NUMBER = re.compile(r"^commission\s+file\s+(?:number|no\.?)", re.IGNORECASE)
_SEC_DATE = r"([a-z]+\.?\s+\d{1,2},\s*\d{4})"
_SEC_PERIODS = (
    (re.compile(r"for\s+the\s+fiscal\s+year\s+ended\s*:?\s*" + _SEC_DATE, re.I),
     "for the fiscal year ended"),
    (re.compile(r"for\s+the\s+quarterly\s+period\s+ended\s*:?\s*" + _SEC_DATE, re.I),
     "for the quarterly period ended"),
    (re.compile(r"date\s+of\s+report\s*(?:\([^)]*\))?\s*:?\s*" + _SEC_DATE, re.I), "dated"),
)


def _sec_name_line(line: str) -> bool:
    """A line that can be a registrant's name: letters, no label (":"), not too long."""
    return sum(ch.isalpha() for ch in line) >= 2 and ":" not in line and len(line) <= 120


def sec_filing_title(page_text: str) -> str:
    """The title of an SEC filing from its cover page's text (page 1): the registrant, the
    form and the period it reports, e.g. "AMAZON.COM, INC. Form 10-K for the fiscal year
    ended December 31, 2017" or "Foot Locker, Inc. Form 8-K dated August 19, 2022" (the period
    is left out when the cover states none). The commission's name heads every such cover,
    so it says nothing about which filing this is. Layout: ``_SEC_COMMISSION`` and its
    siblings.

    Returns ``""`` when ``page_text`` is not an SEC cover page (no commission name, no
    "FORM …" line, or no registrant name where the form puts it).
    """
    if not _SEC_COMMISSION.search(page_text):
        return ""
    lines = [" ".join(line.split()) for line in page_text.splitlines()]
    lines = [line for line in lines if line]
    form = next((m.group(1).upper() for line in lines if (m := _SEC_FORM.match(line))), "")
    if not form:
        return ""
    registrant = ""
    for i, line in enumerate(lines):
        if _SEC_REGISTRANT_NOTE.match(line):
            # the nearest line above with a letter or digit (rules of underscores are skipped)
            above = next((x for x in reversed(lines[:i]) if any(c.isalnum() for c in x)), "")
            registrant = above if _sec_name_line(above) else ""
            break
    else:
        for i, line in enumerate(lines):
            if _SEC_FILE_NUMBER.match(line):
                registrant = next((x for x in lines[i + 1 : i + 3] if _sec_name_line(x)), "")
                break
    if not registrant:
        return ""
    text = " ".join(lines)
    for pattern, phrase in _SEC_PERIODS:
        period = pattern.search(text)
        if period:
            date = period.group(1)
            return f"{registrant} Form {form} {phrase} {date[0].upper()}{date[1:].lower()}"
    return f"{registrant} Form {form}"


#: A wire-service press release's lead, as the wire services set it: a dateline, a dash, the
#: issuer with its listing in parentheses, and "today announced/reported … results …", e.g.
#: "New Brunswick, N.J. (July 20, 2023) – Johnson & Johnson (NYSE: JNJ) today announced results
#: for second-quarter 2023." (Associated Press Stylebook, "datelines"; the exchange and ticker
#: form of Business Wire and PR Newswire releases.)
_RELEASE_LEAD = re.compile(
    r"(?P<issuer>[A-Z][\w&.,'’ -]{1,120}?)\s*"
    r"\((?:[A-Z][A-Za-z]*(?:\s[A-Z][A-Za-z]*)?)\s*:\s*[A-Z][A-Z0-9.]{0,9}\)\s*"  # (NYSE: JNJ)
    r"(?:\([^)]{1,80}\)\s*)?"  # (“MGM Resorts” or the “Company”)
    r"(?:today\s+|on\s+\w+(?:\s+\d{1,2})?,?\s+)?(?:announced|reported|announces|reports)\s+"
    r"(?:its\s+|their\s+)?(?P<what>[^;]{1,300}?)\s*"
    # a sentence's end, not an abbreviation's point ("ended Dec. 31, 2022.")
    + "".join(rf"(?<!\b{a})" for a in ("Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec "
                                       "Inc Corp Co Ltd No St").split())
    + r"[.;](?=\s+[A-Z0-9“\"‘]|\s*$)"
)
#: What ends a dateline before the issuer's name ("LAS VEGAS - MGM …", "…--(BUSINESS WIRE)--").
_DATELINE_END = re.compile(r"\s*(?:-{2,}|[–—]|\s-)\s*")
_AFTER_DATELINE = re.compile(r"(?:-{2,}|[–—]|\s-)\s*$")
#: How far into page 1's text (characters, Markdown marks dropped) a release's lead may start:
#: it follows the headline and the bullets of highlights (J&J's at 726, MGM's at 576).
RELEASE_LEAD_WITHIN = 2_000
#: Longest title ``press_release_title`` gives: it heads every citation of the document.
RELEASE_TITLE_CHARS = 120
_RESULTS = re.compile(r"\bresults\b", re.IGNORECASE)
#: Words that name a company's legal form, not the company ("Ulta Beauty, Inc.").
_LEGAL_FORMS = frozenset(
    "inc incorporated corp corporation co company ltd limited plc llc lp nv sa ag se".split()
)


def press_release_title(page_text: str) -> tuple[str, str]:
    """The issuer and a title from a press release's lead sentence (``_RELEASE_LEAD``), e.g.
    ``("Johnson & Johnson", "Johnson & Johnson press release: results for second-quarter
    2023")``; ``kb_shared.search.citations.RELEASE_FORM`` finds the issuer in it again.

    ``page_text`` is page 1's text (Markdown marks are ignored). The lead must start within
    ``RELEASE_LEAD_WITHIN`` characters, after a dateline's dash. A title over
    ``RELEASE_TITLE_CHARS`` is cut at a word and ends in "…". Returns ``("", "")`` when no
    such lead names an issuer with its listing and the results it announces.
    """
    text = " ".join(MARKDOWN_MARKS.sub(" ", page_text).split())
    for match in _RELEASE_LEAD.finditer(text):
        if match.start() > RELEASE_LEAD_WITHIN:
            break
        parts = _DATELINE_END.split(match.group("issuer"))
        issuer = parts[-1].strip(" ,")
        after_dateline = len(parts) > 1 or _AFTER_DATELINE.search(text[: match.start()])
        if (
            not after_dateline
            or not 1 <= len(issuer.split()) <= 8
            or not _RESULTS.search(match.group("what"))
        ):
            continue
        title = f"{issuer} press release: {match.group('what').strip()}"
        if len(title) > RELEASE_TITLE_CHARS:  # cut at a word, before an unclosed "(", marked
            title = title[: RELEASE_TITLE_CHARS - 1].rsplit(" ", 1)[0]
            if title.count("(") > title.count(")"):
                title = title[: title.rindex("(")]
            title = title.rstrip(" ,“") + "…"
        return issuer, title
    return "", ""


def _names_issuer(title: str, issuer: str) -> bool:
    """Whether ``title`` holds every word of ``issuer`` but its legal form."""
    words = set(_words(title))
    wanted = [w for w in _words(issuer) if w not in _LEGAL_FORMS]
    return bool(wanted) and all(w in words for w in wanted)


def extract_title(metadata_title: str, first_page_markdown: str, first_page: pymupdf.Page) -> str:
    """The document title.

    0. An SEC filing's registrant, form and period (``sec_filing_title``): its metadata holds
       an accession number and its first heading is the commission's name, the same for
       every filing.
    1. The PDF metadata title, when meaningful: not a placeholder (``Untitled``, a file
       name, ``Microsoft Word - …``), at least 4 characters, and at least 80 % of its
       words occur on page 1 (templates often carry another document's title: AEMO's
       Constraint Implementation Guidelines say "Victorian Transfer Limit Advice - Outages").
    2. Else the first level-1 or level-2 heading on page 1 (after furniture removal).
    3. Else the text in the largest font size on page 1.

    A press release whose lead names its issuer (``press_release_title``) is titled by that
    lead instead of 2 or 3 when they do not name the issuer: a release's first heading may be
    a section's ("OVERALL FINANCIAL RESULTS") when its headline is an image.

    Returns ``""`` when none of these yields text with at least three letters.
    """
    page_text = first_page.get_text()
    filing = sec_filing_title(page_text)
    if filing:
        return filing
    title = " ".join((metadata_title or "").split())
    page_words = set(_words(page_text))
    if len(title) >= 4 and not _PLACEHOLDER_TITLES.match(title):
        words = _words(title)
        if words and sum(w in page_words for w in words) >= 0.8 * len(words):
            return title
    found = _heading_title(first_page_markdown, first_page)
    issuer, release = press_release_title(first_page_markdown)
    if release and not _names_issuer(found, issuer):
        return release
    return found


def _heading_title(first_page_markdown: str, first_page: pymupdf.Page) -> str:
    """``extract_title``'s steps 2 and 3: page 1's first level-1 or level-2 heading, else its
    text in the largest font; ``""`` when neither has three letters."""
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
    "Version"/"Ver.Rel"/"Rev"/"Issue" next to a "Date"/"Changes"/"Notes"/… header. A header
    is capitalised and its row short (``VERSION_HEADER_WORDS``): prose that says "revision" and
    "date" on one line ("… we assume no obligation to revise … the date hereof", a 10-K's
    forward-looking statements) heads no column."""
    words = page.get_text("words")
    found: list[tuple[tuple[int, ...], str]] = []
    for head in words:
        if not _VERSION_COLUMN.match(head[4]) or not head[4][0].isupper():
            continue
        mid = (head[1] + head[3]) / 2
        same_line = [
            w[4].casefold().strip(":")
            for w in words
            if w is not head and abs((w[1] + w[3]) / 2 - mid) <= 3
        ]
        if len(same_line) >= VERSION_HEADER_WORDS:
            continue
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


def page_labels(doc: pymupdf.Document) -> list[str]:
    """Each page's printed label from the PDF's ``/PageLabels`` (``"iv"``, ``"A-3"``), ``""``
    for a page without one (or when the labels cannot be read: they are a nicety, never a
    reason to refuse a PDF)."""
    labels = []
    for page in doc:
        try:
            labels.append(page.get_label() or "")
        except Exception:  # a malformed /PageLabels tree
            logger.debug("page %d: unreadable page label", page.number + 1, exc_info=True)
            labels.append("")
    return labels


__all__ = [
    "HEADER_SEARCH_BYTES",
    "MARKDOWN_MARKS",
    "FONT_NAME_CHARS",
    "MIN_INVISIBLE_TEXT_CHARS",
    "PageTextLayer",
    "PdfLimits",
    "UNMAPPED_SHARE_LIMIT",
    "VERSION_SEARCH_PAGES",
    "TextLayerStats",
    "check_limits",
    "check_pdf",
    "check_text_layer",
    "extract_title",
    "press_release_title",
    "sec_filing_title",
    "extract_version",
    "UNMAPPED_CHARS",
    "count_unmapped",
    "drop_unmapped",
    "open_pdf",
    "page_labels",
    "read_page_text",
    "span_font",
    "stream_inflated_size",
    "unmapped_characters",
]
