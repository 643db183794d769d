"""Every tool, the prompt and the resource through the SDK's in-memory client
(``Client(server)``): schemas, annotations, rendered text, structured content, images and the
``isError`` results with their exact messages."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from mcp import Client

from kb_shared.search.retrieval import NOTHING_FOUND_SIMILARITY
from kb_mcp.server import build_server
from kb_shared.errors import EmbeddingError, RerankError
from kb_shared.providers import factory as provider_factory
from kb_shared.providers.base import Reranker
from kb_shared.settings import Settings
from kb_shared.stores import factory
from tests.mcp.corpus import (
    NOTIFY_TEXT,
    TABLE_TEXT,
    HashingEmbedder,
    corpus_settings,
    tiny_png,
    write_corpus,
    write_graph,
)

pytestmark = pytest.mark.anyio

BASE = "http://127.0.0.1:8765/files"
PREFIX = "Error executing tool {tool}: "


def text_of(result) -> str:
    """The first text block of a tool result."""
    return result.content[0].text


async def call(server, tool: str, **arguments):
    async with Client(server) as client:
        return await client.call_tool(tool, arguments)


# ---------------------------------------------------------------------------------------------
# Listing: names, annotations, schemas
# ---------------------------------------------------------------------------------------------


async def test_tools_are_read_only_with_bounded_inputs_and_output_schemas(server) -> None:
    async with Client(server) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert sorted(tools) == [
        "add_reference", "compare_versions", "display_process", "echo", "find_reference",
        "list_documents", "read_doc",
        "request_document", "search_aer_performance", "search_compliance", "search_docs",
        "search_graph", "search_obligations",
    ]
    # the intake queues' tools write: their hints are asserted in test_request_document and
    # test_references
    for tool in (
        t for name, t in tools.items() if name not in ("request_document", "add_reference")
    ):
        assert tool.annotations.read_only_hint is True
        assert tool.annotations.idempotent_hint is True
        assert tool.annotations.open_world_hint is False
    docs = tools["search_docs"].input_schema["properties"]
    assert docs["query"]["maxLength"] == 2000
    assert (docs["top_k"]["minimum"], docs["top_k"]["maximum"], docs["top_k"]["default"]) == (1, 25, 8)
    assert docs["offset"]["maximum"] == 200
    assert docs["kind"]["anyOf"][0]["enum"] == ["text", "table", "figure"]
    assert tools["search_docs"].input_schema["required"] == ["query"]
    read = tools["read_doc"].input_schema["properties"]["chunk_numbers"]
    assert (read["minItems"], read["maxItems"], read["items"]["minimum"]) == (1, 5, 0)
    assert "0-based" in read["description"]
    assert tools["search_graph"].input_schema["properties"]["hops"]["enum"] == [1, 2]
    assert set(tools["search_docs"].output_schema["properties"]) == {
        "results", "sources", "next_offset", "low_confidence", "best_similarity",
        "exact_terms", "term_coverage", "reranked", "edition_note", "absent_names",
    }
    assert "text" not in tools["search_docs"].output_schema["$defs"]["ResultRef"]["properties"]
    assert tools["echo"].output_schema is None
    # each search tool says when to use the other one
    assert "Use search_graph instead" in tools["search_docs"].description
    assert "Use search_docs instead" in tools["search_graph"].description


# ---------------------------------------------------------------------------------------------
# search_docs
# ---------------------------------------------------------------------------------------------


async def test_search_docs_renders_numbered_citations_once_and_structures_only_ids(server) -> None:
    result = await call(server, "search_docs", query="notify the distributor about life support", top_k=3)
    assert result.is_error is False
    text = text_of(result)
    assert text.startswith("Results 1–3 (hybrid dense + keyword search, fused by rank).")
    # every page of the passage, the answer's page, then the passage and its verbatim quote
    first = (
        "[1] Retail Market Rules — Version 2.1 — pp. 1–2 (answer on p. 1) — 2 Notifications\n"
        f"chunk 1 of retail-rules.pdf · [Source page 1]({BASE}/pdfs/retail-rules.pdf#page=1)\n"
        + NOTIFY_TEXT
        + f"\nQuote, [p. 1]({BASE}/pdfs/retail-rules.pdf#page=1): \u201c{NOTIFY_TEXT}\u201d"
    )
    assert first in text
    structured = result.structured_content
    top = structured["results"][0]
    assert {k: top[k] for k in ("number", "id", "doc_id", "kind", "chunk_number", "page_start",
                                "page_end", "section", "url", "quote", "quote_page")} == {
        "number": 1, "id": "retail-rules.pdf-1", "doc_id": "retail-rules.pdf", "kind": "text",
        "chunk_number": 1, "page_start": 1, "page_end": 2, "section": "2 Notifications",
        "url": f"{BASE}/pdfs/retail-rules.pdf#page=1", "quote": NOTIFY_TEXT, "quote_page": 1,
    }
    assert 0 < top["similarity"] <= 1 and top["score"] > 0
    # the passage is rendered once; structuredContent carries only its short quote
    assert json.dumps(structured).count("within 5 business days") == 1
    assert text.count("within 5 business days") == 2
    assert structured["low_confidence"] is False


async def test_search_docs_source_list_has_one_line_per_document(server) -> None:
    result = await call(server, "search_docs", query="dispatch retailer rules", top_k=6, kind="text")
    text = text_of(result)
    sources = text.split("Sources:\n", 1)[1].split("\n\n")[0].splitlines()
    assert sorted(sources) == [
        f"- Dispatch Procedure SO_OP_3705 — {BASE}/pdfs/dispatch-procedure.pdf",
        f"- Retail Market Rules (Version 2.1) — {BASE}/pdfs/retail-rules.pdf",
    ]
    assert [s["doc_id"] for s in result.structured_content["sources"]] == [
        line.rsplit("/", 1)[1] for line in sources
    ]


async def test_an_exact_code_hits_through_the_sparse_side(server) -> None:
    result = await call(server, "search_docs", query="IN008-24", top_k=2)
    structured = result.structured_content
    assert structured["results"][0]["id"] == "retail-rules.pdf-2"
    assert structured["results"][0]["kind"] == "table"
    assert structured["exact_terms"] == ["in008-24"]
    assert structured["low_confidence"] is False
    assert TABLE_TEXT in text_of(result)


async def test_paging_continues_numbering_and_sets_next_offset(server) -> None:
    first = await call(server, "search_docs", query="retailer dispatch rules", top_k=2)
    assert first.structured_content["next_offset"] == 2
    assert "More results: call search_docs again with offset=2." in text_of(first)
    second = await call(server, "search_docs", query="retailer dispatch rules", top_k=2, offset=2)
    assert [r["number"] for r in second.structured_content["results"]] == [3, 4]
    assert "\n[3] " in text_of(second)
    ids = [r["id"] for r in first.structured_content["results"] + second.structured_content["results"]]
    assert len(set(ids)) == 4
    last = await call(server, "search_docs", query="retailer dispatch rules", top_k=25)
    assert last.structured_content["next_offset"] is None
    assert len(last.structured_content["results"]) == 7  # 5 chunks + 2 figures


async def test_no_next_offset_is_offered_past_the_last_offset_the_tool_takes(
    server, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    from kb_shared.search import retrieval

    real = retrieval.search_docs

    def deep(*args, **kwargs):  # as a corpus with more than 208 results would answer
        return replace(real(*args, **kwargs), next_offset=kwargs["offset"] + kwargs["top_k"])

    monkeypatch.setattr(retrieval, "search_docs", deep)
    last = await call(server, "search_docs", query="retailer dispatch rules", offset=200)
    assert last.structured_content["next_offset"] is None
    assert "More results" not in text_of(last)
    within = await call(server, "search_docs", query="retailer dispatch rules", offset=192)
    assert within.structured_content["next_offset"] == 200


async def test_figures_come_back_as_labelled_images_with_links(server, corpus_home: Path) -> None:
    result = await call(server, "search_docs", query="notification flow", kind="figure")
    text = text_of(result)
    assert (
        f"[Open figure]({BASE}/figures/retail-rules.pdf/figure-1.png) · "
        f"[Source page 3]({BASE}/pdfs/retail-rules.pdf#page=3)"
    ) in text
    # figure 2 has no known page: its link has no #page= and no "page None"
    assert (
        f"[Open figure]({BASE}/figures/retail-rules.pdf/figure-2.png) · "
        f"[Source PDF]({BASE}/pdfs/retail-rules.pdf)"
    ) in text
    assert "#page=None" not in text
    blocks = result.content
    assert [b.type for b in blocks] == ["text", "text", "image"]  # figure 2 has no stored PNG
    assert blocks[1].text == "Image for result [1]: figure 1 of Retail Market Rules, p. 3"
    assert blocks[2].mime_type == "image/png"
    inline = (corpus_home / "blobs/figures/retail-rules.pdf/figure-1.inline.png").read_bytes()
    assert base64.b64decode(blocks[2].data) == inline == tiny_png(40, 30)
    refs = {r["figure_number"]: r for r in result.structured_content["results"]}
    assert refs[1]["image"] is True and refs[2]["image"] is False
    assert refs[1]["figure_url"] == f"{BASE}/figures/retail-rules.pdf/figure-1.png"


async def test_documents_filter_takes_file_names_and_ids(server) -> None:
    result = await call(
        server, "search_docs", query="retailer conformance", documents=["Dispatch Procedure.pdf"]
    )
    assert {r["doc_id"] for r in result.structured_content["results"]} == {"dispatch-procedure.pdf"}
    by_id = await call(server, "search_docs", query="retailer", documents=["RETAIL-RULES.PDF"])
    assert {r["doc_id"] for r in by_id.structured_content["results"]} == {"retail-rules.pdf"}


async def test_unknown_document_in_filter_is_an_actionable_error(server) -> None:
    result = await call(server, "search_docs", query="retailer", documents=["Retail Rule.pdf", "nope"])
    assert result.is_error is True
    assert text_of(result) == PREFIX.format(tool="search_docs") + (
        "unknown documents 'Retail Rule.pdf', 'nope': give a file name or doc_id exactly as "
        "list_documents shows them; did you mean 'retail-rules.pdf'?"
    )


async def test_a_failed_document_in_filter_is_an_error_with_its_reason(server) -> None:
    result = await call(
        server, "search_docs", query="retailer", documents=["retail-rules.pdf", "Broken.pdf"]
    )
    assert result.is_error is True
    assert text_of(result) == PREFIX.format(tool="search_docs") + (
        "document 'Broken.pdf' is failed: markdown: the PDF is encrypted. Only ready documents "
        "can be searched; call list_documents to see which are ready."
    )


async def test_unknown_kind_is_rejected_by_the_schema(server) -> None:
    result = await call(server, "search_docs", query="retailer", kind="diagram")
    assert result.is_error is True
    assert "Input should be 'text', 'table' or 'figure'" in text_of(result)


async def test_a_query_over_the_limit_is_refused_with_the_limit(server) -> None:
    result = await call(server, "search_docs", query="x" * 2001)
    assert result.is_error is True
    assert text_of(result) == PREFIX.format(tool="search_docs") + (
        "the query is 2,001 characters long; the limit is 2,000. Search with the key terms, "
        "codes or a one-sentence question instead of a whole passage."
    )
    blank = await call(server, "search_graph", query="   ")
    assert text_of(blank) == PREFIX.format(tool="search_graph") + (
        "the query is empty; pass the words, clause number or code to look for"
    )


async def test_an_unrelated_query_says_the_corpus_has_nothing_on_it(server) -> None:
    result = await call(server, "search_docs", query="chocolate cake baking recipe")
    assert result.is_error is False
    structured = result.structured_content
    assert structured["low_confidence"] is True
    assert structured["best_similarity"] < NOTHING_FOUND_SIMILARITY
    assert structured["next_offset"] is None
    assert len(structured["results"]) == 3
    text = text_of(result)
    assert text.startswith("The corpus has nothing that clearly matches this query:")
    assert "call list_documents" in text
    assert "Closest passages (low confidence, probably unrelated):" in text
    assert [b.type for b in result.content] == ["text"]  # no images for junk


async def test_a_question_naming_what_no_passage_mentions_leads_with_a_caveat(server) -> None:
    # close in meaning to the notification rule, but about a regulator no document names
    result = await call(
        server, "search_docs", query="When must the Distributor notify Ofgem about life support?"
    )
    structured = result.structured_content
    assert structured["absent_names"] == ["Ofgem"]
    assert structured["low_confidence"] is False  # the caveat leaves confidence to the rules
    text = text_of(result)
    assert text.startswith(
        "No indexed passage searched mentions 'Ofgem'. If the question is about it, the "
        "indexed documents do not cover it: tell the user so rather than answer from the "
        "passages below, which are about something else."
    )
    assert "\n\nResults 1–" in text  # the results follow, cited as always
    # the same question about a party the rules name has no caveat
    named = await call(
        server, "search_docs", query="When must the Retailer notify the Distributor about life support?"
    )
    assert named.structured_content["absent_names"] == []
    assert text_of(named).startswith("Results 1–")


async def test_search_graph_says_when_no_passage_mentions_a_name_the_query_asks_about(
    server,
) -> None:
    result = await call(server, "search_graph", query="Who must notify Ofgem?")
    assert result.structured_content["absent_names"] == ["Ofgem"]
    assert text_of(result).startswith(
        "No indexed passage searched mentions 'Ofgem'. If the question is about it, the "
        "indexed documents do not cover it: tell the user so rather than answer from the "
        "relationships and excerpts below"
    )
    # clause numbers as search_docs reads them
    clause = await call(server, "search_graph", query="Who must notify under clause 9.8.7?")
    assert clause.structured_content["absent_names"] == ["9.8.7"]
    named = await call(server, "search_graph", query="Who must notify the Distributor?")
    assert named.structured_content["absent_names"] == []
    assert text_of(named).startswith("Seed entities (similarity to the query):")


# ---------------------------------------------------------------------------------------------
# search_graph
# ---------------------------------------------------------------------------------------------


async def test_search_graph_renders_paths_with_excerpts_and_flags_missing_chunks(server) -> None:
    result = await call(server, "search_graph", query="Retailer")
    assert result.is_error is False
    text = text_of(result)
    assert text.startswith("Seed entities (similarity to the query): Retailer (1.00). Walked 1 hop(s).")
    assert (
        "[R1] Retailer —DEFINES→ Customer (retail-rules.pdf, chunk 99): a customer is a person "
        "buying energy — supporting excerpt missing: chunk retail-rules.pdf-99 is not in the "
        "vector index"
    ) in text
    assert (
        "[R2] Retailer —MUST_NOTIFY→ Distributor (retail-rules.pdf, chunk 1): must notify the "
        "distributor within 5 business days — excerpt [1]"
    ) in text
    assert "[1] Retail Market Rules — Version 2.1 — pp. 1–2 — 2 Notifications\n" in text
    structured = result.structured_content
    assert [(r["number"], r["type"], r["hops"], r["excerpt"]) for r in structured["relationships"]] == [
        (1, "DEFINES", 1, None), (2, "MUST_NOTIFY", 1, 1),
    ]
    assert structured["excerpts"][0]["id"] == "retail-rules.pdf-1"
    assert structured["seeds"] == [
        {"key": "retailer", "name": "Retailer", "type": "Role", "similarity": 1.0}
    ]


async def test_two_hops_rank_first_hop_relationships_first(server) -> None:
    result = await call(server, "search_graph", query="Retailer", hops=2)
    rels = result.structured_content["relationships"]
    assert [(r["type"], r["hops"]) for r in rels] == [
        ("DEFINES", 1), ("MUST_NOTIFY", 1), ("REFERS_TO", 2),
    ]
    assert "[R3] Distributor —REFERS_TO→ Life support register" in text_of(result)


async def test_search_graph_with_no_close_entity_says_so(server) -> None:
    result = await call(server, "search_graph", query="chocolate cake baking")
    assert result.is_error is False
    assert text_of(result).startswith("No entity in the knowledge graph is close to this query")
    assert result.structured_content["relationships"] == []


# ---------------------------------------------------------------------------------------------
# read_doc, list_documents, resource, prompt, echo
# ---------------------------------------------------------------------------------------------


async def test_read_doc_returns_chunks_in_the_order_asked_with_pages(server) -> None:
    result = await call(server, "read_doc", document="Retail Rules.pdf", chunk_numbers=[2, 0])
    assert result.is_error is False
    text = text_of(result)
    assert text.startswith(
        "[1] Retail Market Rules — Version 2.1 — p. 2 — 3 Market notices\n"
        f"chunk 2 of retail-rules.pdf · [Source page 2]({BASE}/pdfs/retail-rules.pdf#page=2)\n"
        + TABLE_TEXT
    )
    assert "[2] Retail Market Rules — Version 2.1 — p. 1 — 1 Introduction" in text
    structured = result.structured_content
    assert [c["chunk_number"] for c in structured["chunks"]] == [2, 0]
    assert structured["missing"] == []
    assert (structured["doc_id"], structured["chunk_count"]) == ("retail-rules.pdf", 3)


async def test_read_doc_reports_missing_numbers_and_bad_requests(server) -> None:
    partly = await call(server, "read_doc", document="retail-rules.pdf", chunk_numbers=[1, 9])
    assert partly.structured_content["missing"] == [9]
    assert "Not found: chunk 9 (this document has 3 chunks, numbered 0–2)." in text_of(partly)
    none = await call(server, "read_doc", document="retail-rules.pdf", chunk_numbers=[7, 8])
    assert none.is_error is True
    assert text_of(none) == PREFIX.format(tool="read_doc") + (
        "document 'Retail Rules.pdf' has no chunk 7, 8; it has 3 chunks (numbers 0–2)"
    )
    unknown = await call(server, "read_doc", document="Dispatch.pdf", chunk_numbers=[0])
    assert text_of(unknown) == PREFIX.format(tool="read_doc") + (
        "unknown document 'Dispatch.pdf': give a file name or doc_id exactly as list_documents "
        "shows them; did you mean 'dispatch-procedure.pdf'?"
    )
    pending = await call(server, "read_doc", document="Broken.pdf", chunk_numbers=[0])
    assert text_of(pending) == PREFIX.format(tool="read_doc") + (
        "document 'Broken.pdf' is failed: markdown: the PDF is encrypted. Only ready documents "
        "can be read; call list_documents to see which are ready."
    )
    too_many = await call(server, "read_doc", document="retail-rules.pdf", chunk_numbers=[0, 1, 2, 3, 4, 5])
    assert too_many.is_error is True
    assert "read_doc reads at most 5 chunks per call; you sent 6 chunk numbers." in text_of(too_many)


async def test_list_documents_shows_ready_documents_and_the_others_counts(server) -> None:
    result = await call(server, "list_documents")
    text = text_of(result)
    assert (
        "- Retail Rules.pdf [retail-rules.pdf] — Retail Market Rules (Version 2.1) — 3 pages, "
        f"3 chunks, 2 figures — {BASE}/pdfs/retail-rules.pdf"
    ) in text
    assert "1 pending (added, not built yet): Queued.pdf" in text
    assert "1 failed to build: Broken.pdf: markdown: the PDF is encrypted" in text
    structured = result.structured_content
    assert [d["doc_id"] for d in structured["documents"]] == ["dispatch-procedure.pdf", "retail-rules.pdf"]
    assert (structured["pending"], structured["failed"]) == (1, 1)


async def test_documents_resource_is_compact_json(server) -> None:
    async with Client(server) as client:
        listed = (await client.list_resources()).resources
        result = await client.read_resource("kb://documents")
    assert [str(r.uri) for r in listed] == ["ui://kb/display-process/v1", "kb://documents"]
    content = result.contents[0]
    assert content.mime_type == "application/json"
    assert "\n" not in content.text and ", " not in content.text and '": ' not in content.text
    data = json.loads(content.text)
    assert [d["name"] for d in data["documents"]] == ["Dispatch Procedure.pdf", "Retail Rules.pdf"]
    assert data["documents"][1]["url"] == f"{BASE}/pdfs/retail-rules.pdf"
    assert (data["pending"], data["failed"]) == (1, 1)


async def test_research_topic_prompt_asks_for_both_searches_and_disagreement(server) -> None:
    async with Client(server) as client:
        prompts = (await client.list_prompts()).prompts
        result = await client.get_prompt("research-topic", {"topic": "life support notices"})
    assert [p.name for p in prompts] == ["research-topic"]
    assert [a.name for a in prompts[0].arguments] == ["topic"]
    text = result.messages[0].content.text
    assert text.startswith("Research 'life support notices' in the kb knowledge base")
    assert "Call search_docs" in text and "Call search_graph" in text
    assert "Flag disagreement explicitly" in text


async def test_echo_returns_the_message_as_text_only(server) -> None:
    result = await call(server, "echo", message="ping ✓")
    assert [b.type for b in result.content] == ["text"]
    assert text_of(result) == "ping ✓"
    assert result.structured_content is None


# ---------------------------------------------------------------------------------------------
# Errors that are not the caller's: empty corpus, another model, a store that is down
# ---------------------------------------------------------------------------------------------


async def test_an_empty_corpus_is_an_error_for_searches_and_plain_for_the_listing(tmp_path: Path) -> None:
    server = build_server(Settings(home=tmp_path / "empty"), embedder=HashingEmbedder(), warm=False)
    async with Client(server) as client:
        docs = await client.call_tool("search_docs", {"query": "retailer"})
        graph = await client.call_tool("search_graph", {"query": "retailer"})
        listing = await client.call_tool("list_documents", {})
    expected = (
        "The corpus is empty: no document has been indexed yet, so there is nothing to search. "
        "Add PDFs with `kb add PATH…` (the pipeline then builds them), and call list_documents "
        "to see what is indexed."
    )
    assert docs.is_error is True and text_of(docs) == PREFIX.format(tool="search_docs") + expected
    assert graph.is_error is True and text_of(graph) == PREFIX.format(tool="search_graph") + expected
    # a fresh KB_HOME (nothing added yet) lists no documents instead of failing
    assert listing.is_error is False
    assert listing.structured_content["documents"] == []


async def test_an_index_built_by_another_model_says_to_re_embed(corpus_home: Path) -> None:
    other = HashingEmbedder(32, model="other-model")
    server = build_server(corpus_settings(corpus_home), embedder=other, warm=False)
    result = await call(server, "search_docs", query="retailer")
    assert result.is_error is True
    text = text_of(result)
    assert "holds embeddings from 'test-hashing-256' (256 dimensions)" in text
    assert "live embedding model is 'other-model-32' (32 dimensions)" in text
    assert "`kb rebuild embeddings --all --reset`" in text


async def test_a_store_that_is_down_is_an_error_and_the_server_stays_up(corpus_home: Path) -> None:
    settings = corpus_settings(corpus_home, reader_database_url="postgresql://kb_reader:pw@127.0.0.1:9/kb")
    server = build_server(settings, embedder=HashingEmbedder(256), warm=False)
    async with Client(server) as client:
        listing = await client.call_tool("list_documents", {})
        filtered = await client.call_tool("search_docs", {"query": "x", "documents": ["a.pdf"]})
        alive = await client.call_tool("echo", {"message": "still here"})
    for result, tool in ((listing, "list_documents"), (filtered, "search_docs")):
        assert result.is_error is True
        text = text_of(result)
        assert text.startswith(PREFIX.format(tool=tool) + "A store kb reads from is unavailable (")
        assert "The MCP server is still running: retry in a moment" in text
        assert "pw" not in text  # the password is never echoed
        assert "Traceback" not in text
    assert alive.is_error is False and text_of(alive) == "still here"


async def test_an_empty_graph_is_an_error_that_points_to_search_docs(tmp_path: Path) -> None:
    embedder = HashingEmbedder(256)
    write_corpus(corpus_settings(tmp_path), embedder, graph=False)
    server = build_server(corpus_settings(tmp_path), embedder=embedder, warm=False)
    result = await call(server, "search_graph", query="Retailer")
    assert result.is_error is True
    assert text_of(result) == PREFIX.format(tool="search_graph") + (
        "the knowledge graph is empty: no entities have been extracted yet, so there is nothing "
        "to walk. Use search_docs instead; call list_documents to see what is indexed."
    )


class ReversingReranker(Reranker):
    """Ranks the candidates in reverse fused order, relevance 1.0, 0.9, …"""

    name = "reverse"

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    def rerank(self, query: str, texts, top_n: int) -> list[tuple[int, float]]:
        self.calls.append((query, len(texts), top_n))
        order = list(range(len(texts)))[::-1][:top_n]
        return [(index, 1.0 - 0.1 * position) for position, index in enumerate(order)]


async def test_a_rerank_provider_orders_the_fused_candidates(corpus_home: Path) -> None:
    reranker = ReversingReranker()
    server = build_server(
        corpus_settings(corpus_home), embedder=HashingEmbedder(256), reranker=reranker, warm=False
    )
    fused = await call(
        build_server(corpus_settings(corpus_home), embedder=HashingEmbedder(256), warm=False),
        "search_docs", query="retailer notify distributor", top_k=25,
    )
    reranked = await call(server, "search_docs", query="retailer notify distributor", top_k=2)
    # all 7 candidates, all ranked: every page is cut from the one order
    assert reranker.calls == [("retailer notify distributor", 7, 7)]
    fused_ids = [r["id"] for r in fused.structured_content["results"]]
    structured = reranked.structured_content
    assert [r["id"] for r in structured["results"]] == fused_ids[::-1][:2]
    assert [r["score"] for r in structured["results"]] == [1.0, 0.9]
    assert structured["reranked"] is True and structured["next_offset"] == 2
    assert text_of(reranked).startswith("Results 1–2 (reranked).")


class FailingReranker(Reranker):
    """A rerank provider whose every call fails, as Cohere does after its retries."""

    name = "failing"

    def rerank(self, query: str, texts, top_n: int) -> list[tuple[int, float]]:
        raise RerankError("Cohere rerank answered 503 after 3 attempts")


class FailingEmbedder(HashingEmbedder):
    """The corpus's embedder (same model and dimension) whose query embedding fails."""

    def embed_query(self, text: str):
        raise EmbeddingError("the embedding API answered 429 after 3 attempts")


async def test_a_failing_provider_is_named_by_its_role(corpus_home: Path) -> None:
    reranking = build_server(
        corpus_settings(corpus_home), embedder=HashingEmbedder(256), reranker=FailingReranker(),
        warm=False,
    )
    rerank = await call(reranking, "search_docs", query="retailer notify distributor")
    assert rerank.is_error is True
    assert text_of(rerank) == PREFIX.format(tool="search_docs") + (
        "The rerank model failed (Cohere rerank answered 503 after 3 attempts). Retry in a "
        "moment; if it keeps failing the operator must fix the provider settings."
    )
    embedding = build_server(corpus_settings(corpus_home), embedder=FailingEmbedder(256), warm=False)
    embed = await call(embedding, "search_graph", query="Retailer")
    assert text_of(embed) == PREFIX.format(tool="search_graph") + (
        "The embedding model failed (the embedding API answered 429 after 3 attempts). Retry "
        "in a moment; if it keeps failing the operator must fix the provider settings."
    )


async def test_graph_vectors_of_another_dimension_say_to_rebuild_the_graph(tmp_path: Path) -> None:
    embedder = HashingEmbedder(256)
    settings = corpus_settings(tmp_path)
    write_corpus(settings, embedder, graph=False)
    catalog = factory.open_catalog(settings)
    store = factory.open_graph_store(settings, engine=catalog.engine)
    store.ensure_schema(32)
    write_graph(store, HashingEmbedder(32))  # entity vectors of a 32-dimension model
    store.close()
    catalog.close()
    server = build_server(settings, embedder=embedder, warm=False)
    result = await call(server, "search_graph", query="Retailer")
    assert result.is_error is True
    text = text_of(result)
    assert text.startswith(
        PREFIX.format(tool="search_graph")
        + "the knowledge graph's entity vectors do not match the live embedding model ("
    )
    assert text.endswith(
        "); the operator must rebuild it with `kb rebuild graph --all`. Use search_docs meanwhile."
    )


class ClosingReranker(ReversingReranker):
    """Counts ``close()`` calls."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


async def test_the_server_closes_the_providers_it_made_and_not_the_ones_it_was_given(
    corpus_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = ClosingReranker()
    server = build_server(
        corpus_settings(corpus_home), embedder=HashingEmbedder(256), reranker=given, warm=False
    )
    await call(server, "echo", message="x")
    assert given.closed == 0
    made = ClosingReranker()
    monkeypatch.setattr(provider_factory, "reranker", lambda settings: made)
    server = build_server(corpus_settings(corpus_home), embedder=HashingEmbedder(256), warm=False)
    result = await call(server, "search_docs", query="retailer notify distributor", top_k=2)
    assert result.structured_content["reranked"] is True  # the factory's reranker was used
    assert made.closed == 1
