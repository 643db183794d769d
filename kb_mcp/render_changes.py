"""What ``compare_versions`` (and ``kb diff``, and the upload page's Changes view) answer: the
stored comparison of an issue with its previous one (``changes`` asset, ``Catalog.change_set``),
found from the caller's arguments (``find_comparison``), and rendered as text (a summary line,
then "[C1] Section › path — p. 12 (v1) → p. 13 (v2)" with before/after text) and as
``CompareVersionsOutput``, each side linked to its PDF at its page."""

from __future__ import annotations

from dataclasses import dataclass

from mcp.types import CallToolResult

from kb_mcp.documents import resolve_document
from kb_mcp.errors import ToolProblem
from kb_mcp.links import Links
from kb_mcp.render import tool_result
from kb_mcp.schemas import ChangeRef, ChangeSideRef, CompareVersionsOutput
from kb_shared.compliance.changes import Change, Side
from kb_shared.search.citations import heading_label
from kb_shared.stores.catalog import (
    CatalogReader,
    DocumentRow,
    DocumentVersionRow,
    VersionStatus,
)
from kb_shared.stores.catalog.changes import StoredChangeSet
from kb_shared.stores.catalog.versions import serving_version

#: Version statuses of an issue that was built and served (its comparison is stored).
_SERVED = (VersionStatus.SERVING, VersionStatus.SUPERSEDED)
#: Changes listed per call by default, and at most; the summary always counts them all.
DEFAULT_LIMIT = 100
MAX_LIMIT = 500


@dataclass(frozen=True, slots=True)
class Issue:
    """One side of a comparison: the document, its version row (its file is that version's)
    and how the text names it ("v2", or the file name for an edition)."""

    document: DocumentRow
    version: DocumentVersionRow
    label: str


@dataclass(frozen=True, slots=True)
class Comparison:
    """A stored comparison of ``after`` with ``before`` (its previous issue)."""

    before: Issue
    after: Issue
    stored: StoredChangeSet


def how_to_add() -> str:
    """The sentence that says how to give a document a previous issue."""
    return (
        "add the new issue with `kb add NEW.pdf --new-version` (same file name: a version) or "
        "`kb add NEW.pdf --edition-of OLD.pdf` (another name: an edition of a series)"
    )


def _version(catalog: CatalogReader, row: DocumentRow, number: int | None) -> DocumentVersionRow:
    history = catalog.versions(row.doc_id)
    if number is None:
        found = serving_version(history)
        if found is None:
            raise ToolProblem(f"{row.name!r} has no version serving yet; it is {row.status}")
        return found
    for version in history:
        if version.version == number:
            return version
    raise ToolProblem(
        f"{row.name!r} has no version {number}; it has versions 1 to {history[-1].version}"
    )


def _issue(catalog: CatalogReader, doc_id: str, number: int, other: str) -> Issue:
    row = catalog.find_by_doc_id(doc_id)
    if row is None:
        raise ToolProblem(f"the previous issue {doc_id!r} is no longer in the catalog")
    version = _version(catalog, row, number)
    label = f"v{number}" if doc_id == other else f"{row.name} v{number}"
    return Issue(row, version, label)


def find_comparison(
    catalog: CatalogReader,
    document: str,
    *,
    from_version: int | None = None,
    to_version: int | None = None,
    against: str | None = None,
) -> Comparison:
    """The stored comparison the arguments mean: ``document``'s ``to_version`` (default: the
    serving one) against its previous issue; ``from_version`` must be that issue's version when
    given; ``against`` names the other edition (either order).

    Raises:
        ToolProblem: unknown document or version; no previous issue (the message names the
            later version compared with it, or the one being built, or says how to add one); a
            comparison that was not built yet (says how to build it); versions or
            editions that are not one issue apart (kb compares each issue with the one before).
    """
    row = resolve_document(catalog, document)
    if against is not None:
        if from_version is not None or to_version is not None:
            raise ToolProblem("give against (another edition) or from_version/to_version, not both")
        other = resolve_document(catalog, against)
        for newer, older in ((row, other), (other, row)):
            current = _version(catalog, newer, None)
            previous = catalog.previous_issue(newer.doc_id, current.version)
            if previous is not None and previous[0] == older.doc_id:
                return _stored(catalog, newer, current, previous)
        raise ToolProblem(
            f"{row.name!r} and {other.name!r} are not consecutive editions of one series: kb "
            "compares an edition with the one it follows (list_documents shows each series)"
        )
    if from_version is not None and to_version is not None and from_version >= to_version:
        raise ToolProblem(
            f"from_version ({from_version}) must be older than to_version ({to_version}); "
            "kb compares an issue with the one before it"
        )
    current = _version(catalog, row, to_version)
    previous = catalog.previous_issue(row.doc_id, current.version)
    if previous is None:
        later = [e for e in catalog.series(row.doc_id) if e.edition_of == row.doc_id]
        if later:
            raise ToolProblem(
                f"{row.name!r} is the earlier edition: it has no previous issue, and its next "
                f"edition {later[0].name!r} is compared with it; ask for {later[0].name!r}, or "
                f"give against={later[0].name!r}"
            )
        newer = [v for v in catalog.versions(row.doc_id) if v.version > current.version]
        built = [v.version for v in newer if v.status in _SERVED]
        if built:  # an older version asked for: the later one is compared with it
            raise ToolProblem(
                f"{row.name!r} version {current.version} has no previous issue: it is the "
                f"first; version {built[0]} is compared with it: ask for to_version={built[0]}, "
                "or leave to_version out for the version served"
            )
        if newer:  # the next issue is added but not served yet
            raise ToolProblem(
                f"{row.name!r} version {current.version} has no previous issue; its version "
                f"{newer[-1].version} is {newer[-1].status}: it is compared with version "
                f"{current.version} once it is built"
            )
        raise ToolProblem(
            f"{row.name!r} version {current.version} has no previous issue to compare with; "
            + how_to_add()
        )
    if from_version is not None and (previous[0], previous[1]) != (row.doc_id, from_version):
        was = f"version {previous[1]}" if previous[0] == row.doc_id else f"{previous[0]!r}"
        raise ToolProblem(
            f"kb compares each issue with the one before it: version {current.version} of "
            f"{row.name!r} was compared with {was}, not version {from_version}"
        )
    return _stored(catalog, row, current, previous)


def _stored(
    catalog: CatalogReader,
    row: DocumentRow,
    current: DocumentVersionRow,
    previous: tuple[str, int],
) -> Comparison:
    version = current.version  # the version row the caller read: not read again
    stored = catalog.change_set(row.doc_id, version)
    if stored is None or (stored.previous_doc_id, stored.previous_version) != previous:
        raise ToolProblem(
            f"the comparison of {row.name!r} version {version} with its previous issue has not "
            f"been built yet; the operator runs `kb rebuild changes {row.doc_id}` (or the "
            "previous issue was built before kb kept the text it compares)"
        )
    after = Issue(row, current, f"v{version}")
    before = _issue(catalog, previous[0], previous[1], row.doc_id)
    return Comparison(before, after, stored)


def summary_line(comparison: Comparison) -> str:
    """"3 changes in X.pdf (v2) against v1: obligations touched by 2, numbers changed by 1;
    1 added, …; 40 sections unchanged." (obligations and numbers first: what a reader acts
    on)."""
    s = comparison.stored.summary
    total = s["added"] + s["removed"] + s["changed"] + s["moved"]
    after = comparison.after
    return (
        f"{total} change{'s' if total != 1 else ''} in {after.document.name} ({after.label}) "
        f"against {comparison.before.label}: obligations touched by {s['obligations_changed']}, "
        f"numbers changed by {s['numbers_changed']}; {s['added']} added, {s['removed']} removed, "
        f"{s['changed']} changed, {s['moved']} moved; {s['unchanged_sections']} sections "
        "unchanged."
    )


def _pages(pages: tuple[int, ...]) -> str:
    if not pages:
        return "p. ?"
    if len(pages) == 1:
        return f"p. {pages[0]}"
    return f"pp. {pages[0]}–{pages[-1]}"


def change_header(change: Change, comparison: Comparison) -> str:
    """One change's header: "[C1] changed · Section › path — p. 12 (v1) → p. 13 (v2)", then
    "· obligation" and "· numbers: 4 business days → 5 business days" when they apply."""
    before, after = _section(change.section_before), _section(change.section_after)
    section = after or before or "(before the first heading)"
    if before and after and before != after:
        section = f"{before} → {after}"
    line = (
        f"[C{change.number}] {change.kind} · {section} — {_pages(change.before.pages)} "
        f"({comparison.before.label}) → {_pages(change.after.pages)} ({comparison.after.label})"
    )
    if change.obligation:
        line += " · obligation"
    if change.numbers:
        line += " · numbers: " + "; ".join(
            f"{b or '—'} → {a or '—'}" for b, a in change.numbers
        )
    return line


def _section(path: str | None) -> str | None:
    """A stored section path as a reader sees it (``citations.heading_label``); ``None`` for none."""
    return heading_label(path) if path else None


def _side_url(side: Side, issue: Issue, links: Links) -> str | None:
    # a superseded version's file is served to a "before" link only (``Links.page``)
    before = issue.version.status != VersionStatus.SERVING
    return links.page(issue.version.blob_key, side.pages[0] if side.pages else None,
                      before=before)


def comparison_text(comparison: Comparison, links: Links, offset: int, limit: int) -> str:
    """The text content: the summary line, then each change from ``offset`` (at most
    ``limit``) with its before and after text and links; an ``offset`` past the last change
    is said."""
    changes = comparison.stored.changes
    lines = [summary_line(comparison)]
    shown = changes[offset:offset + limit]
    if offset + len(shown) < len(changes):
        lines.append(
            f"Showing C{offset + 1}–C{offset + len(shown)} of {len(changes)}; call again with "
            f"offset={offset + len(shown)} for the next."
        )
    elif changes and not shown:  # said, so a page past the end is not read as "no changes"
        lines.append(f"offset {offset} is past the last of {len(changes)} changes; use offset=0.")
    for change in shown:
        lines += ["", change_header(change, comparison)]
        for name, side, issue in (
            ("Before", change.before, comparison.before), ("After", change.after, comparison.after)
        ):
            if side.text:
                url = _side_url(side, issue, links)
                text = side.text.replace("\n", " / ")
                lines.append(f"{name}: {text}" + (f" ({url})" if url else ""))
    return "\n".join(lines)


def _side_ref(side: Side, issue: Issue, links: Links) -> ChangeSideRef:
    return ChangeSideRef(text=side.text, pages=list(side.pages), url=_side_url(side, issue, links))


def comparison_output(
    comparison: Comparison, links: Links, offset: int, limit: int
) -> CompareVersionsOutput:
    """The structured content (``CompareVersionsOutput``)."""
    changes = comparison.stored.changes
    shown = changes[offset:offset + limit]
    end = offset + len(shown)
    return CompareVersionsOutput(
        doc_id=comparison.after.document.doc_id,
        version=comparison.after.version.version,
        previous_doc_id=comparison.before.document.doc_id,
        previous_version=comparison.before.version.version,
        summary=comparison.stored.summary,
        offset=offset,
        next_offset=end if end < len(changes) else None,
        changes=[
            ChangeRef(
                number=c.number, kind=c.kind, section_before=_section(c.section_before),
                section_after=_section(c.section_after),
                before=_side_ref(c.before, comparison.before, links),
                after=_side_ref(c.after, comparison.after, links),
                obligation=c.obligation, numbers=[list(pair) for pair in c.numbers],
            )
            for c in shown
        ],
    )


def comparison_result(
    comparison: Comparison, links: Links, offset: int = 0, limit: int = DEFAULT_LIMIT
) -> CallToolResult:
    """The compare_versions result: ``comparison_text`` plus ``comparison_output``."""
    return tool_result(
        comparison_text(comparison, links, offset, limit),
        comparison_output(comparison, links, offset, limit),
    )
