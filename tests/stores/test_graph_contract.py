"""One contract suite for the graph store role, run unchanged against every backend:

* ``sqlite``   — ``SqlGraphStore`` on a fresh SQLite file per test (always runs);
* ``postgres`` — ``SqlGraphStore`` on a database created for this session on the server at
  ``KB_TEST_POSTGRES_URL`` (dropped at the end; tables dropped before each test);
* ``neo4j``    — ``Neo4jGraphStore`` on ``KB_TEST_NEO4J_URI``. Every node of the test
  database is deleted before each test, so never point it at real data. (Indexes are kept:
  ``ensure_schema`` recreates the vector index when its dimension changes on an empty graph.)

Postgres and Neo4j skip with the reason when their URL is unset, and fail instead under
``KB_REQUIRE_SERVICES=1`` (``.ci/run`` starts both servers and sets it).

The test graph ("hub") is a small piece of the retail energy rules, with hand-built name
vectors whose cosine similarities to ``QUERY`` are known exactly:

    Distributor --MUST_NOTIFY--> Retailer --MUST_NOTIFY--> Customer
                                 Retailer --MUST_MAINTAIN--> Hardship policy <--APPROVES-- AER

Degrees: retailer 3, hardship policy 2, customer / distributor / aer 1.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Iterator
from pathlib import Path

import neo4j
import numpy as np
import pytest
import sqlalchemy as sa

from kb_shared.errors import EmbeddingMismatchError, StoreUnavailableError
from kb_shared.graph_model import Entity, Relationship, entity_key
from kb_shared.stores.graph import (
    GraphCounts,
    GraphPath,
    GraphStore,
)
from kb_shared.stores.graph_neo4j import Neo4jGraphStore
from kb_shared.stores.graph_sql import GRAPH_METADATA, SqlGraphStore
from tests.conftest import REPO_ROOT, neo4j_uri, postgres_url

DIM = 4

# -- services -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_engine() -> Iterator[sa.Engine]:
    """An engine on a database created for this test session (dropped afterwards)."""
    url = sa.make_url(postgres_url())
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    name = f"kb_graph_test_{secrets.token_hex(4)}"
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine = sa.create_engine(url.set(database=name))
    try:
        yield engine
    finally:
        engine.dispose()
        # a fresh connection: the outage tests restart the server, which ends pooled ones
        admin.dispose()
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def neo4j_driver() -> Iterator[neo4j.Driver]:
    """A driver on the test Neo4j (auth from KB_TEST_NEO4J_USER/PASSWORD when set)."""
    uri = neo4j_uri()
    user = os.environ.get("KB_TEST_NEO4J_USER")
    auth = (user, os.environ.get("KB_TEST_NEO4J_PASSWORD", "")) if user else None
    driver = neo4j.GraphDatabase.driver(uri, auth=auth)
    try:
        yield driver
    finally:
        driver.close()


BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.services),
    pytest.param("neo4j", id="neo4j", marks=pytest.mark.services),
]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GraphStore]:
    """An empty graph store of each backend, without its schema yet."""
    if request.param == "sqlite":
        engine = sa.create_engine(f"sqlite:///{tmp_path / 'graph.sqlite'}")
        yield SqlGraphStore(engine)
        engine.dispose()
    elif request.param == "postgres":
        engine = request.getfixturevalue("postgres_engine")
        GRAPH_METADATA.drop_all(engine)
        yield SqlGraphStore(engine)
    else:
        driver = request.getfixturevalue("neo4j_driver")
        driver.execute_query("MATCH (n) DETACH DELETE n")
        yield Neo4jGraphStore(driver)


@pytest.fixture
def store(backend: GraphStore) -> GraphStore:
    """An empty graph store of each backend, schema created for ``DIM``-dim name vectors."""
    backend.ensure_schema(DIM)
    return backend


# -- the test graph -------------------------------------------------------------------------

QUERY = (1.0, 0.0, 0.0, 0.0)
# Cosine similarity to QUERY: retailer 1, customer 0.8 (a non-unit vector: cosine must
# normalise), distributor 0.6, hardship policy 0, aer -1.
RETAILER = Entity("Retailer", "Role", "sells energy to customers", (1.0, 0.0, 0.0, 0.0))
CUSTOMER = Entity("Customer", "Role", "", (1.6, 1.2, 0.0, 0.0))
DISTRIBUTOR = Entity("Distributor", "Role", "", (0.6, 0.0, 0.8, 0.0))
POLICY = Entity("Hardship policy", "DefinedTerm", "", (0.0, 1.0, 0.0, 0.0))
AER = Entity("AER", "Organisation", "Australian Energy Regulator", (-1.0, 0.0, 0.0, 0.0))
HUB_ENTITIES = [RETAILER, CUSTOMER, DISTRIBUTOR, POLICY, AER]


def rel(
    source: Entity, target: Entity, type_: str, chunk: str, description: str = ""
) -> Relationship:
    """A relationship of the document named by the chunk id's prefix (``d1-0`` -> ``d1``)."""
    return Relationship(
        source=source.key,
        target=target.key,
        type=type_,
        description=description or f"{source.name} {type_.lower()} {target.name}",
        source_doc=chunk.rsplit("-", 1)[0],
        chunk_id=chunk,
    )


R1 = rel(RETAILER, CUSTOMER, "MUST_NOTIFY", "d1-0")
R2 = rel(DISTRIBUTOR, RETAILER, "MUST_NOTIFY", "d1-1")
R3 = rel(RETAILER, POLICY, "MUST_MAINTAIN", "d1-2")
R4 = rel(AER, POLICY, "APPROVES", "d1-3")
HUB_EDGES = [R1, R2, R3, R4]

LIFE_SUPPORT = Entity("Life support customer", "DefinedTerm")
R5 = rel(RETAILER, LIFE_SUPPORT, "MUST_REGISTER", "d2-0")


def load_hub(store: GraphStore) -> None:
    assert store.replace_document("d1", HUB_ENTITIES, HUB_EDGES) == GraphCounts(5, 4)


def path(nodes: tuple[Entity, ...], *rels: Relationship) -> GraphPath:
    return GraphPath(tuple(e.key for e in nodes), rels)


def by_id(*rels: Relationship) -> list[Relationship]:
    """The documented tie-break: relationship id order."""
    return sorted(rels, key=lambda r: r.id)


# -- replace / delete -----------------------------------------------------------------------


def test_replace_document_twice_replaces_only_that_document(store: GraphStore) -> None:
    load_hub(store)
    assert store.replace_document("d2", [RETAILER, LIFE_SUPPORT], [R5]) == GraphCounts(2, 1)

    consent = Entity("Explicit informed consent", "DefinedTerm")
    new_edges = [
        rel(RETAILER, consent, "MUST_OBTAIN", "d1-0"),
        rel(CUSTOMER, consent, "GIVES", "d1-4"),
    ]
    counts = store.replace_document("d1", [RETAILER, CUSTOMER, consent], new_edges)

    assert counts == GraphCounts(entities=3, relationships=2)
    assert store.relationships_for_document("d1") == by_id(*new_edges)
    assert store.relationships_for_document("d2") == [R5]
    # distributor, hardship policy and AER lost their only edges with the old d1: orphans.
    assert store.entities(["distributor", "hardship policy", "aer"]) == []
    assert store.counts() == GraphCounts(entities=4, relationships=3)


def test_relationship_fields_roundtrip(store: GraphStore) -> None:
    edge = Relationship(
        source=RETAILER.key,
        target=CUSTOMER.key,
        type="MUST_GIVE_NOTICE",
        description='must give "at least 10 business days" notice — clause 4.2(b)',
        source_doc="nerr-v41.pdf",
        chunk_id="nerr-v41.pdf-17",
    )
    store.replace_document("nerr-v41.pdf", [RETAILER, CUSTOMER], [edge])

    [stored] = store.relationships_for_document("nerr-v41.pdf")
    assert stored == edge
    assert (stored.type, stored.description, stored.source_doc, stored.chunk_id) == (
        "MUST_GIVE_NOTICE",
        'must give "at least 10 business days" notice — clause 4.2(b)',
        "nerr-v41.pdf",
        "nerr-v41.pdf-17",
    )
    assert stored.id == edge.id
    assert store.walk(["customer"]) == [path((CUSTOMER, RETAILER), edge)]


def test_same_edge_twice_in_one_call_is_stored_once(store: GraphStore) -> None:
    assert store.replace_document("d1", HUB_ENTITIES, [R1, R1, R2]) == GraphCounts(3, 2)
    assert store.relationships_for_document("d1") == by_id(R1, R2)


def test_shared_entity_survives_deleting_one_document(store: GraphStore) -> None:
    load_hub(store)
    store.replace_document("d2", [RETAILER, LIFE_SUPPORT], [R5])

    removed = store.delete_document("d1")

    assert removed == GraphCounts(entities=4, relationships=4)  # customer, distributor, policy, aer
    assert store.entities(["retailer", "life support customer"]) == [
        Entity("Retailer", "Role", "sells energy to customers"),
        Entity("Life support customer", "DefinedTerm"),
    ]
    assert store.counts() == GraphCounts(entities=2, relationships=1)
    assert store.relationships_for_document("d1") == []


def test_entity_without_relationships_is_removed_as_orphan(store: GraphStore) -> None:
    unused = Entity("Unused term", "DefinedTerm", "mentioned but never related")
    counts = store.replace_document("d1", [*HUB_ENTITIES, unused], HUB_EDGES)

    assert counts == GraphCounts(entities=5, relationships=4)
    assert store.entities(["unused term"]) == []
    assert store.counts() == GraphCounts(entities=5, relationships=4)


def test_delete_unknown_document_removes_nothing(store: GraphStore) -> None:
    load_hub(store)
    assert store.delete_document("never-ingested.pdf") == GraphCounts(0, 0)
    assert store.counts() == GraphCounts(entities=5, relationships=4)


def test_existing_entity_keeps_name_and_type_and_gains_missing_fields(store: GraphStore) -> None:
    bare = Entity("Retailer", "Role")
    store.replace_document("d1", [bare, CUSTOMER], [R1])
    assert store.similar_entities(QUERY, k=1)[0].key == "customer"  # retailer has no vector yet

    richer = Entity(" RETAILER  ", "Organisation", "a seller of energy", (1.0, 0.0, 0.0, 0.0))
    store.replace_document("d2", [richer, LIFE_SUPPORT], [R5])
    assert store.entities(["retailer"]) == [Entity("Retailer", "Role", "a seller of energy")]
    top = store.similar_entities(QUERY, k=1)[0]
    assert (top.key, top.name, top.type) == ("retailer", "Retailer", "Role")

    other = Entity("Retailer", "Role", "another description", (0.0, 0.0, 0.0, 1.0))
    store.replace_document("d3", [other, AER], [rel(other, AER, "REPORTS_TO", "d3-0")])
    assert store.entities(["retailer"]) == [Entity("Retailer", "Role", "a seller of energy")]
    assert store.similar_entities(QUERY, k=1)[0].key == "retailer"  # vector not replaced


# -- bad input ------------------------------------------------------------------------------


def test_relationship_to_unknown_entity_raises_and_writes_nothing(store: GraphStore) -> None:
    load_hub(store)
    newcomer = Entity("Embedded network", "DefinedTerm")
    ghost = Relationship("embedded network", "nobody", "PART_OF", "x", "d1", "d1-9")

    with pytest.raises(ValueError, match="refers to unknown entity 'nobody'"):
        store.replace_document("d1", [newcomer, *HUB_ENTITIES], [R1, ghost])

    assert store.relationships_for_document("d1") == by_id(*HUB_EDGES)
    assert store.entities(["embedded network"]) == []
    assert store.counts() == GraphCounts(entities=5, relationships=4)


def test_relationship_of_another_document_raises(store: GraphStore) -> None:
    with pytest.raises(ValueError, match="belongs to 'd2', not 'd1'"):
        store.replace_document("d1", [RETAILER, LIFE_SUPPORT], [R5])
    assert store.counts() == GraphCounts(0, 0)


def test_vector_of_wrong_dimension_raises_and_writes_nothing(store: GraphStore) -> None:
    load_hub(store)
    odd = Entity("Embedded network", "DefinedTerm", "", (1.0, 0.0, 0.0))
    bare = Entity("Retailer", "Role")
    edge = rel(bare, odd, "OPERATES", "d2-0")
    with pytest.raises(
        EmbeddingMismatchError, match="3 dimensions but the graph store holds 4-dim"
    ):
        store.replace_document("d2", [bare, odd], [edge])
    with pytest.raises(ValueError, match="has a 3-dim vector; others in this call have 4"):
        store.replace_document("d2", [RETAILER, odd], [edge])
    assert store.counts() == GraphCounts(entities=5, relationships=4)


def test_schema_dimension_conflicts_only_with_stored_vectors(backend: GraphStore) -> None:
    backend.ensure_schema(3)
    backend.ensure_schema(DIM)  # nothing stored yet: the new dimension wins
    backend.ensure_schema(DIM)  # idempotent
    load_hub(backend)
    with pytest.raises(EmbeddingMismatchError, match="kb rebuild embeddings --all --reset"):
        backend.ensure_schema(8)
    assert backend.counts() == GraphCounts(entities=5, relationships=4)


def test_clear_removes_everything_and_frees_the_dimension(backend: GraphStore) -> None:
    backend.ensure_schema(DIM)
    load_hub(backend)
    assert backend.replace_document("d2", [RETAILER, LIFE_SUPPORT], [R5]) == GraphCounts(2, 1)
    assert backend.clear() == GraphCounts(entities=6, relationships=5)
    assert backend.counts() == GraphCounts(entities=0, relationships=0)
    assert backend.relationships_for_document("d1") == []
    # a model change: vectors of another dimension may now be stored
    backend.ensure_schema(2)
    entity = Entity("Retailer", "Role", "", (1.0, 0.0))
    edge = Relationship(entity.key, entity.key, "PART_OF", "", "d3", "d3-0")
    assert backend.replace_document("d3", [entity], [edge]) == GraphCounts(1, 1)
    assert [h.key for h in backend.similar_entities((1.0, 0.0), 1)] == ["retailer"]
    assert backend.clear() == GraphCounts(entities=1, relationships=1)
    assert backend.clear() == GraphCounts(entities=0, relationships=0)


# -- similarity -----------------------------------------------------------------------------


def test_similar_entities_by_cosine(store: GraphStore) -> None:
    load_hub(store)

    hits = store.similar_entities(QUERY, k=3)
    assert [(h.key, h.name, h.type) for h in hits] == [
        ("retailer", "Retailer", "Role"),
        ("customer", "Customer", "Role"),
        ("distributor", "Distributor", "Role"),
    ]
    assert [h.score for h in hits] == pytest.approx([1.0, 0.8, 0.6], abs=1e-6)

    everything = store.similar_entities(np.array([2.0, 0.0, 0.0, 0.0]), k=10)
    assert [h.key for h in everything] == [
        "retailer", "customer", "distributor", "hardship policy", "aer"
    ]
    assert [h.score for h in everything] == pytest.approx([1.0, 0.8, 0.6, 0.0, -1.0], abs=1e-6)


def test_similar_entities_rejects_bad_queries(store: GraphStore) -> None:
    load_hub(store)
    with pytest.raises(EmbeddingMismatchError, match="query vector has 3 dimensions"):
        store.similar_entities((1.0, 0.0, 0.0), k=3)
    with pytest.raises(ValueError, match="not all zeros"):
        store.similar_entities((0.0, 0.0, 0.0, 0.0), k=3)
    with pytest.raises(ValueError, match="k must be at least 1"):
        store.similar_entities(QUERY, k=0)


def test_similar_entities_on_empty_graph(store: GraphStore) -> None:
    assert store.similar_entities(QUERY, k=5) == []


# -- walks ----------------------------------------------------------------------------------


def test_walk_one_hop_through_hub(store: GraphStore) -> None:
    load_hub(store)
    # Seed order first (aer, then retailer); within a seed by node keys.
    assert store.walk(["aer", "retailer"], hops=1) == [
        path((AER, POLICY), R4),
        path((RETAILER, CUSTOMER), R1),
        path((RETAILER, DISTRIBUTOR), R2),
        path((RETAILER, POLICY), R3),
    ]
    assert store.walk(["aer", "retailer"], hops=1, limit=2) == [
        path((AER, POLICY), R4),
        path((RETAILER, CUSTOMER), R1),
    ]


def test_walk_two_hops_through_hub(store: GraphStore) -> None:
    load_hub(store)
    assert store.walk(["customer"], hops=2) == [
        path((CUSTOMER, RETAILER), R1),
        path((CUSTOMER, RETAILER, DISTRIBUTOR), R1, R2),
        path((CUSTOMER, RETAILER, POLICY), R1, R3),
    ]
    # Shorter paths first across all seeds; edges walked against their direction too.
    assert store.walk(["aer", "retailer"], hops=2) == [
        path((AER, POLICY), R4),
        path((RETAILER, CUSTOMER), R1),
        path((RETAILER, DISTRIBUTOR), R2),
        path((RETAILER, POLICY), R3),
        path((AER, POLICY, RETAILER), R4, R3),
        path((RETAILER, POLICY, AER), R3, R4),
    ]
    capped = store.walk(["aer", "retailer"], hops=2, limit=5)
    assert len(capped) == 5
    assert capped[-1] == path((AER, POLICY, RETAILER), R4, R3)


def test_walk_never_uses_an_edge_twice(store: GraphStore) -> None:
    a = Entity("Market participant", "Role")
    b = Entity("AEMO", "Organisation")
    forward = rel(a, b, "REGISTERS_WITH", "d1-0")
    back = rel(b, a, "REGISTERS", "d1-1")
    store.replace_document("d1", [a, b], [forward, back])
    first, second = by_id(forward, back)

    # A-B-A over two different edges is a path; A-B-A over the same edge twice is not.
    assert store.walk(["market participant"], hops=2) == [
        path((a, b), first),
        path((a, b), second),
        path((a, b, a), first, second),
        path((a, b, a), second, first),
    ]


def test_walk_unknown_seed_and_bad_arguments(store: GraphStore) -> None:
    load_hub(store)
    assert store.walk(["nobody"], hops=2) == []
    assert store.walk([], hops=1) == []
    with pytest.raises(ValueError, match="hops must be 1 or 2, got 3"):
        store.walk(["retailer"], hops=3)
    with pytest.raises(ValueError, match="hops must be 1 or 2, got 0"):
        store.walk(["retailer"], hops=0)


# -- overview and counts --------------------------------------------------------------------


def test_overview_orders_by_combined_endpoint_degree(store: GraphStore) -> None:
    load_hub(store)
    # Combined degrees: R3 retailer+policy 3+2=5; R1 3+1=4; R2 1+3=4; R4 1+2=3.
    tied = by_id(R1, R2)
    assert store.overview() == [R3, *tied, R4]
    assert store.overview(limit=2) == [R3, tied[0]]

    store.replace_document("d2", [RETAILER, LIFE_SUPPORT], [R5])
    # Retailer now has degree 4: R3 6, R1 5, R2 5, R5 4+1=5, R4 3.
    assert store.overview() == [R3, *by_id(R1, R2, R5), R4]
    assert store.overview(document="d2") == [R5]
    assert store.overview(limit=1, document="d1") == [R3]


def test_counts_for_graph_and_document(store: GraphStore) -> None:
    assert store.counts() == GraphCounts(0, 0)
    load_hub(store)
    store.replace_document("d2", [RETAILER, LIFE_SUPPORT], [R5])
    assert store.counts() == GraphCounts(entities=6, relationships=5)
    assert store.counts("d1") == GraphCounts(entities=5, relationships=4)
    assert store.counts("d2") == GraphCounts(entities=2, relationships=1)
    assert store.counts("missing") == GraphCounts(0, 0)


# -- unicode --------------------------------------------------------------------------------


def test_unicode_entity_names(store: GraphStore) -> None:
    street = Entity("Energieversorgung Straße", "Organisation", "Münchner Versorger")
    tokyo = Entity("東京電力", "Organisation")
    quebec = Entity("Re\u0301gie de l'e\u0301nergie du Québec", "Organisation")  # decomposed é
    edges = [rel(street, tokyo, "TRADES_WITH", "d1-0"), rel(quebec, tokyo, "REFERS_TO", "d1-1")]
    store.replace_document("d1", [street, tokyo, quebec], edges)

    assert street.key == "energieversorgung strasse"
    assert quebec.key == "régie de l'énergie du québec"  # NFC, case-folded
    assert store.entities([tokyo.key, "energieversorgung strasse", quebec.key]) == [
        tokyo,
        street,
        Entity("Re\u0301gie de l'e\u0301nergie du Québec", "Organisation"),  # name kept as given
    ]
    assert store.walk(["東京電力"], hops=1) == [
        path((tokyo, street), edges[0]),
        path((tokyo, quebec), edges[1]),
    ]
    assert entity_key(" ÉNERGIE   Straße ") == "énergie strasse"


# -- the SQL file matches the code (Postgres) ----------------------------------------------


@pytest.mark.services
def test_sql_file_creates_the_same_tables_as_the_code(postgres_engine: sa.Engine) -> None:
    ddl = (REPO_ROOT / "sql" / "002_graph.sql").read_text(encoding="utf-8")
    schemas = {"from_file": None, "from_code": None}
    with postgres_engine.begin() as conn:
        for schema in schemas:
            conn.execute(sa.text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
            conn.execute(sa.text(f"CREATE SCHEMA {schema}"))
        conn.execute(sa.text("SET LOCAL search_path TO from_file"))
        conn.exec_driver_sql(ddl)
        conn.exec_driver_sql(ddl)  # idempotent
        conn.execute(sa.text("SET LOCAL search_path TO from_code"))
        GRAPH_METADATA.create_all(conn)
        inspector = sa.inspect(conn)
        for schema in schemas:
            tables = {}
            for table in sorted(inspector.get_table_names(schema=schema)):
                tables[table] = {
                    "columns": [
                        (c["name"], str(c["type"]), c["nullable"], c["default"])
                        for c in inspector.get_columns(table, schema=schema)
                    ],
                    "primary_key": inspector.get_pk_constraint(table, schema=schema),
                    "foreign_keys": sorted(
                        (fk["name"], tuple(fk["constrained_columns"]), fk["referred_table"])
                        for fk in inspector.get_foreign_keys(table, schema=schema)
                    ),
                    "indexes": sorted(
                        (ix["name"], tuple(ix["column_names"]), ix["unique"])
                        for ix in inspector.get_indexes(table, schema=schema)
                    ),
                }
            schemas[schema] = tables
        for schema in schemas:
            conn.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))

    assert sorted(schemas["from_code"]) == ["graph_entities", "graph_relationships"]
    assert schemas["from_file"] == schemas["from_code"]


def test_self_loop_is_one_path_and_counts_twice_in_degree(store: GraphStore) -> None:
    a = Entity("Retail market", "DefinedTerm")
    b = Entity("Small customer", "Role")
    loop = rel(a, a, "REFERS_TO", "d1-0")
    ab = rel(a, b, "INCLUDES", "d1-1")
    store.replace_document("d1", [a, b], [ab, loop])

    assert store.walk(["retail market"], hops=2) == [
        path((a, a), loop),
        path((a, b), ab),
        path((a, a, b), loop, ab),
    ]
    # degree(a) = 3 (the loop twice, ab once), degree(b) = 1: loop 6, ab 4.
    assert store.overview() == [loop, ab]
    assert store.counts("d1") == GraphCounts(entities=2, relationships=2)


# -- unreachable servers --------------------------------------------------------------------


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_unreachable_postgres_raises_store_unavailable() -> None:
    port = _closed_port()
    engine = sa.create_engine(
        f"postgresql+psycopg://kb:secret@127.0.0.1:{port}/kb", connect_args={"connect_timeout": 5}
    )
    with pytest.raises(StoreUnavailableError, match=rf"127\.0\.0\.1:{port}/kb.*unreachable"):
        SqlGraphStore(engine).counts()
    engine.dispose()


def test_unreachable_neo4j_raises_store_unavailable() -> None:
    port = _closed_port()
    # no retry: nothing listens, and the driver's first retry waits ~1 s (its initial delay)
    with neo4j.GraphDatabase.driver(
        f"bolt://127.0.0.1:{port}", auth=None, max_transaction_retry_time=0, connection_timeout=5
    ) as driver:
        with pytest.raises(StoreUnavailableError, match=rf"Neo4j at 127\.0\.0\.1:{port}"):
            Neo4jGraphStore(driver).counts()


@pytest.mark.services
def test_neo4j_store_from_the_factory_closes_its_driver(neo4j_driver: neo4j.Driver) -> None:
    # A store the factory opened owns its driver (else every run leaked one); a driver
    # handed in by its owner stays open.
    from kb_shared.settings import Settings
    from kb_shared.stores.factory import open_graph_store

    user = os.environ.get("KB_TEST_NEO4J_USER")
    settings = Settings(
        neo4j_uri=neo4j_uri(),
        **({"neo4j_user": user, "neo4j_password": os.environ.get("KB_TEST_NEO4J_PASSWORD", "")}
           if user else {}),
    )
    store = open_graph_store(settings)
    assert isinstance(store, Neo4jGraphStore)
    store.counts()
    store.close()
    with pytest.raises(Exception, match="closed"):
        store.driver.verify_connectivity()
    borrowed = Neo4jGraphStore(neo4j_driver)
    borrowed.close()
    neo4j_driver.verify_connectivity()
