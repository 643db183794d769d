"""What the safe fetcher (``kb_shared.fetch.fetcher``) accepts as content: the expected kinds
(content type + magic bytes), the streamed size cap, and the file name of a download.

Every check raises ``FetchRefusedError`` naming the URL and what was wrong with the answer.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterator
from enum import StrEnum
from pathlib import PurePosixPath
from urllib.parse import unquote

import httpx

from kb_shared.errors import FetchRefusedError


class Expectation(StrEnum):
    """What the caller wants to download; the answer's content type and first bytes must
    match it. PDF: ``application/pdf`` and ``%PDF-`` (ISO 32000-2 §7.5.2). WORKBOOK: the
    OOXML spreadsheet types for .xlsx and .xlsm (ECMA-376 / IANA media types) and a ZIP
    local-file header ``PK\\x03\\x04`` whose archive holds ``xl/workbook.xml``. HTML: a web
    page (``text/html`` or ``application/xhtml+xml``, IANA media types) capped at
    ``HTML_MAX_BYTES``; no magic bytes, only "not binary" (no NUL byte, ``check_text``)."""

    PDF = "pdf"
    WORKBOOK = "workbook"
    HTML = "html"

    @property
    def description(self) -> str:
        """How the expectation is named in messages ("a PDF")."""
        return _DESCRIPTIONS[self]

    @property
    def content_types(self) -> frozenset[str]:
        """Accepted media types, lower case, without parameters."""
        return _CONTENT_TYPES[self]

    @property
    def magic(self) -> bytes:
        """The bytes the body must start with (empty: no magic-byte check)."""
        return _MAGIC[self]

    def cap(self, max_bytes: int) -> int:
        """The size cap in bytes for this kind under a policy's ``max_bytes``: the smaller of
        the two for HTML (``HTML_MAX_BYTES``), ``max_bytes`` otherwise."""
        return min(max_bytes, _CAPS.get(self, max_bytes))


XLSX_CONTENT_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
XLSM_CONTENT_TYPE = "application/vnd.ms-excel.sheet.macroenabled.12"

#: Largest web page fetched, in bytes: a page only carries links, so it gets a cap far
#: below the documents' ``KB_MAX_UPLOAD_BYTES`` (issue 11, release pages).
HTML_MAX_BYTES = 5 * 1024 * 1024

_DESCRIPTIONS = {
    Expectation.PDF: "a PDF",
    Expectation.WORKBOOK: "an Excel workbook",
    Expectation.HTML: "an HTML page",
}
_CONTENT_TYPES = {
    Expectation.PDF: frozenset({"application/pdf"}),
    Expectation.WORKBOOK: frozenset({XLSX_CONTENT_TYPE, XLSM_CONTENT_TYPE}),
    Expectation.HTML: frozenset({"text/html", "application/xhtml+xml"}),
}
_MAGIC = {Expectation.PDF: b"%PDF-", Expectation.WORKBOOK: b"PK\x03\x04", Expectation.HTML: b""}
_CAPS = {Expectation.HTML: HTML_MAX_BYTES}


def check_headers(
    headers: dict[str, str], target: httpx.URL, url: str, expect: Expectation, max_bytes: int
) -> str:
    """Refuse a wrong content type, an encoded body or a declared length over the cap;
    returns the media type."""
    content_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type not in expect.content_types:
        sent = f"is {content_type}" if content_type else "has no Content-Type"
        raise FetchRefusedError(
            f"refused: {target} {sent}, not {expect.description} "
            f"({' or '.join(sorted(expect.content_types))})",
            url=url,
            reason="content_type",
        )
    encoding = headers.get("content-encoding", "").strip().lower()
    if encoding not in {"", "identity"}:
        raise FetchRefusedError(
            f"refused: {target} came {encoding}-encoded although kb asked for identity; "
            "a compressed body could expand past the size cap",
            url=url,
            reason="content_encoding",
        )
    declared = headers.get("content-length", "").strip()
    if declared.isascii() and declared.isdigit() and int(declared) > max_bytes:
        raise FetchRefusedError(
            f"refused: {target} declares {int(declared)} bytes, over the "
            f"{max_bytes}-byte cap",
            url=url,
            reason="too_large",
        )
    return content_type


class BodyReader:
    """Collects a streamed body, refusing wrong magic bytes as soon as they arrive and
    stopping at the first chunk that passes the cap (at most one chunk, 64 KiB in httpcore,
    is read beyond it).

    Args:
        target: the URL being read (for messages); url: the URL the caller asked for;
        expect: what the body must be; cap: the size cap in bytes.

    Attributes:
        received: body bytes read so far (kept when a refusal or timeout stops the read).
    """

    def __init__(self, target: httpx.URL, url: str, expect: Expectation, cap: int) -> None:
        self.target = target
        self.url = url
        self.expect = expect
        self.cap = cap
        self.received = 0

    def read(self, chunks: Iterator[bytes]) -> bytes:
        """The whole body from ``chunks``.

        Raises:
            FetchRefusedError: ``too_large`` past the cap, ``magic`` on wrong first bytes.
        """
        body = bytearray()
        magic = self.expect.magic
        for chunk in chunks:
            body += chunk
            self.received = len(body)
            if self.received > self.cap:
                raise self._refused(
                    f"refused: {self.target} is larger than the {self.cap}-byte cap "
                    f"(stopped after {self.received} bytes)",
                    "too_large",
                )
            if len(body) >= len(magic) and len(body) - len(chunk) < len(magic):
                self._check_magic(bytes(body))
        if len(body) < len(magic):
            self._check_magic(bytes(body))
        return bytes(body)

    def _check_magic(self, body: bytes) -> None:
        magic = self.expect.magic
        if not body.startswith(magic):
            raise self._refused(
                f"refused: {self.target} is labelled {self.expect.description} but does not "
                f"start with {magic!r} (it starts with {body[:8]!r})",
                "magic",
            )

    def _refused(self, message: str, reason: str) -> FetchRefusedError:
        """The refusal of this body for ``reason``, with the bytes received so far."""
        return FetchRefusedError(message, url=self.url, reason=reason, received=self.received)


def check_workbook(data: bytes, target: httpx.URL, url: str) -> None:
    """Refuse a ZIP that is not an OOXML workbook (no ``xl/workbook.xml``, or unreadable)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError) as exc:
        raise FetchRefusedError(
            f"refused: {target} is not a readable ZIP archive ({exc})",
            url=url,
            reason="not_workbook",
            received=len(data),
        ) from None
    if "xl/workbook.xml" not in names:
        raise FetchRefusedError(
            f"refused: {target} is a ZIP archive without xl/workbook.xml, not an Excel workbook",
            url=url,
            reason="not_workbook",
            received=len(data),
        )


def check_text(data: bytes, target: httpx.URL, url: str) -> None:
    """Refuse a body labelled as a web page that holds a NUL byte: binary, not text."""
    if b"\x00" in data:
        raise FetchRefusedError(
            f"refused: {target} is labelled an HTML page but holds binary data (a NUL byte)",
            url=url,
            reason="binary",
            received=len(data),
        )


_PARAMETER = re.compile(r';\s*([^\s=;]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)')
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _disposition_name(header: str) -> str | None:
    """The file name in a Content-Disposition header: ``filename*`` (RFC 8187 ext-value,
    ``charset'lang'percent-encoded``) wins over ``filename`` (RFC 6266 §4.3)."""
    params: dict[str, str] = {}
    for key, raw in _PARAMETER.findall(header):
        value = raw.strip()
        if value.startswith('"') and value.endswith('"') and len(value) >= 2:
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        params.setdefault(key.lower(), value)
    extended = params.get("filename*")
    if extended and extended.count("'") >= 2:
        charset, _language, encoded = extended.split("'", 2)
        try:
            return unquote(encoded, encoding=charset or "utf-8", errors="strict")
        except (LookupError, UnicodeDecodeError):
            pass
    return params.get("filename")


def file_name(disposition: str | None, final_url: httpx.URL) -> str | None:
    """The download's file name (see ``Fetched.name``): never a path, never control
    characters; None when nothing usable is left."""
    candidates = [_disposition_name(disposition) if disposition else None]
    path = final_url.raw_path.decode("ascii").split("?", 1)[0]
    candidates.append(unquote(path.rsplit("/", 1)[-1]))
    for candidate in candidates:
        if not candidate:
            continue
        name = _CONTROL.sub("", PurePosixPath(candidate.replace("\\", "/")).name).strip()
        if name and name not in {".", ".."}:
            return name
    return None
