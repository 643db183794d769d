"""Local figure locator: finds figures from the PDF's own drawing and image operators.

No model and no network. Three sources of candidate boxes, per page:

1. **Vector drawings** (``page.get_drawings()``). Each path is sorted into one of:

   * *furniture*, ignored: invisible paths (white or fully transparent), paths that bleed
     off a page edge (backgrounds, cover art), paths covering most of the page (frames),
     and anything inside the top/bottom margin bands (running headers, footer rules, logos);
   * *rules*: horizontal or vertical lines and rectangles thinner than
     :data:`RULE_MAX_THICKNESS_PT`: table grids, underlines, separators, but also a chart's
     gridlines and a flowchart's straight connectors. A rule never starts a figure; it only
     joins one it touches (and so can link two parts of one diagram);
   * *seeds*: everything else: curves, diagonals (a segment off the axis by more than
     :data:`AXIS_SLOPE_TOLERANCE` of its length), polygons, filled or stroked boxes.

   Seeds whose gap is at most :data:`CLUSTER_GAP_PT` join one cluster. A cluster is a figure
   unless it is one of:

   * *table-like*: its filled axis-aligned rectangles cover at least
     :data:`TABLE_FILL_COVERAGE` of it (shaded table cells, a shaded note box) and it has
     little else (curves, diagonals and pictures spread over under
     :data:`GRAPHIC_MIN_COVERAGE` of it), since a diagram of boxes leaves most of its area
     as gaps for connectors;
   * a *ruled table*: it has little graphic content (as above) and pymupdf's table finder
     (``page.find_tables``, run only on pages where such a cluster survives) sees a grid of
     text over at least :data:`TABLE_GRID_COVERAGE` of it: tables drawn as stroked cell
     rectangles, which fill nothing. The grid must tile its box
     (:data:`TABLE_CELL_TILING`) and hold text in nearly every cell
     (:data:`TABLE_TEXT_CELL_FRACTION`), which a flowchart's boxes and a chart's gridlines
     do not.

2. **Raster images** (``page.get_image_info()``). An image of at least ``MIN_FIGURE_AREA``
   of the page is a seed; a smaller one (a label or icon drawn as an image) only joins a
   cluster it comes within ``CLUSTER_GAP_PT`` of, and a small one in a margin band (a logo)
   is dropped.

3. **The converter's regions** (``FigureRegion``, e.g. pymupdf4llm layout ``picture``
   boxes). A region that overlaps a detected box adds nothing (the detected box is tighter,
   and a layout box often spans two figures and the text between them); a region that
   overlaps none is kept as given, unless it lies mostly inside a cluster judged
   table-like or a ruled table (:data:`REJECTED_OVERLAP`). A region without a bbox (the
   converter knows only the page) on a page where nothing is found falls back to the whole
   page, since a page is worth more than a dropped figure (mcp-utilities README, "Figures").

A cluster's drawn extent must reach ``MIN_FIGURE_AREA`` of the page (so text alone never
makes a figure); it then grows to the short text lines around it (axis titles, labels;
not body text, not captions). Boxes that overlap or nearly touch merge. Decorative marks
that pass the size bar are returned with ``decorative=True``: images that bleed off the
page or cover most of it (cover art, page backgrounds), banners spanning
:data:`BANNER_WIDTH_FRACTION` of the page width, and boxes in a margin band repeated at the
same place on most pages (logos, letterheads).

The caption is the nearest line starting "Figure", "Fig." or "Diagram" (with the rest of
its text block) within :data:`CAPTION_DISTANCE_PT` above or below the box, each caption used
once per page; else the caption of an overlapping converter region; else empty.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pymupdf

from kb_shared.errors import ConversionError
from kb_shared.ingest.figures import MIN_FIGURE_AREA, Box, normalise_box, usable_box
from kb_shared.providers.base import FigureBox, FigureLocator, FigureRegion

#: Seeds whose rectangles are at most this far apart (points, on both axes) are one figure.
#: About one line of 10 pt text: the parts of a diagram sit closer than that to each other
#: or to an arrowhead between them, while a figure and the next paragraph are usually
#: separated by more.
CLUSTER_GAP_PT = 12.0

#: A horizontal or vertical path thinner than this (points) is a rule: a table line, an
#: underline or a separator. Body-text rules and table borders are 0.25-2 pt.
RULE_MAX_THICKNESS_PT = 3.0

#: A line segment is horizontal or vertical when it runs at most this far off the axis per
#: unit of length (tan 5.7°) and under 0.5 pt in all. The relative bound matters for pgfplots
#: and similar tools, which draw a plotted line as hundreds of segments each a fraction of
#: a point long.
AXIS_SLOPE_TOLERANCE = 0.1

#: A rule joins a figure it comes within this distance of (points).
RULE_TOUCH_PT = 2.0

#: A cluster whose filled axis-aligned rectangles cover at least this fraction of its box is
#: a table or a shaded note box, not a figure (measured on the AEMO corpus: shaded tables and
#: note boxes cover 0.55-1.0 of their box, box-and-connector diagrams well under half).
TABLE_FILL_COVERAGE = 0.5

#: ... unless its curves, diagonals and pictures spread over at least this fraction of it: a
#: chart on a shaded plot area, rather than a table with an icon in one cell.
GRAPHIC_MIN_COVERAGE = 0.2

#: A cluster that pymupdf's table finder reads as a grid (at least :data:`TABLE_MIN_ROWS`
#: rows and :data:`TABLE_MIN_COLUMNS` columns, text in at least
#: :data:`TABLE_TEXT_CELL_FRACTION` of its cells) covering at least this fraction of the
#: cluster's box is a ruled table, whatever draws its cells (stroked cell rectangles,
#: lines, fills). The sample procedure's three tables cover 1.0 of their cluster; the bar
#: leaves room for a table drawn together with a note box or an icon beside it.
TABLE_GRID_COVERAGE = 0.6

#: A grid is a table only when at least this fraction of its cells hold a word (whose
#: centre lies in the cell). Measured: the sample procedure's tables 1.0; grids the finder
#: reads into charts (gridlines, a plot frame, a legend box) 0.04-0.5 in the AEMO corpus
#: and 0.57 in the GeoTopo notes (page 23). Keeping a table as a figure costs less than
#: dropping a chart, so the bar sits well above the charts.
TABLE_TEXT_CELL_FRACTION = 0.75

#: A grid is a table only when its cells tile at least this fraction of its bounding box.
#: The line strategy also reads a diagram of boxes laid out in rows and columns as a grid,
#: with cells only where boxes and connectors happen to close a rectangle (the synthetic
#: flow diagram in the tests: 5 cells over 52 % of its box); a table's cells, merged or
#: not, fill its box.
TABLE_CELL_TILING = 0.9

#: Smallest grid taken as a table: a single row or column is a box or a bar, not a table.
TABLE_MIN_ROWS = 2
TABLE_MIN_COLUMNS = 2

#: Depth (points) of the top and bottom bands of a page where running headers, footers and
#: logos live: one inch, the usual page margin (the AEMO headers end 66-70 pt down). Capped
#: at a quarter of the page height for very short pages.
MARGIN_BAND_PT = 72.0

#: A path or image at least this fraction of the page's width inside a margin band is a
#: header/footer bar.
BAR_MIN_WIDTH_FRACTION = 0.6

#: A box at least this fraction of the page's width is a banner (cover art, letterhead):
#: figures sit inside the text margins, which take 15-25 % of a page's width.
BANNER_WIDTH_FRACTION = 0.9

#: A path or image covering at least this fraction of the page is a page background/frame.
BACKGROUND_AREA_FRACTION = 0.8

#: Within this distance (points) of a page edge, a path or image "bleeds" off the page:
#: printed designs that run to the edge are covers and backgrounds, not figures.
BLEED_PT = 1.0

#: A text line joins a figure when it is within this distance (points) of the figure's box
#: and no wider than :data:`LABEL_MAX_WIDTH_FRACTION` of the page: axis titles and labels.
LABEL_GAP_PT = 12.0

#: Widest text line taken as a label, as a fraction of the page width; body text lines run
#: the full column (70-80 % of an A4 page) and are left out.
LABEL_MAX_WIDTH_FRACTION = 0.45

#: A converter region lying at least this fraction inside a cluster judged table-like (a
#: shaded table, a note box, a cover panel) is that same non-figure, not a picture.
REJECTED_OVERLAP = 0.5

#: How far above or below a box (points) a "Figure ..." line is taken as its caption.
CAPTION_DISTANCE_PT = 48.0

#: Longest caption kept (characters).
CAPTION_MAX_CHARS = 300

#: A box inside a margin band seen at the same place on at least this fraction of the pages
#: (and on at least 3 pages) is a repeated mark: a logo or letterhead.
REPEATED_PAGE_FRACTION = 0.5

_CAPTION = re.compile(r"^\s*(figure|fig\.|diagram)\s*\S", re.IGNORECASE)
_NOT_LABEL = re.compile(r"^\s*(figure|fig\.|diagram|table)\b", re.IGNORECASE)


# --------------------------------------------------------------------------------------
# Rectangle helpers (plain floats: pymupdf.Rect arithmetic dominates the run time otherwise)
# --------------------------------------------------------------------------------------
def _gap(a: Box, b: Box) -> tuple[float, float]:
    """Horizontal and vertical gaps between two boxes (0 where they overlap on that axis)."""
    return max(0.0, a.x0 - b.x1, b.x0 - a.x1), max(0.0, a.y0 - b.y1, b.y0 - a.y1)


def _near(a: Box, b: Box, gap: float) -> bool:
    dx, dy = _gap(a, b)
    return dx <= gap and dy <= gap


def _union(boxes: Iterable[Box]) -> Box:
    boxes = list(boxes)
    return Box(
        min(b.x0 for b in boxes),
        min(b.y0 for b in boxes),
        max(b.x1 for b in boxes),
        max(b.y1 for b in boxes),
    )


def _intersection_area(a: Box, b: Box) -> float:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w * h if w > 0 and h > 0 else 0.0


def _contains(outer: Box, inner: Box) -> bool:
    return (
        outer.x0 <= inner.x0 and outer.y0 <= inner.y0 and outer.x1 >= inner.x1
        and outer.y1 >= inner.y1
    )


#: Pairwise distances computed per step of :func:`_components` (elements of each array).
_PAIR_BUDGET = 1_000_000


def _components(boxes: Sequence[Box], gap: float) -> list[list[int]]:
    """Group boxes into connected components of "within ``gap`` on both axes"."""
    n = len(boxes)
    if n == 0:
        return []
    a = np.array([b.as_tuple() for b in boxes], dtype=np.float64)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    # Rows in chunks so a page of many thousand paths stays within a few MB per step.
    step = max(1, _PAIR_BUDGET // n)
    for start in range(0, n, step):
        rows = a[start : start + step]
        dx = np.maximum(rows[:, None, 0] - a[None, :, 2], a[None, :, 0] - rows[:, None, 2])
        dy = np.maximum(rows[:, None, 1] - a[None, :, 3], a[None, :, 1] - rows[:, None, 3])
        for i, j in zip(*np.nonzero((dx <= gap) & (dy <= gap)), strict=True):
            ri, rj = find(int(i) + start), find(int(j))
            if ri != rj:
                parent[rj] = ri
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    return list(groups.values())


def _is_white(colour: Sequence[float] | None) -> bool:
    return colour is not None and len(colour) > 0 and min(colour) >= 0.98


def _axis_aligned(item: tuple) -> bool:
    op = item[0]
    if op == "re":
        return True
    if op == "l":
        p, q = item[1], item[2]
        dx, dy = abs(p.x - q.x), abs(p.y - q.y)
        off_axis, along = min(dx, dy), max(dx, dy)
        # Both bounds: plotting software draws a diagonal or a curve as a run of segments
        # each under 0.5 pt across, which an absolute bound alone takes for a rule.
        return off_axis < 0.5 and off_axis <= AXIS_SLOPE_TOLERANCE * along
    if op == "qu":
        return bool(item[1].is_rectangular)
    return False  # "c": a Bézier curve


# --------------------------------------------------------------------------------------
# One page
# --------------------------------------------------------------------------------------
@dataclass(slots=True)
class _Part:
    """One drawing path or image on a page, classified."""

    box: Box
    kind: str  # "seed" | "rule" | "label-image"
    graphic: bool = False  # a curve, a diagonal or a picture: never part of a table
    fill_area: float = 0.0  # area of a filled axis-aligned rectangle


@dataclass(slots=True)
class _Candidate:
    """A box found on one page, before the document-wide checks."""

    box: Box
    caption: str = ""
    decorative: bool = False


class _Page:
    """Classification, clustering and captions for one page."""

    def __init__(self, page: pymupdf.Page) -> None:
        self.page = page
        r = page.rect
        self.rect = Box(r.x0, r.y0, r.x1, r.y1)
        self.width = self.rect.width
        self.area = self.rect.area
        self.band = min(MARGIN_BAND_PT, self.rect.height / 4)
        self.decorative: list[Box] = []  # big images that are decoration
        self.rejected: list[Box] = []  # table-like clusters: shaded tables, panels, notes
        self._lines: list[tuple[Box, str, int]] | None = None
        self._styles: list[tuple[str, float, int]] = []  # (font, size, colour) per line
        self._labels: list[Box] | None = None
        self._tables: list[Box] | None = None
        #: The document's body text style, the one with the most characters (set by the
        #: locator from every page: a page of charts can have more label text than body).
        self.body_style: tuple[str, float, int] | None = None

    # -- furniture tests ------------------------------------------------------------------
    def _clip(self, r: Sequence[float]) -> Box | None:
        page = self.rect
        x0, y0 = max(min(r[0], r[2]), page.x0), max(min(r[1], r[3]), page.y0)
        x1, y1 = min(max(r[0], r[2]), page.x1), min(max(r[1], r[3]), page.y1)
        if x1 < x0 or y1 < y0 or (x1 == x0 and y1 == y0):
            return None
        return Box(x0, y0, x1, y1)

    def _bleeds(self, b: Box) -> bool:
        page = self.rect
        return (
            b.x0 <= page.x0 + BLEED_PT
            or b.y0 <= page.y0 + BLEED_PT
            or b.x1 >= page.x1 - BLEED_PT
            or b.y1 >= page.y1 - BLEED_PT
        )

    def in_margin_band(self, b: Box) -> bool:
        """Entirely inside the top or the bottom margin band."""
        return b.y1 <= self.rect.y0 + self.band or b.y0 >= self.rect.y1 - self.band

    def _bar(self, b: Box) -> bool:
        return b.width >= BAR_MIN_WIDTH_FRACTION * self.width and self.in_margin_band(b)

    def _background(self, b: Box) -> bool:
        return b.area >= BACKGROUND_AREA_FRACTION * self.area

    # -- parts ----------------------------------------------------------------------------
    def parts(self) -> list[_Part]:
        """Every drawing path and image, classified; furniture left out."""
        out: list[_Part] = []
        for path in self.page.get_drawings():
            part = self._drawing_part(path)
            if part is not None:
                out.append(part)
        for info in self.page.get_image_info():
            part = self._image_part(info)
            if part is not None:
                out.append(part)
        return out

    def _drawing_part(self, path: dict) -> _Part | None:
        kind = path.get("type") or ""
        fill = path.get("fill") if "f" in kind and path.get("fill_opacity") != 0 else None
        stroke = path.get("color") if "s" in kind and path.get("stroke_opacity") != 0 else None
        if (fill is None or _is_white(fill)) and (stroke is None or _is_white(stroke)):
            return None  # invisible on a white page
        box = self._clip(path["rect"])
        if box is None:
            return None
        if self._bleeds(box) or self._background(box) or self.in_margin_band(box):
            return None  # furniture: backgrounds, frames, headers, footers, their rules
        items = path.get("items") or []
        if not all(_axis_aligned(item) for item in items):
            return _Part(box, "seed", graphic=True)
        if min(box.width, box.height) < RULE_MAX_THICKNESS_PT:
            return _Part(box, "rule")
        filled_rect = fill is not None and not _is_white(fill) and len(items) == 1
        return _Part(box, "seed", fill_area=box.area if filled_rect else 0.0)

    def _image_part(self, info: dict) -> _Part | None:
        box = self._clip(info["bbox"])
        if box is None or box.width <= 0 or box.height <= 0:
            return None
        if box.area >= MIN_FIGURE_AREA * self.area:
            if self._background(box) or self._bleeds(box) or self._bar(box):
                self.decorative.append(box)  # cover art, page background, letterhead
                return None
            return _Part(box, "seed", graphic=True)
        if self.in_margin_band(box):
            return None  # a small logo or icon in the header/footer
        return _Part(box, "label-image")

    # -- text -----------------------------------------------------------------------------
    def lines(self) -> list[tuple[Box, str, int]]:
        """Text lines as ``(bbox, text, block number)``, cached."""
        if self._lines is None:
            self._read_text()
        return self._lines  # type: ignore[return-value]

    def _read_text(self) -> None:
        lines: list[tuple[Box, str, int]] = []
        styles: list[tuple[str, float, int]] = []
        data = self.page.get_text("dict", flags=pymupdf.TEXTFLAGS_TEXT)
        for block_no, block in enumerate(data["blocks"]):
            if block.get("type") != 0:
                continue
            for line in block["lines"]:
                text = "".join(span["text"] for span in line["spans"]).strip()
                if text:
                    first = line["spans"][0]
                    lines.append((normalise_box(*line["bbox"]), text, block_no))
                    styles.append((first["font"], round(first["size"], 1), first["color"]))
        self._lines, self._styles = lines, styles

    def style_weights(self) -> Counter[tuple[str, float, int]]:
        """Characters per text style ``(font, size, colour)`` on this page."""
        weights: Counter[tuple[str, float, int]] = Counter()
        for (_line, text, _block), style in zip(self.lines(), self._styles, strict=True):
            weights[style] += len(text)
        return weights

    def labels(self) -> list[Box]:
        """Lines that may be a figure's labels (axis titles, tick values, notes).

        Left out: lines wider than :data:`LABEL_MAX_WIDTH_FRACTION` of the page and every
        line of a block that has one (a body paragraph, even its short last line); blocks
        that start "Figure"/"Table"; lines set in a caption's font, size and colour (the
        second line of a wrapped caption is often a block of its own); and lines in the
        document's body style (:attr:`body_style`; short body lines such as a "where" list
        under a figure; labels are set smaller or apart).
        """
        if self._labels is None:
            lines = self.lines()
            body_style = self.body_style
            max_width = LABEL_MAX_WIDTH_FRACTION * self.width
            paragraphs = {block for line, _t, block in lines if line.width > max_width}
            first_text: dict[int, str] = {}
            for _line, text, block in lines:
                first_text.setdefault(block, text)
            caption_styles = {
                style for (_l, text, _b), style in zip(lines, self._styles, strict=True)
                if _NOT_LABEL.match(text)
            }
            self._labels = [
                line
                for (line, _text, block), style in zip(lines, self._styles, strict=True)
                if block not in paragraphs
                and not _NOT_LABEL.match(first_text[block])
                and style not in caption_styles
                and style != body_style
            ]
        return self._labels

    def _grow_with_labels(self, box: Box) -> Box:
        grown = box
        for _round in range(3):  # labels stacked on labels, e.g. "Energy" over "(MW)"
            before = grown
            for line in self.labels():
                if _near(grown, line, LABEL_GAP_PT) and not _contains(grown, line):
                    grown = _union([grown, line])
            if grown == before:
                break
        return grown

    # -- figures --------------------------------------------------------------------------
    def figures(self) -> list[_Candidate]:
        """Figure boxes drawn on this page, each at least ``MIN_FIGURE_AREA`` of it."""
        parts = self.parts()
        seeds = [p for p in parts if p.kind == "seed"]
        boxes: list[Box] = []
        for group in _components([p.box for p in seeds], CLUSTER_GAP_PT):
            members = [seeds[i] for i in group]
            box = _union(p.box for p in members)
            if _table_like(members, box):
                self.rejected.append(box)
            else:
                boxes.append(box)
        boxes = _absorb(boxes, [p.box for p in parts if p.kind == "rule"], RULE_TOUCH_PT)
        boxes = _absorb(boxes, [p.box for p in parts if p.kind == "label-image"], CLUSTER_GAP_PT)
        # The size bar applies to the drawn extent: text alone never makes a figure (a
        # bulleted list with drawn bullets would otherwise grow into one through its lines).
        boxes = [b for b in boxes if usable_box(b, self.rect) is not None]
        graphic = [p.box for p in parts if p.graphic]
        kept: list[Box] = []
        for box in boxes:
            if self._ruled_table(box, graphic):
                self.rejected.append(box)
            else:
                kept.append(box)
        grown = [_Candidate(self._grow_with_labels(b)) for b in kept]
        return _merge(grown, gap=CLUSTER_GAP_PT)

    # -- ruled tables ---------------------------------------------------------------------
    def _ruled_table(self, box: Box, graphic: Sequence[Box]) -> bool:
        """Whether the drawn box ``box`` is mostly a table of text (see
        :data:`TABLE_GRID_COVERAGE`).

        A box whose curves, diagonals and pictures (``graphic``) spread over at least
        :data:`GRAPHIC_MIN_COVERAGE` of it is a chart or a diagram and is kept without
        asking the table finder, which is the costly step (0.1-0.5 s a page).
        """
        inside = [g for g in graphic if _contains(box, g)]
        if inside and _union(inside).area >= GRAPHIC_MIN_COVERAGE * box.area:
            return False
        covered = sum(_intersection_area(box, table) for table in self.ruled_tables())
        return covered >= TABLE_GRID_COVERAGE * box.area

    def ruled_tables(self) -> list[Box]:
        """Bounding boxes of the page's tables of text, found once per page and cached.

        Uses ``page.find_tables(use_layout=False)``: pymupdf's line strategy, which builds
        cells from the page's vector lines, rectangle borders and fills, without the layout
        model (the model, when ``pymupdf.layout`` is loaded, costs ~1 s a page and gates
        on its own notion of a table). A found grid counts when it has at least
        :data:`TABLE_MIN_ROWS` rows and :data:`TABLE_MIN_COLUMNS` columns, its cells tile
        :data:`TABLE_CELL_TILING` of its box, and at least
        :data:`TABLE_TEXT_CELL_FRACTION` of its cells hold the centre of a word. Boxes are
        in the same (unrotated) coordinates as ``get_drawings``; the finder reports a
        rotated page's cells in rotated coordinates, so they are turned back.
        """
        if self._tables is not None:
            return self._tables
        self._tables = []
        finder = self.page.find_tables(use_layout=False)
        if finder is None:  # pymupdf logs an internal error and returns None
            return self._tables
        words = self.page.get_text("words")
        centres = np.array(
            [((w[0] + w[2]) / 2, (w[1] + w[3]) / 2) for w in words], dtype=np.float64
        ).reshape(-1, 2)
        derotate = self.page.derotation_matrix if self.page.rotation else None
        for table in finder.tables:
            if table.row_count < TABLE_MIN_ROWS or table.col_count < TABLE_MIN_COLUMNS:
                continue
            cells = [pymupdf.Rect(c) for c in table.cells if c is not None]
            if derotate is not None:
                cells = [c * derotate for c in cells]
            if not cells:
                continue
            extent = _union(Box(c.x0, c.y0, c.x1, c.y1) for c in cells)
            if sum(c.width * c.height for c in cells) < TABLE_CELL_TILING * extent.area:
                continue  # boxes of a diagram in rows and columns, not a table
            with_text = sum(
                bool(np.any(
                    (centres[:, 0] >= c.x0) & (centres[:, 0] <= c.x1)
                    & (centres[:, 1] >= c.y0) & (centres[:, 1] <= c.y1)
                ))
                for c in cells
            )
            if with_text >= TABLE_TEXT_CELL_FRACTION * len(cells):
                self._tables.append(extent)
        return self._tables

    # -- captions -------------------------------------------------------------------------
    def captions(self) -> list[tuple[Box, str]]:
        """Caption candidates: each line starting "Figure"/"Fig."/"Diagram" joined with the
        rest of its text block (a number and a title are often separate lines), as
        ``(bbox of those lines, text with whitespace collapsed)``."""
        lines = self.lines()
        found: list[tuple[Box, str]] = []
        for index, (box, text, block) in enumerate(lines):
            if not _CAPTION.match(text):
                continue
            boxes, texts = [box], [text]
            for other_box, other_text, other_block in lines[index + 1 :]:
                if other_block != block:
                    break
                boxes.append(other_box)
                texts.append(other_text)
            caption = " ".join(" ".join(texts).split())[:CAPTION_MAX_CHARS]
            found.append((_union(boxes), caption))
        return found

    def assign_captions(self, boxes: Sequence[Box]) -> list[str]:
        """Give each box the nearest unused caption above or below it ("" if none).

        A caption counts when it overlaps the box horizontally and its gap to the box's top
        or bottom edge is at most :data:`CAPTION_DISTANCE_PT`. Pairs are taken closest first
        and each caption is used once, so a caption between two stacked figures goes to the
        one it sits against and the other figure keeps its own.
        """
        captions = self.captions()
        pairs: list[tuple[float, int, int]] = []
        for b, box in enumerate(boxes):
            for c, (cap, _text) in enumerate(captions):
                if cap.x1 <= box.x0 or cap.x0 >= box.x1:
                    continue  # not over or under this figure
                if cap.y1 <= box.y0 + 1:
                    distance = box.y0 - cap.y1
                elif cap.y0 >= box.y1 - 1:
                    distance = cap.y0 - box.y1
                else:
                    continue  # inside the box: a label, or a caption the box swallowed
                if distance <= CAPTION_DISTANCE_PT:
                    pairs.append((distance, b, c))
        pairs.sort()
        chosen = [""] * len(boxes)
        used: set[int] = set()
        for _distance, b, c in pairs:
            if not chosen[b] and c not in used:
                used.add(c)
                chosen[b] = captions[c][1]
        return chosen


def _table_like(members: list[_Part], box: Box) -> bool:
    if box.area <= 0:
        return True
    coverage = min(1.0, sum(p.fill_area for p in members) / box.area)
    if coverage < TABLE_FILL_COVERAGE:
        return False
    graphic = [p.box for p in members if p.graphic]
    return not graphic or _union(graphic).area < GRAPHIC_MIN_COVERAGE * box.area


def _absorb(boxes: list[Box], extras: list[Box], gap: float) -> list[Box]:
    """Grow boxes by the extras within ``gap`` of them; an extra near two boxes joins them."""
    boxes = list(boxes)
    pending = list(extras)
    changed = True
    while changed and boxes and pending:
        changed = False
        rest: list[Box] = []
        for extra in pending:
            hits = [i for i, b in enumerate(boxes) if _near(b, extra, gap)]
            if not hits:
                rest.append(extra)
                continue
            changed = True
            joined = _union([extra, *(boxes[i] for i in hits)])
            boxes = [b for i, b in enumerate(boxes) if i not in hits] + [joined]
        pending = rest
    return boxes


def _merge(cands: list[_Candidate], gap: float | None = None) -> list[_Candidate]:
    """Merge candidates whose boxes overlap (or, with ``gap``, come within ``gap`` points),
    until none do. A merged box is decorative only if all its parts were."""
    merged = list(cands)
    i = 0
    while i < len(merged):
        j = i + 1
        while j < len(merged):
            a, b = merged[i], merged[j]
            close = _near(a.box, b.box, gap) if gap is not None else False
            if close or _intersection_area(a.box, b.box) > 0:
                merged[i] = _Candidate(
                    box=_union([a.box, b.box]),
                    caption=a.caption or b.caption,
                    decorative=a.decorative and b.decorative,
                )
                del merged[j]
                j = i + 1  # the grown box may now reach earlier ones
            else:
                j += 1
        i += 1
    return merged


def _position_key(box: Box) -> tuple[int, int, int, int]:
    """A box's position rounded to 4 pt, to spot the same mark on many pages."""
    return (
        round(box.x0 / 4.0), round(box.y0 / 4.0), round(box.x1 / 4.0), round(box.y1 / 4.0)
    )


def _rounded(box: Box) -> tuple[float, float, float, float]:
    """``(x0, y0, x1, y1)`` to 0.01 pt, the precision a crop needs."""
    return (round(box.x0, 2), round(box.y0, 2), round(box.x1, 2), round(box.y1, 2))


def _region_box(region: FigureRegion) -> Box | None:
    return None if region.bbox is None else normalise_box(*region.bbox)


# --------------------------------------------------------------------------------------
# The locator
# --------------------------------------------------------------------------------------
class LayoutFigureLocator(FigureLocator):
    """Figures from pymupdf's drawings and images, plus the converter's layout regions.

    Every page is scanned, so a figure the converter missed is still found; ``regions``
    add to what is found rather than limit it. See the module docstring for the rules
    and the reason for each constant.
    """

    name = "pymupdf-layout"

    def locate(self, pdf: bytes, regions: Sequence[FigureRegion]) -> list[FigureBox]:
        """Return the figure boxes of ``pdf``, sorted by page, then top, then left.

        Args:
            pdf: the PDF file's bytes.
            regions: the converter's figure regions (1-based pages; bbox in points with the
                origin top-left, or ``None``).

        Returns:
            One ``FigureBox`` per figure, each covering at least ``MIN_FIGURE_AREA`` of its
            page before padding; decorative marks that pass that bar carry
            ``decorative=True`` and no caption.

        Raises:
            ConversionError: the bytes are not a PDF pymupdf can open, the PDF is
                encrypted, or a region names a page the PDF does not have.
        """
        try:
            doc = pymupdf.open(stream=pdf, filetype="pdf")
        except Exception as exc:  # pymupdf raises several types for a bad file
            raise ConversionError(f"cannot open the PDF to locate figures: {exc}") from exc
        with doc:
            if doc.needs_pass:
                raise ConversionError("the PDF is encrypted; figures cannot be located")
            by_page: dict[int, list[FigureRegion]] = {}
            for region in regions:
                if not 1 <= region.page <= doc.page_count:
                    raise ConversionError(
                        f"a figure region is on page {region.page}, but the PDF has "
                        f"{doc.page_count} pages"
                    )
                by_page.setdefault(region.page, []).append(region)

            pages = {n: _Page(doc[n - 1]) for n in range(1, doc.page_count + 1)}
            weights: Counter[tuple[str, float, int]] = Counter()
            for view in pages.values():
                weights.update(view.style_weights())
            body_style = weights.most_common(1)[0][0] if weights else None
            found: dict[int, list[_Candidate]] = {}
            for number, view in pages.items():
                view.body_style = body_style
                found[number] = _page_candidates(view, by_page.get(number, []))

            repeated = _repeated_marks(pages, found)
            out: list[FigureBox] = []
            for number, cands in found.items():
                for cand in cands:
                    if _position_key(cand.box) in repeated:
                        cand.decorative = True
                informative = [c for c in cands if not c.decorative]
                captions = pages[number].assign_captions([c.box for c in informative])
                for cand, caption in zip(informative, captions, strict=True):
                    cand.caption = (
                        caption or cand.caption
                        or _region_caption(cand.box, by_page.get(number, []))
                    )
                out.extend(
                    FigureBox(
                        page=number,
                        bbox=_rounded(cand.box),
                        caption="" if cand.decorative else cand.caption,
                        decorative=cand.decorative,
                    )
                    for cand in cands
                )
        out.sort(key=lambda b: (b.page, b.bbox[1], b.bbox[0]))
        return out


def _page_candidates(view: _Page, regions: list[FigureRegion]) -> list[_Candidate]:
    """Detected boxes, decorative images and the regions that add something, merged."""
    kept = view.figures()
    for cand in kept:
        if cand.box.width >= BANNER_WIDTH_FRACTION * view.width:
            cand.decorative = True  # a banner: cover art or a letterhead
    kept.extend(_Candidate(box, decorative=True) for box in view.decorative)
    for region in regions:
        region_box = _region_box(region)
        if region_box is None:
            continue
        if any(_intersection_area(region_box, c.box) > 0 for c in kept):
            continue  # already found, with a tighter box (or known to be decoration)
        if any(
            _intersection_area(region_box, r) >= REJECTED_OVERLAP * region_box.area
            for r in view.rejected
        ):
            continue  # mostly inside a table or a shaded panel: not a figure
        box = usable_box(region_box, view.rect)
        if box is not None:  # a logo-sized region has nothing worth cropping
            kept.append(_Candidate(box, caption=region.caption))
    if not any(not c.decorative for c in kept) and any(r.bbox is None for r in regions):
        caption = next((r.caption for r in regions if r.bbox is None and r.caption), "")
        kept.append(_Candidate(view.rect, caption=caption))  # the whole page, not nothing
    return _merge(kept)


def _repeated_marks(
    pages: dict[int, _Page], found: dict[int, list[_Candidate]]
) -> set[tuple[int, int, int, int]]:
    """Positions of boxes inside a margin band that recur on most pages."""
    counts: Counter[tuple[int, int, int, int]] = Counter()
    for number, cands in found.items():
        counts.update(
            {_position_key(c.box) for c in cands if pages[number].in_margin_band(c.box)}
        )
    threshold = max(3, REPEATED_PAGE_FRACTION * len(pages))
    return {key for key, count in counts.items() if count >= threshold}


def _region_caption(box: Box, regions: list[FigureRegion]) -> str:
    """The caption of the first region that overlaps ``box`` (or has no bbox)."""
    for region in regions:
        region_box = _region_box(region)
        overlaps = region_box is None or _intersection_area(box, region_box) > 0
        if overlaps and region.caption:
            return region.caption
    return ""
