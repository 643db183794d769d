"""How a tool result is put together: ``render.tool_result`` (the text first, then any image
blocks; the structured content dumped in JSON mode), and the notes list_documents adds after
the document list (``listing_notes``)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from mcp.types import ImageContent, TextContent
from pydantic import BaseModel

from kb_mcp import render
from kb_mcp.documents import DocumentList
from kb_mcp.tools import list_documents


class _Output(BaseModel):
    count: int
    total: Decimal
    synced_at: dt.datetime


def test_the_text_comes_first_then_the_images_and_the_structured_content_is_json() -> None:
    image = ImageContent(type="image", data="iVBORw0KGgo=", mime_type="image/png")
    output = _Output(count=2, total=Decimal("7.50"), synced_at=dt.datetime(2026, 12, 1, 9, 30))

    result = render.tool_result("Two results.", output, [image])

    assert result.content == [TextContent(type="text", text="Two results."), image]
    assert result.structured_content == {
        "count": 2, "total": "7.50", "synced_at": "2026-12-01T09:30:00",
    }
    assert result.is_error is False


def test_a_result_without_images_has_one_text_block() -> None:
    output = _Output(count=0, total=Decimal(0), synced_at=dt.datetime(2026, 1, 1))
    result = render.tool_result("Nothing found.", output)
    assert result.content == [TextContent(type="text", text="Nothing found.")]


def test_a_listing_without_versions_or_series_adds_no_notes() -> None:
    assert list_documents.listing_notes(DocumentList(ready=[], pending=[], failed=[])) == ""


def test_version_notes_come_before_series_notes_each_under_its_heading(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        list_documents, "version_notes", lambda _: ["A.pdf: version 2 serving, 1 earlier"]
    )
    monkeypatch.setattr(
        list_documents, "series_notes", lambda _: ["A.pdf → B.pdf", "C.pdf → D.pdf (pending)"]
    )
    notes = list_documents.listing_notes(DocumentList(ready=[], pending=[], failed=[]))
    assert notes == (
        "\n\nVersions (search returns only the version serving):\n"
        "- A.pdf: version 2 serving, 1 earlier"
        "\n\nSeries (documents that are editions of one document, oldest first):\n"
        "- A.pdf → B.pdf\n"
        "- C.pdf → D.pdf (pending)"
    )


def test_series_notes_alone_follow_the_list_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(list_documents, "version_notes", lambda _: [])
    monkeypatch.setattr(list_documents, "series_notes", lambda _: ["A.pdf → B.pdf"])
    notes = list_documents.listing_notes(DocumentList(ready=[], pending=[], failed=[]))
    assert notes == (
        "\n\nSeries (documents that are editions of one document, oldest first):\n"
        "- A.pdf → B.pdf"
    )
