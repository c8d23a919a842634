"""Slots left free while someone waits, on every store (issue #28).

A free slot a waiter could take, while it has not come for it, is link time nobody
uses. Every store counts it in ``stats().idle_slots`` (and the queue state it is part
of): the slot-seconds, the free slots now, the current or last stretch and the longest.
A store may count from one tick to the next (the shared queue's leader does), so each
test ticks when a slot frees or is taken, and the fake clock moves only between ticks.
"""

from __future__ import annotations

import pytest

from arkvory_sched import DownloadScheduler, IdleSlots
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import admitted, big, deliver, keep_polling, queued

pytestmark = pytest.mark.anyio


async def _idle(scheduler: DownloadScheduler) -> IdleSlots:
    stats = await scheduler.stats()
    state = await scheduler.queue_state()
    assert state.stats.idle_slots == stats.idle_slots  # the operator's view says the same
    return stats.idle_slots


async def _pass(scheduler: DownloadScheduler, clock: FakeClock, seconds: float) -> None:
    """Let ``seconds`` pass between two ticks."""
    await scheduler.tick()
    clock.advance(seconds)
    await scheduler.tick()


async def test_idle_slot_seconds_grow_while_a_waiter_waits_with_a_slot_free(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """One slot. Held while bob waits: nothing idles. Freed: it idles 2 s until bob
    comes for it, then nothing more; the stretch was 2 s."""
    scheduler = await make_scheduler(contract_settings(sessions=1))
    holder = await admitted(scheduler, big("holder", "dl-h"))
    bob = big("bob", "dl-b", object_id="b.iso")
    await queued(scheduler, bob)
    await _pass(scheduler, clock, 2.0)
    assert await _idle(scheduler) == IdleSlots()

    await deliver(scheduler, holder)  # the slot frees, bob waits
    await _pass(scheduler, clock, 2.0)
    idle = await _idle(scheduler)
    assert idle.slots == 1
    assert idle.slot_seconds == pytest.approx(2.0)
    assert idle.stretch_seconds == pytest.approx(2.0)
    assert idle.longest_stretch_seconds == pytest.approx(2.0)

    await admitted(scheduler, bob)  # marked by the tick, he takes the free slot
    await _pass(scheduler, clock, 3.0)
    idle = await _idle(scheduler)
    assert idle.slots == 0
    assert idle.slot_seconds == pytest.approx(2.0)
    assert idle.stretch_seconds == pytest.approx(2.0)  # the last stretch
    assert idle.longest_stretch_seconds == pytest.approx(2.0)


async def test_two_free_slots_idle_twice_as_fast(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=2))
    first = await admitted(scheduler, big("first", "dl-1", object_id="1.iso"))
    second = await admitted(scheduler, big("second", "dl-2", object_id="2.iso"))
    await queued(scheduler, big("carol", "dl-c", object_id="c.iso"))
    await deliver(scheduler, first)
    await deliver(scheduler, second)
    await _pass(scheduler, clock, 1.5)
    idle = await _idle(scheduler)
    assert idle.slots == 2
    assert idle.slot_seconds == pytest.approx(3.0)
    assert idle.stretch_seconds == pytest.approx(1.5)


async def test_no_idle_slot_seconds_without_waiters_or_with_every_slot_held(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """A free slot nobody waits for is not idle in this sense, nor is a queue whose
    slots are all held."""
    scheduler = await make_scheduler(contract_settings(sessions=2))
    await admitted(scheduler, big("first", "dl-1", object_id="1.iso"))
    await _pass(scheduler, clock, 5.0)  # one slot free, nobody waits
    assert await _idle(scheduler) == IdleSlots()

    await admitted(scheduler, big("second", "dl-2", object_id="2.iso"))
    waiter = big("carol", "dl-c", object_id="c.iso")
    await queued(scheduler, waiter)
    await keep_polling(scheduler, clock, [waiter], 30.0, every=10.0)  # every slot held
    assert await _idle(scheduler) == IdleSlots()
