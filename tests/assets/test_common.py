"""Small pieces every corpus asset shares."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_assets.assets.common import fingerprint, point_payload, provider_usage, timing
from kb_assets.constants import FIGURES
from kb_assets.io_manager import StepRecords
from kb_assets.outputs import MarkdownDocument, StepSummary
from kb_shared.search.citations import FigurePayload
from kb_shared.providers.base import (
    ConvertedDocument,
    FigureRegion,
    HeadingPathContextualiser,
    Provider,
)
from kb_shared.stores.blobs import BlobStore


class _Cloud(Provider):
    name = "gemini-embeddings"

    def usage(self) -> dict[str, object]:
        return {"requests": 3, "input_tokens": 1200}


class _Local(Provider):
    """A local provider: ``usage()`` is the base class's ``{}``."""

    name = "usem3"


def test_provider_usage_reports_only_providers_that_count() -> None:
    metadata = provider_usage(_Cloud(), _Local(), HeadingPathContextualiser())
    assert metadata["provider_usage"].value == {
        "gemini-embeddings": {"requests": 3, "input_tokens": 1200}
    }
    assert provider_usage(_Local(), HeadingPathContextualiser()) == {}


def test_fingerprint_is_order_and_value_sensitive() -> None:
    assert fingerprint("m", {"a": 1, "b": 2}) == fingerprint("m", {"b": 2, "a": 1})
    assert fingerprint("m", [1, 2]) != fingerprint("m", [2, 1])
    # SHA-256 of the JSON text '["m", "x"]'
    assert fingerprint("m", "x") == (
        "aec4b0b0c2c541ba582c94b33f5e6fcd87547e3ed9a2487f57b9dbe27a0b0c94"
    )


@pytest.mark.parametrize(
    ("seconds", "pages", "expected"),
    [
        (1.23456, 4, {"seconds": 1.235, "seconds_per_page": 0.3086}),
        (2.0, 0, {"seconds": 2.0, "seconds_per_page": 0.0}),  # a .md/.txt has no pages
    ],
)
def test_timing_rounds_and_divides_by_pages(seconds, pages, expected) -> None:
    assert timing(seconds, pages) == expected


def _document() -> MarkdownDocument:
    converted = ConvertedDocument(
        markdown="<!-- page 1 -->\n# Guide", pages=3, title="Guide", version="2",
        converter="fake 1.0", figures=[FigureRegion(page=2, bbox=(1.0, 2.0, 3.0, 4.0))],
        seconds=9.9,
    )
    return MarkdownDocument.from_converted(
        converted, doc_id="guide.pdf", name="Guide.pdf", provider="fake", sha256="ab",
        size_bytes=10, seconds=1.5,
    )


def test_a_markdown_document_is_the_conversion_plus_its_source() -> None:
    document = _document()
    assert (document.markdown, document.pages, document.title, document.version) == (
        "<!-- page 1 -->\n# Guide", 3, "Guide", "2"
    )
    assert document.figures == (FigureRegion(page=2, bbox=(1.0, 2.0, 3.0, 4.0)),)
    assert (document.doc_id, document.name, document.provider, document.seconds) == (
        "guide.pdf", "Guide.pdf", "fake", 1.5
    )
    assert MarkdownDocument.from_meta(document.meta(), document.markdown) == document


def test_point_payload_carries_the_document_citation_and_blob_keys() -> None:
    figure = FigurePayload(number=1, caption="Flow", stored_key="s", inline_key="i")
    payload = point_payload(_document(), page_start=2, page_end=None, figure=figure)
    assert (payload.doc_id, payload.name, payload.title, payload.version) == (
        "guide.pdf", "Guide.pdf", "Guide", "2"
    )
    assert (payload.page_start, payload.page_end, payload.section) == (2, 2, "")
    assert (payload.pdf_key, payload.markdown_key) == ("pdfs/guide.pdf", "markdown/guide.pdf.md")
    assert payload.figure == figure
    chunk = point_payload(_document(), page_start=1, page_end=1, heading_path=("Guide", "Scope"),
                          chunk_index=4)
    assert (chunk.section, chunk.chunk_index) == ("Guide › Scope", 4)


def test_a_summary_is_reused_only_with_the_same_inputs_and_the_stored_count(
    tmp_path: Path,
) -> None:
    records = StepRecords(BlobStore(tmp_path.as_uri()))
    assert records.reusable_summary(FIGURES, "d", "f1", "figures", lambda: 2) is None
    summary = StepSummary(doc_id="d", counts={"figures": 2}, fingerprint="f1")
    records.save(FIGURES, "d", summary)
    assert records.reusable_summary(FIGURES, "d", "f1", "figures", lambda: 2) == summary
    assert records.reusable_summary(FIGURES, "d", "f1", "figures", lambda: 1) is None
    assert records.reusable_summary(FIGURES, "d", "f1", "pages", lambda: 0) is None

    def never() -> int:
        raise AssertionError("the store is not asked when the inputs changed")

    assert records.reusable_summary(FIGURES, "d", "f2", "figures", never) is None
