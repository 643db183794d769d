"""spacy_graph names, pattern mentions and abbreviations (pure functions, no model)."""

from __future__ import annotations

import pytest

from kb_shared.providers.spacy_graph.abbreviations import (
    abbreviation_of,
    abbreviations,
    fits_initials,
)
from kb_shared.providers.spacy_graph.mentions import RegexMention, classify, regex_mentions
from kb_shared.providers.spacy_graph.names import pluralise, singular, squash, valid_name


@pytest.mark.parametrize(
    ("plural", "one"),
    [("Retailers", "Retailer"), ("Parties", "Party"), ("boxes", "box"), ("DUIDs", "DUID"),
     ("FIPS", "FIPS"), ("business", "business"), ("status", "status")],
)
def test_singular(plural: str, one: str) -> None:
    assert singular(plural) == one


def test_pluralise_squash_and_valid_names() -> None:
    assert [pluralise(w) for w in ("party", "box", "day", "search")] == [
        "parties", "boxes", "days", "searches"
    ]
    assert squash("SP 800-171") == "sp800171"
    assert [valid_name(n) for n in ("Retailer", "AB", "it", "3.1.5", "a = b", "x", "f(x")] == [
        True, True, False, False, False, False, False
    ]
    assert valid_name("N>>N-NIL_3", code=True) and not valid_name("N>>N-NIL_3")


def test_clause_references_one_per_number_with_their_document() -> None:
    found = regex_mentions("Clauses 4.9.6(a)(1) and 4.9.7(a) of the NER apply.")
    assert found == [
        RegexMention(0, 13, "NER clause 4.9.6", "Document", "NER"),
        RegexMention(24, 43, "NER clause 4.9.7", "Document", "NER"),
        RegexMention(40, 43, "NER", "Document"),
    ]


def test_standards_get_one_canonical_name() -> None:
    text = "comply with NIST Special Publication 800-171r2 and 32 CFR Part 2002 and 44 U.S.C. 3552"
    assert [m.name for m in regex_mentions(text)] == ["SP 800-171", "32 CFR 2002", "44 USC 3552"]


def test_codes_and_document_names() -> None:
    codes = regex_mentions("submit IN008-24 under SO_OP_3705 using version V1.2")
    assert [(m.name, m.type) for m in codes] == [("IN008-24", "Code"), ("SO_OP_3705", "Code")]
    names = regex_mentions(
        "See the Constraint Formulation Guidelines and the National Electricity Rules."
    )
    assert sorted({(m.name, m.type) for m in names}) == [
        ("Constraint Formulation Guidelines", "Document"), ("NER", "Document")
    ]


def test_classify_a_bare_name() -> None:
    assert classify("National Electricity Rules", "DefinedTerm") == "Document"
    assert classify("Constraint Formulation Guidelines", "DefinedTerm") == "Document"
    assert classify("metering coordinators", "DefinedTerm") == "Role"
    assert classify("ramp rate", "DefinedTerm") == "DefinedTerm"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("The Australian Energy Market Operator (AEMO) publishes",
         [("AEMO", "Australian Energy Market Operator", 4)]),
        ("the Office of Management and Budget (OMB) issues",
         [("OMB", "Office of Management and Budget", 4)]),
        ("the Small-scale Renewable Energy Scheme (SRES) pays",
         [("SRES", "Small-scale Renewable Energy Scheme", 4)]),
        ("over virtual private networks (VPNs) only", [("VPN", "virtual private network", 5)]),
        ("the MegaWatt (MW)", [("MW", "MegaWatt", 4)]),
        # Schwartz & Hearst's character match accepts these; initials and clause bounds do not
        ("the MII/s where there are violated prices (MPC)", []),
        ("market prices, caps (MPC)", []),
    ],
)
def test_abbreviations_in_prose(text: str, found: list[tuple[str, str, int]]) -> None:
    assert abbreviations(text) == found


def test_fits_initials_and_glossary_expansions() -> None:
    assert fits_initials("omb", ["Office", "of", "Management", "and", "Budget"])
    assert fits_initials("mw", ["MegaWatt"]) and not fits_initials("mw", ["Mega"])
    assert abbreviation_of(["MDP"], "Meter Data Provider") == "Meter Data Provider"
    assert abbreviation_of(["Participant"], "Market Participant") == "Market Participant"
    assert abbreviation_of(["MDP"], "A person who provides data.") == ""
