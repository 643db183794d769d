"""The ``change_sets`` and ``document_changes`` tables: what changed in each document version
against its previous issue (issue 27, "What changed"; the comparison is
``kb_shared.compliance.changes.compare``).

One ``change_sets`` row per compared version (``doc_id``, ``version``): the issue it was
compared with (``previous_doc_id``, ``previous_version``: an earlier version of the same
document, or the edition it follows), the summary counts and when it was computed. One
``document_changes`` row per change of that version, numbered from 1, with both sides' text
and pages (pages and changed figures as JSON arrays). ``ChangeCatalog.replace_changes``
rewrites a version's rows in one transaction; the ``changes`` asset calls it each time it
re-compares.

No foreign keys, as ``document_versions``: ``DocumentCatalog.delete`` drops a document's rows
(``delete_changes``: the comparisons of its versions, and those of other documents made
against it) in its own transaction.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from kb_shared.compliance.changes import CHANGE_KINDS, Change, ChangeSet, Side
from kb_shared.stores.catalog.common import (
    CATALOG_METADATA,
    CatalogBase,
    clean_text,
    created_at,
    to_row,
)
from kb_shared.stores.sql import utc_now

#: Longest ``doc_id``, as ``documents.doc_id`` and ``document_versions.doc_id``.
DOC_ID_MAX = 120
#: The summary counts a ``change_sets`` row keeps (``ChangeSet.summary``'s keys).
SUMMARY_COUNTS = (
    "added", "removed", "changed", "moved", "unchanged_sections", "obligations_changed",
    "numbers_changed",
)

change_sets = sa.Table(
    "change_sets",
    CATALOG_METADATA,
    sa.Column("doc_id", sa.String(DOC_ID_MAX), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("previous_doc_id", sa.String(DOC_ID_MAX), nullable=False),
    sa.Column("previous_version", sa.Integer, nullable=False),
    *(sa.Column(name, sa.Integer, nullable=False) for name in SUMMARY_COUNTS),
    created_at("computed_at"),
    sa.PrimaryKeyConstraint("doc_id", "version"),
    sa.CheckConstraint("version >= 1", name="ck_change_sets_version"),
    sa.CheckConstraint("previous_version >= 1", name="ck_change_sets_previous_version"),
    sa.CheckConstraint(
        " AND ".join(f"{name} >= 0" for name in SUMMARY_COUNTS), name="ck_change_sets_counts"
    ),
)

sa.Index("ix_change_sets_previous_doc_id", change_sets.c.previous_doc_id)

document_changes = sa.Table(
    "document_changes",
    CATALOG_METADATA,
    sa.Column("doc_id", sa.String(DOC_ID_MAX), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("number", sa.Integer, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("section_before", sa.Text),
    sa.Column("section_after", sa.Text),
    sa.Column("before_text", sa.Text, nullable=False),
    sa.Column("before_pages", sa.Text, nullable=False),
    sa.Column("after_text", sa.Text, nullable=False),
    sa.Column("after_pages", sa.Text, nullable=False),
    sa.Column("obligation", sa.Boolean, nullable=False),
    sa.Column("numbers", sa.Text, nullable=False),
    sa.PrimaryKeyConstraint("doc_id", "version", "number"),
    sa.CheckConstraint("number >= 1", name="ck_document_changes_number"),
    sa.CheckConstraint(
        "kind IN ({})".format(", ".join(f"'{kind}'" for kind in CHANGE_KINDS)),
        name="ck_document_changes_kind",
    ),
)


@dataclass(frozen=True, slots=True)
class ChangeSetRow:
    """One compared version: ``doc_id`` / ``version`` compared with ``previous_doc_id`` /
    ``previous_version``, its summary counts (``kb_shared.compliance.changes.ChangeSet.summary``) and
    ``computed_at`` (aware UTC)."""

    doc_id: str
    version: int
    previous_doc_id: str
    previous_version: int
    added: int
    removed: int
    changed: int
    moved: int
    unchanged_sections: int
    obligations_changed: int
    numbers_changed: int
    computed_at: dt.datetime

    @property
    def summary(self) -> dict[str, int]:
        """The counts as ``ChangeSet.summary`` gives them."""
        return {name: getattr(self, name) for name in SUMMARY_COUNTS}


@dataclass(frozen=True, slots=True)
class StoredChangeSet(ChangeSetRow):
    """A ``ChangeSetRow`` with its ``changes``, by number."""

    changes: tuple[Change, ...]

    @property
    def change_set(self) -> ChangeSet:
        """The stored comparison as ``compare`` returned it."""
        return ChangeSet(self.changes, self.unchanged_sections)


def _pages(raw: str) -> tuple[int, ...]:
    return tuple(int(page) for page in json.loads(raw))


def _change(row: sa.Row[Any]) -> Change:
    m = row._mapping
    return Change(
        number=m["number"],
        kind=m["kind"],
        section_before=m["section_before"],
        section_after=m["section_after"],
        before=Side(m["before_text"], _pages(m["before_pages"])),
        after=Side(m["after_text"], _pages(m["after_pages"])),
        obligation=bool(m["obligation"]),
        numbers=tuple((before, after) for before, after in json.loads(m["numbers"])),
    )


def _check_version(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{field} must be a whole number of at least 1, got {value!r}")
    return value


def _change_values(doc_id: str, version: int, change: Change) -> dict[str, Any]:
    """The ``document_changes`` row of ``change``.

    Raises:
        ValueError: an unknown kind, a number below 1, a page below 1.
    """
    if change.kind not in CHANGE_KINDS:
        raise ValueError(
            f"change {change.number}: kind must be one of {CHANGE_KINDS}, got {change.kind!r}"
        )
    _check_version(change.number, "a change's number")
    for side in (change.before, change.after):
        for page in side.pages:
            _check_version(page, f"change {change.number}: a page")
    return {
        "doc_id": doc_id,
        "version": version,
        "number": change.number,
        "kind": change.kind,
        "section_before": change.section_before,
        "section_after": change.section_after,
        "before_text": change.before.text,
        "before_pages": json.dumps(list(change.before.pages)),
        "after_text": change.after.text,
        "after_pages": json.dumps(list(change.after.pages)),
        "obligation": bool(change.obligation),
        "numbers": json.dumps([list(pair) for pair in change.numbers], ensure_ascii=False),
    }


def _of_set(doc_id: str, version: int) -> sa.ColumnElement[bool]:
    return sa.and_(change_sets.c.doc_id == doc_id, change_sets.c.version == version)


def _of_changes(doc_id: str, version: int) -> sa.ColumnElement[bool]:
    return sa.and_(document_changes.c.doc_id == doc_id, document_changes.c.version == version)


def delete_changes(conn: Connection, doc_id: str) -> None:
    """Inside ``conn``'s transaction, delete the comparisons of ``doc_id``'s versions and those
    of other documents' versions made against it (``DocumentCatalog.delete``)."""
    against = [
        (row.doc_id, row.version)
        for row in conn.execute(
            sa.select(change_sets.c.doc_id, change_sets.c.version).where(
                change_sets.c.previous_doc_id == doc_id
            )
        )
    ]
    conn.execute(document_changes.delete().where(document_changes.c.doc_id == doc_id))
    conn.execute(change_sets.delete().where(change_sets.c.doc_id == doc_id))
    for other, version in against:
        conn.execute(document_changes.delete().where(_of_changes(other, version)))
        conn.execute(change_sets.delete().where(_of_set(other, version)))


class ChangeReads(CatalogBase):
    """The reads of the stored comparisons: what a read-only caller (the MCP server) may use."""

    def change_set(self, doc_id: str, version: int) -> StoredChangeSet | None:
        """The comparison of version ``version`` of ``doc_id`` with its previous issue, its
        changes by number; ``None`` when none is stored."""
        with self._read() as conn:
            head = conn.execute(sa.select(change_sets).where(_of_set(doc_id, version))).first()
            if head is None:
                return None
            rows = conn.execute(
                sa.select(document_changes)
                .where(_of_changes(doc_id, version))
                .order_by(document_changes.c.number)
            ).all()
        return to_row(StoredChangeSet, head, changes=tuple(_change(r) for r in rows))

    def change_sets(self, doc_id: str) -> list[ChangeSetRow]:
        """The compared versions of ``doc_id``, oldest version first (``[]`` when none)."""
        with self._read() as conn:
            return [
                to_row(ChangeSetRow, r)
                for r in conn.execute(
                    sa.select(change_sets)
                    .where(change_sets.c.doc_id == doc_id)
                    .order_by(change_sets.c.version)
                )
            ]


class ChangeCatalog(ChangeReads):
    """The comparisons' writes."""

    def clear_changes(self, doc_id: str, version: int) -> bool:
        """Delete the comparison of ``doc_id`` version ``version`` (it has no previous issue
        now, or that issue's text is gone); ``True`` when there was one."""
        with self._write() as conn:
            conn.execute(document_changes.delete().where(_of_changes(doc_id, version)))
            result = conn.execute(change_sets.delete().where(_of_set(doc_id, version)))
        return result.rowcount > 0

    def replace_changes(
        self,
        doc_id: str,
        version: int,
        previous_doc_id: str,
        previous_version: int,
        change_set: ChangeSet,
    ) -> ChangeSetRow:
        """Store ``change_set`` as the comparison of ``doc_id`` version ``version`` with
        ``previous_doc_id`` version ``previous_version``, replacing the version's rows: delete
        then insert in one transaction, so a failure leaves the old rows.

        Returns:
            the new ``change_sets`` row (``computed_at``: now).

        Raises:
            ValueError: an empty or over-long doc id, a version below 1, a version compared
                with itself, changes not numbered 1, 2, … in order, an unknown kind or a page
                below 1; nothing is written.
        """
        doc = clean_text(doc_id, "doc_id", DOC_ID_MAX)
        previous = clean_text(previous_doc_id, "previous_doc_id", DOC_ID_MAX)
        _check_version(version, "version")
        _check_version(previous_version, "previous_version")
        if (doc, version) == (previous, previous_version):
            raise ValueError(f"version {version} of {doc!r} cannot be compared with itself")
        numbers = [c.number for c in change_set.changes]
        if numbers != list(range(1, len(numbers) + 1)):
            raise ValueError(f"changes must be numbered 1, 2, … in order, got {numbers[:10]}")
        assert doc is not None and previous is not None  # required: clean_text raised if empty
        rows = [_change_values(doc, version, c) for c in change_set.changes]
        head = {
            "doc_id": doc,
            "version": version,
            "previous_doc_id": previous,
            "previous_version": previous_version,
            **change_set.summary,
            "computed_at": utc_now(),
        }
        with self._write() as conn:
            conn.execute(document_changes.delete().where(_of_changes(doc, version)))
            conn.execute(change_sets.delete().where(_of_set(doc, version)))
            conn.execute(change_sets.insert().values(**head))
            if rows:
                conn.execute(document_changes.insert(), rows)
        return to_row(ChangeSetRow, head)
