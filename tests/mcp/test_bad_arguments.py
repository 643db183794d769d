"""Bad arguments to the search and read tools get one plain-language sentence naming the
argument, its range and what was sent, never pydantic's validation report (issue 16, "Bad
input": a query of 10,000 characters, of control characters only or of punctuation only;
``top_k``/``offset``/``hops`` out of range; a read_doc chunk list of 1,000 numbers).

Every case goes through the SDK's client session against the real server (``Client(server)``),
so what is asserted is the text a model reads. The bounds stay published in the input schema.
"""

from __future__ import annotations

import pytest
from mcp import Client

pytestmark = pytest.mark.anyio

PREFIX = "Error executing tool {tool}: "

#: The sentence every refused query ends with.
QUERY_HINT = "pass the words, clause number or code to look for"
TOO_LONG = (
    "the query is 10,000 characters long; the limit is 2,000. Search with the key terms, "
    "codes or a one-sentence question instead of a whole passage."
)
CONTROL_ONLY = (
    "the query holds only control or invisible characters (such as NUL, ESC or a zero-width "
    f"space), so there is nothing to search for; {QUERY_HINT}"
)
PUNCTUATION_ONLY = (
    "the query has no letters or digits, only punctuation or symbols, so there is nothing to "
    f"search for; {QUERY_HINT}"
)
#: NUL, BEL, ESC, DEL, a zero-width space and a byte-order mark: nothing visible.
CONTROL_CHARACTERS = "\x00\x07\x1b\x7f\u200b\ufeff"
#: ASCII and typographic punctuation plus symbols (section sign, em dash, guillemets, euro).
PUNCTUATION = "?!...;:-- §—«»€ ()[]"
DOCS_TOP_K = "For more results, page on with offset=next_offset."
DOCS_OFFSET = (
    "Pass the next_offset of the previous page; to reach further, narrow the query or filter "
    "by documents or category."
)
HOPS_HINT = "hops=2 reaches one edge further than hops=1."
READ_1000 = (
    "read_doc reads at most 5 chunks per call; you sent 1,000 chunk numbers. Ask for 5 at a "
    "time, e.g. [0, 1, 2, 3, 4], then [5, 6, 7, 8, 9]"
)


CASES = [
    # queries, on each tool that takes one (find_reference calls it ``question``)
    ("search_docs", {"query": "x" * 10_000}, TOO_LONG),
    ("search_graph", {"query": "x" * 10_000}, TOO_LONG),
    ("find_reference", {"question": "x" * 10_000}, TOO_LONG),
    ("search_docs", {"query": CONTROL_CHARACTERS}, CONTROL_ONLY),
    ("search_graph", {"query": CONTROL_CHARACTERS}, CONTROL_ONLY),
    ("find_reference", {"question": CONTROL_CHARACTERS}, CONTROL_ONLY),
    ("search_docs", {"query": PUNCTUATION}, PUNCTUATION_ONLY),
    ("search_graph", {"query": PUNCTUATION}, PUNCTUATION_ONLY),
    ("find_reference", {"question": PUNCTUATION}, PUNCTUATION_ONLY),
    ("display_process", {"query": "x" * 10_000}, TOO_LONG),
    ("display_process", {"query": CONTROL_CHARACTERS}, CONTROL_ONLY),
    ("display_process", {"query": PUNCTUATION}, PUNCTUATION_ONLY),
    # top_k
    ("search_docs", {"query": "retailer", "top_k": 500},
     f"top_k must be between 1 and 25; you sent 500. {DOCS_TOP_K}"),
    ("search_docs", {"query": "retailer", "top_k": 0},
     f"top_k must be between 1 and 25; you sent 0. {DOCS_TOP_K}"),
    ("search_graph", {"query": "retailer", "top_k": 31},
     "top_k must be between 1 and 30; you sent 31"),
    ("search_graph", {"query": "retailer", "top_k": -4},
     "top_k must be between 1 and 30; you sent -4"),
    ("find_reference", {"question": "retailer", "top_k": 11},
     "top_k must be between 1 and 10; you sent 11"),
    # offset
    ("search_docs", {"query": "retailer", "offset": -1},
     f"offset must be between 0 and 200; you sent -1. {DOCS_OFFSET}"),
    ("search_docs", {"query": "retailer", "offset": 5000},
     f"offset must be between 0 and 200; you sent 5,000. {DOCS_OFFSET}"),
    # hops
    ("search_graph", {"query": "retailer", "hops": 3},
     f"hops must be 1 or 2; you sent 3. {HOPS_HINT}"),
    ("search_graph", {"query": "retailer", "hops": 0},
     f"hops must be 1 or 2; you sent 0. {HOPS_HINT}"),
    # read_doc's chunk list
    ("read_doc", {"document": "retail-rules.pdf", "chunk_numbers": list(range(1000))}, READ_1000),
    ("read_doc", {"document": "retail-rules.pdf", "chunk_numbers": []},
     "chunk_numbers is empty; pass 1 to 5 chunk numbers (0-based), e.g. [0, 1]"),
    ("read_doc", {"document": "retail-rules.pdf", "chunk_numbers": [2, -7]},
     "chunk numbers start at 0; you sent -7. Search results name each passage's chunk as "
     "'chunk n of {doc_id}'"),
]


@pytest.mark.parametrize(
    ("tool", "arguments", "message"),
    CASES,
    ids=[f"{tool}-{'-'.join(arguments)}-{n}" for n, (tool, arguments, _) in enumerate(CASES)],
)
async def test_bad_argument_gets_a_plain_language_error(
    server, tool: str, arguments: dict, message: str
) -> None:
    async with Client(server) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error is True
    assert [block.type for block in result.content] == ["text"]
    assert result.content[0].text == PREFIX.format(tool=tool) + message


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("search_docs", {"query": "retailer notify distributor", "top_k": 25, "offset": 200}),
        ("search_docs", {"query": "IN008-24", "top_k": 1, "offset": 0}),
        ("search_graph", {"query": "Retailer", "hops": 2, "top_k": 30}),
        ("search_graph", {"query": "Retailer", "hops": 1, "top_k": 1}),
        ("read_doc", {"document": "retail-rules.pdf", "chunk_numbers": [0, 1, 2, 0, 1]}),
        ("read_doc", {"document": "retail-rules.pdf", "chunk_numbers": [0]}),
        # a query with letters among punctuation and control characters is searched
        ("search_docs", {"query": "\x00?? IN008-24 !!"}),
    ],
)
async def test_the_bounds_themselves_are_accepted(server, tool: str, arguments: dict) -> None:
    async with Client(server) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error is False, result.content[0].text


async def test_the_input_schemas_still_publish_the_bounds_the_messages_name(server) -> None:
    async with Client(server) as client:
        listed = (await client.list_tools()).tools
    tools = {tool.name: tool.input_schema["properties"] for tool in listed}
    docs, graph, read = tools["search_docs"], tools["search_graph"], tools["read_doc"]
    assert (docs["top_k"]["minimum"], docs["top_k"]["maximum"]) == (1, 25)
    assert (docs["offset"]["minimum"], docs["offset"]["maximum"]) == (0, 200)
    assert (graph["top_k"]["minimum"], graph["top_k"]["maximum"]) == (1, 30)
    assert (graph["hops"]["type"], graph["hops"]["enum"], graph["hops"]["default"]) == (
        "integer", [1, 2], 1)
    references = tools["find_reference"]["top_k"]
    assert (references["minimum"], references["maximum"]) == (1, 10)
    chunks = read["chunk_numbers"]
    assert (chunks["minItems"], chunks["maxItems"], chunks["items"]["minimum"]) == (1, 5, 0)
    assert (docs["query"]["minLength"], docs["query"]["maxLength"]) == (1, 2000)
