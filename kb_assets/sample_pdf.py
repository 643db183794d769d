"""A small, made-up regulatory PDF for demos and tests: the "Sample Retail Market Procedure".

The real corpus (``../shared/corpus``) may not be shipped with the project, so the demo and
the tests that must always run build this PDF instead. Every feature the pipeline has to cope
with in a real market procedure is in it, on purpose:

* a cover block with ``Version: 1.2``, a document reference and an effective date (page 1);
* a numbered heading tree (``1``, ``1.1``, ``1.2``, ``2``, ``2.1`` …) in bold, larger type;
* obligation sentences ("The Retailer must notify the Distributor within 2 business days …"),
  defined terms ("In this procedure, ‘Life Support Customer’ means …") and change codes such
  as ``IN008-24``;
* a vector diagram (boxes and arrows drawn with ``draw_rect``/``draw_line``, no image) with
  the caption "Figure 1 – Notification flow" (page 2);
* an obligations schedule of :data:`OBLIGATION_ROWS` rows (clause, party, obligation,
  deadline) that runs over pages 3 and 4, its header row repeated on each page;
* a running header and a "Page N of M" footer on every page (page furniture).

It is written with pymupdf only, from the text in this module, in MuPDF's built-in Nimbus
Sans (Helvetica metrics) embedded as subset Type0 fonts with a ``/ToUnicode`` map, so the
typographic quotes and dashes extract as written. The bytes are the same on every run: the
metadata dates are fixed (:data:`FIXED_DATE`) and the file is saved with ``no_new_id`` and
``reproducible`` so no random file identifier or timestamp is written. Six pages.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path

import pymupdf

#: File name used when ``build_sample_pdf`` is given a directory.
SAMPLE_FILENAME = "sample-retail-market-procedure.pdf"

TITLE = "Sample Retail Market Procedure"
VERSION = "1.2"
DOC_REF = "SRMP-001"
EFFECTIVE_DATE = "1 July 2025"
FIGURE_CAPTION = "Figure 1 – Notification flow"
#: The page the diagram is drawn on (1-based).
FIGURE_PAGE = 2

#: PDF date (PDF 32000-1 §7.9.4) written as both creation and modification date, so two
#: builds are byte-identical.
FIXED_DATE = "D:20250701000000Z"

#: Rows in the obligations schedule (section 4); enough to run over two pages.
OBLIGATION_ROWS = 60

# A4 portrait in points (ISO 216: 210 x 297 mm).
PAGE_WIDTH, PAGE_HEIGHT = 595.0, 842.0
MARGIN_X = 56.0
TOP = 84.0
BOTTOM = 780.0
#: Resource names of the two embedded fonts (MuPDF's built-in Nimbus Sans, metric-compatible
#: with Helvetica). They are embedded, not base-14 references, because the base-14 path only
#: encodes Latin-1 and would lose ‘’ and – (the caption needs the en dash).
BODY_FONT, BOLD_FONT = "kbsans", "kbsansb"
_FONT_SOURCES = {BODY_FONT: "helv", BOLD_FONT: "hebo"}
BODY_SIZE = 10.0
LEADING = 1.35  # line height as a multiple of the font size

_HEADING_SIZES = {0: 22.0, 1: 15.0, 2: 12.0}

# --------------------------------------------------------------------------------------
# The text of the procedure (made up; names of parties follow Australian retail usage).
# --------------------------------------------------------------------------------------
_SECTIONS: list[tuple[str, int, list[str]]] = [
    (
        "1 Introduction",
        1,
        [],
    ),
    (
        "1.1 Purpose",
        2,
        [
            "This procedure sets out how Retailers, Distributors and Metering Coordinators "
            "exchange notifications about customers who depend on life support equipment, "
            "about planned interruptions and about changes to a customer's connection. It is "
            "a sample document written for testing a knowledge base; it has no legal effect.",
            "The procedure applies from the effective date shown above and replaces version "
            "1.1. Changes in this version are listed in the change register under codes "
            "IN008-24 and IN012-25.",
        ],
    ),
    (
        "1.2 Scope",
        2,
        [
            "This procedure applies to every Retailer and Distributor operating in the "
            "sample market, and to Metering Coordinators when they act for a Retailer. It "
            "does not apply to embedded networks, which are covered by a separate guideline "
            "(IN021-23).",
        ],
    ),
    (
        "1.3 Structure of this procedure",
        2,
        [
            "Section 2 defines the terms used. Section 3 states the notification "
            "obligations and shows the notification flow. Section 4 lists every obligation "
            "with its deadline. Section 5 covers records and breach reporting.",
        ],
    ),
    (
        "2 Definitions and interpretation",
        1,
        [],
    ),
    (
        "2.1 Defined terms",
        2,
        [
            "In this procedure, ‘Life Support Customer’ means a customer at whose premises "
            "a person resides who relies on life support equipment that requires an "
            "electricity supply, as confirmed by a medical certificate.",
            "In this procedure, ‘Business Day’ means a day that is not a Saturday, a Sunday "
            "or a public holiday in the State where the premises are located.",
            "In this procedure, ‘Planned Interruption’ means an interruption of supply that "
            "the Distributor arranges in advance for maintenance, repair or augmentation of "
            "its network.",
            "In this procedure, ‘Notification’ means a message sent through the B2B hub in "
            "the format set out in the sample B2B guide (IN004-22).",
            "In this procedure, ‘Registration Date’ means the date on which the Retailer "
            "first records a Life Support Customer in its systems.",
        ],
    ),
    (
        "2.2 Interpretation",
        2,
        [
            "A reference to a period of Business Days after an event excludes the day of the "
            "event. Headings are for convenience only and do not affect interpretation. Where "
            "this procedure and the rules are inconsistent, the rules prevail.",
        ],
    ),
    (
        "3 Notification obligations",
        1,
        [],
    ),
    (
        "3.1 Life support notifications",
        2,
        [
            "The Retailer must notify the Distributor within 2 business days after the "
            "Registration Date of a Life Support Customer.",
            "The Distributor must confirm receipt of a life support Notification within 1 "
            "business day and must register the premises as requiring life support before "
            "the next Planned Interruption is scheduled.",
            "The Retailer must not deregister a Life Support Customer unless it has sent two "
            "written reminders at least 15 business days apart (change IN008-24).",
        ],
    ),
    (
        "3.2 Planned interruptions",
        2,
        [
            "The Distributor must give each affected customer at least 4 business days' "
            "notice of a Planned Interruption, and must give a Life Support Customer that "
            "notice in writing.",
            "The flow of notifications between the parties is shown in Figure 1.",
        ],
    ),
]

_AFTER_FIGURE: list[tuple[str, int, list[str]]] = [
    (
        "3.3 Timing of notifications",
        2,
        [
            "A Notification received after 3 pm is treated as received on the next Business "
            "Day. Each party must keep its B2B hub connection available during business "
            "hours (change IN012-25).",
        ],
    ),
    (
        "3.4 Content of a life support notification",
        2,
        [
            "A life support Notification must contain:",
            "• the National Metering Identifier (NMI) of the premises;",
            "• the Registration Date and the type of life support equipment;",
            "• the name and telephone number of the Life Support Customer's contact person;",
            "• the reference number of the medical confirmation form, once received.",
            "The Distributor may reject a Notification that omits any of these items, giving "
            "the reason code LS-07 in its response.",
        ],
    ),
    (
        "4 Obligations schedule",
        1,
        [
            "Table 1 lists every obligation in this procedure with the party responsible "
            "and the deadline that applies.",
        ],
    ),
]

_CLOSING: list[tuple[str, int, list[str]]] = [
    (
        "5 Compliance and reporting",
        1,
        [],
    ),
    (
        "5.1 Records",
        2,
        [
            "Each party must keep a record of every Notification it sends or receives under "
            "this procedure for at least 7 years.",
        ],
    ),
    (
        "5.2 Breach reporting",
        2,
        [
            "A party that becomes aware of a breach of this procedure must report it to the "
            "regulator within 5 business days, quoting the obligation's clause number from "
            "Table 1.",
        ],
    ),
    (
        "5.3 Audits",
        2,
        [
            "The regulator may audit a party's compliance with this procedure once in each "
            "financial year. The audited party must provide the records requested within 10 "
            "business days of the request.",
        ],
    ),
]

_APPENDIX: list[tuple[str, int, list[str]]] = [
    (
        "Appendix A Worked example",
        1,
        [
            "On Monday 3 March a customer tells the Retailer that a resident uses a home "
            "dialysis machine. The Retailer records the Registration Date as 3 March and must "
            "notify the Distributor by the end of Wednesday 5 March (2 business days).",
            "The Distributor confirms receipt on Thursday 6 March and registers the premises. "
            "A Planned Interruption scheduled for 20 March must now be notified to the "
            "customer in writing at least 4 business days before it, that is by 14 March.",
            "If the medical confirmation form has not arrived after 15 business days, the "
            "Retailer sends the first written reminder under clause 3.1 (change IN008-24).",
        ],
    ),
]

_PARTIES = ("Retailer", "Distributor", "Metering Coordinator", "Retailer", "Distributor")
_OBLIGATIONS = (
    "Notify the {other} of a new Life Support Customer",
    "Confirm receipt of a life support Notification",
    "Send the customer a medical confirmation form",
    "Give written notice of a Planned Interruption",
    "Update the site register and publish change {code}",
    "Respond to a request for metering data",
    "Record the outcome of a deregistration reminder",
    "Resend a rejected Notification with corrections",
)
_DEADLINES = (
    "2 business days",
    "1 business day",
    "5 business days",
    "4 business days",
    "10 business days",
    "Within 24 hours",
)
_CODES = ("IN008-24", "IN012-25", "IN004-22", "IN021-23")


def obligation_rows(count: int = OBLIGATION_ROWS) -> list[tuple[str, str, str, str]]:
    """The obligations schedule: ``count`` rows of ``(clause, party, obligation, deadline)``.

    Deterministic (index arithmetic, no randomness); clauses run ``4.1.1`` … with ten
    clauses per sub-section (``4.1.1``-``4.1.10``, ``4.2.1`` …). Row 1 is
    ``("4.1.1", "Retailer", "Notify the Distributor of a new Life Support Customer",
    "2 business days")``.
    """
    rows = []
    for i in range(count):
        party = _PARTIES[i % len(_PARTIES)]
        other = "Retailer" if party == "Distributor" else "Distributor"
        text = _OBLIGATIONS[i % len(_OBLIGATIONS)].format(
            other=other, code=_CODES[(i // len(_OBLIGATIONS)) % len(_CODES)]
        )
        clause = f"4.{i // 10 + 1}.{i % 10 + 1}"
        rows.append((clause, party, text, _DEADLINES[i % len(_DEADLINES)]))
    return rows


# --------------------------------------------------------------------------------------
# A minimal flow-layout writer on top of pymupdf.
# --------------------------------------------------------------------------------------
_FONTS: dict[str, pymupdf.Font] = {}


def _font(name: str) -> pymupdf.Font:
    """The pymupdf ``Font`` behind resource name ``name`` (loaded once)."""
    if name not in _FONTS:
        _FONTS[name] = pymupdf.Font(_FONT_SOURCES[name])
    return _FONTS[name]


_ADVANCES: dict[tuple[str, str], float] = {}


def _text_length(text: str, font: str, size: float) -> float:
    """Width of ``text`` in points (glyph advances cached per character: pymupdf's
    ``Font.text_length`` re-encodes every character on every call and dominated the build)."""
    total = 0.0
    for ch in text:
        key = (font, ch)
        if key not in _ADVANCES:
            _ADVANCES[key] = _font(font).glyph_advance(ord(ch))
        total += _ADVANCES[key]
    return total * size


def _new_page(doc: pymupdf.Document) -> pymupdf.Page:
    page = doc.new_page(width=PAGE_WIDTH, height=PAGE_HEIGHT)
    for name in _FONT_SOURCES:
        page.insert_font(fontname=name, fontbuffer=_font(name).buffer)
    return page


def _wrap(text: str, width: float, font: str, size: float) -> list[str]:
    """Greedy word wrap of ``text`` into lines no wider than ``width`` points."""
    lines: list[str] = []
    current = ""
    for word in text.split():
        trial = f"{current} {word}" if current else word
        if current and _text_length(trial, font, size) > width:
            lines.append(current)
            current = word
        else:
            current = trial
    if current:
        lines.append(current)
    return lines


class _Writer:
    """Writes blocks top to bottom, starting a new page when a block does not fit."""

    def __init__(self, doc: pymupdf.Document) -> None:
        self.doc = doc
        self.page: pymupdf.Page = _new_page(doc)
        self.y = TOP

    def new_page(self) -> None:
        self.page = _new_page(self.doc)
        self.y = TOP

    def ensure(self, height: float) -> None:
        if self.y + height > BOTTOM:
            self.new_page()

    def lines(self, lines: Sequence[str], font: str, size: float, x: float = MARGIN_X) -> None:
        step = size * LEADING
        for line in lines:
            self.ensure(step)
            self.page.insert_text((x, self.y + size), line, fontname=font, fontsize=size)
            self.y += step

    def heading(self, text: str, level: int) -> None:
        size = _HEADING_SIZES[level]
        self.ensure(size * LEADING * 2 + 6 * BODY_SIZE * LEADING)  # keep with next lines
        self.y += size * 0.6
        self.lines(_wrap(text, PAGE_WIDTH - 2 * MARGIN_X, BOLD_FONT, size), BOLD_FONT, size)
        self.y += size * 0.3

    def paragraph(self, text: str, font: str = BODY_FONT, size: float = BODY_SIZE) -> None:
        self.lines(_wrap(text, PAGE_WIDTH - 2 * MARGIN_X, font, size), font, size)
        self.y += size * 0.6

    def table(
        self,
        header: Sequence[str],
        rows: Sequence[Sequence[str]],
        widths: Sequence[float],
        size: float = 9.0,
    ) -> None:
        """A ruled table; the header row is repeated at the top of each page it runs onto."""
        pad = 3.0

        def row_height(cells: Sequence[str], font: str) -> tuple[float, list[list[str]]]:
            wrapped = [_wrap(c, w - 2 * pad, font, size) or [""] for c, w in zip(cells, widths)]
            return max(len(w) for w in wrapped) * size * LEADING + 2 * pad, wrapped

        def draw_row(cells: Sequence[str], font: str, fill: tuple[float, ...] | None) -> None:
            height, wrapped = row_height(cells, font)
            x = MARGIN_X
            for w, lines in zip(widths, wrapped):
                rect = pymupdf.Rect(x, self.y, x + w, self.y + height)
                self.page.draw_rect(rect, color=(0.3, 0.3, 0.3), fill=fill, width=0.6)
                for k, line in enumerate(lines):
                    baseline = self.y + pad + size + k * size * LEADING
                    self.page.insert_text((x + pad, baseline), line, fontname=font, fontsize=size)
                x += w
            self.y += height

        header_height, _ = row_height(header, BOLD_FONT)
        self.ensure(header_height + 3 * size * LEADING)
        draw_row(header, BOLD_FONT, (0.85, 0.89, 0.95))
        for row in rows:
            height, _ = row_height(row, BODY_FONT)
            if self.y + height > BOTTOM:
                self.new_page()
                draw_row(header, BOLD_FONT, (0.85, 0.89, 0.95))
            draw_row(row, BODY_FONT, None)
        self.y += BODY_SIZE

    def figure(
        self, height: float, draw: Callable[[pymupdf.Page, float], None], caption: str
    ) -> None:
        self.ensure(height + 30)
        self.y += 6
        draw(self.page, self.y)
        self.y += height + 8
        self.lines([caption], BOLD_FONT, 9.0)
        self.y += BODY_SIZE


def _arrow(page: pymupdf.Page, start: pymupdf.Point, end: pymupdf.Point) -> None:
    """A straight connector with a filled triangular head at ``end``."""
    page.draw_line(start, end, color=(0.1, 0.1, 0.1), width=1.2)
    direction = end - start
    length = abs(direction)
    ux, uy = direction.x / length, direction.y / length
    back = pymupdf.Point(end.x - 8 * ux, end.y - 8 * uy)
    left = pymupdf.Point(back.x - 4 * uy, back.y + 4 * ux)
    right = pymupdf.Point(back.x + 4 * uy, back.y - 4 * ux)
    page.draw_polyline([end, left, right, end], color=(0.1, 0.1, 0.1), fill=(0.1, 0.1, 0.1))


def _notification_flow(page: pymupdf.Page, top: float) -> None:
    """Figure 1: Customer -> Retailer -> Distributor, the confirmation coming back over the
    top and every Notification passing through the B2B hub drawn underneath."""
    box_w, box_h = 104.0, 46.0
    ink = (0.1, 0.1, 0.1)
    labels = [
        ("Life Support", "Customer"),
        ("Retailer", "registers customer"),
        ("Distributor", "updates register"),
    ]
    gap = (PAGE_WIDTH - 2 * MARGIN_X - 3 * box_w) / 2
    boxes = []
    for i, (title, sub) in enumerate(labels):
        x = MARGIN_X + i * (box_w + gap)
        rect = pymupdf.Rect(x, top + 34, x + box_w, top + 34 + box_h)
        page.draw_rect(rect, color=(0.1, 0.2, 0.45), fill=(0.87, 0.92, 0.98), width=1.2, radius=0.1)
        page.insert_text((x + 10, rect.y0 + 19), title, fontname=BOLD_FONT, fontsize=10)
        page.insert_text((x + 10, rect.y0 + 34), sub, fontname=BODY_FONT, fontsize=8.5)
        boxes.append(rect)
    for a, b, label in [(0, 1, "tells Retailer"), (1, 2, "within 2 business days")]:
        start = pymupdf.Point(boxes[a].x1, boxes[a].y0 + 23)
        end = pymupdf.Point(boxes[b].x0, boxes[b].y0 + 23)
        _arrow(page, start, end)
        page.insert_text((start.x + 4, start.y - 4), label, fontname=BODY_FONT, fontsize=7)
    # confirmation: Distributor top -> up -> left -> down into Retailer top
    high = top + 10
    d_top = pymupdf.Point((boxes[2].x0 + boxes[2].x1) / 2, boxes[2].y0)
    r_top = pymupdf.Point((boxes[1].x0 + boxes[1].x1) / 2, boxes[1].y0)
    page.draw_line(d_top, pymupdf.Point(d_top.x, high), color=ink, width=1.2)
    page.draw_line(pymupdf.Point(d_top.x, high), pymupdf.Point(r_top.x, high), color=ink, width=1.2)
    _arrow(page, pymupdf.Point(r_top.x, high), r_top)
    page.insert_text(
        (r_top.x + 8, high - 3), "confirms within 1 business day", fontname=BODY_FONT, fontsize=7
    )
    # the B2B hub that carries both Notifications
    centre = (boxes[1].x1 + boxes[2].x0) / 2
    hub = pymupdf.Rect(centre - 55, boxes[1].y1 + 30, centre + 55, boxes[1].y1 + 58)
    page.draw_rect(hub, color=(0.3, 0.3, 0.3), fill=(0.95, 0.95, 0.95), width=1.0)
    page.insert_text(
        (hub.x0 + 12, hub.y0 + 18), "B2B hub (IN004-22)", fontname=BODY_FONT, fontsize=8
    )
    _arrow(page, pymupdf.Point(boxes[1].x1 - 20, boxes[1].y1), pymupdf.Point(hub.x0 + 10, hub.y0))
    _arrow(page, pymupdf.Point(hub.x1 - 10, hub.y0), pymupdf.Point(boxes[2].x0 + 20, boxes[2].y1))


def _cover(w: _Writer) -> None:
    w.y = 150
    w.lines([TITLE], BOLD_FONT, _HEADING_SIZES[0])
    w.y += 10
    w.paragraph("A procedure for life support and planned interruption notifications", size=12)
    w.y += 24
    for key, value in [
        ("Document ref:", DOC_REF),
        ("Version:", VERSION),
        ("Effective date:", EFFECTIVE_DATE),
        ("Status:", "FINAL"),
    ]:
        w.page.insert_text((MARGIN_X, w.y + 10), key, fontname=BOLD_FONT, fontsize=10)
        w.page.insert_text((MARGIN_X + 110, w.y + 10), value, fontname=BODY_FONT, fontsize=10)
        w.y += 16
    w.y += 20


def _furniture(doc: pymupdf.Document) -> None:
    """Running header, header rule and "Page N of M" footer on every page."""
    total = doc.page_count
    for number, page in enumerate(doc, start=1):
        page.insert_text(
            (MARGIN_X, 44), f"{TITLE} | Version {VERSION}", fontname=BODY_FONT, fontsize=8
        )
        page.draw_line(
            (MARGIN_X, 52), (PAGE_WIDTH - MARGIN_X, 52), color=(0.5, 0.5, 0.5), width=0.5
        )
        page.insert_text(
            (MARGIN_X, 812),
            f"{DOC_REF} | Effective {EFFECTIVE_DATE}",
            fontname=BODY_FONT,
            fontsize=8,
        )
        label = f"Page {number} of {total}"
        width = _text_length(label, BODY_FONT, 8)
        page.insert_text(
            (PAGE_WIDTH - MARGIN_X - width, 812), label, fontname=BODY_FONT, fontsize=8
        )


@functools.lru_cache(maxsize=1)
def sample_pdf_bytes() -> bytes:
    """Return the sample procedure as PDF bytes (identical on every call; built once per
    process, ~2 s, then cached).

    Layout (A4 portrait): page 1 cover, version block, sections 1 and 2; page 2 section 3
    with Figure 1 (vector drawing, no raster image); pages 3-4 section 4's obligations
    schedule of :data:`OBLIGATION_ROWS` rows; page 5 section 5 and the change register
    (section 6); page 6 Appendix A. The page breaks follow from the text (six pages).
    """
    doc = pymupdf.open()
    try:
        w = _Writer(doc)
        _cover(w)
        for title, level, paragraphs in _SECTIONS:
            w.heading(title, level)
            for text in paragraphs:
                w.paragraph(text)
        w.figure(140, _notification_flow, FIGURE_CAPTION)
        for title, level, paragraphs in _AFTER_FIGURE:
            w.heading(title, level)
            for text in paragraphs:
                w.paragraph(text)
        w.lines(["Table 1 – Obligations schedule"], BOLD_FONT, 9.0)
        w.y += 4
        w.table(
            ("Clause", "Party", "Obligation", "Deadline"), obligation_rows(), (52, 100, 243, 88)
        )
        for title, level, paragraphs in _CLOSING:
            w.heading(title, level)
            for text in paragraphs:
                w.paragraph(text)
        w.heading("6 Change register", 1)
        w.table(
            ("Version", "Date", "Changes"),
            [
                ("1.0", "1 July 2023", "First issue."),
                ("1.1", "1 March 2024", "Deregistration reminders added (IN008-24)."),
                ("1.2", "1 July 2025", "Timing of notifications clarified (IN012-25)."),
            ],
            (60, 90, 333),
        )
        w.new_page()
        for title, level, paragraphs in _APPENDIX:
            w.heading(title, level)
            for text in paragraphs:
                w.paragraph(text)
        _furniture(doc)
        doc.set_metadata(
            {
                "title": TITLE,
                "author": "kb sample generator",
                "subject": "Life support and planned interruption notifications",
                "keywords": f"{DOC_REF}, version {VERSION}",
                "creator": "kb_assets.sample_pdf",
                "producer": "kb_assets.sample_pdf",
                "creationDate": FIXED_DATE,
                "modDate": FIXED_DATE,
            }
        )
        doc.subset_fonts()
        return doc.tobytes(garbage=3, deflate=True, no_new_id=True, reproducible=True)
    finally:
        doc.close()


def build_sample_pdf(path: str | Path) -> Path:
    """Write the sample procedure PDF and return its path.

    Args:
        path: the file to write, or an existing directory (the file is then
            ``path / SAMPLE_FILENAME``). Parent directories are created.

    Returns:
        The path written. Its bytes are :func:`sample_pdf_bytes`, so repeated builds are
        byte-identical.
    """
    target = Path(path)
    if target.is_dir():
        target = target / SAMPLE_FILENAME
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(sample_pdf_bytes())
    return target
