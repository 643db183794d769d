"""The PDF layout model's onnxruntime sessions, set the way a build runs them.

pymupdf-layout builds its onnxruntime sessions (the page image features, the box graph network,
the table grid) when ``pymupdf`` is first imported, with onnxruntime's defaults: one intra-op
thread per core, and idle threads that spin-wait for the next run. Between two pages of a
conversion those threads hold every core, so a conversion burns CPU no one uses, and a second
document converted at once (``kb build --workers 2``) or anything beside a conversion waits for
cores that are only spinning (benchmarks/results/ingest-2026-12-06-layout-threads.md).

``use_layout_threads(threads)`` builds the layout model again in this process, each session
given ``threads`` intra-op threads (``None``: onnxruntime's choice, every core), idle threads
that sleep and onnxruntime's memory arena, and makes it the one ``pymupdf`` pages use
(``pymupdf._get_layout``, which ``pymupdf.layout.activate`` sets); again only when something
else replaced that model (pymupdf4llm's ``use_layout`` turned off and on). The models and their
inputs are unchanged, so are their outputs: only the thread pool and the allocator differ.
``KB_LAYOUT_THREADS`` sets ``threads`` (``configured_threads``); ``kb build --workers N`` gives
each worker the cores divided among the workers
(``kb_assets.build_workers.worker_environment``).

The arena: pymupdf-layout turns it off so that a long-lived process gives memory back between
documents. Without it every page's run allocates its large buffers afresh, and the layout step
took a quarter more time; with it a process holds ~250 MB more, which stayed flat over 20
corpus PDFs of different page sizes (benchmarks/results/ingest-2026-12-07-layout-arena.md). A
build's processes end with the build (``kb build``'s workers, each Dagster run's process), so
what the arena keeps is given back then.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

#: onnxruntime's session option that lets idle intra-op threads spin-wait ("0": they sleep).
SPINNING_ENTRY = "session.intra_op.allow_spinning"

_LOCK = threading.Lock()
_built: dict[str, Any] = {}  # "threads" and "get_layout": the model this module set, if any


def configured_threads() -> int | None:
    """``KB_LAYOUT_THREADS`` from the settings (``None`` when unset).

    A settings error is not raised here: it is reported where a command or a run loads its
    settings, and the layout sessions then get onnxruntime's thread count."""
    from pydantic import ValidationError  # noqa: PLC0415

    from kb_shared.settings import Settings  # noqa: PLC0415

    try:
        return Settings().layout_threads
    except ValidationError:
        return None


@contextlib.contextmanager
def _sessions_built_with(threads: int | None) -> Iterator[None]:
    """While inside, every ``onnxruntime.InferenceSession`` built gets ``threads`` intra-op
    threads (``None``: onnxruntime's default), sleeping idle threads and the CPU memory arena
    (which pymupdf-layout turns off; the module docstring says why), keeping any other option
    its caller set."""
    import onnxruntime as ort  # noqa: PLC0415

    shipped = ort.InferenceSession

    class _Session(shipped):  # type: ignore[misc, valid-type]
        def __init__(self, path_or_bytes: Any, sess_options: Any = None, *args: Any,
                     **kwargs: Any) -> None:
            options = sess_options if sess_options is not None else ort.SessionOptions()
            if threads is not None:
                options.intra_op_num_threads = threads
            options.add_session_config_entry(SPINNING_ENTRY, "0")
            options.enable_cpu_mem_arena = True
            super().__init__(path_or_bytes, options, *args, **kwargs)

    ort.InferenceSession = _Session
    try:
        yield
    finally:
        ort.InferenceSession = shipped


def _ours_in_force() -> bool:
    """Whether ``pymupdf`` pages use the model this module built last."""
    import pymupdf  # noqa: PLC0415

    return bool(_built) and pymupdf._get_layout is _built["get_layout"]


def use_layout_threads(threads: int | None) -> bool:
    """Rebuild this process's layout model with ``threads`` per session, sleeping idle
    threads and the memory arena, unless the model in force is already that one. Takes ~1 s
    (the sessions are built again); the model it replaces is freed.

    Args:
        threads: intra-op threads per layout session, ≥ 1, or ``None`` for every core.

    Returns:
        ``True`` when this call rebuilt the model; ``False`` when it was in force already,
        or pymupdf-layout is not installed (pymupdf then has no layout model to set).

    Raises:
        ValueError: ``threads`` below 1.
    """
    if threads is not None and threads < 1:
        raise ValueError(f"layout threads must be 1 or more, not {threads}")
    with _LOCK:
        if _ours_in_force() and _built["threads"] == threads:
            return False
        import pymupdf  # noqa: PLC0415

        try:
            import pymupdf.layout as layout  # noqa: PLC0415
        except ImportError:
            return False
        with _sessions_built_with(threads):
            pymupdf._get_layout = None  # activate() builds a model only when none is set
            layout.activate()
        _built.update(threads=threads, get_layout=pymupdf._get_layout)
        return True


def use_configured_threads() -> bool:
    """``use_layout_threads(configured_threads())`` unless a model this module built is in
    force (the settings are then not read again). Same return and errors."""
    if _ours_in_force():
        return False
    return use_layout_threads(configured_threads())
