"""benchmarks.contextualisation: the exact text each contextualisation variant embeds."""

from __future__ import annotations

import pytest

from benchmarks.contextualisation import parse_variant, variant_text
from kb_shared.ingest.contextual import stored_embedding_text
from kb_shared.search.citations import PointPayload

TEXT = "Each bid has ten price bands."


def payload(title: str = "", version: str = "", path: tuple[str, ...] = ()) -> PointPayload:
    return PointPayload.build(
        doc_id="so_op_3705.pdf", name="so_op_3705.pdf", title=title, version=version,
        page_start=4, page_end=4, heading_path=path, chunk_index=0,
    )


FULL = payload("Dispatch procedure", "94", ("3 Dispatch", "3.1 Bids"))


def test_each_variant_with_title_version_and_headings() -> None:
    assert variant_text("A", TEXT, FULL) == "Each bid has ten price bands."
    assert variant_text("B", TEXT, FULL) == (
        "3 Dispatch › 3.1 Bids\n\nEach bid has ten price bands."
    )
    assert variant_text("C", TEXT, FULL) == (
        "Dispatch procedure › 3 Dispatch › 3.1 Bids\n\nEach bid has ten price bands."
    )
    assert variant_text("D", TEXT, FULL) == (
        "Dispatch procedure (version 94) › 3 Dispatch › 3.1 Bids\n\n"
        "Each bid has ten price bands."
    )


def test_c_is_what_the_pipeline_embeds() -> None:
    for case in (FULL, payload("Dispatch procedure"), payload(path=("3 Dispatch",))):
        assert variant_text("C", TEXT, case) == stored_embedding_text(TEXT, case)


def test_without_version_d_is_c() -> None:
    plain = payload("Dispatch procedure", "", ("3 Dispatch",))
    assert variant_text("D", TEXT, plain) == (
        "Dispatch procedure › 3 Dispatch\n\nEach bid has ten price bands."
    )


def test_without_headings() -> None:
    titled = payload("Dispatch procedure", "94")
    assert variant_text("B", TEXT, titled) == "Each bid has ten price bands."
    assert variant_text("C", TEXT, titled) == "Dispatch procedure\n\nEach bid has ten price bands."
    assert variant_text("D", TEXT, titled) == (
        "Dispatch procedure (version 94)\n\nEach bid has ten price bands."
    )


def test_without_title() -> None:
    # PointPayload.from_payload reads an empty title as the name; built directly it stays "".
    untitled = payload("", "2", ("Glossary",))
    assert variant_text("B", TEXT, untitled) == "Glossary\n\nEach bid has ten price bands."
    assert variant_text("C", TEXT, untitled) == "Glossary\n\nEach bid has ten price bands."
    assert variant_text("D", TEXT, untitled) == (
        "version 2 › Glossary\n\nEach bid has ten price bands."
    )


def test_a_title_equal_to_the_outer_heading_is_written_once() -> None:
    same = payload("Dispatch procedure", "94", ("Dispatch procedure", "3.1 Bids"))
    assert variant_text("C", TEXT, same) == (
        "Dispatch procedure › 3.1 Bids\n\nEach bid has ten price bands."
    )
    assert variant_text("D", TEXT, same) == (
        "Dispatch procedure (version 94) › 3.1 Bids\n\nEach bid has ten price bands."
    )
    assert variant_text("B", TEXT, same) == (
        "Dispatch procedure › 3.1 Bids\n\nEach bid has ten price bands."
    )


def test_variant_specs() -> None:
    assert parse_variant("C") == ("C", "C")
    assert parse_variant("C:A") == ("C", "A")
    with pytest.raises(ValueError, match=r"unknown variant 'E' in 'C:E'"):
        parse_variant("C:E")
    with pytest.raises(ValueError, match=r"unknown variant 'Z'"):
        variant_text("Z", TEXT, FULL)
