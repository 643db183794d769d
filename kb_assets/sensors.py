"""The intake sensor: new PDFs in ``KB_HOME/inbox/`` are added, and every pending document
gets a build run."""


import shutil
from pathlib import Path

import dagster as dg

from kb_assets.constants import BUILD_JOB
from kb_assets.intake import ADDED, intake_files
from kb_assets.partitions import documents_partitions
from kb_assets.resources import StoresResource

#: Sub-folders of the inbox that processed files move to (never scanned again).
ADDED_DIR = "added"
REFUSED_DIR = "refused"


def _move(path: Path, folder: Path, reason: str = "") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / path.name
    if target.exists():
        target.unlink()
    shutil.move(str(path), target)
    if reason:
        (folder / f"{path.name}.reason.txt").write_text(reason + "\n", encoding="utf-8")


@dg.sensor(
    job_name=BUILD_JOB,
    minimum_interval_seconds=15,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Adds PDFs dropped in KB_HOME/inbox/ (moved to inbox/added or inbox/refused with a "
        ".reason.txt) and requests a build run for every pending document."
    ),
)
def intake_sensor(context: dg.SensorEvaluationContext, stores: StoresResource) -> dg.SensorResult:
    """One tick: intake the inbox, then one run request per pending document.

    Run keys are ``doc_id:sha256[:16]:created-at`` so a document is requested once per
    intake (Dagster skips a run key it has seen), and again only after delete + re-add.
    """
    settings = stores.settings
    inbox = settings.inbox
    inbox.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in inbox.iterdir() if p.is_file() and p.suffix.lower() == ".pdf")
    catalog = stores.catalog()
    added: list[str] = []
    if files:
        for outcome in intake_files(files, catalog, stores.blobs(), settings):
            path = Path(outcome.path)
            if outcome.status == ADDED and outcome.doc_id:
                added.append(outcome.doc_id)
                _move(path, inbox / ADDED_DIR)
            else:
                _move(path, inbox / REFUSED_DIR, f"{outcome.status}: {outcome.reason}")
            context.log.info("%s: %s %s", outcome.name, outcome.status, outcome.reason)
    new_keys = [k for k in added if not context.instance.has_dynamic_partition(
        documents_partitions.name, k)]
    run_requests = [
        dg.RunRequest(
            partition_key=row.doc_id,
            run_key=f"{row.doc_id}:{row.sha256[:16]}:{row.created_at.isoformat()}",
        )
        for row in catalog.list_documents(status="pending")
    ]
    return dg.SensorResult(
        run_requests=run_requests,
        dynamic_partitions_requests=(
            [documents_partitions.build_add_request(new_keys)] if new_keys else []
        ),
    )
