"""One clause read for obligations (issue 26): its binding modals, the party each binds and
that party's role, the action, the deadline or condition, and the clause number of a heading;
for a rule about a thing, whether it binds the thing itself (``states_a_property``) and the
party a section heading names as bound (``heading_party``).
``kb_shared.compliance.obligations`` applies these rules to a document's chunks; its docstring states
what is and is not an obligation.

The rules are word patterns, no parse and no model: a modal is found outside quoted titles;
its subject is the text before it in its clause (cut at ``;``/``:``, the last comma, clause
words like "then", and a complementiser "provides that"), rejected when the modal sits in an
embedded clause ("whether …", "the limits that a unit must operate within"); a subject names a
party when its head noun is a role (``ROLE_RULES``, ``graph_vocabulary.ROLE_HEADS``), a known
organisation, an acronym, or a term the document defines as one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kb_shared.ingest.chunking import Chunk
from kb_shared.ingest.page_location import FIGURE_LINE
from kb_shared.providers.graph_vocabulary import DOCUMENT_HEADS, KNOWN_NAMES, ORGANISATION, ROLE_HEADS
from kb_shared.providers.spacy_graph.abbreviations import abbreviations
from kb_shared.providers.spacy_graph.names import LEADING_DROP, singular
from kb_shared.search.citations import heading_label, readable
from kb_shared.search.retrieval_features import Unit, units

MUST = "must"
MUST_NOT = "must not"
SHOULD = "should"
SHOULD_NOT = "should not"
#: The modalities an obligation has ("shall" is must; a recommendation is should).
MODALITIES = (MUST, MUST_NOT, SHOULD, SHOULD_NOT)

# --------------------------------------------------------------------------------------------
# Modals
# --------------------------------------------------------------------------------------------

#: Binding modals, longest forms first; the group names the modality (``_MODALITY_OF``).
#: "required from" is "a reply is required from the participant"; "requires" is the active
#: "NER clause 4.9.6 requires a Generator to …" (its party stands between "requires" and "to").
#: A duty that only may or would arise ("we may be required to pay", "might be prohibited
#: from", "would have to") binds nobody yet, as "may need to" and "may require" do not.
_MODAL = re.compile(
    r"\b(?:"
    r"(?P<exempt>(?:is|are|was|were|be|being)\s+not\s+(?:required|obliged|obligated)\s+to"
    r"|(?:(?:do|does|did|will)\s+not|(?:don|doesn|didn|won)[’']t)\s+(?:need|have)\s+to|need\s+not"
    r"|(?:may|might|could)\s+(?:also\s+)?(?:need\s+to|require[sd]?)"
    r"|(?:may|might|could|would)\s+(?:also\s+|not\s+)?(?:have\s+to|be\s+(?:required|obliged|obligated)\s+to"
    r"|be\s+(?:prohibited|forbidden)\s+from))"
    r"|(?P<forbid>(?:is|are|be)\s+(?:not\s+(?:permitted|allowed|authori[sz]ed)\s+to|prohibited\s+from|forbidden\s+(?:to|from)))"
    r"|(?P<must_not>(?:must|shall)\s+(?:not|never)|mustn[’']t|shan[’']t)"
    r"|(?P<may_not>may\s+not)"
    r"|(?P<should_not>should\s+(?:not|never)|ought\s+not\s+to)"
    r"|(?P<required>(?:is|are|be|will\s+be)\s+(?:required|obliged|obligated)\s+to)"
    r"|(?P<required_from>(?:is|are)\s+required\s+from)"
    r"|(?P<requires>require[sd]?|oblige[sd]?)(?=\s+(?!that\b|the\s+use\b)[^.;:,()]{1,90}?\s+to\s+[a-z])"
    r"|(?P<recommended>(?:is|are)\s+(?:strongly\s+)?(?:recommended|encouraged|advised)\s+to)"
    r"|(?P<must>must|shall|(?:will\s+)?needs?\s+to|(?:has|have)\s+to)"
    r"|(?P<should>should|ought\s+to)"
    r")\b(?!-)",
    re.IGNORECASE,
)
_MODALITY_OF = {
    "forbid": MUST_NOT, "must_not": MUST_NOT, "may_not": MUST_NOT, "should_not": SHOULD_NOT,
    "required": MUST, "required_from": MUST, "requires": MUST, "recommended": SHOULD,
    "must": MUST, "should": SHOULD,
}
#: A quoted span ("…", “…”, ‘…’ opening at a word start): a modal inside it is a title's.
_QUOTED = re.compile(r"(?:(?<=\s)|^|(?<=\())[\"“‘'][^\"”’'\n]{1,160}[\"”’']")
#: "should have been observed", "should already …": expectation, not recommendation.
_EPISTEMIC = re.compile(r"^\s*(?:have|already|now\s+have|be\s+(?:able|possible|noted|binding))\b", re.I)
#: Passive voice right after the modal: "be submitted", "not be set", "be set up".
_PASSIVE = re.compile(
    r"^\s*(?:not\s+)?(?:\w+ly\s+)?be\s+(?:\w+ly\s+)?"
    r"(?:[a-z]+(?:ed|en|wn|id|lt|nt|pt|ld|ne|de)|set|put|met|run|cut|kept|held|told|read|made|sent|paid|shut|given|done)\b",
    re.I,
)
#: Words after "no/the/a" that make "need to" a noun ("there is no need to").
_NOT_NEED = frozenset("no the a any without".split())
_POSSIBLY = frozenset("may might could would".split())
#: Verbs after "may not" that make it a possibility ("may not have the resources").
_NOT_A_BAN = re.compile(
    r"^\s*(?:have|be|notice|know|need|necessarily|always|apply|exist|reflect|include|want|work|occur|match)\b", re.I
)
#: Passive verbs of reading a text: "should not be interpreted as …" is about the document.
_INTERPRETIVE = re.compile(
    r"^\s*(?:not\s+)?be\s+(?:interpreted|construed|taken|relied|read|regarded|considered|deemed|viewed|understood)\b",
    re.I,
)
#: Openings of an illustration, not a rule ("For example, if …, the unit must …").
_EXAMPLE = re.compile(r"^[\W\d_]*(?:for\s+example|for\s+instance|e\.g\.|example\b)", re.I)


def _masked(text: str) -> str:
    """``text`` with quoted spans blanked (same length), so a quoted title's modal is unseen."""
    return _QUOTED.sub(lambda m: " " * len(m.group(0)), text)


def binding_modals(text: str) -> list[re.Match[str]]:
    """The ``_MODAL`` matches of ``text`` that bind: outside quotes, not an exemption ("is
    not required to"), a noun ("no need to") or a possibility ("may not have")."""
    found = []
    for match in _MODAL.finditer(_masked(text)):
        kind = match.lastgroup
        if kind == "exempt":
            continue
        if kind == "must" and "need" in match.group(0).lower():
            before = text[: match.start()].lower().split()
            if before and before[-1] in _NOT_NEED or _POSSIBLY.intersection(before[-5:]):
                continue  # "no need to", "may from time to time need to"
        if kind == "may_not" and _NOT_A_BAN.match(text[match.end():]):
            continue
        found.append(match)
    return found


def _modality(match: re.Match[str], text: str) -> str | None:
    """The modality of one ``_MODAL`` match, ``None`` for an expectation ("should have")."""
    kind = match.lastgroup or ""
    after = text[match.end():]
    if kind in ("should", "should_not") and _EPISTEMIC.match(after):
        return None
    return _MODALITY_OF.get(kind)


# --------------------------------------------------------------------------------------------
# Sentences that are not obligations
# --------------------------------------------------------------------------------------------

_LEADER_DOTS = re.compile(r"(?:\.\s?){4,}|…{2,}")
_PAGE_NUMBER_END = re.compile(r"\s\d{1,3}\s*$")
_DEFINITION = re.compile(
    r"^[\W_]*[\"“‘']?[A-Z][\w’'() /-]{0,60}?[\"”’']?\s+(?:means|refers\s+to|is\s+defined\s+as|has\s+the\s+meaning)\b"
)
LIST_MARKER = re.compile(
    r"^\s*(?:[-*+>]\s+)?(?:_?\((?P<para>[a-z]{1,2}|[ivxl]{1,6}|\d{1,2})\)_?|(?P<upper>[A-Z])\.(?=\s)|\d{1,2}[.)](?=\s))?\s*"
)
#: A line opening with a paragraph label followed by words ("- (d) The …", "A. energy …"),
#: not a formula ("(t) = …").
PARAGRAPH_LINE = re.compile(r"^\s*(?:[-*+]\s+)?(?:_?\((?:[a-z]{1,2}|[ivxl]{1,6}|\d{1,2})\)_?|[A-Z]\.)\s+[\w*_\"“‘(]")


_STRAY_EMPHASIS = re.compile(r"(?<![\w*_])[*_]+(?=\w)|(?<=\w)[*_]+(?![\w*_])")


def clause_text(unit_text: str) -> str:
    """``citations.readable`` of a unit, with emphasis marks it leaves ("should _not_") removed."""
    return _STRAY_EMPHASIS.sub("", readable(unit_text))


def not_a_requirement(text: str) -> bool:
    """A question, table-of-contents line, figure marker or definition (module docstring)."""
    stripped = text.strip()
    if not stripped or stripped.endswith("?") or FIGURE_LINE.match(stripped):
        return True
    if _EXAMPLE.match(stripped):
        return True
    if len(stripped) < 200 and (
        _LEADER_DOTS.search(stripped) or (_PAGE_NUMBER_END.search(stripped) and not stripped.endswith("."))
    ):
        return True  # a contents line
    return _DEFINITION.match(LIST_MARKER.sub("", stripped, count=1)) is not None


# --------------------------------------------------------------------------------------------
# Parties and roles
# --------------------------------------------------------------------------------------------

#: Roles by pattern over a party's words (and its definition), first match wins: the National
#: Electricity Rules' participant categories (NER chapter 2 and 10) and the usual parties of
#: retail and installation schemes; more specific before more general.
ROLE_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.I), role)
    for pattern, role in (
        (r"\baemo\b|australian energy market operator", "AEMO"),
        (r"\baer\b|australian energy regulator", "AER"),
        (r"demand response service providers?|\bdrsps?\b|wholesale demand response units?", "Demand Response Service Provider"),
        (r"transmission network service providers?|\btnsps?\b", "Transmission Network Service Provider"),
        (r"distribution network service providers?|\bdnsps?\b|\bdistributors?\b|distribution business", "Distributor"),
        (r"network service providers?|\bnsps?\b", "Network Service Provider"),
        (r"\bregistered participants?\b", "Registered Participant"),
        (r"\bgenerat(?:ors?|ing units?|ing systems?)\b", "Generator"),
        (r"\bretailers?\b", "Retailer"),
        (r"\binstallers?\b|\belectricians?\b|\bplumbers?\b", "Installer"),
        (r"\bmanufacturers?\b|\bsuppliers?\b", "Manufacturer"),
        (r"\b(?:customers?|consumers?|households?|homeowners?|occupiers?)\b", "Customer"),
        (r"\bworkers?\b", "Worker"),
        (r"\bparticipants?\b|\b(?:scheduled\s+)?resources?\b|\bscheduled loads?\b|\bbidirectional units?\b", "Market Participant"),
    )
)
#: Head nouns of a party besides ``graph_vocabulary.ROLE_HEADS``: people and bodies, and the
#: registered facilities of the NER that obligations name in place of their operator.
_PARTY_HEADS = frozenset(
    {*ROLE_HEADS, "person", "party", "entity", "business", "company", "staff", "personnel",
     "individual", "body", "authority", "government", "department", "minister", "commission",
     "council", "team", "you", "we", "unit", "resource", "load", "plant", "facility",
     "generator", "nsp", "tnsp", "dnsp", "drsp", "bidder", "registrant", "plumber"}
)
ORGANISATIONS = {c.lower(): c for c, kind, _ in KNOWN_NAMES if kind == ORGANISATION}
_NOT_PARTIES = {c.lower() for c, kind, _ in KNOWN_NAMES if kind != ORGANISATION}
#: Heads of a subject that is a computation or the system itself (module docstring).
_SYSTEM_HEADS = frozenset(
    "algorithm model engine equation process calculation formula software method function "
    "solver iteration mw node network loss losses quantity amount result constraint variable "
    "cvp value factor coefficient ratio".split()
)
#: ``_SYSTEM_HEADS`` a passive sentence cannot make an obligation of either ("the constraint
#: should be violated in preference to …"): a process or method may be run by someone.
_COMPUTED_HEADS = _SYSTEM_HEADS - {"process", "method", "function", "calculation", "network"}
_DOCUMENT_HEADS = frozenset(
    {*(singular(w.lower()) for h in DOCUMENT_HEADS for w in h.split()[-1:]), "publication",
     "document", "requirement", "standard", "guideline", "rule", "law"}
)
_THIS_DOCUMENT = re.compile(
    r"^(?:this|these|the)\s+(?:document|publication|procedure|guideline|guide|notice to market)s?\b|^nothing\b", re.I
)
#: A part of the document saying what it contains ("This section lists requirements that
#: retailers … must satisfy"): the modal inside describes the requirements stated elsewhere.
_DESCRIBES_ITSELF = re.compile(
    r"^(?:this|the\s+following)\s+(?:section|part|chapter|appendix|schedule|table|document|procedure"
    r"|guideline|guide|notice(?:\s+to\s+market)?)s?\s+(?:lists|sets\s+out|describes|outlines|explains"
    r"|summari[sz]es|details|covers|presents|introduces)\b",
    re.I,
)
#: One-word subjects that bind nobody: pronouns for things, and the document's own reader
#: ("readers should be familiar with …" says who the text is for).
_PRONOUN_THINGS = frozenset("this that it these those there which what reader readers".split())
#: Words that end a party's core noun phrase (a preposition, relative or participle follows).
_CORE_END = re.compile(
    r"\s(?:in|with|of|that|which|who|whose|providing|participating|for|under|not|during|from|on|at|to|by|as|when|where|if|whether)\s"
    r"|\s(?:acting|working|\w{3,}ed)\s+(?=(?:in|to|on|for|by|under|as|with|at)\s)|\s\(|,",
    re.I,
)
_SPLIT_PARTIES = re.compile(r"\s*(?:,|\band/or\b|\band\b|\bor\b|/)\s*", re.I)
_SUBJECT_CUT = re.compile(r"[;:]|\s[–—-]\s")
_CLAUSE_WORDS = re.compile(r"\b(?:then|but|so|thus|hence|therefore|however|whereas|also|accordingly)\s", re.I)
_VERBISH = re.compile(r"\b(?:may|will|can|could|would|is|are|was|were|has|have|had|does|do|did|sets?|provides?)\b", re.I)
_EMBEDDING = re.compile(r"\b(?:which|whom|whose|whether|how|what|why|where|because)\b", re.I)
#: Words before "that" that make it a complement ("NER clause 5.3 provides that …").
_COMPLEMENT_VERBS = frozenset(
    "provides provide provided states state stated stipulates specifies specify requires require "
    "ensure ensures notes note means mean confirm confirms clarified clarifies advise advises "
    "so such given agreed considers determines says said is are".split()
)
_SUBORDINATE_START = re.compile(r"^(?:where|if|when|unless|once|while|whilst|although|because|since)\b", re.I)
_MAIN_AFTER = re.compile(r",\s+(?:[A-Z][\w-]*|the\s+[\w-]+)(?:\s+[\w-]+){0,3}\s+(?:will|must|shall|is|are|can|may|should)\b")
_PREPOSITION_START = re.compile(r"^(?:in|at|on|for|during|under|from|with|after|before|within|as|to|by|upon|following)\b", re.I)
#: An auxiliary verb: a "requires X to" whose X holds one is two clauses, not a party.
_AUXILIARY = re.compile(r"\b(?:will|would|shall|should|must|can|could|may|might)\b", re.I)
_NOT_AN_AGENT = re.compile(r"^(?:by|or|and|in|of|for|to|from|with|on|at|as|than|that|it)\b", re.I)
_LEADING_JUNK = re.compile(r"^(?:(?:then|and|but|so|also|however|thus|therefore)\b[\s,]*)+", re.I)


_TERM_DEFINITION = re.compile(
    r"^[\W_]*[\"“‘']?(?P<term>[A-Z][\w’' -]{0,50}?)[\"”’']?\s+(?:means|refers\s+to|is\s+defined\s+as)\s+(?P<body>[^.;]{3,200})"
)
_ALIAS = re.compile(r"\(\s*(?:the\s+|a\s+|each\s+)?[\"“‘']?(?P<term>[A-Z][\w’'-]*(?:\s+[A-Z][\w’'-]*){0,3})[\"”’']?\s*\)")


_NOT_A_DEFINITION_START = re.compile(r"^(?:must|shall|should|may|is|are|will|can|no|yes|n/a)\b", re.I)


def _glossary_entry(term: str, body: str) -> bool:
    """A table row's first two cells are a term and its definition: a short term with a
    letter (not a clause number), a body of 3 words or more that does not open with a modal."""
    words = term.split()
    return (
        0 < len(words) <= 5 and re.search(r"[A-Za-z]{2}", term) is not None
        and len(body.split()) >= 3 and not _NOT_A_DEFINITION_START.match(body)
    )


def defined_terms(chunks: Sequence[Chunk], cut: Sequence[Sequence[Unit]] | None = None) -> dict[str, str]:
    """The terms ``chunks`` define, lower case -> definition: "X means …" sentences, glossary
    rows (``| X | definition |``), abbreviations "Long Form (LF)"
    (``spacy_graph.abbreviations``) and aliases "Acme Pty Ltd (the Retailer)" (alias -> the
    words before it). ``cut``: each chunk's ``units`` when the caller has them."""
    defined: dict[str, str] = {}
    for number, chunk in enumerate(chunks):
        for short, long_form, _ in abbreviations(chunk.text):
            defined.setdefault(short.lower(), long_form)
        for unit in cut[number] if cut is not None else units(chunk.text):
            text = readable(unit.text)
            if unit.text.startswith("|"):
                cells = [c.strip() for c in text.split(" | ")]
                if len(cells) >= 2 and _glossary_entry(cells[0], cells[1]):
                    defined.setdefault(cells[0].lower().strip("*"), cells[1])
                continue
            found = _TERM_DEFINITION.match(LIST_MARKER.sub("", text, count=1))
            if found is not None:
                defined.setdefault(found.group("term").lower(), found.group("body"))
            for alias in _ALIAS.finditer(text):
                term = alias.group("term")
                if any(rule.search(term) for rule, _ in ROLE_RULES):
                    before = text[: alias.start()].split()[-6:]
                    defined.setdefault(term.lower(), f"{term} {' '.join(before)}")
    return defined


def _head_phrase(part: str) -> str:
    """``part`` without leading determiners ("the relevant Market Participant" -> "Market
    Participant"), its last word singular."""
    words = [w.strip("()[]'\"“”‘’.,") for w in part.split()]
    while words and words[0].lower() in LEADING_DROP:
        words.pop(0)
    if words:
        words[-1] = singular(words[-1])
    return " ".join(w for w in words if w)


def role_of(party: str, defined: dict[str, str] | None = None) -> str | None:
    """The normalised role of ``party`` (``Obligation.role``): the first ``ROLE_RULES`` match
    over the party's words, else over the document's definition of it (``defined``, from
    ``defined_terms``), else its head phrase in Title Case; ``None`` for an empty party."""
    head = _head_phrase(party)
    if not head:
        return None
    known = ORGANISATIONS.get(head.lower())
    if known is not None:
        return known
    candidates = [party]
    definition = (defined or {}).get(head.lower()) or (defined or {}).get(party.lower().strip())
    if definition:
        candidates.append(" ".join(definition.split()[:_DEFINITION_HEAD_WORDS]))
    for text in candidates:
        role = _first_role(text)
        if role is not None:
            return role
    if head.lower() in ("you", "we"):
        return None
    head = _head_phrase(_core(party)) or head
    return " ".join(w if w.isupper() else w[:1].upper() + w[1:] for w in head.split())


def party_filter(text: str) -> str:
    """A party filter as the register's rows are matched by (``search_obligations``'s
    ``party``): leading determiners dropped ("the", "all", ``LEADING_DROP``); a filter that is
    wholly a name of one of ``ROLE_RULES``' roles becomes that role ("DNSPs", "distribution
    network service providers" -> "Distributor"; "retailers" -> "Retailer"); else its last
    word singular ("Market Participants" -> "Market Participant"), so a phrase matches its
    plural too. ``""`` for a blank filter."""
    words = text.split()
    while len(words) > 1 and words[0].lower() in LEADING_DROP:
        words = words[1:]
    if not words:
        return ""
    phrase = " ".join(words)
    for rule, role in ROLE_RULES:
        if rule.fullmatch(phrase):
            return role
    return " ".join([*words[:-1], singular(words[-1])])


#: Words of a definition that hold its head noun ("a person who …", "the retailer that …").
_DEFINITION_HEAD_WORDS = 6


def _first_role(text: str) -> str | None:
    """The role of the ``ROLE_RULES`` match that starts first in ``text`` (rule order on a
    tie): "the participant advising AEMO" is a participant."""
    best: tuple[int, int, str] | None = None
    for order, (rule, role) in enumerate(ROLE_RULES):
        found = rule.search(text)
        if found is not None and (best is None or (found.start(), order) < best[:2]):
            best = (found.start(), order, role)
    return best[2] if best else None


def names_a_party(part: str, defined: dict[str, str]) -> bool:
    """``part`` names a party: a known organisation, a role or facility head noun, a role the
    document defines, or an acronym that is not a known document or system."""
    head = _head_phrase(part)
    if not head:
        return False
    lower = head.lower()
    if lower in ORGANISATIONS:
        return True
    if lower in _NOT_PARTIES:
        return False
    last = lower.split()[-1]
    if last in _PARTY_HEADS or any(rule.search(head) for rule, _ in ROLE_RULES):
        return True
    definition = defined.get(lower)
    if definition is not None:  # "Solar Retailer means a retailer …": its head noun decides
        opening = definition.split()[:_DEFINITION_HEAD_WORDS]
        heads = any(w.lower().strip(",.;") in _PARTY_HEADS for w in opening)
        return heads or _first_role(" ".join(opening)) is not None
    return bool(re.fullmatch(r"[A-Z][A-Z0-9&]{1,7}", head.split()[-1])) and len(head.split()) == 1


def _core(subject: str) -> str:
    """The noun phrase(s) at the front of ``subject``, before a preposition or relative."""
    found = _CORE_END.search(f"{subject} ")
    return subject[: found.start()].strip() if found else subject.strip()


def parties_of(subject: str, defined: dict[str, str]) -> list[str]:
    """The parties a subject names: one per conjoined noun phrase that names a party
    ("Market Participants and NSPs" -> both; the last keeps the subject's qualifier: "X or
    parties acting on behalf of X" -> "X", "parties acting on behalf of X"); the whole
    subject when it is one party; ``[]`` when it names none."""
    core = _core(subject)
    parts = [p for p in _SPLIT_PARTIES.split(core) if p.strip()]
    if len(parts) > 1 and all(names_a_party(p, defined) for p in parts):
        rest = subject.strip()[len(core):] if subject.strip().startswith(core) else ""
        return [p.strip() for p in parts[:-1]] + [_trim_party(f"{parts[-1].strip()}{rest}")]
    if names_a_party(core, defined) or (parts and names_a_party(parts[-1], defined)):
        return [_trim_party(subject)]
    return []


#: Longest party kept, in words (a subject may carry a long qualifier).
_PARTY_WORDS = 16


def _trim_party(subject: str) -> str:
    words = subject.strip(" ,").split()
    return " ".join(words[:_PARTY_WORDS])


# --------------------------------------------------------------------------------------------
# One sentence
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reading:
    """One binding modal of a clause (``read_clause``).

    Attributes:
        modality: one of ``MODALITIES``.
        parties: the parties its subject names, one per conjoined party; ``()`` when the
            subject names none (``thing``) or the clause opens with the modal.
        at: the modal's character offset in the clause.
        action: the clause from the modal on, as printed ("must advise AEMO …").
        subject: the text read as its subject (``""`` when the clause opens with the modal).
        thing: the subject is no party but still bound (a rule about an artefact, a passive
            duty): the caller infers the party (``kb_shared.compliance.obligations``).
        receiver: ``thing`` because the subject is a party that receives the action ("The
            customer must not be required to pay …"): the party bound is someone else.
    """

    modality: str
    parties: tuple[str, ...]
    at: int
    action: str
    subject: str
    thing: bool
    receiver: bool = False


def _subject(text: str, start: int, end: int) -> str | None:
    """The subject before a modal at ``end`` in ``text[start:end]``; ``None`` when the modal
    sits in an embedded clause (module docstring)."""
    bracketed = re.sub(r"\([^()]*\)", lambda m: " " * len(m.group(0)), text[start:end])
    segment = _SUBJECT_CUT.split(bracketed)[-1]
    pieces = segment.split(",")
    subject = pieces[-1]
    if not subject.strip() and len(pieces) >= 3 and re.match(r"\s*(?:or|and|and/or)\s", pieces[-2]):
        subject = f"{pieces[-3]}{pieces[-2]}"  # "X, or parties acting on behalf of X, must not"
    if len(pieces) > 1 and _PREPOSITION_START.match(subject.strip()) and pieces[-2].strip():
        if _EMBEDDING.search(subject):
            return None  # "…, with the exception of territories where companies are not allowed to"
        subject = pieces[-2]  # "AEMO, as the operator, must"
    words = _CLAUSE_WORDS.split(subject)
    subject = words[-1]
    for joined in re.finditer(r"\s(?:and|or)\s", subject):
        if _VERBISH.search(subject[: joined.start()]):
            tail = subject[joined.end():]
            subject = tail if tail.strip() else subject
    if _EMBEDDING.search(subject) or re.search(r"\b(?:that|who|and|or)\s*$", subject):
        return None  # "the error that should apply", "…, which must be"
    that = list(re.finditer(r"\bthat\s", subject))
    if that:
        last = that[-1]
        before = subject[: last.start()].split()
        after = subject[last.end():].strip()
        if before and before[-1].lower().strip(",") in _COMPLEMENT_VERBS:
            subject = after
        elif after and (after.split()[0].lower() in LEADING_DROP or after[:1].isupper()):
            return None  # "the limits that a unit must operate within"
    subject = _LEADING_JUNK.sub("", LIST_MARKER.sub("", subject.strip(), count=1)).strip()
    if _SUBORDINATE_START.match(subject) or re.match(r"(?:by|than|nor|neither)\b", subject, re.I):
        return None  # "… than is required by customers has to …", "Nor should …"
    return subject


def read_clause(text: str, defined: dict[str, str] | None = None) -> list[Reading]:
    """The binding modals of one clause (``text`` as ``clause_text`` gives it), one per
    subject: a second modal of the same subject ("must advise … and must request …") is not
    repeated; a modal in an embedded clause, an exemption, a system description (module
    docstring of ``kb_shared.compliance.obligations``) gives none. ``defined``: ``defined_terms``."""
    defined = {} if defined is None else defined
    out: list[Reading] = []
    previous_end = 0
    opening = LIST_MARKER.sub("", text, count=1)
    if _DESCRIBES_ITSELF.match(opening.strip()):
        return out  # the document describing itself binds nobody (_DESCRIBES_ITSELF)
    for match in binding_modals(text):
        modality = _modality(match, text)
        if modality is None:
            previous_end = match.end()
            continue
        kind = match.lastgroup
        action = text[match.start():].strip().rstrip(" ;,.")
        if kind == "requires":  # "NER clause 4.9.6 requires a Generator to confirm …"
            rest = text[match.end():]
            to = re.search(r"\s+to\s+(?=[a-z])", rest)
            if to is None:
                continue
            subject = rest[: to.start()].strip()
            action = "must " + rest[to.end():].strip().rstrip(" ;,.")
            requirer = _subject(text, previous_end, match.start())
            if requirer is None or _NOT_AN_AGENT.match(subject) or _AUXILIARY.search(subject):
                continue  # "if organizations require users to …", "required by customers",
                # "requires significant resources and will subject us to …" (a clause, no party)
            parties = parties_of(subject, defined)
            if not parties:
                continue
            out.append(Reading(modality, tuple(parties), match.start(), action, subject, False))
            previous_end = match.end()
            continue
        if kind == "required_from":
            agent = text[match.end():].strip()
            subject = _core(agent)
            parties = parties_of(subject, defined)
            if parties:
                out.append(Reading(modality, tuple(parties), match.start(), action, subject, False))
            previous_end = match.end()
            continue
        if _SUBORDINATE_START.match(opening) and _MAIN_AFTER.search(text[match.end():]):
            previous_end = match.end()
            continue  # "Where … AEMO is required to set a price …, NEMDE will be run twice"
        subject = _subject(text, previous_end, match.start())
        previous_end = match.end()
        if subject is None:
            continue
        if not subject.strip():
            if not out:  # a modal without subject: a list of parties before it may name them
                out.append(Reading(modality, (), match.start(), action, "", False))
            continue  # "must advise … and request …": the same party's second verb
        after = text[match.end():]
        passive = _PASSIVE.match(after) is not None
        parties = parties_of(subject, defined) if subject else []
        if parties and _RECEIVES.match(after):
            # "The customer must not be required to pay …": the subject is who is protected;
            # the party bound is whoever would require, charge or tell it (inferred)
            out.append(Reading(modality, (), match.start(), action, subject, True, receiver=True))
            continue
        if parties:
            if kind == "may_not" and passive:
                continue
            out.append(Reading(modality, tuple(parties), match.start(), action, subject, False))
            continue
        if not _binds_a_thing(subject, passive, kind, after):
            continue
        out.append(Reading(modality, (), match.start(), action, subject, True))
    return out


#: Passive verbs after a modal whose party subject receives the action rather than owes it.
_RECEIVES = re.compile(
    r"^\s*(?:not\s+)?be\s+(?:required|asked|made|forced|pressured|charged|billed|given|told|offered|sent|issued"
    r"|provided|informed|notified|advised)\b",
    re.I,
)
#: Verbs of an outcome after "should" ("This action should assist the participant"): what a
#: thing is expected to do, not what anyone is asked to.
_OUTCOME = re.compile(
    r"^\s*(?:also\s+)?(?:assist|help|allow|enable|result|lead|improve|reduce|increase|occur|apply|remain"
    r"|provide|give|ensure|mean|make)\b",
    re.I,
)


def _binds_a_thing(subject: str, passive: bool, kind: str | None, after: str) -> bool:
    """A subject naming no party still makes an obligation (module docstring): a rule about an
    artefact or a passive duty, not a system's behaviour, the document itself or a pronoun."""
    words = subject.split()
    if not words:
        return False  # a modal without subject: only a list of parties before it helps
    if (len(words) == 1 and words[0].lower() in _PRONOUN_THINGS) or _THIS_DOCUMENT.match(subject.strip()):
        return False
    if _INTERPRETIVE.match(after) or words[0].lower() in ("no", "none", "nothing"):
        return False  # "should not be interpreted as …", "no pre-processing is required to …"
    if _AUXILIARY.fullmatch(words[0]):
        return False  # "we have and will maintain … our liquidity needs to …": a verb, no thing
    if kind == "may_not":
        return False  # "the flag may not be set": possibility as often as prohibition
    head = _head_phrase(_core(subject)).lower().split()
    if not head or re.fullmatch(r"[\d.,]+", head[0]):
        return False
    if head[-1] in _COMPUTED_HEADS or (head[-1] in _SYSTEM_HEADS and not passive):
        return False
    if " ".join(head) in _NOT_PARTIES or head[-1] in _DOCUMENT_HEADS and not passive:
        return False  # "NEMDE is required to …", "Such standards shall not apply to …"
    return not (kind in ("should", "should_not") and _OUTCOME.match(after))


# --------------------------------------------------------------------------------------------
# Who a rule about a thing binds
# --------------------------------------------------------------------------------------------

#: Predicates stating what a thing is or has ("must comply with", "should include", "must be
#: listed on", "should be capable of"), not an act someone performs on it ("must be installed").
_PROPERTY = re.compile(
    r"^\s*(?:(?:only|also|always|ideally)\s+)*(?:comply|conform|have|contain|include|incorporate|support"
    r"|be\s+(?:(?:only|also|fully)\s+)?(?:listed|compatible|capable|able|compliant|lower|higher|greater|less|rated))\b",
    re.I,
)
#: Head nouns of the records and messages a party produces ("The notice should include …",
#: "any bids … will need to include a reason"): a rule on one binds whoever produces it.
_ARTEFACT_HEADS = frozenset(
    "notice notification record report bid rebid offer instruction request estimate quote quotation "
    "warranty certificate application claim submission statement reason response invoice contract "
    "agreement plan form letter message".split()
)
#: Nouns naming an act someone performs ("installation", "servicing", "assessment"): a rule on
#: one binds whoever performs it.
_ACT_NOUN = re.compile(r"(?:ation|ment|ing)$")


def states_a_property(subject: str, after: str) -> bool:
    """A rule about a thing that binds the thing as named (issue 26 labels: "Solar PV inverters
    must comply with AS/NZS 4777.2" has party "Solar PV inverters", no role): ``after`` (the
    text after the modal) states a property (``_PROPERTY``) and the subject is no record or
    message a party produces (``_ARTEFACT_HEADS``) nor an act (``_ACT_NOUN``)."""
    head = _head_phrase(_core(subject)).lower().split()
    if not head or _PROPERTY.match(after) is None:
        return False
    return head[-1] not in _ARTEFACT_HEADS and _ACT_NOUN.search(head[-1]) is None


_HEADING_LEAD = re.compile(r"^[\W_]*(?:(?:new|updated)[\W_]+)*(?:(?:section|part|chapter)\s+)?(?:\d+(?:\.\d+)*[.:]?\s+)?", re.I)
_DUTY_WORDS = r"(?:obligations|requirements|responsibilities|duties|recommendations)"
_HEADING_DASH = re.compile(r"\s*[–—]\s*|\s+-\s+")
_DUTIES_AT_END = re.compile(rf"\s+(?:(?:mandatory|general|key|specific|additional|minimum|main)\s+)*{_DUTY_WORDS}\W*$", re.I)
_DUTIES_OF = re.compile(rf"^{_DUTY_WORDS}\s+(?:of|for|on)\s+", re.I)


def heading_party(heading: str, defined: dict[str, str] | None = None) -> str | None:
    """The party a heading names as the one its section binds: "4.2 Installer obligations",
    "3.1.3 Solar PV installers – mandatory workforce requirements", "Obligations of
    retailers"; ``None`` when the heading names no duties or their subject is no party
    ("Solar PV systems – mandatory requirements", "9.1 Minimum Ramp Rate Requirements")."""
    text = _HEADING_LEAD.sub("", heading.replace("*", "")).strip()
    if not re.search(_DUTY_WORDS, text, re.I):
        return None
    parts = _HEADING_DASH.split(text, maxsplit=1)
    if len(parts) == 2 and re.search(_DUTY_WORDS, parts[1], re.I):
        topic = parts[0]
    elif (found := _DUTIES_OF.match(text)) is not None:
        topic = text[found.end():]
    elif (found := _DUTIES_AT_END.search(text)) is not None:
        topic = text[: found.start()]
    else:
        return None
    parties = parties_of(topic, defined or {})
    return parties[0] if len(parties) == 1 else None


# --------------------------------------------------------------------------------------------
# Deadlines and references
# --------------------------------------------------------------------------------------------

_DEADLINE = re.compile(
    r"\b(?:within\s+\d+\s+(?:business\s+|working\s+|calendar\s+)?"
    r"(?:days?|hours?|minutes?|mins?|weeks?|months?|years?)(?:\s+(?:of|after|from|before)\s+[^,;.]{1,60})?"
    r"|no\s+later\s+than\s+[^,;.]{1,60}|not\s+later\s+than\s+[^,;.]{1,60}"
    r"|(?:at\s+least\s+\d+\s+\w+\s+)?(?:prior\s+to|before)\s+(?!it\b)[^,;.]{1,60}"
    r"|by\s+(?:\d{1,2}\s+[A-Z][a-z]+(?:\s+\d{4})?|[A-Z][a-z]+\s+\d{1,2}(?:,\s+\d{4})?"
    r"|the\s+end\s+of\s+[^,;.]{1,40}|\d{1,2}(?::\d\d)?\s*(?:am|pm))"
    r"|on\s+or\s+before\s+[^,;.]{1,60}|as\s+soon\s+as\s+(?:reasonably\s+)?(?:practicable|possible)"
    r"|immediately|promptly|without\s+delay|in\s+advance(?:\s+of\s+[^,;.]{1,60})?|as\s+a\s+matter\s+of\s+urgency"
    r"|(?:each|every)\s+(?:trading\s+|dispatch\s+)?(?:day|week|month|year|quarter|interval|trading\s+interval))",
)
_CONDITION = re.compile(
    r"^(?:(?:if|where|when|once|unless|absent|outside\s+of|as\s+soon\s+as)\b[^,]{3,200}?)(?=,|\s+then\b|:)",
    re.I,
)
_TRAILING_CONDITION = re.compile(r"\s(?P<cond>(?:if|when|where|unless|once)\s[^;.]{3,160})$", re.I)


def deadline_of(text: str, action: str) -> str | None:
    """The deadline or condition of an obligation: a time phrase in its action ("within 2
    business days", "before installation", "by 30 June 2026", "no later than …", "promptly",
    "in advance"), else the condition the sentence opens with ("If the spot price exceeds the
    APC") or ends with ("… if the ramp rate is below 3 MW/min"); ``None`` when neither."""
    found = _DEADLINE.search(action)
    if found is not None:
        return found.group(0).strip()
    opening = _CONDITION.match(_LEADING_JUNK.sub("", LIST_MARKER.sub("", text, count=1)).strip())
    if opening is not None:
        return opening.group(0).strip()
    trailing = _TRAILING_CONDITION.search(action.rstrip(" .;"))
    return trailing.group("cond").strip() if trailing else None


_HEADING_NUMBER = re.compile(
    r"^\s*(?:(?:section|clause|part|schedule|appendix|attachment|annex(?:ure)?)\s+)?"
    r"(?P<number>[A-Z](?:\.\d+)+|\d+[A-Z]?(?:\.\d+[A-Z]?)*|[A-Z](?=[.\s]))\.?(?=\s|$)",
    re.I,
)


def heading_number(heading: str) -> str | None:
    """The section number a heading opens with ("4.2" from "4.2 Installer obligations", "A.3",
    "9" from "9. Ramp rates", "A" from "Appendix A. …"); ``None`` when it has none."""
    found = _HEADING_NUMBER.match(heading.replace("*", ""))
    if found is None:
        return None
    number = found.group("number")
    lettered = heading.lower().lstrip().startswith(("appendix", "annex", "attachment", "schedule"))
    if len(number) == 1 and number.isalpha() and not lettered:
        return None
    return number



# --------------------------------------------------------------------------------------------
# Numbered requirements stated as commands
# --------------------------------------------------------------------------------------------

#: A numbered clause that is one sentence opening with a capitalised word: "3.1.1 Limit system
#: access to authorized users …." (NIST SP 800-171 §3 states its 110 requirements so).
_NUMBERED_SENTENCE = re.compile(
    r"^\s*(?:[-*+]\s+)?(?P<number>\d+(?:\.\d+)+)\.?\s+(?P<command>(?P<word>[A-Z][a-z]+)\b[^:?]*\.)\s*$"
)
#: Opening words that start a statement, not a command (articles, pronouns, determiners,
#: prepositions, conjunctions, adverbs of place or time).
_NOT_A_COMMAND = frozenset(
    "the a an this that these those it its their there here each every all any some no none "
    "for in on at by of to from with within under over after before during where when if "
    "unless while as since although though because and or but not only also however further "
    "other such our we you they he she one two three".split()
)
#: A heading that says its section holds requirements ("THE REQUIREMENTS", "Basic Security
#: Requirements", "Installer requirements").
_REQUIREMENTS_HEADING = re.compile(r"\brequirements?\b", re.IGNORECASE)


def numbered_command(text: str, heading_path: Sequence[str]) -> tuple[str, str, str] | None:
    """``(number, command, sentence)`` when ``text`` (a clause or a heading as printed) is a
    numbered requirement stated as a command in its own section of requirements ("3.1.1 Limit
    system access to authorized users …." under "THE REQUIREMENTS › 3.1 ACCESS CONTROL"): a
    clause number, then one sentence whose first word is capitalised and no article, pronoun,
    preposition or conjunction (``_NOT_A_COMMAND``) nor a plural or third-person form
    ("Requirements apply"); a heading of ``heading_path`` (outermost first) names requirements,
    and the number extends a numbered heading of the path when it has one (a requirement quoted
    as an example elsewhere is not read twice). ``sentence`` is ``text`` as a reader sees it
    (``citations.heading_label``: no marks, no footnote markers). A command binds whoever
    applies the document; it has no modal, so ``read_clause`` finds none. ``None`` otherwise."""
    sentence = heading_label(text)
    found = _NUMBERED_SENTENCE.match(sentence)
    if found is None or not any(_REQUIREMENTS_HEADING.search(h) for h in heading_path):
        return None
    word, number = found.group("word").lower(), found.group("number")
    if word in _NOT_A_COMMAND or (word.endswith("s") and not word.endswith("ss")):
        return None
    sections = [n for n in map(heading_number, heading_path) if n]
    if sections and not any(number.startswith(f"{n}.") for n in sections):
        return None
    return number, found.group("command"), sentence
