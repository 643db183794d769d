"""The two market-data assets: ``aer_performance`` (the AER's retail-performance workbooks)
and ``compliance_actions`` (the Notion compliance tracker), each a full sync into the catalog
table of the same name.

Neither is partitioned: each run reads the whole source and applies it in one transaction,
so re-running changes nothing. An asset whose source is not configured materialises nothing:
its step succeeds, logs a warning and records an ``AssetObservation`` whose ``skipped``
metadata names the setting to set, and its checks do not run (a schedule firing without
configuration is a skipped run, not a failure).
"""

# No `from __future__ import annotations` in asset, op and sensor modules: Dagster reads the
# parameter annotations as classes when it decorates them, to find config and resources.

import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from kb_assets.constants import AER_PERFORMANCE, COMPLIANCE_ACTIONS, MARKET_DATA_GROUP
from kb_assets.market.resources import NotionResource
from kb_assets.resources import StoresResource
from kb_shared.errors import (
    AerReleasePageError,
    AerWorkbookError,
    FetchError,
    NotionSchemaError,
    NotionSyncError,
    SyncRefusedError,
)
from kb_shared.market.aer import AerWorkbook
from kb_shared.market.aer_layout import find_workbooks, read_workbook
from kb_shared.market.aer_source import download_release
from kb_shared.market.notion import NotionSyncResult, sync_notion
from kb_shared.settings import Settings
from kb_shared.stores.catalog import AerSyncCounts

#: Materialisation metadata keys (the UI shows them; the CLI table and the checks read them).
ROWS_READ = "rows_read"
ROWS_INSERTED = "rows_inserted"
ROWS_UPDATED = "rows_updated"
ROWS_DELETED = "rows_deleted"
ROWS_UNCHANGED = "rows_unchanged"
SECONDS = "seconds"
SYNCED_AT = "synced_at"
NEW_METRICS = "new_metrics"
NEW_METRIC_LIST = "new_metric_list"
RELEASES = "releases"
#: Metadata key of the observation a skipped sync records: why, and which setting to set.
SKIPPED = "skipped"

#: Text that starts like ``scheme://``: a URL, not a path.
URL_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")

#: The message of an AER sync with no source.
AER_UNCONFIGURED = (
    "no AER source: set KB_AER_SOURCE to an AER retail-performance workbook (.xlsx/.xlsm), "
    "a folder of them or the https URL of a release page, or give sources "
    "(`kb sync aer SOURCE`, or `sources` in the run config)"
)


class AerSyncConfig(dg.Config):
    """Run config of ``aer_performance``."""

    sources: list[str] = Field(
        default_factory=list,
        description=(
            "Workbook files or folders on the server (e.g. /data/aer/2025-26-q3), or the https "
            "URL of a release page whose workbooks are downloaded; empty = the KB_AER_SOURCE "
            "setting."
        ),
    )


class NotionSyncConfig(dg.Config):
    """Run config of ``compliance_actions``."""

    force: bool = Field(
        False,
        description=(
            "Apply even an empty read, or one that deletes more than half the stored rows "
            "(refused otherwise, leaving the table as it was)."
        ),
    )


def row_counts(counts: AerSyncCounts | NotionSyncResult) -> dict[str, int]:
    """The ``rows_*`` materialisation metadata of a sync (read, inserted, updated, deleted,
    unchanged)."""
    return {
        ROWS_READ: counts.read,
        ROWS_INSERTED: counts.inserted,
        ROWS_UPDATED: counts.updated,
        ROWS_DELETED: counts.deleted,
        ROWS_UNCHANGED: counts.unchanged,
    }


def market_asset(
    name: str, *, kinds: set[str], description: str
) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """``@dg.asset`` for a market-data sync: not partitioned, in ``MARKET_DATA_GROUP``, its
    output optional (a skipped sync materialises nothing; see the module docstring)."""
    return dg.asset(
        name=name,
        group_name=MARKET_DATA_GROUP,
        kinds=kinds,
        output_required=False,
        description=description,
    )


def notion_unconfigured(missing: Sequence[str]) -> str:
    """The message of a Notion sync missing the variables ``missing``."""
    them = "them" if len(missing) > 1 else "it"
    return f"the Notion sync needs {' and '.join(missing)}: set {them} (README, settings table)"


def skip(context: dg.AssetExecutionContext, asset: str, reason: str) -> dg.AssetObservation:
    """Log ``reason`` and return the observation that records it on ``asset``'s page (see the
    module docstring: a skipped sync materialises nothing)."""
    context.log.warning("%s skipped: %s", asset, reason)
    return dg.AssetObservation(asset_key=asset, metadata={SKIPPED: reason})


def aer_sources(configured: Sequence[str], setting: str | None) -> list[str]:
    """The sources of a sync: those of the run config, else ``KB_AER_SOURCE``; blanks
    dropped (empty: nothing configured)."""
    given = [s.strip() for s in configured if s.strip()]
    if given:
        return given
    return [setting.strip()] if setting and setting.strip() else []


#: Downloads a release page's workbooks into a folder: ``(url, folder) -> paths``.
ReleaseDownloader = Callable[[str, Path], list[Path]]


def release_downloader(settings: Settings) -> ReleaseDownloader:
    """The production downloader: ``download_release`` under
    ``FetchPolicy.from_settings(settings)`` (no address is ever exempt)."""
    return partial(download_release, settings=settings)


#: How the sync gets its release-page downloader from the settings. A module attribute so
#: that tests can point it at their local HTTPS server (an injected resolver and test CA);
#: no setting can, so production always uses ``release_downloader``.
downloader_for: Callable[[Settings], ReleaseDownloader] = release_downloader


def workbook_paths(
    sources: Sequence[str], folder: Path | None = None, settings: Settings | None = None
) -> list[Path]:
    """Every workbook the sources name (a file, the workbooks directly in a folder, or those
    a release page URL links, downloaded into ``folder`` through ``downloader_for``), each
    once, in the order given.

    Raises:
        ValueError: a file that is not a workbook, a folder without one, or a URL when no
            ``folder`` and ``settings`` are given to download into.
        AerReleasePageError: a release page that links no workbook (or two under one name).
        FetchError: a page or workbook download refused or failed (its reason in the message).
        FileNotFoundError: a path that does not exist.
    """
    paths: dict[Path, None] = {}
    for number, source in enumerate(sources):
        if URL_PATTERN.match(source):
            if folder is None or settings is None:
                raise ValueError(f"{source} is a URL: no folder was given to download it into")
            into = folder / str(number)
            into.mkdir()
            found = downloader_for(settings)(source, into)
        else:
            found = find_workbooks(source)
        for path in found:
            paths.setdefault(path.resolve(), None)
    return list(paths)


def read_all(paths: Sequence[Path]) -> tuple[list[AerWorkbook], list[str]]:
    """Read every workbook; returns the workbooks read and one message per refused file
    (file, sheet and cell named; see ``read_workbook``). Every file is read, so one run
    reports every refusal."""
    books: list[AerWorkbook] = []
    refused: list[str] = []
    for path in paths:
        try:
            books.append(read_workbook(path))
        except AerWorkbookError as error:
            refused.append(str(error))
        except OSError as error:
            refused.append(f"{path.name}: cannot be read ({error.strerror or error})")
    return books, refused


@market_asset(
    AER_PERFORMANCE,
    kinds={"excel"},
    description=(
        "The AER's retail performance statistics (Schedules 2, 3, 4, 6): every figure of the "
        "workbooks at KB_AER_SOURCE (or the run's `sources`: files, folders, or a release "
        "page URL whose workbooks are downloaded through kb's safe fetcher), mapped from the "
        "layout, into the catalog (latest release wins; re-syncing changes nothing). Skipped when no "
        "source is set. A workbook that does not fit the layout fails the run and nothing "
        "is written: a run applies all of its workbooks or none."
    ),
)
def aer_performance(
    context: dg.AssetExecutionContext, config: AerSyncConfig, stores: StoresResource
) -> Iterator[dg.MaterializeResult | dg.AssetObservation]:
    """Read every workbook of the sources, then apply them with ``Catalog.sync_aer``.

    All or nothing: when any workbook is refused the run fails listing each refusal (file,
    sheet, cell) and nothing is written, not even the workbooks that were read, so the
    store never holds part of a release. Metadata: ``rows_*`` (read, inserted, updated,
    deleted, unchanged), ``values_changed``, ``superseded``, ``new_metrics`` (+ the list),
    ``releases``, ``files``, ``not_reported`` cells, ``seconds``, ``synced_at``.

    Raises:
        dagster.Failure: a missing source, a release page without workbooks, a refused or
            failed download (the fetcher's reason), a refused workbook, or one figure given
            twice with different values; nothing written.
    """
    sources = aer_sources(config.sources, stores.settings.aer_source)
    if not sources:
        yield skip(context, AER_PERFORMANCE, AER_UNCONFIGURED)
        return
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kb-aer-") as folder:
        try:
            paths = workbook_paths(sources, Path(folder), stores.settings)
        except FetchError as error:
            raise dg.Failure(
                description=f"download of {error.url} {error}", allow_retries=False
            ) from error
        except (AerReleasePageError, ValueError, OSError) as error:
            raise dg.Failure(description=str(error), allow_retries=False) from error
        books, refused = read_all(paths)
    if refused:
        raise dg.Failure(
            description=(
                f"{len(refused)} of {len(paths)} workbook(s) do not fit the AER layout; nothing "
                "was written (a run applies all of its workbooks or none). Fix or remove the "
                "file and run again:\n" + "\n".join(f"- {line}" for line in refused)
            ),
            metadata={"files": len(paths), "refused": len(refused), "rows_written": 0},
            allow_retries=False,
        )
    try:
        counts = stores.catalog().sync_aer(books)
    except ValueError as error:
        raise dg.Failure(
            description=f"{error}; nothing was written", allow_retries=False
        ) from error
    for heading in counts.new_metrics:
        context.log.info(
            "new metric %s (schedule %s) from heading %r%s", heading.metric_key,
            heading.schedule, heading.heading,
            "" if heading.aliased else " (unmapped: if it renames a metric, add it to "
            "aer_metrics.METRIC_ALIASES)",
        )
    new_metrics = [
        {"schedule": h.schedule, "metric_key": h.metric_key, "heading": h.heading,
         "aliased": h.aliased}
        for h in counts.new_metrics
    ]
    yield dg.MaterializeResult(
        metadata={
            "sources": ", ".join(sources),
            "files": counts.files,
            RELEASES: ", ".join(counts.releases),
            **row_counts(counts),
            "values_changed": counts.values_changed,
            "superseded": counts.superseded,
            "not_reported": sum(b.not_reported for b in books),
            NEW_METRICS: len(counts.new_metrics),
            NEW_METRIC_LIST: dg.MetadataValue.json(new_metrics),
            "new_headings": len(counts.new_headings),
            SECONDS: round(time.perf_counter() - started, 3),
            SYNCED_AT: dg.MetadataValue.timestamp(counts.synced_at),
        }
    )


@market_asset(
    COMPLIANCE_ACTIONS,
    kinds={"notion"},
    description=(
        "The Notion compliance tracker (Summary, Organisation, Date, Regulatory Body, Status, "
        "Fine, ...): a full read of the data source, applied as one snapshot (pages gone or "
        "in the trash are deleted). Refuses an empty read or one deleting more than half "
        "the rows unless `force`. Skipped when NOTION_TOKEN or KB_NOTION_DATA_SOURCE_ID is "
        "unset."
    ),
)
def compliance_actions(
    context: dg.AssetExecutionContext,
    config: NotionSyncConfig,
    stores: StoresResource,
    notion: NotionResource,
) -> Iterator[dg.MaterializeResult | dg.AssetObservation]:
    """Read the whole tracker and apply it with ``sync_notion`` (written last, in one
    transaction: a failure leaves the previous snapshot whole).

    Metadata: ``rows_*`` (read, inserted, updated, deleted, unchanged), ``trashed`` pages
    seen, ``requests`` made, ``data_source_id``, ``force``, ``seconds``, ``synced_at``.

    Raises:
        dagster.Failure: the read failed, a property was renamed or re-typed (named in the
            message), or the read was refused (empty, or deleting more than half) with its
            counts; nothing written.
    """
    missing = notion.missing_settings()
    if missing:
        yield skip(context, COMPLIANCE_ACTIONS, notion_unconfigured(missing))
        return
    try:
        result = sync_notion(stores.catalog(), notion.tracker(), force=config.force)
    except SyncRefusedError as error:
        raise dg.Failure(
            description=(
                f"{error} (`kb sync notion --force`, or force: true in the run config)"
            ),
            metadata={ROWS_READ: error.read, "rows_stored": error.stored,
                      "would_delete": error.would_delete},
            allow_retries=False,
        ) from error
    except NotionSchemaError as error:
        raise dg.Failure(description=str(error), allow_retries=False) from error
    except NotionSyncError as error:
        raise dg.Failure(description=str(error)) from error
    yield dg.MaterializeResult(
        metadata={
            "data_source_id": result.data_source_id,
            **row_counts(result),
            "trashed": result.trashed,
            "requests": result.requests,
            "force": config.force,
            SECONDS: round(result.seconds, 3),
            SYNCED_AT: dg.MetadataValue.timestamp(result.synced_at),
        }
    )
