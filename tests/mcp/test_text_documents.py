"""A Markdown document over MCP: built by the corpus assets on fake providers (the real text
pass-through converter and chunker, a hashing embedder), then searched, read and listed through
the SDK's in-memory client. Its chunks have no pages, so citations name the section and links
go to the stored ``.md`` file, never with ``#page=``."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
from mcp import Client

from kb_assets.assets import CORPUS_ASSETS
from kb_assets.jobs import kb_resources
from kb_assets.intake import IntakeStatus, admit
from kb_assets.resources import StoresResource
from kb_mcp.http import media_type
from kb_mcp.server import build_server
from tests.assets.fake_providers import FakeProviders
from tests.mcp.corpus import HashingEmbedder, corpus_settings

pytestmark = pytest.mark.anyio

GUIDE = "Connection Guide.md"
GUIDE_ID = "connection-guide.md"
FILE_URL = f"http://127.0.0.1:8765/files/pdfs/{GUIDE_ID}"
CODE = "```sh\n# a shell comment, not a heading\nkb add guide.md\n```"
GUIDE_TEXT = (
    "# Connection Guide\n\nRead this before connecting.\n\n## 1 Notifications\n\n"
    f"The Retailer must notify the Distributor before a site is connected.\n\n{CODE}\n\n"
    "## 2 Records\n\nThe Distributor keeps the register.\n"
)


@pytest.fixture(scope="module")
def guide_home(tmp_path_factory: pytest.TempPathFactory, embedder: HashingEmbedder) -> Path:
    """KB_HOME holding the Markdown guide, built by the six assets."""
    home = tmp_path_factory.mktemp("kbtext")
    source = home / "in" / GUIDE
    source.parent.mkdir()
    source.write_text(GUIDE_TEXT, encoding="utf-8")
    stores = StoresResource(home=str(home))
    with dg.DagsterInstance.ephemeral() as instance:
        (outcome,) = admit([source], stores, instance)
        assert outcome.status == IntakeStatus.ADDED
        result = dg.materialize(
            CORPUS_ASSETS, partition_key=GUIDE_ID, instance=instance,
            resources=kb_resources(stores, FakeProviders(embedder_=embedder)),
        )
        assert result.success
    stores.close()
    return home


@pytest.fixture
def guide_server(guide_home: Path, embedder: HashingEmbedder):
    return build_server(corpus_settings(guide_home), embedder=embedder, warm=False)


async def call(server, tool: str, **arguments):
    async with Client(server) as client:
        return await client.call_tool(tool, arguments)


async def test_search_docs_cites_a_markdown_section_and_links_the_file(guide_server) -> None:
    result = await call(
        guide_server, "search_docs", query="Retailer notify Distributor site connected", top_k=1
    )
    assert result.is_error is False
    assert result.content[0].text == (
        "Results 1–1 (hybrid dense + keyword search, fused by rank). Cite them by their [n] "
        "headers and pages.\n\n"
        "[1] Connection Guide — 1 Notifications\n"
        f"chunk 1 of {GUIDE_ID} · [Source file]({FILE_URL})\n"
        "## 1 Notifications\n\nThe Retailer must notify the Distributor before a site is "
        f"connected.\n\n{CODE}\n"
        "Quote: \u201cThe Retailer must notify the Distributor before a site is connected.\u201d\n\n"
        "Sources:\n"
        f"- Connection Guide — {FILE_URL}\n\n"
        "More results: call search_docs again with offset=1."
    )
    (ref,) = result.structured_content["results"]
    assert (ref["page_start"], ref["page_end"], ref["section"], ref["url"]) == (
        None, None, "Connection Guide › 1 Notifications", FILE_URL
    )


async def test_read_doc_and_list_documents_show_no_pages(guide_server) -> None:
    read = await call(guide_server, "read_doc", document=GUIDE, chunk_numbers=[2])
    assert read.content[0].text == (
        "[1] Connection Guide — 2 Records\n"
        f"chunk 2 of {GUIDE_ID} · [Source file]({FILE_URL})\n"
        "## 2 Records\n\nThe Distributor keeps the register."
    )
    assert read.structured_content["url"] == FILE_URL
    listed = await call(guide_server, "list_documents")
    assert (
        f"- {GUIDE} [{GUIDE_ID}] — Connection Guide — 3 chunks — {FILE_URL}"
        in listed.content[0].text
    )


def test_the_stored_markdown_file_is_served_as_text() -> None:
    assert media_type(f"pdfs/{GUIDE_ID}", b"# Connec") == "text/markdown"
    assert media_type("pdfs/field-notes.txt", b"The Reta") == "text/plain"
