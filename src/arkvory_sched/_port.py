"""The ``DownloadScheduler`` port: the one interface every caller and implementation share.

The docstrings here are the contract. The in-memory implementation (the embedded
default) and the PostgreSQL implementation both satisfy it, and one contract test suite
runs against each — shipped as ``arkvory_sched.testing.contract``, so that a store
written elsewhere runs it too. Callers — the ASGI middleware and the mass-update
simulation — never depend on anything else.

:class:`FastPath` is an optional part of the port: synchronous stand-ins for ``admit``,
``report`` and ``progress`` for the two most common requests (ADR 0013). An
implementation offers it through :meth:`DownloadScheduler.fast_path` or declines; a
caller that uses it must still go through ``admit`` whenever it answers ``None``.

Every store has the same lifecycle, so a host never asks which store it holds::

    async with scheduler:          # start(): connect, join a fleet (or nothing)
        ...                        # serve, tick
                                   # close(), then disconnect()

A store that shares its queue with other processes says so through :attr:`shared` and
offers the settings store its fleet shares through :meth:`settings_store`.
"""

from __future__ import annotations

import abc
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, TypeVar

import anyio

from ._classes import DownloadClass, PrincipalKind
from ._model import (
    ByteRange,
    Decision,
    DeliveryOutcome,
    DownloadRequest,
    Grant,
    SchedulerStats,
    TickReport,
)
from ._own_downloads import OWN_DOWNLOADS_LIMIT, OwnDownloads
from ._queue_state import QueueState
from .settings import SchedulerSettings

if TYPE_CHECKING:
    from .settings import SettingsStore

__all__ = ["DownloadScheduler", "FastGrant", "FastPath"]


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

    Lifecycle of the scheduler: ``start()`` before the first request, ``close()`` on
    shutdown, ``disconnect()`` after the last report — or ``async with scheduler:``,
    which does all three. A store built with nothing to connect to (in memory) starts
    and disconnects without doing anything.
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
        honest during long responses, and the bytes it reports count as sent for the
        session's remaining bytes (estimates, queue state, own downloads) until the
        response's report replaces them (ADR 0033). Never blocks on I/O for the
        in-memory scheduler.
        """

    @abc.abstractmethod
    async def wait_for_change(self, timeout: float) -> None:
        """Sleep until the queue changed in a way that may admit a held request.

        Returns after a tick marked waiters, a slot or per-session place was released,
        the settings changed, the scheduler closed — or after ``timeout`` seconds. Used by
        the middleware to hold third-party requests (R-HOLD-1) without a tight loop. A
        store whose look at the queue is a round trip may wake a request no sooner than
        half a second after its last look, a change meanwhile waking it then (ADR 0040):
        such a request is not at the door, so it cannot take the slot that freed.
        """

    async def wait_at_the_door(self, timeout: float) -> None:
        """:meth:`wait_for_change` for a request whose answer said it is at the door
        (R-HOLD-2): it may take the next freed slot, so it should wake as soon as one
        frees anywhere. A shared store that sees other processes' changes only at a
        periodic re-check overrides this to be woken by them for these few requests
        (ADR 0037); a store of one process has nothing to add.
        """
        await self.wait_for_change(timeout)

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
    async def queue_state(self) -> QueueState:
        """The queue as an operator sees it (R-VIS-2): the statistics, each class's
        remaining bytes and whether its first waiter is held at its share, and the
        sessions holding a slot with their principals.

        Unlike ``stats()`` this names principals, so callers show it to operators only.
        It must stay cheap at any queue length: counters, the active sessions and the
        head of each class, never a scan of the waiting sessions.
        """

    @abc.abstractmethod
    async def downloads_of(
        self, principal: str, *, limit: int = OWN_DOWNLOADS_LIMIT
    ) -> OwnDownloads:
        """The waiting, active and paused downloads of ``principal`` (issue #19): for a
        person's own downloads page.

        Each waiting download's place and start estimate are what its client's next
        poll would be told, computed as a poll computes them but recording nothing: no
        poll deadline moves, no ticket is issued, no estimate is scored. At most
        ``limit`` downloads (1 to :data:`OWN_DOWNLOADS_LIMIT`), the oldest first;
        ``total`` counts them all.

        Names nobody but ``principal`` and carries no session key or ticket, so a
        caller may show it to that principal. It must stay cheap: the principal's own
        sessions (at most ``queue_per_principal``) and one place per download shown,
        never a count of the whole queue. Raises :class:`StoreUnavailableError` when the
        store cannot be read (an empty answer would say "nothing queued", which is false).
        """

    async def start(self) -> None:
        """Take what the store needs before the first request: connections, a place in
        a fleet, migrations. Called once, before the event loop serves requests; the
        default has nothing to take.

        A store whose backend is down at start should still start, and answer
        ``Rejected`` until the backend is back, rather than keep the process down.
        """
        return None  # nothing to connect to: a default, not an abstract method

    @abc.abstractmethod
    async def close(self) -> None:
        """Drain: waiting clients get ``Rejected(SHUTTING_DOWN)`` from now on, held
        requests are woken, active responses may finish and report (R-RES-4)."""

    async def disconnect(self) -> None:
        """Give back what :meth:`start` took (leave the fleet, close the connections),
        after :meth:`close` and the last report; the default has nothing to give back.
        A second call is a no-op."""
        return None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        # Shielded: a host cancelled on shutdown must still drain and hand back its
        # connections, or the store keeps them (and its fleet its leases) until expiry.
        with anyio.CancelScope(shield=True):
            await self.close()
            await self.disconnect()

    @property
    def shared(self) -> bool:
        """Whether other processes share this scheduler's queue: a scheduler built on
        the same store elsewhere sees the same sessions, places and slots (PostgreSQL).
        ``False`` (the default): the queue lives in this process only, and a second
        scheduler is a second, separate queue."""
        return False

    def settings_store(self) -> SettingsStore | None:
        """The operator settings store this scheduler's fleet shares, on the
        scheduler's own connections (usable once :meth:`start` ran), or ``None`` (the
        default): the host chooses one, since nothing else shares the queue."""
        return None

    @property
    @abc.abstractmethod
    def settings(self) -> SchedulerSettings:
        """The settings in force."""

    def fast_path(self) -> FastPath[Any] | None:
        """The synchronous fast path of this scheduler, or ``None`` (the default): it
        declines, and every request goes through ``admit``.

        Asked once when a caller takes the scheduler (the middleware does when it is
        given one), not per request.
        """
        return None


class FastGrant(Protocol):
    """What a caller may read of a fast-path handle; the rest is the implementation's.

    The handle is the implementation's own record of the grant (no value is built for
    the caller), so the caller never keeps it after ending it and never changes it.
    """

    @property
    def per_request(self) -> bool:
        """A per-request place (end it with ``release_per_request``), not a range of a
        session (``report_range``)."""

    @property
    def download_class(self) -> DownloadClass:
        """The class the response is served in (``Arkvory-Download-Class``)."""

    @property
    def ticket(self) -> str | None:
        """The session's ticket for a range (``Arkvory-Queue-Ticket``); ``None`` for a
        place, or without ticket keys."""

    @property
    def byte_range(self) -> ByteRange | None:
        """The range granted: for a range of a session, the whole object when the
        request had none (as ``DownloadRequest.effective_range``)."""


GrantT = TypeVar("GrantT", bound=FastGrant)


class FastPath(abc.ABC, Generic[GrantT]):
    """Optional synchronous admission for the two most common requests (ADR 0013).

    The contract, which ``arkvory_sched.testing.contract.test_fast_path_contract``
    checks on every implementation that offers it:

    * It decides and accounts exactly as ``admit``, ``report`` and ``progress`` do: the
      same grants, the same refusals of invalid values, the same counters in
      ``stats()``. It never decides anything ``admit`` would decide otherwise.
    * ``admit_now`` grants only what needs no queue — a small object's per-request place
      while one is free, or a further range of a download session that holds its slot
      and has a range place free — and returns ``None`` for everything else, after which
      the caller asks ``admit``. It raises :class:`InvalidRequestError` when ``admit``
      would (for a value it has to look at).
    * Each handle is ended exactly once: a place by ``release_per_request``, a range by
      ``report_range``. A second end is a no-op. Ending returns the counters to zero
      (R-RES-3), and wakes what ``report`` would wake.
    * Nothing here awaits or blocks; no value of the port is built.
    """

    @abc.abstractmethod
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
    ) -> GrantT | None:
        """A per-request place or a further range of an active session, taken at once,
        or ``None``: then ``admit`` decides. The arguments are ``DownloadRequest``'s
        fields (without a ticket: a ticket only matters to a session ``admit`` starts)."""

    @abc.abstractmethod
    def release_per_request(self, grant: GrantT, sent: int) -> None:
        """``report`` for a per-request place: ``sent`` is the byte count a
        ``Delivered`` outcome stands for (the whole object, or the range the app
        served), or the bytes sent before an interruption or failure."""

    @abc.abstractmethod
    def report_range(self, grant: GrantT, outcome: DeliveryOutcome) -> None:
        """``report`` for a range of a session."""

    @abc.abstractmethod
    def progress_now(self, grant: GrantT, nbytes: int) -> None:
        """``progress`` for a place or a range."""
