"""The exceptions kb raises on purpose. Every message is written for the person (or model)
who has to act on it: what went wrong, and what to do next."""

from __future__ import annotations


class KbError(Exception):
    """Root of every error kb raises deliberately."""


class StoreError(KbError):
    """A store could not be reached or refused an operation."""


class StoreUnavailableError(StoreError):
    """A store is down or unreachable (connection refused, timeout, bad credentials)."""


class SchemaMissingError(StoreError):
    """The store's tables do not exist yet (nothing was ever built there, or ``kb db init``
    was not run against a server database)."""


class EmbeddingMismatchError(StoreError):
    """The vector index was built with another embedding model or dimension.

    Mixing vectors from two models in one index gives silent garbage, so opening refuses;
    the message names both models and says to re-embed (``kb rebuild embeddings --all --reset``).
    """


class DocumentNotFoundError(KbError):
    """A document name or id that the catalog does not hold."""


class ConversionError(KbError):
    """A PDF that cannot become Markdown: scanned (no text layer), encrypted, corrupt,
    empty, not a PDF, or in a font with no Unicode mapping. The message says which and what
    the person can do about it."""


class IntakeError(KbError):
    """An intake batch refused as a whole (e.g. the duplicate lookup itself failed)."""


class ProviderError(KbError):
    """A model provider failed after its retries (bad key, missing model, exhausted retries)."""
