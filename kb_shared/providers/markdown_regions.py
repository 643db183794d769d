"""Figure markers and tables layout missed, on pages from ``markdown_cleanup``.

Step 4 of the clean-up (``markdown_cleanup`` module docstring), per page:

* :func:`add_missed_tables`: layout misses some tables drawn only with shaded cells and
  returns them as one big ``list-item``/``text``/``picture`` box (AEMO's CVP schedule); such a
  box, on a page without layout tables, is searched with ``page.find_tables`` and a table
  found there replaces the boxes it covers, as a pipe table whose cells are the page's words.
* :func:`add_figures`: ``picture`` boxes become a ``[Figure: …]`` marker line (caption text
  when a "Figure/Fig./Diagram/Chart/Graph/Exhibit/Abbildung N" caption is within
  :data:`CAPTION_DISTANCE_PT` above or below, else ``diagram on page N`` for a vector drawing
  or ``image on page N`` for a raster image), followed by the text found inside the picture
  as a plain paragraph (``Text in figure: …``). Vector drawings layout did not box as a
  picture (a ``page.cluster_drawings()`` cluster of at least :data:`MIN_DRAWING_CLUSTER_PT` on
  both sides, with at least :data:`MIN_DRAWING_PATHS` paths of which one is not
  axis-parallel: an arrowhead, a curve, a diagonal, which table grids lack), outside tables,
  pictures and the margin bands and not touching the page edge (cover art, backgrounds),
  also get a marker. Each marker is returned as a ``FigureRegion``.

* :func:`code_tables_to_code`: monospaced text layout took for a table is code again.

And once every page is done, :func:`join_split_tables`: a table cut by a page break, with its
header row repeated on the next page or not, with running headers/footers or a "continued"
note between the parts, becomes one table (its rule in the docstring); and
:func:`join_split_code`: a code listing cut by a page break stays one fenced block.
"""

from __future__ import annotations

import logging
import re
from collections import defaultdict
from collections.abc import Sequence

import pymupdf

from kb_shared.ingest.pdf import drop_unmapped
from kb_shared.providers.base import FigureRegion
from kb_shared.providers.markdown_cleanup import (
    Block,
    Page,
    clean_table,
    clean_text,
    code_box,
    furniture_key,
    in_margin_band,
    plain_text,
    split_fence,
)

logger = logging.getLogger(__name__)

#: A figure caption is searched this far (points) above and below a picture.
CAPTION_DISTANCE_PT = 60.0

#: A drawing cluster must be at least this wide and high (points) to get a figure marker.
MIN_DRAWING_CLUSTER_PT = 72.0

#: ... and made of at least this many vector paths.
MIN_DRAWING_PATHS = 6

#: Pages with fewer vector paths than this are not searched for missed tables.
MIN_PATHS_FOR_TABLE_SEARCH = 6

#: A layout box is searched for a missed table only if it covers this share of the page
#: (the missed CVP tables were single boxes over 50 % of the page) ...
MIN_TABLE_BOX_SHARE = 0.15

#: ... and its vector paths have at least this many distinct horizontal and vertical edge
#: positions (a 2 x 2 table has 3 of each; a shaded note box has 2 vertical).
MIN_GRID_LINES = 3

_FIGURE_CAPTION = re.compile(
    r"^(?:figure|fig\.|diagram|chart|graph|exhibit|abbildung|abb\.)\s*[A-Z]?\d+[\w.\-]*",
    re.IGNORECASE,
)
_PICTURE_TEXT = re.compile(
    r"<!--\s*Start of picture text\s*-->(.*?)<!--\s*End of picture text\s*-->", re.DOTALL
)


# --------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------
def _picture_text(markdown: str) -> str:
    """The text pymupdf4llm found inside a picture box, one line per label, ``; ``-joined."""
    parts = []
    for body in _PICTURE_TEXT.findall(markdown):
        for piece in re.split(r"<br\s*/?>|\n", body):
            piece = " ".join(piece.split())
            if piece:
                parts.append(piece)
    return clean_text("; ".join(parts))


def _caption_for(rect: pymupdf.Rect, blocks: Sequence[Block]) -> str:
    """Nearest "Figure N …"-style caption within CAPTION_DISTANCE_PT above or below ``rect``."""
    best: tuple[float, str] | None = None
    for block in blocks:
        if block.removed or block.kind in ("picture", "figure", "table"):
            continue
        text = plain_text(block.markdown)
        if not _FIGURE_CAPTION.match(text):
            continue
        if block.rect.x1 < rect.x0 or block.rect.x0 > rect.x1:
            continue  # no horizontal overlap
        gap = max(block.rect.y0 - rect.y1, rect.y0 - block.rect.y1)
        if gap > CAPTION_DISTANCE_PT:
            continue
        if best is None or gap < best[0]:
            best = (gap, text)
    return best[1] if best else ""


def _raster_share(rect: pymupdf.Rect, images: Sequence[pymupdf.Rect]) -> float:
    area = rect.get_area() or 1.0
    return sum((rect & img).get_area() for img in images if rect.intersects(img)) / area


def _is_axis_parallel(item: tuple) -> bool:
    if item[0] == "l":
        p1, p2 = item[1], item[2]
        return abs(p1.x - p2.x) < 1 or abs(p1.y - p2.y) < 1
    return item[0] in ("re", "qu")


def _rules_and_boxes(paths: Sequence[dict]) -> bool:
    """Whether every item of ``paths`` (``get_drawings`` paths) is axis-parallel."""
    return all(_is_axis_parallel(item) for p in paths for item in p["items"])


def _touches_edge(rect: pymupdf.Rect, page_rect: pymupdf.Rect, slack: float = 2.0) -> bool:
    return (
        rect.x0 <= page_rect.x0 + slack
        or rect.y0 <= page_rect.y0 + slack
        or rect.x1 >= page_rect.x1 - slack
        or rect.y1 >= page_rect.y1 - slack
    )


def _drawing_clusters(
    page: pymupdf.Page, paths: list[dict], taken: Sequence[pymupdf.Rect]
) -> list[pymupdf.Rect]:
    """Significant vector-drawing clusters that no picture/table box already covers."""
    if len(paths) < MIN_DRAWING_PATHS:
        return []
    if _rules_and_boxes(paths):
        # Every cluster's members would be rules and boxes only, so none would be kept:
        # the clustering (the costliest step of the rules on a page of ruled tables) is spared.
        return []
    found = []
    for cluster in page.cluster_drawings(drawings=paths):
        rect = pymupdf.Rect(cluster)
        if rect.width < MIN_DRAWING_CLUSTER_PT or rect.height < MIN_DRAWING_CLUSTER_PT:
            continue
        if in_margin_band(rect, page.rect) or _touches_edge(rect, page.rect):
            continue  # running furniture, or cover art / a background bleeding off the page
        if any((rect & t).get_area() > 0.3 * rect.get_area() for t in taken if rect.intersects(t)):
            continue
        members = [p for p in paths if rect.contains(p["rect"])]
        if len(members) < MIN_DRAWING_PATHS:
            continue
        if _rules_and_boxes(members):
            continue  # only rules and boxes: a table grid, shading or a frame
        found.append(rect)
    return found


def _figure_marker(caption: str) -> str:
    """``[Figure: caption]`` on one line; brackets in the caption become parentheses so
    the marker stays parseable."""
    return "[Figure: " + caption.replace("[", "(").replace("]", ")") + "]"


def add_figures(page: Page, pdf_page: pymupdf.Page, paths: list[dict]) -> list[FigureRegion]:
    """Turn picture boxes (and missed drawing clusters) into ``[Figure: …]`` blocks.

    Returns:
        One ``FigureRegion`` per marker, in block order.
    """
    images: list[pymupdf.Rect] | None = None  # read when a picture has no caption
    for block in page.blocks:
        if block.removed or block.kind != "picture":
            continue
        caption = _caption_for(block.rect, page.blocks)
        if not caption:
            if images is None:
                images = [pymupdf.Rect(info["bbox"]) for info in pdf_page.get_image_info()]
            what = "image" if _raster_share(block.rect, images) >= 0.5 else "diagram"
            caption = f"{what} on page {page.number}"
        inner = _picture_text(block.markdown)
        block.markdown = _figure_marker(caption) + (f"\n\nText in figure: {inner}" if inner else "")
        block.kind = "figure"
        block.caption = caption
    taken = [b.rect for b in page.blocks if not b.removed and b.kind in ("figure", "table")]
    for rect in _drawing_clusters(pdf_page, paths, taken):
        caption = _caption_for(rect, page.blocks) or f"diagram on page {page.number}"
        _insert_by_position(page, Block("figure", rect, _figure_marker(caption), caption=caption))
    return [
        FigureRegion(page.number, tuple(b.rect), b.caption)
        for b in page.blocks
        if b.kind == "figure" and not b.removed
    ]


def _insert_by_position(page: Page, new: Block) -> None:
    """Insert before the first block that starts inside or below ``new``'s top edge."""
    for index, block in enumerate(page.blocks):
        if not block.removed and block.rect.y0 >= new.rect.y0 - 1:
            page.blocks.insert(index, new)
            return
    page.blocks.append(new)


# --------------------------------------------------------------------------------------
# Tables layout missed
# --------------------------------------------------------------------------------------
def _cell_text(words: Sequence[tuple], cell: Sequence[float] | None) -> str:
    if cell is None:
        return ""
    x0, y0, x1, y1 = cell
    parts = [
        w[4]
        for w in words
        if x0 <= (w[0] + w[2]) / 2 <= x1 and y0 <= (w[1] + w[3]) / 2 <= y1
    ]
    text = drop_unmapped(" ".join(parts))
    return " ".join(text.split()).replace("|", "\\|")


def _table_markdown(rows: Sequence[Sequence[str]]) -> str:
    width = max(len(r) for r in rows)
    lines = []
    for i, row in enumerate(rows):
        cells = list(row) + [""] * (width - len(row))
        lines.append("|" + "|".join(cells) + "|")
        if i == 0:
            lines.append("|" + "|".join(["---"] * width) + "|")
    return "\n".join(lines)


def _grid_positions(paths: Sequence[dict]) -> tuple[int, int]:
    """Distinct y positions of horizontal edges and x positions of vertical edges (2 pt grid)
    among the page's straight lines and rectangles: a cheap test for a ruled table."""
    rows: set[int] = set()
    cols: set[int] = set()
    for path in paths:
        for item in path["items"]:
            if item[0] == "l":
                a, b = item[1], item[2]
                if abs(a.y - b.y) < 1 and abs(a.x - b.x) >= 20:
                    rows.add(round(a.y / 2))
                elif abs(a.x - b.x) < 1 and abs(a.y - b.y) >= 8:
                    cols.add(round(a.x / 2))
            elif item[0] == "re":
                r = item[1]
                if r.height < 3 and r.width >= 20:
                    rows.add(round(r.y0 / 2))
                elif r.width < 3 and r.height >= 8:
                    cols.add(round(r.x0 / 2))
                elif r.width >= 20 and r.height >= 8:
                    rows.update((round(r.y0 / 2), round(r.y1 / 2)))
                    cols.update((round(r.x0 / 2), round(r.x1 / 2)))
    return len(rows), len(cols)


def add_missed_tables(page: Page, pdf_page: pymupdf.Page, paths: Sequence[dict]) -> int:
    """Find tables layout did not see and put them in place of the boxes they cover.

    Layout misses some tables drawn only with shaded cells and hands them back as one big
    ``list-item``, ``text`` or ``picture`` box (AEMO's CVP schedule, pages 8-21). So, on a
    page where layout reported no table, each layout box covering at least
    :data:`MIN_TABLE_BOX_SHARE` of the page whose vector paths form a grid (at least
    ``MIN_GRID_LINES`` distinct horizontal and vertical edge positions) is searched with
    ``page.find_tables(clip=box, strategy="lines_strict", use_layout=False)``. The clip
    keeps the cost down: ``find_tables`` builds a Python object per character, 0.3-0.8 s
    for a whole page of text. A found table needs >= 2 rows and >= 2 columns with text.
    One lying inside a layout ``picture`` box replaces it only when it *is* the picture
    (covers >= 80 % of it) and is a real grid (>= 3 rows and >= 3 columns with text,
    >= half its cells filled): flow charts contain small boxed "tables" of one label.

    Returns:
        The number of tables added.
    """
    if any(b.kind == "table" for b in page.blocks) or len(paths) < MIN_PATHS_FOR_TABLE_SEARCH:
        return 0
    page_area = page.rect.get_area()
    regions = []
    for block in page.blocks:
        if block.removed or block.rect.get_area() < MIN_TABLE_BOX_SHARE * page_area:
            continue
        # the box grown to the drawings it touches (layout boxes hug the text, while the
        # table's shaded cells reach further, e.g. a first column of row numbers)
        region = pymupdf.Rect(block.rect)
        inside = [
            p
            for p in paths
            if p["rect"].intersects(block.rect) and p["rect"].get_area() < 0.9 * page_area
        ]
        for p in inside:
            region |= p["rect"]
        region = pymupdf.Rect(region.x0 - 3, region.y0 - 3, region.x1 + 3, region.y1 + 3)
        if min(_grid_positions(inside)) >= MIN_GRID_LINES:
            regions.append(region)
    if not regions:
        return 0
    tables = []
    for region in regions:
        try:
            found = pdf_page.find_tables(
                clip=region, strategy="lines_strict", use_layout=False
            )
        except Exception:  # a table finder failure must not lose the page's text
            logger.debug("find_tables failed on page %d", page.number, exc_info=True)
            continue
        tables.extend(found.tables)
    words = pdf_page.get_text("words")
    added = 0
    for table in tables:
        rect = pymupdf.Rect(table.bbox)
        if in_margin_band(rect, page.rect):
            continue
        rows = [[_cell_text(words, cell) for cell in row.cells] for row in table.rows]
        width = max(len(r) for r in rows)
        filled_rows = sum(1 for r in rows if any(r))
        filled_cols = sum(1 for c in range(width) if any(c < len(r) and r[c] for r in rows))
        if filled_rows < 2 or filled_cols < 2:
            continue
        holders = [
            b
            for b in page.blocks
            if b.kind == "picture"
            and not b.removed
            and rect.intersects(b.rect)
            and (rect & b.rect).get_area() >= 0.5 * rect.get_area()
        ]
        if holders:
            cells = sum(len(r) for r in rows)
            filled = sum(1 for r in rows for c in r if c)
            is_grid = filled_rows >= 3 and filled_cols >= 3 and filled >= cells / 2
            is_the_picture = all(
                (rect & b.rect).get_area() >= 0.8 * b.rect.get_area() for b in holders
            )
            if not (is_grid and is_the_picture):
                continue
        grown = pymupdf.Rect(rect.x0 - 2, rect.y0 - 2, rect.x1 + 2, rect.y1 + 2)
        covered = [
            i
            for i, b in enumerate(page.blocks)
            if not b.removed
            and (b.kind != "picture" or b in holders)
            and grown.contains((b.rect.tl + b.rect.br) / 2)
        ]
        block = Block("table", rect, _table_markdown(rows))
        if covered:
            for i in covered:
                page.blocks[i].removed = True
            page.blocks.insert(covered[0], block)
        else:
            _insert_by_position(page, block)
        added += 1
    return added


# --------------------------------------------------------------------------------------
# Monospaced text layout took for a table
# --------------------------------------------------------------------------------------
_CODE_CELL = re.compile(r"^\s*(?:`[^`]*`\s*)+$")


def _monospaced_lines(pdf_page: pymupdf.Page, rect: pymupdf.Rect) -> list[str] | None:
    """The text lines inside ``rect`` with their indentation (in character widths from the
    leftmost line), or ``None`` when any span there is not monospaced."""
    rows: list[tuple[float, float, str, float]] = []
    for block in pdf_page.get_text("dict", clip=rect)["blocks"]:
        for line in block.get("lines", ()):
            spans = [s for s in line["spans"] if s["text"].strip()]
            if not spans:
                continue
            if not all(s["flags"] & pymupdf.TEXT_FONT_MONOSPACED for s in spans):
                return None
            text = "".join(s["text"] for s in line["spans"]).rstrip()
            width = spans[0]["size"] * 0.6  # a monospaced glyph's advance (Courier: 600/1000 em)
            rows.append((line["bbox"][1], line["bbox"][0], text.lstrip(), width))
    if not rows:
        return None
    left = min(x for _, x, _, _ in rows)
    rows.sort()
    return [" " * round((x - left) / width) + text for _, x, text, width in rows]


def code_tables_to_code(page: Page, pdf_page: pymupdf.Page) -> int:
    """Give back monospaced text that layout returned as a table (aligned columns of code,
    every cell in backticks) as the code block it is: its lines, indentation kept, fenced
    (``markdown_cleanup.fence_code`` fences it when the page is assembled), so a ``#`` in it
    is never a heading and it is never split like table rows.

    Returns:
        The number of tables turned back into code.
    """
    changed = 0
    for block in page.blocks:
        if block.removed or block.kind != "table":
            continue
        cells = [
            c
            for line in clean_table(block.markdown).splitlines()
            if line.strip() and not re.fullmatch(r"[\s|:\-]+", line)
            for c in line.strip().strip("|").split("|")
            if c.strip()
        ]
        if not cells or not all(_CODE_CELL.match(c) for c in cells):
            continue
        lines = _monospaced_lines(pdf_page, block.rect)
        if lines is None:
            continue
        block.kind = "text"
        block.markdown = "```\n" + "\n".join(lines) + "\n```"
        changed += 1
    return changed


# --------------------------------------------------------------------------------------
# Tables cut by a page break
# --------------------------------------------------------------------------------------
#: The first part of a split table ends below this share of its page's height ... (these
#: four are judgement, checked on the split tables built in tests/test_pdf_tables.py and on
#: the loss-factor report's Queensland tables, which run over pages 8-10)
SPLIT_TABLE_BOTTOM_SHARE = 0.6
#: ... and the next part starts above this share of the next page's height.
SPLIT_TABLE_TOP_SHARE = 0.4
#: The parts' left and right edges differ by at most this share of the page width.
SPLIT_TABLE_EDGE_SHARE = 0.05
#: A "continued" note between the parts has at most this many words.
CONTINUED_NOTE_WORDS = 16

_CONTINUED = re.compile(
    r"\b(?:continued|continues|cont['’]?d|fortsetzung|fortgesetzt|forts)\b", re.IGNORECASE
)
_BOLD_CELL = re.compile(r"^\s*(\*\*|__).+\1\s*$")
_CELL_SEPARATOR = re.compile(r"(?<!\\)\|")


def _rows(markdown: str) -> list[str]:
    return [line for line in markdown.split("\n") if line.strip()]


def _cells(line: str) -> list[str]:
    """A pipe-table row's cells (empty ones kept; ``\\|`` is not a separator)."""
    cells = _CELL_SEPARATOR.split(line.strip())
    return cells[1:-1] if len(cells) > 2 else cells


def _row_key(line: str) -> tuple[str, ...]:
    """A row's cells as plain, case-folded text: a repeated header matches however it is
    emphasised."""
    return tuple(" ".join(plain_text(c).casefold().split()) for c in _cells(line))


def _is_continued_note(block: Block) -> bool:
    text = plain_text(block.markdown)
    return bool(_CONTINUED.search(text)) and len(text.split()) <= CONTINUED_NOTE_WORDS


def _is_furniture_like(block: Block, page: Page) -> bool:
    return block.kind in ("page-header", "page-footer") or in_margin_band(block.rect, page.rect)


#: A running header outside the margin bands sits within this many points of the same
#: place on another page.
RUNNING_POSITION_PT = 3.0


def _running_blocks(pages: Sequence[Page]) -> set[int]:
    """``id``s of the kept non-table blocks that repeat as running headers/footers: their
    ``furniture_key`` occurs on another page too, and they are furniture candidates (margin
    band, ``page-header``/``page-footer``) or sit at the same height
    (:data:`RUNNING_POSITION_PT`) as an occurrence on another page."""
    places: list[tuple[str, int, int, Block, bool]] = []
    pages_of: dict[str, set[int]] = defaultdict(set)
    at: dict[tuple[str, int], set[int]] = defaultdict(set)  # (key, height bucket) -> pages
    for page in pages:
        for block in page.blocks:
            if block.removed or block.kind in ("table", "figure"):
                continue
            key = furniture_key(block.markdown)
            if key:
                bucket = round(block.rect.y0 / RUNNING_POSITION_PT)
                places.append((key, bucket, page.number, block, _is_furniture_like(block, page)))
                pages_of[key].add(page.number)
                at[key, bucket].add(page.number)
    running: set[int] = set()
    for key, bucket, number, block, furniture in places:
        if len(pages_of[key]) < 2:
            continue
        near = at[key, bucket - 1] | at[key, bucket] | at[key, bucket + 1]
        if furniture or near - {number}:
            running.add(id(block))
    return running


def _body_edge(
    page: Page, running: set[int], *, last: bool, code: bool = False
) -> tuple[Block | None, list[Block]]:
    """The table (``code``: the code box) that ends (``last``) or starts the page's body, and
    the blocks passed over to reach it: "continued" notes and running headers/footers
    (``running``, block ids). ``(None, [])`` when the first/last other block is not one."""
    blocks = [b for b in page.blocks if not b.removed]
    passed: list[Block] = []
    for block in reversed(blocks) if last else blocks:
        if (code_box(block.markdown) is not None) if code else block.kind == "table":
            return block, passed
        if _is_continued_note(block) or id(block) in running:
            passed.append(block)
            continue
        return None, []
    return None, []


def _bold(line: str) -> bool:
    cells = [c for c in _cells(line) if c.strip()]
    return bool(cells) and all(_BOLD_CELL.match(c) for c in cells)


def _continues(
    before: Page, upper: Block, after: Page, lower: Block, *, right_edge: bool
) -> bool:
    """``lower`` (atop ``after``) can go on from ``upper`` (at the foot of ``before``): left
    (and with ``right_edge`` right) edges within :data:`SPLIT_TABLE_EDGE_SHARE` of the page
    width, ``upper`` ending below :data:`SPLIT_TABLE_BOTTOM_SHARE` of its page and ``lower``
    starting above :data:`SPLIT_TABLE_TOP_SHARE` of its own."""
    slack = SPLIT_TABLE_EDGE_SHARE * before.rect.width
    return (
        abs(upper.rect.x0 - lower.rect.x0) <= slack
        and (not right_edge or abs(upper.rect.x1 - lower.rect.x1) <= slack)
        and upper.rect.y1 >= before.rect.y0 + SPLIT_TABLE_BOTTOM_SHARE * before.rect.height
        and lower.rect.y0 <= after.rect.y0 + SPLIT_TABLE_TOP_SHARE * after.rect.height
    )


def join_split_tables(pages: Sequence[Page]) -> int:
    """Make each table that a page break cut into parts one table (issue 16).

    A table that ends a page's body (only "continued" notes and repeated running
    headers/footers below it) and a table that starts the next page's body are parts of one
    table when they have as many columns, their left and right edges are within
    :data:`SPLIT_TABLE_EDGE_SHARE` of the page width, the first ends below
    :data:`SPLIT_TABLE_BOTTOM_SHARE` of its page and the second starts above
    :data:`SPLIT_TABLE_TOP_SHARE` of its own. Then: the notes and running headers/footers
    between them (``_running_blocks``) are removed (they repeat what is kept elsewhere; the
    first occurrence of a running header is kept unless it is itself between two parts);
    a first row equal to the
    header (cells compared as plain case-folded text) becomes the header's exact text, so the
    chunker (``kb_shared.ingest.chunking``, "Tables") merges the parts and drops it; a first row
    that is not the header was taken for one by layout and becomes the first data row under
    the real header, unless it is all bold while the table's rows are not (the header of a
    different table); a first row that is only the wrapped end of the last row's cell
    (``markdown_cleanup.clean_table``'s rule) joins that row. Each row stays on the page
    where it starts, so it cites the page it is printed on.

    Returns:
        The number of parts joined to the part before them.
    """
    running = _running_blocks(pages)
    joined = 0
    for before, after in zip(pages, pages[1:]):
        upper, passed_upper = _body_edge(before, running, last=True)
        lower, passed_lower = _body_edge(after, running, last=False)
        if upper is None or lower is None:
            continue
        head, under = _rows(clean_table(upper.markdown)), _rows(clean_table(lower.markdown))
        if len(head) < 2 or len(under) < 2 or len(_row_key(head[0])) != len(_row_key(under[0])):
            continue
        if not _continues(before, upper, after, lower, right_edge=True):
            continue
        if _row_key(under[0]) == _row_key(head[0]):
            rows = under[2:]
        elif _bold(under[0]) and not _bold(head[-1]):
            continue  # a new table with its own header
        else:
            rows = [under[0], *under[2:]]
        merged = _rows(clean_table("\n".join([*head, *rows])))
        if rows and len(merged) < len(head) + len(rows):  # a row the page break cut in two
            upper.markdown = "\n".join(merged[: len(head)])
            rows = merged[len(head) :]
        lower.markdown = "\n".join([head[0], head[1], *rows])
        for block in passed_upper + passed_lower:
            block.removed = True
        joined += 1
    return joined


def join_split_code(pages: Sequence[Page]) -> int:
    """Keep a code listing that a page break cut in two one fenced block (issue 16: code is
    never split). A code box ending a page's body and one starting the next page's (passing
    over running headers/footers and "continued" notes, which are removed), with left edges
    in line (``_continues``; the right edge follows the longest line, so it is not compared),
    become one fence: the first part is written unclosed and the second unopened
    (``markdown_cleanup.split_fence``), so the page marker between them falls inside the
    fence, which the chunker allows (``kb_shared.ingest.chunking``, "Page markers"; the blank lines
    around the marker stay in the code as the page break), and every line cites its own page.
    A listing over three or more pages is chained the same way.

    Returns:
        The number of parts joined to the part before them.
    """
    running = _running_blocks(pages)
    joined = 0
    chain: list[Block] = []
    for before, after in zip(pages, pages[1:]):
        upper, passed_upper = _body_edge(before, running, last=True, code=True)
        lower, passed_lower = _body_edge(after, running, last=False, code=True)
        if upper is None or lower is None or not _continues(
            before, upper, after, lower, right_edge=False
        ):
            if len(chain) > 1:
                split_fence(chain)
            chain = []
            continue
        if not chain or chain[-1] is not upper:
            if len(chain) > 1:
                split_fence(chain)
            chain = [upper]
        chain.append(lower)
        for block in passed_upper + passed_lower:
            block.removed = True
        joined += 1
    if len(chain) > 1:
        split_fence(chain)
    return joined


__all__ = [
    "CONTINUED_NOTE_WORDS",
    "RUNNING_POSITION_PT",
    "SPLIT_TABLE_BOTTOM_SHARE",
    "SPLIT_TABLE_EDGE_SHARE",
    "SPLIT_TABLE_TOP_SHARE",
    "add_figures",
    "add_missed_tables",
    "code_tables_to_code",
    "join_split_code",
    "join_split_tables",
]
