"""A build killed with SIGKILL inside any of the six corpus assets, a ``kb delete`` killed half
way and a new version's switch killed half way all recover: the next ``kb build`` (or ``kb
delete``) leaves the stores exactly as an uninterrupted run does (issue 16, "Crash and outage
recovery").

Each kill is a real ``kb`` process (``tests/assets/crash_hook.py``: the CLI on fake providers)
stopped at a named function until the test kills it, so it lands at that point every time.
Stores are the embedded ones (SQLite catalog and graph, SQLite vector index, file blobs).
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import anyio
import dagster as dg
import pytest
import sqlalchemy as sa
from mcp import Client

from kb_assets.constants import (
    CHECK_CHUNKS_LOCATED,
    CHECK_EDGES_RESOLVE,
    CHECK_INDEX_MATCHES_CHUNKS,
    DOCUMENTS,
)
from kb_assets.instance import dagster_instance
from kb_assets.intake import IntakeStatus, admit
from kb_assets.resources import StoresResource
from kb_mcp.server import build_server
from kb_shared.settings import Settings
from kb_shared.stores.catalog.aer import aer_metrics
from tests.assets.crash_hook import NOTION_PAGES_ENV, STOP_LINE
from tests.fakes import HashingEmbedder, tiny_pdf
from tests.market.aer_fixtures import Q3_2025_26, Q4_2025_26, write_release
from tests.market.notion_server import DATA_SOURCE_ID, FakeNotion, page_id, tracker_page
from tests.market.test_notion_sync import small_tracker

pytestmark = pytest.mark.slow

NAME = "Crash Doc.pdf"
DOC = "crash-doc.pdf"
REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class StopPoint:
    """Where the killed process stops: ``function`` (dotted), before it runs or ``after`` it
    returned, counted only when called from the module ``within``."""

    function: str
    after: bool = False
    within: str | None = None

    def options(self) -> list[str]:
        """``crash_hook``'s options for this point."""
        extra = ["--after"] if self.after else []
        return ["--stop-in", self.function, *extra, *(["--within", self.within] if self.within else [])]


def environment(home: Path) -> dict[str, str]:
    """The environment of a ``kb`` process on ``home`` (no keys: every provider is a fake)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KB_")}
    env.update(KB_HOME=str(home), DAGSTER_HOME=str(home / "dagster"), PYTHONPATH=str(REPO))
    return env


def kb_run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``kb ARGS`` on fake providers to the end."""
    return subprocess.run(
        [sys.executable, "-m", "tests.assets.crash_hook", "--", *args],
        env=environment(home), capture_output=True, text=True, timeout=300, cwd=REPO,
    )


def kb(home: Path, *args: str) -> str:
    """Run ``kb ARGS`` on fake providers to the end; returns its output.

    Raises:
        AssertionError: it failed (the output says why).
    """
    done = kb_run(home, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def kb_killed_at(home: Path, stop: StopPoint, *args: str) -> None:
    """Run ``kb ARGS`` until it reaches ``stop``, then SIGKILL it."""
    read_end, write_end = os.pipe()
    env = {**environment(home), "KB_CRASH_FD": str(write_end)}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.assets.crash_hook", *stop.options(), "--", *args],
        env=env, pass_fds=(write_end,), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=REPO,
    )
    os.close(write_end)
    try:
        ready, _, _ = select.select([read_end], [], [], 300)
        said = os.read(read_end, 64) if ready else b""
        if said != STOP_LINE:  # it ended (or hung) without reaching the stop point
            process.kill()
            out, err = process.communicate()
            raise AssertionError(f"kb {' '.join(args)} never reached {stop}: {out}{err}")
        process.send_signal(signal.SIGKILL)
        process.communicate(timeout=60)
        assert process.returncode == -signal.SIGKILL
    finally:
        os.close(read_end)


def add(home: Path, pdf: bytes, *, new_version: bool = False) -> None:
    """Add ``NAME`` with content ``pdf`` to ``home`` (the intake, in this process)."""
    folder = home.parent / f"in-{home.name}-{int(new_version)}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / NAME).write_bytes(pdf)
    settings = Settings(home=home)
    stores = StoresResource(home=str(home))
    try:
        (outcome,) = admit([folder / NAME], stores, dagster_instance(settings), new_version=new_version)
    finally:
        stores.close()
    assert outcome.status == IntakeStatus.ADDED, outcome


def snapshot(home: Path) -> dict[str, Any]:
    """Everything the stores hold, in comparable form: catalog rows and versions, every
    vector point (id, document key, kind, text, payload, vector), every edge of every
    version key (duplicates kept), graph totals and the blob keys."""
    stores = StoresResource(home=str(home))
    try:
        catalog = stores.catalog()
        rows = [
            (r.doc_id, r.status, r.failure_reason, r.pages, r.chunk_count, r.figure_count,
             r.entity_count, r.relationship_count, r.sha256)
            for r in catalog.list_documents()
        ]
        versions = {
            doc: [(v.version, v.status, v.sha256) for v in history]
            for doc, history in catalog.all_versions().items()
        }
        index = stores.existing_vectors()
        points: list[tuple[Any, ...]] = []
        total = 0
        if index is not None:
            after = None
            while batch := index.export_points(after):
                points += [
                    (p.point.id, p.point.document, p.point.kind, p.point.text, p.point.payload,
                     tuple(round(float(x), 6) for x in p.dense))
                    for p in batch
                ]
                after = batch[-1].point.id
            total = index.count()
        graph = stores.graph()
        graph.ensure_schema(None)
        keys = sorted({v.key for history in catalog.all_versions().values() for v in history})
        edges = {key: graph.relationships_for_document(key) for key in keys}
        totals = graph.counts()
        blobs = stores.blobs().list()
    finally:
        stores.close()
    return {
        "documents": rows,
        "versions": versions,
        "points": points,
        "point_rows": total,
        "edges": {key: found for key, found in edges.items() if found},
        "graph_totals": (totals.entities, totals.relationships),
        "blobs": blobs,
    }


def dagster_state(home: Path) -> tuple[dict[str, bool], list[dg.DagsterRunStatus], bool]:
    """The latest evaluation of each asset check (name -> passed), every run's status, and
    whether the document's partition exists."""
    instance = dagster_instance(Settings(home=home))
    latest: dict[str, tuple[float, bool]] = {}
    runs = instance.get_runs()
    for run in runs:
        for event in instance.all_logs(
            run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
        ):
            evaluation = event.dagster_event.event_specific_data
            name = evaluation.check_name
            if name not in latest or latest[name][0] <= event.timestamp:
                latest[name] = (event.timestamp, evaluation.passed)
    statuses = [run.status for run in runs]
    has_partition = instance.has_dynamic_partition(DOCUMENTS, DOC)
    return {name: passed for name, (_, passed) in latest.items()}, statuses, has_partition


def built(home: Path, pdfs: list[bytes]) -> Path:
    """``home`` with ``NAME`` added and built once per content in ``pdfs`` (the first as a new
    document, each later one as a new version)."""
    for number, pdf in enumerate(pdfs):
        add(home, pdf, new_version=number > 0)
        kb(home, "build")
    return home


V1, V2 = tiny_pdf("first"), tiny_pdf("second")


@pytest.fixture(scope="module")
def built_homes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Homes built once per module by uninterrupted ``kb build`` runs: version 1 (``"v1"``),
    and version 1 then version 2 as its new version (``"v2"``). Tests never write to them:
    each works on a copy (``copy_of``), which saves one or two real builds per test."""
    root = tmp_path_factory.mktemp("uninterrupted")
    return {"v1": built(root / "v1", [V1]), "v2": built(root / "v2", [V1, V2])}


@pytest.fixture(scope="module")
def uninterrupted(built_homes: dict[str, Path]) -> dict[str, Any]:
    """The stores after uninterrupted builds (``snapshot`` of each of ``built_homes``)."""
    return {key: snapshot(home) for key, home in built_homes.items()}


def copy_of(home: Path, tmp_path: Path) -> Path:
    """A copy of the built ``home`` at ``tmp_path/kb`` (every store of the embedded default
    lives under KB_HOME, addressed relative to it, so the copy is a KB_HOME of its own)."""
    target = tmp_path / "kb"
    shutil.copytree(home, target)
    return target


def assert_recovered(home: Path, expected: dict[str, Any]) -> None:
    """``home``'s stores equal ``expected``, its document is ready, its checks passed and no
    run is left ``started``."""
    found = snapshot(home)
    assert [row[1] for row in found["documents"]] == ["ready"]
    assert found["point_rows"] == len(found["points"])  # no point without its vector/terms
    assert found == expected
    checks, statuses, has_partition = dagster_state(home)
    assert checks == {
        CHECK_CHUNKS_LOCATED: True, CHECK_INDEX_MATCHES_CHUNKS: True, CHECK_EDGES_RESOLVE: True
    }
    assert dg.DagsterRunStatus.STARTED not in statuses
    assert has_partition


#: One stop point inside each corpus asset, after it has written what it writes (where it
#: writes anything), so the restart meets that asset's partial work.
INSIDE_ASSET = {
    "markdown": StopPoint("tests.fakes.FakeConverter.convert", after=True),
    "chunks": StopPoint("kb_assets.assets.chunks.chunk_markdown", after=True),
    "embeddings": StopPoint(
        "kb_shared.stores.vectors_sqlite.SqliteVectorIndex.upsert",
        after=True, within="kb_assets.assets.embeddings",
    ),
    "graph": StopPoint(
        "kb_shared.stores.graph_sql.SqlGraphStore._replace_document",
        after=True, within="kb_assets.assets.graph",
    ),
    "figures": StopPoint(  # the first render stored, the others and the point not yet
        "kb_shared.stores.blobs.BlobStore.put", after=True, within="kb_assets.assets.figures",
    ),
    "record": StopPoint(  # the catalog says ready, Dagster has not recorded the step
        "kb_shared.stores.catalog.versions.VersionCatalog.record_version", after=True,
    ),
}


@pytest.mark.parametrize("asset", list(INSIDE_ASSET))
def test_a_build_killed_inside_an_asset_finishes_as_if_never_killed(
    asset: str, tmp_path: Path, uninterrupted: dict[str, Any]
) -> None:
    home = tmp_path / "kb"
    add(home, V1)
    kb_killed_at(home, INSIDE_ASSET[asset], "build")
    kb(home, "build")
    assert_recovered(home, uninterrupted["v1"])


#: Stop points inside the switch to a new version (the ``record`` step of its build).
INSIDE_SWITCH = {
    "before_the_switch": StopPoint(
        "kb_shared.stores.catalog.versions.VersionCatalog.record_version"
    ),
    "switched_old_data_still_stored": StopPoint(
        "kb_shared.stores.catalog.versions.VersionCatalog.record_version", after=True,
    ),
    "old_points_removed_edges_not": StopPoint(
        "kb_shared.stores.vectors_sqlite.SqliteVectorIndex._delete_document",
        after=True, within="kb_assets.assets.record",
    ),
}


@pytest.mark.parametrize("stop", list(INSIDE_SWITCH))
def test_a_new_version_build_killed_in_the_switch_finishes_as_if_never_killed(
    stop: str, tmp_path: Path, built_homes: dict[str, Path], uninterrupted: dict[str, Any]
) -> None:
    home = copy_of(built_homes["v1"], tmp_path)
    add(home, V2, new_version=True)
    kb_killed_at(home, INSIDE_SWITCH[stop], "build")
    kb(home, "build")
    assert_recovered(home, uninterrupted["v2"])


#: Stop points inside ``kb delete`` (``operations.delete_document``).
INSIDE_DELETE = {
    # the first step: the catalog says deleting, every store still holds all of it
    "marked_deleting": StopPoint("kb_shared.stores.catalog.Catalog.mark_deleting", after=True),
    "points_removed": StopPoint(
        "kb_shared.stores.vectors_sqlite.SqliteVectorIndex._delete_document", after=True,
    ),
    "edges_removed": StopPoint(
        "kb_shared.stores.graph_sql.SqlGraphStore.delete_document", after=True,
    ),
    "some_files_removed": StopPoint(
        "kb_shared.stores.blobs.BlobStore.delete", after=True, within="kb_assets.operations",
    ),
    "partition_removed": StopPoint("kb_shared.stores.catalog.Catalog.delete"),
    # the last step: the delete had finished, and running it again says so
    "catalog_row_removed": StopPoint("kb_shared.stores.catalog.Catalog.delete", after=True),
}


def served_after_the_kill(home: Path) -> dict[str, Any]:
    """What the MCP server on ``home`` answers about ``NAME``: list_documents' ids, and the
    error text of search_docs, search_graph and read_doc (``None`` where a call succeeded)."""
    server = build_server(Settings(home=home), embedder=HashingEmbedder(32), warm=False)

    async def ask() -> dict[str, Any]:
        async with Client(server) as client:
            listed = await client.call_tool("list_documents", {})
            calls = {
                "search_docs": {"query": "first"},
                "search_graph": {"query": "first"},
                "read_doc": {"document": NAME, "chunk_numbers": [0]},
            }
            answers = {tool: await client.call_tool(tool, args) for tool, args in calls.items()}
        found = {"listed": [d["doc_id"] for d in listed.structured_content["documents"]]}
        for tool, answer in answers.items():
            found[tool] = answer.content[0].text.removeprefix(f"Error executing tool {tool}: ") \
                if answer.is_error else None
        return found

    return anyio.run(ask)


#: What the server says while the only document is being deleted: as if it were gone.
EMPTY = (
    "The corpus is empty: no document has been indexed yet, so there is nothing to search. "
    "Add PDFs with `kb add PATH…` (the pipeline then builds them), and call list_documents to "
    "see what is indexed."
)
GONE = {
    "listed": [],
    "search_docs": EMPTY,
    "search_graph": EMPTY,
    "read_doc": (
        f"unknown document {NAME!r}: give a file name or doc_id exactly as list_documents shows "
        "them; the catalog has no documents yet"
    ),
}


@pytest.mark.parametrize("stop", list(INSIDE_DELETE))
def test_a_delete_killed_half_way_finishes_when_run_again(
    stop: str, tmp_path: Path, built_homes: dict[str, Path]
) -> None:
    home = copy_of(built_homes["v2"], tmp_path)
    kb_killed_at(home, INSIDE_DELETE[stop], "delete", NAME)
    left = snapshot(home)
    if stop == "marked_deleting":  # everything is still stored; only the status changed
        assert len(left["points"]) > 0 and left["edges"] and left["blobs"]
    if stop != "catalog_row_removed":
        assert [(row[0], row[1]) for row in left["documents"]] == [(DOC, "deleting")]
        status = kb(home, "status", "--json")
        assert [(d["doc_id"], d["status"]) for d in json.loads(status)] == [(DOC, "deleting")]
    assert served_after_the_kill(home) == GONE
    again = kb_run(home, "delete", NAME)
    if stop == "catalog_row_removed":
        assert (again.returncode, " ".join(again.stderr.split())) == (
            1, f"no document named {NAME!r} (by file name or id); `kb status` lists them"
        )
    else:
        assert again.returncode == 0, again.stdout + again.stderr
        assert again.stdout.startswith(
            f"finished deleting {NAME} (an earlier delete of it did not finish): "
        )
    found = snapshot(home)
    assert found == {
        "documents": [], "versions": {}, "points": [], "point_rows": 0, "edges": {},
        "graph_totals": (0, 0), "blobs": [],
    }
    assert not dagster_state(home)[2]


def test_a_killed_delete_is_finished_by_the_next_build_and_refuses_a_re_add_before(
    tmp_path: Path, built_homes: dict[str, Path]
) -> None:
    home = copy_of(built_homes["v1"], tmp_path)
    kb_killed_at(home, INSIDE_DELETE["marked_deleting"], "delete", NAME)
    folder = tmp_path / "again"
    folder.mkdir()
    (folder / NAME).write_bytes(tiny_pdf("third"))
    refused = kb_run(home, "add", str(folder / NAME))
    assert refused.returncode != 0
    said = " ".join((refused.stdout + refused.stderr).split())
    assert f"run `kb delete {DOC}` to finish it" in said, said
    built_again = kb(home, "build")
    assert built_again.strip() == "nothing to build: every document is ready (use --all to rebuild)"
    assert snapshot(home) == {
        "documents": [], "versions": {}, "points": [], "point_rows": 0, "edges": {},
        "graph_totals": (0, 0), "blobs": [],
    }
    assert not dagster_state(home)[2]
    kb(home, "add", str(folder / NAME))  # now it is gone, the name is free again


def aer_state(home: Path) -> tuple[list[Any], list[tuple[Any, ...]]]:
    """Every stored AER figure, and every recorded heading (schedule, heading, metric key,
    first and last release seen)."""
    stores = StoresResource(home=str(home))
    try:
        catalog = stores.catalog()
        figures = catalog.list_aer_observations()
        with catalog.engine.connect() as conn:
            headings = sorted(tuple(r) for r in conn.execute(sa.select(
                aer_metrics.c.schedule, aer_metrics.c.heading, aer_metrics.c.metric_key,
                aer_metrics.c.first_seen, aer_metrics.c.last_seen,
            )))
    finally:
        stores.close()
    return figures, headings


def test_an_aer_sync_killed_mid_transaction_leaves_the_previous_sync_and_runs_again(
    tmp_path: Path,
) -> None:
    """Killed after the new release's figures are written and before its headings are, in
    the one transaction of ``Catalog.sync_aer``: the store holds the previous release's sync
    exactly, and the sync run again gives what an uninterrupted one does."""
    q3, q4 = tmp_path / "q3", tmp_path / "q4"
    write_release(q3, Q3_2025_26)
    write_release(q4, Q4_2025_26)
    expected, home = tmp_path / "uninterrupted", tmp_path / "kb"
    for target in (expected, home):
        kb(target, "sync", "aer", str(q3))
    before = aer_state(home)
    assert len(before[0]) > 100
    kb(expected, "sync", "aer", str(q4))
    after = aer_state(expected)
    assert after != before  # the second release revises and adds figures

    kb_killed_at(
        home, StopPoint("kb_shared.stores.catalog.aer._record_headings"), "sync", "aer", str(q4)
    )
    assert aer_state(home) == before
    kb(home, "sync", "aer", str(q4))
    assert aer_state(home) == after


def notion_state(home: Path) -> dict[str, Any]:
    """Every stored compliance action, the totals the search gives over all of them (count,
    fine total, with and without a fine, synced_at) and the sync-state row (as a dict)."""
    stores = StoresResource(home=str(home))
    try:
        catalog = stores.catalog()
        found = catalog.search_compliance(limit=200)
        state = catalog.compliance_sync_state()
        return {
            "actions": catalog.list_compliance_actions(),
            "totals": (found.count, found.fine_total, found.with_fine, found.without_fine,
                       found.synced_at),
            "sync_state": None if state is None else dataclasses.asdict(state),
        }
    finally:
        stores.close()


def without_sync_times(state: dict[str, Any]) -> dict[str, Any]:
    """``state`` without its two ``synced_at`` (the clock, which two runs never share)."""
    sync_state = state["sync_state"]
    return {
        "actions": state["actions"],
        "totals": state["totals"][:-1],
        "sync_state": {k: v for k, v in sync_state.items() if k != "synced_at"},
    }


def test_a_notion_sync_killed_mid_transaction_leaves_the_previous_sync_and_runs_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after the changed tracker's rows are inserted, updated and deleted and before
    the sync state is written, in the one transaction of ``Catalog.replace_compliance_actions``:
    the store holds the first sync exactly, and the sync run again gives what an uninterrupted
    one does. The ``kb`` processes read the tracker from ``crash_hook``'s ``FakeNotion``."""
    pages = tmp_path / "tracker.json"
    monkeypatch.setenv(NOTION_PAGES_ENV, str(pages))
    tracker = FakeNotion(small_tracker())
    pages.write_text(json.dumps(tracker.pages), encoding="utf-8")
    expected, home = tmp_path / "uninterrupted", tmp_path / "kb"
    for target in (expected, home):
        kb(target, "sync", "notion")
    before = notion_state(home)
    assert before["totals"][:4] == (4, Decimal("3900000.50"), 3, 1)

    tracker.trash("origin")  # Origin's 2,000,000.50 goes
    (agl,) = [p for p in tracker.pages if p["id"] == page_id("agl")]
    agl["properties"]["Fine"]["number"] = 1_750_000  # was 1,500,000
    agl["last_edited_time"] = "2026-12-01T09:30:00.000Z"
    tracker.pages.append(tracker_page(
        "energyaustralia", summary="Late bills", organisation="EnergyAustralia Pty Ltd",
        regulatory_body="AER", status="Paid", fine=300_000, date="2026-03-02",
    ))
    pages.write_text(json.dumps(tracker.pages), encoding="utf-8")
    kb(expected, "sync", "notion")
    after = notion_state(expected)
    # 1,750,000 (AGL) + 400,000 (Alinta) + 300,000 (EnergyAustralia); Red Energy has no fine
    assert after["totals"][:4] == (4, Decimal("2450000.00"), 3, 1)
    assert {k: after["sync_state"][k] for k in (
        "read", "inserted", "updated", "deleted", "unchanged", "data_source_id")} == {
        "read": 4, "inserted": 1, "updated": 1, "deleted": 1, "unchanged": 2,
        "data_source_id": DATA_SOURCE_ID}

    kb_killed_at(
        home,
        StopPoint("kb_shared.stores.catalog.compliance.ComplianceCatalog._apply", after=True),
        "sync", "notion",
    )
    assert notion_state(home) == before
    kb(home, "sync", "notion")
    again = notion_state(home)
    assert without_sync_times(again) == without_sync_times(after)
    assert again["sync_state"]["synced_at"] > before["sync_state"]["synced_at"]
