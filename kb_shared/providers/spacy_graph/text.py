"""Chunk Markdown → units the parser reads, and the definitions visible without a parse.

* ``clean_inline`` strips HTML tags, links, URLs, footnote marks, bold and italic marks
  (italic spans are remembered), keeping underscores inside identifiers (``SO_OP_3705``).
* ``units_from_chunk`` drops list markers, page-number and ``©`` lines, picture-text comments
  and tables of contents; turns glossary tables (header ``Term``, ``Abbreviation``… or any
  two-column table under a Definitions/Glossary heading) into definitions and every other
  table row into one sentence of its cells joined by "; "; reads ``[Figure: …]`` captions as
  prose; carries a lead-in that ends in a modal and a colon ("The Retailer must:") into each
  list item. Headings are not units, but under a definitions heading a short heading names
  the term its paragraph defines.
* ``prose_definitions`` finds ``'X' means …`` sentences.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kb_shared.ingest.chunking import Chunk
from kb_shared.providers.spacy_graph.names import LEADING_DROP, STOP_NAMES, tidy, valid_name

# --------------------------------------------------------------------------------------
# Inline Markdown
# --------------------------------------------------------------------------------------
_SUP = re.compile(r"<sup>.*?</sup>", re.IGNORECASE | re.DOTALL)
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_TAG = re.compile(r"</?[A-Za-z][^>]*>")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"\b(?:https?://|www\.)\S+", re.IGNORECASE)
_PROTECTED = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]*[A-Z0-9]_[A-Z0-9][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*")
_NO_SPACE_BEFORE = "([{\"“‘'/-"
#: Bullet glyphs and private-use characters (PDF symbol fonts) carry no text.
_GLYPHS = re.compile("[\ue000-\uf8ff•▪●◦■□➢✓✔]")
#: Requirement labels that open a paragraph ("Mandatory: Retailers must …"); dropped so the
#: parser sees the sentence's real subject (the modal still says what kind of duty it is).
_LABEL = re.compile(r"^(?:Mandatory|Recommended|Recommendation|Note|Notes|Example|Why)\s*:\s*")


def clean_inline(raw: str) -> tuple[str, list[tuple[int, int]]]:
    """Strip inline Markdown/HTML from one line of chunk text.

    Args:
        raw: Markdown text (one paragraph or one table cell).

    Returns:
        ``(text, italics)``: plain text with whitespace collapsed, and the ``(start, end)``
        character spans of ``_italic_`` runs in it. Underscores inside identifiers made of
        capitals and digits (``SO_OP_3705``, ``ADG_ID``) are kept; every other underscore is
        an italic mark and toggles italics (pymupdf4llm glues marks to words:
        ``A_generating system_or`` → ``A generating system or``). ``**``/``*`` are dropped,
        ``<br>`` becomes a space, ``<sup>…</sup>`` (footnote marks) and URLs are removed,
        links keep their text.
    """
    s = _SUP.sub("", raw)
    s = _BREAK.sub(" ", s)
    s = _TAG.sub("", s)
    s = _LINK.sub(r"\1", s)
    s = _URL.sub(" ", s)
    s = s.replace("*", "").replace("`", "").replace("\\", "")
    s = _GLYPHS.sub(" ", s)
    s = _PROTECTED.sub(lambda m: m.group(0).replace("_", "\0"), s)
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for i, ch in enumerate(s):
        if ch == "_":
            prev = out[-1] if out else " "
            nxt = s[i + 1] if i + 1 < len(s) else " "
            if prev != " " and prev not in _NO_SPACE_BEFORE and (nxt.isalnum() or nxt in "(["):
                out.append(" ")
            if start is None:
                start = len(out)
                # ``_generating_<br>_system_``: two marks around one term make one span.
                if spans and not "".join(out[spans[-1][1] : start]).strip():
                    start = spans.pop()[0]
            else:
                spans.append((start, len(out)))
                start = None
            continue
        if ch.isspace():
            if out and out[-1] != " ":
                out.append(" ")
            continue
        out.append(ch)
    text = "".join(out).replace("\0", "_")
    lead = len(text) - len(text.lstrip())
    text = text.strip()
    italics: list[tuple[int, int]] = []
    for a, b in spans:
        a, b = max(a - lead, 0), min(b - lead, len(text))
        while a < b and text[a] == " ":
            a += 1
        while b > a and text[b - 1] == " ":
            b -= 1
        if b > a:
            italics.append((a, b))
    return text, italics


# --------------------------------------------------------------------------------------
# Markdown → units (sentences-to-be)
# --------------------------------------------------------------------------------------
@dataclass(slots=True)
class Definition:
    """A definition found before parsing.

    Attributes:
        names: the defined names (aliases after the first).
        body: the defining text.
        body_start: offset of ``body`` in the unit text.
        kind: ``"glossary"``, ``"heading"``, ``"means"`` or ``"abbreviation"``.
        cited: documents cited in brackets in a glossary term cell (``[44 USC 3552]``).
        expansion: set when the term is an abbreviation or alias of ``expansion``.
    """

    names: list[str]
    body: str
    body_start: int
    kind: str
    cited: list[str] = field(default_factory=list)
    expansion: str = ""


@dataclass(slots=True)
class Unit:
    """One paragraph, table row or caption of a chunk, as plain text.

    Attributes:
        chunk: index of the chunk in the document's chunk list.
        text: the cleaned text (``clean_inline``).
        italics: ``(start, end)`` character spans of italic runs in ``text``.
        kind: ``"prose"``, ``"row"`` or ``"caption"``.
        definitions: definitions found in this unit.
    """

    chunk: int
    text: str
    italics: list[tuple[int, int]]
    kind: str
    definitions: list[Definition] = field(default_factory=list)


#: A heading naming a definitions section (its rows and sub-headings define terms).
DEFS_HEADING = re.compile(
    r"\b(definitions?|glossary|interpretation|abbreviations?|acronyms?|key terms|"
    r"terms and definitions|terminology)\b",
    re.IGNORECASE,
)
#: First header cells of a glossary table (lower-case).
_TERM_HEADERS = frozenset(
    {"term", "terms", "abbreviation", "abbreviations", "acronym", "acronyms", "word",
     "expression", "defined term", "glossary", "term/acronym", "acronym/term",
     "abbreviation/term", "name"}
)
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_LIST_MARK = re.compile(
    r"^\s*(?:[-*+•▪●◦]\s+)?(?:\(?(?:[a-zA-Z]{1,2}\d?|\d{1,3}|[ivxlc]{1,5})\)\s*|[A-Z]\.\s+|"
    r"\d+(?:\.\d+)*\.?\s+)?"
)
_BULLET = re.compile(r"^\s*(?:[-*+•▪●◦]\s+|\(?(?:[a-zA-Z]|[ivxlc]{1,5}|\d{1,3})\)\s+)")
_FIGURE = re.compile(r"^\s*\[Figure:\s*(.*?)\]\s*$", re.IGNORECASE)
_FURNITURE = re.compile(r"^\s*(?:page\s+\d+(?:\s+of\s+\d+)?|\d{1,4}|©.*)\s*$", re.IGNORECASE)
_LEAD_IN = re.compile(
    r"\b(?:must|shall|should|may|(?:is|are) required to)(?:\s+not)?(?:\s*,[^:]*)?\s*:\s*$",
    re.IGNORECASE,
)
_COMMENT = re.compile(
    r"<!--\s*Start of picture text\s*-->.*?(?:<!--\s*End of picture text\s*-->|\Z)|<!--.*?-->",
    re.DOTALL | re.IGNORECASE,
)
_PAGE_CELL = re.compile(r"^\W*\d{1,3}\W*$")


def _split_row(line: str) -> list[str]:
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|"):
        body = body[:-1]
    return body.split("|")


def _term_names(cell: str) -> tuple[list[str], list[str], str]:
    """Names in a glossary term cell, citations in brackets, and an abbreviation in parens."""
    cited = [c.strip() for c in re.findall(r"\[([^\]]{2,60})\]", cell)]
    text = re.sub(r"\[[^\]]*\]", " ", cell)
    abbr = ""
    m = re.search(r"\(\s*([A-Z][A-Za-z0-9&/-]{1,11})\s*\)\s*$", text)
    if m:
        abbr = m.group(1)
        text = text[: m.start()]
    parts = re.split(r",?\s+or\s+|\s+/\s*|\s*/\s+|;|,", text)
    names = [tidy(p) for p in parts]
    return [n for n in names if valid_name(n)], cited, abbr


def units_from_chunk(index: int, chunk: Chunk) -> list[Unit]:
    """Split one chunk's Markdown into parseable units and spot glossary definitions.

    Args:
        index: the chunk's position in the document's chunk list (``Unit.chunk``).
        chunk: the chunk; its ``heading_path`` says whether it sits under a definitions
            heading.

    Returns:
        The units in text order; formulas and text without a letter are left out.
    """
    units: list[Unit] = []
    def_level: int | None = 0 if any(DEFS_HEADING.search(h) for h in chunk.heading_path) else None
    pending_term: str | None = None
    lead_in: str | None = None
    paragraph: list[str] = []
    para_is_item = False
    table: list[str] = []

    def emit(text: str, italics: list[tuple[int, int]], kind: str) -> Unit | None:
        if not text or not re.search(r"[A-Za-z]", text):
            return None
        if re.search(r"\s=\s", text) and re.search(r"\s[-+×–]\s", text):
            return None  # a formula: "Target = SUM units (MWB) + SUM loads (MWB)"
        unit = Unit(index, text, italics, kind)
        units.append(unit)
        return unit

    def flush_paragraph() -> None:
        nonlocal paragraph, para_is_item, pending_term, lead_in
        if not paragraph:
            return
        raw = " ".join(paragraph)
        paragraph = []
        is_item = para_is_item
        para_is_item = False
        raw = _LIST_MARK.sub("", raw, count=1) if is_item else raw
        text, italics = clean_inline(raw)
        label = _LABEL.match(text)
        if label:
            cut = label.end()
            text = text[cut:]
            italics = [(a - cut, b - cut) for a, b in italics if a >= cut]
        if not text:
            return
        if is_item and lead_in:
            prefix = lead_in + " "
            text, italics = prefix + text, [(a + len(prefix), b + len(prefix)) for a, b in italics]
        elif not is_item:
            lead_in = None
        unit = emit(text, italics, "prose")
        if unit is None:
            return
        if pending_term is not None and not is_item:
            names, cited, abbr = _term_names(pending_term)
            if names:
                unit.definitions.append(Definition(names, text, 0, "heading", cited))
                if abbr:
                    unit.definitions.append(
                        Definition([abbr], names[0], 0, "heading", [], expansion=names[0])
                    )
            pending_term = None
        if _LEAD_IN.search(text) and not is_item:
            lead_in = _LEAD_IN.sub(lambda m: m.group(0).rstrip(" :"), text).rstrip(" :")
            # Keep only the clause that carries the modal (drop an earlier sentence).
            lead_in = re.split(r"(?<=[.;])\s+", lead_in)[-1]

    def flush_table() -> None:
        nonlocal table
        if not table:
            return
        rows = [_split_row(line) for line in table if not _TABLE_SEPARATOR.match(line)]
        has_header = len(table) > 1 and bool(_TABLE_SEPARATOR.match(table[1]))
        table = []
        if not rows:
            return
        body = rows[1:] if has_header else rows
        pageish = sum(
            1 for r in rows if (r and _PAGE_CELL.match(r[-1].strip() or "x")) or "....." in "".join(r)
        )
        if pageish * 2 >= len(rows):  # a table of contents / list of tables
            return
        header = [clean_inline(c)[0].lower().strip(" :") for c in rows[0]] if has_header else []
        glossary = len(rows[0]) >= 2 and (
            (header and header[0] in _TERM_HEADERS) or def_level is not None
        )
        if glossary and header and header[0] not in _TERM_HEADERS and def_level is not None:
            body = rows  # a glossary whose first entry the converter made the header
        for row in body:
            cells = [clean_inline(c) for c in row]
            if glossary and len(cells) >= 2 and cells[0][0]:
                names, cited, abbr = _term_names(cells[0][0])
                definition_text = cells[1][0]
                if names and definition_text:
                    term_text = cells[0][0]
                    prefix = f"{term_text}: "
                    italics = [
                        (a + len(prefix), b + len(prefix)) for a, b in cells[1][1]
                    ]
                    unit = emit(prefix + definition_text, italics, "row")
                    if unit is not None:
                        unit.definitions.append(
                            Definition(names, definition_text, len(prefix), "glossary", cited)
                        )
                        if abbr:
                            unit.definitions.append(
                                Definition([abbr], names[0], 0, "glossary", [], names[0])
                            )
                    continue
            parts: list[str] = []
            italics = []
            offset = 0
            for text, spans in cells:
                if not text:
                    continue
                if parts:
                    offset += 2
                italics += [(a + offset, b + offset) for a, b in spans]
                parts.append(text)
                offset += len(text)
            emit("; ".join(parts), italics, "row")

    # HTML comments (pymupdf4llm's "<!-- Start of picture text -->" blocks: the words inside
    # a diagram in reading order) are no sentences; they produced only false relations.
    for line in _COMMENT.sub("\n", chunk.text).split("\n"):
        if table and not line.lstrip().startswith("|"):
            flush_table()
        if not line.strip():
            flush_paragraph()
            continue
        heading = _HEADING.match(line)
        if heading:
            flush_paragraph()
            lead_in = None
            level = len(heading.group(1))
            title = clean_inline(heading.group(2))[0]
            if DEFS_HEADING.search(title):
                def_level = level
                pending_term = None
            elif def_level is not None and def_level and level <= def_level:
                def_level = None
                pending_term = None
            elif def_level is not None and len(title.split()) <= 8 and not title.endswith("."):
                pending_term = re.sub(r"^\W*(?:NEW\W+)?", "", title)
            continue
        if line.lstrip().startswith("|"):
            flush_paragraph()
            table.append(line)
            continue
        figure = _FIGURE.match(line)
        if figure:
            flush_paragraph()
            caption, italics = clean_inline(figure.group(1))
            emit(caption, italics, "caption")
            continue
        is_quote = line.lstrip().startswith(">")
        stripped = re.sub(r"^\s*>\s*(?:\d{1,3}\s+)?", "", line) if is_quote else line
        if _FURNITURE.match(stripped):
            continue
        if _BULLET.match(stripped) or is_quote:
            flush_paragraph()
            para_is_item = bool(_BULLET.match(stripped))
        paragraph.append(stripped)
    flush_paragraph()
    flush_table()
    return units


# --------------------------------------------------------------------------------------
# Definitions in prose
# --------------------------------------------------------------------------------------
_MEANS = re.compile(
    r"^(?:(?:In|For the purposes? of|Under) (?:this|these) [A-Za-z ]{1,40}?,\s*)?"
    r"(?:the (?:term|expression|word|phrase)s?\s+)?"
    r"(?:(?P<q>[\"“‘'])(?P<qterm>[^\"“”‘’]{1,80}?)[\"”’']|(?P<term>[A-Za-z][\w/&’' -]{0,80}?))"
    r"\s*:?\s*,?\s+(?P<verb>means|has the (?:same )?meaning(?: given)?|is defined as|refers to)\b"
    r"(?P<body>.*)$",
    re.DOTALL,
)
#: Sentence boundaries in unit text that is not parsed.
SENTENCE_SPLIT = re.compile(r"(?<=[.;])\s+(?=[\"“‘'(]?[A-Z])")
#: "as defined in", "has the meaning given in": the definition lives in another document.
DEFINED_ELSEWHERE = re.compile(
    r"\b(?:as defined in|has the (?:same )?meaning (?:given (?:to it |to that term )?)?in|"
    r"(?:is |as )?defined in)\s+(?:the\s+)?",
    re.IGNORECASE,
)


def prose_definitions(unit: Unit, in_defs: bool) -> None:
    """Append ``'X' means …`` style definitions found in ``unit`` to its ``definitions``.

    An unquoted term (at most 6 words) counts when it is capitalised, under a definitions
    heading (``in_defs``) or in a sentence opening with "In", "For" or "Under"; "X refers
    to" counts only under a definitions heading.
    """
    offset = 0
    for sentence in SENTENCE_SPLIT.split(unit.text):
        start = unit.text.find(sentence, offset)
        offset = start + len(sentence)
        m = _MEANS.match(sentence)
        if not m:
            continue
        quoted = m.group("qterm") is not None
        term = tidy(m.group("qterm") if quoted else m.group("term"))
        words = term.split()
        if not words or not valid_name(term):
            continue
        if not quoted:
            if len(words) > 6 or words[0].lower() in LEADING_DROP or words[0].lower() in STOP_NAMES:
                continue
            if m.group("verb") == "refers to" and not in_defs:
                continue
            if not (in_defs or sentence.startswith(("In ", "For ", "Under ")) or
                    m.group("verb") != "refers to" and words[0][:1].isupper()):
                continue
        body = m.group("body").strip(" :,")
        if len(body) < 3:
            continue
        unit.definitions.append(
            Definition([term], body, start + m.start("body"), "means")
        )
