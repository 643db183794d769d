"""Benchmark — ``kb-mcp serve --workers N``: search_docs throughput and latency at 16 clients.

Run from the repository root (not part of the unit test run)::

    .venv/bin/python -m benchmarks.serving_workers --home /tmp/wk-home
    .venv/bin/python -m benchmarks.serving_workers --home DIR --workers 1,2 --seconds 300

What it does, for each worker count:

1. Starts ``kb-mcp serve --workers N`` on a free loopback port over ``--home`` with every
   provider forced local and waits for ``/healthz`` (``benchmarks.mcp_server``).
2. Waits until ``/healthz`` has been answered by N distinct worker pids (every worker has
   loaded its embedding model), then warms up: ``search_docs`` once per eval question
   (untimed, ``benchmarks.serving.warm_up``).
3. ``--clients`` closed-loop clients (one ``httpx.AsyncClient`` connection each, one asyncio
   loop, plain JSON-RPC posts as in ``benchmarks.serving``) call ``search_docs`` with the eval
   questions in turn for ``--seconds``; each client sends its next call when its previous one
   is answered. Per run: requests/s (calls answered / wall time), p50/p95/p99/max latency,
   errors, CPU seconds per process, and the RSS of every process of the server (supervisor
   and workers) sampled every ``SAMPLE_SECONDS``: before the load, at the end, and the largest.
4. Stops the server (SIGTERM) and records how long it took to exit.

The target (issue 15, "A multi-worker MCP server"): >= 70 search_docs requests/s at 16
clients with p95 <= 300 ms and 0 errors, memory flat.

Output: ``benchmarks/results/serving-workers-<date>[-<variant>].md``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.common import (
    LATENCY_HEADERS,
    PROVIDER_ROLES,
    WORK_DIR,
    Report,
    fmt_bytes,
    fmt_duration,
    latency_summary,
    log,
    positive_counts,
    served_questions,
)
from benchmarks.mcp_server import Server, running_server, server_env
from benchmarks.serving import (
    CALL_TIMEOUT,
    DEFAULT_EVAL,
    Call,
    Profile,
    add_profile_section,
    call_tool,
    profile_search_docs,
    warm_up,
)

#: Seconds between RSS samples of the server's processes during the load.
SAMPLE_SECONDS = 5.0

#: The issue's target at 16 clients (issue 15): requests/s floor and p95 ceiling in ms.
TARGET_RPS = 70.0
TARGET_P95_MS = 300.0

#: Seconds to wait for every worker to answer ``/healthz`` after the first one did.
WORKERS_READY_SECONDS = 120.0


# --------------------------------------------------------------------------------------
# The server's processes
# --------------------------------------------------------------------------------------
def _proc_fields(pid: int) -> list[str]:
    """``/proc/<pid>/stat`` after the command name (``proc(5)``: state is index 0)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def children(pid: int) -> list[int]:
    """Child pids of ``pid`` (``/proc/<pid>/task/*/children``)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            found += [int(p) for p in (task / "children").read_text().split()]
    return found


def role(pid: int, server_pid: int) -> str:
    """``supervisor``, ``worker`` or ``resource tracker`` (from the command line; a
    one-worker server is its own worker)."""
    if pid == server_pid:
        return "supervisor"
    with contextlib.suppress(OSError):
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"resource_tracker" in command:
            return "resource tracker"
    return "worker"


def rss_bytes(pid: int) -> int | None:
    """Current RSS of ``pid`` in bytes (``/proc/<pid>/status`` ``VmRSS``), ``None`` if gone."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return None


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (``/proc/<pid>/stat`` fields 14 and 15)."""
    fields = _proc_fields(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Memory:
    """RSS samples of one process (bytes)."""

    role: str
    before: int | None = None
    samples: list[int] = field(default_factory=list)

    @property
    def end(self) -> int | None:
        """The last sample."""
        return self.samples[-1] if self.samples else None

    @property
    def peak(self) -> int | None:
        """The largest sample (the before-load one included)."""
        values = [v for v in (self.before, *self.samples) if v is not None]
        return max(values) if values else None


# --------------------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------------------
@dataclass
class Run:
    """One worker count's measurement."""

    workers: int
    clients: int
    calls: list[Call] = field(default_factory=list)
    wall_seconds: float = 0.0
    startup_seconds: float = 0.0
    stop_seconds: float | None = None
    memory: dict[int, Memory] = field(default_factory=dict)
    cpu: dict[int, float] = field(default_factory=dict)
    load: tuple[float, float] = (0.0, 0.0)

    @property
    def errors(self) -> int:
        """Calls that failed."""
        return sum(1 for c in self.calls if c.error)

    @property
    def requests_per_second(self) -> float:
        """Calls answered (successfully or not) per wall second."""
        return len(self.calls) / self.wall_seconds if self.wall_seconds else 0.0

    def latency_cells(self) -> list[str]:
        """``LATENCY_HEADERS`` cells of the successful calls (blanks when none)."""
        seconds = [c.seconds for c in self.calls if not c.error]
        return latency_summary(seconds).cells() if seconds else ["0", "", "", "", ""]


async def wait_for_workers(base: str, workers: int) -> set[int]:
    """pids that answered ``/healthz`` ready, polled on fresh connections until ``workers``
    distinct ones did.

    Raises:
        RuntimeError: fewer answered within ``WORKERS_READY_SECONDS``.
    """
    import httpx  # noqa: PLC0415

    seen: set[int] = set()
    deadline = time.monotonic() + WORKERS_READY_SECONDS

    async def probe() -> None:
        async with httpx.AsyncClient(base_url=base, timeout=30) as http:
            response = await http.get("/healthz")
            worker = response.json().get("worker", {})
            if response.status_code == 200 and worker.get("ready"):
                seen.add(int(worker["pid"]))

    while len(seen) < workers:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only workers {sorted(seen)} answered /healthz")
        await asyncio.gather(*(probe() for _ in range(4 * workers)))
        await asyncio.sleep(0.2)
    return seen


def _sample(server: Server, run: Run, *, before: bool = False) -> None:
    """One RSS sample of the supervisor and each of its children."""
    pid = server.process.pid
    for child in [pid, *children(pid)]:
        memory = run.memory.setdefault(child, Memory(role(child, pid)))
        value = rss_bytes(child)
        if value is None:
            continue
        if before:
            memory.before = value
        else:
            memory.samples.append(value)


async def load(server: Server, run: Run, questions: Sequence[str], seconds: float) -> None:
    """``run.clients`` closed-loop search_docs clients for ``seconds`` (module docstring)."""
    import httpx  # noqa: PLC0415

    deadline = time.perf_counter() + seconds
    counter = 0

    async def client_loop() -> None:
        nonlocal counter
        async with httpx.AsyncClient(base_url=server.base, timeout=CALL_TIMEOUT) as http:
            while time.perf_counter() < deadline:
                counter += 1
                number = counter
                question = questions[number % len(questions)]
                run.calls.append(await call_tool(http, number, "search_docs", {"query": question}))

    async def sampler() -> None:
        while time.perf_counter() < deadline:
            await asyncio.sleep(SAMPLE_SECONDS)
            _sample(server, run)

    started = time.perf_counter()
    await asyncio.gather(sampler(), *(client_loop() for _ in range(run.clients)))
    run.wall_seconds = time.perf_counter() - started
    _sample(server, run)


async def measure(home: Path, workers: int, clients: int, seconds: float,
                  questions: Sequence[str]) -> Run:
    """Start ``kb-mcp serve --workers workers``, warm up, load it, stop it (SIGTERM)."""
    run = Run(workers=workers, clients=clients)
    local = {f"KB_{r}_PROVIDER": "local" for r in PROVIDER_ROLES}
    log_path = WORK_DIR / f"serving-workers-{workers}.log"
    with running_server(home, log_path, "--workers", str(workers),
                        env=server_env(home, **local)) as server:
        pids = await wait_for_workers(server.base, workers)
        run.startup_seconds = server.startup_seconds
        log(f"--workers {workers}: workers {sorted(pids)} ready")
        _, warm_errors = await warm_up(server, questions)
        if warm_errors:
            raise SystemExit(f"warm-up failed: {warm_errors[:3]}")
        _sample(server, run, before=True)
        processes = [server.process.pid, *children(server.process.pid)]
        cpu_before = {pid: cpu_seconds(pid) for pid in processes}
        load_start = os.getloadavg()[0]
        await load(server, run, questions, seconds)
        run.load = (load_start, os.getloadavg()[0])
        for pid, before in cpu_before.items():
            with contextlib.suppress(OSError):
                run.cpu[pid] = cpu_seconds(pid) - before
        stopping = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.process.wait(timeout=30)
            run.stop_seconds = time.monotonic() - stopping
    log(f"--workers {workers}: {len(run.calls)} calls, {run.requests_per_second:.1f} req/s, "
        f"{run.errors} errors")
    return run


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------
def write_report(report: Report, runs: Sequence[Run], profile: Profile | None) -> None:
    """Headline, memory per process, errors and the method."""
    report.heading("Headline (search_docs only)")
    rows = []
    for run in runs:
        p95 = latency_summary([c.seconds for c in run.calls if not c.error]).p95_ms \
            if len(run.calls) > run.errors else float("inf")
        meets = (run.requests_per_second >= TARGET_RPS and p95 <= TARGET_P95_MS
                 and run.errors == 0)
        rows.append([run.workers, run.clients, f"{run.wall_seconds:.1f}",
                     f"{run.requests_per_second:.1f}", *run.latency_cells(), run.errors,
                     f"{run.load[0]:.2f} → {run.load[1]:.2f}",
                     "yes" if meets else "no"])
    report.table(
        ("workers", "clients", "wall s", "requests/s", *LATENCY_HEADERS, "errors",
         "load 1-min start → end",
         f"target (≥ {TARGET_RPS:.0f}/s, p95 ≤ {TARGET_P95_MS:.0f} ms)"),
        rows,
    )
    report.heading("Processes: RSS and CPU")
    rows = []
    for run in runs:
        for pid, memory in sorted(run.memory.items(), key=lambda item: item[1].role):
            cpu = run.cpu.get(pid)
            per_call = f"{1000 * cpu / max(len(run.calls), 1):.1f}" if cpu is not None else ""
            rows.append([run.workers, memory.role, pid, fmt_bytes(memory.before),
                         fmt_bytes(memory.end), fmt_bytes(memory.peak), per_call])
    report.table(("workers", "process", "pid", "RSS before load", "RSS at end",
                  "RSS largest sample", "CPU ms / call"), rows)
    report.text(
        "RSS is sampled every "
        f"{SAMPLE_SECONDS:.0f} s during the load. Start-up (process start to the first "
        "`/healthz` 200): "
        + "; ".join(f"--workers {r.workers} {r.startup_seconds:.1f} s" for r in runs)
        + ". Stop (SIGTERM to exit): "
        + "; ".join(f"--workers {r.workers} "
                    + (f"{r.stop_seconds:.1f} s" if r.stop_seconds is not None else "> 30 s")
                    for r in runs)
        + "."
    )
    if profile is not None:
        add_profile_section(report, profile)
    report.heading("Errors")
    kinds = Counter((run.workers, (c.error or "")[:160]) for run in runs for c in run.calls
                    if c.error)
    report.text("None." if not kinds else "\n".join(
        f"- {n} x at --workers {workers}: {error}"
        for (workers, error), n in sorted(kinds.items())))
    report.heading("Method")
    report.text(
        "Closed loop: each client sends its next `search_docs` call when the previous one is "
        "answered, cycling through the eval questions; latency = POST sent to JSON body "
        "received, measured in the client. Clients are `httpx.AsyncClient`s (one connection "
        "each) in one asyncio loop posting JSON-RPC `tools/call` to `/mcp` (the same load "
        "generator as `benchmarks.serving`, whose report checks it against the SDK client). "
        "Server and clients share the machine's cores (loopback only). Each worker count "
        "gets a fresh server; every worker has answered `/healthz` ready and one untimed "
        "`search_docs` per question has run before the clock starts."
    )


async def run(args: argparse.Namespace) -> int:
    """Measure every worker count, write the report; exit 1 when any call failed."""
    home, questions = served_questions(args.home, args.eval)
    counts = positive_counts(args.workers, "--workers", "1,2")
    report = Report(name="serving-workers", variant=args.variant,
                    title="Multi-worker serving benchmark (kb-mcp serve --workers N)")
    report.fact("KB_HOME", f"`{home}`")
    report.fact("questions", f"{len(questions)} from `{args.eval}`")
    report.fact("clients", str(args.clients))
    report.fact("load per worker count", f"{args.seconds:.0f} s of search_docs")
    report.fact("workers", ", ".join(map(str, counts)))
    report.fact("providers", "all local (KB_*_PROVIDER=local)")
    profile = profile_search_docs(home, questions) if args.profile else None
    runs = [await measure(home, n, args.clients, args.seconds, questions) for n in counts]
    write_report(report, runs, profile)
    path = report.write()
    for one in runs:
        print(f"--workers {one.workers}: {one.requests_per_second:.1f} req/s, "
              f"{' / '.join(one.latency_cells()[1:3])} ms p50 / p95, {one.errors} errors")
    print(f"{path} (took {fmt_duration(time.perf_counter() - report.started)})")
    return 1 if any(one.errors for one in runs) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse options and run."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.serving_workers",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--home", type=Path, required=True, help="a built KB_HOME")
    parser.add_argument("--eval", type=Path, default=DEFAULT_EVAL,
                        help="folder with questions.jsonl (default: the regulatory set)")
    parser.add_argument("--workers", default="1,2",
                        help="comma-separated worker counts (default 1,2)")
    parser.add_argument("--clients", type=int, default=16,
                        help="concurrent clients (default 16)")
    parser.add_argument("--seconds", type=float, default=60.0,
                        help="seconds of load per worker count (default 60; the issue's "
                             "target is stated over 300)")
    parser.add_argument("--no-profile", dest="profile", action="store_false",
                        help="skip the in-process profile of search_docs")
    parser.add_argument("--variant", default="", help="report file suffix")
    args = parser.parse_args(argv)
    if args.clients < 1 or args.seconds <= 0:
        parser.error("--clients and --seconds must be positive")
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
