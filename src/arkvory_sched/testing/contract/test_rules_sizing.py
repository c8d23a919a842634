"""Slots that size themselves, on every implementation (issue #30, ADR 0038).

* Under ``min_sessions`` the count in force starts at the minimum; while someone waits,
  every slot is held and the link carries less than it can, a step opens the slots
  the link's room would take at what a held slot carries, at most doubling the count,
  never above ``sessions``.
* A saturated link lets the count fall as sessions finish: no running download loses
  its slot, and nobody is admitted while more are held than the count.
* Without a configured rate, a link that carries what it was measured at while equal
  slots are all held and someone waits is probed with slots more.
* A fixed count (no ``min_sessions``) reports no sizing and keeps its count.

Stores may size the slots at the tick (PostgreSQL's leader): each test ticks as time
passes, as a running server does, and reports what the holders send.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from arkvory_sched import Admitted, Delivered, DownloadScheduler, Queued
from arkvory_sched.policy import STEP_SECONDS, TURN_SECONDS
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import MIB, admitted, big, queued

pytestmark = pytest.mark.anyio

LINK = 10 * MIB
SIZE = 4_000 * MIB  # holders that outlast every test


async def _run(
    scheduler: DownloadScheduler,
    clock: FakeClock,
    holders: list[Admitted],
    seconds: float,
    each_per_second: float,
) -> None:
    """``seconds`` of ticks every half second, each holder sending ``each_per_second``."""
    for _ in range(round(seconds * 2)):
        clock.advance(0.5)
        for holder in holders:
            await scheduler.progress(holder.grant, round(each_per_second / 2))
        await scheduler.tick()


async def _finish(scheduler: DownloadScheduler, holders: list[Admitted]) -> None:
    """Every holder's download delivered: the test leaves no slot held."""
    for holder in holders:
        await scheduler.report(holder.grant, Delivered(None))


async def _sized(
    make_scheduler: MakeScheduler, most: int, holders: int
) -> tuple[DownloadScheduler, list[Admitted]]:
    """A scheduler sizing its slots from 2 to ``most``, ticked once, and ``holders``
    downloads holding slots."""
    settings = contract_settings(sessions=most, bandwidth=LINK).with_changes(min_sessions=2)
    scheduler = await make_scheduler(settings)
    await scheduler.tick()
    held = [await admitted(scheduler, big(f"h-{n}", f"dl-h{n}", size=SIZE)) for n in range(holders)]
    return scheduler, held


async def test_slots_open_for_clients_that_leave_the_link_room(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    scheduler, holders = await _sized(make_scheduler, 5, 2)
    stats = await scheduler.stats()
    assert stats.sessions_limit == 2
    assert stats.slot_sizing is not None
    assert (stats.slot_sizing.minimum, stats.slot_sizing.maximum) == (2, 5)
    waiters = [big(f"waiter-{n}", f"dl-w{n}", size=SIZE) for n in range(4)]
    told = [await queued(scheduler, waiter) for waiter in waiters]
    # Two slow clients carry a tenth of the link while four wait: a step opens at least
    # one slot, and at most doubles the count (the room would take sixteen such slots).
    await _run(scheduler, clock, holders, 2 * STEP_SECONDS + 1.0, LINK / 20)
    stats = await scheduler.stats()
    assert 3 <= stats.sessions_limit <= 4, stats.sessions_limit
    assert stats.slot_sizing is not None and stats.slot_sizing.reason == "spare-link"
    # Each slot opened is taken, and the count climbs on to the maximum, never above.
    for waiter, ticket in zip(waiters[:3], told[:3], strict=True):
        for _ in range(8):
            if (await scheduler.stats()).sessions_limit > len(holders):
                break
            await _run(scheduler, clock, holders, STEP_SECONDS, LINK / 20)
        assert (await scheduler.stats()).sessions_limit <= 5
        taken = await scheduler.admit(replace(waiter, ticket=ticket.ticket))
        assert isinstance(taken, Admitted), taken
        holders.append(taken)
    await _run(scheduler, clock, holders, 4 * STEP_SECONDS, LINK / 20)
    assert (await scheduler.stats()).sessions_limit == 5
    fourth = await scheduler.admit(replace(waiters[3], ticket=told[3].ticket))
    assert isinstance(fourth, Queued), fourth
    await _finish(scheduler, holders)


async def test_while_the_count_climbs_the_waiters_for_its_next_slots_come_soon(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """Told their start on the count in force, waiters beyond it came back many seconds
    after a step had opened slots for them (issue #30: 9 s in the half-slow crowd). While
    the count climbs, those who could take the next step's slots ask again within
    2 s; the waiters beyond keep their pace."""
    scheduler, holders = await _sized(make_scheduler, 8, 2)
    waiters = [big(f"waiter-{n}", f"dl-w{n}", size=SIZE) for n in range(14)]
    tickets = [(await queued(scheduler, waiter)).ticket for waiter in waiters]
    await _run(scheduler, clock, holders, 2 * STEP_SECONDS + 1.0, LINK / 20)
    count = (await scheduler.stats()).sessions_limit
    assert 3 <= count <= 4, count  # a spare step, at most doubling
    rising = min(count, 8 - count)
    told: list[Queued] = []
    for waiter, ticket in zip(waiters, tickets, strict=True):
        answer = await scheduler.admit(replace(waiter, ticket=ticket))
        if isinstance(answer, Admitted):  # the slots the step opened
            holders.append(answer)
        else:
            assert isinstance(answer, Queued), answer
            told.append(answer)
    assert len(holders) == count
    for answer in told:
        assert answer.position is not None
        ahead = answer.position - 1
        if ahead < count + rising:
            assert answer.retry_after <= 2, answer
        else:
            assert answer.retry_after > 2, answer
    assert told[-1].position is not None and told[-1].position > count + rising
    await _finish(scheduler, holders)


async def test_a_cold_server_without_a_rate_sizes_on_what_the_link_has_carried(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """No rate configured and too few busy seconds to read one: the most the link has
    carried in a second is a floor of what it can, and slots open when the held ones
    carry far less than that (a fast crowd without the rate told waited 6 s for its
    first step, issue #30)."""
    settings = contract_settings(sessions=4).with_changes(min_sessions=2)
    scheduler = await make_scheduler(settings)
    await scheduler.tick()
    holders = [await admitted(scheduler, big(f"h-{n}", f"dl-h{n}", size=SIZE)) for n in range(2)]
    for n in range(3):
        await queued(scheduler, big(f"waiter-{n}", f"dl-w{n}", size=SIZE))
    # The first second carries the link's rate; then the holders slow to a twentieth.
    await _run(scheduler, clock, holders, 1.0, LINK / 2)
    await _run(scheduler, clock, holders, 1.5, LINK / 40)
    stats = await scheduler.stats()
    assert stats.sessions_limit >= 3, stats.sessions_limit
    assert stats.slot_sizing is not None and stats.slot_sizing.reason == "spare-link"
    await _finish(scheduler, holders)


async def test_without_a_rate_a_link_full_of_equally_slow_slots_is_probed(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """No rate configured, and every client slow: the link is measured at what they
    take, and reads full. Slots more show whether it is: the count rises for probes
    as they pay (issue #30: the half-slow crowd on PostgreSQL, its first clients slow,
    stayed at four slots for 24 s, at 2.05 times the oracle's mean)."""
    settings = contract_settings(sessions=8).with_changes(min_sessions=2)
    scheduler = await make_scheduler(settings)
    await scheduler.tick()
    holders = [await admitted(scheduler, big(f"h-{n}", f"dl-h{n}", size=SIZE)) for n in range(2)]
    waiters = [big(f"waiter-{n}", f"dl-w{n}", size=SIZE) for n in range(5)]
    tickets = [(await queued(scheduler, waiter)).ticket for waiter in waiters]
    reasons: set[str | None] = set()
    for _ in range(12):
        await _run(scheduler, clock, holders, STEP_SECONDS, LINK / 20)
        stats = await scheduler.stats()
        assert stats.slot_sizing is not None
        reasons.add(stats.slot_sizing.reason)
        for n, waiter in enumerate(waiters):  # a waiter takes a slot that opened
            if tickets[n] and len(holders) < stats.sessions_limit:
                taken = await scheduler.admit(replace(waiter, ticket=tickets[n]))
                if isinstance(taken, Admitted):
                    holders.append(taken)
                    tickets[n] = ""
    assert "probing" in reasons, reasons
    assert len(holders) >= 5, len(holders)
    await _finish(scheduler, holders)


async def test_a_saturated_link_lets_the_count_fall_as_sessions_finish(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    scheduler, holders = await _sized(make_scheduler, 3, 2)
    waiter = big("waiter", "dl-w", size=SIZE)
    told = await queued(scheduler, waiter)
    await _run(scheduler, clock, holders, 2 * STEP_SECONDS + 1.0, LINK / 20)
    holders.append(await admitted(scheduler, replace(waiter, ticket=told.ticket)))
    assert (await scheduler.stats()).sessions_limit == 3
    late = big("late", "dl-late", size=SIZE)
    late_told = await queued(scheduler, late)
    # The clients speed up and fill the link; a minute after the last reading that saw
    # the first two slow (their paces are over the time since they took their slots, and
    # a store may read them as of its last write of bytes in flight, a second back) the
    # count falls by one, and all three keep their slots.
    await _run(scheduler, clock, holders, TURN_SECONDS + 3 * STEP_SECONDS, LINK / 3)
    stats = await scheduler.stats()
    assert stats.sessions_limit == 2, stats.sessions_limit
    assert stats.active == 3
    # Fallen for a saturated link, and then at its minimum on the next reading.
    assert stats.slot_sizing is not None
    assert stats.slot_sizing.reason in ("saturated", "at-minimum"), stats.slot_sizing
    for holder in holders:
        await scheduler.progress(holder.grant, MIB)  # still theirs
    # One finishes: two held, two in force, nobody admitted.
    await scheduler.report(holders.pop().grant, Delivered(None))
    await _run(scheduler, clock, holders, 1.0, LINK / 2)
    refused = await scheduler.admit(replace(late, ticket=late_told.ticket))
    assert isinstance(refused, Queued), refused
    await _finish(scheduler, holders)


async def test_a_fixed_count_reports_no_sizing_and_keeps_its_count(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=3, bandwidth=LINK))
    holders = [await admitted(scheduler, big(f"slow-{n}", f"dl-s{n}", size=SIZE)) for n in range(3)]
    await queued(scheduler, big("waiter", "dl-w", size=SIZE))
    await _run(scheduler, clock, holders, 4 * STEP_SECONDS, LINK / 20)
    stats = await scheduler.stats()
    assert (stats.sessions_limit, stats.slot_sizing) == (3, None)
    await _finish(scheduler, holders)
