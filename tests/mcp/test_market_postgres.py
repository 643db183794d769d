"""``search_aer_performance`` and ``search_compliance`` on Postgres, read as ``kb_reader``
(``KB_READER_DATABASE_URL``): the same exact counts and totals as on SQLite
(``test_market_tools.py``'s builders and checks), and the role cannot write the market tables.
Needs ``KB_TEST_POSTGRES_URL`` (skipped with that reason otherwise; a failure under
``KB_REQUIRE_SERVICES=1``)."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
import sqlalchemy as sa
from mcp import Client

from benchmarks.aer_workbooks import WrittenCell
from benchmarks.postgres import reader_database
from kb_mcp.state import open_state
from kb_shared.settings import Settings
from kb_shared.stores.catalog import Catalog, aer_performance, compliance_actions
from kb_shared.stores.sql import make_engine
from tests.conftest import postgres_url
from tests.market.aer_fixtures import DISCONNECTED, DISCONNECTED_REWORDED
from tests.mcp.corpus import HashingEmbedder, corpus_settings
from tests.mcp.test_market_tools import (
    AER,
    COMPLIANCE,
    check_nsw_disconnections,
    check_tracker_totals,
    make_server,
    text_of,
    write_aer,
    write_tracker,
)

pytestmark = [pytest.mark.services, pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def market_database(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, str, list[WrittenCell]]]:
    """``(writer URL, kb_reader URL, AER cells stored)`` of a fresh database built from
    ``sql/`` and filled by both syncs as the writer."""
    folder = tmp_path_factory.mktemp("aer_pg")
    with reader_database(postgres_url(), "kb_mcp_market") as (url, reader_url):
        writer = make_engine(url)
        catalog = Catalog(writer)
        cells = write_aer(catalog, folder)
        write_tracker(catalog)
        writer.dispose()
        yield url, reader_url, cells


@pytest.fixture
def settings(market_database: tuple[str, str, list[WrittenCell]], tmp_path: Path) -> Settings:
    writer_url, reader_url, _ = market_database
    return corpus_settings(tmp_path, database_url=writer_url, reader_database_url=reader_url)


@pytest.fixture
def server(settings: Settings):
    return make_server(settings, HashingEmbedder(64))


async def test_both_tools_answer_exactly_through_kb_reader(
    server, market_database: tuple[str, str, list[WrittenCell]]
) -> None:
    cells = market_database[2]
    async with Client(server) as client:
        by_old = await client.call_tool(AER, {"metric": DISCONNECTED, "jurisdiction": "nsw"})
        by_new = await client.call_tool(
            AER, {"metric": DISCONNECTED_REWORDED, "jurisdiction": "NSW"})
        tracker = await client.call_tool(COMPLIANCE, {"limit": 200})
        agl = await client.call_tool(COMPLIANCE, {"query": "AGL ENERGY PTY LTD"})
        none = await client.call_tool(AER, {"retailer": "Nobody Energy"})
        capped = await client.call_tool(AER, {"limit": 500})
    check_nsw_disconnections(by_old, cells)
    assert by_new.structured_content["rows"] == by_old.structured_content["rows"]
    check_tracker_totals(tracker)
    assert (agl.structured_content["count"], Decimal(agl.structured_content["fine_total"]),
            agl.structured_content["without_fine"]) == (2, Decimal("1500000"), 1)
    assert none.structured_content["status"] == "no_match"
    assert "No rows match these filters" in text_of(none)
    assert capped.structured_content["returned"] == 500
    assert capped.structured_content["count"] == len([c for c in cells if not c.is_total])


def test_the_server_reads_as_kb_reader_which_cannot_change_the_market_tables(
    market_database: tuple[str, str, list[WrittenCell]], settings: Settings
) -> None:
    state = open_state(settings, embedder=HashingEmbedder(64))
    try:
        assert state.catalog.engine.url.username == "kb_reader"
    finally:
        state.close()
    reader = make_engine(market_database[1])
    try:
        for table in (aer_performance, compliance_actions):
            with pytest.raises(sa.exc.ProgrammingError, match="permission denied"):
                with reader.begin() as conn:
                    conn.execute(table.delete())
    finally:
        reader.dispose()
