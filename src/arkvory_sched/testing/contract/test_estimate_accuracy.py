"""R-EST-4 on every store: a start inside the announced interval is counted as such,
and each wait is scored for its kind of client (issue #28).

Only the port and the :class:`FakeClock` are used, as in the rest of the contract suite.
"""

from __future__ import annotations

import pytest

from arkvory_sched import Admitted, ClientKind, DownloadScheduler, Queued
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import BIG, admitted, big, chunk, deliver, queued, serve_next

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


async def test_a_protocol_and_a_third_party_wait_are_scored_each_in_its_kind(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """One slot held; two SDK clients (they send a download id) and curl (none: its
    session is keyed by its address) wait, are told their starts, and are served in
    turn. Each wait counts once in the totals and once in its own kind's scores."""
    scheduler = await make_scheduler(contract_settings(sessions=1, bandwidth=10 * MIB))
    holder = await admitted(scheduler, big("holder", "dl-h"))
    sdk = [big(f"sdk-{n}", f"dl-{n}", object_id=f"{n}.iso") for n in (1, 2)]
    curl = big("curl-user", None, object_id="c.iso", address="198.51.100.7")
    waiters = [*sdk, curl]
    for waiter in waiters:
        await queued(scheduler, waiter)
    clock.advance(2.0)
    await scheduler.tick()
    for waiter in waiters:
        await queued(scheduler, waiter)  # told a start after the tick placed them
    clock.advance(2.0)
    await deliver(scheduler, holder)
    for _ in range(3):
        await serve_next(scheduler, clock, waiters)
    assert waiters == []

    stats = await scheduler.stats()
    by_client = stats.estimate_accuracy_by_client
    assert set(by_client) == set(ClientKind)
    protocol, third_party = by_client[ClientKind.PROTOCOL], by_client[ClientKind.THIRD_PARTY]
    assert (protocol.scored, third_party.scored) == (2, 1)
    total = stats.estimate_accuracy
    assert total.scored == 3
    assert protocol.inside_interval + third_party.inside_interval == total.inside_interval
    assert protocol.absolute_error_seconds.total + third_party.absolute_error_seconds.total == (
        pytest.approx(stats.estimate_error_seconds.total)
    )
    state = await scheduler.queue_state()
    assert state.stats.estimate_accuracy_by_client == by_client
