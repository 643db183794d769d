"""Identity rules: how a document, a chunk, a figure and a stored point are named.

The rules come from ``DESIGN.md`` ("Identity"):

* A document's identity is its file name. ``normalize_name`` = trim + Unicode NFC + case-fold,
  so ``" Report.PDF"`` and ``"report.pdf"`` are the same document.
* ``doc_id`` is a slug of the normalised name over ``[a-z0-9._-]`` — safe as a Dagster
  dynamic partition key (no commas, no slashes, no spaces). Two names that slug to the same
  ``doc_id`` collide; the intake refuses the second (see ``kb_assets.intake``).
* ``chunk_id = f"{doc_id}-{index}"`` and ``figure_id = f"{doc_id}#figure-{n}"`` live in
  separate namespaces (``#`` never occurs in a ``doc_id``), so adding figures never moves a
  chunk id; a registered reference page is ``reference_id(n) = f"#reference-{n}"``.
* Stores that need UUID point ids use ``uuid5(KB_NAMESPACE, string_id)``.
* Version ``n`` of a document is stored under ``version_key(doc_id, n)``: the ``doc_id`` for
  version 1, ``f"{doc_id}@v{n}"`` after (issue 12, "New versions of a document"). It is the
  ``document`` of its points and edges and the ``doc`` of its blob keys, and its chunk and
  figure ids are built from it, so two versions never share an id.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid
from pathlib import Path
from typing import BinaryIO

from kb_shared.errors import IdentityError

#: Fixed namespace for UUID point ids. Changing it re-keys every stored vector.
KB_NAMESPACE = uuid.UUID("6f1c3c1e-5b7a-4c1e-9a43-1d1f3b0e7a2c")

#: Longest ``doc_id`` kept; long names are cut and suffixed with a hash so they stay unique.
MAX_DOC_ID_LENGTH = 120

_SLUG_DROP = re.compile(r"[^a-z0-9._-]+")
_DASH_RUNS = re.compile(r"-{2,}")
_DOC_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


def normalize_name(name: str) -> str:
    """Return the comparison form of a file name: trimmed, NFC, case-folded.

    Args:
        name: a file name as uploaded (may carry surrounding whitespace, NFD accents, caps).

    Returns:
        ``unicodedata.normalize("NFC", name.strip()).casefold()`` re-normalised to NFC
        (case-folding can produce decomposed sequences, e.g. ``"İ"``).

    Raises:
        IdentityError: the name is empty after trimming.
    """
    trimmed = name.strip()
    if not trimmed:
        raise IdentityError("a document name cannot be empty or whitespace")
    return unicodedata.normalize("NFC", unicodedata.normalize("NFC", trimmed).casefold())


#: Latin letters that NFKD does not decompose, spelled out so they survive slugging.
_TRANSLITERATE = str.maketrans(
    {"æ": "ae", "œ": "oe", "ø": "o", "đ": "d", "ð": "d", "ł": "l", "þ": "th", "ı": "i"}
)
_EXTENSION = re.compile(r"\.[a-z0-9]{1,8}$")


def _slug(text: str) -> str:
    ascii_form = "".join(
        ch
        for ch in unicodedata.normalize("NFKD", text.translate(_TRANSLITERATE))
        if not unicodedata.combining(ch)
    )
    return _DASH_RUNS.sub("-", _SLUG_DROP.sub("-", ascii_form.lower())).strip("-._")


def doc_id(name: str) -> str:
    """Return the partition-safe slug of a document name.

    Steps: ``normalize_name``; split off a short extension (``.pdf``); transliterate Latin
    letters NFKD keeps whole (``æ`` → ``ae``), NFKD and drop combining marks (``é`` → ``e``);
    every run of characters outside ``[a-z0-9._-]`` becomes ``-``; dash runs collapse;
    leading/trailing ``-._`` are stripped. A stem with nothing left (a name in a non-Latin
    script, or only punctuation) becomes ``doc-`` + 10 hex chars of the SHA-256 of the
    normalised name, so such names stay distinct. A result longer than
    ``MAX_DOC_ID_LENGTH`` keeps its head and gets ``-`` + the same 10-char hash.

    Returns:
        A string matching ``^[a-z0-9][a-z0-9._-]*$``, e.g. ``"Rule 3.1, v2.PDF"`` →
        ``"rule-3.1-v2.pdf"``.

    Raises:
        IdentityError: the name is empty or whitespace.
    """
    normal = normalize_name(name)
    digest = hashlib.sha256(normal.encode("utf-8")).hexdigest()[:10]
    match = _EXTENSION.search(normal)
    stem, extension = (normal[: match.start()], match.group()) if match else (normal, "")
    stem_slug = _slug(stem) or f"doc-{digest}"
    slug = stem_slug + extension
    if len(slug) > MAX_DOC_ID_LENGTH:
        slug = slug[: MAX_DOC_ID_LENGTH - 11].rstrip("-._") + "-" + digest
    return slug


#: Between a ``doc_id`` and a version number in a ``version_key`` (``@`` never occurs in a
#: ``doc_id``).
VERSION_SEPARATOR = "@v"


def version_key(document: str, version: int) -> str:
    """Where version ``version`` of ``document`` (a ``doc_id``) is stored: ``document`` itself
    for version 1, so stores written before versions existed need no change, else
    ``f"{document}@v{version}"``. Its chunk ids are ``chunk_id(key, i)`` and its figure ids
    ``figure_id(key, n)``, distinct from every other version's.

    Raises:
        ValueError: a version below 1.
    """
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"versions start at 1, got {version!r}")
    return document if version == 1 else f"{document}{VERSION_SEPARATOR}{version}"


def split_version_key(key: str) -> tuple[str, int]:
    """``(doc_id, version)`` of a ``version_key``; a plain ``doc_id`` is version 1."""
    document, separator, number = key.rpartition(VERSION_SEPARATOR)
    if separator and number.isdigit() and number.isascii() and int(number) >= 2:
        return document, int(number)
    return key, 1


def is_doc_id(value: str) -> bool:
    """True when ``value`` has the shape ``doc_id`` produces (no commas, no slashes)."""
    return bool(_DOC_ID.match(value)) and len(value) <= MAX_DOC_ID_LENGTH


def chunk_id(document: str, index: int) -> str:
    """``f"{document}-{index}"`` for a ``doc_id`` and a 0-based chunk index.

    Raises:
        ValueError: a negative index.
    """
    if index < 0:
        raise ValueError(f"chunk index must be >= 0, got {index}")
    return f"{document}-{index}"


def figure_id(document: str, number: int) -> str:
    """``f"{document}#figure-{number}"`` for a ``doc_id`` and a 1-based figure number.

    Raises:
        ValueError: a number below 1.
    """
    if number < 1:
        raise ValueError(f"figure numbers start at 1, got {number}")
    return f"{document}#figure-{number}"


#: The ``document`` of every reference point (``reference_id``): ``#`` never occurs in a
#: ``doc_id``, so no document's rebuild or delete touches the registered pages.
REFERENCE_DOCUMENT = "#references"


def reference_id(number: int) -> str:
    """``f"#reference-{number}"``: the point id of registered reference page ``number`` (its
    ``reference_sources.id``); the leading ``#`` keeps it apart from every chunk and figure id.

    Raises:
        ValueError: a number below 1.
    """
    if number < 1:
        raise ValueError(f"reference ids start at 1, got {number}")
    return f"#reference-{number}"


def chunk_index(document: str, chunk: str) -> int:
    """The 0-based index of ``chunk`` (a ``chunk_id``) within ``document`` — the inverse of
    ``chunk_id``. ``doc_id``s may end in digits and contain dashes, so the document is given.

    Raises:
        IdentityError: ``chunk`` is not ``f"{document}-{index}"``.
    """
    head = f"{document}-"
    tail = chunk[len(head) :] if chunk.startswith(head) else ""
    if not tail.isdigit() or not tail.isascii():
        raise IdentityError(f"{chunk!r} is not a chunk id of document {document!r}")
    return int(tail)


def point_uuid(string_id: str) -> uuid.UUID:
    """The UUID a vector store uses for a chunk or figure id: ``uuid5(KB_NAMESPACE, id)``."""
    return uuid.uuid5(KB_NAMESPACE, string_id)


def sha256_bytes(data: bytes) -> str:
    """Lower-case hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_stream(stream: BinaryIO, block_size: int = 1 << 20) -> str:
    """Lower-case hex SHA-256 of a binary stream read in ``block_size`` byte blocks."""
    digest = hashlib.sha256()
    for block in iter(lambda: stream.read(block_size), b""):
        digest.update(block)
    return digest.hexdigest()


def sha256_file(path: str | Path) -> str:
    """Lower-case hex SHA-256 of a file's content."""
    with open(path, "rb") as handle:
        return sha256_stream(handle)


#: Longest document file name, in UTF-8 bytes: what common file systems hold (ext4 and APFS
#: ``NAME_MAX`` = 255 bytes), so a name always fits a file on disk.
MAX_NAME_BYTES = 255

#: The characters of the Unicode property Bidi_Control (UAX #9, "Explicit Directional
#: Formatting Characters", and PropList.txt): invisible, they reorder how the rest of a name
#: is shown, so ``"x\u202etxt.pdf"`` displays as ``xfdp.txt`` (CVE-2021-42574).
BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)

#: Characters that show as nothing in a name (Unicode's Default_Ignorable_Code_Point
#: characters outside the joiners some scripts need, ZWNJ and ZWJ): soft hyphen, Mongolian
#: vowel separator, zero width space, word joiner, the invisible operators, and the byte
#: order mark. ``"report\u200b.pdf"`` looks like ``report.pdf`` but is another document.
INVISIBLE_CHARACTERS = frozenset("\u00ad\u180e\u200b\u2060\u2061\u2062\u2063\u2064\ufeff")


def hidden_character(text: str) -> str | None:
    """Why the name ``text`` does not show as what it is, or ``None``: the first bidirectional
    control (``BIDI_CONTROLS``) or invisible character (``INVISIBLE_CHARACTERS``) it holds,
    named with its effect ("an invisible bidirectional control (U+202E RIGHT-TO-LEFT
    OVERRIDE) that changes how the name is shown")."""
    for ch in text:
        named = f"(U+{ord(ch):04X} {unicodedata.name(ch)})"
        if ch in BIDI_CONTROLS:
            return f"an invisible bidirectional control {named} that changes how the name is shown"
        if ch in INVISIBLE_CHARACTERS:
            return f"an invisible character {named}, so the name looks like another"
    return None


def check_file_name(name: str) -> str:
    """``name`` trimmed, when it can be a document's file name (intake checks every name with
    this before it touches a disk or a store).

    Raises:
        IdentityError: empty; ``.``, ``..`` or only dots; a path (``/`` or ``\\``); a
            control character (Unicode category Cc: NUL, newline, ...) or line break (Zl, Zp:
            U+2028, U+2029); a bidirectional control or invisible character
            (``hidden_character``); bytes that are not
            UTF-8 (a file system name Python decoded with ``surrogateescape``: category Cs);
            or over ``MAX_NAME_BYTES`` bytes in UTF-8. The message names the problem.
    """
    clean = name.strip()
    if not clean:
        raise IdentityError("a document name cannot be empty or whitespace")
    if not clean.strip(".") or "/" in clean or "\\" in clean:
        raise IdentityError(f"{name!r} is not a file name")
    control = next((ch for ch in clean if unicodedata.category(ch) == "Cc"), None)
    if control is not None:
        raise IdentityError(f"{clean!r} holds a control character (U+{ord(control):04X})")
    separator = next((ch for ch in clean if unicodedata.category(ch) in ("Zl", "Zp")), None)
    if separator is not None:
        raise IdentityError(f"{clean!r} holds a line break (U+{ord(separator):04X})")
    undecodable = next((ch for ch in clean if unicodedata.category(ch) == "Cs"), None)
    if undecodable is not None:
        code = ord(undecodable)
        what = f"byte 0x{code - 0xDC00:02X}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
        raise IdentityError(
            f"{clean!r} is not UTF-8 text ({what} is no character); rename the file with a "
            "UTF-8 name"
        )
    hidden = hidden_character(clean)
    if hidden is not None:
        raise IdentityError(f"{clean!r} holds {hidden}; rename the file without it")
    size = len(clean.encode("utf-8"))
    if size > MAX_NAME_BYTES:
        raise IdentityError(
            f"the name is {size} bytes long in UTF-8, over the {MAX_NAME_BYTES} a file name "
            "may have"
        )
    return clean
