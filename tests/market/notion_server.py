"""A stand-in for the Notion API at the HTTP edge and tracker pages to serve from it (the
SQLite/Postgres ``catalog`` fixture is the shared one in ``tests/conftest.py``).

``FakeNotion.handle(request) -> httpx.Response`` answers what kb sends (API 2025-09-03):
``POST /v1/data_sources/{id}/query`` (paged by ``page_size``/``start_cursor`` like Notion:
``has_more``, ``next_cursor``) and ``GET /v1/databases/{id}``. Tests route it with respx, so
notion-client's own httpx client is what talks to it. It can also serve recorded response
bodies verbatim (``recorded``), inject failures before answering (``failures``), and
serve trashed pages flagged (``serve_trashed``) instead of leaving them out as Notion does.
Page and error shapes follow the recorded responses in ../shared/corpus/notion/.
"""

from __future__ import annotations

import json
import uuid
from collections import deque
from pathlib import Path
from typing import Any

import httpx


API_URL = "https://notion.test"
TOKEN = "ntn_test_token_123"
DATA_SOURCE_ID = "0f1e2d3c-4b5a-4968-8778-695a4b3c2d1e"
DATABASE_ID = "1a2b3c4d-5e6f-4a8b-9c0d-1e2f3a4b5c6d"
_USER = {"object": "user", "id": "7775f3a3-893f-43fa-b625-460c61094c78"}
_IDS = uuid.UUID("6f0c2a8e-1111-4222-8333-944455556666")


def page_id(key: str) -> str:
    """A stable Notion-style page id for a test key."""
    return str(uuid.uuid5(_IDS, key))


def _rich(text: str) -> dict[str, Any]:
    return {
        "type": "text",
        "text": {"content": text, "link": None},
        "annotations": {
            "bold": False, "italic": False, "strikethrough": False,
            "underline": False, "code": False, "color": "default",
        },
        "plain_text": text,
        "href": None,
    }


def _option(name: str | None) -> dict[str, Any] | None:
    if name is None:
        return None
    return {"id": str(uuid.uuid5(_IDS, "option:" + name)), "name": name, "color": "default"}


def tracker_page(
    key: str,
    *,
    summary: str | None,
    organisation: str | None = None,
    sector: str | None = None,
    date: str | None = None,
    regulatory_body: str | None = None,
    status: str | None = None,
    fine: float | int | None = None,
    source: str | None = None,
    misconduct: tuple[str, ...] = (),
    in_trash: bool = False,
    last_edited: str = "2026-11-30T01:00:00.000Z",
) -> dict[str, Any]:
    """A Compliance Tracker page as ``data_sources.query`` returns it (envelope as in the
    recorded 2025-09-03 response; property values as in Notion's "Page properties")."""
    ident = page_id(key)
    return {
        "object": "page",
        "id": ident,
        "created_time": "2026-11-01T00:00:00.000Z",
        "last_edited_time": last_edited,
        "created_by": _USER,
        "last_edited_by": _USER,
        "cover": None,
        "icon": None,
        "parent": {
            "type": "data_source_id",
            "data_source_id": DATA_SOURCE_ID,
            "database_id": DATABASE_ID,
        },
        "in_trash": in_trash,
        "is_archived": False,
        "is_locked": False,
        "properties": {
            "Summary": {"id": "title", "type": "title",
                        "title": [_rich(summary)] if summary else []},
            "Organisation": {"id": "Org%3A", "type": "select", "select": _option(organisation)},
            "Sector": {"id": "Sec%3A", "type": "select", "select": _option(sector)},
            "Date": {"id": "Dat%3A", "type": "date",
                     "date": {"start": date, "end": None, "time_zone": None} if date else None},
            "Regulatory Body": {"id": "Reg%3A", "type": "select",
                                "select": _option(regulatory_body)},
            "Status": {"id": "Sta%3A", "type": "select", "select": _option(status)},
            "Fine": {"id": "Fin%3A", "type": "number", "number": fine},
            "Source": {"id": "Src%3A", "type": "url", "url": source},
            "Misconduct Type": {"id": "Mis%3A", "type": "multi_select",
                                "multi_select": [_option(m) for m in misconduct]},
        },
        "url": f"https://app.notion.com/p/{ident.replace('-', '')}",
        "public_url": None,
        "archived": in_trash,
    }


def error(status: int, code: str, message: str, **headers: str) -> httpx.Response:
    """A Notion error response (``{"object": "error", ...}``) with ``headers``."""
    body = {"object": "error", "status": status, "code": code, "message": message}
    named = {k.replace("_", "-"): v for k, v in headers.items()}
    return httpx.Response(status, json=body, headers=named)


def rate_limited(retry_after: str) -> httpx.Response:
    """429 ``rate_limited`` with a ``Retry-After`` header."""
    return error(429, "rate_limited", "You have been rate limited.", Retry_After=retry_after)


class FakeNotion:
    """The tracker data source (and its database) behind ``API_URL``; see the module."""

    def __init__(self, pages: list[dict[str, Any]] | None = None) -> None:
        self.pages: list[dict[str, Any]] = list(pages or [])
        self.data_source_id = DATA_SOURCE_ID
        self.databases: dict[str, dict[str, Any]] = {}
        self.recorded: dict[tuple[str, str | None], dict[str, Any]] = {}
        self.failures: deque[httpx.Response] = deque()
        self.fail_after: int | None = None  # fail every request after this many answered
        self.fail_with: httpx.Response | None = None
        self.serve_trashed = False
        self.requests: list[httpx.Request] = []
        self._cursors: dict[str, int] = {}

    # --- tracker edits ----------------------------------------------------------------------
    def trash(self, key: str) -> None:
        """Move the page of ``key`` to the trash (as the Notion UI does)."""
        for page in self.pages:
            if page["id"] == page_id(key):
                page["in_trash"] = page["archived"] = True

    # --- HTTP -------------------------------------------------------------------------------
    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.headers.get("authorization") != f"Bearer {TOKEN}":
            return error(401, "unauthorized", "API token is invalid.")
        if request.headers.get("notion-version") != "2025-09-03":
            return error(400, "missing_version", "Notion-Version header failed validation.")
        if self.failures:
            return self.failures.popleft()
        if self.fail_after is not None and len(self.requests) > self.fail_after:
            assert self.fail_with is not None
            return self.fail_with
        parts = request.url.path.strip("/").split("/")
        if request.method == "POST" and len(parts) == 4 and parts[:2] == ["v1", "data_sources"]:
            return self._query(parts[2], json.loads(request.content or b"{}"))
        if request.method == "GET" and len(parts) == 3 and parts[:2] == ["v1", "databases"]:
            database = self.databases.get(parts[2])
            if database is None:
                return error(
                    404, "object_not_found", f"Could not find database with ID: {parts[2]}."
                )
            return httpx.Response(200, json=database)
        return error(400, "invalid_request_url", "Invalid request URL.")

    def _query(self, ident: str, body: dict[str, Any]) -> httpx.Response:
        cursor = body.get("start_cursor")
        if (ident, cursor) in self.recorded:
            return httpx.Response(200, json=self.recorded[(ident, cursor)])
        if ident != self.data_source_id:
            return error(404, "object_not_found", f"Could not find data_source with ID: {ident}.")
        size = int(body.get("page_size", 100))
        start = 0 if cursor is None else self._cursors[cursor]
        live = [p for p in self.pages if self.serve_trashed or not p["in_trash"]]
        chunk = live[start : start + size]
        more = start + size < len(live)
        next_cursor = None
        if more:
            next_cursor = str(uuid.uuid5(_IDS, f"cursor:{start + size}"))
            self._cursors[next_cursor] = start + size
        return httpx.Response(
            200,
            json={
                "object": "list",
                "results": chunk,
                "next_cursor": next_cursor,
                "has_more": more,
                "type": "page_or_data_source",
                "page_or_data_source": {},
                "request_id": str(uuid.uuid4()),
            },
        )

    def bodies(self) -> list[dict[str, Any]]:
        """The JSON bodies of the query requests received, in order."""
        return [
            json.loads(r.content) for r in self.requests if r.url.path.endswith("/query")
        ]


def load_json(path: Path) -> dict[str, Any]:
    """A recorded response body."""
    return json.loads(path.read_text(encoding="utf-8"))
