"""The ``DownloadScheduler`` contract, run against every implementation.

Only the async port and the :class:`FakeClock` are used here: no implementation's
internals. Queue time moves with the fake clock; the few waits that are real time by
the contract (per-request waiting, ``wait_for_change``) use short timeouts and are
measured with ``anyio.current_time``.
"""

from __future__ import annotations

import dataclasses
import enum
import math

import anyio
import pytest

from arkvory_sched import (
    Admitted,
    ByteRange,
    ClassStats,
    Decision,
    DownloadClass,
    DownloadRequest,
    DownloadScheduler,
    EstimateAccuracy,
    Failed,
    HistogramSnapshot,
    Interrupted,
    InvalidRequestError,
    PrincipalKind,
    Queued,
    RangeKind,
    Rejected,
    RejectReason,
    SchedulerStats,
    Strategy,
)
from arkvory_sched.testing import FakeClock

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
from .conftest import MakeScheduler, contract_settings

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


# ---------------------------------------------------------------------- configure


async def test_configure_applies_to_the_next_decision(make_scheduler: MakeScheduler) -> None:
    settings = contract_settings(sessions=1)
    scheduler = await make_scheduler(settings)
    first = await admitted(scheduler, big("alpha", "dl-a"))
    await queued(scheduler, big("beta", "dl-b"))

    await scheduler.configure(settings.with_changes(sessions=3))
    assert scheduler.settings.sessions == 3
    await scheduler.tick()
    second = await admitted(scheduler, big("beta", "dl-b"))
    third = await admitted(scheduler, big("gamma", "dl-c"))
    assert (await scheduler.stats()).active == 3

    # Fewer slots: active sessions keep theirs, nobody new starts.
    await scheduler.configure(settings.with_changes(sessions=1))
    assert scheduler.settings.sessions == 1
    for principal, download_id in (("alpha", "dl-a"), ("beta", "dl-b"), ("gamma", "dl-c")):
        decision = await admitted(scheduler, big(principal, download_id, byte_range=chunk(1)))
        assert decision.admission == "session"
        await scheduler.report(decision.grant, Interrupted())
    await queued(scheduler, big("delta", "dl-d"))
    stats = await scheduler.stats()
    assert (stats.active, stats.sessions_limit) == (3, 1)

    # R-STRAT-3: under `shared` a new big download is admitted per request.
    await scheduler.configure(settings.with_changes(strategy=Strategy.SHARED))
    shared = await admitted(scheduler, big("epsilon", "dl-e"))
    assert shared.admission == "per-request"
    assert (await scheduler.stats()).admission == "per-request"
    for decision in (first, second, third, shared):
        await scheduler.report(decision.grant, Interrupted())


async def test_configure_keeps_environment_only_fields(make_scheduler: MakeScheduler) -> None:
    settings = contract_settings()
    scheduler = await make_scheduler(settings)
    await scheduler.configure(
        settings.with_changes(
            idle_seconds=12.0,
            queue_limit=5,
            queue_per_principal=5,
            max_downloads=9,
            transfer_queue_limit=3,
            transfer_queue_wait_seconds=7.0,
        )
    )
    applied = scheduler.settings
    assert applied.idle_seconds == 12.0
    assert applied.queue_limit == settings.queue_limit
    assert applied.queue_per_principal == settings.queue_per_principal
    assert applied.max_downloads == settings.max_downloads
    assert applied.transfer_queue_limit == settings.transfer_queue_limit
    assert applied.transfer_queue_wait_seconds == settings.transfer_queue_wait_seconds


# ---------------------------------------------------------------------- stats


def _leaves(value: object, path: str = "stats") -> list[tuple[str, object]]:
    """Every leaf of a stats value; only aggregates may appear (R-VIS-4)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        assert isinstance(
            value, SchedulerStats | ClassStats | HistogramSnapshot | EstimateAccuracy
        ), path
        found: list[tuple[str, object]] = []
        for item in dataclasses.fields(value):
            found += _leaves(getattr(value, item.name), f"{path}.{item.name}")
        return found
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            assert isinstance(key, enum.Enum), f"{path} is keyed by {key!r}"
            found += _leaves(item, f"{path}[{key.value}]")
        return found
    if isinstance(value, tuple):
        return [
            leaf for index, item in enumerate(value) for leaf in _leaves(item, f"{path}.{index}")
        ]
    assert value is None or isinstance(value, int | float | str | enum.Enum), (path, value)
    assert not isinstance(value, bytes), path
    return [(path, value)]


async def test_stats_carry_no_ids(make_scheduler: MakeScheduler) -> None:
    scheduler = await make_scheduler(contract_settings(sessions=1))
    secrets = ("alice@example.org", "dl-7f3a9c", "private/alice-backup.tar", "203.0.113.77")
    request = DownloadRequest(
        principal=secrets[0],
        principal_kind=PrincipalKind.PERSON,
        object_id=secrets[2],
        object_size=BIG,
        download_id=secrets[1],
        client_address=secrets[3],
    )
    active = await admitted(scheduler, request)
    waiting = await queued(scheduler, big("bob@example.org", "dl-bob"))
    per_request = await admitted(scheduler, small(secrets[0]))
    stats = await scheduler.stats()
    assert (stats.active, stats.waiting, stats.request_active) == (1, 1, 1)
    for path, leaf in _leaves(stats):
        if isinstance(leaf, str):
            assert not any(secret in leaf for secret in secrets), path
            assert "bob@example.org" not in leaf, path
    text = repr(stats)
    assert not any(secret in text for secret in (*secrets, "bob@example.org"))
    assert waiting.ticket is None or waiting.ticket not in text
    await scheduler.report(active.grant, Interrupted())
    await scheduler.report(per_request.grant, Interrupted())


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


# ---------------------------------------------------------------------- request checks


@pytest.mark.parametrize("value", ["gold", "", "urgent!"])
@pytest.mark.parametrize("size", ["big", "small"])
async def test_unknown_download_class_is_invalid(
    scheduler: DownloadScheduler, value: str, size: str
) -> None:
    request = big(requested_class=value) if size == "big" else small(requested_class=value)
    with pytest.raises(InvalidRequestError) as raised:
        await scheduler.admit(request)
    assert raised.value.field == "download_class"
    stats = await scheduler.stats()
    assert (stats.active, stats.waiting, stats.request_active) == (0, 0, 0)


@pytest.mark.parametrize("value", ["gold", "", "urgent!"])
async def test_unknown_download_class_is_invalid_on_a_further_range(
    make_scheduler: MakeScheduler, value: str
) -> None:
    """A range of a session that holds its slot (admitted without a round trip on
    PostgreSQL) checks the requested class as a newcomer does, and keeps its slot."""
    scheduler = await make_scheduler(contract_settings(sessions=1))
    first = await admitted(scheduler, big(byte_range=chunk(0)))
    await deliver(scheduler, first)
    with pytest.raises(InvalidRequestError) as raised:
        await scheduler.admit(big(byte_range=chunk(1), requested_class=value))
    assert raised.value.field == "download_class"
    further = await admitted(scheduler, big(byte_range=chunk(1), requested_class="bulk"))
    assert further.admission == "session"
    await deliver(scheduler, further)
    assert (await scheduler.stats()).active == 1


@pytest.mark.parametrize("value", ["", "has space", "x" * 1000, "line\nbreak", "naïve"])
@pytest.mark.parametrize("size", ["big", "small"])
async def test_malformed_download_id_is_invalid(
    scheduler: DownloadScheduler, value: str, size: str
) -> None:
    request = big(download_id=value) if size == "big" else small(download_id=value)
    with pytest.raises(InvalidRequestError) as raised:
        await scheduler.admit(request)
    assert raised.value.field == "download_id"
    stats = await scheduler.stats()
    assert (stats.active, stats.waiting, stats.request_active) == (0, 0, 0)


@pytest.mark.parametrize(
    ("kind", "requested", "applied"),
    [
        (PrincipalKind.SERVICE, "bulk", DownloadClass.BULK),
        (PrincipalKind.SERVICE, " Background ", DownloadClass.BACKGROUND),
        (PrincipalKind.SERVICE, "interactive", DownloadClass.RELEASE),
        (PrincipalKind.PERSON, None, DownloadClass.INTERACTIVE),
        (PrincipalKind.LINK, None, DownloadClass.RELEASE),
    ],
)
async def test_a_client_may_only_lower_its_class(
    scheduler: DownloadScheduler,
    kind: PrincipalKind,
    requested: str | None,
    applied: DownloadClass,
) -> None:
    decision = await admitted(scheduler, big(kind=kind, requested_class=requested))
    assert decision.download_class is applied
    await scheduler.report(decision.grant, Interrupted())


# ---------------------------------------------------------------------- tickets


@pytest.mark.parametrize(
    "principals",
    [
        pytest.param(("alpha", "beta", "gamma"), id="three-principals"),
        # A fleet of agents under one service account: FIFO within the principal.
        pytest.param(("fleet", "fleet", "fleet"), id="one-principal"),
    ],
)
async def test_ticket_keeps_the_place_across_a_new_scheduler(
    make_scheduler: MakeScheduler, clock: FakeClock, principals: tuple[str, str, str]
) -> None:
    first, second, third = principals
    settings = contract_settings(sessions=1)
    old = await make_scheduler(settings)
    old_holder = await admitted(old, big("holder", "dl-h"))
    earlier = await queued(old, big(first, "dl-a"))
    assert earlier.ticket is not None
    await old.report(old_holder.grant, Interrupted())
    clock.advance(5.0)

    new = await make_scheduler(settings)  # a restart: same keys, same clock
    holder = await admitted(new, big("holder", "dl-h"))
    await queued(new, big(second, "dl-b"))  # arrives after the first download did
    clock.advance(1.0)
    await queued(new, big(first, "dl-a", ticket=earlier.ticket))
    # The ticket cannot be moved to another download: that one queues anew.
    await queued(new, big(third, "dl-g", ticket=earlier.ticket))
    await new.tick()
    clock.advance(1.0)

    returning = await queued(new, big(first, "dl-a", ticket=earlier.ticket))
    later = await queued(new, big(second, "dl-b"))
    moved = await queued(new, big(third, "dl-g"))
    assert (returning.position, later.position, moved.position) == (1, 2, 3)
    assert ticket_arrival(returning.ticket) == ticket_arrival(earlier.ticket)
    assert ticket_arrival(moved.ticket) != ticket_arrival(earlier.ticket)

    await deliver(new, holder)
    await new.tick()
    clock.advance(1.0)
    started = await admitted(new, big(first, "dl-a", ticket=returning.ticket))
    assert started.admission == "session"
    await new.report(started.grant, Interrupted())
