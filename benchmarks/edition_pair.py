"""Build a realistic edition pair of the Solar Victoria Notice to Market (issue 27, "How it is
judged": two editions of one program document, a year apart) by editing a copy with PyMuPDF.

Writes ``Notice to Market 2025-26.pdf`` (the shared PDF, copied unchanged) and ``Notice to
Market 2026-27.pdf`` into FOLDER. The next edition differs the way a regulator's does, in
five places (PDF page numbers, 1-based; ``EDITS`` lists them for a reader of the diff):

1. p. 15, "Registration as an Electrical Contractor": "Recommended: … should be registered"
   becomes "Mandatory: … must be registered" (a requirement made mandatory).
2. p. 14, "Consumer protection through whole-of-system warranty": a new "must" paragraph with
   a deadline after "Retailers must also provide …"; the rest of the column moves down.
3. p. 19, "Active internet connection": the paragraph on registering the system over a
   temporary hotspot is dropped (a registration step dropped).
4. p. 27, "Consumer protection through product performance warranty": "90 per cent
   production at 10 years" becomes "… at 12 years" (a changed technical condition).
5. p. 15 → p. 17: the section "Main business location listed as 'Victoria'" moves from
   second in 3.1.2 to the end of 3.1.2, on another page (a section that only moved).

Text is removed with redactions and written with Helvetica (Arial's metrics); a moved or
shifted region is re-drawn from a copy of its page whose other text was redacted, so it keeps
its own fonts (the headings stay headings).

``--version-pair`` also writes a version pair of AEMO's SO_OP_3705 (``FOLDER/v1`` and
``FOLDER/v2``, same file name, for ``kb add --new-version``): clause 4.1(b)'s "update this advice
5 minutes before synchronising" becomes "3 minutes", nothing else.

Run: ``python -m benchmarks.edition_pair FOLDER [--version-pair]``.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pymupdf

CORPUS = Path("/work/shared/corpus/pdfs")
SOURCE = CORPUS / "vic_SolarVictoria_NoticetoMarket_2025-26_v1.pdf"
AEMO = CORPUS / "aemo_SO_OP_3705_Dispatch.pdf"
OLD_NAME = "Notice to Market 2025-26.pdf"
NEW_NAME = "Notice to Market 2026-27.pdf"
#: What a reader of the two editions would list, in page order of the new edition.
EDITS = (
    "p. 14: added 'Retailers must register each warranty … within 10 business days …'",
    "p. 15: 'Recommended: … should be registered' -> 'Mandatory: … must be registered'",
    "p. 15 -> p. 17: section 'Main business location listed as Victoria' moved",
    "p. 19: dropped 'In cases where … connect temporarily … to register the system.'",
    "p. 27: '90 per cent production at 10 years' -> '… at 12 years'",
)

_BODY = 10.0  # the NTM's body size (pt)
_LEADING = 12.0  # its line pitch (pt), read from the text layer's line boxes
_COLUMN_WIDTH = 230.0  # the NTM's column width (pt)


def _line_rect(page: pymupdf.Page, text: str) -> pymupdf.Rect:
    """The box of the first text line on PAGE starting with TEXT (spaces collapsed).

    Raises:
        ValueError: no line starts so.
    """
    for block in page.get_text("dict")["blocks"]:
        for line in block.get("lines", []):
            joined = " ".join("".join(span["text"] for span in line["spans"]).split())
            if joined.startswith(text):
                return pymupdf.Rect(line["bbox"])
    raise ValueError(f"no line starting {text!r} on page {page.number + 1}")


def _baseline(page: pymupdf.Page, rect: pymupdf.Rect) -> pymupdf.Point:
    """The origin of the first span inside RECT (where replacement text starts)."""
    for block in page.get_text("dict", clip=rect)["blocks"]:
        for line in block.get("lines", []):
            return pymupdf.Point(line["spans"][0]["origin"])
    raise ValueError(f"no text in {rect} on page {page.number + 1}")


def _redact(page: pymupdf.Page, rects: list[pymupdf.Rect]) -> None:
    """Remove the text in RECTS and the line art they cover (link underlines: a converter reads
    a stray one across text as strike-through); images stay."""
    for rect in rects:
        page.add_redact_annot(rect)
    page.apply_redactions(
        images=pymupdf.PDF_REDACT_IMAGE_NONE,
        graphics=pymupdf.PDF_REDACT_LINE_ART_REMOVE_IF_COVERED,
    )


def _erase(page: pymupdf.Page, rect: pymupdf.Rect) -> None:
    """Remove what RECT holds (shrunk 1 pt so neighbouring lines keep theirs)."""
    _redact(page, [rect + (0, 1, 0, -1)])


def _write(page: pymupdf.Page, origin: pymupdf.Point, lines: list[list[tuple[str, str]]]) -> None:
    """Write LINES (each a list of (font, text) runs) from ORIGIN down at the NTM's pitch, as
    one text object so a converter reads them as one paragraph."""
    writer = pymupdf.TextWriter(page.rect)
    for i, runs in enumerate(lines):
        at = origin + (0, i * _LEADING)
        for font, text in runs:
            _, at = writer.append(at, text, font=pymupdf.Font(font), fontsize=_BODY)
    writer.write_text(page)


def _replace_line(page: pymupdf.Page, starts: str, new: str, font: str) -> None:
    """Re-write the line starting STARTS as NEW at the same baseline in FONT."""
    rect = _line_rect(page, starts)
    origin = _baseline(page, rect)
    _erase(page, rect)
    _write(page, origin, [[(font, new)]])


def _wrap(text: str, font: str) -> list[str]:
    """TEXT broken into lines no wider than the NTM's column."""
    lines: list[str] = []
    for word in text.split():
        trial = f"{lines[-1]} {word}" if lines else word
        if lines and pymupdf.get_text_length(trial, fontname=font, fontsize=_BODY) <= _COLUMN_WIDTH:
            lines[-1] = trial
        else:
            lines.append(word)
    return lines


def _replace_span(page: pymupdf.Page, starts: str, new: str) -> None:
    """Re-write the first text span starting STARTS as NEW (Helvetica, the span's size and
    origin); the line's other spans stay. ValueError when no span starts so."""
    for block in page.get_text("dict")["blocks"]:
        for line in block.get("lines", []):
            for span in line["spans"]:
                if span["text"].startswith(starts):
                    _erase(page, pymupdf.Rect(span["bbox"]))
                    writer = pymupdf.TextWriter(page.rect)
                    font = pymupdf.Font("helv")
                    writer.append(span["origin"], new, font=font, fontsize=span["size"])
                    writer.write_text(page)
                    return
    raise ValueError(f"no span starting {starts!r} on page {page.number + 1}")


def _region_copy(doc: pymupdf.Document, pno: int, clip: pymupdf.Rect) -> pymupdf.Document:
    """A one-page document holding page PNO with every text outside CLIP redacted."""
    single = pymupdf.open()
    single.insert_pdf(doc, from_page=pno, to_page=pno)
    page = single[0]
    full = page.rect
    outside = [
        pymupdf.Rect(full.x0, full.y0, full.x1, clip.y0),
        pymupdf.Rect(full.x0, clip.y1, full.x1, full.y1),
        pymupdf.Rect(full.x0, clip.y0, clip.x0, clip.y1),
        pymupdf.Rect(clip.x1, clip.y0, full.x1, clip.y1),
    ]
    _redact(page, [rect for rect in outside if not rect.is_empty])
    return single


def _move_region(
    doc: pymupdf.Document, src: int, clip: pymupdf.Rect, dst: int, top_left: pymupdf.Point
) -> None:
    """Move what CLIP holds on page SRC to page DST with its top-left corner at TOP_LEFT."""
    copy = _region_copy(doc, src, clip)
    _erase(doc[src], clip)
    target = pymupdf.Rect(top_left, top_left + (clip.width, clip.height))
    doc[dst].show_pdf_page(target, copy, 0, clip=clip)


def next_edition(doc: pymupdf.Document) -> None:
    """Apply the five edits of ``EDITS`` to DOC (the 2025-26 NTM) in place."""
    # 1. p. 15: recommended -> mandatory.
    page = doc[14]
    top = _line_rect(page, "Recommended: Solar PV retailers should be")
    origin = _baseline(page, top)
    _erase(page, top | _line_rect(page, "Registered Electrical Contractor."))
    _write(page, origin, [
        [("hebo", "Mandatory:"), ("helv", " Solar PV retailers must be")],
        [("helv", "registered with Energy Safe Victoria as a")],
        [("helv", "Registered Electrical Contractor.")],
    ])
    # 5. p. 15 -> p. 17: the "Main business location" section (its heading to its last bullet).
    moved = pymupdf.Rect(50, 300, 300, 484)
    _move_region(doc, 14, moved, 16, pymupdf.Point(50, 424))
    # 2. p. 14: the right column below "Retailers must also provide …" moves down; the new
    # paragraph goes into the gap.
    added = (
        "Retailers must register each warranty with the product manufacturer within 10 "
        "business days of the system being handed over to the customer."
    )
    lines = _wrap(added, "helv")
    shift = len(lines) * _LEADING + 7
    below = pymupdf.Rect(300, 466, 560, 700)
    _move_region(doc, 13, below, 13, pymupdf.Point(below.x0, below.y0 + shift))
    first = _baseline(doc[13], _line_rect(doc[13], "Retailers must also provide")) + (0, 66)
    _write(doc[13], first, [[("helv", text)] for text in lines])
    # 3. p. 19: drop the paragraph on registering the system over a hotspot.
    page = doc[18]
    top = _line_rect(page, "In cases where a reliable internet")
    bottom = _line_rect(page, "to register the system.")
    _erase(page, pymupdf.Rect(top.x0, top.y0, max(top.x1, bottom.x1), bottom.y1))
    # 4. p. 27: the performance warranty's 10 years becomes 12.
    _replace_line(
        doc[26], "will deliver 90 per cent production at 10 years",
        "will deliver 90 per cent production at 12 years and", "helv",
    )


def build_pair(folder: Path, source: Path = SOURCE) -> tuple[Path, Path]:
    """Write the 2025-26 copy and the edited 2026-27 edition into FOLDER; return both paths."""
    folder.mkdir(parents=True, exist_ok=True)
    old, new = folder / OLD_NAME, folder / NEW_NAME
    shutil.copyfile(source, old)
    with pymupdf.open(source) as doc:
        next_edition(doc)
        doc.save(new, garbage=3, deflate=True)
    return old, new


def version_pair(folder: Path, source: Path = AEMO) -> tuple[Path, Path]:
    """Write SOURCE into FOLDER/v1 and, with clause 4.1(b)'s 5 minutes made 3, into FOLDER/v2."""
    old, new = folder / "v1" / source.name, folder / "v2" / source.name
    for path in (old, new):
        path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, old)
    with pymupdf.open(source) as doc:
        _replace_span(
            doc[26], "before, and update this advice 5 minutes",
            "before, and update this advice 3 minutes before ",
        )
        doc.save(new, garbage=3, deflate=True)
    return old, new


def main() -> None:
    """Command line: build the pair into the folder given."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="where to write the two PDFs")
    parser.add_argument("--source", type=Path, default=SOURCE, help="the 2025-26 NTM PDF")
    parser.add_argument(
        "--version-pair", action="store_true", help="also write the AEMO version pair"
    )
    args = parser.parse_args()
    old, new = build_pair(args.folder, args.source)
    print(f"{old}\n{new}")
    for edit in EDITS:
        print(f"  {edit}")
    if args.version_pair:
        print("\n".join(map(str, version_pair(args.folder))))


if __name__ == "__main__":
    main()
