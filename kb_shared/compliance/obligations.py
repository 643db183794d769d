"""Obligations found in a document's chunks: who must (not) / should (not) do what, by when,
under which clause (issue 26, "An obligations register"). Offline: sentence structure and the
document's own defined terms, no model.

Each chunk is cut into sentences, list clauses and table rows by
``retrieval_features.units`` (a list whose stem holds the modal, "The retailer must: (a) …
(b) …", gives one clause per item, stem joined; a list of parties followed by the modal, "(i)
scheduled loads; (ii) … must ramp", one per listed party). A clause is an obligation when it
holds a binding modal (``modality_of``) outside quotes, is not a definition, question, heading,
table-of-contents line, figure marker, exemption ("is not required to", "don't have to"), duty
that only may arise ("we may be required to") or version-history row, and the modal is in its
main clause (not "the limits that a unit must operate within", "whether …", "Where … is
required to …, X will"). A numbered requirement stated as a command, in a heading or a list
item of its own section of requirements ("3.1.1 Limit system access to
authorized users …." under "THE REQUIREMENTS › 3.1 ACCESS CONTROL": NIST SP 800-171 states all
110 of its requirements so), is a must too (``numbered_command``); it binds the party its
section heading names, else no named party: the reader who applies the document.

Principle for descriptions of a system (issue 26 leaves it to the detector): a modal whose
subject is a computation or the system itself ("the algorithm must converge", "the process is
required to ramp"), a quantity ("104 MW must be generated"), the document itself ("This
document should not be relied on") or a pronoun standing for a thing ("This is required to
ensure …", "It should be noted …") describes how things work and binds nobody.

Who a rule about a thing binds (the labelling rules of ``tests/data/obligations/README.md``):
the agent of its passive verb ("… must be undertaken by workers engaged in …", "… nominated
by AEMO"); else the party of the list stem it is an item of ("The retailer must ensure
that: (a) the quote must state …"); else the party its section heading names as bound
("3.1.3 Solar PV installers – mandatory workforce requirements", ``heading_party``); else,
when it states a property of a product ("Solar PV inverters must comply with AS/NZS 4777.2",
``states_a_property``), the product as named with no role; else (a record, message or act a
party produces: "a rebid must be submitted", "The notice should include …") the party of the
nearest obligation of the same section that names one, the last actor named as the subject
of a verb before it, or the nearest named obligation of the closest related section, in that
order, marked ``party_inferred`` (``""`` when none is found). A party that receives a passive
duty ("The customer must not be required to pay …") is protected, not bound: the section's
obligated party is.

The rules for one clause (modals, subjects, parties, roles, deadlines) are in
``kb_shared.compliance.obligation_sentences``; this module reads a document with them: paragraph labels
and clause numbers, list stems, table rows, and parties carried from sentence to sentence.
Figures it was measured with: ``benchmarks/results/obligations-2026-12-06.md``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kb_shared.ingest.chunking import Chunk
from kb_shared.compliance.obligation_sentences import (
    LIST_MARKER,
    MODALITIES,
    MUST,
    MUST_NOT,
    ORGANISATIONS,
    PARAGRAPH_LINE,
    ROLE_RULES,
    SHOULD,
    SHOULD_NOT,
    Reading,
    binding_modals,
    clause_text,
    deadline_of,
    defined_terms,
    heading_number,
    heading_party,
    names_a_party,
    not_a_requirement,
    numbered_command,
    parties_of,
    read_clause,
    role_of,
    states_a_property,
)
from kb_shared.ingest.page_location import FIGURE_LINE, page_at
from kb_shared.providers.spacy_graph.names import singular
from kb_shared.search.quotes import unit_offset
from kb_shared.search.retrieval_features import Unit, units

__all__ = [
    "MODALITIES", "MUST", "MUST_NOT", "SHOULD", "SHOULD_NOT", "Obligation", "ObligationStatement",
    "deadline_of", "find_obligations", "heading_number", "heading_party", "modality_of", "role_of",
]


@dataclass(frozen=True, slots=True)
class ObligationStatement:
    """What one obligation says: one bound party of one sentence (a sentence binding two is
    two). ``Obligation`` adds where it was found; the catalog's ``ObligationRow`` where it is
    filed.

    Attributes:
        party: the bound party as the document names it ("the relevant Market Participant"),
            or the product a product requirement binds ("Solar PV inverters"); ``""`` when no
            party is named nor found nearby.
        role: the party's normalised role ("Retailer", "AEMO", "Market Participant"): from
            ``ROLE_RULES`` over the party and the document's definition of it, else the
            party's head phrase in Title Case; ``None`` without a party or for a product.
        modality: one of ``MODALITIES`` ("shall" is must, "is not permitted to" must not).
        text: the sentence, list clause (stem joined) or table row as a reader sees it
            (``citations.readable``).
        action: the requirement in the document's words, from the modal on.
        deadline: the time or condition phrase ("within 2 business days", "if conformance
            mode = 2"), ``None`` when there is none.
        reference: the clause it sits under, section number plus paragraph ("2.6.5(f)"),
            ``None`` when the document numbers neither.
    """

    party: str
    role: str | None
    modality: str
    text: str
    action: str
    deadline: str | None
    reference: str | None


@dataclass(frozen=True, slots=True)
class Obligation(ObligationStatement):
    """One obligation as the detector finds it: ``ObligationStatement``'s fields, then these.

    Attributes:
        chunk_id: the chunk it was found in.
        page: 1-based page of the modal, from the chunk's ``page_runs`` when located, else the
            chunk's ``page_start``.
        heading_path: the chunk's heading path.
        party_inferred: the sentence names no party ("a rebid must be submitted"); ``party``
            is the one its context binds (module docstring: an agent, a stem, a heading, the
            section's named parties).
    """

    chunk_id: str
    page: int | None
    heading_path: tuple[str, ...] = ()
    party_inferred: bool = False


def modality_of(sentence: str) -> str | None:
    """The modality of ``sentence`` (one of ``MODALITIES``), ``None`` when it binds nobody:
    no binding modal outside quotes, an exemption, an expectation ("should have"), a question,
    definition, contents line or figure marker, a modal inside an embedded clause, or a
    description of a system (module docstring). A passive sentence ("Bids must be lodged …")
    binds its unnamed party and has a modality. The one rule ``find_obligations`` applies to a
    sentence on its own."""
    text = clause_text(sentence)
    if not_a_requirement(text):
        return None
    for reading in read_clause(text):
        return reading.modality
    return None


# --------------------------------------------------------------------------------------------
# A document
# --------------------------------------------------------------------------------------------

#: A party named as the subject of a verb: a role of ``ROLE_RULES`` or a known organisation.
_SUBJECT_MENTION = re.compile(
    r"\b(?P<party>(?:the\s+)?(?:"
    + "|".join([*(rule.pattern for rule, _ in ROLE_RULES), *map(re.escape, ORGANISATIONS.values())])
    + r"))\s+(?:\w+ly\s+)?"
    r"(?:will|may|must|shall|should|can|could|is|are|has|have|does|do|needs?|sets?|issues?|publishes?)\b",
    re.I,
)
#: Head nouns of the registered facilities a subject may name: no actor to infer a party from.
_FACILITIES = frozenset("unit resource load plant facility system".split())
#: "… must be undertaken by workers engaged in …": the agent of a passive verb.
_AGENT = re.compile(r"\b(?:\w+(?:ed|en|wn|ne|de|id|lt|nt)|made|done|held|kept|run|set|paid|sent)\s+by\s+(?P<agent>[^,;:.()]{2,120})", re.I)
#: Clauses of a section looked back through for the party of a sentence that names none.
_RECENT_CLAUSES = 40
#: Headings of a document's change log: its rows say what changed, not what binds.
_HISTORY = re.compile(
    r"\b(?:version|revision|release|amendment|change|document)\s+(?:history|record|log|details|control)\b", re.I
)
_ROMAN = re.compile(r"^[ivxl]{1,6}$")
_OWN_NUMBER = re.compile(r"^\s*(?:[-*+]\s+)?(?P<number>\d+(?:\.\d+)+)\.?(?:\s|$)")


@dataclass(slots=True)
class _Clause:
    """A unit ready to read: its readable text, where it starts in the chunk, and its
    paragraph label ("f", or "f)(i" for a sub-paragraph)."""

    text: str
    raw: str
    offset: int
    paragraph: str | None
    is_item: bool
    number: str | None = None  # the numbered clause it is in, when the text numbers it


@dataclass(slots=True)
class _Stem:
    """A clause ending in ":" whose modal the list items after it complete."""

    readings: list[Reading]
    clause: _Clause
    chunk: Chunk
    used: bool = False


class _Document:
    """Reads one document version's chunks in order, keeping what crosses chunk borders: the
    current paragraph, an open list stem, the last party named."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self.chunks = chunks
        self.cut = [units(chunk.text) for chunk in chunks]
        self.defined = defined_terms(chunks, self.cut)
        self.found: list[Obligation] = []
        self.paragraph: str | None = None
        self.section: tuple[str, ...] = ()
        self.stem: _Stem | None = None
        self.number: str | None = None  # a clause number the text gives (``_OWN_NUMBER``)
        self.keys: list[tuple[tuple[str, ...], str | None]] = []  # each found one's section
        self.settled: set[int] = set()  # inferred parties the section cannot change (``_thing_party``)
        self.named: set[int] = set()  # found obligations whose sentence names their party
        self.receivers: dict[int, str | None] = {}  # receiver readings: the role not to bind
        self.items: list[tuple[_Clause, Chunk]] = []
        self.owner: str | None = None  # the party of the list stem the current item is under
        self.recent: list[str] = []  # the section's clauses read so far, for ``_nearest_party``
        self.mentioned: dict[int, tuple[str, str] | None] = {}  # ``_nearest_party`` of each inferred one
        self.commands: set[tuple[str, ...]] = set()  # heading paths of the commands found in headings

    def read(self) -> list[Obligation]:
        for chunk, cut in zip(self.chunks, self.cut, strict=True):
            if chunk.heading_path[:1] != self.section[:1]:
                self.recent.clear()
            if any(_HISTORY.search(h) for h in chunk.heading_path):
                continue
            self._chunk(chunk, cut)
        self._close_stem()
        self._infer_from_section()
        return _one_per_line(self.found)

    def _infer_from_section(self) -> None:
        """An obligation whose sentence names no party takes, in this order: the party of the
        nearest obligation of the same section that names its party (before it on a tie);
        the last actor named before it in the section (``_nearest_party``); the nearest named
        obligation of the closest related section ("9.4" reads "9.3"). A receiver ("The
        customer must not be required …") is bound by the section's obligated party, so it
        reads the related sections before the actors named nearby, and never takes its own
        role."""
        for index, ob in enumerate(self.found):
            if not ob.party_inferred or index in self.settled:
                continue
            receiver = index in self.receivers
            named = [i for i in self.named if not receiver or self.found[i].role != self.receivers[index]]
            path, number = self.keys[index]
            shared = {i: _shared(self.keys[i][0], path) for i in named}
            closest = max(shared.values(), default=0)
            related = [i for i in named if closest and shared[i] == closest]
            mentioned = self.mentioned.get(index)
            mention: list[tuple[str, str | None]] = [mentioned] if mentioned else []
            same = [i for i in named if self.keys[i] == (path, number)]
            stages = [_nearest_first(self.found, same, index), mention, _nearest_first(self.found, related, index)]
            if receiver:
                stages[1:] = [stages[2], mention]
            for stage in stages:
                if stage:
                    party, role = stage[0]
                    self.found[index] = replace(ob, party=party, role=role)
                    break

    # -- clauses -------------------------------------------------------------------------
    def _clauses(self, chunk: Chunk, cut: Sequence[Unit]) -> list[_Clause]:
        out = []
        searched = 0
        for unit in cut:
            if FIGURE_LINE.match(unit.text):
                continue
            offset = unit_offset(chunk.text[searched:], unit.text)
            offset = offset + searched if offset >= 0 else unit_offset(chunk.text, unit.text)
            if offset >= 0:
                searched = offset
            line_start = chunk.text.rfind("\n", 0, max(offset, 0)) + 1
            line = chunk.text[line_start : line_start + 40]
            marker = LIST_MARKER.match(line) if PARAGRAPH_LINE.match(line) else None
            is_item = bool(re.match(r"^\s*(?:[-*+]\s|\d{1,2}[.)]\s|\([a-z]{1,2}\)\s)", line))
            if marker is not None and offset - line_start < 3:
                label = marker.group("para") or marker.group("upper")
                if label:
                    self._paragraph(label)
            text = clause_text(unit.text)
            own = _OWN_NUMBER.match(text)
            if own is not None:  # "- 9.2. For …": a numbered clause the converter made a list item
                self.number, self.paragraph = own.group("number"), None
            item = is_item and offset - line_start < 3
            out.append(_Clause(text, unit.text, offset, self.paragraph, item, self.number))
        return out

    def _paragraph(self, label: str) -> None:
        current = self.paragraph
        if current and _ROMAN.match(label) and not (label == "i" and current.endswith("h")) and "(" not in current:
            self.paragraph = f"{current})({label}"
        elif current and "(" in current and _ROMAN.match(label) and not (label == "i" and current.split(")(")[0] == "h"):
            self.paragraph = f"{current.split(')(')[0]})({label}"
        elif len(label) == 1 and label.isupper():
            pass  # "A." items of a sub-list keep their paragraph
        else:
            self.paragraph = label

    def _reference(self, chunk: Chunk, clause: _Clause) -> str | None:
        number = clause.number
        for heading in reversed(chunk.heading_path if number is None else ()):
            number = heading_number(heading)
            if number:
                break
        if clause.raw.startswith("|"):
            first = clause.text.split(" | ")[0]
            if re.fullmatch(r"[A-Z]?\d+(?:\.\d+)*[a-z]?", first.strip()):
                return first.strip()
        if number and clause.paragraph:
            return f"{number}({clause.paragraph})"
        return number

    def _page(self, chunk: Chunk, clause: _Clause, at: int) -> int | None:
        if chunk.located and chunk.page_runs and clause.offset >= 0:
            scale = len(clause.raw) / max(len(clause.text), 1)
            return page_at(chunk.page_runs, clause.offset + int(at * scale))
        return chunk.page_start

    # -- a chunk -------------------------------------------------------------------------
    def _chunk(self, chunk: Chunk, cut: Sequence[Unit]) -> None:
        if chunk.heading_path != self.section:
            if chunk.heading_path[:2] != self.section[:2]:
                self.paragraph = None
            self.section = chunk.heading_path
            self.number = None
            self._heading_commands(chunk)
        for clause in self._clauses(chunk, cut):
            self.owner = None
            if clause.raw.startswith("|"):
                self._close_stem()
                self._row(chunk, clause)
                continue
            if not_a_requirement(clause.text):
                self._note_mentions(clause.text)
                if not clause.is_item:
                    self._close_stem()
                    self.items = []
                continue
            if self.stem is not None and clause.is_item and not binding_modals(clause.text):
                self._stem_item(chunk, clause)
                continue
            under = self.stem.readings[0].parties if self.stem is not None and clause.is_item else ()
            self._close_stem()
            self.owner = under[0].strip("_* ") if under else None  # "The retailer must ensure that:"
            readings = read_clause(clause.text, self.defined)
            if readings and not readings[0].subject.strip() and not readings[0].parties:
                if self._listed_parties(chunk, clause, readings[0]):
                    continue
                readings = readings[1:]
            command = numbered_command(clause.raw, chunk.heading_path) if not readings else None
            if command is not None:  # "- 3.1.2 Limit system access to …."
                self.items = []
                number, words, _ = command
                self._command(chunk, clause, number, words)
                self._note_mentions(clause.text)
                continue
            if not readings:
                self.items = [*self.items, (clause, chunk)] if clause.is_item else []
                self._note_mentions(clause.text)
                continue
            self.items = []
            if clause.text.rstrip().endswith(":"):
                self.stem = _Stem(readings, clause, chunk)
            else:
                for reading in readings:
                    self._emit(chunk, clause, reading, clause.text)
            self._note_mentions(clause.text)

    def _heading_commands(self, chunk: Chunk) -> None:
        """The numbered requirements stated as commands among the headings of ``chunk``'s path
        that no earlier chunk opened ("###### 3.1.1 Limit system access to …."), each read
        once, where the chunk's text has it."""
        for depth, heading in enumerate(chunk.heading_path):
            path = chunk.heading_path[: depth + 1]
            command = numbered_command(heading, chunk.heading_path[:depth])
            if command is None or path in self.commands:
                continue
            self.commands.add(path)
            number, words, sentence = command
            clause = _Clause(sentence, sentence, chunk.text.find(number), None, False, number)
            self._command(chunk, clause, number, words)

    def _command(self, chunk: Chunk, clause: _Clause, number: str, command: str) -> None:
        """A numbered requirement stated as a command (``numbered_command``): a must of the
        party its section heading names as bound (``heading_party``), else of no named party
        (the reader who applies the document): a party mentioned nearby is not its addressee,
        so none is inferred. Its text is the number and the command, without list marks."""
        text = f"{number} {command}"
        named = (heading_party(h, self.defined) for h in reversed(chunk.heading_path))
        party = next(filter(None, named), "")
        self.settled.add(len(self.found))
        self.found.append(Obligation(
            party=party, role=role_of(party, self.defined) or party or None, modality=MUST,
            text=text, action=command, deadline=deadline_of(text, command),
            reference=self._reference(chunk, replace(clause, number=number, paragraph=None)),
            chunk_id=chunk.id, page=self._page(chunk, clause, max(clause.text.find(command), 0)),
            heading_path=chunk.heading_path, party_inferred=True,
        ))
        self.keys.append((chunk.heading_path, number))

    def _close_stem(self) -> None:
        """End an open list stem; a stem no item followed is an obligation on its own."""
        stem, self.stem = self.stem, None
        if stem is not None and not stem.used:
            for reading in stem.readings:
                self._emit(stem.chunk, stem.clause, reading, stem.clause.text)

    def _stem_item(self, chunk: Chunk, clause: _Clause) -> None:
        """One item of a list whose stem holds the modal: the stem joined to the item."""
        assert self.stem is not None
        self.stem.used = True
        item = LIST_MARKER.sub("", clause.text, count=1).strip()
        text = f"{self.stem.clause.text} {item}"
        for reading in self.stem.readings:
            verb = reading.action.rstrip(" :")
            joined = replace(reading, at=0, action=f"{verb} {item}".rstrip(" ;,."))
            self._emit(chunk, clause, joined, text)

    def _listed_parties(self, chunk: Chunk, clause: _Clause, first: Reading) -> bool:
        """A clause opening with its modal after a list of parties ("(i) scheduled loads; …
        (vi) … must linearly ramp"): one obligation per listed party."""
        listed = [c for c, _ in self.items if parties_of(self._item_party(c.text), self.defined)]
        if not listed:
            return False
        joined = " ".join(LIST_MARKER.sub("", c.text, count=1) for c, _ in self.items)
        text = f"{joined} {clause.text}"
        opening = self.items[0][0]
        for item in listed:
            party = self._item_party(item.text)
            reading = Reading(first.modality, (party,), first.at, first.action, party, False)
            self._emit(chunk, clause, reading, text, paragraph_of=opening)
        self.items = []
        return True

    @staticmethod
    def _item_party(text: str) -> str:
        item = LIST_MARKER.sub("", text, count=1).strip()
        return re.sub(r"[;,.]?\s*(?:and|or)?$", "", item).strip(" ;,")

    def _row(self, chunk: Chunk, clause: _Clause) -> None:
        """A table row: each cell read as its own clauses; a cell whose modal has no subject
        takes the row's first cell as its party when that names one."""
        cells = [c for c in clause.text.split(" | ") if c.strip()]
        first = cells[0] if cells else ""
        if len(cells) >= 2 and self.defined.get(first.lower().strip("*")) == cells[1]:
            return  # a glossary row: its definition binds nobody
        for cell in cells:
            for unit in units(cell):
                text = unit.text
                if not_a_requirement(text):
                    continue
                readings = read_clause(text, self.defined)
                if readings and not readings[0].subject.strip() and not readings[0].parties:
                    orphan, readings = readings[0], readings[1:]
                    if cell is not first and names_a_party(first, self.defined):
                        readings.insert(0, replace(orphan, parties=(first,), subject=first))
                shift = max(clause.text.find(text), 0)
                for reading in readings:
                    self._emit(chunk, clause, replace(reading, at=reading.at + shift), clause.text)
        self._note_mentions(clause.text)

    def _note_mentions(self, text: str) -> None:
        """Keep ``text`` for ``_nearest_party`` (the last ``_RECENT_CLAUSES`` of the section)."""
        self.recent.append(text)
        if len(self.recent) > 2 * _RECENT_CLAUSES:
            del self.recent[:-_RECENT_CLAUSES]

    def _thing_party(self, chunk: Chunk, text: str, reading: Reading) -> tuple[str, str | None, bool, bool]:
        """The party bound by a rule whose subject names none (module docstring): ``(party,
        role, settled, inferred)``; ``settled`` when the section's named parties may not
        replace it (``_infer_from_section``), ``inferred`` unless the thing is the party."""
        if not reading.receiver:
            agent = self._agent(text)
            if agent is not None:
                return agent, role_of(agent, self.defined) or agent, True, True
        if self.owner is not None:
            return self.owner, role_of(self.owner, self.defined) or self.owner, True, True
        for heading in reversed(chunk.heading_path):
            party = heading_party(heading, self.defined)
            if party is not None:
                return party, role_of(party, self.defined) or party, True, True
        if not reading.receiver and states_a_property(reading.subject, _after_modal(reading.action)):
            thing = _trim_thing(reading.subject)
            return thing, None, True, False
        receiver = reading.subject if reading.receiver else None
        self.mentioned[len(self.found)] = self._nearest_party(receiver)
        return "", None, False, True

    def _agent(self, text: str) -> str | None:
        """The party of the first "by X" in ``text`` that names one ("… must be undertaken by
        workers engaged in construction")."""
        for found in _AGENT.finditer(text):
            parties = parties_of(found.group("agent"), self.defined)
            if len(parties) == 1:
                return parties[0]
        return None

    def _nearest_party(self, receiver: str | None) -> tuple[str, str] | None:
        """``(party, role)`` of the last party named as the subject of a verb in the section's
        recent clauses: an actor, not a facility ("the generating unit has reached …"), nor a
        receiver's own party ("The customer must not be required …")."""
        avoid = role_of(receiver, self.defined) if receiver else None
        for earlier in reversed(self.recent[-_RECENT_CLAUSES:]):
            named = [m.group("party") for m in _SUBJECT_MENTION.finditer(earlier)]
            named = [n for n in named if (avoid is None or role_of(n, self.defined) != avoid)
                     and singular(n.split()[-1].lower()) not in _FACILITIES]
            if named:
                return named[-1], role_of(named[-1], self.defined) or named[-1]
        return None

    def _emit(
        self, chunk: Chunk, clause: _Clause, reading: Reading, text: str,
        paragraph_of: _Clause | None = None,
    ) -> None:
        deadline = deadline_of(text, reading.action)
        reference = self._reference(chunk, paragraph_of or clause)
        page = self._page(chunk, clause, reading.at)
        common = dict(
            modality=reading.modality, text=text, action=reading.action, deadline=deadline,
            reference=reference, chunk_id=chunk.id, page=page, heading_path=chunk.heading_path,
        )
        if reading.thing:
            party, role, settled, inferred = self._thing_party(chunk, text, reading)
            if settled:
                self.settled.add(len(self.found))
            if reading.receiver:
                self.receivers[len(self.found)] = role_of(reading.subject, self.defined)
            self.found.append(Obligation(party=party, role=role, party_inferred=inferred, **common))
            self.keys.append((chunk.heading_path, clause.number))
            return
        for named in reading.parties:
            party = named.strip("_* ")
            role = role_of(party, self.defined)
            self.named.add(len(self.found))
            self.found.append(Obligation(party=party, role=role, **common))
            self.keys.append((chunk.heading_path, clause.number))


def _one_per_line(found: list[Obligation]) -> list[Obligation]:
    """``found`` without the repeats of an obligation already listed: the same sentence, party,
    modality and page (two modals of one sentence whose subjects resolve to one party, "the
    Company shall pay … and such payments shall be made …"), which the register would print
    as the same line twice; the first is kept, with the first deadline found among them."""
    kept: dict[tuple[str, str, str, str, int | None], int] = {}
    out: list[Obligation] = []
    for ob in found:
        key = (ob.chunk_id, ob.text, ob.party, ob.modality, ob.page)
        if key not in kept:
            kept[key] = len(out)
            out.append(ob)
        elif out[kept[key]].deadline is None and ob.deadline is not None:
            out[kept[key]] = replace(out[kept[key]], deadline=ob.deadline)
    return out


def _nearest_first(found: list[Obligation], indices: list[int], index: int) -> list[tuple[str, str | None]]:
    """``(party, role)`` of the obligations at ``indices``, the one nearest ``index`` first
    (the earlier on a tie)."""
    ordered = sorted(indices, key=lambda i: (abs(i - index), i > index))
    return [(found[i].party, found[i].role) for i in ordered[:1]]


def _shared(left: tuple[str, ...], right: tuple[str, ...]) -> int:
    """How many leading headings two heading paths share."""
    count = 0
    for a, b in zip(left, right, strict=False):
        if a != b:
            break
        count += 1
    return count


def _after_modal(action: str) -> str:
    """An action's words after its modal ("must comply with …" -> "comply with …")."""
    modals = binding_modals(action)
    return action[modals[0].end():] if modals else action


def _trim_thing(subject: str) -> str:
    """A thing bound as named: its subject without a list marker or edge commas."""
    return LIST_MARKER.sub("", subject, count=1).strip(" ,")


def find_obligations(chunks: Sequence[Chunk]) -> list[Obligation]:
    """Every obligation in ``chunks`` (one document version, in reading order), one per bound
    party of each obligation sentence (module docstring). Linear in the text's length."""
    return _Document(chunks).read()
