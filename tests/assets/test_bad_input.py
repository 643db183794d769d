"""Bad input, refused with a reason and nothing left behind (issue 16), document side.

One table, ``CASES``: each kind of bad (or awkward) file, where it is decided (``intake``:
``admit`` refuses it and writes nothing; ``build``: the build job's ``markdown`` step refuses
it, leaving what DESIGN.md documents, the catalog row marked failed with the reason and the
stored PDF, nothing else; ``ready``: it ingests), and the exact reason. Every case then checks
the catalog, blobs, vector index, graph and Dagster partitions for anything else.

The builds run the real build job (with its failure hook) in-process on the real local PDF
converter and fake models (``tests/assets/fake_providers.py``). Names that a file system
cannot hold (``../``, NUL, 300 characters) come in as a URL download's name, the one way a
name reaches intake without a file of that name. Market data (an AER workbook that is a
renamed PDF, a Notion page whose properties have the wrong types) has its own two tests.

Last, the pre-flight itself (``kb_shared.ingest.pdf.check_limits``): each stream filter is measured as
MuPDF decodes it and refused past the cap, an LZW bomb too, and the caps follow the settings.
"""

from __future__ import annotations

import base64
import re
import unicodedata
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pymupdf
import pytest
import respx
from typer.testing import CliRunner

from kb_assets import intake, url_intake
from kb_assets.cli import main as cli
from kb_assets.assets import CORPUS_ASSETS
from kb_assets.constants import BUILD_JOB, DOCUMENTS
from kb_assets.jobs import kb_resources
from kb_assets.intake import IntakeStatus, admit
from kb_assets.url_intake import admit_sources
from kb_assets.jobs import build_documents_job
from kb_assets.resources import StoresResource
from kb_shared.errors import AerWorkbookError, ConversionError, NotionSchemaError
from kb_shared.fetch.fetcher import Fetched
from kb_shared.identity import sha256_bytes
from kb_shared.market.aer_layout import read_workbook
from kb_shared.market.notion import NotionTracker, sync_notion
from kb_shared.ingest.pdf import PdfLimits, check_limits, check_pdf, stream_inflated_size
from kb_shared.providers.local_markdown import PymupdfMarkdownConverter
from kb_shared.settings import Settings
from tests.assets.fake_providers import FakeProviders
from tests.conftest import corpus_dir
from tests.market.notion_server import API_URL, DATA_SOURCE_ID, TOKEN, FakeNotion, tracker_page

MIB = 1024 * 1024
#: The modulus of Adler-32, zlib's checksum (RFC 1950 §8.2).
ADLER_BASE = 65521
PROCEDURE = ("Retail Procedure", "The Retailer must notify the Distributor within 5 business days.")
ATTACHMENT = b"ATTACHED-SECRET-LEDGER never to be stored"


# --------------------------------------------------------------------------------------
# The files
# --------------------------------------------------------------------------------------
def text_document(lines: tuple[str, ...] = PROCEDURE) -> pymupdf.Document:
    """A one-page PDF with ``lines`` in Helvetica (caller closes it)."""
    doc = pymupdf.open()
    page = doc.new_page()
    for number, line in enumerate(lines):
        page.insert_text((72, 72 + 20 * number), line, fontname="helv", fontsize=11)
    return doc


def text_pdf() -> bytes:
    with text_document() as doc:
        return doc.tobytes()


def with_content(raw: bytes, pages: int = 1, filters: str = "/FlateDecode") -> bytes:
    """A PDF whose ``pages`` pages each have ``raw`` (already encoded) as content stream."""
    with pymupdf.open() as doc:
        for _ in range(pages):
            page = doc.new_page()
            page.insert_text((72, 72), "Page", fontname="helv")
            xref = page.get_contents()[0]
            doc.update_stream(xref, raw, compress=False)
            doc.xref_set_key(xref, "Filter", filters)
        return doc.tobytes()


def dense_page(characters: int) -> bytes:
    """One page holding ``characters`` non-space characters of text in 0.4 pt Helvetica."""
    with pymupdf.open() as doc:
        page = doc.new_page()
        page.insert_text((72, 72), "x", fontname="helv")
        font = page.get_fonts()[0][4]
        word = "Retailer-notifies-Distributor."  # 30 characters, no space
        lines, remaining = [], characters
        while remaining > 0:
            take = min(remaining, 600)
            lines.append((word * 20)[:take])
            remaining -= take
        ops = [f"BT /{font} 0.4 Tf 0.45 TL 5 835 Td"] + [f"({line}) Tj T*" for line in lines]
        doc.update_stream(page.get_contents()[0], "\n".join([*ops, "ET"]).encode())
        return doc.tobytes(deflate=True)


def whitespace_bomb(inflated: int) -> bytes:
    """A Flate (zlib) content stream of ``inflated`` bytes of spaces, ``inflated`` a whole
    number of MiB (~1 KiB compressed per MiB).

    One MiB is compressed twice, each time ended by a full flush, which resets the compressor
    (zlib manual, ``Z_FULL_FLUSH``), so the second MiB's blocks are what every further MiB
    would compress to; they are repeated instead of compressing 1 GiB (~3 s of CPU). The
    stream ends with the Adler-32 of all ``inflated`` bytes (RFC 1950 §8.2, in closed form:
    after n bytes of value c, A = 1 + n·c and B = n + c·n(n+1)/2, both mod 65521).
    """
    packer = zlib.compressobj(9)
    block = b" " * MIB
    first = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    again = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    last_block = packer.flush()[:-4]  # the final empty block; its checksum covers 2 MiB only
    n, c = inflated, ord(" ")
    a = (1 + n * c) % ADLER_BASE
    b = (n + c * (n * (n + 1) // 2)) % ADLER_BASE
    checksum = ((b << 16) | a).to_bytes(4, "big")
    return first + again * (inflated // MIB - 1) + last_block + checksum


def blank_pages(count: int) -> bytes:
    """A PDF of ``count`` blank A4 pages, as MuPDF saves it.

    The objects are written here and MuPDF only opens and saves them: ``new_page`` looks each
    new page up in the flat page tree, which costs seconds for 5,001 pages (CPU figures:
    benchmarks/results/test-lanes.md, 2026-12-07, second session)."""
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << >> /Rotate 0 >>"
    kids = b" ".join(b"%d 0 R" % number for number in range(3, count + 3))
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Count %d /Kids [%s] >>" % (count, kids), *[page] * count]
    raw, offsets = bytearray(b"%PDF-1.7\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(raw))
        raw += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(raw)
    raw += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    raw += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    raw += b"trailer\n<< /Size %d /Root 1 0 R >>\n" % (len(objects) + 1)
    raw += b"startxref\n%d\n%%%%EOF\n" % xref
    with pymupdf.open(stream=bytes(raw), filetype="pdf") as doc:
        if doc.is_repaired or doc.page_count != count:
            raise AssertionError(f"blank_pages({count}) wrote a broken PDF")
        return doc.tobytes()


def broken_xref() -> bytes:
    """Every cross-reference offset wrong and ``startxref`` pointing nowhere; MuPDF rebuilds."""
    data = text_pdf()
    start = data.index(b"\nxref\n")
    table = re.sub(rb"\d{10} 00000 n", b"0000000009 00000 n", data[start:])
    cut = table.rindex(b"startxref")
    return data[:start] + table[:cut] + b"startxref\n123\n%%EOF\n"


def encrypted(user_password: str) -> bytes:
    """AES-256 encrypted; with an empty user password it opens without one (permissions only)."""
    with text_document() as doc:
        return doc.tobytes(
            encryption=pymupdf.PDF_ENCRYPT_AES_256,
            owner_pw="owner-secret",
            user_pw=user_password,
            permissions=pymupdf.PDF_PERM_ACCESSIBILITY,
        )


def scripted_with_attachment() -> bytes:
    """JavaScript run on open plus an attached file."""
    with text_document() as doc:
        doc.embfile_add("ledger.txt", ATTACHMENT, filename="ledger.txt")
        script = doc.get_new_xref()
        doc.update_object(script, "<< /S /JavaScript /JS (app.alert('opened');) >>")
        doc.xref_set_key(doc.pdf_catalog(), "OpenAction", f"{script} 0 R")
        return doc.tobytes()


def corpus_pdf(name: str) -> Callable[[], bytes]:
    return lambda: (corpus_dir() / "pdfs" / name).read_bytes()


def nfc_nfd(name: str) -> str:
    """``name`` with its first accented letter decomposed (NFD) and the rest composed."""
    composed = unicodedata.normalize("NFC", name)
    for i, ch in enumerate(composed):
        if unicodedata.decomposition(ch):
            return composed[:i] + unicodedata.normalize("NFD", ch) + composed[i + 1 :]
    raise ValueError(f"{name!r} has no accented letter")


# --------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One kind of input.

    Attributes:
        kind: the test id.
        name: the file name (``via_url``: the name given with the URL).
        data: makes the bytes.
        stage: ``intake`` (refused by ``admit``), ``build`` (refused by the markdown step) or
            ``ready`` (ingested).
        reason: the exact reason ("" for ``ready``).
        via_url: add it as a download named ``name`` instead of a file.
    """

    kind: str
    name: str
    data: Callable[[], bytes]
    stage: str
    reason: str = ""
    via_url: bool = False


NOT_A_PDF = "is not a PDF (it starts with {}); export or save it as PDF and add that file"
CASES = [
    Case("zero-bytes", "empty.pdf", lambda: b"", "intake", "the file is empty"),
    Case(
        "html-as-pdf", "page.pdf", lambda: b"<!DOCTYPE html><html><body>Sign in</body></html>",
        "build", "page.pdf " + NOT_A_PDF.format(r"b'<!DOCTYPE html><', an HTML page"),
    ),
    Case(
        "zip-as-pdf", "archive.pdf", lambda: b"PK\x03\x04" + bytes(200), "build",
        "archive.pdf " + NOT_A_PDF.format(
            r"b'PK\x03\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00', "
            "a ZIP archive or an Office document"
        ),
    ),
    Case(
        "png-as-pdf", "scan.pdf", lambda: b"\x89PNG\r\n\x1a\n" + bytes(100), "build",
        "scan.pdf " + NOT_A_PDF.format(
            r"b'\x89PNG\r\n\x1a\n\x00\x00\x00\x00\x00\x00\x00\x00', a PNG image"
        ),
    ),
    Case(
        "truncated", "cut.pdf", lambda: text_pdf()[:900], "build",
        "cut.pdf is truncated (it has no %%EOF end marker and its cross-reference table had "
        "to be rebuilt; 900 bytes); download it again in full",
    ),
    Case("broken-xref-repaired", "repaired.pdf", broken_xref, "ready"),
    Case(
        "broken-beyond-repair", "garbage.pdf",
        lambda: b"%PDF-1.7\n" + bytes(range(256)) * 20 + b"\n%%EOF\n", "build",
        "garbage.pdf is damaged and cannot be opened as a PDF (Failed to open stream); "
        "download or export it again",
    ),
    Case(
        "password-protected", "locked.pdf", lambda: encrypted("open-sesame"), "build",
        "locked.pdf is encrypted and needs a password to open; save a copy without the "
        "password (e.g. `qpdf --decrypt --password=… in.pdf out.pdf`) and add that",
    ),
    Case("permissions-only-encryption", "permissions.pdf", lambda: encrypted(""), "ready"),
    Case(
        "scanned", "scanned.pdf", corpus_pdf("scanned_ocrmypdf_multipage.pdf"), "build",
        "scanned.pdf: no text layer on any of 6 pages; OCR is not enabled. It looks scanned: "
        "run OCR on it (e.g. `ocrmypdf in.pdf out.pdf`) and add the result",
    ),
    Case(
        "unmapped-font", "nomapping.pdf",
        corpus_pdf("encoding_ocrmypdf_truetype_font_nomapping.pdf"), "build",
        "nomapping.pdf: the text layer cannot be read: 100% of characters have no Unicode "
        "mapping (font 01ebsit,Bold); re-export the PDF with embedded Unicode fonts or OCR it",
    ),
    Case(
        "2000-blank-pages", "blank.pdf", lambda: blank_pages(2000), "build",
        "blank.pdf: no text layer on any of 2000 pages; OCR is not enabled. It looks scanned: "
        "run OCR on it (e.g. `ocrmypdf in.pdf out.pdf`) and add the result",
    ),
    Case(
        "over-the-page-cap", "huge.pdf", lambda: blank_pages(5001), "build",
        "huge.pdf has 5,001 pages, over the 5,000-page limit (KB_PDF_MAX_PAGES); split it "
        "into parts and add those",
    ),
    Case(
        "a-page-of-1m-characters", "dense.pdf", lambda: dense_page(1_000_000), "build",
        "dense.pdf: page 1 has 1,000,000 characters of text, over the 100,000-character "
        "limit per page (KB_PDF_MAX_PAGE_CHARACTERS; a dense page has about 5,000); export "
        "it with fewer characters per page",
    ),
    Case(
        "decompression-bomb", "bomb.pdf", lambda: with_content(whitespace_bomb(1024 * MIB)),
        "build",
        "bomb.pdf: stream object 6 inflates past the 64 MiB limit (KB_PDF_MAX_STREAM_BYTES), "
        "so it was not read: a decompression bomb or a damaged file; export it again",
    ),
    Case(
        "streams-inflating-past-the-total", "many.pdf",
        lambda: with_content(whitespace_bomb(60 * MIB), pages=9), "build",
        "many.pdf: its streams inflate past the 512 MiB limit in all "
        "(KB_PDF_MAX_INFLATED_BYTES), so it was not read; split or re-export it",
    ),
    Case("javascript-and-attachment", "scripted.pdf", scripted_with_attachment, "ready"),
    Case(
        "binary-markdown", "notes.md", lambda: b"# Notes\n\x00\x01\x02binary", "intake",
        "notes.md is binary, not text: it holds a NUL byte at byte 8; add a UTF-8 text or "
        "Markdown file",
    ),
    Case(
        "name-with-dot-dot-slash", "../../etc/passwd.pdf", text_pdf, "intake",
        "'../../etc/passwd.pdf' is not a file name; give the document a name (--name, or name "
        "in the Launchpad)", via_url=True,
    ),
    Case(
        "name-with-nul", "rule\x00book.pdf", text_pdf, "intake",
        "'rule\\x00book.pdf' holds a control character (U+0000); give the document a name "
        "(--name, or name in the Launchpad)", via_url=True,
    ),
    Case(
        "name-of-300-characters", "r" * 296 + ".pdf", text_pdf, "intake",
        "the name is 300 bytes long in UTF-8, over the 255 a file name may have; give the "
        "document a name (--name, or name in the Launchpad)", via_url=True,
    ),
    Case(
        "name-of-only-dots", "....", text_pdf, "intake",
        "'....' is not a file name; give the document a name (--name, or name in the "
        "Launchpad)", via_url=True,
    ),
    Case("name-with-a-comma", "Rule 3.1, v2.pdf", text_pdf, "ready"),
    Case("name-mixing-nfc-and-nfd", nfc_nfd("Résumé règles.pdf"), text_pdf, "ready"),
]

#: doc_id of each ``ready`` case's name.
READY_IDS = {
    "broken-xref-repaired": "repaired.pdf",
    "permissions-only-encryption": "permissions.pdf",
    "javascript-and-attachment": "scripted.pdf",
    "name-with-a-comma": "rule-3.1-v2.pdf",
    "name-mixing-nfc-and-nfd": "resume-regles.pdf",
}


# --------------------------------------------------------------------------------------
# Running a case
# --------------------------------------------------------------------------------------
def add(case: Case, tmp_path: Path, stores: StoresResource, instance: dg.DagsterInstance,
        monkeypatch: pytest.MonkeyPatch) -> intake.IntakeOutcome:
    """``case``'s file through intake: a file in a folder, or a download named ``case.name``."""
    data = case.data()
    if not case.via_url:
        path = tmp_path / "in" / case.name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        (outcome,) = admit([path], stores, instance)
        return outcome
    url = "https://example.org/download"

    def download(asked: str) -> Fetched:
        return Fetched(asked, asked, (), "93.184.215.14", None, "application/pdf", data,
                       sha256_bytes(data))

    monkeypatch.setattr(url_intake, "fetcher_for", lambda settings: download)
    (outcome,) = admit_sources([url], stores, instance, name=case.name)
    return outcome


def build(stores: StoresResource, instance: dg.DagsterInstance, doc: str) -> bool:
    """One run of the real build job (with its failure hook): the local PDF converter and
    fake models. Returns whether it succeeded."""
    providers = FakeProviders(converter_=PymupdfMarkdownConverter())
    defs = dg.Definitions(
        assets=CORPUS_ASSETS,
        jobs=[build_documents_job],
        resources=kb_resources(stores, providers),
        executor=dg.in_process_executor,
    )
    result = defs.resolve_job_def(BUILD_JOB).execute_in_process(
        partition_key=doc, instance=instance, raise_on_error=False
    )
    return result.success


def left_behind(stores: StoresResource, instance: dg.DagsterInstance) -> dict[str, Any]:
    """Everything the stores and the instance hold, store by store."""
    index = stores.existing_vectors()
    graph = stores.graph()
    graph.ensure_schema(None)
    counts = graph.counts()
    return {
        "rows": [(r.doc_id, r.status, r.failure_reason) for r in stores.catalog().list_documents()],
        "blobs": sorted(stores.blobs().list()),
        "vectors": index.count() if index is not None else 0,
        "graph": (counts.entities, counts.relationships),
        "partitions": instance.get_dynamic_partitions(DOCUMENTS),
    }


@pytest.mark.parametrize("case", CASES, ids=[c.kind for c in CASES])
def test_bad_input_is_refused_with_its_reason_and_nothing_left_behind(
    case: Case, tmp_path: Path, stores: StoresResource, instance: dg.DagsterInstance,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    outcome = add(case, tmp_path, stores, instance, monkeypatch)
    if case.stage == "intake":
        assert (outcome.status, outcome.reason) == (IntakeStatus.REFUSED, case.reason)
        assert left_behind(stores, instance) == {
            "rows": [], "blobs": [], "vectors": 0, "graph": (0, 0), "partitions": [],
        }
        return
    assert outcome.status == IntakeStatus.ADDED, outcome
    doc = outcome.doc_id
    succeeded = build(stores, instance, doc)
    if case.stage == "build":
        assert not succeeded
        # the documented rule: the failed row with its reason and the stored PDF, no more
        assert left_behind(stores, instance) == {
            "rows": [(doc, "failed", f"markdown: {case.reason}")],
            "blobs": [f"pdfs/{doc}"],
            "vectors": 0,
            "graph": (0, 0),
            "partitions": [doc],
        }
        return
    assert succeeded
    assert doc == READY_IDS[case.kind]
    state = left_behind(stores, instance)
    assert state["rows"] == [(doc, "ready", None)]
    assert state["vectors"] >= 1 and state["partitions"] == [doc]
    markdown = stores.blobs().get(f"markdown/{doc}.md").decode("utf-8")
    assert PROCEDURE[1] in " ".join(markdown.split())
    # an attachment is never read: nothing of it is stored beside the PDF itself
    for key in state["blobs"]:
        if key != f"pdfs/{doc}":
            assert ATTACHMENT not in stores.blobs().get(key), key


# --------------------------------------------------------------------------------------
# Market data
# --------------------------------------------------------------------------------------
def test_an_aer_workbook_that_is_a_renamed_pdf_is_refused_and_nothing_stored(
    tmp_path: Path,
) -> None:
    path = tmp_path / "Schedule 3 - Quarter 3 2025-26 Retail Performance Data.xlsx"
    path.write_bytes(text_pdf())
    with pytest.raises(AerWorkbookError) as refused:
        read_workbook(path)
    reason = f"{path.name}: cannot be opened as a workbook (File is not a zip file)"
    assert str(refused.value) == reason
    result = CliRunner().invoke(cli.app, ["sync", "aer", str(path)])
    assert result.exit_code == 1
    assert f"- {reason}" in " ".join(result.output.split())
    stores = StoresResource()  # KB_HOME of this test (tests/conftest.py)
    assert stores.catalog().list_aer_observations() == []
    assert stores.blobs().list() == []


def test_a_notion_page_with_wrongly_typed_properties_is_refused_and_nothing_stored(
    stores: StoresResource,
) -> None:
    page = tracker_page("agl", summary="Hardship breaches", organisation="AGL Energy Limited",
                        regulatory_body="AER", status="Paid", fine=1_500_000, date="2025-02-14")
    page["properties"]["Fine"] = {"id": "f", "type": "rich_text", "rich_text": []}
    page["properties"]["Date"] = {"id": "d", "type": "number", "number": 2025}
    server = FakeNotion()
    server.pages = [page]
    catalog = stores.catalog()
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        router.route(host="notion.test").mock(side_effect=server.handle)
        with pytest.raises(NotionSchemaError) as refused:
            sync_notion(catalog, NotionTracker(TOKEN, DATA_SOURCE_ID, api_url=API_URL,
                                               sleep=lambda s: None))
    message = str(refused.value)
    assert "property 'Fine' is rich_text, expected number" in message
    assert "property 'Date' is number, expected date" in message
    assert message.endswith("Nothing was written.")
    assert catalog.list_compliance_actions() == []
    assert catalog.compliance_sync_state() is None


# --------------------------------------------------------------------------------------
# Pre-flight: every stream filter is read through the cap (kb_shared.ingest.pdf)
# --------------------------------------------------------------------------------------
def lzw(data: bytes) -> bytes:
    """LZWDecode encoding (PDF 32000-1:2008 §7.4.4, EarlyChange 1) of ``data`` (not empty).

    The table maps (a word's code, the next byte) to the longer word's code, the usual way to
    hold LZW's words without copying each word into a new byte string (same output, a sixth
    of the CPU for the 3 MiB bomb: benchmarks/results/test-lanes.md, 2026-12-07)."""
    table: dict[tuple[int, int], int] = {}  # codes 0-255: the bytes; 256 clear; 257 end
    codes, word = [256], data[0]
    for value in data[1:]:
        longer = table.get((word, value))
        if longer is not None:
            word = longer
            continue
        codes.append(word)
        table[word, value] = len(table) + 258
        word = value
        if len(table) + 258 == 4094:
            codes.append(256)
            table = {}
    bits, size, width, free = 0, 0, 9, 258
    for number, code in enumerate([*codes, word, 257]):
        bits, size = (bits << width) | code, size + width
        if code == 256:
            width, free = 9, 258
        elif number < len(codes):  # the last data code and 257 add no entry
            free += 1
            if free >= 1 << width and width < 12:
                width += 1
    pad = -size % 8
    return (bits << pad).to_bytes((size + pad) // 8, "big")


CONTENT = b"BT /helv 11 Tf 72 700 Td (The Retailer must notify the Distributor) Tj ET\n" * 40
FILTERED = {
    "Flate": ("/FlateDecode", lambda data: zlib.compress(data)),
    "LZW": ("/LZWDecode", lzw),
    "RunLength": ("/RunLengthDecode", lambda data: b"".join(
        bytes([len(data[i : i + 128]) - 1]) + data[i : i + 128] for i in range(0, len(data), 128)
    ) + b"\x80"),
    "ASCIIHex+Flate": (
        "[/ASCIIHexDecode /FlateDecode]", lambda data: zlib.compress(data).hex().encode() + b">"
    ),
    "ASCII85+Flate": (
        "[/A85 /Fl]", lambda data: base64.a85encode(zlib.compress(data), wrapcol=70) + b"~>"
    ),
}


@pytest.mark.parametrize("kind", FILTERED)
def test_each_filter_is_measured_as_mupdf_decodes_it_and_refused_past_the_cap(kind: str) -> None:
    filters, encode = FILTERED[kind]
    with pymupdf.open(stream=with_content(encode(CONTENT), filters=filters)) as doc:
        xref = doc[0].get_contents()[0]
        assert doc.xref_stream(xref) == CONTENT  # the encoding is what MuPDF reads
        assert stream_inflated_size(doc, xref, len(CONTENT)) == len(CONTENT)
        assert stream_inflated_size(doc, xref, len(CONTENT) - 1) is None


def test_the_whitespace_bomb_is_a_whole_zlib_stream_of_spaces() -> None:
    bomb = whitespace_bomb(3 * MIB)
    assert zlib.decompress(bomb) == b" " * (3 * MIB)  # decompress also checks the Adler-32
    assert len(bomb) < 4 * 1024


def test_an_lzw_bomb_is_refused_after_the_cap_not_read_whole() -> None:
    bomb = lzw(b" " * (3 * MIB))  # about 5 KiB
    with pymupdf.open(stream=with_content(bomb, filters="/LZWDecode")) as doc:
        xref = doc[0].get_contents()[0]
        assert stream_inflated_size(doc, xref, MIB) is None
        with pytest.raises(ConversionError) as refused:
            check_limits(doc, "lzw.pdf", PdfLimits(max_stream_bytes=MIB))
    assert str(refused.value) == (
        f"lzw.pdf: stream object {xref} inflates past the 1 MiB limit "
        "(KB_PDF_MAX_STREAM_BYTES), so it was not read: a decompression bomb or a damaged "
        "file; export it again"
    )


def test_the_caps_come_from_the_settings() -> None:
    settings = Settings(pdf_max_pages=7, pdf_max_page_characters=2000,
                        pdf_max_stream_bytes=2 * MIB, pdf_max_inflated_bytes=3 * MIB)
    assert PdfLimits.from_settings(settings) == PdfLimits(7, 2000, 2 * MIB, 3 * MIB)
    with pytest.raises(ConversionError, match=r"^p\.pdf: page 1 has 2,001 characters of text"):
        check_pdf(dense_page(2001), "p.pdf", PdfLimits.from_settings(settings))
    check_pdf(dense_page(2000), "p.pdf", PdfLimits.from_settings(settings))
