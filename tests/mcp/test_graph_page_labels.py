"""On ``/graph`` a label near the drawing area's right edge is drawn whole, not cut under the
side panel (a new-user trial found the rightmost entity's label hidden there): the fitted
graph always puts its rightmost node at that edge, so its label (and its hover box) go on the
node's left when they do not fit on the right. Checked in Chromium at 1280 and 1920 px by the
ink of sigma's label canvases, on ``tests/mcp/corpus.py``'s graph with fixed positions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import browser_page, chromium  # noqa: F401 - fixtures
from tests.mcp.corpus import HashingEmbedder, served

#: The entity placed rightmost, and where every node goes (graph units; the others far from
#: its row, so the row's ink is its label's alone).
RIGHTMOST = "dispatch instruction"
POSITIONS = {
    RIGHTMOST: (1000, 0),
    "scheduled generator": (0, 60),
    "retailer": (0, 120),
    "distributor": (0, 180),
    "customer": (0, -60),
    "life support register": (0, -120),
}

#: The ink of one canvas in the row of ``key``'s node: the CSS-pixel columns (from the
#: drawing area's left edge) where anything is drawn, the node's own column, the area's width
#: and the label's width in sigma's default label font (14px Arial).
ROW_INK = """([key, layer]) => {
  const r = kbGraph.renderer();
  const canvas = r.getCanvases()[layer];
  const box = canvas.getBoundingClientRect();
  const at = kbGraph.nodePosition(key);
  const ratio = canvas.width / box.width;
  const top = Math.round((at.y - box.top - 12) * ratio), rows = Math.round(24 * ratio);
  const pixels = canvas.getContext("2d").getImageData(0, top, canvas.width, rows).data;
  const columns = [];
  for (let x = 0; x < canvas.width; x++) {
    for (let y = 0; y < rows; y++) {
      if (pixels[(y * canvas.width + x) * 4 + 3] > 0) { columns.push(x / ratio); break; }
    }
  }
  const measure = document.createElement("canvas").getContext("2d");
  measure.font = "normal 14px Arial";
  const label = r.getGraph().getNodeAttribute(key, "label");
  return {columns, node: at.x - box.left, width: box.width,
          text: measure.measureText(label).width};
}"""


@pytest.fixture(scope="module")
def base(corpus_home: Path, embedder: HashingEmbedder) -> Iterator[str]:
    with served(corpus_home, embedder) as url:
        yield url


def settle(page: Any) -> None:
    """The layout stopped, the nodes at ``POSITIONS``, the camera on the whole graph, and two
    frames drawn."""
    page.evaluate("kbGraph.stopLayout()")
    page.evaluate(
        """positions => {
          const graph = kbGraph.renderer().getGraph();
          for (const [key, [x, y]] of Object.entries(positions)) {
            graph.mergeNodeAttributes(key, {x, y});
          }
        }""",
        POSITIONS,
    )
    page.evaluate("kbGraph.camera().setState({x: 0.5, y: 0.5, ratio: 1, angle: 0})")
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


@pytest.mark.parametrize("width", [1280, 1920])
def test_the_rightmost_label_is_drawn_whole_inside_the_drawing_area(
    browser_page: Any, base: str, width: int, tmp_path: Path
) -> None:
    page = browser_page
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(base + "/graph")
    page.wait_for_function("() => window.kbGraph && window.kbGraph.ready")
    settle(page)
    panel = page.locator("aside").bounding_box()
    drawing = page.locator("#graph").bounding_box()
    assert drawing["x"] + drawing["width"] <= panel["x"] + 0.5  # the canvas ends at the panel

    ink = page.evaluate(ROW_INK, [RIGHTMOST, "labels"])
    assert ink["node"] > ink["width"] - 80  # it sits at the right edge
    drawn = max(ink["columns"]) - min(ink["columns"])
    # the whole label, once (glyph ink stops a few pixels short of the text's advance width)
    assert ink["text"] - 6 <= drawn <= ink["text"] + 2, ink
    assert max(ink["columns"]) < ink["node"]  # on the node's left, inside the area

    # the hover box of that node is whole too
    at = page.evaluate("key => kbGraph.nodePosition(key)", RIGHTMOST)
    page.mouse.move(at["x"], at["y"])
    page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
    hover = page.evaluate(ROW_INK, [RIGHTMOST, "hovers"])
    assert hover["columns"], "no hover box drawn"
    assert max(hover["columns"]) - min(hover["columns"]) >= hover["text"] + 6
    assert max(hover["columns"]) < hover["width"] - 1  # not cut by the area's edge
    page.screenshot(path=str(tmp_path / f"graph-{width}.png"))
    assert page.kb_errors == []
