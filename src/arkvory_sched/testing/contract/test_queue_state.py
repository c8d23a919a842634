"""``queue_state()`` on every implementation: what an operator's queue page reads (R-VIS-2).

The snapshot must agree with ``stats()``, name the principals holding slots with
their progress, count each class's remaining work, and tell whether a class's first
waiter is held back by its principal's share (R-CLASS-5).
"""

from __future__ import annotations

import pytest

from arkvory_sched import Delivered, DownloadClass, Interrupted, PrincipalKind
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import BIG, MIB, RANGE, admitted, big, chunk, deliver, queued

pytestmark = pytest.mark.anyio


async def test_an_idle_queue_has_no_work_and_no_sessions(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    scheduler = await make_scheduler()
    state = await scheduler.queue_state()
    assert state.at == pytest.approx(clock.wall())
    assert state.active_sessions == ()
    assert set(state.per_class) == set(DownloadClass)
    for work in state.per_class.values():
        assert (work.waiting_bytes, work.remaining_bytes, work.head_at_share) == (0, 0, False)
    assert state.stats.active == 0
    assert state.stats.waiting == 0


async def test_active_sessions_show_principal_class_progress_and_rate(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """Two slots held, one range delivered by the first holder; two waiters of two
    classes. Bytes and times are the port's own: sizes in, wall time of the clock."""
    scheduler = await make_scheduler()
    started_wall = clock.wall()
    first = await admitted(scheduler, big("ci-bot", "dl-1", byte_range=chunk(0)))
    clock.advance(2.0)
    person = big("ann", "dl-2", kind=PrincipalKind.PERSON, object_id="isos/b.iso", size=3 * RANGE)
    second = await admitted(scheduler, person)
    clock.advance(8.0)
    await scheduler.report(first.grant, Delivered(chunk(0)))
    await queued(scheduler, big("mirror", "dl-3", object_id="m.iso", requested_class="bulk"))
    await queued(scheduler, big("agent", "dl-4", object_id="a.iso", size=2 * BIG))

    state = await scheduler.queue_state()

    # Oldest slot first.
    assert [(s.principal, s.download_class) for s in state.active_sessions] == [
        ("ci-bot", DownloadClass.RELEASE),
        ("ann", DownloadClass.INTERACTIVE),
    ]
    by_principal = {s.principal: s for s in state.active_sessions}
    bot = by_principal["ci-bot"]
    assert bot.since == pytest.approx(started_wall, abs=1.0)
    assert bot.bytes_delivered == RANGE
    assert bot.bytes_remaining == BIG - RANGE
    assert bot.rate == pytest.approx(RANGE / 10.0, rel=0.05)
    assert by_principal["ann"].since == pytest.approx(started_wall + 2.0, abs=1.0)
    assert by_principal["ann"].bytes_delivered == 0
    assert by_principal["ann"].bytes_remaining == 3 * RANGE

    release = state.per_class[DownloadClass.RELEASE]
    assert release.remaining_bytes == BIG - RANGE
    assert release.waiting_bytes == 2 * BIG
    assert state.per_class[DownloadClass.BULK].waiting_bytes == BIG
    assert state.per_class[DownloadClass.INTERACTIVE].remaining_bytes == 3 * RANGE
    assert state.per_class[DownloadClass.BACKGROUND].waiting_bytes == 0
    assert state.stats.active == 2
    assert state.stats.per_class[DownloadClass.RELEASE].waiting == 1
    assert state.stats.per_class[DownloadClass.BULK].waiting == 1

    await deliver(scheduler, second)
    after = await scheduler.queue_state()
    assert [s.principal for s in after.active_sessions] == ["ci-bot"]
    assert after.per_class[DownloadClass.INTERACTIVE].remaining_bytes == 0


async def test_bytes_in_flight_show_while_a_response_runs_and_count_once_when_it_ends(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    """Issue #28 (ADR 0033): what a running response has sent shows as delivered (a
    store may take about a second, which the clock passes); when the response ends its
    range replaces it, never adds to it, and an interrupted response's bytes go."""
    scheduler = await make_scheduler(contract_settings(sessions=1))

    async def holder_bytes() -> tuple[int, int]:
        (holder,) = (await scheduler.queue_state()).active_sessions
        return holder.bytes_delivered, holder.bytes_remaining

    first = await admitted(scheduler, big("ci-bot", "dl-1", byte_range=chunk(0)))
    await scheduler.progress(first.grant, 3 * MIB)
    clock.advance(1.5)
    await scheduler.tick()
    assert await holder_bytes() == (3 * MIB, BIG - 3 * MIB)
    await scheduler.report(first.grant, Delivered(chunk(0)))
    assert await holder_bytes() == (RANGE, BIG - RANGE)

    second = await admitted(scheduler, big("ci-bot", "dl-1", byte_range=chunk(1)))
    await scheduler.progress(second.grant, 5 * MIB)
    clock.advance(1.5)
    await scheduler.tick()
    assert await holder_bytes() == (RANGE + 5 * MIB, BIG - RANGE - 5 * MIB)
    await scheduler.report(second.grant, Interrupted(5 * MIB))
    assert await holder_bytes() == (RANGE, BIG - RANGE)


async def test_a_head_at_its_share_while_a_contender_waits_is_reported(
    make_scheduler: MakeScheduler,
) -> None:
    """R-CLASS-5: the fleet holds its one-slot share and its next download is first in
    line; a principal with no slot waits behind it, so the head is passed over."""
    scheduler = await make_scheduler(contract_settings(sessions=2, per_principal=1))
    await admitted(scheduler, big("fleet", "dl-a", object_id="a.iso"))
    await admitted(scheduler, big("other", "dl-b", object_id="b.iso"))
    await queued(scheduler, big("fleet", "dl-c", object_id="c.iso"))
    state = await scheduler.queue_state()
    assert not state.per_class[DownloadClass.RELEASE].head_at_share  # no contender yet
    await queued(scheduler, big("newcomer", "dl-d", object_id="d.iso"))
    state = await scheduler.queue_state()
    assert state.per_class[DownloadClass.RELEASE].head_at_share
    assert not state.per_class[DownloadClass.BULK].head_at_share


async def test_waiting_bytes_count_each_class_by_its_base_class(
    make_scheduler: MakeScheduler,
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1))
    await admitted(scheduler, big("holder", "dl-0", object_id="h.iso"))
    sizes = {"bulk": [20 * MIB, 30 * MIB], "background": [50 * MIB]}
    for cls, objects in sizes.items():
        for index, size in enumerate(objects):
            request = big(
                f"p-{cls}-{index}", f"dl-{cls}-{index}", size=size, requested_class=cls,
                object_id=f"{cls}-{index}.bin",
            )  # fmt: skip
            await queued(scheduler, request)
    state = await scheduler.queue_state()
    assert state.per_class[DownloadClass.BULK].waiting_bytes == 50 * MIB
    assert state.per_class[DownloadClass.BACKGROUND].waiting_bytes == 50 * MIB
    assert state.per_class[DownloadClass.RELEASE].waiting_bytes == 0
    assert state.per_class[DownloadClass.RELEASE].remaining_bytes == BIG
