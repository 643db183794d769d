"""The ``document_versions`` table: every version of every document, and which one is served.

A document (``documents`` row, one ``doc_id``, one Dagster partition) has versions 1, 2, …
A new version is a file whose normalised name is the document's and whose content differs,
added on purpose (``kb add --new-version``; issue 12, "New versions of a document"). Each
version row keeps its own file (``sha256``, ``size_bytes``, ``blob_key``), the version label
read from the document (``label``: "3.2" from a title page's "Version 3.2"), when it was added
and superseded, and a ``status``:

* ``pending``: added, not built yet (or building). At most one per document (partial unique
  index), so two builds of one partition never race.
* ``serving``: the version search returns. At most one per document (partial unique index).
* ``superseded``: served once, replaced by a later version (``superseded_at`` set); its
  vectors, edges and files are gone, the row stays as history.
* ``failed``: its build failed (``failure_reason``); the version served before it still is.

The switch is one transaction (``record_version``): the new version becomes ``serving``, the
old one ``superseded``, and the ``documents`` row takes the new file's fields, so a reader
that reads the catalog sees either the old version or the new one, never both or neither.
Where each version's data lives: ``kb_shared.identity.version_key``.

A document catalogued before this table existed has no version rows: the reads treat it as
version 1 (``DocumentVersionRow.first``), and the first write to its history inserts that row
(``sql/005_document_versions.sql`` does the same for every document on Postgres).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from kb_shared import identity
from kb_shared.errors import (
    DocumentNotFoundError,
    DuplicateDocumentError,
    KbError,
    SchemaMissingError,
    StoreError,
)
from kb_shared.stores.catalog.common import (
    CATALOG_METADATA,
    CatalogBase,
    clean_failure,
    clean_text,
    created_at,
    document_not_found,
    to_row,
)
from kb_shared.stores.catalog.documents import (
    NAME_MAX,
    SHA256_PATTERN,
    DocumentRow,
    DocumentStatus,
    document_fields,
    documents,
)
from kb_shared.stores.sql import error_detail, utc_now


class VersionStatus(StrEnum):
    """A version's lifecycle (module docstring): ``pending`` → ``serving`` → ``superseded``,
    or ``pending`` → ``failed``."""

    PENDING = "pending"
    SERVING = "serving"
    SUPERSEDED = "superseded"
    FAILED = "failed"


#: The values of the ``status`` column's CHECK constraint.
VERSION_STATUSES = tuple(status.value for status in VersionStatus)

document_versions = sa.Table(
    "document_versions",
    CATALOG_METADATA,
    # No foreign key: ``DocumentCatalog.delete`` removes a document's versions in its own
    # transaction, and the documents table stays droppable on its own (kb never drops it).
    sa.Column("doc_id", sa.String(120), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("name", sa.String(NAME_MAX), nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    sa.Column("blob_key", sa.Text, nullable=False),
    sa.Column("label", sa.Text),
    sa.Column("status", sa.String(16), nullable=False, server_default=VersionStatus.PENDING.value),
    sa.Column("failure_reason", sa.Text),
    created_at("added_at"),
    created_at("superseded_at", nullable=True),
    sa.PrimaryKeyConstraint("doc_id", "version"),
    sa.UniqueConstraint("sha256", name="uq_document_versions_sha256"),
    sa.CheckConstraint("version >= 1", name="ck_document_versions_version"),
    sa.CheckConstraint(
        "status IN ('pending', 'serving', 'superseded', 'failed')",
        name="ck_document_versions_status",
    ),
    sa.CheckConstraint(
        "(status = 'failed') = (failure_reason IS NOT NULL)",
        name="ck_document_versions_failure_reason",
    ),
    sa.CheckConstraint(
        "status <> 'superseded' OR superseded_at IS NOT NULL",
        name="ck_document_versions_superseded_at",
    ),
    sa.CheckConstraint("length(sha256) = 64", name="ck_document_versions_sha256"),
    sa.CheckConstraint("size_bytes >= 0", name="ck_document_versions_size_bytes"),
)

for _status in (VersionStatus.PENDING, VersionStatus.SERVING):
    sa.Index(
        f"ux_document_versions_{_status.value}",
        document_versions.c.doc_id,
        unique=True,
        postgresql_where=sa.text(f"status = '{_status.value}'"),
        sqlite_where=sa.text(f"status = '{_status.value}'"),
    )


@dataclass(frozen=True, slots=True)
class DocumentVersionRow:
    """One version of a document. ``version`` is 1-based; ``label`` the version read from the
    document (``None`` when it states none); ``status`` a ``VersionStatus``; ``blob_key`` the
    blob-store key of its file; timestamps aware UTC (``superseded_at`` ``None`` unless
    superseded)."""

    doc_id: str
    version: int
    name: str
    sha256: str
    size_bytes: int
    blob_key: str
    label: str | None
    status: str
    failure_reason: str | None
    added_at: dt.datetime
    superseded_at: dt.datetime | None

    @property
    def key(self) -> str:
        """Where this version's points, edges and files are stored
        (``identity.version_key``)."""
        return identity.version_key(self.doc_id, self.version)

    @classmethod
    def first(cls, row: DocumentRow) -> DocumentVersionRow:
        """The version 1 a document catalogued before version history has (module
        docstring): its file, label and time, ``serving`` when ready, else its status."""
        status = {
            DocumentStatus.READY: VersionStatus.SERVING,
            DocumentStatus.FAILED: VersionStatus.FAILED,
        }.get(DocumentStatus(row.status), VersionStatus.PENDING)
        return cls(
            doc_id=row.doc_id,
            version=1,
            name=row.name,
            sha256=row.sha256,
            size_bytes=row.size_bytes or 0,
            blob_key=row.blob_key,
            label=row.version,
            status=status.value,
            failure_reason=row.failure_reason if status == VersionStatus.FAILED else None,
            added_at=row.created_at,
            superseded_at=None,
        )


def serving_version(history: list[DocumentVersionRow]) -> DocumentVersionRow | None:
    """The ``serving`` version of one document's ``history``, or ``None``."""
    return next((v for v in history if v.status == VersionStatus.SERVING), None)


def new_version_waits(history: Sequence[DocumentVersionRow]) -> bool:
    """One document's newest version (``history``: oldest first) is a version past the first
    still ``pending``: ``kb add --new-version`` added it and it waits for a build."""
    return bool(history) and history[-1].version > 1 and history[-1].status == VersionStatus.PENDING


@dataclass(frozen=True, slots=True)
class ServingState:
    """What a search needs to know of one document: its ``status`` (a ``DocumentStatus``), how
    many ``versions`` it has (1 for a document without version rows) and the number of its
    ``serving`` version (``None`` when none is)."""

    doc_id: str
    status: str
    versions: int
    serving: int | None

    @property
    def key(self) -> str:
        """Where its served data is stored (``identity.version_key``): the serving version's,
        else version 1's (a document built before version history)."""
        return identity.version_key(self.doc_id, self.serving or 1)


#: ``VersionReads.serving_states``' query, built once (every search runs it; SQLAlchemy
#: statements are immutable): per document its status, version count and served version.
_SERVING_STATES = (
    sa.select(
        documents.c.doc_id,
        documents.c.status,
        sa.func.count(document_versions.c.version),
        sa.func.max(
            sa.case(
                (
                    document_versions.c.status == VersionStatus.SERVING.value,
                    document_versions.c.version,
                )
            )
        ),
    )
    .select_from(
        documents.outerjoin(document_versions, document_versions.c.doc_id == documents.c.doc_id)
    )
    .group_by(documents.c.doc_id, documents.c.status)
    .order_by(documents.c.doc_id)
)

#: The same for a catalog whose version table was never created.
_SERVING_STATES_WITHOUT_VERSIONS = sa.select(
    documents.c.doc_id, documents.c.status, sa.literal(0), sa.null()
).order_by(documents.c.doc_id)


class VersionReads(CatalogBase):
    """The reads of the version history: what a read-only caller (the MCP server) may use."""

    def versions(self, doc_id: str) -> list[DocumentVersionRow]:
        """Every version of ``doc_id``, oldest first; a document catalogued before version
        history is its ``DocumentVersionRow.first``; ``[]`` for an unknown ``doc_id``."""
        with self._read() as conn:
            return _history(conn, doc_id)

    def all_versions(self) -> dict[str, list[DocumentVersionRow]]:
        """Every document's versions by ``doc_id`` (each oldest first; documents without
        rows as ``versions`` says). A catalog whose version table was never created (a
        reader on a catalog ``kb db init`` has not upgraded yet) reads as all version 1."""
        try:
            with self._read() as conn:
                rows = [
                    to_row(DocumentVersionRow, r)
                    for r in conn.execute(
                        sa.select(document_versions).order_by(
                            document_versions.c.doc_id, document_versions.c.version
                        )
                    )
                ]
        except SchemaMissingError:
            rows = []
        with self._read() as conn:
            docs = [to_row(DocumentRow, r) for r in conn.execute(sa.select(documents))]
        found: dict[str, list[DocumentVersionRow]] = {}
        for row in rows:
            found.setdefault(row.doc_id, []).append(row)
        return {
            doc.doc_id: found.get(doc.doc_id) or [DocumentVersionRow.first(doc)] for doc in docs
        }

    def serving_states(self) -> list[ServingState]:
        """Every document's ``ServingState`` (``deleting`` ones included), by ``doc_id``: one
        query, so a search reads the catalog once however many documents and versions it holds.
        A document without version rows counts as one version, served when ``ready``
        (``DocumentVersionRow.first``); so does every document of a catalog whose version
        table was never created.

        Raises:
            SchemaMissingError: the documents table does not exist (nothing catalogued yet).
        """
        try:
            with self._read() as conn:
                found = conn.execute(_SERVING_STATES).all()
        except SchemaMissingError:  # no version table yet: every document is its version 1
            with self._read() as conn:
                found = conn.execute(_SERVING_STATES_WITHOUT_VERSIONS).all()
        return [
            ServingState(
                doc_id=doc_id,
                status=status,
                versions=count or 1,
                serving=serving if count else (1 if status == DocumentStatus.READY else None),
            )
            for doc_id, status, count, serving in found
        ]

    def find_version_by_sha256(self, sha256: str) -> DocumentVersionRow | None:
        """The version (of any document) whose file has this content hash, or ``None``."""
        with self._read() as conn:
            row = conn.execute(
                sa.select(document_versions).where(document_versions.c.sha256 == sha256.lower())
            ).first()
        return None if row is None else to_row(DocumentVersionRow, row)


def _history(conn: Connection, doc_id: str) -> list[DocumentVersionRow]:
    rows = [
        to_row(DocumentVersionRow, r)
        for r in conn.execute(
            sa.select(document_versions)
            .where(document_versions.c.doc_id == doc_id)
            .order_by(document_versions.c.version)
        )
    ]
    if rows:
        return rows
    doc = conn.execute(sa.select(documents).where(documents.c.doc_id == doc_id)).first()
    return [] if doc is None else [DocumentVersionRow.first(to_row(DocumentRow, doc))]


def _stored_history(conn: Connection, doc_id: str) -> list[DocumentVersionRow]:
    """``_history``, with the implied version 1 of an older document inserted first."""
    history = _history(conn, doc_id)
    if not history:
        raise document_not_found(doc_id)
    stored = conn.execute(
        sa.select(sa.func.count()).where(document_versions.c.doc_id == doc_id)
    ).scalar()
    if not stored:
        first = history[0]
        values = {
            name: getattr(first, name)
            for name in (
                "doc_id", "version", "name", "sha256", "size_bytes", "blob_key", "label",
                "status", "failure_reason", "added_at",
            )
        }
        conn.execute(document_versions.insert().values(**values))
    return history


class VersionCatalog(VersionReads):
    """The version history's writes: a new version, a finished build (the switch), a failed
    build, and removing a version whose file could not be stored."""

    def add_version(
        self, doc_id: str, number: int, name: str, sha256: str, size_bytes: int, blob_key: str
    ) -> DocumentVersionRow:
        """Record version ``number`` of ``doc_id`` as ``pending``.

        Args:
            number: the next version number (the newest version's + 1); the primary key refuses a
                number another intake took first.
            name: the file name as uploaded; its normalised form must be the document's.
            sha256, size_bytes, blob_key: the new file (lower-case hex SHA-256, bytes, key).

        Raises:
            DocumentNotFoundError: no such document.
            DuplicateDocumentError: this content is already a version of some document
                (``field="sha256"``), or version ``number`` exists (``field="version"``).
            ValueError: a name of another document, a version that is not the next one, a
                version of the document still pending, or a bad hash, size or key.
        """
        clean = clean_text(name, "name", NAME_MAX)
        assert clean is not None
        key = clean_text(blob_key, "blob_key", 4096)
        with self._write() as conn:
            document = conn.execute(
                sa.select(documents).where(documents.c.doc_id == doc_id)
            ).first()
            if document is None:
                raise document_not_found(doc_id)
            row: DocumentRow = to_row(DocumentRow, document)
            if identity.normalize_name(clean) != row.normalized_name:
                raise ValueError(
                    f"{clean!r} is not a version of {row.name!r}: a new version has the "
                    "document's file name (case and surrounding spaces aside)"
                )
            history = _stored_history(conn, doc_id)
            pending = [v for v in history if v.status == VersionStatus.PENDING]
            if pending:
                raise ValueError(
                    f"version {pending[0].version} of {row.name!r} is still waiting to be "
                    f"built; build it (`kb build {doc_id}`) before adding another version"
                )
            if number != history[-1].version + 1:
                raise ValueError(
                    f"the next version of {row.name!r} is {history[-1].version + 1}, "
                    f"not {number}"
                )
            values = document_fields({"size_bytes": size_bytes})
            try:
                with conn.begin_nested():
                    inserted = conn.execute(
                        document_versions.insert()
                        .values(
                            doc_id=doc_id,
                            version=number,
                            name=clean,
                            sha256=_sha(sha256),
                            size_bytes=values["size_bytes"],
                            blob_key=key,
                            status=VersionStatus.PENDING,
                            added_at=utc_now(),
                        )
                        .returning(*document_versions.c)
                    ).one()
            except IntegrityError as exc:
                raise self._duplicate_version(conn, clean, row, sha256, number, exc) from exc
        return to_row(DocumentVersionRow, inserted)

    def _duplicate_version(
        self, conn: Connection, name: str, row: DocumentRow, sha256: str, version: int,
        exc: IntegrityError,
    ) -> KbError:
        same = conn.execute(
            sa.select(document_versions).where(document_versions.c.sha256 == sha256)
        ).first()
        if same is not None:
            other: DocumentVersionRow = to_row(DocumentVersionRow, same)
            return DuplicateDocumentError(
                f'"{name}" has the same content (sha256 {sha256[:12]}…) as version '
                f"{other.version} of {other.doc_id}; a new version must differ",
                name=name,
                field="sha256",
                existing=row,
            )
        taken = conn.execute(
            sa.select(document_versions.c.version).where(
                document_versions.c.doc_id == row.doc_id, document_versions.c.version == version
            )
        ).first()
        if taken is not None:
            return DuplicateDocumentError(
                f'version {version} of "{row.name}" was just added by another intake',
                name=name,
                field="version",
                existing=row,
            )
        return StoreError(f'the catalog refused "{name}": {error_detail(exc, self._engine)}')

    def remove_pending_version(self, doc_id: str, version: int) -> bool:
        """Delete a ``pending`` version (its file could not be stored). Returns whether there
        was one; a built version is never removed here."""
        with self._write() as conn:
            result = conn.execute(
                document_versions.delete().where(
                    document_versions.c.doc_id == doc_id,
                    document_versions.c.version == version,
                    document_versions.c.status == VersionStatus.PENDING,
                )
            )
        return result.rowcount > 0

    def record_version(
        self, doc_id: str, number: int, **fields: Any
    ) -> tuple[DocumentRow, list[DocumentVersionRow]]:
        """A build of version ``number`` succeeded: in one transaction it becomes the
        ``serving`` version (the one served before is ``superseded``), and the document is
        ``ready`` with this version's file and ``fields``. Rebuilding the serving version
        only sets the fields.

        Args:
            fields: as ``DocumentCatalog.mark_ready`` (``pages`` and ``chunk_count``
                required); ``version`` (the label) is also stored as the version's ``label``.

        Returns:
            The document row after the switch, and the other versions whose stored data the
            caller removes now (every version not serving; each ``key`` says where).

        Raises:
            DocumentNotFoundError: no such document or version, or the document is
                ``deleting`` (a ``kb delete`` started during the build; nothing is written).
            ValueError: an unknown field, a bad value, or missing pages/chunk_count.
        """
        values = document_fields(fields)
        missing = [k for k in ("pages", "chunk_count") if values.get(k) is None]
        if missing:
            raise ValueError(f"a ready document needs {' and '.join(missing)}")
        now = utc_now()
        with self._write() as conn:
            history = _stored_history(conn, doc_id)
            target = next((v for v in history if v.version == number), None)
            if target is None:
                raise document_not_found(doc_id, number)
            status = conn.execute(
                sa.select(documents.c.status).where(documents.c.doc_id == doc_id)
            ).scalar()
            if status == DocumentStatus.DELETING:  # a kb delete began while this built
                raise DocumentNotFoundError(
                    f"document {doc_id!r} is being deleted: its build result is not recorded"
                )
            this = (document_versions.c.doc_id == doc_id) & (
                document_versions.c.version == number
            )
            if target.status != VersionStatus.SERVING:
                conn.execute(
                    document_versions.update()
                    .where(
                        document_versions.c.doc_id == doc_id,
                        document_versions.c.status == VersionStatus.SERVING,
                    )
                    .values(status=VersionStatus.SUPERSEDED, superseded_at=now)
                )
            conn.execute(
                document_versions.update()
                .where(this)
                .values(
                    status=VersionStatus.SERVING,
                    failure_reason=None,
                    label=values.get("version"),
                )
            )
            document = conn.execute(
                documents.update()
                .where(documents.c.doc_id == doc_id)
                .values(
                    status=DocumentStatus.READY,
                    failure_reason=None,
                    name=target.name,
                    sha256=target.sha256,
                    size_bytes=target.size_bytes,
                    blob_key=target.blob_key,
                    updated_at=now,
                    **{k: v for k, v in values.items() if k not in ("size_bytes", "blob_key")},
                )
                .returning(*documents.c)
            ).one()
            retired = [
                to_row(DocumentVersionRow, r)
                for r in conn.execute(
                    sa.select(document_versions)
                    .where(
                        document_versions.c.doc_id == doc_id,
                        document_versions.c.version != number,
                    )
                    .order_by(document_versions.c.version)
                )
            ]
        return to_row(DocumentRow, document), retired

    def fail_version(self, doc_id: str, number: int, reason: str) -> DocumentVersionRow:
        """A build of version ``number`` failed with ``reason`` (cut to
        ``FAILURE_REASON_MAX``). A version that is not serving becomes ``failed``, and the
        document too when no version of it is served (its first build). A failed rebuild of
        the serving version marks the document ``failed`` (its stores may be half-written, so
        it is not served until it builds again) and leaves the version row as it is. A
        ``deleting`` document keeps that status.

        Raises:
            DocumentNotFoundError: no such document or version.
            ValueError: an empty reason.
        """
        message = clean_failure(reason)
        with self._write() as conn:
            history = _stored_history(conn, doc_id)
            target = next((v for v in history if v.version == number), None)
            if target is None:
                raise document_not_found(doc_id, number)
            serving = serving_version(history)
            if target.status != VersionStatus.SERVING:
                conn.execute(
                    document_versions.update()
                    .where(
                        document_versions.c.doc_id == doc_id,
                        document_versions.c.version == number,
                    )
                    .values(status=VersionStatus.FAILED, failure_reason=message)
                )
            if serving is None or serving.version == number:
                conn.execute(
                    documents.update()
                    .where(
                        documents.c.doc_id == doc_id,
                        documents.c.status != DocumentStatus.DELETING,  # stays on its way out
                    )
                    .values(
                        status=DocumentStatus.FAILED,
                        failure_reason=message,
                        updated_at=utc_now(),
                    )
                )
            return next(v for v in _history(conn, doc_id) if v.version == number)


def _sha(value: str) -> str:
    if not isinstance(value, str) or not SHA256_PATTERN.match(value):
        raise ValueError(f"sha256 must be 64 lower-case hex digits, got {value!r}")
    return value
