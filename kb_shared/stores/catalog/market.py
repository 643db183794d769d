"""Market data kept beside the documents: regulatory enforcement actions
(``compliance_actions``) and what energy retailers reported to the AER (``aer_performance``,
``aer_metrics``).

``aer_performance`` holds one value per (schedule, retailer, jurisdiction, fuel, metric,
period); all six are NOT NULL so the UNIQUE constraint cannot be dodged with NULLs. Money and
statistics are exact ``Decimal``s. Tables: the mcp-utilities README (``compliance_actions``,
``aer_performance``).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from kb_shared.stores.catalog.common import (
    CATALOG_METADATA,
    URL_MAX,
    CatalogBase,
    clean_text,
    to_row,
)
from kb_shared.stores.sql import UtcDateTime, utc_now

#: Scale (digits after the point) of money and statistic values; see ``_to_decimal``.
PENALTY_SCALE = 2
AER_VALUE_SCALE = 6

compliance_actions = sa.Table(
    "compliance_actions",
    CATALOG_METADATA,
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("entity_name", sa.Text, nullable=False),
    sa.Column("regulator", sa.Text),
    sa.Column("action_type", sa.Text),
    sa.Column("penalty_amount", sa.Numeric(18, PENALTY_SCALE)),
    sa.Column("currency", sa.String(3)),
    sa.Column("action_date", sa.Date),
    sa.Column("status", sa.Text),
    sa.Column("summary", sa.Text),
    sa.Column("url", sa.String(URL_MAX)),
    sa.Column("source", sa.String(64), nullable=False),
    sa.Column("last_edited", UtcDateTime()),
    sa.Column("synced_at", UtcDateTime(), nullable=False),
    sa.CheckConstraint("penalty_amount >= 0", name="ck_compliance_actions_penalty_amount"),
    sa.CheckConstraint("length(currency) = 3", name="ck_compliance_actions_currency"),
    sa.CheckConstraint("length(id) >= 1", name="ck_compliance_actions_id"),
)

_AER_KEY = ("schedule", "retailer", "jurisdiction", "fuel", "metric", "period")

aer_performance = sa.Table(
    "aer_performance",
    CATALOG_METADATA,
    sa.Column("id", sa.Integer, sa.Identity(), primary_key=True),
    sa.Column("schedule", sa.String(32), nullable=False),
    sa.Column("retailer", sa.Text, nullable=False),
    sa.Column("jurisdiction", sa.String(64), nullable=False),
    sa.Column("fuel", sa.String(32), nullable=False),
    sa.Column("metric", sa.Text, nullable=False),
    sa.Column("period", sa.String(32), nullable=False),
    sa.Column("value", sa.Numeric(20, AER_VALUE_SCALE)),
    sa.Column("unit", sa.String(64)),
    sa.Column("source_file", sa.Text),
    sa.UniqueConstraint(*_AER_KEY, name="uq_aer_performance_key"),
)

aer_metrics = sa.Table(
    "aer_metrics",
    CATALOG_METADATA,
    sa.Column("metric", sa.Text, primary_key=True),
    sa.Column("schedule", sa.String(32), nullable=False),
    sa.Column("description", sa.Text),
    sa.Column("unit", sa.String(64)),
)


@dataclass(frozen=True, slots=True)
class ComplianceActionRow:
    """One regulatory enforcement action, keyed by its source row id (e.g. a Notion page id).

    ``penalty_amount`` is a non-negative ``Decimal`` in ``currency`` (ISO 4217 code, 3
    letters), rounded half-even to cents; ``action_date`` a date; ``last_edited`` the source's
    edit time and ``synced_at`` when kb wrote the row (both aware UTC). ``synced_at`` may be
    left ``None`` on input: ``upsert_compliance_actions`` stamps it.
    """

    id: str
    entity_name: str
    source: str
    regulator: str | None = None
    action_type: str | None = None
    penalty_amount: Decimal | None = None
    currency: str | None = None
    action_date: dt.date | None = None
    status: str | None = None
    summary: str | None = None
    url: str | None = None
    last_edited: dt.datetime | None = None
    synced_at: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class AerRow:
    """One reported AER retail performance figure: ``value`` (a ``Decimal`` rounded half-even
    to 6 places, or ``None`` when the cell was blank) of ``metric`` for one retailer,
    jurisdiction, fuel and period (e.g. ``"2024-Q3"``) in one schedule (``"2"``/``"3"``/``"4"``).
    """

    schedule: str
    retailer: str
    jurisdiction: str
    fuel: str
    metric: str
    period: str
    value: Decimal | None = None
    unit: str | None = None
    source_file: str | None = None


@dataclass(frozen=True, slots=True)
class AerMetric:
    """A metric's vocabulary entry: which schedule reports it, what it means, its unit."""

    metric: str
    schedule: str
    description: str | None = None
    unit: str | None = None


def _to_decimal(value: Any, field: str, scale: int) -> Decimal | None:
    """A ``Decimal`` rounded half-even to ``scale`` places (the column's scale; Postgres would
    round the same way on insert). Floats go through ``str`` so ``0.1`` stays ``0.1``."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"{field} must be a number, got {value!r}")
    try:
        number = Decimal(str(value)) if isinstance(value, (int, float, str)) else Decimal(value)
    except (InvalidOperation, TypeError, ValueError) as exc:
        raise ValueError(f"{field} must be a number, got {value!r}") from exc
    if not number.is_finite():
        raise ValueError(f"{field} must be finite, got {value!r}")
    return number.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_EVEN)


def _as(cls: type[Any], raw: Any) -> Any:
    if isinstance(raw, cls):
        return raw
    if isinstance(raw, Mapping):
        try:
            return cls(**raw)
        except TypeError as exc:
            raise ValueError(f"bad {cls.__name__} fields: {exc}") from exc
    raise ValueError(f"expected {cls.__name__} or a mapping, got {type(raw).__name__}")


def _compliance_values(item: ComplianceActionRow, now: dt.datetime) -> dict[str, Any]:
    row_id = clean_text(item.id, "id", 200)
    where = f"compliance action {row_id!r}"
    currency = clean_text(item.currency, f"{where}: currency", 3, required=False)
    if currency is not None:
        if not re.fullmatch(r"[A-Za-z]{3}", currency):
            raise ValueError(
                f"{where}: currency must be a 3-letter ISO 4217 code, got {currency!r}"
            )
        currency = currency.upper()
    amount = _to_decimal(item.penalty_amount, f"{where}: penalty_amount", PENALTY_SCALE)
    if amount is not None and amount < 0:
        raise ValueError(f"{where}: penalty_amount cannot be negative, got {amount}")
    if item.action_date is not None and (
        not isinstance(item.action_date, dt.date) or isinstance(item.action_date, dt.datetime)
    ):
        raise ValueError(f"{where}: action_date must be a date, got {item.action_date!r}")
    for name in ("last_edited", "synced_at"):
        stamp = getattr(item, name)
        if stamp is not None and (not isinstance(stamp, dt.datetime) or stamp.utcoffset() is None):
            raise ValueError(f"{where}: {name} must be a timezone-aware datetime, got {stamp!r}")
    return {
        "id": row_id,
        "entity_name": clean_text(item.entity_name, f"{where}: entity_name", 10_000),
        "regulator": clean_text(item.regulator, "regulator", 10_000, required=False),
        "action_type": clean_text(item.action_type, "action_type", 10_000, required=False),
        "penalty_amount": amount,
        "currency": currency,
        "action_date": item.action_date,
        "status": clean_text(item.status, "status", 10_000, required=False),
        "summary": clean_text(item.summary, "summary", 100_000, required=False),
        "url": clean_text(item.url, f"{where}: url", URL_MAX, required=False),
        "source": clean_text(item.source, f"{where}: source", 64),
        "last_edited": item.last_edited,
        "synced_at": item.synced_at or now,
    }


class MarketCatalog(CatalogBase):
    """Compliance actions and AER statistics of the catalog (see the module docstring)."""

    def _upsert_many(
        self, conn: Connection, table: sa.Table, rows: list[dict[str, Any]], key: Sequence[str]
    ) -> None:
        if not rows:
            return
        stmt = self._insert(table)
        update = {
            c.name: stmt.excluded[c.name]
            for c in table.c
            if c.name not in key and not c.primary_key
        }
        conn.execute(stmt.on_conflict_do_update(index_elements=list(key), set_=update), rows)

    def upsert_compliance_actions(
        self,
        rows: Iterable[ComplianceActionRow | Mapping[str, Any]],
        *,
        prune: bool = False,
    ) -> int:
        """Insert or update compliance actions by ``id``, all in one transaction.

        Args:
            rows: ``ComplianceActionRow`` objects or mappings with its field names.
            prune: also delete the rows of the same ``source`` whose id is not in ``rows`` (a
                full re-sync). An empty ``rows`` never prunes anything.

        Returns:
            The number of rows written.

        Raises:
            ValueError: a bad row (message names its id); an id given twice with different
                content. Nothing is written then.
        """
        now = utc_now()
        clean: dict[str, dict[str, Any]] = {}
        for raw in rows:
            item = _as(ComplianceActionRow, raw)
            values = _compliance_values(item, now)
            previous = clean.get(values["id"])
            if previous is not None and previous != values:
                raise ValueError(f"compliance action {values['id']!r} appears twice, differently")
            clean[values["id"]] = values
        with self._write() as conn:
            self._upsert_many(conn, compliance_actions, list(clean.values()), ["id"])
            if prune and clean:
                for source in {v["source"] for v in clean.values()}:
                    keep = [k for k, v in clean.items() if v["source"] == source]
                    conn.execute(
                        compliance_actions.delete().where(
                            compliance_actions.c.source == source,
                            compliance_actions.c.id.not_in(keep),
                        )
                    )
        return len(clean)

    def list_compliance_actions(self) -> list[ComplianceActionRow]:
        """Every compliance action, newest action date first (undated last), then by id."""
        query = sa.select(compliance_actions).order_by(
            compliance_actions.c.action_date.desc().nulls_last(), compliance_actions.c.id
        )
        with self._read() as conn:
            return [to_row(ComplianceActionRow, r) for r in conn.execute(query)]

    def upsert_aer_rows(
        self,
        rows: Iterable[AerRow | Mapping[str, Any]],
        metrics: Iterable[AerMetric | Mapping[str, Any]] = (),
    ) -> int:
        """Insert or update AER figures by (schedule, retailer, jurisdiction, fuel, metric,
        period), and metric descriptions by metric, in one transaction.

        Returns:
            The number of figure rows written.

        Raises:
            ValueError: an empty key field, a non-numeric value, or one key given twice with
                different values. Nothing is written then.
        """
        clean: dict[tuple[str, ...], dict[str, Any]] = {}
        for raw in rows:
            item = _as(AerRow, raw)
            values = {
                **{k: clean_text(getattr(item, k), k, 1000) for k in _AER_KEY},
                "value": _to_decimal(item.value, "value", AER_VALUE_SCALE),
                "unit": clean_text(item.unit, "unit", 64, required=False),
                "source_file": clean_text(item.source_file, "source_file", 4096, required=False),
            }
            key = tuple(values[k] for k in _AER_KEY)
            if key in clean and clean[key] != values:
                raise ValueError(f"AER figure {key} appears twice with different values")
            clean[key] = values
        metric_rows: dict[str, dict[str, Any]] = {}
        for raw in metrics:
            item_m = _as(AerMetric, raw)
            metric_rows[item_m.metric] = {
                "metric": clean_text(item_m.metric, "metric", 1000),
                "schedule": clean_text(item_m.schedule, "schedule", 32),
                "description": clean_text(
                    item_m.description, "description", 10_000, required=False
                ),
                "unit": clean_text(item_m.unit, "unit", 64, required=False),
            }
        with self._write() as conn:
            self._upsert_many(conn, aer_metrics, list(metric_rows.values()), ["metric"])
            self._upsert_many(conn, aer_performance, list(clean.values()), _AER_KEY)
        return len(clean)

    def list_aer_rows(self) -> list[AerRow]:
        """Every AER figure, ordered by its key."""
        query = sa.select(aer_performance).order_by(*(aer_performance.c[k] for k in _AER_KEY))
        with self._read() as conn:
            return [to_row(AerRow, r) for r in conn.execute(query)]

    def list_aer_metrics(self) -> list[AerMetric]:
        """Every AER metric description, ordered by metric."""
        with self._read() as conn:
            rows = conn.execute(sa.select(aer_metrics).order_by(aer_metrics.c.metric))
            return [to_row(AerMetric, r) for r in rows]
