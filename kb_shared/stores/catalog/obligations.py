"""The ``obligations`` table: the obligations register (issue 26), one row per obligation of
one document version (a sentence binding two parties is two rows), written whole by the
``obligations`` asset and searched with exact counts by ``search_obligations``.

Rows are filed under the version's key (``identity.version_key``) like points and edges, so a
new version's register is built beside the served one; searches name the served keys
(``kb_mcp.documents.serving_keys``). Matching rules of ``search_obligations``:

* ``party``: read by ``obligation_sentences.party_filter`` ("the retailers" is "Retailer"),
  then equal to the normalised role, or a phrase inside the party as the document names it,
  ignoring case ("retailer" finds role ``Retailer`` and "Solar Retailers").
* ``modality``: one of ``kb_shared.compliance.obligations.MODALITIES``.
* ``query``: every word (``query_words``) appears in the obligation's sentence, ignoring case.
* ``has_deadline``: a deadline or condition was found (``True``) or not (``False``).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from kb_shared.errors import QueryError
from kb_shared.compliance.obligation_sentences import party_filter
from kb_shared.compliance.obligations import MODALITIES, Obligation, ObligationStatement
from kb_shared.stores.catalog.common import CATALOG_METADATA, CatalogBase, clean_filters, to_row

#: Obligations listed per call by default, and at most; ``count`` always covers every match.
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
#: Longest text filter accepted, in characters.
FILTER_MAX = 500
#: Longest stored sentence and action, in characters (a clause longer than this is cut).
TEXT_MAX = 4000

obligations = sa.Table(
    "obligations",
    CATALOG_METADATA,
    sa.Column("version_key", sa.String(140), primary_key=True),
    sa.Column("number", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("doc_id", sa.String(120), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("party", sa.Text, nullable=False),
    sa.Column("role", sa.String(100)),
    sa.Column("modality", sa.String(20), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("action", sa.Text, nullable=False),
    sa.Column("deadline", sa.Text),
    sa.Column("reference", sa.String(100)),
    sa.Column("page", sa.Integer),
    sa.Column("chunk_id", sa.String(400), nullable=False),
    sa.Column("heading", sa.Text, nullable=False, server_default=""),
    sa.CheckConstraint("number >= 1", name="ck_obligations_number"),
    sa.CheckConstraint(
        "modality IN (" + ", ".join(f"'{m}'" for m in MODALITIES) + ")",
        name="ck_obligations_modality",
    ),
    sa.CheckConstraint("page IS NULL OR page >= 1", name="ck_obligations_page"),
)
sa.Index("ix_obligations_doc_id", obligations.c.doc_id)

#: A query word: a clause number kept whole ("4.2", "3.1.5": its parts "4" and "2" are in
#: any sentence with a figure), else a run of letters and digits.
_WORD = re.compile(r"\d+(?:\.\d+)+|[0-9a-z]+")


@dataclass(frozen=True, slots=True)
class ObligationRow(ObligationStatement):
    """One stored obligation: ``ObligationStatement``'s fields, then where it is filed
    (``doc_id``, ``version``, ``version_key``), ``number``, its 1-based place in its
    document's reading order, and ``Obligation``'s ``page`` and ``chunk_id``. ``heading`` is
    the heading path joined with " › " ("" when none)."""

    doc_id: str
    version: int
    version_key: str
    number: int
    page: int | None
    chunk_id: str
    heading: str


@dataclass(frozen=True, slots=True)
class ObligationSearchResult:
    """What ``search_obligations`` returns.

    Attributes:
        rows: the matches from ``offset``, at most ``limit``, ordered by document (doc_id),
            then reading order.
        count: every match, counted in SQL.
        by_party: matches per party (the role, else the party as named; names that differ only
            in case counted as one), most first.
        by_document: matches per doc_id, most first.
        offset: the offset asked for; ``next_offset`` the one that continues (``None`` at
            the end).
        filters: the filters given, as checked.
    """

    rows: tuple[ObligationRow, ...]
    count: int
    by_party: tuple[tuple[str, int], ...]
    by_document: tuple[tuple[str, int], ...]
    offset: int
    limit: int
    filters: dict[str, Any]

    @property
    def next_offset(self) -> int | None:
        """The offset of the next page, ``None`` when these rows reach the last match."""
        end = self.offset + len(self.rows)
        return end if end < self.count else None


def query_words(query: str) -> list[str]:
    """The words of a ``query`` filter: clause numbers whole, else lower-case ``[0-9a-z]``
    runs, each matched anywhere in the sentence (so "notif" finds "notify" and
    "notification"). ``"clause 4.2 notify"`` -> ``["clause", "4.2", "notify"]``."""
    return _WORD.findall(query.lower())


class ObligationReads(CatalogBase):
    """Reads of the obligations register (the MCP server's side)."""

    def search_obligations(
        self,
        keys: Collection[str],
        *,
        party: str | None = None,
        modality: str | None = None,
        query: str | None = None,
        has_deadline: bool | None = None,
        offset: int = 0,
        limit: int = DEFAULT_LIMIT,
    ) -> ObligationSearchResult:
        """Every obligation filed under ``keys`` (served version keys) matching the filters
        (module docstring), with the exact count and counts by party and document.

        Raises:
            QueryError: an unknown modality, a filter that is not text or too long, a bad
                ``offset`` (a whole number ≥ 0) or ``limit`` (1 to ``MAX_LIMIT``).
        """
        texts = clean_filters({"party": party, "modality": modality, "query": query}, FILTER_MAX)
        if texts["modality"] is not None:
            texts["modality"] = texts["modality"].lower()
            if texts["modality"] not in MODALITIES:
                raise QueryError(
                    f"modality must be one of {', '.join(MODALITIES)}; got {modality!r}"
                )
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise QueryError(f"offset must be a whole number of at least 0, got {offset!r}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise QueryError(f"limit must be a whole number from 1 to {MAX_LIMIT}, got {limit!r}")
        if has_deadline is not None and not isinstance(has_deadline, bool):
            raise QueryError(f"has_deadline must be true or false, got {has_deadline!r}")
        where: list[sa.ColumnElement[bool]] = [obligations.c.version_key.in_(sorted(keys))]
        if texts["party"] is not None:
            wanted = party_filter(texts["party"]).lower()
            where.append(sa.or_(
                sa.func.lower(obligations.c.role) == wanted,
                sa.func.lower(obligations.c.party).contains(wanted, autoescape=True),
            ))
        if texts["modality"] is not None:
            where.append(obligations.c.modality == texts["modality"])
        for word in query_words(texts["query"] or ""):
            where.append(sa.func.lower(obligations.c.text).contains(word, autoescape=True))
        if has_deadline is not None:
            where.append(
                obligations.c.deadline.is_not(None) if has_deadline
                else obligations.c.deadline.is_(None)
            )
        party_key = sa.func.coalesce(obligations.c.role, obligations.c.party)
        with self._read() as conn:
            count = conn.execute(
                sa.select(sa.func.count()).select_from(obligations).where(*where)
            ).scalar_one()
            rows = conn.execute(
                sa.select(obligations).where(*where)
                .order_by(obligations.c.doc_id, obligations.c.number)
                .offset(offset).limit(limit)
            ).all()
            shown = sa.func.min(party_key)  # "You" and "you" are one party, shown once
            by_party = conn.execute(
                sa.select(shown, sa.func.count()).where(*where)
                .group_by(sa.func.lower(party_key)).order_by(sa.func.count().desc(), shown)
            ).all()
            by_document = conn.execute(
                sa.select(obligations.c.doc_id, sa.func.count()).where(*where)
                .group_by(obligations.c.doc_id)
                .order_by(sa.func.count().desc(), obligations.c.doc_id)
            ).all()
        return ObligationSearchResult(
            rows=tuple(to_row(ObligationRow, r) for r in rows),
            count=count,
            by_party=tuple((str(k), int(n)) for k, n in by_party),
            by_document=tuple((str(k), int(n)) for k, n in by_document),
            offset=offset,
            limit=limit,
            filters={
                name: value for name, value in
                {**texts, "has_deadline": has_deadline}.items() if value is not None
            },
        )

    def obligation_count(self, version_key: str) -> int:
        """How many obligations are filed under ``version_key``."""
        with self._read() as conn:
            return conn.execute(
                sa.select(sa.func.count()).select_from(obligations)
                .where(obligations.c.version_key == version_key)
            ).scalar_one()


class ObligationCatalog(CatalogBase):
    """Writes of the obligations register (the ``obligations`` asset's side)."""

    def replace_obligations(
        self, doc_id: str, version: int, version_key: str, found: Sequence[Obligation]
    ) -> int:
        """File ``found`` (one version's obligations, in reading order, numbered from 1) under
        ``version_key``, replacing what was filed there, in one transaction: a failure leaves
        the earlier rows. Returns the number of rows written.

        Raises:
            ValueError: an obligation with an unknown modality or a page below 1 (nothing is
                written).
        """
        values = [_values(doc_id, version, version_key, n, ob) for n, ob in enumerate(found, 1)]
        with self._write() as conn:
            conn.execute(obligations.delete().where(obligations.c.version_key == version_key))
            if values:
                conn.execute(obligations.insert(), values)
        return len(values)

    def delete_obligations(
        self, *, doc_id: str | None = None, version_key: str | None = None
    ) -> int:
        """Remove the obligations of every version of ``doc_id`` (``kb delete``) or of one
        ``version_key`` (a version no longer served). Returns the rows removed.

        Raises:
            ValueError: neither or both given.
        """
        if (doc_id is None) == (version_key is None):
            raise ValueError("give doc_id or version_key, not both or neither")
        column = obligations.c.doc_id if doc_id is not None else obligations.c.version_key
        with self._write() as conn:
            return conn.execute(
                obligations.delete().where(column == (doc_id or version_key))
            ).rowcount


def _values(doc_id: str, version: int, key: str, number: int, ob: Obligation) -> dict[str, Any]:
    if ob.modality not in MODALITIES:
        raise ValueError(f"obligation {number}: unknown modality {ob.modality!r}")
    if ob.page is not None and ob.page < 1:
        raise ValueError(f"obligation {number}: page {ob.page} is below 1")
    return {
        "doc_id": doc_id,
        "version": version,
        "version_key": key,
        "number": number,
        "party": ob.party[:TEXT_MAX],
        "role": ob.role,
        "modality": ob.modality,
        "text": ob.text[:TEXT_MAX],
        "action": ob.action[:TEXT_MAX],
        "deadline": ob.deadline,
        "reference": (ob.reference or None) and ob.reference[:100],
        "page": ob.page,
        "chunk_id": ob.chunk_id,
        "heading": " › ".join(ob.heading_path),
    }
