"""Fixtures for the MCP server tests: the small corpus of ``tests/mcp/corpus.py`` written
straight into the stores (once per module), a deterministic embedder, and servers on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kb_mcp.server import build_server
from kb_shared.stores import factory
from kb_shared.stores.catalog import Catalog, document_requests, reference_requests
from tests.mcp.corpus import HashingEmbedder, corpus_settings, write_corpus


@pytest.fixture
def anyio_backend() -> str:
    """Run the async tests on asyncio (anyio's pytest plugin)."""
    return "asyncio"


@pytest.fixture(scope="module")
def embedder() -> HashingEmbedder:
    """256 buckets: few hash collisions, so unrelated texts score near 0."""
    return HashingEmbedder(256)


@pytest.fixture(scope="module")
def corpus_home(tmp_path_factory: pytest.TempPathFactory, embedder: HashingEmbedder) -> Path:
    """KB_HOME holding the two-document corpus (plus a pending and a failed document)."""
    home = tmp_path_factory.mktemp("kbcorpus")
    write_corpus(corpus_settings(home), embedder)
    return home


@pytest.fixture(scope="module")
def server(corpus_home: Path, embedder: HashingEmbedder):
    """An MCP server on the corpus (links based on http://127.0.0.1:8765), one per module:
    each client session (``Client(server)``) runs the server's lifespan, which opens the
    stores anew, so the tests share only its tools and settings, whose building was a large
    share of an MCP test's CPU (benchmarks/results/test-lanes.md, 2026-12-07)."""
    return build_server(corpus_settings(corpus_home), embedder=embedder, warm=False)


@pytest.fixture
def writer(corpus_home: Path) -> Iterator[Catalog]:
    """The corpus catalog as the pipeline opens it; empties both request queues afterwards."""
    catalog = factory.open_catalog(corpus_settings(corpus_home))
    yield catalog
    with catalog.engine.begin() as conn:
        conn.execute(document_requests.delete())
        conn.execute(reference_requests.delete())
    catalog.close()
