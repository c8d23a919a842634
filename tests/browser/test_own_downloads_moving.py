"""A person's place in the queue, read from their page while the queue drains.

A demo server with two slots on a 6 MiB/s link and six people's downloads (real SDK
clients) ahead of alice's: the page shows her place falling, never rising, down to a
slot, and nothing of anybody else's downloads. The others stop after their first bytes
(holding their slots) until the test lets them go on, one at a time and only once the
page has shown alice's place: so the queue moves one place per step, and the page shows
every place, however fast or slow the machine.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from playwright.sync_api import Browser

from ._busy_demo import MIB, BusyDemo
from ._stopped_clock import SETTLE_SECONDS
from .conftest import DESKTOP
from .test_own_downloads_page import (
    MINE,
    OTHERS,
    api_document,
    as_person,
    assert_nothing_of_others,
    shown,
)


def test_a_persons_place_falls_as_the_queue_moves(browser: Browser, tmp_path: Path) -> None:
    """Two slots, six people's downloads ahead of alice's: read from the page while the
    queue drains, her place only ever falls, down to a slot."""
    sizes = (3, 4, 5, 3, 4, 5)
    files = {
        f"{name}/patch-{index}.bin": size * MIB
        for index, (name, size) in enumerate(zip(OTHERS, sizes, strict=True))
    }
    files["alice/report.pdf"] = 3 * MIB
    demo = BusyDemo(
        tmp_path / "files",
        tmp_path / "server.log",
        sessions=2,
        bandwidth=6 * MIB,
        files=files,
        range_size=MIB,  # smaller than every file: a stopped download keeps its slot …
        env={"ARKVORY_DOWNLOAD_IDLE_SECONDS": "3600"},  # … however long it is stopped
    )
    demo.start()
    context = as_person(browser, "alice", viewport=DESKTOP)
    try:
        others = [
            demo.download(
                name, f"{name}/patch-{index}.bin", download_id=f"{name}-dl-{index:04x}", gated=True
            )
            for index, name in enumerate(OTHERS)
        ]
        keeper = others[1]  # holds the second slot until the end: one slot moves
        # Alice's too, so that the page shows her download active when it is.
        demo.download("alice", "alice/report.pdf", download_id="alice-dl-0001", gated=True)
        page = context.new_page()
        page.goto(demo.base_url + MINE)
        page.wait_for_selector("li.download")
        places: list[int] = []
        texts: list[str] = []
        displayed = False  # whether the page has shown alice's current place
        deadline = time.monotonic() + SETTLE_SECONDS
        while True:
            state, place = shown(page, "alice/report.pdf")
            if state == "active" or state is None:
                break
            if place is not None and (not places or place != places[-1]):
                places.append(place)
                displayed = True
                deadline = time.monotonic() + SETTLE_SECONDS
            texts.append(page.content())
            # The page has shown where alice stands: let the download on the moving slot
            # go on, so that the queue moves one place.
            moving = [download for download in others if download.held and download is not keeper]
            if displayed and moving:
                (download,) = moving
                download.release()
                displayed = False
            assert time.monotonic() < deadline, f"the queue stopped moving at {places}"
            page.click("#refresh")
            page.wait_for_timeout(400)
        assert places, "alice's download was never shown waiting"
        assert len(places) >= 2, places
        assert places == sorted(places, reverse=True), places  # never rises
        assert places[0] >= 3  # at least two waiters ahead when the page first showed it
        assert state == "active", state  # down to a slot
        for text in texts:
            assert_nothing_of_others(text, demo)
        assert_nothing_of_others(json.dumps(api_document(page)), demo)
        assert demo.errors() == []
    finally:
        context.close()
        demo.stop()
