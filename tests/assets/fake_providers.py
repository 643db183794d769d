"""``FakeProviders``: the ``providers`` resource the asset tests pass, built from the fakes in
``tests/fakes.py``."""

from __future__ import annotations

from dataclasses import dataclass, field

from kb_assets.resources import Providers
from kb_shared.providers.base import (
    Contextualiser,
    Embedder,
    FigureLocator,
    GraphExtractor,
    HeadingPathContextualiser,
    MarkdownConverter,
)
from tests.fakes import FakeConverter, FakeExtractor, FakeFigureLocator, HashingEmbedder


@dataclass
class FakeProviders(Providers):
    """The five provider roles as fakes (the contextualiser is the real offline null object).

    Pass it as the ``providers`` resource (Dagster hands the same object to every step) and
    read the fakes' call records from it afterwards.
    """

    converter_: FakeConverter = field(default_factory=FakeConverter)
    embedder_: HashingEmbedder = field(default_factory=lambda: HashingEmbedder(32))
    extractor_: FakeExtractor = field(default_factory=FakeExtractor)
    locator_: FakeFigureLocator = field(default_factory=FakeFigureLocator)
    contextualiser_: Contextualiser = field(default_factory=HeadingPathContextualiser)

    def converter(self) -> MarkdownConverter:
        return self.converter_

    def embedder(self) -> Embedder:
        return self.embedder_

    def contextualiser(self) -> Contextualiser:
        return self.contextualiser_

    def extractor(self) -> GraphExtractor:
        return self.extractor_

    def figure_locator(self) -> FigureLocator:
        return self.locator_
