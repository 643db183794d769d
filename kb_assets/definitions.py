"""The Dagster code location (``workspace.yaml`` points here): assets, checks, jobs, sensor,
resources, and the in-process executor (one process per run: ~0.4 s of overhead per
document instead of ~30 s for a process per step, measured in notes/library-facts.md).

Resources: ``stores`` and ``providers`` read the environment (``KB_*``) unless their config
says otherwise (Launchpad, or run config from ``kb``'s own builds); ``blob_io`` uses the run's
``stores``, so it sees the same settings.
"""

from __future__ import annotations

from typing import Any

import dagster as dg

from kb_assets.assets import CORPUS_ASSETS
from kb_assets.constants import BUILD_JOB
from kb_assets.io_manager import BlobIOManager
from kb_assets.jobs import add_documents_job, build_documents_job
from kb_assets.resources import Providers, ProvidersResource, StoresResource
from kb_assets.sensors import intake_sensor


def kb_resources(stores: StoresResource, providers: Providers) -> dict[str, Any]:
    """The code location's resource set: ``stores``, ``providers`` and ``blob_io`` on ``stores``
    (tests pass configured stores and fake providers here)."""
    return {"stores": stores, "providers": providers, "blob_io": BlobIOManager(stores=stores)}


defs = dg.Definitions(
    assets=CORPUS_ASSETS,
    jobs=[build_documents_job, add_documents_job],
    sensors=[intake_sensor],
    # configured at launch, so blob_io's dependency is the run's own `stores` resource
    resources=kb_resources(StoresResource.configure_at_launch(), ProvidersResource()),
    executor=dg.in_process_executor,
)


def build_job() -> dg.JobDefinition:
    """The resolved build job; ``dagster.reconstructable(build_job)`` is what the CLI runs
    with ``execute_job`` so runs land in the instance and can be re-executed from failure."""
    return defs.resolve_job_def(BUILD_JOB)
