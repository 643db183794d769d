"""search_obligations through the SDK's in-memory client over registers filed in the catalog
(``Catalog.replace_obligations``, as the ``obligations`` asset files them): exact counts, the
counts by party and document, paging, filters, the rendered lines with their links, and the
refusals; and the register's store rules (a bad row writes nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from kb_mcp.server import build_server
from kb_shared.compliance.obligations import Obligation
from kb_shared.stores import factory
from tests.mcp.corpus import DISPATCH_ID, RETAIL_ID, HashingEmbedder, corpus_settings, write_corpus

pytestmark = pytest.mark.anyio

BASE = "http://127.0.0.1:8765/files"


def ob(party, role, modality, text, *, page, deadline=None, reference=None, chunk=0,
       heading=("4 Obligations",)) -> Obligation:
    action = text.split(f" {modality} ", 1)[-1]
    return Obligation(
        party=party, role=role, modality=modality, text=text, action=action,
        deadline=deadline, reference=reference, chunk_id=f"c-{chunk}", page=page,
        heading_path=heading,
    )


RETAIL_REGISTER = [
    ob("The Retailer", "Retailer", "must",
       "The Retailer must notify the Distributor within 5 business days.", page=2,
       deadline="within 5 business days", reference="4.2",
       heading=("4 Obligations", "4.2 Notices")),
    ob("The Distributor", "Distributor", "must",
       "The Distributor must keep the life support register up to date.", page=2,
       reference="4.2", heading=("4 Obligations", "4.2 Notices")),
    ob("Solar Retailers", "Retailer", "must not",
       "Solar Retailers must not disconnect a life support customer.", page=3, reference="4.3",
       heading=("4 Obligations", "4.3 Disconnection")),
    ob("The Retailer", "Retailer", "should",
       "The Retailer should tell the customer before a planned outage.", page=3,
       deadline="before a planned outage", reference="4.3",
       heading=("4 Obligations", "4.3 Disconnection")),
]
DISPATCH_REGISTER = [
    ob("A scheduled generator", "Generator", "must",
       "A scheduled generator must conform to its dispatch instruction.", page=1,
       heading=()),
    ob("", None, "must", "Bids must be submitted by 12:30 pm.", page=2,
       deadline="by 12:30 pm", heading=("3 Bidding",)),
]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("kbobligations")
    settings = corpus_settings(home)
    write_corpus(settings, HashingEmbedder(256), graph=False)
    catalog = factory.open_catalog(settings)
    try:
        assert catalog.replace_obligations(RETAIL_ID, 1, RETAIL_ID, RETAIL_REGISTER) == 4
        assert catalog.replace_obligations(DISPATCH_ID, 1, DISPATCH_ID, DISPATCH_REGISTER) == 2
        # a version that is not served: its register must never be counted
        catalog.replace_obligations(RETAIL_ID, 2, f"{RETAIL_ID}@v2", RETAIL_REGISTER[:1])
    finally:
        catalog.close()
    return home


def test_counts_by_party_take_a_name_in_other_case_as_the_same_party(tmp_path: Path) -> None:
    # "You must" at a sentence's start and "you must" inside one were two parties
    settings = corpus_settings(tmp_path)
    write_corpus(settings, HashingEmbedder(256), graph=False)
    catalog = factory.open_catalog(settings)
    try:
        catalog.replace_obligations(RETAIL_ID, 1, RETAIL_ID, [
            ob("You", None, "must", "You must keep the records for 7 years.", page=1),
            ob("you", None, "must", "Each year you must report the count.", page=2),
            ob("The Retailer", "Retailer", "must", "The Retailer must notify us.", page=2),
        ])
        found = catalog.search_obligations([RETAIL_ID])
    finally:
        catalog.close()
    assert (found.count, found.by_party) == (3, (("You", 2), ("Retailer", 1)))


@pytest.fixture(scope="module")
def server(home: Path):
    """The server on ``home``, one per module: each client session opens the stores
    anew (see ``server`` in tests/mcp/conftest.py)."""
    return build_server(corpus_settings(home), embedder=HashingEmbedder(256), warm=False)


async def call(server, **arguments):
    async with Client(server) as client:
        return await client.call_tool("search_obligations", arguments)


async def test_every_obligation_of_a_party_with_exact_counts_and_cited_lines(server) -> None:
    result = await call(server, party="retailer")
    assert result.is_error is False
    data = result.structured_content
    assert data["count"] == 3
    assert data["by_party"] == {"Retailer": 3}
    assert data["by_document"] == {RETAIL_ID: 3}
    assert data["next_offset"] is None
    found = data["obligations"]
    assert [(o["number"], o["modality"], o["page"], o["reference"]) for o in found] == [
        (1, "must", 2, "4.2"), (2, "must not", 3, "4.3"), (3, "should", 3, "4.3"),
    ]
    assert data["obligations"][0]["url"] == f"{BASE}/pdfs/{RETAIL_ID}#page=2"
    assert data["obligations"][0]["deadline"] == "within 5 business days"
    text = result.content[0].text
    assert text.splitlines()[0] == (
        "3 obligations matching party='retailer' (exact count). By party: Retailer 3."
    )
    assert "## Retail Market Rules (retail-rules.pdf)\n### 4 Obligations › 4.2 Notices\n" in text
    assert (
        "[O1] Retailer must — “The Retailer must notify the Distributor within 5 business "
        "days.” — p. 2, cl. 4.2; deadline: within 5 business days "
        f"({BASE}/pdfs/{RETAIL_ID}#page=2)"
    ) in text
    # the document's own words are kept beside the role when they differ
    assert "[O2] Retailer (“Solar Retailers”) must not — “Solar Retailers must not" in text


async def test_the_whole_register_is_counted_and_paged_exactly(server) -> None:
    first = (await call(server, limit=4)).structured_content
    assert first["count"] == 6  # the unserved version's row is not counted
    assert first["by_document"] == {RETAIL_ID: 4, DISPATCH_ID: 2}
    assert first["by_party"] == {
        "Retailer": 3, "(party not named)": 1, "Distributor": 1, "Generator": 1,
    }
    assert first["next_offset"] == 4
    second = await call(server, limit=4, offset=4)
    data = second.structured_content
    assert (data["count"], data["offset"], data["next_offset"]) == (6, 4, None)
    assert [o["number"] for o in data["obligations"]] == [5, 6]
    # documents in doc_id order, reading order inside: dispatch-procedure.pdf comes first
    assert [o["doc_id"] for o in first["obligations"]] == [DISPATCH_ID] * 2 + [RETAIL_ID] * 2
    assert "[O5] Retailer (“Solar Retailers”) must not" in second.content[0].text
    two = (await call(server, limit=2)).content[0].text
    assert "[O2] (party not named) must — “Bids must be submitted by 12:30 pm.”" in two
    assert "Showing O1–O2 of 6; call again with offset=2 for the next." in two


async def test_filters_modality_deadline_words_and_document(server) -> None:
    assert (await call(server, modality="must not")).structured_content["count"] == 1
    dated = (await call(server, has_deadline=True)).structured_content
    assert dated["count"] == 3
    assert [o["deadline"] for o in dated["obligations"]] == [
        "by 12:30 pm", "within 5 business days", "before a planned outage",
    ]
    assert (await call(server, has_deadline=False)).structured_content["count"] == 3
    assert (await call(server, query="life support")).structured_content["count"] == 2
    # a clause number is one word: "2.3" is not a "2" and a "3" anywhere (the bid deadline's
    # "12:30 pm" has both and was found)
    assert (await call(server, query="2.3")).structured_content["count"] == 0
    assert (await call(server, query="12")).structured_content["count"] == 1
    only = (await call(server, document="Dispatch Procedure")).structured_content
    assert (only["count"], only["by_document"]) == (2, {DISPATCH_ID: 2})
    assert only["filters"] == {}


@pytest.mark.parametrize(
    ("party", "by_party"),
    [
        # a plural, an article, another spelling of a role: the register's own roles
        ("Retailers", {"Retailer": 3}),
        ("the retailer", {"Retailer": 3}),
        ("distribution network service providers", {"Distributor": 1}),
        ("DNSPs", {"Distributor": 1}),
        ("Scheduled Generators", {"Generator": 1}),
        ("solar retailers", {"Retailer": 1}),  # a phrase of the document's own words
    ],
)
async def test_a_party_asked_for_in_other_words_finds_the_same_rows(server, party, by_party) -> None:
    data = (await call(server, party=party)).structured_content
    assert (data["count"], data["by_party"]) == (sum(by_party.values()), by_party)

async def test_nothing_matching_is_said_plainly(server) -> None:
    result = await call(server, party="auditor")
    assert result.structured_content["count"] == 0
    assert result.content[0].text.startswith(
        "No obligation matching party='auditor' in the served documents."
    )


async def test_unknown_and_unready_documents_are_refused_by_name(server) -> None:
    unknown = await call(server, document="Retail Rulez.pdf")
    assert unknown.is_error is True
    assert "unknown document 'Retail Rulez.pdf'" in unknown.content[0].text
    assert "did you mean 'retail-rules.pdf'?" in unknown.content[0].text
    broken = await call(server, document="Broken.pdf")
    assert broken.is_error is True
    assert "'Broken.pdf' is failed: markdown: the PDF is encrypted" in broken.content[0].text


def test_a_bad_obligation_writes_nothing_and_keeps_the_register(tmp_path: Path) -> None:
    settings = corpus_settings(tmp_path)
    catalog = factory.open_catalog(settings)
    try:
        catalog.ensure_schema()
        assert catalog.replace_obligations("a.pdf", 1, "a.pdf", RETAIL_REGISTER[:2]) == 2
        bad = [RETAIL_REGISTER[0], ob("X", None, "may", "X may go.", page=1)]
        with pytest.raises(ValueError, match="obligation 2: unknown modality 'may'"):
            catalog.replace_obligations("a.pdf", 1, "a.pdf", bad)
        assert catalog.obligation_count("a.pdf") == 2
        assert catalog.delete_obligations(version_key="a.pdf") == 2
        assert catalog.obligation_count("a.pdf") == 0
    finally:
        catalog.close()
