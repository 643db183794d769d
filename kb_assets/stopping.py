"""Stopping a build on SIGTERM or SIGINT: the grace a running step gets (``STOP_GRACE_SECONDS``),
the reason a stopped document reports (``STOPPED_REASON``), the guard that catches the signals
and starts the watchdog process that ends a build stuck in a native call (``stop_guard``,
``WATCHDOG``), and the one loop that builds documents in turn and starts nothing after a signal
(``build_in_turn``, used by ``operations.build_documents`` and ``backfill.build_batches``;
``build_workers`` forwards the signal to its workers under the same guard).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kb_assets.operations import BuildOutcome

#: Seconds a stop signal leaves the running step to end by itself before the watchdog kills
#: the build process (issue 16: ``kb build`` stops within 10 s of SIGTERM at any step;
#: benchmarks/results/pdf-limits-2026-12-01.md).
STOP_GRACE_SECONDS = 5.0

#: The reason of a document whose build a stop signal ended.
STOPPED_REASON = (
    "the build was stopped (SIGTERM or Ctrl-C) before it finished; run `kb build` again"
)

#: The watchdog (``stop_guard``), run as ``python -I -S -c WATCHDOG PID GRACE`` with the read
#: end of the build process's signal wakeup pipe as its stdin: on a SIGTERM/SIGINT byte it
#: waits GRACE seconds for the pipe to close (the build stopped) and else SIGKILLs PID. It
#: ignores SIGINT/SIGTERM itself (Ctrl-C and ``kill -- -PGID`` reach the whole group).
WATCHDOG = """
import os, select, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
pid, grace = int(sys.argv[1]), float(sys.argv[2])
stops = {int(signal.SIGTERM), int(signal.SIGINT)}
while True:
    got = os.read(0, 64)
    if not got:
        sys.exit(0)
    if stops & set(got):
        break
deadline = time.monotonic() + grace
while (left := deadline - time.monotonic()) > 0:
    if select.select([0], [], [], left)[0] and not os.read(0, 64):
        sys.exit(0)
sys.stderr.write(
    f"kb: the running step did not stop within {grace:g} s of the signal; ended the build "
    "process. Run `kb build` again to finish.\\n"
)
sys.stderr.flush()
os.kill(pid, signal.SIGKILL)
"""


@dataclass
class StopFlag:
    """Set by ``stop_guard``'s handler when SIGTERM/SIGINT arrives between runs.

    Attributes:
        signal: the signal number received, or ``None``.
    """

    signal: int | None = None


@contextlib.contextmanager
def stop_guard(grace: float = STOP_GRACE_SECONDS) -> Iterator[StopFlag]:
    """Make SIGTERM and SIGINT stop a build within ``grace`` seconds, in the main thread
    (elsewhere it yields a flag that never sets: signals reach only the main thread).

    While inside: the signals set the yielded flag (Dagster swaps in its own handlers while
    a run executes, and puts these back after); every signal is also written to a wakeup
    pipe (``signal.set_wakeup_fd``, done by the C-level handler even while a native call
    holds the GIL) read by the ``WATCHDOG`` process, which kills this process ``grace``
    seconds after a stop signal unless the guard was left by then. Handlers and the wakeup
    fd are restored on exit.
    """
    flag = StopFlag()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    watchdog = subprocess.Popen(  # noqa: S603 - our own interpreter and fixed code
        [sys.executable, "-I", "-S", "-c", WATCHDOG, str(os.getpid()), str(grace)],
        stdin=read_end,
    )
    os.close(read_end)

    def record(signum: int, _frame: object) -> None:
        flag.signal = signum

    previous = {sig: signal.signal(sig, record) for sig in (signal.SIGTERM, signal.SIGINT)}
    previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    try:
        yield flag
    finally:
        signal.set_wakeup_fd(previous_fd)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        os.close(write_end)
        watchdog.wait()


def build_in_turn(
    groups: Iterable[Sequence[str]],
    build_group: Callable[[Sequence[str]], list[BuildOutcome]],
    on_done: Callable[[BuildOutcome], None] | None = None,
) -> list[BuildOutcome]:
    """Build ``groups`` of doc_ids one after the other inside ``stop_guard`` (its grace is
    ``STOP_GRACE_SECONDS`` as this module holds it when called); ``build_group`` returns the
    outcomes of one group. Returns every outcome in order; ``on_done`` gets each as soon as its
    group is done. No group starts after a stop signal, nor after a group with a
    ``STOPPED_REASON`` outcome (a signal Dagster's handler took inside a run)."""
    outcomes: list[BuildOutcome] = []
    with stop_guard(STOP_GRACE_SECONDS) as stop:
        for group in groups:
            if stop.signal is not None:
                break
            done = build_group(group)
            for outcome in done:
                outcomes.append(outcome)
                if on_done is not None:
                    on_done(outcome)
            if any(o.reason == STOPPED_REASON for o in done):
                break
    return outcomes
