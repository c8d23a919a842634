"""The operator page in a real browser, against a demo with downloads in its queue.

The page must show what the API says at the same moment, keep a viewer's controls off,
be usable with the keyboard alone with every control labelled, fit a desktop and a
phone without sideways scrolling, stop polling while its tab is hidden, and refuse
anyone the API refuses. One test also renders the screenshot the README shows.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, Route

from arkvory_sched.console import CONTENT_SECURITY_POLICY

from ._demo import OPERATOR_TOKEN, PAGE_PATH, VIEWER_TOKEN, PageDemo, log_in, wait_for
from ._stopped_clock import reads, settle, stop_the_clock, wait_for_reads
from .conftest import DESKTOP, PHONE

CLASSES = ("interactive", "release", "bulk", "background")
POLL_SECONDS = 3.0
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / "operator-page.png"
# The committed picture is rewritten only on request, so a test run leaves the tree clean.
UPDATE_SCREENSHOTS = os.environ.get("ARKVORY_UPDATE_SCREENSHOTS", "") == "1"


def wait_loaded(page: Page) -> None:
    """Until the page has rendered a state and a settings read."""
    wait_for(
        page,
        "document.body.dataset.stateAt && document.getElementById('settings-meta')"
        ".dataset.revision !== undefined",
    )


def shown_counts(page: Page) -> dict[str, tuple[int, int]]:
    counts: dict[str, tuple[int, int]] = page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('#classes tbody tr')].map(
            (row) => [row.dataset.class, [
                Number(row.querySelector('[data-col=waiting]').textContent),
                Number(row.querySelector('[data-col=active]').textContent)]]))"""
    )
    return {cls: (waiting, active) for cls, (waiting, active) in counts.items()}


def api_counts(state: dict[str, Any]) -> dict[str, tuple[int, int]]:
    return {
        cls: (state["classes"][cls]["waiting"], state["classes"][cls]["active"]) for cls in CLASSES
    }


def test_the_page_shows_the_queue_the_api_reports(page: Page, busy_demo: PageDemo) -> None:
    complaints: list[str] = []
    page.on("console", lambda message: complaints.append(message.text))
    page.on("pageerror", lambda error: complaints.append(str(error)))
    log_in(page, busy_demo)
    wait_loaded(page)
    # The queue moves only when a download finishes (none does during the tests), so a
    # page that renders the API's numbers agrees with a read made at the same moment.
    for _ in range(3):
        state = busy_demo.api("/state")
        shown = shown_counts(page)
        if shown == api_counts(state):
            break
        page.wait_for_timeout(POLL_SECONDS * 1000)
    assert shown == api_counts(state)
    assert state["waiting"] >= 3 and state["active"] == 2, "the queue must be busy to mean much"
    figures = page.locator("[data-figure=slots] .value").inner_text()
    assert figures == f"{state['active']} / {state['sessions']}"
    # Beside the slots, the slot time left free while someone waited (issue #28): with
    # every slot held since the queue filled, none is idle now.
    assert state["idleSlots"]["slots"] == 0
    assert page.locator("[data-figure=idle] .value").inner_text().endswith(" s")
    assert page.locator("[data-figure=idle] .detail").inner_text().startswith("none now · ")
    principals = page.locator("#sessions tbody td:first-child").all_inner_texts()
    assert sorted(principals) == sorted(s["principal"] for s in state["activeSessions"])
    # Every class with waiters says why it is not draining (all slots are held).
    for cls in CLASSES:
        if state["classes"][cls]["waiting"]:
            reason = page.locator(f"#classes tr[data-class={cls}] td.reason").inner_text()
            assert reason not in ("", "–", "draining"), (cls, reason)
    # The chart has a line for every class and the timeline a row for every class.
    wait_for(page, "document.querySelectorAll('#chart-length path[data-class]').length === 4")
    assert page.locator("#timeline rect[data-class]").count() >= 4
    assert page.locator("#timeline line.now").count() == 1
    # Nothing the page does needs an exception to its policy, and no script failed.
    refused = [text for text in complaints if "Content Security Policy" in text]
    assert refused == [] and not [text for text in complaints if "Error" in text], complaints


def test_the_page_shows_the_accuracy_of_each_kind_of_client(
    page: Page, busy_demo: PageDemo
) -> None:
    """Issue #28: the start estimates of protocol clients and of other tools apart. No
    start happens in the busy demo while the tests run (nothing finishes), so the scores
    are added to the API's real answer on its way to the page."""
    by_client = {
        "protocol": {
            "scored": 90,
            "relativeErrorP50": 0.06,
            "relativeErrorP95": 0.2,
            "shareInsideInterval": 0.97,
        },
        "third_party": {
            "scored": 30,
            "relativeErrorP50": 0.2,
            "relativeErrorP95": 0.9,
            "shareInsideInterval": 0.8,
        },
    }

    def with_scores(route: Route) -> None:
        response = route.fetch()
        state = response.json()
        state["estimateAccuracy"] = {
            "scored": 120,
            "relativeErrorP50": 0.08,
            "relativeErrorP95": 0.41,
            "shareInsideInterval": 0.925,
            "byClient": by_client,
        }
        route.fulfill(response=response, json=state)

    page.route("**/state", with_scores)
    log_in(page, busy_demo)
    wait_loaded(page)
    accuracy = page.locator("[data-figure=accuracy]")
    assert accuracy.locator(".value").inner_text() == "92.5 % inside"
    protocol = accuracy.locator("[data-client=protocol]").inner_text()
    third_party = accuracy.locator("[data-client=third_party]").inner_text()
    assert protocol == "protocol clients 97 % inside, p95 20 % (90)"
    assert third_party == "other tools 80 % inside, p95 90 % (30)"


def test_a_viewer_sees_everything_read_only_and_cannot_save(
    page: Page, busy_demo: PageDemo
) -> None:
    before = busy_demo.api("/settings")["revision"]
    log_in(page, busy_demo, VIEWER_TOKEN)
    wait_loaded(page)
    controls = page.locator("#settings-form :is(input, select, button, textarea)")
    assert controls.count() >= 16
    enabled = page.locator("#settings-form :is(input, select, button, textarea):enabled")
    assert enabled.count() == 0, enabled.evaluate_all("(els) => els.map((e) => e.id)")
    assert page.locator("#readonly-note").is_visible()
    assert "Only operators" in page.locator("#sessions-note").inner_text()
    # A forged write from the viewer's own page (its cookie, same origin) is refused.
    forged = page.evaluate(
        """async ([api, revision]) => {
            const r = await fetch(api + '/settings', {method: 'PUT',
                headers: {'content-type': 'application/json'},
                body: JSON.stringify({expectedRevision: revision, sessions: 1})});
            return [r.status, (await r.json()).reason];
        }""",
        ["/api/v1/system/downloads", before],
    )
    assert forged == [403, "forbidden"]
    answer = httpx.put(
        f"{busy_demo.api_url}/settings",
        json={"expectedRevision": before, "sessions": 1},
        headers={
            "authorization": f"Bearer {VIEWER_TOKEN}",
            "content-type": "application/json",
            "arkvory-request": "1",
        },
    )
    assert answer.status_code == 403
    assert busy_demo.api("/settings")["revision"] == before


def test_the_page_admits_whom_the_api_admits_with_a_strict_policy(busy_demo: PageDemo) -> None:
    anonymous = httpx.get(busy_demo.page_url)
    assert anonymous.status_code == 401
    assert anonymous.headers["content-type"] == "application/problem+json"
    assert anonymous.json()["reason"] == "unauthenticated"
    assert "www-authenticate" in anonymous.headers
    wrong = httpx.get(busy_demo.page_url, cookies={"arkvory_demo_token": "nope"})
    assert wrong.status_code == 401
    page = httpx.get(busy_demo.page_url, headers={"authorization": f"Bearer {OPERATOR_TOKEN}"})
    assert page.status_code == 200
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self';" in CONTENT_SECURITY_POLICY
    assert "unsafe" not in CONTENT_SECURITY_POLICY.split("script-src")[1].split(";")[0]
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["cache-control"] == "no-store"
    scripts = re.findall(r"<script\b[^>]*>", page.text)
    assert scripts and all("src=" in tag for tag in scripts), "no inline script"
    assert 'data-role="operator"' in page.text
    script = httpx.get(f"{busy_demo.base_url}{PAGE_PATH}static/main.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert script.headers["x-content-type-options"] == "nosniff"
    again = httpx.get(script.url, headers={"if-none-match": script.headers["etag"]})
    assert again.status_code == 304


def test_keyboard_alone_changes_a_field_and_saves_and_every_control_is_labelled(
    page: Page, busy_demo: PageDemo
) -> None:
    log_in(page, busy_demo)
    wait_loaded(page)
    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
            .filter((c) => !([...(c.labels || [])].some((l) => l.textContent.trim())
                             || c.getAttribute('aria-label')))
            .map((c) => c.id || c.outerHTML)"""
    )
    assert unlabelled == []
    assert page.locator("input, select").count() >= 13
    before = busy_demo.api("/settings")
    target = 5 if before["settings"]["rangesPerSession"] != 5 else 6

    def tab_to(element_id: str) -> None:
        for _ in range(120):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement && document.activeElement.id") == element_id:
                return
        raise AssertionError(f"Tab never reached #{element_id}")

    tab_to("s-rangesPerSession")
    page.keyboard.press("Control+A")
    page.keyboard.type(str(target))
    page.keyboard.press("Enter")  # submits the form
    page.locator("#save-message.ok").wait_for()
    after = busy_demo.api("/settings")
    assert after["revision"] == before["revision"] + 1
    assert after["settings"]["rangesPerSession"] == target
    # And with Space on the Save button.
    tab_to("s-preempt")
    page.keyboard.press("Space")
    tab_to("save")
    page.keyboard.press("Space")
    wait_for(
        page,
        f"document.getElementById('settings-meta').dataset.revision === '{after['revision'] + 1}'",
    )
    final = busy_demo.api("/settings")
    assert final["settings"]["preempt"] is not after["settings"]["preempt"]


def test_readable_at_desktop_and_phone_width(page: Page, busy_demo: PageDemo) -> None:
    log_in(page, busy_demo)
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        page.reload()
        wait_loaded(page)
        wait_for(page, "document.querySelector('#timeline svg') !== null")
        width, inner = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
        assert width <= inner, (viewport, width, inner)
        assert page.locator("#save").is_visible()
        box = page.locator("#s-sessions").bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= inner


def _history(highest: float, now: float) -> dict[str, Any]:
    """An hour of samples every 10 s in which the oldest wait of ``bulk`` climbs to
    ``highest`` seconds (the shape of ``GET /state/history``)."""
    at = [now - 3590 + 10 * i for i in range(360)]
    rising = [round(highest * (i + 1) / len(at), 1) for i in range(len(at))]
    flat = [0.0] * len(at)
    return {
        "recording": True,
        "intervalSeconds": 10.0,
        "capacity": 360,
        "at": at,
        "classes": {
            cls: {
                "waiting": [3] * len(at) if cls == "bulk" else [0] * len(at),
                "active": [0] * len(at),
                "oldestWaitSeconds": rising if cls == "bulk" else flat,
            }
            for cls in CLASSES
        },
    }


# Every text of both charts, with its box and the box of its chart, as drawn at 1280 px.
CHART_TEXTS = """() => [...document.querySelectorAll('#chart-length svg, #chart-wait svg')]
    .flatMap((chart) => {
        const frame = chart.getBoundingClientRect();
        return [...chart.querySelectorAll('text')].map((text) => {
            const box = text.getBoundingClientRect();
            return {chart: chart.parentElement.id, text: text.textContent,
                    axis: text.getAttribute('class'),
                    inside: box.left >= frame.left - 0.5 && box.right <= frame.right + 0.5
                            && box.top >= frame.top - 0.5 && box.bottom <= frame.bottom + 0.5};
        });
    })"""


def test_the_wait_axis_labels_are_whole_at_desktop_width(
    page: Page, busy_demo: PageDemo, tmp_path: Path
) -> None:
    """The oldest wait's y labels once read "nin 20 s" for "3 min 20 s" at 1280 px.
    Each label lies inside its chart, for short and long waits, and with a font wider
    than the page's own (the chart measures its labels once drawn)."""
    data: dict[str, Any] = {"history": _history(200.0, time.time())}

    def history(route: Route) -> None:
        route.fulfill(json=data["history"], headers={"cache-control": "no-store"})

    page.route("**/state/history", history)
    page.set_viewport_size(DESKTOP)
    log_in(page, busy_demo)
    expected = {
        200.0: ["0", "1 min", "2 min", "3 min", "4 min"],
        5400.0: ["0", "30 min", "1 h", "1 h 30 min", "2 h"],
        100_000.0: ["0", "12 h", "24 h", "36 h", "2 days"],
    }
    for highest, labels in expected.items():
        data["history"] = _history(highest, time.time())
        page.reload()
        wait_for(page, "document.querySelectorAll('#chart-wait path[data-class]').length === 4")
        texts = page.evaluate(CHART_TEXTS)
        wait_axis = [t["text"] for t in texts if t["chart"] == "chart-wait" and t["axis"]]
        assert wait_axis == labels
        assert [t for t in texts if not t["inside"]] == [], highest
    page.screenshot(path=str(tmp_path / "charts-1280.png"), full_page=True)

    # A font half as wide again as the page's: the chart widens its view to fit.
    def wider_font(route: Route) -> None:
        css = route.fetch().text() + "\n.chart text { font-size: 17px; }\n"
        route.fulfill(body=css, headers={"content-type": "text/css; charset=utf-8"})

    page.route("**/static/console.css", wider_font)
    data["history"] = _history(5400.0, time.time())
    page.reload()
    wait_for(page, "document.querySelectorAll('#chart-wait path[data-class]').length === 4")
    font = page.evaluate("getComputedStyle(document.querySelector('#chart-wait text')).fontSize")
    assert font == "17px"
    assert [t for t in page.evaluate(CHART_TEXTS) if not t["inside"]] == []


HIDE = """() => {
    Object.defineProperty(document, 'hidden', {configurable: true, get: () => true});
    Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => 'hidden'});
    document.dispatchEvent(new Event('visibilitychange'));
}"""
SHOW = """() => {
    Object.defineProperty(document, 'hidden', {configurable: true, get: () => false});
    Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => 'visible'});
    document.dispatchEvent(new Event('visibilitychange'));
}"""


def test_polling_pauses_while_the_tab_is_hidden(page: Page, busy_demo: PageDemo) -> None:
    # The page's clock moves only when the test moves it (see _stopped_clock.py).
    stop_the_clock(page)
    log_in(page, busy_demo)
    wait_loaded(page)
    poll_ms = int(POLL_SECONDS * 1000)

    # Visible: a read of /state every interval, not sooner.
    settle(page)  # a read was made; the next waits for the interval
    page.clock.run_for(poll_ms)
    wait_for_reads(page, "/state", 1)
    settle(page)  # the interval starts again from the end of that read
    seen = len(reads(page, "/state"))
    page.clock.run_for(poll_ms - 1)
    assert len(reads(page, "/state")) == seen, "read before the interval was over"
    page.clock.run_for(1)
    assert len(wait_for_reads(page, "/state", seen)) == seen + 1, "a visible page polls /state"

    # Hidden: however long, no read at all.
    settle(page)
    page.evaluate(HIDE)
    assert "Paused" in page.locator("#status").inner_text()
    page.clock.run_for(5 * poll_ms)
    settle(page)
    assert True not in reads(page, "/state"), "read while hidden"
    assert len(reads(page, "/state")) == seen + 1
    assert "Paused" in page.locator("#status").inner_text()

    # Visible again: it reads at once, before any time passes.
    page.evaluate(SHOW)
    assert len(wait_for_reads(page, "/state", seen + 1)) == seen + 2, "visible again: reads"
    assert True not in reads(page, "/state")


def test_screenshot_of_the_operator_page_with_a_busy_queue(
    page: Page, busy_demo: PageDemo, tmp_path: Path
) -> None:
    current = busy_demo.api("/settings")
    record = {
        **current["record"],
        "expectedRevision": current["revision"],
        "weights": [8, 6, 2, 1],
        "classWindows": {
            "bulk": {
                "windows": [
                    {
                        "weekdays": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"],
                        "start": "22:00",
                        "end": "06:00",
                        "zone": "Europe/Berlin",
                    }
                ],
                "outsideShare": 0.0,
            },
            "background": {
                "windows": [
                    {
                        "weekdays": ["sat", "sun"],
                        "start": "00:00",
                        "end": "23:59",
                        "zone": "Europe/Berlin",
                    },
                    {
                        "weekdays": ["mon", "tue", "wed", "thu", "fri"],
                        "start": "12:00",
                        "end": "14:00",
                        "zone": "Europe/Berlin",
                    },
                ],
                "outsideShare": 0.25,
            },
        },
        "serviceAccountClasses": {"nightly-mirror": "bulk", "backup-bot": "background"},
    }
    busy_demo.put_settings(record)
    page.set_viewport_size(DESKTOP)
    log_in(page, busy_demo)
    wait_loaded(page)
    wait_for(page, "document.querySelectorAll('#audit tbody tr[data-entry]').length > 0")
    wait_for(page, "document.querySelectorAll('#chart-length path[data-class]').length === 4")
    picture = SCREENSHOT if UPDATE_SCREENSHOTS else tmp_path / SCREENSHOT.name
    page.screenshot(path=str(picture), full_page=True)
    assert picture.stat().st_size > 50_000
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
