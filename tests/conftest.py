"""Shared test helpers: where the real services and the shared corpus are, and what to do
when they are absent.

* ``KB_TEST_POSTGRES_URL`` — a SQLAlchemy URL of a Postgres superuser (``.ci/run`` sets it);
  Postgres suites skip without it.
* ``KB_TEST_NEO4J_URI`` (+ optional ``KB_TEST_NEO4J_USER``/``KB_TEST_NEO4J_PASSWORD``) — a
  Bolt URI; Neo4j suites skip without it.
* ``../shared/corpus`` (or ``KB_CORPUS_DIR``) — real PDFs; corpus tests skip without it.

Under ``KB_REQUIRE_SERVICES=1`` (set by ``.ci/run``) each of those skips is a failure, so CI
cannot pass with a suite silently not run.
"""

from __future__ import annotations

import gc
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    import sqlalchemy as sa

    from kb_shared.stores.catalog import Catalog

REPO_ROOT = Path(__file__).resolve().parents[1]


def require_services() -> bool:
    """True when skipping a service or corpus suite must fail the run instead."""
    return os.environ.get("KB_REQUIRE_SERVICES", "").strip().lower() in {"1", "true", "yes"}


def skip_or_fail(reason: str) -> None:
    """Skip with ``reason``, or fail with it under ``KB_REQUIRE_SERVICES=1``."""
    if require_services():
        pytest.fail(f"KB_REQUIRE_SERVICES=1 but: {reason}", pytrace=False)
    pytest.skip(reason)


def postgres_url() -> str:
    """The test Postgres URL, or skip/fail with the reason."""
    url = os.environ.get("KB_TEST_POSTGRES_URL")
    if not url:
        skip_or_fail("Postgres suite needs KB_TEST_POSTGRES_URL (set by .ci/run)")
    return url  # type: ignore[return-value]


def neo4j_uri() -> str:
    """The test Neo4j Bolt URI, or skip/fail with the reason."""
    uri = os.environ.get("KB_TEST_NEO4J_URI")
    if not uri:
        skip_or_fail("Neo4j suite needs KB_TEST_NEO4J_URI (set by .ci/run)")
    return uri  # type: ignore[return-value]


def corpus_dir() -> Path:
    """The shared corpus folder, or skip/fail with the reason."""
    path = Path(os.environ.get("KB_CORPUS_DIR", REPO_ROOT.parent / "shared" / "corpus"))
    if not (path / "pdfs").is_dir():
        skip_or_fail(f"shared corpus not found at {path} (expected ../shared/corpus)")
    return path


#: A RAM disk for the run's temporary files: the Dagster instances and the stores the tests
#: create commit to SQLite, and each commit's fsync waits on the shared disk
#: (benchmarks/results/test-lanes.md).
MEMORY_TMPDIR = Path("/dev/shm")
#: Below this much free space on ``MEMORY_TMPDIR`` the run keeps the system's temp folder.
MEMORY_TMPDIR_MIN_FREE = 4 * 2**30


def cache_alembic_revision_scripts() -> None:
    """Load each Alembic revision script (``.../versions/*.py``) once per process.

    Dagster opens its SQLite storage through Alembic, whose ``ScriptDirectory`` compiles and
    executes all 89 of Dagster's revision scripts anew on every open: for every Dagster
    instance, and for every run's event-log file, the tests create (~20 s of the fast
    lane's CPU; benchmarks/results/test-lanes.md). A revision script only defines its
    revision ids and its ``upgrade``/``downgrade`` functions, so the module loaded first is
    the one every later load would make. ``env.py`` (which runs the migrations when loaded)
    is loaded as before.
    """
    import alembic.util  # noqa: PLC0415 - only to wrap its loader

    load = alembic.util.load_python_file
    if getattr(load, "kb_cached", False):
        return
    loaded: dict[tuple[str, str], Any] = {}

    def load_once(dir_: str | os.PathLike[str], filename: str | os.PathLike[str]) -> Any:
        key = (os.fspath(dir_), os.fspath(filename))
        if key not in loaded:
            if os.path.basename(key[0]) != "versions":
                return load(dir_, filename)
            loaded[key] = load(dir_, filename)
        return loaded[key]

    load_once.kb_cached = True  # type: ignore[attr-defined]
    alembic.util.load_python_file = load_once


def share_alembic_revision_maps() -> None:
    """Give every Alembic ``ScriptDirectory`` of one folder the same ``RevisionMap``.

    Dagster makes a new ``ScriptDirectory`` each time it stamps or checks a SQLite storage's
    revision (every Dagster instance and run database the tests open), and each built its
    map of Dagster's 89 revisions again: ~6 ms of CPU, 1,266 times in tests/assets alone
    (benchmarks/results/test-lanes.md, 2026-12-07). The map only describes the scripts in the
    folder, which do not change while the tests run; it is built on first use, as before.
    """
    from alembic.script import ScriptDirectory  # noqa: PLC0415 - only to wrap its constructor

    setup = ScriptDirectory.__init__
    if getattr(setup, "kb_cached", False):
        return
    maps: dict[tuple[Any, ...], Any] = {}

    def setup_sharing(self: ScriptDirectory, *args: Any, **kwargs: Any) -> None:
        setup(self, *args, **kwargs)
        key = (
            os.fspath(self.dir), tuple(os.fspath(p) for p in self.version_locations),
            self.sourceless, self.recursive_version_locations,
        )
        self.revision_map = maps.setdefault(key, self.revision_map)

    setup_sharing.kb_cached = True  # type: ignore[attr-defined]
    ScriptDirectory.__init__ = setup_sharing  # type: ignore[method-assign]


def reuse_sqlite_event_log_engines() -> None:
    """Make Dagster's SQLite event log reuse one SQLAlchemy engine per database URL.

    ``SqliteEventLogStorage._connect`` builds a new engine (``NullPool``) for every query and
    disposes of it after: hundreds per run, a sixth of a run's CPU on a KB_HOME instance
    (benchmarks/results/test-lanes.md). A ``NullPool`` engine keeps no connection, so each
    query still opens and closes its own SQLite connection as before; ``dispose`` leaves the
    engine usable.
    """
    from dagster._core.storage.event_log.sqlite import sqlite_event_log  # noqa: PLC0415

    build = sqlite_event_log.create_engine
    if getattr(build, "kb_cached", False):
        return
    engines: dict[tuple[str, str], Any] = {}

    def engine_for(url: str, **options: Any) -> Any:
        key = (str(url), repr(sorted(options.items())))
        if key not in engines:
            engines[key] = build(url, **options)
        return engines[key]

    engine_for.kb_cached = True  # type: ignore[attr-defined]
    sqlite_event_log.create_engine = engine_for


def keep_in_memory_event_log_connections() -> None:
    """Let each thread keep one connection to an ephemeral instance's in-memory event log.

    ``InMemoryEventLogStorage`` (``DagsterInstance.ephemeral()``, the asset tests' instance)
    opens a new SQLite connection for every query and runs ``PRAGMA journal_mode=WAL`` and
    ``PRAGMA foreign_keys=ON`` on it before the query, a sixth of a run's CPU on the fakes
    (benchmarks/results/test-lanes.md, 2026-12-07, second session). Here its engine hands a
    thread the connection it opened before (SQLAlchemy's ``SingletonThreadPool``, sized so it
    never closes one), the two PRAGMAs, which set the connection, run once when it is opened,
    and ``_connect`` keeps the rest of Dagster's body: one query at a time under the storage's
    lock, each in its own transaction. The file-backed storages are left as they are.
    """
    import contextlib  # noqa: PLC0415

    import sqlalchemy as sa  # noqa: PLC0415
    from dagster._core.storage.event_log import in_memory  # noqa: PLC0415
    from sqlalchemy.pool import SingletonThreadPool  # noqa: PLC0415

    build = in_memory.create_engine
    if getattr(build, "kb_cached", False):
        return

    def engine_keeping_connections(url: str, **options: Any) -> Any:
        options.update(poolclass=SingletonThreadPool, pool_size=1_000)
        engine = build(url, **options)

        @sa.event.listens_for(engine, "connect")
        def set_connection(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL;")
            cursor.execute("PRAGMA foreign_keys=ON;")
            cursor.close()

        return engine

    @contextlib.contextmanager
    def connect(self: in_memory.InMemoryEventLogStorage) -> Iterator[Any]:
        with self._db_lock, self._engine.connect() as conn, conn.begin():
            yield conn

    engine_keeping_connections.kb_cached = True  # type: ignore[attr-defined]
    in_memory.create_engine = engine_keeping_connections
    in_memory.InMemoryEventLogStorage._connect = connect  # type: ignore[method-assign]


def handle_sigint_in_python() -> None:
    """Give SIGINT Python's own handler when this process started with it ignored.

    ``make`` run in the background (as ``.ci/run`` and ``nohup`` run it) starts pytest with
    SIGINT ignored, and after each in-process Dagster run ``dagster._utils.interrupts``
    copies SIGINT's handler onto SIGTERM: SIGTERM was then ignored too, and so was it in every
    process a later test started (ignored signals survive ``exec``). A test's stand-in server
    then outlived ``terminate()`` until its 20 s kill (tests/test_benchmarks_mcp_server.py).
    A handler set in Python goes back to the default in a child."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config: pytest.Config) -> None:
    """Handle SIGINT in Python (``handle_sigint_in_python``), load Alembic's revision
    scripts once (``cache_alembic_revision_scripts``), share their revision maps
    (``share_alembic_revision_maps``), reuse Dagster's SQLite
    event-log engines (``reuse_sqlite_event_log_engines``) and keep the in-memory event log's
    connections (``keep_in_memory_event_log_connections``). Put the
    run's temporary files (``tmp_path``, ``tempfile``, and the servers and CLIs the
    tests start, which inherit ``TMPDIR``) on ``MEMORY_TMPDIR`` when ``TMPDIR`` is not set and
    that folder is writable with ``MEMORY_TMPDIR_MIN_FREE`` bytes free; else change nothing.
    xdist workers inherit the controller's choice through the environment."""
    handle_sigint_in_python()
    cache_alembic_revision_scripts()
    share_alembic_revision_maps()
    reuse_sqlite_event_log_engines()
    keep_in_memory_event_log_connections()
    if os.environ.get("TMPDIR") or config.option.basetemp:
        return
    if not (MEMORY_TMPDIR.is_dir() and os.access(MEMORY_TMPDIR, os.W_OK | os.X_OK)):
        return
    if shutil.disk_usage(MEMORY_TMPDIR).free < MEMORY_TMPDIR_MIN_FREE:
        return
    os.environ["TMPDIR"] = str(MEMORY_TMPDIR)
    tempfile.tempdir = None  # tempfile.gettempdir() reads TMPDIR again


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Freeze the garbage collector once the run is over: the interpreter's last collection at
    exit then skips the objects the tests left behind (~0.5 M; 2-3 s of CPU in each process
    that ran a large share of the suite, each xdist worker's exit included; measured in
    benchmarks/results/test-lanes.md, 2026-12-07 third session). Nothing a test checks runs
    then: temporary folders are removed before (pytest's session end, ``atexit``)."""
    gc.freeze()


@pytest.fixture
def corpus() -> Path:
    """Path of ``../shared/corpus``; skips (or fails under CI) when absent."""
    return corpus_dir()


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Keep tests from reading a developer's real stores or keys."""
    for name in list(os.environ):
        if name.startswith("KB_") and not name.startswith(("KB_TEST_", "KB_REQUIRE", "KB_CORPUS")):
            monkeypatch.delenv(name, raising=False)
    for name in ("ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "COHERE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    # A test that reads the environment (the CLI does) gets its own KB_HOME and instance.
    monkeypatch.setenv("KB_HOME", str(tmp_path / "kbhome"))
    # `kb build` builds in this process, where a test's fake providers live (kb's default, 2
    # worker processes, would build with the real ones); tests of workers ask for them.
    monkeypatch.setenv("KB_BUILD_WORKERS", "1")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "kbhome" / "dagster"))


#: The shared-corpus PDFs the slow end-to-end tests build once per session: the 9 evidence
#: documents of eval/regulatory (AEMO procedures with diagrams, the table-heavy loss-factor
#: report, NIST, Solar Victoria) plus two PDFs that must fail with a clear reason.
EVAL_PDFS = (
    "aemo_Constraint_Implementation_Guidelines_v3_FINAL_Clean.pdf",
    "aemo_FCAS_Model_in_NEMDE.pdf",
    "aemo_Fast_Start_Unit_Inflexibility_Profile_Model_October_2014.pdf",
    "aemo_Marginal_Loss_Factors_for_the_2020-21_Financial_year.pdf",
    "aemo_SO_OP_3705_Dispatch.pdf",
    "aemo_Schedule_of_Constraint_Violation_Penalty_factors.pdf",
    "aemo_Treatment_of_Loss_Factors_in_the_NEM.pdf",
    "nist_SP_800-171r2.pdf",
    "vic_SolarVictoria_NoticetoMarket_2025-26_v1.pdf",
)
FAILING_PDFS = (
    "scanned_ocrmypdf_multipage.pdf",
    "encoding_ocrmypdf_truetype_font_nomapping.pdf",
)


@pytest.fixture(scope="session")
def built_corpus(tmp_path_factory: pytest.TempPathFactory):
    """A KB_HOME where the real pipeline built ``EVAL_PDFS`` and tried ``FAILING_PDFS``, two at
    once, once per session (several minutes); skips (fails under CI) without
    ``../shared/corpus``.

    Returns ``(home, {file name: kb_assets.operations.BuildOutcome})``.
    """
    from kb_assets import operations  # noqa: PLC0415 - heavy; only the slow tests need it
    from kb_assets.instance import dagster_instance  # noqa: PLC0415
    from kb_assets.intake import IntakeStatus, admit  # noqa: PLC0415
    from kb_assets.resources import StoresResource  # noqa: PLC0415
    from kb_shared.settings import Settings  # noqa: PLC0415

    pdfs = corpus_dir() / "pdfs"
    home = tmp_path_factory.mktemp("builtcorpus")
    stores = StoresResource(home=str(home))
    instance = dagster_instance(Settings(home=home))
    intake = admit([pdfs / name for name in EVAL_PDFS + FAILING_PDFS], stores, instance)
    added = [o.doc_id for o in intake if o.status == IntakeStatus.ADDED]
    assert len(added) == len(EVAL_PDFS) + len(FAILING_PDFS), intake
    # two at once, as `kb build` does by default on this 2-core machine (spawned workers,
    # the real providers): the default path is the one the slow tests read from
    outcomes = operations.build_documents(stores, instance, added, workers=2)
    stores.close()
    return home, {o.name: o for o in outcomes}


@pytest.fixture(scope="session")
def sample_home(tmp_path_factory: pytest.TempPathFactory):
    """A KB_HOME where the real pipeline built the generated sample PDF
    (``kb_assets.sample_pdf``), once per session. Read it only: a test that writes (builds,
    deletes, re-embeds) works on its own copy (``copy_home``).

    Returns ``(home, kb_assets.operations.BuildOutcome of the sample)``.
    """
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    from kb_assets.sample_pdf import SAMPLE_FILENAME, build_sample_pdf  # noqa: PLC0415
    from tests.mcp.pipeline import build_corpus  # noqa: PLC0415

    home = tmp_path_factory.mktemp("samplehome")
    pdf = build_sample_pdf(home / "incoming" / SAMPLE_FILENAME)
    # a session's Chromium keeps Playwright's event loop running in this thread: build in another
    with ThreadPoolExecutor(max_workers=1) as pool:
        (outcome,) = pool.submit(build_corpus, home, [pdf]).result()
    return home, outcome


def copy_home(home: Path, target: Path) -> Path:
    """Copy a built KB_HOME (stores, blobs, Dagster instance) to ``target``, which must not
    exist; returns ``target``. The copied runs keep their configs, which name ``home``:
    build anew in the copy rather than re-executing those runs."""
    shutil.copytree(home, target)
    return target


@pytest.fixture(scope="session")
def catalog_postgres_engine() -> Iterator[sa.Engine]:
    """One fresh Postgres database for the session's catalog tests; skips (fails under CI)
    without ``KB_TEST_POSTGRES_URL``."""
    from benchmarks.postgres import scratch_database  # noqa: PLC0415
    from kb_shared.stores.sql import make_engine  # noqa: PLC0415

    with scratch_database(postgres_url(), "kb_test_catalog") as url:
        engine = make_engine(url)
        yield engine
        engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.services)])
def catalog(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Catalog]:
    """An empty catalog with its schema, once on SQLite (a temp file) and once on Postgres
    (the session's database, every catalog table emptied first)."""
    from kb_shared.stores.catalog import CATALOG_METADATA, Catalog  # noqa: PLC0415
    from kb_shared.stores.sql import make_engine  # noqa: PLC0415

    if request.param == "sqlite":
        engine = make_engine(f"sqlite:///{tmp_path / 'catalog.sqlite'}")
    else:
        engine = request.getfixturevalue("catalog_postgres_engine")
    store = Catalog(engine)
    store.ensure_schema()
    if request.param == "postgres":
        with engine.begin() as conn:
            for table in reversed(CATALOG_METADATA.sorted_tables):
                conn.execute(table.delete())
    yield store
    if request.param == "sqlite":
        engine.dispose()
