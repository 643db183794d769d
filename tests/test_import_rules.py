"""Import rules from DESIGN.md: kb_shared imports neither dagster nor mcp; kb_mcp never
imports kb_assets. Checked twice: statically (every import statement in the source) and at
run time (importing every kb_shared module in a fresh interpreter loads neither)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FORBIDDEN = {
    "kb_shared": ("dagster", "dagster_webserver", "mcp", "kb_assets", "kb_mcp"),
    "kb_mcp": ("kb_assets", "dagster"),
    "benchmarks": ("tests",),
}

#: Module-level rules inside kb_shared (issue 10): a backend never borrows from a sibling
#: backend, and provider interfaces do not depend on store modules. (importer glob, prefix)
SIBLING_RULES = (
    ("kb_shared/providers/cloud_*.py", "kb_shared.providers.local_"),
    ("kb_shared/providers/local_*.py", "kb_shared.providers.cloud_"),
    ("kb_shared/providers/base.py", "kb_shared.stores"),
    ("kb_shared/stores/graph_*.py", "kb_shared.stores.catalog"),
    ("kb_shared/stores/vectors_*.py", "kb_shared.stores.catalog"),
)


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def _violations(package: str) -> list[str]:
    bad: list[str] = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, module in _imports(path):
            top = module.split(".")[0]
            if top in FORBIDDEN[package]:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
    return bad


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_forbidden_import_statements(package: str) -> None:
    assert (ROOT / package).is_dir()
    assert _violations(package) == []


def test_backends_do_not_import_their_siblings() -> None:
    bad = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for pattern, prefix in SIBLING_RULES
        for path in sorted(ROOT.glob(pattern))
        for line, module in _imports(path)
        if module.startswith(prefix)
    ]
    assert bad == []


def test_the_static_check_catches_a_violation(tmp_path: Path) -> None:
    sample = tmp_path / "bad.py"
    sample.write_text("import os\nfrom dagster import asset\nimport mcp.types as t\n")
    assert [m for _, m in _imports(sample)] == ["os", "dagster", "mcp.types"]


def test_kb_shared_loads_neither_dagster_nor_mcp_at_run_time() -> None:
    modules = sorted(
        ".".join(p.relative_to(ROOT).with_suffix("").parts)
        for p in (ROOT / "kb_shared").rglob("*.py")
        if p.name != "__init__.py"
    )
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in "
        "{'dagster', 'mcp', 'kb_assets', 'kb_mcp'})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""
