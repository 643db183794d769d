"""The market-data slice of the code location: its assets, checks, jobs and schedules load,
and each schedule's tick skips while its source is unset and requests a run once it is."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from kb_assets.constants import (
    AER_PERFORMANCE,
    AER_SYNC_JOB,
    AER_SYNC_SCHEDULE,
    COMPLIANCE_ACTIONS,
    MARKET_DATA_GROUP,
    NOTION_SYNC_JOB,
    NOTION_SYNC_SCHEDULE,
)
from kb_assets.definitions import defs
from kb_assets.market.resources import NotionResource
from kb_assets.market.schedules import aer_sync_schedule, notion_sync_schedule
from kb_assets.resources import StoresResource


def test_definitions_list_the_market_assets_checks_jobs_and_schedules() -> None:
    repo = defs.get_repository_def()
    graph = repo.asset_graph
    market = sorted(
        k.to_user_string() for k in graph.get_all_asset_keys()
        if graph.get(k).group_name == MARKET_DATA_GROUP
    )
    assert market == [AER_PERFORMANCE, COMPLIANCE_ACTIONS]
    for name in market:
        assert graph.get(dg.AssetKey(name)).partitions_def is None
    checks = sorted(
        f"{k.asset_key.to_user_string()}:{k.name}" for k in graph.asset_check_keys
        if k.asset_key.to_user_string() in market
    )
    assert checks == [
        "aer_performance:aer_totals_match_their_parts",
        "compliance_actions:compliance_count_matches_read",
    ]
    schedules = {s.name: s for s in repo.schedule_defs}
    assert sorted(schedules) == [AER_SYNC_SCHEDULE, NOTION_SYNC_SCHEDULE]
    assert (schedules[AER_SYNC_SCHEDULE].cron_schedule,
            schedules[AER_SYNC_SCHEDULE].job_name) == ("0 6 * * *", AER_SYNC_JOB)
    assert (schedules[NOTION_SYNC_SCHEDULE].cron_schedule,
            schedules[NOTION_SYNC_SCHEDULE].job_name) == ("0 * * * *", NOTION_SYNC_JOB)
    for schedule in schedules.values():
        assert schedule.default_status == dg.DefaultScheduleStatus.RUNNING
    aer_job = repo.get_job(AER_SYNC_JOB)
    assert {k.to_user_string() for k in aer_job.asset_layer.selected_asset_keys} == {
        AER_PERFORMANCE}
    notion_job = repo.get_job(NOTION_SYNC_JOB)
    assert {k.to_user_string() for k in notion_job.asset_layer.selected_asset_keys} == {
        COMPLIANCE_ACTIONS}


def _tick(schedule: dg.ScheduleDefinition, **resources: object) -> object:
    with dg.build_schedule_context(resources=resources) as context:
        return schedule(context)


def test_aer_schedule_skips_until_the_source_is_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    skipped = _tick(aer_sync_schedule, stores=StoresResource())
    assert isinstance(skipped, dg.SkipReason)
    assert skipped.skip_message.startswith("no AER source: set KB_AER_SOURCE")
    monkeypatch.setenv("KB_AER_SOURCE", str(tmp_path / "aer"))
    requested = _tick(aer_sync_schedule, stores=StoresResource())
    assert isinstance(requested, dg.RunRequest)
    assert requested.run_config == {}  # the run reads KB_AER_SOURCE itself


def test_notion_schedule_skips_until_token_and_source_are_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("NOTION_TOKEN", raising=False)
    skipped = _tick(notion_sync_schedule, notion=NotionResource())
    assert isinstance(skipped, dg.SkipReason)
    assert skipped.skip_message == (
        "the Notion sync needs NOTION_TOKEN and KB_NOTION_DATA_SOURCE_ID: set them "
        "(README, settings table)"
    )
    monkeypatch.setenv("NOTION_TOKEN", "ntn_x")
    only_id = _tick(notion_sync_schedule, notion=NotionResource())
    assert isinstance(only_id, dg.SkipReason)
    assert only_id.skip_message.startswith("the Notion sync needs KB_NOTION_DATA_SOURCE_ID: set it")
    monkeypatch.setenv("KB_NOTION_DATA_SOURCE_ID", "0f1e2d3c-4b5a-4968-8778-695a4b3c2d1e")
    assert isinstance(_tick(notion_sync_schedule, notion=NotionResource()), dg.RunRequest)
