"""The upload page's check of a file's name and size before any of its bytes are sent.

The rules are the intake's (``kb_assets.intake``, DESIGN.md "Identity") that can be decided
from a name and a size alone: a document suffix (``.pdf``, ``.md``, ``.txt``), a name
``kb_shared.identity`` accepts, a size from 1 byte to ``KB_MAX_UPLOAD_BYTES``, one file per
normalised name in the batch, and no document of that name (or that ``doc_id``) in the
catalog. What needs the bytes (identical content, a binary ``.md``) is decided by ``admit``
after the transfer, and ``admit`` applies every rule again.

A name already in the corpus may be sent as that document's next version instead (the page's
"Upload as new version"; ``admit(new_version=True)``, as ``kb add --new-version``): the check
offers it (``FileCheck.new_version_possible``) unless a version of the document is still
waiting to be built, and with ``new_version`` accepts it.

Such a file is one of the intake's two kinds (``intake.IntakeStatus``): a name clash (other
content under the taken name) or a duplicate (the content of one of the document's versions:
nothing to send, not even as a new version). The page sends the file's SHA-256 when it has to
tell (``FileCheck.name_clash`` is ``None``: the size alone does not); a size no version has
is a name clash without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from kb_assets.intake import (
    IntakeStatus,
    _size_refusal,  # the intake's own size rule and wording
    is_document_file,
)
from kb_shared.errors import IdentityError, IntakeError, StoreError
from kb_shared.identity import check_file_name, doc_id, normalize_name
from kb_shared.providers.text_markdown import DOCUMENT_SUFFIXES
from kb_shared.stores.catalog import (
    Catalog,
    DocumentRow,
    DocumentStatus,
    DocumentVersionRow,
    VersionStatus,
    deleting_message,
)


@dataclass(frozen=True)
class FileCheck:
    """The verdict on one file before transfer.

    Attributes:
        name: the file name as the browser gave it.
        size: its size in bytes.
        accepted: whether its bytes may be sent.
        status: ``None`` when accepted, else ``duplicate`` or ``refused`` (``IntakeStatus``).
        doc_id: its ``doc_id`` (the existing document's for a duplicate), or ``None``.
        reason: why it is refused ("" when accepted).
        new_version_possible: its name is a catalogued document's that can take a new version
            (none of its versions is waiting to be built): the page offers to send it as one.
        name_clash: its name is a catalogued document's and its content none of the
            document's versions' (module docstring); ``None`` when that cannot be told from
            its size and no SHA-256 was given; ``False`` for every other verdict.
    """

    name: str
    size: int
    accepted: bool
    status: IntakeStatus | None = None
    doc_id: str | None = None
    reason: str = ""
    new_version_possible: bool = False
    name_clash: bool | None = False

    def as_dict(self) -> dict[str, object]:
        """JSON-serialisable form."""
        return asdict(self)


def _refused(name: str, size: int, reason: str, *, ident: str | None = None) -> FileCheck:
    return FileCheck(name, size, False, IntakeStatus.REFUSED, ident, reason)


def name_refusal(name: str) -> str:
    """Why ``name`` cannot be a document's name ("" when it can): a bare file name (no
    folder), with a document suffix, that ``doc_id`` accepts."""
    try:
        clean = check_file_name(name)  # the intake's own rule: no path, dots, NUL, 255 bytes
    except IdentityError as error:
        return str(error)
    if not is_document_file(Path(clean)):
        return f"not a document kb reads ({', '.join(DOCUMENT_SUFFIXES)})"
    try:
        doc_id(clean)
    except IdentityError as error:
        return str(error)
    return ""


def check_files(
    files: Sequence[tuple[str, int]], catalog: Catalog, max_bytes: int, *,
    new_version: bool = False, sha256s: Sequence[str | None] | None = None,
) -> list[FileCheck]:
    """Decide each ``(name, size in bytes)`` of one batch, in order (module docstring).

    With ``new_version`` a name already in the corpus is accepted as that document's next
    version when it can take one (its ``doc_id`` is the document's) and its content is new;
    otherwise it is refused with the reason. ``sha256s`` (lowercase hex, ``None`` where not
    known) go with ``files`` by position.

    Raises:
        IntakeError: the catalog could not be read; nothing may be sent, since a duplicate
            would corrupt the existing document (the intake's rule 4).
    """
    checks: list[FileCheck] = []
    seen_names: dict[str, str] = {}
    seen_ids: dict[str, str] = {}
    digests = list(sha256s) if sha256s is not None else [None] * len(files)
    if len(digests) != len(files):
        raise ValueError(f"{len(digests)} SHA-256 digests for {len(files)} files")
    for (raw, size), digest in zip(files, digests, strict=True):
        name = raw.strip()
        refusal = name_refusal(raw) or _size_refusal(size, max_bytes)
        if refusal:
            checks.append(_refused(raw, size, refusal))
            continue
        normal, ident = normalize_name(name), doc_id(name)
        if normal in seen_names:
            checks.append(
                FileCheck(
                    raw, size, False, IntakeStatus.DUPLICATE, ident,
                    f"same name as {seen_names[normal]!r} earlier in this batch",
                )
            )
            continue
        if ident in seen_ids:
            checks.append(
                _refused(
                    raw, size,
                    f"its id {ident!r} is the same as {seen_ids[ident]!r} earlier in this "
                    "batch; rename one of them",
                )
            )
            continue
        seen_names[normal] = seen_ids[ident] = name
        checks.append(
            _against_catalog(raw, size, catalog, new_version=new_version, sha256=digest)
        )
    return checks


def duplicate_reason(existing: DocumentRow, waiting: int | None) -> str:
    """Why a name already in the corpus is not sent as a new document, with the ways on.

    Args:
        existing: the catalogued document of that name.
        waiting: the number of its version still waiting to be built, or ``None``.

    Returns:
        e.g. ``"'Rules.pdf' is already in the corpus (doc_id rules.pdf, ready). To add it as
        a new version: Upload as new version; to replace it entirely: delete it first"``; the
        intake's wording (``intake.duplicate_name_message``) with the page's actions.
    """
    where = (
        f"{existing.name!r} is already in the corpus (doc_id {existing.doc_id}, "
        f"{existing.status})"
    )
    if waiting is not None:
        return (
            f"{where}. Version {waiting} is waiting to be built; once it is, this file can be "
            "uploaded as a new version. To replace it entirely: delete it first"
        )
    return (
        f"{where}. To add it as a new version: Upload as new version; to replace it entirely: "
        "delete it first"
    )


def _waiting_version(versions: Sequence[DocumentVersionRow]) -> int | None:
    """The number of the newest of ``versions`` when it is still waiting to be built, or
    ``None``."""
    newest = versions[-1] if versions else None
    if newest is not None and newest.status == VersionStatus.PENDING:
        return newest.version
    return None


def content_differs(
    existing: DocumentRow, versions: Sequence[DocumentVersionRow], size: int, sha256: str | None
) -> bool | None:
    """Whether a file of ``size`` bytes (and ``sha256``, when known) is none of ``existing``'s
    versions: by digest when given; else ``True`` when no version has that size, ``None``
    (cannot tell) when one has."""
    stored = [(existing.sha256, existing.size_bytes)] + [(v.sha256, v.size_bytes) for v in versions]
    if sha256 is not None:
        return all(digest != sha256 for digest, _ in stored)
    return True if all(bytes_ != size for _, bytes_ in stored) else None


def identical_reason(existing: DocumentRow) -> str:
    """Why a file with the content of one of ``existing``'s versions is not sent (the intake's
    wording for the same case, ``intake._new_version``)."""
    return (
        f"identical content to a version of {existing.name!r} already in the corpus; nothing "
        "new to add"
    )


def _against_catalog(
    name: str, size: int, catalog: Catalog, *, new_version: bool, sha256: str | None = None
) -> FileCheck:
    try:
        by_name = catalog.find_by_normalized_name(name)
        by_id = None if by_name is not None else catalog.find_by_doc_id(doc_id(name))
        versions = [] if by_name is None else catalog.versions(by_name.doc_id)
    except (StoreError, OSError) as error:
        raise IntakeError(
            f"the duplicate check could not read the catalog ({error}); nothing was sent, "
            "because adding a duplicate would corrupt the existing document"
        ) from error
    if by_name is not None and by_name.status == DocumentStatus.DELETING:
        return FileCheck(
            name, size, False, IntakeStatus.REFUSED, by_name.doc_id,
            deleting_message(by_name, "upload the file again"),
        )
    if by_name is not None:
        waiting = _waiting_version(versions)
        differs = content_differs(by_name, versions, size, sha256)
        if differs is False:
            return FileCheck(
                name, size, False, IntakeStatus.DUPLICATE, by_name.doc_id,
                identical_reason(by_name), name_clash=False,
            )
        if new_version and waiting is None:
            return FileCheck(name, size, True, None, by_name.doc_id)
        return FileCheck(
            name, size, False, IntakeStatus.DUPLICATE, by_name.doc_id,
            duplicate_reason(by_name, waiting), new_version_possible=waiting is None,
            name_clash=differs,
        )
    if by_id is not None:
        return _refused(
            name, size, f"its id {by_id.doc_id!r} is taken by {by_id.name!r}; rename the file"
        )
    return FileCheck(name, size, True, None, doc_id(name))
