"""Catalog role: the documents and the catalog's other tables, in one SQL database (SQLite
or Postgres) through SQLAlchemy 2 Core.

* ``documents.py``: the ``documents`` table, ``DocumentRow`` and its lifecycle.
* ``versions.py``: the ``document_versions`` table, each document's version history and the
  switch from one served version to the next.
* ``editions.py``: documents linked as editions of one series (``documents.edition_of``) and
  the previous issue a version or edition is compared with (issue 27).
* ``requests.py``: the two intake queues and the reference sources.
* ``aer.py``: AER retail statistics, their sync and the totals check; ``aer_search.py``:
  their search with exact counts and totals.
* ``compliance.py``: enforcement actions from the Notion tracker, the sync's snapshot write;
  ``compliance_search.py``: their search with exact counts and totals.
* ``obligations.py``: the obligations register (issue 26), written by the ``obligations``
  asset, searched with exact counts.
* ``changes.py``: what changed in each version against its previous issue (issue 27),
  written by the ``changes`` asset.
* ``common.py``: the shared ``MetaData``, input checks, ``CatalogBase``, and the steps the
  market-data syncs and searches share (``SearchResult``, filter and limit checks).

Engines, error translation and ``apply_sql_files`` live in ``kb_shared.stores.sql``. The
same ``CATALOG_METADATA`` creates the schema on both backends; ``sql/001_catalog.sql`` is
that DDL written out for DBAs, and ``tests/stores/test_sql_files.py`` proves the two agree.
"""

from __future__ import annotations

from kb_shared.stores.catalog.changes import (
    ChangeCatalog,
    ChangeReads,
    ChangeSetRow,
    StoredChangeSet,
    change_sets,
    document_changes,
)
from kb_shared.stores.catalog.common import CATALOG_METADATA, FAILURE_REASON_MAX, URL_MAX
from kb_shared.stores.catalog.compliance import (
    ComplianceAction,
    ComplianceCatalog,
    ComplianceSyncCounts,
    compliance_action_misconduct_types,
    compliance_actions,
    compliance_sync_state,
)
from kb_shared.stores.catalog.compliance_search import (
    ComplianceSearchCatalog,
    ComplianceSearchResult,
    Facet,
    FacetValue,
)
from kb_shared.stores.catalog.documents import (
    DOCUMENT_STATUSES,
    DocumentStatus,
    NAME_MAX,
    DocumentCatalog,
    DocumentReads,
    DocumentRow,
    deleting_message,
    documents,
    duplicate_message,
    ensure_deleting_status,
)
from kb_shared.stores.catalog.editions import EditionCatalog, EditionReads, series_ids
from kb_shared.stores.catalog.versions import (
    VERSION_STATUSES,
    DocumentVersionRow,
    ServingState,
    VersionCatalog,
    VersionReads,
    VersionStatus,
    document_versions,
    new_version_waits,
    serving_version,
)
from kb_shared.stores.catalog.aer import (
    AerCatalog,
    AerSyncCounts,
    AerTotalMismatch,
    AerTotalsCheck,
    aer_metrics,
    aer_performance,
    aer_sync_state,
)
from kb_shared.stores.catalog.aer_search import (
    AerMetricInfo,
    AerPeriod,
    AerPeriodTotal,
    AerSearchCatalog,
    AerSearchResult,
    AerVocabulary,
)
from kb_shared.stores.catalog.obligations import (
    ObligationCatalog,
    ObligationReads,
    ObligationRow,
    ObligationSearchResult,
    obligations,
)
from kb_shared.stores.catalog.requests import (
    DEFAULT_MAX_PENDING,
    DESCRIPTION_MAX,
    REASON_MAX,
    REQUEST_STATUSES,
    TITLE_MAX,
    DocumentRequestRow,
    ReferenceRequestRow,
    ReferenceSourceRow,
    RequestCatalog,
    document_requests,
    reference_requests,
    reference_sources,
    title_key,
)


class CatalogReader(
    EditionReads,
    DocumentReads,
    VersionReads,
    AerSearchCatalog,
    ComplianceSearchCatalog,
    ObligationReads,
    ChangeReads,
):
    """The read-only catalog: the documents' reads and the market-data searches, nothing that
    writes. The MCP server holds its catalog as this type (``kb_shared.stores.readers``), so
    "read-only" is stated by the types as well as by the ``kb_reader`` database role.
    """


class Catalog(
    CatalogReader,
    DocumentCatalog,
    EditionCatalog,
    VersionCatalog,
    RequestCatalog,
    AerCatalog,
    ComplianceCatalog,
    ObligationCatalog,
    ChangeCatalog,
):
    """The catalog store over one SQLAlchemy engine (SQLite or Postgres): every method of
    ``CatalogReader`` plus the writes of ``DocumentCatalog``, ``EditionCatalog``,
    ``VersionCatalog``, ``RequestCatalog``, ``AerCatalog``, ``ComplianceCatalog`` and
    ``ChangeCatalog``.

    The constructor does no I/O. ``ensure_schema()`` creates the catalog tables (the factory
    and ``kb db init`` also create the SQL graph's); ``close()`` disposes the engine's pool.
    Every method runs in its own transaction and returns frozen dataclasses.

    Errors (all methods):
        StoreUnavailableError: the database cannot be reached (message has the URL, password
            hidden).
        StoreError: the schema is missing ("run `kb db init`") or the role lacks a privilege.
    """


__all__ = [
    "CATALOG_METADATA",
    "DEFAULT_MAX_PENDING",
    "DESCRIPTION_MAX",
    "DOCUMENT_STATUSES",
    "DocumentStatus",
    "FAILURE_REASON_MAX",
    "NAME_MAX",
    "REASON_MAX",
    "REQUEST_STATUSES",
    "TITLE_MAX",
    "URL_MAX",
    "VERSION_STATUSES",
    "AerCatalog",
    "AerMetricInfo",
    "AerPeriod",
    "AerPeriodTotal",
    "AerSearchCatalog",
    "AerSearchResult",
    "AerSyncCounts",
    "AerTotalMismatch",
    "AerTotalsCheck",
    "AerVocabulary",
    "Catalog",
    "CatalogReader",
    "ChangeCatalog",
    "ChangeReads",
    "ChangeSetRow",
    "ComplianceAction",
    "ComplianceCatalog",
    "ComplianceSearchCatalog",
    "ComplianceSearchResult",
    "ComplianceSyncCounts",
    "DocumentCatalog",
    "DocumentReads",
    "DocumentRequestRow",
    "DocumentRow",
    "DocumentVersionRow",
    "EditionCatalog",
    "EditionReads",
    "Facet",
    "FacetValue",
    "ObligationCatalog",
    "ObligationReads",
    "ObligationRow",
    "ObligationSearchResult",
    "ReferenceRequestRow",
    "ReferenceSourceRow",
    "ServingState",
    "StoredChangeSet",
    "RequestCatalog",
    "VersionCatalog",
    "VersionReads",
    "VersionStatus",
    "aer_metrics",
    "aer_performance",
    "aer_sync_state",
    "compliance_action_misconduct_types",
    "compliance_actions",
    "change_sets",
    "compliance_sync_state",
    "document_changes",
    "document_requests",
    "deleting_message",
    "document_versions",
    "documents",
    "duplicate_message",
    "series_ids",
    "ensure_deleting_status",
    "reference_requests",
    "reference_sources",
    "new_version_waits",
    "obligations",
    "serving_version",
    "title_key",
]
