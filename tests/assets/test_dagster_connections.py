"""kb's Postgres-backed Dagster instance keeps its connections open (``instance.
keep_connections``, issue 15): reads reuse one backend instead of connecting per query.

Skips without ``KB_TEST_POSTGRES_URL`` (fails under ``KB_REQUIRE_SERVICES=1``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest
import sqlalchemy as sa

from kb_assets.constants import DOCUMENTS
from kb_assets.instance import dagster_instance
from kb_assets.partitions import add_document_partitions
from kb_shared.settings import Settings
from tests.conftest import postgres_url

pytestmark = [pytest.mark.services]


@pytest.fixture(scope="module")
def database() -> Iterator[tuple[str, str]]:
    """A scratch database: (its ``postgresql+psycopg2://`` URL for Dagster, its name)."""
    from benchmarks.postgres import scratch_database  # noqa: PLC0415

    with scratch_database(postgres_url(), "kb_test_dagster_conn") as url:
        parsed = sa.make_url(url)
        yield (
            parsed.set(drivername="postgresql+psycopg2").render_as_string(hide_password=False),
            str(parsed.database),
        )


def backends(database: str) -> set[int]:
    """Process ids of the server's connections to ``database`` (not this query's own)."""
    engine = sa.create_engine(postgres_url(), poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            return set(conn.execute(
                sa.text("SELECT pid FROM pg_stat_activity WHERE datname = :name "
                        "AND pid <> pg_backend_pid()"),
                {"name": database},
            ).scalars())
    finally:
        engine.dispose()


@pytest.fixture
def instance(tmp_path: Path, database: tuple[str, str]) -> Iterator[dg.DagsterInstance]:
    opened = dagster_instance(Settings(home=tmp_path / "home", dagster_postgres_url=database[0]))
    yield opened
    opened.wipe()
    opened.dispose()


def test_reads_reuse_the_kept_connections(
    instance: dg.DagsterInstance, database: tuple[str, str]
) -> None:
    add_document_partitions(instance, ["a.pdf", "b.pdf"])
    instance.get_runs(limit=1)
    before = backends(database[1])
    for _ in range(30):
        assert instance.get_dynamic_partitions(DOCUMENTS) == ["a.pdf", "b.pdf"]
        assert instance.has_dynamic_partition(DOCUMENTS, "b.pdf")
        assert instance.get_runs(limit=1) == []
    after = backends(database[1])
    # one kept connection each for the event log (partitions) and the run storage, and the
    # same ones throughout: 90 reads opened no new connection
    assert len(before) >= 2
    assert after == before
