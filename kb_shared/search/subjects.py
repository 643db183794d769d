"""Names and clause numbers a query asks about that no searched passage mentions: search_docs'
absent-subject check.

A question names its subject with a capitalised word inside a sentence ("Who is the CEO of
Tesla?", "What is Ofgem's price cap for 2024?"): English capitalises a proper noun wherever it
stands and other words only where a sentence starts. When no passage in the searched scope holds
such a name, whatever the search returns is about something else, however close in meaning: for
"Who is the CEO of Tesla?" a corpus without Tesla returned Amazon's table of executive officers
at cosine 0.50, above the "nothing found" threshold. So the answer is low confidence and says
which name is missing (stage 4 of ``kb_shared.search.retrieval``). The same holds of a clause
or requirement number of three levels or more ("requirement 3.14.9", "section 4.2.7"): a
document without it answers with its neighbours (3.14.6, 3.14.7), which say something else.

Left out on purpose:

- words in capitals ("ASX", "DPO", "EBITDA"): a question may spell out or define an abbreviation
  the documents never print, and a missing abbreviation says less than a missing name;
- words with digits or underscores ("FY2023", "Raise6SecActualAvailability"): editions are
  ``kb_shared.search.editions``', codes the identifier look-up's (``kb_shared.search.retrieval``);
- a capitalised word at the start of a sentence, a quotation or a bracket ("Give a response…",
  "(Formerly …"), where any word is capitalised;
- every word of a question written in title case ("What Is The Rebate For Heat Pumps?"), where
  a capital says nothing: more than ``HEADLINE_SHARE`` of its distinct words capitalised, when
  it has ``HEADLINE_WORDS`` or more that may be ("Revenue of Tesla Motors?" is too short).
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
#: What may stand right before a word that starts a sentence, a quotation or a bracket.
_OPENERS = frozenset(".?!:;\"“‘'([{•*-–—#>\n")
#: A possessive ending, dropped from a name ("Ofgem's" -> "Ofgem").
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)
#: A clause number the check looks up: three to five levels ("3.14.9"); "0.9" or "3.1" may be
#: a value, so one level of dots is left out.
_CLAUSE = re.compile(r"\d{1,3}(?:\.\d{1,3}){2,4}")
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
    """The names ``text`` asks about, in order, each once: words of letters that start with a
    capital, hold a lower-case letter, and do not open a sentence, quotation or bracket
    (module docstring). ``"Who is the CEO of Tesla?"`` -> ``("Tesla",)``; ``"What does NER clause
    3.6.5 say?"`` -> ``()``."""
    names: dict[str, None] = {}
    words: set[str] = set()  # distinct, so a name said twice does not make title case
    for match in _TOKEN.finditer(text):
        word = match.group(0)
        if any(c.isdigit() or c == "_" for c in word):  # a code: the identifier look-up's
            continue
        before = text[: match.start()].rstrip(" \t")
        if not before or before[-1] in _OPENERS or not any(c.islower() for c in word):
            continue  # opens a sentence, or is in capitals (an abbreviation)
        words.add(word)
        if word[0].isupper():
            names.setdefault(_POSSESSIVE.sub("", word), None)
    capitalised = sum(1 for word in words if word[0].isupper())
    if len(words) >= HEADLINE_WORDS and capitalised > HEADLINE_SHARE * len(words):
        return ()
    return tuple(names)


def subjects_of(text: str, section_numbers: Sequence[str]) -> tuple[str, ...]:
    """What ``text`` asks about, for ``absent_subjects``: its names (``named_subjects``), then
    those of its clause numbers (``retrieval_features.section_numbers``) with three levels or
    more."""
    return named_subjects(text) + tuple(n for n in section_numbers if _CLAUSE.fullmatch(n))


def absent_subjects(
    index: VectorReader,
    names: Sequence[str],
    documents: Sequence[str] | None,
    kinds: Sequence[str] | None,
) -> tuple[str, ...]:
    """The ``names`` (``subjects_of``) that no point in the scope mentions, one keyword search
    each (``VectorReader.sparse_search``): a name counts as mentioned when any point holds any
    of its terms, a clause number when one of its first ``CLAUSE_HITS`` points holds it whole.
    A name that is a stopword alone ("The") is never absent. Raises as the index."""
    absent = []
    for name in names:
        if _CLAUSE.fullmatch(name):
            whole = re.compile(rf"(?<![\w.]){re.escape(name)}(?!\.?\d)")  # not 13.1.5, 3.1.50
            hits = index.sparse_search(name, CLAUSE_HITS, documents, kinds)
            if not any(whole.search(hit.point.text) for hit in hits):
                absent.append(name)
        elif tokenize(name) and not index.sparse_search(name, 1, documents, kinds):
            absent.append(name)
    return tuple(absent)


def absent_message(names: Sequence[str], shown: str = "passages") -> str:
    """The sentence search_docs (and search_graph, with ``shown`` naming what it lists) leads
    with when ``names`` (non-empty) appear in no searched passage."""
    quoted = ", ".join(f"'{name}'" for name in names)
    return (
        f"Not in the corpus: no indexed passage searched mentions {quoted}, so the {shown} "
        f"below are about something else. Tell the user the indexed documents do not cover "
        f"{quoted}, and do not answer from these {shown}. Call list_documents to check what is "
        "indexed, or request_document to ask for the document they need."
    )
