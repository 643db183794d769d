"""The corpus build on real PDFs from ../shared/corpus (issue 3, "Done when"): an AEMO
procedure with diagrams, the table-heavy loss-factor report, a scanned PDF and a PDF whose
font has no Unicode mapping — built by the session's ``built_corpus`` (tests/conftest.py),
which the retrieval-quality tests share. Skips without the corpus; fails under
``KB_REQUIRE_SERVICES=1``."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_assets.constants import DOCUMENTS
from kb_assets.instance import dagster_instance
from kb_assets.resources import StoresResource
from kb_shared import layout
from kb_shared.identity import doc_id
from kb_shared.stores.vectors import KIND_FIGURE, KIND_TABLE, KIND_TEXT

pytestmark = [pytest.mark.slow, pytest.mark.corpus]

DISPATCH = "aemo_SO_OP_3705_Dispatch.pdf"
LOSS_FACTORS = "aemo_Marginal_Loss_Factors_for_the_2020-21_Financial_year.pdf"
SCANNED = "scanned_ocrmypdf_multipage.pdf"
NO_MAPPING = "encoding_ocrmypdf_truetype_font_nomapping.pdf"


@pytest.fixture(scope="module")
def corpus_build(built_corpus):
    return built_corpus


@pytest.fixture
def stores(corpus_build):
    home, _ = corpus_build
    resource = StoresResource(home=str(home))
    yield resource
    resource.close()


def test_procedure_with_diagrams_builds_chunks_graph_and_figures(corpus_build, stores) -> None:
    _, outcomes = corpus_build
    built = outcomes[DISPATCH]
    assert built.status == "ready", built.reason
    row = stores.catalog().find_by_doc_id(doc_id(DISPATCH))
    assert (row.title, row.version, row.pages) == ("Dispatch procedure", "94", 67)
    assert built.chunks >= 100
    assert built.entities >= 50 and built.relationships >= 100
    # flowcharts on pp. 15-17 and 28, charts on pp. 20 and 22 (tests/providers/test_local_figures.py)
    assert built.figures >= 8
    index = stores.existing_vectors()
    figures = index.fetch(index.list_ids(doc_id(DISPATCH), KIND_FIGURE))
    pages = {p.payload["page_start"] for p in figures}
    assert {15, 28} <= pages
    for figure in figures:
        assert stores.blobs().exists(figure.payload["figure_key"])
        assert stores.blobs().exists(figure.payload["figure_inline_key"])
    # every relationship's chunk id resolves in the vector index
    edges = stores.graph().relationships_for_document(doc_id(DISPATCH))
    chunk_ids = sorted({e.chunk_id for e in edges})
    assert {p.id for p in index.fetch(chunk_ids)} == set(chunk_ids)


def test_table_heavy_report_is_split_into_table_chunks_with_their_pages(corpus_build, stores) -> None:
    _, outcomes = corpus_build
    built = outcomes[LOSS_FACTORS]
    assert built.status == "ready", built.reason
    index = stores.existing_vectors()
    tables = index.fetch(index.list_ids(doc_id(LOSS_FACTORS), KIND_TABLE))
    assert len(tables) >= 30
    for part in tables:
        lines = part.text.split("\n")
        header = next(i for i, line in enumerate(lines) if line.startswith("|"))
        assert lines[header + 1].startswith("|---") or lines[header + 1].startswith("|:")
        assert 1 <= part.payload["page_start"] <= part.payload["page_end"] <= 62
    # the contents pages are not indexed as tables (converter r2 drops them)
    assert not any("|Table 24 Interconnector capacity (MW)|59|" in p.text for p in tables)


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        (SCANNED, "no text layer on any of 6 pages; OCR is not enabled"),
        (NO_MAPPING, "100% of characters have no Unicode mapping"),
    ],
)
def test_unreadable_pdfs_fail_with_a_reason_and_leave_nothing_behind(
    corpus_build, stores, name: str, reason: str
) -> None:
    _, outcomes = corpus_build
    built = outcomes[name]
    assert built.status == "failed"
    assert reason in built.reason
    ident = doc_id(name)
    row = stores.catalog().find_by_doc_id(ident)
    assert row.status == "failed" and reason in row.failure_reason
    assert stores.blobs().exists(row.blob_key)  # the upload itself is kept for `kb delete`
    assert not stores.blobs().exists(layout.markdown_key(ident))
    assert stores.blobs().list(f"figures/{ident}/") == []
    assert stores.blobs().list(f"chunks/{ident}") == []
    index = stores.existing_vectors()
    assert index.count(ident) == 0
    assert index.list_ids(ident, KIND_TEXT) == []
    assert stores.graph().relationships_for_document(ident) == []
    assert dagster_instance(stores.settings).has_dynamic_partition(DOCUMENTS, ident)


def test_every_asset_check_passed_for_the_built_documents(corpus_build) -> None:
    import dagster as dg

    home, outcomes = corpus_build
    instance = dg.DagsterInstance.from_config(str(Path(home) / "dagster"))
    for name, built in outcomes.items():
        if built.status != "ready":
            continue
        evaluations = instance.all_logs(
            built.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
        )
        results = {
            e.dagster_event.event_specific_data.check_name: e.dagster_event.event_specific_data.passed
            for e in evaluations
        }
        assert results == {
            "chunks_located_in_pdf": True, "index_matches_chunks": True,
            "edge_chunk_ids_resolve": True,
        }, name
