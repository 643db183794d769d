"""What the tool list costs a model (issue 28, "a tool list a model can afford"): every tool's
description plus its input schema as ``tools/list`` sends it (compact JSON, characters not
escaped), at most ``TOOL_LIST_BUDGET`` characters for all tools together; every tool has a
description; output schemas carry no prose (a model reads results, not their schema)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client

from kb_mcp.tools import without_null_defaults, without_prose

pytestmark = pytest.mark.anyio

#: Issue 28's target for descriptions plus input schemas of all tools together.
TOOL_LIST_BUDGET = 12_000


def model_facing_chars(tool: Any) -> int:
    """Characters a model reads for ``tool``: its description and its input schema as JSON."""
    schema = json.dumps(tool.input_schema, separators=(",", ":"), ensure_ascii=False)
    return len(tool.description or "") + len(schema)


def _descriptions(schema: Any) -> list[str]:
    """Every ``description`` inside a JSON schema (nested objects, ``$defs``, lists)."""
    if isinstance(schema, dict):
        found = [schema["description"]] if isinstance(schema.get("description"), str) else []
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                found += [d for sub in value.values() for d in _descriptions(sub)]
            elif key != "description":
                found += _descriptions(value)
        return found
    if isinstance(schema, list):
        return [d for item in schema for d in _descriptions(item)]
    return []


async def _tools(server: Any) -> list[Any]:
    async with Client(server) as client:
        return list((await client.list_tools()).tools)


async def test_the_tool_list_fits_the_budget(server: Any) -> None:
    tools = await _tools(server)
    sizes = {tool.name: model_facing_chars(tool) for tool in tools}
    assert len(tools) >= 13  # the 11 tools of issue 28 plus search_obligations, compare_versions
    assert sum(sizes.values()) <= TOOL_LIST_BUDGET, sorted(sizes.items(), key=lambda s: -s[1])


async def test_every_tool_says_what_it_is_for(server: Any) -> None:
    for tool in await _tools(server):
        assert len((tool.description or "").strip()) >= 40, tool.name


async def test_output_schemas_carry_no_prose(server: Any) -> None:
    structured = [tool for tool in await _tools(server) if tool.output_schema is not None]
    assert len(structured) >= 12  # every tool but echo
    for tool in structured:
        assert _descriptions(tool.output_schema) == [], tool.name
        assert "title" not in tool.output_schema, tool.name


def test_a_nested_description_is_found() -> None:
    schema = {
        "type": "object",
        "properties": {"description": {"type": "string"}, "hits": {"$ref": "#/$defs/Hit"}},
        "$defs": {"Hit": {"description": "one hit", "properties": {
            "page": {"type": "integer", "description": "1-based page"}}}},
    }
    assert sorted(_descriptions(schema)) == ["1-based page", "one hit"]


def test_prose_goes_but_property_names_and_data_stay() -> None:
    schema = {
        "title": "add_referenceArguments",
        "properties": {
            "title": {"type": "string", "title": "Title"},
            "kind": {"enum": ["title"], "default": "title", "description": "Which kind."},
        },
    }
    assert without_prose(schema, frozenset({"title", "description"})) == {
        "properties": {
            "title": {"type": "string"},
            "kind": {"enum": ["title"], "default": "title"},
        },
    }


def test_only_optional_null_defaults_go() -> None:
    schema = {
        "properties": {
            "query": {"type": "string"},
            "top_k": {"type": "integer", "default": 8},
            "category": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        },
        "required": ["query"],
    }
    assert without_null_defaults(schema)["properties"] == {
        "query": {"type": "string"},
        "top_k": {"type": "integer", "default": 8},
        "category": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    }
