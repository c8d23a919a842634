"""Every bound of R-RES-1, on every implementation: beyond it the answer is ``Rejected``
with a ``Retry-After`` and nothing grows."""

from __future__ import annotations

import pytest

from arkvory_sched import DownloadScheduler, RejectReason, SchedulerStats
from arkvory_sched.testing import MakeScheduler, contract_settings

from ._requests import admitted, big, chunk, deliver, queued, rejected

pytestmark = pytest.mark.anyio


def _sizes(stats: SchedulerStats) -> tuple[int, int, int]:
    return (stats.active, stats.waiting, stats.paused)


async def _refused_twice(
    scheduler: DownloadScheduler, reason: RejectReason, principal: str = "late"
) -> None:
    """Two more newcomers are refused for ``reason``; the queue stays as it was."""
    before = await scheduler.stats()
    for attempt in range(2):
        refused = await rejected(scheduler, big(principal, f"dl-late-{attempt}"))
        assert refused.reason is reason
    after = await scheduler.stats()
    assert _sizes(after) == _sizes(before)
    assert after.rejections_total.get(reason, 0) == before.rejections_total.get(reason, 0) + 2


async def test_queue_limit_rejects_beyond_the_limit_without_growing(
    make_scheduler: MakeScheduler,
) -> None:
    """R-RES-1: sessions in total (active, waiting and paused) are bounded."""
    scheduler = await make_scheduler(
        contract_settings(sessions=1, queue_limit=4, queue_per_principal=4)
    )
    holder = await admitted(scheduler, big("holder", "dl-h"))
    for index in range(3):
        await queued(scheduler, big(f"waiter-{index}", "dl-w"))
    await _refused_twice(scheduler, RejectReason.QUEUE_FULL)
    # A session the queue holds is still served.
    await queued(scheduler, big("waiter-0", "dl-w"))
    await deliver(scheduler, holder)


async def test_queue_per_principal_rejects_beyond_the_limit_without_growing(
    make_scheduler: MakeScheduler,
) -> None:
    """R-RES-1: sessions per principal are bounded; other principals still queue."""
    scheduler = await make_scheduler(contract_settings(sessions=1, queue_per_principal=2))
    holder = await admitted(scheduler, big("fleet", "dl-1"))
    await queued(scheduler, big("fleet", "dl-2"))
    await _refused_twice(scheduler, RejectReason.PRINCIPAL_LIMIT, principal="fleet")
    await queued(scheduler, big("laptop", "dl-l"))
    await deliver(scheduler, holder)


async def test_ranges_per_session_rejects_beyond_the_limit_without_growing(
    make_scheduler: MakeScheduler,
) -> None:
    """R-RES-1, R-SESS-11: responses in flight per session are bounded."""
    scheduler = await make_scheduler(contract_settings(sessions=1, ranges_per_session=2))
    running = [await admitted(scheduler, big(byte_range=chunk(index))) for index in range(2)]
    before = await scheduler.stats()
    for _ in range(2):
        refused = await rejected(scheduler, big(byte_range=chunk(2)))
        assert refused.reason is RejectReason.RANGES_PER_SESSION
    after = await scheduler.stats()
    assert _sizes(after) == _sizes(before) == (1, 0, 0)
    assert after.admitted_total == before.admitted_total
    for decision in running:
        await deliver(scheduler, decision)
    assert (await scheduler.stats()).completed_total == 0
