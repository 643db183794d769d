"""Citation payloads and the numbered headers both search tools render."""

from __future__ import annotations

import pytest

from kb_shared.search.citations import Citation, citation_payload, format_pages, source_list


def payload(**overrides):
    fields = dict(
        doc_id="so_op_3705.pdf",
        name="SO_OP_3705.pdf",
        title="Dispatch procedure",
        version="94",
        page_start=12,
        page_end=13,
        heading_path=("Dispatch procedure", "3 Non-conformance", "3.1 Principles"),
        chunk_index=40,
        pdf_key="pdfs/so_op_3705.pdf",
    )
    fields.update(overrides)
    return citation_payload(**fields)


def test_header_has_title_version_pages_and_section_without_the_title_twice() -> None:
    assert Citation.from_payload(payload()).header(1) == (
        "[1] Dispatch procedure — Version 94 — pp. 12–13 — 3 Non-conformance › 3.1 Principles"
    )


def test_a_filings_sections_do_not_repeat_its_registrant() -> None:
    # 3M_2018_10K.pdf p. 37, titled from its cover page; its headings start with the registrant
    filing = payload(
        doc_id="3m_2018_10k.pdf", name="3M_2018_10K.pdf", version="", page_start=37,
        page_end=37, title="3M COMPANY Form 10-K for the fiscal year ended December 31, 2018",
        heading_path=("3M COMPANY", "Year 2018 results:"),
    )
    assert Citation.from_payload(filing).header(1) == (
        "[1] 3M COMPANY Form 10-K for the fiscal year ended December 31, 2018 — p. 37 — "
        "Year 2018 results:"
    )
    alone = payload(version="", title=filing["title"], heading_path=("3M COMPANY",))
    assert Citation.from_payload(alone).section_label == ""
    # a heading that only starts with the name is a section of its own
    other = payload(version="", title=filing["title"], heading_path=("3M COMPANY HISTORY",))
    assert Citation.from_payload(other).section_label == "3M COMPANY HISTORY"


def test_the_section_reads_as_a_reader_sees_it_without_markdown_or_footnote_markers() -> None:
    # nist_SP_800-171r2.pdf p. 27, as the converter writes its headings
    marked = payload(heading_path=(
        "THE REQUIREMENTS", "3.1 ACCESS CONTROL",
        "**3.1.19 Encrypt CUI on mobile devices and mobile computing platforms.**<sup>23</sup>",
        "**DISCUSSION**",
    ))
    citation = Citation.from_payload(marked)
    assert citation.section == (
        "THE REQUIREMENTS › 3.1 ACCESS CONTROL › 3.1.19 Encrypt CUI on mobile devices and "
        "mobile computing platforms. › DISCUSSION"
    )
    assert citation.header(1).endswith(
        "— pp. 12–13 — THE REQUIREMENTS › 3.1 ACCESS CONTROL › 3.1.19 Encrypt CUI on mobile "
        "devices and mobile computing platforms. › DISCUSSION"
    )
    # the stored payload keeps the heading path as built (ranking reads it)
    assert marked["section"].endswith("platforms.**<sup>23</sup> › **DISCUSSION**")


def test_unknown_parts_are_left_out_and_the_title_falls_back_to_the_name() -> None:
    bare = payload(title="", version="", page_start=None, page_end=None, heading_path=())
    assert Citation.from_payload(bare).header(3) == "[3] SO_OP_3705.pdf"
    labelled = payload(version="Rev C", page_end=None, heading_path=("Annex A",))
    assert Citation.from_payload(labelled).header(2) == (
        "[2] Dispatch procedure — Rev C — p. 12 — Annex A"
    )


@pytest.mark.parametrize(
    ("start", "end", "text"), [(None, None, ""), (4, None, "p. 4"), (4, 4, "p. 4"), (4, 6, "pp. 4–6")]
)
def test_format_pages(start, end, text) -> None:
    assert format_pages(start, end) == text


def test_payload_rejects_reversed_pages_and_overrides() -> None:
    with pytest.raises(ValueError, match="page_end 3 is before page_start 5"):
        payload(page_start=5, page_end=3)
    with pytest.raises(ValueError, match="would override a citation field"):
        payload(extra={"title": "x"})


def test_source_list_has_one_line_per_document_in_first_cited_order() -> None:
    first = Citation.from_payload(payload())
    again = Citation.from_payload(payload(page_start=20, page_end=20))
    other = Citation.from_payload(payload(doc_id="nist.pdf", name="nist.pdf", title="NIST SP 800-171", version=""))
    lines = source_list([first, other, again], lambda c: f"http://h/files/pdfs/{c.doc_id}")
    assert lines == [
        "- Dispatch procedure (Version 94) — http://h/files/pdfs/so_op_3705.pdf",
        "- NIST SP 800-171 — http://h/files/pdfs/nist.pdf",
    ]
