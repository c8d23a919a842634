"""Bounds and the forecast, the same on every store (R-SESS-8, R-SESS-11, R-RES-1, R-SET-3).

Several of these rules are about processes: a bound that holds in one process must hold
when processes share one queue. ``make_scheduler()`` called twice on a store whose queue
is ``shared`` (PostgreSQL) gives two processes on one queue; the in-memory store keeps its
queue in its process, so there "several processes" are one scheduler answering every
caller (:func:`processes`).
"""

from __future__ import annotations

import anyio
import pytest

from arkvory_sched import (
    Admitted,
    ByteRange,
    Decision,
    Delivered,
    DownloadClass,
    DownloadRequest,
    DownloadScheduler,
    Interrupted,
    PrincipalKind,
    Queued,
    RangeKind,
    Rejected,
    RejectReason,
    SchedulerSettings,
)
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024


def download(
    principal: str, download_id: str, size: int, byte_range: ByteRange | None = None
) -> DownloadRequest:
    return DownloadRequest(
        principal=principal,
        principal_kind=PrincipalKind.SERVICE,
        object_id=f"releases/{download_id}.iso",
        object_size=size,
        byte_range=byte_range,
        download_id=download_id,
        client_address="192.0.2.10",
    )


def span(start: int, end: int) -> ByteRange:
    return ByteRange(start, end, RangeKind.BOUNDED)


async def processes(
    make_scheduler: MakeScheduler, count: int, settings: SchedulerSettings
) -> list[DownloadScheduler]:
    """``count`` processes sharing one queue: as many schedulers on a shared store, or the
    one in-memory scheduler (its queue is its process's) answering for all of them."""
    first = await make_scheduler(settings)
    if not first.shared:
        return [first] * count
    return [first] + [await make_scheduler(settings) for _ in range(count - 1)]


async def admitted(scheduler: DownloadScheduler, request: DownloadRequest) -> Admitted:
    decision = await scheduler.admit(request)
    assert isinstance(decision, Admitted), decision
    return decision


async def delivered(scheduler: DownloadScheduler, request: DownloadRequest) -> None:
    decision = await admitted(scheduler, request)
    await scheduler.report(decision.grant, Delivered(request.byte_range))


# ---------------------------------------------------------------------- R-SESS-8


async def test_delivered_ranges_keep_at_most_64_intervals_forgetting_the_shortest(
    scheduler: DownloadScheduler,
) -> None:
    unit = MIB
    size = 130 * unit  # units 0..129
    # Every even unit: 65 separate intervals of one unit each. The 65th addition makes
    # the list forget its shortest, the lowest of equals: [0, 1 unit).
    for index in range(0, 130, 2):
        await delivered(
            scheduler, download("ci", "dl-1", size, span(index * unit, (index + 1) * unit))
        )
    # Every odd unit: everything merges, except the forgotten first unit.
    for index in range(1, 130, 2):
        await delivered(
            scheduler, download("ci", "dl-1", size, span(index * unit, (index + 1) * unit))
        )
    stats = await scheduler.stats()
    assert (stats.active, stats.completed_total) == (1, 0), "the forgotten unit was counted"
    # Delivered again, the first unit completes the download.
    await delivered(scheduler, download("ci", "dl-1", size, span(0, unit)))
    stats = await scheduler.stats()
    assert (stats.active, stats.completed_total) == (0, 1)


# ---------------------------------------------------------------------- R-RES-1

BIG = 40 * MIB


async def test_queue_limit_holds_for_concurrent_admissions_on_several_processes(
    make_scheduler: MakeScheduler,
) -> None:
    settings = contract_settings(sessions=1, queue_limit=3, queue_per_principal=3)
    fleet = await processes(make_scheduler, 3, settings)
    decisions: list[Decision] = []

    async def ask(n: int) -> None:
        scheduler = fleet[n % len(fleet)]
        decisions.append(await scheduler.admit(download(f"agent-{n}", f"dl-{n}", BIG)))

    async with anyio.create_task_group() as group:
        for n in range(12):
            group.start_soon(ask, n)
    kept = [d for d in decisions if isinstance(d, Admitted | Queued)]
    refused = [d for d in decisions if isinstance(d, Rejected)]
    assert len(kept) == 3, f"{len(kept)} sessions kept with queue_limit=3"
    assert {d.reason for d in refused} == {RejectReason.QUEUE_FULL}
    for scheduler in fleet:
        stats = await scheduler.stats()
        assert stats.active + stats.waiting == 3


async def test_queue_per_principal_holds_for_concurrent_admissions_on_several_processes(
    make_scheduler: MakeScheduler,
) -> None:
    settings = contract_settings(sessions=1, queue_limit=64, queue_per_principal=2)
    fleet = await processes(make_scheduler, 3, settings)
    decisions: list[Decision] = []

    async def ask(n: int) -> None:
        scheduler = fleet[n % len(fleet)]
        decisions.append(await scheduler.admit(download("fleet", f"dl-{n}", BIG)))

    async with anyio.create_task_group() as group:
        for n in range(9):
            group.start_soon(ask, n)
    kept = [d for d in decisions if isinstance(d, Admitted | Queued)]
    refused = [d for d in decisions if isinstance(d, Rejected)]
    assert len(kept) == 2, f"{len(kept)} sessions of one principal with a limit of 2"
    assert {d.reason for d in refused} == {RejectReason.PRINCIPAL_LIMIT}
    # The places come back when the sessions go: another principal is not limited.
    assert isinstance(await fleet[1].admit(download("other", "dl-x", BIG)), Queued)


# ---------------------------------------------------------------------- R-SESS-11


async def test_ranges_per_session_hold_for_one_session_spread_over_processes(
    make_scheduler: MakeScheduler, request: pytest.FixtureRequest
) -> None:
    chunk = 8 * MIB
    fleet = await processes(make_scheduler, 3, contract_settings(sessions=1, ranges_per_session=2))
    first = await admitted(fleet[0], download("ci", "dl-1", BIG, span(0, chunk)))
    grants = [(fleet[0], first)]
    refusals: list[Rejected] = []
    for index in range(1, 5):
        serving = fleet[index % 3]
        decision = await serving.admit(
            download("ci", "dl-1", BIG, span(index * chunk, (index + 1) * chunk))
        )
        if isinstance(decision, Admitted):
            grants.append((serving, decision))
        else:
            assert isinstance(decision, Rejected), decision
            refusals.append(decision)
    assert len(grants) == 2, f"{len(grants)} ranges in flight with ranges_per_session=2"
    assert {r.reason for r in refusals} == {RejectReason.RANGES_PER_SESSION}
    for issuer, grant in grants:
        await issuer.report(grant.grant, Interrupted())
    # With nothing in flight, any process serves the next range of the session at once.
    for index in (1, 2, 0):
        scheduler = fleet[index]
        further = download("ci", "dl-1", BIG, span(index * chunk, (index + 1) * chunk))
        decision = await admitted(scheduler, further)
        await scheduler.report(decision.grant, Interrupted())


# ---------------------------------------------------------------------- R-SET-3, R-PG-2


async def test_lowering_sessions_grants_nothing_above_the_new_limit(
    make_scheduler: MakeScheduler,
) -> None:
    size = 16 * MIB + 1  # just a session (above the 16 MiB threshold)
    scheduler = await make_scheduler(contract_settings(sessions=3, per_principal=3))
    holders = [await admitted(scheduler, download(f"p{n}", f"dl-{n}", size)) for n in range(3)]
    await scheduler.configure(scheduler.settings.with_changes(sessions=1))
    # The first holder finishes: its slot is below the new limit, yet two still run.
    await scheduler.report(holders[0].grant, Delivered(ByteRange.whole(size)))
    stats = await scheduler.stats()
    assert (stats.active, stats.completed_total) == (2, 1)
    assert isinstance(await scheduler.admit(download("new", "dl-new", size)), Queued)
    await scheduler.tick()
    assert isinstance(await scheduler.admit(download("new", "dl-new", size)), Queued)
    # Active sessions keep their slots: a further range of one is admitted.
    again = await admitted(scheduler, download("p1", "dl-1", size, span(0, MIB)))
    await scheduler.report(again.grant, Interrupted())
    # One more finishes: one active is the new limit, the newcomer still waits.
    await scheduler.report(holders[1].grant, Delivered(ByteRange.whole(size)))
    await scheduler.tick()
    assert isinstance(await scheduler.admit(download("new", "dl-new", size)), Queued)
    assert (await scheduler.stats()).active == 1
    # The last one finishes: below the limit, the newcomer gets the slot.
    await scheduler.report(holders[2].grant, Delivered(ByteRange.whole(size)))
    await scheduler.tick()
    started = await admitted(scheduler, download("new", "dl-new", size))
    assert (await scheduler.stats()).active == 1
    await scheduler.report(started.grant, Interrupted())


# ---------------------------------------------------------------------- forecast


@pytest.mark.parametrize(("sessions", "reserve"), [(1, 0), (2, 1)])
async def test_forecast_counts_waiting_bytes_and_what_active_sessions_have_left(
    make_scheduler: MakeScheduler, clock: FakeClock, sessions: int, reserve: int
) -> None:
    """One slot for release downloads (the reserve is for interactive ones), 10 MiB/s:
    92 MiB left of the active download and five waiting 100 MiB ones empty in 59.2 s."""
    size = 100 * MIB
    settings = contract_settings(
        sessions=sessions, reserve=reserve, per_principal=1, bandwidth=10 * MIB
    )
    scheduler = await make_scheduler(settings)
    active = await admitted(scheduler, download("holder", "dl-h", size, span(0, 8 * MIB)))
    clock.advance(1.0)
    await scheduler.report(active.grant, Delivered(span(0, 8 * MIB)))
    for n in range(5):
        decision = await scheduler.admit(download(f"w{n}", f"dl-{n}", size))
        assert isinstance(decision, Queued), decision
    for _ in range(2):  # before and after a tick: the forecast is the queue's, not a cache's
        stats = await scheduler.stats()
        assert stats.per_class[DownloadClass.RELEASE].waiting == 5
        assert stats.queue_empty_in_seconds == pytest.approx((500 + 92) / 10)
        await scheduler.tick()
