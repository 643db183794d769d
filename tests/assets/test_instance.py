"""The Dagster instance kb opens (issue 15): its ``dagster.yaml`` following
``KB_DAGSTER_POSTGRES_URL``, the run queue and pool settings, pool limits from settings,
partitions added in batches, and the pools and backfill policy of the corpus assets.
The same on real Postgres storage is in ``test_dagster_postgres.py``."""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from kb_assets.assets import CORPUS_ASSETS
from kb_assets.assets.common import BACKFILL_POLICY
from kb_assets.constants import DOCUMENTS
from kb_assets.instance import (
    POSTGRES_STORAGE_YAML,
    dagster_instance,
    instance_overrides,
    main as instance_main,
    prepare_dagster_home,
    template_yaml,
)
from kb_assets.partitions import add_document_partitions
from kb_shared.errors import DagsterInstanceError
from kb_shared.settings import Settings

PG_URL = "postgresql+psycopg2://dagster:s3cret-pw@db.internal:5432/dagster"

#: kb's dagster.yaml as shipped on 2026-12-01 before issue 15 (`git show a7aca03:dagster.yaml`).
PREVIOUS_TEMPLATE = (
    '# Dagster instance settings for kb. `kb` and `make demo` copy this file into\n'
    '# $KB_HOME/dagster (DAGSTER_HOME), where the instance keeps its SQLite run and event'
    ' storage.\n'
    'telemetry:\n'
    '  enabled: false\n'
    '\n'
    '# No "join the community" dialog over every page of the UI on a fresh instance.\n'
    'nux:\n'
    '  enabled: false\n'
    '\n'
    '# One run at a time: the embedded vector index is a single-writer SQLite file and the\n'
    '# machine has 2 cores. Raise it only with server backends (Postgres, Qdrant, Neo4j).\n'
    'run_coordinator:\n'
    '  module: dagster._core.run_coordinator\n'
    '  class: QueuedRunCoordinator\n'
    '  config:\n'
    '    max_concurrent_runs: 1\n'
    '\n'
    'run_monitoring:\n'
    '  enabled: false\n'
    '\n'
    "# Step stdout/stderr are not captured to files: kb's steps report through the structured\n"
    '# event log (metadata, context.log), and capture spawns `tail` processes for every step of\n'
    "# every in-process run (`kb build`). Structured logs stay visible in the UI's run view.\n"
    'compute_logs:\n'
    '  module: dagster._core.storage.noop_compute_log_manager\n'
    '  class: NoOpComputeLogManager\n'
)


def limits(instance: dg.DagsterInstance) -> dict[str, int]:
    return {p.name: p.limit for p in instance.event_log_storage.get_pool_limits()}


def test_embedded_instance_queues_one_run_and_caps_backfill_runs(tmp_path: Path) -> None:
    instance = dagster_instance(Settings(home=tmp_path))
    assert type(instance.run_storage).__name__ == "SqliteRunStorage"
    assert isinstance(instance.run_coordinator, dg.QueuedRunCoordinator)
    config = instance.get_concurrency_config()
    assert config.run_queue_config.max_concurrent_runs == 1
    assert list(config.run_queue_config.tag_concurrency_limits) == [
        {"key": "dagster/backfill", "limit": 1}
    ]
    assert config.pool_config.pool_granularity.value == "op"
    assert limits(instance) == {}  # no KB_*_POOL_LIMIT set: no pool holds a step back
    assert (tmp_path / "dagster" / "dagster.yaml").read_text() == template_yaml()


def test_pool_limits_from_settings_are_written_and_a_pool_left_unset_is_kept(
    tmp_path: Path,
) -> None:
    instance = dagster_instance(Settings(home=tmp_path, vectors_pool_limit=1, llm_pool_limit=3))
    assert limits(instance) == {"vectors": 1, "llm": 3}
    instance.event_log_storage.set_concurrency_slots("graph", 2)  # set by hand (UI / CLI)
    again = dagster_instance(Settings(home=tmp_path, vectors_pool_limit=2))
    assert limits(again) == {"vectors": 2, "llm": 3, "graph": 2}


def test_pool_limits_are_checked_by_settings() -> None:
    with pytest.raises(ValueError, match="KB_VECTORS_POOL_LIMIT=0 is not valid"):
        Settings(vectors_pool_limit=0)


def test_the_postgres_url_adds_a_storage_section_that_reads_it_from_the_environment(
    tmp_path: Path,
) -> None:
    home = prepare_dagster_home(Settings(home=tmp_path, dagster_postgres_url=PG_URL))
    text = (home / "dagster.yaml").read_text()
    assert text == template_yaml() + POSTGRES_STORAGE_YAML
    assert "env: KB_DAGSTER_POSTGRES_URL" in text and "s3cret-pw" not in text
    assert instance_overrides(Settings(home=tmp_path, dagster_postgres_url=PG_URL)) == {
        "storage": {"postgres": {"postgres_url": PG_URL}}
    }
    # unset again: kb's own copy goes back to SQLite storage
    prepare_dagster_home(Settings(home=tmp_path))
    assert (home / "dagster.yaml").read_text() == template_yaml()
    assert instance_overrides(Settings(home=tmp_path)) == {}


@pytest.mark.parametrize(
    "url",
    ["postgresql://dagster:pw@db/dagster", "postgresql+psycopg://dagster:pw@db/dagster", "db:5432"],
)
def test_a_url_dagster_postgres_cannot_use_is_refused_before_anything_is_written(
    tmp_path: Path, url: str
) -> None:
    with pytest.raises(DagsterInstanceError, match=r"must be a postgresql\+psycopg2:// URL"):
        prepare_dagster_home(Settings(home=tmp_path, dagster_postgres_url=url))
    assert not (tmp_path / "dagster").exists()


def test_an_edited_yaml_is_left_alone_and_a_postgres_url_it_ignores_is_an_error(
    tmp_path: Path,
) -> None:
    home = prepare_dagster_home(Settings(home=tmp_path))
    edited = template_yaml().replace("max_concurrent_runs: 1", "max_concurrent_runs: 4")
    (home / "dagster.yaml").write_text(edited)
    prepare_dagster_home(Settings(home=tmp_path))
    assert (home / "dagster.yaml").read_text() == edited
    with pytest.raises(DagsterInstanceError, match="edited by hand") as caught:
        prepare_dagster_home(Settings(home=tmp_path, dagster_postgres_url=PG_URL))
    assert "env: KB_DAGSTER_POSTGRES_URL" in str(caught.value)
    assert (home / "dagster.yaml").read_text() == edited
    # with the section added by hand it opens as before
    (home / "dagster.yaml").write_text(edited + POSTGRES_STORAGE_YAML)
    assert prepare_dagster_home(Settings(home=tmp_path, dagster_postgres_url=PG_URL)) == home


def test_a_copy_of_an_earlier_template_is_kbs_own_and_brought_up_to_date(tmp_path: Path) -> None:
    home = tmp_path / "dagster"
    home.mkdir()
    (home / "dagster.yaml").write_text(PREVIOUS_TEMPLATE)
    prepare_dagster_home(Settings(home=tmp_path, dagster_postgres_url=PG_URL))
    assert (home / "dagster.yaml").read_text() == template_yaml() + POSTGRES_STORAGE_YAML


class CountingInstance:
    """Records each ``add_dynamic_partitions`` call of a real instance."""

    def __init__(self, instance: dg.DagsterInstance) -> None:
        self.instance = instance
        self.calls: list[int] = []

    def add_dynamic_partitions(self, name: str, keys: list[str]) -> None:
        self.calls.append(len(keys))
        self.instance.add_dynamic_partitions(name, keys)


def test_partitions_are_added_in_batches_in_order(tmp_path: Path) -> None:
    instance = dagster_instance(Settings(home=tmp_path))
    keys = [f"doc-{n:05d}.pdf" for n in range(1201)]
    counting = CountingInstance(instance)
    assert add_document_partitions(counting, keys) == 3  # type: ignore[arg-type]
    assert counting.calls == [500, 500, 201]
    assert instance.get_dynamic_partitions(DOCUMENTS) == keys
    # adding some again (and one new) keeps the existing ones once
    assert add_document_partitions(instance, [*keys[:3], "doc-new.pdf"], batch=2) == 2
    assert instance.get_dynamic_partitions(DOCUMENTS) == [*keys, "doc-new.pdf"]
    assert add_document_partitions(instance, []) == 0
    with pytest.raises(ValueError, match="at least 1, not 0"):
        add_document_partitions(instance, keys, batch=0)


def test_corpus_assets_join_their_pools_and_backfill_kb_backfill_batch_documents_per_run() -> None:
    pools = {asset.key.to_user_string(): asset.op.pool for asset in CORPUS_ASSETS}
    assert pools == {
        "markdown": "llm",
        "chunks": None,
        "obligations": None,  # cheap catalog writes, like chunks
        "changes": None,
        "embeddings": "vectors",
        "graph": "graph",
        "figures": "vectors",
        "record": None,
    }
    for asset in CORPUS_ASSETS:
        assert asset.backfill_policy == BACKFILL_POLICY
    # KB_BACKFILL_BATCH is unset in tests (conftest), so the default: 25 documents a run
    assert BACKFILL_POLICY.max_partitions_per_run == 25


def test_the_init_step_prepares_the_instance_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("KB_HOME", str(tmp_path))
    monkeypatch.setenv("KB_VECTORS_POOL_LIMIT", "2")
    monkeypatch.setenv("KB_GRAPH_POOL_LIMIT", "1")
    instance_main()
    assert json.loads(capsys.readouterr().out) == {
        "storage": "sqlite",
        "pools": {"graph": 1, "vectors": 2},
    }
    assert (tmp_path / "dagster" / "dagster.yaml").read_text() == template_yaml()
