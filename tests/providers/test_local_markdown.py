"""Local PDF → Markdown converter (pymupdf4llm 2.0 layout mode).

Refusals are tested on PDFs built here with pymupdf (they fail before layout runs, so they
are fast and need no corpus). Real-document behaviour (tables layout misses, furniture and
the numbered headings it must keep, figure markers, Arabic and German text, the corpus's
scanned and unmappable files) is tested on ``../shared/corpus``; those tests skip without
it. Whole conversions of corpus PDFs take tens of seconds (layout mode is ~1 s/page), so
each PDF is converted once per module. The clean-up rules themselves are unit-tested in
``test_markdown_cleanup.py``, titles and versions in ``tests/test_pdf.py``.
"""

from __future__ import annotations

import re

import pymupdf
import pymupdf4llm
import pytest

from kb_shared.ingest.chunking import chunk_markdown
from kb_shared.errors import ConversionError
from kb_shared.providers.base import ConvertedDocument
from kb_shared.providers.local_markdown import CONVERTER_NAME, PymupdfMarkdownConverter
from kb_assets.sample_pdf import sample_pdf_bytes
from tests.conftest import corpus_dir
from tests.providers.pdf_builders import image_page_pdf, text_pdf, type0_pdf_without_tounicode

CVP = "aemo_Schedule_of_Constraint_Violation_Penalty_factors.pdf"
FCAS = "aemo_FCAS_Model_in_NEMDE.pdf"


# --------------------------------------------------------------------------------------
# PDFs built for the tests
# --------------------------------------------------------------------------------------
def zero_page_pdf() -> bytes:
    """A syntactically valid PDF whose page tree is empty (pymupdf refuses to save one)."""
    objects = ["<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [] /Count 0 >>"]
    out = b"%PDF-1.4\n"
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\n".encode()
    out += f"startxref\n{xref}\n%%EOF\n".encode()
    return out


def refusal(pdf: bytes, filename: str) -> str:
    with pytest.raises(ConversionError) as caught:
        PymupdfMarkdownConverter().convert(pdf, filename)
    return str(caught.value)


def page_segment(markdown: str, page: int) -> str:
    """The Markdown between ``<!-- page N -->`` and the next page marker."""
    pattern = rf"^<!-- page {page} -->$(.*?)(?=^<!-- page \d+ -->$|\Z)"
    match = re.search(pattern, markdown, re.M | re.S)
    assert match, f"no marker for page {page}"
    return match.group(1)


def eval_words(text: str) -> list[str]:
    """The corpus README's hit normalisation: lower-cased ``[0-9a-z]`` words."""
    return re.findall(r"[0-9a-z]+", text.lower())


# --------------------------------------------------------------------------------------
# Refusals, each with its message (no corpus needed)
# --------------------------------------------------------------------------------------
def test_empty_file_is_refused() -> None:
    assert refusal(b"", "empty.pdf") == "empty.pdf is empty (0 bytes); upload the PDF again"


def test_text_file_is_not_a_pdf() -> None:
    message = refusal(b"Meeting notes: dispatch review\n", "notes.pdf")
    assert message == (
        "notes.pdf is not a PDF (it starts with b'Meeting notes: d', plain text); "
        "export or save it as PDF and add that file"
    )


def test_office_file_is_named_as_such() -> None:
    message = refusal(b"PK\x03\x04\x14\x00\x06\x00rest-of-a-docx", "procedure.pdf")
    assert "procedure.pdf is not a PDF (it starts with" in message
    assert "a ZIP archive or an Office document" in message


def test_damaged_pdf_is_refused() -> None:
    message = refusal(b"%PDF-1.7\n this is not an object table", "broken.pdf")
    assert message.startswith("broken.pdf is damaged and cannot be opened as a PDF (")
    assert message.endswith("download or export it again")


def test_truncated_pdf_is_refused() -> None:
    whole = sample_pdf_bytes()
    cut = whole[: len(whole) // 2]
    message = refusal(cut, "half.pdf")
    assert message == (
        f"half.pdf is truncated (it has no %%EOF end marker and its cross-reference table "
        f"had to be rebuilt; {len(cut):,} bytes); download it again in full"
    )


def test_password_protected_pdf_is_refused() -> None:
    doc = pymupdf.open(stream=text_pdf("Confidential"))
    locked = doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="open-me", owner_pw="own")
    assert refusal(locked, "locked.pdf") == (
        "locked.pdf is encrypted and needs a password to open; save a copy without the "
        "password (e.g. `qpdf --decrypt --password=… in.pdf out.pdf`) and add that"
    )


def test_pdf_without_pages_is_refused() -> None:
    assert refusal(zero_page_pdf(), "hollow.pdf") == "hollow.pdf has no pages; check the export"


def test_image_only_pages_are_refused_as_scanned() -> None:
    assert refusal(image_page_pdf(2), "scan.pdf") == (
        "scan.pdf: no text layer on any of 2 pages; OCR is not enabled. It looks scanned: "
        "run OCR on it (e.g. `ocrmypdf in.pdf out.pdf`) and add the result"
    )


def test_single_scanned_page_message_is_singular() -> None:
    assert "no text layer on any of 1 page; OCR is not enabled" in refusal(
        image_page_pdf(1), "one.pdf"
    )


def test_stray_invisible_ocr_text_is_not_a_text_layer() -> None:
    stray = "400 300 sw oppose"  # what OCR leaves on a scanned chart
    assert "no text layer on any of 3 pages" in refusal(image_page_pdf(3, stray), "chart.pdf")


def test_font_without_unicode_mapping_is_refused() -> None:
    # The sample PDF's fonts are Type0/Identity-H; without /ToUnicode their codes are
    # glyph ids and MuPDF extracts "4BNQMF" for "Sample".
    doc = pymupdf.open(stream=sample_pdf_bytes())
    for xref, *_ in doc[0].get_fonts(full=True):
        doc.xref_set_key(xref, "ToUnicode", "null")
    assert refusal(doc.tobytes(), "glyphs.pdf") == (
        "glyphs.pdf: the text layer cannot be read: 100% of characters have no Unicode "
        "mapping (font Nimbus Sans Regular, Nimbus Sans Bold); re-export the PDF with "
        "embedded Unicode fonts or OCR it"
    )


def test_glyph_id_codes_of_a_long_named_type0_font_are_refused() -> None:
    # MuPDF cuts the font's name to 31 characters ("Droid Sans Fallback Regu" once the
    # subset prefix is dropped); the font is still recognised as unmappable.
    pdf = type0_pdf_without_tounicode("Sensor datasheet", codes="glyph")
    assert pymupdf.open(stream=pdf)[0].get_text() == "4FOTPS\x01EBUBTIFFU\n"  # shifted ids
    assert refusal(pdf, "ids.pdf") == (
        "ids.pdf: the text layer cannot be read: 100% of characters have no Unicode "
        "mapping (font Droid Sans Fallback Regu); re-export the PDF with embedded Unicode "
        "fonts or OCR it"
    )


def test_refusals_print_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    for pdf in (b"", b"plain", zero_page_pdf(), image_page_pdf(1)):
        with pytest.raises(ConversionError):
            PymupdfMarkdownConverter().convert(pdf, "x.pdf")
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")


# --------------------------------------------------------------------------------------
# Output hygiene and the document shape (synthetic, one page)
# --------------------------------------------------------------------------------------
def test_conversion_prints_nothing_even_when_the_library_does(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = pymupdf4llm.to_markdown

    def chatty(*args, **kwargs):
        print("Warning: RapidOCR is missing. Install for much improved OCR results.")
        pymupdf.message("=== Document parser messages ===")
        return real(*args, **kwargs)

    monkeypatch.setattr(pymupdf4llm, "to_markdown", chatty)
    result = PymupdfMarkdownConverter().convert(
        text_pdf("The Retailer must notify the Distributor."), "one.pdf"
    )
    out, _err = capfd.readouterr()
    assert out == ""
    assert "The Retailer must notify the Distributor." in result.markdown


def test_every_page_gets_one_marker_in_order() -> None:
    result = PymupdfMarkdownConverter().convert(
        text_pdf("First page body.", "", "Third page body."), "three.pdf"
    )
    assert isinstance(result, ConvertedDocument)
    assert re.findall(r"^<!-- page (\d+) -->$", result.markdown, re.M) == ["1", "2", "3"]
    assert "First page body." in page_segment(result.markdown, 1)
    assert page_segment(result.markdown, 2).strip() == ""
    assert "Third page body." in page_segment(result.markdown, 3)
    assert (result.pages, result.converter, result.figures) == (3, CONVERTER_NAME, ())
    assert CONVERTER_NAME == "pymupdf4llm-2.0 layout"
    assert result.seconds > 0


# --------------------------------------------------------------------------------------
# Pages layout cannot read but MuPDF's plain text does (issue 25: a product datasheet)
# --------------------------------------------------------------------------------------
DATASHEET = (
    "Sensor datasheet\nOperating range: -40 to 85 °C\nThe n-octanal sensor responds in 2 s.",
    "Ordering code: NX-220\nSupply voltage 3.3 V",
)


def datasheet_pdf(**construction: object) -> bytes:
    """Page 1 in Helvetica (layout reads it); pages 2-3 in a Type0 font without /ToUnicode
    (``type0_pdf_without_tounicode(**construction)``)."""
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((72, 72), "Product overview", fontname="hebo", fontsize=18)
    page.insert_text((72, 110), "The overview page is set in Helvetica.", fontsize=11)
    doc.insert_pdf(pymupdf.open(stream=type0_pdf_without_tounicode(*DATASHEET, **construction)))
    return doc.tobytes()


@pytest.mark.parametrize(
    "construction",
    [
        {"codes": "unicode"},  # the codes are Unicode code points (a /CIDToGIDMap)
        {"codes": "glyph", "actual_text": True},  # glyph ids, the text in /ActualText
    ],
)
def test_pages_layout_turns_into_replacement_characters_are_read_as_plain_text(
    construction: dict[str, object],
) -> None:
    pdf = datasheet_pdf(**construction)
    doc = pymupdf.open(stream=pdf)
    # the two facts of the case: plain get_text() reads every page ...
    assert [page.get_text() for page in doc][1:] == [text + "\n" for text in DATASHEET]
    # ... while layout mode turns the Type0 pages into U+FFFD
    chunks = pymupdf4llm.to_markdown(doc, page_chunks=True, use_ocr=False, show_progress=False)
    for chunk in chunks[1:]:
        text = "".join(chunk["text"].split())
        assert text.count("\ufffd") > 0.9 * len(text)
    assert "\ufffd" not in chunks[0]["text"]

    markdown = PymupdfMarkdownConverter().convert(pdf, "datasheet.pdf").markdown
    assert re.findall(r"^<!-- page (\d+) -->$", markdown, re.M) == ["1", "2", "3"]
    # the page layout reads keeps its layout Markdown (the bold heading)
    assert page_segment(markdown, 1) == (
        "\n\n# **Product overview**\n\nThe overview page is set in Helvetica.\n\n"
    )
    assert page_segment(markdown, 2) == (
        "\n\nSensor datasheet Operating range: -40 to 85 °C The n-octanal sensor responds "
        "in 2 s.\n\n"
    )
    assert page_segment(markdown, 3) == "\n\nOrdering code: NX-220 Supply voltage 3.3 V\n"
    assert "\ufffd" not in markdown


def test_a_page_of_glyph_id_nonsense_is_not_read_as_plain_text() -> None:
    # Three readable pages carry the document past the refusal; the fourth, in a Type0 font
    # whose codes are glyph ids, reads "4FOTPS..." in get_text(): it stays without text.
    body = "The Retailer must notify the Distributor within two business days. " * 8
    doc = pymupdf.open()
    for _ in range(3):
        doc.new_page().insert_textbox(pymupdf.Rect(72, 72, 520, 400), body, fontsize=11)
    doc.insert_pdf(pymupdf.open(stream=type0_pdf_without_tounicode(
        "Sensor datasheet", codes="glyph"
    )))
    markdown = PymupdfMarkdownConverter().convert(doc.tobytes(), "mixed.pdf").markdown
    assert page_segment(markdown, 4) == "\n"
    assert "4FOTPS" not in markdown and "notify the Distributor" in page_segment(markdown, 3)


# --------------------------------------------------------------------------------------
# Real PDFs: the corpus's refusals (fast, no layout run)
# --------------------------------------------------------------------------------------
@pytest.mark.corpus
@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "scanned_ocrmypdf_multipage.pdf",
            # page 4 carries 77 stray characters of OCR text over a chart: not a text layer
            "scanned_ocrmypdf_multipage.pdf: no text layer on any of 6 pages; OCR is not enabled.",
        ),
        (
            "scanned_ocrmypdf_c02-22_huckfinn_p22.pdf",
            "scanned_ocrmypdf_c02-22_huckfinn_p22.pdf: no text layer on any of 1 page; "
            "OCR is not enabled.",
        ),
        (
            # "Phone" in a symbolic TrueType subset without /ToUnicode or /Encoding
            # extracts as '"7+%-'
            "encoding_ocrmypdf_truetype_font_nomapping.pdf",
            "encoding_ocrmypdf_truetype_font_nomapping.pdf: the text layer cannot be read: "
            "100% of characters have no Unicode mapping (font 01ebsit,Bold); re-export the "
            "PDF with embedded Unicode fonts or OCR it",
        ),
    ],
)
def test_corpus_pdfs_that_cannot_be_converted(name: str, message: str) -> None:
    pdf = (corpus_dir() / "pdfs" / name).read_bytes()
    assert refusal(pdf, name).startswith(message)


@pytest.mark.corpus
def test_arabic_text_converts_as_arabic() -> None:
    name = "encoding_pypdf_habibi_arabic.pdf"
    result = PymupdfMarkdownConverter().convert((corpus_dir() / "pdfs" / name).read_bytes(), name)
    assert result.pages == 1
    assert "حَبيبي" in result.markdown  # logical order, with its fatha
    assert "habibi" in result.markdown
    assert "\ufffd" not in result.markdown


@pytest.mark.corpus
def test_german_maths_converts_as_german() -> None:
    # Page 10 of the 117-page script, cut out to keep the test fast.
    source = pymupdf.open(corpus_dir() / "pdfs" / "long_pypdf_GeoTopo-komprimiert_de.pdf")
    excerpt = pymupdf.open()
    excerpt.insert_pdf(source, from_page=9, to_page=9)
    result = PymupdfMarkdownConverter().convert(excerpt.tobytes(), "geotopo-p10.pdf")
    text = result.markdown
    for phrase in ("1.2 Metrische Räume", "heißt", "Dreiecksungleichung", "Isometrie"):
        assert phrase in text
    assert "∀" in text and "≤" in text  # the maths symbols survive


# --------------------------------------------------------------------------------------
# Real PDFs: whole conversions (slow: ~1 s/page)
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cvp() -> ConvertedDocument:
    pdf = (corpus_dir() / "pdfs" / CVP).read_bytes()
    return PymupdfMarkdownConverter().convert(pdf, CVP)


@pytest.fixture(scope="module")
def fcas() -> ConvertedDocument:
    pdf = (corpus_dir() / "pdfs" / FCAS).read_bytes()
    return PymupdfMarkdownConverter().convert(pdf, FCAS)


@pytest.mark.corpus
@pytest.mark.slow
def test_cvp_page_markers_title_and_version(cvp: ConvertedDocument) -> None:
    markers = re.findall(r"^<!-- page (\d+) -->$", cvp.markdown, re.M)
    assert markers == [str(n) for n in range(1, 25)]
    assert (cvp.pages, cvp.title, cvp.version) == (
        24,
        "Schedule of Constraint Violation Penalty Factors",
        "4.0",
    )


@pytest.mark.corpus
@pytest.mark.slow
def test_cvp_table_layout_missed_is_a_pipe_table_on_page_11(cvp: ConvertedDocument) -> None:
    # Layout reads page 11's shaded-cell table as one list item; the fallback table
    # finder recovers it. The eval question quotes this row.
    rows = [line for line in page_segment(cvp.markdown, 11).splitlines() if line.startswith("|")]
    row = next(r for r in rows if r.startswith("|12|"))
    assert row.startswith(
        "|12|Unconstrained Intermittent Generation Forecast (UIGF) (variable UIGFSurplus)"
        "|(4.10.0)|385 (200)|"
    )
    quote = (
        "Unconstrained Intermittent Generation Forecast (UIGF) (variable UIGFSurplus) "
        "(4.10.0) 385 (200)"
    )
    first8 = eval_words(quote)[:8]
    words = eval_words(row)
    assert any(words[i : i + 8] == first8 for i in range(len(words)))
    assert any(r.startswith("|13|Energy Inflexible Offer constraint") for r in rows)


@pytest.mark.corpus
@pytest.mark.slow
def test_cvp_running_header_and_footer_are_removed(cvp: ConvertedDocument) -> None:
    # "SCHEDULE OF CONSTRAINT VIOLATION PENALTY FACTORS" heads pages 2-24 and is the
    # cover title on page 1; "© AEMO 2017" and the page number foot pages 2-24.
    assert cvp.markdown.count("SCHEDULE OF CONSTRAINT VIOLATION PENALTY FACTORS") == 1
    assert "SCHEDULE OF CONSTRAINT VIOLATION PENALTY FACTORS" in page_segment(cvp.markdown, 1)
    assert "© AEMO 2017" not in cvp.markdown
    assert not re.search(r"^\d+$", page_segment(cvp.markdown, 11), re.M)


@pytest.mark.corpus
@pytest.mark.slow
def test_fcas_figure_marker_and_region(fcas: ConvertedDocument) -> None:
    caption = "Figure 1: FCAS offer trapezium – energy and FCAS capability relationship"
    assert f"[Figure: {caption}]" in page_segment(fcas.markdown, 6)
    region = next(f for f in fcas.figures if f.caption == caption)
    assert region.page == 6
    x0, y0, x1, y1 = region.bbox
    # the chart's vector paths span about (132, 398)-(451, 538) on the page
    assert x0 <= 132 and y0 <= 398 and x1 >= 451 and y1 >= 538
    assert x1 - x0 < 595 and y1 - y0 < 300  # the chart, not the whole page
    # the AEMO logo repeated in every page's header is furniture, not a figure
    assert all(not (f.bbox[1] < 70 and f.bbox[0] > 400) for f in fcas.figures if f.page > 1)
    assert [f.page for f in fcas.figures] == sorted(f.page for f in fcas.figures)
    assert fcas.markdown.count("[Figure: ") == len(fcas.figures)


@pytest.mark.corpus
@pytest.mark.slow
def test_fcas_wrapped_table_cell_is_one_row(fcas: ConvertedDocument) -> None:
    # Table 1 on page 13: layout splits "Scaling for AGC ramp / rates" into two rows;
    # the eval quote "Scaling for AGC ramp rates All First None" needs them as one.
    rows = page_segment(fcas.markdown, 13).splitlines()
    assert "|**Scaling for AGC ramp rates**|All|First|None|" in rows
    assert "|**Scaling for AGC enablement limits**|All|First|First|" in rows


def test_contents_listing_is_dropped_but_data_tables_stay() -> None:
    doc = pymupdf.open()
    page = doc.new_page()
    y = 72
    lines = ["Contents", "1 Introduction ........................ 2", "2 Scope ........ 2",
             "3 Obligations .................. 2"]
    for line in lines:
        page.insert_text((72, y), line, fontsize=11)
        y += 18
    body = doc.new_page()
    body.insert_text((72, 72), "1 Introduction", fontsize=16)
    body.insert_text((72, 100), "The Retailer must notify the Distributor within 2 days.", fontsize=11)
    converted = PymupdfMarkdownConverter().convert(doc.tobytes(), "toc.pdf")
    assert "........" not in converted.markdown
    assert "3 Obligations" not in converted.markdown
    assert "The Retailer must notify the Distributor within 2 days." in converted.markdown


# --------------------------------------------------------------------------------------
# Numbered headings atop every page of their part (issue 10, defect 6)
# --------------------------------------------------------------------------------------
#: The part whose heading opens each of its pages, and the pages it spans (6 of 10: at
#: least ``FURNITURE_PAGE_SHARE`` of the pages, so it is a running header by count).
PARTS = {2: "Part 11 - General", 3: "Part 11 - General"} | {
    n: "Part 12 - Registration" for n in range(4, 10)
} | {10: "Part 13 - Compliance"}


def parts_pdf() -> bytes:
    """A 10-page code: a cover, then each page headed by its part's heading in 16 pt bold
    at the top, a paragraph of clauses, and a page number at the foot."""
    doc = pymupdf.open()
    cover = doc.new_page()
    cover.insert_text((72, 300), "Electricity Distribution Code", fontsize=24)
    for number in range(2, 11):
        page = doc.new_page()
        page.insert_text((72, 60), PARTS[number], fontsize=16, fontname="hebo")
        for line in range(12):
            page.insert_text(
                (72, 110 + 20 * line),
                f"Clause {number}.{line} The distributor must keep a register of every "
                f"connection it makes on page {number}.",
                fontsize=10,
            )
        page.insert_text((290, 800), str(number), fontsize=9)
    return doc.tobytes()


def test_a_heading_atop_every_page_of_its_part_is_kept_where_the_part_begins() -> None:
    markdown = PymupdfMarkdownConverter().convert(parts_pdf(), "parts.pdf").markdown
    # Part 12 opens on page 4: its heading is kept there as a heading ...
    assert page_segment(markdown, 4).lstrip().startswith("# **Part 12 - Registration**\n")
    # ... and its copies atop pages 5-9 are running-header repeats, removed.
    for page in range(5, 10):
        assert "Part 12" not in page_segment(markdown, page)
        assert f"Clause {page}.0 The distributor" in page_segment(markdown, page)
    assert "# **Part 13 - Compliance**" in page_segment(markdown, 10)
    assert not re.search(r"^\d+$", markdown, re.M)  # page numbers are still furniture
    chunks = chunk_markdown(markdown, "parts")
    by_page = {
        page: {c.heading_path for c in chunks if c.page_start <= page <= c.page_end}
        for page in range(2, 11)
    }
    assert by_page == {
        2: {("Part 11 - General",)},
        3: {("Part 11 - General",)},
        **{page: {("Part 12 - Registration",)} for page in range(4, 10)},
        10: {("Part 13 - Compliance",)},
    }


@pytest.mark.corpus
@pytest.mark.slow
def test_nist_chapter_heading_survives_its_running_footer() -> None:
    # NIST SP 800-171r2 pages 17-28: Chapter Two (17-20), then CHAPTER THREE, whose heading
    # opens page 21 at the top and whose running footer "CHAPTER THREE" is on pages 21-28,
    # 8 of the 12 pages. Both have the key "chapter three", so the heading went with the
    # footer. Excerpt page k is NIST page k + 16.
    source = pymupdf.open(corpus_dir() / "pdfs" / "nist_SP_800-171r2.pdf")
    excerpt = pymupdf.open()
    excerpt.insert_pdf(source, from_page=16, to_page=27)
    markdown = PymupdfMarkdownConverter().convert(excerpt.tobytes(), "nist-p17-28.pdf").markdown
    assert re.search(r"^#+ \*\*CHAPTER THREE\*\*$", page_segment(markdown, 5), re.M)  # p. 21
    assert markdown.count("CHAPTER THREE") == 1  # the footers on pages 21-28 are gone
    chunks = chunk_markdown(markdown, "nist")
    assert (5, "CHAPTER THREE") in {(c.page_start, c.heading_path[-1]) for c in chunks}
