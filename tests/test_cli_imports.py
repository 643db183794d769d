"""``kb`` answers at once (issue 28): importing the CLI, ``kb --help`` and ``kb add`` of a
refused URL load neither Dagster nor PyMuPDF nor a model runtime (nor SQLAlchemy or NumPy);
each command imports what it needs when it runs. Checked in fresh interpreters, so an import
anywhere on the way (the CLI, its sub-command modules, intake) fails it. Timings:
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
