"""The layout analysis kept between conversions (issue 28, "caching what a rebuild of one asset
recomputes"): a new revision of the converter's rules converts every document again, but the
layout analysis of an unchanged file (~90% of a conversion) is read back from the blob store,
and the Markdown is the same as a fresh conversion's. ``force``, a changed file or another
layout engine runs it again; a kept analysis that cannot be read is ignored; deleting the
document deletes it.

The converter is the real local one (pymupdf4llm layout mode) on ``tiny_pdf``'s two pages; the
other providers are the fakes of ``tests/fakes.py``. Whether layout ran is counted at
``pymupdf4llm.to_markdown``, the call that runs it.
"""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import dagster as dg
import pymupdf4llm
import pytest

from kb_assets import operations
from kb_assets.assets import CORPUS_ASSETS
from kb_assets.assets.common import BuildConfig
from kb_assets.assets.markdown import StoredLayout, markdown
from kb_assets.constants import MARKDOWN
from kb_assets.io_manager import StepRecords
from kb_assets.jobs import kb_resources
from kb_assets.resources import StoresResource
from kb_shared import layout
from kb_shared.providers import local_markdown
from kb_shared.providers.local_markdown import PymupdfMarkdownConverter, layout_engine
from kb_shared.stores.catalog import DocumentRow
from tests.assets.admitted import admit_one
from tests.assets.fake_providers import FakeProviders
from tests.fakes import tiny_pdf

NAME = "Layout Procedure.pdf"
DOC = "layout-procedure.pdf"
KEY = f"markdown/{DOC}.layout.json.gz"


class NextRevision(PymupdfMarkdownConverter):
    """The local converter after a change to its rules: only the name (its revision) differs."""

    name = "pymupdf4llm-layout-r-next"


@pytest.fixture
def admitted(tmp_path: Path, stores: StoresResource, instance: dg.DagsterInstance) -> DocumentRow:
    """``tiny_pdf`` admitted as ``DOC``."""
    row = admit_one(tmp_path, stores, instance, NAME, tiny_pdf("layout"))
    assert row.doc_id == DOC
    return row


@pytest.fixture
def layout_runs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The file names pymupdf4llm's layout analysis ran on, in order."""
    runs: list[str] = []
    real = pymupdf4llm.to_markdown

    def counted(doc, **options):  # type: ignore[no-untyped-def]
        runs.append(options["filename"])
        return real(doc, **options)

    monkeypatch.setattr(local_markdown.pymupdf4llm, "to_markdown", counted)
    return runs


def convert(
    stores: StoresResource,
    instance: dg.DagsterInstance,
    converter: PymupdfMarkdownConverter,
    *,
    force: bool = False,
) -> dg.Output:
    """The markdown asset on ``DOC`` with ``converter``; its output stored as the IO manager
    stores it."""
    context = dg.build_asset_context(partition_key=DOC, instance=instance)
    output = markdown(context, BuildConfig(force=force), stores=stores,
                      providers=FakeProviders(converter_=converter))
    StepRecords(stores.blobs()).save(MARKDOWN, DOC, output.value)
    return output


def test_a_new_rules_revision_converts_again_without_running_layout(
    admitted: DocumentRow, stores: StoresResource, instance: dg.DagsterInstance,
    layout_runs: list[str],
) -> None:
    first = convert(stores, instance, PymupdfMarkdownConverter())
    assert layout_runs == [NAME]
    assert first.metadata["layout_reused"].value is False
    assert layout.layout_analysis_key(DOC) == KEY
    kept = json.loads(gzip.decompress(stores.blobs().get(KEY)))
    assert (kept["engine"], kept["sha256"], len(kept["pages"])) == (
        layout_engine(), admitted.sha256, 2
    )

    again = convert(stores, instance, NextRevision())
    assert layout_runs == [NAME]  # not run again
    assert again.metadata["markdown_conversions"].value == 1
    assert again.metadata["layout_reused"].value is True
    assert again.value.provider == "pymupdf4llm-layout-r-next"
    assert again.value.markdown == first.value.markdown
    assert (again.value.title, again.value.pages, again.value.figures) == (
        first.value.title, 2, first.value.figures
    )
    assert "<!-- page 2 -->" in again.value.markdown


def test_force_runs_layout_again_and_keeps_the_new_analysis(
    admitted: DocumentRow, stores: StoresResource, instance: dg.DagsterInstance,
    layout_runs: list[str],
) -> None:
    first = convert(stores, instance, PymupdfMarkdownConverter())
    forced = convert(stores, instance, PymupdfMarkdownConverter(), force=True)
    assert layout_runs == [NAME, NAME]
    assert forced.metadata["layout_reused"].value is False
    assert forced.value.markdown == first.value.markdown
    assert json.loads(gzip.decompress(stores.blobs().get(KEY)))["sha256"] == admitted.sha256


def test_a_kept_analysis_of_another_file_or_engine_or_unreadable_is_not_used(
    stores: StoresResource, caplog: pytest.LogCaptureFixture,
) -> None:
    blobs = stores.blobs()
    pages = [{"text": "Scope", "page_boxes": [{"class": "text", "bbox": [1.5, 2.0, 3.0, 4.25],
                                                "pos": [0, 5]}]}]
    StoredLayout(blobs, KEY, "a" * 64).save("engine 1", pages)

    same = StoredLayout(blobs, KEY, "a" * 64)
    assert same.load("engine 1", 1) == pages and same.reused is True
    other_file = StoredLayout(blobs, KEY, "b" * 64)
    assert other_file.load("engine 1", 1) is None and other_file.reused is False
    assert StoredLayout(blobs, KEY, "a" * 64).load("engine 2", 1) is None
    assert StoredLayout(blobs, KEY, "a" * 64).load("engine 1", 2) is None
    assert StoredLayout(blobs, KEY, "a" * 64, reuse=False).load("engine 1", 1) is None

    blobs.put(KEY, b"not gzip")
    with caplog.at_level(logging.WARNING, logger="kb_assets.assets.markdown"):
        assert StoredLayout(blobs, KEY, "a" * 64).load("engine 1", 1) is None
    assert f"{KEY} cannot be read" in caplog.text
    blobs.put(KEY, gzip.compress(b"[1, 2]"))
    assert StoredLayout(blobs, KEY, "a" * 64).load("engine 1", 1) is None
    assert StoredLayout(blobs, "markdown/none.layout.json.gz", "a" * 64).load("engine 1", 1) is None


def test_a_kept_analysis_with_another_page_count_is_analysed_again(
    admitted: DocumentRow, stores: StoresResource, instance: dg.DagsterInstance,
    layout_runs: list[str],
) -> None:
    first = convert(stores, instance, PymupdfMarkdownConverter())
    kept = StoredLayout(stores.blobs(), KEY, admitted.sha256)
    kept.save(layout_engine(), kept.load(layout_engine(), 2)[:1])  # one page of two
    again = convert(stores, instance, NextRevision())
    assert layout_runs == [NAME, NAME]
    assert again.metadata["layout_reused"].value is False
    assert again.value.markdown == first.value.markdown


def test_deleting_the_document_deletes_its_kept_analysis(
    admitted: DocumentRow, stores: StoresResource, instance: dg.DagsterInstance,
) -> None:
    result = dg.materialize(
        CORPUS_ASSETS, partition_key=DOC, instance=instance,
        resources=kb_resources(stores, FakeProviders(converter_=PymupdfMarkdownConverter())),
    )
    assert result.success
    assert stores.blobs().exists(KEY)
    operations.delete_document(stores, instance, NAME)
    assert stores.blobs().list("") == []
