"""The readiness endpoint: aggregates only, never an id (R-VIS-4).

A real in-memory scheduler (with tickets, so there are signed strings to leak) is driven
into a known state and asked through the ASGI app; the answer is compared in full and
searched for every identifier the test used.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp

from arkvory_sched import (
    Admitted,
    Delivered,
    DownloadRequest,
    InMemoryDownloadScheduler,
    PrincipalKind,
    Queued,
    SchedulerSettings,
)
from arkvory_sched._session_keys import session_key
from arkvory_sched.observability._readiness import readiness_app, readiness_document
from arkvory_sched.testing import FakeClock

MIB = 1024 * 1024
BIG = 64 * MIB  # above the 16 MiB session threshold: admitted per session
SMALL = 1 * MIB  # below it: admitted per request
TICKET_KEY = b"readiness-test-ticket-key-0123456"
ADDRESS = "198.51.100.23"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def request(
    principal: str,
    object_id: str,
    *,
    size: int = BIG,
    kind: PrincipalKind = PrincipalKind.SERVICE,
    requested_class: str | None = None,
) -> DownloadRequest:
    return DownloadRequest(
        principal=principal,
        principal_kind=kind,
        object_id=object_id,
        object_size=size,
        download_id=f"dl-{principal}-{object_id}",
        client_address=ADDRESS,
        requested_class=requested_class,
    )


@dataclass
class Busy:
    scheduler: InMemoryDownloadScheduler
    clock: FakeClock
    requests: list[DownloadRequest]
    tickets: list[str]


async def busy_scheduler() -> Busy:
    """t=0: alice (release) and bob (interactive) hold both slots, carol (release) and
    dave (bulk) queue, frank reads a small file per request. t=1: all poll once. t=30:
    alice finishes and a tick runs; carol and dave have waited 30 s (within the no-show
    margin, so both still wait)."""
    clock = FakeClock()
    settings = SchedulerSettings(
        sessions=2, reserve=0, per_principal=2, preempt=False, aging_minutes=0.0
    )
    scheduler = InMemoryDownloadScheduler(settings, clock=clock, ticket_keys=[TICKET_KEY])
    alice = request("alice-7f3a", "releases/app-2.4.iso")
    bob = request("bob-91c2", "datasets/train.tar", kind=PrincipalKind.PERSON)
    carol = request("carol-55e0", "releases/app-2.4.iso")
    dave = request("dave-0b1d", "backups/db.img", requested_class="bulk")
    frank = request("frank-c3a9", "notes/readme.txt", size=SMALL)
    tickets: list[str] = []

    async def ask(req: DownloadRequest) -> Admitted | Queued:
        decision = await scheduler.admit(req)
        assert isinstance(decision, Admitted | Queued), decision
        if decision.ticket is not None:
            tickets.append(decision.ticket)
        return decision

    first = await ask(alice)
    assert isinstance(first, Admitted)
    assert isinstance(await ask(bob), Admitted)
    assert isinstance(await ask(carol), Queued)
    assert isinstance(await ask(dave), Queued)
    assert isinstance(await ask(frank), Admitted)
    await scheduler.tick()
    clock.advance(1)
    for waiter in (carol, dave):
        assert isinstance(await ask(waiter), Queued)
    clock.advance(29)
    await scheduler.report(first.grant, Delivered(first.grant.byte_range))
    await scheduler.tick()
    assert tickets, "the scheduler signs tickets: the test must look for them"
    return Busy(scheduler, clock, [alice, bob, carol, dave, frank], tickets)


async def probe(app: ASGIApp, method: str = "GET") -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://arkvory.test") as client:
        return await client.request(method, "/ready")


def forbidden_strings(busy: Busy) -> set[str]:
    """Every identifier the scheduler was given or handed out, in the forms it might
    take in JSON."""
    found: set[str] = set(busy.tickets)
    for req in busy.requests:
        found |= {req.principal, req.object_id, req.client_address}
        assert req.download_id is not None
        found.add(req.download_id)
        key = session_key(req.principal, req.object_id, req.download_id, req.client_address)
        found |= {
            key.hex(),
            base64.b64encode(key).decode(),
            base64.urlsafe_b64encode(key).decode().rstrip("="),
        }
    return found


# --- the document --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_readiness_reports_aggregates() -> None:
    busy = await busy_scheduler()
    response = await probe(readiness_app(busy.scheduler, held=lambda: 2))
    stats = await busy.scheduler.stats()
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert stats.queue_empty_in_seconds is not None
    assert response.json() == {
        "status": "ok",
        "strategy": "ordered",
        "admission": "session",
        "sessions": 2,
        "classes": {
            # A class nobody waits in has no oldest waiter: null, not a wait of 0 s.
            "interactive": {"waiting": 0, "active": 1, "paused": 0, "oldestWaitSeconds": None},
            "release": {"waiting": 1, "active": 0, "paused": 0, "oldestWaitSeconds": 30.0},
            "bulk": {"waiting": 1, "active": 0, "paused": 0, "oldestWaitSeconds": 30.0},
            "background": {"waiting": 0, "active": 0, "paused": 0, "oldestWaitSeconds": None},
        },
        "waiting": 2,
        "active": 1,
        "requests": {"active": 1, "waiting": 0},
        "held": 2,
        "lastTickSeconds": stats.last_tick_seconds,
        "deliveryRateBytesPerSecond": stats.delivery_rate,
        "queueEmptyInSeconds": stats.queue_empty_in_seconds,
    }


@pytest.mark.anyio
async def test_readiness_contains_no_ids() -> None:
    busy = await busy_scheduler()
    text = (await probe(readiness_app(busy.scheduler))).text
    leaked = sorted(s for s in forbidden_strings(busy) if s in text)
    assert leaked == []
    # Nothing id-like hides in the keys either: every key is one of the documented ones.
    document = json.loads(text)
    assert set(document) == {
        "status",
        "strategy",
        "admission",
        "sessions",
        "classes",
        "waiting",
        "active",
        "requests",
        "held",
        "lastTickSeconds",
        "deliveryRateBytesPerSecond",
        "queueEmptyInSeconds",
    }
    assert set(document["classes"]) == {"interactive", "release", "bulk", "background"}


@pytest.mark.anyio
async def test_readiness_is_read_on_every_probe() -> None:
    busy = await busy_scheduler()
    app = readiness_app(busy.scheduler)
    before = (await probe(app)).json()
    busy.clock.advance(1.5)
    after = (await probe(app)).json()
    assert before["classes"]["release"]["oldestWaitSeconds"] == 30.0
    assert after["classes"]["release"]["oldestWaitSeconds"] == 31.5


@pytest.mark.anyio
async def test_an_idle_scheduler_is_empty_now_and_has_no_oldest_waiter() -> None:
    """What README and docs/api.md show for a fresh server: an empty queue is empty in
    0 s (not an unknown forecast), and no class has an oldest waiter."""
    scheduler = InMemoryDownloadScheduler(SchedulerSettings(), clock=FakeClock())
    document = (await probe(readiness_app(scheduler))).json()
    assert document["status"] == "ok"
    assert document["queueEmptyInSeconds"] == 0.0
    assert {cls["oldestWaitSeconds"] for cls in document["classes"].values()} == {None}
    assert document["held"] == 0
    assert (document["waiting"], document["active"]) == (0, 0)


@pytest.mark.anyio
async def test_the_last_waiter_leaving_empties_the_queue_and_its_oldest_wait() -> None:
    busy = await busy_scheduler()
    waiting = await busy.scheduler.stats()
    assert _release(readiness_document(waiting, held=0))["oldestWaitSeconds"] == 30.0
    emptied = dataclasses.replace(
        waiting,
        per_class={
            cls: dataclasses.replace(counts, waiting=0) for cls, counts in waiting.per_class.items()
        },
        queue_empty_in_seconds=None,
    )
    document = readiness_document(emptied, held=0)
    assert _release(document)["oldestWaitSeconds"] is None
    assert document["queueEmptyInSeconds"] == 0.0


def _release(document: dict[str, Any]) -> dict[str, Any]:
    """The ``release`` class of a readiness document (JSON values, read back as such)."""
    found: dict[str, Any] = json.loads(json.dumps(document))["classes"]["release"]
    return found


@pytest.mark.anyio
async def test_a_forecast_the_store_cannot_make_while_some_wait_is_null() -> None:
    busy = await busy_scheduler()
    stats = dataclasses.replace(await busy.scheduler.stats(), queue_empty_in_seconds=None)
    assert stats.waiting > 0
    assert readiness_document(stats, held=0)["queueEmptyInSeconds"] is None


@pytest.mark.anyio
async def test_closing_scheduler_answers_503() -> None:
    busy = await busy_scheduler()
    app = readiness_app(busy.scheduler)
    await busy.scheduler.close()
    response = await probe(app)
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/json"
    document = response.json()
    assert document["status"] == "closing"
    assert document["active"] == 1  # active downloads drain; they are still counted


# --- HTTP ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_head_answers_headers_only() -> None:
    busy = await busy_scheduler()
    app = readiness_app(busy.scheduler)
    response = await probe(app, "HEAD")
    assert response.status_code == 200
    assert response.content == b""
    assert int(response.headers["content-length"]) == len((await probe(app)).content)


@pytest.mark.anyio
@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
async def test_other_methods_are_not_allowed(method: str) -> None:
    scheduler = InMemoryDownloadScheduler(SchedulerSettings(), clock=FakeClock())
    response = await probe(readiness_app(scheduler), method)
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD"


# --- the pure function -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_document_never_holds_a_value_json_cannot_carry() -> None:
    busy = await busy_scheduler()
    stats = dataclasses.replace(
        await busy.scheduler.stats(), delivery_rate=math.nan, queue_empty_in_seconds=math.inf
    )
    document = readiness_document(stats, held=0)
    assert document["deliveryRateBytesPerSecond"] is None
    assert document["queueEmptyInSeconds"] is None
    json.dumps(document, allow_nan=False)
