"""Editions and the previous issue (issue 27, "What changed"): documents linked as editions of
one series, and which issue a document's version is compared with.

A *version* is a file with the document's own name (``catalog/versions.py``); an *edition* is
a document with another name whose ``edition_of`` column names the previous edition
(``catalog/documents.py``: the column, ``check_edition_link`` and the unlink on delete). A
series is one edition after another; its first edition's ``doc_id`` names it. Both a version
and an edition are "the previous issue" a comparison starts from (``previous_issue``).
"""

from __future__ import annotations

from collections.abc import Mapping

import sqlalchemy as sa

from kb_shared.errors import DocumentNotFoundError, EditionLinkError
from kb_shared.stores.catalog.common import document_not_found, to_row
from kb_shared.stores.catalog.documents import (
    DocumentReads,
    DocumentRow,
    DocumentStatus,
    check_edition_link,
    documents,
)
from kb_shared.stores.catalog.versions import VersionReads, VersionStatus, serving_version
from kb_shared.stores.sql import utc_now

#: The version statuses of a version that was served at some time: the one before another.
SERVED_STATUSES = (VersionStatus.SERVING, VersionStatus.SUPERSEDED)


def series_ids(links: Mapping[str, str | None], doc_id: str) -> list[str]:
    """The ``doc_id``s of ``doc_id``'s series, oldest edition first: back along
    ``edition_of`` to the first edition, then forward through each next edition.

    Args:
        links: ``edition_of`` by ``doc_id`` for every document (``None``: no previous
            edition); a previous edition missing from it ends the series there.
        doc_id: any edition of the series.

    Returns:
        ``[doc_id]`` for a document in no series. A loop or a fork (which
        ``check_edition_link`` refuses to write) repeats no document: each is listed once, and
        of two next editions the first ``doc_id`` is followed.
    """
    first, seen = doc_id, {doc_id}
    while (before := links.get(first)) is not None and before in links and before not in seen:
        first = before
        seen.add(first)
    following: dict[str, str] = {}
    for doc, before in sorted(links.items()):
        if before is not None:
            following.setdefault(before, doc)
    chain = [first]
    while (after := following.get(chain[-1])) is not None and after not in chain:
        chain.append(after)
    return chain


class EditionReads(DocumentReads, VersionReads):
    """The reads of series and previous issues: what a read-only caller may use."""

    def previous_edition(self, ref: str) -> DocumentRow:
        """The document ``ref`` (a file name or doc_id: ``resolve``) names as the previous
        edition of a new document, before that document is written (intake).

        Raises:
            EditionLinkError: no such document, or it is being deleted.
        """
        row = self.resolve(ref)
        if row is None or row.status == DocumentStatus.DELETING:
            raise EditionLinkError(
                f"no document {ref!r} in the catalog to be the previous edition; add the "
                "earlier edition first, or give its file name or doc_id as `kb status` shows it"
            )
        return row

    def series(self, doc_id: str) -> list[DocumentRow]:
        """Every edition of ``doc_id``'s series, oldest first (``series_ids``; ``deleting``
        ones included); ``[row]`` for a document in no series.

        Raises:
            DocumentNotFoundError: no such document.
        """
        with self._read() as conn:
            links = dict(conn.execute(sa.select(documents.c.doc_id, documents.c.edition_of)).all())
            if doc_id not in links:
                raise document_not_found(doc_id)
            chain = series_ids(links, doc_id)
            found = conn.execute(sa.select(documents).where(documents.c.doc_id.in_(chain)))
            rows = {r.doc_id: r for r in (to_row(DocumentRow, f) for f in found)}
        return [rows[doc] for doc in chain if doc in rows]

    def previous_issue(self, doc_id: str, version: int | None = None) -> tuple[str, int] | None:
        """The issue ``doc_id``'s ``version`` is compared with, as ``(doc_id, version)``: the
        latest earlier version of the same document that was served (``serving`` or
        ``superseded``: the one served before it; a failed one is skipped); when there is
        none (version 1 of an edition), the previous edition's serving version; else
        ``None`` (no earlier issue, or the previous edition has no version serving or is
        being deleted).

        Args:
            doc_id: the document.
            version: its version number; ``None`` for its serving version (or, before its
                first build, its newest).

        Raises:
            DocumentNotFoundError: no such document, or it has no such version.
        """
        row = self.find_by_doc_id(doc_id)
        if row is None:
            raise document_not_found(doc_id)
        history = self.versions(doc_id)
        if version is None:
            current = serving_version(history) or history[-1]
        else:
            found = [v for v in history if v.version == version]
            if not found:
                raise DocumentNotFoundError(
                    f"document {doc_id!r} has no version {version}; it has versions 1 to "
                    f"{history[-1].version} (`kb versions {doc_id}` lists them)"
                )
            current = found[0]
        served = [v for v in history if v.version < current.version and v.status in SERVED_STATUSES]
        if served:
            return (doc_id, served[-1].version)
        before = self.find_by_doc_id(row.edition_of) if row.edition_of else None
        if before is None or before.status == DocumentStatus.DELETING:
            return None
        serving = serving_version(self.versions(before.doc_id))
        return None if serving is None else (before.doc_id, serving.version)


class EditionCatalog(EditionReads):
    """The edition link's write (the intake writes it with the row: ``add_pending``)."""

    def set_edition_of(self, doc_id: str, previous: str | None) -> DocumentRow:
        """Link ``doc_id`` as the next edition of ``previous`` (``None``: unlink it, so it
        starts a series of its own). Only this row changes.

        Raises:
            DocumentNotFoundError: no document ``doc_id``.
            EditionLinkError: ``check_edition_link`` refuses the link; nothing changed.
        """
        with self._write() as conn:
            if previous is not None:
                check_edition_link(conn, doc_id, previous)
            found = conn.execute(
                documents.update()
                .where(documents.c.doc_id == doc_id)
                .values(edition_of=previous, updated_at=utc_now())
                .returning(*documents.c)
            ).first()
            if found is None:
                raise document_not_found(doc_id)
        return to_row(DocumentRow, found)
