"""Settings changed at run time, on every implementation: a strategy switch with waiters
and with held requests (R-STRAT-4) and ``configure`` while sessions wait (R-SET-3)."""

from __future__ import annotations

import anyio
import pytest

from arkvory_sched import Admitted, Decision, Queued, Strategy
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import MIB, admitted, big, chunk, deliver, keep_polling, queued, serve_next

pytestmark = pytest.mark.anyio

GIB = 1024 * MIB


async def test_strategy_switch_reorders_waiters_and_keeps_active_sessions(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-STRAT-4: a switch applies to the next decisions: nobody waiting is lost, the
    waiters are served in the new order, and the active session keeps its slot."""
    settings = contract_settings(sessions=1)
    scheduler = await make_scheduler(settings)
    holder = await admitted(scheduler, big("holder", "dl-h", byte_range=chunk(0)))
    large = big("large", "dl-l", size=8 * GIB)
    medium = big("medium", "dl-m", size=1 * GIB)
    small = big("small", "dl-s", size=64 * MIB)
    for waiter in (large, medium, small):  # arrival order: the largest first
        await queued(scheduler, waiter)
        clock.advance(0.1)
    await keep_polling(scheduler, clock, [large, medium, small], 1.0)
    await scheduler.configure(settings.with_changes(strategy=Strategy.SMALLEST_FIRST))
    assert (await scheduler.stats()).waiting == 3
    await deliver(scheduler, holder)
    for index in range(1, 5):  # the active download runs to its end
        further = await admitted(scheduler, big("holder", "dl-h", byte_range=chunk(index)))
        assert further.admission == "session"
        await deliver(scheduler, further)
    assert (await scheduler.stats()).completed_total == 1
    waiting = [large, medium, small]
    order = [(await serve_next(scheduler, clock, waiting))[0] for _ in range(3)]
    assert order == [small, medium, large]


async def test_switch_to_shared_sends_a_waiting_download_per_request(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-STRAT-4, R-STRAT-3: after a switch to ``shared`` a waiting (or held) download
    asks again and is admitted per request, instead of waiting for a session slot; the
    active session is not interrupted."""
    settings = contract_settings(sessions=1)
    scheduler = await make_scheduler(settings)
    holder = await admitted(scheduler, big("holder", "dl-h", byte_range=chunk(0)))
    held = big("curl", None, address="198.51.100.7")  # a tool without an id: held
    await queued(scheduler, held)
    woke: list[float] = []

    async def hold() -> None:
        started = anyio.current_time()
        await scheduler.wait_for_change(5.0)
        woke.append(anyio.current_time() - started)

    async with anyio.create_task_group() as group:
        group.start_soon(hold)
        await anyio.sleep(0.05)
        await scheduler.configure(settings.with_changes(strategy=Strategy.SHARED))
    assert woke and woke[0] < 2.5, "the held request was not woken by the switch"
    again = await admitted(scheduler, held)
    assert again.admission == "per-request"
    further = await admitted(scheduler, big("holder", "dl-h", byte_range=chunk(1)))
    assert further.admission == "session"
    for decision in (holder, again, further):
        await deliver(scheduler, decision)


async def test_raised_threshold_sends_a_waiting_download_per_request(
    make_scheduler: MakeScheduler,
) -> None:
    """R-STRAT-4: a raised ``sessionMinBytes`` makes a waiting download small."""
    settings = contract_settings(sessions=1)
    scheduler = await make_scheduler(settings)
    holder = await admitted(scheduler, big("holder", "dl-h"))
    waiting = big("alpha", "dl-a")
    await queued(scheduler, waiting)
    await scheduler.configure(settings.with_changes(session_min_bytes=64 * MIB))
    again = await admitted(scheduler, waiting)
    assert again.admission == "per-request"
    for decision in (holder, again):
        await deliver(scheduler, decision)


async def test_switch_from_shared_keeps_held_per_request_waiters(
    make_scheduler: MakeScheduler,
) -> None:
    """R-STRAT-4: requests held for a per-request place when the strategy switches back
    to sessions are neither lost nor stuck: a freed place still goes to them, and every
    counter returns to zero."""
    settings = contract_settings(
        strategy=Strategy.SHARED, max_downloads=1, transfer_queue_wait_seconds=5.0
    )
    scheduler = await make_scheduler(settings)
    first = await admitted(scheduler, big("alpha", "dl-a"))
    assert first.admission == "per-request"
    results: list[Decision] = []

    async def second() -> None:
        results.append(await scheduler.admit(big("beta", "dl-b")))

    async with anyio.create_task_group() as group:
        group.start_soon(second)
        await anyio.sleep(0.05)
        assert (await scheduler.stats()).request_waiting == 1
        await scheduler.configure(settings.with_changes(strategy=Strategy.ORDERED))
        await deliver(scheduler, first)
    [decision] = results
    assert isinstance(decision, Admitted), decision
    assert decision.admission == "per-request"
    await deliver(scheduler, decision)
    stats = await scheduler.stats()
    assert (stats.request_active, stats.request_waiting, stats.active) == (0, 0, 0)
    # The next big download is a session again.
    after = await admitted(scheduler, big("gamma", "dl-g"))
    assert after.admission == "session"
    await deliver(scheduler, after)


async def test_lowering_sessions_grants_nothing_above_the_new_limit(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-SET-3, R-PG-2: active sessions keep their slots; nobody new starts until the
    active count is below the new limit."""
    settings = contract_settings(sessions=3, per_principal=3)
    scheduler = await make_scheduler(settings)
    running = [await admitted(scheduler, big(f"agent-{n}", "dl-a")) for n in range(3)]
    await scheduler.configure(settings.with_changes(sessions=1))
    await deliver(scheduler, running[0])  # slot 0 is free; two still run
    clock.advance(0.5)
    await scheduler.tick()
    newcomer = big("late", "dl-l")
    assert isinstance(await scheduler.admit(newcomer), Queued)
    await keep_polling(scheduler, clock, [newcomer], 5.0, every=1.0)
    assert (await scheduler.stats()).active == 2
    await deliver(scheduler, running[1])
    await keep_polling(scheduler, clock, [newcomer], 2.0, every=1.0)
    await deliver(scheduler, running[2])
    _served, started = await serve_next(scheduler, clock, [newcomer], complete=False)
    assert (await scheduler.stats()).active == 1
    await deliver(scheduler, started)


async def test_raising_sessions_grants_more_to_waiters(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """R-SET-3: more slots apply from the next decision: the waiters start."""
    settings = contract_settings(sessions=1)
    scheduler = await make_scheduler(settings)
    holder = await admitted(scheduler, big("holder", "dl-h"))
    waiters = [big("alpha", "dl-a"), big("beta", "dl-b")]
    for waiter in waiters:
        await queued(scheduler, waiter)
    await keep_polling(scheduler, clock, waiters, 1.0)
    await scheduler.configure(settings.with_changes(sessions=3, per_principal=3))
    clock.advance(0.5)
    await scheduler.tick()
    started = [await admitted(scheduler, waiter) for waiter in waiters]
    stats = await scheduler.stats()
    assert (stats.active, stats.waiting, stats.sessions_limit) == (3, 0, 3)
    for decision in (holder, *started):
        await deliver(scheduler, decision)
