"""New versions of a document (issue 12) as the MCP tools see them: while version 2 builds,
search_docs, read_doc and search_graph return version 1 only and list_documents says a new
version is being built; after its ``record`` step they return version 2 only, citing it
("Version 2"), with the document's own doc_id and file link; a version 2 that fails leaves
version 1 served and list_documents says why. Text documents on fake providers (the real
text pass-through), through the SDK's in-memory client."""

from __future__ import annotations

from pathlib import Path

import anyio
import dagster as dg
import pytest
from mcp import Client
from starlette.testclient import TestClient

from kb_assets.assets import CORPUS_ASSETS
from kb_assets.constants import (
    BUILD_JOB, CHANGES, CHUNKS, EMBEDDINGS, FIGURES, GRAPH, MARKDOWN, OBLIGATIONS, RECORD,
)
from kb_assets.jobs import kb_resources
from kb_assets.instance import dagster_instance
from kb_assets.intake import admit
from kb_assets.jobs import build_documents_job
from kb_assets.resources import StoresResource
from kb_mcp.http import build_app
from kb_mcp.server import build_server
from tests.assets.fake_providers import FakeProviders
from tests.fakes import FlakyEmbedder
from tests.mcp.corpus import HashingEmbedder, corpus_settings

pytestmark = pytest.mark.anyio

NAME = "Life Support Rules.md"
DOC = "life-support-rules.md"
V1 = "# Life Support Rules\n\nThe Retailer must notify the Distributor within two business days.\n"
V2 = "# Life Support Rules\n\nThe Retailer must notify the Distributor within five business days.\n"
QUESTION = "when must the Retailer notify the Distributor business days"


def write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / NAME).write_text(text, encoding="utf-8")
    return folder / NAME


class Kb:
    """A KB_HOME with version 1 of ``NAME`` built, and the means to add and build more (a
    test running in an event loop builds in a worker thread: Dagster runs its own loop)."""

    def __init__(self, home: Path, embedder: HashingEmbedder) -> None:
        self.home = home
        self.stores = StoresResource(home=str(home))
        self.instance = dagster_instance(corpus_settings(home))
        self.providers = FakeProviders(embedder_=embedder)
        admit([write(home / "v1", V1)], self.stores, self.instance)
        assert self.build()

    def build(self, *steps: str) -> bool:
        """Materialise ``steps`` (default: all) for the document; whether it succeeded."""
        result = dg.materialize(
            CORPUS_ASSETS, partition_key=DOC, instance=self.instance,
            resources=kb_resources(self.stores, self.providers),
            selection=list(steps) or None, raise_on_error=False,
        )
        return result.success

    def add_version_2(self) -> None:
        (outcome,) = admit(
            [write(self.home / "v2", V2)], self.stores, self.instance, new_version=True
        )
        assert (outcome.status, outcome.version) == ("added", 2)


@pytest.fixture
def kb(tmp_path: Path, embedder: HashingEmbedder):
    state = Kb(tmp_path / "home", embedder)
    yield state
    state.stores.close()


async def call(kb: Kb, embedder: HashingEmbedder, tool: str, **arguments):
    server = build_server(corpus_settings(kb.home), embedder=embedder, warm=False)
    async with Client(server) as client:
        return await client.call_tool(tool, arguments)


def text_of(result) -> str:
    return result.content[0].text


async def test_search_read_and_graph_serve_version_1_until_version_2_is_recorded(
    kb: Kb, embedder: HashingEmbedder
) -> None:
    kb.add_version_2()
    assert await anyio.to_thread.run_sync(
        kb.build, MARKDOWN, CHUNKS, OBLIGATIONS, CHANGES, EMBEDDINGS, GRAPH, FIGURES
    )

    before = await call(kb, embedder, "search_docs", query=QUESTION)
    assert not before.is_error
    assert "two business days" in text_of(before) and "five" not in text_of(before)
    assert {r["id"] for r in before.structured_content["results"]} == {f"{DOC}-0"}
    read = await call(kb, embedder, "read_doc", document=NAME, chunk_numbers=[0])
    assert "two business days" in text_of(read)
    graph = await call(kb, embedder, "search_graph", query="Retailer notify Distributor")
    assert {r["doc_id"] for r in graph.structured_content["relationships"]} == {DOC}
    listing = await call(kb, embedder, "list_documents")
    assert text_of(listing).endswith(
        "Versions (search returns only the version serving):\n"
        f"- {NAME}: version 2 is being built; version 1 serving, 0 earlier"
    )

    assert await anyio.to_thread.run_sync(kb.build, RECORD)

    after = await call(kb, embedder, "search_docs", query=QUESTION)
    results = after.structured_content["results"]
    assert [(r["id"], r["doc_id"], r["version"]) for r in results] == [
        (f"{DOC}@v2-0", DOC, "2")
    ]
    assert "five business days" in text_of(after) and "two business days" not in text_of(after)
    assert "[1] Life Support Rules — Version 2" in text_of(after)
    assert f"chunk 0 of {DOC}" in text_of(after)
    (source,) = after.structured_content["sources"]
    assert (source["doc_id"], source["version"]) == (DOC, "2")
    assert source["url"].startswith("http://127.0.0.1:8765/files/pdfs/life-support-rules.md%40v2")
    read = await call(kb, embedder, "read_doc", document=DOC, chunk_numbers=[0])
    assert "five business days" in text_of(read)
    graph = await call(kb, embedder, "search_graph", query="Retailer notify Distributor")
    assert {r["doc_id"] for r in graph.structured_content["relationships"]} == {DOC}
    listing = await call(kb, embedder, "list_documents")
    assert text_of(listing).endswith(f"- {NAME}: version 2 serving, 1 earlier")
    (row,) = listing.structured_content["documents"]
    assert row["url"].endswith("/files/pdfs/life-support-rules.md%40v2")
    # the graph page's document filter finds version 2's edges under the document's doc_id
    with TestClient(build_app(corpus_settings(kb.home), embedder=embedder, warm=False),
                    base_url="http://127.0.0.1:8765") as client:
        view = client.get("/api/graph", params={"doc": DOC}).json()
    assert view["shown"]["edges"] > 0
    assert {edge["document"] for edge in view["edges"]} == {DOC}


async def test_a_failed_version_2_leaves_version_1_served_and_list_documents_says_why(
    kb: Kb, embedder: HashingEmbedder
) -> None:
    kb.add_version_2()
    kb.providers.embedder_ = FlakyEmbedder("quota exceeded", dimension=embedder.dimension)
    kb.providers.embedder_.model = embedder.model
    defs = dg.Definitions(
        assets=CORPUS_ASSETS, jobs=[build_documents_job], executor=dg.in_process_executor,
        resources=kb_resources(kb.stores, kb.providers),
    )
    job = defs.resolve_job_def(BUILD_JOB)
    result = await anyio.to_thread.run_sync(
        lambda: job.execute_in_process(partition_key=DOC, instance=kb.instance, raise_on_error=False)
    )
    assert not result.success

    listing = await call(kb, embedder, "list_documents")
    assert listing.structured_content["failed"] == 0
    assert [d["doc_id"] for d in listing.structured_content["documents"]] == [DOC]
    assert text_of(listing).endswith(
        f"- {NAME}: version 2 failed: embeddings: RuntimeError: quota exceeded; version 1 serving"
    )
    search = await call(kb, embedder, "search_docs", query=QUESTION)
    assert [r["id"] for r in search.structured_content["results"]] == [f"{DOC}-0"]
    assert "two business days" in text_of(search)
