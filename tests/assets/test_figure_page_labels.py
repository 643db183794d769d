"""Figure points carry the printed page label of their page (issue 16, "Reading hard PDFs
correctly", left over from part 1): a figure on a roman-numbered page is cited "p. ii (PDF
page 2)" exactly as a chunk on that page is, in the payload and in search_docs' text.

The PDF is generated (labels i, ii, 1, 2; a figure on page ii). The slow case converts it with
the real local converter, which finds the figure region and writes the labels into its page
markers; the quick one has ``FakeConverter`` return such Markdown. The figure locator and the
embedder are the fakes of ``tests/fakes.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pymupdf
import pytest

from kb_assets.assets import CORPUS_ASSETS
from kb_assets.jobs import kb_resources
from kb_assets.intake import IntakeStatus, admit
from kb_assets.resources import StoresResource
from kb_mcp.links import Links
from kb_mcp.render import render_passage
from kb_shared.ingest.chunking import page_marker
from kb_shared.search.citations import PointPayload
from kb_shared.providers.local_markdown import PymupdfMarkdownConverter
from kb_shared.search.retrieval import Passage
from kb_shared.stores.vectors import KIND_FIGURE, KIND_TEXT
from tests.assets.fake_providers import FakeProviders
from tests.fakes import FakeConverter

NAME = "Front Matter.pdf"
DOC = "front-matter.pdf"
CAPTION = "Figure 1 - Meter data flow"
#: The printed label of physical pages 1-4.
LABELS = ["i", "ii", "1", "2"]


def page_text(number: int) -> tuple[str, str]:
    """The heading and the sentence on physical page ``number``."""
    return f"Part {number} Obligations", f"The retailer keeps meter record {number * 7} for audit."


def front_matter_pdf() -> bytes:
    """Four pages labelled i, ii, 1, 2; page ii (physical page 2) holds a drawn figure with a
    caption under it."""
    with pymupdf.open() as doc:
        for number in range(1, 5):
            page = doc.new_page()
            heading, sentence = page_text(number)
            page.insert_text((72, 72), heading, fontsize=16, fontname="hebo")
            page.insert_text((72, 110), sentence, fontsize=11)
            if number == 2:
                page.draw_rect(pymupdf.Rect(72, 150, 400, 400), color=(0, 0, 1), fill=(0.8, 0.9, 1))
                page.insert_text((72, 420), CAPTION, fontsize=11)
        doc.set_page_labels(
            [
                {"startpage": 0, "prefix": "", "style": "r", "firstpagenum": 1},
                {"startpage": 2, "prefix": "", "style": "D", "firstpagenum": 1},
            ]
        )
        return doc.tobytes()


def labelled_markdown() -> str:
    """What the local converter makes of ``front_matter_pdf``, written out: a labelled page
    marker before each page's heading and sentence."""
    return "\n\n".join(
        f"{page_marker(n, label)}\n\n# {page_text(n)[0]}\n\n{page_text(n)[1]}"
        for n, label in enumerate(LABELS, start=1)
    ) + "\n"


@pytest.fixture(params=["fake", pytest.param("local", marks=pytest.mark.slow)])
def built(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoresResource]:
    """``front_matter_pdf`` admitted and built (the six assets) into a fresh KB_HOME, by the
    local converter or by ``FakeConverter`` returning ``labelled_markdown``."""
    if request.param == "local":
        converter = PymupdfMarkdownConverter()
    else:
        converter = FakeConverter(markdown=labelled_markdown())
    stores = StoresResource(home=str(tmp_path / "kb"))
    source = tmp_path / "in" / NAME
    source.parent.mkdir()
    source.write_bytes(front_matter_pdf())
    with dg.DagsterInstance.ephemeral() as instance:
        (outcome,) = admit([source], stores, instance)
        assert (outcome.status, outcome.doc_id) == (IntakeStatus.ADDED, DOC)
        result = dg.materialize(
            CORPUS_ASSETS,
            partition_key=DOC,
            resources=kb_resources(stores, FakeProviders(converter_=converter)),
            instance=instance,
        )
        assert result.success
    yield stores
    stores.close()


def test_a_figure_on_a_roman_page_is_cited_by_its_printed_label(
    built: StoresResource,
) -> None:
    index = built.existing_vectors()
    (figure,) = index.fetch(index.list_ids(DOC, KIND_FIGURE))
    payload = PointPayload.from_payload(figure.payload)
    assert (payload.page_start, payload.page_end) == (2, 2)
    assert (payload.page_label_start, payload.page_label_end) == ("ii", "ii")
    assert payload.citation.pages == "p. ii (PDF page 2)"

    chunks = [
        PointPayload.from_payload(p.payload) for p in index.fetch(index.list_ids(DOC, KIND_TEXT))
    ]
    on_page_two = [c for c in chunks if c.page_start == 2]
    assert on_page_two and {c.citation.pages for c in on_page_two} == {"p. ii (PDF page 2)"}
    on_page_three = [c for c in chunks if c.page_start == 3]
    assert {c.citation.pages for c in on_page_three} == {"p. 1 (PDF page 3)"}

    text = render_passage(Passage.of(figure, 1), Links("http://kb.test"))
    header = text.split("\n")[0]
    assert " \u2014 p. ii (PDF page 2)" in header
    link = "[Source page ii (PDF page 2)](http://kb.test/files/pdfs/front-matter.pdf#page=2)"
    assert link in text
