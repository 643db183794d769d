"""A store that goes down during a build (issue 16, "Crash and outage recovery"): the document
being built fails with a reason naming the store, the documents built before it keep exactly
what they had, and once the store is back ``kb build`` (``build_documents`` over
``documents_to_build``) finishes it with the chunks, vectors and edges of an uninterrupted
build.

The outages are real: Postgres and Neo4j are the throwaway servers of ``.ci/services.sh``,
stopped (``kb_postgres_pause`` / ``kb_neo4j_pause``) from inside the embedding step of the
document under test and started again (``*_resume``, same port and data) before the retry;
the SQLite vector index is held locked by another writer. The providers are the fakes of
``tests/fakes.py`` (no model). ``Outage`` and ``SERVICE_ENV`` are shared with
``tests/mcp/test_outages.py``.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np
import pytest

from kb_assets import operations
from kb_assets.assets import CORPUS_ASSETS
from kb_assets.constants import BUILD_JOB
from kb_assets.jobs import kb_resources
from kb_assets.intake import IntakeStatus, admit
from kb_assets.jobs import build_documents_job
from kb_assets.resources import StoresResource
from kb_shared.stores.catalog import DocumentRow
from kb_shared.stores import factory, vectors_sqlite
from tests.assets.fake_providers import FakeProviders
from tests.conftest import REPO_ROOT, neo4j_uri, postgres_url, skip_or_fail
from tests.fakes import HashingEmbedder, tiny_pdf

SERVICES_SCRIPT = REPO_ROOT / ".ci" / "services.sh"

#: The variables ``kb_services_start`` exports, read when this module is imported: the autouse
#: ``_isolated_env`` fixture of ``tests/conftest.py`` removes every ``KB_*`` variable but
#: ``KB_TEST_*`` from each test's environment.
SERVICE_ENV = {
    name: value
    for name, value in os.environ.items()
    if name.startswith(("KB_PG_", "KB_NEO4J_", "KB_SERVICES_DIR", "KB_TEST_"))
}

#: Which ``SERVICE_ENV`` variable says a server of ``.ci/services.sh`` can be paused.
PAUSABLE = {"postgres": "KB_PG_DATA", "neo4j": "KB_NEO4J_DIR"}

KEPT, HIT, LATER = "Outage Kept.pdf", "Outage Hit.pdf", "Outage Later.pdf"
KEPT_ID, HIT_ID, LATER_ID = "outage-kept.pdf", "outage-hit.pdf", "outage-later.pdf"


class Outage:
    """Stops and starts one server of ``.ci/services.sh`` (``"postgres"`` or ``"neo4j"``),
    keeping its port and data, so clients see connections refused and then the same store
    again. Skips (fails under ``KB_REQUIRE_SERVICES=1``) without that script's servers."""

    def __init__(self, server: str) -> None:
        if PAUSABLE[server] not in SERVICE_ENV:
            skip_or_fail(
                f"stopping {server} needs the servers of .ci/services.sh "
                f"(kb_services_start exports {PAUSABLE[server]})"
            )
        self.server = server
        self.down = False

    def _run(self, function: str) -> None:
        subprocess.run(
            ["bash", "-c", 'source "$1" && ' + function, "bash", str(SERVICES_SCRIPT)],
            env={**os.environ, **SERVICE_ENV}, check=True, timeout=300,
        )

    def stop(self) -> None:
        """Stop the server (waits until it has exited)."""
        self._run(f"kb_{self.server}_pause")
        self.down = True

    def start(self) -> None:
        """Start it again if it is stopped (waits until it accepts connections)."""
        if self.down:
            self._run(f"kb_{self.server}_resume")
            self.down = False


@pytest.fixture
def outages() -> Iterator[list[Outage]]:
    """Where a test puts the ``Outage``s it makes: each is started again at teardown, so a
    failing test never leaves a server down for the rest of the run."""
    made: list[Outage] = []
    yield made
    for outage in made:
        outage.start()


class OutageEmbedder(HashingEmbedder):
    """``HashingEmbedder`` that runs ``hook`` (once) before embedding: the outage begins
    inside the embedding step of the document being built."""

    hook: Callable[[], None] | None = None

    def embed_documents(self, texts, titles=None) -> np.ndarray:  # noqa: ANN001 - as the base
        hook, self.hook = self.hook, None
        if hook is not None:
            hook()
        return super().embed_documents(texts, titles)


#: What ``outage_build_job`` runs on (a job to run must come from a module-level function,
#: ``dagster.reconstructable``).
OUTAGE_JOB: dict[str, Any] = {}


def outage_build_job() -> dg.JobDefinition:
    """The build job (with its failure hook) on ``OUTAGE_JOB``'s stores and fake providers."""
    defs = dg.Definitions(
        assets=CORPUS_ASSETS,
        jobs=[build_documents_job],
        resources=kb_resources(OUTAGE_JOB["stores"], OUTAGE_JOB["providers"]),
        executor=dg.in_process_executor,
    )
    return defs.resolve_job_def(BUILD_JOB)


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as instance:
        yield instance


def kb_build(stores: StoresResource, instance: dg.DagsterInstance, doc_ids: list[str]) -> list:
    """``build_documents`` as ``kb build`` runs it, on ``outage_build_job``."""
    return operations.build_documents(stores, instance, doc_ids)


def snapshot(stores: StoresResource, doc_id: str) -> tuple:
    """What a build left of ``doc_id``, with the doc id taken out of every id so that two
    documents built from the same content compare equal: catalog status and counts, vector
    ids, graph edges."""
    row = stores.catalog().find_by_doc_id(doc_id)
    index = stores.existing_vectors()
    ids = sorted(i.replace(doc_id, "DOC") for i in index.list_ids(doc_id)) if index else []
    edges = sorted(
        (e.source, e.type, e.target, e.chunk_id.replace(doc_id, "DOC"))
        for e in stores.graph().relationships_for_document(doc_id)
    )
    counts = (
        row.status, row.failure_reason, row.chunk_count, row.relationship_count,
        row.figure_count,
    )
    return counts, ids, edges


def admit_three(tmp_path: Path, stores: StoresResource, instance: dg.DagsterInstance) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for name in (KEPT, HIT, LATER):
        (folder / name).write_bytes(tiny_pdf(name))
    outcomes = admit(sorted(folder.iterdir()), stores, instance)
    assert {(o.status, o.doc_id) for o in outcomes} == {
        (IntakeStatus.ADDED, KEPT_ID), (IntakeStatus.ADDED, HIT_ID), (IntakeStatus.ADDED, LATER_ID)
    }


#: A process that takes the write lock of the SQLite file ``argv[1]``, says ``locked`` and
#: holds it until its stdin closes. Another process, because a lock taken in this one is not
#: seen by the index's connections (POSIX locks belong to the process).
LOCK_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()
"""


def lock_vectors(path: Path, held: list[subprocess.Popen]) -> None:
    """Start a ``LOCK_HOLDER`` on the SQLite vector index at ``path``; it goes in ``held``."""
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    held.append(holder)
    assert holder.stdout is not None and holder.stdout.readline() == "locked\n"


def release_vectors(held: list[subprocess.Popen]) -> None:
    """End every ``LOCK_HOLDER`` in ``held`` (its lock goes with it)."""
    while held:
        holder = held.pop()
        if holder.stdin is not None:
            holder.stdin.close()
        holder.wait(timeout=30)


def outage_scenario(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stores: StoresResource,
    instance: dg.DagsterInstance, begin: Callable[[], None], end: Callable[[], None],
) -> tuple[Any, DocumentRow, tuple, dict[str, tuple]]:
    """Build KEPT, then HIT with ``begin`` run inside its embedding step, then ``end`` and
    ``kb build`` of what is left. Returns HIT's failed outcome, HIT's catalog row as the
    outage left it, KEPT's snapshot before, and every snapshot after (``{doc_id: snapshot}``)."""
    embedder = OutageEmbedder(32)
    OUTAGE_JOB.update(stores=stores, providers=FakeProviders(embedder_=embedder))
    on_fakes = functools.partial(operations.run_build, job=outage_build_job)
    monkeypatch.setattr(operations, "run_build", on_fakes)  # what kb_build's runs execute
    admit_three(tmp_path, stores, instance)
    (kept,) = kb_build(stores, instance, [KEPT_ID])
    assert kept.status == "ready", kept.reason
    before = snapshot(stores, KEPT_ID)
    assert before[0] == ("ready", None, 3, 2, 1)

    embedder.hook = begin
    (hit,) = kb_build(stores, instance, [HIT_ID])
    end()
    left = stores.catalog().find_by_doc_id(HIT_ID)
    todo = operations.documents_to_build(stores)
    assert sorted(todo) == [HIT_ID, LATER_ID]  # the failed one is built again; KEPT is not
    finished = kb_build(stores, instance, todo)
    assert [(o.doc_id, o.status, o.reason) for o in finished] == [
        (doc, "ready", "") for doc in todo
    ]
    after = {doc: snapshot(stores, doc) for doc in (KEPT_ID, HIT_ID, LATER_ID)}
    return hit, left, before, after


def assert_recovered(before: tuple, after: dict[str, tuple]) -> None:
    """KEPT is exactly as it was; HIT and LATER hold what KEPT's uninterrupted build made."""
    assert after[KEPT_ID] == before
    assert after[HIT_ID] == before
    assert after[LATER_ID] == before


@pytest.mark.services
@pytest.mark.slow
def test_postgres_down_during_a_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, instance: dg.DagsterInstance,
    outages: list[Outage],
) -> None:
    from benchmarks.postgres import scratch_database  # noqa: PLC0415

    with scratch_database(postgres_url(), "kb_test_outage") as url:
        outage = Outage("postgres")
        outages.append(outage)
        stores = StoresResource(home=str(tmp_path / "kb"), overrides={"database_url": url})
        try:
            port = url.rsplit("@", 1)[1].split("/", 1)[0]
            hit, left, before, after = outage_scenario(
                tmp_path, monkeypatch, stores, instance, outage.stop, outage.start
            )
            # the catalog cannot record the failure while it is down: the outcome names the
            # database, and the row waits as it was until the next `kb build`
            host, number = port.split(":")
            assert (hit.status, hit.name) == ("failed", HIT_ID)  # no row to name it by
            # the first step to reach the catalog after it went down is named: embeddings,
            # or a step beside it that the executor ran next (changes, obligations)
            step, _, reason = hit.reason.partition(": ")
            assert step in ("embeddings", "changes", "obligations"), hit.reason
            assert reason.startswith(
                "StoreUnavailableError: catalog database "
                f"postgresql+psycopg://postgres:***@{port}/kb_test_outage"
            )
            assert hit.reason.endswith(
                f'is unavailable: connection failed: connection to server at "{host}", '
                f"port {number} failed: Connection refused"
            )
            assert left.status == "pending"  # as admitted: the failure could not be written
            assert_recovered(before, after)
        finally:
            outage.start()
            stores.close()


@pytest.mark.services
@pytest.mark.slow
def test_neo4j_down_during_a_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, instance: dg.DagsterInstance,
    outages: list[Outage],
) -> None:
    uri = neo4j_uri()
    # the build's graph step retries 30 s in production; while Neo4j is stopped that is only
    # waiting (the reason it fails with is the same after 2 s)
    monkeypatch.setattr(factory, "WRITER_RETRY_SECONDS", 2.0)
    outage = Outage("neo4j")
    outages.append(outage)
    stores = StoresResource(home=str(tmp_path / "kb"), overrides={"neo4j_uri": uri})
    try:
        for doc in (KEPT_ID, HIT_ID, LATER_ID):  # left by an earlier run of this test
            stores.graph().delete_document(doc)
        hit, left, before, after = outage_scenario(
            tmp_path, monkeypatch, stores, instance, outage.stop, outage.start
        )
        address = uri.removeprefix("bolt://")
        expected = (
            f"graph: StoreUnavailableError: Neo4j at {address} (database 'neo4j') is unreachable"
        )
        assert hit.status == "failed"
        assert hit.reason.startswith(expected)
        assert (left.status, left.failure_reason) == ("failed", hit.reason)
        assert_recovered(before, after)
    finally:
        outage.start()
        for doc in (KEPT_ID, HIT_ID, LATER_ID):
            stores.graph().delete_document(doc)
        stores.close()


@pytest.mark.slow
def test_vector_index_locked_during_a_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, instance: dg.DagsterInstance
) -> None:
    monkeypatch.setattr(vectors_sqlite, "BUSY_TIMEOUT_MS", 1000)  # 30 s in production
    stores = StoresResource(home=str(tmp_path / "kb"))
    held: list[subprocess.Popen] = []
    path = stores.settings.resolved_vector_path
    try:
        hit, left, before, after = outage_scenario(
            tmp_path, monkeypatch, stores, instance, lambda: lock_vectors(path, held),
            lambda: release_vectors(held),
        )
        assert hit.status == "failed"
        assert hit.reason.startswith(
            f"embeddings: StoreUnavailableError: the SQLite vector index {path} stayed locked "
            "by another writer for 1 s while upserting 3 points: database is locked"
        )
        assert (left.status, left.failure_reason) == ("failed", hit.reason)
        assert_recovered(before, after)
    finally:
        release_vectors(held)
        stores.close()
