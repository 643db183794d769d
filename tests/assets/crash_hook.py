"""Run the ``kb`` CLI in this process on fast fake providers, optionally stopping inside one
function until the process is killed: the subprocess the crash-recovery tests SIGKILL
(``tests/assets/test_crash_recovery.py``).

Usage: ``python -m tests.assets.crash_hook [--stop-in NAME [--after] [--within MODULE]] -- ARGS``
(``ARGS``: what ``kb`` is given).

* The provider factory (``kb_shared.providers.factory``) is replaced by ``tests.fakes``'s fakes
  (one ``FakeConverter``, ``HashingEmbedder(32)``, ``FakeExtractor``, ``FakeFigureLocator``),
  so a build takes well under a second a step and needs no model. Nothing in ``kb`` changes:
  the CLI, Dagster run, stores and watchdog are the real ones.
* ``--stop-in module.attr`` (or ``module.Class.attr``) wraps that function: when it is called
  (before the original runs, or after it returned with ``--after``), the process writes
  ``STOP_LINE`` to the file descriptor named by ``KB_CRASH_FD`` and then waits for ever, so
  the test's SIGKILL lands at that point and nowhere else. With ``--within MODULE`` only a
  call made from that module's code stops (``--within kb_assets.assets.figures``: the
  figures step's upsert, not the embeddings step's).
* With ``NOTION_PAGES_ENV`` set to a JSON file (a list of tracker pages, as
  ``tests.market.notion_server.tracker_page`` gives them), a ``FakeNotion`` serving those
  pages answers at ``API_URL`` through respx, and the Notion settings point at it, so
  ``kb sync notion`` reads that tracker (respx mocks of the test's own process are not seen
  here). Unset, nothing about Notion changes.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import respx

from kb_shared.providers import factory
from kb_shared.providers.base import HeadingPathContextualiser
from tests.fakes import FakeConverter, FakeExtractor, FakeFigureLocator, HashingEmbedder
from tests.market.notion_server import API_URL, DATA_SOURCE_ID, TOKEN, FakeNotion

#: What the stopped process writes to ``KB_CRASH_FD`` when it reaches the stop point.
STOP_LINE = b"stopped\n"
#: The environment variable naming the JSON file of tracker pages to serve (see the module).
#: Not ``KB_``-prefixed: the crash tests pass their own environment on without those.
NOTION_PAGES_ENV = "CRASH_HOOK_NOTION_PAGES"


def install_fake_providers() -> None:
    """Make every ``kb_shared.providers.factory`` role return this process's one fake."""
    fakes: dict[str, Any] = {
        "markdown_converter": FakeConverter(),
        "embedder": HashingEmbedder(32),
        "contextualiser": HeadingPathContextualiser(),
        "graph_extractor": FakeExtractor(),
        "figure_locator": FakeFigureLocator(),
    }
    for role, fake in fakes.items():
        setattr(factory, role, lambda _settings, fake=fake: fake)


def install_fake_notion(pages_file: Path) -> respx.MockRouter:
    """Serve the tracker pages in the JSON file ``pages_file`` (a list of page objects) from
    a ``FakeNotion`` at ``API_URL`` for the rest of this process, and point ``NOTION_TOKEN``,
    ``KB_NOTION_DATA_SOURCE_ID`` and ``KB_NOTION_API_URL`` at it; returns the started router."""
    server = FakeNotion(json.loads(pages_file.read_text(encoding="utf-8")))
    router = respx.MockRouter(assert_all_called=False, assert_all_mocked=True)
    router.route(host=urlsplit(API_URL).hostname).mock(side_effect=server.handle)
    router.start()
    os.environ.update(
        NOTION_TOKEN=TOKEN, KB_NOTION_DATA_SOURCE_ID=DATA_SOURCE_ID, KB_NOTION_API_URL=API_URL
    )
    return router


def _owner(dotted: str) -> tuple[Any, str]:
    """The object holding ``dotted``'s last part (a module or a class in one) and that name."""
    parts = dotted.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            owner: Any = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for name in parts[split:-1]:
            owner = getattr(owner, name)
        if not hasattr(owner, parts[-1]):
            raise AttributeError(f"{dotted}: no {parts[-1]!r} on {owner!r}")
        return owner, parts[-1]
    raise ModuleNotFoundError(f"{dotted}: no module to import")


def _wait_for_kill() -> None:
    os.write(int(os.environ["KB_CRASH_FD"]), STOP_LINE)
    threading.Event().wait()  # until SIGKILL


def _called_from(module: str) -> bool:
    """Whether a function of ``module`` is on the caller's stack."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_globals.get("__name__") == module:
            return True
        frame = frame.f_back
    return False


def stop_in(dotted: str, *, after: bool = False, within: str | None = None) -> None:
    """Wrap the function ``dotted`` so the process stops (``_wait_for_kill``) the first time
    it is called (from a function of the module ``within``, when given): before it runs, or
    with ``after`` once it has returned."""
    owner, name = _owner(dotted)
    original: Callable[..., Any] = getattr(owner, name)

    @functools.wraps(original)
    def stopping(*args: Any, **kwargs: Any) -> Any:
        inside = within is None or _called_from(within)
        if inside and not after:
            _wait_for_kill()
        result = original(*args, **kwargs)
        if inside:
            _wait_for_kill()
        return result

    setattr(owner, name, stopping)


def run(argv: list[str]) -> None:
    """Parse this module's options from ``argv``, then run ``kb`` with what follows ``--``."""
    split = argv.index("--")
    options, kb_args = argv[:split], argv[split + 1:]
    install_fake_providers()
    if os.environ.get(NOTION_PAGES_ENV):
        install_fake_notion(Path(os.environ[NOTION_PAGES_ENV]))
    if "--stop-in" in options:
        within = options[options.index("--within") + 1] if "--within" in options else None
        stop_in(
            options[options.index("--stop-in") + 1], after="--after" in options, within=within
        )
    from kb_assets.cli.main import main  # noqa: PLC0415 - after the patches, as `kb` would load

    sys.argv = ["kb", *kb_args]
    main()


if __name__ == "__main__":
    run(sys.argv[1:])
