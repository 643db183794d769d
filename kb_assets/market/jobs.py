"""One job per market-data sync: the asset and its checks (what the schedules and
``kb sync`` run), and each resolved on the jobs' resources for runs ``kb sync`` starts
(``dagster.reconstructable``)."""

from __future__ import annotations

import functools

import dagster as dg

from kb_assets.constants import AER_PERFORMANCE, AER_SYNC_JOB, COMPLIANCE_ACTIONS, NOTION_SYNC_JOB

aer_sync_job = dg.define_asset_job(
    AER_SYNC_JOB,
    selection=dg.AssetSelection.assets(AER_PERFORMANCE),
    description="Sync the AER retail-performance workbooks into aer_performance, then check "
    "the published totals.",
)

notion_sync_job = dg.define_asset_job(
    NOTION_SYNC_JOB,
    selection=dg.AssetSelection.assets(COMPLIANCE_ACTIONS),
    description="Sync the Notion compliance tracker into compliance_actions, then check the "
    "count.",
)


@functools.cache
def _sync_definitions() -> dg.Definitions:
    """The market assets, their checks and both sync jobs on the jobs' resources, once per
    process (imported here, not at the top: ``kb_assets.market`` imports this module)."""
    from kb_assets.jobs import launch_resources  # noqa: PLC0415
    from kb_assets.market.assets import aer_performance, compliance_actions  # noqa: PLC0415
    from kb_assets.market.checks import (  # noqa: PLC0415
        aer_totals_match_their_parts,
        compliance_count_matches_read,
    )

    return dg.Definitions(
        assets=[aer_performance, compliance_actions],
        asset_checks=[aer_totals_match_their_parts, compliance_count_matches_read],
        jobs=[aer_sync_job, notion_sync_job],
        resources=launch_resources(),
        executor=dg.in_process_executor,
    )


def resolved_aer_sync_job() -> dg.JobDefinition:
    """The resolved AER sync job (``kb sync aer`` runs it like ``kb_assets.jobs.build_job``)."""
    return _sync_definitions().resolve_job_def(AER_SYNC_JOB)


def resolved_notion_sync_job() -> dg.JobDefinition:
    """The resolved Notion sync job (``kb sync notion`` runs it like ``build_job``)."""
    return _sync_definitions().resolve_job_def(NOTION_SYNC_JOB)
