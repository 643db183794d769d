"""The pipeline's Dagster tests once more on Postgres storage (``KB_DAGSTER_POSTGRES_URL``,
``dagster-postgres``), issue 15: every test of ``test_assets.py`` runs here against an instance
whose runs, event log, partitions and pool slots live in a scratch Postgres database, and one
more test reads them back from that database with SQL.

Skips without ``KB_TEST_POSTGRES_URL`` (fails under ``KB_REQUIRE_SERVICES=1``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa

from kb_assets import operations
from kb_assets.constants import CORPUS_ASSETS, DOCUMENTS, PARTITION_TAG
from kb_assets.instance import dagster_instance
from kb_assets.pools import GRAPH_POOL, LLM_POOL, VECTORS_POOL
from kb_assets.resources import StoresResource
from kb_shared.settings import Settings
from kb_shared.stores.catalog import DocumentRow
from tests.assets.test_assets import (  # noqa: F401 - the suite re-run here, with its fixtures
    DOC,
    FAKE_JOB,
    admitted,
    fake_build_job,
    test_a_failing_asset_check_stops_the_build_and_records_why,
    test_a_shorter_document_replaces_its_chunks_and_deletes_the_stale_ones,
    test_an_empty_conversion_fails_at_chunks,
    test_build_writes_every_store,
    test_chunks_have_ids_heading_paths_and_page_spans,
    test_delete_leaves_nothing_behind,
    test_failed_embeddings_run_re_executes_from_failure,
    test_forced_rebuild_of_one_asset_loads_its_inputs_and_runs_nothing_upstream,
    test_markdown_converts_once_then_reuses_until_forced,
    test_markdown_refusal_fails_the_step_and_writes_no_reason,
    test_status_reads_only_and_repair_restores_a_lost_partition,
    test_the_failure_hook_records_the_step_and_the_converters_reason,
    test_unchanged_document_costs_no_provider_call,
)
from tests.assets.fake_providers import FakeProviders
from tests.conftest import postgres_url

pytestmark = [pytest.mark.slow, pytest.mark.services]


@pytest.fixture(scope="module")
def dagster_database() -> Iterator[str]:
    """A scratch database for the module's Dagster storage, as the ``postgresql+psycopg2://``
    URL ``KB_DAGSTER_POSTGRES_URL`` takes."""
    from benchmarks.postgres import scratch_database  # noqa: PLC0415

    with scratch_database(postgres_url(), "kb_test_dagster") as url:
        dagster_url = sa.make_url(url).set(drivername="postgresql+psycopg2")
        yield dagster_url.render_as_string(hide_password=False)


@pytest.fixture
def settings(tmp_path: Path, dagster_database: str) -> Settings:
    """Settings of a Postgres-backed instance with every pool limited to one step."""
    return Settings(
        home=tmp_path / "instance",
        dagster_postgres_url=dagster_database,
        llm_pool_limit=1,
        vectors_pool_limit=1,
        graph_pool_limit=1,
    )


@pytest.fixture
def instance(settings: Settings) -> Iterator[dg.DagsterInstance]:
    """Overrides ``test_assets.instance``: the Postgres-backed instance, emptied afterwards
    (runs, events, partitions and pool limits) so each test starts from nothing."""
    opened = dagster_instance(settings)
    assert type(opened.run_storage).__name__ == "PostgresRunStorage"
    yield opened
    opened.wipe()
    opened.dispose()


def test_runs_events_partitions_and_pools_are_rows_in_postgres(
    admitted: DocumentRow,
    stores: StoresResource,
    instance: dg.DagsterInstance,
    dagster_database: str,
) -> None:
    providers = FakeProviders()
    FAKE_JOB.update(stores=stores, providers=providers)
    result = operations.run_build(instance, DOC, job=fake_build_job)
    assert result.success, operations.failure_reason(result)
    assert stores.catalog().get(DOC).status == "ready"

    engine = sa.create_engine(dagster_database)
    try:
        with engine.connect() as conn:
            runs = conn.execute(sa.text("SELECT run_id, status FROM runs")).all()
            partitions = conn.execute(
                sa.text("SELECT partition FROM dynamic_partitions WHERE partitions_def_name = :n"),
                {"n": DOCUMENTS},
            ).scalars().all()
            materialized = conn.execute(
                sa.text(
                    "SELECT asset_key, partition FROM event_logs "
                    "WHERE run_id = :r AND dagster_event_type = 'ASSET_MATERIALIZATION'"
                ),
                {"r": result.run_id},
            ).all()
            limits = {
                key: limit
                for key, limit in conn.execute(
                    sa.text('SELECT concurrency_key, "limit" FROM concurrency_limits')
                )
            }
            held = conn.execute(
                sa.text(
                    "SELECT count(*) FROM concurrency_slots "
                    "WHERE run_id IS NOT NULL AND NOT deleted"
                )
            ).scalar_one()
    finally:
        engine.dispose()
    assert runs == [(result.run_id, "SUCCESS")]
    assert partitions == [DOC]
    assert sorted(materialized) == sorted((f'["{name}"]', DOC) for name in CORPUS_ASSETS)
    assert limits == {LLM_POOL: 1, VECTORS_POOL: 1, GRAPH_POOL: 1}
    assert held == 0  # every step gave its pool slot back
    (run,) = instance.get_runs(filters=dg.RunsFilter(tags={PARTITION_TAG: DOC}))
    assert run.run_id == result.run_id
