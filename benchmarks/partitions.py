"""``make bench-partitions``: 10,000 small documents on Postgres-backed Dagster, built through
the backfill path (issue 15, "10,000 documents, simulated").

The point is the orchestration, so the documents are generated ``.md`` files (no PDF
conversion) and the model roles are fast stand-ins defined here (``FastProviders``: a hashing
embedder, an extractor that finds nothing, no figures); the stores are the embedded defaults (SQLite
catalog, vector index and graph under a scratch ``KB_HOME``), Dagster's storage a scratch
database on the Postgres server of ``KB_DAGSTER_POSTGRES_URL`` (or ``KB_TEST_POSTGRES_URL``:
``source .ci/services.sh; kb_services_start``).

Phases, each timed, with the load average next to it:

1. admission (``intake.admit`` in chunks; the partition adds inside it timed apart);
2. the batched build ``kb rebuild --all`` runs (``backfill.build_batches`` in this process,
   ``KB_BACKFILL_BATCH`` documents a run, the batch size compared on a few hundred
   documents first) of every document but the ``--daemon-documents`` kept for phase 3, for
   at most ``--build-minutes`` (extrapolated to every document when the budget ends first),
   with the throughput of each ``PROGRESS_STEP`` documents;
3. a Dagster backfill from the daemon (``dagster-daemon`` + ``dagster-webserver`` on the same
   instance, a workspace loading ``bench_defs`` here) of the documents kept for it: queue
   and pool behaviour, runs/s, the GraphQL partition-status query the asset page makes, the
   daemon's and webserver's memory;
4. one asset (``embeddings``) re-run for every built document (all of them, no sample).

While 2-4 run, a second process (``sample``) times ``kb status`` (``operations.
document_status``) and the upload page's listing (``UploadService.documents``); p95s are
reported per phase (``split_by_phase``). The report: ``benchmarks/results/partitions-<date>.md``.

``profile`` (``--documents N [--snapshot] [--profile-out FILE]``) times one batched run on N
partitions instead: benchmarks/results/partitions-2026-12-01-profile.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import (
    LATENCY_HEADERS,
    REPO_ROOT,
    Report,
    fmt_bytes,
    fresh_dir,
    latency_summary,
    load_average,
    log,
    peak_rss_bytes,
)
from kb_shared.ingest.chunking import Chunk
from kb_shared.providers.base import (
    Contextualiser,
    Embedder,
    Extraction,
    FigureBox,
    FigureLocator,
    FigureRegion,
    GraphExtractor,
    HeadingPathContextualiser,
    MarkdownConverter,
)
from kb_shared.providers.text_markdown import TextMarkdownConverter

#: Environment variable naming this benchmark's KB_HOME to ``bench_defs`` (the code location
#: the daemon's runs load).
HOME_ENV = "KB_BENCH_PARTITIONS_HOME"


class HashEmbedder(Embedder):
    """Deterministic 32-d unit vectors from the SHA-256 of each text: no model, microseconds."""

    name = "bench-hash"
    model = "bench-hash-32"
    dimension = 32

    def embed_documents(self, texts: Sequence[str], titles: Sequence[str] | None = None) -> np.ndarray:
        """One vector per text, float32, L2-normalised (shape ``(len(texts), 32)``)."""
        rows = [np.frombuffer(hashlib.sha256(t.encode()).digest(), dtype=np.uint8) for t in texts]
        matrix = np.asarray(rows, dtype=np.float32).reshape(len(texts), 32) - 127.5
        return matrix / np.linalg.norm(matrix, axis=1, keepdims=True).clip(1e-6)

    def embed_query(self, text: str) -> np.ndarray:
        """The vector of ``text``, shape ``(32,)``."""
        return self.embed_documents([text])[0]


class NoRelations(GraphExtractor):
    """Nothing to extract: the graph step still replaces the document's (empty) edge set and
    runs its check, with no model."""

    name = "bench-no-relations"

    def _extract(self, document: str, title: str, chunks: Sequence[Chunk]) -> Extraction:
        """An empty ``Extraction``."""
        return Extraction(entities=(), relationships=())


class NoFigures(FigureLocator):
    """No figure anywhere (the generated documents are text)."""

    name = "bench-no-figures"

    def locate(self, pdf: bytes, regions: Sequence[FigureRegion]) -> list[FigureBox]:
        """Always ``[]``."""
        return []


def fast_providers() -> Any:
    """The ``providers`` resource of the benchmark's runs: ``FastProviders`` (a
    ``kb_assets.resources.Providers``)."""
    from kb_assets.resources import Providers  # noqa: PLC0415

    class FastProviders(Providers):
        """Text pass-through, ``HashEmbedder``, ``NoRelations``, ``NoFigures``."""

        def __init__(self) -> None:
            self._embedder = HashEmbedder()

        def converter(self) -> MarkdownConverter:
            return TextMarkdownConverter()

        def embedder(self) -> Embedder:
            return self._embedder

        def contextualiser(self) -> Contextualiser:
            return HeadingPathContextualiser()

        def extractor(self) -> GraphExtractor:
            return NoRelations()

        def figure_locator(self) -> FigureLocator:
            return NoFigures()

    return FastProviders()


def bench_definitions() -> Any:
    """The corpus assets and build job on ``FastProviders`` and the stores of
    ``$KB_BENCH_PARTITIONS_HOME``, in-process executor (what ``kb``'s code location has)."""
    import dagster as dg  # noqa: PLC0415

    from kb_assets.assets import CORPUS_ASSETS  # noqa: PLC0415
    from kb_assets.jobs import kb_resources  # noqa: PLC0415
    from kb_assets.jobs import build_documents_job  # noqa: PLC0415
    from kb_assets.resources import StoresResource  # noqa: PLC0415

    return dg.Definitions(
        assets=CORPUS_ASSETS,
        jobs=[build_documents_job],
        resources=kb_resources(StoresResource(home=os.environ[HOME_ENV]), fast_providers()),
        executor=dg.in_process_executor,
    )


def bench_job() -> Any:
    """The build job of ``bench_definitions`` (``dagster.reconstructable`` target)."""
    from kb_assets.constants import BUILD_JOB  # noqa: PLC0415

    return bench_definitions().resolve_job_def(BUILD_JOB)


#: The code location the daemon and webserver load (only when the benchmark set its home).
bench_defs = bench_definitions() if os.environ.get(HOME_ENV) else None


# --------------------------------------------------------------------------------------
def write_documents(folder: Path, count: int) -> list[Path]:
    """``count`` small Markdown documents (a title, two sections, ~120 words), distinct."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for number in range(count):
        path = folder / f"notice-{number:05d}.md"
        path.write_text(
            f"# Market notice {number}\n\n## Scope\n\nThis notice {number} applies to "
            f"participants in region {number % 7}. " + "The participant must report. " * 12
            + f"\n\n## Obligations\n\nNotice {number} requires a response within "
            f"{number % 30 + 1} business days. " + "Records are kept for seven years. " * 10
            + "\n",
            encoding="utf-8",
        )
        paths.append(path)
    return paths


def load_text() -> str:
    """``"1-min load a / b / c"`` now."""
    load = load_average()
    return "n/a" if load is None else f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}"


def sample(home: Path, seconds: float, out: Path) -> None:
    """Time ``kb status`` and the upload page's listing alternately for ``seconds`` (one
    call each, then 1 s of rest), writing ``{"status": [...], "listing": [...]}`` (seconds)
    and ``"at"``: the Unix time each pair of calls started."""
    from kb_assets.instance import dagster_instance  # noqa: PLC0415
    from kb_assets.operations import document_status  # noqa: PLC0415
    from kb_assets.resources import StoresResource  # noqa: PLC0415
    from kb_assets.upload.service import UploadService  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415

    settings = Settings(home=home)
    instance = dagster_instance(settings)
    service = UploadService(settings=settings, instance=instance)
    timings: dict[str, list[float]] = {"status": [], "listing": [], "at": []}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        timings["at"].append(time.time())
        started = time.perf_counter()
        stores = StoresResource(home=str(home))
        document_status(stores, instance)
        stores.close()
        timings["status"].append(time.perf_counter() - started)
        started = time.perf_counter()
        service.documents()
        timings["listing"].append(time.perf_counter() - started)
        out.write_text(json.dumps(timings))
        time.sleep(1.0)


#: Documents per row of the build's throughput table (phase 2) and per progress log line of
#: the re-run (phase 4).
PROGRESS_STEP = 1_000


def split_by_phase(
    timings: dict[str, list[float]], phases: Sequence[tuple[str, float, float]]
) -> dict[str, dict[str, list[float]]]:
    """The ``sample`` durations grouped by the phase each call started in.

    Args:
        timings: ``sample``'s output (``"status"``, ``"listing"`` seconds, ``"at"`` Unix
            times; an old file without ``"at"`` counts as one phase, ``"during the build"``).
        phases: ``(label, start, end)`` in Unix seconds, in order, not overlapping.

    Returns:
        ``{label: {"status": [...], "listing": [...]}}`` for each phase with samples.
    """
    starts = timings.get("at")
    if starts is None:
        return {"during the build": {k: v for k, v in timings.items() if k != "at"}}
    out: dict[str, dict[str, list[float]]] = {}
    for row, at in enumerate(starts):
        label = next((name for name, start, end in phases if start <= at < end), None)
        if label is None:
            continue
        group = out.setdefault(label, {"status": [], "listing": []})
        for call in ("status", "listing"):
            if row < len(timings[call]):
                group[call].append(timings[call][row])
    return out


def catalog_statuses(stores: Any, doc_ids: Sequence[str]) -> str:
    """``"ready 9990, failed 10 (graph: StoreUnavailableError …: 10)"``: the catalog status
    counts of ``doc_ids``, with each distinct failure reason's first 160 characters."""
    statuses: dict[str, int] = {}
    reasons: dict[str, int] = {}
    for doc_id in doc_ids:
        row = stores.catalog().find_by_doc_id(doc_id)
        status = row.status if row else "missing"
        statuses[status] = statuses.get(status, 0) + 1
        if row and row.failure_reason:
            reason = row.failure_reason.replace(doc_id, "<doc>")[:160]
            reasons[reason] = reasons.get(reason, 0) + 1
    text = ", ".join(f"{status} {count}" for status, count in sorted(statuses.items()))
    if reasons:
        text += " (" + "; ".join(f"{reason}: {count}" for reason, count in reasons.items()) + ")"
    return text


def rss_of(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants (``psutil``), 0 when it is gone."""
    import psutil  # noqa: PLC0415

    try:
        process = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [process, *process.children(recursive=True)])
    except psutil.Error:
        return 0


def graphql(port: int, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    """POST ``query`` to the webserver's ``/graphql``; the ``data`` of the answer.

    Raises:
        RuntimeError: the answer has ``errors``.
    """
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql", data=body,
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=600) as response:  # noqa: S310 - loopback
        answer = json.loads(response.read())
    if answer.get("errors"):
        raise RuntimeError(json.dumps(answer["errors"])[:2000])
    return answer["data"]


#: The partition health query of the asset page (``PartitionHealthQuery`` in Dagster's UI,
#: ``js_modules/ui-core/src/assets/usePartitionHealthData.tsx``): the keys and each status.
PARTITION_HEALTH_QUERY = """
query PartitionHealthQuery($assetKey: AssetKeyInput!) {
  assetNodeOrError(assetKey: $assetKey) {
    ... on AssetNode {
      id
      partitionKeysByDimension { name partitionKeys }
      assetPartitionStatuses {
        ... on DefaultPartitionStatuses {
          materializedPartitions materializingPartitions failedPartitions
        }
      }
    }
  }
}
"""

LAUNCH_BACKFILL = """
mutation Launch($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
  }
}
"""

BACKFILL_STATUS = """
query Backfill($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    ... on PartitionBackfill { id status numPartitions }
  }
}
"""


def wait_for_webserver(port: int, timeout: float) -> None:
    """Until ``/server_info`` answers, at most ``timeout`` s.

    Raises:
        TimeoutError: it did not.
    """
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5):  # noqa: S310
                return
        except OSError:
            time.sleep(2)
    raise TimeoutError(f"dagster-webserver did not answer on port {port} in {timeout:.0f} s")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark (or, with ``sample``, the sampler process); see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", default="run", choices=["run", "sample", "profile"])
    parser.add_argument("--documents", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=25)
    parser.add_argument("--compare", type=int, default=200,
                        help="documents built at batch 1, 25 and 100 to compare (0 = skip)")
    parser.add_argument("--build-minutes", type=float, default=12.0)
    parser.add_argument("--daemon-documents", type=int, default=200)
    parser.add_argument("--home", type=Path)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--snapshot", action="store_true",
                        help="profile: run inside partitions.partition_set_snapshot")
    parser.add_argument("--profile-out", type=Path, help="profile: write cProfile stats here")
    parser.add_argument("--variant", default="", help="report file suffix (a re-run of the day)")
    args = parser.parse_args(argv)
    if args.mode == "sample":
        sample(args.home, args.seconds, args.out)
        return 0
    url = os.environ.get("KB_DAGSTER_POSTGRES_URL") or os.environ.get("KB_TEST_POSTGRES_URL")
    if not url:
        print("set KB_DAGSTER_POSTGRES_URL (or source .ci/services.sh; kb_services_start)",
              file=sys.stderr)
        return 2
    from benchmarks.postgres import scratch_database  # noqa: PLC0415

    import sqlalchemy as sa  # noqa: PLC0415

    with scratch_database(url, "kb_bench_partitions") as database:
        dagster_url = sa.make_url(database).set(drivername="postgresql+psycopg2")
        chosen = profile_run if args.mode == "profile" else run
        return chosen(args, dagster_url.render_as_string(hide_password=False))


def bench_environment(home: Path, dagster_url: str, batch: int) -> None:
    """Point ``KB_HOME``, ``DAGSTER_HOME``, the bench code location, Dagster's Postgres URL,
    the pool limits (1 vectors, 1 graph, 2 llm) and ``KB_BACKFILL_BATCH`` at this run."""
    os.environ.update({
        "KB_HOME": str(home), "DAGSTER_HOME": str(home / "dagster"), HOME_ENV: str(home),
        "KB_DAGSTER_POSTGRES_URL": dagster_url, "KB_VECTORS_POOL_LIMIT": "1",
        "KB_GRAPH_POOL_LIMIT": "1", "KB_LLM_POOL_LIMIT": "2",
        "KB_BACKFILL_BATCH": str(batch),
    })


def profile_run(args: argparse.Namespace, dagster_url: str) -> int:
    """``profile``: admit ``--documents`` into a fresh home on the scratch database, then
    build the first ``--batch`` of them in one batched run (``backfill.build_batches``),
    inside ``partitions.partition_set_snapshot`` with ``--snapshot``, under cProfile with
    ``--profile-out``; prints the run's seconds and the load average before and after
    (benchmarks/results/partitions-2026-12-01-profile.md compares 100 and 10,000)."""
    import contextlib  # noqa: PLC0415
    import cProfile  # noqa: PLC0415

    from kb_assets import backfill, intake  # noqa: PLC0415
    from kb_assets.constants import DOCUMENTS  # noqa: PLC0415
    from kb_assets.instance import dagster_instance  # noqa: PLC0415
    from kb_assets.partitions import partition_set_snapshot  # noqa: PLC0415
    from kb_assets.resources import StoresResource  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415

    home = args.home or fresh_dir("partitions-profile")
    bench_environment(home, dagster_url, args.batch)
    instance = dagster_instance(Settings())
    stores = StoresResource(home=str(home))
    paths = write_documents(home / "incoming", args.documents)
    for start in range(0, len(paths), 500):
        intake.admit(paths[start : start + 500], stores, instance)
    docs = instance.get_dynamic_partitions(DOCUMENTS)[: args.batch]
    profiler = cProfile.Profile()
    guard = partition_set_snapshot(instance) if args.snapshot else contextlib.nullcontext()
    load = load_text()
    started = time.perf_counter()
    with guard:
        if args.profile_out:
            profiler.enable()
        outcomes = backfill.build_batches(stores, instance, docs, batch=args.batch,
                                          job=bench_job)
        profiler.disable()
    seconds = time.perf_counter() - started
    if args.profile_out:
        profiler.dump_stats(args.profile_out)
    ready = sum(o.status == "ready" for o in outcomes)
    log(f"{args.documents} partitions, snapshot {args.snapshot}: {len(docs)} documents "
        f"({ready} ready) in {seconds:.1f} s; load {load} -> {load_text()}")
    stores.close()
    return 0


def run(args: argparse.Namespace, dagster_url: str) -> int:  # noqa: PLR0915 - one story
    """The four phases on a fresh home and the scratch Dagster database ``dagster_url``."""
    import dagster as dg  # noqa: PLC0415

    from kb_assets import backfill, intake, operations  # noqa: PLC0415
    from kb_assets.constants import CORPUS_ASSETS, DOCUMENTS, EMBEDDINGS  # noqa: PLC0415
    from kb_assets.instance import dagster_instance  # noqa: PLC0415
    from kb_assets.resources import StoresResource  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415

    report = Report(
        "partitions", "10,000 documents on Postgres-backed Dagster, batched backfills",
        variant=args.variant,
    )
    home = args.home or fresh_dir("partitions")
    bench_environment(home, dagster_url, args.batch)
    settings = Settings()
    instance = dagster_instance(settings)
    stores = StoresResource(home=str(home))
    report.fact("documents", args.documents)
    report.fact("batch (KB_BACKFILL_BATCH)", args.batch)
    report.fact("Dagster storage", "Postgres 15 (scratch database), run queue from dagster.yaml")

    # 1. admission, partitions timed apart -------------------------------------------------
    paths = write_documents(home / "incoming", args.documents)
    partition_seconds: list[float] = []
    add_partitions = intake.add_document_partitions

    def timed_add(instance: dg.DagsterInstance, doc_ids: Sequence[str], **kw: Any) -> int:
        started = time.perf_counter()
        try:
            return add_partitions(instance, doc_ids, **kw)
        finally:
            partition_seconds.append(time.perf_counter() - started)

    intake.add_document_partitions = timed_add
    load_before = load_text()
    started = time.perf_counter()
    for start in range(0, len(paths), 500):
        intake.admit(paths[start : start + 500], stores, instance)
    admit_seconds = time.perf_counter() - started
    intake.add_document_partitions = add_partitions
    keys = instance.get_dynamic_partitions(DOCUMENTS)
    log(f"admitted {len(keys)} in {admit_seconds:.1f} s")
    report.heading("1. Admission")
    report.table(
        ["documents", "seconds", "documents/s", "partition adds (calls)", "partition-add s",
         "load before / after"],
        [[len(keys), f"{admit_seconds:.1f}", f"{len(keys) / admit_seconds:.1f}",
          len(partition_seconds), f"{sum(partition_seconds):.2f}",
          f"{load_before} → {load_text()}"]],
    )

    idle = {"status": [], "listing": []}
    sample_file = home / "idle-sample.json"
    sample(home, 3.0, sample_file)
    idle = json.loads(sample_file.read_text())

    sampler_out = home / "build-sample.json"
    sampler = subprocess.Popen(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "benchmarks.partitions", "sample", "--home", str(home),
         "--seconds", str(args.build_minutes * 60 + 3600), "--out", str(sampler_out)],
        cwd=REPO_ROOT,
    )
    built: list[str] = []
    phases: list[tuple[str, float, float]] = []
    try:
        report.write()  # what is measured so far survives an interrupted run
        # 2a. batch size compared ------------------------------------------------------
        rows = []
        cursor = 0
        if args.compare:
            for size in (1, 25, 100):
                docs = keys[cursor : cursor + (args.compare if size > 1 else args.compare // 4)]
                cursor += len(docs)
                load = load_text()
                started = time.perf_counter()
                outcomes = backfill.build_batches(stores, instance, docs, batch=size, job=bench_job)
                seconds = time.perf_counter() - started
                ready = sum(o.status == "ready" for o in outcomes)
                runs = len({o.run_id for o in outcomes})
                built += docs
                rows.append([size, len(docs), ready, runs, f"{seconds:.1f}",
                             f"{runs / seconds:.2f}", f"{len(docs) / seconds:.2f}", load])
                log(f"batch {size}: {len(docs)} docs in {seconds:.1f} s")
        report.heading("2. Batched build in the kb process (`kb rebuild --all` path)")
        if rows:
            report.text("Batch size compared, each on its own documents:")
            report.table(["batch", "documents", "ready", "runs", "seconds", "runs/s",
                          "documents/s", "load at start"], rows)
        else:
            report.text("Batch sizes not compared in this run (`--compare 0`).")

        # 2b. every document but the daemon's, within the budget, at the chosen batch --
        budget_end = time.monotonic() + args.build_minutes * 60
        build_end = max(cursor, len(keys) - args.daemon_documents)
        phase_start = time.time()
        started = time.perf_counter()
        load = load_text()
        chunk = args.batch * 8
        done_here = failed_here = 0
        runs_here: set[str] = set()
        steps: list[list[str]] = []
        step_started, step_done = started, 0
        while cursor < build_end and time.monotonic() < budget_end:
            docs = keys[cursor : min(cursor + chunk, build_end)]
            cursor += len(docs)
            outcomes = backfill.build_batches(stores, instance, docs, batch=args.batch,
                                              job=bench_job)
            ready_now = sum(o.status == "ready" for o in outcomes)
            done_here += ready_now
            failed_here += len(outcomes) - ready_now
            runs_here |= {o.run_id for o in outcomes}
            built += docs
            now = time.perf_counter()
            log(f"build: {cursor}/{build_end} tried, {done_here} ready, {failed_here} not, "
                f"{done_here / (now - started):.2f} documents/s, load {load_text()}")
            if (done_here - step_done >= PROGRESS_STEP or cursor >= build_end
                    or time.monotonic() >= budget_end):
                steps.append([f"{step_done + 1}–{done_here}", f"{now - step_started:.0f}",
                              f"{(done_here - step_done) / (now - step_started):.2f}",
                              f"{(now - started) / 60:.1f}", load_text()])
                step_started, step_done = now, done_here
        seconds = time.perf_counter() - started
        phases.append(("during the build (phase 2)", phase_start, time.time()))
        rate = done_here / seconds if seconds else 0.0
        left = build_end - cursor
        if not rate:
            report.text("nothing was built in the budget")
        elif left:
            report.text(
                f"At batch {args.batch} for {seconds / 60:.1f} min (load {load} → "
                f"{load_text()}): {done_here} documents ready ({failed_here} not) in "
                f"{len(runs_here)} runs, {len(runs_here) / seconds:.2f} runs/s, "
                f"{rate:.2f} documents/s. The budget ended with {left} documents not built "
                f"here; at this rate all {len(keys)} take {len(keys) / rate / 3600:.1f} h "
                "(extrapolated, not measured)."
            )
        else:
            report.text(
                f"At batch {args.batch}, every document but the {len(keys) - build_end} kept "
                f"for phase 3 was built, measured: {done_here} documents ready "
                f"({failed_here} not) in {seconds / 60:.1f} min (load {load} → "
                f"{load_text()}), {len(runs_here)} runs, {len(runs_here) / seconds:.2f} "
                f"runs/s, {rate:.2f} documents/s."
            )
        report.text(f"Throughput per {PROGRESS_STEP:,} documents ready, in build order "
                    "(does it slow down as the corpus grows?):")
        report.table(["documents ready", "seconds", "documents/s", "minutes into the build",
                      "load at the end"], steps)
        report.fact("peak RSS of the kb process after the build (in-process runs)",
                    fmt_bytes(peak_rss_bytes()))

        report.write()  # what is measured so far survives an interrupted run
        # 3. the daemon's backfill -------------------------------------------------------
        daemon_docs = keys[cursor : cursor + args.daemon_documents]
        cursor += len(daemon_docs)
        report.heading("3. A Dagster backfill run by the daemon (UI path)")
        phase_start = time.time()
        try:
            daemon_result = daemon_backfill(home, instance, daemon_docs, list(CORPUS_ASSETS))
        except (OSError, RuntimeError, KeyError, TypeError) as error:  # report, go on
            daemon_result = {"rows": [("error", f"{type(error).__name__}: {error}"[:500])],
                             "finished": False}
        built += daemon_docs if daemon_result.get("finished") else []
        daemon_result["rows"].append(
            ("catalog status of its documents after it", catalog_statuses(stores, daemon_docs)))
        phases.append(("during the daemon's backfill (phase 3)", phase_start, time.time()))
        report.table(["measure", "value"], [[k, v] for k, v in daemon_result["rows"]])

        report.write()  # what is measured so far survives an interrupted run
        # 4. one asset re-run over what was built --------------------------------------
        report.heading("4. `embeddings` re-run for every built document")
        ready = [d for d in built if (row := stores.catalog().find_by_doc_id(d))
                 and row.status == "ready"]
        report.text(f"Documents built in phases 2 and 3: {len(built)}; their catalog status "
                    f"before the re-run: {catalog_statuses(stores, built)}. The re-run takes "
                    "every ready one.")
        load = load_text()
        phase_start = time.time()
        started = time.perf_counter()
        finished_count = [0]

        def progress(_outcome: Any) -> None:
            finished_count[0] += 1
            if finished_count[0] % PROGRESS_STEP == 0:
                log(f"re-run: {finished_count[0]}/{len(ready)} in "
                    f"{time.perf_counter() - started:.0f} s, load {load_text()}")

        outcomes = backfill.build_batches(
            stores, instance, ready, batch=args.batch, job=bench_job,
            assets=operations.rebuild_selection(EMBEDDINGS), force=(EMBEDDINGS,),
            on_done=progress,
        )
        seconds = time.perf_counter() - started
        phases.append(("during the embeddings re-run (phase 4)", phase_start, time.time()))
        runs = len({o.run_id for o in outcomes})
        report.table(
            ["documents", "ready after", "runs", "seconds", "runs/s", "documents/s", "load"],
            [[len(ready), sum(o.status == "ready" for o in outcomes), runs, f"{seconds:.1f}",
              f"{runs / seconds:.2f}", f"{len(ready) / seconds:.2f}", f"{load} → {load_text()}"]],
        )
    finally:
        sampler.terminate()
        sampler.wait()
    during = json.loads(sampler_out.read_text()) if sampler_out.exists() else {}
    by_phase = split_by_phase(during, phases)
    report.heading(f"`kb status` and the upload page's listing ({len(keys):,} documents)")
    report.table(
        ["call", "when", *LATENCY_HEADERS],
        [[name, when, *latency_summary(values).cells()]
         for when, data in (("idle", idle), *by_phase.items())
         for name, values in data.items() if values and name != "at"],
    )
    stores.close()
    path = report.write()
    log(f"wrote {path}")
    return 0


def daemon_backfill(
    home: Path, instance: Any, docs: list[str], assets: list[str]
) -> dict[str, Any]:
    """Start ``dagster-webserver`` and ``dagster-daemon`` on the instance with a workspace of
    ``bench_defs``, time the partition-status query, launch a backfill of ``assets`` over
    ``docs`` and follow it (queued/started runs every 2 s) until it ends or 20 minutes pass.
    Returns ``{"rows": [(measure, value), ...], "finished": bool}``."""
    import dagster as dg  # noqa: PLC0415

    workspace = home / "workspace.yaml"
    workspace.write_text(
        "load_from:\n  - python_module:\n      module_name: benchmarks.partitions\n"
        f"      attribute: bench_defs\n      working_directory: {REPO_ROOT}\n"
        "      location_name: kb_bench\n",
        encoding="utf-8",
    )
    port = 3900 + os.getpid() % 90
    env = {**os.environ, "DAGSTER_HOME": str(home / "dagster")}
    bin_dir = Path(sys.executable).parent
    web = subprocess.Popen(  # noqa: S603
        [str(bin_dir / "dagster-webserver"), "-w", str(workspace), "-h", "127.0.0.1",
         "-p", str(port)], env=env, cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL, stderr=open(home / "webserver.log", "wb"),  # noqa: SIM115
    )
    daemon = subprocess.Popen(  # noqa: S603
        [str(bin_dir / "dagster-daemon"), "run", "-w", str(workspace)], env=env, cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL, stderr=open(home / "daemon.log", "wb"),  # noqa: SIM115
    )
    rows: list[tuple[str, str]] = []
    finished = False
    try:
        started = time.perf_counter()
        wait_for_webserver(port, 600)
        rows.append(("webserver up (s)", f"{time.perf_counter() - started:.1f}"))
        for attempt in range(3):
            load = load_text()
            started = time.perf_counter()
            data = graphql(port, PARTITION_HEALTH_QUERY, {"assetKey": {"path": ["markdown"]}})
            seconds = time.perf_counter() - started
            node = data["assetNodeOrError"]
            count = len(node["partitionKeysByDimension"][0]["partitionKeys"])
            rows.append((f"partition status query #{attempt + 1} ({count} partitions)",
                         f"{seconds * 1000:.0f} ms (load {load})"))
        load = load_text()
        started = time.perf_counter()
        launched = graphql(port, LAUNCH_BACKFILL, {"params": {
            "partitionNames": docs,
            "assetSelection": [{"path": [a]} for a in assets],
            "fromFailure": False,
        }})["launchPartitionBackfill"]
        if "backfillId" not in launched:
            rows.append(("backfill", f"not launched: {json.dumps(launched)[:300]}"))
            return {"rows": rows, "finished": False}
        backfill_id = launched["backfillId"]
        peak = {"queued": 0, "started": 0, "web": 0, "daemon": 0}
        first_run = None
        deadline = time.monotonic() + 20 * 60
        status = ""
        while time.monotonic() < deadline:
            time.sleep(2)
            runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
            queued = sum(r.status == dg.DagsterRunStatus.QUEUED for r in runs)
            going = sum(r.status in (dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING)
                        for r in runs)
            if runs and first_run is None:
                first_run = time.perf_counter() - started
            peak["queued"] = max(peak["queued"], queued)
            peak["started"] = max(peak["started"], going)
            peak["web"] = max(peak["web"], rss_of(web.pid))
            peak["daemon"] = max(peak["daemon"], rss_of(daemon.pid))
            status = graphql(port, BACKFILL_STATUS, {"id": backfill_id})[
                "partitionBackfillOrError"].get("status", "")
            if status in ("COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED",
                          "CANCELED") and not queued and not going:
                finished = True
                break
        seconds = time.perf_counter() - started
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
        success = sum(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        rows += [
            ("documents in the backfill", str(len(docs))),
            ("backfill status", f"{status} after {seconds:.0f} s (load {load} → {load_text()})"),
            ("runs (succeeded)", f"{len(runs)} ({success})"),
            ("first run created after", f"{first_run or 0:.1f} s"),
            ("runs/s", f"{len(runs) / seconds:.3f}"),
            ("documents/s", f"{len(docs) / seconds:.2f}" if finished else "unfinished"),
            ("most runs queued / running at once", f"{peak['queued']} / {peak['started']}"),
            ("peak RSS webserver (with its code server)", fmt_bytes(peak["web"])),
            ("peak RSS daemon (with its code server and run workers)", fmt_bytes(peak["daemon"])),
        ]
        load = load_text()
        started = time.perf_counter()
        graphql(port, PARTITION_HEALTH_QUERY, {"assetKey": {"path": ["markdown"]}})
        rows.append(("partition status query after the backfill",
                     f"{(time.perf_counter() - started) * 1000:.0f} ms (load {load})"))
    finally:
        for process in (daemon, web):
            process.terminate()
        for process in (daemon, web):
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
    return {"rows": rows, "finished": finished}


if __name__ == "__main__":
    raise SystemExit(main())
