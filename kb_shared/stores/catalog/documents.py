"""The ``documents`` table: one row per PDF, and its lifecycle (pending → ready | failed;
any → deleting → row removed).

The constraints keep the data true, not the Python around them: ``doc_id`` primary key,
``normalized_name`` and ``sha256`` unique. The intake writes a ``pending`` row first
(``add_pending``, with its version 1 in ``document_versions``: ``catalog/versions.py``, whose
unique ``sha256`` also covers the files of earlier versions) so these indexes close the race
between two uploads of the same document;
the pipeline's ``record`` asset then marks it ``ready`` (or ``failed``). A ``failed`` row
always has a reason and a ``ready`` row always has its page and chunk counts (CHECKs).
``kb delete`` first marks the row ``deleting`` (``mark_deleting``, one committed write: from
then on nothing serves or builds it), then removes the stored data and the row last, so a
delete killed half way is finished by running it again (issue 16, "Crash and outage recovery").
Identity rules: DESIGN.md "Identity", implemented in ``kb_shared.identity``.

Editions (issue 27, "What changed"): ``edition_of`` names the previous edition of a document
with another name (a Notice to Market of the next financial year), so documents form series,
one edition after another (at most one next edition each: unique index). The link is checked
where it is written (``check_edition_link``); deleting an edition unlinks its next edition,
which is logged. The reads of a series are in ``catalog/editions.py``.
"""

from __future__ import annotations

from enum import StrEnum

import datetime as dt
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from kb_shared import identity
from kb_shared.errors import (
    DuplicateDocumentError,
    EditionLinkError,
    IdentityError,
    KbError,
    StoreError,
)
from kb_shared.stores.catalog.changes import delete_changes
from kb_shared.stores.catalog.common import (
    CATALOG_METADATA,
    CatalogBase,
    clean_failure,
    clean_text,
    created_at,
    document_not_found,
    to_row,
)
from kb_shared.stores.sql import error_detail, utc_now

log = logging.getLogger(__name__)

#: Longest document name (as uploaded, trimmed), in characters.
NAME_MAX = 1024

#: Longest category (``normalize_category``), in characters, and most folder levels in one.
CATEGORY_MAX = 200
CATEGORY_DEPTH = 8

class DocumentStatus(StrEnum):
    """A document's lifecycle (``DocumentRow.status``): ``pending`` from intake until its first
    build ends, then ``ready`` or ``failed``; ``deleting`` from the start of ``kb delete`` until
    its row is removed. Only ``ready`` documents are served; ``deleting`` ones are never built."""

    PENDING = "pending"
    READY = "ready"
    FAILED = "failed"
    DELETING = "deleting"


#: The values of the ``status`` column's CHECK constraint.
DOCUMENT_STATUSES = tuple(status.value for status in DocumentStatus)

#: The ``status`` CHECK (``ck_documents_status``); ``sql/006_document_deleting.sql`` widens a
#: Postgres table made before ``deleting``, ``ensure_deleting_status`` any older table.
STATUS_CHECK = "status IN (" + ", ".join(f"'{value}'" for value in DOCUMENT_STATUSES) + ")"

#: The identities a new document can collide on, in the order they are reported.
DUPLICATE_FIELDS = ("name", "sha256", "doc_id")

#: A content hash as stored: 64 lower-case hex digits.
SHA256_PATTERN = re.compile(r"^[0-9a-f]{64}$")

_COUNT_COLUMNS = ("pages", "chunk_count", "figure_count", "entity_count", "relationship_count")

documents = sa.Table(
    "documents",
    CATALOG_METADATA,
    sa.Column("doc_id", sa.String(120), primary_key=True),
    sa.Column("name", sa.String(NAME_MAX), nullable=False),
    sa.Column("normalized_name", sa.String(NAME_MAX), nullable=False),
    sa.Column("sha256", sa.String(64), nullable=False),
    sa.Column("status", sa.String(16), nullable=False, server_default=DocumentStatus.PENDING.value),
    sa.Column("failure_reason", sa.Text),
    sa.Column("title", sa.Text),
    sa.Column("version", sa.Text),
    *(sa.Column(name, sa.Integer) for name in _COUNT_COLUMNS),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    sa.Column("blob_key", sa.Text, nullable=False),
    sa.Column("markdown_key", sa.Text),
    sa.Column("converter", sa.Text),
    sa.Column("embedding_model", sa.Text),
    created_at(),
    created_at("updated_at"),
    # Last, so a database that gained it through sql/004 has the same column order.
    sa.Column("category", sa.String(CATEGORY_MAX)),
    # Last, after category, as sql/010_document_editions.sql adds it (module docstring).
    sa.Column("edition_of", sa.String(120)),
    sa.UniqueConstraint("normalized_name", name="uq_documents_normalized_name"),
    sa.UniqueConstraint("sha256", name="uq_documents_sha256"),
    sa.CheckConstraint(STATUS_CHECK, name="ck_documents_status"),
    sa.CheckConstraint(
        "(status = 'failed') = (failure_reason IS NOT NULL)", name="ck_documents_failure_reason"
    ),
    sa.CheckConstraint(
        "status <> 'ready' OR (pages IS NOT NULL AND chunk_count IS NOT NULL)",
        name="ck_documents_ready_counts",
    ),
    sa.CheckConstraint("length(sha256) = 64", name="ck_documents_sha256"),
    sa.CheckConstraint("size_bytes >= 0", name="ck_documents_size_bytes"),
    *(sa.CheckConstraint(f"{name} >= 0", name=f"ck_documents_{name}") for name in _COUNT_COLUMNS),
    sa.CheckConstraint("edition_of <> doc_id", name="ck_documents_edition_of"),
    sa.Index("ux_documents_edition_of", "edition_of", unique=True),
)


@dataclass(frozen=True, slots=True)
class DocumentRow:
    """One document. ``status`` is a ``DocumentStatus`` value; counts are ``None``
    until the pipeline records them; ``size_bytes`` is the PDF size in bytes; ``blob_key`` and
    ``markdown_key`` are blob-store keys; timestamps are aware UTC; ``category`` is a
    ``normalize_category`` path (``aemo/procedures``) or ``None``; ``edition_of`` the
    ``doc_id`` of its previous edition (module docstring) or ``None``."""

    doc_id: str
    name: str
    normalized_name: str
    sha256: str
    status: str
    failure_reason: str | None
    title: str | None
    version: str | None
    pages: int | None
    chunk_count: int | None
    figure_count: int | None
    entity_count: int | None
    relationship_count: int | None
    size_bytes: int
    blob_key: str
    markdown_key: str | None
    converter: str | None
    embedding_model: str | None
    created_at: dt.datetime
    updated_at: dt.datetime
    category: str | None = None
    edition_of: str | None = None


def normalize_category(value: str | None) -> str | None:
    """A category as stored: folder names joined by ``/`` (``"AEMO\\Procedures/"`` →
    ``"AEMO/Procedures"``), each trimmed, empty segments dropped; ``None`` for ``None`` or a
    value with no segment. Case is kept; comparisons ignore it (``in_category``).

    Raises:
        ValueError: not a string, a ``.`` or ``..`` segment, a control character, a hidden
            one (``identity.hidden_character``), more than
            ``CATEGORY_DEPTH`` segments or over ``CATEGORY_MAX`` characters (issue 12,
            "Categories from folders").
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"a category must be text, got {type(value).__name__}")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValueError("a category cannot contain control characters")
    hidden = identity.hidden_character(value)
    if hidden is not None:
        raise ValueError(f"category {value!r} holds {hidden}; give folder names without it")
    segments = [part.strip() for part in value.replace("\\", "/").split("/")]
    segments = [part for part in segments if part]
    if any(part in {".", ".."} for part in segments):
        raise ValueError(
            f"category {value!r} has a '.' or '..' segment; give folder names like "
            "'aemo/procedures'"
        )
    if len(segments) > CATEGORY_DEPTH:
        raise ValueError(
            f"category {value!r} has {len(segments)} levels; the limit is {CATEGORY_DEPTH}"
        )
    clean = "/".join(segments)
    if len(clean) > CATEGORY_MAX:
        raise ValueError(f"a category is at most {CATEGORY_MAX} characters, got {len(clean)}")
    return clean or None


def in_category(category: str | None, prefix: str | None) -> bool:
    """Whether a document's ``category`` lies under ``prefix`` (both ``normalize_category``
    paths): whole segments, case-insensitive, so ``aemo`` matches ``aemo`` and
    ``AEMO/procedures`` but not ``aemo2``. A ``None`` prefix matches everything."""
    if prefix is None:
        return True
    if category is None:
        return False
    have, want = category.casefold(), prefix.casefold()
    return have == want or have.startswith(want + "/")


def duplicate_message(field: str, name: str, existing: DocumentRow) -> str:
    """The one wording of "this upload duplicates a catalogued document".

    Args:
        field: the identity that collided: ``"name"`` (same normalised name), ``"sha256"``
            (same content under another name) or ``"doc_id"`` (another name that slugs to
            the same ``doc_id``).
        name: the refused name, as uploaded (trimmed).
        existing: the catalogued document it collides with.

    Raises:
        ValueError: an unknown ``field``.
    """
    if existing.status == DocumentStatus.DELETING and field in DUPLICATE_FIELDS:
        return f'"{name}" cannot be added now: ' + deleting_message(existing, "add it again")
    what = f'"{existing.name}" (doc_id {existing.doc_id}, status {existing.status})'
    if field == "name":
        return (
            f'"{name}" is already in the catalog as {what}; '
            "delete that document first to replace it"
        )
    if field == "sha256":
        return (
            f'"{name}" has the same content (sha256 {existing.sha256[:12]}…) as the existing '
            f"document {what}; it is not added twice"
        )
    if field == "doc_id":
        return (
            f'"{name}" maps to doc_id "{existing.doc_id}", which the existing document '
            f"{what} already uses; rename the file so its letters and digits differ"
        )
    raise ValueError(f"a duplicate field is one of {DUPLICATE_FIELDS}, not {field!r}")


def deleting_message(row: DocumentRow, then: str = "") -> str:
    """The one wording of "``row`` is ``deleting``": what happened and the command that
    finishes it, then ``then`` (what to do next, e.g. ``"add it again"``) when given."""
    text = (
        f'"{row.name}" (doc_id {row.doc_id}) is being deleted: a `kb delete` of it has not '
        f"finished; run `kb delete {row.doc_id}` to finish it (`kb build` also finishes it)"
    )
    return f"{text}, then {then}" if then else text


def _count(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{field} must be an integer, got {value!r}")
    if value < 0:
        raise ValueError(f"{field} cannot be negative, got {value}")
    return value


_DOCUMENT_FIELDS: dict[str, str] = {
    "title": "text",
    "version": "text",
    "pages": "count",
    "chunk_count": "count",
    "figure_count": "count",
    "entity_count": "count",
    "relationship_count": "count",
    "size_bytes": "count",
    "blob_key": "key",
    "markdown_key": "text",
    "converter": "text",
    "embedding_model": "text",
}


def document_fields(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` checked as the settable fields of a document (``mark_ready``'s list).

    Raises:
        ValueError: an unknown field (identity fields never change) or a bad value.
    """
    unknown = sorted(set(values) - set(_DOCUMENT_FIELDS))
    if unknown:
        raise ValueError(
            f"cannot set {', '.join(unknown)} on a document; settable fields: "
            f"{', '.join(sorted(_DOCUMENT_FIELDS))} (identity fields never change)"
        )
    clean: dict[str, Any] = {}
    for name, value in values.items():
        kind = _DOCUMENT_FIELDS[name]
        if kind == "count":
            if value is None and name == "size_bytes":
                raise ValueError("size_bytes cannot be None")
            clean[name] = _count(value, name)
        elif kind == "key":
            clean[name] = clean_text(value, name, 4096)
        else:
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{name} must be a string or None, got {value!r}")
            clean[name] = value
    return clean


def _mirror_first_version(
    conn: Connection, doc_id: str, status: str, reason: str | None, **label: str | None
) -> None:
    """Keep the version row of a document that has only version 1 in step with the document
    (``mark_ready``: ``serving``, with the version ``label`` when given; ``mark_failed``:
    ``failed`` unless it is serving). A document with later versions changes them through
    ``VersionCatalog`` only."""
    versions = CATALOG_METADATA.tables["document_versions"]
    later = sa.select(versions.c.version).where(
        versions.c.doc_id == doc_id, versions.c.version > 1
    )
    first = (versions.c.doc_id == doc_id) & (versions.c.version == 1) & ~sa.exists(later)
    if label:
        conn.execute(versions.update().where(first).values(**label))
    keep = ("serving",) if status == "failed" else ()
    conn.execute(
        versions.update()
        .where(first, versions.c.status.not_in([status, *keep]))
        .values(status=status, failure_reason=reason)
    )


class DocumentReads(CatalogBase):
    """The reads of the documents table: what a read-only caller (the MCP server) may use."""

    def find_by_normalized_name(self, name: str) -> DocumentRow | None:
        """The document whose normalised name equals ``normalize_name(name)``, or ``None``."""
        return self._find(documents.c.normalized_name == identity.normalize_name(name))

    def find_by_sha256(self, sha256: str) -> DocumentRow | None:
        """The document with this content hash (lower-case hex), or ``None``."""
        return self._find(documents.c.sha256 == sha256.lower())

    def find_by_doc_id(self, doc_id: str) -> DocumentRow | None:
        """The document with this ``doc_id``, or ``None``."""
        return self._find(documents.c.doc_id == doc_id)

    def resolve(self, ref: str) -> DocumentRow | None:
        """The document a person or model means by ``ref``, or ``None``: a ``doc_id`` (or the
        ``version_key`` of one of its versions), else a file name compared by
        ``normalize_name`` (case and surrounding spaces forgiven), else the same with a
        missing ``.pdf`` extension. One read; the CLI and the MCP tools both
        resolve through here. An empty ``ref``, one with no letters or digits, or one holding
        a NUL (no name does: ``identity.check_file_name``; Postgres refuses it in a query
        parameter) is ``None``.
        """
        ref = ref.strip()
        if not ref or "\x00" in ref:
            return None
        try:
            keys = [identity.normalize_name(ref)]
            ids = [ref, identity.doc_id(ref), identity.doc_id(ref + ".pdf")]
        except IdentityError:
            return None
        ids.append(identity.split_version_key(ref)[0])  # a version's key names its document
        keys.append(identity.normalize_name(ref + ".pdf"))
        condition = sa.or_(
            documents.c.doc_id.in_(list(dict.fromkeys(ids))),
            documents.c.normalized_name.in_(list(dict.fromkeys(keys))),
        )
        with self._read() as conn:
            rows = [
                to_row(DocumentRow, r) for r in conn.execute(sa.select(documents).where(condition))
            ]
        # Prefer the most literal match: exact doc_id, then the name, then the guesses.
        for matches in (
            lambda r: r.doc_id == ref,
            lambda r: r.normalized_name == keys[0],
            lambda r: r.doc_id in ids or r.normalized_name in keys,
        ):
            for row in rows:
                if matches(row):
                    return row
        return None

    def get(self, doc_id: str) -> DocumentRow:
        """The document with this ``doc_id``.

        Raises:
            DocumentNotFoundError: no such document.
        """
        row = self.find_by_doc_id(doc_id)
        if row is None:
            raise document_not_found(doc_id)
        return row

    def _find(self, condition: sa.ColumnElement[bool]) -> DocumentRow | None:
        with self._read() as conn:
            row = conn.execute(sa.select(documents).where(condition)).first()
        return None if row is None else to_row(DocumentRow, row)

    def list_documents(
        self, status: str | None = None, *, category: str | None = None
    ) -> list[DocumentRow]:
        """Every document (or those with ``status``, and under the ``category`` prefix: see
        ``in_category``), ordered by normalised name.

        Raises:
            ValueError: an unknown status, or a category ``normalize_category`` refuses.
        """
        prefix = normalize_category(category)
        order = (documents.c.normalized_name,)
        rows = self._list_rows(DocumentRow, documents, order, status, DOCUMENT_STATUSES)
        return [row for row in rows if in_category(row.category, prefix)]


class DocumentCatalog(DocumentReads):
    """The documents of the catalog: the reads plus intake and the lifecycle writes (see the
    module docstring for the rules)."""

    def add_pending(
        self,
        name: str,
        doc_id: str,
        sha256: str,
        size_bytes: int,
        blob_key: str,
        category: str | None = None,
        edition_of: str | None = None,
    ) -> DocumentRow:
        """Write the intake row of a new document with status ``pending``.

        Args:
            name: the file name as uploaded (stored trimmed).
            doc_id: ``identity.doc_id(name)`` (checked).
            sha256: lower-case hex SHA-256 of the PDF bytes.
            size_bytes: PDF size in bytes.
            blob_key: blob-store key of the PDF.
            category: its category (``normalize_category``), or ``None``.
            edition_of: the ``doc_id`` of its previous edition (module docstring), or ``None``.

        Raises:
            DuplicateDocumentError: the normalised name, the content hash or the ``doc_id`` is
                already in the catalog (the unique indexes decide, so two racing intakes
                cannot both win); the message (``duplicate_message``) names the existing one.
            EditionLinkError: ``check_edition_link`` refuses ``edition_of``; nothing written.
            ValueError: an empty or over-long name, a ``doc_id`` that is not
                ``identity.doc_id(name)``, a malformed hash, a negative size, an empty key or
                a bad category.
        """
        clean = clean_text(name, "name", NAME_MAX)
        assert clean is not None
        normal = identity.normalize_name(clean)
        expected = identity.doc_id(clean)
        if doc_id != expected:
            raise ValueError(f"doc_id {doc_id!r} does not match the name {clean!r} ({expected!r})")
        if not isinstance(sha256, str) or not SHA256_PATTERN.match(sha256):
            raise ValueError(f"sha256 must be 64 lower-case hex digits, got {sha256!r}")
        size = _count(size_bytes, "size_bytes")
        if size is None:
            raise ValueError("size_bytes is required")
        key = clean_text(blob_key, "blob_key", 4096)
        group = normalize_category(category)
        now = utc_now()
        values: dict[str, Any] = {
            "doc_id": doc_id,
            "name": clean,
            "normalized_name": normal,
            "sha256": sha256,
            "status": DocumentStatus.PENDING,
            "size_bytes": size,
            "blob_key": key,
            "category": group,
            "edition_of": edition_of,
            "created_at": now,
            "updated_at": now,
        }
        try:
            with self._write() as conn:
                if edition_of is not None:
                    check_edition_link(conn, doc_id, edition_of)
                row = conn.execute(
                    documents.insert().values(**values).returning(*documents.c)
                ).one()
                # Version 1 in the same transaction (catalog/versions.py; the table is looked
                # up by name because that module builds on this one).
                conn.execute(
                    CATALOG_METADATA.tables["document_versions"].insert().values(
                        doc_id=doc_id, version=1, name=clean, sha256=sha256, size_bytes=size,
                        blob_key=key, status="pending", added_at=now,
                    )
                )
        except IntegrityError as exc:
            raise self._duplicate(clean, normal, doc_id, sha256, exc) from exc
        return to_row(DocumentRow, row)

    def _duplicate(
        self, name: str, normal: str, doc_id: str, sha256: str, exc: IntegrityError
    ) -> KbError:
        checks = {
            "name": documents.c.normalized_name == normal,
            "sha256": documents.c.sha256 == sha256,
            "doc_id": documents.c.doc_id == doc_id,
        }
        versions = CATALOG_METADATA.tables["document_versions"]
        earlier = (
            sa.select(versions.c.doc_id).where(versions.c.sha256 == sha256).scalar_subquery()
        )
        checks["sha256"] = sa.or_(checks["sha256"], documents.c.doc_id == earlier)
        with self._read() as conn:
            for field in DUPLICATE_FIELDS:
                found = conn.execute(sa.select(documents).where(checks[field])).first()
                if found is None:
                    continue
                existing: DocumentRow = to_row(DocumentRow, found)
                return DuplicateDocumentError(
                    duplicate_message(field, name, existing),
                    name=name,
                    field=field,
                    existing=existing,
                )
        return StoreError(f'the catalog refused "{name}": {error_detail(exc, self._engine)}')

    def mark_ready(self, doc_id: str, **fields: Any) -> DocumentRow:
        """Set status ``ready`` (clearing any failure reason) and the given fields.

        A ready document must have ``pages`` and ``chunk_count`` (given here or earlier).
        Settable fields: title, version, pages, chunk_count, figure_count, entity_count,
        relationship_count, size_bytes, blob_key, markdown_key, converter, embedding_model.

        Raises:
            DocumentNotFoundError: no such document.
            ValueError: an unknown field, a bad value, or missing pages/chunk_count.
        """
        values = document_fields(fields)
        with self._write() as conn:
            current = conn.execute(
                sa.select(documents.c.pages, documents.c.chunk_count).where(
                    documents.c.doc_id == doc_id
                )
            ).first()
            if current is None:
                raise document_not_found(doc_id)
            merged = {**current._mapping, **values}
            missing = [k for k in ("pages", "chunk_count") if merged.get(k) is None]
            if missing:
                raise ValueError(f"a ready document needs {' and '.join(missing)}")
            label = {"label": values["version"]} if "version" in values else {}
            _mirror_first_version(conn, doc_id, "serving", None, **label)
            return self._set(conn, doc_id, status=DocumentStatus.READY, failure_reason=None, **values)

    def mark_failed(self, doc_id: str, reason: str) -> DocumentRow:
        """Set status ``failed`` with a reason (cut to ``FAILURE_REASON_MAX`` characters).

        Raises:
            DocumentNotFoundError: no such document.
            ValueError: an empty reason.
        """
        message = clean_failure(reason)
        with self._write() as conn:
            _mirror_first_version(conn, doc_id, "failed", message)
            return self._set(conn, doc_id, status=DocumentStatus.FAILED, failure_reason=message)

    def update(self, doc_id: str, **fields: Any) -> DocumentRow:
        """Set fields without changing the status (same fields as ``mark_ready``).

        Raises:
            DocumentNotFoundError: no such document.
            ValueError: an unknown field or a bad value.
        """
        values = document_fields(fields)
        with self._write() as conn:
            return self._set(conn, doc_id, **values)

    def set_category(self, doc_id: str, category: str | None) -> DocumentRow:
        """Move a document to ``category`` (``None``: no category). Only this row changes:
        chunk payloads do not carry the category, so searches resolve it to doc_ids from the
        catalog and nothing is rebuilt.

        Raises:
            DocumentNotFoundError: no such document.
            ValueError: a category ``normalize_category`` refuses.
        """
        group = normalize_category(category)
        with self._write() as conn:
            return self._set(conn, doc_id, category=group)

    def _set(self, conn: Connection, doc_id: str, **values: Any) -> DocumentRow:
        row = conn.execute(
            documents.update()
            .where(documents.c.doc_id == doc_id)
            .values(updated_at=utc_now(), **values)
            .returning(*documents.c)
        ).first()
        if row is None:
            raise document_not_found(doc_id)
        return to_row(DocumentRow, row)

    def mark_deleting(self, doc_id: str) -> DocumentRow:
        """Set status ``deleting`` (clearing any failure reason), in one committed write: the
        first step of ``kb delete`` (module docstring). A table made before this status first
        gets the wider CHECK in the same transaction (``ensure_deleting_status``).

        Raises:
            DocumentNotFoundError: no such document.
        """
        with self._write() as conn:
            ensure_deleting_status(conn)
            return self._set(
                conn, doc_id, status=DocumentStatus.DELETING, failure_reason=None
            )

    def delete(self, doc_id: str) -> bool:
        """Delete the catalog row of a document, its version history (``catalog/versions.py``),
        its obligations (``catalog/obligations.py``) and its comparisons, and other
        documents' comparisons made against it (``catalog/changes.py``). Its next edition, if
        any, is unlinked in the same transaction (``edition_of`` set to ``None``: it starts a
        series of its own) and a warning names it. Returns ``False`` when there was none."""
        versions = CATALOG_METADATA.tables["document_versions"]
        registers = CATALOG_METADATA.tables["obligations"]  # catalog/obligations.py
        with self._write() as conn:
            conn.execute(registers.delete().where(registers.c.doc_id == doc_id))
            delete_changes(conn, doc_id)
            conn.execute(versions.delete().where(versions.c.doc_id == doc_id))
            following = _unlink_next_edition(conn, doc_id)
            result = conn.execute(documents.delete().where(documents.c.doc_id == doc_id))
        for doc in following:
            log.warning(
                "%s was the next edition of %s, which is deleted: it is unlinked and has no "
                "previous edition now", doc, doc_id,
            )
        return result.rowcount > 0


def ensure_deleting_status(conn: Connection) -> bool:
    """Give a ``documents`` table made before the ``deleting`` status (its CHECK allows only
    pending, ready and failed) the current ``STATUS_CHECK``, inside ``conn``'s transaction;
    ``True`` when it changed. Postgres alters the constraint (as ``sql/006_document_deleting.sql``
    does); SQLite cannot alter a CHECK, so the table is rebuilt with every row kept (the
    procedure of https://www.sqlite.org/lang_altertable.html#otheralter: no other table or
    view refers to ``documents``). A missing table is left alone.
    """
    if conn.dialect.name == "postgresql":
        found = conn.execute(
            sa.text(
                "SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c "
                "JOIN pg_class t ON t.oid = c.conrelid "
                "WHERE t.oid = to_regclass('documents') AND c.conname = 'ck_documents_status'"
            )
        ).scalar()
        if found is not None and _allows_every_status(found):
            return False
        conn.execute(
            sa.text(
                "ALTER TABLE documents DROP CONSTRAINT IF EXISTS ck_documents_status, "
                f"ADD CONSTRAINT ck_documents_status CHECK ({STATUS_CHECK})"
            )
        )
        return True
    ddl = conn.execute(
        sa.text("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'documents'")
    ).scalar()
    if ddl is None or _allows_every_status(ddl):
        return False
    present = {column["name"] for column in sa.inspect(conn).get_columns("documents")}
    kept = ", ".join(column.name for column in documents.columns if column.name in present)
    staging = documents.to_metadata(sa.MetaData(), name="documents_rebuild")
    staging.indexes.clear()
    staging.create(conn)
    conn.execute(sa.text(f"INSERT INTO documents_rebuild ({kept}) SELECT {kept} FROM documents"))
    conn.execute(sa.text("DROP TABLE documents"))
    conn.execute(sa.text("ALTER TABLE documents_rebuild RENAME TO documents"))
    for index in documents.indexes:
        index.create(conn)
    return True


def _allows_every_status(definition: str) -> bool:
    return all(f"'{value}'" in definition for value in DOCUMENT_STATUSES)


# --- Editions (module docstring) -------------------------------------------------------------


def _unlink_next_edition(conn: Connection, doc_id: str) -> list[str]:
    """Set ``edition_of`` to ``None`` on the next edition of ``doc_id`` (before ``doc_id`` is
    deleted); returns the ``doc_id``s unlinked."""
    following = list(
        conn.execute(
            sa.select(documents.c.doc_id).where(documents.c.edition_of == doc_id)
        ).scalars()
    )
    if following:
        conn.execute(
            documents.update()
            .where(documents.c.edition_of == doc_id)
            .values(edition_of=None, updated_at=utc_now())
        )
    return following


def check_edition_link(conn: Connection, doc_id: str, previous: str) -> None:
    """Check, in ``conn``'s write transaction, that ``doc_id`` may name ``previous`` as its
    previous edition (module docstring). ``doc_id`` need not be written yet (intake).

    Raises:
        EditionLinkError: ``previous`` is ``doc_id`` itself, not in the catalog, being deleted,
            already followed by another next edition, or a later edition of ``doc_id`` (a
            loop); the message says what to link instead.
    """
    if previous == doc_id:
        raise EditionLinkError(
            f"{doc_id!r} cannot be an edition of itself; give the earlier document (another "
            "file name) as its previous edition"
        )
    found = conn.execute(sa.select(documents).where(documents.c.doc_id == previous)).first()
    if found is None:
        raise EditionLinkError(
            f"no document {previous!r} in the catalog to be the previous edition of "
            f"{doc_id!r}; add the earlier edition first (`kb add`), or give its file name or "
            "doc_id as `kb status` shows it"
        )
    row: DocumentRow = to_row(DocumentRow, found)
    if row.status == DocumentStatus.DELETING:
        raise EditionLinkError(
            f"{row.name!r} cannot be a previous edition now: "
            + deleting_message(row, "link to another edition")
        )
    links = dict(conn.execute(sa.select(documents.c.doc_id, documents.c.edition_of)).all())
    taken = sorted(doc for doc, before in links.items() if before == previous and doc != doc_id)
    if taken:
        raise EditionLinkError(
            f"{row.name!r} already has a next edition ({taken[0]!r}); a series is one edition "
            f"after another, so link {doc_id!r} to the newest edition of that series instead "
            f"({taken[0]!r} or a later one)"
        )
    before, seen = links.get(previous), {previous}
    while before is not None and before not in seen:
        if before == doc_id:
            raise EditionLinkError(
                f"linking {doc_id!r} as an edition of {previous!r} would make a loop: "
                f"{previous!r} is already a later edition of {doc_id!r}; link the newer "
                "document to the older one"
            )
        seen.add(before)
        before = links.get(before)
