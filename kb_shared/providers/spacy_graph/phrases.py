"""Noun phrases no entity pattern names: the duty-bearer or the object of an obligation, named
from the parse by its head noun and the modifiers that classify it.

"Pump suppliers must give a minimum three year spare-parts warranty": the object has no
mention, so ``phrase_span`` walks left from its head ("warranty") over compound, adjectival
and hyphenated modifiers ("spare-parts") and stops at the first that counts, measures,
points or grades ("three year", "minimum", "a"): the entity is "spare-parts warranty".
The rule follows the noun-phrase head/modifier split of dependency grammar (ClearNLP /
spaCy labels ``compound``, ``amod``, ``nmod``); what is dropped is what a glossary would
not keep in a term's name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from kb_shared.providers.graph_vocabulary import CODE, DEFINED_TERM, ROLE
from kb_shared.providers.spacy_graph.mentions import Mention, classify, span_name
from kb_shared.providers.spacy_graph.names import LEADING_DROP, STOP_NAMES

if TYPE_CHECKING:
    from spacy.tokens import Span, Token

#: ``(name, type)`` → canonical ``(name, type)``, or ``None`` for no entity
#: (``rules.ExtractionRun._resolve``: aliases, well-known names, valid names).
Resolver = Callable[[str, str], "tuple[str, str] | None"]

#: Most words in a phrase name; a longer run of modifiers is a misparse more often than a term.
MAX_PHRASE_WORDS = 5
#: Dependency labels of modifiers that stay in the name ("dispatch inflexibility profile").
_KEPT_MODIFIERS = frozenset({"compound", "amod", "nmod"})
#: Head nouns that name nothing on their own ("take all reasonable steps", "in a timely
#: manner"); with a classifying modifier they may ("application form").
GENERIC_HEADS = frozenset(
    "step endeavour endeavor effort action way manner time case order purpose extent basis "
    "number amount period day week month year hour minute second thing matter part point "
    "use kind type form detail details information regard respect place effect result "
    "reason need means care attention consideration opportunity account copy list set "
    "approach process activity arrangement requirement level value data quantity work".split()
)
#: Adjectives that grade or qualify rather than classify ("minimum", "reasonable",
#: "compliant"): a name keeps none of them, nor anything to their left.
GRADING_ADJECTIVES = frozenset(
    "minimum maximum reasonable appropriate adequate sufficient necessary compliant suitable "
    "proper correct accurate complete full timely prompt additional further new current "
    "latest early earliest late best good satisfactory acceptable valid specific possible "
    "practicable available required own whole following above below initial first last "
    "next previous prior separate single multiple various several many more most less "
    "least high higher low lower actual complying existing".split()
)


def _counts_or_measures(tokens: list[Token]) -> bool:
    """A number, quantity, digit, symbol or bracket among ``tokens`` ("five year", "AS/NZS
    5139", "VU23631")."""
    return any(
        t.like_num or t.pos_ in ("NUM", "SYM") or t.dep_ in ("nummod", "quantmod")
        or any(c.isdigit() for c in t.text) or (t.is_punct and t.text not in "-‐‑")
        for t in tokens
    )


def _grades(token: Token) -> bool:
    """A token that points, grades or qualifies rather than classifies."""
    return (
        token.dep_ in ("det", "poss", "predet", "cc", "conj", "prep", "case", "advmod", "npadvmod")
        or token.lower_ in GRADING_ADJECTIVES or token.lower_ in LEADING_DROP
        # a finite verb misparsed as a modifier ("heat pump"); participles classify
        or (token.pos_ == "VERB" and token.tag_ not in ("VBN", "VBG"))
    )


def _modifier_tokens(head: Token) -> int:
    """Index of the first token of ``head``'s name: its left modifiers, nearest first, as long
    as each is a kept modifier whose subtree is contiguous with what is taken so far and
    neither counts, measures nor grades (a hyphenated modifier, "whole-of-system", is
    kept as one word); of a modifier whose subtree starts with a grading word ("minimum
    performance"), the words after it are kept and the walk ends."""
    start = head.i
    for child in reversed(list(head.lefts)):
        subtree = list(child.subtree)
        if subtree[-1].i != start - 1:
            break  # not adjacent: something between it and the name
        hyphen = child.dep_ == "punct" and child.text in "-‐‑" and len(subtree) == 1
        if hyphen:
            start = child.i
            continue
        if child.dep_ not in _KEPT_MODIFIERS or _counts_or_measures(subtree):
            break
        hyphenated = len(subtree) > 1 and all(
            not t.whitespace_ for t in subtree[:-1]
        ) and any(t.text in "-‐‑" for t in subtree)
        if not hyphenated:
            graded = [t.i for t in subtree if _grades(t)]
            if graded:
                if graded[-1] < child.i:
                    start = graded[-1] + 1
                break
        start = subtree[0].i
    return start


def phrase_span(head: Token) -> Span | None:
    """The name span of the noun phrase headed by ``head``, or ``None`` when it names nothing.

    ``None`` for a head that is not a noun, a pronoun or stop word (``names.STOP_NAMES``), a
    number, a quantity ("75 litres", "103 MW"), a gerund ("Working", "pertaining": mostly
    misparsed verbs and course titles) or a bare generic noun (``GENERIC_HEADS``); a bare
    generic noun with an "of" object names that object instead ("a copy of the
    certificate" → "certificate"), another bare noun keeps an "of" object without a
    determiner ("conflict of interest", "record of processing activities"). The span ends at
    ``head`` or at that object (no other phrase, no clause) and holds at most
    ``MAX_PHRASE_WORDS`` words.
    """
    if head.pos_ not in ("NOUN", "PROPN") or head.like_num or head.lower_ in STOP_NAMES:
        return None
    if not any(c.isalpha() for c in head.text) or head.lower_.endswith("ing"):
        return None
    if any(c.dep_ in ("nummod", "quantmod") for c in head.children):
        return None
    start = _modifier_tokens(head)
    end = head.i + 1
    of = next((c for c in head.rights if c.dep_ == "prep" and c.lower_ == "of"), None)
    pobj = next((c for c in of.children if c.dep_ == "pobj"), None) if of else None
    if start == head.i and head.lemma_.lower() in GENERIC_HEADS:
        return phrase_span(pobj) if pobj is not None else None
    if start == head.i and of is not None and of.i == end and pobj is not None:
        inner = phrase_span(pobj)
        if inner is not None and inner.start == of.i + 1 and inner.end == pobj.i + 1:
            end = inner.end  # "conflict of interest": the object is part of the name
    span = head.doc[start:end]
    words = [t for t in span if not t.is_punct]
    if len(words) > MAX_PHRASE_WORDS:
        return None
    return span


def phrase_mention(
    head: Token, by_token: dict[int, Mention], resolve: Resolver, party: bool = False
) -> Mention | None:
    """A mention named from the noun phrase ``head`` heads (``phrase_span``), for an
    obligation's party or object that no pattern names, or ``None`` when it names nothing.

    A code among the phrase's modifiers is the mention ("complete the UEE1234 Isolate
    circuits unit" → UEE1234). Otherwise the type is ``mentions.classify``'s (a role head
    noun makes a ``Role``, a Title-Case document name a ``Document``), else ``DefinedTerm``;
    a ``party`` (an obligation's subject) named by an acronym ("DNSPs") is a ``Role``.

    Args:
        head: the phrase's head token.
        by_token: the unit's mentions by token index.
        resolve: canonical name and type of a name (``Resolver``).
        party: the phrase is an obligation's subject.
    """
    span = phrase_span(head)
    if span is None:
        return None
    for token in head.doc[head.left_edge.i : head.i]:
        named = by_token.get(token.i)
        if named is not None and named.type == CODE:
            return named
    root = span.root
    name = span_name(span[: root.i + 1 - span.start])  # "conflicts" → "conflict" …
    if span.end > root.i + 1:  # … "of interest" as written
        name = f"{name} {span[root.i + 1 - span.start :].text}"
    kind = classify(name, DEFINED_TERM)
    if party and kind == DEFINED_TERM and re.fullmatch(r"[A-Z]{2,}s?", span[-1].text):
        kind = ROLE
    resolved = resolve(name, kind)
    if resolved is None:
        return None
    return Mention(span.start, span.end, resolved[0], resolved[1])
