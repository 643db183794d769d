"""Contextualisation: one short context per chunk, written by a model that has read the whole
document (Anthropic, "Introducing Contextual Retrieval", 2024: a 50-100 token context
prefixed to each chunk before embedding).

Every call sends the same prefix, the whole document, byte for byte, and only the chunk at
the end differs. That prefix is what prompt caching is for:

* **Claude** (:class:`ClaudeContextualiser`): explicit caching, a ``cache_control:
  {"type": "ephemeral"}`` breakpoint on the document block (Anthropic docs, "Prompt
  caching"; a prefix shorter than the model's minimum, 4,096 tokens for Haiku 4.5, is simply
  not cached).
* **Gemini** (:class:`GeminiContextualiser`, used when only a Gemini key is set): implicit
  caching of repeated prefixes (Gemini API docs, "Context caching": implicit caching is on by
  default for 2.5 models), reported as ``cachedContentTokenCount``.

A cache only serves requests that arrive after it was written, so the first chunk's call is
made alone and the rest fan out in parallel after it returns (reference README, "What a
response costs"). Whether it worked is measured, not assumed: each ingestion logs
``"{N} prompt tokens, {M} cached ({X}%)"`` from the usage the provider returned, or says
that the provider reported no cache counts, and :attr:`last_cache_report` keeps the numbers
for the asset's metadata.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kb_shared.ingest.chunking import Chunk
from kb_shared.models import CLAUDE_CONTEXT_MODEL, GEMINI_CONTEXT_MODEL
from kb_shared.providers.base import Contextualiser
from kb_shared.providers.cloud_common import (
    CloudProvider,
    anthropic_text,
    claude_message,
    gemini_content,
)

log = logging.getLogger(__name__)

#: Output budget of one context (tokens); the prompt asks for 50-100 tokens.
MAX_CONTEXT_TOKENS = 200
#: Longest document prefix sent (characters). ~400,000 characters is ~100,000 tokens at the
#: usual ~4 characters per English token: half of Claude Haiku 4.5's 200K-token context
#: window (Anthropic models overview), so prompt + chunk + answer always fit. A longer
#: document is cut at the last line break before the limit (logged); the cut prefix is
#: still identical across the document's calls, so it is still cached.
MAX_DOCUMENT_CHARS = 400_000

INSTRUCTION = """Here is one chunk of the document above:
<chunk>
{chunk}
</chunk>
Write one or two sentences that place this chunk within the whole document (which document, \
which part of it, what the chunk is about) so that a search for the chunk's content finds it. \
Answer with those sentences only."""


def document_prefix(title: str, markdown: str, max_chars: int = MAX_DOCUMENT_CHARS) -> str:
    """The byte-identical prefix every call of one document starts with: the Markdown in a
    ``<document>`` element, cut at the last line break within ``max_chars`` (with a
    ``[… the rest of the document is not shown …]`` line) when it is longer."""
    if len(markdown) > max_chars:
        cut = markdown[:max_chars]
        newline = cut.rfind("\n")
        markdown = (cut[:newline] if newline > 0 else cut) + (
            "\n[… the rest of the document is not shown …]"
        )
    return f'<document title="{title}">\n{markdown}\n</document>'


@dataclass(frozen=True, slots=True)
class CacheReport:
    """Prompt-cache accounting of one ``contexts`` call.

    Attributes:
        chunks: chunks contextualised.
        prompt_tokens: all prompt tokens sent (uncached + cache writes + cache reads), or
            ``None`` when no response reported usage.
        cached_tokens: prompt tokens read from the cache, or ``None`` when not reported.
    """

    chunks: int
    prompt_tokens: int | None
    cached_tokens: int | None

    @property
    def cached_percent(self) -> float | None:
        """``100 * cached / prompt``, or ``None`` when either is unknown or prompt is 0."""
        if not self.prompt_tokens or self.cached_tokens is None:
            return None
        return 100.0 * self.cached_tokens / self.prompt_tokens

    def message(self) -> str:
        """``"N prompt tokens, M cached (X%)"``, or a sentence saying nothing was reported."""
        if self.prompt_tokens is None or self.cached_tokens is None:
            return (
                "the provider reported no cache token counts, so whether the document prefix "
                "was served from the cache is unknown"
            )
        percent = self.cached_percent or 0.0
        return f"{self.prompt_tokens} prompt tokens, {self.cached_tokens} cached ({percent:.1f}%)"


class _CachedPrefixContextualiser(CloudProvider, Contextualiser):
    """First chunk alone, the rest in parallel, cache accounting; subclasses make one call.

    Subclasses set the :class:`~kb_shared.providers.cloud_common.CloudProvider` class
    attributes (``vendor``, ``provider`` — also the ``name`` prefix — ``default_model``,
    ``needed_by``).
    """

    def __init__(
        self,
        client: Any,
        *,
        max_tokens: int = MAX_CONTEXT_TOKENS,
        max_document_chars: int = MAX_DOCUMENT_CHARS,
        **options: Any,
    ) -> None:
        if max_document_chars < 1:
            raise ValueError(f"max_document_chars must be >= 1, got {max_document_chars}")
        super().__init__(client, **options)
        self.max_document_chars = max_document_chars
        self.last_cache_report: CacheReport | None = None
        self.max_tokens = max_tokens

    def contexts(self, title: str, markdown: str, chunks: Sequence[Chunk]) -> list[str]:
        """One context per chunk, in order (whitespace collapsed; an empty answer stays
        empty, and the chunk is then embedded with its heading path alone).

        Raises:
            ProviderError: a call failed for good; no partial result is returned.
        """
        if not chunks:
            self.last_cache_report = CacheReport(0, None, None)
            return []
        if len(markdown) > self.max_document_chars:
            log.warning(
                "%r is %d characters; contextualising its chunks against the first %d only",
                title, len(markdown), self.max_document_chars,
            )
        prefix = document_prefix(title, markdown, self.max_document_chars)
        first = self._one(prefix, chunks[0])
        rest = self.calls.map(lambda chunk: self._one(prefix, chunk), list(chunks[1:]))
        answers = [first, *rest]
        prompt_counts = [a[1] for a in answers]
        cached_counts = [a[2] for a in answers]
        prompt = sum(p for p in prompt_counts if p is not None) if any(
            p is not None for p in prompt_counts
        ) else None
        cached = sum(c for c in cached_counts if c is not None) if any(
            c is not None for c in cached_counts
        ) else None
        report = CacheReport(len(chunks), prompt, cached)
        self.last_cache_report = report
        log.info("contextualised %d chunks of %r with %s: %s", len(chunks), title, self.name,
                 report.message())
        return [a[0] for a in answers]

    @abstractmethod
    def _one(self, prefix: str, chunk: Chunk) -> tuple[str, int | None, int | None]:
        """``(context, prompt tokens, cached tokens)`` for one chunk (counts ``None`` when
        the response did not report them)."""


class ClaudeContextualiser(_CachedPrefixContextualiser):
    """``Contextualiser`` on Claude with an explicit ``cache_control`` breakpoint.

    Request shape: ``messages=[{"role": "user", "content": [{"type": "text", "text":
    <document prefix>, "cache_control": {"type": "ephemeral"}}, {"type": "text", "text":
    <instruction + chunk>}]}]``.

    Args:
        client: ``anthropic.Anthropic`` (``max_retries=0``).
        model: default (``None``) :data:`kb_shared.models.CLAUDE_CONTEXT_MODEL`.
        max_tokens: output budget per context.
        max_document_chars: longest document prefix (:data:`MAX_DOCUMENT_CHARS`).
        concurrency: calls in flight after the first.
        retry: retry policy.
        key: key source + fingerprint (usage metadata).

    Raises:
        ValueError: ``max_document_chars`` or ``concurrency`` < 1.
    """

    vendor = "Anthropic"
    provider = "claude-context"
    default_model = CLAUDE_CONTEXT_MODEL
    needed_by = "Claude contextualisation"

    def _one(self, prefix: str, chunk: Chunk) -> tuple[str, int | None, int | None]:
        content = [
            {"type": "text", "text": prefix, "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": INSTRUCTION.format(chunk=chunk.text)},
        ]
        message, usage = claude_message(
            self, f"contextualising chunk {chunk.id}", content, self.max_tokens
        )
        cached = None if usage is None else usage.cache_read_input_tokens
        prompt = (
            None
            if cached is None
            else usage.input_tokens + (usage.cache_creation_input_tokens or 0) + cached
        )
        return " ".join(anthropic_text(message).split()), prompt, cached


class GeminiContextualiser(_CachedPrefixContextualiser):
    """``Contextualiser`` on Gemini, relying on implicit prefix caching.

    Request shape: ``contents=[{"role": "user", "parts": [{"text": <document prefix>},
    {"text": <instruction + chunk>}]}]``; the cached share is ``cachedContentTokenCount`` of
    ``promptTokenCount`` (Gemini omits the field when it is zero, so a response that reports
    ``promptTokenCount`` alone counts as 0 cached).

    Args:
        client: ``google.genai.Client``.
        model: default (``None``) :data:`kb_shared.models.GEMINI_CONTEXT_MODEL`.
        max_tokens: ``maxOutputTokens`` per context.
        max_document_chars, concurrency, retry, key: as :class:`ClaudeContextualiser`.
    """

    vendor = "Gemini"
    provider = "gemini-context"
    default_model = GEMINI_CONTEXT_MODEL
    needed_by = "Gemini contextualisation"

    def _one(self, prefix: str, chunk: Chunk) -> tuple[str, int | None, int | None]:
        from google.genai import types  # noqa: PLC0415

        parts = [types.Part(text=prefix), types.Part(text=INSTRUCTION.format(chunk=chunk.text))]
        config = types.GenerateContentConfig(
            max_output_tokens=self.max_tokens,
            # no thinking: it would be taken from the 200-token output budget
            thinking_config=types.ThinkingConfig(thinking_budget=0),
        )
        response, prompt, cached = gemini_content(
            self, f"contextualising chunk {chunk.id}", parts, config
        )
        return " ".join((response.text or "").split()), prompt, cached
