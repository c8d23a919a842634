"""Shared helpers for the unit tests of the scheduling core.

``make_core`` builds a :class:`SchedulerCore` on a :class:`FakeClock` with a small, quiet
configuration: two slots, no reserve, no per-principal share, no preemption and no
aging, so that a test switches on only the rule it proves. ``req`` builds one GET of a
session-sized object; ``ask`` sends it (optionally with another range or ticket).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from arkvory_sched import (
    Admitted,
    ByteRange,
    Delivered,
    DownloadClass,
    DownloadRequest,
    Failed,
    Grant,
    Interrupted,
    PrincipalKind,
    Queued,
    RangeKind,
    Rejected,
    SchedulerSettings,
    TicketSigner,
)
from arkvory_sched._session_keys import session_key
from arkvory_sched.memory._core import PendingRequest, SchedulerCore
from arkvory_sched.testing import FakeClock

MIB = 1024 * 1024
GIB = 1024 * MIB
BIG = 4 * GIB  # well above the 16 MiB session threshold
SMALL = 1 * MIB  # below it: admitted per request
CHUNK = 8 * MIB
TICKET_KEY = b"unit-test-ticket-key-0123456789ab"

_QUIET: dict[str, Any] = {
    "sessions": 2,
    "reserve": 0,
    "preempt": False,
    "aging_minutes": 0.0,
}


def make_settings(**overrides: Any) -> SchedulerSettings:
    values = {**_QUIET, **overrides}
    values.setdefault("per_principal", values["sessions"])
    return SchedulerSettings(**values)


def make_core(
    *, clock: FakeClock | None = None, tickets: bool = False, **overrides: Any
) -> tuple[SchedulerCore, FakeClock]:
    """A core on a fake clock; ``tickets=True`` signs tickets with :data:`TICKET_KEY`."""
    clock = clock or FakeClock()
    signer = TicketSigner([TICKET_KEY]) if tickets else None
    return SchedulerCore(make_settings(**overrides), clock, signer), clock


def req(
    principal: str = "alice",
    obj: str = "obj",
    *,
    size: int = BIG,
    download_id: str | None = "dl",
    kind: PrincipalKind = PrincipalKind.SERVICE,
    address: str = "192.0.2.1",
    requested_class: str | None = None,
    base_class: DownloadClass | None = None,
    ticket: str | None = None,
    byte_range: ByteRange | None = None,
) -> DownloadRequest:
    return DownloadRequest(
        principal=principal,
        principal_kind=kind,
        object_id=obj,
        object_size=size,
        byte_range=byte_range,
        download_id=download_id,
        client_address=address,
        requested_class=requested_class,
        base_class=base_class,
        ticket=ticket,
    )


def ask(
    core: SchedulerCore,
    request: DownloadRequest,
    byte_range: ByteRange | None = None,
    *,
    ticket: str | None = None,
) -> Admitted | Queued | Rejected:
    """One session request: never a per-request wait."""
    changes: dict[str, Any] = {}
    if byte_range is not None:
        changes["byte_range"] = byte_range
    if ticket is not None:
        changes["ticket"] = ticket
    decision = core.admit(dataclasses.replace(request, **changes) if changes else request)
    assert not isinstance(decision, PendingRequest), decision
    return decision


def admitted(decision: object) -> Grant:
    assert isinstance(decision, Admitted), decision
    return decision.grant


def queued(decision: object) -> Queued:
    assert isinstance(decision, Queued), decision
    return decision


def rejected(decision: object) -> Rejected:
    assert isinstance(decision, Rejected), decision
    return decision


def span(start: int, end: int) -> ByteRange:
    """A bounded range ``[start, end)``."""
    return ByteRange(start, end, RangeKind.BOUNDED)


def open_from(start: int, size: int) -> ByteRange:
    """``bytes=start-`` resolved against an object of ``size`` bytes."""
    return ByteRange(start, size, RangeKind.OPEN)


def suffix(length: int, size: int) -> ByteRange:
    """``bytes=-length`` resolved against an object of ``size`` bytes."""
    return ByteRange(size - length, size, RangeKind.SUFFIX)


def deliver(core: SchedulerCore, grant: Grant) -> None:
    core.report(grant, Delivered(grant.byte_range))


def interrupt(core: SchedulerCore, grant: Grant, sent: int = 0) -> None:
    core.report(grant, Interrupted(sent))


def fail(core: SchedulerCore, grant: Grant, sent: int = 0) -> None:
    core.report(grant, Failed(sent))


def start(core: SchedulerCore, request: DownloadRequest) -> Grant:
    """Admit a session that must start at once; its first response stays in flight."""
    return admitted(ask(core, request))


def download_all(core: SchedulerCore, request: DownloadRequest) -> None:
    """Admit and deliver the whole object in one response (the session completes)."""
    deliver(core, admitted(ask(core, request)))


def wait_in_queue(core: SchedulerCore, request: DownloadRequest) -> Queued:
    return queued(ask(core, request))


def keep_polling(
    core: SchedulerCore,
    clock: FakeClock,
    waiters: Iterable[DownloadRequest],
    seconds: float,
    *,
    every: float = 10.0,
) -> dict[DownloadRequest, Queued]:
    """Let ``seconds`` pass with a tick every ``every`` seconds, each waiter polling after
    each tick (so none becomes a no-show). Every poll must be answered ``Queued``."""
    waiters = list(waiters)
    last: dict[DownloadRequest, Queued] = {}
    elapsed = 0.0
    while elapsed < seconds:
        step = min(every, seconds - elapsed)
        clock.advance(step)
        elapsed += step
        core.tick()
        for waiter in waiters:
            last[waiter] = queued(ask(core, waiter))
    return last


def position(core: SchedulerCore, request: DownloadRequest) -> int:
    """The queue position a waiting request is told at its next decided poll, as its
    principal's own downloads page shows it (after a tick: never a newcomer's None).

    Read from that page, not from a poll: a poll well before its checkAt is told its
    last answer again (ADR 0029), and these tests move the queue between polls."""
    wanted = (request.object_id, request.download_id)
    shown = core.downloads_of(request.principal).downloads
    places = [d.position for d in shown if (d.object_id, d.download_id) == wanted]
    assert len(places) == 1 and places[0] is not None, shown
    return places[0]


def serve_order(
    core: SchedulerCore,
    clock: FakeClock,
    holder: Grant,
    waiters: list[DownloadRequest],
) -> list[DownloadRequest]:
    """With the only slot held by ``holder``: repeatedly free the slot, tick, and let
    the waiters poll in the queue's own service order; records who gets each slot. The
    others keep polling while it is taken (they stay no-show free); then the served
    waiter's response completes, freeing the slot again."""
    assert core.settings.sessions == 1
    order: list[DownloadRequest] = []
    remaining = list(waiters)
    grant = holder
    while remaining:
        deliver(core, grant)
        clock.advance(0.5)
        core.tick()
        rank = {session.key: i for i, session in enumerate(core.table.queue.iter_fair())}
        served: DownloadRequest | None = None
        for waiter in sorted(remaining, key=lambda w: rank[key_of(w)]):
            decision = ask(core, waiter)
            if served is None and isinstance(decision, Admitted):
                served, grant = waiter, decision.grant
            else:
                queued(decision)
        assert served is not None, "no waiter got the free slot"
        order.append(served)
        remaining.remove(served)
    deliver(core, grant)
    return order


def key_of(request: DownloadRequest) -> bytes:
    """The session key the core derives for ``request`` (R-SESS-2)."""
    return session_key(
        request.principal, request.object_id, request.download_id, request.client_address
    )


def assert_clean(core: SchedulerCore) -> None:
    assert core.debug_invariants() == []


class SteppingClock:
    """The observer's clock: each reading ``step`` seconds after the one before, so
    that the response's pace is fixed by the test, not by the machine."""

    def __init__(self, step: float) -> None:
        self.step = step
        self.now = 0.0

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def queued_answer(wall: float, **changes: Any) -> Queued:
    """A waiting answer as a store gives it, ten minutes from ``wall``; ``changes``
    replace any field (the answer's rendering tests need nothing else)."""
    values: dict[str, Any] = {
        "position": 3,
        "starts_at": wall + 600,
        "starts_earliest": wall + 540,
        "starts_latest": wall + 660,
        "check_at": wall + 300,
        "retry_after": 300,
        "download_class": DownloadClass.RELEASE,
        "ticket": None,
    }
    values.update(changes)
    return Queued(**values)
