"""Entity names for the offline extractor: English plural and singular forms, tidying, and
the test that a string can name an entity at all (no pronouns, numbers or formulas)."""

from __future__ import annotations

import re

from kb_shared.providers.graph_vocabulary import ROLE_HEADS

#: Leading words dropped from a name: articles, determiners, generic modifiers ("relevant").
LEADING_DROP = frozenset(
    "the a an this that these those any each every all such its their his her our your "
    "relevant other respective applicable affected particular certain same some no both "
    "either neither another given said".split()
)
#: Words that are never an entity on their own (pronouns, generic document nouns).
STOP_NAMES = frozenset(
    "it its they them their he she we you i which who whom whose that this these those "
    "there here what where when such one ones other others each all any none some "
    "procedure document section clause table figure note page example part item".split()
)


def pluralise(word: str) -> str:
    """Regular English plural of a lower-case noun: "party" → "parties", "box" → "boxes"."""
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    return word + "s"


#: ``ROLE_HEADS`` and their plurals.
ROLE_FORMS: frozenset[str] = frozenset(
    form for head in ROLE_HEADS for form in (head, pluralise(head))
)


def singular(word: str) -> str:
    """Singular of an English plural noun, keeping the word's capitalisation; acronyms ending
    in S (FIPS, SCADA) stay, a plural acronym (DUIDs, NSPs) loses its s."""
    lower = word.lower()
    if re.fullmatch(r"[A-Z0-9]{2,}s", word):  # DUIDs, NSPs
        return word[:-1]
    if word.isupper():  # FIPS, SCADA, CUIS: an acronym ending in S is not a plural
        return word
    if len(lower) < 4 or lower.endswith(("ss", "us", "is", "ics", "news")):
        return word
    if lower.endswith("ies"):
        return word[:-3] + ("Y" if word[-3].isupper() else "y")
    if lower.endswith(("sses", "ches", "shes", "xes", "zes")):
        return word[:-2]
    if lower.endswith("s"):
        return word[:-1]
    return word


def squash(text: str) -> str:
    """Lower-case letters and digits only: "SP 800-171" and "nist_sp_800-171r2" compare."""
    return re.sub(r"[\W_]+", "", text.lower())


def tidy(name: str) -> str:
    """``name`` with whitespace collapsed and surrounding punctuation and quotes removed."""
    name = " ".join(name.split())
    name = name.strip(" \t.,;:!?\"'“”‘’()[]{}-–—")
    return name


def valid_name(name: str, code: bool = False) -> bool:
    """A usable entity name: has a letter, is not a pronoun/stop word, not too long; a name
    that is not a code has no formula characters and balanced brackets."""
    if not name or len(name) > 80 or not re.search(r"[A-Za-z]", name):
        return False
    if not code and (re.search(r"[=+<>{}|^]", name) or name.count("(") != name.count(")")):
        return False
    words = name.split()
    if len(words) > 10:
        return False
    if len(name) < 2 or (len(words) == 1 and len(name) < 3 and not name.isupper()):
        return False
    if name.lower() in STOP_NAMES:
        return False
    return not re.fullmatch(r"[\d\W_]+", name)
