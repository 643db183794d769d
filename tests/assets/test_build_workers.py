"""Two documents at once (issue 28, ``kb_assets.build_workers``): a build with two worker
processes stores exactly what a build one document after another stores — catalog rows,
chunk ids, vectors, graph edges — and returns the outcomes in the order asked; a document that
fails does not stop the others; a stop signal stops both documents in progress and marks them
stopped. Fake providers, tiny real PDFs, real spawned workers (so ``fake_job`` is a module-level
function that a worker imports, its stores from the run config)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import dagster as dg
import pysqlite3.dbapi2 as sqlite3
import pytest
import sqlite_vec
from typer.testing import CliRunner

from kb_assets import operations
from kb_assets.assets import CORPUS_ASSETS
from kb_assets.build_workers import largest_first, resolve_workers
from kb_assets.cli import main as cli
from kb_assets.constants import BUILD_JOB
from kb_assets.intake import IntakeStatus, admit
from kb_assets.jobs import build_documents_job, kb_resources
from kb_assets.live_runs import PROCESS_TAG, this_process
from kb_assets.resources import StoresResource
from kb_assets.stopping import STOPPED_REASON
from kb_shared.providers.base import ConvertedDocument
from kb_shared.stores.vectors import KIND_FIGURE, KIND_TEXT
from tests.assets.fake_providers import FakeProviders
from tests.fakes import FakeConverter, tiny_pdf

NAMES = ("A Procedure.pdf", "B Procedure.pdf", "C Procedure.pdf", "D Procedure.pdf")
DOCS = ("a-procedure.pdf", "b-procedure.pdf", "c-procedure.pdf", "d-procedure.pdf")

#: Set (to a folder) by the stop test: the markdown step then writes a file named after the PDF
#: there and waits, in Python, until Dagster's interrupt ends it.
SLOW_MARKDOWN_ENV = "KB_TEST_SLOW_MARKDOWN_DIR"


class MaybeSlowConverter(FakeConverter):
    """``FakeConverter``, which with ``SLOW_MARKDOWN_ENV`` set announces each conversion in
    that folder and then sleeps (up to 120 s) until the step is interrupted."""

    def convert(self, pdf: bytes, filename: str) -> ConvertedDocument:
        folder = os.environ.get(SLOW_MARKDOWN_ENV)
        if folder:
            (Path(folder) / filename).write_text("started", encoding="utf-8")
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                time.sleep(0.05)
        return super().convert(pdf, filename)


def fake_job() -> dg.JobDefinition:
    """The build job on fake providers; its stores come from the run config (``run_build``
    passes the caller's home), so a worker process builds into the same KB_HOME."""
    defs = dg.Definitions(
        assets=CORPUS_ASSETS,
        jobs=[build_documents_job],
        resources=kb_resources(StoresResource(), FakeProviders(converter_=MaybeSlowConverter())),
        executor=dg.in_process_executor,
    )
    return defs.resolve_job_def(BUILD_JOB)


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as instance:
        yield instance


def write_pdfs(folder: Path, *, broken: int | None = None) -> list[Path]:
    """The four PDFs in ``folder`` (written once, so every KB_HOME admits the same bytes); the
    one at index ``broken`` is cut short (the markdown step refuses it)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for number, name in enumerate(NAMES):
        data = tiny_pdf(name)
        (folder / name).write_bytes(data[:900] if number == broken else data)
        paths.append(folder / name)
    return paths


def admit_all(paths: list[Path], home: Path, instance: dg.DagsterInstance) -> StoresResource:
    """``home`` with ``paths`` admitted in order (their partitions too)."""
    stores = StoresResource(home=str(home))
    outcomes = admit(paths, stores, instance)
    assert [(o.status, o.doc_id) for o in outcomes] == [(IntakeStatus.ADDED, d) for d in DOCS]
    return stores


def stored_vectors(path: Path) -> dict[str, bytes]:
    """Point id -> its stored float32 vector, read from the SQLite index file."""
    with sqlite3.connect(path) as conn:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        (points,) = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE '%\\_points' "
            "ESCAPE '\\'"
        ).fetchone()
        vec = points.removesuffix("_points") + "_vec"
        rows = conn.execute(
            f"SELECT p.id, v.embedding FROM {points} AS p JOIN {vec} AS v ON v.rowid = p.rowid"
        ).fetchall()
    return {point_id: bytes(vector) for point_id, vector in rows}


def stored_state(stores: StoresResource) -> dict[str, Any]:
    """What a build leaves, without timestamps and run ids: catalog documents and versions,
    point ids and payloads per document, vectors, graph relationship counts."""
    catalog = stores.catalog()
    index = stores.existing_vectors()
    graph = stores.graph()
    documents = {
        row.doc_id: {k: v for k, v in asdict(row).items() if k not in ("created_at", "updated_at")}
        for row in catalog.list_documents()
    }
    versions = {
        doc: [(v.version, v.status, v.key, v.blob_key, v.failure_reason) for v in history]
        for doc, history in catalog.all_versions().items()
    }
    points = {}
    for doc in DOCS:
        ids = sorted(index.list_ids(doc, KIND_TEXT)) + sorted(index.list_ids(doc, KIND_FIGURE))
        points[doc] = [(p.id, p.text, p.payload) for p in index.fetch(ids)]
    return {
        "documents": documents,
        "versions": versions,
        "points": points,
        "vectors": stored_vectors(stores.settings.resolved_vector_path),
        "relationships": {doc: graph.counts(doc).relationships for doc in DOCS},
    }


def test_resolve_workers_defaults_to_two_and_never_exceeds_the_documents_or_cores() -> None:
    assert resolve_workers(None, 10, cores=2) == 2
    assert resolve_workers(None, 10, cores=8) == 2
    assert resolve_workers(2, 10, cores=2) == 2
    assert resolve_workers(None, 10, cores=1) == 1
    assert resolve_workers(None, 1, cores=8) == 1
    assert resolve_workers(4, 3, cores=2) == 3
    assert resolve_workers(1, 5, cores=8) == 1
    assert resolve_workers(3, 0, cores=8) == 1
    with pytest.raises(ValueError, match="workers must be 1 or more, not 0"):
        resolve_workers(0, 5)


def test_kb_build_refuses_workers_below_one_before_building_anything() -> None:
    refused = CliRunner().invoke(cli.app, ["build", "--workers", "0"])
    assert refused.exit_code == 2
    said = " ".join(refused.output.split())
    assert "Invalid value for '--workers': Input should be greater than or equal to 1" in said


def test_kb_add_build_builds_the_added_documents_as_many_at_once_as_kb_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[list[str], int]] = []

    def build_documents(stores, instance, doc_ids, **options):  # the documents and workers
        asked.append((list(doc_ids), options["workers"]))
        return [operations.BuildOutcome(d, d, "ready", "run", 0.1) for d in doc_ids]

    monkeypatch.setattr(operations, "build_documents", build_documents)
    monkeypatch.setattr("kb_assets.build_workers.machine_cores", lambda: 4)
    pdfs = write_pdfs(tmp_path / "in")
    monkeypatch.setenv("KB_BUILD_WORKERS", "1")
    one = CliRunner().invoke(cli.app, ["add", "--build", str(pdfs[0]), str(pdfs[1])])
    assert one.exit_code == 0, one.output
    monkeypatch.delenv("KB_BUILD_WORKERS")
    default = CliRunner().invoke(cli.app, ["add", "--build", str(pdfs[2]), str(pdfs[3])])
    assert default.exit_code == 0, default.output
    # the setting as asked; unset: kb build's default of 2 on this (4-core) machine
    assert asked == [(list(DOCS[:2]), 1), (list(DOCS[2:]), 2)]


def test_workers_take_the_documents_with_the_most_pages_first(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    folder = tmp_path / "pdfs"
    folder.mkdir()
    paths = []
    for name, pages in zip(NAMES, (2, 5, 1, 5), strict=True):
        (folder / name).write_bytes(tiny_pdf(name, pages=pages))
        paths.append(folder / name)
    stores = admit_all(paths, tmp_path / "home", instance)
    # 5, 5 (ties keep the order given), 2, 1 pages; a document the catalog does not know last
    assert largest_first(stores, [*DOCS, "unknown.pdf"]) == [1, 3, 0, 2, 4]
    assert largest_first(stores, list(reversed(DOCS))) == [0, 2, 3, 1]


@pytest.mark.slow
def test_two_workers_store_what_one_after_another_stores_and_answer_in_input_order(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    pdfs = write_pdfs(tmp_path / "in")
    with dg.instance_for_test() as one_instance:
        one = admit_all(pdfs, tmp_path / "one", one_instance)
        sequential = operations.build_documents(one, one_instance, DOCS, job=fake_job)
        assert [(o.doc_id, o.status) for o in sequential] == [(d, "ready") for d in DOCS]
        expected = stored_state(one)
        one.close()

    stores = admit_all(pdfs, tmp_path / "two", instance)
    threads: list[int] = []
    done: list[str] = []

    def on_done(outcome: operations.BuildOutcome) -> None:
        threads.append(threading.get_ident())
        done.append(outcome.doc_id)

    outcomes = operations.build_documents(
        stores, instance, DOCS, job=fake_job, on_done=on_done, workers=2
    )
    assert [(o.doc_id, o.status, o.name) for o in outcomes] == [
        (d, "ready", n) for d, n in zip(DOCS, NAMES, strict=True)
    ]
    assert [(o.pages, o.chunks, o.figures) for o in outcomes] == [(2, 3, 1)] * 4
    assert sorted(done) == list(DOCS) and set(threads) == {threading.main_thread().ident}
    found = stored_state(stores)
    assert found["points"][DOCS[0]][0][0] == f"{DOCS[0]}-0"
    assert len(found["vectors"]) == 16  # 3 chunks and a figure per document
    assert found == expected
    # built in two worker processes, neither this one; each run's id is its outcome's
    runs = instance.get_runs()
    assert sorted(r.run_id for r in runs) == sorted(o.run_id for o in outcomes)
    processes = {r.tags[PROCESS_TAG] for r in runs}
    assert len(processes) == 2 and this_process() not in processes
    stores.close()


@pytest.mark.slow
def test_a_failing_document_fails_alone_with_the_reason_a_sequential_build_gives(
    tmp_path: Path, instance: dg.DagsterInstance
) -> None:
    pdfs = write_pdfs(tmp_path / "in", broken=1)
    with dg.instance_for_test() as one_instance:
        one = admit_all(pdfs, tmp_path / "one", one_instance)
        sequential = operations.build_documents(one, one_instance, DOCS, job=fake_job)
        one.close()
    stores = admit_all(pdfs, tmp_path / "two", instance)
    outcomes = operations.build_documents(stores, instance, DOCS, job=fake_job, workers=2)

    assert [(o.doc_id, o.status) for o in outcomes] == [
        (DOCS[0], "ready"), (DOCS[1], "failed"), (DOCS[2], "ready"), (DOCS[3], "ready"),
    ]
    assert outcomes[1].reason == sequential[1].reason
    assert outcomes[1].reason.startswith("markdown: ")
    row = stores.catalog().get(DOCS[1])
    assert (row.status, row.failure_reason) == ("failed", outcomes[1].reason)
    assert [stores.catalog().get(d).status for d in DOCS] == ["ready", "failed", "ready", "ready"]
    stores.close()


def interrupt_when_converting(started: Path, count: int) -> threading.Thread:
    """A thread that sends this process SIGINT once ``count`` markdown steps wait in
    ``started`` (``MaybeSlowConverter``)."""

    def wait_then_interrupt() -> None:
        deadline = time.monotonic() + 120
        while len(list(started.iterdir())) < count and time.monotonic() < deadline:
            time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=wait_then_interrupt, daemon=True)
    sender.start()
    return sender


@pytest.mark.slow
def test_a_stop_signal_stops_both_documents_in_progress_as_it_stops_one_and_starts_no_other(
    tmp_path: Path, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    pdfs = write_pdfs(tmp_path / "in")
    with dg.instance_for_test() as one_instance:
        one = admit_all(pdfs, tmp_path / "one", one_instance)
        monkeypatch.setenv(SLOW_MARKDOWN_ENV, str(started := tmp_path / "started-one"))
        started.mkdir()
        sender = interrupt_when_converting(started, 1)
        sequential = operations.build_documents(one, one_instance, DOCS, job=fake_job)
        sender.join()
        stopped_alone = one.catalog().get(DOCS[0]).status
        one.close()
    assert [(o.doc_id, o.reason) for o in sequential] == [(DOCS[0], STOPPED_REASON)]

    stores = admit_all(pdfs, tmp_path / "two", instance)
    monkeypatch.setenv(SLOW_MARKDOWN_ENV, str(started := tmp_path / "started-two"))
    started.mkdir()
    sender = interrupt_when_converting(started, 2)
    outcomes = operations.build_documents(stores, instance, DOCS, job=fake_job, workers=2)
    sender.join()

    assert sorted(p.name for p in started.iterdir()) == list(NAMES[:2])
    assert [(o.doc_id, o.status, o.reason) for o in outcomes] == [
        (DOCS[0], "failed", STOPPED_REASON),
        (DOCS[1], "failed", STOPPED_REASON),
    ]
    statuses = [stores.catalog().get(d).status for d in DOCS]
    assert statuses == [stopped_alone, stopped_alone, "pending", "pending"]
    assert operations.documents_to_build(stores) == list(DOCS)  # the next `kb build` takes all
    stores.close()
