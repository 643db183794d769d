"""Local PDF → Markdown: pymupdf4llm 2.0 in layout mode, plus the clean-up kb needs.

``PymupdfMarkdownConverter`` is the ``markdown`` asset's engine when no cloud key is set. It
needs no network and no model download (the layout model ships inside ``pymupdf-layout``).

Pipeline for one PDF (``convert``):

1. **Open and refuse what cannot be converted** (``kb_shared.ingest.pdf``: ``open_pdf``, then
   ``check_text_layer(unmapped_characters(doc))``; each refusal a ``ConversionError`` whose
   message names the file, says what is wrong and what to do; nothing else is produced):
   empty, not a PDF, damaged, truncated, password-protected, zero pages, scanned (OCR is
   never run here), unreadable text layer.
2. **Layout**: ``pymupdf4llm.to_markdown(doc, page_chunks=True, use_ocr=False)``. OCR is
   always off: besides not being wanted, layout mode with OCR enabled prints a RapidOCR
   warning to stdout, which would corrupt an MCP stdio stream. Everything pymupdf4llm
   prints during the call is captured and logged at DEBUG, and PyMuPDF's own message
   stream is routed to the ``pymupdf`` logger, so **nothing is written to stdout**.
   A page whose layout text came out as U+FFFD (a font layout cannot map but MuPDF's plain
   ``get_text()`` reads, issue 25) is read again with the plain extraction, per page
   (``read_unmapped_pages``); the other pages keep their layout boxes. ``convert_reusing``
   takes this step's pages from a ``LayoutStore`` when it holds the same engine's analysis of
   the same file: a new revision of the rules below then costs a small part of a conversion
   (benchmarks/results/upgrade-cost-2026-12-07*.md).
3. **Clean-up** of each page's layout boxes (``providers.markdown_cleanup`` and
   ``providers.markdown_regions``, whose docstrings give the rules): page furniture
   (running headers/footers, page numbers, repeated logos) removed, numbered section
   headings kept where their section begins; tables of contents removed; tables layout
   missed recovered; ``[Figure: …]`` markers with a ``FigureRegion`` each; a table (or a code
   listing) cut by a page break made one; the outline's headings and levels used; words
   hyphenated at a line end joined or kept hyphenated; code boxes fenced safely; pipe tables
   and text tidied.
4. **Markdown**: ``<!-- page N -->`` (1-based) on its own line before each page's content,
   with the page's printed label when ``/PageLabels`` gives it one that differs
   (``<!-- page 6 (p. iv) -->``, ``kb_shared.ingest.chunking.page_marker``; labels read by
   ``kb_shared.ingest.pdf.page_labels``); blocks separated by blank lines.
5. **Title and version**: ``kb_shared.ingest.pdf.extract_title`` and ``extract_version``.

Speed, measured on the 12 convertible corpus PDFs on 2 cores shared with other jobs (load
average ~10): whole conversions 1.5-3.1 s/page (CVP schedule 1.86, SO_OP_3705 1.60, FCAS
model 1.63, NIST SP 800-171 1.59), nearly all of it pymupdf4llm layout; the steps after
layout (checks, furniture, missed tables, figures, title, version) took 0.02-0.12 s/page.
The refusals cost milliseconds: they run before layout.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import re
import threading
import time
from collections.abc import Iterator
from importlib import metadata

import pymupdf
import pymupdf4llm

from kb_shared.ingest.chunking import page_marker
from kb_shared.errors import ConversionError
from kb_shared.ingest.pdf import (
    check_text_layer,
    extract_title,
    extract_version,
    count_unmapped,
    drop_unmapped,
    open_pdf,
    page_labels,
    read_page_text,
    span_font,
    unmapped_characters,
)
from kb_shared.providers.base import (
    ConvertedDocument,
    FigureRegion,
    LayoutStore,
    MarkdownConverter,
)
from kb_shared.providers.hyphenation import (
    block_lines,
    break_words,
    document_vocabulary,
    english_words,
)
from kb_shared.providers.layout_sessions import use_configured_threads
from kb_shared.providers.markdown_cleanup import (
    Block,
    Page,
    apply_outline,
    page_markdown,
    pages_from_chunks,
    remove_contents,
    remove_furniture,
    resolve_line_breaks,
)
from kb_shared.providers.markdown_regions import (
    add_figures,
    add_missed_tables,
    code_tables_to_code,
    join_split_code,
    join_split_tables,
)

logger = logging.getLogger(__name__)

#: ``converter`` value recorded with every document this module converts.
CONVERTER_NAME = f"pymupdf4llm-{pymupdf4llm.__version__} layout"


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
# Layout
# --------------------------------------------------------------------------------------
#: Revision of the options ``_layout_chunks`` passes and of the fields ``portable_pages``
#: keeps: bump it when either changes, so no layout kept by the old code is reused.
LAYOUT_OPTIONS_REVISION = 1


@functools.cache
def layout_engine() -> str:
    """What produces the layout pages, for ``LayoutStore`` (a kept analysis is reused only
    under the same string): pymupdf4llm's, PyMuPDF's, MuPDF's and pymupdf-layout's versions
    and ``LAYOUT_OPTIONS_REVISION``, e.g. ``"pymupdf4llm 2.0 pymupdf 2.0 (MuPDF 1.28.5)
    pymupdf-layout 2.0 options 1"``."""
    try:
        layout_version = metadata.version("pymupdf-layout")
    except metadata.PackageNotFoundError:
        layout_version = "none"
    return (
        f"pymupdf4llm {pymupdf4llm.__version__} pymupdf {pymupdf.VersionBind} "
        f"(MuPDF {pymupdf.VersionFitz}) pymupdf-layout {layout_version} "
        f"options {LAYOUT_OPTIONS_REVISION}"
    )


def portable_pages(chunks: list[dict]) -> list[dict]:
    """The fields of pymupdf4llm's page chunks the conversion reads, as JSON values: per page
    ``text`` and ``page_boxes`` (``class``, ``bbox`` as four floats in points, ``pos`` as
    ``[start, stop]`` in ``text``). Both the fresh and the kept analysis go through this."""
    return [
        {
            "text": chunk["text"],
            "page_boxes": [
                {
                    "class": box["class"],
                    "bbox": [float(value) for value in box["bbox"]],
                    "pos": [int(box["pos"][0]), int(box["pos"][1])],
                }
                for box in chunk["page_boxes"]
            ],
        }
        for chunk in chunks
    ]


def _layout_chunks(doc: pymupdf.Document, filename: str) -> list[dict]:
    """pymupdf4llm layout-mode page chunks (``text`` + ``page_boxes``), stdout captured."""
    _route_pymupdf_messages()
    with _stdout_to_log(filename):
        use_configured_threads()  # once per process: the layout sessions kb runs
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


# --------------------------------------------------------------------------------------
# Pages layout cannot read
# --------------------------------------------------------------------------------------
#: A page whose layout Markdown has at least this share of U+FFFD / private-use characters
#: (of its non-space characters) is read again with MuPDF's plain extraction. Symbol-font
#: bullets are a fraction of a percent of a page (``kb_shared.ingest.pdf.UNMAPPED_SHARE_LIMIT``).
LAYOUT_UNMAPPED_SHARE = 0.05

_MARKDOWN_START = re.compile(r"^(?=[#>|])")


def unmapped_share(text: str) -> float:
    """Share of ``text``'s non-space characters without a Unicode mapping
    (``kb_shared.ingest.pdf.UNMAPPED_CHARS``); 0.0 for blank text."""
    characters = "".join(text.split())
    return count_unmapped(characters) / len(characters) if characters else 0.0


def plain_text_blocks(pdf_page: pymupdf.Page, unreadable_fonts: frozenset[str]) -> list[Block]:
    """The page as MuPDF's plain extraction reads it (``TEXTFLAGS_TEXT``, the flags of
    ``page.get_text()``): one ``text`` Block per MuPDF text block (bbox in points), its lines
    joined by spaces; spans in ``unreadable_fonts`` and unmapped characters left out, and a
    leading ``#``, ``>`` or ``|`` escaped so that text stays text."""
    blocks = []
    for block in pdf_page.get_text("dict", flags=pymupdf.TEXTFLAGS_TEXT)["blocks"]:
        lines = []
        for line in block.get("lines", ()):
            text = "".join(
                span["text"] for span in line["spans"] if span_font(span) not in unreadable_fonts
            )
            text = " ".join(drop_unmapped(text).split())
            if text:
                lines.append(text)
        if lines:
            markdown = _MARKDOWN_START.sub("\\\\", " ".join(lines))
            blocks.append(Block("text", pymupdf.Rect(block["bbox"]), markdown))
    return blocks


def read_unmapped_pages(
    doc: pymupdf.Document, pages: list[Page], chunks: list[dict], filename: str
) -> list[int]:
    """Replace the blocks of each page layout could not read with ``plain_text_blocks``.

    Layout mode extracts without MuPDF's fallback for characters a font does not map
    (``TEXT_CID_FOR_UNKNOWN_UNICODE``, on in ``page.get_text()``) and ignores ``/ActualText``,
    so a Type0 font whose codes are Unicode code points, or whose text is marked with its
    ``/ActualText``, comes out as U+FFFD. Layout's tables and figure boxes on such a page
    are lost with its U+FFFD; its words are not. A page is read again when at least
    :data:`LAYOUT_UNMAPPED_SHARE` of its layout text (``chunks``' ``text``) is unmapped and
    the plain extraction loses at most half that share (``kb_shared.ingest.pdf.read_page_text``,
    whose rules leave out glyph-id nonsense). Pages layout reads keep their layout blocks.

    Returns:
        The 1-based numbers of the pages read again (logged at INFO).
    """
    replaced = []
    for page, chunk in zip(pages, chunks):
        lost = unmapped_share(chunk["text"])
        if lost < LAYOUT_UNMAPPED_SHARE:
            continue
        pdf_page = doc[page.number - 1]
        layer = read_page_text(doc, pdf_page)
        if layer.unmapped_share <= lost / 2:
            page.blocks = plain_text_blocks(pdf_page, layer.unreadable_fonts)
            replaced.append(page.number)
    if replaced:
        logger.info("%s: layout could not read pages %s; their plain text is used",
                    filename, ", ".join(map(str, replaced)))
    return replaced


# --------------------------------------------------------------------------------------
# Outline
# --------------------------------------------------------------------------------------
def _outline(doc: pymupdf.Document) -> list[list]:
    """The outline as ``doc.get_toc()`` rows, ``[]`` when there is none or it is unreadable."""
    try:
        return doc.get_toc(simple=True)
    except Exception:  # a malformed /Outlines tree
        logger.debug("unreadable outline", exc_info=True)
        return []


# --------------------------------------------------------------------------------------
# The converter
# --------------------------------------------------------------------------------------
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
    #: in this module and ``markdown_cleanup``: bump it when a rule changes the output, so
    #: documents are converted again (r2: dropped tables of contents, number-free furniture
    #: keys; r3: a numbered heading atop every page of its part is kept where it begins;
    #: r4: printed page labels in markers, split tables joined, outline headings, line-end
    #: hyphenation resolved, code fenced safely; r5: a hyphen after one letter or a locant
    #: kept, pages layout mode cannot map read from the plain text layer; r6: a version is
    #: read from a version table only under a capitalised header on a short row, not from
    #: prose: a 10-K's forward-looking statements gave Netflix's filings "Version 2010"; r7: an
    #: SEC filing's title is its registrant, form and period, not the commission's name; r8: a
    #: word broken at the end of a paragraph's line that MuPDF put in a block of its own is
    #: resolved too, and a press release whose first heading does not name its issuer is
    #: titled by its lead sentence).
    name = "pymupdf4llm-layout-r8"

    def convert(self, pdf: bytes, filename: str) -> ConvertedDocument:
        """Convert one PDF (``convert_reusing`` without a kept layout analysis)."""
        return self._convert(pdf, filename, None)

    def convert_reusing(
        self, pdf: bytes, filename: str, layouts: LayoutStore
    ) -> ConvertedDocument:
        """Convert one PDF, taking the layout analysis (most of a conversion's time,
        benchmarks/results/ingest-profile-2026-12-06.md) from ``layouts`` when it holds one
        made by ``layout_engine()``, else running it and saving it there. The output is the
        same as ``convert``'s.

        Raises:
            ConversionError: as ``convert``; the store's own errors (``StoreError``,
                ``BlobStoreFullError``) pass through unchanged.
        """
        return self._convert(pdf, filename, layouts)

    def _convert(
        self, pdf: bytes, filename: str, layouts: LayoutStore | None
    ) -> ConvertedDocument:
        """Convert one PDF.

        Args:
            pdf: the PDF's bytes.
            filename: shown in error messages (and passed to pymupdf4llm as the name).
            layouts: where the layout analysis is kept between conversions, or ``None``.

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
            # Before the try below: the store's own errors are not the PDF's.
            kept = layouts.load(layout_engine(), doc.page_count) if layouts is not None else None
            try:
                check_text_layer(unmapped_characters(doc), filename)
                metadata_title = (doc.metadata or {}).get("title", "")
                chunks = kept if kept is not None else portable_pages(
                    _layout_chunks(doc, filename)
                )
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
            if layouts is not None and kept is None:
                layouts.save(layout_engine(), chunks)
            pages = pages_from_chunks(doc, chunks)
            read_unmapped_pages(doc, pages, chunks, filename)
            remove_furniture(pages)
            remove_contents(pages)
            figures: list[FigureRegion] = []
            for page in pages:
                pdf_page = doc[page.number - 1]
                paths = pdf_page.get_drawings()
                add_missed_tables(page, pdf_page, paths)
                code_tables_to_code(page, pdf_page)
                figures.extend(add_figures(page, pdf_page, paths))
            join_split_tables(pages)
            join_split_code(pages)
            apply_outline(pages, _outline(doc))
            lines = [block_lines(pdf_page) for pdf_page in doc]  # one text extraction a page
            vocabulary = document_vocabulary(t for each in lines for t in break_words(each))
            for page in pages:
                resolve_line_breaks(page, lines[page.number - 1], vocabulary, english_words())
            labels = page_labels(doc)
            bodies = [page_markdown(page) for page in pages]
            markdown = "\n\n".join(
                page_marker(page.number, labels[page.number - 1]) + (f"\n\n{body}" if body else "")
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
    "LAYOUT_OPTIONS_REVISION",
    "LAYOUT_UNMAPPED_SHARE",
    "PymupdfMarkdownConverter",
    "layout_engine",
    "plain_text_blocks",
    "portable_pages",
    "read_unmapped_pages",
    "unmapped_share",
]
