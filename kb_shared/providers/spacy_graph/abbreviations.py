"""Abbreviation definitions: "Long Form (SF)" in prose, after Schwartz & Hearst ("A simple
algorithm for identifying abbreviation definitions in biomedical text", PSB 2003), and
glossary entries whose definition is an acronym's expansion or an alias's full name."""

from __future__ import annotations

import re
from functools import cache

from kb_shared.providers.spacy_graph.mentions import singular_name
from kb_shared.providers.spacy_graph.names import tidy

#: Function words a long form may hold without a letter in the short form.
_SKIPPABLE = frozenset("of and the for in on to a an or at by with & from".split())


def fits_initials(letters: str, words: list[str]) -> bool:
    """True when ``letters`` spell ``words`` by initials: every word is used (its first
    character matches the next letter, and capitals inside it may match the letters after
    that: "MegaWatt" → "MW"), except function words (``of``, ``and``…), which may be skipped.

    Args:
        letters: the short form, lower-case letters and digits only.
        words: the candidate long form, one string per word.
    """

    @cache
    def spells(li: int, wi: int) -> bool:
        """Whether ``letters[li:]`` spell ``words[wi:]``."""
        if wi == len(words):
            return li == len(letters)
        word = words[wi]
        if word.lower() in _SKIPPABLE and spells(li, wi + 1):
            return True
        if li >= len(letters) or word[0].lower() != letters[li]:
            return False
        inner = [c.lower() for c in word[1:] if c.isupper() or c.isdigit()]
        # take the initial, then 0..k of the word's inner capitals in order
        nxt = li + 1
        if spells(nxt, wi + 1):
            return True
        for c in inner:
            if nxt < len(letters) and letters[nxt] == c:
                nxt += 1
                if spells(nxt, wi + 1):
                    return True
        return False

    return spells(0, 0)


def abbreviations(text: str) -> list[tuple[str, str, int]]:
    """Abbreviation definitions "Long Form (SF)" in ``text``.

    Candidates follow Schwartz & Hearst (PSB 2003): a short form of 2–10 characters in
    parentheses, starting with a letter and holding a capital; the long form lies in the
    ``min(len(SF) + 5, 2 * len(SF))`` words before the parenthesis. Their character-level
    match accepts long forms like "MII/s where there are violated prices" for "MPC", so the
    match here is stricter: the short form's letters must be the initials of the long form's
    words (``fits_initials``), the last word before the parenthesis included, and the long
    form never crosses a clause boundary. The shortest such long form wins; a plural short
    form ("VPNs") gives singular forms.

    Returns:
        ``[(short form, long form, start offset of the long form)]`` in text order.
    """
    results: list[tuple[str, str, int]] = []
    for m in re.finditer(r"\(\s*([A-Za-z][A-Za-z0-9&/.-]{1,9})\s*\)", text):
        short = m.group(1).rstrip(".")
        if not re.search(r"[A-Z]", short) or sum(c.isalpha() for c in short) < 2:
            continue
        letters = "".join(c.lower() for c in short if c.isalnum())
        if re.fullmatch(r"[A-Z0-9]+s", short):  # a plural short form: "NSPs"
            letters = letters[:-1]
        before = text[: m.start()].rstrip()
        limit = min(len(short) + 5, 2 * len(short))
        spans = list(re.finditer(r"[^\s/-]+", before))[-limit:]
        spans = [w for w in spans if w.group(0).strip("“”\"'‘’,")]
        for first in range(len(spans) - 1, -1, -1):
            chunk_words = [w.group(0).strip("“”\"'‘’") for w in spans[first:]]
            if any(re.search(r"[.;:,)(]$", w) for w in chunk_words[:-1]):
                break  # never across a clause boundary
            if chunk_words[0].lower() in _SKIPPABLE:
                continue  # "of Management and Budget" is not a long form
            if chunk_words and fits_initials(letters, chunk_words):
                start = spans[first].start()
                # "Small-scale Renewable Energy Scheme": start at the hyphenated word
                while start > 0 and before[start - 1] in "-/" and before[start - 2 : start - 1].isalnum():
                    start = before.rfind(" ", 0, start - 1) + 1
                long_form = tidy(before[start:])
                if re.fullmatch(r"[A-Z0-9]+s", short):  # "virtual private networks (VPNs)"
                    short = short[:-1]
                    long_form = singular_name(long_form)
                if long_form and long_form.lower() != short.lower():
                    results.append((short, long_form, start))
                break
    return results


def abbreviation_of(names: list[str], body: str) -> str:
    """The expansion when a glossary entry is an abbreviation or an alias, else ``""``.

    An acronym (two or more capitals) takes the definition's first phrase when that starts
    with the acronym's letter; another name takes it when it is a Title-Case phrase of at
    most 5 words ("Participant" → "Market Participant").
    """
    first = names[0]
    head = re.split(r",|\(|;|\.\s|\s+as\s+|\s+which\s+|\s+and\s+[‘'\"]", body)[0].strip()
    head = tidy(head)
    words = head.split()
    if not words or len(words) > 8:
        return ""
    acronym = re.fullmatch(r"[A-Z][A-Za-z0-9_&-]*[A-Z0-9]s?", first) and sum(
        c.isupper() for c in first
    ) >= 2
    if acronym:
        return head if words[0][:1].lower() == first[:1].lower() else ""
    if len(words) <= 5 and all(w[:1].isupper() for w in words if w.lower() not in ("of", "and")):
        return head
    return ""
