"""Class aging (R-CLASS-4) on every implementation, under ``smallest-first`` too.

A waiter moves one class up per ``agingMinutes`` of waiting, never above ``release``,
and not at all when aging is off. The scenarios make the order between classes favour
the other waiter, so only aging can put the old waiter first: the slot freed at the
end is marked for the first waiter in service order and for a back-up, and a back-up
that polls within the grace period does not take it.
"""

from __future__ import annotations

import pytest

from arkvory_sched import (
    Admitted,
    DownloadClass,
    DownloadRequest,
    DownloadScheduler,
    PrincipalKind,
    Queued,
    Strategy,
)
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import admitted, big, deliver, queued

pytestmark = pytest.mark.anyio


async def wait_polling(
    scheduler: DownloadScheduler,
    clock: FakeClock,
    waiters: list[DownloadRequest],
    seconds: float,
) -> None:
    """Let ``seconds`` pass, every waiter polling and the scheduler ticking every 10 s."""
    for _ in range(int(seconds // 10)):
        clock.advance(10)
        await scheduler.tick()
        for request in waiters:
            await queued(scheduler, request)


async def free_the_slot(scheduler: DownloadScheduler, clock: FakeClock, holder: Admitted) -> None:
    await deliver(scheduler, holder)
    clock.advance(0.1)
    await scheduler.tick()


@pytest.mark.parametrize("strategy", [Strategy.ORDERED, Strategy.SMALLEST_FIRST])
async def test_an_aged_waiter_moves_up_a_class_and_is_served_by_its_arrival(
    make_scheduler: MakeScheduler, clock: FakeClock, strategy: Strategy
) -> None:
    scheduler = await make_scheduler(
        contract_settings(sessions=1, strategy=strategy, aging_minutes=1.0)
    )
    # The holder is a bulk download: its grant moves bulk's pass past release's, so
    # without aging a release waiter is served before any bulk one.
    holder = await admitted(scheduler, big("holder", requested_class="bulk"))
    old = big("old-bulk", "dl-old", requested_class="bulk")
    assert (await queued(scheduler, old)).download_class is DownloadClass.BULK
    await wait_polling(scheduler, clock, [old], 30)
    newer = big("new-release", "dl-new")
    await queued(scheduler, newer)
    await wait_polling(scheduler, clock, [old, newer], 40)  # old has waited 70 s
    await free_the_slot(scheduler, clock, holder)
    # Aged into release, the old waiter comes first there (it arrived first): the
    # newer one holds only the back-up mark and must leave the slot to it.
    assert isinstance(await scheduler.admit(newer), Queued)
    decision = await admitted(scheduler, old)
    assert decision.grant.download_class is DownloadClass.BULK  # its class stays its own


async def test_aging_never_lifts_a_waiter_above_release(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    scheduler = await make_scheduler(
        contract_settings(sessions=1, strategy=Strategy.SMALLEST_FIRST, aging_minutes=1.0)
    )
    holder = await admitted(scheduler, big("holder"))
    old = big("old-background", "dl-old", requested_class="background")
    await queued(scheduler, old)
    await wait_polling(scheduler, clock, [old], 200)  # three aging periods and more
    person = big("person", "dl-person", kind=PrincipalKind.PERSON)
    assert (await queued(scheduler, person)).download_class is DownloadClass.INTERACTIVE
    await wait_polling(scheduler, clock, [old, person], 10)
    await free_the_slot(scheduler, clock, holder)
    assert isinstance(await scheduler.admit(old), Queued)
    await admitted(scheduler, person)


async def test_with_aging_off_a_waiter_stays_in_its_class(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    scheduler = await make_scheduler(
        contract_settings(sessions=1, strategy=Strategy.SMALLEST_FIRST, aging_minutes=0.0)
    )
    holder = await admitted(scheduler, big("holder", requested_class="bulk"))
    old = big("old-bulk", "dl-old", requested_class="bulk")
    await queued(scheduler, old)
    await wait_polling(scheduler, clock, [old], 30)
    newer = big("new-release", "dl-new")
    await queued(scheduler, newer)
    await wait_polling(scheduler, clock, [old, newer], 120)
    await free_the_slot(scheduler, clock, holder)
    assert isinstance(await scheduler.admit(old), Queued)
    await admitted(scheduler, newer)
