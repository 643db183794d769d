"""The Dagster instance kb uses: ``KB_HOME/dagster`` with the repository's ``dagster.yaml``,
its storage on SQLite there or, with ``KB_DAGSTER_POSTGRES_URL``, on Postgres
(``dagster-postgres``, its connections kept open: ``keep_connections``), and the pool limits
from settings (``kb_assets.pools``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import dagster as dg
import sqlalchemy as sa
import yaml
from dagster._core.instance.ref import InstanceRef

from kb_assets.pools import apply_pool_limits
from kb_shared.errors import DagsterInstanceError
from kb_shared.settings import Settings

#: The instance settings file shipped at the repository root.
DAGSTER_YAML = Path(__file__).resolve().parents[1] / "dagster.yaml"
_FALLBACK_YAML = "telemetry:\n  enabled: false\n"

#: The variable the Postgres storage section reads its URL from, so the URL (a secret) is
#: never written to disk and ``kb ui``'s ``dagster dev`` (which inherits it) sees the same.
POSTGRES_URL_ENV = "KB_DAGSTER_POSTGRES_URL"
POSTGRES_STORAGE_YAML = (
    "\n# Added by kb because KB_DAGSTER_POSTGRES_URL is set (kb_assets/instance.py).\n"
    "storage:\n"
    "  postgres:\n"
    "    postgres_url:\n"
    f"      env: {POSTGRES_URL_ENV}\n"
)

#: The one SQLAlchemy driver ``dagster-postgres`` works with: its event log sends
#: ``NOTIFY channel, %(param)s``, which psycopg 3 (SQLAlchemy 2.1's default for a bare
#: ``postgresql://``) rejects as a syntax error.
POSTGRES_DRIVER = "postgresql+psycopg2"


#: SHA-256 of the ``dagster.yaml`` versions kb shipped before this one (the repository's git
#: history of the file): a copy equal to one of them is kb's own and is brought up to date.
EARLIER_TEMPLATES = frozenset({
    "5e6b1454f53232436bcdf03a8e4546ca140fd68e9429f579841f3a016a161323",
    "7a4c82333020a0f33e7da3629b55e520caeb0768e2f93c91c7b0375a4db351c5",
    "7fc86654c588e1a59c500f5f5c2f0a7f13a6c690e1344379d1182d804fe80a00",
})


def template_yaml() -> str:
    """The repository's ``dagster.yaml`` (a minimal one when kb runs without its checkout)."""
    return DAGSTER_YAML.read_text(encoding="utf-8") if DAGSTER_YAML.is_file() else _FALLBACK_YAML


def instance_yaml(settings: Settings) -> str:
    """The ``dagster.yaml`` kb writes for ``settings``: the template, plus the Postgres storage
    section when ``dagster_postgres_url`` is set."""
    text = template_yaml()
    return text + POSTGRES_STORAGE_YAML if settings.dagster_postgres_url else text


def postgres_url(settings: Settings) -> str | None:
    """``KB_DAGSTER_POSTGRES_URL`` (``None`` when unset), checked.

    Raises:
        DagsterInstanceError: not a SQLAlchemy URL, or not ``postgresql+psycopg2://``
            (``POSTGRES_DRIVER``).
    """
    secret = settings.dagster_postgres_url
    if secret is None:
        return None
    raw = secret.get_secret_value()
    try:
        driver = sa.make_url(raw).drivername
    except sa.exc.ArgumentError:
        driver = ""
    if driver != POSTGRES_DRIVER:
        raise DagsterInstanceError(
            f"{POSTGRES_URL_ENV} must be a {POSTGRES_DRIVER}:// URL (dagster-postgres works "
            f"with psycopg2 only), e.g. {POSTGRES_DRIVER}://dagster:PASSWORD@db:5432/dagster; "
            f"got {driver or 'no URL'!r}"
        )
    return raw


def prepare_dagster_home(settings: Settings) -> Path:
    """Create ``settings.dagster_home`` with a ``dagster.yaml`` in it (``instance_yaml``).

    Returns the directory. A ``dagster.yaml`` that kb wrote (``_written_by_kb``) follows the
    template and the settings: the Postgres section is added or dropped when
    ``KB_DAGSTER_POSTGRES_URL`` is set or unset. Any other ``dagster.yaml`` there is left
    alone (a person edited it). The environment is not touched: ``kb ui`` passes
    ``DAGSTER_HOME`` to ``dagster dev`` itself, and in-process builds are given the instance.

    Raises:
        DagsterInstanceError: ``KB_DAGSTER_POSTGRES_URL`` is not a Postgres URL, or is set
            while an edited ``dagster.yaml`` keeps other storage (the message names the
            section to add).
    """
    postgres_url(settings)
    home = settings.dagster_home
    home.mkdir(parents=True, exist_ok=True)
    target = home / "dagster.yaml"
    wanted = instance_yaml(settings)
    if not target.exists():
        target.write_text(wanted, encoding="utf-8")
        return home
    current = target.read_text(encoding="utf-8")
    if current == wanted:
        return home
    if _written_by_kb(current):
        target.write_text(wanted, encoding="utf-8")
    elif settings.dagster_postgres_url and not _uses_postgres(current):
        raise DagsterInstanceError(
            f"{POSTGRES_URL_ENV} is set but {target} (edited by hand, so kb leaves it alone) "
            f"keeps Dagster's storage elsewhere; add this section to it:\n"
            f"{POSTGRES_STORAGE_YAML.strip()}"
        )
    return home


def _written_by_kb(text: str) -> bool:
    """Whether a ``dagster.yaml`` is a copy kb wrote (this template, with or without the
    Postgres section, or an earlier template), not one a person edited."""
    template = template_yaml()
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return text in (template, template + POSTGRES_STORAGE_YAML) or digest in EARLIER_TEMPLATES


def _uses_postgres(text: str) -> bool:
    """Whether a ``dagster.yaml`` puts the instance's storage on Postgres."""
    try:
        config = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return False
    if not isinstance(config, dict):
        return False
    storage = config.get("storage")
    if isinstance(storage, dict) and "postgres" in storage:
        return True
    run_storage = config.get("run_storage")
    return isinstance(run_storage, dict) and str(run_storage.get("module", "")).startswith(
        "dagster_postgres"
    )


def instance_overrides(settings: Settings) -> dict[str, Any]:
    """What kb sets on top of the ``dagster.yaml`` when it opens the instance itself: the
    Postgres storage with the URL from ``settings`` (which a test may pass without the
    environment variable); nothing on SQLite.

    Raises:
        DagsterInstanceError: a bad ``KB_DAGSTER_POSTGRES_URL`` (``postgres_url``).
    """
    url = postgres_url(settings)
    return {"storage": {"postgres": {"postgres_url": url}}} if url else {}


def dagster_instance(settings: Settings) -> dg.DagsterInstance:
    """The persistent instance under ``KB_HOME/dagster``: run, event-log and schedule storage
    on SQLite there, or on Postgres with ``KB_DAGSTER_POSTGRES_URL`` (connections kept open:
    ``keep_connections``); the ``KB_*_POOL_LIMIT`` settings are written to it
    (``pools.apply_pool_limits``).

    Raises:
        DagsterInstanceError: see ``prepare_dagster_home`` and ``apply_pool_limits``.
    """
    home = prepare_dagster_home(settings)
    ref = InstanceRef.from_dir(str(home), overrides=instance_overrides(settings))
    instance = dg.DagsterInstance.from_ref(ref)
    if settings.dagster_postgres_url:
        keep_connections(instance)
    apply_pool_limits(instance, settings)
    return instance


#: Seconds a kept Postgres connection is reused before it is replaced, and connections opened
#: beside it when several threads read at once (closed again after use): the values
#: ``dagster-webserver`` uses (its ``--db-pool-recycle`` and ``--db-pool-max-overflow``).
POOL_RECYCLE_SECONDS = 3600
POOL_MAX_OVERFLOW = 20


def keep_connections(instance: dg.DagsterInstance) -> None:
    """Make a Postgres-backed ``instance`` keep one open connection per storage (run, event
    log, schedule) instead of opening one per query, as ``dagster-webserver`` does for itself
    (``DagsterInstance.optimize_for_webserver``), with no statement timeout (0: a build's
    queries run as long as they need). ``dagster-postgres`` otherwise connects for every query
    (``NullPool``), which was most of a batched run's time
    (benchmarks/results/partitions-2026-12-01-profile.md). A no-op on SQLite storage.
    """
    instance.optimize_for_webserver(
        statement_timeout=0, pool_recycle=POOL_RECYCLE_SECONDS, max_overflow=POOL_MAX_OVERFLOW
    )


def main() -> None:
    """``python -m kb_assets.instance`` (the deployments' ``init`` step): open the instance
    the environment's settings describe — writing its ``dagster.yaml``, creating Dagster's
    tables on Postgres, writing the ``KB_*_POOL_LIMIT`` limits — and print one JSON line
    with its storage and pool limits (``{"storage": "postgres", "pools": {"llm": 4}}``).

    Raises:
        DagsterInstanceError: see ``dagster_instance``.
    """
    settings = Settings()
    instance = dagster_instance(settings)
    try:
        pools = {p.name: p.limit for p in instance.event_log_storage.get_pool_limits()}
    finally:
        instance.dispose()
    storage = "postgres" if settings.dagster_postgres_url else "sqlite"
    print(json.dumps({"storage": storage, "pools": dict(sorted(pools.items()))}))


if __name__ == "__main__":
    main()
