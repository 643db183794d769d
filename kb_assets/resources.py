"""Dagster resources: thin wrappers over the ``kb_shared`` store and provider factories.

Settings are read on first use, never at import, and every client is created on first use
(``SettingsResource``) and, for the stores, closed when the run ends. Tests swap a resource
for one built with ``home=``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import dagster as dg
from pydantic import PrivateAttr

from kb_shared.providers import factory as provider_factory
from kb_shared.providers.base import (
    Contextualiser,
    Embedder,
    FigureLocator,
    GraphExtractor,
    MarkdownConverter,
)
from kb_shared.settings import Settings
from kb_shared.stores import factory as store_factory
from kb_shared.stores.blobs import BlobStore
from kb_shared.stores.catalog import Catalog
from kb_shared.stores.graph import GraphStore
from kb_shared.stores.vectors import VectorIndex


def load_settings(home: str | None) -> Settings:
    """``Settings()`` from the environment, with ``home`` overriding ``KB_HOME`` when given."""
    return Settings(home=home) if home else Settings()


T = TypeVar("T")


class SettingsResource(dg.ConfigurableResource):
    """What both resources share: settings built once per run and clients built on first use.

    Attributes:
        home: overrides ``KB_HOME`` (tests); ``None`` = environment.
    """

    home: str | None = None

    _settings: Settings | None = PrivateAttr(default=None)
    _cache: dict[str, Any] = PrivateAttr(default_factory=dict)

    @property
    def settings(self) -> Settings:
        """Settings for this run (built once)."""
        if self._settings is None:
            self._settings = load_settings(self.home)
        return self._settings

    def _cached(self, name: str, build: Callable[[Settings], T]) -> T:
        """``build(settings)`` the first time ``name`` is asked for, the same object after."""
        if name not in self._cache:
            self._cache[name] = build(self.settings)
        return self._cache[name]


class StoresResource(SettingsResource):
    """The four stores of DESIGN.md ("Stores and their backends"), chosen by settings.

    Attributes:
        home: overrides ``KB_HOME`` (tests); ``None`` = environment.
    """

    def catalog(self) -> Catalog:
        """The catalog (schema ensured on first use)."""
        return self._cached("catalog", store_factory.open_catalog)

    def blobs(self) -> BlobStore:
        """The blob store."""
        return self._cached("blobs", store_factory.open_blob_store)

    def vectors(self, model: str, dimension: int) -> VectorIndex:
        """The vector index opened for ``model``/``dimension``.

        Raises:
            EmbeddingMismatchError: the index holds another model's vectors.
        """
        index = self._cached("vectors", store_factory.open_vector_index)
        if index.info is None or (index.info.model, index.info.dimension) != (model, dimension):
            index.open(model, dimension)
        return index

    def existing_vectors(self) -> VectorIndex | None:
        """The vector index opened with whatever model it records, or ``None`` if none exists
        (used by deletes and checks, which must not create or re-key an index)."""
        index = self._cached("vectors", store_factory.open_vector_index)
        if index.info is None:
            recorded = index.describe()
            if recorded is None:
                return None
            index.open(recorded.model, recorded.dimension, create=False)
        return index

    def drop_vectors(self) -> bool:
        """Drop the whole vector index (every point and its recorded model), for switching
        embedding models. Returns whether there was one."""
        index = self._cached("vectors", store_factory.open_vector_index)
        return index.drop()

    def graph(self) -> GraphStore:
        """The graph store (schema ensured on first use by the caller with a dimension)."""
        return self._cached(
            "graph",
            lambda settings: store_factory.open_graph_store(settings, self.catalog().engine),
        )

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        """Close every client opened during the run."""
        self.close()

    def close(self) -> None:
        """Close every client opened so far (safe to call twice)."""
        for client in reversed(list(self._cache.values())):
            close = getattr(client, "close", None)
            if close is not None:
                close()
        self._cache.clear()


class ProvidersResource(SettingsResource):
    """The model providers of DESIGN.md ("Providers"), local unless a key is set.

    Attributes:
        home: overrides ``KB_HOME`` (tests); ``None`` = environment.
    """

    def converter(self) -> MarkdownConverter:
        """PDF → Markdown converter."""
        return self._cached("converter", provider_factory.markdown_converter)

    def embedder(self) -> Embedder:
        """Dense embedder (chunks, figures, entity names, queries share it)."""
        return self._cached("embedder", provider_factory.embedder)

    def contextualiser(self) -> Contextualiser | None:
        """Per-chunk context provider, or ``None`` offline (heading path only)."""
        return self._cached("contextualiser", provider_factory.contextualiser)

    def extractor(self) -> GraphExtractor:
        """Entity/relationship extractor."""
        return self._cached("extractor", provider_factory.graph_extractor)

    def figure_locator(self) -> FigureLocator:
        """Figure box locator."""
        return self._cached("figure_locator", provider_factory.figure_locator)
