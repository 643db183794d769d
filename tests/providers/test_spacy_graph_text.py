"""spacy_graph.text: chunk Markdown → units and the definitions seen before parsing (no model)."""

from __future__ import annotations

from kb_shared.ingest.chunking import Chunk
from kb_shared.providers.spacy_graph.text import (
    Definition,
    Unit,
    clean_inline,
    prose_definitions,
    units_from_chunk,
)


def _units(text: str, heading_path: tuple[str, ...] = ()) -> list[Unit]:
    return units_from_chunk(0, Chunk("d-0", "d", 0, text, heading_path, 1, 1, "text"))


def test_clean_inline_keeps_identifiers_and_records_italics() -> None:
    text, italics = clean_inline(
        "A_generating_<br>_system_or **SO_OP_3705** and ADG_ID<sup>1</sup> [link](http://x.y)"
    )
    assert text == "A generating system or SO_OP_3705 and ADG_ID link"
    assert [text[a:b] for a, b in italics] == ["generating system"]


def test_a_modal_lead_in_is_carried_into_each_list_item() -> None:
    units = _units(
        "The Retailer must:\n- (a) notify the Distributor; and\n- (b) provide the data to AEMO."
    )
    assert [u.text for u in units] == [
        "The Retailer must:",
        "The Retailer must notify the Distributor; and",
        "The Retailer must provide the data to AEMO.",
    ]


def test_glossary_rows_become_definitions_with_their_abbreviation() -> None:
    units = _units(
        "| Term | Definition |\n|---|---|\n"
        "| Metering Coordinator (MC) | A person appointed under the NER. |"
    )
    assert [(u.kind, u.text) for u in units] == [
        ("row", "Metering Coordinator (MC): A person appointed under the NER.")
    ]
    assert units[0].definitions == [
        Definition(["Metering Coordinator"], "A person appointed under the NER.", 27, "glossary"),
        Definition(["MC"], "Metering Coordinator", 0, "glossary", [], "Metering Coordinator"),
    ]


def test_other_table_rows_are_sentences_of_their_cells() -> None:
    units = _units("| Region | Unit |\n|---|---|\n| VIC1 | _BW01_ |")
    assert [(u.kind, u.text) for u in units] == [("row", "VIC1; BW01")]
    assert units[0].italics == [(6, 10)]


def test_contents_furniture_formulas_and_picture_text_are_dropped() -> None:
    assert _units("|1.|Retailer obligations|3|\n|---|---|---|\n|2.|AEMO|4|") == []
    units = _units(
        "Page 3 of 10\n\nTarget = SUM units (MWB) + SUM loads (MWB)\n\n© AEMO 2024\n\n"
        "[Figure: The Retailer sends data to AEMO]\n\n"
        "Mandatory: Retailers must notify AEMO.<!-- Start of picture text -->AEMO Retailer"
        "<!-- End of picture text -->"
    )
    assert [(u.kind, u.text) for u in units] == [
        ("caption", "The Retailer sends data to AEMO"),
        ("prose", "Retailers must notify AEMO."),
    ]


def test_a_heading_under_definitions_names_the_term_its_paragraph_defines() -> None:
    units = _units("## Definitions\n\n#### Installer\n\nAn installer of eligible systems.")
    assert [u.definitions for u in units] == [
        [Definition(["Installer"], "An installer of eligible systems.", 0, "heading")]
    ]


def test_means_definitions_in_prose() -> None:
    quoted = Unit(0, "'Business day' means a day that is not a holiday.", [], "prose")
    prose_definitions(quoted, in_defs=False)
    assert quoted.definitions == [
        Definition(["Business day"], "a day that is not a holiday.", 20, "means")
    ]
    # "refers to" defines only under a definitions heading, and never a lower-case "the …"
    for text, in_defs in (("Metering refers to a process.", False),
                          ("the retailer refers to a person.", True)):
        unit = Unit(0, text, [], "prose")
        prose_definitions(unit, in_defs)
        assert unit.definitions == []
