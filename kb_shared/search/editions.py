"""Version-aware "not in the corpus": a question that names an edition (a financial year, a
version or revision) the corpus does not hold, while the documents it would be answered from
are another edition of the same publication, gets that said instead of the neighbour's text.

Issue 14 ("Version-aware refusal"): "the corpus has the 2020-21 report, not 2021-22". A
compliance user asking for this year's figure must not be served last year's silently.

* ``editions_in`` reads edition markers from text: financial years (``2021-22``,
  ``2021/22``, ``FY 2020-21``, ``2020-2021`` → ``2020-21``) and version numbers (``Version
  3.2``, ``v3``, ``Rev. 3``, ``Revision 3``, ``800-171r2`` → ``2``; versions and revisions are
  one kind: both number a document's editions). Calendar years alone are not editions (every
  document is full of them).
* ``edition_question`` reads what a query asks once (its markers and subject words; the search
  pipeline does it in ``kb_shared.search.query.analyse``); ``edition_mismatch`` compares them
  with the markers of the documents a search would answer from (name, title and version label
  of the top results). It reports a mismatch only when a result document is about the same
  thing (its name or title shares a content word with the query), carries an edition of the
  asked kind, and no such document carries the asked one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kb_shared.search.sparse import tokenize

#: Marker kinds.
FINANCIAL_YEAR = "financial year"
VERSION = "version"

_FY = re.compile(r"\b(?:fy\s?)?((?:19|20)\d{2})\s?[-\u2010-\u2013/]\s?((?:19|20)?\d{2})\b", re.I)
_VERSION = re.compile(r"\b(?:version|ver\.?|revision|rev\.?|v)\s?(\d+(?:\.\d+)*)\b", re.I)
#: NIST-style file names: ``800-171r2``.
_NAME_REVISION = re.compile(r"(?<=\d)r(\d+)\b", re.I)

#: Query words that never count as shared subject matter.
_GENERIC = frozenset(
    "what which who how when where is are was the of for in on to a an and or version "
    "revision edition year financial report document fy rev ver".split()
)


@dataclass(frozen=True)
class Edition:
    """One edition marker: its kind (``FINANCIAL_YEAR`` or ``VERSION``) and normalised value
    (``"2020-21"``, ``"3.2"``)."""

    kind: str
    value: str

    def label(self) -> str:
        """How the marker reads in a sentence: ``"2020-21"``, ``"version 3.2"``."""
        return self.value if self.kind == FINANCIAL_YEAR else f"version {self.value}"


def _financial_year(first: str, second: str) -> str | None:
    start = int(first)
    end = int(second) if len(second) == 4 else (start // 100) * 100 + int(second)
    return f"{start}-{end % 100:02d}" if end == start + 1 else None


def _version(value: str) -> str:
    parts = value.split(".")
    while len(parts) > 1 and int(parts[-1]) == 0:
        parts.pop()
    return ".".join(str(int(p)) for p in parts)


def editions_in(text: str, *, file_name: bool = False) -> list[Edition]:
    """The edition markers of ``text`` in order, each once (module docstring); with
    ``file_name`` also the ``r2`` revision suffix of names like ``800-171r2``."""
    plain = text.replace("_", " ")
    found: list[Edition] = []
    for match in _FY.finditer(plain):
        year = _financial_year(match.group(1), match.group(2))
        if year is not None:
            found.append(Edition(FINANCIAL_YEAR, year))
    for match in _VERSION.finditer(plain):
        found.append(Edition(VERSION, _version(match.group(1))))
    if file_name:
        for match in _NAME_REVISION.finditer(plain):
            found.append(Edition(VERSION, _version(match.group(1))))
    return list(dict.fromkeys(found))


def _same(asked: Edition, held: Edition) -> bool:
    """``held`` is the asked edition: equal, or a version under the asked one (``3`` holds
    ``3.2``)."""
    if asked.kind != held.kind:
        return False
    if asked.value == held.value:
        return True
    return asked.kind == VERSION and held.value.startswith(asked.value + ".")


@dataclass(frozen=True)
class HeldDocument:
    """A document a search would answer from: its file name, title and version label."""

    name: str
    title: str
    version: str = ""

    def editions(self) -> list[Edition]:
        """Its markers: from the name (with file-name revisions), the title, and the version
        label read as a version."""
        marks = editions_in(self.name, file_name=True) + editions_in(self.title)
        if self.version.strip():
            label = self.version.strip()
            marks += editions_in(label) or (
                [Edition(VERSION, _version(label))] if re.fullmatch(r"\d+(?:\.\d+)*", label) else []
            )
        return list(dict.fromkeys(marks))

    def words(self) -> set[str]:
        """Content words of its name and title (lower-case, without a plural ``s``)."""
        return {_stem(t) for t in tokenize(f"{self.name.replace('_', ' ')} {self.title}") if t.isalpha()}


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


@dataclass(frozen=True)
class EditionMismatch:
    """The query asks for ``asked``; the documents it would be answered from hold ``held``
    (title and edition each) instead."""

    asked: Edition
    held: tuple[tuple[str, Edition], ...]

    def message(self) -> str:
        """The sentence search_docs leads with (module docstring)."""
        held = "; ".join(f"{title} ({edition.label()})" for title, edition in self.held)
        return (
            f"Not in the corpus: the question asks for {self.asked.label()}, but the indexed "
            f"documents on this hold only {held}. Tell the user the corpus has that edition, "
            f"not {self.asked.label()}, and do not answer from it as if it were; the document "
            "they need can be requested with request_document."
        )


@dataclass(frozen=True)
class EditionQuestion:
    """What a query asks about editions, read once (``edition_question``).

    Attributes:
        asked: its edition markers in order (``editions_in``); empty for most questions.
        words: its content words (lower-case, without a plural ``s``, generic words such as
            "report" or "version" left out); empty when ``asked`` is.
    """

    asked: tuple[Edition, ...]
    words: frozenset[str]

    def naming(self, terms: Iterable[str]) -> EditionQuestion:
        """The same question with ``terms`` among its subject words (the long forms of the
        abbreviations it names, ``kb_shared.search.query.analyse``: "the 2021-22 MLF" is on
        the subject of "Marginal Loss Factors: FY 2020-21"); itself when it asks no edition."""
        if not self.asked:
            return self
        extra = {_stem(t) for t in terms if t.isalpha()} - _GENERIC
        return EditionQuestion(self.asked, self.words | extra)


def edition_question(query: str, tokens: Sequence[str] | None = None) -> EditionQuestion:
    """Read ``query``'s edition markers and subject words; ``tokens``: its
    ``kb_shared.search.sparse.tokenize`` terms when the caller has them."""
    asked = tuple(editions_in(query))
    if not asked:
        return EditionQuestion((), frozenset())
    terms = tokenize(query) if tokens is None else tokens
    return EditionQuestion(asked, frozenset(_stem(t) for t in terms if t.isalpha()) - _GENERIC)


def edition_mismatch(
    query: str | EditionQuestion, documents: Sequence[HeldDocument]
) -> EditionMismatch | None:
    """The first edition the query asks for that ``documents`` (the answer's top documents)
    lack while holding another edition of the same kind (module docstring); ``None`` when the
    query names no edition, a document holds it, or no document is on the query's subject.
    ``query``: the text, or what ``edition_question`` read from it."""
    question = query if isinstance(query, EditionQuestion) else edition_question(query)
    if not question.asked:
        return None
    relevant = [d for d in documents if d.words() & question.words]
    for asked in question.asked:
        held: list[tuple[str, Edition]] = []
        for document in relevant:
            marks = [m for m in document.editions() if m.kind == asked.kind]
            if any(_same(asked, m) for m in marks):
                return None
            held += [(document.title or document.name, m) for m in marks]
        if held:
            return EditionMismatch(asked, tuple(dict.fromkeys(held)))
    return None
