"""kb-mcp's graph is read-only at the server (issue 15, "Read-only everywhere"): the MCP
server opens Neo4j sessions in READ access mode, so the real Neo4j refuses any write made
through them (``Neo.ClientError.Statement.AccessMode``), while the pipeline's store writes.
Skips without ``KB_TEST_NEO4J_URI`` (fails under ``KB_REQUIRE_SERVICES=1``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import neo4j
import pytest
from neo4j.exceptions import ClientError

from kb_mcp.state import ServerState, open_state
from kb_shared.errors import StoreError
from kb_shared.graph_model import Entity, Relationship
from kb_shared.settings import Settings
from kb_shared.stores.factory import init_database, open_graph_store
from kb_shared.stores.graph import GraphCounts
from kb_shared.stores.graph_neo4j import Neo4jGraphStore
from tests.conftest import neo4j_uri
from tests.fakes import HashingEmbedder

pytestmark = pytest.mark.services

ACCESS_MODE = "Neo.ClientError.Statement.AccessMode"
RETAILER = Entity("Retailer", "Role")
CUSTOMER = Entity("Customer", "Role")
NOTIFIES = Relationship(
    source=RETAILER.key,
    target=CUSTOMER.key,
    type="MUST_NOTIFY",
    description="Retailer must notify customer",
    source_doc="d1",
    chunk_id="d1-0",
)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Embedded catalog under ``tmp_path``, graph on the test Neo4j (emptied first)."""
    user = os.environ.get("KB_TEST_NEO4J_USER")
    auth = {"neo4j_user": user, "neo4j_password": os.environ.get("KB_TEST_NEO4J_PASSWORD", "")}
    configured = Settings(home=tmp_path, neo4j_uri=neo4j_uri(), **(auth if user else {}))
    writer = open_graph_store(configured)
    assert isinstance(writer, Neo4jGraphStore) and not writer.read_only
    writer.driver.execute_query("MATCH (n) DETACH DELETE n")
    writer.close()
    init_database(configured)
    return configured


@pytest.fixture
def state(settings: Settings) -> Iterator[ServerState]:
    """The MCP server's stores, opened as kb-mcp opens them."""
    opened = open_state(settings, embedder=HashingEmbedder(8), use_reranker=False)
    yield opened
    opened.close()


def node_count(settings: Settings) -> int:
    writer = open_graph_store(settings)
    try:
        records, _, _ = writer.driver.execute_query("MATCH (n) RETURN count(n) AS n")
        return records[0]["n"]
    finally:
        writer.close()


def test_kb_mcp_reads_the_graph_the_pipeline_wrote(settings: Settings, state: ServerState) -> None:
    writer = open_graph_store(settings)
    assert writer.replace_document("d1", [RETAILER, CUSTOMER], [NOTIFIES]) == GraphCounts(2, 1)
    writer.close()
    assert isinstance(state.graph, Neo4jGraphStore) and state.graph.read_only
    assert state.graph.counts() == GraphCounts(2, 1)
    assert state.graph.relationships_for_document("d1") == [NOTIFIES]


def test_a_write_in_a_kb_mcp_session_is_refused_by_the_server(
    settings: Settings, state: ServerState
) -> None:
    store = state.graph
    assert isinstance(store, Neo4jGraphStore)
    with store._session() as session, pytest.raises(ClientError) as refused:
        session.run("CREATE (:Probe {name: 'written by kb-mcp'})").consume()
    assert refused.value.code == ACCESS_MODE
    with pytest.raises(ClientError) as refused_query:
        store._run("CREATE (:Probe {name: 'written by kb-mcp'})")
    assert refused_query.value.code == ACCESS_MODE
    assert node_count(settings) == 0


def test_the_stores_own_writes_through_kb_mcp_fail_and_change_nothing(
    settings: Settings, state: ServerState
) -> None:
    writer = open_graph_store(settings)
    writer.replace_document("d1", [RETAILER, CUSTOMER], [NOTIFIES])
    writer.close()
    store = state.graph
    assert isinstance(store, Neo4jGraphStore)
    for write in (
        lambda: store.replace_document("d1", [RETAILER], []),
        lambda: store.delete_document("d1"),
        store.clear,
    ):
        with pytest.raises(StoreError, match="Writing in read access mode not allowed"):
            write()
    assert node_count(settings) == 2
    assert store.counts() == GraphCounts(2, 1)


def test_a_session_opened_for_writing_is_not_what_kb_mcp_gets(settings: Settings) -> None:
    # the control: the same statement in a WRITE session of the same driver goes through
    store = open_graph_store(settings, read_only=True)
    assert isinstance(store, Neo4jGraphStore)
    try:
        with store.driver.session(default_access_mode=neo4j.WRITE_ACCESS) as session:
            session.run("CREATE (:Probe)").consume()
    finally:
        store.close()
    assert node_count(settings) == 1
