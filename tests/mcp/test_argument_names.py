"""Arguments that do not fit a tool (an unknown name, a missing required one, a value of the
wrong type) get one plain-language sentence naming what the tool takes, never pydantic's
validation report (issue 16, "Bad input"). One hook covers every tool
(``kb_mcp.errors.check_arguments``); every case goes through the SDK's client session
against the real server, so what is asserted is the text a model reads.
"""

from __future__ import annotations

import pytest
from mcp import Client
from pydantic import BaseModel, Field, ValidationError

from kb_mcp.errors import argument_name_problem, argument_value_problem

pytestmark = pytest.mark.anyio

PREFIX = "Error executing tool {tool}: "
DOCS_TAKES = "query, top_k, documents, kind, offset, category"

CASES = [
    ("read_doc", {"document": "retail-rules.pdf", "chunk": [0]},
     "read_doc takes document, chunk_numbers; got unknown argument 'chunk' — did you mean "
     "'chunk_numbers'?"),
    ("read_doc", {"document": "retail-rules.pdf", "chunks": [0]},
     "read_doc takes document, chunk_numbers; got unknown argument 'chunks' — did you mean "
     "'chunk_numbers'?"),
    ("find_reference", {"query": "retailer"},
     "find_reference takes question, top_k; got unknown argument 'query' — did you mean "
     "'question'?"),
    ("search_docs", {"query": "retailer", "topK": 3},
     f"search_docs takes {DOCS_TAKES}; got unknown argument 'topK' — did you mean 'top_k'?"),
    ("search_docs", {"question": "retailer"},
     f"search_docs takes {DOCS_TAKES}; got unknown argument 'question' — did you mean "
     "'query'?"),
    ("search_docs", {"query": "retailer", "limit": 3, "verbose": True},
     f"search_docs takes {DOCS_TAKES}; got unknown arguments 'limit' and 'verbose'"),
    ("search_docs", {}, f"search_docs needs 'query' (it takes {DOCS_TAKES})"),
    ("echo", {}, "echo needs 'message' (it takes message)"),
    ("request_document", {"name": "AEMO rules"},
     "request_document takes title, checked_indexed_documents, reason, source_url; got unknown "
     "argument 'name'. It also needs 'title' and 'checked_indexed_documents'."),
    ("request_document", {"titel": "AEMO rules"},
     "request_document takes title, checked_indexed_documents, reason, source_url; got unknown "
     "argument 'titel' — did you mean 'title'? It also needs 'checked_indexed_documents'."),
    ("search_graph", {"query": "retailer", "hop": 2, "topk": 4},
     "search_graph takes query, hops, top_k, category; got unknown arguments 'hop' and 'topk' "
     "— did you mean 'hops' for 'hop', 'top_k' for 'topk'?"),
    # values of the wrong type
    ("search_docs", {"query": "retailer", "top_k": "ten"},
     "top_k must be a whole number; you sent 'ten'"),
    ("read_doc", {"document": "retail-rules.pdf", "chunk_numbers": "3"},
     "chunk_numbers must be a list; you sent '3'"),
    ("read_doc", {"document": "retail-rules.pdf", "chunk_numbers": [0, "two"]},
     "chunk_numbers.1 must be a whole number; you sent 'two'"),
    ("search_docs", {"query": ["retailer"]}, "query must be text; you sent ['retailer']"),
    ("read_doc", {"document": list(range(100)), "chunk_numbers": [0]},
     "document must be text; you sent a list of 100 items"),
    ("search_docs", {"query": "retailer", "kind": "diagram"},
     "kind: Input should be 'text', 'table' or 'figure'; you sent 'diagram'"),
]


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    CASES,
    ids=[f"{tool}-{n}" for n, (tool, _, _) in enumerate(CASES)],
)
async def test_arguments_that_do_not_fit_get_a_plain_sentence(
    server, tool: str, arguments: dict, message: str
) -> None:
    async with Client(server) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error is True
    assert [block.type for block in result.content] == ["text"]
    assert result.content[0].text == PREFIX.format(tool=tool) + message


async def test_fitting_arguments_and_unknown_tools_pass_through(server) -> None:
    async with Client(server) as client:
        echoed = await client.call_tool("echo", {"message": "hello"})
        read = await client.call_tool(
            "read_doc", {"document": "retail-rules.pdf", "chunk_numbers": [0]}
        )
        unknown = await client.call_tool("no_such_tool", {"x": 1})
    assert echoed.is_error is False
    assert "hello" in echoed.content[0].text
    assert read.is_error is False
    assert unknown.is_error is True
    assert unknown.content[0].text == "Unknown tool: no_such_tool"


def test_a_tool_without_arguments_says_so() -> None:
    schema = {"type": "object", "properties": {}}
    assert argument_name_problem("ping_tool", schema, {"x": 1}) == (
        "ping_tool takes no arguments; got unknown argument 'x'"
    )
    assert argument_name_problem("ping_tool", schema, {}) is None


class Limited(BaseModel):
    title: str = Field(max_length=3)
    count: int = 1


def test_a_constraint_keeps_pydantics_one_line_and_a_long_value_is_described_by_size() -> None:
    with pytest.raises(ValidationError) as caught:
        Limited.model_validate({"title": "t" * 301, "count": "many"})
    assert argument_value_problem("add_thing", caught.value) == (
        "title: String should have at most 3 characters; you sent 301 characters; "
        "count must be a whole number; you sent 'many'"
    )
