"""Benchmark — what ``operations.recover_interrupted`` adds to each intake-sensor tick when
there is nothing to recover (issue 16: the sensor runs it before requesting runs).

Run from the repository root (not part of the unit test run; about a minute)::

    .venv/bin/python -m benchmarks.sensor_recovery
    .venv/bin/python -m benchmarks.sensor_recovery --documents 100 1000 --repeats 20

For each corpus size it writes a ``KB_HOME`` under ``benchmarks/work/sensor_recovery`` with
that many catalog rows (ready, version 1), a local blob store holding each document's PDF,
Markdown and ``--figures`` figure files, and a Dagster instance with one finished run per
document; then it times ``recover_interrupted`` alone and a whole ``intake_sensor`` tick
(``--repeats`` times each). The report goes to ``benchmarks/results/sensor-recovery-<date>.md``.
"""

from __future__ import annotations

import argparse
import hashlib

import dagster as dg

from benchmarks.common import (
    LATENCY_HEADERS,
    Report,
    Stopwatch,
    fresh_dir,
    kb_environment,
    latency_summary,
    log,
)
from kb_assets import operations
from kb_assets.instance import dagster_instance
from kb_assets.resources import StoresResource
from kb_assets.sensors import intake_sensor
from kb_shared import identity
from kb_shared.settings import Settings


def _write_home(documents: int, figures: int) -> tuple[StoresResource, dg.DagsterInstance]:
    """A ``KB_HOME`` with ``documents`` ready documents, their blobs and finished runs."""
    home = fresh_dir(f"sensor_recovery/{documents}")
    settings = Settings(home=home)
    stores = StoresResource(home=str(home))
    catalog, blobs = stores.catalog(), stores.blobs()
    instance = dagster_instance(settings)
    for n in range(documents):
        name = f"Document {n:05d}.pdf"
        doc = identity.doc_id(name)
        sha = hashlib.sha256(name.encode()).hexdigest()
        blobs.put(f"pdfs/{doc}.pdf", b"%PDF-1.7\n%%EOF\n")
        blobs.put(f"markdown/{doc}.md", b"# heading\n")
        for f in range(figures):
            blobs.put(f"figures/{doc}/{f}.png", b"png")
        catalog.add_pending(name, doc, sha, 15, f"pdfs/{doc}.pdf")
        catalog.mark_ready(doc, pages=1, chunk_count=1)
        instance.add_run(dg.DagsterRun(
            job_name="build_documents", run_id=sha[:32], status=dg.DagsterRunStatus.SUCCESS,
            tags={operations.PARTITION_TAG: doc},
        ))
    return stores, instance


def main() -> None:
    """Parse the options, time both paths per corpus size, write the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--figures", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    report = Report("sensor-recovery", "Crash recovery on each intake-sensor tick")
    report.fact("figure files per document", args.figures)
    rows = []
    for documents in args.documents:
        log(f"{documents} documents: writing the home")
        stores, instance = _write_home(documents, args.figures)
        with kb_environment(stores.settings.home):
            recover, tick = [], []
            for _ in range(args.repeats):
                with Stopwatch() as watch:
                    assert operations.recover_interrupted(stores, instance) == []
                recover.append(watch.seconds)
                with dg.build_sensor_context(
                    instance=instance, resources={"stores": stores}
                ) as context, Stopwatch() as watch:
                    intake_sensor(context)
                tick.append(watch.seconds)
        stores.close()
        files = documents * (2 + args.figures)
        rows.append([documents, files, "recover_interrupted", *latency_summary(recover).cells()])
        rows.append([documents, files, "whole tick", *latency_summary(tick).cells()])
    report.heading("Time per call, nothing to recover")
    report.table(("documents", "blob files", "what", *LATENCY_HEADERS), rows)
    report.write()


if __name__ == "__main__":
    main()
