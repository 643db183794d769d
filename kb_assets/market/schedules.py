"""The market-data schedules. Both start RUNNING, so ``kb ui``'s daemon runs them; a tick
whose source is not configured returns a ``SkipReason`` naming the setting (a skipped tick,
no run), so an unconfigured install sees no failed runs."""

# No `from __future__ import annotations` in asset, op and sensor modules: Dagster reads the
# parameter annotations as classes when it decorates them, to find config and resources.

import dagster as dg

from kb_assets.constants import AER_SYNC_SCHEDULE, NOTION_SYNC_SCHEDULE
from kb_assets.market.assets import AER_UNCONFIGURED, notion_unconfigured
from kb_assets.market.jobs import aer_sync_job, notion_sync_job
from kb_assets.market.resources import NotionResource
from kb_assets.resources import StoresResource


@dg.schedule(
    name=AER_SYNC_SCHEDULE,
    job=aer_sync_job,
    cron_schedule="0 6 * * *",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description=(
        "Daily AER sync from KB_AER_SOURCE (the AER publishes quarterly; an unchanged source "
        "changes nothing). Skips its tick while KB_AER_SOURCE is unset."
    ),
)
def aer_sync_schedule(
    context: dg.ScheduleEvaluationContext, stores: StoresResource
) -> dg.RunRequest | dg.SkipReason:
    """A run of ``aer_sync`` when ``KB_AER_SOURCE`` is set; else a ``SkipReason`` naming it.
    The source itself (a URL, a missing path) is judged by the run, which fails saying why."""
    if not (stores.settings.aer_source or "").strip():
        return dg.SkipReason(AER_UNCONFIGURED)
    return dg.RunRequest()


@dg.schedule(
    name=NOTION_SYNC_SCHEDULE,
    job=notion_sync_job,
    cron_schedule="0 * * * *",
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description=(
        "Hourly Notion compliance-tracker sync. Skips its tick while NOTION_TOKEN or "
        "KB_NOTION_DATA_SOURCE_ID is unset."
    ),
)
def notion_sync_schedule(
    context: dg.ScheduleEvaluationContext, notion: NotionResource
) -> dg.RunRequest | dg.SkipReason:
    """A run of ``notion_sync`` when the tracker is configured; else a ``SkipReason`` naming
    each unset variable."""
    missing = notion.missing_settings()
    if missing:
        return dg.SkipReason(notion_unconfigured(missing))
    return dg.RunRequest()
