"""Settings: defaults are embedded under KB_HOME; env names are the documented ones."""

from __future__ import annotations

from pathlib import Path

import pytest
import os
import subprocess
import sys

from kb_shared.errors import KbError, SettingsError
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
    ("field", "value", "message"),
    [
        ("chunk_words", 10, "KB_CHUNK_WORDS=10 is not valid: use an integer from 50 to 4000."),
        ("mcp_port", 0, "KB_MCP_PORT=0 is not valid: use an integer from 1 to 65535."),
        (
            "embedding_provider",
            "magic",
            "KB_EMBEDDING_PROVIDER=magic is not valid: use one of auto, local, cloud.",
        ),
        ("provider_concurrency", "many", "KB_PROVIDER_CONCURRENCY=many is not valid: use an "
         "integer from 1 to 64."),
    ],
)
def test_out_of_bounds_values_are_refused_in_one_line(field: str, value: object, message: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings(**{field: value})
    assert str(caught.value) == message
    assert isinstance(caught.value, KbError)


def test_every_bad_setting_gets_its_own_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_CHUNK_WORDS", "40")
    monkeypatch.setenv("KB_MAX_QUERY_CHARS", "0")
    with pytest.raises(SettingsError) as caught:
        Settings()
    assert str(caught.value).splitlines() == [
        "KB_CHUNK_WORDS=40 is not valid: use an integer from 50 to 4000.",
        "KB_MAX_QUERY_CHARS=0 is not valid: use an integer of at least 1.",
    ]


def test_a_bad_secret_is_not_echoed() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings(anthropic_api_key=["not", "a", "string"])
    assert str(caught.value).startswith("ANTHROPIC_API_KEY=(hidden) is not valid")


def test_a_bearer_token_no_client_could_send_is_refused_without_echoing_the_tokens() -> None:
    # HTTP header values are ISO-8859-1: "tök" could never match what a client sends, and a
    # server started with it silently answered 401 to every client
    with pytest.raises(SettingsError) as caught:
        Settings(mcp_tokens="s3cret-one,tök")
    assert str(caught.value) == (
        "KB_MCP_TOKENS=(hidden) is not valid: a bearer token holds U+00F6; use printable ASCII "
        "only (letters, digits, punctuation), e.g. from `python -c 'import secrets; "
        "print(secrets.token_urlsafe())'`."
    )
    assert Settings(mcp_tokens="s3cret-one, two~!").token_list == ["s3cret-one", "two~!"]


@pytest.mark.parametrize(
    ("command", "status", "prefix"),
    [(["kb", "status"], 1, ""), (["kb-mcp", "serve"], 2, "kb-mcp: ")],
)
def test_the_clis_print_one_line_for_a_bad_setting(
    command: list[str], status: int, prefix: str, tmp_path: Path
) -> None:
    # Defect 9 of issue 10: this printed a pydantic traceback naming `chunk_words`.
    script = Path(sys.executable).parent / command[0]
    env = {**os.environ, "KB_CHUNK_WORDS": "40", "KB_HOME": str(tmp_path), "COLUMNS": "200"}
    done = subprocess.run(
        [str(script), *command[1:]], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == status
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        prefix + "KB_CHUNK_WORDS=40 is not valid: use an integer from 50 to 4000."
    ]
