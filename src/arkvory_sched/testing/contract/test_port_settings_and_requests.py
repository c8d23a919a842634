"""The ``DownloadScheduler`` contract, run against every implementation: what comes in.

New settings, statistics without ids, malformed request values and tickets across a
new scheduler. Only the async port and the :class:`FakeClock` are used here: no
implementation's internals.
"""

from __future__ import annotations

import dataclasses
import enum

import pytest

from arkvory_sched import (
    ClassStats,
    DownloadClass,
    DownloadRequest,
    DownloadScheduler,
    EstimateAccuracy,
    HistogramSnapshot,
    IdleSlots,
    Interrupted,
    InvalidRequestError,
    PrincipalKind,
    SchedulerStats,
    Strategy,
)
from arkvory_sched.testing import FakeClock, MakeScheduler, contract_settings

from ._requests import (
    BIG,
    admitted,
    big,
    chunk,
    deliver,
    queued,
    small,
    ticket_arrival,
)

pytestmark = pytest.mark.anyio


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
            value, SchedulerStats | ClassStats | HistogramSnapshot | EstimateAccuracy | IdleSlots
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
