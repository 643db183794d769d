"""``ServerState.warm``: the server loads what the first query would otherwise wait for — the
embedding model and the vector index's in-memory copies — and leaves a missing index to the
tools to report."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kb_mcp.state import YOUNG_THRESHOLD, open_state, settle_interpreter
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


@pytest.fixture
def collector() -> Iterator[None]:
    """Puts the test process's collector back as it was."""
    threshold, interval = gc.get_threshold(), sys.getswitchinterval()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    sys.setswitchinterval(interval)


@pytest.mark.usefixtures("collector")
def test_settle_interpreter_freezes_start_up_collects_young_objects_less_often_and_switches_threads_sooner() -> None:
    gc.unfreeze()
    made_at_start = [[n] for n in range(1_000)]  # containers the collector tracks
    _, middle, old = gc.get_threshold()
    settle_interpreter()
    assert gc.get_freeze_count() >= len(made_at_start)
    assert gc.get_threshold() == (YOUNG_THRESHOLD, middle, old)
    assert YOUNG_THRESHOLD == 10_000
    assert sys.getswitchinterval() == pytest.approx(0.0005)
    # a cycle made after start-up is still collected
    cycle: list[object] = []
    cycle.append(cycle)
    del cycle
    assert gc.collect() >= 1
