"""The waiting page in Debian's Chromium against the real demo (issue #29, ADR 0035).

Each test runs its own demo server with one session slot, held by an SDK download
stopped after its first bytes (:class:`Downloader`, gated), and a short hold, so that a
click on a large file on the demo's index page waits past the hold. The browser is a
person, carol (her token in every request, as a host's login would send it): she
clicks, closes tabs, comes back; the tests never refresh for her. Whoever waits ahead
of her is bob's SDK download: every browser of this machine has the same address, and
two browsers without a place cookie at one address share a place, as clients behind
one NAT share a session (R-SESS-2).
Time bounds come from what the page promises: its ``Refresh`` (the check time) plus the
hold, and a settle margin for a loaded machine that only a hang exceeds.

One test also renders the screenshots ``docs/screenshots/waiting-page*.png``
(``ARKVORY_UPDATE_SCREENSHOTS=1``; otherwise they go to the test's ``tmp_path``).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Cookie, Page

from arkvory_sched._session_keys import session_key
from arkvory_sched._tickets import TICKET_MAX_AGE_MS, TicketSigner
from arkvory_sched.asgi._browser import PLACE_COOKIE

from ._busy_demo import MIB, BusyDemo, Downloader, token_of
from .conftest import DESKTOP, PHONE

HOLD_SECONDS: Final = 0.5
SETTLE_SECONDS: Final = 30.0  # only a hang takes this long
FILE: Final = "nightly-build.iso"
HOLDER_FILE: Final = "holder.bin"
TICKET_KEY: Final = bytes(range(32))
BROWSING: Final = "carol"
SCREENSHOTS: Final = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
UPDATE_SCREENSHOTS: Final = os.environ.get("ARKVORY_UPDATE_SCREENSHOTS", "") == "1"

Demo = Callable[..., BusyDemo]


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    """Starts a demo with one slot and a hold of :data:`HOLD_SECONDS`; ``env`` adds to it."""
    started: list[BusyDemo] = []

    def start(env: dict[str, str] | None = None) -> BusyDemo:
        busy = BusyDemo(
            tmp_path / "served",
            tmp_path / "server.log",
            sessions=1,
            bandwidth=64 * MIB,
            files={HOLDER_FILE: 3 * MIB, FILE: 3 * MIB},
            range_size=MIB,
            env={
                "ARKVORY_DOWNLOAD_HOLD_SECONDS": str(HOLD_SECONDS),
                "ARKVORY_TICKET_KEY": TICKET_KEY.hex(),
                "ARKVORY_MAX_DOWNLOADS_PER_PRINCIPAL": "1",
                **(env or {}),
            },
        )
        busy.start()
        started.append(busy)
        return busy

    try:
        yield start
    finally:
        for busy in started:
            busy.stop()


def hold_the_slot(demo: BusyDemo) -> Downloader:
    """alice's SDK download takes the only slot and stops after its first bytes."""
    holder = demo.download("alice", HOLDER_FILE, download_id="holder", gated=True)
    assert holder.holding.wait(SETTLE_SECONDS), demo.errors()
    return holder


def person(browser: Browser, **options: Any) -> BrowserContext:
    """carol's browser: a fresh profile that downloads, at desktop width unless told."""
    settings: dict[str, Any] = {"viewport": DESKTOP, **options}
    context = browser.new_context(
        accept_downloads=True,
        extra_http_headers={"Authorization": f"Bearer {token_of(BROWSING)}"},
        **settings,
    )
    context.set_default_timeout(SETTLE_SECONDS * 1000)
    return context


def wait_ahead(demo: BusyDemo) -> None:
    """bob's download of the same file joins the line: one request of a protocol client,
    which then stays in line for longer than a test lasts (until its check time plus
    the no-show margin, R-SESS-7)."""
    response = httpx.get(
        demo.server.url(FILE),
        headers={"Authorization": f"Bearer {token_of('bob')}", "Arkvory-Download-Id": "bob-1"},
        timeout=SETTLE_SECONDS,
    )
    assert response.status_code == 503, response.text
    assert response.json()["reason"] == "download_queued"


def policy_errors(page: Page) -> list[str]:
    """What the page's Content-Security-Policy refused (the browser logs each refusal)."""
    errors: list[str] = []

    def seen(message: ConsoleMessage) -> None:
        if message.type == "error" and "Content Security Policy" in message.text:
            errors.append(message.text)

    page.on("console", seen)
    return errors


def assets_loaded(page: Page) -> list[tuple[str, int]]:
    """Every stylesheet and script the page loaded, with its status."""
    loaded: list[tuple[str, int]] = []
    page.on(
        "response",
        lambda response: (
            loaded.append((response.url.split("?")[0], response.status))
            if response.request.resource_type in {"stylesheet", "script"}
            else None
        ),
    )
    return loaded


def click_the_file(page: Page, demo: BusyDemo) -> None:
    """Open the demo's index and click the large file, as a person does."""
    page.goto(demo.base_url + "/")
    page.get_by_role("link", name=FILE).click()
    page.wait_for_selector("#place")


def place(page: Page) -> int:
    return int(page.inner_text("#place"))


def refresh_seconds(page: Page) -> int:
    content = page.get_attribute('meta[http-equiv="refresh"]', "content")
    assert content is not None and content.isdigit(), content
    return int(content)


def waiting(demo: BusyDemo) -> int:
    document = httpx.get(demo.base_url + "/readyz", timeout=10.0).json()
    return int(document["waiting"])


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def place_cookie(context: BrowserContext) -> Cookie:
    (cookie,) = [c for c in context.cookies() if c["name"] == PLACE_COOKIE]
    return cookie


def set_place(context: BrowserContext, cookie: Cookie, value: str) -> None:
    """Put a place cookie with ``value`` where ``cookie`` was, as a person's own
    browser could (its profile is theirs to edit)."""
    context.add_cookies(
        [
            {
                "name": PLACE_COOKIE,
                "value": value,
                "domain": cookie["domain"],
                "path": cookie["path"],
                "httpOnly": True,
                "sameSite": "Lax",
            }
        ]
    )


# --------------------------------------------------------------------------- the page
def test_a_click_while_busy_past_the_hold_shows_the_page_as_in_the_screenshots(
    browser: Browser, demo: Demo, tmp_path: Path
) -> None:
    """The place, the start in local time with its interval, what to do; the cookie as
    promised; nothing refused by the page's policy. Estimates assume a slow link here
    (``ARKVORY_DOWNLOAD_BANDWIDTH``), so the start is minutes away, as in real life."""
    server = demo({"ARKVORY_DOWNLOAD_BANDWIDTH": "20KB"})
    hold_the_slot(server)
    wait_ahead(server)
    context = person(browser, locale="de-DE", timezone_id="Europe/Berlin")
    try:
        page = context.new_page()
        errors = policy_errors(page)
        assets = assets_loaded(page)
        started = time.monotonic()
        with page.expect_response(lambda r: r.url.endswith(FILE)) as answered:
            click_the_file(page, server)
        assert time.monotonic() - started >= HOLD_SECONDS  # held first (R-HOLD-1)
        response = answered.value
        assert response.status == 503
        assert response.headers["refresh"] == response.headers["retry-after"]

        assert page.title() == f"Waiting: {FILE}"
        assert place(page) == 2
        assert page.inner_text("#place-note") == "1 download will start before yours."
        assert page.evaluate("document.documentElement.lang") == "en"
        # The script wrote the times in the person's zone, with the interval.
        assert page.inner_text("#zone-note") == "Times are in your local time (Europe/Berlin)."
        start = page.inner_text("#start")
        assert "UTC" not in start and ":" in start
        assert page.inner_text("#start-in").startswith("in ")
        assert "UTC" not in page.inner_text(".fact-interval dd")
        assert "Leave this tab open." in page.inner_text(".advice")
        assert errors == []
        assert sorted(assets) == [
            (f"{server.base_url}/files/.arkvory/waiting-page.css", 200),
            (f"{server.base_url}/files/.arkvory/waiting-page.js", 200),
        ]

        cookie = place_cookie(context)
        assert cookie["httpOnly"] is True
        assert cookie["sameSite"] == "Lax"
        assert cookie["path"] == f"/files/{FILE}"
        assert cookie["secure"] is False  # plain HTTP here
        assert 0 < cookie["expires"] - time.time() <= TICKET_MAX_AGE_MS / 1000 + 5
        assert page.evaluate("document.cookie") == ""  # out of the page's reach

        desktop = SCREENSHOTS / "waiting-page.png" if UPDATE_SCREENSHOTS else tmp_path / "d.png"
        page.screenshot(path=str(desktop), full_page=True)
        phone = person(
            browser,
            viewport=PHONE,
            is_mobile=True,
            device_scale_factor=2,
            timezone_id="America/New_York",
        )
        try:
            cookie = place_cookie(context)
            set_place(phone, cookie, cookie["value"])  # the same place, on a phone
            small = phone.new_page()
            small.goto(server.server.url(FILE))
            assert place(small) == 2
            path = (
                SCREENSHOTS / "waiting-page-phone.png" if UPDATE_SCREENSHOTS else tmp_path / "p.png"
            )
            small.screenshot(path=str(path), full_page=True)
        finally:
            phone.close()
    finally:
        context.close()


def test_the_file_arrives_by_itself_when_the_slot_frees(browser: Browser, demo: Demo) -> None:
    """Nobody touches the page: its refresh finds the slot and the browser downloads."""
    server = demo()
    holder = hold_the_slot(server)
    context = person(browser)
    try:
        page = context.new_page()
        click_the_file(page, server)
        assert place(page) == 1
        promised = refresh_seconds(page) + HOLD_SECONDS + SETTLE_SECONDS
        with page.expect_download(timeout=promised * 1000) as arrived:
            holder.release()  # the holder reads the rest of its file and frees the slot
        download = arrived.value
        assert download.failure() is None
        saved = Path(download.path())
        assert sha256(saved) == sha256(server.server.root / FILE)
        assert download.suggested_filename == FILE
        assert page.title() == f"Waiting: {FILE}"  # the page stays as it was
        holder.thread.join(SETTLE_SECONDS)
        assert holder.finished and not server.errors()
    finally:
        context.close()


def test_a_closed_and_reopened_tab_keeps_its_place(browser: Browser, demo: Demo) -> None:
    server = demo()
    hold_the_slot(server)
    wait_ahead(server)
    context = person(browser)
    try:
        page = context.new_page()
        click_the_file(page, server)
        assert place(page) == 2
        page.close()
        reopened = context.new_page()  # the same browser profile: the same cookies
        reopened.goto(server.server.url(FILE))
        assert place(reopened) == 2
        assert waiting(server) == 2  # the same session, not a second one
    finally:
        context.close()


def test_a_stale_or_tampered_cookie_only_costs_the_place(browser: Browser, demo: Demo) -> None:
    """A cookie whose place id was edited, or whose ticket is older than the keep time,
    gets a new place at the end of the line: the page, never an error."""
    server = demo()
    hold_the_slot(server)
    context = person(browser)
    try:
        page = context.new_page()
        click_the_file(page, server)
        assert place(page) == 1
        wait_ahead(server)  # bob comes second

        cookie = place_cookie(context)
        place_id, ticket = cookie["value"].split(".", 1)
        edited = place_id[::-1] if place_id[::-1] != place_id else "Z" * 22
        set_place(context, cookie, f"{edited}.{ticket}")
        response = page.reload()
        assert response is not None and response.status == 503
        assert place(page) == 3  # behind the one who came second

        stale_id = "S" * 22
        issued = int(time.time() * 1000) - TICKET_MAX_AGE_MS - 60_000
        key = session_key(BROWSING, FILE, None, f"browser-place:{stale_id}")
        stale = TicketSigner([TICKET_KEY]).issue(key, issued - 1000, issued)
        set_place(context, cookie, f"{stale_id}.{stale}")
        response = page.reload()
        assert response is not None and response.status == 503
        assert place(page) == 4
        assert page.title() == f"Waiting: {FILE}"
    finally:
        context.close()
