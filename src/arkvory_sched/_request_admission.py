"""Per-request admission: small objects and the ``shared`` strategy (R-SESS-3), for every store.

One component, used as it is by the in-memory core and by the PostgreSQL
implementation, so the per-request rules exist once: ``max_downloads`` places, their
bounded waiting room (:class:`RequestQueue`: ``transfer_queue_limit`` waiting requests,
``transfer_queue_per_principal`` per principal), a wait of up to
``transfer_queue_wait_seconds`` for a place, the per-request ``Retry-After`` from the
smoothed response duration, and counters for ``stats()``. Per-request places are always
a process's own — small objects never touch a database.

Rules of this file:

* The synchronous methods decide and count; they never block and read time only from
  the injected :class:`Clock`. Only :meth:`RequestAdmission.wait` awaits, and it passes
  time through the :data:`RequestTimer` it is given (a simulation passes virtual time).
* Every grant is ended exactly once (``release``, ``report`` or ``report_state``); a
  second end is a no-op. A waiter promoted into a freed place is woken here, so a store
  needs no bookkeeping of its own for waiters.
* Which requests come here is the store's decision (object size, strategy and, after
  a switch to ``shared``, R-STRAT-4: a request of an active session stays with its
  session); this component only admits what it is given.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from ._classes import DownloadClass
from ._clock import Clock
from ._grant_state import GrantState
from ._model import (
    Admitted,
    ByteRange,
    Delivered,
    DeliveryOutcome,
    Grant,
    Interrupted,
    Rejected,
    RejectReason,
)
from ._rate import PeakRateMeter
from ._request_queue import RequestQueue
from .policy import SHUTDOWN_RETRY_SECONDS, request_retry_after
from .settings import SchedulerSettings

__all__ = [
    "PendingRequest",
    "RequestAdmission",
    "RequestTimer",
    "wait_with_timeout",
]


RequestTimer = Callable[[anyio.Event, float], Awaitable[None]]
"""Waits for an event for at most ``timeout`` seconds (how per-request waits pass time)."""


async def wait_with_timeout(event: anyio.Event, timeout: float) -> None:
    """The real-time :data:`RequestTimer`."""
    with anyio.move_on_after(timeout):
        await event.wait()


@dataclass(frozen=True, slots=True)
class PendingRequest:
    """A per-request admission that must wait: :meth:`RequestAdmission.wait` waits on it."""

    waiter_id: int
    principal: str
    download_class: DownloadClass


class RequestAdmission:
    """The per-request places of one process, their waiting room and their accounting.

    Its places have no session (``GrantState.session`` is ``None``), so they fit the
    ``GrantState`` of any store (typed ``GrantState[Any]``).

    ``rate`` and ``bytes_by_class`` are the store's own delivery-rate meter and byte
    counters (indexed by class rank): per-request responses feed them like any other, so
    the delivery rate behind start estimates and the byte counters see small objects too.
    The sizes come from ``settings`` once; they are environment-only (R-SET-1).
    """

    __slots__ = ("_bytes_by_class", "_clock", "_grants", "_next_token", "_queue", "_rate",
                 "_refused_at_close", "_request_seconds", "_wait_seconds", "_waiters",
                 "admitted", "closed", "rejections")  # fmt: skip

    def __init__(
        self,
        settings: SchedulerSettings,
        clock: Clock,
        *,
        rate: PeakRateMeter,
        bytes_by_class: list[int],
    ) -> None:
        self._clock = clock
        self._rate = rate
        self._bytes_by_class = bytes_by_class
        self._wait_seconds = settings.transfer_queue_wait_seconds
        self._queue = RequestQueue(
            settings.max_downloads,
            settings.transfer_queue_limit,
            settings.transfer_queue_per_principal,
        )
        self._grants: dict[int, GrantState[Any]] = {}
        # Tokens count down from -1: a store's session grants count up, so no two grants
        # of one store share a token, and a caller may key its own records by token.
        self._next_token = 0
        self._request_seconds = 1.0  # smoothed per-request response duration
        self._waiters: dict[int, anyio.Event] = {}
        self._refused_at_close: set[int] = set()  # waiters close() drained: never promoted
        self.closed = False
        self.admitted = 0
        self.rejections: dict[RejectReason, int] = {}

    # ================================================================ counts
    @property
    def active(self) -> int:
        """Places taken (granted, or promoted and not yet granted)."""
        return self._queue.active

    @property
    def waiting(self) -> int:
        return self._queue.waiting

    @property
    def in_flight(self) -> int:
        """Grants not yet ended."""
        return len(self._grants)

    # ================================================================ admission
    def admit(
        self, principal: str, cls: DownloadClass, byte_range: ByteRange | None
    ) -> Admitted | Rejected | PendingRequest:
        """A place at once, a refusal, or a :class:`PendingRequest` to :meth:`wait` on."""
        if self.closed:
            return self._reject(RejectReason.SHUTTING_DOWN, SHUTDOWN_RETRY_SECONDS, cls)
        if self._queue.try_acquire():
            return self.grant(cls, byte_range)
        if self._wait_seconds <= 0:
            return self._reject(RejectReason.REQUEST_QUEUE_FULL, self.retry_after(), cls)
        waiter = self._queue.enqueue(principal)
        if isinstance(waiter, RejectReason):
            return self._reject(waiter, self.retry_after(), cls)
        return PendingRequest(waiter, principal, cls)

    def take_now(self, cls: DownloadClass, byte_range: ByteRange | None) -> GrantState[Any] | None:
        """A free place as a bare :class:`GrantState` (the fast path), or ``None``: then
        :meth:`admit` decides. Ended by :meth:`release`."""
        if self.closed or not self._queue.try_acquire():
            return None
        now = self._clock.monotonic()
        self._next_token -= 1
        token = self._next_token
        state: GrantState[Any] = GrantState(token, None, byte_range, now, now, download_class=cls)
        self._grants[token] = state
        self.admitted += 1
        return state

    def grant(self, cls: DownloadClass, byte_range: ByteRange | None) -> Admitted:
        """Issue a grant for a place already counted as taken (by admit, or a promotion)."""
        now = self._clock.monotonic()
        self._next_token -= 1
        token = self._next_token
        self._grants[token] = GrantState(token, None, byte_range, now, now, download_class=cls)
        self.admitted += 1
        return Admitted(Grant(token, "per-request", cls, byte_range))

    def cancel(self, pending: PendingRequest) -> Rejected | None:
        """The wait for a place ran out. ``None`` if it was promoted meanwhile: the place
        is then the waiter's, to :meth:`grant` or give back."""
        if not self._queue.cancel(pending.waiter_id):
            return None
        return self._reject(
            RejectReason.REQUEST_WAIT_EXPIRED, self.retry_after(), pending.download_class
        )

    async def wait(
        self, pending: PendingRequest, byte_range: ByteRange | None, timer: RequestTimer
    ) -> Admitted | Rejected:
        """Wait up to ``transfer_queue_wait_seconds`` for a place, then grant or refuse.

        A caller that gives up (client gone, task cancelled) leaves the waiting room, and
        a place promotion gave it meanwhile is handed back, or it would leak (R-RES-3).
        A waiter that :meth:`close` drained is refused, never granted a place.
        """
        waiter_id, cls = pending.waiter_id, pending.download_class
        event = anyio.Event()
        self._waiters[waiter_id] = event
        try:
            await timer(event, self._wait_seconds)
        except BaseException:
            drained = waiter_id in self._refused_at_close
            if not drained and self.cancel(pending) is None:
                taken = self.grant(cls, None)
                self.report(taken.grant, Interrupted())
            self._refused_at_close.discard(waiter_id)
            raise
        finally:
            self._waiters.pop(waiter_id, None)
        if waiter_id in self._refused_at_close:
            # Drained by close(): it holds no place, so it must not be granted one.
            self._refused_at_close.discard(waiter_id)
            return Rejected(RejectReason.SHUTTING_DOWN, SHUTDOWN_RETRY_SECONDS, cls)
        if self.closed and not event.is_set():
            self.cancel(pending)
            return Rejected(RejectReason.SHUTTING_DOWN, SHUTDOWN_RETRY_SECONDS, cls)
        refused = self.cancel(pending)
        if refused is not None:
            return refused
        # Promoted: the place is ours (also when promotion raced the timeout).
        return self.grant(cls, byte_range)

    # ================================================================ delivery
    def report(self, grant: Grant, outcome: DeliveryOutcome) -> list[int]:
        """End a per-request grant; returns the waiters promoted into the freed place."""
        state = self._grants.get(grant.token)
        if state is None:
            return []
        return self.report_state(state, outcome)

    def report_state(self, state: GrantState[Any], outcome: DeliveryOutcome) -> list[int]:
        """:meth:`report` by the grant's state."""
        if isinstance(outcome, Delivered):
            counted = outcome.byte_range or state.byte_range
            sent = counted.length if counted is not None else 0
        else:
            sent = outcome.bytes_sent
        return self.release(state, sent)

    def release(self, state: GrantState[Any], sent: int) -> list[int]:
        """Give back a place after ``sent`` bytes; a second call is a no-op.

        ``sent`` is the byte count a ``Delivered`` outcome stands for (the whole object,
        or the granted range), or the bytes sent before an interruption or failure.
        Returns the waiters promoted into the freed place (they are woken here).
        """
        if self._grants.pop(state.token, None) is None:
            return []
        now = self._clock.monotonic()
        # The byte accounting inline, and the smoothing without max() calls: this runs
        # once per small object, and the state is dropped right after.
        nbytes = sent - state.progressed
        if nbytes > 0:
            self._rate.record(state.last_progress, now, nbytes)
            self._bytes_by_class[state.download_class.rank] += nbytes
        duration = now - state.started
        self._request_seconds = 0.8 * self._request_seconds + 0.2 * (
            duration if duration > 0.01 else 0.01
        )
        promoted = self._queue.release()
        if promoted:
            self._wake(promoted)
        return promoted

    def progress(self, grant: Grant, nbytes: int) -> None:
        state = self._grants.get(grant.token)
        if state is not None:
            self.progress_state(state, nbytes)

    def progress_state(self, state: GrantState[Any], nbytes: int) -> None:
        """``nbytes`` more bytes of a granted response were sent (ignored once ended)."""
        if nbytes <= 0 or state.token not in self._grants:
            return
        now = self._clock.monotonic()
        self._rate.record(state.last_progress, now, nbytes)
        state.last_progress = now
        state.progressed += nbytes
        self._bytes_by_class[state.download_class.rank] += nbytes

    # ================================================================ control
    def retry_after(self) -> int:
        """A refused request's ``Retry-After``: the time for the queue ahead to drain at
        the smoothed response duration (never a fixed 2 s)."""
        queue = self._queue
        return request_retry_after(self._request_seconds, queue.waiting, queue.max_active)

    def close(self) -> list[int]:
        """Refuse new requests and wake every waiter with a refusal; returns their ids.

        Grants in flight may still end (R-RES-4).
        """
        self.closed = True
        drained = self._queue.drain()
        self._refused_at_close.update(drained)
        self._wake(drained)
        return drained

    def _wake(self, waiter_ids: list[int]) -> None:
        waiters = self._waiters
        for waiter_id in waiter_ids:
            event = waiters.get(waiter_id)
            if event is not None:
                event.set()

    def _reject(self, reason: RejectReason, retry_after: int, cls: DownloadClass) -> Rejected:
        self.rejections[reason] = self.rejections.get(reason, 0) + 1
        return Rejected(reason, retry_after, cls)
