"""A real browser for the pages' tests: Debian's Chromium driven by Playwright.

The browser is the system's ``/usr/bin/chromium`` (``make test`` installs the Debian
package when it is missing), never a browser the test tool downloads for itself. It
runs headless with the flags this kind of machine needs: no sandbox (tests run as
root), no GPU, and none of Chromium's own network traffic, which a closed network
refuses. Without the browser the tests are skipped with the reason, except under CI
(``CI=true``), where they fail: a page nobody looked at is not tested.

Playwright's synchronous API runs its own event loop, so the browser tests are plain
(not ``anyio``) tests that talk to a real uvicorn server in another process.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, ViewportSize, sync_playwright

CHROMIUM = Path(os.environ.get("ARKVORY_TEST_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
DESKTOP: ViewportSize = {"width": 1280, "height": 900}
PHONE: ViewportSize = {"width": 390, "height": 844}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One headless Chromium per test module; each test gets its own context.

    Not per session: Playwright's synchronous API keeps its event loop running in this
    thread for as long as it is started, and the suite's async tests (anyio) that
    run after the browser tests need the thread's loop slot free again.
    """
    if not CHROMIUM.is_file():
        reason = f"{CHROMIUM} is missing: `make test` installs it (apt-get install chromium)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=list(CHROMIUM_FLAGS)
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    """A fresh profile at desktop width: no cookies or storage from another test."""
    fresh = browser.new_context(viewport=DESKTOP)
    fresh.set_default_timeout(15_000)
    try:
        yield fresh
    finally:
        fresh.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


# The busy demo of the operator page's tests (tests/browser/_demo.py).
from ._demo import busy_demo  # noqa: E402, F401
