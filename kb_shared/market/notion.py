"""The Notion compliance-tracker sync: read every page of the tracker through the Notion API
(``notion-client``, API 2025-09-03), map it, and apply it to ``compliance_actions`` as one
snapshot.

* **Reading** (``NotionTracker``): ``POST /v1/data_sources/{id}/query`` page by page
  (``has_more``/``next_cursor``, 100 results a page) until the end. A database id is accepted:
  when the query answers 404 (or 400) for it, ``GET /v1/databases/{id}`` gives its
  ``data_sources[].id``. Pages in the trash (``in_trash`` or ``archived``) are skipped, so
  the snapshot write deletes their rows.
* **Retries**: notion-client retries 429 but not 5xx on a POST (its ``_can_retry``), and not
  529, so its retries are off and one policy (tenacity) applies: HTTP 429, 500, 502, 503, 504
  and 529, timeouts and dropped connections are retried up to ``MAX_RETRIES`` times, waiting
  what ``Retry-After`` asks (Notion API reference, "Request limits": 429 carries it, in
  seconds) or else backing off exponentially with jitter. No request rate is hard-coded.
  A ``Retry-After`` longer than ``RETRY_AFTER_MAX_S`` ends the sync instead of retrying early.
* **Writing** (``sync_notion``): the schema is checked on the first page, every page is
  mapped, and only then ``Catalog.replace_compliance_actions`` writes, in one transaction,
  last: a failure anywhere leaves the previous snapshot whole.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import notion_client
import tenacity
from notion_client.client import ClientOptions
from notion_client.errors import HTTPResponseError, RequestTimeoutError

from kb_shared.errors import NotionSyncError
from kb_shared.market.notion_schema import check_schema, is_trashed, page_to_action
from kb_shared.retry_after import retry_after_seconds
from kb_shared.settings import Settings
from kb_shared.stores.catalog.common import SyncCounts
from kb_shared.stores.catalog.compliance import ComplianceCatalog

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The Notion API version kb speaks (data sources; ``in_trash`` beside ``archived``).
NOTION_VERSION = "2025-09-03"
#: Results per query page: Notion's maximum (API reference, "Pagination").
PAGE_SIZE = 100
#: Retries after the first attempt of one request.
MAX_RETRIES = 5
#: Statuses worth retrying: rate limited (429), server errors, and 529 "overloaded"
#: (../shared/notes/next-capabilities.md, "Notion": 429 and 529 carry Retry-After).
RETRYABLE_STATUS: frozenset[int] = frozenset({429, 500, 502, 503, 504, 529})
#: Longest ``Retry-After`` waited for (seconds); a longer one ends the sync with a message.
RETRY_AFTER_MAX_S = 120.0
#: Backoff without ``Retry-After``: first wait, cap and jitter (seconds).
BACKOFF_INITIAL_S = 1.0
BACKOFF_MAX_S = 30.0
BACKOFF_JITTER_S = 1.0
#: Per-request timeout (seconds).
TIMEOUT_S = 30.0
#: Query pages read before giving up on a cursor that never ends (a million rows).
MAX_QUERY_PAGES = 10_000


@dataclass(frozen=True, slots=True)
class TrackerRead:
    """A full read of the tracker: ``pages`` (live page objects, one per id, as Notion sent
    them), ``trashed`` pages skipped (in the trash or archived), ``other`` results skipped
    (not pages, e.g. a child data source), and the ``requests`` (query pages) it took."""

    data_source_id: str
    pages: tuple[Mapping[str, Any], ...]
    trashed: int
    other: int
    requests: int


@dataclass(frozen=True, slots=True)
class NotionSyncResult(SyncCounts):
    """What ``sync_notion`` did: the counts of the snapshot write (``read`` live pages, of
    which ``inserted``/``updated``/``unchanged``; ``deleted`` rows gone from the tracker),
    ``trashed`` pages seen in the trash, the ``requests`` made to read, the data source read,
    ``synced_at`` (aware UTC) and ``seconds`` taken (read + write)."""

    data_source_id: str
    trashed: int
    requests: int
    synced_at: dt.datetime
    seconds: float


def missing_notion_settings(settings: Settings) -> list[str]:
    """The environment variables the Notion sync needs that are unset (``NOTION_TOKEN``,
    ``KB_NOTION_DATA_SOURCE_ID``); empty when it can run."""
    missing = []
    if settings.notion_token is None or not settings.notion_token.get_secret_value().strip():
        missing.append("NOTION_TOKEN")
    if not (settings.notion_data_source_id or "").strip():
        missing.append("KB_NOTION_DATA_SOURCE_ID")
    return missing


def _status(exc: BaseException) -> int | None:
    return exc.status if isinstance(exc, HTTPResponseError) else None


def _hinted(exc: BaseException | None) -> float | None:
    return retry_after_seconds(exc.headers) if isinstance(exc, HTTPResponseError) else None


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, HTTPResponseError):
        hinted = _hinted(exc)
        return exc.status in RETRYABLE_STATUS and (hinted is None or hinted <= RETRY_AFTER_MAX_S)
    return isinstance(exc, (RequestTimeoutError, httpx.TransportError))


class _WaitRetryAfter(tenacity.wait.wait_base):
    """``Retry-After`` when the response has one, else exponential backoff with jitter."""

    def __init__(self) -> None:
        self._backoff = tenacity.wait_exponential_jitter(
            initial=BACKOFF_INITIAL_S, max=BACKOFF_MAX_S, jitter=BACKOFF_JITTER_S
        )

    def __call__(self, retry_state: tenacity.RetryCallState) -> float:
        outcome = retry_state.outcome
        hinted = _hinted(outcome.exception() if outcome is not None else None)
        return hinted if hinted is not None else self._backoff(retry_state)


class NotionTracker:
    """A client for one tracker data source: resolves a database id, reads every page.

    Args:
        token: the integration token (``NOTION_TOKEN``); never logged or put in messages.
        data_source_id: the tracker's data source id, or its database id.
        api_url: API root (``KB_NOTION_API_URL``), without ``/v1``.
        http_client: an ``httpx.Client`` to send through (tests inject a mock transport);
            default: notion-client's own, closed by ``close()``.
        sleep: how to wait between retries (tests pass a recorder); default ``time.sleep``.
        max_retries: retries after the first attempt of each request.

    Raises:
        NotionSyncError: (constructor) an empty token or id.
    """

    def __init__(
        self,
        token: str,
        data_source_id: str,
        *,
        api_url: str = "https://api.notion.com",
        http_client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        max_retries: int = MAX_RETRIES,
    ) -> None:
        if not token or not token.strip():
            raise NotionSyncError("NOTION_TOKEN is empty: set it to the integration's token")
        if not data_source_id or not data_source_id.strip():
            raise NotionSyncError(
                "KB_NOTION_DATA_SOURCE_ID is empty: set it to the tracker's data source id "
                "(or its database id)"
            )
        self._configured_id = data_source_id.strip()
        self._sleep = sleep
        self._max_retries = max_retries
        self._owns_http = http_client is None
        options = ClientOptions(
            auth=token.strip(),
            base_url=api_url.rstrip("/"),
            timeout_ms=int(TIMEOUT_S * 1000),
            notion_version=NOTION_VERSION,
            retry=False,
            logger=logging.getLogger(f"{__name__}.client"),
            log_level=logging.WARNING,
        )
        self._client = notion_client.Client(options, client=http_client)

    @classmethod
    def from_settings(cls, settings: Settings, **kwargs: Any) -> NotionTracker:
        """A tracker client from ``NOTION_TOKEN``, ``KB_NOTION_DATA_SOURCE_ID`` and
        ``KB_NOTION_API_URL``; ``kwargs`` as the constructor's.

        Raises:
            NotionSyncError: a required setting is unset (the message names it).
        """
        missing = missing_notion_settings(settings)
        if missing:
            raise NotionSyncError(
                f"the Notion sync needs {' and '.join(missing)}: set "
                f"{'them' if len(missing) > 1 else 'it'} (see the README's settings table)"
            )
        assert settings.notion_token is not None and settings.notion_data_source_id
        return cls(
            settings.notion_token.get_secret_value(),
            settings.notion_data_source_id,
            api_url=settings.notion_api_url,
            **kwargs,
        )

    def close(self) -> None:
        """Close the HTTP connections (only those this object opened)."""
        if self._owns_http:
            self._client.close()

    def __enter__(self) -> NotionTracker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- requests -------------------------------------------------------------------------
    def _call(self, what: str, request: Callable[[], T]) -> T:
        """Run one API request under the retry policy; translate its final failure."""
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(_retryable),
            stop=tenacity.stop_after_attempt(self._max_retries + 1),
            wait=_WaitRetryAfter(),
            sleep=self._sleep,
            reraise=True,
            before_sleep=lambda state: log.warning(
                "Notion: could not %s (%s); retry %d of %d in %.1f s",
                what,
                _describe_brief(state.outcome.exception() if state.outcome else None),
                state.attempt_number,
                self._max_retries,
                state.upcoming_sleep,
            ),
        )
        try:
            return retrying(request)
        except (HTTPResponseError, RequestTimeoutError, httpx.TransportError) as exc:
            raise NotionSyncError(self._explain(what, exc)) from exc
        except ValueError as exc:  # a 2xx answer that is not JSON (response.json())
            raise NotionSyncError(
                f"Notion's answer when trying to {what} was not JSON ({exc}); is "
                "KB_NOTION_API_URL the Notion API? Nothing was written."
            ) from exc

    def _explain(self, what: str, exc: BaseException) -> str:
        status = _status(exc)
        ident = self._configured_id
        if status == 401:
            return (
                f"Notion refused NOTION_TOKEN while trying to {what} (401 unauthorized): set it "
                "to the internal integration's token (Notion: Settings > Connections > Develop "
                "or manage integrations)."
            )
        if status == 403:
            return (
                f"the integration may not {what} (403 restricted_resource): give it access to "
                "the tracker database (the database's ... menu > Connections)."
            )
        if status == 404:
            return (
                f"Notion found nothing to {what} (404): KB_NOTION_DATA_SOURCE_ID={ident} is not "
                "a data source or database the integration can see. Check the id and share the "
                "database with the integration (... menu > Connections)."
            )
        hinted = _hinted(exc)
        if status in RETRYABLE_STATUS and hinted is not None and hinted > RETRY_AFTER_MAX_S:
            return (
                f"Notion asked kb to wait {hinted:.0f} s before it tries to {what} again "
                f"(Retry-After on {status}), longer than the {RETRY_AFTER_MAX_S:.0f} s kb waits "
                "within one sync; run the sync later. Nothing was written."
            )
        if _retryable(exc):
            return (
                f"Notion kept failing to {what} ({_describe_brief(exc)}) after "
                f"{self._max_retries + 1} attempts; try again later. Nothing was written."
            )
        return f"Notion refused to {what} ({_describe_brief(exc)}). Nothing was written."

    def _query(self, data_source_id: str, cursor: str | None, page_size: int) -> Any:
        body: dict[str, Any] = {"page_size": page_size}
        if cursor:
            body["start_cursor"] = cursor
        return self._client.data_sources.query(data_source_id=data_source_id, **body)

    def _first_query(self, page_size: int) -> tuple[str, Any]:
        """The first query page and the data source id it came from; resolves a database
        id (the query answers 404 or 400 for one) through ``GET /v1/databases/{id}``."""
        ident = self._configured_id
        try:
            return ident, self._call(
                "query the tracker data source", lambda: self._query(ident, None, page_size)
            )
        except NotionSyncError as exc:
            if _status(exc.__cause__ or exc) not in (400, 404):
                raise
            first_error = exc
        try:
            database = self._call(
                f"read database {ident}", lambda: self._client.databases.retrieve(ident)
            )
        except NotionSyncError as exc:
            if _status(exc.__cause__ or exc) in (400, 404):
                raise first_error from exc
            raise
        resolved = _only_data_source(database, ident)
        log.info("Notion database %s resolved to its data source %s", ident, resolved)
        return resolved, self._call(
            "query the tracker data source", lambda: self._query(resolved, None, page_size)
        )

    def read(self, page_size: int = PAGE_SIZE) -> TrackerRead:
        """Every page of the tracker, following ``next_cursor`` to the end.

        A page id seen twice (the tracker edited while it is read) keeps its latest
        ``last_edited_time``.

        Raises:
            NotionSyncError: a request failed after the retries (message: status and what
                to do), the id resolves to no single data source, or the cursor misbehaves
                (``has_more`` without a new ``next_cursor``, or over ``MAX_QUERY_PAGES``).
        """
        if not 1 <= page_size <= PAGE_SIZE:
            raise ValueError(f"page_size must be from 1 to {PAGE_SIZE}, got {page_size}")
        data_source_id, response = self._first_query(page_size)
        pages: dict[str, Mapping[str, Any]] = {}
        trashed = other = 0
        requests = 1
        seen_cursors: set[str] = set()
        while True:
            results = response.get("results") if isinstance(response, Mapping) else None
            if not isinstance(results, list):
                raise NotionSyncError(
                    f"Notion answered the query of data source {data_source_id} without a "
                    "results list; is KB_NOTION_API_URL the Notion API?"
                )
            for item in results:
                if not isinstance(item, Mapping) or item.get("object") != "page":
                    other += 1
                elif is_trashed(item):
                    trashed += 1
                else:
                    key = str(item.get("id"))
                    kept = pages.get(key)
                    if kept is None or str(item.get("last_edited_time") or "") >= str(
                        kept.get("last_edited_time") or ""
                    ):
                        pages[key] = item
            if not response.get("has_more"):
                break
            cursor = response.get("next_cursor")
            if not isinstance(cursor, str) or not cursor or cursor in seen_cursors:
                raise NotionSyncError(
                    f"Notion said the query of data source {data_source_id} has more results "
                    f"but gave {'a repeated' if cursor else 'no'} next_cursor ({cursor!r}) "
                    f"after {requests} pages; nothing was written"
                )
            if requests >= MAX_QUERY_PAGES:
                raise NotionSyncError(
                    f"the query of data source {data_source_id} did not end after "
                    f"{MAX_QUERY_PAGES} pages; nothing was written"
                )
            seen_cursors.add(cursor)
            response = self._call(
                "query the tracker data source",
                lambda c=cursor: self._query(data_source_id, c, page_size),
            )
            requests += 1
        return TrackerRead(data_source_id, tuple(pages.values()), trashed, other, requests)


def _describe_brief(exc: BaseException | None) -> str:
    if isinstance(exc, HTTPResponseError):
        code = getattr(exc.code, "value", exc.code)
        return f"HTTP {exc.status} {code}: {str(exc)[:200]}"
    if isinstance(exc, RequestTimeoutError):
        return f"no answer within {TIMEOUT_S:.0f} s"
    return f"{type(exc).__name__}: {str(exc)[:200]}" if exc else "unknown error"


def _only_data_source(database: Any, database_id: str) -> str:
    """The single data source of a database object (``data_sources[].id``).

    Raises:
        NotionSyncError: none, or several (the message lists them to choose from).
    """
    sources = database.get("data_sources") if isinstance(database, Mapping) else None
    sources = [s for s in sources or [] if isinstance(s, Mapping) and s.get("id")]
    if len(sources) == 1:
        return str(sources[0]["id"])
    if not sources:
        raise NotionSyncError(
            f"Notion database {database_id} has no data source kb can read; set "
            "KB_NOTION_DATA_SOURCE_ID to the tracker's data source id"
        )
    listed = ", ".join(f"{s.get('name') or '(untitled)'} ({s['id']})" for s in sources)
    raise NotionSyncError(
        f"Notion database {database_id} has {len(sources)} data sources: {listed}. Set "
        "KB_NOTION_DATA_SOURCE_ID to the tracker's."
    )


def sync_notion(
    catalog: ComplianceCatalog,
    tracker: NotionTracker,
    *,
    force: bool = False,
    page_size: int = PAGE_SIZE,
) -> NotionSyncResult:
    """Read the whole tracker, map it, then apply it to ``compliance_actions`` as one snapshot.

    Args:
        catalog: the writable catalog (``open_catalog(settings)``).
        tracker: the Notion client (``NotionTracker.from_settings(settings)``).
        force: apply an empty read, or one deleting more than half the rows (see
            ``Catalog.replace_compliance_actions``).
        page_size: results per query page (Notion's maximum by default).

    Returns:
        The counts, ``synced_at`` and the time taken.

    Raises:
        NotionSyncError: the read failed (nothing written).
        NotionSchemaError: a property renamed, removed or re-typed, or a value kb cannot
            store; the message names it (nothing written).
        SyncRefusedError: an empty read, or one deleting more than half the table, without
            ``force``; the message has the counts (nothing written).
    """
    started = time.monotonic()
    read = tracker.read(page_size)
    if read.pages:
        check_schema(read.pages[0], read.data_source_id)
    actions = [page_to_action(page) for page in read.pages]
    counts = catalog.replace_compliance_actions(
        actions, data_source_id=read.data_source_id, force=force
    )
    return NotionSyncResult(
        data_source_id=read.data_source_id,
        read=counts.read,
        inserted=counts.inserted,
        updated=counts.updated,
        deleted=counts.deleted,
        unchanged=counts.unchanged,
        trashed=read.trashed,
        requests=read.requests,
        synced_at=counts.synced_at,
        seconds=time.monotonic() - started,
    )
