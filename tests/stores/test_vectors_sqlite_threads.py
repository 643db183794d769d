"""The embedded vector index opens one SQLite connection per thread; a thread that ends closes
its connection (the MCP server's worker threads come and go: the bursty soak found
one descriptor leaked per finished thread, benchmarks/results/soak-2026-12-01-bursts.md)."""

from __future__ import annotations

import gc
import os
import threading
from pathlib import Path

from kb_shared.stores.vectors_sqlite import SqliteVectorIndex
from tests.stores.test_vectors_ann import DIM, MODEL, points


def open_files(path: Path) -> int:
    """How many of this process's descriptors point at ``path`` (its WAL and shm aside)."""
    target = str(path.resolve())
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == target:
                count += 1
        except OSError:
            continue
    return count


def test_connections_of_finished_threads_are_closed_and_close_closes_the_rest(
    tmp_path: Path,
) -> None:
    path = tmp_path / "vectors.db"
    index = SqliteVectorIndex(path)
    index.open(MODEL, DIM)
    index.upsert(points(50))
    assert open_files(path) == 1  # this thread's connection
    query = points(1, start=7)[0].dense

    def search() -> None:
        assert len(index.dense_search(query, 5)) == 5

    for _ in range(5):  # five bursts of eight short-lived worker threads
        workers = [threading.Thread(target=search) for _ in range(8)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        gc.collect()
        # A closed connection's descriptor waits in SQLite's per-file list of unused ones
        # (closing it would drop the process's POSIX locks on the file) and the next
        # connection reuses it: at most one per connection open at once, never one per
        # thread that ever ran (before: 1 + 8 more after every burst).
        assert open_files(path) <= 1 + 8

    live = threading.Event()
    done = threading.Event()

    def hold() -> None:
        search()
        live.set()
        done.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    live.wait(10)
    index.close()
    assert open_files(path) == 0  # close() closes every thread's connection
    done.set()
    holder.join()


def test_close_while_other_threads_search_neither_crashes_nor_fails_a_search(
    tmp_path: Path,
) -> None:
    """``close()`` and re-``open()`` forty times while four threads search without pause: a
    search in flight keeps its connection until it returns (closing it under a running
    statement crashed the process), the next one opens afresh, and every answer is whole."""
    path = tmp_path / "vectors.db"
    index = SqliteVectorIndex(path)
    index.open(MODEL, DIM)
    index.upsert(points(60))
    query = points(1, start=7)[0].dense
    stop = threading.Event()
    failures: list[BaseException] = []
    answered = [0]

    def search() -> None:
        while not stop.is_set():
            try:
                dense = index.dense_search(query, 5)
                sparse = index.sparse_search("chunk", 5)
                assert len(dense) == 5 and len(sparse) == 5
                answered[0] += 1
            except BaseException as exc:  # noqa: BLE001 - every failure is the finding
                failures.append(exc)
                return

    workers = [threading.Thread(target=search) for _ in range(4)]
    for worker in workers:
        worker.start()
    for _ in range(40):
        index.close()
        index.open(MODEL, DIM, create=False)
    stop.set()
    for worker in workers:
        worker.join(30)
    assert failures == []
    assert answered[0] > 0
    index.close()
    assert open_files(path) == 0
