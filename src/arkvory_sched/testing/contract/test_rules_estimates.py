"""What the queue tells, and on which clock, on every implementation: estimate error per
wait (R-EST-4, R-VIS-3), the forecast of when the queue empties (R-VIS-2) and a wall-clock
jump (R-RES-5).

Estimates are deterministic here: ``bandwidth`` is a floor for the measured rate
(R-EST-1), set above anything the few delivered ranges could measure.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from arkvory_sched import Admitted, Delivered, DownloadRequest, PrincipalKind, Queued
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import MIB, admitted, big, chunk, deliver, keep_polling, queued, serve_next

pytestmark = pytest.mark.anyio

FAST = 1024 * MIB  # bytes/s: a 40 MiB download ends in 0.04 s of the estimate


async def test_estimate_error_is_scored_per_wait_also_for_a_resumed_session(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-EST-4: one observation per wait, each against the estimate of that wait: a
    download that paused and waited again is scored against its second estimate."""
    scheduler = await make_scheduler(contract_settings(sessions=1, bandwidth=FAST))
    holder = await admitted(scheduler, big("holder", "dl-h"))
    alpha = big("alpha", "dl-a", byte_range=chunk(0))
    await queued(scheduler, alpha)
    clock.advance(0.5)
    await scheduler.tick()
    await queued(scheduler, alpha)  # its first estimate: a moment from now
    await keep_polling(scheduler, clock, [alpha], 20.0, every=10.0)
    await deliver(scheduler, holder)
    _served, first = await serve_next(scheduler, clock, [alpha], complete=False)
    stats = await scheduler.stats()
    assert stats.estimate_error_seconds.count == 1
    assert stats.estimate_error_seconds.total == pytest.approx(21.0, abs=1.5)
    await deliver(scheduler, first)
    clock.advance(31.0)  # alpha pauses …
    await scheduler.tick()
    beta = await admitted(scheduler, big("beta", "dl-b"))  # … and someone else starts
    again = big("alpha", "dl-a", byte_range=chunk(1))
    await queued(scheduler, again)  # back: it waits again
    clock.advance(0.5)
    await scheduler.tick()
    await queued(scheduler, again)  # the second wait's first estimate
    await keep_polling(scheduler, clock, [again], 5.0, every=5.0)
    await deliver(scheduler, beta)
    await serve_next(scheduler, clock, [again])
    stats = await scheduler.stats()
    assert stats.estimate_error_seconds.count == 2
    assert stats.estimate_error_seconds.total == pytest.approx(21.0 + 5.5, abs=3.0)


async def test_estimate_error_is_scored_per_wait_also_for_a_yielded_session(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-EST-4: a session that waited, started, yielded to a person and waited again is
    scored twice, the second time against the estimate of its second wait."""
    scheduler = await make_scheduler(contract_settings(sessions=1, bandwidth=FAST))
    holder = await admitted(scheduler, big("holder", "dl-h"))
    size = 1024 * MIB

    def mirror(index: int) -> DownloadRequest:
        return big(
            "mirror", "dl-m", requested_class="bulk", size=size, byte_range=chunk(index, size)
        )

    first = mirror(0)
    await queued(scheduler, first)
    clock.advance(0.5)
    await scheduler.tick()
    await queued(scheduler, first)
    await keep_polling(scheduler, clock, [first], 10.0, every=10.0)
    await deliver(scheduler, holder)
    await serve_next(scheduler, clock, [first])  # error of the first wait: about 10.5 s
    person = big("ann", "dl-p", kind=PrincipalKind.PERSON)
    for index in range(1, 4):  # the mirror reads on for a minute while a person waits
        await deliver(scheduler, await admitted(scheduler, mirror(index)))
        if index == 1:
            await queued(scheduler, person)
        clock.advance(20.5)
        await scheduler.tick()
        if (await scheduler.stats()).preemptions_total:
            break
        await queued(scheduler, person)
    assert (await scheduler.stats()).preemptions_total == 1
    assert isinstance(await scheduler.admit(mirror(4)), Queued)  # yields
    started = await admitted(scheduler, person)
    before = (await scheduler.stats()).estimate_error_seconds  # its first wait, the person's
    clock.advance(0.5)
    await scheduler.tick()
    await queued(scheduler, mirror(4))  # the second wait's estimate
    await keep_polling(scheduler, clock, [mirror(4)], 10.0, every=10.0)
    await deliver(scheduler, started)
    clock.advance(0.5)
    await scheduler.tick()
    assert isinstance(await scheduler.admit(mirror(4)), Admitted)
    stats = await scheduler.stats()
    assert (before.count, stats.estimate_error_seconds.count) == (2, 3)
    # Started 11 s after its second wait's first estimate (not 80 s after its first's).
    assert stats.estimate_error_seconds.total - before.total == pytest.approx(11.0, abs=3.0)


async def test_forecast_counts_active_and_waiting_bytes(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-VIS-2: one slot at 10 MiB/s, one active download with 92 MiB left and five of
    100 MiB waiting: the queue empties in about a minute."""
    size = 100 * MIB
    scheduler = await make_scheduler(contract_settings(sessions=1, bandwidth=10 * MIB))
    running = await admitted(scheduler, big("holder", "dl-h", size=size, byte_range=chunk(0, size)))
    clock.advance(1.0)  # 8 MiB in a second: below the 10 MiB/s floor
    await deliver(scheduler, running)
    waiters = [big(f"waiter-{n}", "dl-w", size=size) for n in range(5)]
    for waiter in waiters:
        await queued(scheduler, waiter)
    await keep_polling(scheduler, clock, waiters, 1.0)
    expected = (5 * 100 + 92) / 10
    stats = await scheduler.stats()  # the waiters have just polled
    assert stats.waiting == 5
    assert stats.queue_empty_in_seconds == pytest.approx(expected, abs=1.0)
    await scheduler.tick()  # a scrape right after a tick says the same
    assert (await scheduler.stats()).queue_empty_in_seconds == pytest.approx(expected, abs=1.0)


async def test_a_long_get_s_progress_moves_the_waiter_s_start_earlier(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-EST-1 (issue #28): bytes in flight count. A plain GET (curl: one response, no
    download id) holds the only slot for minutes; the bytes it has sent are no longer to
    send, so a waiter's announced start moves earlier when the response reports them,
    not only when it ends. A store may count them at a bounded cadence (PostgreSQL:
    about a second, ADR 0033); the clock here moves past it before the waiter asks."""
    rate = 128 * MIB  # the link's configured rate, which the GET keeps to
    size = 100 * rate  # 100 s of it
    scheduler = await make_scheduler(contract_settings(sessions=1, bandwidth=rate))
    holder = await admitted(scheduler, big("curl", None, size=size))
    clock.advance(48.5)
    await scheduler.tick()
    waiter = big("wget", None)  # no download id either: every poll is answered afresh
    await queued(scheduler, waiter)
    clock.advance(1.5)
    await scheduler.tick()
    before = await queued(scheduler, waiter)  # the whole download still to send: 100 s
    await scheduler.progress(holder.grant, 50 * rate)  # its first 50 s, still running
    clock.advance(1.5)
    await scheduler.tick()
    after = await queued(scheduler, waiter)
    # Half of it sent: the slot frees 50 s sooner, less the 1.5 s that passed.
    assert after.starts_at < before.starts_at - 30.0
    await scheduler.report(holder.grant, Delivered(None))


async def test_a_waiter_answered_after_others_started_since_the_tick_keeps_its_own_start(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """Issue #28: the tick schedules the waiters; the first two take both slots before
    the next tick. The third now has nobody ahead, but both slots are held for 2 s: it
    starts then, not now (a count of waiters ahead read against the tick's schedule
    told it "now", the start of one who stood a round before it)."""
    rate = 64 * MIB  # two slots: 32 MiB/s each
    scheduler = await make_scheduler(contract_settings(sessions=2, max_downloads=2, bandwidth=rate))
    holders = [
        await admitted(scheduler, big(f"holder-{n}", f"dl-h{n}", size=32 * MIB)) for n in range(2)
    ]
    waiters = [big(f"waiter-{n}", f"dl-w{n}", size=64 * MIB) for n in range(3)]
    told = [await queued(scheduler, waiter) for waiter in waiters]
    waiters = [
        replace(waiter, ticket=answer.ticket) for waiter, answer in zip(waiters, told, strict=True)
    ]
    clock.advance(1.0)  # the holders' 32 MiB at 32 MiB/s
    for holder in holders:
        await deliver(scheduler, holder)
    await scheduler.tick()  # schedules the waiters: two now, the third in 2 s
    for waiter in waiters[:2]:
        await admitted(scheduler, waiter)
    clock.advance(0.1)
    third = await queued(scheduler, waiters[2])
    assert third.position == 1
    wait = third.starts_at - clock.wall()
    assert wait == pytest.approx(1.9, abs=0.5), f"told to start in {wait:.1f} s"
    assert third.starts_earliest <= clock.wall() + 1.9 <= third.starts_latest


async def test_a_newcomer_between_two_ticks_is_told_the_start_of_the_place_it_takes(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """Issue #28: the tick schedules the one waiter, which takes the slot that frees in
    1 s and holds it for 2 s. A newcomer before the next tick stands behind it: it
    starts when that slot frees again, in 3 s, not when the other slot does, in 10 s
    (read off the finish table, a newcomer got the second slot's end plus its rounds)."""
    rate = 64 * MIB  # two slots: 32 MiB/s each
    scheduler = await make_scheduler(contract_settings(sessions=2, max_downloads=2, bandwidth=rate))
    soon = await admitted(scheduler, big("soon", "dl-soon", size=32 * MIB))  # ends in 1 s
    late = await admitted(scheduler, big("late", "dl-late", size=320 * MIB))  # ends in 10 s
    await queued(scheduler, big("first", "dl-first", size=64 * MIB))
    await scheduler.tick()
    newcomer = await queued(scheduler, big("newcomer", "dl-new", size=64 * MIB))
    wait = newcomer.starts_at - clock.wall()
    assert wait == pytest.approx(3.0, abs=0.5), f"told to start in {wait:.1f} s"
    for holder in (soon, late):
        await scheduler.report(holder.grant, Delivered(None))


@pytest.mark.parametrize("jump", [3600.0, -3600.0], ids=["forward", "backward"])
async def test_wall_clock_jump_neither_expires_waiters_nor_holds_or_frees_slots(
    make_scheduler: MakeScheduler, clock: FakeClock, jump: float
) -> None:
    """R-RES-5: the queue runs on the monotonic clock; an hour's step of the wall clock
    changes nothing, and idle and no-show times still count in queue time."""
    scheduler = await make_scheduler(contract_settings(sessions=1, idle_seconds=30.0))
    holder = await admitted(scheduler, big("holder", "dl-h", byte_range=chunk(0)))
    await deliver(scheduler, holder)
    waiter = big("alpha", "dl-a")
    await queued(scheduler, waiter)
    await keep_polling(scheduler, clock, [waiter], 10.0, every=5.0)
    clock.jump_wall(jump)
    await scheduler.tick()
    stats = await scheduler.stats()
    assert (stats.active, stats.waiting, stats.paused) == (1, 1, 0)
    assert (stats.no_shows_total, stats.idle_releases_total) == (0, 0)
    answer = await queued(scheduler, waiter)
    assert answer.check_at == pytest.approx(clock.wall() + answer.retry_after, abs=1.0)
    # 31 s of queue time after the holder's last range: its slot is free, to the waiter.
    clock.advance(21.5)
    _served, started = await serve_next(scheduler, clock, [waiter], complete=False)
    stats = await scheduler.stats()
    assert (stats.active, stats.paused, stats.idle_releases_total) == (1, 1, 1)
    assert stats.no_shows_total == 0
    await deliver(scheduler, started)
