"""Identity rules (DESIGN.md "Identity") with the right values written out."""

from __future__ import annotations

import io
import uuid

import pytest

from kb_shared.identity import (
    KB_NAMESPACE,
    IdentityError,
    chunk_id,
    doc_id,
    figure_id,
    is_doc_id,
    normalize_name,
    point_uuid,
    sha256_bytes,
    sha256_file,
    sha256_stream,
)

NFC = "R\u00e9sum\u00e9.pdf"  # é as one code point
NFD = "Re\u0301sume\u0301.pdf"  # e + combining acute


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (" Report.PDF", "report.pdf"),
        ("report.pdf\t\n", "report.pdf"),
        ("REPORT.pdf", "report.pdf"),
        (NFD, "r\u00e9sum\u00e9.pdf"),
        (NFC, "r\u00e9sum\u00e9.pdf"),
        ("Stra\u00dfe.pdf", "strasse.pdf"),  # case-folding expands ß
        ("  inner  spaces.pdf ", "inner  spaces.pdf"),  # only surrounding whitespace goes
    ],
)
def test_normalize_name(raw: str, expected: str) -> None:
    assert normalize_name(raw) == expected


def test_nfc_and_nfd_names_are_the_same_document() -> None:
    assert NFC != NFD
    assert normalize_name(NFC) == normalize_name(NFD)
    assert doc_id(NFC) == doc_id(NFD) == "resume.pdf"


@pytest.mark.parametrize("raw", ["", "   ", "\t\n"])
def test_empty_names_are_refused(raw: str) -> None:
    with pytest.raises(IdentityError, match="cannot be empty"):
        normalize_name(raw)
    with pytest.raises(IdentityError):
        doc_id(raw)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("aemo_SO_OP_3705_Dispatch.pdf", "aemo_so_op_3705_dispatch.pdf"),
        ("Rule 3.1, v2.PDF", "rule-3.1-v2.pdf"),
        (" Report.PDF", "report.pdf"),
        ("\u00c6ON stra\u00dfe.pdf", "aeon-strasse.pdf"),
        ("a,b,c.pdf", "a-b-c.pdf"),
        ("../../etc/passwd", "etc-passwd"),
        ("---.pdf", "doc-860bbe42c3.pdf"),
        ("\u062a\u0642\u0631\u064a\u0631.pdf", "doc-c89f79f701.pdf"),  # Arabic name
    ],
)
def test_doc_id_values(raw: str, expected: str) -> None:
    assert doc_id(raw) == expected
    assert is_doc_id(doc_id(raw))
    assert "," not in doc_id(raw) and "/" not in doc_id(raw)


def test_names_that_slug_to_the_same_doc_id() -> None:
    # Different normalised names, one doc_id: the intake must detect and refuse the second.
    assert normalize_name("a b.pdf") != normalize_name("a-b.pdf")
    assert doc_id("a b.pdf") == doc_id("a-b.pdf") == "a-b.pdf"
    assert doc_id("Report (final).pdf") == doc_id("report final.pdf") == "report-final.pdf"


def test_long_names_are_cut_and_stay_unique() -> None:
    first = doc_id("x" * 200 + "1.pdf")
    second = doc_id("x" * 200 + "2.pdf")
    assert len(first) == 120 and len(second) == 120
    assert first != second
    assert first.startswith("x" * 100)


def test_chunk_and_figure_ids() -> None:
    assert chunk_id("report.pdf", 0) == "report.pdf-0"
    assert chunk_id("report.pdf", 12) == "report.pdf-12"
    assert figure_id("report.pdf", 1) == "report.pdf#figure-1"
    with pytest.raises(ValueError):
        chunk_id("report.pdf", -1)
    with pytest.raises(ValueError):
        figure_id("report.pdf", 0)
    # The two namespaces never meet: '#' is not a doc_id character.
    assert not is_doc_id(figure_id("report.pdf", 1))


def test_point_uuid_is_uuid5_in_the_kb_namespace() -> None:
    assert point_uuid("report.pdf-0") == uuid.uuid5(KB_NAMESPACE, "report.pdf-0")
    assert str(point_uuid("doc-0")) == "57c7191e-f3a9-5c02-9eb1-fe4bab7e4e79"
    assert point_uuid("report.pdf-0").version == 5
    assert point_uuid("report.pdf-0") != point_uuid("report.pdf-1")


def test_sha256(tmp_path) -> None:
    expected = "74fec0c33e96ab90ac88666979207a50a6ea7b9b3eea6ec0e8b916d64c0a0706"
    assert sha256_bytes(b"kb") == expected
    assert sha256_stream(io.BytesIO(b"kb"), block_size=1) == expected
    path = tmp_path / "f.bin"
    path.write_bytes(b"kb")
    assert sha256_file(path) == expected
