"""How well a relationship answers a question: search_graph's ranking signal beside seed
similarity and hop count.

A question such as "Who must notify AEMO when …" asks for a *kind* of relationship (an
obligation to notify), and names some of the parties and circumstances. Walking from the
seed entities reaches every edge of those entities — definitions and cross-references
outnumber obligations ten to one in a regulatory corpus — so ordering by seed similarity alone
answers with glossary edges. ``relation_intent`` reads what the question asks for from its
words; ``relevance`` scores one relationship against it:

* **type** (0–1): how well the relationship type (``kb_shared.providers.graph_vocabulary``)
  matches the intent: an obligation question prefers ``MUST…``/``RESPONSIBLE_FOR`` edges, with
  the modal (must / should / may) and the verb class (notify / provide / comply) each adding
  when they match; a definition question prefers ``DEFINED_…``; with no intent every type
  scores 0 and the order falls back to the other signals.
* **words** (0–1): the share of the question's content words found in the relationship's
  description and endpoint names (``sparse.tokenize`` terms with a light suffix folding, so
  "notify"/"notified" and "affects"/"affected" meet).

Weights are in ``RelevanceWeights``; the figures they were chosen on are in
``benchmarks/results/graph-relations-*.md`` (``benchmarks/graph_relations.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb_shared.providers import graph_vocabulary as vocab
from kb_shared.search.retrieval_features import definition_terms
from kb_shared.search.sparse import tokenize

#: Question words that ask about a duty, by the modal of the relationship types that answer.
MODAL_WORDS: dict[str, frozenset[str]] = {
    vocab.MUST: frozenset({
        "must", "shall", "required", "require", "requires", "obliged", "obligation",
        "obligations", "mandatory", "has", "have", "need", "needs", "duty",
    }),
    vocab.SHOULD: frozenset({"should", "recommended", "expected", "ought"}),
    vocab.MAY: frozenset({"may", "can", "allowed", "permitted", "entitled", "discretion"}),
}

#: Question words by the verb class of the relationship types that answer (the classes of
#: ``graph_vocabulary.VERB_CLASSES``, with the nouns and question forms people use).
VERB_WORDS: dict[str, frozenset[str]] = {
    "NOTIFY": frozenset({
        "notify", "notifies", "notified", "notification", "notifications", "tell", "tells",
        "told", "advise", "advises", "advised", "inform", "informs", "informed", "report",
        "reports", "reported", "contact", "alert", "warn", "let", "know",
    }),
    "PROVIDE": frozenset({
        "provide", "provides", "provided", "give", "gives", "given", "submit", "submits",
        "submitted", "supply", "send", "include", "includes", "issue", "issues", "publish",
        "deliver", "lodge", "receive", "receives", "offer",
    }),
    "COMPLY_WITH": frozenset({
        "comply", "complies", "compliance", "conform", "conforms", "conformance", "adhere",
        "follow", "meet",
    }),
}

#: Words of a question about responsibility (``RESPONSIBLE_FOR``).
RESPONSIBILITY_WORDS = frozenset({"responsible", "responsibility", "responsibilities", "accountable"})

#: Words of a question about what a term means (``DEFINED_AS``/``DEFINED_USING``/``DEFINED_IN``).
DEFINITION_WORDS = frozenset({
    "mean", "means", "meaning", "definition", "defined", "define", "defines", "stand",
    "stands", "abbreviation", "acronym", "term",
})

#: Words of a question about references between documents (``REFERS_TO``/``PART_OF``).
REFERENCE_WORDS = frozenset({"refer", "refers", "reference", "references", "referenced", "cite", "cites", "cited"})

_DEFINITIONAL = frozenset({vocab.DEFINED_AS, vocab.DEFINED_IN, vocab.DEFINED_USING})
_REFERENCING = frozenset({vocab.REFERS_TO, vocab.PART_OF})
_MODALS = (vocab.MUST_NOT, vocab.SHOULD_NOT, vocab.MUST, vocab.SHOULD, vocab.MAY)

_WORD = re.compile(r"[a-z]+")
#: Suffixes folded before words are compared (longest first); a word keeps at least 3 letters.
_SUFFIXES = ("ations", "ation", "ings", "ing", "ied", "ies", "ed", "es", "s")


def fold(word: str) -> str:
    """``word`` with one common English suffix removed, for comparing question and edge words
    ("notified" -> "notif", "affects" -> "affect"); not a stemmer, only a matcher."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _words(text: str) -> set[str]:
    return {fold(term) for term in tokenize(text) if term.isalpha() and len(term) > 1}


#: Modal words are read into the intent's type, not counted as content words.
_MODAL_FOLDED = frozenset(fold(word) for words in MODAL_WORDS.values() for word in words)


@dataclass(frozen=True)
class RelationIntent:
    """What kind of relationship a question asks about.

    Attributes:
        modal: ``MUST`` / ``SHOULD`` / ``MAY`` when the question names one, else ``None``.
        verb: ``NOTIFY`` / ``PROVIDE`` / ``COMPLY_WITH`` when it names one, else ``None``.
        responsibility / definition / reference: it asks who is responsible, what a term
            means, or what a document refers to.
        words: the question's folded content words (``fold``).
    """

    modal: str | None
    verb: str | None
    responsibility: bool
    definition: bool
    reference: bool
    words: frozenset[str]

    @property
    def duty(self) -> bool:
        """The question asks about an obligation, permission or responsibility."""
        return bool(self.modal or self.verb or self.responsibility)


def relation_intent(question: str) -> RelationIntent:
    """Read ``question``'s intent from its words (module docstring)."""
    plain = set(_WORD.findall(question.lower()))
    modal = next((m for m, words in MODAL_WORDS.items() if plain & words), None)
    verb = next((v for v, words in VERB_WORDS.items() if plain & words), None)
    return RelationIntent(
        modal=modal,
        verb=verb,
        responsibility=bool(plain & RESPONSIBILITY_WORDS),
        definition=bool(plain & DEFINITION_WORDS) or bool(definition_terms(question)),
        reference=bool(plain & REFERENCE_WORDS),
        words=frozenset(_words(question) - _MODAL_FOLDED),
    )


#: Longest entity name, in words, looked up from the question's own words.
MAX_NAME_WORDS = 4

#: One-word names never looked up (too general to seed a walk).
_GENERIC = frozenset(
    "who what when where which why how whom whose must should may shall can does do is are "
    "the a an of to in on for by with if their they them this that these those any each all "
    "unit units system systems work works time process information data value values".split()
)


def _singular(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def name_candidates(question: str) -> list[str]:
    """Entity keys the question may name verbatim: every run of 1–``MAX_NAME_WORDS`` words,
    as written and with its last word singular ("participants" -> "participant"), longest
    first; one-word question and function words (``_GENERIC``) left out. For looking names up
    with ``GraphReader.entities`` (keys are ``graph_model.entity_key`` forms)."""
    words = re.findall(r"[a-z0-9][a-z0-9&/-]*", question.casefold())
    found: dict[str, None] = {}
    for size in range(min(MAX_NAME_WORDS, len(words)), 0, -1):
        for start in range(len(words) - size + 1):
            run = words[start : start + size]
            if size == 1 and (run[0] in _GENERIC or len(run[0]) < 3):
                continue
            if run[0] in _GENERIC or run[-1] in _GENERIC:
                continue
            found[" ".join(run)] = None
            found[" ".join([*run[:-1], _singular(run[-1])])] = None
    return list(found)


def _split_type(relationship_type: str) -> tuple[str | None, str | None]:
    """``MUST_NOTIFY`` -> ``("MUST", "NOTIFY")``; ``MUST`` -> ``("MUST", None)``; a type
    without a modal -> ``(None, None)``."""
    for modal in _MODALS:
        if relationship_type == modal:
            return modal, None
        if relationship_type.startswith(modal + "_"):
            return modal, relationship_type[len(modal) + 1 :]
    return None, None


def asked_types(intent: RelationIntent) -> list[str]:
    """The relationship types that answer a question naming a duty's verb class or
    responsibility (``MUST_NOTIFY``, ``SHOULD_NOTIFY``… for "who must notify …"; the asked
    modal only when it names one), for fetching those edges whatever the seeds reached;
    ``[]`` for a definition question or any other."""
    types: list[str] = []
    if intent.definition and intent.modal is None:  # "What is a notification?" asks a meaning
        return types
    if intent.verb is not None:
        modals = [intent.modal] if intent.modal else [vocab.MUST, vocab.SHOULD, vocab.MAY]
        types += [f"{m}_{intent.verb}" for m in modals if f"{m}_{intent.verb}" in vocab.RELATIONSHIP_TYPES]
    if intent.responsibility:
        types.append(vocab.RESPONSIBLE_FOR)
    return types


def type_score(intent: RelationIntent, relationship_type: str) -> float:
    """0–1: how well ``relationship_type`` answers ``intent`` (module docstring, "type")."""
    if relationship_type in _DEFINITIONAL:
        return 1.0 if intent.definition else 0.0
    if relationship_type in _REFERENCING:
        return 1.0 if intent.reference else 0.0
    if relationship_type == vocab.RESPONSIBLE_FOR:
        return 1.0 if intent.responsibility else (0.5 if intent.duty else 0.0)
    modal, verb = _split_type(relationship_type)
    if modal is None or not intent.duty:
        return 0.0
    score = 0.5
    wanted_modal = intent.modal
    if wanted_modal is not None and modal.startswith(wanted_modal):
        score += 0.25
    if intent.verb is not None and verb == intent.verb:
        score += 0.25
    elif intent.verb is None and verb is None:
        score += 0.1
    return min(score, 1.0)


def word_score(intent: RelationIntent, description: str, source: str, target: str) -> float:
    """0–1: the share of the question's content words in the relationship's description and
    endpoint names (module docstring, "words"); 0 for a question without content words."""
    if not intent.words:
        return 0.0
    found = _words(f"{description} {source} {target}")
    return len(intent.words & found) / len(intent.words)


@dataclass(frozen=True)
class RelevanceWeights:
    """How the signals add up (benchmarks/results/graph-relations-*.md): ``type`` and
    ``words`` multiply their 0–1 scores, ``seed`` the seed entity's cosine similarity, and
    ``hop`` is subtracted per hop beyond the first."""

    type: float = 1.0
    words: float = 1.0
    seed: float = 0.5
    hop: float = 0.1


DEFAULT_WEIGHTS = RelevanceWeights()


def relevance(
    intent: RelationIntent,
    relationship_type: str,
    description: str,
    source: str,
    target: str,
    *,
    seed_similarity: float,
    hops: int,
    weights: RelevanceWeights = DEFAULT_WEIGHTS,
) -> float:
    """The relationship's score for ``intent`` (higher is better; module docstring)."""
    return (
        weights.type * type_score(intent, relationship_type)
        + weights.words * word_score(intent, description, source, target)
        + weights.seed * seed_similarity
        - weights.hop * (hops - 1)
    )
