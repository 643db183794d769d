"""The offline re-ordering signals of search_docs (``kb_shared.retrieval_features``)."""

from __future__ import annotations

import pytest

from kb_shared.citations import PointPayload
from kb_shared.retrieval_features import (
    DEFAULT_FEATURES,
    bonuses,
    definition_terms,
    defines,
    heads_with,
    routed_documents,
    section_numbers,
)


@pytest.mark.parametrize(
    ("question", "terms"),
    [
        ("What is a virtual transmission node (VTN)?", ["virtual transmission node", "VTN"]),
        ("How does SP 800-171r2 define controlled unclassified information (CUI)?",
         ["controlled unclassified information", "CUI"]),
        ("In AEMO's fast-start documentation, what is meant by a fast-start unit's 'mode'?", ["mode"]),
        ("What is an average loss factor (ALF) and how is it calculated?", ["average loss factor", "ALF"]),
        ("What does NEMDE stand for?", ["NEMDE"]),
        ("Define the term 'dispatch interval'", ["dispatch interval"]),
        ("Which generators must submit ramp rates?", []),
        ("What must a retailer provide to the customer, and when?", []),
    ],
)
def test_definition_terms(question: str, terms: list[str]) -> None:
    assert sorted(definition_terms(question)) == sorted(terms)


@pytest.mark.parametrize(
    "text",
    [
        "VTNs are aggregations of transmission nodes for which a single MLF is applied.",
        "A virtual transmission node (VTN) means a set of transmission nodes.",
        "The position of a unit on the inflexibility profile is known as its mode.",
        "|**controlled unclassified** **information** [EO 13556]|Information that law, regulation, or policy requires to be safeguarded.|",
        "**Mode**  The position of a unit on its profile.",
    ],
)
def test_defines_recognises_definitions(text: str) -> None:
    terms = ["virtual transmission node", "VTN", "mode", "controlled unclassified information"]
    assert defines(text, terms)


@pytest.mark.parametrize(
    "text",
    [
        "The SJP1 VTN for South Australia contains the connection points below.",
        "|NCO|CUI|FED|\n|AC-1|NFO|CUI|",  # the acronym as a table value, not a glossary row
        "Units change mode when dispatched.",
    ],
)
def test_defines_ignores_mere_mentions(text: str) -> None:
    assert not defines(text, ["VTN", "CUI", "mode"])


def test_section_numbers_skip_values_with_decimals() -> None:
    assert section_numbers("What does requirement 3.1.5 require, and 3.13.11?") == ["3.1.5", "3.13.11"]
    assert section_numbers("a loss factor of 0.9713 in 2020") == []


def _payload(doc_id: str, section: str = "", title: str = "", name: str | None = None) -> PointPayload:
    return PointPayload.build(
        doc_id=doc_id, name=name or doc_id, title=title, version="", page_start=1, page_end=1,
        heading_path=tuple(section.split(" › ")) if section else (),
    )


def test_heads_with_reads_the_own_heading_or_the_opening_line() -> None:
    own = _payload("nist.pdf", "THE REQUIREMENTS › 3.1 ACCESS CONTROL › 3.1.5 Employ least privilege")
    parent = _payload("nist.pdf", "THE REQUIREMENTS › 3.1 ACCESS CONTROL")
    assert heads_with(own, "text", ["3.1.5"])
    assert not heads_with(parent, "Requirement 3.1.5 is tailored", ["3.1.5"])
    assert heads_with(parent, "###### **3.1.5 Employ the principle of least privilege**", ["3.1.5"])
    assert not heads_with(own, "text", ["3.1"])  # 3.1.5 is not section 3.1


def test_routing_names_the_document_only_one_candidate_has_in_its_title() -> None:
    nist = _payload("nist_sp_800-171r2.pdf", title="Protecting CUI", name="nist_SP_800-171r2.pdf")
    vic = _payload("vic_notice.pdf", title="Solar Victoria Notice to Market", name="vic_notice.pdf")
    assert routed_documents("What does NIST SP 800-171 requirement 3.1.5 require?", [nist, vic]) == {
        "nist_sp_800-171r2.pdf"
    }
    # a word every candidate document has routes nowhere
    assert routed_documents("What does the notice say?", [vic, vic]) == set()


def test_bonuses_add_up_per_signal() -> None:
    nist = _payload("nist_sp_800-171r2.pdf", "REQS › 3.1.5 Employ least privilege", "Protecting CUI",
                    "nist_SP_800-171r2.pdf")
    vic = _payload("vic_notice.pdf", "3.1.5 All other workers", "Solar Victoria Notice", "vic_notice.pdf")
    got = bonuses("What does NIST SP 800-171 requirement 3.1.5 require?", ["a", "b"], [nist, vic])
    assert got == [DEFAULT_FEATURES.section_number + DEFAULT_FEATURES.document,
                   DEFAULT_FEATURES.section_number]
