"""Small pieces every corpus asset shares."""

from __future__ import annotations

from kb_assets.assets.common import fingerprint, provider_usage
from kb_shared.providers.base import HeadingPathContextualiser, Provider


class _Cloud(Provider):
    name = "gemini-embeddings"

    def usage(self) -> dict[str, object]:
        return {"requests": 3, "input_tokens": 1200}


class _Local(Provider):
    """A local provider: ``usage()`` is the base class's ``{}``."""

    name = "usem3"


def test_provider_usage_reports_only_providers_that_count() -> None:
    metadata = provider_usage(_Cloud(), _Local(), HeadingPathContextualiser())
    assert metadata["provider_usage"].value == {
        "gemini-embeddings": {"requests": 3, "input_tokens": 1200}
    }
    assert provider_usage(_Local(), HeadingPathContextualiser()) == {}


def test_fingerprint_is_order_and_value_sensitive() -> None:
    assert fingerprint("m", {"a": 1, "b": 2}) == fingerprint("m", {"b": 2, "a": 1})
    assert fingerprint("m", [1, 2]) != fingerprint("m", [2, 1])
    # SHA-256 of the JSON text '["m", "x"]'
    assert fingerprint("m", "x") == (
        "aec4b0b0c2c541ba582c94b33f5e6fcd87547e3ed9a2487f57b9dbe27a0b0c94"
    )
