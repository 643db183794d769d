"""Small PDFs built with pymupdf for the PDF-inspection and converter tests."""

from __future__ import annotations

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
