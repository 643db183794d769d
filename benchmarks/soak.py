"""Soak of the MCP server (issue 16, "Load"): ``kb-mcp serve`` under 16 concurrent MCP clients
for 10 minutes, optionally while a build writes to the same ``KB_HOME``.

Run from the repository root (not part of the unit test run)::

    .venv/bin/python -m benchmarks.soak --minutes 10 --clients 16
    .venv/bin/python -m benchmarks.soak --home H --minutes 10 --clients 16 \\
        --while-building ../shared/corpus/pdfs/aemo_FCAS_Model_in_NEMDE.pdf

What it does:

1. Uses the corpus in ``--home``, or builds ``--pdfs`` into it first (default home
   ``benchmarks/work/soak``, three small AEMO PDFs).
2. Starts ``kb-mcp serve`` as a subprocess on a free loopback port, every provider local
   (``benchmarks.mcp_server.running_server``), and samples the server's processes (psutil: the
   server pid and its children) every ``SAMPLE_SECONDS``: resident memory, open file
   descriptors and TCP connections.
3. ``--clients`` clients, each a real MCP client (the SDK's ``streamable_http_client`` and a
   ``ClientSession``, its own HTTP connection pool), call each tool once (``FIRST_ROUND``),
   then loop over a random mix (``MIX``: 50% search_docs, 20% search_graph, 20% read_doc of a
   chunk the client's last search returned, 10% list_documents; questions from the regulatory
   eval set) until the time is up: first ``--warmup-seconds`` unmeasured, then ``--minutes``
   measured. Every call has a client timeout (``--call-timeout``); a call past it counts as
   hung. Reconnect policy: a hung call or a transport exception closes the client's session
   and a new one is opened after ``RECONNECT_PAUSE`` seconds; a tool error (``isError``) keeps
   the session.
4. ``--while-building PDF...``: when the measured part starts, a separate process runs
   ``kb add PDF --build`` for each file in turn, then ``kb add --new-version --build`` with a
   changed copy (last page removed) of the first document the server listed. Meanwhile each
   search_docs is followed at once by list_documents and a read_doc of its first chunk hit, and
   the answers are checked (``check_*``): every hit's document is listed ready, read_doc of a
   hit's chunk succeeds, and no answer mixes two versions of one document.
5. ``--pause-every S``: bursts instead of constant load; after every ``S`` seconds of load all
   clients pause for ``--pause-seconds`` (sessions stay open), as agents do between questions.
   The server's tools run on anyio worker threads, which exit after 10 s idle, so pauses
   longer than that make the server start new threads (and whatever they open) per burst.
6. Writes ``benchmarks/results/soak-<date>[-<variant>].md`` (``benchmarks.soak_report``): per
   minute calls, errors, hung calls, p95 per tool and the server's memory and descriptors; per
   tool p50/p95/p99; the verdicts against the issue's bars (``verdicts``).

Exit code 1 when a verdict fails.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import (
    DEFAULT_PDFS,
    PROVIDER_ROLES,
    WORK_DIR,
    Report,
    add_pdfs,
    fmt_duration,
    kb_environment,
    log,
    open_corpus,
    select_pdfs,
)
from benchmarks.mcp_server import Server, running_server, server_env
from benchmarks.soak_report import (
    CALL_TIMEOUT,
    MIX,
    RECONNECT_PAUSE,
    SAMPLE_SECONDS,
    SETTLE_SECONDS,
    TOOLS,
    BuildStep,
    Call,
    Soak,
    process_sample,
    verdicts,
    write_report,
)

#: A client's first calls, one of each tool (read_doc after a search gave it a chunk), before
#: the random mix: every tool is exercised even in a run of seconds.
FIRST_ROUND = ("search_docs", "read_doc", "search_graph", "list_documents")

#: The home built when ``--home`` holds no corpus (small AEMO PDFs the eval questions cite).
DEFAULT_HOME = WORK_DIR / "soak"
DEFAULT_HOME_PDFS = (
    "aemo_Fast_Start_Unit_Inflexibility_Profile_Model_October_2014.pdf",
    "aemo_Schedule_of_Constraint_Violation_Penalty_factors.pdf",
    "aemo_Treatment_of_Loss_Factors_in_the_NEM.pdf",
)

#: The ``kb`` console script next to this interpreter.
KB = str(Path(sys.executable).with_name("kb"))


# --------------------------------------------------------------------------------------
# Checking answers
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Hit:
    """A chunk or figure an answer cites: its document, the stored version and chunk number."""

    doc_id: str
    version: int
    chunk_number: int | None
    id: str


def stored_version(result_id: str) -> int:
    """The version a result id was stored under: ids are ``chunk_id(version_key(doc, v), n)``
    or ``figure_id(...)`` (``kb_shared.identity``), and ``version_key`` adds ``@v<v>`` from 2."""
    from kb_shared.identity import split_version_key  # noqa: PLC0415

    key = result_id.split("#figure-", 1)[0] if "#figure-" in result_id else \
        result_id.rsplit("-", 1)[0]
    return split_version_key(key)[1]


def hits_of(structured: dict[str, Any] | None, key: str = "results") -> list[Hit]:
    """The hits of a structured answer: ``results`` of search_docs, ``excerpts`` of
    search_graph, ``chunks`` of read_doc (``kb_mcp.schemas.ResultRef`` items)."""
    return [
        Hit(str(item["doc_id"]), stored_version(str(item["id"])), item.get("chunk_number"),
            str(item["id"]))
        for item in (structured or {}).get(key, [])
    ]


def check_versions(hits: Sequence[Hit]) -> list[str]:
    """One message per document whose hits in one answer come from two or more versions."""
    seen: dict[str, set[int]] = {}
    for hit in hits:
        seen.setdefault(hit.doc_id, set()).add(hit.version)
    return [f"{doc} answered from versions {sorted(v)} at once"
            for doc, v in sorted(seen.items()) if len(v) > 1]


def check_listed(hits: Sequence[Hit], listing: dict[str, Any] | None) -> list[str]:
    """One message per hit document that list_documents' structured answer does not list
    (it lists only ready documents)."""
    listed = {str(d["doc_id"]) for d in (listing or {}).get("documents", [])}
    missing = sorted({hit.doc_id for hit in hits} - listed)
    return [f"{doc} was a search hit but is not listed ready" for doc in missing]


def check_read(hit: Hit, read: dict[str, Any] | None) -> tuple[str | None, bool]:
    """Compare read_doc's structured answer for ``hit``'s chunk with the hit.

    Returns:
        ``(violation or None, moved_on)``: ``moved_on`` is True when a newer version became
        the served one between the search and the read (the chunk may then differ; not a
        violation). A violation is an older version than the hit's, or the chunk missing from
        the same version.
    """
    chunks = hits_of(read, "chunks")
    versions = {c.version for c in chunks}
    if len(versions) > 1:
        return f"read_doc {hit.doc_id} mixed versions {sorted(versions)}", False
    served = next(iter(versions), None)
    if served is not None and served > hit.version:
        return None, True
    if served is not None and served < hit.version:
        return f"read_doc {hit.doc_id} served version {served} after a hit of {hit.version}", False
    if hit.chunk_number in (read or {}).get("missing", []) or not chunks:
        return f"read_doc {hit.doc_id} chunk {hit.chunk_number} missing (hit {hit.id})", False
    return None, False


# --------------------------------------------------------------------------------------
# Clients
# --------------------------------------------------------------------------------------
class Client:
    """One closed-loop MCP client: its random mix, its last hits and its session."""

    def __init__(self, number: int, soak: Soak, url: str, questions: Sequence[str],
                 clock: Any, deadline: float) -> None:
        self.rng = random.Random(1000 + number)
        self.soak, self.url, self.questions = soak, url, questions
        self.clock, self.deadline = clock, deadline
        self.hits: list[Hit] = []
        self.first_round = list(FIRST_ROUND)

    async def call(self, session: Any, tool: str, arguments: dict[str, Any]
                   ) -> tuple[dict[str, Any] | None, bool]:
        """Time one call; returns ``(structured content or None, session still usable)``."""
        import anyio  # noqa: PLC0415

        started = self.clock()
        try:
            with anyio.fail_after(self.soak.call_timeout):
                result = await session.call_tool(tool, arguments)
        except TimeoutError:
            self.soak.calls.append(Call(tool, started, self.clock() - started,
                                        f"no answer within {self.soak.call_timeout:.0f} s",
                                        hung=True))
            return None, False
        except Exception as error:  # a soak records transport failures and reconnects
            self.soak.calls.append(Call(tool, started, self.clock() - started,
                                        f"{type(error).__name__}: {error}"[:300]))
            return None, False
        seconds = self.clock() - started
        if result.is_error:
            text = " ".join(getattr(c, "text", "") for c in result.content)
            self.soak.calls.append(Call(tool, started, seconds, f"isError: {text[:300]}"))
            return None, True
        self.soak.calls.append(Call(tool, started, seconds))
        return result.structured_content, True

    def violation(self, messages: Sequence[str]) -> None:
        """Record consistency violations at this moment."""
        self.soak.checks += 1
        self.soak.violations.extend((self.clock(), m) for m in messages)

    async def read_hit(self, session: Any, hit: Hit) -> bool:
        """read_doc the chunk of ``hit`` and check the answer; returns session usable."""
        read, usable = await self.call(
            session, "read_doc", {"document": hit.doc_id, "chunk_numbers": [hit.chunk_number]})
        if read is not None:
            problem, moved = check_read(hit, read)
            self.soak.moved_on += moved
            self.violation([problem] if problem else [])
        return usable

    async def step(self, session: Any) -> bool:
        """One call of the mix (plus the checks after a search when verifying); returns
        whether the session is still usable."""
        if self.first_round:
            tool = self.first_round.pop(0)
        else:
            tool = self.rng.choices(TOOLS, weights=[w for _, w in MIX])[0]
        chunk_hits = [h for h in self.hits if h.chunk_number is not None]
        if tool == "read_doc" and not chunk_hits:
            tool = "search_docs"
        question = self.rng.choice(self.questions)
        if tool == "read_doc":
            return await self.read_hit(session, self.rng.choice(chunk_hits))
        if tool == "list_documents":
            listing, usable = await self.call(session, tool, {})
            if listing is not None:
                self.violation(check_listed(self.hits, listing))
            return usable
        answer, usable = await self.call(session, tool, {"query": question})
        if answer is None:
            return usable
        found = hits_of(answer, "results" if tool == "search_docs" else "excerpts")
        self.violation(check_versions(found))
        now = self.clock()
        for hit in found:
            self.soak.first_seen.setdefault(f"{hit.doc_id} version {hit.version}", now)
        if tool != "search_docs":
            return usable
        self.hits = found
        if self.soak.verify and found:
            listing, usable = await self.call(session, "list_documents", {})
            if listing is not None:
                self.violation(check_listed(found, listing))
            first = next((h for h in found if h.chunk_number is not None), None)
            if usable and first is not None:
                usable = await self.read_hit(session, first)
        return usable

    async def run(self) -> None:
        """Open a session, step until the deadline; reconnect after a broken one."""
        from mcp import ClientSession  # noqa: PLC0415
        from mcp.client.streamable_http import streamable_http_client  # noqa: PLC0415

        while self.clock() < self.deadline:
            try:
                async with streamable_http_client(self.url) as (read, write), \
                        ClientSession(read, write) as session:
                    await session.initialize()
                    self.soak.sessions += 1
                    while self.clock() < self.deadline:
                        pause = self.soak.pause_end(self.clock())
                        if pause is not None:
                            await asyncio.sleep(min(pause, self.deadline) - self.clock())
                        elif not await self.step(session):
                            break
            except BaseException as error:  # noqa: BLE001 - task groups raise groups
                if isinstance(error, (KeyboardInterrupt, asyncio.CancelledError)):
                    raise
                self.soak.session_errors.append(f"{type(error).__name__}: {error}"[:300])
            if self.clock() < self.deadline:
                await asyncio.sleep(RECONNECT_PAUSE)


# --------------------------------------------------------------------------------------
# The concurrent build
# --------------------------------------------------------------------------------------
def changed_copy(pdf: bytes, folder: Path, name: str) -> Path:
    """``name`` in ``folder``: ``pdf`` without its last page (or with a changed title when it
    has one page), so intake sees new content under the same name."""
    import pymupdf  # noqa: PLC0415

    with pymupdf.open(stream=pdf, filetype="pdf") as doc:
        if doc.page_count > 1:
            doc.delete_page(doc.page_count - 1)
        else:
            doc.set_metadata({**doc.metadata, "title": "soak new version"})
        target = folder / name
        doc.save(target)
    return target


def build_while_serving(soak: Soak, home: Path, pdfs: Sequence[Path], new_version: tuple[str, str],
                        clock: Any) -> threading.Thread:
    """Start a thread that runs, one after the other, ``kb add PDF --build`` for each of
    ``pdfs`` and ``kb add --new-version --build`` with ``changed_copy`` of the PDF at the URL
    ``new_version[1]`` (named ``new_version[0]``), recording each in ``soak.build``."""
    import httpx  # noqa: PLC0415

    env = server_env(home, DAGSTER_HOME=str(home / "dagster"),
                     **{f"KB_{role}_PROVIDER": "local" for role in PROVIDER_ROLES})

    def run(args: list[str]) -> None:
        step = BuildStep(" ".join(["kb", *args[1:]]), clock())
        soak.build.append(step)
        done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
        step.ended, step.returncode = clock(), done.returncode
        step.output_tail = (done.stdout + done.stderr)[-600:]
        log(f"build step `{step.command}` exited {done.returncode} after "
            f"{step.ended - step.started:.0f} s")

    def body() -> None:
        for pdf in pdfs:
            run([KB, "add", str(pdf), "--build"])
        name, url = new_version
        with tempfile.TemporaryDirectory(prefix="kb-soak-") as folder:
            try:
                response = httpx.get(url.split("#", 1)[0], timeout=60)
                response.raise_for_status()
                copy = changed_copy(response.content, Path(folder), name)
            except Exception as error:  # recorded as a failed step of the report
                soak.build.append(BuildStep(f"new version of {name}", clock(), clock(), None,
                                            f"{type(error).__name__}: {error}"))
                return
            run([KB, "add", str(copy), "--new-version", "--build"])

    thread = threading.Thread(target=body, name="soak-build", daemon=True)
    thread.start()
    return thread


# --------------------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """What to run: clients, measured seconds, warm-up seconds, call timeout, the PDFs to
    build during the measured part (none: a plain soak), and pauses (``Soak.pause_end``;
    0: constant load)."""

    clients: int
    seconds: float
    warmup_seconds: float = 30.0
    call_timeout: float = CALL_TIMEOUT
    while_building: tuple[Path, ...] = ()
    pause_every: float = 0.0
    pause_seconds: float = 0.0


def _own_cpu() -> float:
    import resource  # noqa: PLC0415

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def soak_server(server: Server, home: Path, plan: Plan, questions: Sequence[str]) -> Soak:
    """Run ``plan`` against the running ``server`` over ``home`` (module docstring, steps 2-4).

    Raises:
        ValueError: a PDF to build is already a document of ``home``, or the server lists no
            document to make a new version of.
    """
    import httpx  # noqa: PLC0415
    import psutil  # noqa: PLC0415

    soak = Soak(plan.clients, plan.seconds, plan.warmup_seconds, plan.call_timeout,
                verify=bool(plan.while_building), pause_every=plan.pause_every,
                pause_seconds=plan.pause_seconds)
    listing = httpx.post(f"{server.base}/mcp", json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "list_documents", "arguments": {}}},
        headers={"Accept": "application/json, text/event-stream"}, timeout=60,
    ).json()["result"]["structuredContent"]["documents"]
    if plan.while_building:
        names = {d["name"] for d in listing}
        already = [p.name for p in plan.while_building if p.name in names]
        if already:
            raise ValueError(f"{', '.join(already)} already in {home}: soak while building "
                             "needs PDFs the home does not hold (use a fresh --home)")
        if not listing:
            raise ValueError(f"{home} lists no document to add a new version of")
    pid = server.process.pid
    server_cpu = psutil.Process(pid).cpu_times()
    origin = time.perf_counter() + plan.warmup_seconds

    def clock() -> float:
        return time.perf_counter() - origin

    soak.before = process_sample(pid, clock())
    deadline = plan.seconds
    cpu_before = _own_cpu()
    clients = [Client(n, soak, f"{server.base}/mcp", questions, clock, deadline)
               for n in range(plan.clients)]
    tasks = [asyncio.create_task(c.run()) for c in clients]
    while clock() < 0:
        await asyncio.sleep(min(1.0, -clock()))
    soak.samples.append(process_sample(pid, clock()))
    builder = None
    if plan.while_building:
        first = listing[0]
        builder = build_while_serving(soak, home, plan.while_building,
                                      (first["name"], first["url"]), clock)
    while clock() < deadline:
        await asyncio.sleep(min(SAMPLE_SECONDS, max(deadline - clock(), 0.01)))
        soak.samples.append(process_sample(pid, clock()))
    await asyncio.gather(*tasks)
    soak.client_cpu_seconds = _own_cpu() - cpu_before
    cpu = psutil.Process(pid).cpu_times()
    soak.server_cpu_seconds = (cpu.user + cpu.system) - (server_cpu.user + server_cpu.system)
    if builder is not None:
        while builder.is_alive():
            await asyncio.sleep(1.0)
    await asyncio.sleep(SETTLE_SECONDS)
    soak.after = process_sample(pid, clock())
    return soak


def ensure_home(home: Path, pdf_names: Sequence[str], pdf_folder: Path = DEFAULT_PDFS) -> None:
    """Build ``pdf_names`` of ``pdf_folder`` into ``home`` unless it already holds a corpus.

    Raises:
        RuntimeError: a PDF was not added or did not build (with the reasons).
    """
    from kb_assets import operations  # noqa: PLC0415

    if (home / "kb.sqlite").exists():
        return
    home.mkdir(parents=True, exist_ok=True)
    with kb_environment(home):
        corpus = open_corpus(home)
        try:
            added, outcomes = add_pdfs(corpus, select_pdfs(pdf_folder, pdf_names))
            if len(added) != len(outcomes):
                raise RuntimeError(f"not every PDF was added: {outcomes}")
            log(f"building {len(added)} documents into {home}")
            built = operations.build_documents(corpus.stores, corpus.instance, added)
        finally:
            corpus.close()
    failed = [(b.name, b.reason) for b in built if b.status != "ready"]
    if failed:
        raise RuntimeError(f"the soak home did not build: {failed}")


def run_soak(home: Path, plan: Plan, questions: Sequence[str], log_path: Path) -> Soak:
    """Start ``kb-mcp serve`` over ``home`` (local providers) and run ``plan`` against it."""
    local = {f"KB_{role}_PROVIDER": "local" for role in PROVIDER_ROLES}
    with running_server(home, log_path, env=server_env(home, **local)) as server:
        log(f"kb-mcp serving {home} at {server.base} after {server.startup_seconds:.1f} s")
        soak = asyncio.run(soak_server(server, home, plan, questions))
        if server.process.poll() is not None:
            soak.session_errors.append(f"the server exited with {server.process.returncode}")
    return soak


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """Parse options, run the soak, write the report (exit 1 when a verdict fails)."""
    from benchmarks.retrieval import load_eval_set  # noqa: PLC0415
    from benchmarks.serving import DEFAULT_EVAL  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--home", type=Path, default=DEFAULT_HOME,
                        help=f"a built KB_HOME, or where to build one (default {DEFAULT_HOME})")
    parser.add_argument("--pdfs", nargs="+", default=list(DEFAULT_HOME_PDFS),
                        help="PDFs of the shared corpus to build when --home holds no corpus")
    parser.add_argument("--minutes", type=float, default=10.0, help="measured minutes (10)")
    parser.add_argument("--clients", type=int, default=16, help="concurrent clients (16)")
    parser.add_argument("--warmup-seconds", type=float, default=30.0,
                        help="unmeasured load before the measured part (30)")
    parser.add_argument("--call-timeout", type=float, default=CALL_TIMEOUT,
                        help=f"seconds before a call counts as hung ({CALL_TIMEOUT:.0f})")
    parser.add_argument("--while-building", type=Path, nargs="+", default=[], metavar="PDF",
                        help="PDFs to add and build into --home during the soak")
    parser.add_argument("--pause-every", type=float, default=0.0, metavar="SECONDS",
                        help="bursts: after this many seconds of load every client pauses "
                             "(0, the default: constant load)")
    parser.add_argument("--pause-seconds", type=float, default=15.0,
                        help="length of each pause (15; anyio's idle worker threads exit "
                             "after 10 s)")
    parser.add_argument("--eval", type=Path, default=DEFAULT_EVAL,
                        help="folder with questions.jsonl (default: the regulatory set)")
    parser.add_argument("--variant", default="", help="report file suffix")
    args = parser.parse_args(argv)
    if args.clients < 1 or args.minutes <= 0 or args.call_timeout <= 0:
        parser.error("--clients, --minutes and --call-timeout must be positive")
    missing = [p for p in args.while_building if not p.is_file()]
    if missing:
        parser.error(f"no such PDF: {', '.join(map(str, missing))}")
    home = args.home.resolve()
    questions = [q.question for q in load_eval_set(args.eval).questions]
    ensure_home(home, args.pdfs)
    plan = Plan(args.clients, args.minutes * 60, args.warmup_seconds, args.call_timeout,
                tuple(p.resolve() for p in args.while_building), args.pause_every,
                args.pause_seconds)
    variant = args.variant or ("while-building" if plan.while_building else
                               "bursts" if plan.pause_every > 0 else "")
    report = Report(name="soak", title="Soak of the MCP server (kb-mcp over HTTP)",
                    variant=variant)
    report.fact("KB_HOME", f"`{home}`")
    report.fact("clients", str(plan.clients))
    report.fact("measured", f"{fmt_duration(plan.seconds)} after a {plan.warmup_seconds:.0f}-s "
                "warm-up")
    report.fact("built during the soak", ", ".join(p.name for p in plan.while_building)
                + " and a new version of the first listed document" if plan.while_building
                else "nothing")
    report.fact("load", f"bursts: {plan.pause_every:.0f} s of load, then "
                f"{plan.pause_seconds:.0f} s with no call, repeated" if plan.pause_every > 0
                else "constant")
    report.fact("providers", "all local (KB_*_PROVIDER=local)")
    server_log = WORK_DIR / f"soak-server{'-' + variant if variant else ''}.log"
    try:
        soak = run_soak(home, plan, questions, server_log)
    except ValueError as error:
        raise SystemExit(f"soak refused: {error}") from error
    write_report(report, soak, len(questions))
    report.write()
    results = verdicts(soak)
    for bar, got, ok in results:
        print(f"{'FAIL' if ok is False else 'ok  '} {bar}: {got}")
    return 1 if any(ok is False for _, _, ok in results) else 0


if __name__ == "__main__":
    sys.exit(main())
