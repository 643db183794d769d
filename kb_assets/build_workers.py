"""Several documents built at once: ``operations.build_documents(..., workers=N)`` hands each
document to one of N worker processes, which builds it with ``operations.build_one`` — the
run ``kb build`` makes in one process, so its outputs are the same
(tests/assets/test_build_workers.py; timings: benchmarks/results/ingest-2026-12-06-workers.md).

Processes, not threads: PyMuPDF does not support threads (its documentation, "Multiprocessing")
and Dagster interrupts a step on a stop signal only in a process's main thread
(``dagster._utils.interrupts``). Workers are spawned (a fresh interpreter: no forked Dagster,
SQLite or onnxruntime state), open the instance from its ``InstanceRef`` and the stores from
their launch config (secrets from the environment, as every run's), and keep what they loaded
(models, layout analysis) for their next document. Nothing else is shared: the SQLite
catalog, graph and vector index take one writer at a time (``BEGIN IMMEDIATE``, 30 s busy
timeout), and a Dagster pool with a limit holds a step back across the workers' runs as across
any runs (``kb_assets.pools``).

Stopping (``kb_assets.stopping``): each worker leads its own process group, so Ctrl-C in a
terminal reaches the ``kb`` process alone, whose ``stop_guard`` forwards the signal once to
every worker; a worker's own ``stop_guard`` interrupts its step, or its watchdog ends it
``STOP_GRACE_SECONDS`` later. A document whose worker stopped or ended gets
``STOPPED_REASON``; none is started after the signal. A worker whose ``kb`` process was killed
finishes its document and exits.
"""

from __future__ import annotations

import os
import pickle
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing import connection, get_context
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

from kb_assets import stopping

if TYPE_CHECKING:  # the parent imports Dagster already; a worker imports it when it starts
    import dagster as dg

    from kb_assets.operations import BuildOutcome
    from kb_assets.resources import StoresResource

#: Documents built at once when neither ``--workers`` nor ``KB_BUILD_WORKERS`` says (never more
#: than the cores): two, each worker's layout and embedding sessions on half the cores without
#: spinning, built the same outputs in less wall time than one for ~2.4x the memory
#: (benchmarks/results/ingest-2026-12-06-layout-threads.md).
DEFAULT_WORKERS = 2

#: Seconds the ``kb`` process's own watchdog waits beyond ``STOP_GRACE_SECONDS``: the workers'
#: watchdogs end a step that ignores the signal first, and the ``kb`` process reports it.
PARENT_GRACE_MARGIN = 2.0

#: How often (seconds) the ``kb`` process looks at the stop flag while it waits for workers.
POLL_SECONDS = 0.25

#: The reason of a document whose worker ended without a result (``{code}``: its exit code).
WORKER_ENDED = (
    "the worker process building it ended without a result (exit code {code}); "
    "run `kb build` again"
)


def machine_cores() -> int:
    """Cores this process may run on (its CPU affinity; ``os.cpu_count()`` where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def resolve_workers(requested: int | None, documents: int, cores: int | None = None) -> int:
    """How many documents to build at once: ``requested`` (``kb build --workers`` or
    ``KB_BUILD_WORKERS``), or when ``None`` ``DEFAULT_WORKERS`` on a machine of that many cores
    or more (else its cores); never more than ``documents``, never less than 1.

    Raises:
        ValueError: ``requested`` is below 1.
    """
    if requested is not None and requested < 1:
        raise ValueError(f"workers must be 1 or more, not {requested}")
    wanted = requested if requested is not None else min(DEFAULT_WORKERS, cores or machine_cores())
    return max(1, min(wanted, documents))


@dataclass(frozen=True)
class WorkerSetup:
    """What a worker needs to build documents as ``build_one`` does in the ``kb`` process.

    Attributes:
        stores_config: ``StoresResource`` fields (``launch_config()``: home and overrides).
        instance_ref: the Dagster instance's ``InstanceRef``.
        assets, force, job: ``build_one``'s arguments (``job``: a module-level function).
        environment: variables the worker sets before it loads anything
            (``worker_environment``).
    """

    stores_config: dict[str, Any]
    instance_ref: Any
    assets: tuple[str, ...] | None
    force: tuple[str, ...]
    job: Callable[[], Any] | None
    environment: dict[str, str]


def worker_environment(workers: int, cores: int | None = None,
                       environ: dict[str, str] | None = None) -> dict[str, str]:
    """The thread settings each of ``workers`` processes gets: ``KB_LAYOUT_THREADS`` and
    ``KB_LOCAL_EMBEDDING_THREADS`` set to the cores (``machine_cores()`` or ``cores``) divided
    among the workers, at least 1, each only where ``environ`` (``os.environ``) leaves it
    unset. N workers then run no more layout or embedding threads than there are cores, and
    none spins (benchmarks/results/ingest-2026-12-06-layout-threads.md)."""
    from kb_shared.settings import Settings, env_name  # noqa: PLC0415

    environ = os.environ if environ is None else environ
    threads = str(max(1, (cores or machine_cores()) // max(1, workers)))
    names = (env_name(Settings, "layout_threads"), env_name(Settings, "local_embedding_threads"))
    return {name: threads for name in names if not environ.get(name)}


def work(conn: connection.Connection, pickled_setup: bytes) -> None:
    """A worker process's body: build each ``doc_id`` received on ``conn`` and send back
    ``("done", BuildOutcome)`` or ``("error", exception)``; ends on ``None`` or when the
    ``kb`` process is gone. A document received after a stop signal is not started.

    ``pickled_setup``: a pickled ``WorkerSetup``, unpickled (which imports Dagster) only once
    this process has its own process group."""
    os.setpgrp()  # Ctrl-C reaches the kb process, which forwards it once (module docstring)
    setup: WorkerSetup = pickle.loads(pickled_setup)  # noqa: S301 - from our own parent
    os.environ.update(setup.environment)  # read when the first run builds its providers
    import dagster as dg  # noqa: PLC0415 - loaded with the setup already

    from kb_assets import operations  # noqa: PLC0415
    from kb_assets.resources import StoresResource  # noqa: PLC0415

    stores = StoresResource(**setup.stores_config)
    instance = dg.DagsterInstance.from_ref(setup.instance_ref)
    try:
        with stopping.stop_guard(stopping.STOP_GRACE_SECONDS) as stop:
            while (doc_id := _next_task(conn)) is not None:
                try:
                    outcome = stopped_outcome(stores, doc_id) if stop.signal else (
                        operations.build_one(
                            stores, instance, doc_id, assets=setup.assets, force=setup.force,
                            job=setup.job,
                        )
                    )
                except Exception as error:  # noqa: BLE001 - the kb process raises it
                    conn.send(("error", _sendable(error)))
                    continue
                conn.send(("done", outcome))
                if outcome.reason == stopping.STOPPED_REASON:
                    break  # ends before its watchdog would take an idle worker for a stuck one
    finally:
        stores.close()
        instance.dispose()
        conn.close()


def _next_task(conn: connection.Connection) -> str | None:
    """The next ``doc_id`` from the ``kb`` process; ``None`` when it says so or is gone."""
    try:
        return conn.recv()
    except (EOFError, OSError):
        return None


def _sendable(error: Exception) -> Exception:
    """``error`` if it survives pickling, else a ``RuntimeError`` with its type and text."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # noqa: BLE001 - any pickling failure
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error


def stopped_outcome(stores: StoresResource, doc_id: str, reason: str | None = None) -> BuildOutcome:
    """The outcome of a document a stop signal (or its worker's end: ``reason``) left unbuilt
    or unfinished: failed, with ``STOPPED_REASON`` unless ``reason`` is given."""
    from kb_assets import operations  # noqa: PLC0415

    row = operations._find_row(stores, doc_id)  # noqa: SLF001 - the one reader of a row
    return operations.BuildOutcome(
        doc_id=doc_id, name=row.name if row else doc_id, status=operations.DocumentStatus.FAILED,
        run_id="", seconds=0.0, reason=reason or stopping.STOPPED_REASON,
    )


@dataclass
class _Worker:
    """One worker process, its end of the pipe, and the document it builds (index, doc_id)."""

    process: BaseProcess
    conn: connection.Connection
    task: tuple[int, str] | None = None


class WorkerPool:
    """Up to ``size`` spawned worker processes (``work``), started as documents need them.

    ``submit`` gives an idle worker a document; ``collect`` returns what finished:
    ``(index, doc_id, kind, value)`` with kind ``done`` (a ``BuildOutcome``), ``error`` (an
    exception) or ``ended`` (the worker's exit code: it died without a result). Use it as a
    context manager: leaving it ends every worker.
    """

    def __init__(self, size: int, setup: WorkerSetup) -> None:
        self.size = size
        self._setup = pickle.dumps(setup)
        self._context = get_context("spawn")
        self._workers: list[_Worker] = []

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def busy(self) -> int:
        """Documents being built."""
        return sum(1 for w in self._workers if w.task is not None)

    @property
    def pids(self) -> list[int]:
        """Process ids of the workers started so far and not ended."""
        return [w.process.pid for w in self._workers if w.process.pid is not None]

    def has_room(self) -> bool:
        """Whether a document can be submitted now."""
        return self.busy < self.size

    def submit(self, index: int, doc_id: str) -> None:
        """Give ``doc_id`` (``index``: its place in the caller's list) to an idle worker, started
        if none is idle. Raises ``RuntimeError`` when all ``size`` workers are busy."""
        idle = next((w for w in self._workers if w.task is None), None)
        if idle is None:
            if len(self._workers) >= self.size:
                raise RuntimeError("every worker is busy")
            ours, theirs = self._context.Pipe()
            process = self._context.Process(
                target=work, args=(theirs, self._setup), name="kb-build-worker", daemon=False
            )
            process.start()
            theirs.close()
            idle = _Worker(process, ours)
            self._workers.append(idle)
        idle.conn.send(doc_id)
        idle.task = (index, doc_id)

    def signal(self, signum: int) -> None:
        """Send ``signum`` to every worker still running."""
        for worker in self._workers:
            if worker.process.is_alive() and worker.process.pid is not None:
                try:
                    os.kill(worker.process.pid, signum)
                except ProcessLookupError:
                    continue

    def collect(self, timeout: float) -> list[tuple[int, str, str, Any]]:
        """What finished within ``timeout`` seconds (the class docstring says the shape)."""
        busy = [w for w in self._workers if w.task is not None]
        if not busy:
            return []
        waits: list[Any] = [w.conn for w in busy] + [w.process.sentinel for w in busy]
        ready = set(connection.wait(waits, timeout))
        finished = []
        for worker in busy:
            if worker.task is None or not (ready & {worker.conn, worker.process.sentinel}):
                continue
            index, doc_id = worker.task
            try:
                kind, value = worker.conn.recv() if worker.conn.poll() else ("", None)
            except (EOFError, OSError):
                kind, value = "", None
            if not kind:
                if worker.process.is_alive():
                    continue  # its message is not complete yet
                worker.process.join()
                kind, value = "ended", worker.process.exitcode
                worker.conn.close()
                self._workers.remove(worker)
            worker.task = None
            finished.append((index, doc_id, kind, value))
        return finished

    def close(self) -> None:
        """Tell every worker to end, and wait for it (a worker that does not end within
        ``STOP_GRACE_SECONDS`` plus the margin is killed)."""
        for worker in self._workers:
            try:
                worker.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        for worker in self._workers:
            worker.process.join(stopping.STOP_GRACE_SECONDS + PARENT_GRACE_MARGIN)
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.conn.close()
        self._workers.clear()


def document_pages(stores: StoresResource, doc_id: str) -> int:
    """Pages of a document for scheduling: the catalog's count when a build recorded it, else
    the stored PDF's (PyMuPDF); 0 when neither can be read (the build reports why)."""
    try:
        row = stores.catalog().find_by_doc_id(doc_id)
        if row is None:
            return 0
        if row.pages is not None:
            return row.pages
        import pymupdf  # noqa: PLC0415 - the kb process reads PDFs only here

        with pymupdf.open(stream=stores.blobs().get(row.blob_key), filetype="pdf") as doc:
            return doc.page_count
    except Exception:  # noqa: BLE001 - an unreadable document is the build's to report
        return 0


def largest_first(stores: StoresResource, doc_ids: Sequence[str]) -> list[int]:
    """Indexes of ``doc_ids``, most pages first (ties in the order given): longest processing
    time first, the classic list-scheduling rule, so the documents that start last are short
    ones and no worker waits long for the last one to end (Graham, "Bounds on multiprocessing
    timing anomalies", 1969). Outcomes are still returned in the order of ``doc_ids``."""
    pages = [document_pages(stores, doc_id) for doc_id in doc_ids]
    return sorted(range(len(doc_ids)), key=lambda index: -pages[index])


def build_in_workers(
    stores: StoresResource,
    instance: dg.DagsterInstance,
    doc_ids: Sequence[str],
    *,
    workers: int,
    not_built: Callable[[str], BuildOutcome | None],
    assets: Sequence[str] | None,
    force: tuple[str, ...],
    on_done: Callable[[BuildOutcome], None] | None,
    job: Callable[[], Any] | None,
) -> list[BuildOutcome]:
    """``build_documents`` with ``workers`` documents at once; the same outcomes, in the order
    of ``doc_ids``. ``not_built(doc_id)`` is the outcome of a document that is not to be run
    (built elsewhere, being deleted, no partition), asked just before it would start.
    ``on_done`` is called in this process's main thread as each document ends.

    Raises:
        ValueError: the instance has no ``InstanceRef`` (an ephemeral one) to open in a worker.
        Exception: the first error a worker's ``build_one`` raised, once the other documents in
            progress have ended (a document's failure is an outcome, not an error).
    """
    from kb_assets import operations  # noqa: PLC0415

    ref = instance.get_ref() if not instance.is_ephemeral else None
    if ref is None:
        raise ValueError("building documents in workers needs a Dagster instance on disk")
    setup = WorkerSetup(
        stores_config=stores.launch_config(),
        instance_ref=ref,
        assets=tuple(assets) if assets is not None else None,
        force=force,
        job=job,
        environment=worker_environment(workers),
    )
    waiting = deque((index, doc_ids[index]) for index in largest_first(stores, doc_ids))
    outcomes: dict[int, BuildOutcome] = {}
    error: Exception | None = None
    stopped = False

    def finish(index: int, outcome: BuildOutcome) -> None:
        nonlocal stopped
        outcomes[index] = outcome
        stopped = stopped or outcome.reason == stopping.STOPPED_REASON
        if on_done is not None:
            on_done(outcome)

    grace = stopping.STOP_GRACE_SECONDS + PARENT_GRACE_MARGIN
    with WorkerPool(workers, setup) as pool, stopping.stop_guard(grace) as stop:
        forwarded = False
        while True:
            if stop.signal is not None and not forwarded:
                pool.signal(stop.signal)
                forwarded = True
            while waiting and pool.has_room() and stop.signal is None and not stopped and not error:
                index, doc_id = waiting.popleft()
                skipped = not_built(doc_id)
                if skipped is not None:
                    finish(index, skipped)
                else:
                    pool.submit(index, doc_id)
            if not pool.busy and (not waiting or stop.signal is not None or stopped or error):
                break
            for index, doc_id, kind, value in pool.collect(POLL_SECONDS):
                if kind == "done":
                    finish(index, value)
                elif kind == "error":
                    error = error or value
                else:
                    reason = None if stop.signal is not None else WORKER_ENDED.format(code=value)
                    finish(index, stopped_outcome(stores, doc_id, reason))
    if error is not None:
        raise error
    return [outcomes[index] for index in sorted(outcomes)]
