"""Mentions of entities in unit text: by pattern (clause references, standards, codes,
document names, quoted titles), and the canonical name of a span the parser found.

Clause references qualified by a known document become one entity with that document as
parent ("clause 3.8.1 of the NER" → ``NER clause 3.8.1``, PART_OF ``NER``). Codes are
identifiers kept whole (``IN008-24``, ``SO_OP_3705``, ``VIC1-NSW1``, ``N>>N-NIL_3``, DUIDs
like ``BW01``). Names lose leading determiners and generic modifiers and a trailing
possessive, and their last word is made singular ("the Retailers" → "Retailer").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kb_shared.graph_model import entity_key
from kb_shared.providers.graph_vocabulary import (
    CODE,
    DEFINED_TERM,
    DOCUMENT,
    DOCUMENT_HEADS,
    KNOWN_BY_KEY,
    KNOWN_NAMES,
    ROLE,
    ROLE_HEADS,
    ROLE_PARTICIPLES,
)
from kb_shared.providers.spacy_graph.names import LEADING_DROP, ROLE_FORMS, singular, tidy

if TYPE_CHECKING:
    from spacy.tokens import Span

# --------------------------------------------------------------------------------------
# Patterns
# --------------------------------------------------------------------------------------
_KNOWN_DOCS = [(c, e) for c, k, e in KNOWN_NAMES if k == DOCUMENT]
_PARENT = "|".join(
    sorted({re.escape(n) for c, e in _KNOWN_DOCS for n in (c, e) if n}, key=len, reverse=True)
)
_KNOWN_DOC_NAMES = re.compile(rf"(?<![\w-])(?:{_PARENT})(?![\w-])")
_NUMBER = r"\d+[A-Z]?(?:\.\d+[A-Z]{0,2})+"
_CLAUSE_WORD = r"(?:[Cc]lauses?|[Rr]ules?|[Ss]ections?|[Pp]aragraphs?|[Ss]chedules?|[Cc]hapters?|[Pp]arts?)"
_PARAS = r"(?:\s?\((?:[a-z]{1,2}\d?|\d{1,2}|[ivx]{1,4})\))*"
_ANY_NUMBER = r"\d+[A-Z]?(?:\.\d+[A-Z]{0,2})*"
_MORE = rf"(?:\s*(?:,|and|or|to)\s*(?:{_ANY_NUMBER}){_PARAS}|\s*,\s*\([a-z0-9]+\))*"
_CLAUSE_AFTER = re.compile(
    rf"\b(?P<doc>{_PARENT})\s+(?:(?P<word>{_CLAUSE_WORD})\s+(?P<n1>{_ANY_NUMBER}{_PARAS}{_MORE})"
    rf"|(?P<n2>{_NUMBER}{_PARAS}))"
)
_CLAUSE_BEFORE = re.compile(
    rf"\b(?P<word>{_CLAUSE_WORD})\s+(?P<n1>{_ANY_NUMBER}{_PARAS}{_MORE})"
    rf"\s+of\s+(?:the\s+)?(?P<doc>{_PARENT})\b"
)
_PARAGRAPHS = re.compile(r"\([^)]*\)")
#: Standards and regulations with the canonical name of each match.
_STANDARDS: tuple[tuple[re.Pattern[str], Any], ...] = (
    (
        re.compile(
            r"\b(?:NIST\s+)?(?:Special\s+Publication\s+(?:\(SP\)\s+)?|SP\s+)"
            r"(\d{3}-\d{1,3}[A-Z]?)(?:r\d)?\b"
        ),
        lambda m: f"SP {m.group(1)}",
    ),
    (re.compile(r"\bFIPS\s+(?:PUB\s+)?(\d{2,3}(?:-\d)?)\b"), lambda m: f"FIPS {m.group(1)}"),
    (
        re.compile(r"\bAS/NZS\s*(?:IEC\s*)?\d{3,5}(?:\.\d+)*(?::\d{4})?"),
        lambda m: " ".join(m.group(0).split()),
    ),
    (
        re.compile(r"\b(?:AS|IEC|ISO(?:/IEC)?|IEEE|EN)\s+\d{3,5}(?:[.-]\d+)*(?::\d{4})?"),
        lambda m: " ".join(m.group(0).split()),
    ),
    (
        re.compile(r"\b\d{1,2}\s+(?:U\.?S\.?C\.?|CFR)\s+(?:Part\s+)?\d+[\w.-]*"),
        # "32 CFR Part 2002" and "32 CFR 2002" are one regulation
        lambda m: re.sub(r"\s+Part\s+", " ", " ".join(m.group(0).split()).replace("U.S.C.", "USC")),
    ),
    (re.compile(r"\bOMB\s+(?:Circular\s+)?A-\d{2,3}\b"), lambda m: " ".join(m.group(0).split())),
    (re.compile(r"\bExecutive\s+Order\s+\d{5}\b"), lambda m: " ".join(m.group(0).split())),
)
#: Identifiers kept whole; the tokenizer of the pipeline keeps them as one token too.
CODES = re.compile(
    r"(?<![\w/.#-])(?:"
    r"[A-Z]{1,6}\d{1,5}[A-Z]?(?:[-_./#][A-Z0-9]+)+"  # IN008-24, VIC1-NSW1, BW01.NBAY1
    r"|[A-Z]{2,}#\d+(?:\.[A-Z0-9]+)*"  # TARONG#1.QTRN1
    r"|[A-Z][A-Za-z0-9]*_[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*"  # SO_OP_3705, ADG_ID
    r"|[A-Z0-9]{1,4}(?:>>|\^\^|::|<<|>)[A-Z0-9][A-Z0-9_>^:+-]*"  # N>>N-NIL_3
    r"|[A-Z]{3,}(?:[A-Z][a-z0-9]{2,})+"  # UIGFSurplus (not "DNSPs")
    r"|[A-Z][a-z]+(?:[A-Z][a-z0-9]+){2,}[A-Z0-9]*"  # TimeErrorThreshold (3+ humps)
    r"|[A-Z]{2,}\d{1,4}[A-Z]?"  # NSW1, BW01
    r")(?![\w#-]|\.\w)"
)
_DOC_NAME = re.compile(
    r"(?<![\w-])(?:[A-Z][A-Za-z0-9&-]*\s+)(?:(?:[A-Z][A-Za-z0-9&-]*|of|and|for|on|in|to)\s+){0,8}?"
    r"(?:" + "|".join(re.escape(h) for h in sorted(DOCUMENT_HEADS, key=len, reverse=True)) + r")"
    r"(?:\s+\(?\d{4}\)?)?(?![\w-])(?!\s+[A-Z][a-z])"  # not "Consumer Action Law Centre"
)
_NOT_TITLE_START = frozenset(
    "In On For To Of And At By With From Under See Refer Where When If As Each All Any".split()
)
_HAS_DOCUMENT_HEAD = re.compile(
    r"\b(?:" + "|".join(re.escape(h) for h in DOCUMENT_HEADS) + r"|Report|Guide|Publication)\b"
)
_QUOTED = re.compile(r"[“\"]([A-Z][^”\"]{3,120}?)[”\"]")
#: Words that make a capitalised spaCy ORG/LAW span a heading reference, not a name.
NOT_NAMES = re.compile(r"\b(?:Chapter|Section|Appendix|Table|Figure|Part|Page)\b")
_CAMEL_NOT_CODES = frozenset({"PowerPoint", "SharePoint", "JavaScript", "McDonald", "YouTube"})


# --------------------------------------------------------------------------------------
# Mentions by pattern
# --------------------------------------------------------------------------------------
@dataclass(slots=True)
class RegexMention:
    """A pattern match in unit text: character offsets, canonical name, entity type, and for
    a clause reference the document it belongs to (``parent``)."""

    start: int
    end: int
    name: str
    type: str
    parent: str = ""


def known_canonical(name: str) -> str:
    """The canonical form of a well-known name or expansion ("National Electricity Rules" →
    "NER"), else ``name``."""
    hit = KNOWN_BY_KEY.get(entity_key(name))
    return hit[0] if hit else name


def regex_mentions(text: str) -> list[RegexMention]:
    """Every pattern match in ``text`` (overlapping matches included; callers pick the
    longest): clause references, known documents, standards, codes, Title-Case document
    names and quoted document titles."""
    found: list[RegexMention] = []
    for pattern in (_CLAUSE_BEFORE, _CLAUSE_AFTER):
        for m in pattern.finditer(text):
            numbers = m.group("n1") or m.groupdict().get("n2")
            if not numbers:
                continue
            word = (m.group("word") or "clause").lower().rstrip("s")
            word = "clause" if word in ("clause", "rule", "section", "paragraph") else word
            parent = known_canonical(m.group("doc"))
            # "Clauses 4.9.6(a)(1) and 4.9.7(a) of the NER": one mention per number, the
            # first starting at the match, the last ending with it.
            offset = m.start("n1") if m.group("n1") else m.start("n2")
            located = [
                (offset + n.start(), offset + n.end(), n.group(0))
                for n in re.finditer(_ANY_NUMBER, _PARAGRAPHS.sub(lambda p: " " * len(p.group(0)), numbers))
            ]
            for i, (a, b, number) in enumerate(located):
                start = m.start() if i == 0 else a
                end = m.end() if i == len(located) - 1 else b
                found.append(
                    RegexMention(start, end, f"{parent} {word} {number}", DOCUMENT, parent)
                )
    for m in _KNOWN_DOC_NAMES.finditer(text):
        found.append(RegexMention(m.start(), m.end(), known_canonical(m.group(0)), DOCUMENT))
    for pattern, namer in _STANDARDS:
        for m in pattern.finditer(text):
            found.append(RegexMention(m.start(), m.end(), namer(m), DOCUMENT))
    for m in CODES.finditer(text):
        code = m.group(0)
        if code in _CAMEL_NOT_CODES or entity_key(code) in KNOWN_BY_KEY:
            continue
        if re.fullmatch(r"[Vv]\d+(?:\.\d+)+", code):  # a version number
            continue
        if re.fullmatch(r"[A-Z0-9_]*[A-Z0-9]s", code) and len(code) > 3:  # DUIDs, ADG_IDs
            code = code[:-1]
        found.append(RegexMention(m.start(), m.end(), code, CODE))
    for m in _DOC_NAME.finditer(text):
        name = re.sub(r"^(?:The|This|These|Our|Its|A|An)\s+", "", m.group(0))
        words = name.split()
        if len(words) < 2 or words[0] in _NOT_TITLE_START:
            continue
        head_at = len(words) - (3 if name.endswith(("Terms and Conditions", "Notice to Market")) else 1)
        if re.fullmatch(r"\(?\d{4}\)?", words[-1]):
            head_at -= 1
        if head_at < 1 or words[head_at - 1] in ("of", "and", "for", "on", "in", "to"):
            continue
        # "NER National Electricity Rules" (a glossary row): the known name is the document
        for cut in range(1, len(words) - 1):
            suffix = " ".join(words[cut:])
            if entity_key(suffix) in KNOWN_BY_KEY:
                name = suffix
                break
        found.append(RegexMention(m.end() - len(name), m.end(), known_canonical(name), DOCUMENT))
    for m in _QUOTED.finditer(text):
        title = m.group(1).strip()
        words = title.split()
        capitalised = sum(1 for w in words if w[:1].isupper())
        if (2 <= len(words) <= 14 and capitalised >= 2 and not title.endswith((".", ","))
                and _HAS_DOCUMENT_HEAD.search(title)):
            found.append(RegexMention(m.start(1), m.end(1), title, DOCUMENT))
    return found


def classify(name: str, default: str) -> str:
    """Type of a bare name (an abbreviation's expansion): a known name's type, ``Document``
    for a Title-Case name ending in a document word, ``Role`` for a role head noun, else
    ``default``."""
    known = KNOWN_BY_KEY.get(entity_key(name))
    if known:
        return known[1]
    words = name.split()
    if _DOC_NAME.fullmatch(name) and len(words) >= 2:
        return DOCUMENT
    if words and words[-1].lower() in ROLE_FORMS:
        return ROLE
    return default


def singular_name(name: str) -> str:
    """``name`` with its last word singular (not for document names: "… Guidelines")."""
    words = name.split()
    if not words or classify(name, DEFINED_TERM) == DOCUMENT:
        return name
    return " ".join(words[:-1] + [singular(words[-1])])


# --------------------------------------------------------------------------------------
# Mentions in a parsed unit
# --------------------------------------------------------------------------------------
@dataclass(slots=True, eq=False)
class Mention:
    """An entity mention in a parsed unit: token offsets ``[start, end)``, canonical name,
    type, and for a clause reference its document (``parent``)."""

    start: int
    end: int
    name: str
    type: str
    parent: str = ""


def span_name(span: Span, singularise: bool = True, role: bool = False) -> str:
    """Canonical name of a span: determiners, generic modifiers, punctuation and a possessive
    trimmed; the last word singular; for a role, a leading lower-case participle dropped
    unless it is a standing qualifier (``ROLE_PARTICIPLES``: "authorized user")."""
    tokens = list(span)
    while tokens and (
        tokens[0].lower_ in LEADING_DROP or tokens[0].is_punct or tokens[0].is_space
        or tokens[0].tag_ in ("PRP$", "DT")
        or (role and len(tokens) > 1 and tokens[0].pos_ == "VERB" and tokens[0].is_lower
            and tokens[0].lower_ not in ROLE_PARTICIPLES)
    ):
        tokens = tokens[1:]
    while tokens and (tokens[-1].is_punct or tokens[-1].tag_ == "POS" or tokens[-1].is_space):
        tokens = tokens[:-1]
    if not tokens:
        return ""
    words = [t.text + t.whitespace_ for t in tokens]
    last = tokens[-1]
    plural = last.tag_ in ("NNS", "NNPS") or re.fullmatch(r"[A-Z0-9]{2,}s", last.text)
    if singularise and (plural or (role and last.lower_ in ROLE_FORMS
                                   and last.lower_ not in ROLE_HEADS)):
        words[-1] = singular(last.text)
    return tidy("".join(words).strip())
