"""Documents as the tools see them: resolving the names a model passes, which documents may be
served, the document list, and reading chunks by number.

The serving rule (issue 10, defect 7): a document that is not ``ready`` is never served, by any
tool. A failed re-build can leave a document's old chunks, figures and graph edges in the
stores; ``served_documents`` reads the catalog once per request and says which doc_ids may be
returned, and every search applies it (``search_scope`` for search_docs, ``ServedDocuments.only``
for search_graph; read_doc refuses a document that is not ready).

Deletes (issue 16, "Crash and outage recovery"): ``kb delete`` first marks a document
``deleting`` and removes its stored data after, so a killed delete can leave part of it in the
stores. A ``deleting`` document is treated as gone everywhere here: no search returns it, a name
resolving to it is unknown, and ``document_list`` leaves it out (a model cannot use it, and the
person who ran ``kb delete`` sees it in ``kb status``). It still counts as "not ready" when
deciding whether searches must be filtered, so its leftovers are never served.

Categories (issue 12): chunk payloads do not carry a document's category, so a ``category``
filter is resolved to doc_ids from the catalog on every call (``category_documents``); moving a
document (``kb categorize``) changes its catalog row and nothing in the vectors or graph.

Versions (issue 12, "New versions of a document"): the stores hold each version of a document
under its own key (``kb_shared.identity.version_key``: the doc_id for version 1), and a new
version is built beside the served one. So every filter these functions return is of *serving
keys*: for each servable document, the key of its catalog ``serving`` version
(``serving_keys``), read in the same catalog read as the statuses. While any document has
more than one version, searches are always filtered (``ServedDocuments.only`` is set), so a
version being built, a failed one, or one superseded a moment ago is never returned.

Editions (issue 27): documents with different names linked as editions of one series
(``documents.edition_of``); ``document_list`` gathers the series of the listed documents
(``series_ids``, over the documents not being deleted) and ``series_notes`` words them.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field

from kb_mcp.errors import ToolProblem
from kb_shared.errors import EmptyCorpusError, IdentityError, SchemaMissingError
from kb_shared.identity import chunk_id, normalize_name
from kb_shared.search.retrieval import Passage
from kb_shared.stores.catalog import (
    DocumentRow,
    DocumentStatus,
    DocumentVersionRow,
    ServingState,
    VersionStatus,
    serving_version,
)
from kb_shared.stores.catalog.documents import in_category, normalize_category
from kb_shared.stores.catalog.editions import series_ids
from kb_shared.stores.readers import CatalogReader, VectorReader

#: Most chunks read_doc returns per call (mcp-documentation README: ``max_chunks_per_read`` 5).
MAX_READ_CHUNKS = 5

#: Suggestions offered for an unknown document name.
_SUGGESTIONS = 3

READY = DocumentStatus.READY
PENDING = DocumentStatus.PENDING
FAILED = DocumentStatus.FAILED
DELETING = DocumentStatus.DELETING


# ---------------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------------


def _unknown(catalog: CatalogReader, refs: Sequence[str], what: str) -> ToolProblem:
    rows = _present(catalog.list_documents())
    known = {r.doc_id: r.doc_id for r in rows} | {normalize_name(r.name): r.doc_id for r in rows}
    hints: list[str] = []
    for ref in refs:
        try:
            key = normalize_name(ref)
        except IdentityError:
            continue
        hints += [known[m] for m in difflib.get_close_matches(key, list(known), _SUGGESTIONS)]
    names = ", ".join(repr(r) for r in refs)
    message = (
        f"unknown {what} {names}: give a file name or doc_id exactly as list_documents shows "
        "them"
    )
    if hints:
        message += "; did you mean " + ", ".join(repr(h) for h in dict.fromkeys(hints)) + "?"
    elif not rows:
        message += "; the catalog has no documents yet"
    else:
        message += "; call list_documents to see them"
    return ToolProblem(message)


def resolve_document(catalog: CatalogReader, ref: str) -> DocumentRow:
    """The document a doc_id or file name means (``Catalog.resolve``: case, surrounding spaces
    and a missing ``.pdf`` forgiven); a ``deleting`` one is unknown (module docstring).

    Raises:
        ToolProblem: no such document; the message suggests close names.
    """
    row = catalog.resolve(ref)
    if row is None or row.status == DELETING:
        raise _unknown(catalog, [ref], "document")
    return row


def not_ready(rows: Sequence[DocumentRow], action: str) -> ToolProblem:
    """The error for asking to ``action`` ("read", "searched") documents that are pending or
    failed: each with its status and failure reason, and where to see the ready ones."""
    parts = [
        f"{row.name!r} is {row.status}" + (f": {row.failure_reason}" if row.failure_reason else "")
        for row in rows
    ]
    return ToolProblem(
        f"document {'; '.join(parts)}. Only ready documents can be {action}; call "
        "list_documents to see which are ready."
    )


def resolve_documents(catalog: CatalogReader, refs: Sequence[str] | None) -> list[str] | None:
    """Serving keys (``serving_keys``) of the named documents, for a ``documents`` filter
    (``None`` = no filter).

    Raises:
        ToolProblem: any name is unknown or ``deleting`` (all such names are listed), any
            named document is pending or failed (``not_ready``), or the list is empty (an
            empty filter would match nothing, which is never what a caller means).
    """
    if refs is None:
        return None
    if not refs:
        raise ToolProblem(
            "documents is an empty list, which would match nothing; leave it out to search "
            "every document"
        )
    found: list[str] = []
    missing: list[str] = []
    unready: list[DocumentRow] = []
    for ref in refs:
        row = catalog.resolve(ref)
        if row is None or row.status == DELETING:
            missing.append(ref)
        elif row.status != READY:
            unready.append(row)
        elif row.doc_id not in found:
            found.append(row.doc_id)
    if missing:
        raise _unknown(catalog, missing, "document" if len(missing) == 1 else "documents")
    if unready:
        raise not_ready(unready, "searched")
    keys = serving_keys(catalog)
    return [keys.get(doc, doc) for doc in found]


# ---------------------------------------------------------------------------------------------
# What may be served
# ---------------------------------------------------------------------------------------------


def _all_versions(catalog: CatalogReader) -> dict[str, list[DocumentVersionRow]]:
    """Every document's version history by doc_id (``Catalog.all_versions``); empty for a
    catalog whose tables were never created."""
    try:
        return catalog.all_versions()
    except SchemaMissingError:
        return {}


def serving_keys(catalog: CatalogReader) -> dict[str, str]:
    """doc_id → serving key (``ServingState.key``: the serving version's, else version 1's) of
    every ready document, in one read (``serving_states``)."""
    return {row.doc_id: row.key for row in read_serving_states(catalog) if row.status == READY}


def _all_rows(catalog: CatalogReader) -> list[DocumentRow]:
    """Every catalog row, ``deleting`` ones included; none for a catalog whose tables were
    never created (a fresh ``KB_HOME``: nothing added yet)."""
    try:
        return catalog.list_documents()
    except SchemaMissingError:
        return []


def _present(rows: Sequence[DocumentRow]) -> list[DocumentRow]:
    """``rows`` without the ``deleting`` ones: the documents a caller may be told about."""
    return [row for row in rows if row.status != DELETING]


@dataclass(frozen=True, slots=True)
class ServedDocuments:
    """Which documents a search may return.

    Attributes:
        only: the serving keys of the ready documents (``serving_keys``) when some catalog
            document is not ready or has more than one version; ``None`` when every document
            is ready with version 1 only, so searches run unfiltered (the same query plan and
            tie order as before any document failed).
    """

    only: frozenset[str] | None

    def serves(self, key: str) -> bool:
        """Whether passages and graph edges stored under ``key`` (a point's ``document``, an
        edge's ``source_doc``) may be returned."""
        return self.only is None or key in self.only


def read_serving_states(catalog: CatalogReader) -> list[ServingState]:
    """``Catalog.serving_states`` (one query); ``[]`` for a catalog whose tables were never
    created (a fresh ``KB_HOME``: nothing added yet)."""
    try:
        return catalog.serving_states()
    except SchemaMissingError:
        return []


def served_documents(
    catalog: CatalogReader, states: Sequence[ServingState] | None = None
) -> ServedDocuments:
    """Say which documents may be served (module docstring), from ``states`` when the caller
    read them (``read_serving_states``), else from one catalog read.

    Raises:
        EmptyCorpusError: the catalog holds no document at all (``deleting`` ones aside).
        ToolProblem: it holds documents but none is ready (each is pending or failed).
    """
    rows = read_serving_states(catalog) if states is None else states
    if not any(row.status != DELETING for row in rows):
        raise EmptyCorpusError("the catalog holds no documents")
    ready = frozenset(row.key for row in rows if row.status == READY)
    single = all(row.versions == 1 for row in rows)
    if len(ready) == len(rows) and single:  # a deleting row makes them differ: filtered
        return ServedDocuments(only=None)
    if not ready:
        counts = [
            f"{n} {status}"
            for status in (PENDING, FAILED)
            if (n := sum(1 for row in rows if row.status == status))
        ]
        raise ToolProblem(
            f"no document is ready to search: {', '.join(counts)} (their indexed content is "
            "not served until they build again). Call list_documents to see each one's status "
            "and failure reason."
        )
    return ServedDocuments(only=ready)


def category_prefix(category: str | None) -> str | None:
    """A tool's ``category`` argument as a ``normalize_category`` prefix (``None``: no filter).

    Raises:
        ToolProblem: a category ``normalize_category`` refuses, with its reason.
    """
    try:
        return normalize_category(category)
    except ValueError as error:
        raise ToolProblem(f"category refused: {error}") from None


def category_documents(catalog: CatalogReader, category: str) -> frozenset[str]:
    """The serving keys (``serving_keys``) of the ready documents under the ``category``
    prefix (whole segments, case-insensitive:
    ``in_category``), read from the catalog now.

    Raises:
        ToolProblem: a bad category, or no ready document under it (the message lists the
            categories that have ready documents).
        EmptyCorpusError: the catalog holds no document at all (``deleting`` ones aside).
    """
    prefix = category_prefix(category)
    rows = _present(_all_rows(catalog))
    if not rows:
        raise EmptyCorpusError("the catalog holds no documents")
    ready = [row for row in rows if row.status == READY]
    keys = serving_keys(catalog)
    inside = frozenset(
        keys.get(row.doc_id, row.doc_id) for row in ready if in_category(row.category, prefix)
    )
    if not inside:
        known = sorted({row.category for row in ready if row.category}, key=str.casefold)
        raise ToolProblem(
            f"no ready document is in category {prefix!r}; "
            + (
                f"categories with ready documents: {', '.join(known)}"
                if known
                else "no ready document has a category"
            )
            + ". Leave category out to search everything."
        )
    return inside


def search_scope(
    catalog: CatalogReader,
    refs: Sequence[str] | None,
    category: str | None = None,
    states: Sequence[ServingState] | None = None,
) -> list[str] | None:
    """The ``documents`` filter of a search_docs call, as serving keys (module docstring): the
    named documents (``resolve_documents``; each must be ready), else every servable document
    (``None`` when that is every document, each with one version; from ``states`` when the
    caller read them); with a ``category``, only those under it (``category_documents``).

    Raises:
        ToolProblem / EmptyCorpusError: as ``resolve_documents``, ``served_documents`` and
            ``category_documents``; also when none of the named documents is in the category.
    """
    if category_prefix(category) is not None:
        inside = category_documents(catalog, category or "")
        if refs is None:
            return sorted(inside)
        named = resolve_documents(catalog, refs) or []
        kept = [doc for doc in named if doc in inside]
        if not kept:
            raise ToolProblem(
                f"none of the named documents is in category {category_prefix(category)!r}; "
                "leave out documents or category, or call list_documents with the category"
            )
        return kept
    if refs is not None:
        return resolve_documents(catalog, refs)
    only = served_documents(catalog, states).only
    return None if only is None else sorted(only)


# ---------------------------------------------------------------------------------------------
# list_documents
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DocumentList:
    """The catalog as list_documents shows it: ready documents and the others, each listed
    document's version history by doc_id (``versions``; oldest first), and the series of
    two or more editions a listed document belongs to (``series``; each oldest first, in
    list order of their first listed edition)."""

    ready: list[DocumentRow]
    pending: list[DocumentRow]
    failed: list[DocumentRow]
    versions: dict[str, list[DocumentVersionRow]] = field(default_factory=dict)
    series: list[list[DocumentRow]] = field(default_factory=list)


def document_list(catalog: CatalogReader, category: str | None = None) -> DocumentList:
    """Every document (under the ``category`` prefix when given: ``in_category``), split by
    status (each list ordered by normalised name), ``deleting`` ones left out (module
    docstring); empty for a catalog whose tables were never created.

    Raises:
        ToolProblem: a category ``normalize_category`` refuses.
    """
    prefix = category_prefix(category)
    present = _present(_all_rows(catalog))
    rows = [row for row in present if in_category(row.category, prefix)]
    versions = _all_versions(catalog)
    ready = [r for r in rows if r.status == READY]
    pending = [r for r in rows if r.status == PENDING]
    failed = [r for r in rows if r.status == FAILED]
    return DocumentList(
        ready=ready,
        pending=pending,
        failed=failed,
        versions={r.doc_id: versions[r.doc_id] for r in rows if r.doc_id in versions},
        series=_series(present, [*ready, *pending, *failed]),
    )


def _series(
    present: Sequence[DocumentRow], listed: Sequence[DocumentRow]
) -> list[list[DocumentRow]]:
    """The series (``series_ids`` over ``present``) of two or more editions that a ``listed``
    document belongs to, each once, oldest edition first."""
    links = {row.doc_id: row.edition_of for row in present}
    by_id = {row.doc_id: row for row in present}
    found: dict[str, list[DocumentRow]] = {}
    for row in listed:
        chain = series_ids(links, row.doc_id)
        if len(chain) > 1 and chain[0] not in found:
            found[chain[0]] = [by_id[doc] for doc in chain]
    return list(found.values())


def series_notes(listing: DocumentList) -> list[str]:
    """One line per series of ``listing``, its editions oldest first with the status of any
    not ready, e.g. ``Notice FY24.pdf → Notice FY25.pdf (pending)``."""
    return [
        " → ".join(
            row.name + ("" if row.status == READY else f" ({row.status})") for row in editions
        )
        for editions in listing.series
    ]


def version_notes(listing: DocumentList) -> list[str]:
    """One line per listed document that has more than one version, in list order: the
    served version (its label when it has one) and how many earlier ones exist, then a newer
    version being built or one that failed, e.g. ``B2B Spec.pdf: version 2 (v3.2) serving, 1
    earlier`` or ``B2B Spec.pdf: version 2 failed: embeddings: …; version 1 serving``."""
    lines: list[str] = []
    for row in [*listing.ready, *listing.pending, *listing.failed]:
        history = listing.versions.get(row.doc_id, [])
        if len(history) < 2:
            continue
        served = serving_version(history)
        newest = history[-1]
        if served is None:
            served_text = "no version serving"
        else:
            label = f" (v{served.label})" if served.label else ""
            earlier = sum(1 for v in history if v.version < served.version)
            served_text = f"version {served.version}{label} serving, {earlier} earlier"
        if newest.status == VersionStatus.FAILED:
            text = f"version {newest.version} failed: {newest.failure_reason}; " + (
                served_text.split(",")[0] if served is not None else served_text
            )
        elif newest.status == VersionStatus.PENDING:
            text = f"version {newest.version} is being built; {served_text}"
        else:
            text = served_text
        lines.append(f"{row.name}: {text}")
    return lines


# ---------------------------------------------------------------------------------------------
# read_doc
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReadAnswer:
    """Chunks of one document, in the order asked; ``missing`` lists numbers not stored."""

    document: DocumentRow
    chunks: list[Passage]
    missing: list[int]


def read_doc(
    catalog: CatalogReader, index: VectorReader, document: str, chunk_numbers: Sequence[int]
) -> ReadAnswer:
    """Fetch up to ``MAX_READ_CHUNKS`` chunks of the served version of one ready document by
    0-based number.

    Raises:
        ToolProblem: unknown document; a document that is not ready; too many or negative
            numbers; none of the numbers exists (the message gives the valid range).
    """
    numbers = list(dict.fromkeys(chunk_numbers))
    if not numbers:
        raise ToolProblem("chunk_numbers is empty; pass 1 to 5 chunk numbers, e.g. [0, 1]")
    if len(numbers) > MAX_READ_CHUNKS:
        raise ToolProblem(
            f"read_doc returns at most {MAX_READ_CHUNKS} chunks per call; ask for the rest in "
            "another call"
        )
    if any(n < 0 for n in numbers):
        raise ToolProblem("chunk numbers start at 0 (the n of chunk id '{doc_id}-{n}')")
    row = resolve_document(catalog, document)
    if row.status != READY:
        raise not_ready([row], "read")
    key = serving_keys(catalog).get(row.doc_id, row.doc_id)
    ids = [chunk_id(key, n) for n in numbers]
    stored = {point.id: point for point in index.fetch(ids)}
    chunks: list[Passage] = []
    missing: list[int] = []
    for position, (number, chunk) in enumerate(zip(numbers, ids, strict=True), start=1):
        point = stored.get(chunk)
        if point is None:
            missing.append(number)
            continue
        chunks.append(Passage.of(point, position))
    if not chunks:
        last = (row.chunk_count or 0) - 1
        valid = f"0–{last}" if last >= 0 else "none"
        raise ToolProblem(
            f"document {row.name!r} has no chunk {', '.join(map(str, missing))}; it has "
            f"{row.chunk_count or 0} chunks (numbers {valid})"
        )
    return ReadAnswer(document=row, chunks=chunks, missing=missing)
