"""A person's place in the queue, read from their page while the queue drains.

A demo server with two slots on a 6 MiB/s link and six people's downloads (real SDK
clients) ahead of alice's: within seconds the queue moves, and the page shows her place
falling, never rising, and nothing of anybody else's downloads.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from playwright.sync_api import Browser

from ._busy_demo import MIB, BusyDemo
from .conftest import DESKTOP
from .test_own_downloads_page import (
    MINE,
    OTHERS,
    api_document,
    as_person,
    assert_nothing_of_others,
    waiting_place,
)


def test_a_persons_place_falls_as_the_queue_moves(browser: Browser, tmp_path: Path) -> None:
    """Two slots on a 6 MiB/s link, six people's downloads ahead of alice's: read from
    the page while the queue drains, her place only ever falls, down to a slot."""
    sizes = (3, 4, 5, 3, 4, 5)
    files = {
        f"{name}/patch-{index}.bin": size * MIB
        for index, (name, size) in enumerate(zip(OTHERS, sizes, strict=True))
    }
    files["alice/report.pdf"] = 3 * MIB
    demo = BusyDemo(
        tmp_path / "files", tmp_path / "server.log", sessions=2, bandwidth=6 * MIB, files=files
    )
    demo.start()
    context = as_person(browser, "alice", viewport=DESKTOP)
    try:
        for index, name in enumerate(OTHERS):
            demo.download(name, f"{name}/patch-{index}.bin", download_id=f"{name}-dl-{index:04x}")
        demo.download("alice", "alice/report.pdf", download_id="alice-dl-0001")
        page = context.new_page()
        page.goto(demo.base_url + MINE)
        page.wait_for_selector("li.download")
        places: list[int] = []
        texts: list[str] = []
        deadline = time.monotonic() + 40.0
        while time.monotonic() < deadline:
            state = page.locator('li.download[data-object="alice/report.pdf"]').get_attribute(
                "data-state"
            )
            if state == "active" or state is None:
                break
            place = waiting_place(page, "alice/report.pdf")
            if place is not None and (not places or place != places[-1]):
                places.append(place)
            texts.append(page.content())
            page.click("#refresh")
            page.wait_for_timeout(400)
        assert places, "alice's download was never shown waiting"
        assert len(places) >= 2, places
        assert places == sorted(places, reverse=True), places  # never rises
        assert places[0] >= 3  # at least two waiters ahead when the page first showed it
        for text in texts:
            assert_nothing_of_others(text, demo)
        assert_nothing_of_others(json.dumps(api_document(page)), demo)
        assert demo.errors() == []
    finally:
        context.close()
        demo.stop()
