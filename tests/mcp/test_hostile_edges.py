"""Hostile input at the MCP server's edges (the 2026-12-07 audit):

* what the two queue tools store is shown to an operator as sent (``kb requests list``,
  ``kb references list``, whose Rich tables pass ESC through), so a title, reason,
  description or link holding a control character (a terminal escape sequence) or a
  bidirectional control is refused with the character named, and nothing is queued; a
  reason over several lines is still taken;
* the pages' cookie (``kb_pages``) is found beside cookies ``http.cookies`` cannot parse
  (``theme=dark mode``, a JSON value): another site on the same host name, on any port,
  adds its cookies to the header a browser sends;
* a document name holding a NUL is an unknown document (``Catalog.resolve``), as a Postgres
  catalog, which refuses a NUL in a query parameter, must answer too; a figure gallery's path
  segment that is no doc_id is not found without a catalog query.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import psycopg
import pytest
from mcp import Client
from starlette.testclient import TestClient

from kb_mcp.http import build_app
from kb_mcp.links import Links, page_signature, signing_key
from kb_mcp.pages.gallery import read_gallery
from kb_shared.errors import EmptyCorpusError
from kb_shared.stores import factory
from kb_shared.stores.catalog import Catalog, document_requests, reference_requests
from tests.mcp.corpus import HashingEmbedder, corpus_settings

ORIGIN = "http://127.0.0.1:8765"
LOGGED = "Error executing tool request_document: nothing was logged: "
QUEUED = "Error executing tool add_reference: nothing was queued: "
REFERENCE = {"url": "https://example.com/api", "title": "Example API", "description": "Its calls"}

#: (tool, arguments, the whole error text).
REFUSED = [
    (
        "request_document",
        {"title": "Gas Code\x1b]0;pwned\x07\x1b[2J", "checked_indexed_documents": True},
        LOGGED + "title holds a control character, U+001B; send plain text.",
    ),
    (
        "request_document",
        {"title": "Gas Code", "reason": "see\x1b[8m hidden", "checked_indexed_documents": True},
        LOGGED + "reason holds a control character, U+001B; send plain text.",
    ),
    (
        "request_document",
        {"title": "Gas \u202eedoC", "checked_indexed_documents": True},
        LOGGED + "title holds a bidirectional control (RIGHT-TO-LEFT OVERRIDE), U+202E; send "
        "plain text.",
    ),
    (
        "request_document",
        {"title": "Gas Code", "source_url": "https://example.com/\u202efdp.exe",
         "checked_indexed_documents": True},
        LOGGED + "source_url is not a link kb could download (the link holds a bidirectional "
        "control (RIGHT-TO-LEFT OVERRIDE), U+202E; send plain text). Give a direct https link "
        "to the PDF on the publisher's site, or leave source_url out.",
    ),
    (
        "add_reference",
        {**REFERENCE, "title": "Example API\x1b[31m"},
        QUEUED + "title holds a control character, U+001B; send plain text.",
    ),
    (
        "add_reference",
        {**REFERENCE, "description": "Its calls\r\n\x1b[2K"},
        QUEUED + "description holds a control character, U+001B; send plain text.",
    ),
    (
        "add_reference",
        {**REFERENCE, "url": "https://example.com/\u2066api"},
        QUEUED + "url is not a link kb accepts (the link holds a bidirectional control "
        "(LEFT-TO-RIGHT ISOLATE), U+2066; send plain text). Give the page's https address on "
        "the publisher's site.",
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    REFUSED,
    ids=[f"{tool}-{n}" for n, (tool, _, _) in enumerate(REFUSED)],
)
async def test_text_an_operator_would_be_shown_raw_is_refused_and_nothing_queued(
    server, writer: Catalog, tool: str, arguments: dict, message: str
) -> None:
    async with Client(server) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error is True
    assert result.content[0].text == message
    assert writer.list_document_requests() == []
    assert writer.list_reference_requests() == []


@pytest.mark.anyio
async def test_a_reason_and_a_description_over_several_lines_are_taken(
    server, writer: Catalog
) -> None:
    reason = "Asked for:\r\n\t- the audit\n\t- the 2026 review"
    async with Client(server) as client:
        logged = await client.call_tool(
            "request_document",
            {"title": "Gas Code", "reason": reason, "checked_indexed_documents": True},
        )
        queued = await client.call_tool(
            "add_reference", {**REFERENCE, "description": "Calls:\n\tGET /a\n\tGET /b"}
        )
    assert (logged.is_error, queued.is_error) == (False, False)
    assert [(r.title, r.reason) for r in writer.list_document_requests()] == [("Gas Code", reason)]
    descriptions = [r.description for r in writer.list_reference_requests()]
    assert descriptions == ["Calls:\n\tGET /a\n\tGET /b"]


@pytest.mark.parametrize(
    "other", ["theme=dark mode", 'prefs={"a": 1, "b": 2}', "Path=/", 'quoted="open'],
)
def test_the_pages_cookie_is_read_beside_cookies_python_cannot_parse(
    corpus_home: Path, embedder: HashingEmbedder, other: str
) -> None:
    settings = corpus_settings(corpus_home, mcp_tokens="s3cret")
    signature = page_signature(signing_key(["s3cret"]))
    with TestClient(build_app(settings, embedder=embedder, warm=False), base_url=ORIGIN) as client:
        for path in ("/api/graph", "/graph/static/graph/graph.js"):
            opened = client.get(path, headers={"Cookie": f"{other}; kb_pages={signature}"})
            assert opened.status_code == 200, path
        wrong = client.get("/api/graph", headers={"Cookie": f"{other}; kb_pages={'0' * 32}"})
        assert wrong.status_code == 401
        # the cookie opens the pages only, never a file or the MCP endpoint
        cookie = {"Cookie": f"{other}; kb_pages={signature}"}
        assert client.get("/files/pdfs/retail-rules.pdf", headers=cookie).status_code == 401


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("read_doc", {"document": "retail-rules.pdf\x00", "chunk_numbers": [0]}),
        ("search_docs", {"query": "retailer", "documents": ["Retail Rules.pdf\x00"]}),
    ],
)
async def test_a_document_name_holding_a_nul_is_unknown_on_every_catalog(
    server, tool: str, arguments: dict
) -> None:
    # SQLite once found the document through its slug while Postgres refused the NUL in the
    # query ("read_doc failed unexpectedly (DataError)"); no name holds a NUL
    async with Client(server) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error is True
    shown = arguments.get("document") or arguments["documents"][0]
    assert result.content[0].text == (
        f"Error executing tool {tool}: unknown document {shown!r}: give a file name or doc_id "
        "exactly as list_documents shows them; did you mean 'retail-rules.pdf'?"
    )


class PostgresTextRules:
    """A catalog reader that refuses a NUL in a text parameter as psycopg does for Postgres
    (``psycopg.DataError``, raised before the query is sent), around the corpus catalog."""

    def __init__(self, inner: Catalog) -> None:
        self.inner = inner

    def __getattr__(self, name: str):
        method = getattr(self.inner, name)

        def call(*args, **kwargs):
            if any(isinstance(a, str) and "\x00" in a for a in (*args, *kwargs.values())):
                raise psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
            return method(*args, **kwargs)

        return call


@pytest.mark.parametrize("segment", ["retail-rules.pdf\x00", "\x00", "Retail Rules.pdf", "a" * 121])
def test_a_gallery_path_that_is_no_doc_id_is_not_found_without_a_catalog_query(
    corpus_home: Path, segment: str
) -> None:
    # /documents/{doc_id}/figures: a NUL once reached the catalog, a 500 on Postgres
    catalog = factory.open_catalog(corpus_settings(corpus_home))

    def no_index() -> None:  # the gallery's figures are not what is tested here
        raise EmptyCorpusError("no vector index")

    try:
        state = SimpleNamespace(catalog=PostgresTextRules(catalog), vectors=no_index)
        assert read_gallery(state, segment, Links(ORIGIN)) is None
        found = read_gallery(state, "retail-rules.pdf", Links(ORIGIN))
        assert found is not None and found.document.doc_id == "retail-rules.pdf"
    finally:
        catalog.close()
