"""Version-aware "not in the corpus" (``kb_shared.search.editions``): edition markers and when a
question's edition is missing from the documents it would be answered from."""

from __future__ import annotations

import pytest

from kb_shared.search.editions import (
    FINANCIAL_YEAR,
    VERSION,
    Edition,
    HeldDocument,
    edition_mismatch,
    editions_in,
)

MLF = HeldDocument(
    "aemo_Marginal_Loss_Factors_for_the_2020-21_Financial_year.pdf",
    "Regions and Marginal Loss Factors: FY 2020-21", "2",
)
NIST = HeldDocument(
    "nist_SP_800-171r2.pdf", "Protecting Controlled Unclassified Information in Nonfederal Systems", "2"
)
DISPATCH = HeldDocument("aemo_SO_OP_3705_Dispatch.pdf", "Dispatch procedure", "94")


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("the 2021-22 marginal loss factor", [Edition(FINANCIAL_YEAR, "2021-22")]),
        ("FY2020/21 and 2019–20", [Edition(FINANCIAL_YEAR, "2020-21"), Edition(FINANCIAL_YEAR, "2019-20")]),
        ("for 2020-2021", [Edition(FINANCIAL_YEAR, "2020-21")]),
        ("NIST SP 800-171 Revision 3", [Edition(VERSION, "3")]),
        ("Version 3.2.0 and v4.0, Rev. 2; v3.20", [Edition(VERSION, "3.2"), Edition(VERSION, "4"), Edition(VERSION, "2"), Edition(VERSION, "3.20")]),
        ("in 2014 and 2019-2022", []),  # calendar years and a three-year span are not editions
        ("clause 3.1.1 of the procedure", []),
    ],
)
def test_editions_in_reads_financial_years_and_versions(text: str, found: list[Edition]) -> None:
    assert editions_in(text) == found


def test_a_file_name_revision_counts_only_in_file_names() -> None:
    assert editions_in("nist_SP_800-171r2.pdf", file_name=True) == [Edition(VERSION, "2")]
    assert editions_in("nist_SP_800-171r2.pdf") == []
    assert NIST.editions() == [Edition(VERSION, "2")]
    assert MLF.editions() == [Edition(FINANCIAL_YEAR, "2020-21"), Edition(VERSION, "2")]


def test_a_missing_financial_year_is_reported_with_the_one_held() -> None:
    mismatch = edition_mismatch("What is the 2021-22 marginal loss factor for Bayswater Unit 1?", [MLF])
    assert mismatch is not None
    assert mismatch.asked == Edition(FINANCIAL_YEAR, "2021-22")
    assert mismatch.message().startswith(
        "Not in the corpus: the question asks for 2021-22, but the indexed documents on this "
        "hold only Regions and Marginal Loss Factors: FY 2020-21 (2020-21)."
    )


def test_a_missing_revision_is_reported() -> None:
    mismatch = edition_mismatch("How was requirement 3.1.1 reworded in NIST SP 800-171 Revision 3?", [NIST])
    assert mismatch is not None
    assert (mismatch.asked, mismatch.held) == (
        Edition(VERSION, "3"),
        (("Protecting Controlled Unclassified Information in Nonfederal Systems", Edition(VERSION, "2")),),
    )


@pytest.mark.parametrize(
    "query",
    [
        "What is the 2020-21 marginal loss factor for Bayswater?",  # the held edition
        "What is the marginal loss factor for Bayswater?",  # no edition asked
        "What does version 94 of the dispatch procedure say about ramp rates?",
    ],
)
def test_no_mismatch_when_the_edition_is_held_or_none_is_asked(query: str) -> None:
    assert edition_mismatch(query, [MLF, DISPATCH]) is None


def test_documents_on_another_subject_are_not_compared() -> None:
    # the dispatch procedure is version 94, but the question is not about it
    assert edition_mismatch("What changed in the NER version 200?", [DISPATCH]) is None


def test_a_major_version_holds_its_minor_versions() -> None:
    fcas = HeldDocument("aemo_FCAS_Model_in_NEMDE.pdf", "FCAS Model in NEMDE", "3.2")
    assert edition_mismatch("FCAS model version 3 trapezium", [fcas]) is None
    assert edition_mismatch("FCAS model version 3.1 trapezium", [fcas]).asked == Edition(VERSION, "3.1")
