"""SpacyGraphExtractor: exact triples on sentences written for the rules, then a corpus check.

Triples are ``(source key, relationship type, target key)``; keys are ``entity_key`` of the
canonical names (case-folded), so ``"retailer"`` is the Retailer entity.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pymupdf
import pytest

from kb_shared.ingest.chunking import Chunk
from kb_shared.errors import ProviderError
from kb_shared.identity import chunk_id, doc_id
from kb_shared.models import SPACY_MODEL_SHA256
from kb_shared.providers import local_graph
from kb_shared.providers.base import Extraction
from kb_shared.providers.graph_vocabulary import ENTITY_TYPES, RELATIONSHIP_TYPES
from kb_shared.providers.local_graph import SpacyGraphExtractor
from kb_shared.stores.graph import validate_document_edges

DOC = "test-procedure.pdf"
TITLE = "Test Procedure"


def _chunks(*texts: str, document: str = DOC, heading_path: tuple[str, ...] = ()) -> list[Chunk]:
    return [
        Chunk(chunk_id(document, i), document, i, text, heading_path, 1, 1, "text")
        for i, text in enumerate(texts)
    ]


def _extract(*texts: str, heading_path: tuple[str, ...] = ()) -> Extraction:
    return SpacyGraphExtractor().extract(DOC, TITLE, _chunks(*texts, heading_path=heading_path))


def _triples(extraction: Extraction) -> list[tuple[str, str, str]]:
    return [(r.source, r.type, r.target) for r in extraction.relationships]


def _entity(extraction: Extraction, key: str):  # noqa: ANN202 - test helper
    found = [e for e in extraction.entities if e.key == key]
    assert len(found) == 1, f"{key!r} not among {[e.key for e in extraction.entities]}"
    return found[0]


# --------------------------------------------------------------------------------------
# Obligations
# --------------------------------------------------------------------------------------
def test_must_notify_between_two_parties() -> None:
    out = _extract("The Retailer must notify the Distributor within 2 business days.")
    assert _triples(out) == [("retailer", "MUST_NOTIFY", "distributor")]
    rel = out.relationships[0]
    assert rel.description == "The Retailer must notify the Distributor within 2 business days."


def test_shall_provide_targets_the_recipient() -> None:
    out = _extract("The Distributor shall provide the meter data to AEMO.")
    assert _triples(out) == [("distributor", "MUST_PROVIDE", "aemo")]


def test_must_not_is_a_prohibition() -> None:
    out = _extract("A Generator must not offer capacity to the Retailer.")
    assert _triples(out) == [("generator", "MUST_NOT", "retailer")]


def test_is_required_to_comply_with_a_document() -> None:
    out = _extract("Market Participants are required to comply with the National Electricity Rules.")
    # the expansion resolves to the well-known acronym, so every document shares one NER
    assert _triples(out) == [
        ("test procedure", "REFERS_TO", "ner"),
        ("market participant", "MUST_COMPLY_WITH", "ner"),
    ]


def test_may_is_a_permission_and_passive_agent_is_the_subject() -> None:
    out = _extract(
        "AEMO may direct a Generator.",
        "The notice must be given by the Retailer to the Distributor.",
    )
    assert _triples(out) == [
        ("aemo", "MAY", "generator"),
        ("retailer", "MUST_PROVIDE", "distributor"),
    ]


def test_lead_in_with_a_modal_is_carried_into_each_list_item() -> None:
    out = _extract(
        "The Retailer must:\n- (a) notify the Distributor; and\n- (b) provide the data to AEMO."
    )
    assert _triples(out) == [
        ("retailer", "MUST_NOTIFY", "distributor"),
        ("retailer", "MUST_PROVIDE", "aemo"),
    ]


def test_unnamed_object_of_a_duty_is_named_by_its_noun_phrase() -> None:
    out = _extract(
        "Pump suppliers must give a minimum three year spare-parts warranty for each pump.",
        "The DNSPs must publish their network outage plans.",
    )
    assert _triples(out) == [
        ("pump supplier", "MUST_PROVIDE", "spare-parts warranty"),
        ("dnsp", "MUST_PROVIDE", "network outage plan"),
    ]
    assert _entity(out, "spare-parts warranty").type == "DefinedTerm"
    # an acronym bearing a duty is a party
    assert _entity(out, "dnsp").type == "Role"


def test_unnamed_subject_of_a_duty_is_named_by_its_noun_phrase() -> None:
    out = _extract("A dispatchable load must submit a consumption forecast.")
    assert _triples(out) == [("dispatchable load", "MUST_PROVIDE", "consumption forecast")]
    assert _entity(out, "dispatchable load").type == "DefinedTerm"


def test_ensure_that_a_passive_clause_is_the_duty_it_names() -> None:
    out = _extract(
        "The distributor must ensure that a safety manual is supplied to the customer.",
        "The installer must ensure that an isolation switch is fitted.",
    )
    assert _triples(out) == [
        ("distributor", "MUST_PROVIDE", "customer"),
        ("installer", "MUST", "isolation switch"),
    ]


def test_confirm_that_names_the_subject_of_the_clause() -> None:
    out = _extract(
        "Network operators must confirm that the substation upgrades have met the reliability "
        "standard."
    )
    assert _triples(out) == [("network operator", "MUST", "substation upgrade")]


def test_passive_subject_is_the_object_of_the_agent_duty() -> None:
    out = _extract("A safety notice must be given by the Retailer.")
    assert _triples(out) == [("retailer", "MUST_PROVIDE", "safety notice")]


def test_unnamed_ends_make_no_edge_where_the_reading_is_unsure() -> None:
    out = _extract(
        "Prices may exceed the cap.",  # "may" as "might": both ends must be named
        "The retailer may offer a discount.",
        "These rules shall not apply to small customers.",  # a scope, not a duty
        "Retailers must take all reasonable steps to avoid disconnection.",  # generic noun
        "The Retailer must supply 50 MW to the grid.",  # a quantity
        "It must provide a report.",  # a pronoun
    )
    assert _triples(out) == []
    assert out.entities == ()


def test_descriptive_may_and_not_required_give_no_obligation() -> None:
    out = _extract(
        "A Mixed Aggregate may include a Generator.",
        "The Retailer is not required to notify the Distributor.",
    )
    assert [t for t in _triples(out) if t[1] not in ("REFERS_TO",)] == []


# --------------------------------------------------------------------------------------
# Definitions, abbreviations, references, codes
# --------------------------------------------------------------------------------------
def test_quoted_means_definition() -> None:
    out = _extract(
        "'Business day' means a day that is not a Saturday, Sunday or public holiday in Victoria."
    )
    assert _triples(out) == [("business day", "DEFINED_IN", "test procedure")]
    term = _entity(out, "business day")
    assert (term.name, term.type) == ("Business day", "DefinedTerm")
    assert term.description == "a day that is not a Saturday, Sunday or public holiday in Victoria."


def test_definition_pointing_elsewhere_is_defined_in_that_document() -> None:
    out = _extract(
        "Solar PV system means a solar PV system as defined in the Retailer Terms and Conditions."
    )
    assert ("solar pv system", "DEFINED_IN", "retailer terms and conditions") in _triples(out)
    assert ("solar pv system", "DEFINED_IN", "test procedure") not in _triples(out)
    assert _entity(out, "retailer terms and conditions").type == "Document"


def test_glossary_table_rows() -> None:
    out = _extract(
        "| Term | Definition |\n|---|---|\n"
        "| Metering Coordinator | A person appointed by the Retailer under the NER. |\n"
        "| MDP | Meter Data Provider |\n"
        "| Participant | Market Participant |"
    )
    assert _triples(out) == [
        ("metering coordinator", "DEFINED_IN", "test procedure"),
        ("metering coordinator", "DEFINED_USING", "retailer"),
        ("metering coordinator", "DEFINED_USING", "ner"),
        ("test procedure", "REFERS_TO", "ner"),
        ("mdp", "DEFINED_AS", "meter data provider"),
        ("mdp", "DEFINED_IN", "test procedure"),
        ("participant", "DEFINED_AS", "market participant"),
        ("participant", "DEFINED_IN", "test procedure"),
    ]
    coordinator = _entity(out, "metering coordinator")
    # a role head noun makes the defined term a Role (the specific type wins)
    assert coordinator.type == "Role"
    assert coordinator.description == "A person appointed by the Retailer under the NER."
    assert _entity(out, "mdp").description == "Meter Data Provider"


def test_glossary_alias_resolves_later_mentions() -> None:
    out = _extract(
        "| Term | Definition |\n|---|---|\n| Participant | Market Participant |",
        "The Participant must notify AEMO.",
    )
    assert ("market participant", "MUST_NOTIFY", "aemo") in _triples(out)


def test_abbreviation_in_prose() -> None:
    out = _extract("The Essential Metering Panel (EMP) must approve the Distributor.")
    assert _triples(out) == [
        ("emp", "DEFINED_AS", "essential metering panel"),
        # the sentence's subject is the long form; DEFINED_AS links it to the acronym
        ("essential metering panel", "MUST", "distributor"),
    ]
    assert _entity(out, "emp").description == "Essential Metering Panel"


def test_known_abbreviation_keeps_both_names_linked() -> None:
    out = _extract("The Australian Energy Market Operator (AEMO) publishes the schedule.")
    assert _triples(out) == [("aemo", "DEFINED_AS", "australian energy market operator")]
    assert _entity(out, "aemo").type == "Organisation"


def test_clause_reference_and_part_of() -> None:
    out = _extract("The Retailer must comply with clause 3.8.1 of the NER.")
    assert _triples(out) == [
        ("test procedure", "REFERS_TO", "ner clause 3.8.1"),
        ("ner clause 3.8.1", "PART_OF", "ner"),
        ("retailer", "MUST_COMPLY_WITH", "ner clause 3.8.1"),
    ]
    assert _entity(out, "ner clause 3.8.1").name == "NER clause 3.8.1"


def test_clause_list_and_standard_references() -> None:
    out = _extract(
        "Clauses 4.9.6(a)(1) and 4.9.7(a) of the NER apply.",
        "Contractors must protect CUI in accordance with NIST SP 800-171.",
    )
    triples = _triples(out)
    assert ("test procedure", "REFERS_TO", "ner clause 4.9.6") in triples
    assert ("test procedure", "REFERS_TO", "ner clause 4.9.7") in triples
    assert ("test procedure", "REFERS_TO", "sp 800-171") in triples
    assert _entity(out, "sp 800-171").type == "Document"


def test_code_entity_stays_whole() -> None:
    out = _extract("The Retailer must submit form IN008-24 to AEMO under SO_OP_3705.")
    assert _triples(out) == [
        ("test procedure", "REFERS_TO", "in008-24"),
        ("test procedure", "REFERS_TO", "so_op_3705"),
        # kept whole, the code is the verb's object (split at "-" it derailed the parse)
        ("retailer", "MUST_PROVIDE", "in008-24"),
    ]
    assert (_entity(out, "in008-24").name, _entity(out, "in008-24").type) == ("IN008-24", "Code")
    assert _entity(out, "so_op_3705").name == "SO_OP_3705"


def test_own_document_number_is_not_a_reference() -> None:
    chunks = _chunks("Doc Ref: SO_OP_3705. See also SO_OP_3707.", document="so_op_3705.pdf")
    out = SpacyGraphExtractor().extract("so_op_3705.pdf", "Dispatch procedure", chunks)
    assert _triples(out) == [("dispatch procedure", "REFERS_TO", "so_op_3707")]


# --------------------------------------------------------------------------------------
# Names and types
# --------------------------------------------------------------------------------------
def test_the_retailer_and_retailers_are_one_entity() -> None:
    out = _extract(
        "The Retailer must notify the Distributor.",
        "Retailers must notify the Distributor.",
        "All relevant retailers must notify the Distributor.",
    )
    assert [r.source for r in out.relationships] == ["retailer", "retailer", "retailer"]
    assert [e.key for e in out.entities] == ["retailer", "distributor"]
    assert _entity(out, "retailer").name == "Retailer"


def test_roles_are_not_people() -> None:
    # the stock model calls "Retailer" a PERSON and "Distributor" a LOC
    out = _extract("The Retailer must notify the Distributor.", "Installers must notify the Customer.")
    types = {e.key: e.type for e in out.entities}
    assert types == {"retailer": "Role", "distributor": "Role", "installer": "Role", "customer": "Role"}
    assert all(e.type in ENTITY_TYPES for e in out.entities)
    assert all(r.type in RELATIONSHIP_TYPES for r in out.relationships)


def test_no_pronoun_or_number_entities() -> None:
    out = _extract(
        "It must notify them within 2 days.",
        "They must provide 3.1.5 to it, which must comply with 42.",
    )
    assert out.relationships == ()
    assert out.entities == ()


# --------------------------------------------------------------------------------------
# Provenance, de-duplication, determinism, errors
# --------------------------------------------------------------------------------------
def test_every_relationship_carries_document_and_its_chunk() -> None:
    out = _extract(
        "The Retailer must notify the Distributor.",
        "The Distributor must comply with clause 3.8.1 of the NER.",
    )
    assert [(r.source_doc, r.chunk_id) for r in out.relationships] == [
        (DOC, "test-procedure.pdf-0"),
        (DOC, "test-procedure.pdf-1"),
        (DOC, "test-procedure.pdf-1"),
        (DOC, "test-procedure.pdf-1"),
    ]
    validate_document_edges(DOC, out.entities, out.relationships)  # raises on a bad endpoint


def test_entities_are_deduplicated_across_chunks_and_keep_the_best_description() -> None:
    out = _extract(
        "AEMO must notify the Retailer.",
        "| Term | Definition |\n|---|---|\n| Retailer | A person who sells energy to customers. |",
        "The Retailer must notify AEMO.",
    )
    keys = [e.key for e in out.entities]
    assert len(keys) == len(set(keys))
    assert _entity(out, "retailer").description == "A person who sells energy to customers."
    assert _entity(out, "aemo").description == "Australian Energy Market Operator"
    # the same triple in two chunks stays twice (each cites its own chunk)
    assert [(r.type, r.chunk_id) for r in out.relationships if r.source == "aemo"] == [
        ("MUST_NOTIFY", "test-procedure.pdf-0")
    ]


def test_same_triple_once_per_chunk() -> None:
    out = _extract("The Retailer must notify the Distributor. The Retailer must notify the Distributor.")
    assert _triples(out) == [("retailer", "MUST_NOTIFY", "distributor")]


def test_empty_chunk_list_gives_an_empty_extraction() -> None:
    out = SpacyGraphExtractor().extract(DOC, TITLE, [])
    assert (out.entities, out.relationships) == ((), ())
    assert out.stats["chunks"] == 0
    # GraphExtractor.extract adds the call's time to the backend's counts
    assert list(out.stats) == [
        "chunks", "units", "sentences", "mentions", "entities", "relationships", "seconds"
    ]


def test_same_input_same_output() -> None:
    texts = (
        "The Retailer must notify the Distributor.",
        "| Term | Definition |\n|---|---|\n| MDP | Meter Data Provider |",
        "The Generator must comply with clause 3.8.1 of the NER and SP 800-171.",
    )
    first, second = _extract(*texts), _extract(*texts)
    assert first.entities == second.entities
    assert first.relationships == second.relationships


def test_chunk_of_another_document_is_refused() -> None:
    chunks = _chunks("The Retailer must notify the Distributor.", document="other.pdf")
    with pytest.raises(ValueError, match="belongs to 'other.pdf', not 'test-procedure.pdf'"):
        SpacyGraphExtractor().extract(DOC, TITLE, chunks)


def test_empty_document_id_is_refused() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        SpacyGraphExtractor().extract(" ", TITLE, [])


# --------------------------------------------------------------------------------------
# Markdown handling and the model
# --------------------------------------------------------------------------------------
def test_italic_terms_become_defined_terms() -> None:
    out = _extract("A _Market Participant_ must provide _ramp rates_ in its bids.")
    assert _triples(out) == [("market participant", "MUST_PROVIDE", "ramp rate")]
    assert _entity(out, "ramp rate").type == "DefinedTerm"


def test_definition_headings_under_a_definitions_section() -> None:
    out = _extract(
        "## Definitions\n\n#### Installer\n\nAn installer of eligible systems for the Customer.",
    )
    assert _triples(out) == [
        ("installer", "DEFINED_IN", "test procedure"),
        ("installer", "DEFINED_USING", "customer"),
    ]


def test_table_of_contents_is_skipped() -> None:
    out = _extract("|1.|Retailer obligations under the NER|3|\n|---|---|---|\n|2.|AEMO|4|\n|3.|SP 800-53|5|")
    assert out.relationships == ()


def test_model_loads_without_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the model tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    nlp = local_graph._build_pipeline()
    assert "kb_entity_ruler" in nlp.pipe_names
    assert nlp.pipe_names.index("kb_entity_ruler") < nlp.pipe_names.index("ner")


def test_altered_model_files_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_graph, "SPACY_MODEL_SHA256", "0" * 64)
    with pytest.raises(ProviderError, match="do not match the pinned SHA-256"):
        local_graph._build_pipeline()


def test_fingerprint_depends_on_content(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"weights")
    before = local_graph.model_fingerprint(tmp_path)
    (tmp_path / "a").write_bytes(b"weightz")
    assert local_graph.model_fingerprint(tmp_path) != before
    assert local_graph.model_fingerprint() == SPACY_MODEL_SHA256


# --------------------------------------------------------------------------------------
# Real document
# --------------------------------------------------------------------------------------
@pytest.mark.corpus
def test_dispatch_procedure_pages(corpus: Path) -> None:
    """Pages 6–8 (purpose, glossary, related documents) and 31–33 (ramp rates, network
    support, SCADA outages) of AEMO SO_OP_3705, as plain-text pseudo-chunks (one per page,
    pymupdf text blocks as paragraphs)."""
    name = "aemo_SO_OP_3705_Dispatch.pdf"
    document = doc_id(name)
    pdf = pymupdf.open(corpus / "pdfs" / name)
    chunks = []
    for page in (6, 7, 8, 31, 32, 33):
        blocks = [" ".join(b[4].split()) for b in pdf[page - 1].get_text("blocks") if b[6] == 0]
        index = len(chunks)
        chunks.append(
            Chunk(chunk_id(document, index), document, index, "\n\n".join(blocks), (), page, page,
                  "text")
        )
    out = SpacyGraphExtractor().extract(document, "Dispatch procedure", chunks)

    assert len(out.relationships) >= 25
    keys = {e.key for e in out.entities}
    for rel in out.relationships:
        assert rel.source in keys and rel.target in keys
        assert rel.source_doc == document
        assert rel.chunk_id in {c.id for c in chunks}
    triples = _triples(out)
    assert ("dispatch procedure", "REFERS_TO", "ner clause 4.10") in triples
    assert ("ner clause 4.10", "PART_OF", "ner") in triples
    assert ("ner", "DEFINED_AS", "national electricity rules") in triples
    assert ("dispatch procedure", "REFERS_TO", "so_op_3707") in triples
    assert ("market participant", "MUST_NOTIFY", "aemo") in triples
    # the document's own number (running header "Doc Ref: SO_OP_3705") is not a reference
    assert "so_op_3705" not in keys
    assert all(len(e.name) > 1 and not e.name.isdigit() for e in out.entities)
