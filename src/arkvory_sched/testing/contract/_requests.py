"""Requests and answers of the contract suite: building GETs, asserting decisions.

Shared by every ``test_*`` module of the suite, so that each one reads as the rules it
proves. Only the async port and the :class:`FakeClock` are used: no implementation's
internals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from arkvory_sched import (
    Admitted,
    ByteRange,
    Delivered,
    DownloadRequest,
    DownloadScheduler,
    PrincipalKind,
    Queued,
    RangeKind,
    Rejected,
)
from arkvory_sched.testing import FakeClock

__all__ = [
    "BIG",
    "KIB",
    "MARKED_PAIR_RATE",
    "MIB",
    "RANGE",
    "SMALL",
    "MarkedPair",
    "admitted",
    "big",
    "chunk",
    "deliver",
    "four_busy_seconds",
    "keep_polling",
    "marked_pair_as_a_slot_frees",
    "queued",
    "rejected",
    "serve_next",
    "small",
    "ticket_arrival",
]

KIB = 1024
MIB = 1024 * KIB
RANGE = 8 * MIB
BIG = 40 * MIB  # five 8 MiB ranges, well above the 16 MiB session threshold
SMALL = 1 * MIB
MARKED_PAIR_RATE = 192 * MIB  # three holders: 64 MiB/s each; two: 96 MiB/s each


def big(
    principal: str = "ci-bot",
    download_id: str | None = "dl-1",
    *,
    byte_range: ByteRange | None = None,
    ticket: str | None = None,
    kind: PrincipalKind = PrincipalKind.SERVICE,
    object_id: str = "releases/app-2.4.iso",
    requested_class: str | None = None,
    address: str = "192.0.2.10",
    size: int = BIG,
) -> DownloadRequest:
    return DownloadRequest(
        principal=principal,
        principal_kind=kind,
        object_id=object_id,
        object_size=size,
        byte_range=byte_range,
        download_id=download_id,
        client_address=address,
        requested_class=requested_class,
        ticket=ticket,
    )


def small(
    principal: str = "ci-bot",
    *,
    kind: PrincipalKind = PrincipalKind.SERVICE,
    requested_class: str | None = None,
    download_id: str | None = None,
) -> DownloadRequest:
    return DownloadRequest(
        principal=principal,
        principal_kind=kind,
        object_id="docs/readme.txt",
        object_size=SMALL,
        download_id=download_id,
        client_address="192.0.2.20",
        requested_class=requested_class,
    )


def chunk(index: int, size: int = BIG) -> ByteRange:
    start = index * RANGE
    return ByteRange(start, min(size, start + RANGE), RangeKind.BOUNDED)


async def admitted(scheduler: DownloadScheduler, request: DownloadRequest) -> Admitted:
    decision = await scheduler.admit(request)
    assert isinstance(decision, Admitted), decision
    return decision


async def queued(scheduler: DownloadScheduler, request: DownloadRequest) -> Queued:
    decision = await scheduler.admit(request)
    assert isinstance(decision, Queued), decision
    return decision


async def rejected(scheduler: DownloadScheduler, request: DownloadRequest) -> Rejected:
    decision = await scheduler.admit(request)
    assert isinstance(decision, Rejected), decision
    assert decision.retry_after >= 1
    return decision


async def deliver(scheduler: DownloadScheduler, decision: Admitted) -> None:
    await scheduler.report(decision.grant, Delivered(decision.grant.byte_range))


async def four_busy_seconds(
    scheduler: DownloadScheduler, clock: FakeClock, holder: Admitted, link: int
) -> None:
    """The holder reports its first three seconds at ``link`` bytes a second, then one
    second at a time for three more, a tick after each: the rate can be read, and a
    start is no longer told on a guess (ADR 0034, 0042)."""
    clock.advance(1.0)
    await scheduler.progress(holder.grant, 3 * link)
    await scheduler.tick()
    for _ in range(3):
        clock.advance(1.0)
        await scheduler.progress(holder.grant, link)
        await scheduler.tick()


def ticket_arrival(ticket: str | None) -> str:
    """The arrival field of a ``2.<arrival>.<issued>.<signature>`` ticket (R-TICKET-1)."""
    assert ticket is not None
    version, arrival, _issued, _signature = ticket.split(".")
    assert version == "2"
    return arrival


async def keep_polling(
    scheduler: DownloadScheduler,
    clock: FakeClock,
    waiters: Sequence[DownloadRequest],
    seconds: float,
    *,
    every: float = 20.0,
) -> None:
    """Let ``seconds`` of queue time pass, a tick every ``every`` seconds and each waiter
    polling after it, so that none of them becomes a no-show (the margin is 30 s after
    ``checkAt``, R-SESS-7); all must stay queued."""
    elapsed = 0.0
    while elapsed < seconds:
        step = min(every, seconds - elapsed)
        clock.advance(step)
        elapsed += step
        await scheduler.tick()
        for waiter in waiters:
            await queued(scheduler, waiter)


async def serve_next(
    scheduler: DownloadScheduler,
    clock: FakeClock,
    waiters: list[DownloadRequest],
    *,
    complete: bool = True,
) -> tuple[DownloadRequest, Admitted]:
    """Who the queue serves next when the only slot is free: a tick marks the waiter,
    then the waiters ask, and the one admitted is taken out of ``waiters``.

    The order in which they ask does not matter: only the marked waiter may take the
    slot (back-ups wait out a poll period first, R-SESS-12). With ``complete`` its
    whole download is delivered at once, freeing the slot for the next call.
    """
    clock.advance(0.5)
    await scheduler.tick()
    for waiter in waiters:
        decision = await scheduler.admit(waiter)
        if isinstance(decision, Admitted):
            waiters.remove(waiter)
            if complete:
                await deliver(scheduler, decision)
            return waiter, decision
        assert isinstance(decision, Queued), decision
    raise AssertionError("no waiter got the free slot")


@dataclass(frozen=True, slots=True)
class MarkedPair:
    """Two marked waiters, told their places, as the first of three slots frees."""

    holders: list[Admitted]
    waiters: list[DownloadRequest]  # each with the ticket it was told
    due: list[float]  # seconds from each one's answer to its checkAt


async def marked_pair_as_a_slot_frees(
    scheduler: DownloadScheduler, clock: FakeClock, next_ends_in: float
) -> MarkedPair:
    """Three slots on a link of :data:`MARKED_PAIR_RATE` (``sessions=3``), two finishing
    soon; the tick marks the first two waiters for them and each is told its place,
    asked back in about a second; 0.1 s later the first slot frees, and the next one
    frees ``next_ends_in`` seconds after that, at its share of the rate (issue #28)."""
    holders = [
        await admitted(scheduler, big("holder-0", "dl-h0", size=32 * MIB)),
        await admitted(scheduler, big("holder-1", "dl-h1", size=round(next_ends_in * 96 * MIB))),
        await admitted(scheduler, big("holder-2", "dl-h2", size=64 * 1024 * MIB)),
    ]
    waiters = [big(f"waiter-{n}", f"dl-w{n}", size=400 * MIB) for n in range(2)]
    first = [await queued(scheduler, waiter) for waiter in waiters]
    await scheduler.tick()  # marks both
    clock.advance(0.1)
    told = [
        await queued(scheduler, replace(waiter, ticket=answer.ticket))
        for waiter, answer in zip(waiters, first, strict=True)
    ]
    assert [answer.position for answer in told] == [1, 2]
    due = [answer.check_at - clock.wall() for answer in told]
    clock.advance(0.1)
    await scheduler.report(holders[0].grant, Delivered(None))  # a slot frees now
    return MarkedPair(
        holders,
        [
            replace(waiter, ticket=answer.ticket)
            for waiter, answer in zip(waiters, told, strict=True)
        ],
        due,
    )
