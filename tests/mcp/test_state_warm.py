"""``ServerState.warm``: the server loads what the first query would otherwise wait for — the
embedding model and the vector index's in-memory copies — and leaves a missing index to the
tools to report."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_mcp.state import open_state
from kb_shared.errors import EmptyCorpusError
from kb_shared.settings import Settings
from tests.mcp.corpus import HashingEmbedder, corpus_settings


def test_warm_loads_the_sparse_postings_copy_before_the_first_query(
    corpus_home: Path, embedder: HashingEmbedder
) -> None:
    state = open_state(corpus_settings(corpus_home), embedder=embedder)
    try:
        index = state.vectors()
        assert index._postings.cache is None  # type: ignore[attr-defined]
        state.warm()
        copy = index._postings.cache  # type: ignore[attr-defined]
        assert copy is not None and copy.key is not None
        assert copy.snapshot.live == index.count()  # every point of the corpus, loaded
        # the first real query finds the copy at the file's generation: nothing reloads
        before = copy.snapshot
        assert index.sparse_search("retail electricity prices", 3)
        assert index._postings.cache.snapshot is before  # type: ignore[attr-defined]
    finally:
        state.close()


def test_warm_without_an_index_starts_and_leaves_the_error_to_the_tools(
    tmp_path: Path, embedder: HashingEmbedder
) -> None:
    state = open_state(Settings(home=tmp_path), embedder=embedder)
    try:
        state.warm()  # no index yet: the server still starts
        with pytest.raises(EmptyCorpusError):
            state.vectors()
    finally:
        state.close()
