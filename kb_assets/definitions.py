"""The Dagster code location (``workspace.yaml`` points here): assets, checks, jobs, sensor,
resources, and the in-process executor (one process per run: ~0.4 s of overhead per
document instead of ~30 s for a process per step, measured in notes/library-facts.md)."""

from __future__ import annotations

import dagster as dg

from kb_assets.assets import CORPUS_ASSETS
from kb_assets.constants import BUILD_JOB
from kb_assets.io_manager import BlobIOManager
from kb_assets.jobs import add_documents_job, build_documents_job
from kb_assets.resources import ProvidersResource, StoresResource
from kb_assets.sensors import intake_sensor

defs = dg.Definitions(
    assets=CORPUS_ASSETS,
    jobs=[build_documents_job, add_documents_job],
    sensors=[intake_sensor],
    resources={
        "stores": StoresResource(),
        "providers": ProvidersResource(),
        "blob_io": BlobIOManager(),
    },
    executor=dg.in_process_executor,
)


def build_job() -> dg.JobDefinition:
    """The resolved build job; ``dagster.reconstructable(build_job)`` is what the CLI runs
    with ``execute_job`` so runs land in the instance and can be re-executed from failure."""
    return defs.resolve_job_def(BUILD_JOB)
