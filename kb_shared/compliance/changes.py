"""What changed between two issues of a document: a clause-level comparison (issue 27, "What
changed").

Both versions are ``Snapshot``s (``kb_shared.compliance.change_snapshots``): sections in reading order,
each a heading path and its units (sentences, list clauses, table rows) with their pages.

**Matching sections** (``compare``). In three rounds, each on what the rounds before left:
(1) the same heading path; (2) the same path once section numbers and edition markers
("NEW", "UPDATED") are dropped, or the same own title with ``TITLE_MATCH_SIMILARITY`` of the
words in common; (3) ``CONTENT_MATCH_SIMILARITY`` of the words in common, whatever the title
(word similarity: the Dice coefficient of the sections' sets of distinct words); among equal
candidates the nearest in relative place. A renumbered heading ("4.2 X" → "4.3 X") or a
section moved elsewhere is one section, not a removal and an addition. A matched section
whose text is the same is ``moved`` when its own heading changed (its number included; edition
markers aside), when its order among the matched sections changed (the longest run of matched
sections kept in order stays, the others moved), or when it went to another parent (a parent
heading renamed for all the sections under it moves none of them); else it is counted as
unchanged. A matched section whose text changed gives its unit-level changes, which name the
section on both sides.

**Units.** Inside a matched section the units are compared in order (``difflib``; units equal
when their ``change_snapshots.comparison_key`` is). An insertion is ``added``, a deletion
``removed``; a replaced run pairs each before unit with its most similar after unit (at least
``PAIR_SIMILARITY``, ``difflib`` ratio), each pair a ``changed`` change, the rest ``added`` /
``removed``. A run whose words are the same once joined (a sentence cut differently) is no
change. Sections without a counterpart are ``added`` / ``removed`` whole. Last, a unit added
in one place and removed in another is in both versions (``_cancel_moves``): within
``MOVE_NEIGHBOURHOOD`` sections and on the same page it is no change (a converter reads the
blocks of an edited page in another order), farther or on another page it is ``moved``.

**Sides.** Each change has the text and pages of its units on both sides; a side without
text (the before side of an addition) names the pages where the change stands in that
version (the neighbouring unit's), so a reader can open both PDFs at the right place. Side
text is cut at a unit boundary to ``SIDE_TEXT_CHARS``.

**Flags.** ``obligation``: a unit on either side binds someone
(``kb_shared.compliance.obligations.modality_of``, the obligations register's one rule; a list
item binds when the stem it completes does, "The retailer must: - (a) notify …"). ``numbers``: the
figures of a changed pair that differ ("4 business days" → "5 business days"): amounts,
percentages, dates, financial years, times of day ("12:30 pm"), quantities with a unit or a
duration, plain numbers.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from kb_shared.compliance.change_snapshots import (
    LIST_MARKER,
    Snapshot,
    SnapshotSection,
    SnapshotUnit,
    comparison_key,
)
from kb_shared.compliance.obligations import modality_of

__all__ = [
    "ADDED", "CHANGED", "CHANGE_KINDS", "MOVED", "REMOVED", "Change", "ChangeSet", "NumberChange",
    "Side", "Snapshot", "SnapshotSection", "SnapshotUnit", "compare", "comparison_key", "figures",
    "match_sections",
]

ADDED = "added"
REMOVED = "removed"
CHANGED = "changed"
MOVED = "moved"
#: Every kind of change, in the order a summary lists them.
CHANGE_KINDS = (ADDED, REMOVED, CHANGED, MOVED)

#: Word similarity at or above which two sections with the same own title (numbers and edition
#: markers aside) but different parents are one section moved (a "Why:" under another
#: requirement is not).
TITLE_MATCH_SIMILARITY = 0.3
#: Word similarity at or above which two sections are one, whatever their titles (a section
#: renamed and moved).
CONTENT_MATCH_SIMILARITY = 0.6
#: ``difflib`` ratio at or above which a replaced unit is the same clause changed, not one
#: clause removed and another added.
PAIR_SIMILARITY = 0.5
#: Before × after units of one replaced run beyond which they are not paired one by one: the
#: run is one change.
PAIRING_LIMIT = 400
#: Sections apart (in the after version's order) within which text found removed in one and
#: added in the other is the converter's reading order, not a move (``_cancel_moves``).
MOVE_NEIGHBOURHOOD = 3
#: Longest side text, in characters (a whole section added is shown by its first units).
SIDE_TEXT_CHARS = 2000
_WORDS = re.compile(r"\w+")
#: A heading's own number: "4.2", "A.3", "Section 3:", "Part II", "Appendix B".
_HEADING_NUMBER = re.compile(
    r"^(?:(?:section|part|chapter|clause|schedule|appendix|annex|attachment)\s+"
    r"(?:\d+|[A-Z]|[IVXLC]+)(?:\.\d+)*[.:)]?"
    r"|[A-Z]?\d+(?:\.\d+)*[.:)]?|[A-Z](?:\.\d+)+[.:)]?)\s+",
    re.IGNORECASE,
)
#: A marker an edition puts before a heading it changed.
_EDITION_MARKER = re.compile(r"^(?:new|updated|amended|revised|changed)\b\s*", re.IGNORECASE)

_MONTH = (
    r"(?i:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
#: Durations (any case) and SI units (their own case: "5 A" is amperes, "5 a" is no figure).
_UNIT = (
    r"(?i:(?:business|working|calendar|clear)\s+days?|days?|weeks?|months?|years?|hours?"
    r"|minutes?|seconds?)|kWh|kW|kVA|kV|MWh|MW|GWh|GW|Wh|W|V|A|Hz|mm|cm|km|m|kg"
)
_NUMBER = r"\d[\d,]*(?:\.\d+)?"
#: A figure (module docstring, "Flags"), longest form first; a bare number may be a clause
#: number ("4.2.1").
_FIGURE = re.compile(
    rf"(?:(?:A|AU|US|NZ)?\$|AUD\s?|€|£)\s?{_NUMBER}(?:\s?(?:million|billion|m|bn|k)\b)?"
    rf"|{_NUMBER}\s?(?:%|(?i:per\s?cent|percent)\b)"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTH}\.?\s+\d{{4}}\b"
    rf"|\b{_MONTH}\.?\s+\d{{4}}\b"
    r"|\b\d{1,2}/\d{1,2}/\d{2,4}\b|\b\d{4}-\d{2}-\d{2}\b"
    r"|\b(?:19|20)\d{2}[-–/](?:\d{2}|(?:19|20)\d{2})\b"
    r"|\b\d{1,2}(?:[:.]\d{2})?\s?(?i:[ap]\.m\.|[ap]m\b)|\b\d{1,2}:\d{2}\b"
    rf"|\b{_NUMBER}\s?(?:{_UNIT})\b"
    r"|\b\d[\d,]*(?:\.\d+)*\b"
)


def figures(text: str) -> list[str]:
    """The figures in ``text`` in order (module docstring, "Flags"), as written
    (``"$1,400"``, ``"5 business days"``, ``"1 July 2025"``, ``"90 per cent"``, ``"12:30 pm"``)."""
    return [" ".join(m.group(0).split()) for m in _FIGURE.finditer(text)]


def _figure_key(figure: str) -> str:
    return comparison_key(figure).replace(",", "").casefold()


@dataclass(frozen=True, slots=True)
class Side:
    """One side of a change: ``text`` the changed units (one per line; ``""`` when the side
    has none) and ``pages`` the 1-based pages they are on, ascending (for a side without text,
    where the change stands in that version; ``()`` when unknown)."""

    text: str
    pages: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        """``{"text": str, "pages": [int, ...]}``."""
        return {"text": self.text, "pages": list(self.pages)}


#: A figure that changed: ``(before, after)``; ``None`` on the side that lacks it.
NumberChange = tuple[str | None, str | None]


@dataclass(frozen=True, slots=True)
class Change:
    """One difference between two versions (module docstring).

    Attributes:
        number: 1-based, in the after version's reading order.
        kind: one of ``CHANGE_KINDS``.
        section_before / section_after: the section's path joined by `` › ``; ``None`` on the
            side where the section does not exist.
        before / after: ``Side``.
        obligation: a unit on either side binds someone (``obligations.modality_of``).
        numbers: the figures that changed, ``()`` when none did.
    """

    number: int
    kind: str
    section_before: str | None
    section_after: str | None
    before: Side
    after: Side
    obligation: bool
    numbers: tuple[NumberChange, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The change as JSON-ready data (the ``compare_versions`` tool's ``changes`` item)."""
        return {
            "number": self.number,
            "kind": self.kind,
            "section_before": self.section_before,
            "section_after": self.section_after,
            "before": self.before.to_dict(),
            "after": self.after.to_dict(),
            "obligation": self.obligation,
            "numbers": [list(pair) for pair in self.numbers],
        }


@dataclass(frozen=True, slots=True)
class ChangeSet:
    """Every change between two versions, in order, and how many matched sections did not
    change."""

    changes: tuple[Change, ...]
    unchanged_sections: int

    @property
    def summary(self) -> dict[str, int]:
        """``{added, removed, changed, moved, unchanged_sections, obligations_changed,
        numbers_changed}``: changes by kind, unchanged sections, and the changes that touch an
        obligation or a figure."""
        counts = Counter(c.kind for c in self.changes)
        return {
            **{kind: counts.get(kind, 0) for kind in CHANGE_KINDS},
            "unchanged_sections": self.unchanged_sections,
            "obligations_changed": sum(1 for c in self.changes if c.obligation),
            "numbers_changed": sum(1 for c in self.changes if c.numbers),
        }


# --------------------------------------------------------------------------- sections


def _title_key(title: str, *, numbered: bool) -> str:
    """A heading title compared without emphasis, case and punctuation; without its edition
    marker and, unless ``numbered``, without its own number."""
    flat = _EDITION_MARKER.sub("", " ".join(title.replace("*", " ").replace("_", " ").split()))
    if not numbered:
        flat = _HEADING_NUMBER.sub("", flat)
    return " ".join(_WORDS.findall(flat)).casefold()


def _path_key(path: Sequence[str], *, numbered: bool) -> tuple[str, ...]:
    return tuple(_title_key(t, numbered=numbered) for t in path)


def _similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """Dice coefficient of two sections' distinct words (0 for two empty sets)."""
    total = len(a) + len(b)
    return 2 * len(a & b) / total if total else 0.0


def _words(section: SnapshotSection) -> frozenset[str]:
    return frozenset(w.casefold() for u in section.units for w in _WORDS.findall(u.key))


def match_sections(
    before: Sequence[SnapshotSection], after: Sequence[SnapshotSection]
) -> dict[int, int]:
    """Pairs of matched sections, before index → after index (module docstring, "Matching
    sections"). Among equal candidates the one nearest in relative place wins."""
    words_before = [_words(s) for s in before]
    words_after = [_words(s) for s in after]
    pairs: dict[int, int] = {}
    taken: set[int] = set()
    scale_before, scale_after = 1 / max(len(before), 1), 1 / max(len(after), 1)

    def pair_greedily(candidates: list[tuple[float, int, int]]) -> None:
        def rank(c: tuple[float, int, int]) -> tuple[float, float, int, int]:
            return (-c[0], abs(c[1] * scale_before - c[2] * scale_after), c[1], c[2])

        for _score, i, j in sorted(candidates, key=rank):
            if i not in pairs and j not in taken:
                pairs[i] = j
                taken.add(j)

    by_path: dict[tuple[str, ...], list[int]] = {}
    for j, section in enumerate(after):
        by_path.setdefault(section.path, []).append(j)
    pair_greedily([
        (_similarity(words_before[i], words_after[j]), i, j)
        for i, section in enumerate(before)
        for j in by_path.get(section.path, ())
    ])
    free_after = [j for j in range(len(after)) if j not in taken]
    keys_after = {j: _path_key(after[j].path, numbered=False) for j in free_after}
    candidates: list[tuple[float, int, int]] = []
    for i in (i for i in range(len(before)) if i not in pairs):
        unnumbered = _path_key(before[i].path, numbered=False)
        own = unnumbered[-1:]
        for j in free_after:
            similarity = _similarity(words_before[i], words_after[j])
            other = keys_after[j]
            if other == unnumbered:
                candidates.append((2 + similarity, i, j))
            elif other[-1:] == own and similarity >= TITLE_MATCH_SIMILARITY:
                candidates.append((1 + similarity, i, j))
            elif similarity >= CONTENT_MATCH_SIMILARITY:
                candidates.append((similarity, i, j))
    pair_greedily(candidates)
    return pairs


def _moved_parents(
    before: Sequence[SnapshotSection], after: Sequence[SnapshotSection], pairs: dict[int, int]
) -> set[int]:
    """The before indices of pairs whose parent heading path changed in a way the other pairs
    do not share. Every pair votes that each of its path's prefixes became the same-length
    prefix of its counterpart; a parent renamed for all its sections (a strict majority both
    ways) is no move of theirs, a section taken to another parent is."""
    forward: dict[tuple[str, ...], Counter[tuple[str, ...]]] = {}
    backward: dict[tuple[str, ...], Counter[tuple[str, ...]]] = {}
    for i, j in pairs.items():
        old, new = before[i].path, after[j].path
        for depth in range(1, min(len(old), len(new)) + 1):
            forward.setdefault(old[:depth], Counter())[new[:depth]] += 1
            backward.setdefault(new[:depth], Counter())[old[:depth]] += 1

    def strict_winner(votes: Counter[tuple[str, ...]] | None, wanted: tuple[str, ...]) -> bool:
        ranked = votes.most_common(2) if votes else []
        return bool(ranked) and ranked[0][0] == wanted and (
            len(ranked) == 1 or ranked[1][1] < ranked[0][1]
        )

    moved: set[int] = set()
    for i, j in pairs.items():
        old, new = before[i].path[:-1], after[j].path[:-1]
        if _path_key(old, numbered=True) == _path_key(new, numbered=True):
            continue
        renamed_parent = (
            strict_winner(forward.get(old), new) and strict_winner(backward.get(new), old)
        )
        if not renamed_parent:
            moved.add(i)
    return moved


def _kept_in_order(pairs: dict[int, int]) -> set[int]:
    """The before indices of the longest run of pairs whose after indices ascend with their
    before indices (patience sorting); the other pairs moved."""
    ordered = sorted(pairs.items())
    tails: list[int] = []  # position in ``ordered`` of the smallest tail of each run length
    previous: list[int] = [-1] * len(ordered)
    for position, (_i, j) in enumerate(ordered):
        low, high = 0, len(tails)
        while low < high:
            middle = (low + high) // 2
            if ordered[tails[middle]][1] < j:
                low = middle + 1
            else:
                high = middle
        previous[position] = tails[low - 1] if low else -1
        if low == len(tails):
            tails.append(position)
        else:
            tails[low] = position
    kept: set[int] = set()
    position = tails[-1] if tails else -1
    while position >= 0:
        kept.add(ordered[position][0])
        position = previous[position]
    return kept


# --------------------------------------------------------------------------- units


def _compact(keys: Iterable[str]) -> str:
    return "".join("".join(keys).split())


def _pair_units(
    before: Sequence[SnapshotUnit], after: Sequence[SnapshotUnit]
) -> list[tuple[int | None, int | None]]:
    """An order-keeping alignment of two runs of units that maximises the summed similarity
    of its pairs (each at least ``PAIR_SIMILARITY``); unpaired units stand alone, before-side
    first where both sides have one at the same place."""
    n, m = len(before), len(after)
    ratio = [[0.0] * m for _ in range(n)]
    for i in range(n):
        for j in range(m):
            matcher = difflib.SequenceMatcher(None, before[i].key, after[j].key, autojunk=False)
            if matcher.quick_ratio() >= PAIR_SIMILARITY:
                score = matcher.ratio()
                ratio[i][j] = score if score >= PAIR_SIMILARITY else 0.0
    best = [[0.0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            options = [best[i + 1][j], best[i][j + 1]]
            if ratio[i][j]:
                options.append(ratio[i][j] + best[i + 1][j + 1])
            best[i][j] = max(options)
    out: list[tuple[int | None, int | None]] = []
    i = j = 0
    while i < n and j < m:
        if ratio[i][j] and best[i][j] == ratio[i][j] + best[i + 1][j + 1]:
            out.append((i, j))
            i, j = i + 1, j + 1
        elif best[i][j] == best[i + 1][j]:
            out.append((i, None))
            i += 1
        else:
            out.append((None, j))
            j += 1
    out.extend((k, None) for k in range(i, n))
    out.extend((None, k) for k in range(j, m))
    return out


def _number_changes(before: str, after: str) -> tuple[NumberChange, ...]:
    """The figures of ``before`` and ``after`` that differ, paired in order."""
    old, new = figures(before), figures(after)
    matcher = difflib.SequenceMatcher(
        None, [_figure_key(f) for f in old], [_figure_key(f) for f in new], autojunk=False
    )
    out: list[NumberChange] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        gone, came = old[i1:i2], new[j1:j2]
        for k in range(max(len(gone), len(came))):
            out.append((gone[k] if k < len(gone) else None, came[k] if k < len(came) else None))
    return tuple(out)


def _side_text(chosen: Sequence[SnapshotUnit]) -> str:
    """The units' texts one per line, cut at a unit boundary to ``SIDE_TEXT_CHARS`` (at
    least the first unit, itself cut at a word), with "…" when units were left out."""
    lines: list[str] = []
    used = 0
    for unit in chosen:
        if lines and used + len(unit.text) + 1 > SIDE_TEXT_CHARS:
            return "\n".join(lines) + "\n…"
        lines.append(unit.text if lines else unit.text[:SIDE_TEXT_CHARS])
        used += len(unit.text) + 1
    return "\n".join(lines)


def _pages(chosen: Iterable[SnapshotUnit]) -> tuple[int, ...]:
    return tuple(sorted({u.page for u in chosen if u.page is not None}))


def _anchor(section_units: Sequence[SnapshotUnit], at: int) -> tuple[int, ...]:
    """The page where a change at unit position ``at`` stands in a section: that unit's,
    else the one before it."""
    for index in (at, at - 1):
        page = section_units[index].page if 0 <= index < len(section_units) else None
        if page is not None:
            return (page,)
    return ()


@dataclass(slots=True)
class _Draft:
    """A change before it is numbered (``change.number`` is 0), with its sort key in the after
    version's reading order: ``(after section index, 0 for that section's own changes / 1 for
    a removed section that stood after it, place)``."""

    order: tuple[int, int, int]
    change: Change
    #: an addition's or a removal's own units (``_cancel_moves``)
    units: tuple[SnapshotUnit, ...] = field(default=())


def _draft(order: tuple[int, int, int], kind: str, section_before: str | None,
           section_after: str | None, before: Side, after: Side, obligation: bool,
           numbers: tuple[NumberChange, ...] = (),
           units: tuple[SnapshotUnit, ...] = ()) -> _Draft:
    """A ``_Draft`` of the change with these fields (``Change``'s, but its number)."""
    return _Draft(order, Change(0, kind, section_before, section_after, before, after,
                                obligation, numbers), units)


def _cancel_moves(drafts: list[_Draft], binding: _Binding) -> list[_Draft]:
    """``drafts`` (in order) with each unit added in one place and removed in another (the
    same ``comparison_key``) taken out of both: text in both versions is no addition or
    removal. Such units within ``MOVE_NEIGHBOURHOOD`` sections of each other and on the same
    page are dropped (a converter reads blocks of one page in another order when a page
    changes); the others (farther, or printed on another page) become one ``moved`` change per
    addition, at its place, an obligation when a moved unit binds someone (``binding``)."""
    pool: dict[str, list[tuple[_Draft, SnapshotUnit]]] = {}
    for draft in drafts:
        if draft.change.kind == REMOVED:
            for unit in draft.units:
                pool.setdefault(unit.key, []).append((draft, unit))
    taken: dict[int, set[int]] = {}  # id(draft) -> ids of its units found on the other side
    moves: dict[int, list[tuple[_Draft, SnapshotUnit, SnapshotUnit]]] = {}
    for draft in drafts:
        if draft.change.kind != ADDED:
            continue
        for unit in draft.units:
            waiting = pool.get(unit.key)
            if waiting:
                source, gone = waiting.pop(0)
                taken.setdefault(id(source), set()).add(id(gone))
                taken.setdefault(id(draft), set()).add(id(unit))
                moves.setdefault(id(draft), []).append((source, gone, unit))
    out: list[_Draft] = []
    for draft in drafts:
        found = taken.get(id(draft))
        if not found:
            out.append(draft)
            continue
        far = [
            move for move in moves.get(id(draft), ())
            if abs(move[0].order[0] - draft.order[0]) > MOVE_NEIGHBOURHOOD
            or None not in (move[1].page, move[2].page) and move[1].page != move[2].page
        ]
        if far:
            gone, came = [m[1] for m in far], [m[2] for m in far]
            out.append(_draft(
                draft.order, MOVED, far[0][0].change.section_before, draft.change.section_after,
                Side(_side_text(gone), _pages(gone)), Side(_side_text(came), _pages(came)),
                _binds(gone, binding) or _binds(came, binding),
            ))
        left = [u for u in draft.units if id(u) not in found]
        if left:
            side = Side(_side_text(left), _pages(left))
            was = draft.change
            out.append(_draft(
                draft.order, was.kind, was.section_before, was.section_after,
                was.before if was.kind == ADDED else side,
                side if was.kind == ADDED else was.after,
                _binds(left, binding), (), tuple(left),
            ))
    return out


class _Binding:
    """The units that bind someone (module docstring, "Flags"), read one section at a time
    when a change needs them (``read``): a unit ``modality_of`` reads a modality in, and each
    list item after a binding stem ending in ":" ("The retailer must not: - (a) charge …"), as
    the obligations register joins them. ``ids`` holds the ids of those units."""

    def __init__(self) -> None:
        self.ids: set[int] = set()
        self.read_sections: set[int] = set()

    def read(self, section: SnapshotSection) -> None:
        """Add ``section``'s binding units to ``ids`` (once per section)."""
        if id(section) in self.read_sections:
            return
        self.read_sections.add(id(section))
        stem = False
        for unit in section.units:
            binds = modality_of(unit.text) is not None
            item = LIST_MARKER.match(unit.text.lstrip()) is not None
            if not item:
                stem = binds and unit.text.rstrip().endswith(":")
            if binds or (stem and item):
                self.ids.add(id(unit))


def _binds(chosen: Iterable[SnapshotUnit], binding: _Binding) -> bool:
    """Whether a unit of ``chosen`` binds (its section was ``read`` by ``binding``)."""
    return any(id(u) in binding.ids for u in chosen)


def _unit_changes(
    old: SnapshotSection, new: SnapshotSection, position: int, binding: _Binding
) -> list[_Draft]:
    """The unit-level changes inside one matched pair of sections, in reading order
    (``position``: the after section's index; ``binding`` reads both sections when one
    changed)."""
    drafts: list[_Draft] = []

    def add(kind: str, gone: Sequence[SnapshotUnit], came: Sequence[SnapshotUnit],
            at_before: int, at_after: int) -> None:
        numbers = ()
        if kind == CHANGED and len(gone) == len(came) == 1:
            numbers = _number_changes(gone[0].text, came[0].text)
        binding.read(old)
        binding.read(new)
        drafts.append(_draft(
            (position, 0, len(drafts)), kind, old.label, new.label,
            Side(_side_text(gone), _pages(gone) or _anchor(old.units, at_before)),
            Side(_side_text(came), _pages(came) or _anchor(new.units, at_after)),
            _binds(gone, binding) or _binds(came, binding), numbers,
            tuple(came or gone) if kind != CHANGED else (),
        ))

    matcher = difflib.SequenceMatcher(
        None, [u.key for u in old.units], [u.key for u in new.units], autojunk=False
    )
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        gone, came = old.units[i1:i2], new.units[j1:j2]
        if tag == "equal" or (
            gone and came and _compact(u.key for u in gone) == _compact(u.key for u in came)
        ):
            continue  # equal, or the same words cut into units differently
        if not gone or not came:
            add(ADDED if came else REMOVED, gone, came, i1, j1)
            continue
        if len(gone) * len(came) > PAIRING_LIMIT:
            add(CHANGED, gone, came, i1, j1)
            continue
        # walk the alignment: a pair is a change; each run of lone units, one removal and/or
        # one addition, anchored at the next unit on the side that lacks them
        at_before, at_after = i1, j1
        lone_gone: list[SnapshotUnit] = []
        lone_came: list[SnapshotUnit] = []
        for b, a in [*_pair_units(gone, came), (None, None)]:
            if (b is not None and a is not None) or (b is None and a is None):
                if lone_gone:
                    add(REMOVED, lone_gone, (), at_before - len(lone_gone), at_after)
                if lone_came:
                    add(ADDED, (), lone_came, at_before, at_after - len(lone_came))
                lone_gone, lone_came = [], []
            if b is not None and a is not None:
                add(CHANGED, [gone[b]], [came[a]], i1 + b, j1 + a)
                at_before, at_after = i1 + b + 1, j1 + a + 1
            elif b is not None:
                lone_gone.append(gone[b])
                at_before = i1 + b + 1
            elif a is not None:
                lone_came.append(came[a])
                at_after = j1 + a + 1
    return drafts


# --------------------------------------------------------------------------- compare


def compare(before: Snapshot, after: Snapshot) -> ChangeSet:
    """Every change from ``before`` to ``after`` (module docstring), in the after version's
    reading order (a removed section where it stood: after the changes of the matched section
    it followed)."""
    pairs = match_sections(before.sections, after.sections)
    binding = _Binding()
    kept = _kept_in_order(pairs)
    relocated = _moved_parents(before.sections, after.sections, pairs)
    drafts: list[_Draft] = []
    for i, j in pairs.items():
        old, new = before.sections[i], after.sections[j]
        found = _unit_changes(old, new, j, binding)
        drafts.extend(found)
        if found:
            continue
        renamed = _path_key(old.path[-1:], numbered=True) != _path_key(new.path[-1:], numbered=True)
        if renamed or i not in kept or i in relocated:
            drafts.append(_draft(
                (j, 0, -1), MOVED, old.label, new.label,
                Side("", _pages(old.units)), Side("", _pages(new.units)), False,
            ))
    matched_after = sorted(pairs.values())
    for i, section in enumerate(before.sections):
        if i in pairs:
            continue
        # where it stood: after the after-counterpart of the nearest matched section before it
        previous = max((pairs[k] for k in range(i) if k in pairs), default=-1)
        following = next((j for j in matched_after if j > previous), None)
        if following is not None:
            anchor = _anchor(after.sections[following].units, 0)
        elif previous >= 0:
            last = after.sections[previous].units
            anchor = _anchor(last, len(last) - 1)
        else:
            anchor = ()
        binding.read(section)
        drafts.append(_draft(
            (previous, 1, i), REMOVED, section.label, None,
            Side(_side_text(section.units), _pages(section.units)), Side("", anchor),
            _binds(section.units, binding), (), section.units,
        ))
    inverse = {j: i for i, j in pairs.items()}
    for j, section in enumerate(after.sections):
        if j in inverse:
            continue
        previous = max((inverse[k] for k in range(j) if k in inverse), default=-1)
        anchor = ()
        if previous >= 0:
            old_units = before.sections[previous].units
            anchor = _anchor(old_units, len(old_units) - 1)
        elif before.sections:
            anchor = _anchor(before.sections[0].units, 0)
        binding.read(section)
        drafts.append(_draft(
            (j, 0, -1), ADDED, None, section.label,
            Side("", anchor), Side(_side_text(section.units), _pages(section.units)),
            _binds(section.units, binding), (), section.units,
        ))
    drafts = _cancel_moves(sorted(drafts, key=lambda d: d.order), binding)
    touched = {d.order[0] for d in drafts if d.order[1] == 0}  # after sections with a change
    unchanged = sum(1 for j in pairs.values() if j not in touched)
    return ChangeSet(
        tuple(replace(d.change, number=number) for number, d in enumerate(drafts, start=1)),
        unchanged,
    )
