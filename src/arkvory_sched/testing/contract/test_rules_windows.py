"""Class windows (R-WIN-2) on every implementation, across daylight saving time.

``bulk`` runs only inside its windows, written in the wall time of a zone: outside
them it holds at most ``outsideShare × sessions`` slots (none by default) and its slots
go to the other classes; a session started inside runs to completion; its waiters are
told to start at or after the opening and do not age. The clock is a :class:`FakeClock`
whose wall side sits on the days the clocks change in Europe/Berlin and
America/New_York (the queue side is monotonic, R-RES-5).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from arkvory_sched import (
    Admitted,
    ByteRange,
    DownloadClass,
    DownloadRequest,
    DownloadScheduler,
    PrincipalKind,
    Queued,
    SchedulerSettings,
)
from arkvory_sched.policy import MARK_SCAN_SLACK, MAX_CHECK_SECONDS
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import RANGE, admitted, big, chunk, deliver, queued

pytestmark = pytest.mark.anyio

BERLIN = "Europe/Berlin"
NEW_YORK = "America/New_York"
EVERY_DAY = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


def at(zone: str, text: str, *, fold: int = 0) -> float:
    """The instant of a wall time written ``2026-03-29 03:00`` in ``zone``."""
    return datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(zone), fold=fold).timestamp()


def clock_at(zone: str, text: str) -> FakeClock:
    return FakeClock(monotonic=1_000.0, wall=at(zone, text))


def bulk_windows(
    start: str, end: str, zone: str, *, days: list[str] | None = None, share: float = 0.0
) -> SchedulerSettings:
    return contract_settings(
        class_windows={
            "bulk": {
                "windows": [
                    {"weekdays": days or EVERY_DAY, "start": start, "end": end, "zone": zone}
                ],
                "outsideShare": share,
            }
        }
    )


def bulk(
    principal: str, download_id: str = "dl-bulk", byte_range: ByteRange | None = None
) -> DownloadRequest:
    return big(principal, download_id, requested_class="bulk", byte_range=byte_range)


async def step(scheduler: DownloadScheduler, clock: FakeClock, seconds: float) -> None:
    clock.advance(seconds)
    await scheduler.tick()


@dataclass(frozen=True)
class DstDay:
    """A window on a day the clocks change, and when it really opens."""

    zone: str
    start: str
    end: str
    day: str
    arrive: str  # wall time the waiter arrives, before the opening
    opens: float  # the instant the window opens that day


DST_DAYS = [
    # Berlin springs forward at 02:00 on Sunday 2026-03-29: 02:30 does not exist, the
    # window opens at the end of the gap, 03:00 CEST.
    pytest.param(
        DstDay(BERLIN, "02:30", "05:00", "sun", "2026-03-29 01:30", at(BERLIN, "2026-03-29 03:00")),
        id="berlin-spring-forward-02:30",
    ),
    # New York falls back at 02:00 on Sunday 2026-11-01: 01:30 happens twice, the window
    # opens at the first.
    pytest.param(
        DstDay(
            NEW_YORK,
            "01:30",
            "04:00",
            "sun",
            "2026-11-01 00:45",
            at(NEW_YORK, "2026-11-01 01:30", fold=0),
        ),
        id="new-york-fall-back-01:30",
    ),
    # A night window crossing midnight into Berlin's fall-back day (Saturday 22:00 to
    # Sunday 06:00, nine hours on the wall clocks).
    pytest.param(
        DstDay(BERLIN, "22:00", "06:00", "sat", "2026-10-24 20:00", at(BERLIN, "2026-10-24 22:00")),
        id="berlin-night-into-fall-back",
    ),
    # A night window crossing midnight into New York's spring-forward day.
    pytest.param(
        DstDay(
            NEW_YORK, "23:00", "04:00", "sat", "2026-03-07 21:30", at(NEW_YORK, "2026-03-07 23:00")
        ),
        id="new-york-night-into-spring-forward",
    ),
]


@pytest.mark.parametrize("case", DST_DAYS)
async def test_no_bulk_session_starts_before_its_window_opens(
    make_scheduler: MakeScheduler, case: DstDay
) -> None:
    clock = clock_at(case.zone, case.arrive)
    scheduler = await make_scheduler(
        bulk_windows(case.start, case.end, case.zone, days=[case.day]), clock=clock
    )
    waiter = bulk("fleet-1")
    first = await queued(scheduler, waiter)  # both slots free, the queue empty: closed
    assert first.download_class is DownloadClass.BULK
    # Polling up to ten seconds before the opening, the slots stay free for it.
    while clock.wall() < case.opens - 10.0:
        await step(scheduler, clock, min(60.0, case.opens - 10.0 - clock.wall()))
        answer = await queued(scheduler, waiter)
        assert answer.starts_earliest >= case.opens  # never promised before the opening
        assert answer.check_at <= case.opens  # back no later than the opening
        assert answer.retry_after <= MAX_CHECK_SECONDS
    await step(scheduler, clock, case.opens - clock.wall())
    await admitted(scheduler, waiter)


async def test_bulk_stops_starting_at_the_fall_back_closing(
    make_scheduler: MakeScheduler,
) -> None:
    """Berlin, Saturday 22:00 to Sunday 06:00 CET over the fall-back night: nine hours."""
    clock = clock_at(BERLIN, "2026-10-25 05:59")
    scheduler = await make_scheduler(
        bulk_windows("22:00", "06:00", BERLIN, days=["sat"]), clock=clock
    )
    inside = await admitted(scheduler, bulk("early", "dl-early"))
    await deliver(scheduler, inside)
    await step(scheduler, clock, 60.0)  # 06:00 CET: closed
    answer = await queued(scheduler, bulk("late", "dl-late"))
    assert answer.starts_earliest >= at(BERLIN, "2026-10-31 22:00")  # the next Saturday


async def test_outside_its_window_a_class_holds_at_most_its_share(
    make_scheduler: MakeScheduler,
) -> None:
    clock = clock_at(BERLIN, "2026-06-05 12:00")
    settings = bulk_windows("22:00", "06:00", BERLIN, share=0.5).with_changes(
        sessions=4, reserve=0, per_principal=4
    )
    scheduler = await make_scheduler(settings, clock=clock)
    await admitted(scheduler, bulk("fleet-1"))
    await admitted(scheduler, bulk("fleet-2"))  # floor(0.5 × 4) = 2 slots outside
    third = bulk("fleet-3")
    await queued(scheduler, third)
    for _ in range(3):  # two slots free, marked each tick: the share holds
        await step(scheduler, clock, 2.0)
        await queued(scheduler, third)
    release = big("ci-release", "dl-release")
    await admitted(scheduler, release)  # the free slots are the other classes'
    await step(scheduler, clock, 2.0)
    await queued(scheduler, third)


async def test_a_session_started_inside_its_window_runs_past_the_closing(
    make_scheduler: MakeScheduler,
) -> None:
    clock = clock_at(NEW_YORK, "2026-03-08 03:59")  # the spring-forward night, 04:00 close
    settings = bulk_windows("23:00", "04:00", NEW_YORK, days=["sat"]).with_changes(sessions=1)
    scheduler = await make_scheduler(settings, clock=clock)
    ranges = [bulk("night", byte_range=chunk(index)) for index in range(5)]
    first = await admitted(scheduler, ranges[0])
    await deliver(scheduler, first)
    waiting = bulk("other", "dl-other")  # the next bulk download waits its turn
    await queued(scheduler, waiting)
    for request in ranges[1:]:
        await step(scheduler, clock, 25.0)  # past 04:00 from the fourth range on
        await queued(scheduler, waiting)
        decision = await admitted(scheduler, request)  # its further ranges: still its slot
        await deliver(scheduler, decision)
    assert clock.wall() > at(NEW_YORK, "2026-03-08 04:00")
    await step(scheduler, clock, 0.5)
    await queued(scheduler, waiting)  # the slot is free, but bulk has closed meanwhile
    stats = await scheduler.stats()
    assert stats.completed_total == 1
    assert stats.per_class[DownloadClass.BULK].active == 0


async def test_slots_go_to_the_other_classes_while_bulk_is_closed(
    make_scheduler: MakeScheduler,
) -> None:
    clock = clock_at(NEW_YORK, "2026-06-05 18:00")
    scheduler = await make_scheduler(bulk_windows("22:00", "06:00", NEW_YORK), clock=clock)
    holder = await admitted(scheduler, big("ci-1", "dl-1"))
    fleet = [bulk(f"fleet-{n}") for n in range(3)]
    for waiter in fleet:
        await queued(scheduler, waiter)  # earlier than the release waiter below
    release = big("ci-2", "dl-2")
    await admitted(scheduler, release)  # the free slot went past the bulk waiters
    await step(scheduler, clock, 2.0)
    for waiter in fleet:
        await queued(scheduler, waiter)
    await deliver(scheduler, holder)
    await step(scheduler, clock, 2.0)
    late = big("ci-3", "dl-3")
    await admitted(scheduler, late)  # past the bulk waiters again, without a mark
    for waiter in fleet:
        await queued(scheduler, waiter)
    stats = await scheduler.stats()
    assert stats.per_class[DownloadClass.BULK].active == 0
    assert stats.per_class[DownloadClass.RELEASE].active == 2


async def test_an_open_newcomer_on_a_free_slot_never_waits_behind_a_closed_class(
    make_scheduler: MakeScheduler,
) -> None:
    """Issue #26: whether the closed class has no share, a share it holds in full, or
    a share with room, its waiters leave the free slots to an open class's newcomer;
    a closed class's newcomer still queues behind every waiter, and an open class's
    waiter still makes an open newcomer wait."""
    clock = clock_at(BERLIN, "2026-06-05 12:00")
    settings = bulk_windows("22:00", "06:00", BERLIN, share=0.25).with_changes(
        sessions=4, reserve=0, per_principal=4
    )
    scheduler = await make_scheduler(settings, clock=clock)
    await admitted(scheduler, bulk("fleet-1"))  # its share outside: floor(0.25 × 4) = 1
    closed = [bulk(f"fleet-{n}") for n in range(2, 5)]
    for waiter in closed:
        await queued(scheduler, waiter)
    first = await admitted(scheduler, big("ci-1", "dl-1"))  # three free, no mark needed
    person = big("person", "dl-person", kind=PrincipalKind.PERSON)
    await admitted(scheduler, person)
    await queued(scheduler, bulk("fleet-5"))  # its class holds its share
    await admitted(scheduler, big("ci-2", "dl-2"))  # the last free slot
    await queued(scheduler, big("ci-3", "dl-3"))  # no slot left: it waits
    await deliver(scheduler, first)  # a slot frees; ci-3 waits for its mark
    await queued(scheduler, big("ci-4", "dl-4"))  # an open waiter: it waits behind it
    stats = await scheduler.stats()
    assert stats.per_class[DownloadClass.BULK].active == 1
    assert stats.per_class[DownloadClass.BULK].waiting == 4
    assert stats.per_class[DownloadClass.RELEASE].waiting == 2


async def test_the_interactive_reserve_is_unaffected(make_scheduler: MakeScheduler) -> None:
    clock = clock_at(BERLIN, "2026-06-05 12:00")
    settings = bulk_windows("22:00", "06:00", BERLIN, share=0.25).with_changes(
        sessions=4, reserve=1, per_principal=4
    )
    scheduler = await make_scheduler(settings, clock=clock)
    await admitted(scheduler, bulk("fleet-1"))  # its share outside: floor(0.25 × 4) = 1
    await admitted(scheduler, big("ci-1", "dl-1"))
    await admitted(scheduler, big("ci-2", "dl-2"))
    await queued(scheduler, bulk("fleet-2"))
    release = big("ci-3", "dl-3")
    await queued(scheduler, release)  # the last slot is the reserve
    person = big("person", "dl-person", kind=PrincipalKind.PERSON)
    await queued(scheduler, person)  # others wait: a newcomer waits for a mark
    await step(scheduler, clock, 2.0)
    await queued(scheduler, release)
    await admitted(scheduler, person)


async def test_a_waiter_whose_class_closes_before_its_turn_starts_after_the_next_opening(
    make_scheduler: MakeScheduler,
) -> None:
    clock = clock_at(BERLIN, "2026-03-29 04:50")  # spring-forward morning, closes 05:00
    settings = bulk_windows("02:30", "05:00", BERLIN).with_changes(sessions=1)
    scheduler = await make_scheduler(settings, clock=clock)
    # About 70 minutes of one download at the assumed 100 MiB/s hold the only slot.
    await admitted(scheduler, big("ci-1", "dl-1", size=400 * 1024**3))
    waiter = bulk("fleet-1")
    await queued(scheduler, waiter)
    await step(scheduler, clock, 2.0)
    answer = await queued(scheduler, waiter)
    assert answer.starts_earliest >= at(BERLIN, "2026-03-30 02:30")  # Monday's opening
    assert answer.check_at < at(BERLIN, "2026-03-29 05:00")


async def test_a_windowed_class_does_not_age(make_scheduler: MakeScheduler) -> None:
    """As test_policy_aging's first scenario, but bulk has a window (open all day):
    the old bulk waiter stays in bulk, so the newer release waiter is served first."""
    clock = clock_at(BERLIN, "2026-06-05 12:00")
    settings = bulk_windows("00:00", "23:59", BERLIN).with_changes(sessions=1, aging_minutes=1.0)
    scheduler = await make_scheduler(settings, clock=clock)
    holder = await admitted(scheduler, bulk("holder", "dl-holder"))
    old = bulk("old-bulk", "dl-old")
    await queued(scheduler, old)
    for _ in range(3):
        await step(scheduler, clock, 10.0)
        await queued(scheduler, old)
    newer = big("new-release", "dl-new")
    await queued(scheduler, newer)
    for _ in range(4):  # old has waited 70 s: it would have aged into release
        await step(scheduler, clock, 10.0)
        await queued(scheduler, old)
        await queued(scheduler, newer)
    await deliver(scheduler, holder)
    await step(scheduler, clock, 0.1)
    assert isinstance(await scheduler.admit(old), Queued)
    await admitted(scheduler, newer)


async def test_a_big_closed_crowd_does_not_keep_release_waiting(
    make_scheduler: MakeScheduler,
) -> None:
    """More closed bulk waiters, of as many principals, than a marking may look at,
    with aging on: had they aged into release, they would sit ahead of the release
    waiters there and use up the marking's scan."""
    crowd = MARK_SCAN_SLACK + 200
    clock = clock_at(NEW_YORK, "2026-06-05 18:00")
    settings = bulk_windows("22:00", "06:00", NEW_YORK).with_changes(
        aging_minutes=0.1, queue_limit=crowd + 16
    )
    scheduler = await make_scheduler(settings, clock=clock)
    holders = [await admitted(scheduler, big(f"hold-{n}", f"dl-h{n}")) for n in range(2)]
    for n in range(crowd):
        decision = await scheduler.admit(bulk(f"agent-{n}"))
        assert isinstance(decision, Queued)
    await step(scheduler, clock, 10.0)  # the crowd's aging time (6 s) has passed
    releases = [big(f"ci-{n}", f"dl-{n}") for n in range(3)]
    for request in releases:
        await queued(scheduler, request)
    for holder in holders:
        await deliver(scheduler, holder)
    await step(scheduler, clock, 2.0)  # the marking must reach past the crowd
    started = [await scheduler.admit(request) for request in releases]
    assert sum(isinstance(decision, Admitted) for decision in started) == 2  # both slots
    stats = await scheduler.stats()
    assert stats.per_class[DownloadClass.BULK].waiting == crowd


async def test_a_closed_class_makes_nobody_yield(make_scheduler: MakeScheduler) -> None:
    """R-PREEMPT-1 would give a bulk head the slot of a background holder after a
    minute; while bulk is closed its head takes no slot, so nobody yields for it. A
    release head behind it still does."""
    clock = clock_at(BERLIN, "2026-06-05 12:00")
    settings = bulk_windows("22:00", "06:00", BERLIN).with_changes(sessions=1)
    scheduler = await make_scheduler(settings, clock=clock)
    size = 64 * RANGE
    mirror = [
        big("mirror", "dl-m", requested_class="background", byte_range=chunk(n, size), size=size)
        for n in range(64)
    ]
    head = bulk("fleet-1")
    await deliver(scheduler, await admitted(scheduler, mirror[0]))
    await queued(scheduler, head)
    for request in mirror[1:10]:  # three minutes, a range every 20 s
        await step(scheduler, clock, 20.0)
        await queued(scheduler, head)
        await deliver(scheduler, await admitted(scheduler, request))
    assert (await scheduler.stats()).preemptions_total == 0
    release = big("ci-1", "dl-1")
    await queued(scheduler, release)
    await step(scheduler, clock, 2.0)
    assert (await scheduler.stats()).preemptions_total == 1
    assert isinstance(await scheduler.admit(mirror[10]), Queued)  # yields at its boundary


async def test_a_waiter_due_to_age_after_its_class_got_windows_is_deferred(
    make_scheduler: MakeScheduler,
) -> None:
    """The old bulk waiter was queued (and given its promotion time) before bulk had
    windows; when it falls due, it stays in bulk (ADR 0021)."""
    clock = clock_at(BERLIN, "2026-06-05 12:00")
    settings = contract_settings(sessions=1, aging_minutes=1.0)
    scheduler = await make_scheduler(settings, clock=clock)
    holder = await admitted(scheduler, bulk("holder", "dl-holder"))
    old = bulk("old-bulk", "dl-old")
    await queued(scheduler, old)
    await step(scheduler, clock, 10.0)
    await queued(scheduler, old)
    windowed = bulk_windows("00:00", "23:59", BERLIN).class_windows
    await scheduler.configure(settings.with_changes(class_windows=windowed))
    newer = big("new-release", "dl-new")
    await queued(scheduler, newer)
    for _ in range(7):  # old has waited 80 s: due for release 20 s ago
        await step(scheduler, clock, 10.0)
        await queued(scheduler, old)
        await queued(scheduler, newer)
    await deliver(scheduler, holder)
    await step(scheduler, clock, 0.1)
    assert isinstance(await scheduler.admit(old), Queued)
    await admitted(scheduler, newer)
