"""Figure boxes with Gemini vision (google-genai SDK, JSON-schema output).

``GeminiFigureLocator`` renders each page the converter marked with ``[Figure: …]`` (only
those pages: the markers say where figures are without another model call), sends the PNG
with the captions expected there, and asks for every figure's box as **named fields**
``ymin, xmin, ymax, xmax`` on a 0–1000 scale of the page image: Gemini's own box convention
(Gemini API docs, "Image understanding: object detection"). Named fields cannot come back
transposed the way a positional ``[x0, y0, x1, y1]`` array silently can (reference README,
"Figures").

Each box is then checked, never trusted (geometry in ``kb_shared.ingest.figures``):

* ``box_from_1000_scale`` converts it to PDF points and sorts min and max on each axis;
* ``usable_box`` clips it to the page. A box that is missing, not numeric or degenerate
  (nothing left after clipping) falls back to **the whole page**, logged as a warning with the
  raw numbers (a mislocated diagram is worth more than none, and the failure is otherwise
  invisible). A real box under ``MIN_FIGURE_AREA`` (3 %) of the page is **dropped** like a
  decorative mark (the figure rule of ``kb_shared.ingest.figures``: a box that small is a logo,
  icon or header mark, not a figure), logged at INFO;
* a figure the model marks ``decorative`` (logo, letterhead, signature, stamp, watermark,
  barcode, decorative photo) is **dropped** outright, never sent to the whole-page fallback;
* a page whose marker promised a figure but where the model found nothing at all gets the
  whole page too (one box per marker), logged.

Pages are rendered one at a time (PyMuPDF is not thread-safe) and sent in parallel.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

import pymupdf

from kb_shared.errors import ConversionError, ProviderError
from kb_shared.ingest.figures import MIN_FIGURE_AREA, box_from_1000_scale, usable_box
from kb_shared.models import GEMINI_VISION_MODEL
from kb_shared.providers.base import FigureBox, FigureLocator, FigureRegion
from kb_shared.providers.cloud_common import CloudProvider, gemini_content, parse_json_object

log = logging.getLogger(__name__)

#: Longest edge of the page image sent (pixels). Gemini tiles images into 768 x 768 crops
#: (258 tokens each; Gemini API docs, "Image understanding: token calculation"), so 1536 px is
#: at most 4 tiles per page while a diagram's labels stay legible. Box numbers are relative
#: (0–1000), so the resolution does not change the geometry.
PAGE_IMAGE_EDGE_PX = 1536
#: ``maxOutputTokens`` per page (a page's figure list is a few hundred tokens).
MAX_OUTPUT_TOKENS = 4_096
#: Thinking budget: 0 switches Gemini 2.5 Flash's thinking off. Google's object-detection
#: examples do so (Gemini API docs, "Image understanding"), and thinking tokens would
#: otherwise be taken from ``maxOutputTokens``.
THINKING_BUDGET = 0

BOX_FIELDS = ("ymin", "xmin", "ymax", "xmax")

#: The answer's JSON schema (``responseJsonSchema``).
RESPONSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "figures": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "description": {"type": "string"},
                    "decorative": {"type": "boolean"},
                    **{
                        name: {"type": "integer", "minimum": 0, "maximum": 1000}
                        for name in BOX_FIELDS
                    },
                },
                "required": ["description", "decorative", *BOX_FIELDS],
            },
        }
    },
    "required": ["figures"],
}

PROMPT = """This image is page {page} of a PDF. The text of the document marks these \
figures on this page:
{captions}

List every figure on the page that carries information a reader could need: diagrams, \
flowcharts, charts, maps, technical drawings, screenshots, photographs of equipment. For each \
give a description (its caption if it has one, then what it shows in one sentence) and its \
bounding box as integers ymin, xmin, ymax, xmax on a 0-1000 scale of the image (0,0 is the \
top-left corner; y grows downwards, x to the right). Include the figure's title, labels and \
legend in the box. Set decorative to false for these.

Also list logos, letterheads, signatures, stamps, watermarks, barcodes and decorative images \
with decorative set to true. A table of text is not a figure."""


class GeminiFigureLocator(CloudProvider, FigureLocator):
    """``FigureLocator`` that asks Gemini where the marked figures are; constructor,
    ``from_settings`` (``GEMINI_API_KEY``), ``usage()`` and ``close()`` as
    :class:`~kb_shared.providers.cloud_common.CloudProvider`.

    Args:
        client: ``google.genai.Client``.
        model: default (``None``) :data:`kb_shared.models.GEMINI_VISION_MODEL`.
        concurrency: pages in flight at once.
        retry, key: as ``CloudProvider``.
    """

    vendor = "Gemini"
    provider = "gemini-figures"
    default_model = GEMINI_VISION_MODEL
    needed_by = "the Gemini figure locator"

    def locate(self, pdf: bytes, regions: Sequence[FigureRegion]) -> list[FigureBox]:
        """Boxes of the informative figures on the pages ``regions`` name.

        Returns:
            ``FigureBox`` es in page order (within a page, the model's order), never
            decorative ones; ``bbox`` in PDF points.

        Raises:
            ConversionError: ``pdf`` is not a readable PDF, or a region names a page it
                does not have.
            ProviderError: a call failed for good or its answer was malformed.
        """
        if not regions:
            return []
        try:
            doc = pymupdf.open(stream=pdf, filetype="pdf")
        except Exception as exc:  # noqa: BLE001 - pymupdf raises several types
            raise ConversionError(f"not a readable PDF ({exc})") from exc
        by_page: dict[int, list[str]] = {}
        for region in regions:
            by_page.setdefault(region.page, []).append(region.caption)
        with doc:
            bad = [p for p in by_page if not 1 <= p <= doc.page_count]
            if bad:
                raise ConversionError(
                    f"figure regions name pages {sorted(bad)} but the PDF has {doc.page_count}"
                )
            pages = [
                (number, _render(doc[number - 1]), tuple(doc[number - 1].rect), captions)
                for number, captions in sorted(by_page.items())
            ]
        found = self.calls.map(self._page, pages)
        return [box for boxes in found for box in boxes]

    def _page(
        self, item: tuple[int, bytes, tuple[float, float, float, float], list[str]]
    ) -> list[FigureBox]:
        from google.genai import types  # noqa: PLC0415

        number, png, rect, captions = item
        what = f"locating figures on page {number}"
        caption_lines = "\n".join(f"- {c}" if c else "- (no caption)" for c in captions)
        parts = [
            types.Part.from_bytes(data=png, mime_type="image/png"),
            types.Part(text=PROMPT.format(page=number, captions=caption_lines)),
        ]
        config = types.GenerateContentConfig(
            response_mime_type="application/json",
            response_json_schema=RESPONSE_SCHEMA,
            max_output_tokens=MAX_OUTPUT_TOKENS,
            thinking_config=types.ThinkingConfig(thinking_budget=THINKING_BUDGET),
        )
        response, _, _ = gemini_content(self, what, parts, config)
        answer = parse_json_object(response.text or "", "Gemini", what)
        figures = answer.get("figures")
        if not isinstance(figures, list):
            raise ProviderError(f"Gemini {what}: the answer has no 'figures' list")
        return boxes_for_page(number, rect, figures, captions)


def _render(page: pymupdf.Page) -> bytes:
    """The page as PNG with its long edge :data:`PAGE_IMAGE_EDGE_PX` pixels."""
    zoom = PAGE_IMAGE_EDGE_PX / max(page.rect.width, page.rect.height)
    return page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False).tobytes("png")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def boxes_for_page(
    page: int,
    rect: Sequence[float],
    figures: Sequence[Any],
    captions: Sequence[str] = (),
) -> list[FigureBox]:
    """Turn one page's answer into ``FigureBox`` es (module docstring rules).

    Args:
        page: 1-based page number.
        rect: the page rectangle in points ``(x0, y0, x1, y1)``.
        figures: the answer's ``figures`` items (dicts with ``description``,
            ``decorative`` and the four box fields on the 0–1000 scale).
        captions: the converter's captions for this page (used when the model found
            nothing, one whole-page box each).

    Returns:
        The informative figures; decorative ones are dropped.
    """
    x0, y0, x1, y1 = (float(v) for v in rect)
    width, height = x1 - x0, y1 - y0
    whole = (x0, y0, x1, y1)
    boxes: list[FigureBox] = []
    for item in figures:
        if not isinstance(item, dict):
            log.warning("page %d: ignored a figure entry that is not an object: %r", page, item)
            continue
        description = " ".join(str(item.get("description") or "").split())
        raw = {name: item.get(name) for name in BOX_FIELDS}
        raw_text = ", ".join(f"{k}={v}" for k, v in raw.items())
        if item.get("decorative") is True:
            log.info("page %d: dropped a decorative mark (%s) at %s", page, description, raw_text)
            continue
        values = {k: _number(v) for k, v in raw.items()}
        box = None
        if all(v is not None for v in values.values()):
            located = box_from_1000_scale(
                ymin=values["ymin"], xmin=values["xmin"], ymax=values["ymax"],
                xmax=values["xmax"], page_width=width, page_height=height,
            )
            box = usable_box(
                (located.x0 + x0, located.y0 + y0, located.x1 + x0, located.y1 + y0), whole,
                min_area_fraction=0.0,
            )
        if box is not None and box.area < MIN_FIGURE_AREA * width * height:
            log.info(
                "page %d: dropped %r, a box under %d%% of the page (%s): a mark, not a figure",
                page, description, round(MIN_FIGURE_AREA * 100), raw_text,
            )
            continue
        if box is None:
            log.warning(
                "page %d: figure %r has an unusable box (%s; missing, not numeric or "
                "degenerate); using the whole page",
                page, description, raw_text,
            )
            bbox = whole
        else:
            bbox = box.as_tuple()
        boxes.append(FigureBox(page=page, bbox=bbox, caption=description))
    if not figures:
        for caption in captions or ("",):
            log.warning(
                "page %d: the text marks a figure (%r) but Gemini found none; using the whole "
                "page", page, caption,
            )
            boxes.append(FigureBox(page=page, bbox=whole, caption=caption))
    return boxes
