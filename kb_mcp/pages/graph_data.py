"""What ``GET /api/graph`` answers: a capped, filtered view of the knowledge graph in which
every edge carries its provenance (document, page, chunk id, citation link).

The view (issue 13, "The knowledge-graph page"): edges ordered by the combined degree of their
endpoints (``GraphReader.overview``), or, with ``seed``, the ``depth``-hop neighbourhood of one
entity (``GraphReader.neighbourhood``); capped at ``limit`` with a ``truncated`` flag and the
totals before the cap. Only ready documents are shown (the serving rule of
``kb_mcp.documents``): edges of pending or failed documents never appear.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kb_mcp.documents import serving_keys
from kb_mcp.links import Links
from kb_mcp.state import ServerState
from kb_shared import layout
from kb_shared.search.citations import PointPayload, format_pages
from kb_shared.errors import EmptyCorpusError, KbError
from kb_shared.graph_model import Relationship, entity_key
from kb_shared.stores.catalog import DocumentRow, DocumentStatus
from kb_shared.stores.graph import MAX_HOPS, EdgeFilter

log = logging.getLogger(__name__)

#: Edges shown when no ``limit`` is given, and the most a ``limit`` may ask for (issue 13; the
#: page's paint and frame rate at both: benchmarks/results/graph_page.md).
DEFAULT_LIMIT = 2000
MAX_LIMIT = 6000

#: The query parameters ``/api/graph`` accepts.
PARAMETERS = ("limit", "doc", "entity_type", "relationship_type", "seed", "depth")

#: Longest text value a parameter may have (characters).
MAX_PARAMETER_CHARS = 500


@dataclass(frozen=True, slots=True)
class GraphQuery:
    """The parsed query of ``/api/graph``.

    Attributes:
        limit: most edges returned (1..``MAX_LIMIT``).
        doc: a doc_id or file name (resolved against the catalog), or ``None``.
        entity_type / relationship_type: exact type filters (``EdgeFilter``), or ``None``.
        seed: the entity key (``entity_key`` of a name) whose neighbourhood is wanted.
        depth: hops from ``seed`` (1 or 2).
    """

    limit: int = DEFAULT_LIMIT
    doc: str | None = None
    entity_type: str | None = None
    relationship_type: str | None = None
    seed: str | None = None
    depth: int = 1

    @classmethod
    def parse(cls, params: Mapping[str, str]) -> GraphQuery:
        """Read the query parameters.

        Raises:
            ValueError: an unknown parameter, an over-long or empty value, a ``limit``
                outside 1..``MAX_LIMIT``, a ``depth`` outside 1..2 or without ``seed``; the
                message says what is accepted.
        """
        unknown = sorted(set(params) - set(PARAMETERS))
        if unknown:
            raise ValueError(
                f"unknown parameter {unknown[0]!r}; /api/graph accepts {', '.join(PARAMETERS)}"
            )
        text: dict[str, str | None] = {}
        for name in ("doc", "entity_type", "relationship_type", "seed"):
            value = params.get(name)
            if value is not None:
                value = value.strip()
                if not value or len(value) > MAX_PARAMETER_CHARS:
                    raise ValueError(
                        f"{name} must be 1 to {MAX_PARAMETER_CHARS} characters, or left out"
                    )
            text[name] = value
        limit = _whole_number(params, "limit", DEFAULT_LIMIT, MAX_LIMIT)
        depth = _whole_number(params, "depth", 1, MAX_HOPS)
        if "depth" in params and text["seed"] is None:
            raise ValueError("depth needs a seed: the entity whose neighbourhood to show")
        seed = text["seed"]
        return cls(
            limit=limit,
            doc=text["doc"],
            entity_type=text["entity_type"],
            relationship_type=text["relationship_type"],
            seed=None if seed is None else entity_key(seed),
            depth=depth,
        )


def _whole_number(params: Mapping[str, str], name: str, default: int, most: int) -> int:
    raw = params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if not 1 <= value <= most:
        raise ValueError(f"{name} must be a whole number from 1 to {most}, got {raw!r}")
    return value


def _documents(
    state: ServerState, doc: str | None
) -> tuple[list[DocumentRow], frozenset[str] | None, str | None]:
    """The ready documents (for the page's filter), the doc_ids edges may come from
    (``None``: any) and the doc_id ``doc`` names.

    Raises:
        ValueError: ``doc`` names no document, or one that is not ready.
    """
    rows = state.catalog.list_documents()
    ready = [row for row in rows if row.status == DocumentStatus.READY]
    # edges are stored under each version's key (``doc@v2``): serve the serving ones only
    keys = serving_keys(state.catalog)
    versioned = any(key != doc_id for doc_id, key in keys.items())
    served = (
        None if len(ready) == len(rows) and not versioned
        else frozenset(keys.get(row.doc_id, row.doc_id) for row in ready)
    )
    if doc is None:
        return ready, served, None
    row = state.catalog.resolve(doc)
    if row is None:
        raise ValueError(f"unknown document {doc!r}: give a doc_id or file name")
    if row.status != DocumentStatus.READY:
        raise ValueError(f"document {row.name!r} is {row.status}; only ready documents are shown")
    return ready, frozenset({keys.get(row.doc_id, row.doc_id)}), row.doc_id


def _chunk_payloads(
    state: ServerState, relationships: list[Relationship]
) -> dict[str, PointPayload]:
    """The payload of each cited chunk found in the vector index. Without a readable index
    (none yet, another embedding model, unreachable) the graph is still shown, without pages."""
    chunk_ids = list(dict.fromkeys(rel.chunk_id for rel in relationships))
    if not chunk_ids:
        return {}
    try:
        points = state.vectors().fetch(chunk_ids)
    except EmptyCorpusError:
        return {}
    except KbError as exc:
        log.warning("graph page: chunk pages unavailable: %s", exc)
        return {}
    return {point.id: PointPayload.from_payload(point.payload) for point in points}


def graph_view(state: ServerState, query: GraphQuery, links: Links) -> dict[str, Any]:
    """The JSON body of ``/api/graph`` for ``query``.

    Shape: ``nodes`` (``key, name, type, description, degree`` — degree over the whole
    graph), ``edges`` (``id, source, target, type, description, document, document_name,
    page, chunk_id, citation``; ``page``/``citation`` ``None`` when unknown), ``truncated``,
    ``total`` and ``shown`` (``nodes``, ``edges``), ``limit``, ``query`` (the filters as
    applied) and ``documents`` (the ready ones: ``doc_id, name, title``).

    Raises:
        ValueError: ``query.doc`` is unknown or not ready.
        StoreUnavailableError / StoreError: a store cannot be read.
    """
    ready, documents, doc_id = _documents(state, query.doc)
    where = EdgeFilter(
        documents=documents,
        entity_type=query.entity_type,
        relationship_type=query.relationship_type,
    )
    graph = state.graph
    if query.seed is not None:
        reached = graph.neighbourhood([query.seed], query.depth, where=where)
        shown = reached[: query.limit]
        total_edges = len(reached)
        total_nodes = len({key for rel in reached for key in (rel.source, rel.target)})
    else:
        shown = graph.overview(query.limit, where=where)
        counts = graph.counts(where=where)
        total_edges, total_nodes = counts.relationships, counts.entities
    keys = list(dict.fromkeys(key for rel in shown for key in (rel.source, rel.target)))
    if query.seed is not None and query.seed not in keys:
        keys.append(query.seed)  # a known seed shows even when no kept edge touches it
    entities = {entity.key: entity for entity in graph.entities(keys)}
    degrees = graph.degrees(list(entities))
    rows = {row.doc_id: row for row in ready}
    rows.update({key: rows[doc_id] for doc_id, key in serving_keys(state.catalog).items()
                 if doc_id in rows})
    payloads = _chunk_payloads(state, shown)
    edges = []
    for rel in shown:
        payload = payloads.get(rel.chunk_id)
        page = payload.page_start if payload is not None else None
        row = rows.get(rel.source_doc)
        pdf_key = (payload.pdf_key if payload is not None else "") or (
            row.blob_key if row is not None else layout.pdf_key(rel.source_doc)
        )
        edges.append(
            {
                "id": rel.id,
                "source": rel.source,
                "target": rel.target,
                "type": rel.type,
                "description": rel.description,
                "document": row.doc_id if row is not None else rel.source_doc,
                "document_name": row.name if row is not None else rel.source_doc,
                "page": page,
                "page_text": format_pages(
                    page, page, payload.page_label_start if payload is not None else ""
                ),
                "chunk_id": rel.chunk_id,
                "citation": links.page(pdf_key, page),
            }
        )
    nodes = [
        {
            "key": key,
            "name": entity.name,
            "type": entity.type,
            "description": entity.description,
            "degree": degrees.get(key, 0),
        }
        for key, entity in entities.items()
    ]
    return {
        "nodes": nodes,
        "edges": edges,
        "truncated": total_edges > len(shown),
        "total": {"nodes": total_nodes, "edges": total_edges},
        "shown": {"nodes": len(nodes), "edges": len(edges)},
        "limit": query.limit,
        "query": {
            "doc": doc_id,
            "entity_type": query.entity_type,
            "relationship_type": query.relationship_type,
            "seed": query.seed,
            "depth": query.depth if query.seed is not None else None,
        },
        "documents": [
            {"doc_id": row.doc_id, "name": row.name, "title": row.title or row.name}
            for row in sorted(ready, key=lambda row: row.name.casefold())
        ],
    }
