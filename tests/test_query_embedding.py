"""The query embedding that runs beside the rest of a search (``retrieval.start_query_embedding``)."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from kb_shared.search import retrieval
from kb_shared.errors import EmbeddingError
from tests.fakes import HashingEmbedder


class _ThreadNoting(HashingEmbedder):
    """Records the name of the thread each query was embedded on."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def embed_query(self, text: str) -> np.ndarray:
        self.threads.append(threading.current_thread().name)
        return super().embed_query(text)


class _Broken(HashingEmbedder):
    def embed_query(self, text: str) -> np.ndarray:
        raise EmbeddingError("model file tampered with: reinstall the pinned packages")


def test_the_vector_is_the_embedders_and_is_made_on_a_worker_thread() -> None:
    embedder = _ThreadNoting()
    future = retrieval.start_query_embedding(embedder, "notify the distributor")
    vector = future.result(timeout=30)
    assert np.array_equal(vector, HashingEmbedder().embed_query("notify the distributor"))
    assert embedder.threads[0].startswith("kb-query-embedding")
    assert embedder.threads[0] != threading.current_thread().name


def test_the_embedders_error_reaches_the_caller() -> None:
    future = retrieval.start_query_embedding(_Broken(), "anything")
    with pytest.raises(EmbeddingError, match="reinstall the pinned packages"):
        future.result(timeout=30)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork exists on POSIX only")
def test_a_forked_child_embeds_on_threads_of_its_own() -> None:
    # The parent's pool has a thread; the child inherits the pool object but not the thread,
    # so without a fresh pool its query would wait forever.
    retrieval.start_query_embedding(HashingEmbedder(), "parent").result(timeout=30)
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child
        try:
            vector = retrieval.start_query_embedding(HashingEmbedder(), "child").result(timeout=10)
            os._exit(0 if vector.shape == (64,) else 2)
        except BaseException:
            os._exit(3)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
