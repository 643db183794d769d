"""The shared graph vocabulary: description trimming, the entity merge, known names."""

from __future__ import annotations

from kb_shared.graph_model import Entity
from kb_shared.providers.graph_vocabulary import (
    DEFINED_TERM,
    DOCUMENT,
    KNOWN_BY_KEY,
    ORGANISATION,
    RELATIONSHIP_TYPES,
    ROLE,
    VERB_CLASSES,
    EntityTable,
    trim_description,
)


def test_trim_description_collapses_whitespace_and_cuts_at_a_word() -> None:
    assert trim_description("The  Retailer\nmust notify.") == "The Retailer must notify."
    assert trim_description("alpha beta gamma delta", limit=12) == "alpha beta…"
    # no space in the second half: cut mid-word
    assert trim_description("abcdefghijklmnop", limit=10) == "abcdefghi…"
    assert trim_description("x" * 300) == "x" * 300


def test_known_names_resolve_by_canonical_name_and_expansion() -> None:
    assert KNOWN_BY_KEY["national electricity rules"] == ("NER", DOCUMENT)
    assert KNOWN_BY_KEY["ner"] == ("NER", DOCUMENT)
    assert KNOWN_BY_KEY["solar victoria"] == ("Solar Victoria", ORGANISATION)


def test_verb_classes_specialise_the_modals_except_may_comply_with() -> None:
    specialised = {t for t in RELATIONSHIP_TYPES if t.split("_", 1)[-1] in VERB_CLASSES}
    assert specialised == {
        "MUST_NOTIFY", "MUST_PROVIDE", "MUST_COMPLY_WITH", "SHOULD_NOTIFY", "SHOULD_PROVIDE",
        "SHOULD_COMPLY_WITH", "MAY_NOTIFY", "MAY_PROVIDE",
    }


def test_entity_table_merges_by_key_keeping_capitals_specific_type_and_best_description() -> None:
    table = EntityTable()
    first = table.add("retailer", DEFINED_TERM, "Sells.")
    table.add("Distributor", ROLE)
    second = table.add("Retailer", ROLE, "A person who sells energy.")
    table.add("RETAILER", DEFINED_TERM, "Short.", weight=0)
    assert first == second == "retailer"
    assert table.entities(["retailer", "distributor"]) == [
        Entity("Retailer", ROLE, "A person who sells energy."),
        Entity("Distributor", ROLE, ""),
    ]
    # a heavier description wins over a longer one
    table.add("Retailer", ROLE, "Defined.", weight=3)
    assert table.entities(["retailer"]) == [Entity("Retailer", ROLE, "Defined.")]


def test_entity_table_gives_known_abbreviations_their_expansion_unless_told_not_to() -> None:
    table = EntityTable()
    table.add("AEMO", ORGANISATION)
    assert table.entities(["aemo"]) == [
        Entity("AEMO", ORGANISATION, "Australian Energy Market Operator")
    ]
    plain = EntityTable({ORGANISATION: 0}, expansions=False)
    plain.add("AEMO", ORGANISATION)
    assert plain.entities(["aemo"]) == [Entity("AEMO", ORGANISATION, "")]
