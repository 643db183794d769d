"""Switching a corpus from the local embedding model to Gemini without re-embedding is
refused with a clear error (DESIGN.md, "Providers": "a mismatch is a clear error that says
to re-embed, never silent garbage")."""

from __future__ import annotations

from pathlib import Path

import httpx2
import numpy as np
import pytest

from kb_shared.errors import EmbeddingMismatchError
from kb_shared.models import USEM3, gemini_embedding_model_id
from kb_shared.providers.cloud_embeddings import GeminiEmbedder
from kb_shared.stores.vectors import Point
from kb_shared.stores.vectors_sqlite import SqliteVectorIndex

from .conftest import Recorder, genai_client


def test_opening_a_local_model_index_with_gemini_says_to_re_embed(tmp_path: Path) -> None:
    path = tmp_path / "vectors.sqlite"
    local = SqliteVectorIndex(path)
    local.open(USEM3.model_id, USEM3.dimension)
    vector = np.zeros(USEM3.dimension, dtype=np.float32)
    vector[0] = 1.0
    assert local.upsert([Point(id="srmp-0", document="srmp", kind="text",
                               text="The Retailer must notify the Distributor.", dense=vector)]) == 1
    local.close()

    # The embedder a Gemini key selects; building it makes no request.
    recorder = Recorder(lambda request, i: httpx2.Response(500))
    gemini = GeminiEmbedder(genai_client(recorder))
    assert (gemini.model, gemini.dimension) == (gemini_embedding_model_id(1536), 1536)
    assert gemini.model == "gemini-embedding-001@1536"

    switched = SqliteVectorIndex(path)
    with pytest.raises(EmbeddingMismatchError) as caught:
        switched.open(gemini.model, gemini.dimension)
    switched.close()
    assert str(caught.value) == (
        f"the vector index {path} holds embeddings from {USEM3.model_id!r} (512 dimensions), "
        "but the live embedding model is 'gemini-embedding-001@1536' (1536 dimensions). "
        "Vectors from different models cannot be compared: re-embed the corpus with "
        "`kb rebuild embeddings --all --reset` (or set the embedding settings back to the "
        "recorded model)."
    )
    assert recorder.requests == []

    # Nothing was lost: the index still opens with its own model and holds the point.
    again = SqliteVectorIndex(path)
    again.open(USEM3.model_id, USEM3.dimension)
    assert again.count() == 1
    again.close()
