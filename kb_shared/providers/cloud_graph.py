"""Graph extraction with Claude and JSON-schema-constrained output.

``ClaudeGraphExtractor`` makes one call per chunk (in parallel, up to the provider's
concurrency) and asks for ``{"entities": [...], "relationships": [...]}`` under a JSON schema
sent as ``output_config.format`` (Anthropic docs, "Structured outputs"): entity types and
relationship types are ``enum`` s, so the model cannot invent a type. The vocabulary is
``kb_shared.providers.graph_vocabulary``'s (``ENTITY_TYPES`` / ``RELATIONSHIP_TYPES``),
shared with the offline extractor, so both extractors write the same types into one graph;
both are constructor arguments, so a deployment can narrow or extend them (the reference
README's "constrained relationship vocabulary").

The answer is still checked, not trusted: a relationship whose type is outside the
vocabulary, whose endpoint is not among the chunk's entities, or that joins an entity to
itself is dropped and counted; an entity of an unknown type takes the last (most generic)
entity type. Entities are de-duplicated across the whole document by normalised name
(:func:`normalise_name`, then ``kb_shared.graph_model.entity_key``): the first display
name is kept unless a later one is capitalised and it was not, the most specific type wins
(the order of ``entity_types``), the longest description is kept — the shared
``EntityTable``, without its abbreviation expansions. One (source, type, target) is kept
once per chunk. Only entities that are the endpoint of a relationship are returned, and
every relationship carries ``source_doc`` and the ``chunk_id`` it came from: the same output
as ``SpacyGraphExtractor``.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kb_shared.ingest.chunking import PATH_SEPARATOR, Chunk
from kb_shared.errors import ProviderError
from kb_shared.graph_model import Relationship, entity_key
from kb_shared.models import CLAUDE_GRAPH_MODEL
from kb_shared.providers.base import Extraction, GraphExtractor
from kb_shared.providers.cloud_common import (
    CloudProvider,
    anthropic_text,
    claude_message,
    parse_json_object,
)
from kb_shared.providers.graph_vocabulary import (
    ENTITY_TYPES,
    RELATIONSHIP_TYPES,
    EntityTable,
    trim_description,
)

if TYPE_CHECKING:
    import anthropic

log = logging.getLogger(__name__)

#: ``max_tokens`` per chunk: a 300-word chunk yields well under 2,000 tokens of JSON; the
#: margin covers table chunks and adaptive thinking (and stays under the SDK's
#: non-streaming ceiling of 21,333).
MAX_OUTPUT_TOKENS = 8_000

#: What each entity type means, for the prompt (the local extractor's definitions).
ENTITY_TYPE_MEANINGS: dict[str, str] = {
    "Role": "a party that acts or is acted on (Retailer, Distributor, Generator, Market "
    "Participant, installer)",
    "Organisation": "a named body (AEMO, AER, NIST, Energy Safe Victoria)",
    "Document": "a document, law, rule, standard, guideline or clause reference (National "
    "Electricity Rules, NER clause 3.8.1, AS/NZS 5377), including this document itself",
    "Code": "an identifier that must stay whole (IN008-24, SO_OP_3705, VIC1-NSW1)",
    "DefinedTerm": "a term this document defines or uses in a defined sense",
}

#: What each relationship type means, for the prompt.
RELATIONSHIP_TYPE_MEANINGS: dict[str, str] = {
    "MUST": "source is obliged (must/shall/is required to) to act on or towards target",
    "MUST_NOTIFY": "source must notify, inform, advise or report to target",
    "MUST_PROVIDE": "source must provide, give, submit or send target (or to target)",
    "MUST_COMPLY_WITH": "source must comply with target",
    "MUST_NOT": "source must not / shall not / may not do something involving target",
    "SHOULD": "source should act on or towards target",
    "SHOULD_NOTIFY": "source should notify target",
    "SHOULD_PROVIDE": "source should provide target (or to target)",
    "SHOULD_COMPLY_WITH": "source should comply with target",
    "SHOULD_NOT": "source should not do something involving target",
    "MAY": "source is permitted to act on or towards target",
    "MAY_NOTIFY": "source may notify target",
    "MAY_PROVIDE": "source may provide target (or to target)",
    "DEFINED_IN": "the defined term source is defined in the document target",
    "DEFINED_USING": "the definition of source uses the entity target",
    "DEFINED_AS": "the abbreviation or alias source stands for target",
    "REFERS_TO": "the document source refers to the document, clause or code target",
    "PART_OF": "source (a clause) is part of target (a document)",
    "APPLIES_TO": "source (a rule or document) applies to target",
    "RESPONSIBLE_FOR": "source is responsible for target",
}

_ARTICLE = re.compile(r"^(?:the|a|an)\s+", re.IGNORECASE)
_WRAPPING = "\"'“”‘’`*_ "
_SPACES = re.compile(r"\s+")


def normalise_name(name: str) -> str:
    """An entity's display name, tidied: NFC, whitespace collapsed, wrapping quotes and
    Markdown marks (``**``, backticks, surrounding ``_``) removed, a leading article
    dropped. Underscores inside names (``SO_OP_3705``) are kept.

    ``'  **the Retailer** '`` → ``"Retailer"``; ``"“Life Support Customer”"`` →
    ``"Life Support Customer"``.
    """
    text = unicodedata.normalize("NFC", name).replace("**", "").replace("`", "")
    text = _SPACES.sub(" ", text).strip(_WRAPPING)
    text = _ARTICLE.sub("", text)
    return text.strip(_WRAPPING)


def _closed_object(properties: dict[str, Any]) -> dict[str, Any]:
    """A JSON-schema object with exactly ``properties``, all required, nothing else allowed
    (what structured output needs)."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def extraction_schema(
    entity_types: Sequence[str], relationship_types: Sequence[str]
) -> dict[str, Any]:
    """The JSON schema of one chunk's answer (``output_config.format.schema``)."""
    text = {"type": "string"}
    entity = _closed_object(
        {"name": text, "type": {**text, "enum": list(entity_types)}, "description": text}
    )
    relationship = _closed_object(
        {
            "source": text,
            "type": {**text, "enum": list(relationship_types)},
            "target": text,
            "description": text,
        }
    )
    return _closed_object(
        {
            "entities": {"type": "array", "items": entity},
            "relationships": {"type": "array", "items": relationship},
        }
    )


def extraction_prompt(
    title: str, chunk: Chunk, entity_types: Sequence[str], relationship_types: Sequence[str]
) -> str:
    """The user message for one chunk."""
    entity_lines = "\n".join(
        f"- {t}: {ENTITY_TYPE_MEANINGS.get(t, t)}" for t in entity_types
    )
    relationship_lines = "\n".join(
        f"- {t}: {RELATIONSHIP_TYPE_MEANINGS.get(t, t)}" for t in relationship_types
    )
    section = PATH_SEPARATOR.join(chunk.heading_path) or "(none)"
    return f"""Extract a knowledge graph from one chunk of a regulatory document.

Document title: {title or "(untitled)"}
Section: {section}

<chunk>
{chunk.text}
</chunk>

Entity types:
{entity_lines}

Relationship types (use only these):
{relationship_lines}

Rules:
- List every entity that takes part in a relationship, with its name as the document writes \
it (singular, without a leading article), its type, and a one-sentence description from the \
chunk.
- Give each relationship as source name, type, target name and the sentence or phrase it \
comes from. Both names must be in your entity list.
- When the document itself is an endpoint, name it exactly "{title or "this document"}" with \
type Document.
- Extract only what the chunk states. An empty list is a valid answer."""


class ClaudeGraphExtractor(CloudProvider, GraphExtractor):
    """``GraphExtractor`` on Claude with JSON-schema output and a fixed vocabulary;
    ``from_settings`` (``ANTHROPIC_API_KEY``), ``usage()`` and ``close()`` as
    :class:`~kb_shared.providers.cloud_common.CloudProvider`.

    Args:
        client: ``anthropic.Anthropic`` (``max_retries=0``).
        model: ``None`` = :data:`kb_shared.models.CLAUDE_GRAPH_MODEL`.
        entity_types: allowed entity types, most specific first (default the local
            extractor's ``ENTITY_TYPES``).
        relationship_types: allowed relationship types (default ``RELATIONSHIP_TYPES``).
        max_tokens: output budget per chunk.
        concurrency: chunks in flight at once.
        retry: retry policy.
        key: key source + fingerprint (usage metadata).

    Raises:
        ValueError: an empty vocabulary.
    """

    vendor = "Anthropic"
    provider = "claude-graph"
    default_model = CLAUDE_GRAPH_MODEL
    needed_by = "Claude graph extraction"

    def __init__(
        self,
        client: anthropic.Anthropic,
        *,
        entity_types: Sequence[str] = ENTITY_TYPES,
        relationship_types: Sequence[str] = RELATIONSHIP_TYPES,
        max_tokens: int = MAX_OUTPUT_TOKENS,
        **options: Any,
    ) -> None:
        if not entity_types or not relationship_types:
            raise ValueError("entity_types and relationship_types must not be empty")
        super().__init__(client, **options)
        self.entity_types = tuple(entity_types)
        self.relationship_types = tuple(relationship_types)
        self.max_tokens = max_tokens
        self.schema = extraction_schema(self.entity_types, self.relationship_types)

    def _extract(self, document: str, title: str, chunks: Sequence[Chunk]) -> Extraction:
        """One call per chunk (arguments checked by ``extract``); ``stats``: ``chunks``,
        ``entities``, ``relationships``, ``dropped_relationships``, ``retyped_entities``.

        Raises:
            ProviderError: a call failed for good, or an answer was malformed or cut off;
                nothing is returned for the document then.
        """
        answers = self.calls.map(lambda c: self._ask(title, c), list(chunks))
        table = EntityTable(
            {t: i for i, t in enumerate(self.entity_types)}, expansions=False
        )
        relationships: list[Relationship] = []
        dropped = retyped = 0
        allowed = set(self.relationship_types)
        for chunk, answer in zip(chunks, answers, strict=True):
            local: dict[str, str] = {}
            for item in answer.get("entities") or []:
                if not isinstance(item, dict):
                    continue
                name = normalise_name(str(item.get("name") or ""))
                if not name:
                    continue
                kind = str(item.get("type") or "")
                if kind not in table.rank:
                    kind = self.entity_types[-1]
                    retyped += 1
                key = table.add(name, kind, str(item.get("description") or ""))
                local[entity_key(name)] = key
            seen: set[tuple[str, str, str]] = set()
            for item in answer.get("relationships") or []:
                if not isinstance(item, dict):
                    dropped += 1
                    continue
                kind = str(item.get("type") or "")
                source = local.get(_key_or_blank(str(item.get("source") or "")))
                target = local.get(_key_or_blank(str(item.get("target") or "")))
                if kind not in allowed or source is None or target is None or source == target:
                    dropped += 1
                    continue
                triple = (source, kind, target)
                if triple in seen:
                    continue
                seen.add(triple)
                relationships.append(
                    Relationship(
                        source=source,
                        target=target,
                        type=kind,
                        description=trim_description(str(item.get("description") or "")),
                        source_doc=document,
                        chunk_id=chunk.id,
                    )
                )
        if dropped:
            log.info("%s: dropped %d relationships outside the vocabulary or without both "
                     "endpoints among the entities", document, dropped)
        endpoints = {r.source for r in relationships} | {r.target for r in relationships}
        entities = tuple(table.entities(endpoints))
        return Extraction(
            entities,
            tuple(relationships),
            {
                "chunks": len(chunks),
                "entities": len(entities),
                "relationships": len(relationships),
                "dropped_relationships": dropped,
                "retyped_entities": retyped,
            },
        )

    def _ask(self, title: str, chunk: Chunk) -> dict[str, Any]:
        what = f"extracting the graph of chunk {chunk.id}"
        prompt = extraction_prompt(title, chunk, self.entity_types, self.relationship_types)
        message, _ = claude_message(
            self,
            what,
            prompt,
            self.max_tokens,
            output_config={"format": {"type": "json_schema", "schema": self.schema}},
        )
        if message.stop_reason == "max_tokens":
            raise ProviderError(
                f"Anthropic {what}: the answer was cut off at max_tokens={self.max_tokens}; "
                "raise max_tokens or use smaller chunks"
            )
        if message.stop_reason == "refusal":
            raise ProviderError(f"Anthropic {what}: the model refused to answer")
        return parse_json_object(anthropic_text(message), "Anthropic", what)


def _key_or_blank(name: str) -> str:
    tidy = normalise_name(name)
    return entity_key(tidy) if tidy else ""
