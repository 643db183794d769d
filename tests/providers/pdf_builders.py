"""Small PDFs built with pymupdf for the PDF-inspection and converter tests."""

from __future__ import annotations

import re

import pymupdf


def text_pdf(*pages: str) -> bytes:
    """One page per string, the text at the top left in Helvetica."""
    doc = pymupdf.open()
    for text in pages:
        doc.new_page().insert_text((72, 72), text, fontsize=11)
    return doc.tobytes()


def image_page_pdf(pages: int, invisible_text: str = "") -> bytes:
    """``pages`` pages that are a grey raster image each (a "scan"), optionally with
    invisible text (render mode 3, what OCR tools add) on the first page."""
    doc = pymupdf.open()
    pixmap = pymupdf.Pixmap(pymupdf.csGRAY, pymupdf.IRect(0, 0, 60, 80), False)
    pixmap.set_rect(pixmap.irect, (200,))
    for number in range(pages):
        page = doc.new_page()
        page.insert_image(page.rect, pixmap=pixmap)
        if invisible_text and number == 0:
            page.insert_textbox(pymupdf.Rect(40, 40, 560, 800), invisible_text, render_mode=3)
    return doc.tobytes()


def doc_with_lines(*lines: tuple[float, float, str, float]) -> pymupdf.Document:
    """A one-page document with each ``(x, y, text, font size)`` line written on it."""
    doc = pymupdf.open()
    page = doc.new_page()
    for x, y, text, size in lines:
        page.insert_text((x, y), text, fontsize=size)
    return doc


def type0_pdf_without_tounicode(
    *pages: str, codes: str = "unicode", actual_text: bool = False
) -> bytes:
    """One page per string (lines split at ``\\n``) in MuPDF's built-in Droid Sans Fallback,
    embedded as a subset Type0 / Identity-H TrueType font (CIDFontType2) whose ``/ToUnicode``
    is then removed, so nothing maps its codes to Unicode.

    ``codes="unicode"``: the character codes are the text's Unicode code points, sent to
    their glyphs by a ``/CIDToGIDMap`` stream (a product datasheet's case, issue 25: MuPDF's
    ``get_text()`` reads the codes as text, layout mode gives U+FFFD); ``"sequential"``: the
    same, but the codes are 1, 2, 3, … in order of first use (``get_text()`` reads control
    codes); ``"glyph"``: the codes are the glyph ids (``get_text()`` reads shifted nonsense).
    ``actual_text`` marks each page's text as a ``/Span`` whose ``/ActualText`` is the text
    (PDF 32000-1:2008 §14.9.4: ``get_text()`` reads it, layout mode ignores it).
    The font's name with its subset prefix is longer than MuPDF keeps
    (``kb_shared.ingest.pdf.FONT_NAME_CHARS``).
    """
    font = pymupdf.Font("cjk")
    doc = pymupdf.open()
    for text in pages:
        page = doc.new_page()
        page.insert_font(fontname="uc", fontbuffer=font.buffer)
        page.insert_text((72, 72), text, fontname="uc", fontsize=11)
    doc.subset_fonts()  # keeps glyph ids, drops the font's own cmap
    doc = pymupdf.open("pdf", doc.tobytes(garbage=3, deflate=True))
    unicode_of = {font.has_glyph(ord(ch)): ord(ch) for ch in "".join(pages) if ch != "\n"}
    code_of = dict(unicode_of)
    if codes == "sequential":
        code_of = {glyph: number for number, glyph in enumerate(unicode_of, start=1)}
    type0 = doc[0].get_fonts(full=True)[0][0]
    doc.xref_set_key(type0, "ToUnicode", "null")
    if codes != "glyph":

        def recode(match: re.Match[bytes]) -> bytes:
            glyphs = match.group(1).decode()
            codes = [code_of[int(glyphs[i : i + 4], 16)] for i in range(0, len(glyphs), 4)]
            return b"<" + "".join(f"{code:04x}" for code in codes).encode() + b">"

        for page in doc:
            for xref in page.get_contents():
                doc.update_stream(xref, re.sub(rb"<([0-9a-f]+)>", recode, doc.xref_stream(xref)))
        glyph_map = bytearray(2 * (max(code_of.values()) + 1))
        for glyph, code in code_of.items():
            glyph_map[2 * code : 2 * code + 2] = glyph.to_bytes(2, "big")
        map_xref = doc.get_new_xref()
        doc.update_object(map_xref, "<<>>")
        doc.update_stream(map_xref, bytes(glyph_map))
        widths = " ".join(
            f"{code_of[glyph]} [{round(font.glyph_advance(unicode) * 1000)}]"
            for glyph, unicode in sorted(unicode_of.items(), key=lambda item: code_of[item[0]])
        )
        descendant = int(re.search(r"(\d+) 0 R", doc.xref_get_key(type0, "DescendantFonts")[1])[1])
        doc.xref_set_key(descendant, "CIDToGIDMap", f"{map_xref} 0 R")
        doc.xref_set_key(descendant, "W", f"[{widths}]")
    if actual_text:
        for page, text in zip(doc, pages):
            lines = iter(text.split("\n"))  # one TJ operator per line, in order

            def mark(match: re.Match[bytes]) -> bytes:
                marked = "feff" + next(lines).encode("utf-16-be").hex()
                return f"/Span <</ActualText <{marked}>>> BDC ".encode() + match[0] + b" EMC"

            for xref in page.get_contents():
                doc.update_stream(xref, re.sub(rb"\[<[0-9a-f]+>\]TJ", mark, doc.xref_stream(xref)))
    return doc.tobytes(garbage=3, deflate=True)
