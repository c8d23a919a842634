"""Changing settings on the operator page: saved whole with its revision, or not at all.

An operator's change reaches the API and a second demo process on the same PostgreSQL
schema (R-SET-3); a change made meanwhile by someone else is named, shown, and loaded
without losing what the operator typed; an invalid value is marked where it was typed
and nothing is saved; another site cannot post a change with the operator's cookie.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, Response

from ._demo import SECOND_OPERATOR_TOKEN, PageDemo, log_in, wait_for
from .test_operator_page import wait_loaded

REFRESH_SECONDS = 10.0


def revision_on_page(page: Page) -> int:
    return int(page.locator("#settings-meta").get_attribute("data-revision") or "-1")


def test_an_operator_changes_the_weights_and_a_second_process_applies_them(
    page: Page, busy_demo: PageDemo, tmp_path: Path
) -> None:
    second_root = tmp_path / "served"
    second_root.mkdir()
    second = PageDemo(
        second_root,
        tmp_path / "second.log",
        database_url=busy_demo.database_url,
        schema=busy_demo.schema,
        busy=False,
    )
    second.start()
    try:
        log_in(page, busy_demo)
        wait_loaded(page)
        before = busy_demo.api("/settings")
        weights = list(before["settings"]["weights"])
        weights[1] = weights[1] + 1 if weights[1] < 900 else 3
        page.get_by_label("release", exact=True).fill(str(weights[1]))
        page.get_by_role("button", name="Save settings").click()
        page.locator("#save-message.ok").wait_for()
        saved_at = time.monotonic()
        revision = before["revision"] + 1
        assert revision_on_page(page) == revision
        assert f"revision {revision}" in page.locator("#save-message").inner_text()
        answer = busy_demo.api("/settings")
        assert (answer["revision"], answer["settings"]["weights"]) == (revision, weights)
        assert answer["appliedRevision"] == revision, "in force where it was saved"
        audit = page.locator("#audit tbody tr").first
        audit.get_by_text("weights:").wait_for()
        assert "olga" in audit.inner_text()
        # The other process reads the record every 10 s and applies it at its first read
        # after the save. A loaded machine delays that read by its own scheduling, never
        # by a whole interval, so only a process that skipped a refresh (or never
        # refreshes) misses two intervals (tests/api/test_demo_processes.py says more).
        while second.api("/settings")["appliedRevision"] != revision:
            assert time.monotonic() - saved_at < 2 * REFRESH_SECONDS, "not applied"
            time.sleep(0.25)
    finally:
        second.stop()


def test_a_change_made_meanwhile_is_named_and_a_reload_keeps_what_i_typed(
    page: Page, busy_demo: PageDemo
) -> None:
    log_in(page, busy_demo)
    wait_loaded(page)
    mine = busy_demo.api("/settings")
    typed = "42.5" if mine["settings"]["idleSeconds"] != 42.5 else "43.5"
    page.get_by_label("Idle time (seconds)").fill(typed)
    # Oscar changes the aging through the API while the page is being edited.
    aging = 7.0 if mine["settings"]["agingMinutes"] != 7.0 else 8.0
    theirs = busy_demo.put_settings(
        {**mine["record"], "expectedRevision": mine["revision"], "agingMinutes": aging},
        token=SECOND_OPERATOR_TOKEN,
    )
    page.get_by_role("button", name="Save settings").click()
    conflict = page.locator("#conflict")
    conflict.get_by_text("Nothing was saved").wait_for()
    text = conflict.inner_text()
    assert "oscar" in text
    assert f"agingMinutes: {mine['settings']['agingMinutes']:g} → {aging:g}" in text
    assert busy_demo.api("/settings")["revision"] == theirs["revision"], "nothing saved"
    page.get_by_role("button", name="Load the current settings, keep my changes").click()
    wait_for(
        page,
        f"document.getElementById('settings-meta').dataset.revision === '{theirs['revision']}'",
    )
    assert page.get_by_label("Idle time (seconds)").input_value() == typed
    assert float(page.get_by_label("Aging (minutes, 0: off)").input_value()) == aging
    page.get_by_role("button", name="Save settings").click()
    page.locator("#save-message.ok").wait_for()
    final = busy_demo.api("/settings")["settings"]
    assert (final["idleSeconds"], final["agingMinutes"]) == (float(typed), aging)


def test_an_invalid_value_is_marked_where_it_was_typed_and_nothing_is_saved(
    page: Page, busy_demo: PageDemo
) -> None:
    log_in(page, busy_demo)
    wait_loaded(page)
    before = busy_demo.api("/settings")
    page.get_by_label("Sessions (slots)").fill("0")
    page.get_by_role("button", name="Add a window for release").click()
    page.locator("#cw-release-0-zone").fill("Mars/Base")
    page.get_by_role("button", name="Save settings").click()
    page.locator("#save-message.bad").wait_for()
    sessions = page.locator("#s-sessions")
    assert sessions.get_attribute("aria-invalid") == "true"
    assert "whole number" in page.locator("#s-sessions-error").inner_text()
    assert sessions.get_attribute("aria-describedby") == "s-sessions-error"
    zone = page.locator("#cw-release-0-zone")
    assert zone.get_attribute("aria-invalid") == "true"
    assert "Mars/Base" in page.locator("#cw-release-0-zone-error").inner_text()
    assert page.evaluate("document.activeElement.id") == "s-sessions", "focus on the first"
    assert "Nothing was saved" in page.locator("#save-message").inner_text()
    after = busy_demo.api("/settings")
    assert after["revision"] == before["revision"]
    assert after["settings"] == before["settings"]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output clean."""


@pytest.fixture
def other_site(tmp_path: Path) -> Iterator[str]:
    """A second web server on another host name (localhost, not 127.0.0.1): another site."""
    folder = tmp_path / "other-site"
    folder.mkdir()
    handler = partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)  # the system's port
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://localhost:{port}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_cross_site_form_post_cannot_change_the_settings(
    page: Page, busy_demo: PageDemo, other_site: str, tmp_path: Path
) -> None:
    log_in(page, busy_demo)  # the browser holds the operator's cookie
    before = busy_demo.api("/settings")["revision"]
    target = f"{busy_demo.api_url}/settings"
    # A text/plain form posts `name=value`: the classic way to smuggle JSON in a form.
    smuggled = f'{{"expectedRevision": {before}, "sessions": 1, "x": "'
    attack = (
        "<!doctype html><html><body>"
        f'<form id="f" method="post" action="{target}" enctype="text/plain">'
        f"<input type=hidden name='{smuggled}' value='\"}}'></form>"
        "<script>document.getElementById('f').submit()</script></body></html>"
    )
    (tmp_path / "other-site" / "attack.html").write_text(attack)
    answers: list[Response] = []
    page.on("response", lambda response: answers.append(response))  # noqa: PLW0108
    page.goto(f"{other_site}/attack.html")
    page.wait_for_url(target)
    posted = [a for a in answers if a.url == target and a.request.method == "POST"]
    assert posted and not posted[0].ok, [a.status for a in posted]
    # A script on the other site cannot do it either: it needs a CORS grant it never gets.
    page.goto(f"{other_site}/")
    outcome = page.evaluate(
        """async ([url, revision]) => {
            try {
                const r = await fetch(url, {method: 'PUT', credentials: 'include',
                    headers: {'content-type': 'application/json'},
                    body: JSON.stringify({expectedRevision: revision, sessions: 1})});
                return 'answered ' + r.status;
            } catch (error) { return 'blocked'; }
        }""",
        [target, before],
    )
    assert outcome == "blocked"
    assert busy_demo.api("/settings")["revision"] == before
