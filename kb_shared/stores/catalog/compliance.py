"""Regulatory enforcement actions mirrored from the Notion compliance tracker: the
``compliance_actions`` table (one row per tracker page), its misconduct types, the sync state,
and the snapshot write a sync applies.

The tracker's columns (Summary, Organisation, Sector, Date, Regulatory Body, Status, Fine,
Source, Misconduct Type) are the peer system's schema (../shared/notes/next-capabilities.md,
"Notion"). A fine is stored in whole cents (``fine_cents``, an integer) so sums are exact on
SQLite and Postgres alike; NULL means "no fine recorded", never $0. ``organisation_key`` and
``search_text`` are derived here (``normalize_organisation``, ``search_words``) so a search
can match names case-insensitively and without "Pty Ltd"/"Limited". The search itself is in
``compliance_search.py``.
"""

from __future__ import annotations

import datetime as dt
import re
import unicodedata
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from kb_shared.errors import SyncRefusedError
from kb_shared.stores.catalog.common import (
    CATALOG_METADATA,
    URL_MAX,
    CatalogBase,
    SyncCounts,
    clean_text,
    refuse_legacy_shape,
    sync_count_columns,
    to_row,
)
from kb_shared.stores.sql import UtcDateTime, in_batches, utc_now

#: Longest Notion id kept (a UUID is 36 characters with dashes).
PAGE_ID_MAX = 64
#: Longest select or multi-select option name kept (Notion caps option names at 100).
OPTION_MAX = 1000
#: Longest summary kept (a Notion title holds at most 100 rich-text items of 2,000 characters).
SUMMARY_MAX = 200_000
#: Largest fine accepted, in cents: what a signed 64-bit integer holds.
FINE_CENTS_MAX = 2**63 - 1
#: A sync that would delete more than this share of the stored rows is refused unless forced.
MAX_DELETE_SHARE = 0.5
#: The ``compliance_sync_state`` row the Notion sync writes.
NOTION_SOURCE = "notion"
#: Advisory-lock key (Postgres) that serialises two syncs; any fixed 64-bit constant.
SYNC_LOCK = zlib.crc32(b"kb.catalog.compliance_sync")

#: Legal-form words dropped from the end of an organisation's name (and from search words)
#: before matching: the endings the Corporations Act 2001 (Cth) s 148 requires of company
#: names (Proprietary/Pty, Limited/Ltd, No Liability/NL) plus the usual foreign ones.
COMPANY_SUFFIXES: frozenset[str] = frozenset(
    {"pty", "proprietary", "ltd", "limited", "nl", "inc", "incorporated", "llc", "plc", "corp",
     "corporation"}
)
#: An English possessive ending a word: "AGL's", "AGL’s", "retailers'".
_POSSESSIVE = re.compile(r"(?<=\w)['’](?:s\b|(?=\s|$))", re.IGNORECASE)
#: Function words a search ignores (every remaining query word must match).
STOP_WORDS: frozenset[str] = frozenset(
    {"a", "an", "and", "the", "of", "for", "to", "in", "on", "by", "with", "or"}
)

compliance_actions = sa.Table(
    "compliance_actions",
    CATALOG_METADATA,
    sa.Column("page_id", sa.String(PAGE_ID_MAX), primary_key=True),
    sa.Column("notion_url", sa.String(URL_MAX)),
    sa.Column("summary", sa.Text),
    sa.Column("organisation", sa.Text),
    sa.Column("organisation_key", sa.Text),
    sa.Column("sector", sa.Text),
    sa.Column("action_date", sa.Date),
    sa.Column("action_date_end", sa.Date),
    sa.Column("regulatory_body", sa.Text),
    sa.Column("status", sa.Text),
    sa.Column("fine_cents", sa.BigInteger),
    sa.Column("source_url", sa.String(URL_MAX)),
    sa.Column("search_text", sa.Text, nullable=False),
    sa.Column("created_time", UtcDateTime()),
    sa.Column("last_edited_time", UtcDateTime()),
    sa.CheckConstraint("fine_cents >= 0", name="ck_compliance_actions_fine_cents"),
    sa.CheckConstraint("length(page_id) >= 1", name="ck_compliance_actions_page_id"),
)

compliance_action_misconduct_types = sa.Table(
    "compliance_action_misconduct_types",
    CATALOG_METADATA,
    sa.Column(
        "page_id",
        sa.String(PAGE_ID_MAX),
        sa.ForeignKey(
            "compliance_actions.page_id",
            name="fk_compliance_action_misconduct_types_page_id",
            ondelete="CASCADE",
        ),
        primary_key=True,
    ),
    sa.Column("misconduct_type", sa.Text, primary_key=True),
)

compliance_sync_state = sa.Table(
    "compliance_sync_state",
    CATALOG_METADATA,
    sa.Column("source", sa.String(64), primary_key=True),
    sa.Column("data_source_id", sa.String(PAGE_ID_MAX)),
    sa.Column("synced_at", UtcDateTime(), nullable=False),
    *sync_count_columns(),
)


@dataclass(frozen=True, slots=True)
class ComplianceAction:
    """One enforcement action: one page of the Notion tracker.

    ``page_id`` is the Notion page id and ``notion_url`` its link (the citation);
    ``source_url`` is the tracker's Source column (the regulator's notice). ``fine`` is an exact
    ``Decimal`` in dollars, rounded half-even to cents, or ``None`` when no fine is recorded.
    ``action_date``/``action_date_end`` are the Date property's start and end (end only for a
    range). ``misconduct_types`` is sorted. ``created_time``/``last_edited_time`` are Notion's
    (aware UTC).
    """

    page_id: str
    notion_url: str | None = None
    summary: str | None = None
    organisation: str | None = None
    sector: str | None = None
    action_date: dt.date | None = None
    action_date_end: dt.date | None = None
    regulatory_body: str | None = None
    status: str | None = None
    fine: Decimal | None = None
    source_url: str | None = None
    misconduct_types: tuple[str, ...] = ()
    created_time: dt.datetime | None = None
    last_edited_time: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class ComplianceSyncCounts(SyncCounts):
    """What one snapshot write did: ``read`` actions given, of which ``inserted`` were new,
    ``updated`` changed and ``unchanged`` identical; ``deleted`` stored rows were not in the
    read. ``synced_at`` is when it was applied (aware UTC); ``data_source_id`` what was read."""

    synced_at: dt.datetime
    data_source_id: str | None = None


# --------------------------------------------------------------------------------------------
# Name normalisation (shared with the search)
# --------------------------------------------------------------------------------------------


def _fold(text: str) -> str:
    """NFKD-decomposed, accents dropped, case-folded (``Énergie`` -> ``energie``)."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


def search_words(text: str | None) -> list[str]:
    """The words of ``text`` as the search compares them: accents and case folded, split on
    anything that is not a letter or digit (``"AGL Energy Pty. Ltd."`` -> ``["agl", "energy",
    "pty", "ltd"]``)."""
    if not text:
        return []
    return re.findall(r"[^\W_]+", _fold(text))


def normalize_organisation(name: str | None) -> str | None:
    """An organisation's matching key: its words (``search_words``) without trailing legal-form
    words (``COMPANY_SUFFIXES``, and "no liability"), joined by single spaces; ``None`` for
    no name. ``"AGL Energy Pty Ltd"``, ``"agl energy limited"`` and ``"AGL ENERGY"`` all give
    ``"agl energy"``. A name made only of such words keeps them."""
    words = search_words(name)
    if not words:
        return None
    core = list(words)
    while core:
        if core[-1] in COMPANY_SUFFIXES:
            core.pop()
        elif core[-2:] == ["no", "liability"]:
            del core[-2:]
        else:
            break
    return " ".join(core or words)


def query_words(query: str | None) -> list[str]:
    """The words a free-text ``query`` must all match (each as the start of a word): its
    ``search_words`` without ``STOP_WORDS`` and ``COMPANY_SUFFIXES``, unless nothing would be
    left; duplicates dropped, order kept. A possessive ``'s`` goes with its word ("AGL's
    fines" -> ``["agl", "fines"]``), not left as a word "s" that few summaries have."""
    words = search_words(_POSSESSIVE.sub("", query) if query else query)
    kept = [w for w in words if w not in STOP_WORDS and w not in COMPANY_SUFFIXES]
    return list(dict.fromkeys(kept or words))


def build_search_text(summary: str | None, organisation: str | None) -> str:
    """The ``search_text`` column: the words of the summary and the organisation, with a space
    at each end so ``LIKE '% word%'`` finds a word start anywhere."""
    return " " + " ".join(search_words(summary) + search_words(organisation)) + " "


# --------------------------------------------------------------------------------------------
# Input checks
# --------------------------------------------------------------------------------------------


def fine_to_cents(value: Any, where: str = "fine") -> int | None:
    """A fine in dollars (``Decimal``, ``int``, ``float`` or numeric ``str``) as whole cents,
    rounded half-even; ``None`` stays ``None`` ("no fine recorded").

    Raises:
        ValueError: not a number, not finite, negative or too large (message names ``where``).
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"{where} must be a number, got {value!r}")
    try:
        amount = Decimal(str(value)) if isinstance(value, (int, float, str)) else Decimal(value)
    except (InvalidOperation, TypeError, ValueError) as exc:
        raise ValueError(f"{where} must be a number, got {value!r}") from exc
    if not amount.is_finite():
        raise ValueError(f"{where} must be finite, got {value!r}")
    if amount < 0:
        raise ValueError(f"{where} cannot be negative, got {value!r}")
    # checked before rounding: past 28 digits Decimal's rounding raises InvalidOperation
    if amount * 100 > FINE_CENTS_MAX:
        raise ValueError(f"{where} is too large to store, got {value!r}")
    return int((amount * 100).quantize(Decimal(1), rounding=ROUND_HALF_EVEN))


def cents_to_fine(cents: int | None) -> Decimal | None:
    """Whole cents back to an exact dollar ``Decimal`` with two places (``150050`` ->
    ``Decimal("1500.50")``)."""
    return None if cents is None else Decimal(int(cents)).scaleb(-2)


def _check_date(value: Any, where: str) -> dt.date | None:
    if value is not None and (not isinstance(value, dt.date) or isinstance(value, dt.datetime)):
        raise ValueError(f"{where} must be a date, got {value!r}")
    return value


def _check_stamp(value: Any, where: str) -> dt.datetime | None:
    if value is not None and (not isinstance(value, dt.datetime) or value.utcoffset() is None):
        raise ValueError(f"{where} must be a timezone-aware datetime, got {value!r}")
    return None if value is None else value.astimezone(dt.UTC)


def action_values(action: ComplianceAction) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The ``compliance_actions`` column values of ``action`` (derived columns included) and
    its sorted, de-duplicated misconduct types.

    Raises:
        ValueError: a bad field; the message names the page id and the field.
    """
    if not isinstance(action, ComplianceAction):
        raise ValueError(f"expected a ComplianceAction, got {type(action).__name__}")
    page_id = clean_text(action.page_id, "page_id", PAGE_ID_MAX)
    where = f"compliance action {page_id!r}"

    def text(name: str, limit: int = OPTION_MAX) -> str | None:
        return clean_text(getattr(action, name), f"{where}: {name}", limit, required=False)

    organisation = text("organisation")
    summary = text("summary", SUMMARY_MAX)
    kinds = action.misconduct_types
    if isinstance(kinds, str) or not isinstance(kinds, Iterable):
        raise ValueError(f"{where}: misconduct_types must be a sequence of names, got {kinds!r}")
    misconduct = sorted(
        {
            name
            for name in (clean_text(k, f"{where}: misconduct type", OPTION_MAX) for k in kinds)
            if name is not None
        }
    )
    values = {
        "page_id": page_id,
        "notion_url": text("notion_url", URL_MAX),
        "summary": summary,
        "organisation": organisation,
        "organisation_key": normalize_organisation(organisation),
        "sector": text("sector"),
        "action_date": _check_date(action.action_date, f"{where}: action_date"),
        "action_date_end": _check_date(action.action_date_end, f"{where}: action_date_end"),
        "regulatory_body": text("regulatory_body"),
        "status": text("status"),
        "fine_cents": fine_to_cents(action.fine, f"{where}: fine"),
        "source_url": text("source_url", URL_MAX),
        "search_text": build_search_text(summary, organisation),
        "created_time": _check_stamp(action.created_time, f"{where}: created_time"),
        "last_edited_time": _check_stamp(action.last_edited_time, f"{where}: last_edited_time"),
    }
    return values, tuple(misconduct)


def row_to_action(row: Any, misconduct: Sequence[str] = ()) -> ComplianceAction:
    """A ``ComplianceAction`` from a ``compliance_actions`` row mapping and its types."""
    return to_row(
        ComplianceAction,
        row,
        fine=cents_to_fine(row["fine_cents"]),
        misconduct_types=tuple(sorted(misconduct)),
    )


def misconduct_by_page(
    conn: Connection, page_ids: Sequence[str] | None = None
) -> dict[str, list[str]]:
    """Page id -> its misconduct types, for ``page_ids`` (every page when ``None``)."""
    link = compliance_action_misconduct_types
    found: dict[str, list[str]] = {}
    batches: Iterable[Sequence[str] | None] = [None] if page_ids is None else in_batches(page_ids)
    for batch in batches:
        query = sa.select(link.c.page_id, link.c.misconduct_type)
        if batch is not None:
            query = query.where(link.c.page_id.in_(batch))
        for page_id, kind in conn.execute(query):
            found.setdefault(page_id, []).append(kind)
    return found


# --------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------


class ComplianceCatalog(CatalogBase):
    """Compliance actions of the catalog: the snapshot write, the listing and the sync state
    (see the module docstring)."""

    def replace_compliance_actions(
        self,
        actions: Iterable[ComplianceAction],
        *,
        data_source_id: str | None = None,
        force: bool = False,
        source: str = NOTION_SOURCE,
    ) -> ComplianceSyncCounts:
        """Make the table equal to ``actions`` (a full read of the tracker), in one transaction.

        Rows whose content is unchanged are not rewritten; rows not in ``actions`` are deleted
        (their page is gone or in the trash). The sync state (``compliance_sync_state``) gets
        the counts and ``synced_at`` in the same transaction. Two callers are serialised (a
        Postgres advisory lock; SQLite's ``BEGIN IMMEDIATE``).

        Args:
            actions: every live page of the tracker, already mapped.
            data_source_id: the Notion data source read, recorded in the sync state.
            force: apply even an empty read, or one that deletes more than half the rows.
            source: the sync-state row to write.

        Returns:
            The counts and ``synced_at``.

        Raises:
            ValueError: a bad action, or one page id twice with different content; nothing
                is written.
            SyncRefusedError: (unless ``force``) an empty read while the table holds rows, or
                a read that would delete more than ``MAX_DELETE_SHARE`` of them; the message
                gives the counts and the table is left as it was.
            SchemaMissingError: the table has the shape it had before the Notion sync (no
                ``page_id`` column); the message says how to replace it.
        """
        clean: dict[str, tuple[dict[str, Any], tuple[str, ...]]] = {}
        for action in actions:
            values, kinds = action_values(action)
            previous = clean.get(values["page_id"])
            if previous is not None and previous != (values, kinds):
                raise ValueError(
                    f"compliance action {values['page_id']!r} appears twice, differently"
                )
            clean[values["page_id"]] = (values, kinds)
        with self._write() as conn:
            self._advisory_lock(conn, SYNC_LOCK)
            refuse_legacy_shape(conn, "compliance_actions", "page_id", "Notion")
            stored = {
                row["page_id"]: dict(row)
                for row in conn.execute(sa.select(compliance_actions)).mappings()
            }
            stored_kinds = misconduct_by_page(conn)
            new = [k for k in clean if k not in stored]
            gone = [k for k in stored if k not in clean]
            changed = [
                k
                for k in clean
                if k in stored
                and (stored[k], tuple(sorted(stored_kinds.get(k, ())))) != clean[k]
            ]
            _guard_snapshot(len(clean), len(stored), len(gone), force)
            self._apply(conn, clean, new, changed, gone)
            now = utc_now()
            counts = ComplianceSyncCounts(
                read=len(clean),
                inserted=len(new),
                updated=len(changed),
                deleted=len(gone),
                unchanged=len(clean) - len(new) - len(changed),
                synced_at=now,
                data_source_id=data_source_id,
            )
            state = {
                "source": clean_text(source, "source", 64),
                "data_source_id": data_source_id,
                "synced_at": now,
                "rows_read": counts.read,
                "inserted": counts.inserted,
                "updated": counts.updated,
                "deleted": counts.deleted,
                "unchanged": counts.unchanged,
            }
            self._record_sync(conn, compliance_sync_state, state)
        return counts

    def _apply(
        self,
        conn: Connection,
        clean: dict[str, tuple[dict[str, Any], tuple[str, ...]]],
        new: list[str],
        changed: list[str],
        gone: list[str],
    ) -> None:
        link = compliance_action_misconduct_types
        for batch in in_batches(gone + changed):
            conn.execute(link.delete().where(link.c.page_id.in_(batch)))
        for batch in in_batches(gone):
            conn.execute(
                compliance_actions.delete().where(compliance_actions.c.page_id.in_(batch))
            )
        if changed:
            update = compliance_actions.update().where(
                compliance_actions.c.page_id == sa.bindparam("key")
            )
            conn.execute(update, [{**clean[k][0], "key": k} for k in changed])
        if new:
            conn.execute(compliance_actions.insert(), [clean[k][0] for k in new])
        kinds = [
            {"page_id": k, "misconduct_type": kind} for k in new + changed for kind in clean[k][1]
        ]
        if kinds:
            conn.execute(link.insert(), kinds)

    def list_compliance_actions(self) -> list[ComplianceAction]:
        """Every compliance action, newest ``action_date`` first (undated last), then by id."""
        query = sa.select(compliance_actions).order_by(
            compliance_actions.c.action_date.desc().nulls_last(), compliance_actions.c.page_id
        )
        with self._read() as conn:
            rows = list(conn.execute(query).mappings())
            kinds = misconduct_by_page(conn)
        return [row_to_action(r, kinds.get(r["page_id"], ())) for r in rows]

    def compliance_sync_state(self, source: str = NOTION_SOURCE) -> ComplianceSyncCounts | None:
        """The last applied sync of ``source`` (its counts and ``synced_at``), or ``None`` when
        none has been applied yet."""
        query = sa.select(compliance_sync_state).where(compliance_sync_state.c.source == source)
        with self._read() as conn:
            row = conn.execute(query).mappings().first()
        return None if row is None else to_row(ComplianceSyncCounts, row, read=row["rows_read"])


def _guard_snapshot(read: int, stored: int, would_delete: int, force: bool) -> None:
    """Raise ``SyncRefusedError`` for an empty read over stored rows, or a deletion of more
    than ``MAX_DELETE_SHARE`` of them, unless ``force``."""
    if force or stored == 0:
        return
    if read == 0:
        raise SyncRefusedError(
            f"refusing an empty read: the tracker returned 0 pages but compliance_actions holds "
            f"{stored} rows, which would all be deleted. Check the token's access and the data "
            "source id; if the tracker really is empty, re-run with force.",
            read=read,
            stored=stored,
            would_delete=would_delete,
        )
    if would_delete > stored * MAX_DELETE_SHARE:
        raise SyncRefusedError(
            f"refusing to delete {would_delete} of {stored} stored rows (more than "
            f"{MAX_DELETE_SHARE:.0%}): the tracker returned {read} pages. If those pages really "
            "were deleted or moved to the trash, re-run with force.",
            read=read,
            stored=stored,
            would_delete=would_delete,
        )
