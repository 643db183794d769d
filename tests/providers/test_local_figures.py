"""LayoutFigureLocator on a synthetic PDF with known drawings, and on the AEMO corpus.

The synthetic document has, on every page, a tiny header logo and a header rule; page 1 a
flow diagram (boxes and arrows) above a ruled table with a shaded header row; page 2 a line
chart with axis labels above a table of shaded cells; page 3 a raster figure, a small inline
icon, and a full-width banner image. Every coordinate is authored here, so the boxes the
locator should return are known exactly.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pymupdf
import pytest

from kb_shared.errors import ConversionError
from kb_shared.ingest.figures import PAD_FRACTION, Box, crop_geometry, text_line_boxes
from kb_shared.providers.base import FigureBox, FigureLocator, FigureRegion
from kb_shared.providers.local_figures import LayoutFigureLocator
from kb_assets.sample_pdf import FIGURE_CAPTION, MARGIN_X, PAGE_WIDTH, sample_pdf_bytes
from tests.conftest import corpus_dir

A4 = (595.0, 842.0)
FLOW = (200.0, 150.0, 500.0, 280.0)  # union of the flow diagram's boxes
RASTER = (150.0, 300.0, 450.0, 500.0)  # the raster figure on page 3
BANNER = (0.0, 600.0, 595.0, 760.0)  # full-width image on page 3
LETTERHEAD = (40.0, 8.0, 340.0, 68.0)  # 3.6 % of the page, top band, on every page (doc 2)
LOGO = (470.0, 30.0, 530.0, 50.0)  # 0.24 % of the page, on every page


def _png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    # filled from its samples: set_rect fills pixel by pixel in Python (~0.1 s for 600 x 400)
    pix = pymupdf.Pixmap(pymupdf.csRGB, width, height, bytes(rgb) * (width * height), False)
    # A dark diagonal so the picture is not a flat colour.
    for i in range(min(width, height)):
        pix.set_pixel(i, i, (0, 0, 0))
    return pix.tobytes("png")


def _header(page: pymupdf.Page, letterhead: bool = False) -> None:
    page.insert_image(LOGO, stream=_png(60, 20, (200, 30, 30)))
    page.draw_line((40, 62), (555, 62), color=(0.3, 0.3, 0.6), width=1)  # page-wide rule
    page.insert_text((40, 800), "Synthetic procedure | page footer", fontsize=8)
    if letterhead:
        page.insert_image(LETTERHEAD, stream=_png(300, 60, (40, 90, 160)))


BODY = (
    "Body text set in the document's main style, long enough to run across the column.",
    "A second line of the paragraph continues the argument of the procedure here.",
    "And a third line closes it, so body text outweighs every label and table cell.",
)


def _body(page: pymupdf.Page, y: float) -> None:
    for i, line in enumerate(BODY):
        page.insert_text((60, y + 14 * i), line, fontsize=11)


def _arrow_down(page: pymupdf.Page, x: float, y0: float, y1: float) -> None:
    page.draw_line((x, y0), (x, y1), color=(0, 0, 0), width=1)
    page.draw_line((x - 4, y1 - 7), (x, y1), color=(0, 0, 0), width=1)
    page.draw_line((x + 4, y1 - 7), (x, y1), color=(0, 0, 0), width=1)


def _arrow_right(page: pymupdf.Page, x0: float, x1: float, y: float) -> None:
    page.draw_line((x0, y), (x1, y), color=(0, 0, 0), width=1)
    page.draw_line((x1 - 7, y - 4), (x1, y), color=(0, 0, 0), width=1)
    page.draw_line((x1 - 7, y + 4), (x1, y), color=(0, 0, 0), width=1)


def _flow_page(page: pymupdf.Page) -> None:
    page.insert_text((60, 100), "1. Notices", fontsize=14)
    page.insert_text((200, 138), "Figure 1 Flow of a dispatch notice", fontsize=9)
    blue = (0.15, 0.56, 0.93)
    for rect, label in (
        ((200, 150, 340, 190), "Receive notice"),
        ((200, 240, 340, 280), "Check target"),
        ((380, 240, 500, 280), "Send reply"),
    ):
        page.draw_rect(rect, color=blue, width=1.5)
        page.insert_text((rect[0] + 10, rect[1] + 24), label, fontsize=9)
    _arrow_down(page, 270, 190, 240)
    _arrow_right(page, 340, 380, 260)
    # A ruled table (lines only) with a shaded header row: not a figure.
    page.draw_rect((100, 400, 500, 430), color=None, fill=(0.42, 0.19, 0.47))
    for y in (400, 430, 460, 490, 520, 550):
        page.draw_line((100, y), (500, y), color=(0.5, 0.5, 0.5), width=0.5)
    for x in (100, 250, 380, 500):
        page.draw_line((x, 400), (x, 550), color=(0.5, 0.5, 0.5), width=0.5)
    for row, y in enumerate((420, 450, 480, 510, 540)):
        for col, x in enumerate((105, 255, 385)):
            page.insert_text((x, y), f"cell {row}.{col}", fontsize=8)
    _body(page, 620)


def _chart_page(page: pymupdf.Page) -> None:
    page.draw_line((100, 300), (100, 500), color=(0, 0, 0), width=0.75)  # y axis
    page.draw_line((100, 500), (400, 500), color=(0, 0, 0), width=0.75)  # x axis
    for y in (350, 400, 450):  # gridlines
        page.draw_line((100, y), (400, y), color=(0.85, 0.85, 0.85), width=0.5)
    page.draw_polyline(
        [(100, 480), (200, 400), (300, 350), (400, 320)], color=(0.8, 0.1, 0.1), width=1.5
    )
    page.insert_text((220, 512), "Time (minutes)", fontsize=7)  # 5 pt under the x axis
    page.insert_text((85, 304), "MW", fontsize=7)  # 4 pt left of the y axis
    _body(page, 120)
    page.insert_text((100, 545), "Figure 2: Output over time", fontsize=9)
    # A table of shaded cells (tiled fills, 1 pt gaps): not a figure.
    for r in range(6):
        for c in range(4):
            x0, y0 = 100 + c * 100, 600 + r * 25
            shade = (0.42, 0.19, 0.47) if r == 0 else (0.9, 0.9, 0.93)
            page.draw_rect((x0, y0, x0 + 99, y0 + 24), color=None, fill=shade)
            page.insert_text((x0 + 5, y0 + 16), f"r{r}c{c}", fontsize=8)


def _raster_page(page: pymupdf.Page) -> None:
    page.insert_text((150, 290), "Figure 3 Map of the regions", fontsize=9)
    page.insert_image(RASTER, stream=_png(600, 400, (120, 200, 120)))
    page.insert_image((100, 540, 116, 556), stream=_png(16, 16, (0, 0, 0)))  # inline icon
    page.insert_text((120, 552), "an icon inline with body text")
    page.insert_image(BANNER, stream=_png(595, 160, (240, 140, 40)))
    _body(page, 120)


@cache
def synthetic_pdf(letterhead: bool = False) -> bytes:
    doc = pymupdf.open()
    for build in (_flow_page, _chart_page, _raster_page):
        page = doc.new_page(width=A4[0], height=A4[1])
        _header(page, letterhead)
        build(page)
    return doc.tobytes()


def _chart_expected() -> tuple[float, float, float, float]:
    doc = pymupdf.open(stream=synthetic_pdf(), filetype="pdf")
    page = doc[1]
    boxes = [pymupdf.Rect(100, 300, 400, 500)]
    boxes += page.search_for("Time (minutes)") + page.search_for("MW")
    union = boxes[0]
    for b in boxes[1:]:
        union |= b
    return tuple(union)  # type: ignore[return-value]


def _informative(boxes: list[FigureBox]) -> list[FigureBox]:
    return [b for b in boxes if not b.decorative]


# --------------------------------------------------------------------------------------
# Synthetic document
# --------------------------------------------------------------------------------------
def test_is_a_figure_locator() -> None:
    assert isinstance(LayoutFigureLocator(), FigureLocator)
    assert LayoutFigureLocator.name == "pymupdf-layout"


def test_finds_exactly_the_authored_figures() -> None:
    boxes = LayoutFigureLocator().locate(synthetic_pdf(), [])
    found = _informative(boxes)
    assert [b.page for b in found] == [1, 2, 3]
    flow, chart, raster = found
    assert flow.bbox == pytest.approx(FLOW, abs=1.0)
    assert chart.bbox == pytest.approx(_chart_expected(), abs=1.0)
    assert raster.bbox == pytest.approx(RASTER, abs=0.5)
    assert flow.caption == "Figure 1 Flow of a dispatch notice"
    assert chart.caption == "Figure 2: Output over time"
    assert raster.caption == "Figure 3 Map of the regions"


def _overlaps(a: tuple, b: tuple) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@pytest.mark.parametrize(
    ("page", "table"),
    [(1, (100, 400, 500, 550)), (2, (100, 600, 500, 750))],  # ruled grid; shaded cells
)
def test_tables_are_not_figures(page: int, table: tuple) -> None:
    boxes = LayoutFigureLocator().locate(synthetic_pdf(), [])
    assert [b for b in boxes if b.page == page and _overlaps(b.bbox, table)] == []


def test_logo_and_inline_icon_are_dropped_and_banner_is_decorative() -> None:
    boxes = LayoutFigureLocator().locate(synthetic_pdf(), [])
    icon = (100, 540, 116, 556)
    assert [b for b in boxes if _overlaps(b.bbox, LOGO) or _overlaps(b.bbox, icon)] == []
    decorative = [b for b in boxes if b.decorative]
    assert [(b.page, b.bbox, b.caption) for b in decorative] == [(3, BANNER, "")]


def test_letterhead_repeated_on_every_page_is_decorative() -> None:
    boxes = LayoutFigureLocator().locate(synthetic_pdf(letterhead=True), [])
    marks = [b for b in boxes if b.bbox == pytest.approx(LETTERHEAD, abs=0.5)]
    assert [b.page for b in marks] == [1, 2, 3]
    assert all(b.decorative for b in marks)
    assert len(_informative(boxes)) == 3  # the real figures are unchanged


def test_boxes_are_sorted_by_page_then_top() -> None:
    boxes = LayoutFigureLocator().locate(synthetic_pdf(), [])
    keys = [(b.page, b.bbox[1], b.bbox[0]) for b in boxes]
    assert keys == sorted(keys)


# --------------------------------------------------------------------------------------
# Bordered tables and gridded charts
# --------------------------------------------------------------------------------------
TABLE_COLUMNS = (100.0, 190.0, 330.0, 500.0)  # cell edges; 7 rows of 22 pt from y = 300
TABLE = (100.0, 300.0, 500.0, 454.0)
HEADER_FILL = (0.85, 0.89, 0.95)


def _bordered_table_pdf(one_path_per_row_kind: bool) -> bytes:
    """A page of body text and a table drawn as stroked cell rectangles, the header row
    filled, text in every cell: one path per cell (as the sample procedure draws it) or one
    path for the header cells and one for all body cells (as some PDF producers do)."""
    doc = pymupdf.open()
    page = doc.new_page(width=A4[0], height=A4[1])
    _body(page, 120)
    page.insert_text((100, 290), "Table 4 Obligations and their deadlines", fontsize=9)
    ink = (0.3, 0.3, 0.3)
    shapes = {}
    for row in range(7):
        y0 = 300.0 + 22 * row
        for col in range(3):
            rect = pymupdf.Rect(TABLE_COLUMNS[col], y0, TABLE_COLUMNS[col + 1], y0 + 22)
            fill = HEADER_FILL if row == 0 else None
            if one_path_per_row_kind:
                if row not in (0, 1) and 1 in shapes:
                    shapes[1].draw_rect(rect)
                else:
                    shapes.setdefault(row, page.new_shape()).draw_rect(rect)
            else:
                page.draw_rect(rect, color=ink, fill=fill, width=0.6)
            label = ("Clause", "Party", "Deadline")[col] if row == 0 else f"cell {row}.{col}"
            page.insert_text((rect.x0 + 4, rect.y0 + 15), label, fontsize=9)
    for row, shape in shapes.items():
        shape.finish(color=ink, fill=HEADER_FILL if row == 0 else None, width=0.6)
        shape.commit()
    _body(page, 520)
    return doc.tobytes()


@pytest.mark.parametrize(
    ("one_path_per_row_kind", "rotation"),
    # On a rotated page pymupdf's table finder reports rotated coordinates while drawings
    # and words come unrotated; the locator turns the table back before comparing.
    [(False, 0), (True, 0), (False, 90)],
)
def test_bordered_table_is_not_a_figure(one_path_per_row_kind: bool, rotation: int) -> None:
    pdf = _bordered_table_pdf(one_path_per_row_kind)
    if rotation:
        doc = pymupdf.open(stream=pdf, filetype="pdf")
        doc[0].set_rotation(rotation)
        pdf = doc.tobytes()
    assert LayoutFigureLocator().locate(pdf, []) == []


def test_region_over_a_bordered_table_is_not_a_figure() -> None:
    # A layout model may report a table as a picture; the locator knows it is a table.
    region = FigureRegion(page=1, bbox=(95, 295, 505, 460), caption="[Figure: table]")
    assert LayoutFigureLocator().locate(_bordered_table_pdf(False), [region]) == []


def _label_union(page: pymupdf.Page, frame: tuple, labels: list[str]) -> tuple:
    union = pymupdf.Rect(frame)
    for label in labels:
        for hit in page.search_for(label):
            union |= hit
    return tuple(union)


def test_bar_chart_in_a_gridded_frame_is_still_a_figure() -> None:
    # The frame, gridlines and bars make a complete grid that pymupdf's table finder
    # reports as a table (9 rows, 14 columns, 46 cells); only the five value labels sit in
    # its cells (tick labels are outside the frame), and there is no curve or diagonal.
    doc = pymupdf.open()
    page = doc.new_page(width=A4[0], height=A4[1])
    _body(page, 120)
    frame = (100.0, 300.0, 400.0, 500.0)
    page.draw_rect(frame, color=(0, 0, 0), width=0.75)
    for x in (150, 200, 250, 300, 350):
        page.draw_line((x, 300), (x, 500), color=(0.8, 0.8, 0.8), width=0.5)
    for y in (350, 400, 450):
        page.draw_line((100, y), (400, y), color=(0.8, 0.8, 0.8), width=0.5)
    for i, height in enumerate((120, 80, 160, 60, 140)):
        x0 = 112.0 + 60 * i
        page.draw_rect((x0, 500 - height, x0 + 26, 500), color=None, fill=(0.2, 0.4, 0.8))
        page.insert_text((x0 + 4, 496 - height), f"{height}", fontsize=7)
    labels = ["0", "50", "100", "150", "200"]
    for i, label in enumerate(labels):
        page.insert_text((80, 503 - 50 * i), label, fontsize=7)
    for i, label in enumerate(("NSW", "QLD", "SA", "TAS", "VIC")):
        page.insert_text((116 + 60 * i, 510), label, fontsize=7)
    page.insert_text((100, 530), "Figure 6 Interconnector flows by region", fontsize=9)
    pdf = doc.tobytes()
    expected = _label_union(page, frame, [*labels, "NSW", "VIC"])
    boxes = LayoutFigureLocator().locate(pdf, [])
    assert [(b.bbox, b.caption) for b in boxes] == [
        (pytest.approx(expected, abs=1.0), "Figure 6 Interconnector flows by region")
    ]


def _segmented_line(page: pymupdf.Page, start: tuple, end: tuple) -> None:
    """A straight line drawn as a run of segments under 0.5 pt each, as pgfplots does."""
    steps = 700
    points = [
        (start[0] + (end[0] - start[0]) * i / steps, start[1] + (end[1] - start[1]) * i / steps)
        for i in range(steps + 1)
    ]
    page.draw_polyline(points, color=(1, 0, 0), width=0.8)


def test_plot_with_crossing_axes_and_segmented_lines_is_still_a_figure() -> None:
    # Modelled on page 10 of the GeoTopo lecture notes in the corpus: a white plot area,
    # axes crossing in the middle with tick labels in all four quadrants (a 2 x 2 "table"
    # with text in every cell to the table finder), lines made of sub-point segments.
    doc = pymupdf.open()
    page = doc.new_page(width=A4[0], height=A4[1])
    _body(page, 120)
    plot = (110.0, 300.0, 410.0, 480.0)
    page.draw_rect(plot, color=None, fill=(1, 1, 1))
    page.draw_line((110, 390), (410, 390), color=(0, 0, 0), width=0.4)  # x axis
    page.draw_line((260, 300), (260, 480), color=(0, 0, 0), width=0.4)  # y axis
    for x, label in ((200, "-2"), (320, "2"), (380, "4")):
        page.insert_text((x - 4, 402), label, fontsize=8)
    for y, label in ((330, "2"), (450, "-2")):
        page.insert_text((248, y + 3), label, fontsize=8)
    _segmented_line(page, (140, 450), (380, 330))
    _segmented_line(page, (140, 330), (380, 450))
    pdf = doc.tobytes()
    boxes = LayoutFigureLocator().locate(pdf, [])
    assert len(boxes) == 1
    assert boxes[0].bbox == pytest.approx((110, 300, 410, 480), abs=1.0)


# --------------------------------------------------------------------------------------
# The sample procedure (kb_assets.sample_pdf)
# --------------------------------------------------------------------------------------
@cache
def _sample_caption() -> tuple[int, Box]:
    """The page (1-based) and the line box of the sample's figure caption."""
    doc = pymupdf.open(stream=sample_pdf_bytes(), filetype="pdf")
    for page in doc:
        for line in text_line_boxes(page):
            if page.get_textbox(pymupdf.Rect(line.as_tuple())).strip() == FIGURE_CAPTION:
                return page.number + 1, line
    raise AssertionError(f"{FIGURE_CAPTION!r} is not in the sample PDF")


@cache
def _sample_boxes() -> tuple[FigureBox, ...]:
    return tuple(LayoutFigureLocator().locate(sample_pdf_bytes(), []))


def test_sample_procedure_has_one_figure_and_no_tables() -> None:
    # Pages 3-5 hold the obligations schedule (over two pages) and the change register,
    # drawn as stroked cells with a filled header row: tables, not figures.
    boxes = _sample_boxes()
    page, caption = _sample_caption()
    assert [(b.page, b.caption, b.decorative) for b in boxes] == [(page, FIGURE_CAPTION, False)]
    x0, y0, x1, y1 = boxes[0].bbox
    # The diagram spans the text column and sits right over its caption.
    assert (x0, x1) == pytest.approx((MARGIN_X, PAGE_WIDTH - MARGIN_X), abs=0.5)
    assert 0 < caption.y0 - y1 < 12
    assert y1 - y0 == pytest.approx(138.5, abs=1.0)  # label over the loop to the hub's foot


def test_crop_of_the_sample_figure_stops_before_its_caption() -> None:
    boxes = _sample_boxes()
    page_number, caption = _sample_caption()
    doc = pymupdf.open(stream=sample_pdf_bytes(), filetype="pdf")
    page = doc[page_number - 1]
    plain = crop_geometry(boxes[0].bbox, page.rect, 1024).clip
    clip = crop_geometry(boxes[0].bbox, page.rect, 1024, text_lines=text_line_boxes(page)).clip
    assert plain.y0 < caption.y0 < plain.y1 < caption.y1  # plain padding halves the caption
    assert clip.y1 == pytest.approx(caption.y0)  # the padding stops at the caption
    pad_x = PAD_FRACTION * page.rect.width
    assert (clip.x0, clip.x1) == pytest.approx((plain.x0, plain.x1))
    assert (plain.x0, plain.x1) == pytest.approx((MARGIN_X - pad_x, PAGE_WIDTH - MARGIN_X + pad_x))
    assert _cut_lines(clip, text_line_boxes(page)) == []


def _cut_lines(clip: Box, lines: list[Box], sliver: float = 1.0) -> list[Box]:
    """Text lines the crop ``clip`` cuts: more than ``sliver`` points of the line's box are
    inside it and more than ``sliver`` points outside (a line box's ascent and descent run a
    point or so past the glyphs, so a thinner overlap shows nothing)."""
    cut = []
    for line in lines:
        overlap_x = min(line.x1, clip.x1) - max(line.x0, clip.x0)
        overlap_y = min(line.y1, clip.y1) - max(line.y0, clip.y0)
        if overlap_x <= sliver or overlap_y <= sliver:
            continue  # outside the crop, or touching it
        outside = max(clip.x0 - line.x0, line.x1 - clip.x1, clip.y0 - line.y0, line.y1 - clip.y1)
        if outside > sliver:
            cut.append(line)
    return cut


# --------------------------------------------------------------------------------------
# Crop padding around text (kb_shared.ingest.figures.crop_geometry with text lines)
# --------------------------------------------------------------------------------------
CROP_BOX = (100.0, 100.0, 400.0, 300.0)  # on A4: padding 8.925 pt in x, 12.63 pt in y


@pytest.mark.parametrize(
    ("line", "expected_clip"),
    [
        # No text: plain padding.
        (None, (91.075, 87.37, 408.925, 312.63)),
        # Caption 5-17 pt under the box: 7.63 of its 12 pt inside the padding, taken whole.
        ((100, 305, 260, 317), (91.075, 87.37, 408.925, 317.0)),
        # Caption 10-22 pt under: 2.63 pt inside, left out: the padding stops at its top.
        ((100, 310, 260, 322), (91.075, 87.37, 408.925, 310.0)),
        # A line wholly inside the padding stays, and the padding is unchanged.
        ((120, 302, 200, 310), (91.075, 87.37, 408.925, 312.63)),
        # A body line wider than the crop would be cut at both ends: left out.
        ((50, 303, 500, 311), (91.075, 87.37, 408.925, 303.0)),
        # A caption 8-20 pt over the box: 4.63 pt inside, left out.
        ((100, 80, 300, 92), (91.075, 92.0, 408.925, 312.63)),
        # Text 5 pt right of the box: left out on that side.
        ((405, 150, 480, 160), (91.075, 87.37, 405.0, 312.63)),
    ],
)
def test_crop_padding_never_cuts_a_text_line(line: tuple | None, expected_clip: tuple) -> None:
    page = Box(0, 0, *A4)
    lines = [] if line is None else [line]
    clip = crop_geometry(CROP_BOX, page, 1024, text_lines=lines).clip
    assert clip.as_tuple() == pytest.approx(expected_clip, abs=1e-6)
    assert _cut_lines(clip, [Box(*t) for t in lines]) == []


# --------------------------------------------------------------------------------------
# Converter regions
# --------------------------------------------------------------------------------------
def test_region_overlapping_a_detected_figure_adds_nothing() -> None:
    # A layout box looser than the drawing, as pymupdf4llm reports them.
    loose = FigureRegion(page=1, bbox=(190, 120, 520, 300), caption="[Figure: flow]")
    boxes = _informative(LayoutFigureLocator().locate(synthetic_pdf(), [loose]))
    assert [b.page for b in boxes] == [1, 2, 3]
    assert boxes[0].bbox == pytest.approx(FLOW, abs=1.0)
    assert boxes[0].caption == "Figure 1 Flow of a dispatch notice"  # the page's own caption


def test_logo_sized_region_is_dropped() -> None:
    # 200 x 20 pt (corners given swapped) is 0.95 % of the page: under the 3 % bar.
    region = FigureRegion(page=2, bbox=(300, 780, 100, 760), caption="[Figure: logo]")
    assert LayoutFigureLocator().locate(synthetic_pdf(), [region]) == (
        LayoutFigureLocator().locate(synthetic_pdf(), [])
    )


def test_region_where_nothing_is_drawn_is_kept_as_given() -> None:
    region = FigureRegion(page=1, bbox=(400, 760, 60, 620), caption="[Figure: text art]")
    boxes = _informative(LayoutFigureLocator().locate(synthetic_pdf(), [region]))
    assert [(b.bbox, b.caption) for b in boxes if b.page == 1] == [
        (pytest.approx(FLOW, abs=1.0), "Figure 1 Flow of a dispatch notice"),
        ((60.0, 620.0, 400.0, 760.0), "[Figure: text art]"),
    ]


def test_region_inside_a_shaded_table_is_not_a_figure() -> None:
    region = FigureRegion(page=2, bbox=(100, 600, 499, 749), caption="[Figure: table]")
    boxes = _informative(LayoutFigureLocator().locate(synthetic_pdf(), [region]))
    assert [b.page for b in boxes] == [1, 2, 3]


def test_page_only_region_with_nothing_found_falls_back_to_the_whole_page() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=A4[0], height=A4[1])
    page.insert_text((72, 100), "A page whose picture is text the locator cannot see.")
    pdf = doc.tobytes()
    region = FigureRegion(page=1, bbox=None, caption="[Figure: organisation chart]")
    assert LayoutFigureLocator().locate(pdf, []) == []
    assert LayoutFigureLocator().locate(pdf, [region]) == [
        FigureBox(page=1, bbox=(0.0, 0.0, 595.0, 842.0), caption="[Figure: organisation chart]")
    ]


def test_page_only_region_does_not_add_a_page_when_a_figure_is_found() -> None:
    region = FigureRegion(page=1, bbox=None, caption="[Figure: flow]")
    boxes = _informative(LayoutFigureLocator().locate(synthetic_pdf(), [region]))
    assert [b.page for b in boxes] == [1, 2, 3]
    assert boxes[0].bbox == pytest.approx(FLOW, abs=1.0)


@pytest.mark.parametrize(
    ("pdf", "regions", "message"),
    [
        (b"not a pdf at all", [], "cannot open the PDF"),
        (None, [FigureRegion(page=4, bbox=None)], "region is on page 4, but the PDF has 3"),
        (None, [FigureRegion(page=0, bbox=None)], "region is on page 0, but the PDF has 3"),
    ],
)
def test_bad_input_raises_conversion_error(
    pdf: bytes | None, regions: list[FigureRegion], message: str
) -> None:
    with pytest.raises(ConversionError, match=message):
        LayoutFigureLocator().locate(pdf or synthetic_pdf(), regions)


def test_captions_fig_and_diagram_each_go_to_the_figure_they_sit_against() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=A4[0], height=A4[1])
    page.insert_text((100, 110), "Fig. 1 Upper chart", fontsize=9)  # 10 pt above the upper
    page.draw_polyline([(100, 120), (250, 300), (400, 150)], color=(0, 0, 0), width=1)
    # 16 pt below the upper figure but 8 pt above the lower one: the lower one's caption.
    page.insert_text((100, 324), "Diagram 2 Lower chart", fontsize=9)
    page.draw_polyline([(100, 332), (250, 500), (400, 340)], color=(0, 0, 0), width=1)
    page.insert_text((100, 560), "Figure 7 is mentioned in this far-away sentence.")
    boxes = LayoutFigureLocator().locate(doc.tobytes(), [])
    assert [(b.bbox, b.caption) for b in boxes] == [
        ((100.0, 120.0, 400.0, 300.0), "Fig. 1 Upper chart"),
        ((100.0, 332.0, 400.0, 500.0), "Diagram 2 Lower chart"),
    ]


# --------------------------------------------------------------------------------------
# Real AEMO PDFs (pages and boxes checked by eye on renders of the pages)
# --------------------------------------------------------------------------------------
@cache
def _located(name: str) -> tuple[FigureBox, ...]:
    path: Path = corpus_dir() / "pdfs" / name
    return tuple(LayoutFigureLocator().locate(path.read_bytes(), []))


@pytest.mark.corpus
@pytest.mark.parametrize(
    ("name", "page", "bbox", "caption"),
    [
        # Flowcharts: diamonds, rounded boxes and connectors.
        (
            "aemo_SO_OP_3705_Dispatch.pdf", 15, (106, 114, 469, 706),
            "Figure 1 Dispatch conformance logic for a Cap Aggregate",
        ),
        (
            "aemo_SO_OP_3705_Dispatch.pdf", 28, (103, 317, 551, 772),
            "Figure 8 Over Constrained Dispatch Re-Run Flow Diagram",
        ),
        # A tree of boxes with orthogonal connectors (no curves at all).
        (
            "aemo_Constraint_Implementation_Guidelines_v3_FINAL_Clean.pdf", 9,
            (46, 117, 440, 610), "Figure 1 Structure of constraints",
        ),
        # A vector chart; its x-axis title "Energy (MW)" sits 12 pt right of the axis.
        (
            "aemo_FCAS_Model_in_NEMDE.pdf", 6, (86, 387, 501, 563),
            "Figure 1: FCAS offer trapezium – energy and FCAS capability relationship",
        ),
    ],
)
def test_finds_the_diagram_on_a_corpus_page(
    name: str, page: int, bbox: tuple, caption: str
) -> None:
    on_page = [b for b in _located(name) if b.page == page and not b.decorative]
    assert len(on_page) == 1, on_page
    assert on_page[0].bbox == pytest.approx(bbox, abs=4.0)
    assert on_page[0].caption == caption


@pytest.mark.corpus
def test_two_stacked_figures_get_their_own_captions() -> None:
    on_page = [b for b in _located("aemo_SO_OP_3705_Dispatch.pdf") if b.page == 20]
    assert [b.caption.split(" Operating")[0] for b in on_page] == ["Figure 4", "Figure 5"]


@pytest.mark.corpus
def test_dispatch_procedure_figures_are_on_the_expected_pages() -> None:
    pages = [b.page for b in _located("aemo_SO_OP_3705_Dispatch.pdf") if not b.decorative]
    # 11 figures: flowcharts on 15-17 and 28, charts on 20 (2), 22 (2) and 65, state
    # diagrams on 52-53. Nothing from the cover, the glossary tables or the notes boxes.
    assert pages == [15, 16, 17, 20, 20, 22, 22, 28, 52, 53, 65]


@pytest.mark.corpus
def test_table_pages_of_the_loss_factor_report_have_no_figures() -> None:
    boxes = _located("aemo_Marginal_Loss_Factors_for_the_2020-21_Financial_year.pdf")
    # Pages 7-30 are nothing but shaded tables of loss factors (1,000-1,650 paths a page).
    assert [b for b in boxes if 7 <= b.page <= 30] == []
    # The maps and charts of pages 32-46 are found; the cover is decorative.
    assert [b.page for b in boxes if b.decorative] == [1]
    assert {b.page for b in boxes if not b.decorative} >= {32, 33, 34, 35, 36, 38, 41, 46}


@pytest.mark.corpus
def test_crops_of_corpus_figures_cut_no_text_line() -> None:
    plain_cuts = 0
    for name in (
        "aemo_SO_OP_3705_Dispatch.pdf",
        "aemo_Marginal_Loss_Factors_for_the_2020-21_Financial_year.pdf",
        "aemo_FCAS_Model_in_NEMDE.pdf",
    ):
        doc = pymupdf.open(corpus_dir() / "pdfs" / name)
        for box in _located(name):
            if box.decorative:
                continue
            page = doc[box.page - 1]
            lines = text_line_boxes(page)
            clip = crop_geometry(box.bbox, page.rect, 1024, text_lines=lines).clip
            assert _cut_lines(clip, lines) == [], (name, box)
            plain_cuts += bool(_cut_lines(crop_geometry(box.bbox, page.rect, 1024).clip, lines))
    # Plain padding cuts a caption or a body line in 38 of these 47 crops.
    assert plain_cuts == 38
