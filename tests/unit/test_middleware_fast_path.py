"""The middleware's fast paths on the in-memory scheduler (the port's ``FastPath``).

For a small object, while a per-request place is free, the middleware takes the place
synchronously (``admit_now``) and gives it back with a byte count
(``release_per_request``); for a further range of a download session that holds its
slot, it takes the range synchronously (``admit_now`` again) and reports its outcome
synchronously (``report_range``) — in both cases instead of building the port's request
and grant values. These tests prove that this changes nothing a client or an operator can see:
every scenario runs twice, once on the fast path and once through the port (a subclass
that overrides ``report``, which turns the fast path off), and the responses and the
scheduler's counters must agree. They also prove R-RES-3 on the fast path — every
place taken is given back exactly once, on completion, disconnect, application error
and cancellation — and that a waiter is woken by a place the fast path frees.
"""

from __future__ import annotations

import math
import random
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from starlette.requests import ClientDisconnect

from arkvory_sched import (
    Admitted,
    ByteRange,
    Delivered,
    DeliveryOutcome,
    DownloadClass,
    DownloadRequest,
    Failed,
    FastPath,
    Grant,
    InMemoryDownloadScheduler,
    Interrupted,
    InvalidRequestError,
    PrincipalKind,
    SchedulerSettings,
    generate_key,
)
from arkvory_sched._classes import default_class
from arkvory_sched._grant_state import GrantState
from arkvory_sched._rate import PeakRateMeter
from arkvory_sched._session_keys import KEY_CACHE_ENTRIES, session_key
from arkvory_sched.asgi._middleware import DownloadSchedulerMiddleware
from arkvory_sched.memory import Session
from arkvory_sched.memory._core import SchedulerCore
from arkvory_sched.testing import FakeClock
from tests.unit.test_middleware import (
    BIG,
    CHUNK,
    MIB,
    SMALL,
    ObjectStore,
    RawClient,
    eventually,
    make_app,
    make_resolver,
    scheduler_settings,
)

from ._helpers import SteppingClock

MEDIUM = random.Random(11).randbytes(6 * MIB)  # below the session threshold
CLASS_HEADER = "arkvory-download-class"
TICKET_KEY = generate_key()  # both sides sign alike: a ticket of one is good on the other


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


class PortOnly(InMemoryDownloadScheduler):
    """The in-memory scheduler seen only through the port: overriding ``report`` (even
    just to record the outcomes) turns the middleware's fast path off."""

    def __init__(self, settings: SchedulerSettings) -> None:
        super().__init__(settings, clock=FakeClock(), ticket_keys=[TICKET_KEY])

    async def report(self, grant: Grant, outcome: DeliveryOutcome) -> None:
        await super().report(grant, outcome)


class CountingFast(InMemoryDownloadScheduler):
    """The in-memory scheduler, counting the fast path's calls (which keeps it on)."""

    def __init__(self, settings: SchedulerSettings) -> None:
        super().__init__(settings, clock=FakeClock(), ticket_keys=[TICKET_KEY])
        self.taken = 0
        self.released = 0
        self.ranges = 0
        self.range_reports = 0
        self.progressed = 0

    def admit_now(self, *args: Any) -> GrantState[Session] | None:
        state = super().admit_now(*args)
        if state is not None:
            self.taken += state.per_request
            self.ranges += not state.per_request
        return state

    def release_per_request(self, place: GrantState[Session], sent: int) -> None:
        self.released += 1
        super().release_per_request(place, sent)

    def report_range(self, state: GrantState[Session], outcome: DeliveryOutcome) -> None:
        self.range_reports += 1
        super().report_range(state, outcome)

    def progress_now(self, state: GrantState[Session], nbytes: int) -> None:
        self.progressed += 1
        super().progress_now(state, nbytes)


@dataclass
class Side:
    scheduler: CountingFast | PortOnly
    store: ObjectStore
    middleware: DownloadSchedulerMiddleware
    session_outcomes: list[DeliveryOutcome] = field(default_factory=list)

    def __post_init__(self) -> None:
        """Record every session outcome the core gets, through the port or not."""
        delivery = self.scheduler.core.delivery
        report_state = delivery.report_state

        def recording(state: GrantState[Session], outcome: DeliveryOutcome) -> list[int]:
            if state.session is not None:
                self.session_outcomes.append(outcome)
            return report_state(state, outcome)

        setattr(delivery, "report_state", recording)  # noqa: B010  (an instance attribute)

    @property
    def core(self) -> SchedulerCore:
        return self.scheduler.core

    def client(self) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.middleware, client=("192.0.2.10", 40_000))
        return httpx.AsyncClient(transport=transport, base_url="http://artifacts.test")

    def counters(self) -> tuple[Any, ...]:
        """Everything the scheduler exposes about per-request admissions."""
        stats = self.core.stats()
        return (
            stats.admitted_total,
            stats.request_active,
            stats.request_waiting,
            stats.active,
            stats.waiting,
            self.core.session_count,
            self.core.grants_in_flight(),
            dict(stats.rejections_total),
            {cls: s.bytes_delivered for cls, s in stats.per_class.items()},
            stats.delivery_rate,
            stats.completed_total,
            self.session_outcomes,
        )


def side(fast: bool, **settings: Any) -> Side:
    store = ObjectStore(objects={"big": BIG, "small": SMALL, "medium": MEDIUM})
    values = scheduler_settings(**settings)
    scheduler: CountingFast | PortOnly = CountingFast(values) if fast else PortOnly(values)
    middleware = DownloadSchedulerMiddleware(
        make_app("starlette", store),
        scheduler=scheduler,
        resolver=make_resolver(store),
        run_ticks=False,
    )
    return Side(scheduler, store, middleware)


Scenario = Callable[[Side], Awaitable[list[Any]]]


async def both(scenario: Scenario, **settings: Any) -> tuple[Side, list[Any]]:
    """Run ``scenario`` on the fast path and through the port; they must agree."""
    fast, port = side(True, **settings), side(False, **settings)
    assert fast.middleware._fast is fast.scheduler
    assert port.middleware._fast is None
    seen_fast = [*await scenario(fast), fast.counters()]
    seen_port = [*await scenario(port), port.counters()]
    assert seen_fast == seen_port
    return fast, seen_fast


def answer(response: httpx.Response) -> tuple[int, bytes, str | None, bool]:
    return (
        response.status_code,
        response.content,
        response.headers.get(CLASS_HEADER),
        "arkvory-queue-ticket" in response.headers,
    )


async def get(side: Side, name: str, **headers: str) -> httpx.Response:
    async with side.client() as client:
        sent = {"authorization": "Bearer svc-ci", **headers}
        return await client.get(f"/objects/{name}", headers=sent)


# ====================================================================== which path
def test_the_plain_in_memory_scheduler_offers_the_fast_path() -> None:
    scheduler = InMemoryDownloadScheduler(scheduler_settings())
    assert scheduler.fast_path() is scheduler
    assert isinstance(scheduler.fast_path(), FastPath)


@pytest.mark.parametrize("method", ["admit", "report", "progress"])
def test_a_subclass_that_observes_the_port_turns_the_fast_path_off(method: str) -> None:
    async def passthrough(self: InMemoryDownloadScheduler, *args: Any) -> Any:
        return await getattr(InMemoryDownloadScheduler, method)(self, *args)

    observing = type("Observing", (InMemoryDownloadScheduler,), {method: passthrough})
    scheduler = observing(scheduler_settings())
    assert scheduler.fast_path() is None
    middleware = DownloadSchedulerMiddleware(
        make_app("starlette", ObjectStore()),
        scheduler=scheduler,
        resolver=make_resolver(ObjectStore()),
    )
    assert middleware._fast is None


def test_replacing_the_scheduler_rechecks_the_fast_path() -> None:
    store = ObjectStore()
    middleware = DownloadSchedulerMiddleware(
        make_app("starlette", store),
        scheduler=PortOnly(scheduler_settings()),
        resolver=make_resolver(store),
    )
    assert middleware._fast is None
    plain = InMemoryDownloadScheduler(scheduler_settings())
    middleware.scheduler = plain
    assert middleware.scheduler is plain
    assert middleware._fast is plain


# ====================================================================== same answers
@pytest.mark.anyio
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"range": "bytes=100-4195"},
        {"range": "bytes=-10"},
        {"arkvory-download-class": "bulk"},
        {"arkvory-download-class": " Background "},
        {"arkvory-download-class": "interactive"},  # may not raise its class: stays release
        {"arkvory-download-id": "dl-7"},
        {"arkvory-download-id": "dl-7", "arkvory-queue-ticket": "not-a-ticket"},
        {"arkvory-queue-ticket": "x" * 600},  # too long: ignored
        {"arkvory-download-id": "bad id"},  # 400
        {"arkvory-download-id": "x" * 600},  # 400
        {"arkvory-download-class": "turbo"},  # 400
        {"if-none-match": '"small-v1"'},  # 304: no place
        {"range": "bytes=9999999-"},  # 416: no place
    ],
)
async def test_small_object_answers_and_counts_alike(headers: dict[str, str]) -> None:
    async def scenario(side: Side) -> list[Any]:
        response = await get(side, "small", **headers)
        return [answer(response)]

    fast, (status, *_) = await both(scenario)
    assert fast.core.grants_in_flight() == 0
    assert fast.core.stats().request_active == 0
    if status in (200, 206):
        assert isinstance(fast.scheduler, CountingFast)
        assert (fast.scheduler.taken, fast.scheduler.released) == (1, 1)


@pytest.mark.anyio
async def test_progress_on_the_fast_path_counts_each_byte_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``big`` (40 MiB) goes per request under a raised threshold: streamed at a MiB per
    half second, its whole body reports progress 19 times (once a second from the third
    MiB on) and its outcome the rest; a 20 MiB range 9 times."""
    monkeypatch.setattr("arkvory_sched.asgi._observer.monotonic", SteppingClock(0.5))

    async def scenario(side: Side) -> list[Any]:
        whole = await get(side, "big")
        ranged = await get(side, "big", range=f"bytes=1000-{20 * MIB + 999}")
        return [answer(whole)[:3], answer(ranged)[:3]]

    fast, _ = await both(scenario, session_min_bytes=2 * len(BIG))
    assert isinstance(fast.scheduler, CountingFast)
    assert (fast.scheduler.taken, fast.scheduler.progressed) == (2, 28)
    delivered = fast.core.stats().per_class[DownloadClass.RELEASE].bytes_delivered
    assert delivered == len(BIG) + 20 * MIB


@pytest.mark.anyio
async def test_small_object_of_a_principal_with_an_active_session_stays_on_the_fast_path() -> None:
    """Its key is hashed to make sure it is not a range of the active session."""

    async def scenario(side: Side) -> list[Any]:
        first = await get(side, "big", range=f"bytes=0-{MIB - 1}", **{"arkvory-download-id": "a"})
        small = await get(side, "small", **{"arkvory-download-id": "a"})
        return [answer(first)[:3], answer(small)]

    fast, _ = await both(scenario)
    assert isinstance(fast.scheduler, CountingFast)
    assert fast.scheduler.taken == 1
    assert fast.core.active_count == 1


@pytest.mark.anyio
async def test_a_range_of_an_active_session_below_a_raised_threshold_goes_through_admit() -> None:
    """R-STRAT-4: after the threshold rises, an active session keeps its slot, so its next
    range is the session's, not a per-request place (the port side shows the same)."""

    async def scenario(side: Side) -> list[Any]:
        headers = {"range": f"bytes=0-{MIB - 1}", "arkvory-download-id": "a"}
        first = await get(side, "big", **headers)
        raised = replace(side.scheduler.settings, session_min_bytes=2 * len(BIG))
        await side.scheduler.configure(raised)
        second = await get(side, "big", **{**headers, "range": f"bytes={MIB}-{2 * MIB - 1}"})
        return [answer(first)[:3], answer(second)[:3]]

    fast, seen = await both(scenario)
    assert seen[1][0] == 206
    assert isinstance(fast.scheduler, CountingFast)
    assert fast.scheduler.taken == 0


@pytest.mark.anyio
async def test_small_object_of_another_principal_beside_an_active_session() -> None:
    async def scenario(side: Side) -> list[Any]:
        async with side.client() as client:
            first = await client.get(
                "/objects/big",
                headers={
                    "authorization": "Bearer svc-first",
                    "range": f"bytes=0-{MIB - 1}",
                    "arkvory-download-id": "a",
                },
            )
        small = await get(side, "small")
        return [answer(first)[:3], answer(small)]

    fast, _ = await both(scenario)
    assert isinstance(fast.scheduler, CountingFast)
    assert fast.scheduler.taken == 1


# ====================================================================== ranges of a session
def span(start: int, end: int) -> str:
    return f"bytes={start}-{end - 1}"


@pytest.mark.anyio
@pytest.mark.parametrize("with_ticket", [False, True], ids=["no-ticket-back", "ticket-back"])
async def test_ranges_of_an_active_session_answer_and_count_alike(with_ticket: bool) -> None:
    """The first range makes the session active (through admit); every further range,
    the last one completing the download, takes the range fast path."""

    async def scenario(side: Side) -> list[Any]:
        seen: list[Any] = []
        ticket: str | None = None
        for index in range(5):
            headers = {"range": span(index * 8 * MIB, (index + 1) * 8 * MIB)}
            headers["arkvory-download-id"] = "dl-1"
            if with_ticket and ticket is not None:
                headers["arkvory-queue-ticket"] = ticket
            response = await get(side, "big", **headers)
            ticket = response.headers.get("arkvory-queue-ticket")
            seen.append(answer(response))
        return seen

    fast, seen = await both(scenario)
    assert [status for status, *_ in seen[:5]] == [206] * 5
    assert all(has_ticket for *_, has_ticket in seen[:5])
    assert b"".join(body for _, body, *_ in seen[:5]) == BIG
    assert isinstance(fast.scheduler, CountingFast)
    assert (fast.scheduler.taken, fast.scheduler.ranges, fast.scheduler.range_reports) == (
        0,
        4,
        4,
    )
    assert fast.core.stats().completed_total == 1


@pytest.mark.anyio
async def test_ranges_with_a_lowered_class_and_a_whole_object_request_alike() -> None:
    async def scenario(side: Side) -> list[Any]:
        first = await get(side, "big", range=span(0, MIB), **{"arkvory-download-id": "dl-2"})
        lowered = await get(
            side,
            "big",
            range=span(MIB, 2 * MIB),
            **{"arkvory-download-id": "dl-2", "arkvory-download-class": "bulk"},
        )
        whole = await get(side, "big", **{"arkvory-download-id": "dl-2"})  # a 200 of it all
        return [answer(first)[:3], answer(lowered)[:3], answer(whole)[0]]

    fast, seen = await both(scenario)
    assert seen[2] == 200
    assert isinstance(fast.scheduler, CountingFast)
    assert fast.scheduler.ranges == 2
    assert fast.core.stats().completed_total == 1


@pytest.mark.anyio
@pytest.mark.parametrize(
    "headers",
    [
        {"arkvory-download-id": "dl-3", "arkvory-download-class": "turbo"},  # 400
        {"arkvory-download-id": "dl-3", "if-none-match": '"big-v1"'},  # 304: no place
        {"arkvory-download-id": "dl-3", "range": f"bytes={len(BIG)}-"},  # 416: no place
        {"arkvory-download-id": "dl-4"},  # another download: admit queues it (one slot)
    ],
)
async def test_what_is_not_a_further_range_answers_alike(headers: dict[str, str]) -> None:
    async def scenario(side: Side) -> list[Any]:
        first = await get(side, "big", range=span(0, MIB), **{"arkvory-download-id": "dl-3"})
        other = await get(side, "big", **headers)
        return [answer(first)[:3], other.status_code, other.headers.get("retry-after")]

    fast, _ = await both(scenario)
    assert isinstance(fast.scheduler, CountingFast)
    assert fast.scheduler.ranges == 0


@pytest.mark.anyio
@pytest.mark.parametrize("at_chunk", [0, 3], ids=["before-response", "mid-body"])
async def test_app_failure_in_a_range_is_reported_alike(at_chunk: int) -> None:
    async def scenario(side: Side) -> list[Any]:
        await get(side, "big", range=span(0, MIB), **{"arkvory-download-id": "dl-5"})
        side.store.fail_at_chunk = at_chunk
        raw = RawClient(
            "/objects/big",
            headers=[(b"range", span(MIB, 9 * MIB).encode()), (b"arkvory-download-id", b"dl-5")],
        )
        with pytest.raises(RuntimeError):
            await raw(side.middleware)
        return [raw.body]

    fast, _ = await both(scenario)
    assert isinstance(fast.scheduler, CountingFast)
    assert fast.scheduler.ranges == 1
    assert isinstance(fast.session_outcomes[-1], Failed)
    assert fast.core.grants_in_flight() == 0


@pytest.mark.anyio
@pytest.mark.parametrize("spec_version", ["2.3", "2.4"])
async def test_client_disconnect_in_a_range_is_reported_alike(spec_version: str) -> None:
    async def scenario(side: Side) -> list[Any]:
        await get(side, "big", range=span(0, MIB), **{"arkvory-download-id": "dl-6"})
        raw = RawClient(
            "/objects/big",
            headers=[(b"range", span(MIB, 9 * MIB).encode()), (b"arkvory-download-id", b"dl-6")],
            spec_version=spec_version,
            fail_on_body=3,
        )
        with pytest.raises((OSError, ClientDisconnect)):
            await raw(side.middleware)
        return [raw.status, raw.body]

    fast, _ = await both(scenario)
    assert isinstance(fast.scheduler, CountingFast)
    assert fast.session_outcomes[-1] == Interrupted(2 * CHUNK)
    assert fast.core.grants_in_flight() == 0


@pytest.mark.anyio
async def test_cancelled_range_is_reported_alike() -> None:
    async def scenario(side: Side) -> list[Any]:
        await get(side, "big", range=span(0, MIB), **{"arkvory-download-id": "dl-7"})
        side.store.gate = anyio.Event()
        side.store.pause_at_chunk = 1
        raw = RawClient(
            "/objects/big",
            headers=[(b"range", span(MIB, 9 * MIB).encode()), (b"arkvory-download-id", b"dl-7")],
        )
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(raw, side.middleware)
            await eventually(lambda: raw.body_messages == 1)
            assert side.core.grants_in_flight() == 1
            tasks.cancel_scope.cancel()
        return [len(raw.starts), raw.body]

    fast, _ = await both(scenario)
    assert isinstance(fast.scheduler, CountingFast)
    assert fast.session_outcomes[-1] == Interrupted(CHUNK)
    assert fast.core.grants_in_flight() == 0


# ====================================================================== R-RES-3
@pytest.mark.anyio
@pytest.mark.parametrize("at_chunk", [0, 3], ids=["before-response", "mid-body"])
async def test_app_failure_gives_the_place_back(at_chunk: int) -> None:
    async def scenario(side: Side) -> list[Any]:
        side.store.fail_at_chunk = at_chunk
        raw = RawClient("/objects/medium")
        with pytest.raises(RuntimeError):
            await raw(side.middleware)
        return [raw.body]

    fast, _ = await both(scenario)
    assert isinstance(fast.scheduler, CountingFast)
    assert (fast.scheduler.taken, fast.scheduler.released) == (1, 1)
    assert fast.core.stats().request_active == 0


@pytest.mark.anyio
@pytest.mark.parametrize("spec_version", ["2.3", "2.4"])
async def test_client_disconnect_gives_the_place_back(spec_version: str) -> None:
    async def scenario(side: Side) -> list[Any]:
        raw = RawClient("/objects/medium", spec_version=spec_version, fail_on_body=3)
        with pytest.raises((OSError, ClientDisconnect)):
            await raw(side.middleware)
        return [raw.status, raw.body]

    fast, _ = await both(scenario)
    stats = fast.core.stats()
    assert (stats.request_active, fast.core.grants_in_flight()) == (0, 0)
    assert stats.per_class[DownloadClass.RELEASE].bytes_delivered == 2 * CHUNK


@pytest.mark.anyio
async def test_cancelled_request_gives_the_place_back() -> None:
    async def scenario(side: Side) -> list[Any]:
        side.store.gate = anyio.Event()
        side.store.pause_at_chunk = 1
        raw = RawClient("/objects/medium")
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(raw, side.middleware)
            await eventually(lambda: raw.body_messages == 1)
            assert side.core.stats().request_active == 1
            tasks.cancel_scope.cancel()
        return [len(raw.starts), raw.body]

    fast, _ = await both(scenario)
    assert (fast.core.stats().request_active, fast.core.grants_in_flight()) == (0, 0)


@pytest.mark.anyio
async def test_a_place_the_fast_path_frees_wakes_the_waiter() -> None:
    async def scenario(side: Side) -> list[Any]:
        side.store.gate = anyio.Event()
        answers: dict[str, httpx.Response] = {}
        async with side.client() as client, anyio.create_task_group() as tasks:

            async def small(user: str) -> None:
                headers = {"authorization": f"Bearer {user}"}
                answers[user] = await client.get("/objects/small", headers=headers)

            tasks.start_soon(small, "svc-a")
            await eventually(lambda: side.core.stats().request_active == 1)
            tasks.start_soon(small, "svc-b")
            await eventually(lambda: side.core.stats().request_waiting == 1)
            side.store.gate.set()
        return [answer(answers["svc-a"]), answer(answers["svc-b"])]

    fast, seen = await both(scenario, max_downloads=1, transfer_queue_wait_seconds=10.0)
    assert [a[0] for a in seen[:2]] == [200, 200]
    assert isinstance(fast.scheduler, CountingFast)
    assert (fast.scheduler.taken, fast.scheduler.released) == (1, 1)  # b went through admit


# ====================================================================== the core
def core(**settings: Any) -> SchedulerCore:
    return SchedulerCore(scheduler_settings(**settings), FakeClock())


def take(scheduler: SchedulerCore, **changes: Any) -> GrantState[Session] | None:
    values: dict[str, Any] = {
        "principal": "svc-ci",
        "principal_kind": PrincipalKind.SERVICE,
        "base_class": None,
        "requested_class": None,
        "download_id": None,
        "object_id": "small",
        "object_size": len(SMALL),
        "client_address": "192.0.2.10",
        "byte_range": None,
    }
    values.update(changes)
    return scheduler.admit_now(**values)


def small_request(principal: str = "svc-ci") -> DownloadRequest:
    return DownloadRequest(
        principal=principal,
        principal_kind=PrincipalKind.SERVICE,
        object_id="small",
        object_size=len(SMALL),
        client_address="192.0.2.10",
    )


def first_range_of_big() -> DownloadRequest:
    """The first range of a session of ``svc-first``, which then holds a slot."""
    return DownloadRequest(
        principal="svc-first",
        principal_kind=PrincipalKind.SERVICE,
        object_id="big",
        object_size=len(BIG),
        byte_range=ByteRange(0, MIB),
        download_id="a",
    )


def test_core_fast_path_takes_a_free_place_and_releases_it_once() -> None:
    scheduler = core()
    place = take(scheduler, requested_class="bulk", byte_range=ByteRange(0, 10))
    assert place is not None
    assert place.download_class is DownloadClass.BULK
    assert (scheduler.stats().request_active, scheduler.grants_in_flight()) == (1, 1)
    assert scheduler.release_per_request(place, 10) == []
    assert scheduler.release_per_request(place, 10) == []  # a second release is a no-op
    stats = scheduler.stats()
    assert (stats.request_active, stats.admitted_total) == (0, 1)
    assert stats.per_class[DownloadClass.BULK].bytes_delivered == 10


def test_core_fast_path_class_follows_the_principal_kind_and_base_class() -> None:
    scheduler = core(max_downloads=4)
    person = take(scheduler, principal_kind=PrincipalKind.PERSON)
    operator_set = take(scheduler, base_class=DownloadClass.BULK, requested_class="release")
    assert person is not None and operator_set is not None
    assert person.download_class is DownloadClass.INTERACTIVE
    assert operator_set.download_class is DownloadClass.BULK  # a header cannot raise it


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"download_id": "bad id"}, "download_id"), ({"requested_class": "turbo"}, "download_class")],
)
def test_core_fast_path_refuses_what_admit_refuses(changes: dict[str, Any], field: str) -> None:
    scheduler = core()
    with pytest.raises(InvalidRequestError) as raised:
        take(scheduler, **changes)
    assert raised.value.field == field
    assert scheduler.stats().request_active == 0


def test_core_fast_path_steps_aside_for_large_objects_full_places_and_close() -> None:
    scheduler = core(max_downloads=1)
    assert take(scheduler, object_size=len(BIG)) is None  # a session object
    held = take(scheduler)
    assert held is not None
    assert take(scheduler) is None  # no free place: admit queues it
    scheduler.release_per_request(held, 0)
    scheduler.close()
    assert take(scheduler) is None  # admit answers shutting down
    assert scheduler.stats().request_active == 0


def test_core_fast_path_serves_large_objects_under_the_shared_strategy() -> None:
    scheduler = core(strategy="shared")
    assert take(scheduler, object_size=len(BIG)) is not None


def test_small_object_admission_hashes_no_key_unless_its_principal_holds_a_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scheduler = core(max_downloads=4)
    big = first_range_of_big()
    scheduler.admit(big)  # svc-first now holds the only slot
    assert scheduler.active_count == 1
    hashed: list[str] = []

    def counting(principal: str, *args: Any) -> bytes:
        hashed.append(principal)
        return session_key(principal, *args)

    monkeypatch.setattr("arkvory_sched.memory._admission.session_key", counting)
    monkeypatch.setattr("arkvory_sched._session_keys.session_key", counting)  # SessionKeys
    scheduler.admit(small_request("svc-other"))
    assert take(scheduler, principal="svc-other") is not None
    assert hashed == []
    scheduler.admit(small_request("svc-first"))
    assert take(scheduler, principal="svc-first") is not None  # not a range of its session
    assert hashed == ["svc-first", "svc-first"]


def test_core_fast_path_steps_aside_for_a_range_of_an_active_session() -> None:
    scheduler = core(max_downloads=4)
    big = first_range_of_big()
    scheduler.admit(big)
    scheduler.configure(replace(scheduler.settings, session_min_bytes=2 * len(BIG)))
    same = {"principal": "svc-first", "object_id": "big", "object_size": len(BIG)}
    assert take(scheduler, **same, download_id="a") is None  # admit serves it as a range
    assert take(scheduler, **same, download_id="b") is not None  # another download


@pytest.mark.parametrize("kind", list(PrincipalKind))
def test_core_fast_path_default_class_is_the_one_admit_uses(kind: PrincipalKind) -> None:
    place = take(core(), principal_kind=kind)
    assert place is not None
    assert place.download_class is default_class(kind)


def take_range(scheduler: SchedulerCore, **changes: Any) -> GrantState[Session] | None:
    """The next range of ``svc-first``'s download ``a`` of ``big``, on the fast path."""
    values: dict[str, Any] = {
        "principal": "svc-first",
        "download_id": "a",
        "object_id": "big",
        "object_size": len(BIG),
        "byte_range": ByteRange(MIB, 2 * MIB),
    }
    return take(scheduler, **{**values, **changes})


def test_core_range_fast_path_grants_what_admit_grants_and_reports_once() -> None:
    fast, port = core(ranges_per_session=4), core(ranges_per_session=4)
    for scheduler in (fast, port):
        scheduler.admit(first_range_of_big())
    state = take_range(fast)
    decision = port.admit(replace(first_range_of_big(), byte_range=ByteRange(MIB, 2 * MIB)))
    assert state is not None and isinstance(decision, Admitted)
    assert (state.byte_range, state.download_class) == (
        decision.grant.byte_range,
        decision.grant.download_class,
    )
    assert fast.stats() == port.stats()
    fast.report_state(state, Delivered(state.byte_range))
    port.report(decision.grant, Delivered(decision.grant.byte_range))
    assert fast.report_state(state, Delivered(state.byte_range)) == []  # a no-op
    assert fast.stats() == port.stats()
    assert fast.grants_in_flight() == port.grants_in_flight() == 1  # the first range


def test_core_range_fast_path_without_a_range_reads_the_whole_object() -> None:
    scheduler = core()
    scheduler.admit(first_range_of_big())
    state = take_range(scheduler, byte_range=None)
    assert state is not None
    assert state.byte_range == ByteRange.whole(len(BIG))


def test_core_range_fast_path_steps_aside_when_admit_must_decide() -> None:
    scheduler = core(ranges_per_session=2)
    assert take_range(scheduler) is None  # no session yet: admit starts or queues it
    scheduler.admit(first_range_of_big())  # in flight: 1 of 2
    assert take_range(scheduler, download_id="b") is None  # another download
    assert take_range(scheduler, object_size=len(SMALL)) is None  # per request
    held = take_range(scheduler)
    assert held is not None  # in flight: 2 of 2
    assert take_range(scheduler) is None  # full: admit answers busy
    scheduler.report_state(held, Interrupted(0))
    session = held.session
    assert session is not None
    session.yield_requested = True
    assert take_range(scheduler) is None  # asked to yield: admit requeues it
    session.yield_requested = False
    scheduler.close()
    assert take_range(scheduler) is None  # admit decides after close


def test_core_range_fast_path_refuses_a_bad_class_as_admit_does() -> None:
    scheduler = core()
    scheduler.admit(first_range_of_big())
    with pytest.raises(InvalidRequestError) as raised:
        take_range(scheduler, requested_class="turbo")
    assert raised.value.field == "download_class"
    assert scheduler.grants_in_flight() == 1


def test_core_range_fast_path_leaves_a_bad_id_to_admit() -> None:
    # No session can have a bad id (admit refuses to create one), so the fast path
    # finds none and steps aside; admit then refuses the request with a 400's error.
    scheduler = core()
    scheduler.admit(first_range_of_big())
    assert take_range(scheduler, download_id="bad id") is None
    assert scheduler.grants_in_flight() == 1
    with pytest.raises(InvalidRequestError) as raised:
        scheduler.admit(replace(first_range_of_big(), download_id="bad id"))
    assert raised.value.field == "download_id"


def test_core_range_fast_path_remembers_keys_within_a_bound() -> None:
    scheduler = core()
    scheduler.admit(first_range_of_big())
    for index in range(KEY_CACHE_ENTRIES + 10):
        assert take_range(scheduler, download_id=f"other-{index}") is None
        assert len(scheduler.admission.keys) <= KEY_CACHE_ENTRIES
    held = take_range(scheduler)  # the session's key, computed again after the clearing
    assert held is not None
    assert held.session is not None
    assert held.session.key == session_key("svc-first", "big", "a", "192.0.2.10")


# ====================================================================== rate meter
def _book_by_loop(meter: PeakRateMeter, start: float, end: float, nbytes: int) -> None:
    """What ``record`` did for a response with a duration before its one-second
    shortcut: spread the bytes by each second's overlap with the span."""
    last = math.floor(end)
    newest = last if meter._newest is None else max(meter._newest, last)
    meter._newest = newest
    oldest_kept = newest - meter.window_seconds
    span = end - start
    for second in range(max(math.floor(start), oldest_kept), math.ceil(end)):
        overlap = min(end, second + 1) - max(start, second)
        if overlap > 0:
            meter._add(second, nbytes * (overlap / span))


def _meter_state(meter: PeakRateMeter) -> tuple[Any, ...]:
    return meter._newest, list(meter._seconds), list(meter._bytes)


@settings(max_examples=500, deadline=None)
@given(
    earlier=st.lists(
        st.tuples(st.floats(0, 200), st.floats(0, 3), st.integers(1, 1 << 40)), max_size=6
    ),
    anchor=st.integers(100, 300),
    back=st.integers(-3, 64),
    offsets=st.tuples(st.floats(0, 1, exclude_max=True), st.floats(0, 1, exclude_max=True)),
    nbytes=st.integers(1, 1 << 62),
)
def test_a_response_within_one_second_is_booked_as_the_spreading_loop_books_it(
    earlier: list[tuple[float, float, int]],
    anchor: int,
    back: int,
    offsets: tuple[float, float],
    nbytes: int,
) -> None:
    """Nearly every small response starts and ends in the same second; ``record`` books
    it without the loop, and must leave exactly the state the loop leaves: in the
    window, just outside it (``back`` seconds before the newest recorded one, the
    window being 60), in a newer second, or in a slot left from an earlier lap."""
    second = anchor - back
    start, end = second + min(offsets), second + max(offsets)
    assume(start < end and math.floor(start) == math.floor(end))
    shortcut, looped = PeakRateMeter(), PeakRateMeter()
    for was_start, duration, was_bytes in [*earlier, (anchor + 0.25, 0.25, 1)]:
        shortcut.record(was_start, was_start + duration, was_bytes)
        looped.record(was_start, was_start + duration, was_bytes)
    assert _meter_state(shortcut) == _meter_state(looped)
    shortcut.record(start, end, nbytes)
    _book_by_loop(looped, start, end, nbytes)
    assert _meter_state(shortcut) == _meter_state(looped)
    assert shortcut.peak(end + 1) == looped.peak(end + 1)


class _Message(dict[str, Any]):
    """A message that can be watched for being freed (a plain dict cannot)."""


@pytest.mark.anyio
@pytest.mark.parametrize("fast", [True, False], ids=["fast path", "port"])
@pytest.mark.parametrize("name", ["small", "big"], ids=["per request", "session ranges"])
async def test_a_sent_message_is_not_kept_alive(fast: bool, name: str) -> None:
    """Once ``send`` returns, the middleware holds no message (and so no chunk): with
    many responses in flight, one more chunk per response would stay in memory. The
    session's second range is the range fast path's, when it is on."""
    data = {"small": SMALL, "big": BIG}[name]
    store = ObjectStore(objects={name: data})
    freed: list[bool] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        first, last, status = 0, len(data) - 1, 200
        for key, value in scope["headers"]:
            if key == b"range":
                start, end = value.decode().removeprefix("bytes=").split("-")
                first, last, status = int(start), int(end), 206
        await send({"type": "http.response.start", "status": status, "headers": []})
        for offset in range(first, last + 1, CHUNK):
            chunk = data[offset : min(offset + CHUNK, last + 1)]
            more = offset + CHUNK <= last
            message = _Message(type="http.response.body", body=chunk, more_body=more)
            await send(message)
            watched = weakref.ref(message)
            del message
            freed.append(watched() is None)

    values = scheduler_settings()
    scheduler = CountingFast(values) if fast else PortOnly(values)
    middleware = DownloadSchedulerMiddleware(
        app, scheduler=scheduler, resolver=make_resolver(store), run_ticks=False
    )
    assert (middleware._fast is scheduler) is fast
    received = bytearray()

    class Forgetful(RawClient):
        """Keeps the body's bytes, never a message (that would keep it alive)."""

        async def send(self, message: Any) -> None:
            if message["type"] == "http.response.body":
                received.extend(message.get("body", b""))

    half = len(data) // 2
    spans = [None] if name == "small" else [f"0-{half - 1}", f"{half}-{len(data) - 1}"]
    for span in spans:
        ranged = [(b"arkvory-download-id", b"kept"), (b"range", f"bytes={span}".encode())]
        headers = [] if span is None else ranged
        await Forgetful(f"/objects/{name}", headers=headers)(middleware)
    assert bytes(received) == data
    assert freed and all(freed)
    assert scheduler.core.grants_in_flight() == 0
    if fast and name == "big":
        assert isinstance(scheduler, CountingFast) and scheduler.ranges == 1
    stats = scheduler.core.stats()
    assert sum(c.bytes_delivered for c in stats.per_class.values()) == len(data)
