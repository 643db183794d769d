"""What energy retailers reported to the AER: the ``aer_performance`` table (one row per
published figure, with its cell of origin), ``aer_metrics`` (every heading each metric key
has had), ``aer_sync_state``, the sync that writes them and the check of published totals.

A sync takes workbooks parsed by ``kb_shared.market.aer_layout.read_workbook``. Each release
republishes the previous four quarters, possibly revised, and the latest release wins
(``../shared/notes/next-capabilities.md``): for every (schedule, quarter) a sync replaces the
stored figures with those of the newest release it was given, unless a newer release is
already stored, and leaves identical rows untouched, so re-syncing a workbook changes nothing.
A metric the newer release does not publish at all keeps the figures an older release gave
it: a heading reworded with no alias in ``aer_metrics.METRIC_ALIASES`` is a new metric key,
and deleting the old key's republished quarters would leave a question asked with the old
heading over those quarters with nothing (issue 25, "Exact market figures"). So the newest
release is chosen per metric key among those publishing it, and the stored figures are the
same whichever order the releases are synced in, one by one or together. The search over
these tables is ``aer_search.py``.
"""

from __future__ import annotations

import datetime as dt
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, fields
from decimal import Decimal
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from kb_shared.market.aer import (
    NATIONAL,
    VALUE_SCALE,
    AerHeading,
    AerObservation,
    AerWorkbook,
    Quarter,
    stored_value,
)
from kb_shared.market.aer_metrics import KEY_MAX, normalize_heading
from kb_shared.stores.catalog.common import (
    CATALOG_METADATA,
    CatalogBase,
    SyncCounts,
    refuse_legacy_shape,
    sync_count_columns,
    to_row,
)
from kb_shared.stores.sql import UtcDateTime, in_batches, utc_now

#: The ``aer_sync_state`` row the AER sync writes.
AER_SOURCE = "aer"
#: Advisory-lock key (Postgres) that serialises two AER syncs; any fixed 64-bit constant.
SYNC_LOCK = zlib.crc32(b"kb.catalog.aer_sync")
#: The columns that identify a figure (with the schedule and the quarter).
KEY_COLUMNS = ("metric_key", "fuel", "customer_type", "jurisdiction", "retailer")

aer_performance = sa.Table(
    "aer_performance",
    CATALOG_METADATA,
    sa.Column("id", sa.Integer, sa.Identity(), primary_key=True),
    sa.Column("schedule", sa.String(8), nullable=False),
    sa.Column("metric_key", sa.String(KEY_MAX), nullable=False),
    sa.Column("fuel", sa.String(32), nullable=False),
    sa.Column("customer_type", sa.String(32), nullable=False),
    sa.Column("jurisdiction", sa.String(32), nullable=False),
    sa.Column("retailer", sa.Text, nullable=False),
    sa.Column("is_total", sa.Boolean, nullable=False),
    sa.Column("period", sa.String(16), nullable=False),
    sa.Column("period_start", sa.Date, nullable=False),
    sa.Column("period_end", sa.Date, nullable=False),
    sa.Column("heading", sa.Text, nullable=False),
    sa.Column("value", sa.Numeric(28, VALUE_SCALE), nullable=False),
    sa.Column("source_file", sa.Text, nullable=False),
    sa.Column("sheet", sa.String(64), nullable=False),
    sa.Column("cell", sa.String(16), nullable=False),
    sa.Column("release", sa.String(16), nullable=False),
    sa.Column("release_end", sa.Date, nullable=False),
    # the jurisdiction block's column-A cells ("A11:A14"); '' on rows synced before 007
    sa.Column("block", sa.String(32), nullable=False, server_default=""),
    sa.UniqueConstraint("schedule", "period_start", *KEY_COLUMNS, name="uq_aer_performance_key"),
    sa.CheckConstraint("period_end >= period_start", name="ck_aer_performance_period"),
)
sa.Index("ix_aer_performance_metric", aer_performance.c.metric_key, aer_performance.c.period_start)

aer_metrics = sa.Table(
    "aer_metrics",
    CATALOG_METADATA,
    sa.Column("schedule", sa.String(8), primary_key=True),
    sa.Column("heading", sa.Text, primary_key=True),
    sa.Column("metric_key", sa.String(KEY_MAX), nullable=False),
    sa.Column("normalized_heading", sa.Text, nullable=False),
    sa.Column("additive", sa.Boolean, nullable=False),
    sa.Column("aliased", sa.Boolean, nullable=False),
    sa.Column("first_seen", sa.String(16), nullable=False),
    sa.Column("first_seen_end", sa.Date, nullable=False),
    sa.Column("last_seen", sa.String(16), nullable=False),
    sa.Column("last_seen_end", sa.Date, nullable=False),
)

aer_sync_state = sa.Table(
    "aer_sync_state",
    CATALOG_METADATA,
    sa.Column("source", sa.String(64), primary_key=True),
    sa.Column("synced_at", UtcDateTime(), nullable=False),
    sa.Column("releases", sa.Text, nullable=False),
    sa.Column("files", sa.Integer, nullable=False),
    *sync_count_columns(),
    sa.Column("new_metrics", sa.Integer, nullable=False),
)

_ROW_COLUMNS = tuple(c.name for c in aer_performance.columns if c.name != "id")


@dataclass(frozen=True, slots=True)
class AerSyncCounts(SyncCounts):
    """What one ``sync_aer`` did.

    ``read``: observations in the workbooks given; ``inserted``/``updated``/``deleted``/
    ``unchanged``: rows of ``aer_performance`` (an update is any changed field, the cell or
    release included; ``values_changed`` counts those whose value changed; ``unchanged``
    includes an older release's rows of a metric the newer release no longer publishes,
    which are kept); ``superseded``:
    observations not applied because a newer release of their quarter was given or stored.
    ``new_metrics``: one heading per metric key not stored before (``aliased`` False means
    nobody mapped it: a new metric, or a renamed one to add to the alias table);
    ``new_headings``: new wordings of keys already stored. ``releases``: the release labels
    given, oldest first.
    """

    superseded: int
    values_changed: int
    new_metrics: tuple[AerHeading, ...]
    new_headings: tuple[AerHeading, ...]
    releases: tuple[str, ...]
    files: int
    synced_at: dt.datetime


@dataclass(frozen=True, slots=True)
class AerTotalMismatch:
    """A published total that does not match what it totals.

    ``kind`` "retailers": a ``<Region> Total`` against the sum of its block's retailers;
    "jurisdictions": ``National Total`` against the sum of the other regions' totals.
    ``tolerance`` is half a unit per addend and for the total itself (each may be rounded).
    """

    kind: str
    schedule: str
    metric_key: str
    fuel: str
    customer_type: str
    jurisdiction: str
    period: str
    published: Decimal
    computed: Decimal
    addends: int
    tolerance: Decimal
    source_file: str
    sheet: str
    cell: str
    release: str

    @property
    def message(self) -> str:
        """One line naming the cell and both numbers."""
        what = "its retailers" if self.kind == "retailers" else "the jurisdictions' totals"
        return (
            f"{self.source_file} · {self.sheet}!{self.cell}: {self.jurisdiction} total of "
            f"{self.metric_key} ({self.fuel}, {self.customer_type}, {self.period}) is "
            f"{self.published.normalize():f} but {what} sum to {self.computed.normalize():f} "
            f"({self.addends} values; tolerance {self.tolerance.normalize():f})"
        )


@dataclass(frozen=True, slots=True)
class AerTotalsCheck:
    """``checked`` totals of additive metrics compared; the ``failures``."""

    checked: int
    failures: tuple[AerTotalMismatch, ...]

    @property
    def passed(self) -> bool:
        """True when every checked total matched."""
        return not self.failures


def observation_values(obs: AerObservation) -> dict[str, Any]:
    """The ``aer_performance`` row of an observation (without ``id``): its fields under their
    own names, the value as stored (``stored_value``) and the release's last day."""
    values = {f.name: getattr(obs, f.name) for f in fields(obs)}
    values["value"] = stored_value(obs.value)
    values["release_end"] = Quarter.parse(obs.release).end
    return values


def observation_from_row(row: Any) -> AerObservation:
    """An ``AerObservation`` from an ``aer_performance`` row mapping."""
    return to_row(AerObservation, row, is_total=bool(row["is_total"]))


def _row_key(values: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(values[c] for c in KEY_COLUMNS)


def published_keys(workbooks: Iterable[AerWorkbook]) -> dict[tuple[str, str], set[str]]:
    """(schedule, release label) -> the metric keys of every heading that release's
    workbooks of that schedule publish (with figures or not)."""
    keys: dict[tuple[str, str], set[str]] = {}
    for book in workbooks:
        slot = keys.setdefault((book.schedule, book.release.label), set())
        slot.update(h.metric_key for h in book.headings)
    return keys


#: (schedule, quarter start): the rows of one quarter of one schedule, keyed by ``_row_key``.
_Scope = tuple[str, dt.date]


@dataclass(frozen=True, slots=True)
class _Batch:
    """What a sync was given, per (schedule, quarter): ``rows`` to apply, each metric key's
    from the newest release given that publishes the key; ``covering`` the releases given
    with figures of that quarter; ``published`` as ``published_keys``."""

    rows: dict[_Scope, dict[tuple[Any, ...], dict[str, Any]]]
    covering: dict[_Scope, set[Quarter]]
    published: dict[tuple[str, str], set[str]]

    def publishes(self, schedule: str, release: Quarter, key: str) -> bool:
        """Whether the given release's workbooks of ``schedule`` publish ``key`` (a release
        whose headings are unknown publishes every key)."""
        keys = self.published.get((schedule, release.label))
        return not keys or key in keys

    def winner(self, scope: _Scope, key: str) -> Quarter | None:
        """The newest release given that has figures of the quarter and publishes ``key``."""
        return max((r for r in self.covering.get(scope, ()) if self.publishes(scope[0], r, key)),
                   default=None)


def _select_newest(workbooks: list[AerWorkbook]) -> tuple[_Batch, int]:
    """The rows to apply, per (schedule, quarter start) and metric key those of the newest
    release given that publishes the key (a metric a newer release no longer publishes keeps
    an older one's figures, however the releases are batched); and how many observations
    older releases in the batch had for those quarters and keys.

    Raises:
        ValueError: one figure twice in the applied release with different values.
    """
    covering: dict[_Scope, set[Quarter]] = {}
    for book in workbooks:
        for obs in book.observations:
            covering.setdefault((obs.schedule, obs.period_start), set()).add(book.release)
    batch = _Batch({}, covering, published_keys(workbooks))
    winners: dict[tuple[_Scope, str], Quarter | None] = {}
    superseded = 0
    for book in workbooks:
        for obs in book.observations:
            scope = (obs.schedule, obs.period_start)
            slot = (scope, obs.metric_key)
            if slot not in winners:
                winners[slot] = batch.winner(scope, obs.metric_key)
            if book.release != winners[slot]:
                superseded += 1
                continue
            values = observation_values(obs)
            rows = batch.rows.setdefault(scope, {})
            key = _row_key(values)
            previous = rows.get(key)
            if previous is not None and previous["value"] != values["value"]:
                raise ValueError(
                    f"release {book.release.label} gives two values for one figure: "
                    f"{previous['value']} in {previous['source_file']} · {previous['sheet']}!"
                    f"{previous['cell']} and {values['value']} in {obs.provenance}"
                )
            rows.setdefault(key, values)
    return batch, superseded


class AerCatalog(CatalogBase):
    """The AER tables of the catalog: the sync, the totals check and full listings (see the
    module docstring)."""

    def sync_aer(self, workbooks: Iterable[AerWorkbook]) -> AerSyncCounts:
        """Store the observations of parsed workbooks, all in one transaction.

        For each (schedule, quarter) and metric key, the newest release among ``workbooks``
        that publishes the key replaces what is stored (rows it lacks are deleted; an older
        release's rows of a key no given release publishes stay, counted ``unchanged``)
        unless the store already holds a newer release publishing it; identical rows are left
        as they are. Every
        heading seen is recorded in ``aer_metrics`` with the first and last release it
        appeared in; ``aer_sync_state`` gets the counts and ``synced_at``.

        Raises:
            ValueError: no workbooks, or one figure given twice by the same release with
                different values. Nothing is written then.
            SchemaMissingError: the tables have their shape from before this sync existed.
        """
        books = list(workbooks)
        if not books:
            raise ValueError("no AER workbooks to sync")
        batch, superseded = _select_newest(books)
        read = sum(len(b.observations) for b in books)
        with self._write() as conn:
            self._advisory_lock(conn, SYNC_LOCK)
            for table, column in (("aer_performance", "metric_key"), ("aer_metrics", "heading")):
                refuse_legacy_shape(conn, table, column, "AER")
            changes = _apply_scopes(conn, batch)
            new_metrics, new_headings = _record_headings(conn, books)
            now = utc_now()
            releases = tuple(q.label for q in sorted({b.release for b in books}))
            counts = AerSyncCounts(
                read=read,
                inserted=changes["inserted"],
                updated=changes["updated"],
                deleted=changes["deleted"],
                unchanged=changes["unchanged"],
                superseded=superseded + changes["superseded"],
                values_changed=changes["values_changed"],
                new_metrics=new_metrics,
                new_headings=new_headings,
                releases=releases,
                files=len(books),
                synced_at=now,
            )
            state = {
                "source": AER_SOURCE,
                "synced_at": now,
                "releases": ", ".join(releases),
                "files": counts.files,
                "rows_read": read,
                "inserted": counts.inserted,
                "updated": counts.updated,
                "deleted": counts.deleted,
                "unchanged": counts.unchanged,
                "new_metrics": len(new_metrics),
            }
            self._record_sync(conn, aer_sync_state, state)
        return counts

    def list_aer_observations(self) -> list[AerObservation]:
        """Every stored figure, ordered by schedule, quarter and key."""
        query = sa.select(aer_performance).order_by(
            aer_performance.c.schedule,
            aer_performance.c.period_start,
            *(aer_performance.c[c] for c in KEY_COLUMNS),
        )
        with self._read() as conn:
            return [observation_from_row(r) for r in conn.execute(query).mappings()]

    def check_aer_totals(self, *, unit: Decimal = Decimal(1)) -> AerTotalsCheck:
        """Compare every stored ``<Region> Total`` of an additive metric with the sum of its
        retailers, and every ``National Total`` with the sum of the other regions' totals.

        Rates and averages (metrics not ``additive`` in ``aer_metrics``) are not sums and are
        skipped. A total matches when it is within ``unit``/2 x (addends + 1) of the sum:
        every published value may be rounded to ``unit``.
        """
        half = unit / 2
        failures: list[AerTotalMismatch] = []
        checked = 0
        with self._read() as conn:
            for kind, rows in (("retailers", _retailer_sums(conn)),
                               ("jurisdictions", _jurisdiction_sums(conn))):
                for row in rows:
                    checked += 1
                    published = stored_value(Decimal(row["value"]))
                    computed = stored_value(Decimal(row["computed"] or 0))
                    tolerance = half * (row["addends"] + 1)
                    if abs(published - computed) > tolerance:
                        failures.append(
                            AerTotalMismatch(
                                kind=kind,
                                schedule=row["schedule"],
                                metric_key=row["metric_key"],
                                fuel=row["fuel"],
                                customer_type=row["customer_type"],
                                jurisdiction=row["jurisdiction"],
                                period=row["period"],
                                published=published,
                                computed=computed,
                                addends=row["addends"],
                                tolerance=tolerance,
                                source_file=row["source_file"],
                                sheet=row["sheet"],
                                cell=row["cell"],
                                release=row["release"],
                            )
                        )
        return AerTotalsCheck(checked=checked, failures=tuple(failures))


def _stored_spans(conn: Connection) -> dict[tuple[str, str], list[tuple[dt.date, dt.date]]]:
    """(schedule, metric key) -> the (first, last) release ends of each heading stored for it:
    the releases taken to publish the key, for releases synced before."""
    spans: dict[tuple[str, str], list[tuple[dt.date, dt.date]]] = {}
    query = sa.select(aer_metrics.c.schedule, aer_metrics.c.metric_key,
                      aer_metrics.c.first_seen_end, aer_metrics.c.last_seen_end)
    for schedule, key, first, last in conn.execute(query):
        spans.setdefault((schedule, key), []).append((first, last))
    return spans


def _apply_scopes(conn: Connection, batch: _Batch) -> dict[str, int]:
    """Diff each (schedule, quarter) of ``batch`` against the stored rows, metric key by
    metric key, and write inserts, updates and deletes.

    For a key, the newest release publishing it wins: the given one (``_Batch.winner``), or
    a stored newer one (its rows of the key in the quarter, or a heading of the key seen over
    its release in ``aer_metrics``), and then the given rows of the key are superseded. Stored
    rows of a key no given release of the quarter publishes are kept (counted unchanged when
    older than the newest release given, as before).
    """
    changes = dict.fromkeys(
        ("inserted", "updated", "deleted", "unchanged", "superseded", "values_changed"), 0
    )
    if not batch.rows:
        return changes
    stored: dict[_Scope, dict[tuple[Any, ...], dict[str, Any]]] = {}
    query = sa.select(aer_performance).where(
        aer_performance.c.schedule.in_({s for s, _ in batch.covering}),
        aer_performance.c.period_start.in_({p for _, p in batch.covering}),
    )
    for row in conn.execute(query).mappings():
        scope = (row["schedule"], row["period_start"])
        if scope in batch.covering:
            values = dict(row)
            values["value"] = stored_value(Decimal(values["value"]))
            values["is_total"] = bool(values["is_total"])
            stored.setdefault(scope, {})[_row_key(values)] = values
    spans = _stored_spans(conn)
    inserts: list[dict[str, Any]] = []
    updates: list[dict[str, Any]] = []
    deletes: list[int] = []
    for scope in batch.covering:
        newest_given = max(batch.covering[scope]).end
        current = stored.get(scope, {})
        stored_releases = {(r["release"], r["release_end"]) for r in current.values()}
        stored_keys = {(r["metric_key"], r["release"]) for r in current.values()}
        by_key: dict[str, tuple[dict[Any, Any], dict[Any, Any]]] = {}  # key: (given, stored)
        for key, values in batch.rows.get(scope, {}).items():
            by_key.setdefault(values["metric_key"], ({}, {}))[0][key] = values
        for key, row in current.items():
            by_key.setdefault(row["metric_key"], ({}, {}))[1][key] = row
        for metric_key, (rows, old_rows) in by_key.items():
            given = batch.winner(scope, metric_key)
            if given is None:  # no release given for this quarter publishes the key: kept
                changes["unchanged"] += sum(r["release_end"] < newest_given
                                            for r in old_rows.values())
                continue
            if any(end > given.end and ((metric_key, label) in stored_keys or any(
                    first <= end <= last for first, last in spans.get((scope[0], metric_key), ())))
                   for label, end in stored_releases):
                changes["superseded"] += len(rows)  # a newer release stored publishes it
                continue
            for key, values in rows.items():
                old = old_rows.get(key)
                if old is None:
                    inserts.append(values)
                elif any(old[c] != values[c] for c in _ROW_COLUMNS):
                    updates.append({"_id": old["id"], **values})
                    changes["values_changed"] += old["value"] != values["value"]
                else:
                    changes["unchanged"] += 1
            deletes += [row["id"] for key, row in old_rows.items() if key not in rows]
    if inserts:
        conn.execute(aer_performance.insert(), inserts)
    if updates:
        stmt = (
            aer_performance.update()
            .where(aer_performance.c.id == sa.bindparam("_id"))
            .values({c: sa.bindparam(c) for c in _ROW_COLUMNS})
        )
        conn.execute(stmt, updates)
    for batch_ids in in_batches(deletes):
        conn.execute(aer_performance.delete().where(aer_performance.c.id.in_(batch_ids)))
    changes.update(inserted=len(inserts), updated=len(updates), deleted=len(deletes))
    return changes


def _record_headings(
    conn: Connection, books: list[AerWorkbook]
) -> tuple[tuple[AerHeading, ...], tuple[AerHeading, ...]]:
    """Upsert every (schedule, heading) seen with its first and last release; return the
    headings of keys new to the store and the new wordings of known keys."""
    seen: dict[tuple[str, str], tuple[AerHeading, Quarter, Quarter]] = {}
    for book in books:
        for heading in book.headings:
            slot = (heading.schedule, heading.heading)
            if slot in seen:
                _, first, last = seen[slot]
                seen[slot] = (heading, min(first, book.release), max(last, book.release))
            else:
                seen[slot] = (heading, book.release, book.release)
    stored = {(r["schedule"], r["heading"]): dict(r)
              for r in conn.execute(sa.select(aer_metrics)).mappings()}
    known_keys = {(r["schedule"], r["metric_key"]) for r in stored.values()}
    new_metrics: list[AerHeading] = []
    new_headings: list[AerHeading] = []
    for slot, (heading, first, last) in sorted(seen.items()):
        old = stored.get(slot)
        if old is not None:
            first = min(first, Quarter.parse(old["first_seen"]))
            last = max(last, Quarter.parse(old["last_seen"]))
        values = {
            "metric_key": heading.metric_key,
            "normalized_heading": normalize_heading(heading.heading),
            "additive": heading.additive,
            "aliased": heading.aliased,
            "first_seen": first.label,
            "first_seen_end": first.end,
            "last_seen": last.label,
            "last_seen_end": last.end,
        }
        if old is None:
            conn.execute(aer_metrics.insert().values(schedule=slot[0], heading=slot[1], **values))
            key = (heading.schedule, heading.metric_key)
            (new_headings if key in known_keys else new_metrics).append(heading)
            known_keys.add(key)
        elif any(old[c] != v for c, v in values.items()):
            conn.execute(aer_metrics.update().where(
                aer_metrics.c.schedule == slot[0], aer_metrics.c.heading == slot[1]
            ).values(**values))
    return tuple(new_metrics), tuple(new_headings)


def _additive_keys() -> sa.Select[Any]:
    return sa.select(aer_metrics.c.schedule, aer_metrics.c.metric_key).where(
        aer_metrics.c.additive
    )


def _total_columns(total: Any) -> list[Any]:
    return [total.c[c] for c in ("id", "schedule", "metric_key", "fuel", "customer_type",
                                 "jurisdiction", "period", "value", "source_file", "sheet",
                                 "cell", "release")]


def _retailer_sums(conn: Connection) -> list[Any]:
    """Each stored total of an additive metric with the sum and count of its retailers."""
    total, part = aer_performance.alias("total"), aer_performance.alias("part")
    same = [total.c[c] == part.c[c] for c in ("schedule", "metric_key", "fuel",
                                              "customer_type", "jurisdiction", "period_start")]
    columns = _total_columns(total)
    query = (
        sa.select(*columns, sa.func.sum(part.c.value).label("computed"),
                  sa.func.count(part.c.id).label("addends"))
        .select_from(total.outerjoin(part, sa.and_(*same, sa.not_(part.c.is_total))))
        .where(total.c.is_total,
               sa.tuple_(total.c.schedule, total.c.metric_key).in_(_additive_keys()))
        .group_by(*columns)
        .order_by(total.c.id)
    )
    return list(conn.execute(query).mappings())


def _jurisdiction_sums(conn: Connection) -> list[Any]:
    """Each stored National Total of an additive metric with the sum and count of the other
    regions' totals (none: not checked)."""
    national, region = aer_performance.alias("national"), aer_performance.alias("region")
    same = [national.c[c] == region.c[c] for c in ("schedule", "metric_key", "fuel",
                                                   "customer_type", "period_start")]
    columns = _total_columns(national)
    query = (
        sa.select(*columns, sa.func.sum(region.c.value).label("computed"),
                  sa.func.count(region.c.id).label("addends"))
        .select_from(national.join(region, sa.and_(
            *same, region.c.is_total, region.c.jurisdiction != NATIONAL
        )))
        .where(national.c.is_total, national.c.jurisdiction == NATIONAL,
               sa.tuple_(national.c.schedule, national.c.metric_key).in_(_additive_keys()))
        .group_by(*columns)
        .order_by(national.c.id)
    )
    return list(conn.execute(query).mappings())
