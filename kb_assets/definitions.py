"""The Dagster code location (``workspace.yaml`` points here): the corpus assets and the
market-data assets (``kb_assets.market``), checks, jobs, sensor, schedules, resources, and the
in-process executor (one process per run instead of one per step, which Dagster's default
multiprocess executor spawns at ~5 s each on this kind of machine).

Resources: ``stores``, ``providers`` and ``notion`` read the environment (``KB_*``,
``NOTION_TOKEN``) unless their config says otherwise (Launchpad, or run config from ``kb``'s
own builds); ``blob_io`` uses the run's ``stores``, so it sees the same settings.

Nothing in kb imports this module: the jobs runs are started with (``kb_assets.jobs.build_job``,
``kb_assets.market.jobs``) resolve their own definitions from the same parts.
"""

from __future__ import annotations

import warnings
import dagster as dg

from kb_assets.assets import CORPUS_ASSETS
from kb_assets.backfill import batch_failures_sensor
from kb_assets.jobs import add_documents_job, build_documents_job, launch_resources
from kb_assets.market import MARKET_ASSETS, MARKET_CHECKS, MARKET_JOBS, MARKET_SCHEDULES
from kb_assets.quality import QUALITY_ASSETS, QUALITY_CHECKS, quality_automation_sensor
from kb_assets.references import index_references_job, reference_sensor
from kb_assets.request_jobs import approve_document_request_job
from kb_assets.sensors import intake_sensor

# Dagster 1.13 passes its own empty ``owners`` when it binds the intake sensor to the resolved
# jobs, then warns that the parameter is in beta on every load; kb sets no owners.
warnings.filterwarnings(
    "ignore",
    message=r"Parameter `owners` of initializer `SensorDefinition.__init__`",
    category=dg.BetaWarning,
)


defs = dg.Definitions(
    assets=[*CORPUS_ASSETS, *MARKET_ASSETS, *QUALITY_ASSETS],
    asset_checks=[*MARKET_CHECKS, *QUALITY_CHECKS],
    jobs=[
        build_documents_job, add_documents_job, approve_document_request_job,
        index_references_job, *MARKET_JOBS,
    ],
    sensors=[intake_sensor, reference_sensor, quality_automation_sensor, batch_failures_sensor],
    schedules=MARKET_SCHEDULES,
    # configured at launch, so blob_io's dependency is the run's own `stores` resource
    resources=launch_resources(),
    executor=dg.in_process_executor,
)
