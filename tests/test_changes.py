"""What changed between two issues of a document (``kb_shared.compliance.changes``, issue 27): sections
matched by path and by content, clause-level differences with pages on both sides, obligations
and changed figures flagged; and the issue's synthetic test on a real PDF edited in three
places."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from kb_shared.compliance.changes import (
    ADDED,
    CHANGED,
    MOVED,
    REMOVED,
    SIDE_TEXT_CHARS,
    Side,
    Snapshot,
    SnapshotSection,
    SnapshotUnit,
    comparison_key,
    compare,
    figures,
)
from kb_shared.ingest.chunking import Chunk, chunk_markdown
from kb_shared.errors import ChangeSnapshotError


def section(path: str, *sentences: str, page: int = 1) -> SnapshotSection:
    """A section at ``path`` (" › "-separated) whose sentences are all on ``page``."""
    return SnapshotSection(tuple(path.split(" › ")), tuple(SnapshotUnit(s, page) for s in sentences))


def snapshot(version: int, *sections: SnapshotSection) -> Snapshot:
    return Snapshot("proc.pdf", version, "proc.pdf", tuple(sections))


FEES = (
    "Fees are invoiced monthly.",
    "The invoice states the amount owed for each connection point.",
)


# --------------------------------------------------------------------------- snapshots


def chunk(index: int, text: str, path: tuple[str, ...], pages: tuple[int, int], **more: object) -> Chunk:
    return Chunk(
        id=f"c{index}", document="proc.pdf", index=index, text=text, heading_path=path,
        page_start=pages[0], page_end=pages[1], kind="text", **more,  # type: ignore[arg-type]
    )


def test_a_snapshot_joins_a_sections_chunks_and_takes_each_sentences_page_from_its_runs() -> None:
    first = "## 3 Bids\n\nBids close at noon. Late bids are rejected."
    second = "Rejected bids may be resubmitted the next day.\n\n[Figure: bid timeline]\n\nPage 6 of 40"
    runs = ((0, 4), (first.index("Late"), 5))
    chunks = [
        chunk(1, second, ("3 Bids",), (5, 5)),  # unlocated: its first page, whatever its runs
        chunk(0, first, ("3 Bids",), (4, 5), page_runs=runs, located=True),
        chunk(2, "## 4 Offers\n\nOffers are firm.", ("4 Offers",), (6, 6),
              page_runs=((0, 9),), located=False),
    ]
    snap = Snapshot.from_chunks("proc.pdf", 2, "Proc.pdf", chunks)
    assert snap.sections == (
        SnapshotSection(("3 Bids",), (
            SnapshotUnit("Bids close at noon.", 4),
            SnapshotUnit("Late bids are rejected.", 5),
            SnapshotUnit("Rejected bids may be resubmitted the next day.", 5),
        )),
        # not located: the runs are no evidence, the chunk's first page is
        SnapshotSection(("4 Offers",), (SnapshotUnit("Offers are firm.", 6),)),
    )


def test_a_sentence_repeated_in_a_chunk_takes_the_page_of_its_own_place() -> None:
    text = "Notify AEMO. Then wait.\n\nNotify AEMO."
    runs = ((0, 2), (text.rindex("Notify"), 3))
    located = chunk(0, text, ("S",), (2, 3), page_runs=runs, located=True)
    snap = Snapshot.from_chunks("d", 1, "d.pdf", [located])
    assert [u.page for u in snap.sections[0].units] == [2, 2, 3]


def test_a_snapshot_survives_its_json_and_bad_json_is_refused_clearly() -> None:
    snap = snapshot(3, section("1 Scope › 1.1 Who", "Every retailer.", page=7), section("2 Fees", *FEES))
    assert Snapshot.from_json(snap.to_json()) == snap
    with pytest.raises(ChangeSnapshotError, match="not UTF-8 JSON"):
        Snapshot.from_json(b"\xff{")
    with pytest.raises(ChangeSnapshotError, match="format 7; this kb reads format 1"):
        Snapshot.from_json(b'{"format": 7}')
    bad_page = snap.to_json().replace(b"7]", b"0]")
    with pytest.raises(ChangeSnapshotError, match="1-based page"):
        Snapshot.from_json(bad_page)
    with pytest.raises(ChangeSnapshotError, match="malformed field"):
        Snapshot.from_json(b'{"format": 1, "doc_id": "d", "version": 1, "name": "d"}')


# --------------------------------------------------------------------------- matching


def test_a_renumbered_section_is_one_moved_section_not_a_removal_and_an_addition() -> None:
    before = snapshot(1, section("4 Charges › 4.1 Scope", "This part covers charges."),
                      section("4 Charges › 4.2 Fees", *FEES, page=9))
    after = snapshot(2, section("4 Charges › 4.1 Scope", "This part covers charges."),
                     section("4 Charges › 4.2 Deposits", "A deposit is held for new customers.", page=9),
                     section("4 Charges › 4.3 Fees", *FEES, page=10))
    result = compare(before, after)
    assert [(c.number, c.kind, c.section_before, c.section_after) for c in result.changes] == [
        (1, ADDED, None, "4 Charges › 4.2 Deposits"),
        (2, MOVED, "4 Charges › 4.2 Fees", "4 Charges › 4.3 Fees"),
    ]
    assert result.changes[0].before == Side("", (1,))  # where it stands in the old issue
    assert result.changes[0].after == Side("A deposit is held for new customers.", (9,))
    assert (result.changes[1].before.pages, result.changes[1].after.pages) == ((9,), (10,))
    assert result.summary == {
        "added": 1, "removed": 0, "changed": 0, "moved": 1, "unchanged_sections": 1,
        "obligations_changed": 0, "numbers_changed": 0,
    }


def test_a_section_moved_and_edited_is_one_change_with_only_its_edited_sentence() -> None:
    notices = ("Notices are sent by email.", "A notice takes effect when it is sent.",
               "Each party keeps a register of notices.")
    before = snapshot(1, section("Part A › Notices", *notices, page=3),
                      section("Part B › Records", "Records are kept.", page=8))
    edited = (notices[0], "A notice takes effect one day after it is sent.", notices[2])
    after = snapshot(2, section("Part B › Records", "Records are kept.", page=6),
                     section("Part B › Notices", *edited, page=7))
    (change,) = compare(before, after).changes
    assert (change.kind, change.section_before, change.section_after) == (
        CHANGED, "Part A › Notices", "Part B › Notices")
    assert change.before == Side("A notice takes effect when it is sent.", (3,))
    assert change.after == Side("A notice takes effect one day after it is sent.", (7,))
    assert (change.obligation, change.numbers) == (False, ())


def test_a_section_whose_place_among_its_siblings_changed_is_moved() -> None:
    x = section("Definitions › Exporter", "An exporter sends energy to the grid.")
    y = section("Definitions › Importer", "An importer takes energy from the grid.")
    result = compare(snapshot(1, x, y), snapshot(2, y, x))
    assert [(c.kind, c.section_after) for c in result.changes] == [(MOVED, "Definitions › Exporter")]
    assert result.summary["unchanged_sections"] == 1


def test_a_renamed_part_is_one_moved_section_not_a_move_of_each_section_under_it() -> None:
    before = snapshot(1, section("Part 3 Rebates", "This part sets the rebates."),
                      section("Part 3 Rebates › Eligibility", "Owners of existing homes."),
                      section("Part 3 Rebates › Amounts", "Amounts are on the website."))
    after = snapshot(2, section("Part 3 Rebates and loans", "This part sets the rebates."),
                     section("Part 3 Rebates and loans › Eligibility", "Owners of existing homes."),
                     section("Part 3 Rebates and loans › Amounts", "Amounts are on the website."))
    result = compare(before, after)
    assert [(c.kind, c.section_before, c.section_after) for c in result.changes] == [
        (MOVED, "Part 3 Rebates", "Part 3 Rebates and loans")]
    assert result.summary["unchanged_sections"] == 2


def test_a_section_taken_to_another_part_is_moved_and_its_old_siblings_are_not() -> None:
    before = snapshot(1, section("Part A › Scope", "Part A covers notices."),
                      section("Part A › Notices", "Notices are sent by email."),
                      section("Part A › Forms", "Forms are on the website."),
                      section("Part B › Records", "Records are kept."))
    after = snapshot(2, section("Part A › Scope", "Part A covers notices."),
                     section("Part A › Forms", "Forms are on the website."),
                     section("Part B › Records", "Records are kept."),
                     section("Part B › Notices", "Notices are sent by email."))
    result = compare(before, after)
    assert [(c.kind, c.section_before, c.section_after) for c in result.changes] == [
        (MOVED, "Part A › Notices", "Part B › Notices")]
    assert result.summary["unchanged_sections"] == 3


def test_text_before_the_first_heading_and_a_section_lifted_out_of_its_parts_compare() -> None:
    cover = SnapshotSection((), (SnapshotUnit("Notice to Market 2025-26.", 1),))
    deep = section("Part 1 › Division 2 › Subdivision 3 › Notes", "Notes are kept for audit.", page=8)
    lifted = section("Annex › Notes", "Notes are kept for audit.", page=9)
    new_cover = SnapshotSection((), (SnapshotUnit("Notice to Market 2026-27.", 1),))
    result = compare(snapshot(1, cover, deep), snapshot(2, new_cover, lifted))
    assert [(c.kind, c.section_before, c.section_after, c.numbers) for c in result.changes] == [
        (CHANGED, "", "", (("2025-26", "2026-27"),)),
        (MOVED, "Part 1 › Division 2 › Subdivision 3 › Notes", "Annex › Notes", ()),
    ]


def test_a_sentence_read_into_the_next_section_is_no_change_and_one_taken_far_is_moved() -> None:
    filler = [section(f"9 Misc › 9.{k}", f"Filler clause number {k} stays put.", page=20 + k)
              for k in range(1, 6)]
    before = snapshot(1, section("2 Scope › 2.1 Who", "Every retailer.", "Every installer.", page=3),
                      section("2 Scope › 2.2 What", "Solar systems.", page=3), *filler,
                      section("9 Misc › 9.9 Notes", "Notes are kept.", "Keep receipts.", page=30))
    # the converter read "Every installer." after the next heading; "Keep receipts." was taken
    # from the last section to the first, seven sections away
    after = snapshot(2, section("2 Scope › 2.1 Who", "Every retailer.", "Keep receipts.", page=3),
                     section("2 Scope › 2.2 What", "Every installer.", "Solar systems.", page=3), *filler,
                     section("9 Misc › 9.9 Notes", "Notes are kept.", page=31))
    result = compare(before, after)
    assert [(c.kind, c.section_before, c.section_after, c.before, c.after) for c in result.changes] == [
        (MOVED, "9 Misc › 9.9 Notes", "2 Scope › 2.1 Who", Side("Keep receipts.", (30,)),
         Side("Keep receipts.", (3,)))]
    assert result.summary["unchanged_sections"] == 7


def test_a_clause_moved_out_of_its_list_to_a_nearby_section_on_another_page_is_moved() -> None:
    # the 3.4(c) sentence of a real procedure taken to the end of 3.6 on the next page: within
    # the neighbourhood, but printed on another page, so no reading-order accident
    clause = "Staff should contact AEMO when the unit can follow its targets."
    before = snapshot(1, section("3 Conformance › 3.4 Fast start", "Units may be declared non-conforming.",
                                 f"- (c) {clause}", page=26),
                      section("3 Conformance › 3.5 Constraints", "AEMO may apply a constraint.", page=26),
                      section("3 Conformance › 3.6 Process", "The declaration is logged.", page=27))
    after = snapshot(2, section("3 Conformance › 3.4 Fast start", "Units may be declared non-conforming.",
                                page=26),
                     section("3 Conformance › 3.5 Constraints", "AEMO may apply a constraint.", page=26),
                     section("3 Conformance › 3.6 Process", "The declaration is logged.", clause, page=27))
    result = compare(before, after)
    assert [(c.kind, c.section_before, c.section_after, c.before, c.after, c.obligation)
            for c in result.changes] == [
        (MOVED, "3 Conformance › 3.4 Fast start", "3 Conformance › 3.6 Process",
         Side(f"- (c) {clause}", (26,)), Side(clause, (27,)), True)]
    assert result.summary["obligations_changed"] == 1


def test_a_must_sentence_moved_far_is_an_obligation_change() -> None:
    filler = [section(f"9 Misc › 9.{k}", f"Filler clause number {k} stays put.", page=20 + k)
              for k in range(1, 6)]
    rule = "The retailer must keep each receipt for seven years."
    before = snapshot(1, section("2 Scope", "Every retailer.", page=3), *filler,
                      section("9 Misc › 9.9 Records", "Notes are kept.", rule, page=30))
    after = snapshot(2, section("2 Scope", "Every retailer.", rule, page=3), *filler,
                     section("9 Misc › 9.9 Records", "Notes are kept.", page=30))
    (change,) = compare(before, after).changes
    assert (change.kind, change.obligation) == (MOVED, True)
    assert (change.before, change.after) == (Side(rule, (30,)), Side(rule, (3,)))
    assert compare(before, after).summary["obligations_changed"] == 1


def test_a_changed_figure_is_flagged_with_its_pair() -> None:
    before = snapshot(1, section("5 Settlement", "Payment is due within 4 business days.",
                                 "The fee is $1,400 plus 10 per cent.", page=12))
    after = snapshot(2, section("5 Settlement", "Payment is due within 5 business days.",
                                "The fee is $1,500 plus 10 per cent.", page=13))
    result = compare(before, after)
    assert [(c.kind, c.numbers) for c in result.changes] == [
        (CHANGED, (("4 business days", "5 business days"),)),
        (CHANGED, (("$1,400", "$1,500"),)),
    ]
    assert result.changes[0].before == Side("Payment is due within 4 business days.", (12,))
    assert result.changes[0].after == Side("Payment is due within 5 business days.", (13,))
    assert result.summary["numbers_changed"] == 2


def test_an_added_must_sentence_is_an_obligation_with_pages_on_both_sides() -> None:
    before = snapshot(1, section("6 Records", "Retailers keep records of each sale.",
                                 "Records are audited.", page=4))
    after = snapshot(2, section("6 Records", "Retailers keep records of each sale.",
                                "The retailer must keep each record for seven years.",
                                "Records are audited.", page=5))
    (change,) = compare(before, after).changes
    assert (change.kind, change.obligation, change.numbers) == (ADDED, True, ())
    assert change.before == Side("", (4,))
    assert change.after == Side("The retailer must keep each record for seven years.", (5,))


def test_a_removed_section_is_reported_where_it_stood() -> None:
    before = snapshot(1, section("1 Scope", "Scope text."),
                      section("2 Old rule", "Each retailer must lodge the old form.", page=2),
                      section("3 Fees", "Fees are $10.", page=3))
    after = snapshot(2, section("1 Scope", "Scope text."), section("3 Fees", "Fees are $12.", page=3))
    result = compare(before, after)
    assert [(c.number, c.kind, c.section_before) for c in result.changes] == [
        (1, REMOVED, "2 Old rule"), (2, CHANGED, "3 Fees")]
    removed = result.changes[0]
    assert (removed.before, removed.after, removed.obligation) == (
        Side("Each retailer must lodge the old form.", (2,)), Side("", (3,)), True)
    assert result.changes[1].numbers == (("$10", "$12"),)


def test_hyphenation_whitespace_and_units_cut_differently_are_no_change() -> None:
    before = snapshot(1, section("2 Connection", "The regu- lation applies to every par-ticipant .",
                                 "**Mandatory** : connect  within the window.", "It closes at 5 pm.",
                                 "Then it reopens."))
    after = snapshot(2, section("2 Connection", "The regulation applies to every participant.",
                                "**Mandatory**: connect within the window.",
                                "It closes at 5 pm. Then it reopens."))
    result = compare(before, after)
    assert result.changes == ()
    assert result.summary["unchanged_sections"] == 1


def test_a_replaced_run_pairs_similar_sentences_and_leaves_the_rest_added_or_removed() -> None:
    before = snapshot(1, section("7 Tests", "Units are tested yearly by the owner.",
                                 "Results go to AEMO.", page=2))
    after = snapshot(2, section("7 Tests", "A new witness must attend every test.",
                                "Units are tested twice yearly by the owner.", page=2))
    result = compare(before, after)
    assert [(c.kind, c.before.text, c.after.text) for c in result.changes] == [
        (ADDED, "", "A new witness must attend every test."),
        (CHANGED, "Units are tested yearly by the owner.", "Units are tested twice yearly by the owner."),
        (REMOVED, "Results go to AEMO.", ""),
    ]
    assert [c.obligation for c in result.changes] == [True, False, False]


def test_a_changed_table_row_is_a_change_with_its_figures_and_its_header_is_no_unit() -> None:
    def table(fee: str, page: int) -> Snapshot:
        text = f"## 8 Fees\n\n| Item | Fee |\n|---|---|\n| Connection | $150 |\n| Meter test | {fee} |"
        return Snapshot.from_chunks("d", page, "d.pdf", [chunk(0, text, ("8 Fees",), (page, page))])

    before, after = table("$80", 4), table("$95", 5)
    assert [u.text for u in before.sections[0].units] == ["Connection | $150", "Meter test | $80"]
    (change,) = compare(before, after).changes
    assert (change.before, change.after, change.numbers) == (
        Side("Meter test | $80", (4,)), Side("Meter test | $95", (5,)), (("$80", "$95"),))


def test_a_long_added_section_is_shown_by_its_first_sentences_and_all_its_pages() -> None:
    sentences = [f"Clause {k} of the new schedule sets out one more detailed rule." for k in range(60)]
    long = SnapshotSection(("Schedule 9",), tuple(SnapshotUnit(s, 40 + k // 20) for k, s in enumerate(sentences)))
    (change,) = compare(snapshot(1), snapshot(2, long)).changes
    shown = change.after.text.split("\n")
    assert shown[-1] == "…" and shown[:-1] == sentences[: len(shown) - 1]
    assert len(change.after.text) <= SIDE_TEXT_CHARS + 2
    assert change.after.pages == (40, 41, 42)
    assert change.before == Side("", ())  # the old issue has no text to place it by


def test_figures_reads_amounts_percentages_dates_years_and_quantities() -> None:
    text = ("From 1 July 2025 the 2025-26 rebate is $1,400 (up to 50 per cent) for systems of "
            "6.6 kW paid within 10 business days, see clause 4.2.")
    assert figures(text) == ["1 July 2025", "2025-26", "$1,400", "50 per cent", "6.6 kW",
                             "10 business days", "4.2"]


def test_an_item_of_a_list_whose_stem_binds_is_an_obligation_change() -> None:
    def notices(days: str, kept: str) -> SnapshotSection:
        return section("4.2 Notices", "The retailer must notify the customer:",
                       f"- (a) within {days} business days of a request; and", "- (b) in writing.",
                       "The notice lists:", f"- (a) the {kept} of the site.", page=9)

    before, after = snapshot(1, notices("2", "address")), snapshot(2, notices("5", "name"))
    assert [(c.kind, c.obligation, c.numbers) for c in compare(before, after).changes] == [
        (CHANGED, True, (("2 business days", "5 business days"),)),
        (CHANGED, False, ()),  # an item of a stem that binds nobody
    ]

def test_a_changed_time_of_day_is_flagged_whole() -> None:
    before = snapshot(1, section("3 Bidding", "Bids must be submitted by 12:30 pm.",
                                 "The gate opens at 9 a.m. each day.", page=6))
    after = snapshot(2, section("3 Bidding", "Bids must be submitted by 1:30 pm.",
                                "The gate opens at 8 a.m. each day.", page=6))
    assert [c.numbers for c in compare(before, after).changes] == [
        (("12:30 pm", "1:30 pm"),), (("9 a.m.", "8 a.m."),)]
    assert figures("by 14:00 AEST, clause 4.2") == ["14:00", "4.2"]

def test_the_comparison_key_ignores_typography_and_list_markers_only() -> None:
    plain = comparison_key("The 'Retailer' - must act.")
    assert comparison_key("- The ‘Retailer’ — must  act .") == plain
    assert comparison_key("2. Notify AEMO.") == comparison_key("3. Notify AEMO.")
    assert comparison_key("- (c) Notify AEMO.") == comparison_key("Notify AEMO.")
    assert comparison_key("• (iv) Notify AEMO.") == comparison_key("(b) Notify AEMO.")
    assert comparison_key("Notify AEMO.") != comparison_key("Notify the AER.")


def test_paragraphs_re_lettered_after_a_deleted_one_are_no_change() -> None:
    before = snapshot(1, section("2.6 Conformance", "- (a) Units must conform.",
                                 "- (b) AEMO may apply a constraint.", "- (c) Staff should call AEMO.",
                                 page=18))
    after = snapshot(2, section("2.6 Conformance", "- (a) AEMO may apply a constraint.",
                                "- (b) Staff should call AEMO.", page=18))
    (change,) = compare(before, after).changes
    assert (change.kind, change.before, change.after, change.obligation) == (
        REMOVED, Side("- (a) Units must conform.", (18,)), Side("", (18,)), True)


def test_a_re_flowed_sentence_spaced_otherwise_at_a_bracket_is_no_change() -> None:
    # a real procedure's page 9 re-set: its converter read "resource (s)" before, "resource(s)" after
    old = "The Market Participant must ensure its bid reflects the intentions for the resource (s)."
    new = "The Market Participant must ensure its bid reflects the intentions for the resource(s)."
    assert comparison_key(old) == comparison_key(new)
    result = compare(snapshot(1, section("2.1 Content", old)), snapshot(2, section("2.1 Content", new)))
    assert result.changes == ()
    assert comparison_key("the resources.") != comparison_key("the resource(s).")


# --------------------------------------------------------------------------- a real PDF

SOURCE = "vic_SolarVictoria_NoticetoMarket_2025-26_v1.pdf"
#: The number edited: page 16, "… at intervals greater than every 2 years." -> 3 years.
NUMBER_PAGE = 16
#: The sentence deleted, page 13 (two lines of its own in "Recording of serial numbers").
DELETED = "The records must be made available to Solar Victoria upon request."
DELETED_PAGE = 13
DELETED_LINES = ("The records must be made available to Solar", "Victoria upon request.")
#: The sentence added, page 17, under the last bullet of the left column.
ADDED_SENTENCE = "Retailers must keep a written record that this advice was given to the customer."
ADDED_PAGE = 17


def _shrunk(bbox: tuple[float, float, float, float]) -> pymupdf.Rect:
    """A line's box without the 2 pt it shares with the lines above and below."""
    x0, y0, x1, y1 = bbox
    return pymupdf.Rect(x0, y0 + 2, x1, y1 - 2)


def edited_copy(pdf: bytes) -> bytes:
    """``pdf`` with three clauses edited: a figure changed, a sentence deleted, a "must"
    sentence added in another section; nothing else."""
    doc = pymupdf.open(stream=pdf, filetype="pdf")
    keep = {"images": pymupdf.PDF_REDACT_IMAGE_NONE, "graphics": pymupdf.PDF_REDACT_LINE_ART_NONE}
    page = doc[NUMBER_PAGE - 1]
    words = page.get_text("words")
    (two,) = [w for k, w in enumerate(words) if w[4] == "2" and words[k - 1][4] == "every"]
    page.add_redact_annot(_shrunk(two[:4]), text="3", fontname="helv", fontsize=10)
    page.apply_redactions(**keep)
    page = doc[DELETED_PAGE - 1]
    lines = [
        line for block in page.get_text("dict")["blocks"] for line in block.get("lines", ())
        if "".join(span["text"] for span in line["spans"]).strip() in DELETED_LINES
    ]
    assert len(lines) == 2
    for line in lines:
        page.add_redact_annot(_shrunk(line["bbox"]))
    page.apply_redactions(**keep)
    doc[ADDED_PAGE - 1].insert_textbox(
        pymupdf.Rect(57, 425, 290, 470), ADDED_SENTENCE, fontname="helv", fontsize=10
    )
    return doc.tobytes()


def built_snapshot(pdf: bytes, version: int) -> Snapshot:
    """The snapshot of ``pdf`` through kb's own converter, chunker and page location."""
    from kb_shared.ingest.page_location import PageText, locate_chunks  # noqa: PLC0415
    from kb_shared.providers.local_markdown import PymupdfMarkdownConverter  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415

    converted = PymupdfMarkdownConverter().convert(pdf, SOURCE)
    chunks = chunk_markdown(converted.markdown, f"notice@{version}", budget_words=Settings().chunk_words)
    return Snapshot.from_chunks("notice", version, SOURCE, locate_chunks(chunks, PageText.from_pdf(pdf)))


@pytest.mark.slow
def test_a_real_pdf_edited_in_three_clauses_reports_exactly_those_three_changes(
    corpus: Path, tmp_path: Path
) -> None:
    original = (corpus / "pdfs" / SOURCE).read_bytes()
    copy = tmp_path / SOURCE
    copy.write_bytes(edited_copy(original))
    before, after = built_snapshot(original, 1), built_snapshot(copy.read_bytes(), 2)
    assert len(before.sections) == len(after.sections)  # no section lost
    result = compare(before, after)
    removed, changed, added = result.changes
    assert (removed.kind, removed.before, removed.after) == (
        REMOVED, Side(DELETED, (DELETED_PAGE,)), Side("", (DELETED_PAGE,)))
    assert removed.section_before == removed.section_after
    assert removed.section_after.endswith("Recording of serial numbers")  # type: ignore[union-attr]
    assert changed.kind == CHANGED
    assert changed.before.text.endswith("greater than every 2 years.")
    assert changed.after.text.endswith("greater than every 3 years.")
    assert (changed.before.pages, changed.after.pages) == ((NUMBER_PAGE,), (NUMBER_PAGE,))
    assert changed.numbers == (("2 years", "3 years"),)
    assert (added.kind, added.before, added.after) == (
        ADDED, Side("", (ADDED_PAGE,)), Side(ADDED_SENTENCE, (ADDED_PAGE,)))
    assert added.obligation is True
    assert result.summary == {
        "added": 1, "removed": 1, "changed": 1, "moved": 0,
        "unchanged_sections": len(after.sections) - 3,
        "obligations_changed": 3,  # the deleted "must" and the changed "should not" bind too
        "numbers_changed": 1,
    }
