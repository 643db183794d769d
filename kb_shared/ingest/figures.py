"""Figure geometry, rendering and text: the part of the ``figures`` asset that needs no model.

A figure is located (``kb_shared.providers`` ``FigureLocator``) as a box on a page; this
module turns that box into PNG crops and into the text its vector is embedded from.

Coordinates are PDF points (1/72 inch) in pymupdf's page space: origin top-left, ``x``
rightwards, ``y`` downwards, ``(x0, y0, x1, y1)``. The rules, and where they come from
(``reference/mcp-utilities-README.txt``, "Figures"):

* A box is never trusted to be ordered: min and max are sorted on each axis, so a box whose
  corners come back swapped is recovered instead of cropping a transposed sliver.
* A box covering less than :data:`MIN_FIGURE_AREA` of the page is not a figure (a header
  logo is under 1 % of a page, a process diagram well into double figures). The check runs on
  the box *before* padding, so the margin cannot lift a logo over the bar.
* Every crop is padded by :data:`PAD_FRACTION` of the page on each axis, clamped to the page:
  a clipped axis label is lost for good, while surrounding whitespace costs almost nothing.
  The padding never cuts a text line that lies outside the box (typically the "Figure 1 ..."
  caption set a few points under or over the figure): a line at least half inside the
  padding and no wider than the crop is taken whole, any other is left out (the padding
  stops at its near edge), so an edge moves out by at most half a line. A line wider than
  the crop is left out even when the padding would hold it, since it is cut at its ends.
  Captions are not pulled into the box instead: the caption is the figure's metadata
  already, the box stays what was drawn (and what the locator's tests pin), and a crop edge
  would then cut the line after the caption just the same.
* Each size is a fresh rasterisation of the same clip rectangle (mupdf renders from the PDF
  each time), never a downscale of another render, so no copy loses detail to another.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:  # pymupdf is only needed by the rendering helpers, not the geometry
    import pymupdf

#: Smallest figure, as a fraction of the page area, checked on the unpadded box. A header
#: logo is under 1 % of a page while a process diagram is well into double figures
#: (mcp-utilities README, "Figures": MIN_FIGURE_AREA).
MIN_FIGURE_AREA = 0.03

#: Padding added on each side of a box, as a fraction of the page's width (x) and height (y),
#: clamped to the page (mcp-utilities README, "Figures": FIGURE_BOX_PADDING, 1.5 %).
PAD_FRACTION = 0.015

#: Render zoom for the stored crop: 4 x 72 DPI = 288 DPI, generous enough for a reader to
#: study a dense diagram (mcp-utilities README, "Figures").
RENDER_SCALE = 4

#: Longest edge of the stored PNG. It is what a reader opens; no API limit applies to it,
#: the cap only bounds storage (mcp-utilities README, "Figures": capped at 2048 px).
MAX_STORED_EDGE_PX = 2048

#: Longest edge of the copy the MCP server returns inline as image content. Anthropic bills
#: an image by area, about ``width * height / 750`` tokens (Claude vision docs, "Calculate
#: image costs"), so a 1024 px square is ~1,400 tokens against ~5,600 for the 2048 px copy.
INLINE_EDGE_PX = 1024

#: Longest edge of the copy sent as the image part of a multimodal embedding request
#: (mcp-utilities README, "Figures": "a second, smaller render (768px)"; Gemini tiles images
#: at 768 x 768, so a larger copy only adds tokens to the request's 8,192-token budget).
EMBED_EDGE_PX = 768

#: Longest figure text kept for embedding. ~300 tokens: four figures' texts plus their
#: 768 px images stay well inside Gemini embedding's 8,192-token request budget (the README's
#: MAX_FIGURES_PER_EMBED_REQUEST = 4), and it is about what a 256-token local encoder reads.
FIGURE_TEXT_MAX_CHARS = 1200

#: A text line counts as lying outside a box on one side when it overlaps the box by at most
#: this much (points): line boxes include the font's ascent and descent, which can reach a
#: point or so past the glyphs into the box (:func:`crop_geometry`).
TEXT_EDGE_TOLERANCE_PT = 1.0

#: How far above or below a box a text block may start/end and still count as "near" it
#: (points; 36 pt = half an inch, about three lines of body text).
NEAR_TEXT_DISTANCE_PT = 36.0


@dataclass(frozen=True, slots=True)
class Box:
    """An axis-aligned rectangle in PDF points, ordered (``x0 <= x1``, ``y0 <= y1``).

    Build one with :func:`normalise_box` (which sorts) rather than directly when the corner
    order is not known. Origin top-left, as pymupdf reports page coordinates.
    """

    x0: float
    y0: float
    x1: float
    y1: float

    @property
    def width(self) -> float:
        """Width in points."""
        return self.x1 - self.x0

    @property
    def height(self) -> float:
        """Height in points."""
        return self.y1 - self.y0

    @property
    def area(self) -> float:
        """Area in square points."""
        return self.width * self.height

    def as_tuple(self) -> tuple[float, float, float, float]:
        """``(x0, y0, x1, y1)``, the form ``FigureBox.bbox`` and pymupdf ``Rect`` take."""
        return (self.x0, self.y0, self.x1, self.y1)


#: Anything with four coordinates: a :class:`Box`, a tuple, or a pymupdf ``Rect``.
BoxLike = Union[Box, Sequence[float], "pymupdf.Rect"]


@dataclass(frozen=True, slots=True)
class CropPlan:
    """How to render one figure: the clip rectangle and the zoom.

    Attributes:
        clip: the padded box, clamped to the page (points).
        zoom: pixels per point, the same on both axes so the aspect ratio is kept exactly.
        width_px: width of the rendered image in pixels.
        height_px: height of the rendered image in pixels. The longer of the two equals
            ``min(round(scale * long edge in points), max_edge_px)``; the shorter is
            ``short edge * zoom`` rounded up (mupdf rounds a clip outwards to whole pixels).
    """

    clip: Box
    zoom: float
    width_px: int
    height_px: int


@dataclass(frozen=True, slots=True)
class RenderedFigure:
    """One PNG render of a figure's clip and its pixel size."""

    png: bytes
    width: int
    height: int


@dataclass(frozen=True, slots=True)
class FigureRenders:
    """The three renders of one figure, each a fresh rasterisation of the same clip.

    Attributes:
        stored: scale :data:`RENDER_SCALE` (~288 DPI) capped at :data:`MAX_STORED_EDGE_PX`;
            saved to blobs, what a reader opens.
        inline: capped at :data:`INLINE_EDGE_PX`; returned by the MCP server as image content.
        embed: capped at :data:`EMBED_EDGE_PX`; the image part of the embedding request.
    """

    stored: RenderedFigure
    inline: RenderedFigure
    embed: RenderedFigure


def _four(box: BoxLike) -> tuple[float, float, float, float]:
    if isinstance(box, Box):
        return box.as_tuple()
    values = tuple(float(v) for v in box)
    if len(values) != 4:
        raise ValueError(f"a box needs four coordinates (x0, y0, x1, y1), got {len(values)}")
    return values  # type: ignore[return-value]


def normalise_box(a: float, b: float, c: float, d: float) -> Box:
    """Order a box given as two corners ``(a, b)`` and ``(c, d)`` in points.

    ``x0 = min(a, c)``, ``x1 = max(a, c)`` and likewise for ``y``: which number is the near
    edge is the one thing left to get backwards, and sorting costs nothing.

    Raises:
        ValueError: a coordinate is NaN or infinite.
    """
    values = (float(a), float(b), float(c), float(d))
    if not all(math.isfinite(v) for v in values):
        raise ValueError(f"box coordinates must be finite numbers, got {values}")
    return Box(min(a, c), min(b, d), max(a, c), max(b, d))


def usable_box(
    box: BoxLike, page: BoxLike, min_area_fraction: float = MIN_FIGURE_AREA
) -> Box | None:
    """Return ``box`` ordered and clipped to ``page``, or ``None`` if it is not a figure.

    Args:
        box: the located box, corners in any order (points).
        page: the page rectangle (points), e.g. ``page.rect``.
        min_area_fraction: smallest area kept, as a fraction of the page area; checked on
            the clipped box *before* any padding (default :data:`MIN_FIGURE_AREA`).

    Returns:
        The clipped :class:`Box`, or ``None`` when it is degenerate (zero width or height,
        or nothing left inside the page) or smaller than ``min_area_fraction`` of the page.

    Raises:
        ValueError: a coordinate is not finite, or the page itself has no area.
    """
    page_box = normalise_box(*_four(page))
    if page_box.area <= 0:
        raise ValueError(f"page rectangle has no area: {page_box.as_tuple()}")
    ordered = normalise_box(*_four(box))
    clipped = Box(
        max(ordered.x0, page_box.x0),
        max(ordered.y0, page_box.y0),
        min(ordered.x1, page_box.x1),
        min(ordered.y1, page_box.y1),
    )
    if clipped.width <= 0 or clipped.height <= 0:
        return None
    if clipped.area < min_area_fraction * page_box.area:
        return None
    return clipped


def box_from_1000_scale(
    ymin: float, xmin: float, ymax: float, xmax: float, page_width: float, page_height: float
) -> Box:
    """Convert a box on the 0–1000 normalised scale to PDF points.

    The arguments are named and ordered as Gemini's own box convention,
    ``[ymin, xmin, ymax, xmax]`` with each value in 0–1000 of the page's height or width
    (Gemini API docs, "Object detection"). Callers should pass the model's named fields by
    keyword, never positionally from an array. Min and max are still sorted, not trusted.

    Args:
        ymin, xmin, ymax, xmax: edges on the 0–1000 scale (values outside it are kept and
            left for :func:`usable_box` to clip).
        page_width, page_height: the page size in points (e.g. 612 x 792 for Letter).

    Returns:
        The box in points, ordered.

    Raises:
        ValueError: a value is not finite, or the page size is not positive.
    """
    if not (page_width > 0 and page_height > 0):
        raise ValueError(f"page size must be positive, got {page_width} x {page_height}")
    return normalise_box(
        xmin / 1000.0 * page_width,
        ymin / 1000.0 * page_height,
        xmax / 1000.0 * page_width,
        ymax / 1000.0 * page_height,
    )


def _pixels(length_pt: float, zoom: float) -> int:
    # mupdf rounds a transformed clip outwards with a 0.001 px tolerance (fz_round_rect);
    # with the clip's origin translated to (0, 0) that is a ceiling of the length.
    return max(1, math.ceil(length_pt * zoom - 0.001))


def _settle(pad: float, limit: float, spans: Sequence[tuple[float, float, bool]]) -> float:
    """How far one edge of the clip goes out from the box (points), given the text lines
    beyond it as ``(near, far, fits)``: distances from the box's edge, and whether the line
    fits inside the clip on the other axis.

    Starts at ``pad``; going outwards, a line that fits across is kept when it is inside
    and taken whole when at least half of it is (the edge moves out to its far side); the
    first line mostly outside, or too wide for the clip (it would be cut on the other axis
    whatever this edge does), stops the edge at its near side. Never beyond ``limit`` (the
    page edge), never inside the box.
    """
    reach = pad
    for near, far, fits in sorted(spans):
        if near >= reach:
            break  # wholly outside, as is every line after it
        if fits and (far <= reach or reach - near >= (far - near) / 2):
            reach = max(reach, far)  # inside, or mostly inside: take it whole
        else:
            reach = near  # mostly outside, or cut across anyway: stop before it
            break
    return min(max(reach, 0.0), limit)


def _fit_to_text(box: Box, clip: Box, page: Box, text_lines: Sequence[Box]) -> Box:
    """Move each padded edge of ``clip`` so that it cuts no text line lying outside ``box``
    on that side (within :data:`TEXT_EDGE_TOLERANCE_PT`); see :func:`_settle`."""
    tol = TEXT_EDGE_TOLERANCE_PT
    across_x = [
        (t, clip.x0 <= t.x0 and t.x1 <= clip.x1)
        for t in text_lines
        if t.x0 < clip.x1 and t.x1 > clip.x0
    ]
    below = [(t.y0 - box.y1, t.y1 - box.y1, f) for t, f in across_x if t.y0 >= box.y1 - tol]
    above = [(box.y0 - t.y1, box.y0 - t.y0, f) for t, f in across_x if t.y1 <= box.y0 + tol]
    y0 = box.y0 - _settle(box.y0 - clip.y0, box.y0 - page.y0, above)
    y1 = box.y1 + _settle(clip.y1 - box.y1, page.y1 - box.y1, below)
    across_y = [(t, y0 <= t.y0 and t.y1 <= y1) for t in text_lines if t.y0 < y1 and t.y1 > y0]
    right = [(t.x0 - box.x1, t.x1 - box.x1, f) for t, f in across_y if t.x0 >= box.x1 - tol]
    left = [(box.x0 - t.x1, box.x0 - t.x0, f) for t, f in across_y if t.x1 <= box.x0 + tol]
    x0 = box.x0 - _settle(box.x0 - clip.x0, box.x0 - page.x0, left)
    x1 = box.x1 + _settle(clip.x1 - box.x1, page.x1 - box.x1, right)
    return Box(x0, y0, x1, y1)


def crop_geometry(
    box: BoxLike,
    page_rect: BoxLike,
    max_edge_px: int,
    scale: float = RENDER_SCALE,
    text_lines: Sequence[BoxLike] = (),
) -> CropPlan:
    """Plan the render of ``box``: pad, clamp to the page, and choose the zoom.

    The clip is the box grown by :data:`PAD_FRACTION` of the page's width on the left and
    right and of its height on the top and bottom, then clamped to the page. Where that
    padding would cut one of ``text_lines`` lying outside the box (a caption under the
    figure, the next paragraph), the edge moves so the line is whole or absent: out to the
    line's far side when at least half of it is inside the padding and it fits inside the
    clip on the other axis, else back to its near side (never into the box, never off the
    page). The zoom makes the clip's long edge ``min(round(scale * long edge in points),
    max_edge_px)`` pixels; a wide box is scaled down to fit, never truncated, and both axes
    share the zoom.

    Args:
        box: the figure box in points (corners in any order); clipped to the page first.
        page_rect: the page rectangle in points.
        max_edge_px: cap on the rendered long edge (e.g. :data:`MAX_STORED_EDGE_PX`).
        scale: pixels per point before the cap (:data:`RENDER_SCALE` = 288 DPI).
        text_lines: the page's text line boxes in points (e.g. :func:`text_line_boxes`);
            empty for plain padding.

    Raises:
        ValueError: ``max_edge_px`` or ``scale`` is not positive, or the box has no area
            inside the page.
    """
    if max_edge_px < 1:
        raise ValueError(f"max_edge_px must be at least 1, got {max_edge_px}")
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale}")
    page = normalise_box(*_four(page_rect))
    inside = usable_box(box, page, min_area_fraction=0.0)
    if inside is None:
        raise ValueError(
            f"box {_four(box)} has no area inside the page {page.as_tuple()}; nothing to crop"
        )
    pad_x = PAD_FRACTION * page.width
    pad_y = PAD_FRACTION * page.height
    clip = Box(
        max(page.x0, inside.x0 - pad_x),
        max(page.y0, inside.y0 - pad_y),
        min(page.x1, inside.x1 + pad_x),
        min(page.y1, inside.y1 + pad_y),
    )
    if text_lines:
        lines = [normalise_box(*_four(t)) for t in text_lines]
        clip = _fit_to_text(inside, clip, page, lines)
    long_pt = max(clip.width, clip.height)
    long_px = max(1, min(round(scale * long_pt), int(max_edge_px)))
    zoom = long_px / long_pt
    if clip.width >= clip.height:
        width_px, height_px = long_px, min(long_px, _pixels(clip.height, zoom))
    else:
        width_px, height_px = min(long_px, _pixels(clip.width, zoom)), long_px
    return CropPlan(clip=clip, zoom=zoom, width_px=width_px, height_px=height_px)


def _render(page: pymupdf.Page, plan: CropPlan) -> RenderedFigure:
    import pymupdf

    z = plan.zoom
    # Translate the clip's origin to pixel (0, 0) so the long edge comes out at exactly
    # long_px instead of one pixel more when the clip starts between two pixels.
    matrix = pymupdf.Matrix(z, 0, 0, z, -plan.clip.x0 * z, -plan.clip.y0 * z)
    pix = page.get_pixmap(matrix=matrix, clip=pymupdf.Rect(plan.clip.as_tuple()), alpha=False)
    return RenderedFigure(png=pix.tobytes("png"), width=pix.width, height=pix.height)


def text_line_boxes(page: pymupdf.Page) -> list[Box]:
    """The boxes (points) of the page's non-empty text lines, as pymupdf's ``"dict"`` text
    extraction reports them (font ascent to descent, in the page's unrotated space)."""
    import pymupdf

    data = page.get_text("dict", flags=pymupdf.TEXTFLAGS_TEXT)
    return [
        normalise_box(*line["bbox"])
        for block in data["blocks"]
        if block.get("type") == 0
        for line in block["lines"]
        if any(span["text"].strip() for span in line["spans"])
    ]


def render_figure(
    page: pymupdf.Page, box: BoxLike, max_edge_px: int, scale: float = RENDER_SCALE
) -> bytes:
    """Render the padded clip of ``box`` on ``page`` to PNG bytes.

    The long edge is ``min(scale * long edge in points, max_edge_px)`` pixels (see
    :func:`crop_geometry`, given the page's :func:`text_line_boxes`, so the padding cuts no
    text line outside the box); the image is RGB without alpha.

    Raises:
        ValueError: as :func:`crop_geometry`.
    """
    plan = crop_geometry(box, page.rect, max_edge_px, scale, text_line_boxes(page))
    return _render(page, plan).png


def render_all_sizes(page: pymupdf.Page, box: BoxLike) -> FigureRenders:
    """Render ``box`` three times from the PDF: stored (2048), inline (1024), embed (768).

    Each size is its own rasterisation of the same clip at scale :data:`RENDER_SCALE`
    capped at that size's edge, not a resize of another render. A figure small enough that
    scale 4 is under a cap comes out at scale 4 for that size (so two sizes may match). The
    clip is :func:`crop_geometry`'s with the page's :func:`text_line_boxes`: its padding
    cuts no text line outside the box.

    Raises:
        ValueError: as :func:`crop_geometry`.
    """
    lines = text_line_boxes(page)
    renders = [
        _render(page, crop_geometry(box, page.rect, edge, text_lines=lines))
        for edge in (MAX_STORED_EDGE_PX, INLINE_EDGE_PX, EMBED_EDGE_PX)
    ]
    return FigureRenders(stored=renders[0], inline=renders[1], embed=renders[2])


_SPACES = re.compile(r"\s+")


def _squash(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def text_near_box(
    page: pymupdf.Page, box: BoxLike, distance_pt: float = NEAR_TEXT_DISTANCE_PT
) -> str:
    """The page's text that belongs with a figure: blocks inside, overlapping, or just
    above or below ``box``.

    A text block counts when it overlaps the box, or when it overlaps the box horizontally
    and its gap to the box's top or bottom edge is at most ``distance_pt`` points. Blocks
    are returned in reading order (top, then left), separated by newlines.
    """
    target = normalise_box(*_four(box))
    picked: list[tuple[float, float, str]] = []
    for x0, y0, x1, y1, text, _no, kind in page.get_text("blocks"):
        if kind != 0 or not text.strip():
            continue
        overlaps_x = x0 < target.x1 and x1 > target.x0
        overlaps_y = y0 < target.y1 and y1 > target.y0
        above = 0 <= target.y0 - y1 <= distance_pt
        below = 0 <= y0 - target.y1 <= distance_pt
        if overlaps_x and (overlaps_y or above or below):
            picked.append((y0, x0, _squash(text)))
    picked.sort()
    return "\n".join(text for _y, _x, text in picked)


def figure_text(
    caption: str, page_text_near_box: str, max_chars: int = FIGURE_TEXT_MAX_CHARS
) -> str:
    """The text a figure is embedded and searched by: its caption, then the text near it.

    Whitespace runs collapse to one space; a caption repeated inside the nearby text is not
    repeated. The result is cut to ``max_chars`` at the last word boundary (an ellipsis
    ``…`` marks the cut), because the embedding request shares one token budget between the
    figures' texts and their images (see :data:`FIGURE_TEXT_MAX_CHARS`).

    Args:
        caption: caption or description (``"Figure 3 Dispatch conformance logic"``), may be
            empty.
        page_text_near_box: text from around the figure, e.g. :func:`text_near_box`.
        max_chars: the bound, at least 1.

    Returns:
        ``"caption\\nnearby text"`` (either part may be absent), at most ``max_chars`` long.

    Raises:
        ValueError: ``max_chars`` is less than 1.
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}")
    head = _squash(caption)
    near = _squash(page_text_near_box)
    if head and head in near:
        near = _squash(near.replace(head, " ", 1))
    text = "\n".join(part for part in (head, near) if part)
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - 1]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    if space > max_chars // 2:
        cut = cut[:space]
    return cut.rstrip() + "…"
