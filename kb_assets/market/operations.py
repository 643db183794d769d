"""What ``kb sync`` does, as plain functions: run one market-data sync job in-process on the
instance (so the run, its metadata and its checks show in the Dagster UI, like ``kb build``'s
runs) and sum up what happened."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import dagster as dg

from kb_assets.constants import AER_PERFORMANCE, COMPLIANCE_ACTIONS
from kb_assets.market.assets import SKIPPED, SYNCED_AT
from kb_assets.market.jobs import resolved_aer_sync_job, resolved_notion_sync_job
from kb_assets.operations import QUIET_LOGGERS, failure_reason
from kb_assets.resources import SettingsResource

#: The job that syncs each market-data asset (module-level functions, for ``reconstructable``).
SYNC_JOBS: dict[str, Callable[[], dg.JobDefinition]] = {
    AER_PERFORMANCE: resolved_aer_sync_job,
    COMPLIANCE_ACTIONS: resolved_notion_sync_job,
}


class SyncStatus(StrEnum):
    """How a sync run ended: the asset ``synced``; ``skipped`` (its source is not
    configured; nothing written); ``failed`` (nothing written, ``reason`` says why)."""

    SYNCED = "synced"
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(frozen=True)
class CheckOutcome:
    """One asset check evaluated after the sync: its metadata as plain values."""

    name: str
    passed: bool
    severity: str
    description: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class SyncOutcome:
    """One sync run: ``metadata`` holds the materialisation's values (``synced_at`` as an
    aware datetime) or, for a failed run, the failure's; ``reason`` the skip or failure
    message; ``checks`` the asset checks that ran."""

    asset: str
    status: SyncStatus
    run_id: str
    reason: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    checks: tuple[CheckOutcome, ...] = ()

    @property
    def failed_checks(self) -> list[CheckOutcome]:
        """Checks that failed with severity ERROR."""
        return [c for c in self.checks if not c.passed and c.severity == "ERROR"]


def plain(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Metadata values without their Dagster wrappers; ``synced_at`` as an aware datetime."""
    values = {key: getattr(value, "value", value) for key, value in metadata.items()}
    stamp = values.get(SYNCED_AT)
    if isinstance(stamp, (int, float)):
        values[SYNCED_AT] = dt.datetime.fromtimestamp(stamp, tz=dt.UTC)
    return values


def run_sync(
    instance: dg.DagsterInstance,
    asset: str,
    *,
    config: Mapping[str, Any] | None = None,
    settings: Mapping[str, SettingsResource] | None = None,
) -> SyncOutcome:
    """Materialise one market-data asset (``aer_performance`` or ``compliance_actions``) as a
    run of its sync job, checks included.

    Args:
        config: the asset's run config (``{"sources": [...]}``, ``{"force": True}``).
        settings: resource key -> a resource whose ``home`` and ``overrides`` that run
            resource gets as run config (secrets stay in the environment); default: the
            environment's.

    Raises:
        KeyError: ``asset`` is not a market-data asset.
    """
    job = SYNC_JOBS[asset]
    run_config: dict[str, Any] = dict(QUIET_LOGGERS)
    if config:
        run_config["ops"] = {asset: {"config": dict(config)}}
    if settings:
        run_config["resources"] = {
            key: {"config": resource.launch_config()} for key, resource in settings.items()
        }
    result = dg.execute_job(dg.reconstructable(job), instance=instance, run_config=run_config)
    checks = tuple(
        CheckOutcome(
            name=e.check_name,
            passed=e.passed,
            severity=e.severity.value,
            description=e.description or "",
            metadata=plain(e.metadata),
        )
        for e in result.get_asset_check_evaluations()
    )
    if not result.success:
        details: dict[str, Any] = {}
        for event in result.get_step_failure_events():
            failure = event.step_failure_data.user_failure_data
            if failure is not None:
                details.update(plain(failure.metadata))
        return SyncOutcome(asset, SyncStatus.FAILED, result.run_id, failure_reason(result),
                           details, checks)
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        return SyncOutcome(asset, SyncStatus.SYNCED, result.run_id,
                           metadata=plain(materialization.metadata), checks=checks)
    reason = ""
    for event in result.get_asset_observation_events():
        observed = plain(event.asset_observation_data.asset_observation.metadata)
        reason = str(observed.get(SKIPPED, reason))
    return SyncOutcome(asset, SyncStatus.SKIPPED, result.run_id, reason, checks=checks)
