"""The ``DownloadScheduler`` port: the one interface every caller and implementation share.

The docstrings here are the contract. The in-memory implementation (the embedded
default) and the PostgreSQL implementation both satisfy it, and one contract test suite
runs against each. Callers — the ASGI middleware and the mass-update simulation — never
depend on anything else.
"""

from __future__ import annotations

import abc

from ._model import Decision, DeliveryOutcome, DownloadRequest, Grant, SchedulerStats, TickReport
from ._settings import SchedulerSettings

__all__ = ["DownloadScheduler"]


class DownloadScheduler(abc.ABC):
    """Admits whole download sessions, queues the rest, and tells each client its place.

    Lifecycle of one response::

        decision = await scheduler.admit(request)
        if isinstance(decision, Admitted):
            ... stream the body, optionally calling progress() ...
            await scheduler.report(decision.grant, Delivered(range) | Interrupted() | Failed())

    Every ``Admitted`` must be followed by exactly one ``report``; that is what returns the
    counters to zero (R-RES-3). ``tick()`` must be called periodically (see
    ``run_tick_loop``); there are no per-session timers.
    """

    @abc.abstractmethod
    async def admit(self, request: DownloadRequest) -> Decision:
        """Decide one GET.

        Objects larger than ``session_min_bytes`` under a session strategy are admitted
        per **session**: the answer is immediate — ``Admitted`` (the session holds a
        slot), ``Queued`` (position, estimate, ``Retry-After``, ticket) or ``Rejected``
        (a bound was hit). Smaller objects and the ``shared`` strategy are admitted per
        **request** through the bounded per-request queue: this call may wait up to
        ``transfer_queue_wait_seconds`` for a slot before returning ``Admitted`` or
        ``Rejected``.

        Raises ``InvalidRequestError`` for a malformed header value (unknown class,
        bad download id) — the caller answers ``400`` naming ``error.field``.
        """

    @abc.abstractmethod
    async def report(self, grant: Grant, outcome: DeliveryOutcome) -> None:
        """Record how a granted response ended; releases its in-flight place.

        ``Delivered`` adds its range to the session's coverage (possibly completing the
        session and freeing its slot); ``Interrupted`` and ``Failed`` add nothing.
        Reporting the same grant twice, or a grant from a lost lease, is a no-op.
        """

    @abc.abstractmethod
    async def progress(self, grant: Grant, nbytes: int) -> None:
        """Tell the scheduler that ``nbytes`` more bytes of a granted response were sent.

        Optional for callers; it keeps the delivery-rate measurement and the idle timer
        honest during long responses. Never blocks on I/O for the in-memory scheduler.
        """

    @abc.abstractmethod
    async def wait_for_change(self, timeout: float) -> None:
        """Sleep until the queue changed in a way that may admit a held request.

        Returns after a tick marked waiters, a slot or per-session place was released,
        the settings changed, the scheduler closed — or after ``timeout`` seconds. Used by
        the middleware to hold third-party requests (R-HOLD-1) without a tight loop.
        """

    @abc.abstractmethod
    async def tick(self) -> TickReport:
        """Run one scheduler tick: expire no-shows, idle and paused sessions, apply aging
        and preemption, mark the next waiters, refresh estimates. Work is proportional to
        what changed, not to the queue length."""

    @abc.abstractmethod
    async def configure(self, settings: SchedulerSettings) -> None:
        """Apply new settings from the next decision on; active sessions keep their slots.

        Environment-only fields that size memory (queue limits, hold size) are ignored
        after start-up (R-SET-1).
        """

    @abc.abstractmethod
    async def stats(self) -> SchedulerStats:
        """Aggregates for metrics and readiness; never any ids."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Drain: waiting clients get ``Rejected(SHUTTING_DOWN)`` from now on, held
        requests are woken, active responses may finish and report (R-RES-4)."""

    @property
    @abc.abstractmethod
    def settings(self) -> SchedulerSettings:
        """The settings in force."""
