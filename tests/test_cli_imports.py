"""``kb`` answers at once (issue 28): importing the CLI, ``kb --help`` and ``kb add`` of a
refused URL load neither Dagster nor PyMuPDF nor a model runtime (nor SQLAlchemy or NumPy);
each command imports what it needs when it runs. ``kb status`` needs Dagster and the catalog
but not the code location (assets, jobs, IO manager), the fetcher, the PDF libraries nor the
model runtimes, and runs with the garbage collector paused. Checked in fresh interpreters, so
an import anywhere on the way (the CLI, its sub-command modules, intake) fails it. Timings:
benchmarks/results/cli-*.md."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Packages ``kb --help`` and a refused ``kb add`` must not load: the orchestrator, the PDF
#: libraries and the model runtimes (each costs seconds to import), and the catalog's
#: SQLAlchemy and NumPy (tenths of a second each).
HEAVY = (
    "dagster", "pymupdf", "pymupdf4llm", "onnxruntime", "torch", "spacy", "pyarrow",
    "sqlalchemy", "numpy",
)

#: Prints the heavy top-level packages loaded after running the code before it.
REPORT = (
    "import sys\n"
    f"print('heavy:' + ','.join(sorted({{n.split('.')[0] for n in sys.modules}} & {set(HEAVY)!r})))\n"
)


def _run(code: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ, "KB_HOME": str(home), "DAGSTER_HOME": str(home / "dagster"),
        "COLUMNS": "250",  # help text on one line per option, not wrapped inside rich's boxes
    }
    return subprocess.run(
        [sys.executable, "-c", code + REPORT], cwd=ROOT, env=env, capture_output=True,
        text=True, check=False, timeout=120,
    )


def _loaded(done: subprocess.CompletedProcess[str]) -> list[str]:
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("heavy:")]
    return [name for name in line.removeprefix("heavy:").split(",") if name]


def _kb(args: list[str]) -> str:
    """Code running ``kb ARGS`` in-process (exit status kept in ``status``)."""
    return (
        "import sys\n"
        f"sys.argv = ['kb', *{args!r}]\n"
        "from kb_assets.cli.main import main\n"
        "try:\n    main()\n    status = 0\n"
        "except SystemExit as stop:\n    status = stop.code\n"
        "print('exit', status)\n"
    )


def test_importing_the_cli_loads_no_heavy_package(tmp_path: Path) -> None:
    done = _run("import kb_assets.cli.main\n", tmp_path)
    assert done.returncode == 0, done.stderr
    assert _loaded(done) == []


def test_kb_help_answers_without_heavy_packages(tmp_path: Path) -> None:
    done = _run(_kb(["--help"]), tmp_path)
    assert done.returncode == 0, done.stderr
    assert "exit 0" in done.stdout
    for command in ("add", "build", "status", "migrate", "sync", "requests", "references"):
        assert f" {command} " in done.stdout, command
    assert _loaded(done) == []


def test_a_refused_url_is_reported_without_dagster(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = _run(_kb(["add", "https://127.0.0.1/report.pdf"]), home)
    assert done.returncode == 0, done.stderr
    assert "exit 1" in done.stdout
    assert "download refused: 127.0.0.1 is a loopback address" in done.stdout
    assert "1 file(s) refused" in done.stderr
    assert _loaded(done) == []
    assert not home.exists()  # nothing was opened, so nothing was created


def test_kb_migrate_help_names_the_batch_default(tmp_path: Path) -> None:
    from kb_shared.stores.migrate import BATCH

    done = _run(_kb(["migrate", "--help"]), tmp_path)
    assert "exit 0" in done.stdout, done.stderr
    assert f"BATCH, {BATCH})" in " ".join(done.stdout.split())


#: What `kb status` must not load: the heavy packages it has no use for (it reads Dagster's
#: instance, and the catalog brings SQLAlchemy and NumPy), the code location's modules and the
#: fetcher's HTTP client.
STATUS_NEVER = tuple(name for name in HEAVY if name not in ("dagster", "sqlalchemy", "numpy"))
STATUS_NEVER_MODULES = (
    "kb_assets.assets", "kb_assets.definitions", "kb_assets.jobs", "kb_assets.io_manager",
    "kb_shared.fetch", "httpx",
)

#: Prints which of ``STATUS_NEVER_MODULES`` (or a module inside one) were loaded, whether the
#: collector is on, and whether the exit handlers froze the objects left (``gc.freeze``).
STATUS_REPORT = (
    "import atexit, gc\n"
    f"never = {STATUS_NEVER_MODULES!r}\n"
    "found = sorted(\n"
    "    n for n in sys.modules if any(n == m or n.startswith(m + '.') for m in never)\n"
    ")\n"
    "print('modules:' + ','.join(found))\n"
    "print('collector on:', gc.isenabled())\n"
    "atexit._run_exitfuncs()\n"
    "print('frozen at exit:', gc.get_freeze_count() > 0)\n"
)


def test_kb_status_loads_neither_the_code_location_nor_the_pdf_libraries(tmp_path: Path) -> None:
    counting = (
        "import gc\n"
        "full = []\n"
        "gc.callbacks.append(lambda phase, info: phase == 'start' and info['generation'] == 2 "
        "and full.append(1))\n"
    )
    done = _run(counting + _kb(["status"]) + "print('full collections:', len(full))\n"
                + STATUS_REPORT, tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert "exit 0" in done.stdout
    assert "kb status (0 documents)" in done.stdout
    assert not set(_loaded(done)) & set(STATUS_NEVER)
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("modules:")]
    assert line == "modules:"
    # Importing Dagster under a running collector cost about half of the command's CPU time.
    assert "full collections: 0" in done.stdout
    assert "collector on: True" in done.stdout  # restored for whoever called the command
    assert "frozen at exit: True" in done.stdout  # the exit's collections skip those objects
