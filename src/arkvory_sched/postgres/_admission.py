"""Admitting a GET on the shared queue: the way in, before any statement.

A further range of a session this process holds a trusted lease of needs no round
trip (:class:`RangeAdmission`); an object too small for a session takes a place of this
process (R-SESS-3); a poll well before its checkAt is told its last answer again (ADR
0029); everything else is :class:`SessionAdmission`'s, one connection. A database that
does not answer is a ``503`` here, whatever the request was.
"""

from __future__ import annotations

from .._clock import Clock
from .._early_polls import EarlyPolls
from .._exceptions import StoreUnavailableError
from .._model import Decision, DownloadRequest, Queued, RejectReason
from .._request_admission import PendingRequest, RequestAdmission, RequestTimer
from .._session_keys import SessionKeys
from ..policy import overdue_slot_may_be_taken, plan_of
from ._boundary import Connections
from ._estimates import QueueSnapshots
from ._leases import LeaseCache
from ._meters import Meters
from ._ranges import STORAGE_RETRY_AFTER, RangeAdmission
from ._running import Running
from ._session_admission import SessionAdmission

__all__ = ["Admission"]


class Admission:
    """``admit()`` of :class:`PostgresScheduler`: which way a request goes."""

    def __init__(
        self,
        running: Running,
        leases: LeaseCache,
        keys: SessionKeys,
        ranges: RangeAdmission,
        sessions: SessionAdmission,
        requests: RequestAdmission,
        early: EarlyPolls,
        snapshots: QueueSnapshots,
        connections: Connections,
        meters: Meters,
        clock: Clock,
        request_timer: RequestTimer,
    ) -> None:
        self._running = running
        self._leases = leases
        self._keys = keys
        self._ranges = ranges
        self._sessions = sessions
        self._requests = requests
        self._early = early
        self._snapshots = snapshots
        self._connections = connections
        self._meters = meters
        self._clock = clock
        self._request_timer = request_timer

    async def admit(self, request: DownloadRequest) -> Decision:
        running = self._running
        key: bytes | None = None
        if len(self._leases):  # without a lease here, no request needs its key yet
            key = self._keys.key(
                request.principal, request.object_id, request.download_id, request.client_address
            )
            lease = self._leases.trusted(key)
            if lease is not None and not (lease.yield_requested and not running.closed):
                # A further range of a session this process holds a trusted lease of (or,
                # R-STRAT-4, an active session's request after a switch to shared): no
                # round trip, and as little work as the in-memory fast path (ADR 0013).
                # It looks its lease up before any plan: the plan of the session was made
                # when it was admitted (its key covers the checked id), so only a
                # requested class is left to check, by the same plan (unknown → 400).
                if request.requested_class is not None:
                    plan_of(running.settings.admission_rules, request)
                if lease.in_flight < lease.share and (
                    lease.in_flight < running.settings.ranges_per_session
                ):
                    return self._ranges.grant(lease, request.effective_range)
                return await self._ranges.admit(lease, request.effective_range)
        # Decided once, by the policy, for every way below (R-CLIENT-6, R-CLASS-6,
        # R-SESS-3): a malformed id or an unknown requested class is a 400 here.
        plan = plan_of(running.settings.admission_rules, request)
        cls = plan.download_class
        if not plan.per_session:
            decision = self._requests.admit(request.principal, cls, request.effective_range)
            if isinstance(decision, PendingRequest):
                return await self._requests.wait(
                    decision, request.effective_range, self._request_timer
                )
            return decision
        if key is None:
            key = self._keys.key(
                request.principal, request.object_id, plan.download_id, request.client_address
            )
        began = self._clock.monotonic()
        try:
            if plan.download_id is not None and not running.closed:
                early = await self._early_answer(key, request.ticket, began)
                if early is not None:
                    return early
            return await self._sessions.admit(request, key, plan, began=began)
        except StoreUnavailableError as error:
            self._connections.trouble(error)
            return self._meters.reject(RejectReason.STORAGE_UNAVAILABLE, STORAGE_RETRY_AFTER, cls)

    async def _early_answer(self, key: bytes, ticket: str | None, now: float) -> Queued | None:
        """A poll well before its checkAt, told its last answer again (ADR 0029): no
        statement of its own. Unless the snapshot this process last read (at most one
        a half second for all its polls) names it marked while a slot is free: then
        it claims the slot, as in memory; and so it does when a slot has been left free
        past the idle grace (issue #28)."""
        if not self._early.is_early(key, ticket, now):
            return None
        snapshot = self._snapshots.current(now)
        if snapshot is None:
            async with self._connections.kept() as conn:
                snapshot = await self._snapshots.read(conn)
        if snapshot.active < self._running.settings.sessions and (
            key in snapshot.marked or overdue_slot_may_be_taken(now, snapshot.last_release)
        ):
            return None
        return self._early.answer(key, ticket, now, self._clock.wall() - now)
