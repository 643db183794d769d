"""The graph views the knowledge-graph page reads (issue 13): ``overview`` and ``counts`` under
an ``EdgeFilter``, ``degrees``, and ``neighbourhood``, on every backend of the contract suite
(SQLite always; Postgres and Neo4j when their test servers are set).

The graph is the contract suite's "hub" (document ``d1``) plus ``d2``:

    Distributor --MUST_NOTIFY--> Retailer --MUST_NOTIFY--> Customer
                                 Retailer --MUST_MAINTAIN--> Hardship policy <--APPROVES-- AER
                                 Retailer --MUST_REGISTER--> Life support customer      (d2)

Degrees: retailer 4, hardship policy 2, every other entity 1. Combined endpoint degrees:
R3 6, R1 5, R2 5, R5 5, R4 3.
"""

from __future__ import annotations

import pytest

from kb_shared.graph_model import Entity
from kb_shared.stores.graph import EdgeFilter, GraphCounts, GraphStore
from tests.stores.test_graph_contract import (  # noqa: F401 - fixtures
    LIFE_SUPPORT,
    R1,
    R2,
    R3,
    R4,
    R5,
    RETAILER,
    backend,
    by_id,
    load_hub,
    neo4j_driver,
    postgres_engine,
    rel,
    store,
)


@pytest.fixture
def graph(store: GraphStore) -> GraphStore:
    """The hub plus document ``d2`` (module docstring)."""
    load_hub(store)
    store.replace_document("d2", [RETAILER, LIFE_SUPPORT], [R5])
    return store


def test_overview_filters_keep_the_whole_graph_degree_order(graph: GraphStore) -> None:
    assert graph.overview(where=EdgeFilter(relationship_type="MUST_NOTIFY")) == by_id(R1, R2)
    assert graph.overview(where=EdgeFilter(entity_type="Organisation")) == [R4]
    # either endpoint's type: policy (R3, R4) and the life support customer (R5)
    assert graph.overview(where=EdgeFilter(entity_type="DefinedTerm")) == [R3, R5, R4]
    assert graph.overview(where=EdgeFilter(documents=frozenset({"d2"}))) == [R5]
    # degrees stay those of the whole graph: R5 counts towards the retailer's 4 in d1's view
    assert graph.overview(limit=2, where=EdgeFilter(documents=frozenset({"d1"}))) == [
        R3,
        by_id(R1, R2)[0],
    ]
    assert graph.overview(where=EdgeFilter(documents=frozenset())) == []
    # each edge once when both endpoints match (SQLite once returned such rows twice)
    roles = EdgeFilter(documents=frozenset({"d1", "d2"}), entity_type="Role")
    assert graph.overview(where=roles) == [R3, *by_id(R1, R2, R5)]
    assert graph.counts(where=roles) == GraphCounts(entities=5, relationships=4)
    assert graph.overview(where=EdgeFilter(relationship_type="NO_SUCH_TYPE")) == []


def test_overview_document_narrows_the_filter(graph: GraphStore) -> None:
    both = EdgeFilter(documents=frozenset({"d1", "d2"}), relationship_type="MUST_REGISTER")
    assert graph.overview(document="d2", where=both) == [R5]
    assert graph.overview(document="d1", where=both) == []
    assert graph.overview(document="d2", where=EdgeFilter(documents=frozenset({"d1"}))) == []


def test_counts_under_a_filter_are_kept_edges_and_their_endpoints(graph: GraphStore) -> None:
    assert graph.counts() == GraphCounts(entities=6, relationships=5)
    # retailer, policy, aer, life support customer; R3, R4, R5
    assert graph.counts(where=EdgeFilter(entity_type="DefinedTerm")) == GraphCounts(4, 3)
    assert graph.counts(where=EdgeFilter(relationship_type="MUST_NOTIFY")) == GraphCounts(3, 2)
    assert graph.counts(
        "d1", where=EdgeFilter(relationship_type="MUST_MAINTAIN")
    ) == GraphCounts(2, 1)
    assert graph.counts(where=EdgeFilter(documents=frozenset())) == GraphCounts(0, 0)
    assert graph.counts(where=EdgeFilter(documents=frozenset({"d2"}))) == graph.counts("d2")


def test_degrees_count_every_edge_and_skip_unknown_keys(graph: GraphStore) -> None:
    assert graph.degrees(["retailer", "hardship policy", "missing", "customer"]) == {
        "retailer": 4,
        "hardship policy": 2,
        "customer": 1,
    }
    assert graph.degrees([]) == {}


def test_self_loop_counts_twice_in_degrees(store: GraphStore) -> None:
    a = Entity("Retail market", "DefinedTerm")
    b = Entity("Small customer", "Role")
    edges = [rel(a, a, "REFERS_TO", "d1-0"), rel(a, b, "INCLUDES", "d1-1")]
    store.replace_document("d1", [a, b], edges)
    assert store.degrees(["retail market", "small customer"]) == {
        "retail market": 3,
        "small customer": 1,
    }


def test_neighbourhood_orders_by_hop_then_degree(graph: GraphStore) -> None:
    assert graph.neighbourhood(["customer"]) == [R1]
    # hop 2 from the retailer: R3 (6) before R2 and R5 (5 each, by id)
    assert graph.neighbourhood(["customer"], depth=2) == [R1, R3, *by_id(R2, R5)]
    assert graph.neighbourhood(["aer"], depth=2) == [R4, R3]
    assert graph.neighbourhood(["customer", "aer", "customer"]) == [R1, R4]
    assert graph.neighbourhood(["missing"], depth=2) == []


def test_neighbourhood_walks_kept_edges_only(graph: GraphStore) -> None:
    notify = EdgeFilter(relationship_type="MUST_NOTIFY")
    assert graph.neighbourhood(["customer"], depth=2, where=notify) == [R1, R2]
    # R3 (retailer-policy) has no Organisation endpoint, so the walk stops at the AER edge
    organisations = EdgeFilter(entity_type="Organisation")
    assert graph.neighbourhood(["hardship policy"], depth=2, where=organisations) == [R4]
    d2 = EdgeFilter(documents=frozenset({"d2"}))
    assert graph.neighbourhood(["customer"], depth=2, where=d2) == []
    assert graph.neighbourhood(["retailer"], depth=2, where=d2) == [R5]


@pytest.mark.parametrize("depth", [0, 3])
def test_neighbourhood_depth_is_one_or_two(graph: GraphStore, depth: int) -> None:
    with pytest.raises(ValueError, match=f"depth must be 1 or 2, got {depth}"):
        graph.neighbourhood(["retailer"], depth=depth)
