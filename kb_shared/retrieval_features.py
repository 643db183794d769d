"""What the fused order misses, put back offline: three question-shaped signals that re-order
search_docs' fused candidates when no reranker does (issue 14, "the right passage first").

* **Definitions.** A question asking what a term means ("What is a virtual transmission node
  (VTN)?", "How does SP 800-171 define CUI?", "what is meant by 'mode'?") prefers the passage
  that *defines* the term: the term (or its acronym, singular or plural) followed by "means",
  "is", "are", "refers to", "is defined as", or introduced by "known as" / "called" /
  "referred to as", or a glossary entry (a table row whose first cell is the term, or a line
  opening with the term in bold followed by its definition).
* **Section numbers.** A number like ``3.1.5`` in the question prefers the passage whose own
  heading carries it (the requirement itself, not a mention of it elsewhere).
* **Document routing.** Words of the question that name one document among the candidates
  (its file name or title words that the other candidate documents lack: "NIST", "fast-start")
  prefer that document's passages.

Each signal adds a fixed bonus to the fused score (``FeatureWeights``; the fused scores of
``kb_shared.stores.vectors`` are ``sum(w / (k + rank))``, about 0.05–0.2 at the top). The
figures these were chosen on are in ``benchmarks/results/retrieval-*.md``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kb_shared.citations import PointPayload
from kb_shared.sparse import STOPWORDS, tokenize

_DEFINITION_QUESTIONS = (
    re.compile(r"\bwhat\s+(?:is|are)\s+meant\s+by\s+(?P<term>.+)", re.I),
    re.compile(r"\bwhat\s+does\s+(?P<term>.+?)\s+(?:mean|stand\s+for|denote)\b", re.I),
    re.compile(r"\bhow\s+(?:does|do|is|are)\s+.+?\s+defined?\s+(?P<term>.+)", re.I),
    re.compile(r"\b(?:define|definition\s+of|meaning\s+of)\s+(?P<term>.+)", re.I),
    re.compile(r"^\s*what\s+(?:is|are)\s+(?:an?\s+|the\s+)?(?P<term>[^,;]+?)\s*\??\s*$", re.I),
)
_ACRONYM = re.compile(r"\(([A-Za-z][A-Za-z0-9&/-]{1,11})\)")
_QUOTED = re.compile(r"(?:(?<=\s)|^)[\u2018'\"\u201c]([^\u2019'\"\u201d]{1,60})[\u2019'\"\u201d]")
#: Where a definition question goes on to ask something else ("… (ALF) and how is it …").
_TERM_END = re.compile(r",|\s(?:and|or)\s+(?:how|what|why|when|where|which|who|is|are|does|do)\b|\s(?:in|under)\s+(?:the\s+)?[A-Z]", re.I)
_SECTION_NUMBER = re.compile(r"\b(\d{1,3}(?:\.\d{1,3}){1,4})\b")
#: Words dropped from the front and back of a term read from a question.
_TERM_EDGES = frozenset("a an the its their this that in of by for to on under a's".split())

_DEFINING_AFTER = r"(?:s)?\s*(?:\([^)]{1,40}\)\s*)?(?:means|is|are|refers?\s+to|is\s+defined\s+as|denotes|—|-|:)\s"
_DEFINING_BEFORE = r"(?:known\s+as|called|referred\s+to\s+as|termed)\s+(?:an?\s+|the\s+|its\s+|their\s+)?"


@dataclass(frozen=True)
class FeatureWeights:
    """Bonuses added to a fused score (module docstring)."""

    definition: float = 0.06
    section_number: float = 0.06
    document: float = 0.03


DEFAULT_FEATURES = FeatureWeights()


def _clean_term(raw: str) -> str:
    words = re.sub(r"[?.!,;:]+$", "", raw.strip()).split()
    while words and words[0].lower() in _TERM_EDGES:
        words.pop(0)
    while words and words[-1].lower() in _TERM_EDGES:
        words.pop()
    return " ".join(words).strip("'\"\u2018\u2019\u201c\u201d")


def definition_terms(question: str) -> list[str]:
    """The terms a definition question asks about, longest first: the phrase after "what is
    (meant by)", "define", "how does … define", its quoted part and its acronym in parentheses;
    ``[]`` when the question is not a definition question."""
    for pattern in _DEFINITION_QUESTIONS:
        match = pattern.search(question)
        if match is None:
            continue
        phrase = _TERM_END.split(match.group("term"), maxsplit=1)[0]
        terms: list[str] = []
        for quoted in _QUOTED.findall(phrase):
            terms.append(_clean_term(quoted))
        for acronym in _ACRONYM.findall(phrase):
            terms.append(acronym)
        if not terms or not _QUOTED.search(phrase):  # a quoted term is the term itself
            terms.append(_clean_term(_ACRONYM.sub(" ", phrase)))
        found = [t for t in dict.fromkeys(terms) if t and len(t) <= 80]
        return sorted(found, key=len, reverse=True)
    return []


#: Words the second cell of a glossary row needs (a definition, not a value or a code).
_DEFINITION_WORDS = 4


def _glossary_row(text: str, term: str) -> bool:
    """A table row whose first cell is ``term`` (plural, bold and a bracketed source note
    allowed) and whose next cell is a definition of at least ``_DEFINITION_WORDS`` words."""
    wanted = term.casefold()
    for line in text.splitlines():
        if not line.lstrip().startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2:
            continue
        first = re.sub(r"\s*[\[(][^\])]{0,40}[\])]\s*$", "", " ".join(cells[0].replace("*", "").split()))
        if first.casefold() in (wanted, wanted + "s") and len(cells[1].split()) >= _DEFINITION_WORDS:
            return True
    return False


def defines(text: str, terms: Sequence[str]) -> bool:
    """``text`` defines one of ``terms`` (module docstring, "Definitions"); case-insensitive."""
    flat = " ".join(text.replace("*", "").replace("_", " ").split())
    for term in terms:
        escaped = re.escape(term)
        # a glossary entry: the term in bold, then its definition as a sentence
        if re.search(rf"(?:^|\n)\s*\*\*{escaped}(?:s)?\*\*\s+[A-Z(]", text, re.I):
            return True
        if re.search(rf"(?:^|[\s|(]){escaped}{_DEFINING_AFTER}", flat, re.I):
            return True
        if re.search(rf"{_DEFINING_BEFORE}{escaped}(?:s)?\b", flat, re.I):
            return True
        if _glossary_row(text, term):
            return True
    return False


def section_numbers(question: str) -> list[str]:
    """Clause or requirement numbers in ``question`` (``3.1.5``), not decimals of a value."""
    return [n for n in _SECTION_NUMBER.findall(question) if not re.fullmatch(r"\d+\.\d{2,}", n)]


def heads_with(payload: PointPayload, text: str, numbers: Sequence[str]) -> bool:
    """The passage's own heading (the last of its heading path, or a heading line that opens
    its text) starts with one of ``numbers``."""
    heading = payload.section.rsplit(" › ", 1)[-1] if payload.section else ""
    opening = next((line for line in text.splitlines() if line.strip()), "")
    candidates = [heading, opening.lstrip("#| ").replace("*", "")]
    return any(
        re.match(rf"\s*{re.escape(number)}(?!\.?\d)", candidate)
        for number in numbers for candidate in candidates
    )


def _document_words(payload: PointPayload) -> set[str]:
    text = f"{payload.name.replace('_', ' ')} {payload.title}"
    return {t for t in tokenize(text) if t.isalpha() and len(t) > 2 and t not in STOPWORDS}


def routed_documents(question: str, payloads: Sequence[PointPayload]) -> set[str]:
    """Doc ids among the candidates that the question names: a word of the question that is in
    the document's file name or title and in no other candidate document's."""
    words = {t for t in tokenize(question) if t.isalpha()}
    by_document: dict[str, set[str]] = {}
    for payload in payloads:
        by_document.setdefault(payload.doc_id, _document_words(payload))
    routed = set()
    for doc_id, own in by_document.items():
        others = set().union(*(w for d, w in by_document.items() if d != doc_id))
        if own & words - others:
            routed.add(doc_id)
    return routed if len(routed) < len(by_document) else set()


@dataclass(frozen=True)
class Signals:
    """What ``signals`` read from a question once: definition terms, section numbers."""

    terms: tuple[str, ...]
    numbers: tuple[str, ...]

    @property
    def any(self) -> bool:
        """Something to re-order by (routing aside)."""
        return bool(self.terms or self.numbers)


def signals(question: str) -> Signals:
    """Read the definition terms and section numbers of ``question``."""
    return Signals(tuple(definition_terms(question)), tuple(section_numbers(question)))


def bonuses(
    question: str,
    texts: Sequence[str],
    payloads: Sequence[PointPayload],
    weights: FeatureWeights = DEFAULT_FEATURES,
) -> list[float]:
    """The bonus of each candidate (parallel lists ``texts``/``payloads``) for ``question``."""
    read = signals(question)
    routed = routed_documents(question, payloads)
    out = []
    for text, payload in zip(texts, payloads, strict=True):
        bonus = 0.0
        if read.terms and defines(text, read.terms):
            bonus += weights.definition
        if read.numbers and heads_with(payload, text, read.numbers):
            bonus += weights.section_number
        if payload.doc_id in routed:
            bonus += weights.document
        out.append(bonus)
    return out
