"""``docs/architecture.md`` stays true where a machine can tell (issue 29, "the repository
must carry its own map and keep it true"): every repository path and every ``module.name`` it
names exists; every corpus, market-data and quality asset, every MCP tool ``build_server``
registers and every catalog and SQL-graph table is named in it; the README links it; each of
its three pictures (document, query, stores) is a Mermaid block in its section."""

from __future__ import annotations

import ast
import importlib
import re
from functools import cache
from pathlib import Path

import anyio
import pytest
from mcp import Client

from kb_assets.constants import CORPUS_ASSETS, MARKET_ASSETS, RETRIEVAL_EVAL
from kb_mcp.server import build_server
from kb_shared.settings import Settings
from kb_shared.stores.catalog import CATALOG_METADATA
from kb_shared.stores.graph_sql import GRAPH_METADATA
from tests.fakes import HashingEmbedder

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
README = ROOT / "README.md"

#: Top-level folders of the repository a path in the map may start with.
TOP_LEVEL = (
    "kb_shared/", "kb_assets/", "kb_mcp/", "sql/", "benchmarks/", "tests/", "docs/", "deploy/",
)
#: Packages whose modules the map names (by path, file name or dotted name).
PACKAGES = ("kb_shared", "kb_assets", "kb_mcp")
#: File types the map names by path.
FILE_PATH = re.compile(r"^[\w./*-]+\.(?:py|sql|html|md|toml|yaml)$")
#: ``package.module[.sub].name``: a name defined at the top of a module.
DOTTED = re.compile(r"^(?:kb_shared|kb_assets|kb_mcp)(?:\.\w+)+$")
#: ``module.name`` (a module named by its last part) and ``Class.attribute``.
SHORT_DOTTED = re.compile(r"^(\w+)\.(\w+)$")


def prose(text: str) -> str:
    """``text`` without its fenced blocks (diagrams and the blob layout hold labels and blob
    keys, not repository paths)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.DOTALL | re.MULTILINE)


def code_spans(text: str) -> set[str]:
    """Every ``inline code`` span of the prose of ``text``."""
    return set(re.findall(r"`([^`\n]+)`", prose(text)))


@cache
def repository_files() -> tuple[str, ...]:
    """Every file of the product packages, ``sql/``, ``tests/`` and the root, as a path
    relative to the repository root."""
    found = [p.name for p in ROOT.iterdir() if p.is_file()]
    for top in (*PACKAGES, "sql", "tests", "benchmarks", "deploy", "docs"):
        for path in (ROOT / top).rglob("*"):
            relative = path.relative_to(ROOT)
            if path.is_file() and not {"__pycache__", "work"} & set(relative.parts):
                found.append(relative.as_posix())
    return tuple(found)


def missing_paths(text: str) -> tuple[list[str], list[str]]:
    """(checked, missing): the repository paths the prose of ``text`` names and those that do
    not exist. A link target is relative to ``docs/``; a code span starting with a top-level
    folder is relative to the root; a shorter file name (``catalog/documents.py``,
    ``cloud_calls.py``) must end some file's path; a glob (``local_*.py``) must match one.
    Templates (``<name>``, ``{doc}``) are not paths."""
    checked: list[str] = []
    missing: list[str] = []
    for target in re.findall(r"\]\(([^)\s]+)\)", prose(text)):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        checked.append(target)
        if not (DOC.parent / target.split("#")[0]).exists():
            missing.append(target)
    files = repository_files()
    for span in code_spans(text):
        if span.startswith(TOP_LEVEL) and FILE_PATH.match(span) is None and span.endswith("/"):
            checked.append(span)
            if not (ROOT / span).is_dir():
                missing.append(span)
        elif FILE_PATH.match(span):
            checked.append(span)
            if "*" in span:
                pattern = re.compile(re.escape(span).replace(r"\*", r"[^/]*") + "$")
                exists = any(pattern.search(f) for f in files)
            elif span.startswith(TOP_LEVEL):
                exists = (ROOT / span).is_file()
            else:
                exists = any(f == span or f.endswith("/" + span) for f in files)
            if not exists:
                missing.append(span)
    return checked, missing


@cache
def module_files() -> dict[str, list[Path]]:
    """Last part of a module name (``layout``, ``batch``) -> the modules of the packages with it."""
    found: dict[str, list[Path]] = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            stem = path.parent.name if path.name == "__init__.py" else path.stem
            found.setdefault(stem, []).append(path)
    return found


@cache
def module_body(path: Path) -> tuple[ast.stmt, ...]:
    """The top-level statements of the module at ``path``."""
    return tuple(ast.parse(path.read_text(encoding="utf-8")).body)


def top_level_names(path: Path) -> set[str]:
    """Names a module defines or imports at its top level (functions, classes, assignments)."""
    names: set[str] = set()
    for node in module_body(path):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def defining_module(class_name: str) -> str | None:
    """The dotted name of the first module of the packages that defines ``class_name``."""
    for paths in module_files().values():
        for path in paths:
            if any(isinstance(n, ast.ClassDef) and n.name == class_name for n in module_body(path)):
                parts = path.relative_to(ROOT).with_suffix("").parts
                return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    return None


def missing_names(text: str) -> tuple[list[str], list[str]]:
    """(checked, missing): the ``kb_x.module.name``, ``module.name`` and ``Class.attribute``
    spans of ``text`` and those that name nothing. A dotted name resolves to its longest
    module prefix and a name that module defines; ``module.name`` counts when some module of
    that last part defines the name (a span whose first part is no module, such as a table
    column, is not a name); ``Class.attribute`` is looked up on the class, imported."""
    checked: list[str] = []
    missing: list[str] = []
    for span in sorted(code_spans(text)):
        if DOTTED.match(span):
            checked.append(span)
            parts = span.split(".")
            for cut in range(len(parts) - 1, 0, -1):
                base = ROOT.joinpath(*parts[:cut])
                module = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
                if module.is_file():
                    rest = parts[cut:]
                    if len(rest) != 1 or rest[0] not in top_level_names(module):
                        missing.append(span)
                    break
            else:
                missing.append(span)
            continue
        short = SHORT_DOTTED.match(span)
        if short is None or FILE_PATH.match(span):
            continue
        first, name = short.groups()
        if first[0].isupper():
            checked.append(span)
            where = defining_module(first)
            if where is None or not hasattr(getattr(importlib.import_module(where), first), name):
                missing.append(span)
        elif first in module_files():
            checked.append(span)
            if not any(name in top_level_names(p) for p in module_files()[first]):
                missing.append(span)
    return checked, missing


def test_every_path_the_map_names_exists() -> None:
    checked, missing = missing_paths(DOC.read_text(encoding="utf-8"))
    assert "../kb_shared/search/retrieval.py" in checked and "catalog/documents.py" in checked
    assert missing == []


def test_every_module_name_the_map_names_exists() -> None:
    checked, missing = missing_names(DOC.read_text(encoding="utf-8"))
    assert "kb_assets.constants.CORPUS_ASSETS" in checked
    assert "Catalog.record_version" in checked and "layout.is_served" in checked
    assert missing == []


def test_the_checks_catch_a_stale_map() -> None:
    stale = (
        "[gone](../kb_shared/gone.py), `kb_mcp/nowhere.py`, `nowhere_else.py`, `gone_*.py`, "
        "`kb_shared/gone/`, `kb_shared.layout.no_such_key`, `layout.no_such_key`, "
        "`Catalog.no_such_method`, `kb_shared.no_module.name`; fine: `kb_shared/layout.py`, "
        "`layout.pdf_key`"
    )
    assert sorted(missing_paths(stale)[1]) == [
        "../kb_shared/gone.py", "gone_*.py", "kb_mcp/nowhere.py", "kb_shared/gone/",
        "nowhere_else.py",
    ]
    assert missing_names(stale)[1] == [
        "Catalog.no_such_method", "kb_shared.layout.no_such_key", "kb_shared.no_module.name",
        "layout.no_such_key",
    ]


def test_every_asset_is_named() -> None:
    spans = code_spans(DOC.read_text(encoding="utf-8"))
    assets = [*CORPUS_ASSETS, *MARKET_ASSETS, RETRIEVAL_EVAL]
    assert len(CORPUS_ASSETS) == 8
    assert [a for a in assets if a not in spans] == []


def registered_tools(home: Path) -> list[str]:
    """The tool names ``build_server`` registers, as a client lists them (in-memory)."""
    server = build_server(Settings(home=home), embedder=HashingEmbedder(8), warm=False)

    async def listed() -> list[str]:
        async with Client(server) as client:
            return sorted(tool.name for tool in (await client.list_tools()).tools)

    return anyio.run(listed)


def test_every_mcp_tool_is_named(tmp_path: Path) -> None:
    tools = registered_tools(tmp_path)
    assert "search_docs" in tools and "compare_versions" in tools
    spans = code_spans(DOC.read_text(encoding="utf-8"))
    assert [t for t in tools if t not in spans] == []


@pytest.mark.parametrize("metadata", [CATALOG_METADATA, GRAPH_METADATA], ids=["catalog", "graph"])
def test_every_table_is_named(metadata) -> None:
    spans = code_spans(DOC.read_text(encoding="utf-8"))
    tables = sorted(metadata.tables)
    assert tables
    assert [t for t in tables if t not in spans] == []


def test_the_readme_links_the_map() -> None:
    assert "](docs/architecture.md)" in README.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "section", ["## 3. The path of a document", "## 4. The path of a query", "## 5. The stores"]
)
def test_each_path_and_the_stores_have_a_diagram(section: str) -> None:
    text = DOC.read_text(encoding="utf-8")
    assert section in text
    body = text.split(section, 1)[1].split("\n## ", 1)[0]
    assert "```mermaid\nflowchart" in body
