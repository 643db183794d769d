"""A real headless Chromium for the page tests: Debian's ``chromium`` driven by Playwright's
Python package through ``executable_path`` (Playwright's own browser download is never used).

``KB_TEST_CHROMIUM`` names another executable. Without one the tests skip with the reason, and
under ``KB_REQUIRE_SERVICES=1`` (``.ci/run``, which installs the package) the skip is a failure.

Fixtures (import them into a test module or a ``conftest.py``):

* ``chromium`` (module) — a launched ``playwright.sync_api.Browser`` (one per process at a
  time, shared by the modules that use it; stopped when none does);
* ``browser_page`` — a fresh page in its own context (1280×900), closed after the test; console
  errors and uncaught page errors are collected in ``page.kb_errors`` (a list of str) so a test
  can assert that a page ran cleanly.

``run_timers_until`` moves a page's own clock forward (Playwright's ``page.clock``) until an
element shows, so a test of a page that polls need not wait the poll interval in real time.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import skip_or_fail

#: Debian's package installs the browser here; ``KB_TEST_CHROMIUM`` overrides.
DEFAULT_CHROMIUM = "/usr/bin/chromium"


def chromium_executable() -> str:
    """Path of the Chromium to drive, or skip/fail with the reason when there is none."""
    wanted = os.environ.get("KB_TEST_CHROMIUM", DEFAULT_CHROMIUM)
    found = wanted if os.path.isfile(wanted) and os.access(wanted, os.X_OK) else shutil.which(wanted)
    if not found:
        skip_or_fail(
            f"browser tests need Chromium at {wanted} (apt-get install chromium, or set "
            "KB_TEST_CHROMIUM); .ci/run installs it"
        )
    return found  # type: ignore[return-value]


#: The process's one Playwright driver and browser (and how many ``chromium`` fixtures hold
#: them). Each module that imports the fixtures gets its own ``chromium`` fixture, and the sync
#: API refuses a second driver while one runs in the thread, so the fixtures share these.
_SHARED: dict[str, Any] = {}


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """A headless Chromium for the test module (``playwright.sync_api.Browser``).

    Module scope: while Playwright's sync driver runs, the thread counts as running an event
    loop, so anyio tests fail ("Cannot run the event loop while another loop is running"); the
    browser stops when the module ends, and in a module mixing both the async tests come first.
    """
    executable = chromium_executable()
    try:
        from playwright.sync_api import sync_playwright  # noqa: PLC0415 - test-only dependency
    except ImportError:  # pragma: no cover - the test extra installs it
        skip_or_fail("browser tests need the playwright package (pip install -e '.[test]')")
    if not _SHARED:
        driver = sync_playwright().start()
        try:
            # --no-sandbox: CI runs as root, where Chromium refuses its sandbox.
            browser = driver.chromium.launch(
                executable_path=executable, headless=True, args=["--no-sandbox"]
            )
        except BaseException:
            driver.stop()
            raise
        _SHARED.update(driver=driver, browser=browser, users=0)
    _SHARED["users"] += 1
    try:
        yield _SHARED["browser"]
    finally:
        _SHARED["users"] -= 1
        if _SHARED["users"] == 0:
            _SHARED["browser"].close()
            _SHARED["driver"].stop()
            _SHARED.clear()


@pytest.fixture
def browser_page(chromium: Any) -> Iterator[Any]:
    """A fresh page (1280×900) whose console errors land in ``page.kb_errors``."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.kb_errors = errors
    try:
        yield page
    finally:
        context.close()


def run_timers_until(page: Any, locator: Any, step_ms: int, timeout_ms: float = 60_000) -> None:
    """Advance ``page``'s clock ``step_ms`` at a time, firing its timers, until ``locator``
    matches an element (``page.clock.install()`` must have run before the page loaded).

    A page that polls every ``step_ms`` then refreshes as soon as a test changed what it shows,
    not ``step_ms`` of real time later; the page itself runs as it would (a poll whose request
    is still out when the clock moves schedules its next one when the answer arrives).

    Raises:
        playwright.sync_api.TimeoutError: nothing matched within ``timeout_ms`` of real time.
    """
    from playwright.sync_api import TimeoutError as PageTimeout  # noqa: PLC0415 - test extra

    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        page.clock.run_for(step_ms)
        try:
            locator.first.wait_for(state="attached", timeout=250)
            return
        except PageTimeout:
            if time.monotonic() > deadline:
                raise
