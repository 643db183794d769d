"""Intake: the identity rules applied to files that arrive (``kb add``, the inbox sensor, the
``add_documents`` job all call ``intake_files``).

Rules (DESIGN.md "Identity"), applied in this order to a batch:

1. Only ``.pdf`` files are taken from folders; a file named explicitly that is not ``.pdf`` is
   refused. Files over ``KB_MAX_UPLOAD_BYTES`` and empty files are refused.
2. Inside one batch, repeats of a normalised name collapse to the first (the others are
   reported as duplicates), and so do repeats of identical content.
3. Against the catalog: a normalised name already there is a duplicate; the same ``doc_id``
   from a different name is refused as a collision; identical content under another name is
   refused, naming the existing document.
4. If the duplicate lookup itself fails (the catalog is down), the whole batch is refused:
   ingesting a duplicate would corrupt the existing document's chunks and edges.

An accepted file gets its catalog row first (the unique indexes settle a race between two
intakes), then its bytes in blobs; if the copy fails the row is removed again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from kb_assets.constants import PDF_KEY
from kb_shared.errors import IntakeError, StoreError
from kb_shared.identity import IdentityError, doc_id, normalize_name, sha256_bytes
from kb_shared.settings import Settings
from kb_shared.stores.blobs import BlobStore
from kb_shared.stores.catalog import Catalog, DuplicateDocumentError

log = logging.getLogger(__name__)

ADDED = "added"
DUPLICATE = "duplicate"
REFUSED = "refused"


@dataclass(frozen=True)
class IntakeOutcome:
    """What happened to one file.

    Attributes:
        path: the file as given.
        name: its file name.
        status: ``added``, ``duplicate`` (already there or repeated in the batch) or
            ``refused`` (cannot be added; ``reason`` says why and what to do).
        doc_id: the partition key for added files (and the existing one for duplicates).
        reason: human-readable explanation ("" for added).
    """

    path: str
    name: str
    status: str
    doc_id: str | None = None
    reason: str = ""

    def as_dict(self) -> dict[str, str | None]:
        """JSON-serialisable form."""
        return asdict(self)


def collect_pdfs(paths: Iterable[str | Path]) -> tuple[list[Path], list[IntakeOutcome]]:
    """Expand files and folders into PDF files (folders recursively, sorted by path).

    Returns:
        ``(files, refused)`` — ``refused`` holds explicitly named paths that do not exist or
        are not ``.pdf`` files.
    """
    files: list[Path] = []
    refused: list[IntakeOutcome] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(
                sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() == ".pdf")
            )
        elif path.is_file():
            if path.suffix.lower() == ".pdf":
                files.append(path)
            else:
                refused.append(
                    IntakeOutcome(str(raw), path.name, REFUSED, reason="not a .pdf file")
                )
        else:
            refused.append(IntakeOutcome(str(raw), path.name, REFUSED, reason="no such file"))
    return files, refused


def intake_files(
    paths: Sequence[str | Path], catalog: Catalog, blobs: BlobStore, settings: Settings
) -> list[IntakeOutcome]:
    """Apply the intake rules to ``paths`` and add the accepted files.

    Returns one outcome per file found (in input order). The caller adds a dynamic partition
    for every ``added`` outcome and requests its run.

    Raises:
        IntakeError: the catalog lookup failed, so nothing at all was added.
    """
    files, outcomes = collect_pdfs(paths)

    # -- read everything first; decide the whole batch before writing anything ------------
    candidates: list[tuple[Path, str, str, str, bytes]] = []
    seen_names: dict[str, str] = {}
    seen_ids: dict[str, str] = {}
    seen_content: dict[str, str] = {}
    for path in files:
        name = path.name.strip()
        try:
            normal = normalize_name(name)
            ident = doc_id(name)
        except IdentityError as error:
            outcomes.append(IntakeOutcome(str(path), name, REFUSED, reason=str(error)))
            continue
        size = path.stat().st_size
        if size == 0:
            outcomes.append(IntakeOutcome(str(path), name, REFUSED, reason="the file is empty"))
            continue
        if size > settings.max_upload_bytes:
            outcomes.append(
                IntakeOutcome(
                    str(path), name, REFUSED,
                    reason=f"{size:,} bytes is over the {settings.max_upload_bytes:,}-byte limit "
                    "(KB_MAX_UPLOAD_BYTES)",
                )
            )
            continue
        if normal in seen_names:
            outcomes.append(
                IntakeOutcome(
                    str(path), name, DUPLICATE, ident,
                    reason=f"same name as {seen_names[normal]!r} earlier in this batch",
                )
            )
            continue
        if ident in seen_ids:
            outcomes.append(
                IntakeOutcome(
                    str(path), name, REFUSED,
                    reason=f"its id {ident!r} is the same as {seen_ids[ident]!r} earlier in this "
                    "batch; rename one of them",
                )
            )
            continue
        data = path.read_bytes()
        digest = sha256_bytes(data)
        if digest in seen_content:
            outcomes.append(
                IntakeOutcome(
                    str(path), name, DUPLICATE,
                    reason=f"identical content to {seen_content[digest]!r} earlier in this batch",
                )
            )
            continue
        seen_names[normal] = name
        seen_ids[ident] = name
        seen_content[digest] = name
        candidates.append((path, name, ident, digest, data))

    try:
        existing = [
            (
                catalog.find_by_normalized_name(normalize_name(name)),
                catalog.find_by_doc_id(ident),
                catalog.find_by_sha256(digest),
            )
            for _, name, ident, digest, _ in candidates
        ]
    except (StoreError, OSError) as error:
        raise IntakeError(
            f"the duplicate check could not read the catalog ({error}); nothing was added, "
            "because adding a duplicate would corrupt the existing document. Fix the catalog "
            "connection and add the files again."
        ) from error

    for (path, name, ident, digest, data), (by_name, by_id, by_content) in zip(
        candidates, existing, strict=True
    ):
        if by_name is not None:
            outcomes.append(
                IntakeOutcome(
                    str(path), name, DUPLICATE, by_name.doc_id,
                    reason=f"already in the corpus as {by_name.name!r}; to replace it, run "
                    f"`kb delete {by_name.doc_id}` first",
                )
            )
        elif by_id is not None:
            outcomes.append(
                IntakeOutcome(
                    str(path), name, REFUSED,
                    reason=f"its id {ident!r} is taken by {by_id.name!r}; rename the file",
                )
            )
        elif by_content is not None:
            outcomes.append(
                IntakeOutcome(
                    str(path), name, REFUSED, by_content.doc_id,
                    reason=f"identical content is already in the corpus as {by_content.name!r}",
                )
            )
        else:
            outcomes.append(_add_one(path, name, ident, digest, data, catalog, blobs))
    order = {str(p): i for i, p in enumerate(paths)}
    return sorted(outcomes, key=lambda o: _input_position(o.path, order))


def _input_position(path: str, order: dict[str, int]) -> tuple[int, str]:
    for given, position in order.items():
        if path == given or path.startswith(given.rstrip("/") + "/"):
            return (position, path)
    return (len(order), path)


def _add_one(
    path: Path, name: str, ident: str, digest: str, data: bytes, catalog: Catalog, blobs: BlobStore
) -> IntakeOutcome:
    key = PDF_KEY.format(doc=ident)
    try:
        catalog.add_pending(
            name=name, doc_id=ident, sha256=digest, size_bytes=len(data), blob_key=key
        )
    except DuplicateDocumentError as error:  # lost a race with another intake
        return IntakeOutcome(str(path), name, DUPLICATE, ident, reason=str(error))
    try:
        blobs.put(key, data)
    except Exception as error:
        catalog.delete(ident)
        return IntakeOutcome(
            str(path), name, REFUSED, reason=f"could not copy the file to the blob store: {error}"
        )
    log.info("added %s as %s", name, ident)
    return IntakeOutcome(str(path), name, ADDED, ident)
