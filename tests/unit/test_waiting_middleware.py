"""The waiting page through the middleware, in front of a real Starlette app (ADR 0035).

The in-memory scheduler on a :class:`FakeClock` behind :class:`DownloadSchedulerMiddleware`
and the artifact app of ``test_middleware.py``: one session slot, held by a protocol
client, so that every other download of the large object waits. The rules proven: a
tool's answer is the same bytes with the page as without it; a navigation gets the page
with a place cookie; the cookie keeps the place across a refresh, a new tab and a new
address, never moves a download earlier or onto another object, and a stale, foreign or
broken one only costs the place; the file, once served, ends the ticket but not the
place id; the page's own files are served below the middleware's path.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from arkvory_sched import InMemoryDownloadScheduler
from arkvory_sched.asgi._middleware import DownloadSchedulerMiddleware
from arkvory_sched.testing import FakeClock

from .test_middleware import (
    BIG,
    ObjectStore,
    finish_first,
    make_app,
    make_resolver,
    occupy_the_slot,
    problem,
    scheduler_settings,
)

KEY = b"waiting-page-test-key-0123456789"
NAVIGATION = {
    "sec-fetch-mode": "navigate",
    "sec-fetch-dest": "document",
    "sec-fetch-site": "none",
    "accept": "text/html,application/xhtml+xml,*/*;q=0.8",
}
COOKIE = re.compile(r"arkvory-place=([A-Za-z0-9_-]{22})(?:\.(\S+?))?; Path=/objects/(\w+);")
PLACE = re.compile(r'<span class="big" id="place">(\d+)</span>')
PERSON = "person-ann"
TOOL_HEADERS = {
    "curl": {"accept": "*/*", "user-agent": "curl/8.5.0"},
    "wget": {"accept": "*/*", "user-agent": "Wget/1.21.4", "accept-encoding": "identity"},
    "pip": {"accept": "*/*", "user-agent": "pip/24.0", "accept-encoding": "gzip, deflate"},
    "npm": {"accept": "application/octet-stream", "user-agent": "npm/10.5.0"},
    "bare": {},
    "page-fetch": {"sec-fetch-mode": "cors", "accept": "text/html"},
}


@dataclass
class Setup:
    clock: FakeClock
    scheduler: InMemoryDownloadScheduler
    middleware: DownloadSchedulerMiddleware

    @asynccontextmanager
    async def client(self, address: str = "192.0.2.10") -> AsyncIterator[httpx.AsyncClient]:
        transport = httpx.ASGITransport(app=self.middleware, client=(address, 40_000))
        async with httpx.AsyncClient(transport=transport, base_url="http://art.test") as client:
            yield client

    async def waiting(self) -> int:
        return (await self.scheduler.stats()).waiting


def setup(*, waiting_page: bool = True, **settings: Any) -> Setup:
    """One slot; a fixed ticket key and a fake clock, so two setups answer alike; a
    short hold (a request without an id is held that long before its answer)."""
    settings.setdefault("hold_seconds", 0.05)
    store = ObjectStore(objects={"big": BIG, "other": BIG[: 20 * 1024 * 1024]})
    clock = FakeClock()
    scheduler = InMemoryDownloadScheduler(
        scheduler_settings(**settings), clock=clock, ticket_keys=[KEY]
    )
    middleware = DownloadSchedulerMiddleware(
        make_app("starlette", store),
        scheduler=scheduler,
        resolver=make_resolver(store),
        run_ticks=False,
        waiting_page=waiting_page,
    )
    return Setup(clock, scheduler, middleware)


async def get(
    client: httpx.AsyncClient,
    name: str = "big",
    headers: dict[str, str] | None = None,
    *,
    user: str = PERSON,
    cookie: str | None = None,
    download_id: str | None = None,
) -> httpx.Response:
    sent = {"authorization": f"Bearer {user}", **(headers or {})}
    if cookie is not None:
        sent["cookie"] = cookie
    if download_id is not None:
        sent["arkvory-download-id"] = download_id
    client.cookies.clear()  # a test sends the cookie it means, never httpx's jar
    return await client.get(f"/objects/{name}", headers=sent)


def place_of(page: httpx.Response) -> int:
    assert page.status_code == 503, page.text
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    found = PLACE.search(page.text)
    assert found is not None, page.text
    assert page.headers["arkvory-queue-position"] == found.group(1)
    return int(found.group(1))


def cookie_of(page: httpx.Response) -> str:
    """The cookie as the browser sends it back."""
    found = COOKIE.match(page.headers["set-cookie"])
    assert found is not None, page.headers["set-cookie"]
    place_id, ticket, _ = found.groups()
    return f"arkvory-place={place_id}" + (f".{ticket}" if ticket else "")


async def first_in_line(client: httpx.AsyncClient) -> None:
    """A person's protocol client waits first, so a browser's place is 2."""
    response = await get(client, user="person-bob", download_id="w1", headers={})
    assert problem(response)["reason"] == "download_queued"


# ---------------------------------------------------------------- tools: the same bytes
@pytest.mark.anyio
@pytest.mark.parametrize("tool", sorted(TOOL_HEADERS))
async def test_a_tools_answer_is_the_same_bytes_with_the_page_as_without(tool: str) -> None:
    """Held, then the problem document: status, every header in order, every byte."""
    answers = []
    for waiting_page in (True, False):
        run = setup(waiting_page=waiting_page)
        async with run.client() as client:
            await occupy_the_slot(client)
            response = await get(client, headers=TOOL_HEADERS[tool], user="svc-tool")
        assert problem(response)["reason"] == "download_queued"
        answers.append((response.status_code, response.headers.raw, response.content))
    assert answers[0] == answers[1]
    assert not [name for name, _ in answers[0][1] if name.lower() == b"set-cookie"]


@pytest.mark.anyio
async def test_a_tools_served_file_gets_no_cookie() -> None:
    run = setup()
    async with run.client() as client:
        response = await get(client, headers=TOOL_HEADERS["curl"])
    assert response.status_code == 200
    assert response.content == BIG
    assert "set-cookie" not in response.headers


# ---------------------------------------------------------------- the page
@pytest.mark.anyio
async def test_a_navigation_that_must_wait_gets_the_page_after_the_hold() -> None:
    run = setup()
    async with run.client() as client:
        await occupy_the_slot(client)
        page = await get(client, headers=NAVIGATION)
    assert place_of(page) == 1
    assert page.headers["refresh"] == page.headers["retry-after"]
    assert "default-src 'none'" in page.headers["content-security-policy"]
    cookie = page.headers["set-cookie"]
    assert COOKIE.match(cookie)
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie
    assert await run.waiting() == 1


@pytest.mark.anyio
async def test_without_the_page_a_navigation_gets_the_problem_document() -> None:
    run = setup(waiting_page=False)
    async with run.client() as client:
        await occupy_the_slot(client)
        response = await get(client, headers=NAVIGATION)
    assert problem(response)["reason"] == "download_queued"
    assert "set-cookie" not in response.headers


@pytest.mark.anyio
async def test_a_navigation_with_a_range_is_a_download_manager_and_gets_the_document() -> None:
    run = setup()
    async with run.client() as client:
        await occupy_the_slot(client)
        response = await get(client, headers={**NAVIGATION, "range": "bytes=100-"})
    assert problem(response)["reason"] == "download_queued"


# ---------------------------------------------------------------- keeping the place
@pytest.mark.anyio
async def test_the_cookie_keeps_the_place_on_refresh_in_a_new_tab_and_from_a_new_address() -> None:
    run = setup(hold_seconds=0.0)
    async with run.client("192.0.2.10") as home, run.client("198.51.100.20") as train:
        await occupy_the_slot(home)
        await first_in_line(home)
        page = await get(home, headers=NAVIGATION)
        assert place_of(page) == 2
        cookie = cookie_of(page)
        refreshed = await get(home, headers=NAVIGATION, cookie=cookie)  # a refresh, a tab
        assert place_of(refreshed) == 2
        moved = await get(train, headers=NAVIGATION, cookie=cookie_of(refreshed))
        assert place_of(moved) == 2
        assert await run.waiting() == 2  # the same session all along
        stranger = await get(train, headers=NAVIGATION)  # no cookie: a place of its own
        assert place_of(stranger) == 3


@pytest.mark.anyio
async def test_a_cookie_cannot_move_a_download_earlier_or_onto_another_object() -> None:
    run = setup(hold_seconds=0.0)
    async with run.client() as client:
        await occupy_the_slot(client)
        await first_in_line(client)
        cookie = cookie_of(await get(client, headers=NAVIGATION))
        place_id, ticket = cookie.removeprefix("arkvory-place=").split(".", 1)
        version, _arrival, issued, signature = ticket.split(".")
        earlier = f"{version}.0.{issued}.{signature}"  # arrived at the epoch, it says
        # The same place id: its session, not an earlier place.
        same = await get(client, headers=NAVIGATION, cookie=f"arkvory-place={place_id}.{earlier}")
        assert place_of(same) == 2
        # Another place id with the edited ticket: a new place at the end.
        other_id = "Z" * 22
        forged = await get(client, headers=NAVIGATION, cookie=f"arkvory-place={other_id}.{earlier}")
        assert place_of(forged) == 3
        # The valid ticket of "big" brought to another object: its own end of the line.
        moved = await get(client, "other", headers=NAVIGATION, cookie=cookie)
        assert place_of(moved) == 4
        assert await run.waiting() == 4


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("away_minutes", "place"),
    [(14, 1), (16, 2)],
    ids=["back-within-the-keep-time", "back-after-it"],
)
async def test_a_closed_tab_keeps_its_place_for_the_keep_time_and_then_only_loses_it(
    away_minutes: int, place: int
) -> None:
    """The browser's session is dropped as a no-show while the tab is closed; its ticket
    brings the arrival back for 15 minutes, and after that it is a newcomer at the end,
    behind someone who came while it was away — with the page, never an error."""
    run = setup(hold_seconds=0.0, idle_seconds=3600.0)
    async with run.client() as client:
        await occupy_the_slot(client)
        cookie = cookie_of(await get(client, headers=NAVIGATION))
        run.clock.advance(away_minutes * 60)
        await run.scheduler.tick()
        assert await run.waiting() == 0, "the closed tab's session was dropped"
        await first_in_line(client)  # someone who came meanwhile
        back = await get(client, headers=NAVIGATION, cookie=cookie)
        assert place_of(back) == place


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("cookie", "place"),
    [
        # A place id that is not this browser's: a new place at the end of the line.
        ("arkvory-place=" + "Q" * 22 + ".2.abc.def.ghi", 3),
        ("arkvory-place=" + "Q" * 22, 3),
        # No place id at all: as without a cookie, the place of the browser's address.
        ("arkvory-place=%%%; x=1", 2),
        ("arkvory-place=" + "A" * 4000, 2),
        ('arkvory-place="unterminated', 2),
    ],
    ids=["foreign-forged", "foreign", "garbage", "huge", "quote"],
)
async def test_a_tampered_cookie_costs_the_place_never_an_error(cookie: str, place: int) -> None:
    run = setup(hold_seconds=0.0)
    async with run.client("192.0.2.10") as client, run.client("203.0.113.5") as other:
        await occupy_the_slot(client)
        await first_in_line(client)
        assert place_of(await get(other, headers=NAVIGATION)) == 2
        tampered = await get(other, headers=NAVIGATION, cookie=cookie)
    assert place_of(tampered) == place
    assert cookie_of(tampered)  # and a cookie that works from now on


# ---------------------------------------------------------------- the file arrives
@pytest.mark.anyio
async def test_the_refresh_that_finds_a_slot_gets_the_file_and_a_cookie_without_a_ticket() -> None:
    run = setup(hold_seconds=0.0)
    async with run.client() as client:
        await occupy_the_slot(client)
        cookie = cookie_of(await get(client, headers=NAVIGATION))
        await finish_first(client)
        await run.scheduler.tick()
        served = await get(client, headers=NAVIGATION, cookie=cookie)
    assert served.status_code == 200
    assert served.content == BIG
    assert served.headers["content-type"] == "application/octet-stream"
    place_id = cookie.removeprefix("arkvory-place=").split(".", 1)[0]
    assert served.headers["set-cookie"].startswith(f"arkvory-place={place_id}; Path=/objects/big;")
    stats = await run.scheduler.stats()
    assert (stats.active, stats.waiting, stats.completed_total) == (0, 0, 2)


# ---------------------------------------------------------------- the page's files
@pytest.mark.anyio
@pytest.mark.parametrize("name", ["waiting-page.css", "waiting-page.js"])
async def test_the_pages_files_are_served_by_the_middleware(name: str) -> None:
    run = setup()
    async with run.client() as client:
        response = await client.get(f"/.arkvory/{name}?v=1")
        missing = await client.get("/.arkvory/nothing.js")
    assert response.status_code == 200
    assert response.headers["x-content-type-options"] == "nosniff"
    assert missing.status_code == 404  # the application's own answer


@pytest.mark.anyio
async def test_without_the_page_its_files_are_the_applications_paths() -> None:
    run = setup(waiting_page=False)
    async with run.client() as client:
        response = await client.get("/.arkvory/waiting-page.css")
    assert response.status_code == 404
