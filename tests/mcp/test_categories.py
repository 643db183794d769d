"""Categories from folders (issue 12) end to end: `kb add DIR` files each document under its
folder path below DIR, the corpus assets build them (fake providers, the real text
pass-through), and list_documents, search_docs and search_graph filter by category prefix
through the SDK's in-memory client. `kb categorize` moves a document with the catalog row
only: no embedding call, no run, the vectors untouched."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from mcp import Client
from typer.testing import CliRunner

from kb_assets.cli import main as cli
from kb_assets.assets import CORPUS_ASSETS
from kb_assets.jobs import kb_resources
from kb_assets.instance import dagster_instance
from kb_assets.intake import IntakeStatus, admit
from kb_assets.resources import StoresResource
from kb_mcp.server import build_server
from kb_shared.stores.factory import open_catalog, open_vector_index
from tests.assets.fake_providers import FakeProviders
from tests.mcp.corpus import HashingEmbedder, corpus_settings

pytestmark = pytest.mark.anyio

#: Folder path below the added folder → file; each names Retailer and Distributor, so the fake
#: extractor gives each document one MUST_NOTIFY edge.
FILES = {
    "a/b/alpha.md": "# Alpha\n\nThe Retailer must notify the Distributor about alpha meters.\n",
    "c/gamma.md": "# Gamma\n\nThe Retailer must notify the Distributor about gamma meters.\n",
    "top.md": "# Top\n\nThe Retailer must notify the Distributor about top meters.\n",
}
CATEGORIES = {"alpha.md": "a/b", "gamma.md": "c", "top.md": None}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory, embedder: HashingEmbedder) -> Path:
    """KB_HOME with the three documents added as one folder and built."""
    home = tmp_path_factory.mktemp("kbcat")
    tree = home / "in"
    for relative, text in FILES.items():
        (tree / relative).parent.mkdir(parents=True, exist_ok=True)
        (tree / relative).write_text(text, encoding="utf-8")
    stores = StoresResource(home=str(home))
    instance = dagster_instance(corpus_settings(home))
    outcomes = admit([tree], stores, instance)
    assert [(o.name, o.status) for o in outcomes] == [
        ("alpha.md", IntakeStatus.ADDED), ("gamma.md", IntakeStatus.ADDED),
        ("top.md", IntakeStatus.ADDED),
    ]
    for outcome in outcomes:
        result = dg.materialize(
            CORPUS_ASSETS, partition_key=outcome.doc_id, instance=instance,
            resources=kb_resources(stores, FakeProviders(embedder_=embedder)),
        )
        assert result.success
    stores.close()
    return home


@pytest.fixture(scope="module")
def server(home: Path, embedder: HashingEmbedder):
    """The server on ``home``, one per module: each client session opens the stores
    anew (see ``server`` in tests/mcp/conftest.py)."""
    return build_server(corpus_settings(home), embedder=embedder, warm=False)


async def call(server, tool: str, **arguments):
    async with Client(server) as client:
        return await client.call_tool(tool, arguments)


def test_kb_add_records_each_folder_path_as_the_category(home: Path) -> None:
    catalog = open_catalog(corpus_settings(home))
    assert {row.name: row.category for row in catalog.list_documents()} == CATEGORIES
    assert [row.name for row in catalog.list_documents(category="A")] == ["alpha.md"]
    catalog.close()


async def test_list_documents_groups_by_category(server) -> None:
    result = await call(server, "list_documents")
    assert result.is_error is False
    lines = result.content[0].text.splitlines()
    assert lines[0].startswith("3 document(s) ready to search by category (search_docs, ")
    assert [line.split(" [")[0] for line in lines[1:]] == [
        "a/b:", "  - alpha.md", "c:", "  - gamma.md", "(no category):", "  - top.md",
    ]
    assert [(d["name"], d["category"]) for d in result.structured_content["documents"]] == [
        ("alpha.md", "a/b"), ("gamma.md", "c"), ("top.md", None),
    ]


async def test_list_documents_filters_by_category_prefix(server) -> None:
    result = await call(server, "list_documents", category="a")
    assert [d["name"] for d in result.structured_content["documents"]] == ["alpha.md"]
    none = await call(server, "list_documents", category="a/bee")
    assert none.content[0].text == "No ready document is in category 'a/bee'."


async def test_search_docs_with_a_category_returns_only_its_documents(server) -> None:
    query = "Retailer notify Distributor meters"
    everything = await call(server, "search_docs", query=query, top_k=10)
    assert {r["doc_id"] for r in everything.structured_content["results"]} == {
        "alpha.md", "gamma.md", "top.md",
    }
    scoped = await call(server, "search_docs", query=query, top_k=10, category="a")
    assert scoped.is_error is False
    assert {r["doc_id"] for r in scoped.structured_content["results"]} == {"alpha.md"}
    # "A/B/" is the same category written another way; "a/b" is not a prefix of "a/bee"
    same = await call(server, "search_docs", query=query, top_k=10, category=" A\\B/ ")
    assert {r["doc_id"] for r in same.structured_content["results"]} == {"alpha.md"}


async def test_search_graph_with_a_category_uses_only_its_documents_edges(server) -> None:
    query = "Retailer"
    everything = await call(server, "search_graph", query=query)
    assert {r["doc_id"] for r in everything.structured_content["relationships"]} == {
        "alpha.md", "gamma.md", "top.md",
    }
    scoped = await call(server, "search_graph", query=query, category="c")
    assert scoped.is_error is False
    assert {r["doc_id"] for r in scoped.structured_content["relationships"]} == {"gamma.md"}


@pytest.mark.parametrize(
    ("category", "message"),
    [
        (
            "../etc",
            "category refused: category '../etc' has a '.' or '..' segment; give folder names "
            "like 'aemo/procedures'",
        ),
        ("a/" * 9, "category refused: category '" + "a/" * 9 + "' has 9 levels; the limit is 8"),
        (
            "zzz",
            "no ready document is in category 'zzz'; categories with ready documents: a/b, c. "
            "Leave category out to search everything.",
        ),
    ],
)
@pytest.mark.parametrize("tool", ["search_docs", "search_graph"])
async def test_a_bad_or_empty_category_is_refused_with_the_reason(
    server, tool: str, category: str, message: str
) -> None:
    result = await call(server, tool, query="Retailer", category=category)
    assert result.is_error is True
    assert result.content[0].text == f"Error executing tool {tool}: {message}"


async def test_an_over_long_category_is_refused_by_the_input_schema(server) -> None:
    result = await call(server, "list_documents", category="x" * 201)
    assert result.is_error is True
    assert "at most 200 characters" in result.content[0].text


async def test_categorize_moves_a_document_without_a_rebuild(
    home: Path, server, embedder: HashingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = corpus_settings(home)
    index = open_vector_index(settings)
    index.open(embedder.model, embedder.dimension, create=False)
    vectors, calls = index.count(), list(embedder.calls)
    runs = [run.run_id for run in dagster_instance(settings).get_runs()]
    monkeypatch.setenv("KB_HOME", str(home))
    try:
        moved = CliRunner().invoke(cli.app, ["categorize", "top.md", "A/Procedures"])
        assert moved.exit_code == 0, moved.output
        assert moved.output == "top.md: category (none) -> A/Procedures (nothing rebuilt)\n"
        assert index.count() == vectors
        assert embedder.calls == calls
        assert [run.run_id for run in dagster_instance(settings).get_runs()] == runs
        scoped = await call(
            server, "search_docs", query="Retailer notify Distributor meters", top_k=10,
            category="a",
        )
        assert {r["doc_id"] for r in scoped.structured_content["results"]} == {
            "alpha.md", "top.md",
        }
        refused = CliRunner().invoke(cli.app, ["move", "top.md", "a/../b"])
        assert refused.exit_code == 2
        assert "category refused: category 'a/../b' has a '.' or '..' segment" in refused.output
    finally:
        back = CliRunner().invoke(cli.app, ["move", "top.md", ""])
        assert back.output == "top.md: category A/Procedures -> (none) (nothing rebuilt)\n"
        index.close()
