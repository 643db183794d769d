"""``kb migrate`` (``kb_shared.stores.migrate``): a corpus built by the real assets on the
fakes, on the embedded default, copied into other backends — a SQLite catalog + Qdrant local
mode + a blob folder always, Postgres + Neo4j + Qdrant local mode with the services — then
compared item by item, searched before and after, copied again (nothing written) and
refused when the target holds other data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import neo4j
import pytest
import sqlalchemy as sa
from qdrant_client import QdrantClient
from typer.testing import CliRunner

from benchmarks.postgres import scratch_database
from kb_assets.assets import CORPUS_ASSETS
from kb_assets.cli.main import app
from kb_assets.jobs import kb_resources
from kb_assets.intake import IntakeStatus, admit
from kb_assets.resources import StoresResource
from kb_shared.ingest.contextual import stored_embedding_text
from kb_shared.search.citations import PointPayload
from kb_shared.errors import MigrationError, MigrationRefusedError
from kb_shared.graph_model import Entity, Relationship
from kb_shared.identity import point_uuid
from kb_shared.search.retrieval import search_docs
from kb_shared.settings import Settings
from kb_shared.search.sparse import fts_document, sparse_vector
from kb_shared.stores.blobs import BlobStore
from kb_shared.stores.catalog import Catalog
from kb_shared.stores.factory import ensure_sql_schema
from kb_shared.stores.graph import GraphStore
from kb_shared.stores.graph_neo4j import Neo4jGraphStore
from kb_shared.stores.graph_sql import SqlGraphStore
from kb_shared.stores.migrate import MigrationTargets, migrate, sparse_source_text
from kb_shared.stores.sql import make_engine
from kb_shared.stores.vectors import KIND_FIGURE, KIND_TEXT, Point, StoredPoint, VectorIndex
from kb_shared.stores.vectors_qdrant import SPARSE, QdrantVectorIndex
from kb_shared.stores.vectors_sqlite import SqliteVectorIndex
from tests.assets.fake_providers import FakeProviders
from tests.conftest import neo4j_uri, postgres_url
from tests.fakes import SAMPLE_MARKDOWN, HashingEmbedder, tiny_pdf

#: The three documents and the Markdown each converts to: headings of different lengths, so
#: no two chunks tie on either side of a search, and codes, so the sparse side holds
#: compounds like ``in008-24``, ``4.10.0`` and ``terms-of-use`` (whose part ``of`` is a
#: stopword).
MARKDOWN = {
    "Fake Procedure.pdf": SAMPLE_MARKDOWN,
    "Market Notice IN008-24.pdf": SAMPLE_MARKDOWN.replace(
        "# Fake Retail Procedure", "# Market Notice"
    ).replace("within 2 business days", "under clause 4.10.0 and notice IN008-24 within 2 days"),
    "Terms of Use.pdf": SAMPLE_MARKDOWN.replace(
        "# Fake Retail Procedure", "# Terms of Use Register Procedure for Sites"
    ).replace("keeps the register", "keeps the terms-of-use register (SO_OP_3705)"),
}
DOCS = ["fake-procedure.pdf", "market-notice-in008-24.pdf", "terms-of-use.pdf"]
QUERIES = [
    "the Distributor must notify the customer of the site register",
    "IN008-24 clause 4.10.0",
    "terms-of-use register SO_OP_3705",
    "Notification flow figure",
]
MODEL = "test-hashing-32"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """Three documents built by the six assets on the fakes under an embedded KB_HOME, plus a
    document request and a reference source in the catalog."""
    root = tmp_path_factory.mktemp("source")
    stores = StoresResource(home=str(root / "kb"))
    providers = FakeProviders()
    with dg.DagsterInstance.ephemeral() as instance:
        for name, markdown in MARKDOWN.items():
            pdf = root / "in" / name
            pdf.parent.mkdir(parents=True, exist_ok=True)
            pdf.write_bytes(tiny_pdf(name))
            (outcome,) = admit([pdf], stores, instance)
            assert outcome.status == IntakeStatus.ADDED
            providers.converter_.markdown = markdown
            result = dg.materialize(
                CORPUS_ASSETS,
                partition_key=outcome.doc_id,
                resources=kb_resources(stores, providers),
                instance=instance,
            )
            assert result.success
    catalog = stores.catalog()
    catalog.add_document_request("Another procedure", "needed for the audit")
    catalog.upsert_reference_source("https://example.org/rules", "Rules", "the live rules page")
    stores.close()
    yield Settings(home=root / "kb")


def embedder() -> HashingEmbedder:
    """The embedder the corpus was built with (``FakeProviders``' default)."""
    return FakeProviders().embedder_


def source_index(settings: Settings) -> SqliteVectorIndex:
    index = SqliteVectorIndex(settings.resolved_vector_path)
    index.open(MODEL, 32, create=False)
    return index


def qdrant_index(path: Path) -> QdrantVectorIndex:
    index = QdrantVectorIndex(QdrantClient(path=str(path)), "kb_chunks")
    index.open(MODEL, 32, create=False)
    return index


def search(index: VectorIndex, query: str) -> list[tuple[float, str]]:
    """search_docs' whole ranking of the text chunks as ``(score, id)``, best first (the
    three figures share one caption, so they tie, and each backend orders exact ties its own
    way)."""
    answer = search_docs(index, embedder(), query, top_k=20, kind=KIND_TEXT)
    return [(round(p.score, 6), p.point.id) for p in answer.results]


def pipeline_sparse_text(point: StoredPoint) -> str:
    """The text the pipeline's sparse side indexed for ``point``: a chunk's embedding text
    (offline: ``stored_embedding_text``), a figure's own text."""
    if point.kind == KIND_FIGURE:
        return point.text
    return stored_embedding_text(point.text, PointPayload.from_payload(point.payload))


def native_qdrant(source: SqliteVectorIndex) -> QdrantVectorIndex:
    """The Qdrant index the pipeline would have built: the source's points and vectors with
    the sparse text the embeddings asset indexed (offline: ``stored_embedding_text``)."""
    index = QdrantVectorIndex(QdrantClient(":memory:"), "native")
    index.open(MODEL, 32)
    points = []
    for item in source.export_points(limit=10_000):
        stored = item.point
        points.append(
            Point(stored.id, stored.document, stored.kind, stored.text, item.dense,
                  stored.payload, pipeline_sparse_text(stored))
        )
    index.upsert(points)
    return index


def assert_same_stores(
    settings: Settings, catalog_url: str, qdrant: Path, graph: GraphStore, blobs: str
) -> None:
    """Every copied item equals its source: catalog rows, points (payloads, dense and sparse
    vectors, search results), graph edges and entities, blob bytes."""
    source_catalog = Catalog(make_engine(settings.resolved_database_url))
    target_catalog = Catalog(make_engine(catalog_url))
    try:
        assert target_catalog.list_documents() == source_catalog.list_documents()
        assert [r.doc_id for r in target_catalog.list_documents("ready")] == DOCS
        assert target_catalog.list_document_requests() == source_catalog.list_document_requests()
        assert target_catalog.list_reference_sources() == source_catalog.list_reference_sources()
    finally:
        source_catalog.close()
        target_catalog.close()

    source = source_index(settings)
    target = qdrant_index(qdrant)
    native = native_qdrant(source)
    try:
        ids = source.list_ids()
        assert len(ids) == 12 and target.list_ids() == ids
        assert target.fetch(ids) == source.fetch(ids)
        for item in source.export_points(limit=100):
            (record,) = target.client.retrieve(
                "kb_chunks", [str(point_uuid(item.point.id))], with_vectors=True
            )
            assert record.vector["dense"] == pytest.approx(item.dense.tolist(), abs=1e-6)
            indices, values = sparse_vector(pipeline_sparse_text(item.point))
            assert record.vector[SPARSE].indices == indices
            assert record.vector[SPARSE].values == pytest.approx(values)
        query = embedder()
        for text in QUERIES:
            vector = query.embed_query(text)
            # every point at the same cosine (points of equal score may come in another order)
            before = {h.id: h.score for h in source.dense_search(vector, 12)}
            after = {h.id: h.score for h in target.dense_search(vector, 12)}
            assert after == pytest.approx(before, abs=1e-5)
            # search_docs on the copy ranks exactly as an index the pipeline built on Qdrant
            ranked = search(target, text)
            assert len(ranked) == 9 and ranked == search(native, text)
    finally:
        source.close()
        target.close()
        native.close()

    engine = make_engine(settings.resolved_database_url)
    reader = SqlGraphStore(engine)
    try:
        assert graph.counts() == reader.counts()
        for doc in DOCS:
            assert graph.relationships_for_document(doc) == reader.relationships_for_document(doc)
        keys = ["retailer", "distributor"]
        assert graph.entities(keys) == reader.entities(keys)
        vector = embedder().embed_query("Retailer")
        assert [h.key for h in graph.similar_entities(vector, 2)] == [
            h.key for h in reader.similar_entities(vector, 2)
        ]
    finally:
        engine.dispose()

    source_blobs = BlobStore(settings.resolved_blob_url)
    target_blobs = BlobStore(blobs)
    keys = source_blobs.list()
    assert target_blobs.list() == keys and len(keys) > 20
    assert all(target_blobs.get(k) == source_blobs.get(k) for k in keys)


# --------------------------------------------------------------------------------------
# Embedded targets (no services): SQLite catalog and SQL graph, Qdrant local mode, a folder
# --------------------------------------------------------------------------------------
def test_sparse_source_text_gives_back_the_stored_terms() -> None:
    for text in ("Clause 4.10.0 of IN008-24", "the terms-of-use of SO_OP_3705", "", "a/b c"):
        terms = fts_document(text)
        assert fts_document(sparse_source_text(terms)) == terms
    assert sparse_source_text(fts_document("terms-of-use")) == "terms-of-use"
    with pytest.raises(MigrationError, match="cannot be rebuilt"):
        sparse_source_text("in008-24 in008")


def test_migrate_to_embedded_targets_copies_everything_once(
    corpus: Settings, tmp_path: Path
) -> None:
    catalog_url = f"sqlite:///{tmp_path / 'target.sqlite'}"
    blobs = (tmp_path / "blobs").as_uri()
    targets = MigrationTargets(catalog_url=catalog_url, qdrant=str(tmp_path / "qdrant"),
                               blob_url=blobs)
    report = migrate(corpus, targets, batch=5)
    assert all(line.ok for line in report.counts)
    counts = {(c.store, c.item): c.target for c in report.counts}
    assert counts[("catalog", "documents")] == 3
    assert counts[("catalog", "document_requests")] == 1
    assert counts[("vectors", "points (text)")] == 9
    assert counts[("vectors", "points (figure)")] == 3
    assert (counts[("graph", "entities")], counts[("graph", "relationships")]) == (2, 6)
    assert report.written["vectors"] == 12 and report.written["graph"] == 6

    engine = make_engine(catalog_url)
    try:
        assert_same_stores(corpus, catalog_url, tmp_path / "qdrant", SqlGraphStore(engine), blobs)
    finally:
        engine.dispose()

    again = migrate(corpus, targets)
    assert again.written == {"catalog": 0, "vectors": 0, "graph": 0, "blobs": 0}
    assert again.counts == report.counts


def test_a_target_with_other_data_is_refused_then_replaced(
    corpus: Settings, tmp_path: Path
) -> None:
    blobs = BlobStore((tmp_path / "blobs").as_uri())
    blobs.put("pdfs/other.pdf", b"%PDF- not ours")
    catalog_url = f"sqlite:///{tmp_path / 'target.sqlite'}"
    other = Catalog(make_engine(catalog_url))
    ensure_sql_schema(other.engine)
    other.add_document_request("Something else", "held by the target only")
    SqlGraphStore(other.engine).replace_document(
        "other.pdf",
        [Entity("Alpha", "Role"), Entity("Beta", "Role")],
        [Relationship("alpha", "beta", "MUST_NOTIFY", "", "other.pdf", "other.pdf-0")],
    )
    other.close()
    with QdrantVectorIndex(QdrantClient(path=str(tmp_path / "qdrant")), "kb_chunks") as index:
        index.open("another-model", 32)
    targets = MigrationTargets(
        catalog_url=catalog_url, blob_url=blobs.root_url, qdrant=str(tmp_path / "qdrant")
    )

    with pytest.raises(MigrationRefusedError) as refused:
        migrate(corpus, targets)
    message = str(refused.value)
    assert "catalog table document_requests: 0 rows the source lacks, 1 rows with other" in message
    assert "blobs: 1 keys the source lacks, 0 of another size" in message
    assert "graph: 1 relationships of documents the source lacks" in message
    assert f"holds 'another-model' (32 dimensions); the source holds '{MODEL}'" in message
    assert blobs.list() == ["pdfs/other.pdf"]  # nothing written
    engine = make_engine(catalog_url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM documents")).scalar() == 0
    engine.dispose()

    report = migrate(corpus, targets, replace=True)
    assert sorted(report.replaced) == ["blobs", "catalog", "graph", "vectors"]
    assert all(line.ok for line in report.counts)
    assert "pdfs/other.pdf" not in blobs.list()
    target = Catalog(make_engine(catalog_url))
    assert [r.title for r in target.list_document_requests()] == ["Another procedure"]
    target.close()


def test_the_same_store_as_target_or_no_source_is_refused(
    corpus: Settings, tmp_path: Path
) -> None:
    with pytest.raises(MigrationError, match="is the source"):
        migrate(corpus, MigrationTargets(blob_url=corpus.resolved_blob_url))
    with pytest.raises(ValueError, match="at least one target"):
        migrate(corpus, MigrationTargets())
    elsewhere = Settings(home=tmp_path / "not-a-corpus")
    with pytest.raises(MigrationError, match="no catalog at .*is KB_HOME"):
        migrate(elsewhere, MigrationTargets(blob_url=(tmp_path / "blobs").as_uri()))
    assert not (tmp_path / "not-a-corpus").exists()


def test_kb_migrate_prints_the_counts_and_exits_2_on_refusal(
    corpus: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KB_HOME", str(corpus.home))
    target = tmp_path / "blobs"
    result = CliRunner().invoke(app, ["migrate", "--to-blobs", target.as_uri()])
    assert result.exit_code == 0, result.output
    keys = len(BlobStore(target.as_uri()).list())
    (line,) = [row for row in result.output.splitlines() if "│ blobs" in row]
    assert line.split("│")[1:6] == ["blobs", "keys", str(keys), str(keys), "✓"] or [
        cell.strip() for cell in line.split("│")[1:6]
    ] == ["blobs", "keys", str(keys), str(keys), "✓"]
    BlobStore(target.as_uri()).put("extra.txt", b"not from the source")
    refused = CliRunner().invoke(app, ["migrate", "--to-blobs", target.as_uri()])
    assert refused.exit_code == 2
    assert "1 keys the source lacks" in refused.output
    assert CliRunner().invoke(app, ["migrate"]).exit_code == 2


# --------------------------------------------------------------------------------------
# The servers: Postgres + Neo4j + Qdrant local mode
# --------------------------------------------------------------------------------------
@pytest.mark.services
@pytest.mark.slow
def test_migrate_to_postgres_neo4j_and_qdrant(corpus: Settings, tmp_path: Path) -> None:
    uri = neo4j_uri()
    with (
        scratch_database(postgres_url(), "kb_migrate") as catalog_url,
        neo4j.GraphDatabase.driver(uri, auth=None) as driver,
    ):
        graph = Neo4jGraphStore(driver)
        graph.clear()
        blobs = (tmp_path / "blobs").as_uri()
        targets = MigrationTargets(
            catalog_url=catalog_url, qdrant=str(tmp_path / "qdrant"), neo4j_uri=uri,
            blob_url=blobs,
        )
        report = migrate(corpus, targets)
        assert all(line.ok for line in report.counts)
        assert {(c.store, c.item): c.target for c in report.counts}[("graph", "entities")] == 2
        assert_same_stores(corpus, catalog_url, tmp_path / "qdrant", graph, blobs)

        again = migrate(corpus, targets)
        assert again.written == {"catalog": 0, "vectors": 0, "graph": 0, "blobs": 0}

        # the id sequences moved past the copied ids: the next request gets a new id
        target = Catalog(make_engine(catalog_url))
        (copied,) = target.list_document_requests()
        assert target.add_document_request("Next one", "after the move").id == copied.id + 1
        target.close()
        with pytest.raises(MigrationRefusedError, match="document_requests: 1 rows the source"):
            migrate(corpus, MigrationTargets(catalog_url=catalog_url))

        graph.clear()
        assert graph.counts().relationships == 0
