"""What the fused order misses, put back offline: three question-shaped signals that re-order
search_docs' fused candidates when no reranker does (issue 14, "the right passage first").

* **Definitions.** A question asking what a term means ("What is a virtual transmission node
  (VTN)?", "How does SP 800-171 define CUI?", "what is meant by 'mode'?") prefers the passage
  that *defines* the term: the term (or its acronym, singular or plural; bare or in quotes,
  straight or curly) followed by "means", "is", "are", "refers to", "is defined as", or
  introduced by "known as" / "called" / "referred to as", or a glossary entry (a table row
  whose first cell is the term, or a line opening with the term in bold followed by its
  definition).
* **Section numbers.** A number like ``3.1.5`` in the question prefers the passage whose own
  heading carries it (the requirement itself, not a mention of it elsewhere).
* **Document routing.** Words of the question that name one document among the candidates
  (its file name or title words that the other candidate documents' names and titles lack:
  "NIST", "fast-start", "3M", "Best Buy" for ``BESTBUY_…``, "FY2018" for ``…_2018_…``)
  prefer that document's passages, and only its rows and sentences earn the unit bonus below
  (another filing's table must not win on its row alone).
* **Financial statements.** A question naming a primary statement ("… shown in the cash flow
  statement", "balance sheet", "P&L") prefers the statement's own passages (``STATEMENTS``).
* **Tables.** A question that speaks of a table prefers passages holding one.
* **Rows and sentences.** Each candidate is cut into *units* (``units``): a table row read
  with its header row and the chunk's own heading (the table's caption), or a sentence of
  prose. Each unit is scored by the share of the question's terms and adjacent term pairs it
  holds, each weighted by its BM25 IDF over the candidates (``query_weights``), so the rare
  words of a question ("Broken Hill Solar Farm") count most. The candidate whose best unit
  leads all others gains by its lead: a large table ranks low on meaning, yet one of its rows
  may hold the whole question. The best unit is also the result's quote
  (``kb_shared.search.quotes``).

What the signals read from the question is read once per search (``QuestionShape``, built by
``question_shape`` inside ``kb_shared.search.query.analyse``); ``bonuses``, ``best_units``,
``query_weights`` and ``routed_documents`` take either the question's text or its shape.

Each signal adds a bonus to the fused score (``FeatureWeights``: fixed, or times a share for
units; the fused scores of ``kb_shared.stores.vectors`` are ``sum(w / (k + rank))``, about
0.05–0.2 at the top). The figures these were chosen on are in
``benchmarks/results/retrieval-*.md`` (units: ``retrieval-levers-2026-12-01.md``; routing,
statements, tables: ``retrieval-levers-2026-12-01-round3.md``). Three levers tuned on the
first two sets lost on the set they were not tuned with and were removed (a bonus for every
candidate's best-unit share, routing that also read other documents' passages, and pulling in
tables below the fused cut by their best row): ``levers-loso-2026-12-06-baseline.md``.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from kb_shared.ingest.chunking import sentence_starts
from kb_shared.search.citations import PointPayload, naming_title
from kb_shared.search.sparse import STOPWORDS, tokenize

_DEFINITION_QUESTIONS = (
    re.compile(r"\bwhat\s+(?:is|are)\s+meant\s+by\s+(?P<term>.+)", re.I),
    re.compile(r"\bwhat\s+does\s+(?P<term>.+?)\s+(?:mean|stand\s+for|denote)\b", re.I),
    re.compile(r"\bhow\s+(?:does|do|is|are)\s+.+?\s+defined?\s+(?P<term>.+)", re.I),
    re.compile(r"\b(?:define|definition\s+of|meaning\s+of)\s+(?P<term>.+)", re.I),
    re.compile(r"^\s*what\s+(?:is|are)\s+(?:an?\s+|the\s+)?(?P<term>[^,;]+?)\s*\??\s*$", re.I),
)
_ACRONYM = re.compile(r"\(([A-Za-z][A-Za-z0-9&/-]{1,11})\)")
#: The quote marks a term may stand in, straight or curly ("‘Business Day’ means …").
_OPENING_QUOTES = "\u2018\u201c'\""
_CLOSING_QUOTES = "\u2019\u201d'\""
_QUOTED = re.compile(
    rf"(?:(?<=\s)|^)[{_OPENING_QUOTES}]([^{_CLOSING_QUOTES}]{{1,60}})[{_CLOSING_QUOTES}]"
)
#: Where a definition question goes on to ask something else ("… (ALF) and how is it …").
_TERM_END = re.compile(r",|\s(?:and|or)\s+(?:how|what|why|when|where|which|who|is|are|does|do)\b|\s(?:in|under)\s+(?:the\s+)?[A-Z]", re.I)
_SECTION_NUMBER = re.compile(r"\b(\d{1,3}(?:\.\d{1,3}){1,4})\b")
#: Words dropped from the front and back of a term read from a question.
_TERM_EDGES = frozenset("a an the its their this that in of by for to on under a's".split())

_OPENING_QUOTE = f"[{_OPENING_QUOTES}]?"
_CLOSING_QUOTE = f"[{_CLOSING_QUOTES}]?"
_DEFINING_AFTER = rf"(?:s)?{_CLOSING_QUOTE}\s*(?:\([^)]{{1,40}}\)\s*)?(?:means|is|are|refers?\s+to|is\s+defined\s+as|denotes|—|-|:)\s"
_DEFINING_BEFORE = rf"(?:known\s+as|called|referred\s+to\s+as|termed)\s+(?:an?\s+|the\s+|its\s+|their\s+)?{_OPENING_QUOTE}"


@dataclass(frozen=True)
class FeatureWeights:
    """Bonuses added to a fused score (module docstring); chosen on both shared eval sets,
    benchmarks/results/retrieval-levers-2026-12-01-round3.md, and kept where they held on the
    set they were not tuned with (leave one set out: levers-loso-2026-12-06-baseline.md)."""

    definition: float = 0.06
    section_number: float = 0.06
    document: float = 0.06
    #: a passage of the financial statement the question names (``statements_named``)
    statement: float = 0.1
    #: when the question names documents (``routed_documents``), only their passages' rows and
    #: sentences earn the unit bonuses (True) or every candidate's do (False)
    routed_units_only: bool = True
    #: a passage holding a table, when the question asks about a table (``asks_for_table``)
    table: float = 0.1
    #: times the best unit's lead over the next candidate's best unit, for the leader only
    unit_lead: float = 0.3


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
    words = wanted.split()
    first_word = words[0] if words else ""
    for line in text.splitlines():
        if not line.lstrip().startswith("|"):
            continue
        if first_word not in line.replace("*", "").casefold():  # that cell cannot be the term
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2:
            continue
        first = re.sub(r"\s*[\[(][^\])]{0,40}[\])]\s*$", "", " ".join(cells[0].replace("*", "").split()))
        if first.casefold() in (wanted, wanted + "s") and len(cells[1].split()) >= _DEFINITION_WORDS:
            return True
    return False


#: ``(text, terms)`` answers ``defines`` keeps: a definition question asks it of the same
#: candidates twice (the keyword look-up, then the bonus), and of the same glossary chunks
#: question after question (benchmarks/results/serving-2026-12-02-latency-round6.md).
DEFINES_CACHE = 4096


def defines(text: str, terms: Sequence[str]) -> bool:
    """``text`` defines one of ``terms`` (module docstring, "Definitions"); case-insensitive.

    A term that is nowhere in the text (``*`` and ``_`` aside, whitespace collapsed, case
    folded) is skipped before any of the four patterns runs: each of them matches the term's
    own characters. Answers are kept for the last ``DEFINES_CACHE`` pairs."""
    return _defines(text, tuple(terms))


@lru_cache(maxsize=DEFINES_CACHE)
def _defines(text: str, terms: tuple[str, ...]) -> bool:
    flat = " ".join(text.replace("*", "").replace("_", " ").split())
    folded = flat.casefold()
    for term in terms:
        needle, glossary_entry, defined_after, defined_before = _definition_patterns(term)
        if needle not in folded:
            continue
        # a glossary entry: the term in bold, then its definition as a sentence
        if glossary_entry.search(text):
            return True
        if defined_after.search(flat) or defined_before.search(flat):
            return True
        if _glossary_row(text, term):
            return True
    return False


@lru_cache(maxsize=256)
def _definition_patterns(
    term: str,
) -> tuple[str, re.Pattern[str], re.Pattern[str], re.Pattern[str]]:
    """``defines``' look-ups for one term: its folded form, then its three patterns compiled."""
    escaped = re.escape(term)
    return (
        " ".join(term.replace("*", "").replace("_", " ").split()).casefold(),
        re.compile(rf"(?:^|\n)\s*\*\*{escaped}(?:s)?\*\*\s+[A-Z(]", re.I),
        re.compile(rf"(?:^|[\s|(]){_OPENING_QUOTE}{escaped}{_DEFINING_AFTER}", re.I),
        re.compile(rf"{_DEFINING_BEFORE}{escaped}(?:s)?\b", re.I),
    )


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


def _document_words(payload: PointPayload) -> frozenset[str]:
    return _name_words(payload.name, payload.title)


#: A year as a question names it (``2018``, ``FY2018``, ``FY 2018``); a financial-year range's
#: first year (``2020-21``) too.
_QUESTION_YEAR = re.compile(r"(?<![\w.])(?:fy\s?)?((?:19|20)\d\d)(?![\d.])", re.I)


def _naming_word(term: str) -> bool:
    """A sparse term that can name a document: letters, or letters with digits ("3m"), of
    two characters or more, not a stopword nor a version mark (``v1``, ``r2``: editions are
    ``kb_shared.search.editions``' business); a year (4 digits, 19xx/20xx) too."""
    if term in STOPWORDS or not term.isalnum():
        return False
    if term.isdigit():
        return len(term) == 4 and term[:2] in ("19", "20")
    return len(term) > 1 and not (len(term) == 2 and term[1].isdigit() and term[0] in "vr")


@lru_cache(maxsize=1024)
def _name_words(name: str, title: str) -> frozenset[str]:
    """``_naming_word`` terms of a file name (without ``.pdf``, ``_`` as a space) and of what
    names the document in its title (``naming_title``); two-letter words only with a digit
    ("3m", not "of")."""
    stem = re.sub(r"\.pdf$", "", name, flags=re.I)
    text = f"{stem.replace('_', ' ')} {naming_title(title)}"
    return frozenset(t for t in tokenize(text) if _naming_word(t) and (len(t) > 2 or t[0].isdigit()))


def question_naming_words(question: str, tokens: Sequence[str] | None = None) -> frozenset[str]:
    """The words of ``question`` that may name a document: its ``_naming_word`` terms, each
    adjacent pair of them glued ("Best Buy" -> ``bestbuy``, as file names write it) and the
    years it names (``FY2018`` -> ``2018``). ``tokens``: its ``tokenize`` terms when known."""
    terms = [t for t in (tokenize(question) if tokens is None else tokens) if _naming_word(t)]
    glued = {a + b for a, b in zip(terms, terms[1:]) if a.isalpha() and b.isalpha()}
    return frozenset({*terms, *glued, *_QUESTION_YEAR.findall(question)})


def routed_documents(question: str | QuestionShape, payloads: Sequence[PointPayload]) -> set[str]:
    """Doc ids among the candidates that the question names: a word of the question
    (``question_naming_words``) that is in the document's file name or title and in no other
    candidate document's; none when every candidate document is named."""
    words = shape_of(question).naming_words
    by_document: dict[str, frozenset[str]] = {}
    for payload in payloads:
        by_document.setdefault(payload.doc_id, _document_words(payload))
    routed = set()
    for doc_id, own in by_document.items():
        others = set().union(*(w for d, w in by_document.items() if d != doc_id))
        if own & words - others:
            routed.add(doc_id)
    return routed if len(routed) < len(by_document) else set()


# ---------------------------------------------------------------------------------------------
# Financial statements
# ---------------------------------------------------------------------------------------------

#: The primary financial statements, by the names a question gives them and (matched against a
#: heading with everything but letters removed, so "Cash Flow s" and "Balance Shee t" from a
#: PDF's split words still match) the titles filings give them: US GAAP (Regulation S-X
#: art. 5-02/5-03, ASC 230) and IAS 1 para. 10 names; "Consolidated" (also in "Condensed
#: Consolidated …") is required so a note about a statement ("Supplemental Balance Sheet
#: Information") is not the statement.
STATEMENTS: dict[str, tuple[re.Pattern[str], re.Pattern[str]]] = {
    "balance sheet": (
        re.compile(r"\bbalance\s+sheets?\b|\bstatements?\s+of\s+financial\s+position\b", re.I),
        re.compile(r"consolidated(?:statements?of)?(?:balancesheets?|financialposition)"),
    ),
    "income statement": (
        re.compile(
            r"\bincome\s+statements?\b|\bstatements?\s+of\s+(?:comprehensive\s+)?(?:income|"
            r"operations|earnings)\b|\bp\s?&\s?l\b|\bprofit\s+(?:and|&)\s+loss\b", re.I
        ),
        re.compile(
            r"consolidated(?:statements?of(?:comprehensive)?(?:income|operations|earnings|loss)"
            r"|incomestatements?)"
        ),
    ),
    "cash flow statement": (
        re.compile(r"\bcash\s+flows?\s+statements?\b|\bstatements?\s+of\s+cash\s+flows?\b", re.I),
        re.compile(r"consolidatedstatements?ofcashflows?"),
    ),
}

_NOT_LETTERS = re.compile(r"[^a-z]+")

def statements_named(question: str) -> tuple[str, ...]:
    """The financial statements ``question`` names (keys of ``STATEMENTS``), e.g. "… shown in
    the cash flow statement" -> ``("cash flow statement",)``; ``()`` when none."""
    return tuple(name for name, (asked, _) in STATEMENTS.items() if asked.search(question))


def in_statement(payload: PointPayload, text: str, names: Sequence[str]) -> bool:
    """The passage belongs to one of the statements ``names``: its own heading (the last of
    its heading path) or a heading line among its first 4 lines carries the statement's title."""
    heading = payload.section.rsplit(" › ", 1)[-1] if payload.section else ""
    opening = " ".join(line for line in text.splitlines()[:4] if line.lstrip().startswith("#"))
    compact = _NOT_LETTERS.sub("", f"{heading} {opening}".lower())
    return any(STATEMENTS[name][1].search(compact) for name in names)


# ---------------------------------------------------------------------------------------------
# Rows and sentences
# ---------------------------------------------------------------------------------------------

_ALIGNMENT_ROW = re.compile(r"^\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?$")
_LIST_ITEM = re.compile(r"^(?:[-*+>]|\d{1,3}[.)])\s")

#: A term or an adjacent pair of terms (``("broken", "hill")``).
Feature = str | tuple[str, str]


def features(text: str) -> set[Feature]:
    """The sparse terms of ``text`` (``kb_shared.search.sparse.tokenize``) and its adjacent term
    pairs, so a name matched word for word ("Mode 2", "Broken Hill") counts more than its
    words scattered."""
    return features_of(tokenize(text))


def features_of(terms: Sequence[str]) -> set[Feature]:
    """``features`` of a text already tokenised into ``terms``."""
    return {*terms, *zip(terms, terms[1:])}


@dataclass(frozen=True)
class Unit:
    """One matchable piece of a chunk.

    Attributes:
        text: the row or sentence as it stands in the chunk (a header row not included): what
            ``unit_page`` looks for in the document's Markdown.
        features: ``features`` of the row with its header row and caption, or of the sentence.
    """

    text: str
    features: frozenset[Feature]


def _sentences(paragraph: list[str]) -> list[Unit]:
    """The sentences of a paragraph's lines, cut by the chunker's rule
    (``kb_shared.ingest.chunking.sentence_starts``); each keeps its closing quote or bracket."""
    joined = " ".join(paragraph)
    bounds = [0, *sentence_starts(joined), len(joined)]
    pieces = (joined[start:end].strip() for start, end in zip(bounds, bounds[1:], strict=False))
    return [Unit(piece, frozenset(features(piece))) for piece in pieces if piece]


def units(text: str, caption: str = "") -> list[Unit]:
    """``text`` cut into table rows and sentences (module docstring, "Rows and sentences").

    A pipe-table line followed by an alignment row is a header row: it is no unit but joins
    the features of every row under it, as does ``caption`` (the chunk's own heading). Prose
    is split into paragraphs at blank lines, headings and list items, then into sentences.
    """
    lines = text.splitlines()
    context = features(caption) if caption else set()
    out: list[Unit] = []
    header: set[Feature] = set()
    paragraph: list[str] = []
    for number, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith("|"):
            out.extend(_sentences(paragraph))
            paragraph = []
            if _ALIGNMENT_ROW.match(stripped):
                continue
            following = lines[number + 1].strip() if number + 1 < len(lines) else ""
            if following.startswith("|") and _ALIGNMENT_ROW.match(following):
                header = features(stripped)
                continue
            out.append(Unit(stripped, frozenset(features(stripped) | header | context)))
            continue
        header = set()
        if not stripped or stripped.startswith("#") or _LIST_ITEM.match(stripped):
            out.extend(_sentences(paragraph))
            paragraph = []
            if not stripped or stripped.startswith("#"):
                continue
        paragraph.append(stripped)
    out.extend(_sentences(paragraph))
    return out


#: Candidates whose units ``best_units`` keeps (a chunk comes back for many questions).
UNIT_CACHE = 4096


@lru_cache(maxsize=UNIT_CACHE)
def _cut(text: str, caption: str) -> tuple[tuple[Unit, ...], frozenset[Feature]]:
    """``units`` of a candidate and the ``features`` of its text and caption together."""
    return tuple(units(text, caption)), frozenset(features(f"{text}\n{caption}"))


def query_weights(
    question: str | QuestionShape, held: Sequence[frozenset[Feature]]
) -> dict[Feature, float]:
    """Each ``features`` of ``question`` that one of the candidates holds (``held``: each candidate's ``features``), weighted by its BM25 IDF over
    them: ``ln(1 + (N - df + 0.5) / (df + 0.5))`` (Robertson & Zaragoza 2009, "The
    Probabilistic Relevance Framework: BM25 and Beyond", eq. 3.3). A feature no candidate has
    cannot tell them apart and is left out."""
    wanted = shape_of(question).features
    held = [have & wanted for have in held]
    weights: dict[Feature, float] = {}
    for feature in wanted:
        df = sum(1 for have in held if feature in have)
        if df:
            weights[feature] = math.log(1 + (len(held) - df + 0.5) / (df + 0.5))
    return weights


@dataclass(frozen=True)
class UnitMatch:
    """A candidate's best unit and how much of the question it holds.

    Attributes:
        unit: the best unit.
        share: its share of the question's weight (``query_weights``), 0-1.
        chunk_share: the whole candidate's share (its units' features together), 0-1.
    """

    unit: Unit
    share: float
    chunk_share: float


def _caption(payload: PointPayload) -> str:
    return payload.section.rsplit(" › ", 1)[-1] if payload.section else ""


def best_units(
    question: str | QuestionShape, texts: Sequence[str], payloads: Sequence[PointPayload]
) -> list[UnitMatch | None]:
    """The best unit of each candidate (parallel lists ``texts``/``payloads``); ``None`` where
    no unit holds any weighted feature of ``question``. Weights are ``query_weights`` over
    the candidates' texts and headings. Shares are exactly rounded sums (``math.fsum``): a
    set's order changes with the process's string hash seed, and a plain sum with it, so
    two tied units could trade places, and the cited page, from one process to the next."""
    cut = [_cut(text, _caption(p)) for text, p in zip(texts, payloads, strict=True)]
    weights = query_weights(shape_of(question), [held for _, held in cut])
    total = math.fsum(weights.values())
    wanted = frozenset(weights)  # a set: ``&`` walks the smaller side, not the unit's features
    weight_of = weights.__getitem__
    out: list[UnitMatch | None] = []
    for pieces, _ in cut:
        best: tuple[float, Unit | None] = (0.0, None)
        every: set[Feature] = set()
        for unit in pieces if total else ():
            if unit.features.isdisjoint(wanted):
                continue  # shares nothing: adds nothing and cannot lead
            have = unit.features & wanted
            every |= have
            share = math.fsum(map(weight_of, have)) / total
            if share > best[0]:
                best = (share, unit)
        share, unit = best
        chunk_share = math.fsum(map(weight_of, every)) / total if total else 0.0
        out.append(UnitMatch(unit, share, chunk_share) if unit is not None else None)
    return out


def unit_bonuses(
    matches: Sequence[UnitMatch | None], weights: FeatureWeights | None = None
) -> list[float]:
    """``weights.unit_lead`` times the lead of the single best unit over the runner-up's
    (module docstring), 0 for every other candidate; ``weights`` default:
    ``DEFAULT_FEATURES`` as it is at call time."""
    weights = DEFAULT_FEATURES if weights is None else weights
    shares = [m.share if m is not None else 0.0 for m in matches]
    ordered = sorted(shares, reverse=True)
    runner_up = ordered[1] if len(ordered) > 1 else 0.0
    return [weights.unit_lead * max(0.0, share - runner_up) for share in shares]


# ---------------------------------------------------------------------------------------------
# The page a unit is on
# ---------------------------------------------------------------------------------------------

_PAGE_MARKER = re.compile(r"^\s*<!--\s*page\s+(\d+)(?:\s*\(p\.\s*(.*?)\))?\s*-->\s*$", re.I)


@dataclass(frozen=True)
class PagedText:
    """A converted document's Markdown flattened for look-ups: its lines' text joined by
    single spaces (``flat``), and where each page starts in it.

    Attributes:
        flat: the text without page markers, whitespace runs collapsed to one space.
        starts: offsets in ``flat`` where a page starts, ascending.
        pages: the 1-based page number starting at each offset (parallel to ``starts``).
        labels: each such page's printed label (``""`` when the marker carries none).
    """

    flat: str
    starts: tuple[int, ...]
    pages: tuple[int, ...]
    labels: tuple[str, ...]

    @classmethod
    def parse(cls, markdown: str) -> PagedText:
        """Read ``<!-- page N -->`` / ``<!-- page N (p. label) -->`` markers
        (``kb_shared.ingest.chunking``, "Page markers"); text before the first is page 1."""
        parts: list[str] = []
        starts: list[int] = [0]
        pages: list[int] = [1]
        labels: list[str] = [""]
        length = 0
        for line in markdown.splitlines():
            marker = _PAGE_MARKER.match(line)
            if marker is not None:
                starts.append(length)
                pages.append(int(marker.group(1)))
                labels.append(" ".join((marker.group(2) or "").split()))
                continue
            words = " ".join(line.split())
            if words:
                parts.append(words)
                length += len(words) + 1
        return cls(" ".join(parts), tuple(starts), tuple(pages), tuple(labels))

    def page_at(self, offset: int) -> tuple[int, str]:
        """The page (number, printed label) that ``offset`` of ``flat`` is on."""
        index = bisect.bisect_right(self.starts, offset) - 1
        return self.pages[index], self.labels[index]

    def offset_of_page(self, page: int) -> int:
        """Where ``page`` starts in ``flat`` (0 when it has no marker)."""
        for start, number in zip(self.starts, self.pages, strict=True):
            if number == page:
                return start
        return 0


#: Characters of a line or unit looked up in the Markdown: enough to be unique on a page,
#: short enough to stay within one Markdown line of a sentence that wraps.
_PROBE_CHARS = 60


def unit_page(
    paged: PagedText, page_start: int, chunk_text: str, unit: Unit
) -> tuple[int, str] | None:
    """The page (number, printed label) that ``unit`` of a chunk starts on: the chunk's first
    line is looked up from ``page_start`` on, then the unit after it. ``None`` when either is
    not found (the Markdown changed since the chunk was cut)."""
    first = next((" ".join(line.split()) for line in chunk_text.splitlines() if line.strip()), "")
    probe = " ".join(unit.text.split())[:_PROBE_CHARS]
    if not first or not probe:
        return None
    begin = paged.flat.find(first[:_PROBE_CHARS], paged.offset_of_page(page_start))
    if begin < 0:
        return None
    at = paged.flat.find(probe, begin)
    return paged.page_at(at) if at >= 0 else None


_TABLE_WORD = re.compile(r"\btables?\b", re.I)


def asks_for_table(question: str) -> bool:
    """The question speaks of a table ("In AEMO's table of …", "which EMMS table …")."""
    return _TABLE_WORD.search(question) is not None


def holds_table(text: str) -> bool:
    """``text`` holds a Markdown pipe table (a line that is an alignment row)."""
    return "|" in text and any(_ALIGNMENT_ROW.match(line.strip()) for line in text.splitlines())


# ---------------------------------------------------------------------------------------------
# The question, read once
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QuestionShape:
    """What the signals read from a question, once per search (``question_shape``).

    Attributes:
        text: the question.
        definition_terms: the terms a definition question asks about (``definition_terms``).
        section_numbers: its clause or requirement numbers (``section_numbers``).
        statements: the financial statements it names (``statements_named``).
        table: it speaks of a table (``asks_for_table``).
        naming_words: its words that may name a document (``question_naming_words``).
        features: its terms and adjacent term pairs (``features``).
    """

    text: str
    definition_terms: tuple[str, ...]
    section_numbers: tuple[str, ...]
    statements: tuple[str, ...]
    table: bool
    naming_words: frozenset[str]
    features: frozenset[Feature]


def question_shape(question: str, tokens: Sequence[str] | None = None) -> QuestionShape:
    """Read ``question`` for every signal; ``tokens``: its ``tokenize`` terms when known."""
    terms = tokenize(question) if tokens is None else list(tokens)
    return QuestionShape(
        text=question,
        definition_terms=tuple(definition_terms(question)),
        section_numbers=tuple(section_numbers(question)),
        statements=statements_named(question),
        table=asks_for_table(question),
        naming_words=question_naming_words(question, terms),
        features=frozenset(features_of(terms)),
    )


def shape_of(question: str | QuestionShape) -> QuestionShape:
    """``question`` itself when already read, else ``question_shape(question)``."""
    return question if isinstance(question, QuestionShape) else question_shape(question)


def bonuses(
    question: str | QuestionShape,
    texts: Sequence[str],
    payloads: Sequence[PointPayload],
    weights: FeatureWeights | None = None,
    matches: Sequence[UnitMatch | None] | None = None,
) -> list[float]:
    """The bonus of each candidate (parallel lists ``texts``/``payloads``) for ``question``;
    ``matches`` are its ``best_units`` when the caller has them already; ``weights``
    default: ``DEFAULT_FEATURES`` as it is at call time."""
    weights = DEFAULT_FEATURES if weights is None else weights
    shape = shape_of(question)
    routed = routed_documents(shape, payloads)
    terms, numbers, statements = shape.definition_terms, shape.section_numbers, shape.statements
    found = best_units(shape, texts, payloads) if matches is None else matches
    out = []
    if routed and weights.routed_units_only:
        found = [m if p.doc_id in routed else None for m, p in zip(found, payloads, strict=True)]
    for text, payload, unit_bonus in zip(texts, payloads, unit_bonuses(found, weights), strict=True):
        bonus = unit_bonus
        if terms and defines(text, terms):
            bonus += weights.definition
        if numbers and heads_with(payload, text, numbers):
            bonus += weights.section_number
        if payload.doc_id in routed:
            bonus += weights.document
        if statements and in_statement(payload, text, statements):
            bonus += weights.statement
        if shape.table and holds_table(text):
            bonus += weights.table
        out.append(bonus)
    return out
