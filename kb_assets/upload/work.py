"""The upload server's background work: runs it starts in-process (a retry from failure, a
rebuild of one asset, approving a request, and — when asked — the build of an uploaded file),
one at a time on one thread, so a request returns at once and the page follows the run in the
Dagster instance (``kb_assets.upload.builds``).

One at a time because each is a whole in-process Dagster run (``dagster.execute_job``, as
``kb retry``/``kb rebuild`` run them) on a machine whose cores the models already use.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass

log = logging.getLogger(__name__)

#: How many finished tasks the page can still list.
KEPT_TASKS = 50

#: Task states, in order.
QUEUED, RUNNING, DONE, FAILED = "queued", "running", "done", "failed"


@dataclass
class Task:
    """One piece of background work.

    Attributes:
        id: its number (1, 2, … per server).
        kind: ``build``, ``retry``, ``rebuild`` or ``approve``.
        label: what the page calls it ("retry report.pdf from the failed step").
        doc_id: the document it works on, when known.
        state: ``queued``, ``running``, ``done`` or ``failed``.
        message: the result ("ready", or the reason it failed).
    """

    id: int
    kind: str
    label: str
    doc_id: str | None
    state: str = QUEUED
    message: str = ""

    def as_dict(self) -> dict[str, object]:
        """JSON-serialisable form."""
        return asdict(self)


class Worker:
    """A FIFO of tasks run on one daemon thread, started on the first ``submit``.

    Each task is a callable returning its result message; an exception marks the task
    ``failed`` with the exception's text (and is logged), and the next task runs.
    """

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[Task, Callable[[], str]] | None] = queue.Queue()
        self._tasks: deque[Task] = deque(maxlen=KEPT_TASKS)
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(
        self, kind: str, label: str, work: Callable[[], str], *, doc_id: str | None = None
    ) -> Task:
        """Queue ``work``; returns its task (state ``queued``)."""
        with self._lock:
            task = Task(next(self._numbers), kind, label, doc_id)
            self._tasks.append(task)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="kb-upload-worker", daemon=True
                )
                self._thread.start()
        self._queue.put((task, work))
        return task

    def tasks(self) -> list[Task]:
        """The tasks still kept, newest first."""
        with self._lock:
            return list(reversed(self._tasks))

    def idle(self) -> bool:
        """Whether no task is queued or running."""
        with self._lock:
            return all(t.state in (DONE, FAILED) for t in self._tasks)

    def close(self, timeout: float | None = None) -> None:
        """Stop after the queued tasks; wait up to ``timeout`` seconds for the thread."""
        with self._lock:
            thread = self._thread
        if thread is None:
            return
        self._queue.put(None)
        thread.join(timeout)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            task, work = item
            task.state = RUNNING
            try:
                task.message = work()
                task.state = DONE
            except Exception as error:  # noqa: BLE001 - reported on the task; the next one runs
                log.warning("%s failed: %s", task.label, error)
                log.debug("%s failed", task.label, exc_info=True)
                task.message, task.state = str(error) or type(error).__name__, FAILED
