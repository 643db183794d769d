"""Benchmark 3 — serving latency: ``kb-mcp serve`` over HTTP with 1, 4 and 16 concurrent clients.

Run from the repository root (not part of the unit test run)::

    .venv/bin/python -m benchmarks.serving --home benchmarks/work/ingest
    .venv/bin/python -m benchmarks.serving --home DIR --clients 1,4,16 --calls 96
    .venv/bin/python -m benchmarks.serving --home DIR --clients 1 --variant latency

What it does:

1. Starts ``kb-mcp serve`` (the console script next to this Python) on a free loopback port
   over ``--home`` with every provider forced local, and waits for ``/healthz`` (the server
   loads the embedding model before it answers, so start-up includes that).
2. Checks the load generator against the SDK: one ``mcp.Client`` (Streamable HTTP) session
   calls each tool once and the same calls are sent as plain JSON-RPC posts; the structured
   results must be the same (otherwise the script stops).
3. Warm-up (untimed): ``search_docs`` once per question; the first chunk each answer cites
   gives that question's ``read_doc`` arguments (the chunk and the next one), as an agent
   reads on after a search.
4. For each client count: a fixed list of ``--calls`` calls per tool (``search_docs`` and
   ``search_graph`` with the eval questions in turn, ``read_doc`` with the warm-up's
   targets), interleaved by tool, is worked off by N concurrent clients, each with its own
   HTTP connection, taking the next call when its previous one is answered (a closed loop).
   No new call starts after ``--max-seconds``. Per tool: p50/p95/p99/max latency; per level:
   requests per second (calls answered / wall time), errors, and the server's CPU seconds per
   request (``/proc/<pid>/stat``).
5. Stops the server (SIGTERM, then SIGKILL after 20 s) whatever happened.
6. Unless ``--no-profile``: the ``search_docs`` tool's body in this process, without HTTP or
   MCP, timed (CPU per call) and then under ``cProfile`` (``profile_search_docs``): where the
   CPU of one call goes, by stage and by function.

**Why plain JSON-RPC posts, not the SDK client, for the load.** The server is stateless JSON
(``stateless_http=True, json_response=True``, ``kb_mcp.http``): every ``tools/call`` is one
POST to ``/mcp`` answered with one JSON body, and a call needs no session. On this machine (2
cores) the load generator shares the CPU with the server; the SDK client validates every
message with pydantic and runs an anyio task group per session, CPU that would be taken from
the server and counted as server latency at 16 clients. ``httpx`` sends the same bytes
(step 2 checks that the answers are identical) at a fraction of the client-side cost. Each
client is an ``httpx.AsyncClient`` in one asyncio loop.

Output: ``benchmarks/results/serving-<date>[-<variant>].md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.common import (
    DEFAULT_CORPUS,
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

#: Seconds a single call may take before it counts as an error (a timeout).
CALL_TIMEOUT = 120.0

#: The three tools measured.
TOOLS = ("search_docs", "search_graph", "read_doc")

#: MCP Streamable HTTP: a POST must accept both JSON and SSE (MCP spec, "Transports",
#: Streamable HTTP, "Sending Messages to the Server").
POST_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}

#: Default eval questions: the regulatory set (its documents are in the ingest corpus).
DEFAULT_EVAL = DEFAULT_CORPUS / "eval" / "regulatory"


# --------------------------------------------------------------------------------------
# JSON-RPC calls
# --------------------------------------------------------------------------------------
@dataclass
class Call:
    """One timed tool call and how it ended."""

    tool: str
    seconds: float
    error: str | None = None
    structured: dict[str, Any] | None = None


async def call_tool(client: Any, request_id: int, tool: str, arguments: dict[str, Any]) -> Call:
    """POST one ``tools/call`` to ``/mcp`` and time it (connection reuse included).

    Errors are returned in ``Call.error``, never raised: an HTTP status other than 200, a
    JSON-RPC ``error``, a result with ``isError`` (the tool's message), or a transport
    exception (its type and message).
    """
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}
    started = time.perf_counter()
    try:
        response = await client.post("/mcp", json=body, headers=POST_HEADERS)
        seconds = time.perf_counter() - started
    except Exception as exc:  # a benchmark records transport failures, it does not stop
        return Call(tool, time.perf_counter() - started, f"{type(exc).__name__}: {exc}")
    if response.status_code != 200:
        return Call(tool, seconds, f"HTTP {response.status_code}: {response.text[:200]}")
    try:
        message = response.json()
    except json.JSONDecodeError:
        return Call(tool, seconds, f"not JSON: {response.text[:200]}")
    if "error" in message:
        error = message["error"]
        return Call(tool, seconds, f"JSON-RPC {error.get('code')}: {error.get('message')}")
    result = message.get("result") or {}
    if result.get("isError"):
        text = " ".join(c.get("text", "") for c in result.get("content", []))
        return Call(tool, seconds, f"tool error: {text[:200]}")
    return Call(tool, seconds, None, result.get("structuredContent"))


def result_ids(tool: str, structured: dict[str, Any] | None) -> list[str]:
    """The ids a tool's structured result lists (results, relationships or chunks)."""
    if not structured:
        return []
    key = {"search_docs": "results", "search_graph": "relationships", "read_doc": "chunks"}[tool]
    return [str(item.get("id")) for item in structured.get(key, [])]


async def check_against_sdk(base: str, probes: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    """Call each probe through the SDK's Streamable HTTP client and as a plain post; return
    the differences (empty when the result ids agree and neither failed)."""
    import httpx  # noqa: PLC0415
    from mcp import Client  # noqa: PLC0415

    problems: list[str] = []
    sdk: dict[int, tuple[bool, list[str]]] = {}
    async with Client(f"{base}/mcp") as client:
        for number, (tool, arguments) in enumerate(probes):
            result = await client.call_tool(tool, arguments)
            sdk[number] = (bool(result.is_error), result_ids(tool, result.structured_content))
    async with httpx.AsyncClient(base_url=base, timeout=CALL_TIMEOUT) as plain:
        for number, (tool, arguments) in enumerate(probes):
            call = await call_tool(plain, number + 1, tool, arguments)
            mine = (call.error is not None, result_ids(tool, call.structured))
            if mine != sdk[number] or mine[0]:
                problems.append(f"{tool} {arguments}: SDK {sdk[number]}, plain post {mine} "
                                f"({call.error or 'ok'})")
    return problems


# --------------------------------------------------------------------------------------
# Load
# --------------------------------------------------------------------------------------
@dataclass
class Level:
    """One client count's run."""

    clients: int
    planned: int
    calls: list[Call] = field(default_factory=list)
    wall_seconds: float = 0.0
    server_cpu_seconds: float = 0.0
    client_cpu_seconds: float = 0.0
    load_start: float | None = None
    load_end: float | None = None

    @property
    def errors(self) -> int:
        """Calls that failed."""
        return sum(1 for c in self.calls if c.error)

    @property
    def requests_per_second(self) -> float:
        """Calls answered (successfully or not) per wall second."""
        return len(self.calls) / self.wall_seconds if self.wall_seconds else 0.0


def plan(
    questions: Sequence[str], reads: Sequence[dict[str, Any]], calls_per_tool: int
) -> list[tuple[str, dict[str, Any]]]:
    """``calls_per_tool`` calls of each tool, interleaved (search_docs, search_graph, read_doc,
    search_docs, …), cycling through the questions and the read targets.

    Raises:
        ValueError: no questions or no read targets.
    """
    if not questions or not reads:
        raise ValueError("need at least one question and one read_doc target")
    work: list[tuple[str, dict[str, Any]]] = []
    for i in range(calls_per_tool):
        question = questions[i % len(questions)]
        work.append(("search_docs", {"query": question}))
        work.append(("search_graph", {"query": question}))
        work.append(("read_doc", dict(reads[i % len(reads)])))
    return work


def _client_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def run_level(server: Server, clients: int, work: Sequence[tuple[str, dict[str, Any]]],
                    max_seconds: float) -> Level:
    """Work off ``work`` with ``clients`` concurrent closed-loop clients (module docstring)."""
    import httpx  # noqa: PLC0415

    level = Level(clients=clients, planned=len(work))
    next_item = 0
    deadline = time.perf_counter() + max_seconds

    async def client_loop(number: int) -> None:
        nonlocal next_item
        async with httpx.AsyncClient(base_url=server.base, timeout=CALL_TIMEOUT) as http:
            while next_item < len(work) and time.perf_counter() < deadline:
                item = next_item
                next_item += 1
                tool, arguments = work[item]
                level.calls.append(await call_tool(http, item + 1, tool, arguments))

    level.load_start = os.getloadavg()[0]
    cpu_before, client_before = server.cpu_seconds(), _client_cpu()
    started = time.perf_counter()
    await asyncio.gather(*(client_loop(n) for n in range(clients)))
    level.wall_seconds = time.perf_counter() - started
    level.server_cpu_seconds = server.cpu_seconds() - cpu_before
    level.client_cpu_seconds = _client_cpu() - client_before
    level.load_end = os.getloadavg()[0]
    return level


async def warm_up(server: Server, questions: Sequence[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """``search_docs`` once per question (untimed); returns the ``read_doc`` targets (the
    first cited chunk and the next one) and any errors."""
    import httpx  # noqa: PLC0415

    reads: list[dict[str, Any]] = []
    errors: list[str] = []
    async with httpx.AsyncClient(base_url=server.base, timeout=CALL_TIMEOUT) as http:
        for number, question in enumerate(questions, start=1):
            call = await call_tool(http, number, "search_docs", {"query": question})
            if call.error:
                errors.append(f"search_docs {question!r}: {call.error}")
                continue
            for item in (call.structured or {}).get("results", []):
                if item.get("chunk_number") is not None:
                    n = int(item["chunk_number"])
                    reads.append({"document": item["doc_id"], "chunk_numbers": [n, n + 1]})
                    break
    return reads, errors


# --------------------------------------------------------------------------------------
# In-process profile of one search_docs
# --------------------------------------------------------------------------------------
#: Functions whose cumulative time the profile table lists (module:function substrings).
PROFILED_STAGES = (
    ("query embedding (a worker thread's; measured apart, no profiler)", "embed_query"),
    ("retrieval (hybrid search, fusion, re-ordering, citations)",
     "retrieval.py:{search_docs}"),
    ("hybrid search (SQL, payload decoding, fusion)", "vectors.py:{hybrid_search}"),
    ("exact identifiers (sparse searches)", "exact_identifier_matches"),
    ("rows and sentences, bonuses (feature_order)", "feature_order"),
    ("financial statements below the cut (statement_candidates)", "statement_candidates"),
    ("catalog (serving states, scope)", "read_serving_states"),
    ("figure images", "figure_images"),
    ("render (text + structured result)", "docs_result"),
)


@dataclass
class Profile:
    """CPU per ``search_docs`` call in-process, in ms: without the profiler (``cpu_ms``), and
    under ``cProfile`` (which inflates Python-level calls) per stage, with the functions of
    most own time."""

    cpu_ms: float
    profiled_ms: float
    stages: list[tuple[str, float]]
    hottest: list[tuple[str, int, float]]


def profile_search_docs(home: Path, questions: Sequence[str], rounds: int = 2) -> Profile:
    """Run the body of the ``search_docs`` tool (``kb_mcp.tools.search_docs.answer_search``:
    scope, ``kb_shared.search.retrieval.search_docs`` with the server's Markdown pages and acronym
    table, figure images, render) in this process, without HTTP or MCP: one untimed pass over
    ``questions``, then ``rounds`` timed passes without the profiler and one under
    ``cProfile`` on the calling thread's CPU; the query embedding, which runs on a worker
    thread, is timed apart (``embed_query`` of each question, the process's CPU).

    Returns:
        CPU ms per call without and with the profiler, cumulative CPU ms per call of each
        ``PROFILED_STAGES`` entry, and the 10 functions with the most own CPU time (name,
        calls per call, ms per call).
    """
    import cProfile  # noqa: PLC0415
    import pstats  # noqa: PLC0415

    from kb_mcp.links import links_for  # noqa: PLC0415
    from kb_mcp.state import open_state  # noqa: PLC0415
    from kb_mcp.tools.search_docs import answer_search  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415

    settings = Settings(home=home, **{f"{r.lower()}_provider": "local" for r in PROVIDER_ROLES})
    state = open_state(settings)
    links = links_for(settings)

    def one(question: str) -> None:
        answer_search(state, links, question)

    try:
        state.warm()
        for question in questions:
            one(question)
        cpu_before = time.process_time()
        for _ in range(rounds):
            for question in questions:
                one(question)
        cpu_ms = 1000 * (time.process_time() - cpu_before) / (rounds * len(questions))
        cpu_before = time.process_time()
        for question in questions:
            state.embedder.embed_query(question)
        embedding_ms = 1000 * (time.process_time() - cpu_before) / len(questions)
        # the calling thread's CPU only: the worker thread's embedding would otherwise be
        # charged to whatever the caller runs meanwhile
        profiler = cProfile.Profile(time.thread_time)
        cpu_before = time.process_time()
        profiler.enable()
        for question in questions:
            one(question)
        profiler.disable()
        profiled_ms = 1000 * (time.process_time() - cpu_before) / len(questions)
    finally:
        state.close()
    calls = len(questions)
    stats = pstats.Stats(profiler)
    table = stats.stats  # type: ignore[attr-defined]
    stages: list[tuple[str, float]] = []
    for label, needle in PROFILED_STAGES:
        cumulative = sum(
            entry[3] for (path, _line, name), entry in table.items()
            if needle in f"{Path(path).name}:{{{name}}}" or needle == name
        )
        stages.append((label, embedding_ms if needle == "embed_query" else
                       1000 * cumulative / calls))
    stats.sort_stats("tottime")
    hottest = [
        (f"{Path(path).name}:{line}({name})" if line else name, round(entry[1] / calls),
         1000 * entry[2] / calls)
        for path, line, name in stats.fcn_list[:10]  # type: ignore[attr-defined]
        for entry in (table[(path, line, name)],)
    ]
    return Profile(cpu_ms, profiled_ms, stages, hottest)


def add_profile_section(report: Report, profile: Profile) -> None:
    """The profile's heading, CPU per call and its two tables."""
    report.heading("Where a search_docs call spends its CPU (in-process profile)")
    report.text(
        "The tool's body without HTTP or MCP (scope, retrieval with page-precise citations, "
        f"figure images, render): **{profile.cpu_ms:.1f} ms CPU per call** without a "
        f"profiler; {profile.profiled_ms:.1f} ms under `cProfile`, whose per-stage figures "
        "below carry its overhead (Python-heavy stages are inflated most) and count the "
        "calling thread's CPU only (the query embedding's row is timed apart).")
    report.table(("stage (under cProfile)", "cumulative CPU ms / call"),
                 [[label, f"{ms:.1f}"] for label, ms in profile.stages])
    report.table(("function (most own time)", "calls / call", "own CPU ms / call"),
                 [[f"`{name}`", n, f"{ms:.2f}"] for name, n, ms in profile.hottest])


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------
def write_report(report: Report, levels: Sequence[Level], server: Server,
                 memory: tuple[int | None, int | None], sdk_problems: Sequence[str],
                 warm_errors: Sequence[str]) -> None:
    """Headline, per-level and per-tool tables, errors and the method."""
    report.heading("Headline")
    rows = []
    for level in levels:
        for tool in TOOLS:
            seconds = [c.seconds for c in level.calls if c.tool == tool and not c.error]
            if not seconds:
                rows.append([level.clients, f"`{tool}`", "0", "", "", "", "", ""])
                continue
            lat = latency_summary(seconds)
            rows.append([level.clients, f"`{tool}`", *lat.cells(),
                         sum(1 for c in level.calls if c.tool == tool and c.error)])
    report.table(("clients", "tool", *LATENCY_HEADERS, "errors"), rows, align="llrrrrrr")
    report.heading("Throughput per client count")
    report.table(
        ("clients", "calls (planned)", "wall s", "requests/s", "errors",
         "server CPU ms / request", "client CPU ms / request", "load 1-min start → end"),
        [[level.clients, f"{len(level.calls)} ({level.planned})", f"{level.wall_seconds:.1f}",
          f"{level.requests_per_second:.1f}", level.errors,
          f"{1000 * level.server_cpu_seconds / max(len(level.calls), 1):.1f}",
          f"{1000 * level.client_cpu_seconds / max(len(level.calls), 1):.1f}",
          f"{level.load_start:.2f} → {level.load_end:.2f}"] for level in levels],
    )
    current, peak = memory
    report.text(
        f"Server start-up (process start to the first `/healthz` 200, embedding model loaded): "
        f"{server.startup_seconds:.1f} s. Server RSS at the end {fmt_bytes(current)}, peak "
        f"{fmt_bytes(peak)}. A level stops handing out calls after its time cap, so `calls` "
        "below `planned` means the cap was hit."
    )
    report.heading("Errors")
    failed = [(level.clients, c) for level in levels for c in level.calls if c.error]
    if not failed and not sdk_problems and not warm_errors:
        report.text("None: every call returned a result without `isError`, and the SDK "
                    "client's answers matched the plain posts'.")
    else:
        kinds: dict[tuple[int, str, str], int] = defaultdict(int)
        for clients, call in failed:
            kinds[(clients, call.tool, (call.error or "")[:160])] += 1
        lines = [f"- {n} x {tool} at {clients} clients: {error}"
                 for (clients, tool, error), n in sorted(kinds.items())]
        lines += [f"- SDK check: {p}" for p in sdk_problems]
        lines += [f"- warm-up: {e}" for e in warm_errors]
        report.text("\n".join(lines))
    report.heading("Method")
    report.text(
        "Closed loop: each client sends its next call when the previous one is answered, "
        "from one shared list of calls interleaved by tool (search_docs and search_graph "
        "with the eval questions in turn; read_doc with 2 chunks of the first chunk each "
        "question's search_docs cited in the untimed warm-up). Latency = POST sent to JSON "
        "body received, measured in the client; requests/s = calls answered / wall time of "
        "the level. Clients are `httpx.AsyncClient`s (one connection each) posting JSON-RPC "
        "`tools/call` to `/mcp` of the stateless JSON server; before the run one `mcp.Client` "
        "(Streamable HTTP) session made the same calls and got the same results. Server and "
        "clients share the machine's cores (loopback only); the client's CPU per request is "
        "shown so its share is visible."
    )


async def run(args: argparse.Namespace) -> int:
    """Start the server, check, warm up, run every level, write the report."""
    home, questions = served_questions(args.home, args.eval)
    levels_wanted = positive_counts(args.clients, "--clients", "1,4,16")

    report = Report(name="serving", title="Serving latency benchmark (kb-mcp over HTTP)",
                    variant=args.variant)
    report.fact("KB_HOME", f"`{home}`")
    report.fact("questions", f"{len(questions)} from `{args.eval}`")
    report.fact("calls per tool per level", f"{args.calls} (cap {args.max_seconds:.0f} s "
                "per level)")
    report.fact("clients", ", ".join(map(str, levels_wanted)))
    report.fact("providers", "all local (KB_*_PROVIDER=local)")
    report.fact("load generator", "httpx JSON-RPC posts, one asyncio loop (see Method)")

    levels: list[Level] = []
    local = {f"KB_{role}_PROVIDER": "local" for role in PROVIDER_ROLES}
    with running_server(home, WORK_DIR / "serving-server.log",
                        env=server_env(home, **local)) as server:
        log(f"kb-mcp serving {home} at {server.base} after {server.startup_seconds:.1f} s")
        reads, warm_errors = await warm_up(server, questions)
        if not reads:
            raise SystemExit(f"the warm-up found nothing to read: {warm_errors[:3]}")
        probes = [("search_docs", {"query": questions[0]}),
                  ("search_graph", {"query": questions[0]}),
                  ("read_doc", reads[0])]
        sdk_problems = await check_against_sdk(server.base, probes)
        if sdk_problems:
            log("SDK and plain posts disagree: " + "; ".join(sdk_problems))
        work = plan(questions, reads, args.calls)
        for clients in levels_wanted:
            log(f"{clients} clients: {len(work)} calls")
            level = await run_level(server, clients, work, args.max_seconds)
            levels.append(level)
            log(f"{clients} clients: {len(level.calls)} calls in {level.wall_seconds:.1f} s, "
                f"{level.requests_per_second:.1f} req/s, {level.errors} errors")
        memory = server.memory()
    log(f"server stopped (exit code {server.process.returncode})")
    write_report(report, levels, server, memory, sdk_problems, warm_errors)
    if args.profile:
        log("profiling search_docs in this process")
        add_profile_section(report, profile_search_docs(home, questions))
    report.write()
    for level in levels:
        docs = [c.seconds for c in level.calls if c.tool == "search_docs" and not c.error]
        if docs:
            lat = latency_summary(docs)
            print(f"{level.clients:3} clients: search_docs p50 {lat.p50_ms:.1f} ms p95 "
                  f"{lat.p95_ms:.1f} ms; {level.requests_per_second:.1f} req/s; "
                  f"{level.errors} errors")
    print(f"took {fmt_duration(time.perf_counter() - report.started)}")
    failed = sum(level.errors for level in levels)
    return 1 if failed or sdk_problems else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Parse options and run (exit code 1 when any call failed or the SDK check disagreed)."""
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.serving",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--home", type=Path, required=True,
                        help="a built KB_HOME (e.g. benchmarks/work/ingest)")
    parser.add_argument("--eval", type=Path, default=DEFAULT_EVAL,
                        help="folder with questions.jsonl (default: the regulatory set)")
    parser.add_argument("--clients", default="1,4,16",
                        help="comma-separated concurrent client counts (default 1,4,16)")
    parser.add_argument("--calls", type=int, default=96,
                        help="calls per tool per client count (default 96)")
    parser.add_argument("--max-seconds", type=float, default=120.0,
                        help="no new call starts after this many seconds of a level "
                             "(default 120)")
    parser.add_argument("--no-profile", dest="profile", action="store_false",
                        help="skip the in-process profile of search_docs (after the load)")
    parser.add_argument("--variant", default="", help="report file suffix")
    args = parser.parse_args(argv)
    if args.calls < 1:
        parser.error("--calls must be at least 1")
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
