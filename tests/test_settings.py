"""Settings: defaults are embedded under KB_HOME; env names are the documented ones."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from kb_shared.settings import ProviderChoice, Settings


def test_defaults_are_embedded_under_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KB_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    settings = Settings()
    home = (tmp_path / ".kb").resolve()
    assert settings.home == home
    assert settings.resolved_blob_url == (home / "blobs").as_uri()
    assert settings.resolved_database_url == f"sqlite:///{home / 'kb.sqlite'}"
    assert settings.resolved_reader_database_url == settings.resolved_database_url
    assert settings.resolved_vector_path == home / "vectors.sqlite"
    assert settings.dagster_home == home / "dagster"
    assert settings.inbox == home / "inbox"
    assert settings.qdrant_url is None and settings.neo4j_uri is None
    assert settings.anthropic_api_key is None
    assert settings.markdown_provider is ProviderChoice.AUTO
    assert (settings.mcp_host, settings.mcp_port) == ("127.0.0.1", 8765)


def test_environment_overrides(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KB_HOME", str(tmp_path / "h"))
    monkeypatch.setenv("KB_DATABASE_URL", "postgresql+psycopg://kb@db/kb")
    monkeypatch.setenv("KB_QDRANT_URL", "http://qdrant:6333")
    monkeypatch.setenv("KB_NEO4J_URI", "bolt://neo4j:7687")
    monkeypatch.setenv("KB_NEO4J_PASSWORD", "s3cret")
    monkeypatch.setenv("KB_MCP_TOKENS", " a , b,,")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    monkeypatch.setenv("GOOGLE_API_KEY", "g-test")
    monkeypatch.setenv("KB_EMBEDDING_PROVIDER", "local")
    settings = Settings()
    assert settings.home == (tmp_path / "h").resolve()
    assert settings.resolved_database_url == "postgresql+psycopg://kb@db/kb"
    assert settings.qdrant_url == "http://qdrant:6333"
    assert settings.neo4j_uri == "bolt://neo4j:7687"
    assert settings.neo4j_password is not None
    assert settings.neo4j_password.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(settings)
    assert settings.token_list == ["a", "b"]
    assert settings.anthropic_api_key.get_secret_value() == "sk-ant-test"
    assert settings.gemini_api_key.get_secret_value() == "g-test"
    assert settings.embedding_provider is ProviderChoice.LOCAL


def test_constructor_values_win_over_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_CHUNK_WORDS", "500")
    assert Settings(chunk_words=200).chunk_words == 200
    assert Settings().chunk_words == 500


@pytest.mark.parametrize(
    ("field", "value"), [("chunk_words", 10), ("mcp_port", 0), ("embedding_provider", "magic")]
)
def test_out_of_bounds_values_are_refused(field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        Settings(**{field: value})
