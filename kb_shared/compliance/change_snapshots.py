"""A document version as "What changed" compares it (issue 27): its sections in reading
order, each a heading path (``Chunk.heading_path``) and its *units*: sentences, list clauses
and table rows cut by ``retrieval_features.units``, shown as a quote shows them
(``citations.readable``), each with the 1-based page a reader sees it on (the rule of
``kb_shared.search.quotes``: the chunk's page runs when it is located, else its first page).
Consecutive chunks under one heading path are one section. ``[Figure: …]`` markers and
page-number lines ("Page 6 of 40") are no units. The ``changes`` asset stores each version's
snapshot as JSON (``Snapshot.to_json``): a superseded version's chunks and files are deleted.

Units are compared by their ``comparison_key``: whitespace, hyphenation, typographic quotes
and dashes, spaces at brackets, list bullets, list numbers and paragraph labels aside.
``kb_shared.compliance.changes.compare`` compares two snapshots.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kb_shared.ingest.chunking import PATH_SEPARATOR, Chunk
from kb_shared.errors import ChangeSnapshotError
from kb_shared.ingest.page_location import FIGURE_LINE, page_at
from kb_shared.search.citations import readable
from kb_shared.search.quotes import QUOTE_CHARS, unit_offset
from kb_shared.search.retrieval_features import units

#: Version of the snapshot's JSON layout (``Snapshot.to_json``).
SNAPSHOT_FORMAT = 1

#: A line that is only page furniture: "12", "Page 6", "Page 6 of 40", "6 / 40".
_FURNITURE = re.compile(r"^(?:page\s+)?\d{1,4}(?:\s*(?:of|/)\s*\d{1,4})?$", re.IGNORECASE)
_HAS_WORD = re.compile(r"\w")
#: A leading list bullet, paragraph label or list number, or a bullet then a label ("- (c) "):
#: what ``comparison_key`` drops, and what makes a unit a list item (``changes``).
LIST_MARKER = re.compile(
    r"^(?:[-*+•▪◦]\s+(?:\(?(?:\d{1,3}|[a-z]|[ivx]{1,5})[.)]\s+)?"
    r"|\(?(?:\d{1,3}|[a-z]|[ivx]{1,5})[.)]\s+)",
    re.IGNORECASE,
)
_LINE_HYPHEN = re.compile(r"(?<=[^\W\d_])[-\u00ad]\s*(?=[^\W\d_])")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+(?=[,.;:!?)\]])")
_SPACE_AFTER_OPEN = re.compile(r"(?<=[(\[])\s+")
#: Space before an opening bracket: converters print "resource (s)" for a re-flowed "resource(s)".
_SPACE_BEFORE_OPEN = re.compile(r"\s+(?=[(\[])")
_TYPOGRAPHY = str.maketrans(
    {"‘": "'", "’": "'", "“": '"', "”": '"', "–": "-", "—": "-", "\u00a0": " "}
)


def comparison_key(text: str) -> str:
    """``text`` as units are compared (module docstring): compatibility-normalised,
    typographic quotes and dashes made plain, hyphens inside or breaking a word and soft
    hyphens dropped, no space before closing punctuation or around an opening bracket
    ("resource (s)" is "resource(s)"), whitespace collapsed, a leading list bullet, list number
    or paragraph label dropped (both of "- (c) ": a paragraph moved out of its list is the same
    text)."""
    flat = unicodedata.normalize("NFKC", text).translate(_TYPOGRAPHY)
    flat = _LINE_HYPHEN.sub("", flat)
    flat = " ".join(flat.split())
    flat = _SPACE_AFTER_OPEN.sub("", _SPACE_BEFORE_PUNCT.sub("", flat))
    flat = LIST_MARKER.sub("", flat, count=1)
    return _SPACE_BEFORE_OPEN.sub("", flat)


@dataclass(frozen=True, slots=True)
class SnapshotUnit:
    """One sentence, list clause or table row of a version: ``text`` as a quote shows it
    (``citations.readable``), ``page`` the 1-based page it is on (``None`` when unknown)."""

    text: str
    page: int | None
    #: its ``comparison_key``, computed once
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", comparison_key(self.text))


@dataclass(frozen=True, slots=True)
class SnapshotSection:
    """A section of a version: its heading ``path`` (outermost first, as
    ``Chunk.heading_path``) and its ``units`` in reading order."""

    path: tuple[str, ...]
    units: tuple[SnapshotUnit, ...]

    @property
    def label(self) -> str:
        """The path joined by `` › `` (``chunking.PATH_SEPARATOR``), as citations show it."""
        return PATH_SEPARATOR.join(self.path)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One document version as ``compare`` reads it (module docstring, "Snapshot").

    Attributes:
        doc_id: the document's id; version: its 1-based version number; name: its file name.
        sections: the sections with at least one unit, in reading order.
    """

    doc_id: str
    version: int
    name: str
    sections: tuple[SnapshotSection, ...]

    @classmethod
    def from_chunks(
        cls, doc_id: str, version: int, name: str, chunks: Iterable[Chunk]
    ) -> Snapshot:
        """The snapshot of one version from its chunks (taken in ``Chunk.index`` order)."""
        sections: list[SnapshotSection] = []
        path: tuple[str, ...] | None = None
        found: list[SnapshotUnit] = []
        for chunk in sorted(chunks, key=lambda c: c.index):
            if chunk.heading_path != path:
                if path is not None and found:
                    sections.append(SnapshotSection(path, tuple(found)))
                path, found = chunk.heading_path, []
            found.extend(_chunk_units(chunk))
        if path is not None and found:
            sections.append(SnapshotSection(path, tuple(found)))
        return cls(doc_id, version, name, tuple(sections))

    def to_json(self) -> bytes:
        """UTF-8 JSON: ``{"format", "doc_id", "version", "name", "sections": [{"path":
        [...], "units": [[text, page], ...]}]}``."""
        return json.dumps(
            {
                "format": SNAPSHOT_FORMAT,
                "doc_id": self.doc_id,
                "version": self.version,
                "name": self.name,
                "sections": [
                    {"path": list(s.path), "units": [[u.text, u.page] for u in s.units]}
                    for s in self.sections
                ],
            },
            ensure_ascii=False,
        ).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes) -> Snapshot:
        """The snapshot ``to_json`` wrote.

        Raises:
            ChangeSnapshotError: not UTF-8 JSON of that layout, or another format version.
        """
        try:
            raw = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ChangeSnapshotError(f"a change snapshot is not UTF-8 JSON ({exc})") from None
        if not isinstance(raw, dict) or raw.get("format") != SNAPSHOT_FORMAT:
            found = raw.get("format") if isinstance(raw, dict) else type(raw).__name__
            raise ChangeSnapshotError(
                f"a change snapshot of format {found!r}; this kb reads format {SNAPSHOT_FORMAT} "
                "(rebuild the document's `changes` asset)"
            )
        try:
            sections = tuple(
                SnapshotSection(
                    tuple(_text(p) for p in s["path"]),
                    tuple(SnapshotUnit(_text(t), _page(p)) for t, p in s["units"]),
                )
                for s in raw["sections"]
            )
            doc_id, name = _text(raw["doc_id"]), _text(raw["name"])
            version = _version(raw["version"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ChangeSnapshotError(
                f"a change snapshot with a malformed field ({exc!r})"
            ) from None
        return cls(doc_id, version, name, sections)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, got {value!r}")
    return value


def _page(value: Any) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return value
    raise ValueError(f"expected a 1-based page or null, got {value!r}")


def _version(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise ValueError(f"expected a version number of at least 1, got {value!r}")


def _chunk_units(chunk: Chunk) -> list[SnapshotUnit]:
    """The units of one chunk with their pages (module docstring, "Snapshot")."""
    out: list[SnapshotUnit] = []
    cursor = 0
    for unit in units(chunk.text):
        found = unit_offset(chunk.text[cursor:], unit.text)
        offset = cursor + found if found >= 0 else -1
        if offset >= 0:
            cursor = offset + len(unit.text)
        if FIGURE_LINE.match(unit.text):
            continue
        text = readable(unit.text)
        if not _HAS_WORD.search(text) or _FURNITURE.match(text):
            continue
        page = chunk.page_start
        if chunk.located and chunk.page_runs and offset >= 0:
            # the page holding the middle of the unit's quoted part, as ``quotes.passage_quote``
            page = page_at(chunk.page_runs, offset + min(len(unit.text), QUOTE_CHARS) // 2)
        out.append(SnapshotUnit(text, page))
    return out
