"""A real headless Chromium for the page tests: Debian's ``chromium`` driven by Playwright's
Python package through ``executable_path`` (Playwright's own browser download is never used).

``KB_TEST_CHROMIUM`` names another executable. Without one the tests skip with the reason, and
under ``KB_REQUIRE_SERVICES=1`` (``.ci/run``, which installs the package) the skip is a failure.

Fixtures (import them into a test module or a ``conftest.py``):

* ``chromium`` (session) — a launched ``playwright.sync_api.Browser``;
* ``browser_page`` — a fresh page in its own context (1280×900), closed after the test; console
  errors and uncaught page errors are collected in ``page.kb_errors`` (a list of str) so a test
  can assert that a page ran cleanly.
"""

from __future__ import annotations

import os
import shutil
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


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """A headless Chromium for the whole session (``playwright.sync_api.Browser``)."""
    executable = chromium_executable()
    try:
        from playwright.sync_api import sync_playwright  # noqa: PLC0415 - test-only dependency
    except ImportError:  # pragma: no cover - the test extra installs it
        skip_or_fail("browser tests need the playwright package (pip install -e '.[test]')")
    with sync_playwright() as driver:
        # --no-sandbox: CI runs as root, where Chromium refuses its sandbox.
        browser = driver.chromium.launch(
            executable_path=executable, headless=True, args=["--no-sandbox"]
        )
        try:
            yield browser
        finally:
            browser.close()


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
