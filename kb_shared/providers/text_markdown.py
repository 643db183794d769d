"""Markdown and plain-text documents: the pass-through "converter" of ``.md`` and ``.txt`` files.

A ``.md`` or ``.txt`` file is a document like a PDF (same identity rules, DESIGN.md
"Identity"), read as UTF-8 text, as the docs server kb learns from reads them
(``reference/mcp-documentation-README.md``, "Supported file types"). The ``markdown`` asset
picks this converter for them by the file name's extension (``is_text_document``), so the
chunks, embeddings, graph and record assets treat them like converted PDFs.

Rules (``TextMarkdownConverter.convert``):

* **Reading.** UTF-8, an optional byte-order mark dropped. A file holding a NUL byte or bytes
  that are not UTF-8 is binary and refused (``decode_text``, also used by the intake so that
  nothing of such a file is stored); a PDF under a text name is named as such.
* **Invisible controls.** After decoding, C0 control characters other than tab and line
  breaks, DEL, C1 controls, and the bidirectional embedding, override and isolate marks
  (U+202A–U+202E, U+2066–U+2069) each become a space (``visible_text``). A quote must read as
  it shows: with the bidi marks a file can make a passage display other words than it holds
  (CVE-2021-42574, "Trojan Source"), and an ESC sequence in a quote acts on a terminal that
  prints it. Nothing a reader sees changes; natural right-to-left text needs none of them.
* **No pages.** A text document has no pages: ``pages = 0``, no ``<!-- page N -->`` markers,
  so every chunk has ``page_start = page_end = None`` and is cited by its section. A line of
  the file that kb would read as a page marker is escaped with a backslash (``\\<!-- page 2
  -->``; CommonMark backslash escape), so the file cannot give itself pages.
* **Markdown** (``.md``) passes through: line endings become ``\\n``, leading and trailing
  blank lines go, and nothing else changes but the page-marker escape, so quotes from the file
  match chunk text. Headings, lists, pipe tables and fenced code are the chunker's
  (``kb_shared.ingest.chunking``; fences never split, ``#`` inside them no heading). The title is the
  first level-1 heading outside fences, else ``""`` (citations fall back to the file name).
* **Plain text** (``.txt``) becomes paragraphs: blocks separated by one or more blank lines
  are paragraphs separated by one blank line, and line breaks inside a block are kept, because
  plain text uses them for structure (addresses, aligned columns, numbered clauses) and the
  chunker's sentence cuts run across them anyway. A line that Markdown would read as
  structure rather than text (a ``#`` heading, a code fence, a page marker, a table alignment
  row) gets a backslash before its first character, so the text stays text: the chunker sees
  no heading, fence or table in a ``.txt``. Title ``""``.
* **No figures**: ``figures = ()``; the ``figures`` asset stores none for a text document.
"""

from __future__ import annotations

import re
import time
from pathlib import PurePath

from kb_shared.ingest.chunking import markdown_headings
from kb_shared.errors import ConversionError
from kb_shared.providers.base import ConvertedDocument, MarkdownConverter

#: Extensions of the text documents this module reads: Markdown, and plain text.
MARKDOWN_SUFFIX = ".md"
TEXT_SUFFIX = ".txt"
TEXT_SUFFIXES: tuple[str, ...] = (MARKDOWN_SUFFIX, TEXT_SUFFIX)
#: Every extension kb takes as a document (PDFs go to the PDF converters).
DOCUMENT_SUFFIXES: tuple[str, ...] = (".pdf", *TEXT_SUFFIXES)

#: ``converter`` recorded for a text document; ``rN`` is the revision of this module's rules
#: (r2: invisible controls become spaces).
CONVERTER_NAME = "text-passthrough-r2"

#: What ``visible_text`` replaces (module docstring, "Invisible controls"). NUL is refused
#: earlier (``decode_text``); CR is a line break.
_INVISIBLE_CONTROLS = re.compile("[\x01-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

_PDF_SIGNATURE = b"%PDF-"
#: A line the chunker would read as a page marker (``kb_shared.ingest.chunking``'s rule, any case).
_PAGE_MARKER_LIKE = re.compile(
    r"^(\s*)(<!--\s*page\s+\d+(?:\s+\(p\.\s+.*?\))?\s*-->\s*)$", re.IGNORECASE
)
#: Plain-text line starts that Markdown reads as structure: ATX heading, fence, HTML comment.
_STRUCTURE_START = re.compile(r"^([ \t]*)(?=#|`{3}|~{3}|<!--)")
#: A table alignment row (``|---|:--:|``, ``--- | ---``): only ``|``, ``-``, ``:`` and blanks.
_ALIGNMENT_LIKE = re.compile(r"^([ \t]*)(?=[|:-])[ \t|:-]*-[ \t|:-]*$")


def is_text_document(name: str) -> bool:
    """Whether the file ``name`` is a text document (``.md`` or ``.txt``, any case)."""
    return PurePath(name.strip()).suffix.lower() in TEXT_SUFFIXES


def decode_text(data: bytes, filename: str) -> str:
    """The text of a ``.md``/``.txt`` file: UTF-8, byte-order mark dropped.

    Raises:
        ConversionError: the file holds a NUL byte or is not valid UTF-8 (the message names
            the file, the first bad byte's offset and what to do); a PDF under a text name is
            told to be renamed.
    """
    if data.startswith(_PDF_SIGNATURE):
        raise ConversionError(
            f"{filename} is a PDF, not text: rename it to end in .pdf and add it again"
        )
    nul = data.find(b"\x00")
    if nul != -1:
        raise ConversionError(
            f"{filename} is binary, not text: it holds a NUL byte at byte {nul:,}; add a "
            "UTF-8 text or Markdown file"
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ConversionError(
            f"{filename} is not valid UTF-8 text (bad byte at byte {error.start:,}); save it "
            "as UTF-8 and add it again"
        ) from error


def visible_text(text: str) -> str:
    """``text`` with each invisible control (module docstring) replaced by a space; the same
    length, so offsets into it stay offsets into the decoded file."""
    return _INVISIBLE_CONTROLS.sub(" ", text)


def markdown_source(text: str) -> str:
    """A ``.md`` file's text as stored Markdown: ``\\n`` line endings, page-marker lines
    escaped (module docstring), one final newline; ``""`` for blank text."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [_PAGE_MARKER_LIKE.sub(r"\1\\\2", line) for line in text.split("\n")]
    body = "\n".join(lines).strip("\n")
    return body + "\n" if body.strip() else ""


def plain_text_markdown(text: str) -> str:
    """A ``.txt`` file's text as Markdown paragraphs (module docstring): blank-line-separated
    blocks joined by one blank line, line breaks inside a block kept, trailing whitespace
    trimmed, structure-like lines escaped; ``""`` for blank text.

    Example: ``"# not a title\\nline two\\n\\n\\n|---|"`` ->
    ``"\\\\# not a title\\nline two\\n\\n\\\\|---|\\n"``.
    """
    paragraphs: list[list[str]] = [[]]
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line.strip():
            paragraphs[-1].append(_escape_structure(line.rstrip()))
        elif paragraphs[-1]:
            paragraphs.append([])
    body = "\n\n".join("\n".join(lines) for lines in paragraphs if lines)
    return body + "\n" if body else ""


def _escape_structure(line: str) -> str:
    """``line`` with a backslash before its first non-blank character when Markdown would
    read it as a heading, a fence, a comment (page marker) or a table alignment row."""
    match = _STRUCTURE_START.match(line)
    if match is None and "|" in line:
        match = _ALIGNMENT_LIKE.match(line)
    if match is None:
        return line
    return f"{line[: match.end(1)]}\\{line[match.end(1) :]}"


def markdown_title(markdown: str) -> str:
    """The first level-1 heading's title outside fences (``chunking.markdown_headings``),
    else ``""``."""
    return next((title for level, title in markdown_headings(markdown) if level == 1), "")


class TextMarkdownConverter(MarkdownConverter):
    """``.md``/``.txt`` bytes → ``ConvertedDocument`` without pages or figures (module
    docstring). Stateless, offline, deterministic; nothing is printed."""

    #: Stored with the document; the ``markdown`` asset reuses stored Markdown while it
    #: matches. Bump the ``rN`` suffix when a rule here changes the output.
    name = CONVERTER_NAME

    def convert(self, data: bytes, filename: str) -> ConvertedDocument:
        """Read one text document.

        Args:
            data: the file's bytes.
            filename: its name; the extension chooses Markdown (``.md``) or plain text
                (anything else in ``TEXT_SUFFIXES``); shown in error messages.

        Returns:
            ``ConvertedDocument`` with ``pages = 0``, ``figures = ()``, ``version = ""``,
            ``converter = CONVERTER_NAME``, the title of ``markdown_title`` (``.md``) or ``""``.

        Raises:
            ConversionError: binary or non-UTF-8 content (``decode_text``), or a file with no
                text (empty or only whitespace).
        """
        started = time.perf_counter()
        text = visible_text(decode_text(data, filename))
        markdown_file = PurePath(filename.strip()).suffix.lower() == MARKDOWN_SUFFIX
        markdown = markdown_source(text) if markdown_file else plain_text_markdown(text)
        if not markdown:
            raise ConversionError(f"{filename} has no text: it is empty or only whitespace")
        return ConvertedDocument(
            markdown=markdown,
            pages=0,
            title=markdown_title(markdown) if markdown_file else "",
            version="",
            converter=CONVERTER_NAME,
            figures=(),
            seconds=time.perf_counter() - started,
        )


__all__ = [
    "CONVERTER_NAME",
    "DOCUMENT_SUFFIXES",
    "TEXT_SUFFIXES",
    "TextMarkdownConverter",
    "decode_text",
    "is_text_document",
    "markdown_source",
    "markdown_title",
    "plain_text_markdown",
    "visible_text",
]
