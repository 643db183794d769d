"""Crop geometry, rendering and figure text (kb_shared.ingest.figures).

Geometry is checked arithmetically; rendering through mupdf against a synthetic page whose
drawn rectangles are at known coordinates, so the crop can be checked pixel by pixel.
"""

from __future__ import annotations

import numpy as np
import pymupdf
import pytest

from kb_shared.ingest.figures import (
    EMBED_EDGE_PX,
    FIGURE_TEXT_MAX_CHARS,
    INLINE_EDGE_PX,
    MAX_STORED_EDGE_PX,
    MIN_FIGURE_AREA,
    PAD_FRACTION,
    RENDER_SCALE,
    Box,
    box_from_1000_scale,
    crop_geometry,
    figure_text,
    normalise_box,
    render_all_sizes,
    render_figure,
    text_near_box,
    usable_box,
)

LETTER = Box(0, 0, 612, 792)
A4 = Box(0, 0, 595, 842)


# --------------------------------------------------------------------------------------
# Constants: the values other parts of kb rely on
# --------------------------------------------------------------------------------------
def test_constants_have_the_documented_values() -> None:
    assert (MIN_FIGURE_AREA, PAD_FRACTION, RENDER_SCALE) == (0.03, 0.015, 4)
    assert (MAX_STORED_EDGE_PX, INLINE_EDGE_PX, EMBED_EDGE_PX) == (2048, 1024, 768)
    assert FIGURE_TEXT_MAX_CHARS == 1200


# --------------------------------------------------------------------------------------
# normalise_box / usable_box
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("corners", "expected"),
    [
        ((100, 200, 300, 400), Box(100, 200, 300, 400)),
        ((300, 400, 100, 200), Box(100, 200, 300, 400)),  # both corners swapped
        ((300, 200, 100, 400), Box(100, 200, 300, 400)),  # x swapped only
        ((100, 400, 300, 200), Box(100, 200, 300, 400)),  # y swapped only
    ],
)
def test_normalise_box_sorts_each_axis(corners: tuple, expected: Box) -> None:
    assert normalise_box(*corners) == expected


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_normalise_box_refuses_non_finite(bad: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        normalise_box(0, 0, bad, 10)


@pytest.mark.parametrize(
    "transposed", [(300, 400, 100, 200), (300, 200, 100, 400), (100, 400, 300, 200)]
)
def test_transposed_box_gives_the_same_usable_box_and_crop(transposed: tuple) -> None:
    ordered = (100, 200, 300, 400)
    assert usable_box(transposed, LETTER) == usable_box(ordered, LETTER) == Box(100, 200, 300, 400)
    assert crop_geometry(transposed, LETTER, 2048) == crop_geometry(ordered, LETTER, 2048)


@pytest.mark.parametrize(
    ("box", "expected"),
    [
        ((-50, -20, 200, 300), Box(0, 0, 200, 300)),  # off the top-left corner
        ((400, 500, 700, 900), Box(400, 500, 612, 792)),  # off the bottom-right corner
        ((0, 0, 612, 792), Box(0, 0, 612, 792)),  # exactly the whole page
    ],
)
def test_usable_box_clips_to_the_page(box: tuple, expected: Box) -> None:
    assert usable_box(box, LETTER) == expected


@pytest.mark.parametrize(
    "box",
    [
        (100, 100, 100, 300),  # zero width
        (100, 300, 400, 300),  # zero height
        (700, 100, 800, 300),  # entirely right of the page
        (-300, -300, -10, -10),  # entirely off the top-left
    ],
)
def test_degenerate_boxes_are_rejected(box: tuple) -> None:
    assert usable_box(box, LETTER) is None


def test_tiny_box_is_rejected_before_padding_could_lift_it_over_the_bar() -> None:
    # 110 x 110 pt on Letter = 12,100 pt^2 = 2.50 % of 484,704 pt^2: under the 3 % bar.
    box = (200, 200, 310, 310)
    assert 110 * 110 / LETTER.area == pytest.approx(0.02496, abs=1e-5)
    assert usable_box(box, LETTER) is None
    # Padded (1.5 % of the page per side: 9.18 pt in x, 11.88 pt in y) it would be 3.54 %.
    clip = crop_geometry(box, LETTER, MAX_STORED_EDGE_PX).clip
    assert clip.area / LETTER.area == pytest.approx(0.03542, abs=1e-5)
    assert clip.area > MIN_FIGURE_AREA * LETTER.area


def test_box_at_exactly_the_area_bar_is_kept() -> None:
    page = Box(0, 0, 1000, 1000)  # 3 % = 30,000 pt^2 exactly
    assert usable_box((100, 100, 400, 200), page) == Box(100, 100, 400, 200)  # 300 x 100
    assert usable_box((100, 100, 399, 200), page) is None  # 299 x 100


def test_page_without_area_is_refused() -> None:
    with pytest.raises(ValueError, match="page rectangle has no area"):
        usable_box((0, 0, 10, 10), (0, 0, 0, 792))


# --------------------------------------------------------------------------------------
# box_from_1000_scale
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "page", "expected"),
    [
        # Letter 612 x 792: x = xmin/1000 * 612, y = ymin/1000 * 792.
        ({"ymin": 100, "xmin": 250, "ymax": 500, "xmax": 750}, LETTER, (153.0, 79.2, 459.0, 396.0)),
        ({"ymin": 0, "xmin": 0, "ymax": 1000, "xmax": 1000}, LETTER, (0.0, 0.0, 612.0, 792.0)),
        # A4 595 x 842.
        ({"ymin": 100, "xmin": 250, "ymax": 500, "xmax": 750}, A4, (148.75, 84.2, 446.25, 421.0)),
        ({"ymin": 333, "xmin": 40, "ymax": 910, "xmax": 960}, A4, (23.8, 280.386, 571.2, 766.22)),
        # min and max swapped by the model: sorted, not trusted.
        ({"ymin": 500, "xmin": 750, "ymax": 100, "xmax": 250}, A4, (148.75, 84.2, 446.25, 421.0)),
    ],
)
def test_box_from_1000_scale_exact_points(fields: dict, page: Box, expected: tuple) -> None:
    box = box_from_1000_scale(**fields, page_width=page.width, page_height=page.height)
    assert box.as_tuple() == pytest.approx(expected, abs=1e-9)


def test_box_from_1000_scale_reads_gemini_order_not_x_first() -> None:
    # [ymin, xmin, ymax, xmax] = [0, 0, 1000, 500]: the LEFT half of the page, full height.
    # Read as [x0, y0, x1, y1] it would be the TOP half: a transposed crop.
    box = box_from_1000_scale(0, 0, 1000, 500, page_width=612, page_height=792)
    assert box == Box(0, 0, 306, 792)


def test_box_from_1000_scale_refuses_a_page_without_size() -> None:
    with pytest.raises(ValueError, match="page size must be positive"):
        box_from_1000_scale(0, 0, 10, 10, page_width=0, page_height=792)


# --------------------------------------------------------------------------------------
# crop_geometry
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("box", "page", "expected_clip"),
    [
        # Inside: pad 1.5 % of 612 = 9.18 pt in x, of 792 = 11.88 pt in y.
        ((100, 100, 300, 300), LETTER, (90.82, 88.12, 309.18, 311.88)),
        # Touching the left and top edges: clamped there.
        ((0, 0, 200, 150), LETTER, (0.0, 0.0, 209.18, 161.88)),
        # Near the bottom-right corner: clamped at 612 / 792.
        ((450, 650, 607, 788), LETTER, (440.82, 638.12, 612.0, 792.0)),
        # A4: 8.925 pt in x, 12.63 pt in y.
        ((5, 400, 590, 500), A4, (0.0, 387.37, 595.0, 512.63)),
        # The whole page: padding has nowhere to go.
        ((0, 0, 612, 792), LETTER, (0.0, 0.0, 612.0, 792.0)),
    ],
)
def test_padded_clip_is_inside_the_page(box: tuple, page: Box, expected_clip: tuple) -> None:
    plan = crop_geometry(box, page, MAX_STORED_EDGE_PX)
    assert plan.clip.as_tuple() == pytest.approx(expected_clip, abs=1e-9)
    assert page.x0 <= plan.clip.x0 and plan.clip.x1 <= page.x1
    assert page.y0 <= plan.clip.y0 and plan.clip.y1 <= page.y1


@pytest.mark.parametrize(
    ("box", "edge", "expected_px"),
    [
        # Whole Letter page: scale 4 would give 3168 px on the long (792 pt) edge.
        ((0, 0, 612, 792), MAX_STORED_EDGE_PX, (1583, 2048)),
        ((0, 0, 612, 792), INLINE_EDGE_PX, (792, 1024)),
        ((0, 0, 612, 792), EMBED_EDGE_PX, (594, 768)),
        # A wide box (clip 610.82 x 135.76 pt) is scaled down to fit, not truncated.
        ((10, 200, 602, 312), MAX_STORED_EDGE_PX, (2048, 456)),
        ((10, 200, 602, 312), EMBED_EDGE_PX, (768, 171)),
        # A small box: clip 148.36 x 103.76 pt; scale 4 gives round(593.44) = 593 px on the
        # long edge, under every cap, and 103.76 * 593 / 148.36 = 414.7 -> 415 px.
        ((300, 300, 430, 380), MAX_STORED_EDGE_PX, (593, 415)),
        ((300, 300, 430, 380), INLINE_EDGE_PX, (593, 415)),
        ((300, 300, 430, 380), EMBED_EDGE_PX, (593, 415)),
    ],
)
def test_zoom_caps_the_long_edge(box: tuple, edge: int, expected_px: tuple) -> None:
    plan = crop_geometry(box, LETTER, edge)
    assert (plan.width_px, plan.height_px) == expected_px
    assert max(plan.width_px, plan.height_px) == min(
        round(RENDER_SCALE * max(plan.clip.width, plan.clip.height)), edge
    )


@pytest.mark.parametrize("edge", [MAX_STORED_EDGE_PX, INLINE_EDGE_PX, EMBED_EDGE_PX, 97])
@pytest.mark.parametrize(
    "box", [(100, 100, 300, 300), (10, 200, 602, 312), (33.3, 44.4, 77.7, 500.1), (0, 0, 612, 792)]
)
def test_aspect_ratio_is_kept(box: tuple, edge: int) -> None:
    plan = crop_geometry(box, LETTER, edge)
    # One zoom for both axes: each side is its length in points times the zoom, within 1 px.
    assert abs(plan.width_px - plan.clip.width * plan.zoom) <= 1
    assert abs(plan.height_px - plan.clip.height * plan.zoom) <= 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"box": (0, 0, 10, 10), "max_edge_px": 0}, "max_edge_px must be at least 1"),
        ({"box": (0, 0, 10, 10), "max_edge_px": 100, "scale": 0}, "scale must be positive"),
        ({"box": (700, 0, 800, 10), "max_edge_px": 100}, "no area inside the page"),
    ],
)
def test_crop_geometry_refuses_bad_input(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        crop_geometry(page_rect=LETTER, **kwargs)


# --------------------------------------------------------------------------------------
# Rendering through mupdf
# --------------------------------------------------------------------------------------
RED = (1, 0, 0)
BLUE = (0, 0, 1)


def _page_with(rect: tuple, outside: tuple | None) -> tuple[pymupdf.Document, pymupdf.Page]:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.draw_rect(rect, color=None, fill=RED)
    if outside is not None:
        page.draw_rect(outside, color=None, fill=BLUE)
    return doc, page


def _pixels(png: bytes) -> np.ndarray:
    pix = pymupdf.Pixmap(png)
    assert pix.n == 3  # RGB, no alpha
    return np.frombuffer(pix.samples, dtype=np.uint8).reshape(pix.height, pix.width, 3)


def _extent(mask: np.ndarray) -> tuple[int, int, int, int]:
    ys, xs = np.nonzero(mask)
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


@pytest.mark.parametrize(
    ("red", "blue", "expected_long_edges"),
    [
        # Clip 218.36 x 173.76 pt: scale 4 = 873 px, under the stored and inline caps.
        ((200, 300, 400, 450), (450, 600, 550, 700), (873, 873, 768)),
        # Clip 528.36 x 663.76 pt: scale 4 = 2655 px, capped at every size.
        ((50, 60, 560, 700), (10, 740, 100, 780), (2048, 1024, 768)),
    ],
)
def test_render_lands_on_the_authored_rectangle(
    red: tuple, blue: tuple, expected_long_edges: tuple
) -> None:
    doc, page = _page_with(red, blue)
    with doc:
        renders = render_all_sizes(page, red)
        for render, edge, expected in zip(
            (renders.stored, renders.inline, renders.embed),
            (MAX_STORED_EDGE_PX, INLINE_EDGE_PX, EMBED_EDGE_PX),
            expected_long_edges,
            strict=True,
        ):
            plan = crop_geometry(red, page.rect, edge)
            px = _pixels(render.png)
            assert (render.width, render.height) == (px.shape[1], px.shape[0])
            assert (render.width, render.height) == (plan.width_px, plan.height_px)
            assert max(render.width, render.height) == expected
            # Aspect ratio: one zoom on both axes, each side within one pixel of the clip's.
            assert abs(render.width - plan.clip.width * plan.zoom) <= 1
            assert abs(render.height - plan.clip.height * plan.zoom) <= 1

            is_red = (px[..., 0] > 200) & (px[..., 1] < 60) & (px[..., 2] < 60)
            x0, y0, x1, y1 = _extent(is_red)
            z = plan.zoom
            want = (
                (red[0] - plan.clip.x0) * z,
                (red[1] - plan.clip.y0) * z,
                (red[2] - plan.clip.x0) * z,
                (red[3] - plan.clip.y0) * z,
            )
            assert (x0, y0, x1, y1) == pytest.approx(want, abs=1.5)
            # The whole rectangle is in the crop, with the padding as margin on every side.
            margin_x, margin_y = PAD_FRACTION * 612 * z, PAD_FRACTION * 792 * z
            assert x0 >= margin_x - 1.5 and y0 >= margin_y - 1.5
            assert render.width - x1 >= margin_x - 1.5
            assert render.height - y1 >= margin_y - 1.5
            # Nothing drawn outside the padded box shows up in the crop.
            is_blue = (px[..., 2] > 200) & (px[..., 0] < 60) & (px[..., 1] < 60)
            assert not is_blue.any()


def test_each_size_is_a_fresh_render_not_a_resize() -> None:
    # A 1 pt hairline stays crisp at every size: a downscaled copy would smear it to grey.
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    page.draw_rect((60, 60, 560, 700), color=(0, 0, 0), width=1)
    page.draw_line((300, 100), (300, 650), color=(0, 0, 0), width=1)
    with doc:
        renders = render_all_sizes(page, (60, 60, 560, 700))
        for render in (renders.stored, renders.inline, renders.embed):
            px = _pixels(render.png)
            column = px[px.shape[0] // 2, :, 0]
            assert column.min() < 90  # the line reaches near-black at every size


def test_render_figure_transposed_box_gives_identical_png() -> None:
    doc, page = _page_with((200, 300, 400, 450), None)
    with doc:
        ordered = render_figure(page, (200, 300, 400, 450), INLINE_EDGE_PX)
        transposed = render_figure(page, (400, 450, 200, 300), INLINE_EDGE_PX)
    assert ordered == transposed
    assert ordered[:8] == b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------------------
# Figure text
# --------------------------------------------------------------------------------------
def test_figure_text_is_caption_then_nearby_text() -> None:
    assert (
        figure_text("Figure 3  Dispatch\nlogic", "Start  \n Check   target\nEnd")
        == "Figure 3 Dispatch logic\nStart Check target End"
    )


def test_figure_text_does_not_repeat_the_caption() -> None:
    near = "Figure 3 Dispatch logic Start Check target"
    expected = "Figure 3 Dispatch logic\nStart Check target"
    assert figure_text("Figure 3 Dispatch logic", near) == expected


@pytest.mark.parametrize(
    ("caption", "near", "expected"),
    [("", "only text", "only text"), ("Figure 1", "", "Figure 1"), ("", "  ", "")],
)
def test_figure_text_with_a_part_missing(caption: str, near: str, expected: str) -> None:
    assert figure_text(caption, near) == expected


def test_figure_text_is_bounded_at_a_word_boundary() -> None:
    near = " ".join(f"word{i:04d}" for i in range(400))  # 3,599 chars
    text = figure_text("Figure 9 Long", near)
    assert len(text) <= FIGURE_TEXT_MAX_CHARS
    assert text.endswith("…")
    assert text.startswith("Figure 9 Long\nword0000 word0001")
    # Cut after a whole word: 13 + 1 + 131 words of 8 chars + 130 spaces + "…" = 1,193.
    assert text[:-1].endswith("word0130")
    assert len(text) == 1193


def test_figure_text_refuses_a_zero_bound() -> None:
    with pytest.raises(ValueError, match="max_chars must be at least 1"):
        figure_text("a", "b", max_chars=0)


def test_text_near_box_takes_blocks_inside_and_just_above_or_below() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=612, height=792)
    box = (100, 300, 400, 500)
    page.insert_text((120, 250), "Far above the figure")  # 50 pt above: left out
    page.insert_text((120, 285), "Figure 4 Flow of notices")  # ~12 pt above: in
    page.insert_text((150, 400), "Inside label")  # inside: in
    page.insert_text((120, 520), "Note under the figure")  # ~12 pt below: in
    page.insert_text((450, 400), "Beside in the margin")  # beside, no overlap in x: out
    page.insert_text((120, 700), "Next section heading")  # 190 pt below: out
    with doc:
        near = text_near_box(page, box)
    assert near.splitlines() == [
        "Figure 4 Flow of notices",
        "Inside label",
        "Note under the figure",
    ]
