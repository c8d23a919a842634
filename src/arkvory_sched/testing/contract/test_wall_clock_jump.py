"""R-RES-5 on every implementation: a wall-clock step changes no queue decision.

The queue runs on the clock's monotonic side (in production, for PostgreSQL, the
database's time); only tickets and announced times are wall time. So when the wall
clock jumps (an NTP step, a manual change, a restored VM) a waiter that keeps polling
keeps its place, an active session is released when idle neither earlier nor later,
and the times announced to clients move with the new wall clock.
"""

from __future__ import annotations

import dataclasses

import pytest

from arkvory_sched import Admitted, DownloadScheduler, Interrupted, Queued
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import admitted, big, chunk, deliver, queued

pytestmark = pytest.mark.anyio

HOUR = 3600.0
HUGE = 100 * 1024**3  # the holder's download: its finish is minutes away at any rate
JUMPS = [pytest.param(HOUR, id="forward"), pytest.param(-HOUR, id="backward")]


async def _holder_and_waiter(
    scheduler: DownloadScheduler, clock: FakeClock
) -> tuple[Admitted, Queued]:
    """One slot held by a long response still streaming, one waiter that has polled once."""
    holder = await admitted(scheduler, dataclasses.replace(big("holder", "dl-h"), object_size=HUGE))
    await scheduler.tick()
    first = await queued(scheduler, big("alpha", "dl-a"))
    clock.advance(first.retry_after)
    return holder, await queued(scheduler, big("alpha", "dl-a", ticket=first.ticket))


@pytest.mark.parametrize("jump", JUMPS)
async def test_a_polling_waiter_keeps_its_place_across_a_wall_clock_jump(
    make_scheduler: MakeScheduler, clock: FakeClock, jump: float
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1))
    holder, polled = await _holder_and_waiter(scheduler, clock)
    clock.jump_wall(jump)
    for _ in range(3):  # the waiter polls on time; ticks run in between
        clock.advance(polled.retry_after)
        await scheduler.tick()
        polled = await queued(scheduler, big("alpha", "dl-a", ticket=polled.ticket))
        assert polled.position == 1, "a newcomer again: the waiter was expired"
    stats = await scheduler.stats()
    assert (stats.active, stats.waiting, stats.no_shows_total) == (1, 1, 0)
    await scheduler.report(holder.grant, Interrupted())


@pytest.mark.parametrize("jump", JUMPS)
async def test_an_idle_session_is_released_on_time_whichever_way_the_wall_clock_jumps(
    make_scheduler: MakeScheduler, clock: FakeClock, jump: float
) -> None:
    """Neither released early (forward) nor held past its idle time (backward)."""
    scheduler = await make_scheduler(contract_settings(sessions=1, idle_seconds=30.0))
    await deliver(scheduler, await admitted(scheduler, big(byte_range=chunk(0))))
    clock.jump_wall(jump)
    clock.advance(29.0)
    await scheduler.tick()
    stats = await scheduler.stats()
    assert (stats.active, stats.idle_releases_total) == (1, 0), "released early"
    clock.advance(2.0)
    await scheduler.tick()
    stats = await scheduler.stats()
    assert (stats.active, stats.idle_releases_total) == (0, 1), "held past its idle time"


@pytest.mark.parametrize("jump", JUMPS)
async def test_a_streaming_session_keeps_its_slot_across_a_wall_clock_jump(
    make_scheduler: MakeScheduler, clock: FakeClock, jump: float
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1, idle_seconds=30.0))
    streaming = await admitted(scheduler, big())
    clock.jump_wall(jump)
    clock.advance(1.0)
    await scheduler.tick()
    assert (await scheduler.stats()).active == 1
    await scheduler.report(streaming.grant, Interrupted())


@pytest.mark.parametrize("jump", JUMPS)
async def test_announced_times_follow_the_new_wall_clock(
    make_scheduler: MakeScheduler, clock: FakeClock, jump: float
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1))
    holder, before = await _holder_and_waiter(scheduler, clock)
    wall_before = clock.wall()
    clock.jump_wall(jump)
    after = await queued(scheduler, big("alpha", "dl-a", ticket=before.ticket))
    # No queue time passed: the same wait, announced on the new wall clock.
    assert before.starts_at - wall_before > 60.0, "the holder's download is long"
    assert after.starts_at - clock.wall() == pytest.approx(before.starts_at - wall_before)
    assert after.starts_latest - clock.wall() == pytest.approx(before.starts_latest - wall_before)
    assert clock.wall() <= after.starts_earliest <= after.starts_at
    assert clock.wall() < after.check_at <= clock.wall() + after.retry_after
    await scheduler.report(holder.grant, Interrupted())
