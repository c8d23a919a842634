"""The ``DownloadScheduler`` contract, run against every implementation: sessions.

Only the async port and the :class:`FakeClock` are used here: no implementation's
internals. Queue time moves with the fake clock. A session is admitted, serves its
ranges, completes or idles out, and waits its turn behind the slots.
"""

from __future__ import annotations

import math

import pytest

from arkvory_sched import (
    Admitted,
    ByteRange,
    DownloadClass,
    DownloadScheduler,
    Failed,
    Interrupted,
    PrincipalKind,
    Queued,
    RangeKind,
    RejectReason,
)
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import (
    BIG,
    MIB,
    SMALL,
    admitted,
    big,
    chunk,
    deliver,
    queued,
    rejected,
    small,
    ticket_arrival,
)

pytestmark = pytest.mark.anyio


# ---------------------------------------------------------------------- sessions


async def test_big_object_is_admitted_as_a_session(scheduler: DownloadScheduler) -> None:
    decision = await admitted(scheduler, big())
    assert decision.admission == "session"
    assert decision.download_class is DownloadClass.RELEASE
    assert decision.grant.byte_range == ByteRange.whole(BIG)
    assert decision.ticket is not None
    stats = await scheduler.stats()
    assert stats.active == 1
    assert stats.per_class[DownloadClass.RELEASE].active == 1
    assert stats.waiting == 0
    await scheduler.report(decision.grant, Interrupted())


async def test_ranges_of_an_active_session_pass_without_new_admission(
    make_scheduler: MakeScheduler,
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1, ranges_per_session=2))
    first = await admitted(scheduler, big(byte_range=chunk(0)))
    second = await admitted(scheduler, big(byte_range=chunk(1)))
    assert first.grant.admission == second.grant.admission == "session"
    # R-SESS-11: at most ranges_per_session responses of one session at once.
    refused = await rejected(scheduler, big(byte_range=chunk(2)))
    assert refused.reason is RejectReason.RANGES_PER_SESSION
    assert (await scheduler.stats()).active == 1
    await deliver(scheduler, first)
    third = await admitted(scheduler, big(byte_range=chunk(2)))
    assert third.admission == "session"
    assert (await scheduler.stats()).active == 1
    for decision in (second, third):
        await scheduler.report(decision.grant, Interrupted())


async def test_when_slots_are_exhausted_a_newcomer_is_queued(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1))
    holder = await admitted(scheduler, big("holder"))
    now = clock.wall()

    first = await queued(scheduler, big("alpha", "dl-a"))
    assert first.position is None or first.position >= 1
    assert first.reason == "download_queued"
    assert first.download_class is DownloadClass.RELEASE
    assert now <= first.starts_earliest <= first.starts_at <= first.starts_latest
    assert first.check_at > now
    assert first.retry_after >= 1
    assert first.retry_after <= math.ceil(first.check_at - now) + 1
    assert first.ticket is not None
    second = await queued(scheduler, big("beta", "dl-b"))
    assert second.ticket is not None
    assert second.ticket != first.ticket

    stats = await scheduler.stats()
    assert (stats.active, stats.waiting) == (1, 2)

    await scheduler.tick()
    clock.advance(1.0)
    again = await queued(scheduler, big("alpha", "dl-a", ticket=first.ticket))
    later = await queued(scheduler, big("beta", "dl-b", ticket=second.ticket))
    assert (again.position, later.position) == (1, 2)
    assert again.starts_at <= later.starts_at
    assert ticket_arrival(again.ticket) == ticket_arrival(first.ticket)
    await scheduler.report(holder.grant, Interrupted())


async def test_small_object_is_admitted_per_request(make_scheduler: MakeScheduler) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1))
    decision = await admitted(scheduler, small())
    assert decision.admission == "per-request"
    assert decision.grant.byte_range == ByteRange.whole(SMALL)
    stats = await scheduler.stats()
    assert (stats.request_active, stats.active, stats.waiting) == (1, 0, 0)
    await deliver(scheduler, decision)
    assert (await scheduler.stats()).request_active == 0


async def test_small_objects_do_not_wait_behind_big_downloads(
    make_scheduler: MakeScheduler,
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1))
    holder = await admitted(scheduler, big("holder"))
    await queued(scheduler, big("alpha", "dl-a"))
    decision = await admitted(scheduler, small("alpha"))
    assert decision.admission == "per-request"
    await deliver(scheduler, decision)
    await scheduler.report(holder.grant, Interrupted())


@pytest.mark.parametrize(
    "reads",
    [
        pytest.param([None], id="whole"),
        pytest.param([chunk(i) for i in range(5)], id="sequential"),
        pytest.param(
            [ByteRange(BIG - 1024, BIG, RangeKind.BOUNDED)] + [chunk(i) for i in range(5)],
            id="tail-first",
        ),
        pytest.param([ByteRange(16 * MIB, BIG, RangeKind.OPEN)], id="resumed-mid-file"),
        pytest.param([chunk(i) for i in (0, 2, 4, 1, 3)], id="out-of-order"),
    ],
)
async def test_delivering_the_download_completes_it_and_frees_the_slot(
    make_scheduler: MakeScheduler, reads: list[ByteRange | None]
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1))
    completed = (await scheduler.stats()).completed_total
    for index, byte_range in enumerate(reads):
        decision = await admitted(scheduler, big(byte_range=byte_range))
        assert decision.admission == "session"
        stats = await scheduler.stats()
        assert stats.active == 1
        assert stats.completed_total == completed, f"complete before read {index}"
        await deliver(scheduler, decision)
    stats = await scheduler.stats()
    assert (stats.active, stats.waiting, stats.paused) == (0, 0, 0)
    assert stats.completed_total == completed + 1
    # The slot is free again: a newcomer starts at once.
    newcomer = await admitted(scheduler, big("alpha", "dl-a"))
    await scheduler.report(newcomer.grant, Interrupted())


async def test_interrupted_and_failed_free_the_response_but_add_nothing(
    make_scheduler: MakeScheduler,
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1, ranges_per_session=1))
    for outcome in (Interrupted(bytes_sent=BIG // 2), Failed(bytes_sent=BIG - 1), Failed()):
        decision = await admitted(scheduler, big())
        refused = await rejected(scheduler, big(byte_range=chunk(1)))
        assert refused.reason is RejectReason.RANGES_PER_SESSION
        await scheduler.report(decision.grant, outcome)
        stats = await scheduler.stats()
        assert stats.active == 1, "the session keeps its slot"
        assert stats.completed_total == 0, f"{outcome} counted bytes"
    decision = await admitted(scheduler, big())
    await deliver(scheduler, decision)
    stats = await scheduler.stats()
    assert (stats.active, stats.completed_total) == (0, 1)


async def test_reporting_a_grant_twice_is_a_no_op(make_scheduler: MakeScheduler) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1, max_downloads=1))
    first = await admitted(scheduler, big(byte_range=chunk(0)))
    await deliver(scheduler, first)
    before = await scheduler.stats()
    await deliver(scheduler, first)
    await scheduler.report(first.grant, Failed())
    after = await scheduler.stats()
    assert (after.active, after.waiting, after.paused, after.completed_total) == (
        before.active,
        before.waiting,
        before.paused,
        before.completed_total,
    )
    assert after.per_class == before.per_class

    one = await admitted(scheduler, small("alpha"))
    await deliver(scheduler, one)
    two = await admitted(scheduler, small("beta"))
    await deliver(scheduler, one)  # again: must not free the place `two` holds
    assert (await scheduler.stats()).request_active == 1
    await deliver(scheduler, two)
    assert (await scheduler.stats()).request_active == 0


async def test_idle_session_releases_its_slot_on_tick(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1, idle_seconds=30.0))
    decision = await admitted(scheduler, big(byte_range=chunk(0)))
    await deliver(scheduler, decision)
    clock.advance(29.0)
    await scheduler.tick()
    assert (await scheduler.stats()).active == 1
    clock.advance(2.0)
    await scheduler.tick()
    stats = await scheduler.stats()
    assert stats.active == 0
    assert stats.paused == 1
    assert stats.idle_releases_total == 1
    newcomer = await admitted(scheduler, big("alpha", "dl-a"))
    await scheduler.report(newcomer.grant, Interrupted())


async def test_a_read_walking_back_from_the_tail_is_judged_when_it_arrives(
    make_scheduler: MakeScheduler,
) -> None:
    """A ZIP reader reads the end record, then the bytes just before it (R-SESS-8).

    A server reports a response when the application returns, which may be after the
    client has its last byte and has sent the next request (a file closed in a worker
    thread): the second read is admitted before the first is reported. Whether a range
    tells where the download started is decided when it arrives, after the ranges
    before it, so the tail reads do not complete the session between them.
    """
    scheduler = await make_scheduler(contract_settings(sessions=1, ranges_per_session=2))
    end_record = await admitted(
        scheduler, big(byte_range=ByteRange(BIG - 22, BIG, RangeKind.BOUNDED))
    )
    locator = await admitted(
        scheduler, big(byte_range=ByteRange(BIG - 42, BIG - 22, RangeKind.BOUNDED))
    )
    await deliver(scheduler, end_record)
    await deliver(scheduler, locator)
    stats = await scheduler.stats()
    assert (stats.active, stats.completed_total) == (1, 0), "the tail reads completed it"
    # The reader goes on with the first member: the session completes at the end.
    for index in range(5):
        await deliver(scheduler, await admitted(scheduler, big(byte_range=chunk(index))))
    stats = await scheduler.stats()
    assert (stats.active, stats.completed_total) == (0, 1)


async def test_tail_only_session_holds_its_slot_briefly(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1, idle_seconds=30.0))
    tail = ByteRange(BIG - 64 * 1024, BIG, RangeKind.SUFFIX)
    decision = await admitted(scheduler, big(byte_range=tail))
    await deliver(scheduler, decision)
    clock.advance(6.0)  # R-SESS-10: 5 s, not idle_seconds
    await scheduler.tick()
    assert (await scheduler.stats()).active == 0


async def test_a_long_response_keeps_its_slot(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1, idle_seconds=30.0))
    decision = await admitted(scheduler, big())
    clock.advance(120.0)
    await scheduler.tick()
    assert (await scheduler.stats()).active == 1, "a long response keeps its slot"
    await scheduler.report(decision.grant, Interrupted())


async def test_queued_client_returning_after_tick_marks_it_is_admitted(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1))
    holder = await admitted(scheduler, big("holder"))
    waiting = await queued(scheduler, big("alpha", "dl-a"))
    await deliver(scheduler, holder)
    assert (await scheduler.stats()).active == 0
    await scheduler.tick()
    clock.advance(waiting.retry_after)
    decision = await admitted(scheduler, big("alpha", "dl-a", ticket=waiting.ticket))
    assert decision.admission == "session"
    stats = await scheduler.stats()
    assert (stats.active, stats.waiting) == (1, 0)
    await scheduler.report(decision.grant, Interrupted())


async def test_waiting_client_that_never_returns_is_removed(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1))
    holder = await admitted(scheduler, big("holder"))
    await queued(scheduler, big("alpha", "dl-a"))
    clock.advance(11 * 60.0)
    await scheduler.tick()
    stats = await scheduler.stats()
    assert (stats.active, stats.waiting) == (1, 0)
    assert stats.no_shows_total == 1
    await scheduler.report(holder.grant, Interrupted())


async def test_reserved_slot_is_kept_for_interactive(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=4, reserve=1, per_principal=4))
    grants = [await admitted(scheduler, big(f"agent-{n}", f"dl-{n}")) for n in range(3)]
    # R-CLASS-3: the fourth slot is not for release traffic, whoever came first …
    agent = await queued(scheduler, big("agent-3", "dl-3"))
    clock.advance(1.0)
    ann = big("ann", "dl-p", kind=PrincipalKind.PERSON)
    first_answer = await scheduler.admit(ann)
    await scheduler.tick()
    clock.advance(1.0)
    assert isinstance(await scheduler.admit(big("agent-3", "dl-3", ticket=agent.ticket)), Queued)
    # … but a person gets it (at once, or on return after the next tick).
    if isinstance(first_answer, Admitted):
        person = first_answer
    else:
        assert isinstance(first_answer, Queued), first_answer
        person = await admitted(scheduler, ann)
    assert person.download_class is DownloadClass.INTERACTIVE
    assert (await scheduler.stats()).active == 4
    for decision in [*grants, person]:
        await scheduler.report(decision.grant, Interrupted())


async def test_principal_beyond_its_share_yields_to_a_contender(
    make_scheduler: MakeScheduler, clock: FakeClock
) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=3, per_principal=1))
    # With nobody else waiting, a free slot is given beyond the share (R-CLASS-5).
    first = await admitted(scheduler, big("fleet", "dl-1"))
    second = await admitted(scheduler, big("fleet", "dl-2"))
    other = await admitted(scheduler, big("solo", "dl-s"))
    over = await queued(scheduler, big("fleet", "dl-3"))  # fleet is over its share
    clock.advance(1.0)
    contender = await queued(scheduler, big("newcomer", "dl-n"))  # arrived later
    await deliver(scheduler, first)
    await scheduler.tick()
    clock.advance(1.0)
    # fleet asks first, but holds its share while another principal waits.
    assert isinstance(await scheduler.admit(big("fleet", "dl-3", ticket=over.ticket)), Queued)
    started = await admitted(scheduler, big("newcomer", "dl-n", ticket=contender.ticket))
    assert started.admission == "session"
    for decision in (second, other, started):
        await scheduler.report(decision.grant, Interrupted())
