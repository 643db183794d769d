"""What the server holds open for its whole life: the stores (read side) and the models.

``open_state(settings)`` opens them through ``kb_shared`` only (the factories decide which
backend is live); the MCP lifespan calls it once and ``ServerState.close`` releases everything
in ``finally``. Constructors of the kb stores do no I/O, so a store that is down does not stop
the server from starting: the first tool that needs it returns an ``isError`` result instead.

Read-only by construction: the catalog is opened on ``settings.resolved_reader_database_url``
(on Postgres the ``kb_reader`` role, which may only SELECT, see ``sql/003_reader_role.sql``)
without creating its schema, the SQL graph shares that engine, and the vector index is opened
with ``create=False``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from kb_mcp.errors import ADD_DOCUMENTS_HINT, ToolProblem
from kb_shared.providers import factory as providers
from kb_shared.providers.base import Embedder, Reranker
from kb_shared.settings import Settings
from kb_shared.stores import factory as stores
from kb_shared.stores.blobs import BlobStore
from kb_shared.stores.catalog import Catalog
from kb_shared.stores.graph import GraphStore
from kb_shared.stores.vectors import VectorIndex

log = logging.getLogger(__name__)

#: Message of every search over a corpus that has no vector index (or an empty one) yet.
EMPTY_CORPUS = (
    "The corpus is empty: no document has been indexed yet, so there is nothing to search. "
    + ADD_DOCUMENTS_HINT
)


@dataclass
class ServerState:
    """The stores and models every tool reads, opened once per server process.

    Attributes:
        settings: the settings the server was started with.
        catalog: documents and their status (reader connection).
        blobs: stored PDFs and figure PNGs.
        graph: entities and relationships.
        embedder: the live embedding model (queries use its query-side convention).
        reranker: the rerank provider, or ``None`` offline (fusion order stands).
        open_index: builds an unopened ``VectorIndex`` (``stores.open_vector_index``).
    """

    settings: Settings
    catalog: Catalog
    blobs: BlobStore
    graph: GraphStore
    embedder: Embedder
    reranker: Reranker | None
    open_index: Callable[[], VectorIndex]
    _index: VectorIndex | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def vectors(self) -> VectorIndex:
        """The vector index, opened for the live embedder's model and dimension.

        Opened on first use and kept; while no index exists yet the check is repeated on
        every call, so documents built after the server started are found without a restart.

        Raises:
            ToolProblem: no index exists yet (the corpus is empty).
            EmbeddingMismatchError: the index was built with another model or dimension.
            StoreUnavailableError: the index cannot be reached.
        """
        with self._lock:
            if self._index is not None:
                return self._index
            index = self.open_index()
            try:
                if index.describe() is None:
                    raise ToolProblem(EMPTY_CORPUS)
                index.open(self.embedder.model, self.embedder.dimension, create=False)
            except BaseException:
                index.close()
                raise
            self._index = index
            return index

    def close(self) -> None:
        """Close the vector index, the graph store and the catalog engine (safe twice)."""
        with self._lock:
            index, self._index = self._index, None
        for closer in (
            index.close if index is not None else None,
            self.graph.close,
            self.catalog.engine.dispose,
        ):
            if closer is None:
                continue
            try:
                closer()
            except Exception:  # closing must not hide the error that ended the server
                log.warning("closing %r failed", closer, exc_info=True)


def open_state(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    use_reranker: bool = True,
) -> ServerState:
    """Open the read side of every store and choose the models, from ``settings`` alone.

    Args:
        settings: where the stores live and which providers are chosen.
        embedder: an embedder to use instead of ``providers.embedder(settings)`` (tests share
            one loaded model between servers; it must be the model the index was built with).
        reranker: a reranker to use instead of ``providers.reranker(settings)``.
        use_reranker: ``False`` forces fusion order even when a rerank key is set.

    Raises:
        ProviderError: a provider is forced to ``cloud`` without its key.
    """
    catalog = stores.open_catalog(settings, reader=True)
    graph = stores.open_graph_store(settings, engine=catalog.engine)
    return ServerState(
        settings=settings,
        catalog=catalog,
        blobs=stores.open_blob_store(settings),
        graph=graph,
        embedder=embedder if embedder is not None else providers.embedder(settings),
        reranker=(reranker or providers.reranker(settings)) if use_reranker else None,
        open_index=lambda: stores.open_vector_index(settings),
    )


class StateHolder:
    """A box for the live ``ServerState``, filled by the lifespan and read by the parts of the
    server that get no MCP ``Context``: the static resource ``kb://documents`` (mcp 2.3 refuses
    Context injection into static resources) and the HTTP routes ``/files`` and ``/healthz``.
    """

    def __init__(self) -> None:
        self._state: ServerState | None = None

    def set(self, state: ServerState | None) -> None:
        """Publish (or, with ``None``, withdraw) the live state."""
        self._state = state

    @property
    def state(self) -> ServerState:
        """The live state.

        Raises:
            ToolProblem: the server is starting or stopping (no state is open).
        """
        if self._state is None:
            raise ToolProblem("the server is starting or stopping; retry in a moment")
        return self._state

    @property
    def ready(self) -> bool:
        """True while a state is open."""
        return self._state is not None
