"""The search_obligations result: a count line, then every obligation of this page grouped by
document and clause, each "[O12] Retailer must — “sentence” — p. 14, cl. 4.2" with its PDF
link at that page, and ``SearchObligationsOutput``."""

from __future__ import annotations

from collections.abc import Mapping

from mcp.types import CallToolResult

from kb_mcp.links import Links
from kb_mcp.render import tool_result
from kb_mcp.schemas import ObligationRef, SearchObligationsOutput
from kb_shared import layout
from kb_shared.search.citations import heading_label
from kb_shared.stores.catalog import DocumentRow, ObligationRow, ObligationSearchResult

#: What a party without a name (a passive sentence) is shown as.
UNNAMED = "(party not named)"


def party_label(row: ObligationRow) -> str:
    """The party as the register shows it: the normalised role, with the document's own words
    when they differ ("Retailer (“the Solar Retailer”)"); ``UNNAMED`` when neither is known."""
    named = row.party.strip()
    if row.role and named and named.lower() not in (row.role.lower(), f"the {row.role.lower()}"):
        return f"{row.role} (“{named}”)"
    return row.role or named or UNNAMED


def locator(row: ObligationRow) -> str:
    """"p. 14, cl. 4.2" (either part left out when unknown; "" when both are)."""
    parts = []
    if row.page is not None:
        parts.append(f"p. {row.page}")
    if row.reference:
        parts.append(f"cl. {row.reference}")
    return ", ".join(parts)


def obligation_line(number: int, row: ObligationRow, url: str | None) -> str:
    """One obligation as the text content lists it: number, party, modality, the verbatim
    sentence, where it is, its deadline, its link."""
    where = locator(row)
    line = f"[O{number}] {party_label(row)} {row.modality} — “{row.text}”"
    if where:
        line += f" — {where}"
    if row.deadline:
        line += f"; deadline: {row.deadline}"
    if url:
        line += f" ({url})"
    return line


def _counts_phrase(counts: tuple[tuple[str, int], ...], names: Mapping[str, str]) -> str:
    return ", ".join(f"{names.get(key, key)} {n}" for key, n in counts)


def _by_party(found: ObligationSearchResult) -> tuple[tuple[str, int], ...]:
    """Counts by party, an unnamed party (a passive sentence) shown as ``UNNAMED``."""
    return tuple((party or UNNAMED, n) for party, n in found.by_party)


def obligations_text(
    found: ObligationSearchResult, documents: Mapping[str, DocumentRow], links: Links
) -> str:
    """The text content (module docstring); says apart "no obligation matches" and which
    filters were used."""
    filters = ", ".join(f"{k}={v!r}" for k, v in found.filters.items())
    scope = f" matching {filters}" if filters else ""
    if not found.count:
        return (
            f"No obligation{scope} in the served documents. Try fewer filters, another party "
            "name (list_documents shows the documents), or search_docs for one clause."
        )
    first, last = found.offset + 1, found.offset + len(found.rows)
    lines = [
        f"{found.count} obligation{'s' if found.count != 1 else ''}{scope} (exact count). "
        f"By party: {_counts_phrase(_by_party(found), {})}.",
        f"By document: {_counts_phrase(found.by_document, _names(documents))}.",
    ]
    if found.rows:
        shown = f"Showing O{first}–O{last}" if last > first else f"Showing O{first}"
        more = (
            f"; call again with offset={found.next_offset} for the next"
            if found.next_offset is not None else ""
        )
        lines.append(f"{shown} of {found.count}{more}.")
    else:
        lines.append(f"offset {found.offset} is past the last of {found.count}; use offset=0.")
    document = clause = None
    for number, row in enumerate(found.rows, first):
        if row.doc_id != document:
            document, clause = row.doc_id, None
            doc = documents.get(row.doc_id)
            title = doc.title or doc.name if doc is not None else row.doc_id
            lines += ["", f"## {title} ({row.doc_id})"]
        heading = heading_label(row.heading) if row.heading else None
        if heading != clause:
            clause = heading
            lines.append(f"### {heading}" if heading else "### (before the first heading)")
        lines.append(obligation_line(number, row, _url(row, links)))
    return "\n".join(lines)


def _names(documents: Mapping[str, DocumentRow]) -> dict[str, str]:
    return {doc_id: row.name for doc_id, row in documents.items()}


def _url(row: ObligationRow, links: Links) -> str | None:
    return links.page(layout.pdf_key(row.version_key), row.page)


def obligation_ref(number: int, row: ObligationRow, links: Links) -> ObligationRef:
    """The structured form of one obligation."""
    return ObligationRef(
        number=number,
        party=row.party,
        role=row.role,
        modality=row.modality,
        text=row.text,
        action=row.action,
        deadline=row.deadline,
        reference=row.reference,
        doc_id=row.doc_id,
        version=row.version,
        page=row.page,
        chunk_id=row.chunk_id,
        section=heading_label(row.heading) if row.heading else None,
        url=_url(row, links),
    )


def obligations_result(
    found: ObligationSearchResult, documents: Mapping[str, DocumentRow], links: Links
) -> CallToolResult:
    """The search_obligations result: ``obligations_text`` plus ``SearchObligationsOutput``."""
    structured = SearchObligationsOutput(
        count=found.count,
        by_party=dict(_by_party(found)),
        by_document=dict(found.by_document),
        offset=found.offset,
        next_offset=found.next_offset,
        filters={k: v for k, v in found.filters.items() if isinstance(v, (str, bool))},
        obligations=[
            obligation_ref(n, row, links) for n, row in enumerate(found.rows, found.offset + 1)
        ],
    )
    return tool_result(obligations_text(found, documents, links), structured)
