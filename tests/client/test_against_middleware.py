"""The SDK against the real server side, in process: ``DownloadSchedulerMiddleware`` and
``InMemoryDownloadScheduler`` in front of a small ranged file app, reached through
``httpx.ASGITransport``, client and scheduler sharing one fake clock.

This proves the wire contract from both ends (SPEC §16): the client reads the server's
``503 download_queued`` (place, ``Arkvory-Starts-At``, ticket) as a wait, not a failure,
returns its ticket and id, and downloads the object once the slot frees — in fake time,
with every sleep also ticking the scheduler.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx

from arkvory_client import AsyncClient, Event, Progress, Queued, Started
from arkvory_sched import (
    Admitted,
    ByteRange,
    Delivered,
    DownloadRequest,
    InMemoryDownloadScheduler,
    PrincipalKind,
    SchedulerSettings,
)
from arkvory_sched._target import DownloadTarget
from arkvory_sched.asgi._middleware import DownloadSchedulerMiddleware
from arkvory_sched.testing import FakeClock

from ._support import payload

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

DATA = payload(64 * 1024, seed=9)
ETAG = '"obj-v1"'
URL = "http://arkvory.test/files/object"
RELEASE_AFTER = 100.0  # seconds of fake time until the other download finishes


async def file_app(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
    """Serves ``DATA`` with a strong ETag, a single ``Range`` and ``If-Range``."""
    headers = {bytes(k).lower(): bytes(v).decode() for k, v in scope["headers"]}
    size = len(DATA)
    range_header = headers.get(b"range", "")
    if_range = headers.get(b"if-range")
    status, body = 200, DATA
    extra: list[tuple[bytes, bytes]] = []
    if range_header.startswith("bytes=") and (if_range is None or if_range == ETAG):
        first_text, _, last_text = range_header[6:].partition("-")
        first = int(first_text)
        last = min(int(last_text) if last_text else size - 1, size - 1)
        status, body = 206, DATA[first : last + 1]
        extra.append((b"content-range", f"bytes {first}-{last}/{size}".encode()))
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"etag", ETAG.encode()),
                (b"content-length", str(len(body)).encode()),
                *extra,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def resolver(scope: MutableMapping[str, Any]) -> DownloadTarget:
    return DownloadTarget(
        principal="ci",
        principal_kind=PrincipalKind.SERVICE,
        object_id="object",
        size=len(DATA),
        etag=ETAG,
    )


def test_a_queued_download_waits_its_turn_then_completes(tmp_path: Path) -> None:
    clock = FakeClock()
    # Time moves only with the client's (fake) sleeps: a request held in real time would
    # never see the slot free, so nothing is held here (R-HOLD-2 has its own tests).
    settings = SchedulerSettings(
        sessions=1, reserve=0, per_principal=1, session_min_bytes=1024, hold_seconds=0
    )
    scheduler = InMemoryDownloadScheduler(
        settings, clock=clock, ticket_keys=[b"client-test-ticket-key-000000001"]
    )
    app = DownloadSchedulerMiddleware(
        file_app, scheduler=scheduler, resolver=resolver, run_ticks=False
    )
    events: list[Event] = []
    seen_requests: list[httpx.Request] = []
    release_at = clock.wall() + RELEASE_AFTER

    async def main() -> None:
        other = await scheduler.admit(
            DownloadRequest(
                principal="people",
                principal_kind=PrincipalKind.PERSON,
                object_id="other",
                object_size=len(DATA),
                byte_range=ByteRange.whole(len(DATA)),
                download_id="someone-else",
            )
        )
        assert isinstance(other, Admitted)
        released = False

        async def sleep(seconds: float) -> None:
            nonlocal released
            clock.advance(seconds)
            if not released and clock.wall() >= release_at:
                released = True
                await scheduler.report(other.grant, Delivered(ByteRange.whole(len(DATA))))
            await scheduler.tick()
            await anyio.lowlevel.checkpoint()

        async def record(request: httpx.Request) -> None:
            seen_requests.append(request)

        http = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), event_hooks={"request": [record]}
        )
        async with (
            http,
            AsyncClient(
                http=http, clock=clock, sleep=sleep, rng=random.Random(5), chunk_size=16 * 1024
            ) as client,
        ):
            result = await client.download(
                URL, tmp_path / "object", download_class="bulk", on_event=events.append
            )
        assert result.size == len(DATA) and result.failures == 0
        assert result.waited >= RELEASE_AFTER
        await scheduler.close()

    anyio.run(main)
    assert (tmp_path / "object").read_bytes() == DATA

    queued = [event for event in events if isinstance(event, Queued)]
    assert queued, "the slot was taken: the client must have been queued"
    assert all(event.reason == "download_queued" for event in queued)
    assert all(event.download_class == "bulk" for event in queued)
    assert all(event.starts_at is not None for event in queued)
    assert any(event.position == 1 for event in queued)
    names = [type(event).__name__ for event in events]
    assert names.index("Started") > max(i for i, n in enumerate(names) if n == "Queued")
    assert [e for e in events if isinstance(e, Started)] == [Started(0, len(DATA))]
    assert [e.done for e in events if isinstance(e, Progress)][-1] == len(DATA)

    ids = {request.headers["arkvory-download-id"] for request in seen_requests}
    assert len(ids) == 1
    tickets = [request.headers.get("arkvory-queue-ticket") for request in seen_requests]
    assert tickets[0] is None and all(tickets[1:]), "every later request returns a ticket"
