"""Fixtures the asset tests share: a KB_HOME under ``tmp_path``, the stores over it, an
in-memory Dagster instance and the fake providers. A module that needs another shape (a
built corpus, the CLI's instance) defines its own fixture of the same name, which wins."""

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from kb_assets.resources import StoresResource
from tests.assets.fake_providers import FakeProviders


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """The test's KB_HOME (not created: the stores create what they need)."""
    return tmp_path / "kb"


@pytest.fixture
def stores(home: Path) -> Iterator[StoresResource]:
    """The stores over ``home``, closed after the test."""
    resource = StoresResource(home=str(home))
    yield resource
    resource.close()


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    """An in-memory instance (``DagsterInstance.ephemeral``): runs, event logs and partitions
    for the test only. Its event log keeps one in-memory SQLite database, where
    ``instance_for_test``'s opens a file per run and per event: a run of the six assets costs
    half the CPU (benchmarks/results/test-lanes.md)."""
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


@pytest.fixture
def providers() -> FakeProviders:
    """Deterministic offline providers (``tests.assets.fake_providers``)."""
    return FakeProviders()

