"""The obligation detector (``kb_shared.compliance.obligations``, issue 26): party, role, modality,
deadline, reference and page of crafted sentences, what is not an obligation, and recall on
the hand-labelled AEMO dispatch procedure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kb_shared.ingest.chunking import Chunk
from kb_shared.compliance.obligations import (
    MODALITIES,
    Obligation,
    find_obligations,
    heading_number,
    heading_party,
    modality_of,
    role_of,
)
from tests.conftest import corpus_dir

LABELS = Path(__file__).parent / "data" / "obligations"


def chunk(
    text: str,
    heading_path: tuple[str, ...] = ("4. Obligations", "4.2 Installer obligations"),
    *,
    index: int = 0,
    kind: str = "text",
    page_start: int | None = 7,
    page_end: int | None = None,
    page_runs: tuple[tuple[int, int], ...] = (),
    located: bool | None = None,
) -> Chunk:
    return Chunk(
        id=f"doc.pdf-{index}", document="doc.pdf", index=index, text=text,
        heading_path=heading_path, page_start=page_start,
        page_end=page_end if page_end is not None else page_start, kind=kind,
        page_runs=page_runs, located=located,
    )


def test_one_obligation_carries_party_role_modality_deadline_reference_and_page() -> None:
    text = "The Installer must submit the compliance certificate within 2 business days of installation."
    [found] = find_obligations([chunk(text)])
    assert found == Obligation(
        party="The Installer",
        role="Installer",
        modality="must",
        text=text,
        action="must submit the compliance certificate within 2 business days of installation",
        deadline="within 2 business days of installation",
        reference="4.2",
        chunk_id="doc.pdf-0",
        page=7,
        heading_path=("4. Obligations", "4.2 Installer obligations"),
    )


def test_a_sentence_binding_two_parties_is_two_obligations() -> None:
    found = find_obligations([chunk("Retailers and installers must not offer cash incentives to customers.")])
    assert [(o.party, o.role, o.modality) for o in found] == [
        ("Retailers", "Retailer", "must not"),
        ("installers", "Installer", "must not"),
    ]
    assert {o.text for o in found} == {"Retailers and installers must not offer cash incentives to customers."}


def test_a_list_stem_holding_the_modal_is_joined_to_each_item() -> None:
    text = (
        "The retailer must:\n\n- (a) give the customer a written quote before installation;\n\n"
        "- (b) keep records of each sale for 5 years."
    )
    found = find_obligations([chunk(text, ("3 Retailer obligations",))])
    assert [(o.party, o.role, o.reference, o.deadline) for o in found] == [
        ("The retailer", "Retailer", "3(a)", "before installation"),
        ("The retailer", "Retailer", "3(b)", None),
    ]
    assert [o.text for o in found] == [
        "The retailer must: give the customer a written quote before installation;",
        "The retailer must: keep records of each sale for 5 years.",
    ]
    assert found[0].action == "must give the customer a written quote before installation"


def test_a_list_of_parties_before_the_modal_binds_each_listed_party() -> None:
    text = (
        "- (b) Absent a ramp rate in the instruction:\n\n- (i) scheduled generating units;\n\n"
        "- (ii) scheduled loads; and\n\n- (iii) wholesale demand response units\n\n"
        "must linearly ramp their active power across the trading interval."
    )
    found = find_obligations([chunk(text, ("2. Dispatch", "2.8. Ramp rates"))])
    assert [(o.party, o.role, o.reference) for o in found] == [
        ("scheduled generating units", "Generator", "2.8(b)"),
        ("scheduled loads", "Market Participant", "2.8(b)"),
        ("wholesale demand response units", "Demand Response Service Provider", "2.8(b)"),
    ]
    assert {o.deadline for o in found} == {"Absent a ramp rate in the instruction"}


def test_a_table_row_with_a_modal_is_an_obligation_numbered_by_its_first_cell() -> None:
    text = (
        "| Clause | Requirement |\n|---|---|\n"
        "| 5.1 | The retailer must display the rebate amount on the quote. |\n"
        "| 5.2 | Quotes are valid for 30 days. |"
    )
    [found] = find_obligations([chunk(text, ("5 Quotes",), kind="table")])
    assert (found.party, found.role, found.modality, found.reference) == ("The retailer", "Retailer", "must", "5.1")
    assert found.text == "5.1 | The retailer must display the rebate amount on the quote."


def test_a_row_whose_requirement_has_no_subject_binds_the_party_in_its_first_cell() -> None:
    text = "| Party | Duty |\n|---|---|\n| Distributor | Must approve the connection within 10 business days. |"
    [found] = find_obligations([chunk(text, ("Duties",), kind="table")])
    assert (found.party, found.role, found.deadline) == ("Distributor", "Distributor", "within 10 business days")


@pytest.mark.parametrize(
    ("sentence", "modality"),
    [
        ("The retailer shall notify the customer.", "must"),
        ("The retailer shall not charge a fee.", "must not"),
        ("Installers are required to hold a licence.", "must"),
        ("The customer is not permitted to resell the battery.", "must not"),
        ("The applicant may not transfer the approval.", "must not"),
        ("Retailers should explain the warranty.", "should"),
        ("Retailers should not pressure customers.", "should not"),
        ("Installers are recommended to photograph the meter.", "should"),
        ("NER clause 4.9.6 requires a Generator to advise AEMO promptly.", "must"),
        ("The Market Participant will need to determine these limits.", "must"),
        ("A rebid must be submitted as soon as practicable.", "must"),
        ("The Generator will be required to notify AEMO.", "must"),
        ("AEMO, as the market operator, must publish the schedule.", "must"),
        ("Customers are prohibited from reselling the rebate.", "must not"),
    ],
)
def test_binding_modals_and_their_modality(sentence: str, modality: str) -> None:
    assert modality in MODALITIES
    assert modality_of(sentence) == modality


@pytest.mark.parametrize(
    "sentence",
    [
        "Solar Retailer means a retailer that must hold an approval under the Program.",
        "The retailer may offer a discount.",
        "Installers can choose any approved product.",
        "Must the retailer give a quote?",
        "4.2 Installer must obligations ........ 12",
        "[Figure: Installers must wear protective equipment]",
        "The guide “What installers must know” is available online.",
        "Customers are not required to pay a deposit.",
        "The participant does not need to provide a reason.",
        "Victorians don’t have to wait if their system breaks down.",  # the notice's page 8
        "The retailer doesn't need to provide a second quote.",
        "The algorithm must converge within 50 iterations.",
        "Any non-response issue should have already been observed.",
        "This is required to ensure safe operation of the plant.",
        "This document should not be relied on as legal advice.",
        "AEMO may also require Ancillary Service Providers to report on their conformance.",
        "The figures show the operating limits that a scheduled resource must operate within.",
        "For example, if the unit is on, the participant must rebid.",
        "Nonfederal organizations may not have the necessary resources.",
        # the document saying what it contains (the labels' "section intros")
        "This section lists requirements that retailers and installers, systems and products "
        "must satisfy to be eligible.",
        "This procedure sets out what a Market Participant must do when a unit trips.",
        # a duty that only may or would arise (10-K risk factors, award agreements)
        "We may be required to fund into escrow an amount announced by the European Commission.",
        "If these funds are needed, we would be required to accrue and pay U.S. income taxes.",
        "Participant understands that he or she may be prohibited from disclosing inside information.",
        "As a result of a dispute, we may have to develop non-infringing technology.",
        # "requires X to" whose X is a clause, and a subject that opens with an auxiliary
        "Operating in international markets requires significant resources and management "
        "attention and will subject us to regulatory risks.",
        "We believe we have and will maintain the ability to meet our liquidity needs to support "
        "ongoing operations.",
        # the modal in a "where" clause after a comma and a preposition
        "We launched our service globally, with the exception of territories where U.S. "
        "companies are not allowed to operate.",
    ],
)
def test_what_binds_nobody(sentence: str) -> None:
    assert modality_of(sentence) is None
    assert find_obligations([chunk(sentence)]) == []


def test_the_page_is_the_modal_s_page_from_the_page_runs_of_a_located_chunk() -> None:
    first = "The connection process is described in this section over several pages of text. "
    text = first + "The Distributor must connect the system before 1 July 2026."
    runs = ((0, 3), (len(first), 4))
    [located] = find_obligations([chunk(text, page_start=3, page_end=4, page_runs=runs, located=True)])
    assert (located.page, located.deadline) == (4, "before 1 July 2026")
    [unchecked] = find_obligations([chunk(text, page_start=3, page_end=4, page_runs=runs, located=None)])
    assert unchecked.page == 3  # runs of an unverified chunk are no evidence: its first page


def test_a_defined_term_gives_its_party_a_role() -> None:
    chunks = [
        chunk("Applicant means a retailer that applies for a rebate under the Program.", ("1 Definitions",), index=0),
        chunk("The Applicant must lodge the claim form by 30 June 2026.", ("6 Claims",), index=1),
    ]
    [found] = find_obligations(chunks)
    assert (found.party, found.role, found.deadline, found.reference) == (
        "The Applicant", "Retailer", "by 30 June 2026", "6",
    )


def test_an_obligation_naming_no_party_takes_the_section_s_named_party() -> None:
    text = (
        "The Generator must advise AEMO of the reason. "
        "A revised offer must be submitted within 5 minutes."
    )
    named, passive = find_obligations([chunk(text, ("9 Rebids",))])
    assert (named.party, named.party_inferred) == ("The Generator", False)
    assert (passive.party, passive.role, passive.party_inferred) == ("The Generator", "Generator", True)
    assert passive.deadline == "within 5 minutes"


def test_rows_of_a_version_history_are_not_obligations() -> None:
    text = "| Version | Date | Changes |\n|---|---|---|\n| 75.0 | 19 September 2012 | Clarified participants must advise AEMO of SCADA work |"
    assert find_obligations([chunk(text, ("Version release history",), kind="table")]) == []


@pytest.mark.parametrize(
    ("heading", "number"),
    [("4.2 Installer obligations", "4.2"), ("9. Ramp rate requirements", "9"), ("A.3 Conformance Status", "A.3"),
     ("Appendix A. Non-conformance", "A"), ("Introduction", None), ("Figure 4 Operating limits", None)],
)
def test_heading_numbers(heading: str, number: str | None) -> None:
    assert heading_number(heading) == number


@pytest.mark.parametrize(
    ("party", "role"),
    [("the relevant Market Participant", "Market Participant"), ("NSPs", "Network Service Provider"),
     ("a scheduled resource in an Aggregate", "Market Participant"), ("the semi-scheduled generating unit", "Generator"),
     ("Distribution Network Service Providers", "Distributor"), ("Nonfederal organizations", "Nonfederal Organization"),
     ("", None)],
)
def test_roles_from_head_nouns(party: str, role: str | None) -> None:
    assert role_of(party) == role


# ---------------------------------------------------------------------------------------------
# The real AEMO dispatch procedure against its hand labels
# ---------------------------------------------------------------------------------------------

AEMO_DOC = "aemo_so_op_3705_dispatch.pdf"


@pytest.fixture(scope="module")
def aemo_chunks(request: pytest.FixtureRequest) -> list[Chunk]:
    """The AEMO dispatch procedure's chunks as the pipeline builds them: from
    ``KB_TEST_EVAL_HOME`` when set, else the session's ``built_corpus``."""
    from kb_assets.io_manager import chunks_from_parquet  # noqa: PLC0415

    corpus_dir()
    given = os.environ.get("KB_TEST_EVAL_HOME")
    home = Path(given) if given else request.getfixturevalue("built_corpus")[0]
    path = home / "blobs" / "chunks" / f"{AEMO_DOC}.parquet"
    if not path.exists():
        pytest.skip(f"no chunks of {AEMO_DOC} in {home}")
    return chunks_from_parquet(path.read_bytes())


NTM_DOC = "vic_solarvictoria_noticetomarket_2025-26_v1.pdf"


@pytest.fixture(scope="module")
def ntm_chunks(request: pytest.FixtureRequest) -> list[Chunk]:
    """The Solar Victoria Notice to Market's chunks, found as ``aemo_chunks`` finds its."""
    from kb_assets.io_manager import chunks_from_parquet  # noqa: PLC0415

    corpus_dir()
    given = os.environ.get("KB_TEST_EVAL_HOME")
    home = Path(given) if given else request.getfixturevalue("built_corpus")[0]
    path = home / "blobs" / "chunks" / f"{NTM_DOC}.parquet"
    if not path.exists():
        pytest.skip(f"no chunks of {NTM_DOC} in {home}")
    return chunks_from_parquet(path.read_bytes())


@pytest.mark.slow
def test_recall_precision_party_and_pages_on_the_labelled_notice_to_market(ntm_chunks: list[Chunk]) -> None:
    from benchmarks.obligations import read_labels, scores  # noqa: PLC0415

    labels = read_labels(LABELS / "vic_solarvictoria_noticetomarket_2025-26_v1.jsonl")
    result = scores(labels, find_obligations(ntm_chunks))
    assert result["must_recall"] >= 0.9
    assert result["must_precision"] >= 0.9
    assert result["party_accuracy"] >= 0.9
    assert result["page_accuracy"] == 1.0


@pytest.mark.slow
def test_recall_precision_and_pages_on_the_labelled_aemo_procedure(aemo_chunks: list[Chunk]) -> None:
    from benchmarks.obligations import read_labels, scores  # noqa: PLC0415

    labels = read_labels(LABELS / "aemo_so_op_3705_dispatch.jsonl")
    result = scores(labels, find_obligations(aemo_chunks))
    assert result["must_recall"] >= 0.9
    assert result["must_precision"] >= 0.9
    assert result["should_recall"] >= 0.9
    assert result["party_accuracy"] >= 0.9
    assert result["page_accuracy"] == 1.0


def test_a_party_that_receives_a_passive_duty_is_not_the_one_bound() -> None:
    text = (
        "The retailer must honour the warranty for 10 years. "
        "The customer must not be required to pay upfront for a warranty repair."
    )
    honour, protect = find_obligations([chunk(text, ("7 Warranty",))])
    assert (honour.party, honour.role, honour.party_inferred) == ("The retailer", "Retailer", False)
    assert (protect.party, protect.role, protect.modality, protect.party_inferred) == (
        "The retailer", "Retailer", "must not", True,
    )


# ---------------------------------------------------------------------------------------------
# Who a rule about a thing binds (issue 26: party right on documents nobody tuned on)
# ---------------------------------------------------------------------------------------------

PRODUCTS = ("3 Systems", "3.2.1 Solar PV inverters – mandatory requirements", "Compliance with AS/NZS 4777.2")


def test_a_product_requirement_binds_the_product_as_named_with_no_role() -> None:
    text = (
        "Solar Victoria will publish the approved product list each quarter. "
        "Mandatory: Solar PV inverters must comply with AS/NZS 4777.2. "
        "Recommended: Solar battery systems are recommended to have API integration capabilities."
    )
    inverters, batteries = find_obligations([chunk(text, PRODUCTS)])
    assert (inverters.party, inverters.role, inverters.modality, inverters.party_inferred) == (
        "Solar PV inverters", None, "must", False,
    )
    assert (batteries.party, batteries.role, batteries.modality) == ("Solar battery systems", None, "should")


def test_a_rule_on_a_thing_binds_the_party_its_heading_names() -> None:
    heading = ("3 Installers", "3.1.3 Solar PV installers – mandatory workforce requirements", "Installed to AS/NZS 5033")
    text = "Solar Victoria will audit installations. Mandatory: Solar PV systems must be installed in compliance with AS/NZS 5033."
    [found] = find_obligations([chunk(text, heading)])
    assert (found.party, found.role, found.party_inferred) == ("Solar PV installers", "Installer", True)


@pytest.mark.parametrize(
    ("heading", "party"),
    [("4.2 Installer obligations", "Installer"), ("Obligations of retailers", "retailers"),
     ("5.1.4 Hot water installers– recommendations for workforce", "Hot water installers"),
     ("*****NEW*** Retailer mandatory requirements**", "Retailer"),
     ("3.2.1 Solar PV inverters – mandatory requirements", None), ("9.1. Minimum Ramp Rate Requirements", None),
     ("3.1 Solar PV retail business and workforce requirements", None), ("Section 3: Requirements for all solar PV rebates", None),
     ("4.2 Installer training", None)],
)
def test_the_party_a_heading_names_as_bound(heading: str, party: str | None) -> None:
    assert heading_party(heading) == party


def test_the_agent_of_a_passive_verb_is_the_party_bound() -> None:
    text = (
        "Solar Victoria will audit sites. "
        "Construction induction training must be undertaken by workers engaged in construction work. "
        "Solar battery systems must incorporate protection against tampering by unauthorised parties."
    )
    training, protection = find_obligations([chunk(text, PRODUCTS)])
    assert (training.party, training.role) == ("workers engaged in construction work", "Worker")
    assert (protection.party, protection.role) == ("Solar battery systems", None)  # "tampering by": no passive


def test_a_receiver_is_protected_and_the_section_s_obligated_party_is_bound() -> None:
    chunks = [
        chunk("Battery manufacturers must provide a 10 year warranty.", ("5 Batteries", "5.1 Product warranty"), index=0),
        chunk(
            "The customer will lodge any claim online.\n\n"
            "The customer must not be required to pay upfront for a successful warranty claim, including:\n\n"
            "- labour\n\n- parts or materials",
            ("5 Batteries", "5.1 Product warranty", "Why:"), index=1,
        ),
    ]
    provide, labour, parts = find_obligations(chunks)
    assert provide.party == "Battery manufacturers"
    assert [(o.party, o.role, o.modality) for o in (labour, parts)] == [
        ("Battery manufacturers", "Manufacturer", "must not"), ("Battery manufacturers", "Manufacturer", "must not"),
    ]
    assert labour.text == (
        "The customer must not be required to pay upfront for a successful warranty claim, including: labour"
    )
    text = "Retailers will handle warranty claims. The customer will lodge a claim online. The customer must not be charged for repairs."
    [charged] = find_obligations([chunk(text, ("7 Claims",))])
    assert (charged.party, charged.role, charged.party_inferred) == ("Retailers", "Retailer", True)


def test_a_subject_with_an_appositive_alternative_binds_both_parties() -> None:
    text = "Mandatory: Solar PV retailers, or parties acting on behalf of the retailer, must not conduct door-to-door sales."
    found = find_obligations([chunk(text, ("3.1 Sales",))])
    assert [(o.party, o.role, o.modality) for o in found] == [
        ("Solar PV retailers", "Retailer", "must not"),
        ("parties acting on behalf of the retailer", "Retailer", "must not"),
    ]


def test_an_item_with_its_own_modal_under_a_party_s_stem_binds_that_party() -> None:
    text = (
        "Solar Victoria will review quotes.\n\n"
        "The retailer must ensure that:\n\n- (a) the quote must state the rebate amount;\n\n"
        "- (b) the installer is accredited."
    )
    found = find_obligations([chunk(text, ("6 Installer obligations",))])  # the stem outranks the heading
    assert [(o.party, o.role, o.party_inferred, o.action) for o in found] == [
        ("The retailer", "Retailer", False, "must ensure that:"),  # a stem no modal-free item completed
        ("The retailer", "Retailer", True, "must state the rebate amount"),
    ]


def test_a_facility_named_nearby_is_no_actor_to_bind() -> None:
    chunks = [
        chunk("A Market Participant must provide ramp rates in its bids.", ("9 Ramp rates",), index=0),
        chunk(
            "- (b) The generating unit has reached its minimum safe operating level.\n\n- (c) A rebid must be submitted.",
            ("9 Ramp rates", "9.4 Minimum safe operating level"), index=1,
        ),
    ]
    _, rebid = find_obligations(chunks)
    assert (rebid.party, rebid.role, rebid.party_inferred) == ("Participant", "Market Participant", True)


def test_a_record_a_party_produces_and_an_act_bind_the_party_not_the_thing() -> None:
    text = (
        "AEMO must declare the unit non-conforming. The notice should include the trading intervals affected. "
        "All installations must comply with the connection agreement."
    )
    declare, notice, installations = find_obligations([chunk(text, ("3.6 Market reporting",))])
    assert (notice.party, notice.role, notice.party_inferred) == ("AEMO", "AEMO", True)
    assert (installations.party, installations.role) == ("AEMO", "AEMO")
    assert declare.party_inferred is False


@pytest.mark.parametrize(
    ("party", "role"),
    [("a licensed plumber", "Installer"), ("other workers", "Worker"),
     ("On-site solar PV workers engaged to install systems", "Worker"),
     ("Solar sharing technology suppliers", "Manufacturer"), ("parties acting on behalf of the retailer", "Retailer")],
)
def test_roles_of_installation_scheme_parties(party: str, role: str) -> None:
    assert role_of(party) == role


# -- numbered requirements stated as commands (NIST SP 800-171 §3 states all 110 so) ----------

NIST_PATH = ("THE REQUIREMENTS", "3.1 ACCESS CONTROL")


def test_a_numbered_command_in_a_heading_and_in_a_list_item_is_a_must_of_no_named_party() -> None:
    # nist_SP_800-171r2.pdf p. 22, as the converter writes it: the first requirement is a
    # heading (the chunk's path ends with it), the second a list item of its discussion
    heading = ("**3.1.1 Limit system access to authorized users, processes acting on behalf of "
               "authorized users, and devices (including other systems).**")
    text = (f"###### {heading}\n\n###### **DISCUSSION**\n\nAccess control policies control "
            "access between active entities and passive entities in systems.\n\n"
            "- **3.1.2 Limit system access to the types of transactions and functions that "
            "authorized users are permitted to execute.**<sup>21</sup>")
    found = find_obligations([chunk(text, (*NIST_PATH, heading, "DISCUSSION"), page_start=22)])
    assert [(o.reference, o.party, o.role, o.modality, o.party_inferred, o.page) for o in found] == [
        ("3.1.1", "", None, "must", True, 22),
        ("3.1.2", "", None, "must", True, 22),
    ]
    assert found[0].text == (
        "3.1.1 Limit system access to authorized users, processes acting on behalf of authorized "
        "users, and devices (including other systems)."
    )
    assert found[1].text == (  # no list mark, no footnote marker
        "3.1.2 Limit system access to the types of transactions and functions that authorized "
        "users are permitted to execute."
    )
    assert found[1].action == found[1].text.removeprefix("3.1.2 ")


def test_a_heading_command_is_read_once_however_many_chunks_sit_under_it() -> None:
    heading = "3.1.19 Encrypt CUI on mobile devices and mobile computing platforms.<sup>23</sup>"
    path = (*NIST_PATH, heading, "DISCUSSION")
    chunks = [chunk(f"Part {i} of the discussion of mobile devices.", path, index=i)
              for i in range(3)]
    found = find_obligations(chunks)
    assert [(o.reference, o.text, o.chunk_id) for o in found] == [
        ("3.1.19", "3.1.19 Encrypt CUI on mobile devices and mobile computing platforms.", "doc.pdf-0"),
    ]


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("- 3.1.4 The system separates the duties of individuals.", NIST_PATH),  # a statement
        ("- 3.1.4 Requirements apply to every system component.", NIST_PATH),  # not a command
        ("- 3.1.4 Separate the duties of individuals", NIST_PATH),  # not a sentence
        ("- 3.1.4 Separate the duties of individuals?", NIST_PATH),  # a question
        ("- 3.1.4 Separate the duties of individuals.", ("2. DISPATCH", "2.1 Bids")),  # no requirements
        # a requirement quoted as an example in another section (NIST p. 19, under 2.2)
        ("- 3.8.1 Protect system media containing CUI.",
         ("THE FUNDAMENTALS", "2.2 DEVELOPMENT OF SECURITY REQUIREMENTS")),
        ("Separate the duties of individuals.", NIST_PATH),  # no clause number
    ],
)
def test_what_is_not_a_numbered_command(text: str, path: tuple[str, ...]) -> None:
    assert find_obligations([chunk(text, path)]) == []


def test_a_command_under_a_heading_that_names_its_party_binds_that_party() -> None:
    path = ("3. Requirements", "3.1 Solar PV installers – mandatory workforce requirements")
    [found] = find_obligations([chunk("- 3.1.2 Hold a current electrical licence.", path)])
    assert (found.party, found.role, found.reference) == ("Solar PV installers", "Installer", "3.1.2")


def test_two_modals_of_a_sentence_binding_one_party_are_one_line_of_the_register() -> None:
    text = ("## 6 Payments\n\nThe Company shall pay the Executive a bonus. Such bonus shall be paid "
            "in cash, and the remaining payments shall be made within 30 days.")
    found = find_obligations([chunk(text, ("6 Payments",))])
    assert [(o.party, o.modality, o.text, o.deadline) for o in found] == [
        ("The Company", "must", "The Company shall pay the Executive a bonus.", None),
        ("The Company", "must", "Such bonus shall be paid in cash, and the remaining payments "
         "shall be made within 30 days.", "within 30 days"),
    ]
