"""The SQLite graph store's writes take the write lock at ``BEGIN`` (a 10,000-document build
lost one document to "database is locked": a deferred transaction that read before another
connection committed cannot become a writer in WAL mode, and SQLite answers at once instead
of waiting out the busy timeout; benchmarks/results/partitions-2026-12-02-all-10k.md)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pysqlite3.dbapi2 as sqlite3  # the library SQLAlchemy uses: one lock table
import sqlalchemy as sa

from kb_shared.graph_model import Entity, Relationship
from kb_shared.stores.graph import GraphCounts
from kb_shared.stores.graph_sql import SqlGraphStore
from kb_shared.stores.sql import make_engine

A = Entity("Retailer", "Role", "", (1.0, 0.0))
B = Entity("Customer", "Role", "", (0.0, 1.0))


def edge(document: str) -> Relationship:
    return Relationship(source=A.key, target=B.key, type="MUST_NOTIFY",
                        description="the retailer must notify the customer",
                        source_doc=document, chunk_id=f"{document}-0")


def test_a_graph_write_waits_for_another_writer_instead_of_failing(tmp_path: Path) -> None:
    path = tmp_path / "kb.sqlite"
    engine = make_engine(f"sqlite:///{path}")
    store = SqlGraphStore(engine)
    store.ensure_schema(2)
    assert store.replace_document("d1", [A, B], [edge("d1")]) == GraphCounts(2, 1)

    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # another process mid-write (the daemon's run)
    other.execute("UPDATE graph_entities SET description = 'changed' WHERE key = ?", (A.key,))
    done = threading.Event()

    def commit_soon() -> None:
        time.sleep(0.5)
        other.execute("COMMIT")
        done.set()

    threading.Thread(target=commit_soon).start()
    # a build process's fresh store reads the stored vector dimension first, then writes:
    # with a deferred BEGIN that failed at once ("database is locked") after the other
    # commit; now it waits for the lock and then writes
    counts = SqlGraphStore(engine).replace_document("d2", [A, B], [edge("d2")])
    assert done.is_set()
    assert counts == GraphCounts(2, 1)
    assert [r.source_doc for r in store.relationships_for_document("d2")] == ["d2"]
    with engine.connect() as conn:
        described = conn.execute(
            sa.text("SELECT description FROM graph_entities WHERE key = :k"), {"k": A.key}
        ).scalar()
    assert described == "changed"  # the other writer's commit is kept, not overwritten
    other.close()
    engine.dispose()
