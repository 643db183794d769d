"""Rerank with Cohere (cohere SDK ``ClientV2.rerank``, ``POST /v2/rerank``).

The fused candidates of a search are re-ordered by a cross-encoder before the top ``top_n``
are returned. Limits applied before sending (Cohere docs, "Best Practices for using Rerank"
and the v2 rerank API reference):

* each document is cut to :data:`MAX_DOCUMENT_CHARS` characters (at a word boundary) and
  ``max_tokens_per_doc`` = :data:`MAX_TOKENS_PER_DOC` is sent: rerank-v3.5 reads 4,096 tokens
  of query + document, so more text is only payload. The cut is ours rather than the API's
  because an oversized request body fails as a whole (the reference README's
  "32,000-character rerank failure in production"); 4 characters per token is the usual
  English estimate;
* the query is cut to :data:`MAX_QUERY_CHARS` (2,048 tokens is the query maximum);
* at most :data:`MAX_DOCUMENTS_PER_REQUEST` = 1,000 documents per request (the SDK's
  documented recommendation); more are sent in several requests and merged by score
  (relevance scores are absolute, so scores of two requests compare).
"""

from __future__ import annotations

from collections.abc import Sequence

from kb_shared.errors import RerankError
from kb_shared.models import COHERE_RERANK_MODEL
from kb_shared.providers.base import Reranker
from kb_shared.providers.cloud_common import CloudProvider

MAX_TOKENS_PER_DOC = 4_096
MAX_DOCUMENT_CHARS = 4 * MAX_TOKENS_PER_DOC
MAX_QUERY_CHARS = 4 * 2_048
MAX_DOCUMENTS_PER_REQUEST = 1_000


def truncate(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, at the last space when that keeps at
    least half of it. ``truncate("alpha beta gamma", 12) == "alpha beta"``."""
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    return cut[:space].rstrip() if space >= limit // 2 else cut


class CohereReranker(CloudProvider, Reranker):
    """``Reranker`` on Cohere Rerank; constructor, ``from_settings`` (``COHERE_API_KEY``),
    ``usage()`` and ``close()`` as :class:`~kb_shared.providers.cloud_common.CloudProvider`.

    Args:
        client: ``cohere.ClientV2`` (tests give it an ``httpx.Client`` that respx mocks;
            ``max_retries=0``).
        model: default (``None``) :data:`kb_shared.models.COHERE_RERANK_MODEL`.
        concurrency: requests in flight (only matters past 1,000 documents).
        retry, key: as ``CloudProvider``.
    """

    vendor = "Cohere"
    provider = "cohere-rerank"
    name_prefix = "cohere"
    default_model = COHERE_RERANK_MODEL
    needed_by = "Cohere rerank"
    error = RerankError

    def rerank(self, query: str, texts: Sequence[str], top_n: int) -> list[tuple[int, float]]:
        """Re-order ``texts`` for ``query``.

        Returns:
            ``[(index into texts, relevance score in 0..1), …]``, best first, at most
            ``top_n``; ``[]`` for no texts.

        Raises:
            ValueError: ``top_n`` < 1.
            RerankError: the API failed, or answered with an index outside the request.
        """
        if top_n < 1:
            raise ValueError(f"top_n must be >= 1, got {top_n}")
        if not texts:
            return []
        cut_query = truncate(query, MAX_QUERY_CHARS)
        starts = list(range(0, len(texts), MAX_DOCUMENTS_PER_REQUEST))

        def one(start: int) -> list[tuple[int, float]]:
            window = texts[start : start + MAX_DOCUMENTS_PER_REQUEST]
            batch = [truncate(t, MAX_DOCUMENT_CHARS) for t in window]
            response = self.calls.call(
                f"reranking {len(batch)} documents",
                lambda: self.client.rerank(
                    model=self.model,
                    query=cut_query,
                    documents=batch,
                    top_n=min(top_n, len(batch)),
                    max_tokens_per_doc=MAX_TOKENS_PER_DOC,
                ),
            )
            units = None
            meta = getattr(response, "meta", None)
            billed = getattr(meta, "billed_units", None) if meta is not None else None
            if billed is not None:
                units = billed.search_units
            self.meter.add_usage(search_units=units)
            ranked: list[tuple[int, float]] = []
            for result in response.results:
                if not 0 <= result.index < len(batch):
                    raise RerankError(
                        f"Cohere rerank returned index {result.index} for {len(batch)} documents"
                    )
                ranked.append((start + result.index, float(result.relevance_score)))
            return ranked

        merged = [pair for part in self.calls.map(one, starts) for pair in part]
        merged.sort(key=lambda pair: (-pair[1], pair[0]))
        return merged[:top_n]
