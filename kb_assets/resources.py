"""Dagster resources: the ``kb_shared`` stores and model providers, configured from the
Launchpad, a test or the environment.

Each resource builds one ``Settings`` per run: the environment (``KB_*``, see the README) with
the resource's own fields on top — ``home``, ``overrides`` (any other ``Settings`` field by
name, as text) and the secrets, which are typed fields meant to be set with ``dg.EnvVar`` (or
``{"env": "NAME"}`` on the Launchpad) so that a key never lands in a run's stored config.
Clients are built on first use and closed when the run ends.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import dagster as dg
from pydantic import Field, PrivateAttr

from kb_shared.errors import SettingsError
from kb_shared.settings import Settings
from kb_shared.stores import factory as store_factory
from kb_shared.stores.blobs import BlobStore
from kb_shared.stores.catalog import Catalog
from kb_shared.stores.graph import GraphStore
from kb_shared.stores.vectors import VectorIndex

if TYPE_CHECKING:  # the providers (NumPy, model code) load when a run first asks for one
    from kb_shared.providers.base import (
        Contextualiser,
        Embedder,
        FigureLocator,
        GraphExtractor,
        MarkdownConverter,
    )

#: ``Settings`` fields that hold a secret: never accepted in ``overrides`` (which is stored
#: with the run) — each has its own resource field for an ``EnvVar``.
SECRET_FIELDS = frozenset(
    name for name, info in Settings.model_fields.items() if "SecretStr" in str(info.annotation)
)


class Closeable(Protocol):
    """A client a resource built and must release when the run ends."""

    def close(self) -> None:
        """Release it (safe to call twice)."""


T = TypeVar("T", bound=Closeable)


class SettingsResource(dg.ConfigurableResource):
    """What both resources share: one ``Settings`` per run and clients built on first use.

    Attributes:
        home: ``KB_HOME`` (root of the embedded stores); ``None`` = the environment's.
        overrides: other ``Settings`` fields by name, as text (``{"chunk_words": "300"}``);
            a field not named here comes from its ``KB_*`` variable.
    """

    home: str | None = Field(
        None, description="KB_HOME, the root of the embedded stores; unset = the environment's."
    )
    overrides: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Settings fields by name, as text, e.g. {\"qdrant_url\": \"http://qdrant:6333\", "
            "\"chunk_words\": \"300\"}; every field not named comes from its KB_* variable. "
            "Secrets have their own fields."
        ),
    )

    _settings: Settings | None = PrivateAttr(default=None)
    _cache: dict[str, Any] = PrivateAttr(default_factory=dict)

    def secrets(self) -> dict[str, str]:
        """The secret ``Settings`` fields this resource sets (none in the base class)."""
        return {}

    @property
    def settings(self) -> Settings:
        """Settings for this run (built once): the environment, then this resource's fields.

        Raises:
            SettingsError: an unknown or secret name in ``overrides``, or a bad value.
        """
        if self._settings is None:
            self._settings = build_settings(self.home, self.overrides, self.secrets())
        return self._settings

    def launch_config(self) -> dict[str, Any]:
        """This resource's non-secret config, as run config for a run that should see the
        same settings (``operations.run_build``); secrets stay in the environment."""
        config: dict[str, Any] = {"overrides": dict(self.overrides)}
        if self.home is not None:
            config["home"] = self.home
        return config

    def _cached(self, name: str, build: Callable[[Settings], T]) -> T:
        """``build(settings)`` the first time ``name`` is asked for, the same object after."""
        if name not in self._cache:
            self._cache[name] = build(self.settings)
        return self._cache[name]

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        """Close every client opened during the run."""
        self.close()

    def close(self) -> None:
        """Close every client opened so far, newest first (safe to call twice)."""
        clients: list[Closeable] = list(self._cache.values())
        self._cache.clear()
        for client in reversed(clients):
            client.close()


def build_settings(
    home: str | None, overrides: Mapping[str, str], secrets: Mapping[str, str]
) -> Settings:
    """``Settings()`` from the environment with ``home``, ``overrides`` and ``secrets`` on top.

    Raises:
        SettingsError: ``overrides`` names no ``Settings`` field, names a secret (those have
            their own resource fields), or a value is invalid.
    """
    unknown = sorted(set(overrides) - set(Settings.model_fields))
    if unknown:
        raise SettingsError(
            f"unknown setting(s) {', '.join(unknown)} in the resource's overrides; use "
            "Settings field names such as chunk_words or qdrant_url (README, settings table)"
        )
    secret = sorted(set(overrides) & SECRET_FIELDS)
    if secret:
        raise SettingsError(
            f"{', '.join(secret)} is a secret: set the resource field of that name with "
            "dg.EnvVar (or {\"env\": NAME} on the Launchpad), not in overrides"
        )
    values: dict[str, Any] = {**overrides, **secrets}
    if home is not None:
        values["home"] = home
    return Settings(**values)


class StoresResource(SettingsResource):
    """The four stores of DESIGN.md ("Stores and their backends"), chosen by settings.

    Attributes:
        home, overrides: see ``SettingsResource``.
        qdrant_api_key, neo4j_password: secrets (``dg.EnvVar``); ``None`` = the environment's.
    """

    qdrant_api_key: str | None = Field(None, description="Secret: set with an EnvVar.")
    neo4j_password: str | None = Field(None, description="Secret: set with an EnvVar.")

    def secrets(self) -> dict[str, str]:
        """The store secrets set on this resource."""
        return _set(qdrant_api_key=self.qdrant_api_key, neo4j_password=self.neo4j_password)

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


class Providers(ABC):
    """The model providers the corpus assets call, one per role (DESIGN.md "Providers").

    ``ProvidersResource`` chooses each from settings; tests pass a fake with the same methods
    (``tests/fakes.py``), so asset behaviour is tested without loading a model.
    """

    @abstractmethod
    def converter(self) -> MarkdownConverter:
        """PDF → Markdown converter."""

    @abstractmethod
    def embedder(self) -> Embedder:
        """Dense embedder (chunks, figures, entity names and queries share it)."""

    @abstractmethod
    def contextualiser(self) -> Contextualiser:
        """Per-chunk context provider (the heading-path null object offline)."""

    @abstractmethod
    def extractor(self) -> GraphExtractor:
        """Entity/relationship extractor."""

    @abstractmethod
    def figure_locator(self) -> FigureLocator:
        """Figure box locator."""


class ProvidersResource(SettingsResource, Providers):
    """The model providers, local unless a key is set (``kb_shared.providers.factory``).

    Attributes:
        home, overrides: see ``SettingsResource`` (e.g. ``local_embedding_model``).
        anthropic_api_key, gemini_api_key, cohere_api_key: secrets (``dg.EnvVar``); ``None``
            = the environment's (``ANTHROPIC_API_KEY`` …).
    """

    anthropic_api_key: str | None = Field(None, description="Secret: set with an EnvVar.")
    gemini_api_key: str | None = Field(None, description="Secret: set with an EnvVar.")
    cohere_api_key: str | None = Field(None, description="Secret: set with an EnvVar.")

    def secrets(self) -> dict[str, str]:
        """The provider keys set on this resource."""
        return _set(
            anthropic_api_key=self.anthropic_api_key,
            gemini_api_key=self.gemini_api_key,
            cohere_api_key=self.cohere_api_key,
        )

    def converter(self) -> MarkdownConverter:
        """PDF → Markdown converter."""
        from kb_shared.providers import factory as provider_factory

        return self._cached("converter", provider_factory.markdown_converter)

    def embedder(self) -> Embedder:
        """Dense embedder (chunks, figures, entity names and queries share it)."""
        from kb_shared.providers import factory as provider_factory

        return self._cached("embedder", provider_factory.embedder)

    def contextualiser(self) -> Contextualiser:
        """Per-chunk context provider (the heading-path null object offline)."""
        from kb_shared.providers import factory as provider_factory

        return self._cached("contextualiser", provider_factory.contextualiser)

    def extractor(self) -> GraphExtractor:
        """Entity/relationship extractor."""
        from kb_shared.providers import factory as provider_factory

        return self._cached("extractor", provider_factory.graph_extractor)

    def figure_locator(self) -> FigureLocator:
        """Figure box locator."""
        from kb_shared.providers import factory as provider_factory

        return self._cached("figure_locator", provider_factory.figure_locator)


def _set(**values: str | None) -> dict[str, str]:
    return {name: value for name, value in values.items() if value is not None}

