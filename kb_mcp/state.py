"""What the server holds open for its whole life: read-only views of the stores, and the models.

``open_state(settings)`` opens them through ``kb_shared`` only (the factories decide which
backend is live); the MCP lifespan calls it once and ``ServerState.close`` releases everything
in ``finally``. Constructors of the kb stores do no I/O, so a store that is down does not stop
the server from starting: the first tool that needs it returns an ``isError`` result instead.

Read-only by construction and by type: the catalog is opened on
``settings.resolved_reader_database_url`` (on Postgres the ``kb_reader`` role, which may only
SELECT, see ``sql/003_reader_role.sql``) without creating its schema, the SQL graph shares that
engine, the vector index is opened with ``create=False``, and ``ServerState`` holds them as the
reader Protocols of ``kb_shared.stores.readers`` (no write method is reachable through it).
The only writes are the two intake queues, held as the narrow ``RequestQueue`` and
``ReferenceQueue`` (the same catalog connection; on Postgres ``kb_reader`` may insert requests
and count repeats only).
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kb_mcp.errors import ToolProblem
from kb_shared.search.acronyms import AcronymCache, AcronymTable, acronyms_enabled, load_table
from kb_shared.errors import EmptyCorpusError, StoreError
from kb_shared.providers import factory as providers
from kb_shared.providers.base import Embedder, FusionOrderReranker, Provider, Reranker
from kb_shared.settings import Settings
from kb_shared.stores import factory as stores
from kb_shared.stores.blobs import BlobStore
from kb_shared.stores.catalog import ServingState
from kb_shared.stores.readers import (
    CatalogReader,
    GraphReader,
    ReferenceQueue,
    RequestQueue,
    VectorReader,
)

log = logging.getLogger(__name__)

#: Generation 0's collection threshold in a serving process (CPython's default is 700): a
#: search_docs call allocates a few hundred container objects that outlive it briefly, so at
#: 700 a young collection ran on most calls
#: (benchmarks/results/serving-2026-12-02-latency-round5.md).
YOUNG_THRESHOLD = 10_000

#: The interpreter's thread switch interval in a serving process, in seconds (CPython's
#: default is 0.005): the thread embedding a query needs the GIL back for a moment after
#: onnxruntime returns, and while the calling thread runs Python it waited up to the whole
#: interval for it (benchmarks/results/serving-2026-12-02-latency-round6.md).
SWITCH_INTERVAL = 0.0005


def open_vector_reader(settings: Settings, embedder: Embedder) -> VectorReader:
    """Open the vector index read-only for ``embedder``'s model and dimension.

    Raises:
        EmptyCorpusError: no index exists yet (nothing was ever embedded).
        EmbeddingMismatchError: the index was built with another model or dimension.
        StoreUnavailableError: the index cannot be reached.
    """
    index = stores.open_vector_index(settings)
    try:
        if index.describe() is None:
            raise EmptyCorpusError("no vector index exists yet")
        index.open(embedder.model, embedder.dimension, create=False)
    except BaseException:
        index.close()
        raise
    return index


@dataclass
class ServerState:
    """The stores and models every tool reads, opened once per server process.

    Attributes:
        settings: the settings the server was started with.
        catalog: documents and their status (reader connection).
        blobs: stored PDFs and figure PNGs.
        graph: entities and relationships.
        embedder: the live embedding model (queries use its query-side convention).
        reranker: the rerank provider (``FusionOrderReranker`` offline: fusion order stands).
        open_index: opens the vector index read-only (``open_vector_reader``).
        requests: the document-request queue (``request_document``), on the catalog's
            connection.
        references: the reference-page queue (``add_reference``), on the same connection.
        owned: the providers this state created and so closes (not injected ones).
    """

    settings: Settings
    catalog: CatalogReader
    blobs: BlobStore
    graph: GraphReader
    embedder: Embedder
    reranker: Reranker
    open_index: Callable[[], VectorReader]
    requests: RequestQueue
    references: ReferenceQueue
    owned: tuple[Provider, ...] = ()
    _index: VectorReader | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _acronyms: AcronymCache = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._acronyms = AcronymCache(lambda: load_table(self.graph))

    def acronyms(self, states: Sequence[ServingState] | None = None) -> AcronymTable | None:
        """The graph's abbreviation pairs for search_docs (``kb_shared.search.acronyms``), or ``None``
        when ``ACRONYM_EXPANSION`` is off or the catalog or graph cannot be read (the search
        then runs without them; logged).

        Loaded once and again only when the catalog's serving states change (``states``, the
        ones the caller read for its search scope, else one catalog query): a version's edges
        are written before ``record`` makes it the serving one and deleted with it, so a
        change of the served graph is a change of those rows (a forced re-extraction of the
        served version in place is not).
        """
        if not acronyms_enabled():
            return None
        try:
            if states is None:
                states = self.catalog.serving_states()
            # plain tuples: compared in C, where the dataclasses' __eq__ is a Python call each
            signal = tuple((s.doc_id, s.status, s.versions, s.serving) for s in states)
            return self._acronyms.get(signal)
        except StoreError as error:
            log.info("acronym pairs not loaded: %s", error)
            return None

    def vectors(self) -> VectorReader:
        """The vector index, opened for the live embedder's model and dimension.

        Opened on first use and kept; while no index exists yet the check is repeated on
        every call, so documents built after the server started are found without a restart.

        Raises:
            EmptyCorpusError: no index exists yet.
            EmbeddingMismatchError: the index was built with another model or dimension.
            StoreUnavailableError: the index cannot be reached.
        """
        with self._lock:
            if self._index is None:
                self._index = self.open_index()
            return self._index

    def warm(self) -> None:
        """Load the embedding model's weights and the acronym pairs (``acronyms``) now, and let
        one keyword and one meaning search load the vector index's in-memory copies
        (``SqliteVectorIndex``: the sparse postings, the dense codes; seconds at 100k points,
        benchmarks/results/sparse-resident-2026-12-02.md), so the first query pays for
        neither. An index that is missing, unreachable or built with another model is left to
        the tools to report.

        Raises:
            EmbeddingError: the embedding model cannot be loaded.
        """
        self.embedder.warm()
        self.acronyms()
        try:
            index = self.vectors()
            index.sparse_search("warm", 1)
            index.dense_search(self.embedder.embed_query("warm"), 1)
        except (EmptyCorpusError, StoreError) as error:
            log.info("vector index not warmed: %s", error)

    def close(self) -> None:
        """Close the vector index, the graph store, the catalog and the providers this state
        created (safe twice; a failure to close one is logged and the rest still close)."""
        with self._lock:
            index, self._index = self._index, None
        closers: list[Callable[[], None]] = [self.graph.close, self.catalog.close]
        if index is not None:
            closers.insert(0, index.close)
        closers += [provider.close for provider in self.owned]
        for closer in closers:
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
        use_reranker: ``False`` forces fusion order (``FusionOrderReranker``) even when a
            rerank key is set.

    Raises:
        ProviderError: a provider is forced to ``cloud`` without its key.
    """
    catalog = stores.open_catalog(settings, reader=True)
    graph = stores.open_graph_store(settings, engine=catalog.engine, read_only=True)
    owned: list[Provider] = []
    if embedder is None:
        embedder = providers.embedder(settings)
        owned.append(embedder)
    if not use_reranker:
        reranker = FusionOrderReranker()
    elif reranker is None:
        reranker = providers.reranker(settings)
        owned.append(reranker)
    live = embedder
    return ServerState(
        settings=settings,
        catalog=catalog,
        blobs=stores.open_blob_store(settings),
        graph=graph,
        embedder=live,
        reranker=reranker,
        open_index=lambda: open_vector_reader(settings, live),
        requests=catalog,
        references=catalog,
        owned=tuple(owned),
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


def settle_interpreter() -> None:
    """Prepare the interpreter for serving, once start-up is done.

    The garbage collector: collect, move every object then alive to the permanent generation
    (``gc.freeze``: imported modules, the models, the in-memory index copies are never
    scanned again) and raise generation 0's threshold to ``YOUNG_THRESHOLD``. Without it a
    full collection over the start-up heap stopped a call for 100-200 ms every few hundred
    calls (benchmarks/results/serving-2026-12-02-latency-round5.md); objects created later (a
    reloaded index copy) are collected as usual. The thread switch interval:
    ``SWITCH_INTERVAL``. Both are process-wide.
    """
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    sys.setswitchinterval(SWITCH_INTERVAL)
