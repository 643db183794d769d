"""The relation rules of the offline extractor, run over one document (``ExtractionRun``).

Two passes. The first, without a parse, registers what the document defines: glossary rows,
definition headings, ``'X' means …`` sentences and abbreviations ("Long Name (ABBR)"), and
aliases ("Participant" = "Market Participant"). The second parses the units that can hold
more than a reference and reads relationships from spaCy's dependency parse:

* obligations: subject + modal + verb + object. ``must``/``shall``/``is required to`` →
  MUST, ``should`` → SHOULD, ``may`` → MAY, negated → MUST_NOT / SHOULD_NOT, specialised by
  ``VERB_CLASSES`` (MUST_NOTIFY…). The target is a party in the object or a "to" phrase,
  else the direct object's entity, else the object of a "with/under/from/by" phrase.
  A duty ("must", "shall", "should", "required to") whose subject or object no pattern
  names takes the noun phrase's name (``phrases``: "A scheduled load must submit a ramp
  profile"); "ensure/confirm that X is provided to Y" is a duty to provide, read from the
  complement clause.
* DEFINED_IN / DEFINED_USING / DEFINED_AS from the definitions, REFERS_TO and PART_OF from
  references, APPLIES_TO ("This procedure applies to X"), RESPONSIBLE_FOR ("X is
  responsible for Y").

Every relationship carries the document and the chunk it came from, and its sentence as
description; one (source, type, target) is kept once per chunk.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kb_shared.ingest.chunking import Chunk
from kb_shared.graph_model import Relationship, entity_key
from kb_shared.providers.base import Extraction
from kb_shared.providers.graph_vocabulary import (
    APPLIES_TO,
    CODE,
    DEFINED_AS,
    DEFINED_IN,
    DEFINED_TERM,
    DEFINED_USING,
    DOCUMENT,
    KNOWN_BY_KEY,
    MAX_DESCRIPTION_CHARS,
    MAY,
    MUST,
    MUST_NOT,
    ORGANISATION,
    PART_OF,
    REFERS_TO,
    RELATIONSHIP_TYPES,
    RESPONSIBLE_FOR,
    ROLE,
    SHOULD,
    SHOULD_NOT,
    TYPE_RANK,
    VERB_CLASSES,
    EntityTable,
    trim_description,
)
from kb_shared.providers.spacy_graph.abbreviations import abbreviation_of, abbreviations
from kb_shared.providers.spacy_graph.mentions import (
    NOT_NAMES,
    Mention,
    RegexMention,
    classify,
    regex_mentions,
    singular_name,
    span_name,
)
from kb_shared.providers.spacy_graph.names import (
    ROLE_FORMS,
    STOP_NAMES,
    pluralise,
    squash,
    tidy,
    valid_name,
)
from kb_shared.providers.spacy_graph.phrases import phrase_mention
from kb_shared.providers.spacy_graph.text import (
    DEFINED_ELSEWHERE,
    DEFS_HEADING,
    SENTENCE_SPLIT,
    Definition,
    Unit,
    prose_definitions,
    units_from_chunk,
)

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Span, Token

#: Most DEFINED_USING edges from one definition.
MAX_DEFINITION_LINKS = 6

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
#: Words of a duty: a sentence holding one is read for obligations even without a mention.
_DUTY_WORDS = frozenset({*_MODALS, "required", "obliged"})
#: Verbs whose duty is carried out in their complement clause when that clause is passive:
#: "must ensure that a meter is supplied to the customer" is a duty to provide.
_ENSURE_VERBS = frozenset({"ensure", "confirm", "verify", "check", "certify", "demonstrate"})
_NEGATED = {MUST: MUST_NOT, SHOULD: SHOULD_NOT, MAY: MUST_NOT}
#: Subject nouns of "This procedure applies to …" that mean the document itself.
_THIS_DOCUMENT_NOUNS = frozenset(
    "procedure procedures document guideline guidelines notice publication policy "
    "methodology manual standard code framework rules".split()
)


def _scope_only(verb: Token) -> bool:
    """"X shall not apply to Y" says what a rule covers, not what a party does."""
    return verb.lemma_.lower() == "apply" and not any(c.dep_ == "dobj" for c in verb.children)


def _passive_complement(verb: Token) -> Token | None:
    """The passive, agentless complement clause of an ensure-type verb (``_ENSURE_VERBS``):
    "supplied" in "ensure that a meter is supplied to the customer", else ``None``."""
    if verb.lemma_.lower() not in _ENSURE_VERBS:
        return None
    for child in verb.children:
        if child.dep_ == "ccomp" and child.pos_ in ("VERB", "AUX"):
            deps = {c.dep_ for c in child.children}
            if "nsubjpass" in deps and "agent" not in deps:
                return child
    return None


@dataclass(slots=True)
class _DocLexicon:
    """What the first pass learned about this document."""

    aliases: dict[str, str] = field(default_factory=dict)  # key -> canonical name
    terms: list[str] = field(default_factory=list)  # names for the phrase matcher


class ExtractionRun:
    """One document's extraction: the entity table, the relationships found so far and the
    rules that find them. Used once, by ``SpacyGraphExtractor.extract``.

    Args:
        nlp: the pipeline of ``local_graph.load_pipeline``.
        document: the ``doc_id``; every relationship's ``source_doc``.
        title: the document's title, its ``Document`` entity (``document`` when empty).
        chunks: the document's chunks in order (already checked to be its own).
        batch_size: texts per ``nlp.pipe`` batch.
    """

    def __init__(
        self, nlp: Language, document: str, title: str, chunks: Sequence[Chunk], batch_size: int
    ) -> None:
        self.nlp = nlp
        self.document = document
        self.chunks = chunks
        self.batch_size = batch_size
        self.table = EntityTable()
        self.title_name = tidy(" ".join(title.split())) or document
        self.title_key = self.table.add(self.title_name, DOCUMENT)
        self.relationships: list[Relationship] = []
        self.seen: set[tuple[str, str, str, str]] = set()
        self.lexicon = _DocLexicon()
        self.own_names = squash(f"{document} {self.title_name}")
        self.mention_count = 0
        self.sentence_count = 0

    # ------------------------------------------------------------------ driver
    def execute(self) -> Extraction:
        """Run both passes over the chunks.

        Returns:
            ``Extraction`` with the entities that are endpoints of a relationship (first-seen
            order), the relationships (text order) and ``stats``: ``chunks``, ``units``,
            ``sentences``, ``mentions``, ``entities``, ``relationships``.
        """
        units: list[Unit] = []
        for i, chunk in enumerate(self.chunks):
            units += units_from_chunk(i, chunk)
        in_defs = [
            any(DEFS_HEADING.search(h) for h in self.chunks[u.chunk].heading_path) for u in units
        ]
        for unit, flag in zip(units, in_defs, strict=True):
            if unit.kind != "row" or not unit.definitions:
                prose_definitions(unit, flag)
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
        }
        return Extraction(tuple(entities), tuple(self.relationships), stats)

    # ------------------------------------------------------------------ first pass
    def _learn(self, units: list[Unit]) -> None:
        """Register defined terms, aliases and abbreviations before parsing."""
        lex = self.lexicon
        glossary_terms = {
            entity_key(n) for u in units for d in u.definitions for n in d.names
        }
        for unit in units:
            for definition in list(unit.definitions):
                if definition.kind == "glossary" and not definition.expansion:
                    expansion = abbreviation_of(definition.names, definition.body)
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
            for short, long_form, start in abbreviations(unit.text):
                if entity_key(short) in glossary_terms:
                    continue  # the glossary's own entry is authoritative
                unit.definitions.append(
                    Definition([short], long_form, start, "abbreviation", [], long_form)
                )
                lex.terms += [short, long_form]

    def _phrase_matcher(self) -> Any:
        from spacy.matcher import PhraseMatcher  # noqa: PLC0415

        matcher = PhraseMatcher(self.nlp.vocab, attr="ORTH")
        variants: dict[str, None] = {}
        for term in self.lexicon.terms:
            term = " ".join(term.split())
            if not valid_name(term):
                continue
            forms = [term]
            words = term.split()
            if not term.isupper():
                forms.append(" ".join(words[:-1] + [pluralise(words[-1])]))
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
        name = tidy(name)
        name = re.sub(r"^(?:the|a|an|this|these|any|each|all)\s+", "", name, flags=re.IGNORECASE)
        if not valid_name(name, code=kind == CODE) or (kind == ROLE and "/" in name):
            return None
        key = entity_key(name)
        if alias and key in self.lexicon.aliases:
            name = self.lexicon.aliases[key]
            key = entity_key(name)
        known = KNOWN_BY_KEY.get(key)
        if known and (alias or entity_key(known[0]) == key):
            return known
        if known:
            return name, known[1]
        if kind == DEFINED_TERM:
            words = [w.lower() for w in name.split()]
            if words and words[-1] in ROLE_FORMS:
                kind = ROLE
        return name, kind

    # ------------------------------------------------------------------ second pass
    def _mentions(self, unit: Unit, doc: Doc, matcher: Any) -> list[Mention]:
        strong: list[Mention] = []
        weak: list[Mention] = []
        for rm in regex_mentions(doc.text):
            span = doc.char_span(rm.start, rm.end, alignment_mode="expand")
            if span is not None and len(span):
                strong.append(Mention(span.start, span.end, rm.name, rm.type, rm.parent))
        for _, start, end in matcher(doc):
            name = span_name(doc[start:end])
            strong.append(Mention(start, end, name, DEFINED_TERM))
        for ent in doc.ents:
            label = ent.label_
            if label.startswith("KB_"):
                kind = {"KB_ROLE": ROLE}.get(label, label[3:])
                strong.append(Mention(ent.start, ent.end, span_name(ent, role=kind == ROLE), kind))
            elif label in ("ORG", "LAW"):
                name = span_name(ent, singularise=False)
                words = name.split()
                if len(words) >= 2 and all(
                    w[:1].isupper() or w in ("of", "and", "for", "the", "&") for w in words
                ) and not re.search(r"\d|[|;:]", name) and not NOT_NAMES.search(name):
                    weak.append(
                        Mention(ent.start, ent.end, name, ORGANISATION if label == "ORG" else DOCUMENT)
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
            weak.append(Mention(sub.start, sub.end, span_name(sub), DEFINED_TERM))
        chosen: list[Mention] = []
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

    def _process(self, unit: Unit, doc: Doc, matcher: Any) -> None:
        chunk = self.chunks[unit.chunk]
        mentions = self._mentions(unit, doc, matcher)
        self.mention_count += len(mentions)
        by_token: dict[int, Mention] = {}
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
                t.lower_ in ("procedure", "document", "guidelines", "this", *_DUTY_WORDS)
                for t in sent
            ):
                continue
            self._obligations(sent, by_token, description, chunk)
            self._applies_and_responsible(sent, by_token, description, chunk)

    def _process_references(self, unit: Unit) -> None:
        """REFERS_TO / PART_OF edges of a unit that is not parsed (no modal, no definition)."""
        chunk = self.chunks[unit.chunk]
        found = sorted(regex_mentions(unit.text), key=lambda m: (m.start - m.end, m.start))
        taken: list[tuple[int, int]] = []
        chosen: list[RegexMention] = []
        for rm in found:
            if any(rm.start < b and a < rm.end for a, b in taken):
                continue
            taken.append((rm.start, rm.end))
            chosen.append(rm)
        chosen.sort(key=lambda m: m.start)
        self.mention_count += len(chosen)
        bounds = [0] + [m.end() for m in SENTENCE_SPLIT.finditer(unit.text)] + [len(unit.text)]
        self.sentence_count += len(bounds) - 1
        for rm in chosen:
            resolved = self._resolve(rm.name, rm.type)
            if resolved is None or resolved[1] not in (DOCUMENT, CODE):
                continue
            a = max(b for b in bounds if b <= rm.start)
            z = min(b for b in bounds if b >= rm.end)
            mention = Mention(0, 0, resolved[0], resolved[1], rm.parent)
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

    def _add(self, mention: Mention, description: str = "", weight: int = 0) -> str:
        return self.table.add(mention.name, mention.type, description, weight)

    def _reference(self, mention: Mention, description: str, chunk: Chunk) -> None:
        key = entity_key(mention.name)
        if key == self.title_key:
            return
        squashed = squash(mention.name)
        if len(squashed) >= 5 and squashed in self.own_names:
            return  # the document's own number: SO_OP_3705 in aemo_so_op_3705_dispatch.pdf
        target = self._add(mention)
        self._edge(self.title_key, REFERS_TO, target, description, chunk)
        if mention.parent:
            parent = self.table.add(mention.parent, DOCUMENT)
            self._edge(target, PART_OF, parent, description, chunk)

    def _definition_edges(
        self, definition: Definition, unit: Unit, doc: Doc, mentions: list[Mention],
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
                exp_name = singular_name(exp_name)
            exp_type = classify(exp_name, exp_type)
            # An acronym takes its expansion's type when that is more specific.
            kind = min(term_type, exp_type, key=TYPE_RANK.__getitem__)
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
        elsewhere = DEFINED_ELSEWHERE.search(definition.body)
        homes: list[str] = []
        if elsewhere:
            cut = body_start + elsewhere.end()
            homes = [self._add(m) for m in in_body if m.type == DOCUMENT and doc[m.start].idx >= cut]
        for cited in definition.cited:
            # "[FIPS 200, Adapted]": the standard's own name when one is recognised
            standard = regex_mentions(cited)
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
    def _is_modifier(mention: Mention, doc: Doc) -> bool:
        """A term used as a modifier ("information security standards"): not a party or
        object by itself. Codes, documents and organisations count wherever they stand."""
        if mention.type not in (DEFINED_TERM, ROLE):
            return False
        last = doc[mention.end - 1]
        return last.dep_ in ("compound", "amod", "nmod") and not (
            mention.start <= last.head.i < mention.end
        )

    def _mention_for(self, token: Token, by_token: dict[int, Mention]) -> Mention | None:
        found = self._mention_near(token, by_token)
        if found is None or self._is_modifier(found, token.doc):
            return None
        return found

    def _mention_near(self, token: Token, by_token: dict[int, Mention]) -> Mention | None:
        if token.i in by_token:
            return by_token[token.i]
        if token.pos_ == "PRON" or token.lower_ in STOP_NAMES:
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

    def _subjects(
        self, governor: Token, verbs: list[Token], by_token: dict[int, Mention], named: bool
    ) -> tuple[list[Mention], Token | None, bool]:
        """Subject mentions of an obligation, the passive subject token, and passive flag.

        ``named=False`` lets a subject no pattern names be named from its noun phrase
        (``_phrase_mention``: "A scheduled load must submit …", "The DNSPs must confirm …")."""
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
        found: list[Mention] = []
        for head in heads:
            mention = self._mention_for(head, by_token)
            if mention is None and not named:
                mention = self._phrase_mention(head, by_token, party=True)
            if mention is not None and mention not in found:
                found.append(mention)
        return found, (passive_subject if is_passive else None), is_passive

    def _obligations(
        self, sent: Span, by_token: dict[int, Mention], description: str, chunk: Chunk
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
                xcomp = next(
                    (c for c in token.children if c.dep_ == "xcomp" and c.pos_ in ("VERB", "AUX")),
                    None,
                )
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
            # "may" is as often "might" as a permission, and "shall apply to" gives a scope:
            # the ends of either must be named mentions.
            named = token.lower_ == "may" or _scope_only(verb)
            subjects, passive_subject, _ = self._subjects(governor, verbs, by_token, named)
            if not subjects:
                continue
            for action in verbs:
                reading, object_token = action, passive_subject
                inner = _passive_complement(action)
                if inner is not None:  # "ensure that a meter is supplied to the customer"
                    reading = inner
                    object_token = next(c for c in inner.children if c.dep_ == "nsubjpass")
                targets = self._targets(reading, object_token, by_token, subjects, named)
                kind = modality
                if modality in (MUST, SHOULD, MAY):
                    for cls, lemmas in VERB_CLASSES.items():
                        if reading.lemma_.lower() in lemmas and f"{modality}_{cls}" in RELATIONSHIP_TYPES:
                            kind = f"{modality}_{cls}"
                for subject in subjects:
                    source = self._add(subject)
                    for target in targets:
                        self._edge(source, kind, self._add(target), description, chunk)

    def _targets(
        self, verb: Token, passive_subject: Token | None, by_token: dict[int, Mention],
        subjects: list[Mention], named: bool = False,
    ) -> list[Mention]:
        """Targets of an obligation's verb: the *heads* of its object phrases, not every
        noun inside them ("issue temporary credentials to individuals based on risk
        assessments" has no entity as target; "provide ramp rates" has "ramp rate").

        Order: parties (Role/Organisation) that are the object, the indirect object or the
        object of "to"; else the direct object's entity; else the object of a "with",
        "under", "from", "by" or "in accordance with" phrase; else the subject or object of
        a complement clause ("must confirm that all their workers have …"); else, unless
        ``named``, the direct object's noun phrase, then for an ensure-type verb
        (``_ENSURE_VERBS``) the complement clause's (``_phrase_mention``: "must give a
        minimum three year parts warranty" → "parts warranty")."""

        def head_mentions(token: Token | None) -> list[Mention]:
            """Entities heading ``token``'s phrase, its conjuncts', or its "of" object's."""
            if token is None:
                return []
            out: list[Mention] = []
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

        def is_party(m: Mention) -> bool:
            return m.type in (ROLE, ORGANISATION)

        def head_phrases(token: Token) -> list[Mention]:
            """Phrase names of ``token`` and its conjuncts that are not a subject."""
            if named:
                return []
            keys = {entity_key(m.name) for m in subjects}
            found = (self._phrase_mention(head, by_token) for head in (token, *token.conjuncts))
            return [m for m in found if m is not None and entity_key(m.name) not in keys]

        parties: list[Mention] = []
        objects: list[Mention] = []
        others: list[Mention] = []
        phrases: list[Mention] = []
        clause_phrases: list[Mention] = []
        # spaCy makes a new Token object on each access: compare positions, not identity
        passive_at = passive_subject.i if passive_subject is not None else -1
        for child in verb.children:
            if child.dep_ in ("dobj", "dative", "attr", "oprd") or child.i == passive_at:
                # a dative is "AEMO" in "give AEMO the data" or "to" in "give the data to AEMO"
                found = head_mentions(pobj_of(child) if child.pos_ == "ADP" else child)
                if not found and (child.dep_ == "dobj" or child.i == passive_at):
                    phrases += head_phrases(child)
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
                        found = head_mentions(c)
                        others += found
                        if not found and verb.lemma_.lower() in _ENSURE_VERBS:
                            clause_phrases += head_phrases(c)
        if parties:
            return list(dict.fromkeys(parties))[:3]
        return (objects or others or phrases or clause_phrases)[:1]

    def _phrase_mention(
        self, head: Token, by_token: dict[int, Mention], party: bool = False
    ) -> Mention | None:
        """``phrases.phrase_mention`` with this document's names (``_resolve``)."""
        return phrase_mention(head, by_token, self._resolve, party)

    def _applies_and_responsible(
        self, sent: Span, by_token: dict[int, Mention], description: str, chunk: Chunk
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

