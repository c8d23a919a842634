"""The browser the page tests rely on starts, renders and runs scripts."""

from __future__ import annotations

from playwright.sync_api import Page


def test_chromium_renders_a_page_and_runs_its_script(page: Page) -> None:
    page.set_content("<button id=b onclick=\"this.textContent='clicked'\">click me</button>")
    page.get_by_role("button", name="click me").click()
    assert page.inner_text("#b") == "clicked"
    assert "HeadlessChrome" in page.evaluate("navigator.userAgent")
