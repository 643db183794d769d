"""Fixtures the Notion tests share: the fake Notion API behind respx."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import respx

from tests.market.notion_server import FakeNotion


@pytest.fixture
def fake() -> Iterator[FakeNotion]:
    """A ``FakeNotion`` answering every request to ``notion.test`` (nothing leaves the test)."""
    server = FakeNotion()
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        router.route(host="notion.test").mock(side_effect=server.handle)
        yield server
