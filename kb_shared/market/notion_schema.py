"""The Notion compliance tracker's schema and the mapping of its pages to
``ComplianceAction`` rows.

Schema: the peer system's tracker (../shared/notes/next-capabilities.md, "Notion"). Value
shapes: Notion's "Page properties" reference (API 2025-09-03): ``title`` is a list of rich-text
items (join ``plain_text``); ``select``/``status`` are ``{name}`` or null; ``multi_select`` a
list of ``{name}``; ``date`` is ``{start, end, time_zone}`` or null; ``number`` a number or
null; ``url`` a string or null. Empty values arrive as null, never as a missing key, so a
missing key means the property itself is gone (renamed or deleted) — which would otherwise
read as "no fine". ``check_schema`` refuses that before anything is written.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from kb_shared.errors import NotionSchemaError
from kb_shared.stores.catalog.compliance import (
    ComplianceAction,
    action_values,
    cents_to_fine,
    fine_to_cents,
)

#: Tracker property -> the Notion property types kb reads it from. ``status`` has the same
#: value shape as ``select`` (``{name}``), so a Status column converted to Notion's status
#: type still maps.
TRACKER_SCHEMA: dict[str, tuple[str, ...]] = {
    "Summary": ("title",),
    "Organisation": ("select",),
    "Sector": ("select",),
    "Date": ("date",),
    "Regulatory Body": ("select",),
    "Status": ("select", "status"),
    "Fine": ("number",),
    "Source": ("url",),
    "Misconduct Type": ("multi_select",),
}

#: Where to change the mapping when the tracker changes on purpose (named in messages).
SCHEMA_HOME = "TRACKER_SCHEMA in kb_shared/market/notion_schema.py"


def page_label(page: Mapping[str, Any]) -> str:
    """How a page is named in messages: its URL, else its id."""
    return str(page.get("url") or page.get("id") or "(a page without an id)")


def is_trashed(page: Mapping[str, Any]) -> bool:
    """True when the page is in the trash: ``in_trash`` (API 2026-03-11 and 2025-09-03) or
    ``archived`` (its older name, still sent by 2025-09-03 and alone by 2022-06-28)."""
    return bool(page.get("in_trash")) or bool(page.get("archived"))


def check_schema(page: Mapping[str, Any], data_source_id: str) -> None:
    """Check that ``page`` has every ``TRACKER_SCHEMA`` property with an accepted type.

    Raises:
        NotionSchemaError: one message naming every missing or re-typed property, the
            properties the page does have, and what to do.
    """
    properties = page.get("properties")
    if not isinstance(properties, Mapping):
        raise NotionSchemaError(
            f"Notion page {page_label(page)} of data source {data_source_id} has no properties"
        )
    problems: list[str] = []
    for name, types in TRACKER_SCHEMA.items():
        wanted = " or ".join(types)
        prop = properties.get(name)
        if not isinstance(prop, Mapping):
            problems.append(f"property {name!r} ({wanted}) is missing")
        elif prop.get("type") not in types:
            problems.append(f"property {name!r} is {prop.get('type')}, expected {wanted}")
    if problems:
        present = ", ".join(
            f"{n} ({p.get('type') if isinstance(p, Mapping) else '?'})"
            for n, p in sorted(properties.items())
        )
        raise NotionSchemaError(
            f"the Notion tracker (data source {data_source_id}) no longer matches kb's schema: "
            + "; ".join(problems)
            + f". Its properties (read on page {page_label(page)}): {present or 'none'}. "
            f"Rename them back in Notion, or update {SCHEMA_HOME}. Nothing was written."
        )


def _value(page: Mapping[str, Any], name: str) -> tuple[str, Any]:
    prop = page["properties"][name]
    kind = prop.get("type")
    if kind not in TRACKER_SCHEMA[name]:
        raise NotionSchemaError(
            f"Notion page {page_label(page)}: property {name!r} is {kind}, expected "
            f"{' or '.join(TRACKER_SCHEMA[name])}"
        )
    if kind not in prop:
        raise NotionSchemaError(
            f"Notion page {page_label(page)}: property {name!r} has no {kind!r} value"
        )
    return kind, prop[kind]


def _bad(page: Mapping[str, Any], name: str, value: Any) -> NotionSchemaError:
    return NotionSchemaError(
        f"Notion page {page_label(page)}: property {name!r} has a value kb cannot read: "
        f"{value!r:.200}"
    )


def _text(page: Mapping[str, Any], name: str) -> str | None:
    _, items = _value(page, name)
    if items is None:
        return None
    if not isinstance(items, list):
        raise _bad(page, name, items)
    parts = []
    for item in items:
        if not isinstance(item, Mapping):
            raise _bad(page, name, item)
        text = item.get("plain_text")
        if text is None:
            text = (item.get("text") or {}).get("content", "")
        parts.append(str(text))
    return "".join(parts).strip() or None


def _option(page: Mapping[str, Any], name: str) -> str | None:
    _, option = _value(page, name)
    if option is None:
        return None
    if not isinstance(option, Mapping) or not isinstance(option.get("name"), str):
        raise _bad(page, name, option)
    return option["name"].strip() or None


def _options(page: Mapping[str, Any], name: str) -> tuple[str, ...]:
    _, options = _value(page, name)
    if options is None:
        return ()
    if not isinstance(options, list):
        raise _bad(page, name, options)
    names = []
    for option in options:
        if not isinstance(option, Mapping) or not isinstance(option.get("name"), str):
            raise _bad(page, name, option)
        if option["name"].strip():
            names.append(option["name"].strip())
    return tuple(names)


def _day(page: Mapping[str, Any], name: str, raw: Any) -> dt.date | None:
    """The calendar day of a Notion date string (``2025-03-01`` or ``2025-03-01T10:00:00.000
    +11:00``): the day as written, in the time zone it was entered in."""
    if raw is None:
        return None
    try:
        return dt.date.fromisoformat(str(raw)[:10])
    except ValueError:
        raise _bad(page, name, raw) from None


def _dates(page: Mapping[str, Any], name: str) -> tuple[dt.date | None, dt.date | None]:
    _, value = _value(page, name)
    if value is None:
        return None, None
    if not isinstance(value, Mapping):
        raise _bad(page, name, value)
    return _day(page, name, value.get("start")), _day(page, name, value.get("end"))


def _fine(page: Mapping[str, Any], name: str) -> Any:
    _, number = _value(page, name)
    if number is None:
        return None  # "no fine recorded", not $0
    try:
        return cents_to_fine(fine_to_cents(number, f"Notion page {page_label(page)}: {name!r}"))
    except ValueError as exc:
        raise NotionSchemaError(f"{exc}; fix it in Notion. Nothing was written.") from None


def _url(page: Mapping[str, Any], name: str) -> str | None:
    _, value = _value(page, name)
    if value is not None and not isinstance(value, str):
        raise _bad(page, name, value)
    return (value.strip() or None) if value else None


def _stamp(page: Mapping[str, Any], key: str) -> dt.datetime | None:
    raw = page.get(key)
    if raw is None:
        return None
    try:
        stamp = dt.datetime.fromisoformat(str(raw))
    except ValueError:
        raise NotionSchemaError(f"Notion page {page_label(page)}: bad {key} {raw!r}") from None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)


def page_to_action(page: Mapping[str, Any]) -> ComplianceAction:
    """The ``ComplianceAction`` of one tracker page (its schema already checked).

    Raises:
        NotionSchemaError: a property missing on this page, or a value of the wrong shape or
            one kb cannot store (e.g. a negative Fine, a NUL character, a Source URL over
            ``URL_MAX``); the message names the page and the property.
    """
    page_id = page.get("id")
    if not isinstance(page_id, str) or not page_id.strip():
        raise NotionSchemaError(f"Notion returned a page without an id: {page_label(page)}")
    properties = page.get("properties")
    present = properties if isinstance(properties, Mapping) else {}
    missing = [name for name in TRACKER_SCHEMA if name not in present]
    if missing:
        raise NotionSchemaError(
            f"Notion page {page_label(page)} lacks the properties {', '.join(missing)}"
        )
    start, end = _dates(page, "Date")
    url = page.get("url")
    action = ComplianceAction(
        page_id=page_id.strip(),
        notion_url=url if isinstance(url, str) and url else None,
        summary=_text(page, "Summary"),
        organisation=_option(page, "Organisation"),
        sector=_option(page, "Sector"),
        action_date=start,
        action_date_end=end,
        regulatory_body=_option(page, "Regulatory Body"),
        status=_option(page, "Status"),
        fine=_fine(page, "Fine"),
        source_url=_url(page, "Source"),
        misconduct_types=_options(page, "Misconduct Type"),
        created_time=_stamp(page, "created_time"),
        last_edited_time=_stamp(page, "last_edited_time"),
    )
    try:
        action_values(action)  # what the store would refuse (a NUL, a too long URL), now
    except ValueError as exc:
        raise NotionSchemaError(
            f"Notion page {page_label(page)}: {exc}; fix it in Notion. Nothing was written."
        ) from None
    return action
