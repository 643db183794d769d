"""The market-data schedules. Both start RUNNING, so ``kb ui``'s daemon runs them; a tick
whose source is not configured returns a ``SkipReason`` naming the setting (a skipped tick,
no run), so an unconfigured install sees no failed runs."""

# No `from __future__ import annotations` in asset, op and sensor modules: Dagster reads the
# parameter annotations as classes when it decorates them, to find config and resources.

from collections.abc import Callable
from typing import Any

import dagster as dg

from kb_assets.constants import (
    AER_SYNC_JOB,
    AER_SYNC_SCHEDULE,
    NOTION_SYNC_JOB,
    NOTION_SYNC_SCHEDULE,
)
from kb_assets.market.assets import AER_UNCONFIGURED, notion_unconfigured
from kb_assets.market.resources import NotionResource
from kb_assets.resources import StoresResource


def sync_schedule(
    name: str, *, job_name: str, cron_schedule: str, description: str
) -> Callable[[Callable[..., Any]], dg.ScheduleDefinition]:
    """``@dg.schedule`` for a market-data sync: runs the job ``job_name`` on ``cron_schedule``
    and starts RUNNING. The decorated function returns ``run_unless(...)``."""
    return dg.schedule(
        name=name,
        job_name=job_name,
        cron_schedule=cron_schedule,
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=description,
    )


def run_unless(unconfigured: str | None) -> dg.RunRequest | dg.SkipReason:
    """A tick's answer: a ``SkipReason`` with the message ``unconfigured`` (the unset settings
    named), or a run when it is ``None``."""
    return dg.SkipReason(unconfigured) if unconfigured else dg.RunRequest()


@sync_schedule(
    AER_SYNC_SCHEDULE,
    job_name=AER_SYNC_JOB,
    cron_schedule="0 6 * * *",
    description=(
        "Daily AER sync from KB_AER_SOURCE (the AER publishes quarterly; an unchanged source "
        "changes nothing). Skips its tick while KB_AER_SOURCE is unset."
    ),
)
def aer_sync_schedule(
    context: dg.ScheduleEvaluationContext, stores: StoresResource
) -> dg.RunRequest | dg.SkipReason:
    """A run of ``aer_sync`` when ``KB_AER_SOURCE`` is set; else a ``SkipReason`` naming it.
    The source itself (a release page URL, a workbook, a folder) is read by the run, which
    fails saying why when it cannot be (a refused download, a missing path)."""
    return run_unless(None if (stores.settings.aer_source or "").strip() else AER_UNCONFIGURED)


@sync_schedule(
    NOTION_SYNC_SCHEDULE,
    job_name=NOTION_SYNC_JOB,
    cron_schedule="0 * * * *",
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
    return run_unless(notion_unconfigured(missing) if missing else None)
