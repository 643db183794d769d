"""One job per market-data sync: the asset and its checks (what the schedules and
``kb sync`` run)."""

from __future__ import annotations

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
