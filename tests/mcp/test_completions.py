"""``completion/complete`` and the resource templates whose arguments it completes
(``kb_mcp.completions``, ``kb_mcp.resources``), through the SDK's client session: document ids
for ``kb://documents/{doc_id}``, categories for ``kb://categories/{+category}``, ready
documents only, nothing (not an error) for any other argument."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import PromptReference, ResourceTemplateReference

from kb_mcp.completions import MAX_VALUES, suggest
from kb_mcp.server import build_server
from kb_shared.stores import factory
from tests.mcp.corpus import DISPATCH_ID, RETAIL_ID, HashingEmbedder, corpus_settings, write_corpus

pytestmark = pytest.mark.anyio

DOCUMENT = ResourceTemplateReference(type="ref/resource", uri="kb://documents/{doc_id}")
CATEGORY = ResourceTemplateReference(type="ref/resource", uri="kb://categories/{+category}")

#: Categories filed in the corpus below: the failed document's must never be offered.
FILED = {RETAIL_ID: "aemo/Procedures", DISPATCH_ID: "aemo/dispatch", "broken.pdf": "secret/failed"}


@pytest.fixture(scope="module")
def filed_home(tmp_path_factory: pytest.TempPathFactory, embedder: HashingEmbedder) -> Path:
    """The test corpus (two ready documents, one pending, one failed) with categories."""
    home = tmp_path_factory.mktemp("kbcomplete")
    write_corpus(corpus_settings(home), embedder, graph=False)
    catalog = factory.open_catalog(corpus_settings(home))
    for doc_id, category in FILED.items():
        catalog.set_category(doc_id, category)
    catalog.close()
    return home


@pytest.fixture(scope="module")
def filed_server(filed_home: Path, embedder: HashingEmbedder):
    """The server on ``filed_home``, one per module (each client session opens the stores
    anew; see ``server`` in tests/mcp/conftest.py)."""
    return build_server(corpus_settings(filed_home), embedder=embedder, warm=False)


async def complete(server, ref, name: str, value: str) -> tuple[list[str], int | None, bool | None]:
    async with Client(server) as client:
        result = await client.complete(ref, {"name": name, "value": value})
    return result.completion.values, result.completion.total, result.completion.has_more


async def test_the_templates_are_listed_and_completion_is_advertised(filed_server) -> None:
    async with Client(filed_server, mode="legacy") as client:
        templates = (await client.list_resource_templates()).resource_templates
        capabilities = client.server_capabilities
    assert [(t.uri_template, t.name, t.mime_type) for t in templates] == [
        ("kb://documents/{doc_id}", "document", "application/json"),
        ("kb://categories/{+category}", "category", "application/json"),
    ]
    assert capabilities.completions is not None
    assert capabilities.logging is not None


@pytest.mark.parametrize(
    ("typed", "values"),
    [
        ("", [DISPATCH_ID, RETAIL_ID]),
        ("RETAIL", [RETAIL_ID]),
        # matched on the file name too: "Dispatch Procedure.pdf"
        ("Dispatch P", [DISPATCH_ID]),
        # starts-with first, then contains ("procedure" contains "re")
        ("re", [RETAIL_ID, DISPATCH_ID]),
        (" retail-rules.pdf ", [RETAIL_ID]),
        # pending and failed documents are not offered
        ("queued", []),
        ("broken", []),
        ("zzz", []),
    ],
)
async def test_doc_ids_are_completed_from_the_ready_documents(
    filed_server, typed: str, values: list[str]
) -> None:
    assert await complete(filed_server, DOCUMENT, "doc_id", typed) == (values, len(values), False)


@pytest.mark.parametrize(
    ("typed", "values"),
    [
        ("", ["aemo", "aemo/dispatch", "aemo/Procedures"]),
        ("AEMO/", ["aemo/dispatch", "aemo/Procedures"]),
        ("proc", ["aemo/Procedures"]),
        ("aemo/d", ["aemo/dispatch"]),
        ("secret", []),
    ],
)
async def test_categories_and_their_parents_are_completed(
    filed_server, typed: str, values: list[str]
) -> None:
    assert await complete(filed_server, CATEGORY, "category", typed) == (values, len(values), False)


@pytest.mark.parametrize(
    ("ref", "name"),
    [
        (PromptReference(type="ref/prompt", name="research-topic"), "topic"),
        # the conformance suite's own prompt, which kb does not have
        (PromptReference(type="ref/prompt", name="test_prompt_with_arguments"), "arg1"),
        (ResourceTemplateReference(type="ref/resource", uri="kb://nothing/{x}"), "x"),
        (DOCUMENT, "category"),
    ],
)
async def test_other_arguments_get_an_empty_list_not_an_error(filed_server, ref, name: str) -> None:
    assert await complete(filed_server, ref, name, "a") == ([], 0, False)


def test_at_most_100_values_with_the_total_and_has_more() -> None:
    candidates = {f"doc-{n:03d}.pdf": (f"doc-{n:03d}.pdf",) for n in range(150, 0, -1)}
    answer = suggest(candidates, "DOC-")
    assert MAX_VALUES == 100
    assert answer.values == [f"doc-{n:03d}.pdf" for n in range(1, 101)]
    assert (answer.total, answer.has_more) == (150, True)


async def test_a_document_template_reads_one_ready_document(filed_server) -> None:
    async with Client(filed_server) as client:
        result = await client.read_resource(f"kb://documents/{RETAIL_ID}")
    [content] = result.contents
    assert content.mime_type == "application/json"
    document = json.loads(content.text)
    assert (document["doc_id"], document["name"], document["title"], document["category"]) == (
        RETAIL_ID, "Retail Rules.pdf", "Retail Market Rules", "aemo/Procedures")
    assert document["url"] == "http://127.0.0.1:8765/files/pdfs/retail-rules.pdf"


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("kb://documents/nothing.pdf",
         "unknown document 'nothing.pdf': give a file name or doc_id exactly as list_documents "
         "shows them; call list_documents to see them"),
        ("kb://documents/broken.pdf",
         "document 'Broken.pdf' is failed: markdown: the PDF is encrypted. Only ready documents "
         "can be read; call list_documents to see which are ready."),
        ("kb://categories/nowhere",
         "no document is filed under category 'nowhere'; read kb://documents for every document "
         "and its category"),
    ],
)
async def test_a_template_for_something_kb_lacks_says_what_to_read(
    filed_server, uri: str, message: str
) -> None:
    async with Client(filed_server) as client:
        with pytest.raises(MCPError) as raised:
            await client.read_resource(uri)
    assert str(raised.value) == message


@pytest.mark.parametrize(
    ("category", "doc_ids"),
    [("aemo", [DISPATCH_ID, RETAIL_ID]), ("AEMO/procedures", [RETAIL_ID])],
)
async def test_a_category_template_lists_the_documents_filed_under_it(
    filed_server, category: str, doc_ids: list[str]
) -> None:
    async with Client(filed_server) as client:
        result = await client.read_resource(f"kb://categories/{category}")
    listing = json.loads(result.contents[0].text)
    assert [d["doc_id"] for d in listing["documents"]] == doc_ids
    assert (listing["pending"], listing["failed"]) == (0, 0)
