"""The ``DownloadScheduler`` contract, run against every implementation: the real waits.

The few waits that are real time by the contract (``wait_for_change``, per-request
waiting) use short timeouts and are measured with ``anyio.current_time``; ``close``
wakes them. Only the async port and the :class:`FakeClock` are used here.
"""

from __future__ import annotations

import anyio
import pytest

from arkvory_sched import (
    Admitted,
    Decision,
    DownloadRequest,
    DownloadScheduler,
    PrincipalKind,
    Rejected,
    RejectReason,
)
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import (
    admitted,
    big,
    chunk,
    deliver,
    queued,
    rejected,
    small,
)

pytestmark = pytest.mark.anyio


# ---------------------------------------------------------------------- wait_for_change


async def test_wait_for_change_returns_early_when_a_slot_frees(
    make_scheduler: MakeScheduler,
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1))
    holder = await admitted(scheduler, big("holder"))
    await queued(scheduler, big("alpha", "dl-a"))
    elapsed: list[float] = []

    async def waiter() -> None:
        started = anyio.current_time()
        await scheduler.wait_for_change(5.0)
        elapsed.append(anyio.current_time() - started)

    async with anyio.create_task_group() as group:
        group.start_soon(waiter)
        await anyio.sleep(0.05)
        await deliver(scheduler, holder)
    assert len(elapsed) == 1
    assert 0.04 <= elapsed[0] < 2.5


async def test_wait_for_change_returns_after_the_timeout(scheduler: DownloadScheduler) -> None:
    started = anyio.current_time()
    await scheduler.wait_for_change(0.05)
    elapsed = anyio.current_time() - started
    assert 0.04 <= elapsed < 1.0
    started = anyio.current_time()
    await scheduler.wait_for_change(0.0)
    assert anyio.current_time() - started < 0.5


async def test_wait_for_change_returns_on_close(scheduler: DownloadScheduler) -> None:
    elapsed: list[float] = []

    async def waiter() -> None:
        started = anyio.current_time()
        await scheduler.wait_for_change(5.0)
        elapsed.append(anyio.current_time() - started)

    async with anyio.create_task_group() as group:
        group.start_soon(waiter)
        await anyio.sleep(0.05)
        await scheduler.close()
    assert len(elapsed) == 1
    assert elapsed[0] < 2.5


# ---------------------------------------------------------------------- close


async def test_close_refuses_new_and_waiting_but_finishes_active(
    make_scheduler: MakeScheduler,
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1))
    active = await admitted(scheduler, big("holder", byte_range=chunk(0)))
    await deliver(scheduler, active)
    waiting = await queued(scheduler, big("alpha", "dl-a"))
    await scheduler.close()
    assert (await scheduler.stats()).closed

    returning = await rejected(scheduler, big("alpha", "dl-a", ticket=waiting.ticket))
    assert returning.reason is RejectReason.SHUTTING_DOWN
    newcomer = await rejected(scheduler, big("beta", "dl-b"))
    assert newcomer.reason is RejectReason.SHUTTING_DOWN
    tiny = await rejected(scheduler, small("gamma"))
    assert tiny.reason is RejectReason.SHUTTING_DOWN

    # R-RES-4: active downloads are finished.
    for index in range(1, 5):
        decision = await admitted(scheduler, big("holder", byte_range=chunk(index)))
        assert decision.admission == "session"
        await deliver(scheduler, decision)
    stats = await scheduler.stats()
    assert stats.active == 0
    assert stats.completed_total == 1


@pytest.mark.parametrize("preempted_before_close", [False, True])
async def test_close_lets_an_active_download_finish_even_if_preemption_was_due(
    make_scheduler: MakeScheduler, clock: FakeClock, preempted_before_close: bool
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1, preempt=True))

    def mirror(index: int) -> DownloadRequest:
        return big("mirror", "dl-m", requested_class="bulk", byte_range=chunk(index))

    # A bulk protocol client holds the only slot for over a minute …
    for index in range(2):
        decision = await admitted(scheduler, mirror(index))
        await deliver(scheduler, decision)
        clock.advance(25.0)
    # … while a person waits: the textbook case for preemption (R-PREEMPT-1).
    person = big("ann", "dl-p", kind=PrincipalKind.PERSON)
    await queued(scheduler, person)
    decision = await admitted(scheduler, mirror(2))
    await deliver(scheduler, decision)
    clock.advance(15.0)
    if preempted_before_close:
        await scheduler.tick()
    await scheduler.close()
    await scheduler.tick()

    # R-RES-4: the active download is finished, not sent back to a closed queue.
    for index in range(3, 5):
        decision = await admitted(scheduler, mirror(index))
        assert decision.admission == "session"
        await deliver(scheduler, decision)
    stats = await scheduler.stats()
    assert (stats.active, stats.completed_total) == (0, 1)
    refused = await rejected(scheduler, person)
    assert refused.reason is RejectReason.SHUTTING_DOWN


async def test_close_refuses_held_per_request_waiters(make_scheduler: MakeScheduler) -> None:
    scheduler = await make_scheduler(
        contract_settings(max_downloads=1, transfer_queue_wait_seconds=5.0)
    )
    holder = await admitted(scheduler, small("alpha"))
    results: list[tuple[Decision, float]] = []

    async def second() -> None:
        started = anyio.current_time()
        decision = await scheduler.admit(small("beta"))
        results.append((decision, anyio.current_time() - started))

    async with anyio.create_task_group() as group:
        group.start_soon(second)
        await anyio.sleep(0.05)
        assert (await scheduler.stats()).request_waiting == 1
        await scheduler.close()
    [(decision, elapsed)] = results
    assert isinstance(decision, Rejected), decision
    assert decision.reason is RejectReason.SHUTTING_DOWN
    assert elapsed < 2.5
    stats = await scheduler.stats()
    assert (stats.request_active, stats.request_waiting) == (1, 0)
    await deliver(scheduler, holder)
    assert (await scheduler.stats()).request_active == 0


# ---------------------------------------------------------------------- per-request waits


async def test_per_request_waits_for_a_place_then_expires(make_scheduler: MakeScheduler) -> None:
    scheduler = await make_scheduler(
        contract_settings(max_downloads=1, transfer_queue_wait_seconds=0.2)
    )
    first = await admitted(scheduler, small("alpha"))
    results: list[tuple[Decision, float]] = []

    async def ask(principal: str) -> None:
        started = anyio.current_time()
        decision = await scheduler.admit(small(principal))
        results.append((decision, anyio.current_time() - started))

    async with anyio.create_task_group() as group:
        group.start_soon(ask, "beta")
        await anyio.sleep(0.05)
        assert (await scheduler.stats()).request_waiting == 1
        await deliver(scheduler, first)
    [(second, waited)] = results
    assert isinstance(second, Admitted), second
    assert second.admission == "per-request"
    assert waited < 0.2

    results.clear()
    await ask("gamma")
    [(third, waited)] = results
    assert isinstance(third, Rejected), third
    assert third.reason is RejectReason.REQUEST_WAIT_EXPIRED
    assert third.retry_after >= 1
    assert 0.15 <= waited < 2.0
    stats = await scheduler.stats()
    assert (stats.request_active, stats.request_waiting) == (1, 0)
    await deliver(scheduler, second)
    assert (await scheduler.stats()).request_active == 0


async def test_cancelled_per_request_wait_takes_no_place(make_scheduler: MakeScheduler) -> None:
    scheduler = await make_scheduler(
        contract_settings(max_downloads=1, transfer_queue_wait_seconds=5.0)
    )
    first = await admitted(scheduler, small("alpha"))
    with anyio.move_on_after(0.05):
        await scheduler.admit(small("beta"))
    assert (await scheduler.stats()).request_waiting == 0
    await deliver(scheduler, first)
    assert (await scheduler.stats()).request_active == 0
    after = await admitted(scheduler, small("gamma"))
    await deliver(scheduler, after)


async def test_per_request_waiter_cancelled_as_it_is_promoted_gives_the_place_back(
    make_scheduler: MakeScheduler,
) -> None:
    scheduler = await make_scheduler(
        contract_settings(max_downloads=1, transfer_queue_wait_seconds=5.0)
    )
    first = await admitted(scheduler, small("alpha"))
    results: list[Decision] = []
    scope = anyio.CancelScope()

    async def second() -> None:
        with scope:
            results.append(await scheduler.admit(small("beta")))

    async with anyio.create_task_group() as group:
        group.start_soon(second)
        await anyio.sleep(0.05)
        scope.cancel()  # the client goes away …
        await deliver(scheduler, first)  # … while its wait is being promoted into a place
    for decision in results:  # it may have been answered first; then it reports
        if isinstance(decision, Admitted):
            await deliver(scheduler, decision)
    stats = await scheduler.stats()
    assert (stats.request_active, stats.request_waiting) == (0, 0)
    after = await admitted(scheduler, small("gamma"))
    await deliver(scheduler, after)
