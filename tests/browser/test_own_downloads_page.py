"""A person's own downloads page (issue #19) in a real browser against the real demo.

Two demo servers with real downloads by real clients: a *steady* one whose slots stay
held by downloads stopped after their first bytes while alice waits (layout, labels,
keyboard, sign-in, pausing), and a *moving* one whose queue drains one place at a time,
so alice's place visibly falls.
Other people's downloads run beside hers in both; the tests check that nothing of
theirs — name, object, download id — reaches her page or her JSON.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page

from ._busy_demo import MIB, BusyDemo, token_of
from ._stopped_clock import reads, settle, stop_the_clock, wait_for_reads
from .conftest import DESKTOP, PHONE

MINE: Final = "/downloads/mine/"
PERIOD_MS: Final = 3000  # the page's own update interval ("Update every 3 s")
SCREENSHOT: Final = (
    Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "own-downloads.png"
)
#: Set to write the screenshot into docs/ (otherwise it goes to the test's tmp_path).
UPDATE_SCREENSHOTS: Final = os.environ.get("ARKVORY_UPDATE_SCREENSHOTS", "") == "1"
OTHERS: Final = ("bob", "carol", "dave", "erin", "frank", "grace")


def as_person(browser: Browser, name: str, **options: Any) -> BrowserContext:
    """A fresh browser profile that sends ``name``'s bearer token with every request."""
    context = browser.new_context(
        extra_http_headers={"Authorization": f"Bearer {token_of(name)}"}, **options
    )
    context.set_default_timeout(15_000)
    return context


def api_document(page: Page) -> dict[str, Any]:
    """The JSON behind the page, fetched by the page itself (same origin, same headers)."""
    text: str = page.evaluate(
        "async () => (await fetch(document.body.dataset.api, {cache: 'no-store'})).text()"
    )
    document: dict[str, Any] = json.loads(text)
    return document


def assert_nothing_of_others(text: str, demo: BusyDemo) -> None:
    for download in demo.downloads:
        if download.principal == "alice":
            continue
        assert download.principal not in text
        assert download.object_id not in text
        assert download.download_id not in text


def shown(page: Page, object_id: str) -> tuple[str | None, int | None]:
    """The state and the place the page shows for ``object_id`` right now (``None``:
    not shown), read at one moment: the list may be redrawn between two reads."""
    state: tuple[str | None, str | None] = page.evaluate(
        """(objectId) => {
            const item = [...document.querySelectorAll('li.download')]
                .find((li) => li.dataset.object === objectId);
            if (!item) return [null, null];
            const cell = item.querySelector('[data-field="position"]');
            return [item.dataset.state ?? null, cell ? cell.dataset.position ?? null : null];
        }""",
        object_id,
    )
    return state[0], None if state[1] is None else int(state[1])


def waiting_place(page: Page, object_id: str) -> int | None:
    return shown(page, object_id)[1]


@pytest.fixture(scope="module")
def steady(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BusyDemo]:
    """Three slots held for the whole module (bob's, carol's and one of alice's
    downloads, each stopped after its first bytes until the end, however long the
    module takes); dave, erin and then alice wait behind them."""
    root = tmp_path_factory.mktemp("steady")
    files = {f"{name}/build-{index}.iso": 24 * MIB for index, name in enumerate(OTHERS[:4])}
    files |= {"alice/dataset-2026.tar": 24 * MIB, "alice/toolchain-14.2.tar.zst": 12 * MIB}
    demo = BusyDemo(
        root,
        tmp_path_factory.mktemp("steady-log") / "server.log",
        sessions=3,
        bandwidth=3 * MIB // 2,
        files=files,
        range_size=MIB,
        env={"ARKVORY_DOWNLOAD_IDLE_SECONDS": "3600"},  # a stopped download keeps its slot
    )
    demo.start()
    try:
        demo.download("bob", "bob/build-0.iso", download_id="bob-dl-5d1e0c", gated=True)
        demo.download("alice", "alice/dataset-2026.tar", download_id="alice-dl-91b2f7", gated=True)
        demo.download("carol", "carol/build-1.iso", download_id="carol-dl-3fa9c4", gated=True)
        demo.download("dave", "dave/build-2.iso", download_id="dave-dl-77e012")
        demo.download("erin", "erin/build-3.iso", download_id="erin-dl-a0b4d8")
        demo.download("alice", "alice/toolchain-14.2.tar.zst", download_id="alice-dl-c44e9a")
        yield demo
        assert demo.errors() == []
    finally:
        demo.stop()


def test_a_person_sees_their_waiting_and_active_downloads_and_nothing_of_others(
    browser: Browser, steady: BusyDemo, tmp_path: Path
) -> None:
    context = as_person(browser, "alice", viewport=DESKTOP)
    try:
        page = context.new_page()
        response = page.goto(steady.base_url + MINE)
        assert response is not None and response.status == 200
        assert "script-src 'self'" in response.headers["content-security-policy"]
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["cache-control"] == "no-store"
        page.wait_for_selector('li.download[data-state="waiting"]')
        page.wait_for_selector('li.download[data-state="active"]')
        assert page.inner_text("#principal") == "alice"

        waiting = page.locator('li.download[data-object="alice/toolchain-14.2.tar.zst"]')
        assert waiting.get_attribute("data-state") == "waiting"
        assert waiting_place(page, "alice/toolchain-14.2.tar.zst") == 3  # behind dave, erin
        assert "in " in waiting.locator('[data-field="starts-in"]').inner_text()
        assert " – " in waiting.locator('[data-field="interval"]').inner_text()
        assert "Arkvory-Download-Class: bulk" in waiting.inner_text()
        assert "arkvoryctl download --class bulk URL" in waiting.inner_text()
        active = page.locator('li.download[data-object="alice/dataset-2026.tar"]')
        assert active.get_attribute("data-state") == "active"
        assert active.locator("progress").is_visible()
        advice = page.locator(".advice").inner_text()
        # What a lower class does, with the weights this server runs (8:4:2:1).
        assert "shared among them by weight (here interactive 8 : release 4 : bulk 2 : " in (
            " ".join(advice.split())
        )
        assert "background 1)" in advice
        assert "waits behind" not in advice
        assert "arkvoryctl download --class CLASS URL" in advice
        assert "--not-after" in advice

        document = api_document(page)
        assert document["principal"] == "alice"
        assert {d["objectId"] for d in document["downloads"]} == {
            "alice/dataset-2026.tar",
            "alice/toolchain-14.2.tar.zst",
        }
        shown = {d["objectId"]: d for d in document["downloads"]}
        interval = shown["alice/toolchain-14.2.tar.zst"]
        assert interval["startsEarliest"] <= interval["startsAt"] <= interval["startsLatest"]
        assert interval["startsGuessed"] is False  # this demo's link rate is configured
        assert_nothing_of_others(page.content(), steady)
        assert_nothing_of_others(json.dumps(document), steady)

        if UPDATE_SCREENSHOTS:  # let the downloads get under way for the picture
            page.wait_for_timeout(4_000)
            with page.expect_response(lambda answer: answer.url.endswith(MINE + "api")):
                page.click("#refresh")
            page.wait_for_timeout(200)
        page.screenshot(
            path=str(SCREENSHOT if UPDATE_SCREENSHOTS else tmp_path / "own-downloads.png"),
            full_page=True,
        )
        phone = as_person(browser, "alice", viewport=PHONE)
        try:
            small = phone.new_page()
            small.goto(steady.base_url + MINE)
            small.wait_for_selector("li.download")
            small.screenshot(path=str(tmp_path / "own-downloads-phone.png"), full_page=True)
        finally:
            phone.close()
    finally:
        context.close()


def test_a_visitor_without_an_account_gets_401(browser: Browser, steady: BusyDemo) -> None:
    """The anonymous link is not a person: no page, no JSON, a problem document."""
    anonymous = browser.new_context()
    stranger = browser.new_context(extra_http_headers={"Authorization": "Bearer not-a-token"})
    try:
        for context in (anonymous, stranger):
            page = context.new_page()
            for path in (MINE, MINE + "api"):
                response = page.goto(steady.base_url + path)
                assert response is not None and response.status == 401
                assert response.headers["content-type"] == "application/problem+json"
                assert response.headers["www-authenticate"].startswith("Bearer")
                assert json.loads(response.text())["reason"] == "unauthenticated"
    finally:
        anonymous.close()
        stranger.close()
    # The page's own script and style hold nothing personal and are served to anyone.
    script = httpx.get(steady.base_url + MINE + "static/own-downloads.js", timeout=5.0)
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")


def test_a_person_who_logs_in_with_the_demo_cookie_sees_their_downloads(
    browser: Browser, steady: BusyDemo
) -> None:
    """The demo's browser login keeps the token in a cookie; the page reads it as the
    bearer token (no header here)."""
    context = browser.new_context(viewport=DESKTOP)
    try:
        page = context.new_page()
        page.goto(f"{steady.base_url}/login?next={MINE}")
        page.get_by_label("Token").fill(token_of("alice"))
        page.get_by_role("button", name="Log in").click()
        page.wait_for_selector('li.download[data-state="waiting"]')
        assert page.url == steady.base_url + MINE
        assert page.inner_text("#principal") == "alice"
        assert_nothing_of_others(page.content(), steady)
    finally:
        context.close()


def test_at_phone_width_nothing_scrolls_sideways_and_every_control_is_labelled(
    browser: Browser, steady: BusyDemo
) -> None:
    context = as_person(browser, "alice", viewport=PHONE, is_mobile=True, has_touch=True)
    try:
        page = context.new_page()
        page.goto(steady.base_url + MINE)
        page.wait_for_selector('li.download[data-state="waiting"]')
        widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert widths[0] <= widths[1], widths
        unlabelled = page.evaluate(
            """() => [...document.querySelectorAll('button, input, select, textarea, progress, a')]
                 .filter((el) => el.getClientRects().length > 0)
                 .filter((el) => !(el.getAttribute('aria-label')
                   || (el.labels && [...el.labels].some((l) => l.textContent.trim()))
                   || el.textContent.trim()))
                 .map((el) => el.outerHTML)"""
        )
        assert unlabelled == []
        assert page.get_by_role("checkbox", name="Update every 3 s").is_checked()
        assert page.get_by_role("button", name="Refresh now").is_visible()
        progress = page.get_by_role("progressbar", name="Progress of alice/dataset-2026.tar")
        assert progress.is_visible()
    finally:
        context.close()


def test_the_page_is_usable_from_the_keyboard_and_pauses_while_hidden(
    browser: Browser, steady: BusyDemo
) -> None:
    context = as_person(browser, "alice", viewport=DESKTOP)
    try:
        page = context.new_page()
        # The page's clock moves only when the test moves it (see _stopped_clock.py).
        stop_the_clock(page)
        page.goto(steady.base_url + MINE)
        page.wait_for_selector("li.download")
        # Keyboard only: Tab reaches the toggle and the button; Space and Enter work.
        reached = []
        for _ in range(6):
            page.keyboard.press("Tab")
            reached.append(page.evaluate("document.activeElement.id"))
            if reached[-1] == "refresh":
                break
        assert reached[-2:] == ["auto", "refresh"], reached
        settle(page)  # the first load is over: nothing but a key can ask now
        before = len(reads(page, MINE + "api"))
        page.keyboard.press("Enter")
        wait_for_reads(page, MINE + "api", before)  # Enter on "Refresh now" asked again

        # It updates on its own every 3 s while shown...
        settle(page)  # the 3 s start from the end of that load
        start = len(reads(page, MINE + "api"))
        page.clock.run_for(PERIOD_MS - 1)
        assert len(reads(page, MINE + "api")) == start, "asked before the 3 s were over"
        page.clock.run_for(1)
        wait_for_reads(page, MINE + "api", start)
        # ...and not at all while the tab is hidden.
        settle(page)
        hidden_from = len(reads(page, MINE + "api"))
        page.evaluate(
            """() => { Object.defineProperty(document, 'hidden',
                                             {value: true, configurable: true});
                       document.dispatchEvent(new Event('visibilitychange')); }"""
        )
        page.clock.run_for(5 * PERIOD_MS)
        settle(page)
        assert len(reads(page, MINE + "api")) == hidden_from
        page.evaluate(
            """() => { Object.defineProperty(document, 'hidden',
                                             {value: false, configurable: true});
                       document.dispatchEvent(new Event('visibilitychange')); }"""
        )
        # Shown again: asks at once, before any time passes.
        wait_for_reads(page, MINE + "api", hidden_from)
        assert True not in reads(page, MINE + "api"), "asked while hidden"

        # Space on the toggle turns the updates off.
        page.focus("#auto")
        page.keyboard.press(" ")
        assert not page.is_checked("#auto")
    finally:
        context.close()


def _waiting(object_id: str, download_class: str, lower: list[str], place: int) -> dict[str, Any]:
    """One waiting download as ``GET /api`` gives it (docs/api.md)."""
    return {
        "objectId": object_id,
        "downloadId": f"dl-{place}",
        "state": "waiting",
        "class": download_class,
        "queueClass": download_class,
        "position": place,
        "startsAt": "2030-01-01T12:00:00.000Z",
        "startsGuessed": False,
        "startsEarliest": "2030-01-01T11:59:00.000Z",
        "startsLatest": "2030-01-01T12:01:00.000Z",
        "startsInSeconds": 60.0,
        "objectSize": 24 * MIB,
        "bytesDelivered": 0,
        "bytesRemaining": 24 * MIB,
        "progress": 0.0,
        "rate": None,
        "since": "2030-01-01T11:58:00.000Z",
        "lowerClasses": lower,
    }


def _document(downloads: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole of ``GET /api`` around ``downloads`` (docs/api.md)."""
    return {
        "principal": "alice",
        "at": "2030-01-01T11:59:00.000Z",
        "total": len(downloads),
        "shown": len(downloads),
        "truncated": False,
        "downloads": downloads,
        "advice": {
            "classHeader": "Arkvory-Download-Class",
            "classOption": "arkvoryctl download --class CLASS URL",
            "notAfterOption": "arkvoryctl download --not-after TIME URL",
            "classWeights": {"interactive": 8, "release": 4, "bulk": 2, "background": 1},
        },
    }


def _show(page: Page, demo: BusyDemo, document: dict[str, Any]) -> None:
    """Replaces the page's JSON by ``document`` and opens the page: its own script draws
    it, and nothing the demo's queue does changes what is shown."""
    page.route(
        demo.base_url + MINE + "api",
        lambda route: route.fulfill(json=document, headers={"cache-control": "no-store"}),
    )
    page.goto(demo.base_url + MINE)


def test_a_start_told_on_a_guessed_rate_is_called_a_first_guess(
    browser: Browser, steady: BusyDemo
) -> None:
    """A start the server told on a guess of its link's rate (nothing configured, nothing
    measured yet) is labelled in words as the waiting page labels it, "First guess of
    the start"; any other start is the "Expected start" (ADR 0042)."""
    guessed = _waiting("alice/guessed.iso", "interactive", [], 1) | {"startsGuessed": True}
    told = _waiting("alice/told.iso", "interactive", [], 2)
    context = as_person(browser, "alice", viewport=DESKTOP)
    try:
        page = context.new_page()
        _show(page, steady, _document([guessed, told]))
        page.wait_for_selector('li.download[data-object="alice/told.iso"]')
        labels = page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll('li.download')].map(
                (li) => [li.dataset.object,
                         li.querySelector('[data-field="start-label"]').textContent]))"""
        )
        assert labels == {
            "alice/guessed.iso": "First guess of the start",
            "alice/told.iso": "Expected start",
        }
        # Shown in words beside the start, not only present: no colour carries it.
        start = page.locator('li.download[data-object="alice/guessed.iso"] .fact-start dt')
        assert start.is_visible()
    finally:
        context.close()


def test_each_download_is_offered_only_a_class_below_its_own(
    browser: Browser, steady: BusyDemo
) -> None:
    """Whatever class a download waits in, the page suggests a lower one, and none for
    one already in the lowest class (``background``). The page's JSON is replaced by
    one with a download of every class; the page's own script draws it."""
    classes = ["interactive", "release", "bulk", "background"]
    downloads = [
        _waiting(f"alice/{name}.iso", name, classes[rank + 1 :], rank + 1)
        for rank, name in enumerate(classes)
    ]
    context = as_person(browser, "alice", viewport=DESKTOP)
    try:
        page = context.new_page()
        _show(page, steady, _document(downloads))
        page.wait_for_selector('li.download[data-object="alice/background.iso"]')
        offered = page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll('li.download')].map(
                (li) => {
                    const lower = li.querySelector('[data-field="lower"]');
                    return [li.dataset.object,
                            lower.hidden ? null : [lower.dataset.class, lower.textContent]];
                }))"""
        )
        suggested = {"interactive": "bulk", "release": "bulk", "bulk": "background"}
        for name in classes:
            shown_for = offered[f"alice/{name}.iso"]
            if name not in suggested:
                assert shown_for is None, f"a {name} download is offered {shown_for}"
                continue
            lowered = suggested[name]
            assert shown_for[0] == lowered
            assert f"Arkvory-Download-Class: {lowered}" in shown_for[1]
            assert f"arkvoryctl download --class {lowered} URL" in shown_for[1]
        assert page.inner_text("#weights") == (
            " (here interactive 8 : release 4 : bulk 2 : background 1)"
        )
    finally:
        context.close()
