"""R-EST-4 on every store: a start inside the announced interval is counted as such.

Only the port and the :class:`FakeClock` are used, as in the rest of the contract suite.
"""

from __future__ import annotations

import pytest

from arkvory_sched import Admitted, DownloadScheduler, Queued
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import BIG, big, chunk, deliver, queued

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024


async def _deliver_whole(scheduler: DownloadScheduler, principal: str, download_id: str) -> None:
    for index in range(5):
        decision = await scheduler.admit(big(principal, download_id, byte_range=chunk(index)))
        assert isinstance(decision, Admitted), decision
        await deliver(scheduler, decision)


async def _poll_until_admitted(
    scheduler: DownloadScheduler, clock: FakeClock, principal: str, download_id: str
) -> Admitted:
    """Tick and poll as a client would, one second at a time, until the slot is given."""
    for _ in range(30):
        await scheduler.tick()
        decision = await scheduler.admit(big(principal, download_id, byte_range=chunk(0)))
        if isinstance(decision, Admitted):
            return decision
        assert isinstance(decision, Queued), decision
        clock.advance(1.0)
    raise AssertionError(f"{principal} never got its slot")


async def test_a_start_inside_the_announced_interval_is_counted(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """One slot, a 40 MiB download ahead at a 10 MiB/s floor: the waiter, back after
    the newcomer's 2 s, is told about 2 s more; it starts when the holder finishes
    then, inside its ±2 s interval."""
    scheduler = await make_scheduler(contract_settings(sessions=1, bandwidth=10 * MIB))
    holder = await scheduler.admit(big("holder", "dl-h", byte_range=chunk(0)))
    assert isinstance(holder, Admitted)
    newcomer = await queued(scheduler, big("bob", "dl-b"))
    clock.advance(newcomer.check_at - clock.wall())  # it comes back when it was told
    await scheduler.tick()
    told = await queued(scheduler, big("bob", "dl-b"))
    assert told.starts_earliest <= told.starts_at <= told.starts_latest
    clock.advance(told.starts_at - clock.wall())
    await deliver(scheduler, holder)
    await _deliver_whole(scheduler, "holder", "dl-h")
    await _poll_until_admitted(scheduler, clock, "bob", "dl-b")
    accuracy = (await scheduler.stats()).estimate_accuracy
    assert accuracy.scored == 1
    assert accuracy.inside_interval == 1
    assert accuracy.share_inside == 1.0
    assert BIG == 40 * MIB
