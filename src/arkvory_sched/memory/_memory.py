"""The in-memory implementation of the port: the embedded default.

A thin async shell around :class:`SchedulerCore`. All state lives in the core's parts
and every call is synchronous and short, so no lock is needed on one event loop; the
shell only adds what needs ``await``: waiting for a per-request place and waking held
requests when the queue changes. The request paths call the part whose job they are
(admission, delivery, the per-request places) directly, as the core would.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import anyio

from .._classes import DownloadClass, PrincipalKind
from .._clock import Clock, SystemClock
from .._grant_state import GrantState
from .._model import (
    ByteRange,
    Decision,
    DeliveryOutcome,
    DownloadRequest,
    Grant,
    SchedulerStats,
    TickReport,
)
from .._own_downloads import OWN_DOWNLOADS_LIMIT, OwnDownloads
from .._port import DownloadScheduler, FastPath
from .._queue_state import QueueState
from .._request_admission import PendingRequest, RequestTimer, wait_with_timeout
from .._tickets import TicketSigner
from .._ticking import next_tick_delay
from ..settings import SchedulerSettings
from ._core import SchedulerCore
from ._session import Session

__all__ = ["InMemoryDownloadScheduler"]


class InMemoryDownloadScheduler(DownloadScheduler, FastPath[GrantState[Session]]):
    """One process's queue in memory. Positions survive a restart through tickets.

    ``ticket_keys`` (newest first) enable ``Arkvory-Queue-Ticket``; without keys the
    scheduler works without tickets. ``request_timer`` is how a per-request wait passes
    time; a simulation on virtual time passes its own.

    It is its own :class:`FastPath` (ADR 0013): the handles are the core's
    :class:`GrantState` records.
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
        self._admission = self._core.admission
        self._delivery = self._core.delivery
        self._requests = self._core.requests
        self._changed = anyio.Event()
        self._watchers = 0
        self._request_timer = request_timer

    @property
    def core(self) -> SchedulerCore:
        """The synchronous core, for simulation and tests."""
        return self._core

    @property
    def settings(self) -> SchedulerSettings:
        return self._core.settings

    async def admit(self, request: DownloadRequest) -> Decision:
        decision = self._admission.admit(request)
        if not isinstance(decision, PendingRequest):
            return decision
        try:
            return await self._requests.wait(decision, request.effective_range, self._request_timer)
        except BaseException:
            self._notify()  # it may have handed back a place promotion gave it
            raise

    async def report(self, grant: Grant, outcome: DeliveryOutcome) -> None:
        self._delivery.report(grant, outcome)
        self._notify()

    async def progress(self, grant: Grant, nbytes: int) -> None:
        self._delivery.progress(grant, nbytes)

    # ------------------------------------------------------------ fast path
    def fast_path(self) -> FastPath[GrantState[Session]] | None:
        """This scheduler, unless a subclass overrides ``admit``, ``report`` or
        ``progress`` to observe or change each call (such as a recording test double):
        every request must then pass through them."""
        kind, base = type(self), InMemoryDownloadScheduler
        observed = (
            kind.admit is not base.admit
            or kind.report is not base.report
            or kind.progress is not base.progress
        )
        return None if observed else self

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
    ) -> GrantState[Session] | None:
        """A per-request place or a further range of an active download session, taken
        at once, or ``None``: then ``admit`` decides.

        A per-request place (``per_request``) is given back by
        :meth:`release_per_request`, a range (its ticket in ``ticket``) by
        :meth:`report_range`. The checks are the admission's (:meth:`Admission.admit_now`),
        in ``admit``'s order; raises :class:`InvalidRequestError` as ``admit`` does.
        """
        return self._admission.admit_now(
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

    def release_per_request(self, grant: GrantState[Session], sent: int) -> None:
        self._requests.release(grant, sent)  # wakes a waiter promoted into the place
        if self._watchers:
            self._notify()  # without replacing the event when nobody waits (the common case)

    def report_range(self, grant: GrantState[Session], outcome: DeliveryOutcome) -> None:
        self._delivery.report_state(grant, outcome)
        if self._watchers:
            self._notify()

    def progress_now(self, grant: GrantState[Session], nbytes: int) -> None:
        self._delivery.progress_per_request(grant, nbytes)

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

    async def queue_state(self) -> QueueState:
        return self._core.queue_state()

    async def downloads_of(
        self, principal: str, *, limit: int = OWN_DOWNLOADS_LIMIT
    ) -> OwnDownloads:
        return self._core.downloads_of(principal, limit)

    async def close(self) -> None:
        self._core.close()  # refuses and wakes the per-request waiters
        self._notify()

    def _notify(self) -> None:
        """Wake everything in ``wait_for_change``; a fresh event serves the next wait."""
        if not self._watchers:
            return  # nobody waits: no event to replace (the common, hot path)
        changed = self._changed
        self._changed = anyio.Event()
        changed.set()
