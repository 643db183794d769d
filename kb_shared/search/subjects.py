"""Names and clause numbers a query asks about that no searched passage mentions: search_docs'
and search_graph's absent-subject caveat.

A question names its subject with capitalised words inside a sentence ("Who is the CEO of
Tesla?", "What is Ofgem's price cap for 2024?"): English capitalises a proper noun wherever it
stands and other words only where a sentence starts. When no passage in the searched scope holds
such a name, whatever the search returns is about something else, however close in meaning: for
"Who is the CEO of Tesla?" a corpus without Tesla returned Amazon's table of executive officers
at cosine 0.50, above the "nothing found" threshold. The same holds of a clause or requirement
number of three levels or more ("requirement 3.14.9", "section 4.2.7"): a document without it
answers with its neighbours (3.14.6, 3.14.7), which say something else.

The answer then leads with a caveat naming what is missing (``absent_message``); it is not made
low confidence. A name the documents spell another way looks absent too ("Andy Jassy" where the
filing prints "Andrew R. Jassy", "Programme" for "Program"): an adversarial set of 190
answerable questions found such cases (``benchmarks/results/subjects-2026-12-07.md``), so the
caveat lets the reader check the passages instead of refusing them.

A name is a run of capitalised words, with "of", "and", "&", "for", "the" between them
("Department of Defence"); it counts as mentioned when any of its capitalised words is. Left out:

- words in capitals ("ASX", "DPO", "EBITDA"): a question may spell out or define an abbreviation
  the documents never print, and a missing abbreviation says less than a missing name;
- words with digits or underscores ("FY2023", "Raise6SecActualAvailability"): editions are
  ``kb_shared.search.editions``', codes the identifier look-up's (``kb_shared.search.retrieval``);
- contractions ("I've", "Don't"), titles ("Dr"), months and days ("Aug", "Monday");
- a capitalised word at the start of a sentence, a quotation, a bracket or a list item ("Give
  a response…", "(Formerly …", "2) Explain …", "… Summarise");
- every word of a question written in title case ("What Is The Rebate For Heat Pumps?"), where
  a capital says nothing: more than ``HEADLINE_SHARE`` of its distinct words capitalised, when
  it has ``HEADLINE_WORDS`` or more that may be ("Revenue of Tesla Motors?" is too short);
- a number inside a longer code ("A.9.2.1", "(9.2.1-1)", "4.9.2B") or with three-digit levels
  ("177.866.000").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kb_shared.search.sparse import tokenize

if TYPE_CHECKING:
    from kb_shared.stores.readers import VectorReader

#: A token: word characters, joined by an apostrophe or a hyphen ("Coca-Cola", "O'Neill",
#: "Ofgem's", "Raise6SecActualAvailability"); only one of letters alone can be a name.
_TOKEN = re.compile(r"\w+(?:['’-]\w+)*")
#: What may stand right before a word that starts a sentence, a quotation, a bracket or a list
#: item ("2) Explain", "(b) Summarise").
_OPENERS = frozenset(".?!:;\"“‘'([{)]}•*-–—#>…")
#: A possessive ending, dropped from a name ("Ofgem's" -> "Ofgem").
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)
#: Capitalised words that name no subject of a document: titles before a name ("Dr. Albert
#: Bourla": the dot after a title opens no sentence either), months and days, abbreviated or not
#: (a filing prints "August 19, 2022" where a question writes "Aug 19").
_NOT_NAMES = frozenset(
    "dr mr mrs ms prof sir jan feb mar apr may jun jul aug sep sept oct nov dec january february "
    "march april june july august september october november december monday tuesday wednesday "
    "thursday friday saturday sunday".split()
)
_TITLE_DOT = re.compile(r"\b(?:Dr|Mr|Mrs|Ms|Prof|St)\.$")
#: A contraction's ending ("I've", "don't", "we'll"): no name.
_CONTRACTION = re.compile(r"['’](?:ve|m|ll|re|d|t)$", re.IGNORECASE)
#: The lower-case words that may stand between two capitalised words of one name ("Department
#: of Defence", "Department of the Treasury", "Procter and Gamble"; "&" too): not "and the",
#: which joins two names ("the Retailer and the Distributor").
_CONNECTORS = frozenset({("of",), ("for",), ("and",), ("of", "the"), ("for", "the")})
#: A clause number the check looks up: three to five levels, each after the first of one or
#: two digits ("3.14.9"), standing alone (not in "A.9.2.1", "(9.2.1-1)", "4.9.2B" or
#: "177.866.000"); "0.9" or "3.1" may be a value, so one level of dots is left out.
_CLAUSE = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,2}){2,4}(?![\w-]|\.\d)")
#: Keyword hits read for a clause number: points holding the whole number rank first (it is
#: rare; its parts "3", "14", "9" are common), so a few suffice.
CLAUSE_HITS = 10
#: Above this share of capitalised words among the words that may be (not opening a sentence,
#: a quotation or a bracket), a question is in title case and its capitals name nothing. Half:
#: a question that names several parties ("the Retailer must notify the Distributor") still
#: writes most of its words in lower case.
HEADLINE_SHARE = 0.5
#: Fewer such words than this cannot show title case: two names in three words are common.
HEADLINE_WORDS = 4


def named_subjects(text: str) -> tuple[str, ...]:
    """The names ``text`` asks about, in order, each once, as written: runs of words of letters
    that start with a capital, hold a lower-case letter and do not open a sentence, quotation,
    bracket or list item, with one of ``_CONNECTORS`` or "&" between them (module docstring). ``"Who
    is the CEO of Tesla?"`` -> ``("Tesla",)``; ``"What did Andy Jassy say?"`` ->
    ``("Andy Jassy",)``."""
    names: dict[str, None] = {}
    words: set[str] = set()  # distinct, so a name said twice does not make title case
    first = last = -1  # the span of the name being read (``first`` -1: none)
    previous = 0  # where the token before this one ended
    pending: list[str] = []  # lower-case words read since the name's last capitalised word
    for match in _TOKEN.finditer(text):
        word, between = match.group(0), text[previous : match.start()]
        previous = match.end()
        before = text[: match.start()].rstrip()
        opens = not before or (before[-1] in _OPENERS and not _TITLE_DOT.search(before))
        if opens or any(c.isdigit() or c == "_" for c in word):
            first = _close(text, first, last, names)
            continue  # opens a sentence (any word is capitalised there), or is a code
        if not any(c.islower() for c in word) or word.casefold() in _NOT_NAMES:
            first = _close(text, first, last, names)
            pending = []
            continue  # in capitals (an abbreviation), or a title, month or day
        words.add(word)
        joined = between.strip() in ("", "&")
        if word[0].isupper() and not _CONTRACTION.search(word):
            if first < 0 or not joined or (pending and tuple(pending) not in _CONNECTORS):
                first = _close(text, first, last, names)
                first = match.start()
            last = match.end()
            pending = []
        elif first >= 0 and joined and len(pending) < 2:
            pending.append(word.casefold())
        else:
            first = _close(text, first, last, names)
            pending = []
    _close(text, first, last, names)
    capitalised = sum(1 for word in words if word[0].isupper())
    if len(words) >= HEADLINE_WORDS and capitalised > HEADLINE_SHARE * len(words):
        return ()
    return tuple(names)


def _close(text: str, first: int, last: int, names: dict[str, None]) -> int:
    """File the name ``text[first:last]`` (possessive dropped) when ``first`` >= 0; returns -1,
    the start of no name."""
    if first >= 0:
        names.setdefault(_POSSESSIVE.sub("", text[first:last]), None)
    return -1


def clause_numbers(text: str) -> tuple[str, ...]:
    """The clause or requirement numbers of three levels or more ``text`` names, in order, each
    once (``_CLAUSE``): ``"requirement 3.14.9 and A.9.2.1"`` -> ``("3.14.9",)``."""
    return tuple(dict.fromkeys(_CLAUSE.findall(text)))


def subjects_of(text: str) -> tuple[str, ...]:
    """What ``text`` asks about, for ``absent_subjects``: its names (``named_subjects``), then
    its clause numbers (``clause_numbers``)."""
    return named_subjects(text) + clause_numbers(text)


def absent_subjects(
    index: VectorReader,
    names: Sequence[str],
    documents: Sequence[str] | None,
    kinds: Sequence[str] | None,
) -> tuple[str, ...]:
    """The ``names`` (``subjects_of``) that no point in the scope mentions, by keyword search
    (``VectorReader.sparse_search``): a name counts as mentioned when a point holds any of its
    capitalised words (one search a word, until one is found), a clause number when one of its
    first ``CLAUSE_HITS`` points holds it whole ("4.9.2B" holds 4.9.2). A name of stopwords
    alone ("The") is never absent. Raises as the index."""
    absent = []
    for name in names:
        if _CLAUSE.fullmatch(name):
            whole = re.compile(rf"(?<![\w.]){re.escape(name)}(?!\.?\d)")  # not 13.1.5, 3.1.50
            hits = index.sparse_search(name, CLAUSE_HITS, documents, kinds)
            if not any(whole.search(hit.point.text) for hit in hits):
                absent.append(name)
            continue
        words = [
            w for w in (_POSSESSIVE.sub("", part) for part in name.split())
            if w[:1].isupper() and tokenize(w)
        ]
        if words and not any(index.sparse_search(w, 1, documents, kinds) for w in words):
            absent.append(name)
    return tuple(absent)


def absent_message(names: Sequence[str], shown: str = "passages") -> str:
    """The caveat search_docs (and search_graph, with ``shown`` naming what it lists) leads with
    when ``names`` (non-empty) appear in no searched passage (module docstring)."""
    quoted = ", ".join(f"'{name}'" for name in names)
    return (
        f"No indexed passage searched mentions {quoted}. If the question is about "
        f"{'it' if len(names) == 1 else 'them'}, the indexed documents do not cover it: tell "
        f"the user so rather than answer from the {shown} below, which are about something "
        "else. A name the documents spell another way (a nickname, a variant spelling) shows "
        f"here too, so check the {shown} first."
    )
