"""Structured market data in Dagster: the ``aer_performance`` and ``compliance_actions``
assets (group ``market_data``), their checks, jobs and schedules, and the Notion resource.
The reading, mapping and tables are in ``kb_shared.market`` and ``kb_shared.stores.catalog``.
"""

from kb_assets.market.assets import aer_performance, compliance_actions
from kb_assets.market.checks import aer_totals_match_their_parts, compliance_count_matches_read
from kb_assets.market.jobs import aer_sync_job, notion_sync_job
from kb_assets.market.schedules import aer_sync_schedule, notion_sync_schedule

MARKET_ASSETS = [aer_performance, compliance_actions]
MARKET_CHECKS = [aer_totals_match_their_parts, compliance_count_matches_read]
MARKET_JOBS = [aer_sync_job, notion_sync_job]
MARKET_SCHEDULES = [aer_sync_schedule, notion_sync_schedule]

__all__ = ["MARKET_ASSETS", "MARKET_CHECKS", "MARKET_JOBS", "MARKET_SCHEDULES"]
