"""Pure parts of the retrieval and rendering: query checks, identifier detection, weighted
fusion, relationship ranking, and the bounded figure images."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb_mcp import graph_search, images, render
from kb_mcp.links import Links
from kb_shared.search import citations, retrieval
from kb_shared.errors import QueryError
from kb_shared.search.retrieval import Passage
from kb_shared.stores.blobs import BlobStore
from kb_shared.graph_model import Relationship
from kb_shared.stores.graph import EntityHit, GraphPath
from kb_shared.stores.vectors import StoredPoint
from tests.mcp.corpus import tiny_png


def test_check_query_strips_and_bounds() -> None:
    assert retrieval.check_query("  IN008-24 \n", 2000) == "IN008-24"
    with pytest.raises(QueryError, match=r"^the query is 11 characters long; the limit is 10\."):
        retrieval.check_query("x" * 11, 10)
    with pytest.raises(QueryError, match="^the query is empty"):
        retrieval.check_query(" \t", 10)


@pytest.mark.parametrize(
    ("query", "terms"),
    [
        ("What does IN008-24 say?", ["in008-24"]),
        ("requirement 3.1.5 of SP 800-171", ["3.1.5", "sp", "800-171"]),
        ("Which constraint uses UIGFSurplus and RREG?", ["uigfsurplus", "rreg"]),
        ("dispatch SO_OP_3705, DUID BW01.", ["so_op_3705", "duid", "bw01"]),
        ("NER clause 3.6.5(3)", ["ner", "3.6.5"]),
        ("the left-hand side of a Constraint", []),
        ("What is a mode?", []),
        # years and financial years qualify, they do not identify
        ("When does the Notice to Market 2025-26 take effect?", []),
        ("loss factors for 2020/21 and 2019 versus IN004-22", ["in004-22"]),
    ],
)
def test_identifier_terms(query: str, terms: list[str]) -> None:
    assert retrieval.identifier_terms(query) == terms


def _rel(source: str, target: str, kind: str, chunk: str) -> Relationship:
    return Relationship(source, target, kind, "", "doc.pdf", chunk)


def test_rank_relationships_puts_hop_one_first_then_seed_similarity_and_dedupes() -> None:
    a_b = _rel("a", "b", "R1", "doc.pdf-1")
    b_c = _rel("b", "c", "R2", "doc.pdf-2")
    x_y = _rel("x", "y", "R3", "doc.pdf-3")
    seeds = [EntityHit("x", "X", "Role", 0.9), EntityHit("a", "A", "Role", 0.6),
             EntityHit("b", "B", "Role", 0.5)]
    paths = [
        GraphPath(("x", "y"), (x_y,)),
        GraphPath(("a", "b"), (a_b,)),
        GraphPath(("a", "b", "c"), (a_b, b_c)),
        GraphPath(("b", "c"), (b_c,)),  # b_c again, at hop 1 from a weaker seed: hop wins
        GraphPath(("b", "a"), (a_b,)),
    ]
    ranked = graph_search.rank_relationships(seeds, paths, top_k=10)
    assert [(rel.type, hops, seed.key) for rel, hops, seed in ranked] == [
        ("R3", 1, "x"), ("R1", 1, "a"), ("R2", 1, "b"),
    ]
    assert len(graph_search.rank_relationships(seeds, paths, top_k=2)) == 2


def _figure(number: int, inline: str | None, stored: str | None, page: int | None = 4) -> Passage:
    payload = citations.citation_payload(
        doc_id="d.pdf", name="d.pdf", title="D", version="", page_start=page, page_end=page,
        pdf_key="pdfs/d.pdf",
        extra={citations.FIGURE_KEY: stored, citations.FIGURE_INLINE_KEY: inline, "figure_number": number},
    )
    point = StoredPoint(f"d.pdf#figure-{number}", "d.pdf", "figure", f"Figure {number}", payload)
    return Passage.of(point, number, score=0.1)


def test_figure_images_are_bounded_in_number_and_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blobs = BlobStore(tmp_path.as_uri())
    small, large = tiny_png(20, 20), tiny_png(400, 400)
    for n in range(5, 9):
        blobs.put(f"f/{n}.inline.png", small)
    blobs.put("f/big.inline.png", large)
    blobs.put("f/big.png", large)
    blobs.put("f/fallback.png", small)
    blobs.put("f/not-a-png.inline.png", b"GIF89a....")
    monkeypatch.setattr(images, "MAX_INLINE_IMAGE_BYTES", len(small))
    results = [
        _figure(1, "f/big.inline.png", "f/big.png"),  # both copies over the budget: skipped
        _figure(2, "f/not-a-png.inline.png", None),  # not a PNG: skipped
        _figure(3, None, "f/fallback.png"),  # no inline copy: the stored one is used
        _figure(4, "f/missing.inline.png", None),  # missing: skipped
        *(_figure(n, f"f/{n}.inline.png", None) for n in range(5, 9)),
    ]
    loaded = images.figure_images(blobs, results)
    assert [found.number for found, _ in loaded] == [3, 5, 6, 7]  # at most 4
    assert all(data == small for _, data in loaded)
    blocks = render.image_blocks(loaded[:1])
    assert blocks[0].text == "Image for result [3]: figure 3 of D, p. 4"
    assert blocks[1].type == "image" and blocks[1].mime_type == "image/png"


def test_figure_line_leaves_out_the_page_when_unknown() -> None:
    links = Links("http://h:1")
    assert render.figure_line(_figure(1, "f/1.inline.png", "f/1.png", page=7), links) == (
        "[Open figure](http://h:1/files/f/1.png) · [Source page 7](http://h:1/files/pdfs/d.pdf#page=7)"
    )
    assert render.figure_line(_figure(1, None, "f/1.png", page=None), links) == (
        "[Open figure](http://h:1/files/f/1.png) · [Source PDF](http://h:1/files/pdfs/d.pdf)"
    )
