"""Acronyms on the sparse side of a query: the graph's abbreviation pairs, used both ways.

The graph extractors (local: ``kb_shared.providers.spacy_graph.abbreviations`` and the
glossary rules; cloud: ``kb_shared.providers.cloud_graph``) link a short form to its long
form by a ``DEFINED_AS`` relationship ("constraint violation penalty (CVP)" gives
``CVP -DEFINED_AS-> constraint violation penalty``). That is the one source of the pairs:
``load_pairs`` reads them from a ``GraphReader``, ``AcronymTable`` keeps the usable ones and
``AcronymTable.sparse_text`` adds, to the keyword (sparse) text of a query, the long form's
words when the query names a short form and the short form when it names a long form. The
meaning (dense) side of the query is never changed.

Rules, each with its reason:

* A short form is one word of 2-10 characters, starting with a letter, with at least two
  capitals (``NPL``, ``MVAr``, ``ADG_ID``); alias pairs ("Participant" -> "Market
  Participant") and glossary noise ("Term ACT") are not acronyms.
* It expands only when the query writes it exactly as the pair does (case-sensitive, a plural
  ``s`` allowed: "NSPs"), and never when it is an ordinary word (``ORDINARY_WORDS``: the
  sparse tokenizer's stopwords and a few more function words), so "it", "IT", "US", "AND" and
  "Act" never expand, nor does a query written all in capitals.
* A short form adds its long form only when the query asks about it (``asks_about``: "what
  does NPL stand for", "what is the CVP", "define FLLF", "the meaning of …") and does not
  name the long form too ("define controlled unclassified information (CUI)"): in any other
  question a short form is context ("AEMO's table of …", "the FCAS constraint"), and adding
  the long form of every well-known acronym pulled generic passages up on the shared
  regulatory set (benchmarks/results/retrieval-2026-12-02-acronyms.md). A long form always
  adds its short form (one term).
* Ambiguity: one short form with several long forms across documents ("NC": non-conforming,
  non-conformance) adds the words of every long form when it has at most ``MAX_EXPANSIONS``
  of them (an OR over a few spellings still favours the passage that spells one out), and
  none beyond that (too ambiguous to help). Long forms are told apart by their sparse terms,
  so "Regional Reference Node" and "regional reference node" are one.
* A long form is found in a query as a run of its sparse terms in order
  (``kb_shared.search.sparse.tokenize``), and adds its short form(s).
* For a short form the query asks about (``Expansion.asked``), search_docs gives a passage
  that spells it out (``AcronymTable.spells_out``: "non-physical losses (NPL)") the
  definition bonus (``kb_shared.search.retrieval.candidate_features``, through
  ``AnalysedQuery.spells_out``): the passage that merely uses the acronym otherwise ranks
  first.

``AcronymCache`` keeps one table per process and reloads it only when the caller's change
signal changes (the MCP server: the catalog's serving states, ``kb_mcp.state``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass

from kb_shared.errors import StoreError
from kb_shared.providers.graph_vocabulary import DEFINED_AS
from kb_shared.search.sparse import RAW_WORD, STOPWORDS, tokenize
from kb_shared.stores.graph import EdgeFilter, GraphReader

#: Whether search_docs' callers expand acronyms by default (``acronyms_enabled``); measured in
#: benchmarks/results/retrieval-2026-12-02-acronyms.md.
ACRONYM_EXPANSION = True

#: Long forms one short form may have and still expand (module docstring, "Ambiguity").
MAX_EXPANSIONS = 3

#: ``DEFINED_AS`` relationships ``load_pairs`` reads at most; the 11-document shared corpus
#: has 221 (benchmarks/results/retrieval-2026-12-02-acronyms.md).
MAX_PAIRS = 100_000

#: Words a short form must not be: the sparse tokenizer's stopwords plus the function words
#: it keeps on purpose (negations, quantifiers, modal verbs; ``kb_shared.search.sparse.STOPWORDS``).
ORDINARY_WORDS: frozenset[str] = STOPWORDS | frozenset(
    "no not nor all any may must shall should can will act per via us".split()
)

#: The shape of a short form (module docstring, first rule).
_SHORT_FORM = re.compile(r"[A-Za-z][A-Za-z0-9&_.-]{1,9}")

#: Words of a question about what an abbreviation means, wherever they stand.
_MEANING_CUE = re.compile(
    r"\b(?:stands?\s+for|short\s+for|abbreviat\w*|acronym\w*|expan(?:d|sion)\w*|"
    r"mean(?:s|t|ing)?|definition|defines?|spell\w*\s+out)\b",
    re.IGNORECASE,
)

#: "What is/are (the/an/a) X" at the start of a question.
_WHAT_IS = re.compile(r"^\s*(?:what|who)\s+(?:is|are|was|were)\s+(?:the\s+|an?\s+)?(\S+?)[\s?.!]*$",
                      re.IGNORECASE)


#: Words between a meaning cue and the short form it is about, at most (``asks_about``).
CUE_DISTANCE = 4


def asks_about(query: str, short: str) -> bool:
    """True when ``query`` asks what ``short`` (written in it) means: a meaning cue ("stand
    for", "abbreviation", "meaning", "define"…) within ``CUE_DISTANCE`` words of it (not where
    a number follows it: "SP 800-171" is a name), or the whole question is "what is (the)
    SHORT?"."""
    found = _WHAT_IS.match(query)
    if found is not None and found.group(1).strip(".-_/").rstrip("s") == short.rstrip("s"):
        return True
    words = [w.strip(".-_/") for w in RAW_WORD.findall(query)]
    for at, word in enumerate(words):
        if word.rstrip("s") != short.rstrip("s"):
            continue
        if at + 1 < len(words) and any(c.isdigit() for c in words[at + 1]):
            continue  # part of a name: SP 800-171, NER 3.6.5
        near = " ".join(words[max(0, at - CUE_DISTANCE) : at + CUE_DISTANCE + 1])
        if _MEANING_CUE.search(near):
            return True
    return False


def is_short_form(name: str) -> bool:
    """True when ``name`` has the shape of an abbreviation and is no ordinary word (module
    docstring, first two rules): ``NPL``, ``MVAr``, ``ADG_ID``; not ``Rules``, ``IT``, ``US``."""
    if not _SHORT_FORM.fullmatch(name) or sum(c.isupper() for c in name) < 2:
        return False
    return name.casefold() not in ORDINARY_WORDS


@dataclass(frozen=True, slots=True)
class Expansion:
    """What a query gains on its sparse side.

    Attributes:
        short_forms: the short forms the query named, in query order.
        long_forms: the long forms the query named, in query order.
        terms: the sparse terms added (not already in the query), in order.
        asked: the short forms the query asks the meaning of (``asks_about``) and that
            expanded (at most ``MAX_EXPANSIONS`` long forms).
    """

    short_forms: tuple[str, ...]
    long_forms: tuple[str, ...]
    terms: tuple[str, ...]
    asked: tuple[str, ...] = ()

    def sparse_text(self, query: str) -> str:
        """``query`` (the one expanded) with ``terms`` appended, or ``query`` itself when
        none were added: what the keyword side of a search receives."""
        return f"{query} {' '.join(self.terms)}" if self.terms else query


class AcronymTable:
    """The usable abbreviation pairs of a corpus, indexed for look-up from a query.

    Args:
        pairs: ``(short form, long form)`` as the graph holds them; pairs whose short form
            is not ``is_short_form``, or whose long form has no sparse term, are left out.
    """

    def __init__(self, pairs: Iterable[tuple[str, str]]) -> None:
        longs: dict[str, dict[tuple[str, ...], str]] = {}
        for short, long_form in pairs:
            short = short.strip()
            terms = tuple(tokenize(long_form))
            if not is_short_form(short) or not terms or terms == tuple(tokenize(short)):
                continue
            longs.setdefault(short, {}).setdefault(terms, long_form)
        #: short form -> its long forms' terms (one entry per distinct term sequence)
        self._long_terms: dict[str, tuple[tuple[str, ...], ...]] = {
            short: tuple(found) for short, found in longs.items()
        }
        #: first term of a long form -> (its terms, its short forms)
        by_first: dict[str, dict[tuple[str, ...], list[str]]] = {}
        for short, found in longs.items():
            for terms in found:
                by_first.setdefault(terms[0], {}).setdefault(terms, []).append(short)
        self._by_first: dict[str, tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]] = {
            first: tuple(
                sorted(((t, tuple(s)) for t, s in found.items()), key=lambda e: -len(e[0]))
            )
            for first, found in by_first.items()
        }

    def __len__(self) -> int:
        """Distinct short forms held."""
        return len(self._long_terms)

    def long_forms(self, short: str) -> list[tuple[str, ...]]:
        """The sparse terms of each long form of ``short`` (exact spelling), ``[]`` if none."""
        return list(self._long_terms.get(short, ()))

    def expand(self, query: str, tokens: Sequence[str] | None = None) -> Expansion:
        """The short forms and long forms ``query`` names, and the sparse terms they add
        (module docstring): a short form the query asks about (``asks_about``) adds its long
        forms' terms (none past ``MAX_EXPANSIONS``), a long form adds its short forms' terms.
        ``tokens``: the query's ``tokenize`` terms when the caller has them."""
        have = list(tokenize(query) if tokens is None else tokens)
        present = set(have)
        added: dict[str, None] = {}
        shorts: list[str] = []
        asked: list[str] = []
        if not query.isupper():
            for raw in RAW_WORD.findall(query):
                word = raw.strip(".-_/")
                found = self._long_terms.get(word)
                if found is None and word.endswith("s"):
                    found = self._long_terms.get(word[:-1])
                    word = word[:-1]
                if not found or word in shorts:
                    continue
                shorts.append(word)
                named = any(set(terms) <= present for terms in found)  # "… information (CUI)"
                if len(found) <= MAX_EXPANSIONS and not named and asks_about(query, word):
                    asked.append(word)
                    for terms in found:
                        added.update(dict.fromkeys(t for t in terms if t not in present))
        longs: list[str] = []
        position = 0
        while position < len(have):
            step = 1
            for terms, short_forms in self._by_first.get(have[position], ()):
                if tuple(have[position : position + len(terms)]) == terms:
                    longs.append(" ".join(terms))
                    for short in short_forms:
                        added.update(dict.fromkeys(t for t in tokenize(short) if t not in present))
                    step = len(terms)
                    break
            position += step
        return Expansion(tuple(shorts), tuple(longs), tuple(added), tuple(asked))

    def spells_out(self, text: str, shorts: Sequence[str]) -> bool:
        """True when ``text`` spells one of ``shorts`` out: the short form in parentheses
        (plural allowed) right after the words of one of its long forms ("non-physical losses
        (NPL)"), as ``abbreviations.abbreviations`` finds definitions."""
        for short in shorts:
            for found in re.finditer(rf"\(\s*{re.escape(short)}s?\s*\)", text):
                before = tokenize(text[max(0, found.start() - 200) : found.start()])
                for terms in self._long_terms.get(short, ()):
                    # the long form's words just before the parenthesis (a plural last word)
                    tail = before[-len(terms) - 2 :]
                    if all(any(w == t or w == t + "s" or w == t + "es" for w in tail) for t in terms):
                        return True
        return False

    def sparse_text(self, query: str) -> str:
        """``query`` with the added terms appended (``expand``), or ``query`` itself when it
        names no known acronym or long form: what the keyword side of a search receives."""
        return self.expand(query).sparse_text(query)


def load_pairs(graph: GraphReader) -> list[tuple[str, str]]:
    """Every ``(short form, long form)`` the graph's ``DEFINED_AS`` relationships hold (at most
    ``MAX_PAIRS`` relationships; entity names as stored), in the store's overview order.

    Raises:
        StoreUnavailableError: the graph store cannot be reached.
    """
    edges = graph.overview(MAX_PAIRS, where=EdgeFilter(relationship_type=DEFINED_AS))
    if not edges:
        return []
    names = {e.key: e.name for e in graph.entities([k for r in edges for k in (r.source, r.target)])}
    return [
        (names[r.source], names[r.target])
        for r in edges
        if r.source in names and r.target in names
    ]


def load_table(graph: GraphReader) -> AcronymTable:
    """``AcronymTable(load_pairs(graph))``; raises as ``load_pairs``."""
    return AcronymTable(load_pairs(graph))


class AcronymCache:
    """One ``AcronymTable`` per holder, loaded on first use and again only when the change
    signal differs from the one it was loaded under; thread-safe (one load at a time).

    Args:
        load: reads the pairs and builds the table (``load_table`` bound to a graph).
    """

    def __init__(self, load: Callable[[], AcronymTable]) -> None:
        self._load = load
        self._lock = threading.Lock()
        self._held: tuple[Hashable, AcronymTable] | None = None  # one attribute: read whole
        self.loads = 0

    def get(self, signal: Hashable) -> AcronymTable:
        """The table loaded under ``signal`` (loaded now when the held one was loaded under
        another signal, or never). Raises as ``load``; a failed load keeps the old one."""
        held = self._held
        if held is not None and held[0] == signal:
            return held[1]
        with self._lock:
            held = self._held
            if held is None or held[0] != signal:
                held = self._held = (signal, self._load())
                self.loads += 1
            return held[1]


def acronyms_enabled(switch: bool | None = None) -> bool:
    """``switch`` when given, else ``ACRONYM_EXPANSION`` (read at call time, so a benchmark
    may flip the module constant)."""
    return ACRONYM_EXPANSION if switch is None else switch


def acronyms_for(graph: GraphReader, switch: bool | None = None) -> AcronymTable | None:
    """What a one-shot caller (the ``retrieval_eval`` asset, the benchmarks) passes to
    search_docs, so it ranks as the MCP tool does (``kb_mcp.state.ServerState.acronyms``):
    ``None`` when the lever is off (``acronyms_enabled(switch)``) or the graph cannot be read
    (no graph tables yet, store down), else ``load_table(graph)``."""
    if not acronyms_enabled(switch):
        return None
    try:
        return load_table(graph)
    except StoreError:
        return None
