"""The graph vocabulary both extractors write: entity and relationship types, parties and
well-known names, and how one document's mentions merge into entities (``EntityTable``).

The offline extractor (``local_graph``) finds these types with rules, the cloud one
(``cloud_graph``) asks Claude for them under a JSON schema; both import them from here so
they write one graph.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kb_shared.graph_model import Entity, entity_key

# --------------------------------------------------------------------------------------
# Entity types
# --------------------------------------------------------------------------------------
#: A party that acts or is acted on: Retailer, Market Participant, installer.
ROLE = "Role"
#: A named body: AEMO, NIST, Energy Safe Victoria.
ORGANISATION = "Organisation"
#: A document, law, standard or clause reference (NER clause 3.8.1, SP 800-171).
DOCUMENT = "Document"
#: An identifier kept whole: IN008-24, SO_OP_3705, VIC1-NSW1.
CODE = "Code"
#: A term a document defines (glossary, ``'X' means …``, abbreviation) or italicises.
DEFINED_TERM = "DefinedTerm"

#: Entity types, most specific first: a name claimed by two types keeps the earlier one.
ENTITY_TYPES: tuple[str, ...] = (ROLE, ORGANISATION, DOCUMENT, CODE, DEFINED_TERM)
#: Entity type -> rank in ``ENTITY_TYPES`` (lower is more specific).
TYPE_RANK: Mapping[str, int] = {name: rank for rank, name in enumerate(ENTITY_TYPES)}

# --------------------------------------------------------------------------------------
# Relationship types
# --------------------------------------------------------------------------------------
#: Obligations (subject + modal + verb + object): must/shall/is required to.
MUST = "MUST"
#: must not / shall not / may not.
MUST_NOT = "MUST_NOT"
SHOULD = "SHOULD"
SHOULD_NOT = "SHOULD_NOT"
#: A permission.
MAY = "MAY"
#: A defined term -> the document defining it.
DEFINED_IN = "DEFINED_IN"
#: A defined term -> an entity its definition names.
DEFINED_USING = "DEFINED_USING"
#: An abbreviation or alias -> its expansion: (AEMC) -> (Australian Energy Market Commission).
DEFINED_AS = "DEFINED_AS"
#: A document -> a document, clause or code it mentions.
REFERS_TO = "REFERS_TO"
#: A clause reference -> its document (NER clause 3.8.1 -> NER).
PART_OF = "PART_OF"
#: "This procedure applies to X", "Y applies to X".
APPLIES_TO = "APPLIES_TO"
#: "X is responsible for Y".
RESPONSIBLE_FOR = "RESPONSIBLE_FOR"

#: Verb classes that specialise MUST / SHOULD / MAY (lemmas of the governed verb):
#: "The Retailer must notify the Distributor" is MUST_NOTIFY.
VERB_CLASSES: Mapping[str, frozenset[str]] = {
    "NOTIFY": frozenset({"notify", "inform", "advise", "tell", "alert", "warn", "report"}),
    "PROVIDE": frozenset(
        {"provide", "give", "submit", "supply", "send", "deliver", "furnish", "lodge",
         "issue", "publish", "share", "forward"}
    ),
    "COMPLY_WITH": frozenset({"comply", "conform", "adhere", "abide"}),
}

#: Every relationship type the extractors emit.
RELATIONSHIP_TYPES: tuple[str, ...] = (
    MUST, "MUST_NOTIFY", "MUST_PROVIDE", "MUST_COMPLY_WITH", MUST_NOT,
    SHOULD, "SHOULD_NOTIFY", "SHOULD_PROVIDE", "SHOULD_COMPLY_WITH", SHOULD_NOT,
    MAY, "MAY_NOTIFY", "MAY_PROVIDE",
    DEFINED_IN, DEFINED_USING, DEFINED_AS, REFERS_TO, PART_OF, APPLIES_TO, RESPONSIBLE_FOR,
)

#: Longest entity or relationship description kept (characters), see ``trim_description``.
MAX_DESCRIPTION_CHARS = 300

# --------------------------------------------------------------------------------------
# Parties, well-known names, document words
# --------------------------------------------------------------------------------------
#: Head nouns of parties (singular; plurals are generated where needed).
ROLE_HEADS: tuple[str, ...] = (
    "retailer", "distributor", "generator", "participant", "operator", "provider", "customer",
    "consumer", "installer", "contractor", "subcontractor", "organisation", "organization",
    "agency", "regulator", "supplier", "manufacturer", "applicant", "licensee", "trader",
    "aggregator", "user", "owner", "occupier", "auditor", "assessor", "inspector",
    "electrician", "designer", "employee", "worker", "coordinator", "administrator",
    "officer", "producer", "purchaser", "vendor", "tenant", "landlord",
)
#: Participles that stay part of a role name when lower-case ("authorized user").
ROLE_PARTICIPLES: frozenset[str] = frozenset(
    "authorized authorised registered licensed accredited approved appointed nominated "
    "privileged scheduled certified qualified designated".split()
)
#: Roles a head-noun pattern cannot see as one phrase (hyphens, "of").
MULTIWORD_ROLES: tuple[str, ...] = (
    "Semi-Scheduled Generator", "Non-Scheduled Generator", "Retailer of Last Resort",
    "Semi-Scheduled Generators", "Non-Scheduled Generators",
)

#: Well-known names: canonical name, type, expansion. Mentions of the expansion resolve to
#: the canonical name in every document, so documents that never define "AEMO" still share
#: one entity with those that do.
KNOWN_NAMES: tuple[tuple[str, str, str], ...] = (
    ("AEMO", ORGANISATION, "Australian Energy Market Operator"),
    ("AER", ORGANISATION, "Australian Energy Regulator"),
    ("AEMC", ORGANISATION, "Australian Energy Market Commission"),
    ("ESV", ORGANISATION, "Energy Safe Victoria"),
    ("ESC", ORGANISATION, "Essential Services Commission"),
    ("CER", ORGANISATION, "Clean Energy Regulator"),
    ("ACCC", ORGANISATION, "Australian Competition and Consumer Commission"),
    ("NIST", ORGANISATION, "National Institute of Standards and Technology"),
    ("OMB", ORGANISATION, "Office of Management and Budget"),
    ("Solar Victoria", ORGANISATION, ""),
    ("NER", DOCUMENT, "National Electricity Rules"),
    ("NEL", DOCUMENT, "National Electricity Law"),
    ("NERR", DOCUMENT, "National Energy Retail Rules"),
    ("NERL", DOCUMENT, "National Energy Retail Law"),
    ("NGR", DOCUMENT, "National Gas Rules"),
    ("NGL", DOCUMENT, "National Gas Law"),
    ("FISMA", DOCUMENT, "Federal Information Security Modernization Act"),
    # Systems and markets, not organisations.
    ("NEMDE", DEFINED_TERM, "National Electricity Market Dispatch Engine"),
    ("NEM", DEFINED_TERM, "National Electricity Market"),
    ("CUI", DEFINED_TERM, "Controlled Unclassified Information"),
)

#: ``entity_key`` of a known canonical name or of its expansion -> ``(canonical, type)``.
KNOWN_BY_KEY: Mapping[str, tuple[str, str]] = {
    entity_key(form): (canonical, kind)
    for canonical, kind, expansion in KNOWN_NAMES
    for form in (canonical, expansion)
    if form
}
_KNOWN_EXPANSIONS = {entity_key(c): e for c, _k, e in KNOWN_NAMES if e}

#: Words ending a Title-Case document name ("Constraint Formulation Guidelines").
DOCUMENT_HEADS: tuple[str, ...] = (
    "Rules", "Law", "Act", "Regulations", "Code", "Guidelines", "Guideline",
    "Procedures", "Procedure", "Standards", "Standard", "Policy", "Methodology", "Framework",
    "Agreement", "Terms and Conditions", "Notice to Market", "Manual", "Specification",
    "Handbook", "Guide", "Determination", "Instrument",
)


# --------------------------------------------------------------------------------------
# Descriptions and the entity merge
# --------------------------------------------------------------------------------------
def trim_description(text: str, limit: int = MAX_DESCRIPTION_CHARS) -> str:
    """``text`` with its whitespace collapsed, cut to at most ``limit`` characters at a word
    boundary in its second half (else mid-word) and ended with "…" when cut. Entity and
    relationship descriptions of every extractor go through it."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


class EntityTable:
    """One document's entities by key (``entity_key``): the first name unless a later one is
    capitalised where it was not, the most specific type (lowest rank), the description with
    the highest weight, then the longest. Shared by the offline and the cloud extractors.

    Args:
        rank: type -> rank, most specific lowest (default: ``TYPE_RANK``).
        expansions: give a known abbreviation (``KNOWN_NAMES``) its expansion as
            description when it comes without one (offline extractor).
    """

    def __init__(self, rank: Mapping[str, int] | None = None, *, expansions: bool = True) -> None:
        self.rank = dict(rank) if rank is not None else dict(TYPE_RANK)
        self.expansions = expansions
        self.order: list[str] = []
        self.names: dict[str, str] = {}
        self.types: dict[str, str] = {}
        self.descriptions: dict[str, tuple[int, str]] = {}

    def add(self, name: str, kind: str, description: str = "", weight: int = 0) -> str:
        """Merge one mention; returns its key. ``kind`` must be in ``rank``.

        Raises:
            ValueError: ``name`` is blank (``entity_key``).
        """
        key = entity_key(name)
        if key not in self.names:
            self.order.append(key)
            self.names[key] = name
            self.types[key] = kind
        else:
            if not self.names[key][:1].isupper() and name[:1].isupper():
                self.names[key] = name
            if self.rank[kind] < self.rank[self.types[key]]:
                self.types[key] = kind
        if not description and self.expansions and key in _KNOWN_EXPANSIONS:
            description, weight = _KNOWN_EXPANSIONS[key], 1
        if description:
            old = self.descriptions.get(key)
            candidate = (weight, trim_description(description))
            if old is None or (candidate[0], len(candidate[1])) > (old[0], len(old[1])):
                self.descriptions[key] = candidate
        return key

    def entities(self, keys: Iterable[str]) -> list[Entity]:
        """The entities among ``keys``, in first-seen order."""
        wanted = set(keys)
        return [
            Entity(self.names[k], self.types[k], self.descriptions.get(k, (0, ""))[1])
            for k in self.order
            if k in wanted
        ]
