"""Read-only views of the stores, for code that must never write (the MCP server).

Each Protocol lists the reads a reader needs and nothing that changes the store: no
``upsert``/``delete``/``drop`` on vectors, no ``replace_document``/``clear`` on the graph, no
``add_pending``/``mark_*`` on the catalog. The full store classes (``VectorIndex``,
``GraphStore``, ``Catalog``) satisfy them structurally, so a reader is opened through
``kb_shared.stores.factory`` as usual and then held as its reader type; "read-only" is then
stated by the types as well as by the database role (``sql/003_reader_role.sql``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from kb_shared.graph_model import Entity
from kb_shared.stores.catalog import DocumentRow
from kb_shared.stores.graph import EntityHit, GraphPath
from kb_shared.stores.vectors import CollectionInfo, Hit, StoredPoint


class VectorReader(Protocol):
    """The reads of an opened ``VectorIndex`` (same semantics; see its docstrings).

    ``documents``/``kinds``: ``None`` = no filter, an empty sequence matches nothing.
    """

    def describe(self) -> CollectionInfo | None:
        """The recorded model and dimension, ``None`` when no collection exists."""
        ...

    def count(self, document: str | None = None, kind: str | None = None) -> int:
        """Number of points, optionally of one document and/or kind."""
        ...

    def list_ids(self, document: str | None = None, kind: str | None = None) -> list[str]:
        """Point ids, sorted, optionally of one document and/or kind."""
        ...

    def fetch(self, ids: Sequence[str]) -> list[StoredPoint]:
        """Points for ``ids`` in the order asked; ids not stored are skipped."""
        ...

    def dense_search(
        self,
        vector: Sequence[float] | np.ndarray,
        limit: int,
        documents: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
    ) -> list[Hit]:
        """Nearest points by cosine similarity, best first."""
        ...

    def sparse_search(
        self,
        text: str,
        limit: int,
        documents: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
    ) -> list[Hit]:
        """Best points by ``kb_shared.sparse`` term match, best first."""
        ...

    def hybrid_search(
        self,
        vector: Sequence[float] | np.ndarray,
        text: str,
        limit: int,
        documents: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
        candidates: int | None = None,
        extra: Sequence[tuple[Sequence[Hit], float]] = (),
    ) -> list[Hit]:
        """Dense and sparse candidates (plus ``extra`` lists) fused by weighted RRF."""
        ...

    def close(self) -> None:
        """Release connections; safe to call twice."""
        ...


class GraphReader(Protocol):
    """The reads of a ``GraphStore`` that graph search uses (same semantics)."""

    def similar_entities(self, vector: Sequence[float] | np.ndarray, k: int) -> list[EntityHit]:
        """Top-``k`` entities by cosine similarity of their name vector, best first.

        Raises:
            EmbeddingMismatchError: the stored entity vectors have another dimension.
        """
        ...

    def walk(self, seeds: Sequence[str], hops: int = 1, limit: int = 200) -> list[GraphPath]:
        """Paths of 1..``hops`` relationships from each seed key, in ``walk_order_key`` order."""
        ...

    def entities(self, keys: Sequence[str]) -> list[Entity]:
        """Entities by key, in the order asked; unknown keys skipped."""
        ...

    def close(self) -> None:
        """Release connections; safe to call twice."""
        ...


class CatalogReader(Protocol):
    """The reads of the ``Catalog`` documents table (same semantics)."""

    def find_by_doc_id(self, doc_id: str) -> DocumentRow | None:
        """The row with this ``doc_id``, or ``None``."""
        ...

    def resolve(self, ref: str) -> DocumentRow | None:
        """The document a person means by a ``doc_id`` or a file name, or ``None``."""
        ...

    def list_documents(self, status: str | None = None) -> list[DocumentRow]:
        """Every document (or those with ``status``), ordered by normalised name.

        Raises:
            SchemaMissingError: the catalog's tables were never created.
        """
        ...

    def close(self) -> None:
        """Release the database engine; safe to call twice."""
        ...
