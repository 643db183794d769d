"""Intake: ``admit`` is the one way a file becomes a document. ``kb add``, ``kb demo`` and the
``add_documents`` job (which the inbox sensor requests) all call it;
``kb_assets.url_intake.admit_sources`` puts https URLs through it too (downloaded by the safe
fetcher first).

Rules (DESIGN.md "Identity"), applied in this order to a batch:

1. Only documents (``.pdf``, ``.md``, ``.txt``: ``text_markdown.DOCUMENT_SUFFIXES``) are taken
   from folders; a file named explicitly that is not one is refused. Files over
   ``KB_MAX_UPLOAD_BYTES`` and empty files are refused, and so is a ``.md``/``.txt`` file that
   is binary (a NUL byte, not UTF-8: ``text_markdown.decode_text``), before anything is written;
   so is a file that cannot be read (no permission, an I/O error), the rest of the batch going on.
2. Inside one batch, repeats of a normalised name collapse to the first (the others are
   reported as duplicates), and so do repeats of identical content.
3. Against the catalog: a normalised name already there is a duplicate when the content is
   one of its versions', else a name clash (``IntakeOutcome.name_clash``: not added, with the
   ``--new-version`` hint); the same ``doc_id`` from a different name is refused as a
   collision; identical content under another name is refused, naming the existing document.
4. If the duplicate lookup itself fails (the catalog is down), the whole batch is refused:
   ingesting a duplicate would corrupt the existing document's chunks and edges.

New versions (issue 12, "New versions of a document"): with ``new_version``, a file whose
normalised name is a catalogued document's and whose content differs from every version's is
added as that document's next version (``Catalog.add_version``: same ``doc_id`` and partition,
its file under ``layout.pdf_key(version_key(doc_id, n))``); the build makes it, and its
``record`` step switches the document to it. Identical content is a duplicate; a version still
waiting to be built is refused (one build per document at a time). A name not yet in the
catalog is added as a new document, as without the flag. Without the flag the duplicate's
outcome carries a ``hint`` naming ``kb add --new-version``.

An accepted file gets its catalog row first (the unique indexes settle a race between two
intakes: the loser is decided again on what the winner wrote, as rules 3 and 4 would have
decided it had it come second), then its bytes in blobs (if the copy fails the row is removed
again); then every added file gets its Dagster partition in one call. If that call fails, the
batch's rows and blobs are removed again and nothing is added.

Categories (issue 12, "Categories from folders"): a file found in a folder given to ``admit``
gets its folder path below that folder as its category (``DIR/aemo/procedures/x.pdf`` →
``aemo/procedures``); a file directly in the folder, named explicitly or downloaded has none.
A ``category`` given to ``admit`` is the base: it is the category of those, and the prefix of
the folder paths (``--category aemo`` and ``DIR/procedures/x.pdf`` → ``aemo/procedures``).

Editions (issue 27): with ``edition_of`` (a name or doc_id) the batch's one new document is
added as that document's next edition (``documents.edition_of``; the catalog checks the link).
With ``new_version``, or more than one document, it is refused before anything is read.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb_shared import layout
from kb_shared.errors import (
    ConversionError,
    DuplicateDocumentError,
    EditionLinkError,
    IntakeError,
    StoreError,
)
from kb_shared.identity import (
    IdentityError,
    check_file_name,
    doc_id,
    normalize_name,
    sha256_bytes,
    version_key,
)
from kb_shared.stores.blobs import BlobStore

# Dagster, the catalog (SQLAlchemy) and the text converter (NumPy) load in the functions that
# use them: `kb add` of a refused URL needs none of them (issue 28, tests/test_cli_imports.py).
if TYPE_CHECKING:
    import dagster as dg

    from kb_assets.resources import StoresResource
    from kb_shared.stores.catalog import Catalog, DocumentRow, DocumentVersionRow

log = logging.getLogger(__name__)


class IntakeStatus(StrEnum):
    """What happened to one file: ``added``; ``duplicate`` (not added: already there, or
    repeated in the batch); ``refused`` (cannot be added; the reason says why and what to do).

    A ``duplicate`` is one of two kinds, told apart by ``IntakeOutcome.name_clash`` (and its
    ``label``): the corpus holds the file as it is (a true duplicate: not an error), or it
    holds the name with other content (a name clash: the user's change is not in kb, so ``kb
    add`` fails, and the ``hint`` names ``kb add --new-version``)."""

    ADDED = "added"
    DUPLICATE = "duplicate"
    REFUSED = "refused"


#: How a name clash is called wherever an outcome is shown (CLI, job summary, upload page).
NAME_CLASH_LABEL = "name clash"


@dataclass(frozen=True)
class IntakeOutcome:
    """What happened to one file.

    Attributes:
        path: the file as given.
        name: its file name.
        status: see ``IntakeStatus``.
        doc_id: the partition key for added files (and the existing one for duplicates).
        reason: human-readable explanation ("" for added).
        version: the version number an added file became (1 for a new document), else
            ``None``.
        hint: what to do instead, when there is something ("" otherwise): a duplicate name
            with new content can be added as a new version.
        name_clash: the file was not added because the corpus holds its name with other
            content (``IntakeStatus``); ``False`` for every other outcome.
        edition_of: the ``doc_id`` of the previous edition an added file was linked to
            ("Editions" in the module docstring), else ``None``.
    """

    path: str
    name: str
    status: IntakeStatus
    doc_id: str | None = None
    reason: str = ""
    version: int | None = None
    hint: str = ""
    name_clash: bool = False
    edition_of: str | None = None

    @property
    def label(self) -> str:
        """What to call the outcome: ``"name clash"`` for a name clash, else the status."""
        return NAME_CLASH_LABEL if self.name_clash else str(self.status)

    def as_dict(self) -> dict[str, str | int | bool | None]:
        """JSON-serialisable form: the fields, plus ``label`` (``"name clash"`` or the status,
        as ``kb add``'s table prints it; ``name_clash`` tells the two duplicates apart)."""
        return {**asdict(self), "label": self.label}


@dataclass(frozen=True)
class Candidate:
    """A file that passed the batch rules and is checked against the catalog next.

    Attributes:
        path: the file.
        name: its file name as added (stripped).
        doc_id: ``kb_shared.identity.doc_id(name)``.
        sha256: hex digest of ``data``.
        data: the file's bytes.
        category: its category (see "Categories" in the module docstring), or ``None``.
    """

    path: Path
    name: str
    doc_id: str
    sha256: str
    data: bytes
    category: str | None = None

    def outcome(
        self, status: IntakeStatus, doc: str | None = None, reason: str = "", **more: Any
    ) -> IntakeOutcome:
        """This file's outcome (``more``: ``version``, ``hint``)."""
        return IntakeOutcome(str(self.path), self.name, status, doc, reason, **more)


def is_document_file(path: Path) -> bool:
    """Whether ``path``'s extension is one kb takes as a document (``DOCUMENT_SUFFIXES``,
    any case)."""
    from kb_shared.providers.text_markdown import DOCUMENT_SUFFIXES

    return path.suffix.lower() in DOCUMENT_SUFFIXES


def collect_documents(paths: Iterable[str | Path]) -> tuple[list[Path], list[IntakeOutcome]]:
    """Expand files and folders into document files (``.pdf``, ``.md``, ``.txt``; folders
    recursively, sorted by path).

    Returns:
        ``(files, refused)`` — ``refused`` holds explicitly named paths that do not exist or
        are not documents.
    """
    from kb_shared.providers.text_markdown import DOCUMENT_SUFFIXES

    files: list[Path] = []
    refused: list[IntakeOutcome] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.is_file() and is_document_file(p)))
        elif path.is_file():
            if is_document_file(path):
                files.append(path)
            else:
                refused.append(
                    IntakeOutcome(
                        str(raw), path.name, IntakeStatus.REFUSED,
                        reason=f"not a document kb reads ({', '.join(DOCUMENT_SUFFIXES)})",
                    )
                )
        else:
            refused.append(
                IntakeOutcome(str(raw), path.name, IntakeStatus.REFUSED, reason="no such file")
            )
    return files, refused


def file_categories(
    paths: Iterable[str | Path], files: Iterable[Path], base: str | None
) -> dict[Path, str | None]:
    """The category of each of ``files`` (from ``collect_documents(paths)``): ``base`` joined
    with its folder path below the folder of ``paths`` it was found in (module docstring).

    Raises:
        ValueError: a folder path ``normalize_category`` refuses (the message names it).
    """
    from kb_shared.stores.catalog.documents import normalize_category

    folders = [Path(p) for p in paths if Path(p).is_dir()]
    found: dict[Path, str | None] = {}
    for file in files:
        below = next(
            (file.parent.relative_to(d).as_posix() for d in folders if file.is_relative_to(d)),
            "",
        )
        joined = "/".join(part for part in (base or "", "" if below == "." else below) if part)
        try:
            found[file] = normalize_category(joined) if joined else None
        except ValueError as error:
            raise ValueError(f"{file}: its folder is not a category kb keeps ({error})") from error
    return found


def admit(
    paths: Sequence[str | Path],
    stores: StoresResource,
    instance: dg.DagsterInstance,
    *,
    category: str | None = None,
    new_version: bool = False,
    edition_of: str | None = None,
) -> list[IntakeOutcome]:
    """Apply the intake rules to ``paths`` and add the accepted files: catalog row, blob and
    Dagster partition each.

    Args:
        category: the base category ("Categories" in the module docstring).
        new_version: add a catalogued name with new content as a new version ("New
            versions" in the module docstring).
        edition_of: the name or doc_id of the previous edition of the batch's one document
            ("Editions" in the module docstring); a refused link is a refused outcome.

    Returns one outcome per file found, in input order. The added documents are ``pending``;
    a build run makes them ``ready``. A file whose folder path is not a valid category is
    refused with the reason.

    Raises:
        ValueError: ``category`` is not one (``normalize_category``), or ``edition_of`` is
            refused (``previous_edition``, or the batch holds more than one document); nothing
            was read.
        IntakeError: the catalog lookup failed, or the partitions could not be added; nothing
            at all was added.
    """
    from kb_shared.stores.catalog.documents import normalize_category

    base = normalize_category(category)
    previous = previous_edition(stores, edition_of, new_version)
    files, outcomes = collect_documents(paths)
    if previous is not None and len(files) > 1:
        raise ValueError(
            f"an edition link names the previous edition of one document; this batch has "
            f"{len(files)}: add the new edition on its own"
        )
    categories: dict[Path, str | None] = {}
    for file in list(files):
        try:
            categories |= file_categories(paths, [file], base)
        except ValueError as error:
            files.remove(file)
            outcomes.append(
                IntakeOutcome(str(file), file.name, IntakeStatus.REFUSED, reason=str(error))
            )
    candidates = [
        replace(c, category=categories.get(c.path))
        for c in _screen(files, stores.settings.max_upload_bytes, outcomes)
    ]
    decided = _against_catalog(candidates, stores, new_version=new_version, edition_of=previous)
    added = [o for o in decided if o.status == IntakeStatus.ADDED and o.doc_id]
    if added:
        _add_partitions(instance, added, stores.catalog(), stores.blobs())
    order = {str(p): i for i, p in enumerate(paths)}
    return sorted(outcomes + decided, key=lambda o: input_position(o.path, order))


#: Why ``edition_of`` and ``new_version`` are not taken together ("Editions").
EDITION_OR_VERSION = (
    "a new edition cannot also be a new version: a new version keeps the document's file "
    "name, a new edition has its own name and names the previous edition; choose one of "
    "--new-version and --edition-of"
)


def previous_edition(stores: StoresResource, ref: str | None, new_version: bool) -> str | None:
    """The ``doc_id`` ``ref`` names (``Catalog.previous_edition``); ``None`` for no ``ref``.

    Raises:
        ValueError: with ``new_version``; ``EditionLinkError``: as ``Catalog.previous_edition``.
        IntakeError: the catalog could not be read; nothing was added.
    """
    if ref is not None and new_version:
        raise ValueError(EDITION_OR_VERSION)
    try:
        return None if ref is None else stores.catalog().previous_edition(ref).doc_id
    except (StoreError, OSError) as error:
        raise IntakeError(f"the catalog could not be read ({error}); nothing added") from error


def _screen(files: list[Path], max_bytes: int, outcomes: list[IntakeOutcome]) -> list[Candidate]:
    """Rules 1 and 2: read each file once and decide the batch before writing anything.
    Appends the refused and duplicate files to ``outcomes`` (a file that cannot be read is
    refused with ``unreadable_reason``, the others go on); returns the rest."""
    from kb_shared.providers.text_markdown import decode_text, is_text_document

    candidates: list[Candidate] = []
    seen_names: dict[str, str] = {}
    seen_ids: dict[str, str] = {}
    seen_content: dict[str, str] = {}
    for path in files:
        name = path.name.strip()
        try:
            check_file_name(name)
            normal = normalize_name(name)
            ident = doc_id(name)
        except IdentityError as error:
            outcomes.append(IntakeOutcome(str(path), name, IntakeStatus.REFUSED, reason=str(error)))
            continue
        try:
            refusal = _size_refusal(path.stat().st_size, max_bytes)
        except OSError as error:  # gone since it was found
            refusal = unreadable_reason(error)
        if refusal:
            outcomes.append(IntakeOutcome(str(path), name, IntakeStatus.REFUSED, reason=refusal))
            continue
        if normal in seen_names:
            outcomes.append(
                IntakeOutcome(
                    str(path), name, IntakeStatus.DUPLICATE, ident,
                    reason=f"same name as {seen_names[normal]!r} earlier in this batch",
                )
            )
            continue
        if ident in seen_ids:
            outcomes.append(
                IntakeOutcome(
                    str(path), name, IntakeStatus.REFUSED,
                    reason=f"its id {ident!r} is the same as {seen_ids[ident]!r} earlier in this "
                    "batch; rename one of them",
                )
            )
            continue
        try:
            data = path.read_bytes()
        except OSError as error:  # no permission, or an I/O error: this file alone is refused
            reason = unreadable_reason(error)
            outcomes.append(IntakeOutcome(str(path), name, IntakeStatus.REFUSED, reason=reason))
            continue
        if is_text_document(name):
            try:
                decode_text(data, name)
            except ConversionError as error:
                outcomes.append(
                    IntakeOutcome(str(path), name, IntakeStatus.REFUSED, reason=str(error))
                )
                continue
        digest = sha256_bytes(data)
        if digest in seen_content:
            outcomes.append(
                IntakeOutcome(
                    str(path), name, IntakeStatus.DUPLICATE,
                    reason=f"identical content to {seen_content[digest]!r} earlier in this batch",
                )
            )
            continue
        seen_names[normal] = seen_ids[ident] = seen_content[digest] = name
        candidates.append(Candidate(path, name, ident, digest, data))
    return candidates


def unreadable_reason(error: OSError) -> str:
    """Why a file found for intake was not read: the operating system's words for ``error``
    ("Permission denied") and what to do."""
    return (
        f"the file cannot be read ({error.strerror or error}); check that it is there and that "
        "kb may read it, then add it again"
    )


def _size_refusal(size: int, max_bytes: int) -> str:
    if size == 0:
        return "the file is empty"
    if size > max_bytes:
        return f"{size:,} bytes is over the {max_bytes:,}-byte limit (KB_MAX_UPLOAD_BYTES)"
    return ""


def _older_version(
    catalog: Catalog, row: DocumentRow, sha256: str
) -> DocumentVersionRow | None:
    """The version of ``row`` whose content is ``sha256`` when it is not the one served
    (a superseded or failed version re-added), else ``None``."""
    from kb_shared.stores.catalog import serving_version

    history = catalog.versions(row.doc_id)
    served = serving_version(history)
    match = next((v for v in history if v.sha256 == sha256), None)
    if match is None or (served is not None and match.version == served.version):
        return None
    return match


def duplicate_name_message(
    existing: DocumentRow, path: str | None, older: DocumentVersionRow | None = None
) -> str:
    """Why a file whose name is already in the corpus was not added, and the two ways on:
    a new version first (most likely what a user adding a known name has), then a delete.

    Args:
        existing: the catalogued document of that name.
        path: the file (or URL) as given, for the ``kb add --new-version`` command; ``None``
            when its content is the document's own (a new version would add nothing).
        older: the version holding that content when it is not the served one
            (``_older_version``): the message then names it instead of "the same content"
            (a version still waiting to be built: with the command that builds it).

    Returns:
        e.g. ``"'Report.pdf' is already in the corpus (doc_id report.pdf, ready). To add it as
        a new version: `kb add --new-version PATH`; to replace it entirely: `kb delete
        report.pdf` first"``.
    """
    from kb_shared.stores.catalog import VersionStatus

    where = (
        f"{existing.name!r} is already in the corpus (doc_id {existing.doc_id}, "
        f"{existing.status})"
    )
    delete = f"`kb delete {existing.doc_id}` first"
    if path is None and older is not None and older.status == VersionStatus.PENDING:
        return (
            f"{where}; this content is its version {older.version}, waiting to be built: "
            f"nothing was added. To build it: `kb build {existing.doc_id}`"
        )
    if path is None and older is not None:
        return (
            f"{where}; this content is its version {older.version} ({older.status}), not "
            f"the one it serves now: nothing was added. To replace the document entirely: "
            f"{delete}"
        )
    if path is None:
        return f"{where} with the same content; to replace it entirely: {delete}"
    return (
        f"{where}. To add it as a new version: `kb add --new-version {path}`; to replace it "
        f"entirely: {delete}"
    )


def _against_catalog(
    candidates: list[Candidate], stores: StoresResource, *, new_version: bool = False,
    edition_of: str | None = None,
) -> list[IntakeOutcome]:
    """Rules 3 and 4 (and "New versions"), then the rows and blobs of the files that pass
    (a new document linked to the previous edition ``edition_of``, a doc_id, when given).

    A file whose row a unique index refused (another intake wrote the same name, id or content
    between this one's lookup and its write) is decided again on what the other wrote, as if
    it had come first: a name clash stays a name clash, not a harmless duplicate."""
    if not candidates:
        return []
    try:
        catalog = stores.catalog()
        existing = [_lookup(catalog, c) for c in candidates]
    except (StoreError, OSError) as error:
        raise IntakeError(
            f"the duplicate check could not read the catalog ({error}); nothing was added, "
            "because adding a duplicate would corrupt the existing document. Fix the catalog "
            "connection and add the files again."
        ) from error

    blobs = stores.blobs()
    outcomes: list[IntakeOutcome] = []
    for candidate, found in zip(candidates, existing, strict=True):
        try:
            outcome = _decide(candidate, found, catalog, blobs, new_version, edition_of)
        except DuplicateDocumentError as race:
            try:
                outcome = _decide(
                    candidate, _lookup(catalog, candidate), catalog, blobs, new_version,
                    edition_of,
                )
            except (DuplicateDocumentError, StoreError, OSError):  # the race's own words then
                outcome = candidate.outcome(IntakeStatus.DUPLICATE, candidate.doc_id, str(race))
        outcomes.append(outcome)
    return outcomes


#: What the catalog holds under a candidate's normalised name, its doc_id and its content (the
#: document one of whose versions has it), each ``None`` when nothing.
Found = tuple["DocumentRow | None", "DocumentRow | None", "DocumentRow | None"]


def _lookup(catalog: Catalog, candidate: Candidate) -> Found:
    """The catalog's documents of ``candidate``'s name, id and content (``Found``)."""
    return (
        catalog.find_by_normalized_name(normalize_name(candidate.name)),
        catalog.find_by_doc_id(candidate.doc_id),
        catalog.find_by_sha256(candidate.sha256) or _version_owner(catalog, candidate.sha256),
    )


def _decide(
    candidate: Candidate, found: Found, catalog: Catalog, blobs: BlobStore, new_version: bool,
    edition_of: str | None,
) -> IntakeOutcome:
    """One file's outcome against what the catalog holds (``found``), with its row and blob
    written when it is added.

    Raises:
        DuplicateDocumentError: a unique index refused its row: another intake won a race.
    """
    from kb_shared.stores.catalog import DocumentStatus, deleting_message

    by_name, by_id, by_content = found
    gone = next((r for r in found if r and r.status == DocumentStatus.DELETING), None)
    if gone is not None:  # a `kb delete` of it has not finished (issue 16)
        return candidate.outcome(
            IntakeStatus.REFUSED, gone.doc_id, deleting_message(gone, "add the file again")
        )
    if by_name is not None and new_version:
        return _new_version(candidate, by_name, by_content, catalog, blobs)
    if by_name is not None:
        same = by_content is not None and by_content.doc_id == by_name.doc_id
        older = _older_version(catalog, by_name, candidate.sha256) if same else None
        return candidate.outcome(
            IntakeStatus.DUPLICATE, by_name.doc_id,
            duplicate_name_message(by_name, None if same else str(candidate.path), older),
            hint=(
                ""
                if same
                else f"to add it as a new version of {by_name.name!r}, run "
                f"`kb add --new-version {candidate.path}`"
            ),
            name_clash=not same,
        )
    if by_id is not None:
        return candidate.outcome(
            IntakeStatus.REFUSED, None,
            f"its id {candidate.doc_id!r} is taken by {by_id.name!r}; rename the file",
        )
    if by_content is not None:
        return candidate.outcome(
            IntakeStatus.REFUSED, by_content.doc_id,
            f"identical content is already in the corpus as {by_content.name!r}",
        )
    return _add_one(candidate, catalog, blobs, edition_of)


def _version_owner(catalog: Catalog, sha256: str) -> DocumentRow | None:
    """The document one of whose versions has this content (``None``: none has)."""
    version = catalog.find_version_by_sha256(sha256)
    return None if version is None else catalog.find_by_doc_id(version.doc_id)


def _new_version(
    candidate: Candidate,
    existing: DocumentRow,
    by_content: DocumentRow | None,
    catalog: Catalog,
    blobs: BlobStore,
) -> IntakeOutcome:
    """Add ``candidate`` as the next version of ``existing`` (its name's document): the
    version row (pending), then its file; the row goes again when the copy fails.

    Raises:
        DuplicateDocumentError: another intake added that version number first.
    """
    if by_content is not None:
        if by_content.doc_id != existing.doc_id:
            return candidate.outcome(
                IntakeStatus.REFUSED, by_content.doc_id,
                f"identical content is already in the corpus as {by_content.name!r}",
            )
        return candidate.outcome(
            IntakeStatus.DUPLICATE, existing.doc_id,
            f"identical content to a version of {existing.name!r} already in the corpus; "
            "nothing new to add",
        )
    number = catalog.versions(existing.doc_id)[-1].version + 1
    key = layout.pdf_key(version_key(existing.doc_id, number))
    try:
        catalog.add_version(
            existing.doc_id, number, candidate.name, candidate.sha256, len(candidate.data), key
        )
    except ValueError as error:  # a version still waiting to be built
        return candidate.outcome(IntakeStatus.REFUSED, existing.doc_id, str(error))
    try:
        blobs.put(key, candidate.data)
    except Exception as error:
        catalog.remove_pending_version(existing.doc_id, number)
        return candidate.outcome(
            IntakeStatus.REFUSED, None, f"could not copy the file to the blob store: {error}"
        )
    log.info("added %s as version %d of %s", candidate.name, number, existing.doc_id)
    return candidate.outcome(IntakeStatus.ADDED, existing.doc_id, version=number)


def _add_one(
    candidate: Candidate, catalog: Catalog, blobs: BlobStore, edition_of: str | None = None
) -> IntakeOutcome:
    """Add ``candidate`` as a new document: its row (pending), then its file; the row goes
    again when the copy fails.

    Raises:
        DuplicateDocumentError: another intake wrote its name, doc_id or content first.
    """
    key = layout.pdf_key(candidate.doc_id)
    try:
        catalog.add_pending(
            name=candidate.name,
            doc_id=candidate.doc_id,
            sha256=candidate.sha256,
            size_bytes=len(candidate.data),
            blob_key=key,
            category=candidate.category,
            edition_of=edition_of,
        )
    except EditionLinkError as error:  # e.g. the previous edition has a next edition already
        return candidate.outcome(IntakeStatus.REFUSED, None, str(error))
    try:
        blobs.put(key, candidate.data)
    except Exception as error:
        catalog.delete(candidate.doc_id)
        return candidate.outcome(
            IntakeStatus.REFUSED, None, f"could not copy the file to the blob store: {error}"
        )
    log.info("added %s as %s", candidate.name, candidate.doc_id)
    return candidate.outcome(IntakeStatus.ADDED, candidate.doc_id, version=1, edition_of=edition_of)


def _add_partitions(
    instance: dg.DagsterInstance, added: list[IntakeOutcome], catalog: Catalog, blobs: BlobStore
) -> None:
    """Register the added documents' partitions (a new version's exists already: adding it
    again is a no-op); on failure remove the added rows and blobs (of a new version, only
    that version's).

    Raises:
        IntakeError: the Dagster instance refused the partitions.
    """
    try:
        register_partitions(instance, [o.doc_id for o in added if o.doc_id])
    except Exception as error:
        for outcome in added:
            ident, number = outcome.doc_id or "", outcome.version or 1
            blobs.delete(layout.pdf_key(version_key(ident, number)))
            if number > 1:
                catalog.remove_pending_version(ident, number)
            else:
                catalog.delete(ident)
        raise IntakeError(
            f"the Dagster instance did not take the new documents' partitions ({error}); "
            "nothing was added. Check DAGSTER_HOME (KB_HOME/dagster) and add the files again."
        ) from error


def register_partitions(instance: dg.DagsterInstance, doc_ids: Sequence[str]) -> None:
    """Add the documents' Dagster partitions: the one place kb adds them (``admit``, and
    ``kb repair`` for catalog documents whose partition was lost)."""
    from kb_assets.partitions import add_document_partitions

    add_document_partitions(instance, doc_ids)


def input_position(path: str, order: dict[str, int]) -> tuple[int, str]:
    """Sort key that puts an outcome back in input order: (the position in ``order`` — input
    path or URL → its index — of the input ``path`` is, or lies in, then the path); a path
    from no input sorts last."""
    for given, position in order.items():
        if path == given or path.startswith(given.rstrip("/") + "/"):
            return (position, path)
    return (len(order), path)
