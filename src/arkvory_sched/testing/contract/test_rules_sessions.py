"""The life of a download session, on every implementation: pause and resume keeping the
arrival (R-SESS-9), the tail-only hold (R-SESS-10), completion however the last range
ends (R-SESS-8), no-shows (R-SESS-7) and ranges per session across processes
(R-SESS-11)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from arkvory_sched import (
    ByteRange,
    DownloadScheduler,
    Interrupted,
    RangeKind,
    RejectReason,
    SchedulerSettings,
)
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import (
    BIG,
    RANGE,
    admitted,
    big,
    chunk,
    deliver,
    keep_polling,
    queued,
    rejected,
    serve_next,
    ticket_arrival,
)

pytestmark = pytest.mark.anyio

TAIL = 64 * 1024

AnotherProcess = Callable[[SchedulerSettings], Awaitable[DownloadScheduler]]


async def test_resumed_download_keeps_its_arrival_after_a_pause(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-SESS-9: a pause longer than idleSeconds frees the slot; on return within ten
    minutes the download queues by its old arrival, behind those already served from
    before it and ahead of those who came after it."""
    scheduler = await make_scheduler(contract_settings(sessions=1, idle_seconds=30.0))
    first = await admitted(scheduler, big("alpha", "dl-a", byte_range=chunk(0)))
    await deliver(scheduler, first)
    clock.advance(1.0)
    beta, gamma = big("beta", "dl-b"), big("gamma", "dl-c")
    for waiter in (beta, gamma):
        await queued(scheduler, waiter)
        clock.advance(1.0)
    await keep_polling(scheduler, clock, [beta, gamma], 20.0, every=10.0)
    clock.advance(9.0)  # alpha has been idle for 31.5 s at the next tick
    served, running = await serve_next(scheduler, clock, [beta, gamma], complete=False)
    assert served is beta
    stats = await scheduler.stats()
    assert (stats.active, stats.paused, stats.idle_releases_total) == (1, 1, 1)
    returning = await queued(scheduler, big("alpha", "dl-a", byte_range=chunk(1)))
    assert ticket_arrival(returning.ticket) == ticket_arrival(first.ticket)
    await keep_polling(scheduler, clock, [big("alpha", "dl-a", byte_range=chunk(1)), gamma], 1.0)
    await deliver(scheduler, running)
    alpha = big("alpha", "dl-a", byte_range=chunk(1))
    served, resumed = await serve_next(scheduler, clock, [gamma, alpha], complete=False)
    assert served is alpha, "the resumed download lost its arrival"
    # Its delivered range was kept too: the rest completes the download.
    await deliver(scheduler, resumed)
    for index in range(2, 5):
        await deliver(
            scheduler, await admitted(scheduler, big("alpha", "dl-a", byte_range=chunk(index)))
        )
    assert (await scheduler.stats()).completed_total == 2


@pytest.mark.parametrize(
    ("idle_seconds", "hold"),
    [pytest.param(30.0, 5.0, id="five-seconds"), pytest.param(3.0, 3.0, id="idle-shorter")],
)
async def test_tail_only_session_holds_its_slot_five_seconds_and_keeps_its_tail(
    make_scheduler: MakeScheduler, clock: FakeClock, idle_seconds: float, hold: float
) -> None:
    """R-SESS-10: a session that read only the tail holds its slot for 5 s (not more than
    idleSeconds), then keeps arrival and tail like after a pause."""
    scheduler = await make_scheduler(contract_settings(sessions=1, idle_seconds=idle_seconds))
    tail = await admitted(scheduler, big(byte_range=ByteRange(BIG - TAIL, BIG, RangeKind.SUFFIX)))
    await deliver(scheduler, tail)
    clock.advance(hold - 1.0)
    await scheduler.tick()
    assert (await scheduler.stats()).active == 1
    clock.advance(2.0)
    await scheduler.tick()
    stats = await scheduler.stats()
    assert (stats.active, stats.paused) == (0, 1)
    # Back, the client reads everything but the tail: the kept tail completes it.
    for index in range(4):
        await deliver(scheduler, await admitted(scheduler, big(byte_range=chunk(index))))
    rest = ByteRange(4 * RANGE, BIG - TAIL, RangeKind.BOUNDED)
    await deliver(scheduler, await admitted(scheduler, big(byte_range=rest)))
    stats = await scheduler.stats()
    assert (stats.active, stats.paused, stats.completed_total) == (0, 0, 1)


async def test_session_completes_when_its_last_range_is_dropped_after_every_byte_arrived(
    make_scheduler: MakeScheduler,
) -> None:
    """R-SESS-8: a download covered from its start to the last byte completes when its
    last range in flight ends, even when that range (a second read of bytes already
    delivered) is dropped: its slot is free at once for the next download. (The
    PostgreSQL store once judged completion only after a delivery: the slot stayed held
    until the idle release.)"""
    scheduler = await make_scheduler(contract_settings(sessions=1))
    first = await admitted(scheduler, big(byte_range=chunk(0)))
    again = await admitted(scheduler, big(byte_range=chunk(0)))
    await deliver(scheduler, first)
    for index in range(1, BIG // RANGE):
        await deliver(scheduler, await admitted(scheduler, big(byte_range=chunk(index))))
    assert (await scheduler.stats()).active == 1  # the second read is still in flight
    await scheduler.report(again.grant, Interrupted())
    assert (await scheduler.stats()).active == 0
    await deliver(scheduler, await admitted(scheduler, big("laptop", "dl-l")))


async def test_no_show_and_pause_expire_at_their_deadline_exactly(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-SESS-7, R-SESS-9: a deadline is due at its own instant, on both stores. A
    newcomer's is its check (2 s) plus the margin (30 s); a pause lasts 600 s. (The
    PostgreSQL store once kept both one tick longer when a tick fell on the instant.)"""
    scheduler = await make_scheduler(contract_settings(sessions=1, idle_seconds=30.0))
    holder = await admitted(scheduler, big("holder", "dl-h", byte_range=chunk(0)))
    await queued(scheduler, big("alpha", "dl-a"))
    clock.advance(32.0)
    await scheduler.tick()
    assert (await scheduler.stats()).no_shows_total == 1
    await deliver(scheduler, holder)
    clock.advance(30.5)
    await scheduler.tick()  # idle past 30 s: paused until 600 s from now
    assert (await scheduler.stats()).paused == 1
    clock.advance(600.0)
    await scheduler.tick()
    assert (await scheduler.stats()).paused == 0


async def test_no_show_is_removed_after_check_at_and_rejoins_at_the_end(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-SESS-7: a waiter that does not come back by checkAt plus a margin is removed;
    not before, and not punished beyond that: a new request joins the end."""
    scheduler = await make_scheduler(contract_settings(sessions=1))
    holder = await admitted(scheduler, big("holder", "dl-h"))
    alpha, beta = big("alpha", "dl-a"), big("beta", "dl-b")
    await queued(scheduler, alpha)
    clock.advance(1.0)
    await queued(scheduler, beta)
    clock.advance(1.0)
    await scheduler.tick()
    last = await queued(scheduler, alpha)  # alpha's last poll
    assert last.position == 1
    offset = clock.wall() - clock.monotonic()
    due = last.check_at - offset  # monotonic
    clock.set_monotonic(due + 25.0)  # within the margin
    await scheduler.tick()
    await queued(scheduler, beta)
    assert (await scheduler.stats()).no_shows_total == 0
    await keep_polling(scheduler, clock, [beta], 35.0, every=10.0)
    stats = await scheduler.stats()
    assert (stats.waiting, stats.no_shows_total) == (1, 1)
    await queued(scheduler, beta)
    await queued(scheduler, alpha)  # a newcomer now
    clock.advance(0.5)
    await scheduler.tick()
    assert (await queued(scheduler, beta)).position == 1
    assert (await queued(scheduler, alpha)).position == 2
    await deliver(scheduler, holder)


@pytest.fixture
def another_process(
    make_scheduler: MakeScheduler,
) -> Callable[[DownloadScheduler, SchedulerSettings], Awaitable[DownloadScheduler]]:
    """A second process on the same store: a new scheduler on the test's store when its
    queue is shared (PostgreSQL); in memory the queue lives in one process, so it is
    the same scheduler."""

    async def another(first: DownloadScheduler, settings: SchedulerSettings) -> DownloadScheduler:
        return await make_scheduler(settings) if first.shared else first

    return another


async def test_ranges_per_session_hold_across_processes(
    make_scheduler: MakeScheduler,
    another_process: Callable[[DownloadScheduler, SchedulerSettings], Awaitable[DownloadScheduler]],
) -> None:
    """R-SESS-11: at most rangesPerSession responses of one session run at once, however
    many processes behind a load balancer serve them."""
    settings = contract_settings(sessions=1, ranges_per_session=2)
    first = await make_scheduler(settings)
    second = await another_process(first, settings)
    running = [
        await admitted(first, big(byte_range=chunk(0))),
        await admitted(second, big(byte_range=chunk(1))),
    ]
    refused = await rejected(second, big(byte_range=chunk(2)))
    assert refused.reason is RejectReason.RANGES_PER_SESSION
    refused = await rejected(first, big(byte_range=chunk(2)))
    assert refused.reason is RejectReason.RANGES_PER_SESSION
    await deliver(first, running[0])
    third = await admitted(second, big(byte_range=chunk(2)))
    for scheduler, decision in ((second, running[1]), (second, third)):
        await deliver(scheduler, decision)
