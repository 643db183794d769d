"""Dense embeddings with Gemini (google-genai SDK, ``batchEmbedContents``).

Conventions (Gemini API docs, "Embeddings"; the same in the reference app's README):

* documents (chunks, figures): task type ``RETRIEVAL_DOCUMENT``, text
  ``"title: {title} | text: {text}"`` (``title: none`` when there is no title);
* queries: task type ``RETRIEVAL_QUERY``, text ``"task: search result | query: {query}"``;
* entity names (graph seeding) are compared with query vectors, so they are embedded on the
  query side too;
* ``outputDimensionality`` = the configured dimension (default 1536). Gemini embeddings are
  Matryoshka-trained and only the full 3072 dimensions come back unit length, so every vector
  is L2-normalised here.

Request limits used for batching:

* at most :data:`MAX_TEXTS_PER_REQUEST` = 100 entries per ``batchEmbedContents`` request (the
  API answers 400 "BatchEmbedContentsRequest.requests: at most 100 requests can be in one
  batch"; langchain-ai/langchainjs#4491, vercel/ai#16575 which lowered the Google provider's
  batch size to 100);
* figures with images: at most :data:`MAX_FIGURES_PER_REQUEST` = 4 per request, because a
  request may carry at most 6 images and 8,192 input tokens shared by every image and text in
  it (gemini-embedding-2 model card; reference README, "Figures": MAX_FIGURES_PER_EMBED_REQUEST
  = 4 leaves headroom under both). Texts and images of a figure travel in one entry, so they
  are sliced together and cannot be misaligned.

Only a multimodal model (``gemini-embedding-2``; not ``gemini-embedding-001`` or
``gemini-embedding-exp*``, the rule of google-genai's ``t_is_multimodal_embedding_model``)
receives the images; with a text-only model a figure is embedded from its text, in text-sized
batches, and that is logged once.

Each entry is sent as its own ``Content``: google-genai merges a plain list of strings into
*one* content (one vector) for multimodal models.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from kb_shared.errors import EmbeddingError
from kb_shared.models import (
    GEMINI_EMBEDDING_DIMENSION,
    GEMINI_EMBEDDING_MODEL,
    gemini_embedding_model_id,
)
from kb_shared.providers.base import Embedder, FigureInput
from kb_shared.providers.cloud_common import CloudProvider

if TYPE_CHECKING:
    from google import genai

    from kb_shared.settings import Settings

log = logging.getLogger(__name__)

TASK_DOCUMENT = "RETRIEVAL_DOCUMENT"
TASK_QUERY = "RETRIEVAL_QUERY"
#: Entries per ``batchEmbedContents`` request (module docstring).
MAX_TEXTS_PER_REQUEST = 100
#: Figures (text + image) per request (module docstring).
MAX_FIGURES_PER_REQUEST = 4


def document_text(text: str, title: str | None = None) -> str:
    """``"title: {title} | text: {text}"``; ``title: none`` when there is no title."""
    title = (title or "").strip() or "none"
    return f"title: {title} | text: {text}"


def query_text(query: str) -> str:
    """``"task: search result | query: {query}"``."""
    return f"task: search result | query: {query}"


def is_multimodal_model(model: str) -> bool:
    """True when ``model`` takes images (google-genai's rule: a ``gemini`` embedding model that
    is not ``gemini-embedding-001`` nor ``gemini-embedding-exp*``)."""
    model_id = model.rsplit("/", 1)[-1]
    return "gemini" in model_id and not model_id.startswith(
        ("gemini-embedding-001", "gemini-embedding-exp")
    )


class GeminiEmbedder(CloudProvider, Embedder):
    """``Embedder`` over the Gemini embeddings API; ``from_settings`` (``GEMINI_API_KEY`` and
    ``settings.gemini_embedding_dimension``), ``usage()`` and ``close()`` as
    :class:`~kb_shared.providers.cloud_common.CloudProvider`.

    Args:
        client: a ``google.genai.Client`` (tests inject one whose ``http_options.httpx_client``
            has an ``httpx2.MockTransport``).
        model: API model id; ``None`` = :data:`kb_shared.models.GEMINI_EMBEDDING_MODEL`.
        dimension: output dimension, 128..3072 (default 1536).
        concurrency: requests in flight at once.
        retry, key: as ``CloudProvider``.

    Attributes:
        model: the id recorded in the vector index, ``"{api model}@{dimension}"``
            (``kb_shared.models.gemini_embedding_model_id``).
        api_model: the API model id.
        name: ``"gemini-embeddings:{api model}"``.

    Raises:
        ValueError: ``dimension`` outside 128..3072.
        EmbeddingError: every failure of a call (``CloudProvider.error``).
    """

    vendor = "Gemini"
    provider = "gemini-embeddings"
    default_model = GEMINI_EMBEDDING_MODEL
    needed_by = "Gemini embeddings"
    error = EmbeddingError

    def __init__(
        self,
        client: genai.Client,
        *,
        model: str | None = None,
        dimension: int = GEMINI_EMBEDDING_DIMENSION,
        **options: Any,
    ) -> None:
        api_model = self.default_model if model is None else model
        model_id = gemini_embedding_model_id(dimension, api_model)  # checks the dimension
        super().__init__(client, model=api_model, **options)
        self.api_model = api_model
        self.model = model_id
        self.dimension = dimension
        self.multimodal = is_multimodal_model(self.api_model)
        self._warned_text_only = False

    @classmethod
    def settings_options(cls, settings: Settings) -> dict[str, Any]:
        """``model`` and ``dimension`` from ``settings.gemini_embedding_model`` and
        ``settings.gemini_embedding_dimension``."""
        return {
            "model": settings.gemini_embedding_model,
            "dimension": settings.gemini_embedding_dimension,
        }

    # ------------------------------------------------------------------ Embedder
    def embed_documents(
        self, texts: Sequence[str], titles: Sequence[str] | None = None
    ) -> np.ndarray:
        """Embed chunks: ``RETRIEVAL_DOCUMENT``, ``title: … | text: …``, 100 per request.

        Returns:
            float32 array ``(len(texts), dimension)``, rows L2-normalised.

        Raises:
            ValueError: ``titles`` given with another length than ``texts``.
            EmbeddingError: the API failed, or answered with the wrong number or size of
                vectors, or a zero vector.
        """
        if titles is not None and len(titles) != len(texts):
            raise ValueError(f"{len(titles)} titles for {len(texts)} texts")
        formatted = [
            document_text(text, titles[i] if titles is not None else None)
            for i, text in enumerate(texts)
        ]
        return self._embed_texts(formatted, TASK_DOCUMENT, "chunks")

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query: ``RETRIEVAL_QUERY``, ``task: search result | query: …``.

        Returns:
            float32 array ``(dimension,)``, unit length.
        """
        return self._embed_texts([query_text(text)], TASK_QUERY, "a query")[0]

    def embed_names(self, names: Sequence[str]) -> np.ndarray:
        """Embed entity names on the query side (they are matched against query vectors)."""
        if not names:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self._embed_texts([query_text(n) for n in names], TASK_QUERY, "entity names")

    def embed_figures(self, figures: Sequence[FigureInput]) -> np.ndarray:
        """Embed figures into the chunks' space.

        With a multimodal model each figure is one entry of two parts, its
        ``title: none | text: …`` text and its PNG as inline data, at most 4 figures per
        request; a figure without a PNG is sent as text. With a text-only model each figure is
        embedded from its text (logged once).

        Returns:
            float32 array ``(len(figures), dimension)``, rows L2-normalised.
        """
        if not figures:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if not self.multimodal:
            if not self._warned_text_only and any(f.png for f in figures):
                log.warning(
                    "%s is a text-only embedding model: figures are embedded from their text; "
                    "set the model to gemini-embedding-2 (and re-embed) to include the images",
                    self.api_model,
                )
                self._warned_text_only = True
            return self._embed_texts(
                [document_text(f.text) for f in figures], TASK_DOCUMENT, "figure texts"
            )
        from google.genai import types  # noqa: PLC0415

        contents = []
        for figure in figures:
            parts = [types.Part(text=document_text(figure.text))]
            if figure.png:
                parts.append(types.Part.from_bytes(data=figure.png, mime_type="image/png"))
            contents.append(types.Content(parts=parts))
        return self._embed_contents(contents, TASK_DOCUMENT, "figures", MAX_FIGURES_PER_REQUEST)

    # ------------------------------------------------------------------ requests
    def _embed_texts(self, texts: Sequence[str], task: str, what: str) -> np.ndarray:
        from google.genai import types  # noqa: PLC0415

        contents = [types.Content(parts=[types.Part(text=t)]) for t in texts]
        return self._embed_contents(contents, task, what, MAX_TEXTS_PER_REQUEST)

    def _embed_contents(
        self, contents: Sequence[Any], task: str, what: str, batch_size: int
    ) -> np.ndarray:
        if not contents:
            return np.zeros((0, self.dimension), dtype=np.float32)
        batches = [
            list(contents[start : start + batch_size])
            for start in range(0, len(contents), batch_size)
        ]
        total = len(batches)
        results = self.calls.map(
            lambda pair: self._embed_batch(
                pair[1], task, f"embedding {what} (batch {pair[0] + 1} of {total})"
            ),
            list(enumerate(batches)),
        )
        return np.vstack(results)

    def _embed_batch(self, contents: list[Any], task: str, what: str) -> np.ndarray:
        from google.genai import types  # noqa: PLC0415

        response = self.calls.call(
            what,
            lambda: self.client.models.embed_content(
                model=self.api_model,
                contents=contents,
                config=types.EmbedContentConfig(
                    task_type=task, output_dimensionality=self.dimension
                ),
            ),
        )
        usage = getattr(response, "usage_metadata", None)
        prompt_tokens = getattr(usage, "prompt_token_count", None) if usage is not None else None
        self.meter.add_usage(input_tokens=prompt_tokens)
        embeddings = response.embeddings or []
        if len(embeddings) != len(contents):
            raise EmbeddingError(
                f"Gemini {what}: sent {len(contents)} entries but got {len(embeddings)} vectors"
            )
        rows = np.asarray([e.values or [] for e in embeddings], dtype=np.float64)
        if rows.ndim != 2 or rows.shape[1] != self.dimension:
            got = rows.shape[1] if rows.ndim == 2 else "ragged"
            raise EmbeddingError(
                f"Gemini {what}: asked for {self.dimension}-dimensional vectors, got {got}"
            )
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        if not np.all(np.isfinite(norms)) or np.any(norms == 0):
            raise EmbeddingError(f"Gemini {what}: a vector is zero or not finite")
        return (rows / norms).astype(np.float32)
