"""The in-memory implementation of the port: the embedded default.

A thin async shell around :class:`SchedulerCore`. All state lives in the core and every
core call is synchronous and short, so no lock is needed on one event loop; the shell
only adds what needs ``await``: waiting for a per-request place and waking held
requests when the queue changes.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

import anyio

from ._classes import DownloadClass, PrincipalKind
from ._clock import Clock, SystemClock
from ._core import GrantState, PendingRequest, SchedulerCore
from ._model import (
    ByteRange,
    Decision,
    DeliveryOutcome,
    DownloadRequest,
    Grant,
    Interrupted,
    Rejected,
    RejectReason,
    SchedulerStats,
    TickReport,
)
from ._port import DownloadScheduler
from ._settings import SchedulerSettings
from ._tickets import TicketSigner
from ._ticking import next_tick_delay

__all__ = ["InMemoryDownloadScheduler", "RequestTimer", "wait_with_timeout"]

RequestTimer = Callable[[anyio.Event, float], Awaitable[None]]
"""Waits for an event for at most ``timeout`` seconds (how per-request waits pass time)."""


async def wait_with_timeout(event: anyio.Event, timeout: float) -> None:
    """The real-time :data:`RequestTimer`."""
    with anyio.move_on_after(timeout):
        await event.wait()


class InMemoryDownloadScheduler(DownloadScheduler):
    """One process's queue in memory. Positions survive a restart through tickets.

    ``ticket_keys`` (newest first) enable ``Arkvory-Queue-Ticket``; without keys the
    scheduler works without tickets. ``request_timer`` is how a per-request wait passes
    time; a simulation on virtual time passes its own.
    """

    def __init__(
        self,
        settings: SchedulerSettings | None = None,
        *,
        clock: Clock | None = None,
        ticket_keys: Sequence[bytes] = (),
        request_timer: RequestTimer = wait_with_timeout,
    ) -> None:
        signer = TicketSigner(ticket_keys) if ticket_keys else None
        self._core = SchedulerCore(
            settings or SchedulerSettings.from_env(), clock or SystemClock(), signer
        )
        self._changed = anyio.Event()
        self._watchers = 0
        self._request_waiters: dict[int, anyio.Event] = {}
        self._refused_at_close: set[int] = set()  # waiters close() drained: never promoted
        self._request_timer = request_timer

    @property
    def core(self) -> SchedulerCore:
        """The synchronous core, for simulation and tests."""
        return self._core

    @property
    def settings(self) -> SchedulerSettings:
        return self._core.settings

    async def admit(self, request: DownloadRequest) -> Decision:
        decision = self._core.admit(request)
        if not isinstance(decision, PendingRequest):
            return decision
        return await self._wait_for_request_place(decision, request)

    async def _wait_for_request_place(
        self, pending: PendingRequest, request: DownloadRequest
    ) -> Decision:
        event = anyio.Event()
        self._request_waiters[pending.waiter_id] = event
        try:
            await self._request_timer(event, self._core.settings.transfer_queue_wait_seconds)
        except BaseException:
            # The caller gave up (client gone, task cancelled): leave the waiting room,
            # and hand back a place promotion gave us meanwhile, or it leaks (R-RES-3).
            drained = pending.waiter_id in self._refused_at_close
            if not drained and self._core.cancel_pending(pending) is None:
                taken = self._core.grant_per_request(pending.download_class, None)
                self._wake_requests(self._core.report(taken.grant, Interrupted()))
                self._notify()
            self._refused_at_close.discard(pending.waiter_id)
            raise
        finally:
            self._request_waiters.pop(pending.waiter_id, None)
        if pending.waiter_id in self._refused_at_close:
            # Drained by close(): it holds no place, so it must not be granted one.
            self._refused_at_close.discard(pending.waiter_id)
            return Rejected(RejectReason.SHUTTING_DOWN, 5, pending.download_class)
        if self._core.closed and not event.is_set():
            self._core.cancel_pending(pending)
            return Rejected(RejectReason.SHUTTING_DOWN, 5, pending.download_class)
        refused = self._core.cancel_pending(pending)
        if refused is not None:
            return refused
        # Promoted: the place is ours (also when promotion raced the timeout).
        return self._core.grant_per_request(pending.download_class, request.effective_range)

    async def report(self, grant: Grant, outcome: DeliveryOutcome) -> None:
        promoted = self._core.report(grant, outcome)
        self._wake_requests(promoted)
        self._notify()

    async def progress(self, grant: Grant, nbytes: int) -> None:
        self._core.progress(grant, nbytes)

    # ------------------------------------------------------------ fast paths
    def offers_fast_path(self) -> bool:
        """Whether the synchronous methods below may stand in for the port's.

        ``admit_now``, ``release_per_request``, ``report_range`` and ``progress_now``
        decide and account exactly as ``admit``, ``report`` and ``progress`` do for a
        small object while a place is free, and for a further range of a download that
        holds its slot, without building the port's request and grant values and without
        an ``await`` (the middleware uses them for most requests). Not so for a subclass
        that overrides one of the three to observe or change each call, such as a
        recording test double: every request must then pass through them.
        """
        kind, base = type(self), InMemoryDownloadScheduler
        return (
            kind.admit is base.admit
            and kind.report is base.report
            and kind.progress is base.progress
        )

    def admit_now(
        self,
        principal: str,
        principal_kind: PrincipalKind,
        base_class: DownloadClass | None,
        requested_class: str | None,
        download_id: str | None,
        object_id: str,
        object_size: int,
        client_address: str,
        byte_range: ByteRange | None,
    ) -> GrantState | None:
        """A per-request place or a further range of an active download session, taken
        at once, or ``None``: then ``admit`` decides.

        A per-request place (``session`` is ``None``) is given back by
        :meth:`release_per_request`, a range (its ticket in ``ticket``) by
        :meth:`report_range`. See :meth:`SchedulerCore.admit_now`; raises
        :class:`InvalidRequestError` as ``admit`` does.
        """
        return self._core.admit_now(
            principal,
            principal_kind,
            base_class,
            requested_class,
            download_id,
            object_id,
            object_size,
            client_address,
            byte_range,
        )

    def release_per_request(self, place: GrantState, sent: int) -> None:
        """``report`` for a place of :meth:`admit_now`: ``sent`` as
        :meth:`SchedulerCore.release_per_request` takes it."""
        self._released(self._core.release_per_request(place, sent))

    def report_range(self, state: GrantState, outcome: DeliveryOutcome) -> None:
        """``report`` for a range of :meth:`admit_now`."""
        self._released(self._core.report_state(state, outcome))

    def _released(self, promoted: list[int]) -> None:
        """After a fast-path release: wake the per-request waiters promoted into the
        freed places, and any ``wait_for_change`` (without replacing its event when
        nobody waits, the common case)."""
        if promoted:
            self._wake_requests(promoted)
        if self._watchers:
            self._notify()

    def progress_now(self, state: GrantState, nbytes: int) -> None:
        """``progress`` for a place or range of the fast path."""
        self._core.progress_per_request(state, nbytes)

    async def wait_for_change(self, timeout: float) -> None:
        changed = self._changed
        self._watchers += 1
        try:
            with anyio.move_on_after(max(0.0, timeout)):
                await changed.wait()
        finally:
            self._watchers -= 1

    async def tick(self) -> TickReport:
        started = time.perf_counter()
        outcome = self._core.tick()
        duration = time.perf_counter() - started
        self._core.record_tick_duration(duration)
        self._notify()
        return TickReport(
            duration=duration,
            next_tick_in=next_tick_delay(duration),
            expired=outcome.expired,
            marked=outcome.marked,
            preempted=outcome.preempted,
        )

    async def configure(self, settings: SchedulerSettings) -> None:
        self._core.configure(settings)
        self._notify()

    async def stats(self) -> SchedulerStats:
        return self._core.stats()

    async def close(self) -> None:
        waiters = self._core.close()
        self._refused_at_close.update(waiters)
        for waiter_id in waiters:
            event = self._request_waiters.get(waiter_id)
            if event is not None:
                event.set()
        self._notify()

    def _wake_requests(self, waiter_ids: list[int]) -> None:
        for waiter_id in waiter_ids:
            event = self._request_waiters.get(waiter_id)
            if event is not None:
                event.set()

    def _notify(self) -> None:
        """Wake everything in ``wait_for_change``; a fresh event serves the next wait."""
        if not self._watchers:
            return  # nobody waits: no event to replace (the common, hot path)
        changed = self._changed
        self._changed = anyio.Event()
        changed.set()
