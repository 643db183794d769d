"""The Dagster code location (``workspace.yaml`` points here): the corpus assets and the
market-data assets (``kb_assets.market``), checks, jobs, sensor, schedules, resources, and the
in-process executor (one process per run instead of one per step, which Dagster's default
multiprocess executor spawns at ~5 s each on this kind of machine).

Resources: ``stores``, ``providers`` and ``notion`` read the environment (``KB_*``,
``NOTION_TOKEN``) unless their config says otherwise (Launchpad, or run config from ``kb``'s
own builds); ``blob_io`` uses the run's ``stores``, so it sees the same settings.
"""

from __future__ import annotations

import warnings
from typing import Any

import dagster as dg

from kb_assets.assets import CORPUS_ASSETS
from kb_assets.backfill import batch_failures_sensor
from kb_assets.constants import AER_SYNC_JOB, BLOB_IO, BUILD_JOB, NOTION_SYNC_JOB
from kb_assets.io_manager import BlobIOManager
from kb_assets.jobs import add_documents_job, build_documents_job
from kb_assets.market import MARKET_ASSETS, MARKET_CHECKS, MARKET_JOBS, MARKET_SCHEDULES
from kb_assets.market.resources import NotionResource
from kb_assets.quality import QUALITY_ASSETS, QUALITY_CHECKS, quality_automation_sensor
from kb_assets.references import index_references_job, reference_sensor
from kb_assets.request_jobs import approve_document_request_job
from kb_assets.resources import Providers, ProvidersResource, StoresResource
from kb_assets.sensors import intake_sensor

# Dagster 1.13 passes its own empty ``owners`` when it binds the intake sensor to the resolved
# jobs, then warns that the parameter is in beta on every load; kb sets no owners.
warnings.filterwarnings(
    "ignore",
    message=r"Parameter `owners` of initializer `SensorDefinition.__init__`",
    category=dg.BetaWarning,
)


def kb_resources(
    stores: StoresResource, providers: Providers, notion: NotionResource | None = None
) -> dict[str, Any]:
    """The code location's resource set: ``stores``, ``providers``, ``blob_io`` on ``stores``
    and ``notion`` (default: from the environment); tests pass configured stores and fake
    providers here."""
    return {
        "stores": stores,
        "providers": providers,
        BLOB_IO: BlobIOManager(stores=stores),
        "notion": notion if notion is not None else NotionResource(),
    }


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
    resources=kb_resources(
        StoresResource.configure_at_launch(), ProvidersResource(), NotionResource()
    ),
    executor=dg.in_process_executor,
)


def build_job() -> dg.JobDefinition:
    """The resolved build job; ``dagster.reconstructable(build_job)`` is what the CLI runs
    with ``execute_job`` so runs land in the instance and can be re-executed from failure."""
    return defs.resolve_job_def(BUILD_JOB)


def aer_sync_job() -> dg.JobDefinition:
    """The resolved AER sync job (``kb sync aer`` runs it like ``build_job``)."""
    return defs.resolve_job_def(AER_SYNC_JOB)


def notion_sync_job() -> dg.JobDefinition:
    """The resolved Notion sync job (``kb sync notion`` runs it like ``build_job``)."""
    return defs.resolve_job_def(NOTION_SYNC_JOB)
