"""``python -m benchmarks.cli_timing``: how long the ``kb`` CLI takes to answer, cold (issue 28,
"a CLI that answers at once").

Three commands, each run ``--runs`` times in a fresh process (the console script
``.venv/bin/kb``, so every run pays the interpreter start and every import again):

- ``kb --help`` (target ≤ 0.5 s);
- ``kb add https://127.0.0.1/report.pdf``: a URL the safe fetcher refuses before any network
  use (a loopback address; target ≤ 1.5 s, exit 1 expected);
- ``kb status`` on a home of ``--documents`` built documents (target ≤ 2 s).

The home is ``benchmarks/work/cli-timing``: generated ``.md`` documents (no PDF conversion)
added and built once with ``kb add --build`` and the local providers, then reused.

``--tree DIR`` runs the kb code of another source tree (put first on ``PYTHONPATH``), e.g. the
commit before a change: ``git archive <rev> | tar -x -C DIR``. ``--bytecode`` chooses how
Python finds compiled modules: ``none`` runs as this machine's environment does
(``PYTHONDONTWRITEBYTECODE=1`` and no ``__pycache__`` in the venv, so every import compiles
its source); ``cached`` lets Python write and reuse bytecode under
``benchmarks/work/pycache`` (``PYTHONPYCACHEPREFIX``; one warm-up run first), as an install
by pip leaves it. Each labelled run keeps its figures in
``benchmarks/work/cli-timing-<label>-<bytecode>.json``; the report
(``benchmarks/results/cli-<date>.md``) shows every run measured so far, with the 1-minute
load average read just before each command's runs, and keeps the notes written by hand below
its ``NOTES_HEADING`` when it is written again.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmarks.common import (
    PROVIDER_ROLES,
    REPO_ROOT,
    WORK_DIR,
    Report,
    load_average,
    log,
)

#: The console script under test (the project's venv).
KB = REPO_ROOT / ".venv" / "bin" / "kb"
#: The scratch home ``kb status`` reads.
HOME = WORK_DIR / "cli-timing"
#: Where ``--bytecode cached`` keeps compiled modules (``PYTHONPYCACHEPREFIX``).
PYCACHE = WORK_DIR / "pycache"
#: ``--bytecode`` choices (module docstring).
BYTECODE_MODES = ("none", "cached")
#: A URL ``kb_shared.fetch.fetcher`` refuses by its address (loopback) before connecting.
REFUSED_URL = "https://127.0.0.1/report.pdf"


@dataclass(frozen=True)
class Case:
    """One command under test: its arguments after ``kb``, the exit code it must end with, a
    text its output must contain (so a broken command is not timed as a fast one) and the
    issue's target in seconds."""

    name: str
    args: tuple[str, ...]
    exit_code: int
    expect: str
    target_seconds: float


def cases(documents: int) -> list[Case]:
    """The three commands of the module docstring (targets from issue 28)."""
    plural = "s" if documents != 1 else ""
    return [
        Case("kb --help", ("--help",), 0, "Usage", 0.5),
        Case(f"kb add {REFUSED_URL}", ("add", REFUSED_URL), 1, "loopback", 1.5),
        Case(f"kb status ({documents} documents)", ("status",), 0,
             f"{documents} document{plural}", 2.0),
    ]


@dataclass
class Timing:
    """A case's wall times in seconds, one per run, the CPU seconds (user + system) each run
    used, and the 1-minute load before them. On a busy machine the CPU time is the steadier
    figure: it leaves out the time spent waiting for a core."""

    case: str
    target_seconds: float
    seconds: list[float]
    load_before: float | None
    cpu_seconds: list[float] = field(default_factory=list)


def _children_cpu() -> float:
    """CPU seconds (user + system) of the children waited for so far (``getrusage``)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def environment(home: Path, *, tree: Path | None = None, bytecode: str = "none") -> dict[str, str]:
    """The process environment for ``kb`` on ``home`` with every provider role local, the
    code of ``tree`` first on the path (``None``: the installed one) and ``bytecode`` as in
    the module docstring."""
    env = dict(os.environ, KB_HOME=str(home), DAGSTER_HOME=str(home / "dagster"))
    env.update({f"KB_{role}_PROVIDER": "local" for role in PROVIDER_ROLES})
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree), env.get("PYTHONPATH")]))
    if bytecode == "cached":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    return env


def prepare(home: Path, documents: int) -> None:
    """Create ``home`` with ``documents`` generated Markdown documents, added and built with
    ``kb add --build`` (skipped when ``home`` already has them).

    Raises:
        RuntimeError: the build failed (its output is in the message).
    """
    marker = home / f"built-{documents}"
    if marker.exists():
        return
    if home.exists():
        shutil.rmtree(home)
    source = home / "source"
    source.mkdir(parents=True)
    for number in range(documents):
        (source / f"procedure-{number:02d}.md").write_text(
            f"# Procedure {number}\n\n## Scope\n\nThis procedure {number} applies to every "
            f"registered participant in region {number % 5}.\n\n## Obligations\n\nA participant "
            f"must notify the operator within {number + 1} business days of any change.\n",
            encoding="utf-8",
        )
    log(f"building {documents} documents in {home} (once)")
    done = subprocess.run(
        [str(KB), "add", str(source), "--build"], env=environment(home),
        capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"kb add --build failed:\n{done.stdout}\n{done.stderr}")
    marker.touch()


def time_case(case: Case, env: dict[str, str], runs: int) -> Timing:
    """Run ``case`` ``runs`` times in fresh processes with ``env`` and return the wall times
    (after one untimed run when ``env`` caches bytecode, so that the cache is warm).

    Raises:
        RuntimeError: a run ended with another exit code or without the expected text.
    """
    if "PYTHONPYCACHEPREFIX" in env:
        subprocess.run([str(KB), *case.args], env=env, capture_output=True, check=False)
    load = load_average()
    seconds, cpu = [], []
    for _ in range(runs):
        start, cpu_start = time.perf_counter(), _children_cpu()
        done = subprocess.run(
            [str(KB), *case.args], env=env, capture_output=True, text=True, check=False,
        )
        seconds.append(time.perf_counter() - start)
        cpu.append(_children_cpu() - cpu_start)
        output = done.stdout + done.stderr
        if done.returncode != case.exit_code or case.expect not in output:
            raise RuntimeError(
                f"{case.name}: exit {done.returncode} (want {case.exit_code}), output:\n{output}"
            )
    return Timing(
        case.name, case.target_seconds, seconds, None if load is None else load[0], cpu
    )


def saved_runs() -> dict[str, list[Timing]]:
    """Every label's timings kept under ``WORK_DIR`` (``cli-timing-<label>.json``)."""
    found = {}
    for path in sorted(WORK_DIR.glob("cli-timing-*.json")):
        label = path.stem.removeprefix("cli-timing-")
        found[label] = [Timing(**row) for row in json.loads(path.read_text(encoding="utf-8"))]
    return found


#: The first hand-written heading of a report: from it to the end, the text a person added
#: after the runs is carried over when the report is written again the same day.
NOTES_HEADING = "## What the figures say"


def hand_written_notes(path: Path) -> str:
    """The hand-written tail of the report at ``path`` (from ``NOTES_HEADING`` on), or ``""``
    when there is no such report or heading."""
    if not path.is_file():
        return ""
    text = path.read_text(encoding="utf-8")
    start = text.find(NOTES_HEADING)
    return text[start:] if start >= 0 else ""


def report(out: Report, runs: int, documents: int) -> Path:
    """Write ``out`` (``benchmarks/results/cli-<date>.md``) from every saved run, keeping the
    hand-written notes of the day's earlier report (``hand_written_notes``)."""
    notes = hand_written_notes(out.path)
    out.fact("runs per command", runs)
    out.fact("status home", f"{documents} built Markdown documents ({HOME.relative_to(REPO_ROOT)})")
    out.heading("Wall seconds per command (fresh process each run)")
    rows = []
    for label, timings in saved_runs().items():
        for t in timings:
            rows.append((
                label, t.case, f"{min(t.seconds):.2f}", f"{statistics.median(t.seconds):.2f}",
                f"{max(t.seconds):.2f}",
                f"{statistics.median(t.cpu_seconds):.2f}" if t.cpu_seconds else "n/a",
                f"{t.target_seconds:.1f}",
                "n/a" if t.load_before is None else f"{t.load_before:.2f}",
                " ".join(f"{s:.2f}" for s in t.seconds),
            ))
    out.table(
        ("run (label-bytecode)", "command", "min s", "median s", "max s", "median CPU s",
         "target s", "load (1 min) before", "wall s of each run"),
        rows, align="llrrrrrrl",
    )
    if notes:
        out.text(notes)
    return out.write()


def main(argv: Sequence[str] | None = None) -> int:
    """Command line (module docstring); returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--label", required=True, help="e.g. before / after")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--documents", type=int, default=25)
    parser.add_argument("--tree", type=Path, help="kb source tree to run (default: installed)")
    parser.add_argument("--bytecode", choices=BYTECODE_MODES, default="none")
    args = parser.parse_args(argv)
    out = Report(name="cli", title="kb CLI start-up, cold (issue 28)")
    prepare(HOME, args.documents)
    env = environment(HOME, tree=args.tree, bytecode=args.bytecode)
    timings = []
    for case in cases(args.documents):
        timing = time_case(case, env, args.runs)
        log(f"{case.name}: median {statistics.median(timing.seconds):.2f} s "
            f"(load {timing.load_before})")
        timings.append(timing)
    saved = WORK_DIR / f"cli-timing-{args.label}-{args.bytecode}.json"
    saved.write_text(json.dumps([asdict(t) for t in timings], indent=1), encoding="utf-8")
    out.fact("this run", f"{args.label}, bytecode {args.bytecode}, tree {args.tree or 'installed'}")
    report(out, args.runs, args.documents)
    return 0


if __name__ == "__main__":
    sys.exit(main())
