"""A document that fails inside a backfill's batch run launched by the Dagster daemon (a range
run without ``kb``'s process tag): ``batch_failures_sensor`` requests a run of its own, which
fails, so the partition shows failed in Dagster instead of materialised; the batch's failure
list is removed once read; ``kb``'s own batches are left to its driver. The range run is
started here with the tags the daemon gives it, on the fakes of ``tests/assets/test_backfill.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from kb_assets import backfill, operations
from kb_assets.assets import CORPUS_ASSETS
from kb_assets.constants import PARTITION_TAG, RECORD
from kb_assets.io_manager import RANGE_START_TAG, RUN_FAILURES, StepRecords
from kb_assets.partitions import documents_partitions
from kb_assets.resources import StoresResource
from kb_shared import layout
from tests.assets.test_backfill import DOCS, admit_three, fake_job

ASSET_NAMES = [asset.key.path[-1] for asset in CORPUS_ASSETS]


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.ephemeral() as instance:
        yield instance


def statuses(instance: dg.DagsterInstance, asset: str) -> dict[str, str]:
    found = instance.get_status_by_partition(dg.AssetKey(asset), list(DOCS), documents_partitions)
    return {doc: status.value for doc, status in (found or {}).items()}


def tick(instance: dg.DagsterInstance, stores: StoresResource, cursor: str | None = None):
    with dg.build_sensor_context(
        instance=instance, resources={"stores": stores}, cursor=cursor
    ) as context:
        return backfill.batch_failures_sensor(context)


def test_a_document_failed_in_a_daemon_batch_is_run_alone_and_shows_failed(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    stores = admit_three(tmp_path / "in", tmp_path / "kb", instance, broken=True)
    batch = dg.execute_job(  # as the daemon launches a BackfillPolicy.multi_run range run
        dg.reconstructable(fake_job), instance=instance,
        tags={RANGE_START_TAG: DOCS[0], backfill.RANGE_END_TAG: DOCS[-1]},
    )
    assert batch.success
    reason = stores.catalog().get(DOCS[1]).failure_reason
    assert reason.startswith("markdown: B Broken.pdf is truncated")
    blob = layout.asset_output_key(RUN_FAILURES, batch.run_id)
    assert stores.blobs().exists(blob)
    # the defect: Dagster shows the failed document materialised by the batch
    assert statuses(instance, RECORD) == dict.fromkeys(DOCS, "MATERIALIZED")

    first = tick(instance, stores)
    (request,) = first.run_requests
    assert (request.partition_key, request.run_key, request.job_name) == (
        DOCS[1], f"{batch.run_id}:{DOCS[1]}", "build_documents"
    )
    assert request.tags == {backfill.BATCH_RUN_TAG: batch.run_id}
    assert sorted(k.path[-1] for k in request.asset_selection) == sorted(ASSET_NAMES)
    assert not stores.blobs().exists(blob)  # read once, then removed
    assert StepRecords(stores.blobs()).run_failures(batch.run_id) == {}

    alone = dg.execute_job(  # the requested run, as the daemon launches it
        dg.reconstructable(fake_job), instance=instance,
        tags={PARTITION_TAG: request.partition_key, **request.tags},
        asset_selection=list(request.asset_selection), run_config=request.run_config,
        raise_on_error=False,
    )
    assert not alone.success
    for asset in ASSET_NAMES:
        assert statuses(instance, asset) == {
            DOCS[0]: "MATERIALIZED", DOCS[1]: "FAILED", DOCS[2]: "MATERIALIZED"
        }, asset
    row = stores.catalog().get(DOCS[1])
    assert (row.status, row.failure_reason) == ("failed", reason)

    # the next tick: that single run is no batch, and the batch is not read again
    second = tick(instance, stores, first.cursor)
    assert second.run_requests == []
    assert float(second.cursor) > float(first.cursor)
    stores.close()


def test_kbs_own_batches_are_left_to_its_driver(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    stores = admit_three(tmp_path / "in", tmp_path / "kb", instance, broken=True)
    own = backfill.run_batch_build(instance, DOCS[0], DOCS[-1], settings=stores, job=fake_job)
    assert own.success and operations.PROCESS_TAG in own.dagster_run.tags
    result = tick(instance, stores)
    assert result.run_requests == []
    # the failure list stays for `kb rebuild --all`'s driver, which reads and removes it
    assert StepRecords(stores.blobs()).run_failures(own.run_id) == {
        DOCS[1]: stores.catalog().get(DOCS[1]).failure_reason
    }
    stores.close()
