"""The production vector index: one Qdrant collection with a dense and a sparse named vector.

Layout of the collection:

* named dense vector ``"dense"`` (``Distance.COSINE``; Qdrant normalises on insert, so a
  score is the cosine similarity) and named sparse vector ``"sparse"`` with
  ``Modifier.IDF`` (Qdrant multiplies each query term by its inverse document frequency
  over the collection, so our ``kb_shared.search.sparse.sparse_vector`` only carries BM25 tf
  weights);
* point id ``kb_shared.identity.point_uuid(id)`` (Qdrant ids must be integers or UUIDs);
  the payload holds ``{"id", "document", "kind", "text", "payload"}`` — the string id, the
  filter fields, the text and the caller's payload nested under ``"payload"`` so its keys
  can never shadow ours;
* the embedding model and dimension in the *collection metadata*
  (``{"kb_model": …, "kb_dimension": …}``, ``create_collection(metadata=…)``, supported by
  qdrant-client 1.20 in server and local mode), so no reserved point has to be hidden from
  counts and searches;
* keyword payload indexes on ``document`` and ``kind`` on a server (local mode ignores
  payload indexes and warns, so they are not created there).

Hybrid search is the ABC's own reciprocal rank fusion over ``dense_search`` and
``sparse_search``; Qdrant's server-side fusion is not used, so both backends rank alike.

Atomicity: every point is validated before anything is sent, so bad input writes nothing.
A batch above ``UPSERT_BATCH`` points is sent as several requests; if the server fails in
between, earlier batches stay written. Upsert is idempotent, so retrying the same call
converges to the intended state.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from kb_shared.errors import StoreError, StoreUnavailableError
from kb_shared.identity import point_uuid
from kb_shared.search.sparse import sparse_vector
from kb_shared.stores.vectors import (
    CheckedPoint,
    CollectionInfo,
    Filters,
    Hit,
    Point,
    StoredPoint,
    VectorIndex,
    check_points,
)

DENSE = "dense"
SPARSE = "sparse"
MODEL_KEY = "kb_model"
DIMENSION_KEY = "kb_dimension"

#: Points per upsert request (keeps one request well under Qdrant's default 32 MiB limit
#: for 1536-d vectors with chunk text).
UPSERT_BATCH = 256
#: Points per scroll page when listing ids.
SCROLL_PAGE = 1024
#: Extra points a sparse search asks for, so ties at the ``limit``-th score can be ordered
#: by id (``QdrantVectorIndex._sparse_search``).
TIE_MARGIN = 8


class QdrantVectorIndex(VectorIndex):
    """``VectorIndex`` over one Qdrant collection.

    Args:
        client: a ready ``QdrantClient`` (server URL, or ``":memory:"`` in tests). ``close``
            closes it (``kb_shared.stores.factory`` builds one client per index).
        collection: the collection name (``Settings.qdrant_collection``).

    The constructor does no I/O. Errors: ``StoreUnavailableError`` (naming the URL) when the
    server cannot be reached or rejects the credentials; ``StoreError`` for other server
    refusals and use before ``open``; ``ValueError`` for bad input (nothing is sent).
    """

    def __init__(self, client: QdrantClient, collection: str) -> None:
        if not collection:
            raise ValueError("the Qdrant collection name cannot be empty")
        self.client = client
        self.collection = collection
        self.info = None
        options = getattr(client, "init_options", {}) or {}
        self._local = bool(options.get("location") == ":memory:" or options.get("path"))
        self._where = str(
            options.get("url")
            or options.get("host")
            or options.get("path")
            or options.get("location")
            or "the configured Qdrant"
        )
        self.label = f"Qdrant collection {collection!r} at {self._where}"
        self.location = f"{self._where} / {collection}"

    @contextmanager
    def _calls(self, action: str) -> Iterator[None]:
        """Turn client failures into ``StoreUnavailableError``/``StoreError`` naming the URL."""
        try:
            yield
        except ResponseHandlingException as exc:
            raise StoreUnavailableError(
                f"Qdrant at {self._where} is unreachable while {action}: {exc}. "
                "Check KB_QDRANT_URL and that the server is running."
            ) from exc
        except UnexpectedResponse as exc:
            if exc.status_code in (401, 403):
                raise StoreUnavailableError(
                    f"Qdrant at {self._where} refused the credentials while {action} "
                    f"(HTTP {exc.status_code}); check KB_QDRANT_API_KEY."
                ) from exc
            if exc.status_code is not None and exc.status_code >= 500:
                raise StoreUnavailableError(
                    f"Qdrant at {self._where} failed while {action} (HTTP {exc.status_code}): {exc}"
                ) from exc
            raise StoreError(f"Qdrant at {self._where} refused {action}: {exc}") from exc
        except Exception as exc:  # grpc.RpcError when the client prefers gRPC
            if type(exc).__module__.startswith("grpc"):
                raise StoreUnavailableError(
                    f"Qdrant at {self._where} failed while {action} (gRPC): {exc}"
                ) from exc
            raise

    def close(self) -> None:
        """Close the Qdrant client. Safe to call twice."""
        self.client.close()

    # -- collection ----------------------------------------------------------------------

    def describe(self) -> CollectionInfo | None:
        """The recorded model and dimension, or ``None`` when the collection does not exist.

        Raises:
            StoreError: the collection exists but records no kb model (not made by kb).
        """
        with self._calls(f"reading collection {self.collection!r}"):
            if not self.client.collection_exists(self.collection):
                return None
            config = self.client.get_collection(self.collection).config
        metadata = config.metadata or {}
        if MODEL_KEY not in metadata or DIMENSION_KEY not in metadata:
            raise StoreError(
                f"Qdrant collection {self.collection!r} at {self._where} records no embedding "
                "model; it was not created by kb. Choose another KB_QDRANT_COLLECTION or "
                "delete it and re-embed."
            )
        return CollectionInfo(
            model=str(metadata[MODEL_KEY]), dimension=int(metadata[DIMENSION_KEY])
        )

    def _create(self, model: str, dimension: int) -> CollectionInfo:
        """Create the collection with its payload indexes (on a server) and return what it
        records; a collection another process created meanwhile is used as it is."""
        with self._calls(f"creating collection {self.collection!r}"):
            try:
                self.client.create_collection(
                    self.collection,
                    vectors_config={
                        DENSE: models.VectorParams(size=dimension, distance=models.Distance.COSINE)
                    },
                    sparse_vectors_config={
                        SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)
                    },
                    metadata={MODEL_KEY: model, DIMENSION_KEY: dimension},
                )
            except (UnexpectedResponse, ValueError):
                # another process created it between our check and our create: use theirs
                if not self.client.collection_exists(self.collection):
                    raise
            else:
                if not self._local:
                    for field in ("document", "kind"):
                        self.client.create_payload_index(
                            self.collection, field, models.PayloadSchemaType.KEYWORD
                        )
        recorded = self.describe()
        assert recorded is not None
        return recorded

    def drop(self) -> bool:
        """Delete the Qdrant collection. Returns whether it existed."""
        self.info = None
        with self._calls(f"deleting collection {self.collection!r}"):
            if not self.client.collection_exists(self.collection):
                return False
            self.client.delete_collection(self.collection)
        return True

    # -- writes --------------------------------------------------------------------------

    def upsert(self, points: Sequence[Point]) -> int:
        """``VectorIndex.upsert``: every point is checked before the first request, then
        sent in requests of ``UPSERT_BATCH`` points (see the module docstring on atomicity)."""
        info = self._require_open()
        structs = [_struct(checked) for checked in check_points(points, info.dimension)]
        with self._calls(f"upserting {len(structs)} points into {self.collection!r}"):
            for start in range(0, len(structs), UPSERT_BATCH):
                self.client.upsert(
                    self.collection, points=structs[start : start + UPSERT_BATCH], wait=True
                )
        return len(structs)

    def _delete_ids(self, ids: list[str]) -> int:
        """Delete the stored ones of ``ids``; returns how many were stored."""
        uuids = [str(point_uuid(i)) for i in ids]
        with self._calls(f"deleting {len(uuids)} ids from {self.collection!r}"):
            present = [
                record.id
                for record in self.client.retrieve(
                    self.collection, ids=uuids, with_payload=False, with_vectors=False
                )
            ]
            if present:
                self.client.delete(
                    self.collection,
                    points_selector=models.PointIdsList(points=present),
                    wait=True,
                )
        return len(present)

    def _delete_document(self, document: str) -> int:
        """Delete every point of ``document``; returns how many (0 if none)."""
        selector = _filter(document=document)
        with self._calls(f"deleting document {document!r} from {self.collection!r}"):
            found = self.client.count(self.collection, count_filter=selector, exact=True).count
            if found:
                self.client.delete(
                    self.collection,
                    points_selector=models.FilterSelector(filter=selector),
                    wait=True,
                )
        return found

    # -- reads ---------------------------------------------------------------------------

    def _fetch(self, ids: Sequence[str]) -> list[StoredPoint]:
        """Stored points for ``ids`` in the order asked; unknown ids are skipped."""
        uuids = [str(point_uuid(i)) for i in ids]
        with self._calls(f"fetching {len(uuids)} points from {self.collection!r}"):
            records = self.client.retrieve(
                self.collection, ids=list(dict.fromkeys(uuids)), with_payload=True
            )
        by_uuid = {str(record.id): _stored(record.payload) for record in records}
        return [by_uuid[u] for u in uuids if u in by_uuid]

    def _count(self, document: str | None, kind: str | None) -> int:
        """Number of points, optionally of one document and/or one kind (exact count)."""
        selector = _filter(document=document, kind=kind)
        with self._calls(f"counting points in {self.collection!r}"):
            return self.client.count(self.collection, count_filter=selector, exact=True).count

    def _list_ids(self, document: str | None, kind: str | None) -> list[str]:
        """Point ids sorted ascending, optionally of one document and/or one kind."""
        selector = _filter(document=document, kind=kind)
        ids: list[str] = []
        offset: Any = None
        with self._calls(f"listing ids in {self.collection!r}"):
            while True:
                records, offset = self.client.scroll(
                    self.collection,
                    scroll_filter=selector,
                    limit=SCROLL_PAGE,
                    offset=offset,
                    with_payload=["id"],
                    with_vectors=False,
                )
                ids.extend(record.payload["id"] for record in records)
                if offset is None:
                    break
        return sorted(ids)

    def _dense_search(self, query: np.ndarray, limit: int, filters: Filters) -> list[Hit]:
        """The ``limit`` nearest points passing ``filters``; ``Hit.score`` = cosine."""
        with self._calls(f"dense search in {self.collection!r}"):
            response = self.client.query_points(
                self.collection,
                query=query.tolist(),
                using=DENSE,
                query_filter=_any_filter(filters),
                limit=limit,
                with_payload=True,
            )
        return _hits(response.points)

    def _sparse_search(self, text: str, limit: int, filters: Filters) -> list[Hit]:
        """Best points by IDF-weighted dot product of sparse vectors, ties by id; ``[]`` for
        no terms.

        Qdrant orders equal scores by storage position, so more than ``limit`` points are
        asked for until the lowest score returned is below the ``limit``-th (every point tied
        with it is then in hand) or the collection has no more matches.
        """
        indices, values = sparse_vector(text)
        if not indices:
            return []
        asked = limit + TIE_MARGIN
        while True:
            with self._calls(f"sparse search in {self.collection!r}"):
                response = self.client.query_points(
                    self.collection,
                    query=models.SparseVector(indices=indices, values=values),
                    using=SPARSE,
                    query_filter=_any_filter(filters),
                    limit=asked,
                    with_payload=True,
                )
            hits = sorted(_hits(response.points), key=lambda h: (-h.score, h.id))
            if len(hits) < asked or hits[-1].score < hits[limit - 1].score:
                return hits[:limit]
            asked *= 2


def _struct(checked: CheckedPoint) -> models.PointStruct:
    """The Qdrant point of a checked point: uuid id, both named vectors, our payload."""
    point = checked.point
    indices, values = sparse_vector(point.terms_source)
    return models.PointStruct(
        id=str(point_uuid(point.id)),
        vector={
            DENSE: checked.dense.tolist(),
            SPARSE: models.SparseVector(indices=indices, values=values),
        },
        payload={
            "id": point.id,
            "document": point.document,
            "kind": point.kind,
            "text": point.text,
            # a JSON round-trip copy: what a reader gets back, same as SQLite
            "payload": json.loads(checked.payload),
        },
    )


def _stored(payload: Mapping[str, Any] | None) -> StoredPoint:
    data = payload or {}
    return StoredPoint(
        id=data["id"],
        document=data["document"],
        kind=data["kind"],
        text=data["text"],
        payload=dict(data.get("payload") or {}),
    )


def _hits(points: Sequence[models.ScoredPoint]) -> list[Hit]:
    return [Hit(point=_stored(p.payload), score=float(p.score)) for p in points]


def _filter(document: str | None = None, kind: str | None = None) -> models.Filter | None:
    must = [
        models.FieldCondition(key=key, match=models.MatchValue(value=value))
        for key, value in (("document", document), ("kind", kind))
        if value is not None
    ]
    return models.Filter(must=must) if must else None


def _any_filter(filters: Filters) -> models.Filter | None:
    """A ``MatchAny`` filter of checked ``filters``; ``None`` = no filter."""
    must: list[models.Condition] = [
        models.FieldCondition(key=key, match=models.MatchAny(any=values)) for key, values in filters
    ]
    return models.Filter(must=must) if must else None
