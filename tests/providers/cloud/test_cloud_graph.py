"""ClaudeGraphExtractor through the real anthropic SDK: JSON-schema output, the fixed
vocabulary, de-duplication and the local extractor's output types."""

from __future__ import annotations

import json

import httpx2
import pytest

from kb_shared.ingest.chunking import Chunk
from kb_shared.errors import ProviderError
from kb_shared.graph_model import Entity, Relationship
from kb_shared.providers.cloud_graph import ClaudeGraphExtractor, normalise_name
from kb_shared.providers.graph_vocabulary import ENTITY_TYPES, RELATIONSHIP_TYPES

from .conftest import Recorder, anthropic_client, claude_message, no_wait

TITLE = "Sample Retail Market Procedure"
CHUNKS = [
    Chunk(id="srmp-0", document="srmp", index=0,
          text="The Retailer must notify the Distributor within 2 business days.",
          heading_path=("3 Notifications",), page_start=2, page_end=2, kind="text"),
    Chunk(id="srmp-1", document="srmp", index=1,
          text="The retailer must comply with the National Electricity Rules (NER).",
          heading_path=("4 Compliance",), page_start=3, page_end=3, kind="text"),
]

ANSWERS = {
    "srmp-0": {
        "entities": [
            {"name": "the Retailer", "type": "Role", "description": "Sells energy."},
            {"name": "Distributor", "type": "Role", "description": "Runs the network."},
            {"name": "Deadline", "type": "Unknown", "description": "A time limit."},
        ],
        "relationships": [
            {"source": "Retailer", "type": "MUST_NOTIFY", "target": "Distributor",
             "description": "The Retailer must notify the Distributor within 2 business days."},
            {"source": "Retailer", "type": "MUST_NOTIFY", "target": "the Distributor",
             "description": "repeated"},
            {"source": "Retailer", "type": "OWNS", "target": "Distributor", "description": "x"},
            {"source": "Retailer", "type": "MUST", "target": "Customer", "description": "x"},
            {"source": "Deadline", "type": "APPLIES_TO", "target": "Retailer", "description": "Deadline applies."},
        ],
    },
    "srmp-1": {
        "entities": [
            {"name": "**retailer**", "type": "DefinedTerm", "description": "A retailer of energy in the NEM."},
            {"name": "National Electricity Rules", "type": "Document", "description": "The NER."},
        ],
        "relationships": [
            {"source": "retailer", "type": "MUST_COMPLY_WITH", "target": "National Electricity Rules",
             "description": "The retailer must comply with the National Electricity Rules (NER)."},
        ],
    },
}


def _respond(request: httpx2.Request, i: int) -> httpx2.Response:
    body = json.loads(request.content)
    text = body["messages"][0]["content"]
    chunk_id = "srmp-0" if "2 business days" in text else "srmp-1"
    return httpx2.Response(200, json=claude_message(json.dumps(ANSWERS[chunk_id])))


def test_request_uses_a_json_schema_with_the_fixed_vocabulary() -> None:
    recorder = Recorder(_respond)
    ClaudeGraphExtractor(anthropic_client(recorder), retry=no_wait()).extract("srmp", TITLE, CHUNKS[:1])

    body = recorder.bodies()[0]
    assert body["model"] == "claude-sonnet-5-5"
    assert body["max_tokens"] == 8000
    fmt = body["output_config"]["format"]
    assert fmt["type"] == "json_schema"
    schema = fmt["schema"]
    assert schema["required"] == ["entities", "relationships"]
    assert schema["additionalProperties"] is False
    relationship = schema["properties"]["relationships"]["items"]
    assert relationship["properties"]["type"]["enum"] == list(RELATIONSHIP_TYPES)
    assert relationship["required"] == ["source", "type", "target", "description"]
    entity = schema["properties"]["entities"]["items"]
    assert entity["properties"]["type"]["enum"] == list(ENTITY_TYPES)
    prompt = body["messages"][0]["content"]
    assert "Document title: Sample Retail Market Procedure" in prompt
    assert "Section: 3 Notifications" in prompt
    assert "- MUST_NOTIFY: source must notify, inform, advise or report to target" in prompt


def test_output_is_deduplicated_checked_and_typed_like_the_local_extractor() -> None:
    recorder = Recorder(_respond)
    extractor = ClaudeGraphExtractor(anthropic_client(recorder), retry=no_wait(), concurrency=2)

    result = extractor.extract("srmp", TITLE, CHUNKS)

    assert result.entities == (
        # "the Retailer", "**retailer**" -> one entity; Role beats DefinedTerm; longest description
        Entity("Retailer", "Role", "A retailer of energy in the NEM."),
        Entity("Distributor", "Role", "Runs the network."),
        Entity("Deadline", "DefinedTerm", "A time limit."),
        Entity("National Electricity Rules", "Document", "The NER."),
    )
    assert result.relationships == (
        Relationship("retailer", "distributor", "MUST_NOTIFY",
                     "The Retailer must notify the Distributor within 2 business days.", "srmp", "srmp-0"),
        Relationship("deadline", "retailer", "APPLIES_TO", "Deadline applies.", "srmp", "srmp-0"),
        Relationship("retailer", "national electricity rules", "MUST_COMPLY_WITH",
                     "The retailer must comply with the National Electricity Rules (NER).", "srmp", "srmp-1"),
    )
    # OWNS is outside the vocabulary; Customer is not an entity of the chunk
    assert result.stats["dropped_relationships"] == 2
    assert result.stats["retyped_entities"] == 1
    assert extractor.usage()["requests"] == 2


def test_the_relationship_vocabulary_is_configurable() -> None:
    recorder = Recorder(_respond)
    extractor = ClaudeGraphExtractor(
        anthropic_client(recorder), retry=no_wait(), relationship_types=("MUST_COMPLY_WITH",)
    )
    result = extractor.extract("srmp", TITLE, CHUNKS)
    assert recorder.bodies()[0]["output_config"]["format"]["schema"]["properties"][
        "relationships"]["items"]["properties"]["type"]["enum"] == ["MUST_COMPLY_WITH"]
    assert [r.type for r in result.relationships] == ["MUST_COMPLY_WITH"]


def test_malformed_json_is_a_clear_error() -> None:
    recorder = Recorder(lambda r, i: httpx2.Response(
        200, json=claude_message('{"entities": [{"name": "Retailer", "type": "Role"')))
    with pytest.raises(ProviderError) as caught:
        ClaudeGraphExtractor(anthropic_client(recorder), retry=no_wait()).extract("srmp", TITLE, CHUNKS[:1])
    assert str(caught.value).startswith(
        "Anthropic returned malformed JSON for extracting the graph of chunk srmp-0: "
    )
    assert "the answer began: '{\"entities\": [{\"name\": \"Retailer\", \"type\": \"Role\"'" in str(caught.value)


def test_an_answer_cut_off_at_max_tokens_is_an_error() -> None:
    recorder = Recorder(lambda r, i: httpx2.Response(
        200, json=claude_message('{"entities": [', stop_reason="max_tokens")))
    with pytest.raises(ProviderError, match="cut off at max_tokens=8000"):
        ClaudeGraphExtractor(anthropic_client(recorder), retry=no_wait()).extract("srmp", TITLE, CHUNKS[:1])


def test_429_then_success_and_chunks_of_another_document() -> None:
    def respond(request: httpx2.Request, i: int) -> httpx2.Response:
        if i == 0:
            return httpx2.Response(429, json={"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
                                   headers={"retry-after": "0"})
        return _respond(request, i)

    recorder = Recorder(respond)
    extractor = ClaudeGraphExtractor(anthropic_client(recorder), retry=no_wait(), concurrency=1)
    assert len(extractor.extract("srmp", TITLE, CHUNKS[:1]).relationships) == 2
    assert len(recorder.requests) == 2
    with pytest.raises(ValueError, match="belongs to 'srmp', not 'other'"):
        extractor.extract("other", TITLE, CHUNKS)


@pytest.mark.parametrize(
    ("raw", "tidy"),
    [("  **the Retailer** ", "Retailer"), ("“Life Support Customer”", "Life Support Customer"),
     ("SO_OP_3705", "SO_OP_3705"), ("`IN008-24`", "IN008-24"), ("An  Authorised   User", "Authorised User")],
)
def test_normalise_name(raw: str, tidy: str) -> None:
    assert normalise_name(raw) == tidy
