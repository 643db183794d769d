"""The knowledge-graph data model shared by graph stores and graph extractors.

An ``Entity`` is a node identified by ``entity_key(name)``; a ``Relationship`` is a typed,
directed edge with provenance (``source_doc``, ``chunk_id``). Stores (``kb_shared.stores.graph``)
and providers (``kb_shared.providers.base``) both import these types from here, so neither
depends on the other.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass

_SPACES = re.compile(r"\s+")


def entity_key(name: str) -> str:
    """Identity of an entity: NFC, case-folded, inner whitespace collapsed, trimmed.

    ``"The  Retailer "`` and ``"the retailer"`` are one entity. Raises ``ValueError`` on an
    empty name.
    """
    key = _SPACES.sub(" ", unicodedata.normalize("NFC", name).casefold()).strip()
    if not key:
        raise ValueError("an entity name cannot be empty")
    return key


@dataclass(frozen=True, slots=True)
class Entity:
    """A node.

    Attributes:
        name: display name as first seen.
        type: e.g. ``DefinedTerm``, ``Role``, ``Organisation``, ``Document``, ``Code``.
        description: a short description (may be empty).
        vector: embedding of ``name`` (unit length) for similarity seeding, or ``None``.
    """

    name: str
    type: str
    description: str = ""
    vector: tuple[float, ...] | None = None

    @property
    def key(self) -> str:
        """``entity_key(self.name)``."""
        return entity_key(self.name)


@dataclass(frozen=True, slots=True)
class Relationship:
    """A directed, typed edge with provenance.

    Attributes:
        source, target: entity keys (``entity_key`` of the endpoint names).
        type: relationship type from the extractor's vocabulary, e.g. ``MUST_NOTIFY``,
            ``DEFINES``, ``REFERS_TO``, ``PART_OF``.
        description: the sentence or phrase it came from (short).
        source_doc: the ``doc_id`` it was extracted from.
        chunk_id: the chunk id it was extracted from (resolves in the vector index).
    """

    source: str
    target: str
    type: str
    description: str
    source_doc: str
    chunk_id: str

    @property
    def id(self) -> str:
        """Stable id: first 16 hex chars of SHA-256 over the six fields."""
        raw = "\x1f".join(
            (self.source, self.target, self.type, self.description, self.source_doc, self.chunk_id)
        )
        return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:16]
