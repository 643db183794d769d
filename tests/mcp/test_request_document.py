"""``request_document`` over MCP (in-memory ``Client``), and the whole loop it starts
(issue 12, "request_document (MCP) and the review queue"): the model logs a request with a
source URL, ``kb requests approve`` downloads it from a local HTTPS server (through the test
resolver of ``tests/assets/test_url_intake.py``), builds it on the fake providers and the
document is then found by search_docs — and asking for it again returns the match.

Also: the title comparison by tokens, refusal without checked_indexed_documents, joining a
duplicate title, the per-field caps and the 200-request ceiling, and (Postgres) the insert and
the join through the ``kb_reader`` role.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import anyio.to_thread
import pytest
from mcp import Client
from typer.testing import CliRunner

from benchmarks.postgres import reader_database
from kb_assets.cli import main as cli
from kb_mcp.server import build_server
from kb_mcp.tools.request_document import (
    LIKELY_MATCH,
    best_match,
    overlap,
    same_word,
    title_tokens,
)
from kb_shared.settings import Settings
from kb_shared.stores.catalog import DEFAULT_MAX_PENDING, Catalog, DocumentRow, document_requests
from kb_shared.stores.sql import make_engine
from tests.assets.test_requests import fake_builds  # noqa: F401 - fixture
from tests.assets.test_url_intake import (  # noqa: F401 - fixtures
    LocalSite,
    home,
    instance,
    reach_site,
    site,
    stores,
)
from tests.conftest import postgres_url
from tests.mcp.corpus import HashingEmbedder, corpus_settings, write_corpus

pytestmark = pytest.mark.anyio

PREFIX = "Error executing tool request_document: "
B2B_FILE = "B2B-Procedure-Technical-Delivery-Spec-v3.2.pdf"
B2B_TITLE = "B2B Procedure: Technical Delivery Specification"


def text_of(result) -> str:
    return result.content[0].text


#: Any time: the title comparison does not read it.
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def row(name: str, title: str | None = None, version: str | None = None) -> DocumentRow:
    """A ready catalog row with just what the title comparison reads."""
    return DocumentRow(
        doc_id=name.lower(), name=name, normalized_name=name.lower(), sha256="0" * 64,
        status="ready", failure_reason=None, title=title, version=version, pages=1,
        chunk_count=1, figure_count=0, entity_count=0, relationship_count=0, size_bytes=1,
        blob_key="pdfs/x", markdown_key=None, converter=None, embedding_model=None,
        created_at=NOW, updated_at=NOW,
    )


# --- comparing a title with the corpus --------------------------------------------------------


def test_a_prose_title_finds_the_file_name_by_tokens() -> None:
    asked, stored = title_tokens(B2B_TITLE), title_tokens(B2B_FILE)
    assert asked.words == ("b2b", "procedure", "technical", "delivery", "specification")
    assert (stored.words, stored.versions) == (
        ("b2b", "procedure", "technical", "delivery", "spec"), frozenset({"3.2"}),
    )
    assert overlap(asked.words, stored.words) == 1.0
    match = best_match(B2B_TITLE, [row("Retail Rules.pdf", "Retail Market Rules"), row(B2B_FILE)])
    assert match is not None and (match.document.name, match.score, match.likely) == (
        B2B_FILE, 1.0, True,
    )


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("spec", "specification", True),
        ("rule", "rules", True),
        ("proc", "procedure", True),
        ("re", "retail", False),  # too short to stand for a word
        ("2024", "20241", False),  # numbers must be equal
        ("market", "metering", False),
    ],
)
def test_abbreviations_are_prefixes_of_at_least_three_letters(a: str, b: str, same: bool) -> None:
    assert same_word(a, b) is same


def test_versions_stop_words_and_extensions_are_not_title_words() -> None:
    tokens = title_tokens("The Retail Code, Version 3 of 2024 (v2.1).pdf")
    assert tokens.words == ("retail", "code", "2024")
    assert tokens.versions == frozenset({"3", "2.1"})


def test_another_version_is_not_a_likely_match_and_weak_overlap_is_none() -> None:
    docs = [row("Retail Rules.pdf", "Retail Market Rules", "Version 2.1")]
    other = best_match("Retail Market Rules v3.0", docs)
    assert other is not None and (other.score, other.other_version, other.likely) == (1.0, True, False)
    same = best_match("Retail Market Rules version 2.1", docs)
    assert same is not None and same.likely
    weak = best_match("Wholesale Market Rules for Gas", docs)
    assert weak is not None and weak.score == 0.57 and weak.score < LIKELY_MATCH
    assert best_match("Metering Guideline", docs) is None


# --- the tool on the test corpus -----------------------------------------------------------


async def test_listing_says_the_tool_writes_and_bounds_every_field(server) -> None:
    async with Client(server) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    tool = tools["request_document"]
    hints = tool.annotations
    assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint,
            hints.open_world_hint) == (False, False, False, False)
    schema = tool.input_schema
    assert sorted(schema["required"]) == ["checked_indexed_documents", "title"]
    props = schema["properties"]
    assert (props["title"]["minLength"], props["title"]["maxLength"]) == (1, 300)
    assert props["reason"]["anyOf"][0]["maxLength"] == 2000
    assert props["source_url"]["anyOf"][0]["maxLength"] == 2048
    assert set(tool.output_schema["properties"]) == {
        "outcome", "request_id", "request_count", "has_source_url", "match", "other_version",
    }
    description = " ".join(tool.description.split())
    assert "This tool never downloads anything" in description
    assert "tell the user a request was logged for review, not that the document is now" in description
    assert "read kb://documents (or called list_documents)" in description


async def test_refused_unless_the_indexed_documents_were_checked(server, writer: Catalog) -> None:
    async with Client(server) as client:
        result = await client.call_tool(
            "request_document", {"title": "Gas Distribution Code", "checked_indexed_documents": False}
        )
    assert result.is_error
    assert text_of(result) == PREFIX + (
        "nothing was logged: first read kb://documents (or call list_documents) and check "
        "that no indexed document is the one you want — a file name rarely matches an "
        "official title, and a search that finds nothing is not proof the document is "
        "absent. Then call request_document again with checked_indexed_documents=true."
    )
    assert writer.list_document_requests() == []


async def test_a_title_that_matches_an_indexed_document_returns_the_match(
    server, writer: Catalog
) -> None:
    async with Client(server) as client:
        result = await client.call_tool(
            "request_document",
            {"title": "Retail Market Rules", "reason": "hardship", "checked_indexed_documents": True},
        )
    assert not result.is_error
    assert result.structured_content == {
        "outcome": "already_indexed", "request_id": None, "request_count": None,
        "has_source_url": None, "other_version": None,
        "match": {
            "name": "Retail Rules.pdf", "doc_id": "retail-rules.pdf",
            "title": "Retail Market Rules", "version": "Version 2.1", "status": "ready",
            "score": 1.0,
        },
    }
    assert text_of(result).startswith(
        'Not logged: the knowledge base already has a likely match for "Retail Market Rules": '
        "Retail Rules.pdf [retail-rules.pdf] — Retail Market Rules — Version 2.1 (token "
        "overlap 1.00); it is indexed and searchable."
    )
    assert writer.list_document_requests() == []


async def test_a_new_title_is_logged_and_a_repeat_joins_it(server, writer: Catalog) -> None:
    async with Client(server) as client:
        first = await client.call_tool(
            "request_document",
            {"title": "Gas Distribution Code", "reason": "gas connection rules",
             "checked_indexed_documents": True},
        )
        again = await client.call_tool(
            "request_document",
            {"title": "  gas distribution CODE ", "checked_indexed_documents": True,
             "source_url": "https://example.org/gdc.pdf"},
        )
    [stored] = writer.list_document_requests()
    assert (stored.title, stored.reason, stored.source_url, stored.request_count, stored.status) == (
        "Gas Distribution Code", "gas connection rules", None, 2, "pending",
    )
    assert stored.checked_indexed_documents is True
    assert first.structured_content == {
        "outcome": "logged", "request_id": stored.id, "request_count": 1,
        "has_source_url": False, "match": None, "other_version": None,
    }
    assert text_of(first) == (
        f'Request #{stored.id} for "Gas Distribution Code" was logged for an operator to '
        "review. It carries no source URL, so it waits until a person finds the file; a "
        "direct https link to the PDF lets it be approved in one step. Tell the user that a "
        "request was logged for review; do not say the document is now available: nothing "
        "was downloaded and it cannot be searched yet."
    )
    assert again.structured_content["outcome"] == "joined"
    assert again.structured_content["request_count"] == 2
    assert text_of(again).startswith(
        f'A request for "Gas Distribution Code" was already waiting for review (request '
        f"#{stored.id}); this ask was added to it (2 asks so far)."
    )


async def test_another_version_of_an_indexed_document_is_logged_and_named(
    server, writer: Catalog
) -> None:
    async with Client(server) as client:
        result = await client.call_tool(
            "request_document",
            {"title": "Retail Market Rules v3.0", "checked_indexed_documents": True,
             "source_url": "https://www.aemo.com.au/rules-v3.pdf"},
        )
    [stored] = writer.list_document_requests()
    assert (stored.title, stored.reason, stored.source_url) == (
        "Retail Market Rules v3.0", "(no reason given)", "https://www.aemo.com.au/rules-v3.pdf",
    )
    content = result.structured_content
    assert (content["outcome"], content["has_source_url"]) == ("logged", True)
    assert content["other_version"]["doc_id"] == "retail-rules.pdf"
    text = text_of(result)
    assert (
        "It carries a source URL (https://www.aemo.com.au/rules-v3.pdf), so an operator can "
        "approve and ingest it in one step."
    ) in text
    assert "The knowledge base has another version of it: Retail Rules.pdf" in text


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"title": "t" * 301}, "String should have at most 300 characters"),
        ({"title": "Gas Code", "reason": "r" * 2001}, "String should have at most 2000 characters"),
        ({"title": "Gas Code", "source_url": "file:///etc/passwd"},
         "nothing was logged: source_url is not a link kb could download (refused: "
         "file:///etc/passwd uses file scheme; only https is fetched)"),
        # From a new-user trial: these were logged with "an operator can approve and ingest
        # it in one step", and the approval's download then refused them.
        ({"title": "Gas Code", "source_url": "http://127.0.0.1/x.pdf"},
         "nothing was logged: source_url is not a link kb could download (refused: "
         "127.0.0.1 is a loopback address"),
        ({"title": "Gas Code", "source_url": "https://169.254.169.254/latest/x.pdf"},
         "nothing was logged: source_url is not a link kb could download (refused: "
         "169.254.169.254 is a link-local address"),
        ({"title": "???"}, "nothing was logged: the title '???' has no letters or digits"),
    ],
)
async def test_per_field_caps(server, writer: Catalog, arguments: dict, message: str) -> None:
    async with Client(server) as client:
        result = await client.call_tool(
            "request_document", {**arguments, "checked_indexed_documents": True}
        )
    assert result.is_error
    assert message in text_of(result)
    assert writer.list_document_requests() == []


async def test_the_queue_takes_at_most_200_pending_requests(server, writer: Catalog) -> None:
    with writer.engine.begin() as conn:
        conn.execute(
            document_requests.insert(),
            [{"title": f"Document {n}", "title_key": f"document {n}", "reason": "r"}
             for n in range(DEFAULT_MAX_PENDING)],
        )
    async with Client(server) as client:
        full = await client.call_tool(
            "request_document", {"title": "Gas Distribution Code", "checked_indexed_documents": True}
        )
        joined = await client.call_tool(
            "request_document", {"title": "document 7", "checked_indexed_documents": True}
        )
    assert full.is_error
    assert text_of(full) == PREFIX + (
        "nothing was logged: the document request queue already holds 200 pending requests "
        "(the ceiling is 200); an operator must review them before more can be added. Tell "
        "the user the request queue is full and the operator has to review it first."
    )
    assert len(writer.list_document_requests("pending")) == 200
    # a full queue still counts a repeat of a pending title: it adds no row
    assert joined.structured_content["request_count"] == 2


# --- the whole loop ---------------------------------------------------------------------------


async def test_request_approve_build_search_and_ask_again(
    reach_site: LocalSite, fake_builds: dict, home: Path, stores
) -> None:
    stores.catalog()  # the pipeline side creates the schema (kb db init / first use)
    embedder = HashingEmbedder(32)  # what FakeProviders builds with
    server = build_server(Settings(home=home), embedder=embedder, warm=False)
    source = reach_site.url("/files/b2b.pdf")
    async with Client(server) as client:
        logged = await client.call_tool(
            "request_document",
            {"title": B2B_TITLE, "reason": "B2B transaction questions", "source_url": source,
             "checked_indexed_documents": True},
        )
    assert logged.structured_content["outcome"] == "logged"
    request_id = logged.structured_content["request_id"]

    runner = CliRunner()
    listed = runner.invoke(cli.app, ["requests", "list"])
    assert B2B_TITLE in " ".join(listed.output.split())
    approve = ["requests", "approve", str(request_id), "--name", B2B_FILE]
    # in a worker thread, as a shell would run it: the build does not share the test's loop
    approved = await anyio.to_thread.run_sync(partial(runner.invoke, cli.app, approve))
    assert approved.exit_code == 0, approved.output
    [request] = stores.catalog().list_document_requests()
    assert (request.status, request.doc_id) == ("approved", B2B_FILE.lower())
    assert request.run_id is not None

    async with Client(server) as client:
        found = await client.call_tool(
            "search_docs", {"query": "life support equipment notify", "top_k": 3}
        )
        again = await client.call_tool(
            "request_document", {"title": B2B_TITLE, "checked_indexed_documents": True}
        )
    assert not found.is_error, text_of(found)
    assert found.structured_content["results"][0]["doc_id"] == B2B_FILE.lower()
    assert again.structured_content["outcome"] == "already_indexed"
    assert again.structured_content["match"]["name"] == B2B_FILE
    assert again.structured_content["match"]["score"] == 1.0
    assert len(stores.catalog().list_document_requests()) == 1


# --- Postgres: the insert and the join through kb_reader ------------------------------------------


@pytest.fixture(scope="module")
def databases() -> Iterator[tuple[str, str]]:
    """``(writer URL, kb_reader URL)`` of a fresh database built from ``sql/``."""
    with reader_database(postgres_url(), "kb_request_document") as urls:
        yield urls


@pytest.mark.services
async def test_requests_are_queued_and_joined_through_kb_reader(
    databases: tuple[str, str], tmp_path: Path
) -> None:
    writer_url, reader_url = databases
    embedder = HashingEmbedder(256)
    write_corpus(corpus_settings(tmp_path, database_url=writer_url), embedder)
    settings = corpus_settings(tmp_path, database_url=writer_url, reader_database_url=reader_url)
    server = build_server(settings, embedder=embedder, warm=False)
    async with Client(server) as client:
        logged = await client.call_tool(
            "request_document",
            {"title": "Gas Distribution Code", "reason": "gas rules",
             "source_url": "https://example.org/gdc.pdf", "checked_indexed_documents": True},
        )
        joined = await client.call_tool(
            "request_document", {"title": "GAS distribution code", "checked_indexed_documents": True}
        )
        matched = await client.call_tool(
            "request_document", {"title": "Retail Market Rules", "checked_indexed_documents": True}
        )
    assert not logged.is_error, text_of(logged)
    assert (logged.structured_content["outcome"], joined.structured_content["outcome"]) == (
        "logged", "joined",
    )
    assert joined.structured_content["request_count"] == 2
    assert matched.structured_content["match"]["doc_id"] == "retail-rules.pdf"

    catalog = Catalog(make_engine(writer_url))
    [stored] = catalog.list_document_requests()
    assert (stored.title, stored.request_count, stored.status) == ("Gas Distribution Code", 2, "pending")
    catalog.close()
    reader = Catalog(make_engine(reader_url))
    try:
        with pytest.raises(Exception, match="permission denied"):
            reader.set_document_request_status(stored.id, "approved")
    finally:
        reader.close()
