"""The production vector index: one Qdrant collection with a dense and a sparse named vector.

Layout of the collection:

* named dense vector ``"dense"`` (``Distance.COSINE``; Qdrant normalises on insert, so a
  score is the cosine similarity) and named sparse vector ``"sparse"`` with
  ``Modifier.IDF`` (Qdrant multiplies each query term by its inverse document frequency
  over the collection, so our ``kb_shared.sparse.sparse_vector`` only carries BM25 tf
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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from kb_shared.errors import StoreError, StoreUnavailableError
from kb_shared.identity import point_uuid
from kb_shared.sparse import sparse_vector
from kb_shared.stores.vectors import (
    CollectionInfo,
    Hit,
    Point,
    StoredPoint,
    VectorIndex,
    as_unit_vector,
    check_collection,
    check_filters,
    check_kind,
    check_open_args,
    check_point,
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

    def open(self, model: str, dimension: int, *, create: bool = True) -> CollectionInfo:
        """Create the collection for ``model``/``dimension`` or check the recorded ones.

        Raises:
            ValueError: empty ``model`` or ``dimension`` < 1.
            EmbeddingMismatchError: the collection records another model or dimension.
            StoreError: the collection does not exist and ``create`` is false.
        """
        dimension = check_open_args(model, dimension)
        recorded = self.describe()
        if recorded is None:
            if not create:
                raise StoreError(
                    f"no Qdrant collection {self.collection!r} at {self._where}; build it "
                    "first (materialise the embeddings asset)"
                )
            self._create(model, dimension)
            recorded = self.describe()
            assert recorded is not None
        check_collection(recorded, model, dimension, f"{self._where} / {self.collection}")
        self.info = recorded
        return recorded

    def _create(self, model: str, dimension: int) -> None:
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
                return
            if not self._local:
                for field in ("document", "kind"):
                    self.client.create_payload_index(
                        self.collection, field, models.PayloadSchemaType.KEYWORD
                    )

    def drop(self) -> bool:
        """Delete the Qdrant collection. Returns whether it existed."""
        self.info = None
        with self._calls(f"deleting collection {self.collection!r}"):
            if not self.client.collection_exists(self.collection):
                return False
            self.client.delete_collection(self.collection)
        return True

    def _require_open(self) -> CollectionInfo:
        if self.info is None:
            raise StoreError(
                f"Qdrant collection {self.collection!r} used before open(model, dimension)"
            )
        return self.info

    # -- writes --------------------------------------------------------------------------

    def upsert(self, points: Sequence[Point]) -> int:
        """Insert or replace ``points`` by id (dense vector, sparse vector and payload).

        Every point is validated before any request; the last of repeated ids wins.

        Returns:
            The number of distinct ids written.

        Raises:
            ValueError: a vector of the wrong length or zero/non-finite, an unknown kind, an
                empty id or document, or a payload that is not JSON-serialisable.
        """
        info = self._require_open()
        structs = _prepare(points, info.dimension)
        with self._calls(f"upserting {len(structs)} points into {self.collection!r}"):
            for start in range(0, len(structs), UPSERT_BATCH):
                self.client.upsert(
                    self.collection, points=structs[start : start + UPSERT_BATCH], wait=True
                )
        return len(structs)

    def delete_ids(self, ids: Iterable[str]) -> int:
        """Delete points by id; unknown ids are ignored. Returns how many were stored."""
        self._require_open()
        uuids = [str(point_uuid(i)) for i in dict.fromkeys(ids)]
        if not uuids:
            return 0
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

    def delete_document(self, document: str) -> int:
        """Delete every point of ``document``; returns how many (0 if none)."""
        self._require_open()
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

    def fetch(self, ids: Sequence[str]) -> list[StoredPoint]:
        """Stored points for ``ids`` in the order asked; unknown ids are skipped."""
        self._require_open()
        if not ids:
            return []
        uuids = [str(point_uuid(i)) for i in ids]
        with self._calls(f"fetching {len(uuids)} points from {self.collection!r}"):
            records = self.client.retrieve(
                self.collection, ids=list(dict.fromkeys(uuids)), with_payload=True
            )
        by_uuid = {str(record.id): _stored(record.payload) for record in records}
        return [by_uuid[u] for u in uuids if u in by_uuid]

    def count(self, document: str | None = None, kind: str | None = None) -> int:
        """Number of points, optionally of one document and/or one kind (exact count)."""
        self._require_open()
        selector = _filter(document=document, kind=None if kind is None else check_kind(kind))
        with self._calls(f"counting points in {self.collection!r}"):
            return self.client.count(self.collection, count_filter=selector, exact=True).count

    def list_ids(self, document: str | None = None, kind: str | None = None) -> list[str]:
        """Point ids sorted ascending, optionally of one document and/or one kind."""
        self._require_open()
        selector = _filter(document=document, kind=None if kind is None else check_kind(kind))
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

    def dense_search(
        self,
        vector: Sequence[float] | np.ndarray,
        limit: int,
        documents: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
    ) -> list[Hit]:
        """The ``limit`` nearest points passing the filters; ``Hit.score`` = cosine similarity.

        Raises:
            ValueError: a vector of the wrong length, or an unknown kind in ``kinds``.
        """
        info = self._require_open()
        query = as_unit_vector(vector, info.dimension)
        selector = _any_filter(documents, kinds)
        if limit <= 0 or selector is False:
            return []
        with self._calls(f"dense search in {self.collection!r}"):
            response = self.client.query_points(
                self.collection,
                query=query.tolist(),
                using=DENSE,
                query_filter=selector or None,
                limit=limit,
                with_payload=True,
            )
        return _hits(response.points)

    def sparse_search(
        self,
        text: str,
        limit: int,
        documents: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
    ) -> list[Hit]:
        """Best points by IDF-weighted dot product of sparse vectors; ``[]`` for no terms.

        Raises:
            ValueError: an unknown kind in ``kinds``.
        """
        self._require_open()
        selector = _any_filter(documents, kinds)
        indices, values = sparse_vector(text)
        if limit <= 0 or selector is False or not indices:
            return []
        with self._calls(f"sparse search in {self.collection!r}"):
            response = self.client.query_points(
                self.collection,
                query=models.SparseVector(indices=indices, values=values),
                using=SPARSE,
                query_filter=selector or None,
                limit=limit,
                with_payload=True,
            )
        return _hits(response.points)


def _prepare(points: Sequence[Point], dimension: int) -> list[models.PointStruct]:
    """Validate every point (raising before any request); the last of repeated ids wins."""
    structs: dict[str, models.PointStruct] = {}
    for point in points:
        dense, payload = check_point(point, dimension)
        indices, values = sparse_vector(point.terms_source)
        structs.pop(point.id, None)
        structs[point.id] = models.PointStruct(
            id=str(point_uuid(point.id)),
            vector={
                DENSE: dense.tolist(),
                SPARSE: models.SparseVector(indices=indices, values=values),
            },
            payload={
                "id": point.id,
                "document": point.document,
                "kind": point.kind,
                "text": point.text,
                # a JSON round-trip copy: what a reader gets back, same as SQLite
                "payload": json.loads(payload),
            },
        )
    return list(structs.values())


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


def _any_filter(
    documents: Sequence[str] | None, kinds: Sequence[str] | None
) -> models.Filter | None | bool:
    """A ``MatchAny`` filter; ``None`` = no filter; ``False`` = an empty filter (no hits)."""
    filters = check_filters(documents, kinds)
    if filters is None:
        return False
    must: list[models.Condition] = [
        models.FieldCondition(key=key, match=models.MatchAny(any=values)) for key, values in filters
    ]
    return models.Filter(must=must) if must else None
