"""Passages located in the PDF's own text layer (``kb_shared.ingest.page_location``): the verification
rule of issue 25, page runs of a passage across a page break, and the chunks asset's use."""

from __future__ import annotations

import pymupdf

from kb_shared.ingest.chunking import chunk_markdown
from kb_shared.ingest.page_location import (
    PageText,
    locate,
    locate_chunks,
    page_at,
    page_words,
    passage_words,
    verified,
    windows,
)

PAGE_5 = (
    "5 Notifications\n"
    "The Retailer must notify the Distributor within two business days after a customer\n"
    "registers life support equipment at the premises.\n"
    "Dispatch Procedure SO_OP_3705 Page 5 of 40\n"
)
PAGE_6 = (
    "The Distributor must update the register and confirm the registration to the Retailer\n"
    "within one business day of receiving the notification.\n"
    "6 Records\n"
    "The Distributor keeps a register of every site with life support equipment.\n"
    "Dispatch Procedure SO_OP_3705 Page 6 of 40\n"
)
PAGE_7 = "7 Disputes\nA dispute about a registration is raised with the Ombudsman.\n"


def pages() -> PageText:
    return PageText.from_texts(["Cover page of the procedure", "", "", "", PAGE_5, PAGE_6, PAGE_7])


def test_words_are_lower_case_alphanumeric_runs_and_markers_are_not_page_text() -> None:
    assert page_words("SO_OP_3705: Page 5 (of 40)") == ["so", "op", "3705", "page", "5", "of", "40"]
    text = "## 3 Flow\n\n[Figure: diagram on page 2]\n\n[Open](http://x)\n\nTABLE D-4<sup>32</sup> ends"
    assert passage_words(text) == ["3", "flow", "table", "d", "4", "32", "ends"]


def test_three_windows_start_middle_end_or_the_whole_short_passage() -> None:
    words = [str(n) for n in range(20)]
    assert windows(words) == [("0", "1", "2", "3", "4", "5"), ("7", "8", "9", "10", "11", "12"),
                              ("14", "15", "16", "17", "18", "19")]
    assert windows(["a", "b"]) == [("a", "b")]
    assert windows([]) == []


def test_verified_needs_two_windows_on_the_pages_or_nine_tenths_of_the_words() -> None:
    text = pages()
    passage = page_words(
        "The Retailer must notify the Distributor within two business days after a customer "
        "registers life support equipment at the premises."
    )
    assert verified(passage, text, [5]) is True
    assert verified(passage, text, [6]) is False
    # a passage running over the break verifies on both pages, not on either alone
    across = page_words(
        "registers life support equipment at the premises. Dispatch Procedure SO_OP_3705 Page 5 "
        "of 40 The Distributor must update the register and confirm the registration"
    )
    assert verified(across, text, [5, 6]) is True
    assert verified(across, text, [6]) is False
    # words reordered (a table read column by column) still verify by their share
    shuffled = list(reversed(passage))
    assert verified(shuffled, text, [5]) is True
    assert verified(["nothing", "here"], text, [5]) is False
    assert verified([], text, [5]) is False


def test_locate_finds_a_passage_that_starts_on_the_page_before_its_marker() -> None:
    chunk = (
        "registers life support equipment at the premises.\n\n"
        "The Distributor must update the register and confirm the registration to the Retailer "
        "within one business day of receiving the notification."
    )
    found = locate(chunk, pages(), hint=(6, 6))  # the converter's marker said page 6 only
    assert found.located is True
    assert found.pages == (5, 6)
    second = chunk.index("The Distributor")
    assert found.runs == ((0, 5), (second, 6))
    assert found.page_at(0) == 5 and found.page_at(second + 10) == 6


def test_locate_moves_a_passage_the_markers_put_on_the_wrong_page() -> None:
    found = locate("A dispute about a registration is raised with the Ombudsman.", pages(), (6, 6))
    assert (found.located, found.pages, found.runs) == (True, (7,), ((0, 7),))


def test_a_running_footer_does_not_split_a_passage() -> None:
    # "dispatch procedure so op 3705 page" is on pages 5 and 6: one page keeps the whole run
    chunk = "The Distributor keeps a register of every site with life support equipment."
    found = locate(chunk + "\n\nDispatch Procedure SO_OP_3705 Page 6 of 40", pages(), (6, 6))
    assert (found.located, found.pages) == (True, (6,))


def test_a_passage_not_in_the_text_layer_is_flagged() -> None:
    found = locate("[Figure: image on page 1]", pages(), (1, 1))
    assert (found.located, found.runs, found.pages) == (False, (), ())
    assert locate("Completely different words that no page has anywhere.", pages(), (5, 5)).located is False


def test_page_at_reads_the_run_holding_an_offset() -> None:
    runs = ((0, 5), (40, 6), (90, 8))
    assert [page_at(runs, n) for n in (0, 39, 40, 89, 500)] == [5, 5, 6, 6, 8]
    assert page_at((), 3) is None


def test_located_chunks_cite_the_pages_of_the_pdf_not_of_the_markers() -> None:
    # the converter put the page 5 marker after the paragraph that ends page 5
    markdown = (
        "<!-- page 5 -->\n## 5 Notifications\n\n"
        "The Retailer must notify the Distributor within two business days after a customer "
        "registers life support equipment at the premises.\n\n"
        "<!-- page 7 (p. vii) -->\n## 7 Disputes\n\nA dispute about a registration is raised "
        "with the Ombudsman.\n"
    )
    chunks = chunk_markdown(markdown, "proc.pdf", budget_words=25)
    located = locate_chunks(chunks, pages())
    assert [(c.page_start, c.page_end, c.located) for c in located] == [(5, 5, True), (7, 7, True)]
    assert located[1].page_label_start == "vii"  # labels carried over from the markers


def test_page_text_from_a_real_pdf_reads_each_page() -> None:
    with pymupdf.open() as pdf:
        for text in ("first page words here", "second page other words"):
            pdf.new_page().insert_text((72, 72), text)
        data = pdf.tobytes()
    text = PageText.from_pdf(data)
    assert text.pages == [1, 2]
    assert text.words[2] == ["second", "page", "other", "words"]


def test_a_row_whose_phrase_recurs_on_the_next_page_is_cited_on_its_own_page() -> None:
    # the demo sample: row 4.3.4 ends page 3; page 4 repeats the header and, in row 4.4.2,
    # most of 4.3.4's words ("resend a rejected notification with corrections within 24 hours")
    page_3 = ("Clause Party Obligation Deadline\n4.3.3 Retailer Record the outcome 10 business "
              "days\n4.3.4\nRetailer\nResend a rejected Notification with corrections\nWithin 24 "
              "hours\nSample Retail Market Procedure Page 3 of 6\n")
    page_4 = ("Clause Party Obligation Deadline\n4.3.5\nDistributor\nNotify the Retailer of a new "
              "Life Support Customer\n2 business days\n4.4.2\nDistributor\nResend a rejected "
              "Notification with corrections within 24 hours\nSample Retail Market Procedure "
              "Page 4 of 6\n")
    text = PageText.from_texts(["", "", page_3, page_4])
    chunk = ("|Clause|Party|Obligation|Deadline|\n|---|---|---|---|\n"
             "|4.3.4|Retailer|Resend a rejected Notification with corrections|Within 24 hours|\n"
             "|4.3.5|Distributor|Notify the Retailer of a new Life Support Customer|2 business days|")
    found = locate(chunk, text, hint=(3, 4))
    assert found.located is True
    assert found.runs == ((0, 3), (chunk.index("|4.3.5"), 4))
