"""What a soak of the MCP server (``benchmarks.soak``) records — calls, samples of the
server's processes, the concurrent build — and its verdicts against issue 16's bars and its
Markdown report."""

from __future__ import annotations

import contextlib
import math
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from benchmarks.common import LATENCY_HEADERS, Report, fmt_bytes, fmt_duration, latency_summary


#: The tool mix of a client (tool, weight in percent); the brief of issue 16's soak.
MIX = (("search_docs", 50), ("search_graph", 20), ("read_doc", 20), ("list_documents", 10))
TOOLS = tuple(tool for tool, _ in MIX)

#: Seconds a call may take before it counts as hung (default of ``--call-timeout``).
CALL_TIMEOUT = 60.0
#: Seconds a client waits before opening a new session after a hung call or a transport error.
RECONNECT_PAUSE = 1.0
#: Seconds between samples of the server's memory, descriptors and connections.
SAMPLE_SECONDS = 10.0
#: Seconds after the clients closed before the server's connections are counted again.
SETTLE_SECONDS = 3.0

#: The issue's bars: memory growth below 10% over the measured run.
MAX_GROWTH = 0.10
#: Open descriptors of the server may grow this much over the measured part (our choice:
#: pools that open lazily, e.g. the catalog's, add a few; a leak adds one or more per burst).
FD_SLACK = 8
#: "p95 stable": every tool's p95 in the last minute is at most this multiple of its p95 in the
#: second minute (the first minute is left out: it still warms caches). Our definition.
STABLE_P95_RATIO = 1.5


# --------------------------------------------------------------------------------------
# Recording
# --------------------------------------------------------------------------------------
@dataclass
class Call:
    """One tool call: start (seconds since the measured part began; negative in the warm-up),
    duration, and how it ended (``error`` text, or ``hung`` past the timeout)."""

    tool: str
    started: float
    seconds: float
    error: str | None = None
    hung: bool = False


@dataclass
class Sample:
    """The server's processes at one moment (seconds since the measured part began)."""

    at: float
    rss: int
    fds: int
    connections: int
    load1: float = 0.0


@dataclass
class BuildStep:
    """One command of the concurrent build and its time window (soak seconds)."""

    command: str
    started: float
    ended: float = 0.0
    returncode: int | None = None
    output_tail: str = ""


@dataclass
class Soak:
    """Everything one soak recorded."""

    clients: int
    seconds: float
    warmup_seconds: float
    call_timeout: float
    verify: bool
    pause_every: float = 0.0
    pause_seconds: float = 0.0
    calls: list[Call] = field(default_factory=list)
    violations: list[tuple[float, str]] = field(default_factory=list)
    moved_on: int = 0
    #: ``"<doc_id> version <n>"`` → soak seconds when a search first cited it.
    first_seen: dict[str, float] = field(default_factory=dict)
    checks: int = 0
    sessions: int = 0
    session_errors: list[str] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    before: Sample | None = None
    after: Sample | None = None
    build: list[BuildStep] = field(default_factory=list)
    client_cpu_seconds: float = 0.0
    server_cpu_seconds: float = 0.0

    def pause_end(self, at: float) -> float | None:
        """End of the pause ``at`` (soak seconds) falls in, ``None`` when it falls in load:
        with ``pause_every`` set, the measured part alternates ``pause_every`` seconds of load
        and ``pause_seconds`` with no call."""
        if self.pause_every <= 0 or self.pause_seconds <= 0 or at < 0:
            return None
        period = self.pause_every + self.pause_seconds
        phase = at % period
        return at - phase + period if phase >= self.pause_every else None

    def measured(self) -> list[Call]:
        """Calls started in the measured part."""
        return [c for c in self.calls if c.started >= 0]


def process_sample(pid: int, at: float) -> Sample:
    """RSS, descriptors and non-listening TCP connections of ``pid`` and its descendants."""
    import psutil  # noqa: PLC0415

    root = psutil.Process(pid)
    rss = fds = connections = 0
    for proc in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            rss += proc.memory_info().rss
            fds += proc.num_fds()
            connections += sum(1 for c in proc.net_connections(kind="tcp")
                               if c.status != psutil.CONN_LISTEN)
    return Sample(at, rss, fds, connections, os.getloadavg()[0])


# --------------------------------------------------------------------------------------
# Verdicts and the report
# --------------------------------------------------------------------------------------
def minute_of(soak: Soak, minute: int) -> list[Call]:
    """Measured calls that started in minute ``minute`` (0-based)."""
    return [c for c in soak.measured() if minute * 60 <= c.started < (minute + 1) * 60]


def p95_ms(calls: Sequence[Call], tool: str) -> float | None:
    """p95 in ms of ``tool``'s answered calls (``None`` when there were none)."""
    seconds = [c.seconds for c in calls if c.tool == tool and not c.error]
    return latency_summary(seconds).p95_ms if seconds else None


def growth(soak: Soak) -> float | None:
    """RSS growth over the measured part: last sample / first sample - 1."""
    if len(soak.samples) < 2 or not soak.samples[0].rss:
        return None
    return soak.samples[-1].rss / soak.samples[0].rss - 1


def verdicts(soak: Soak) -> list[tuple[str, str, bool | None]]:
    """``(bar, measured, passed)`` per bar of issue 16 ("Load"); ``passed`` is ``None`` when
    the run was too short to judge (p95 stability needs three minutes)."""
    errors = [c for c in soak.calls if c.error and not c.hung]
    hung = [c for c in soak.calls if c.hung]
    rows: list[tuple[str, str, bool | None]] = [
        ("0 errors (isError or exception, warm-up included; failed sessions)",
         f"{len(errors)} calls, {len(soak.session_errors)} sessions",
         not errors and not soak.session_errors),
        (f"0 hung calls (no answer within {soak.call_timeout:.0f} s)", str(len(hung)), not hung),
    ]
    if soak.before and soak.after:
        rows.append(("0 hung connections (server TCP connections after the clients closed "
                     "<= before they opened)",
                     f"{soak.before.connections} before, {soak.after.connections} after",
                     soak.after.connections <= soak.before.connections))
    if len(soak.samples) >= 2:
        first, last = soak.samples[0].fds, soak.samples[-1].fds
        rows.append((f"open descriptors stable (server fds, first to last sample of the measured "
                     f"part, grow by at most {FD_SLACK})", f"{first} → {last}",
                     last - first <= FD_SLACK))
    grown = growth(soak)
    rows.append((f"memory growth < {MAX_GROWTH:.0%} (server RSS, first to last minute of the "
                 "measured part)", "n/a" if grown is None else f"{grown:+.1%}",
                 None if grown is None else grown < MAX_GROWTH))
    minutes = math.ceil(soak.seconds / 60)
    if minutes < 3:
        rows.append(("p95 stable", "run shorter than 3 minutes", None))
    else:
        parts, stable = [], True
        for tool in TOOLS:
            second = p95_ms(minute_of(soak, 1), tool)
            last = p95_ms(minute_of(soak, minutes - 1), tool)
            if second is None or last is None:
                parts.append(f"{tool} n/a")
                continue
            stable &= last <= STABLE_P95_RATIO * second
            parts.append(f"{tool} {second:.0f} → {last:.0f} ms ({last / second:.2f}×)")
        rows.append((f"p95 stable (each tool's last-minute p95 <= {STABLE_P95_RATIO}× its "
                     "second-minute p95)", "; ".join(parts), stable))
    if soak.verify:
        rows.append(("0 half-written documents seen (violations of the checks)",
                     f"{len(soak.violations)} in {soak.checks} checks", not soak.violations))
    return rows


def _ms(value: float | None) -> str:
    return "" if value is None else f"{value:.0f}"


def write_report(report: Report, soak: Soak, questions: int) -> None:
    """Verdicts, per-minute and per-tool tables, memory, errors, the build and the method."""
    report.heading("Verdicts")
    report.table(("bar", "measured", "verdict"),
                 [(bar, got, {True: "pass", False: "**FAIL**", None: "n/a"}[ok])
                  for bar, got, ok in verdicts(soak)], align="lll")
    report.heading("Per minute")
    minutes = math.ceil(soak.seconds / 60)
    rows = []
    for minute in range(minutes):
        calls = minute_of(soak, minute)
        in_minute = [s for s in soak.samples if s.at <= (minute + 1) * 60 + 1]
        sample = in_minute[-1] if in_minute else None
        rows.append([
            minute + 1, len(calls), sum(1 for c in calls if c.error and not c.hung),
            sum(1 for c in calls if c.hung), *(_ms(p95_ms(calls, t)) for t in TOOLS),
            fmt_bytes(sample.rss) if sample else "", sample.fds if sample else "",
            sample.connections if sample else "", f"{sample.load1:.2f}" if sample else "",
        ])
    report.table(("minute", "calls", "errors", "hung", *(f"{t} p95 ms" for t in TOOLS),
                  "server RSS at end", "fds", "TCP conns", "load 1-min"), rows)
    report.heading("Per tool (measured part)")
    measured = soak.measured()
    rows = []
    for tool in TOOLS:
        answered = [c.seconds for c in measured if c.tool == tool and not c.error]
        failed = sum(1 for c in measured if c.tool == tool and c.error)
        cells = latency_summary(answered).cells() if answered else ["0", "", "", "", ""]
        rows.append([f"`{tool}`", *cells, failed])
    report.table(("tool", *LATENCY_HEADERS, "errors + hung"), rows)
    first = soak.samples[0] if soak.samples else None
    last = soak.samples[-1] if soak.samples else None
    peak = max((s.rss for s in soak.samples), default=None)
    wall = max(soak.seconds, 1.0)
    report.text(
        f"{len(measured)} calls in {fmt_duration(soak.seconds)} "
        f"({len(measured) / wall:.1f} calls/s) by {soak.clients} clients; "
        f"{len(soak.calls) - len(measured)} more in the {soak.warmup_seconds:.0f}-s warm-up. "
        f"{soak.sessions} MCP sessions opened ({soak.sessions - soak.clients} reconnects). "
        "Server RSS (pid and children): before the clients "
        f"{fmt_bytes(soak.before and soak.before.rss)}, "
        f"measured start {fmt_bytes(first and first.rss)}, end {fmt_bytes(last and last.rss)}, "
        f"peak sample {fmt_bytes(peak)}. Open descriptors: {soak.before and soak.before.fds} "
        f"before the clients, {soak.after and soak.after.fds} {SETTLE_SECONDS:.0f} s after they "
        f"closed; TCP connections {soak.before and soak.before.connections} → "
        f"{soak.after and soak.after.connections}. CPU: server {soak.server_cpu_seconds:.0f} s, "
        f"clients (this process) {soak.client_cpu_seconds:.0f} s."
    )
    report.heading("Errors")
    kinds = Counter((c.tool, (c.error or "")[:200]) for c in soak.calls if c.error)
    lines = [f"- {n} × `{tool}`: {error}" for (tool, error), n in kinds.most_common(8)]
    lines += [f"- session: {e}" for e in soak.session_errors[:5]]
    report.text("\n".join(lines) if lines else "None.")
    if soak.verify:
        write_build_section(report, soak)
    report.heading("Method")
    mix = ", ".join(f"{w}% {t}" for t, w in MIX)
    report.text(
        f"{soak.clients} MCP clients (mcp SDK `streamable_http_client` + `ClientSession`, one "
        f"asyncio loop, loopback only), each a closed loop over a random mix ({mix}; "
        f"read_doc reads a chunk the client's last search_docs returned) with {questions} "
        "regulatory eval questions. Latency is measured in the client from `call_tool` to its "
        f"result. A call with no answer within {soak.call_timeout:.0f} s is hung; a hung call "
        "or a transport exception closes the session and the client reconnects after "
        f"{RECONNECT_PAUSE:.0f} s; an `isError` result counts as an error and keeps the "
        f"session. The first {soak.warmup_seconds:.0f} s are a warm-up, not in the tables. "
        f"Server samples every {SAMPLE_SECONDS:.0f} s with psutil (RSS, descriptors, TCP "
        "connections not listening, summed over the server pid and its children). \"p95 "
        f"stable\" is our definition: each tool's p95 in the last minute is at most "
        f"{STABLE_P95_RATIO}× its p95 in the second minute. Server and clients share the "
        "machine's 2 cores with other sessions (see the load average), so latencies are "
        "pessimistic; the bars on errors, hangs and memory apply regardless."
    )


def write_build_section(report: Report, soak: Soak) -> None:
    """The concurrent build's steps and the consistency checks."""
    report.heading("The build during the soak")
    report.table(("command", "started s", "ended s", "exit"),
                 [(f"`{s.command}`", f"{s.started:.0f}", f"{s.ended:.0f}", s.returncode)
                  for s in soak.build], align="lrrr")
    failed = [s for s in soak.build if s.returncode != 0]
    for step in failed:
        report.text(f"`{step.command}` output (tail):\n\n```\n{step.output_tail}\n```")
    in_window = [c for c in soak.measured() if soak.build and
                 soak.build[0].started <= c.started <= soak.build[-1].ended]
    report.text(
        f"{len(in_window)} calls started while the build ran. Each search_docs was followed at "
        "once, in the same session, by list_documents (every hit's document must be listed "
        "ready) and read_doc of its first chunk hit (it must succeed from the same version or "
        "a newer one); every search answer must cite one version per document. "
        f"{soak.checks} checks, {len(soak.violations)} violations; {soak.moved_on} reads found "
        "a newer version serving than the search had (a version switch between the two calls, "
        "allowed)."
    )
    report.table(("document version cited by a search", "first cited at s"),
                 sorted(((k, f"{at:.0f}") for k, at in soak.first_seen.items()),
                        key=lambda row: float(row[1])), align="lr")
    if soak.violations:
        report.text("\n".join(f"- at {at:.0f} s: {m}" for at, m in soak.violations[:10]))
