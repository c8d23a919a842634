"""Ranges of an active session: granted here, within R-SESS-11 across the fleet.

A range within this process's share of the session's ranges is local bookkeeping
only, no round trip; beyond the share, one statement asks the database for one more
range of the session's budget (ADR 0019). Each granted range is a
:class:`SessionGrant` until its report (``grants``, shared with the delivery part).
"""

from __future__ import annotations

import asyncpg

from .._clock import Clock
from .._exceptions import StoreUnavailableError
from .._model import Admitted, ByteRange, Decision, Grant, RejectReason
from . import _sql as sql
from ._answers import Answers
from ._boundary import QUEUE_BOUNDARY, Connections
from ._leases import Lease, SessionGrant
from ._meters import Meters
from ._running import Running

__all__ = ["STORAGE_RETRY_AFTER", "RangeAdmission"]

STORAGE_RETRY_AFTER = 2  # seconds a request refused for database trouble waits


class RangeAdmission:
    """Admits the ranges of sessions this process holds a lease of."""

    def __init__(
        self,
        running: Running,
        connections: Connections,
        answers: Answers,
        meters: Meters,
        clock: Clock,
        grants: dict[int, SessionGrant],
        *,
        node: str,
        lease_seconds: float,
    ) -> None:
        self._running = running
        self._connections = connections
        self._answers = answers
        self._meters = meters
        self._clock = clock
        self._grants = grants
        self._node = node
        self._lease_seconds = lease_seconds
        self._next_token = 0

    async def admit(
        self,
        lease: Lease,
        byte_range: ByteRange | None,
        conn: asyncpg.Connection | None = None,
    ) -> Decision:
        """A range of an active session, within R-SESS-11 across the fleet (ADR 0019).

        Within this process's share of the session's ranges, no round trip; beyond it,
        one statement asks the database for one more range of the shared budget.
        """
        if lease.in_flight >= self._running.settings.ranges_per_session:
            return self._meters.reject(RejectReason.RANGES_PER_SESSION, 1, lease.download_class)
        if lease.in_flight >= lease.share:
            try:
                if conn is None:
                    async with self._connections.kept() as kept:
                        widened = await self._widen_share(kept, lease)
                else:
                    widened = await self._widen_share(conn, lease)
            except StoreUnavailableError as error:
                self._connections.trouble(error)
                if lease.contended:
                    return self._meters.reject(
                        RejectReason.STORAGE_UNAVAILABLE, STORAGE_RETRY_AFTER, lease.download_class
                    )
                # Serving the session alone, a trusted lease keeps serving through an
                # outage (R-SET-4), within the limit but beyond the share the database
                # knows; the share is not grown, so nothing is owed afterwards.
                widened = True
            if not widened:
                return self._meters.reject(RejectReason.RANGES_PER_SESSION, 1, lease.download_class)
        return self.grant(lease, byte_range)

    async def _widen_share(self, conn: asyncpg.Connection, lease: Lease) -> bool:
        """One more range for this process's share; refused while the fleet runs the
        session's limit (other processes then see this one waiting and hand back)."""
        with QUEUE_BOUNDARY:  # answered here, inside the caller's connection block
            row = await conn.fetchrow(
                sql.TAKE_RANGE,
                lease.slot_no,
                lease.token,
                self._node,
                self._running.settings.ranges_per_session,
                self._lease_seconds,
            )
        lease.contended = bool(row["contended"])
        if not row["granted"]:
            lease.contended = True  # refused: hand back what is idle here too
            return False
        lease.share += 1
        return True

    def grant(self, lease: Lease, byte_range: ByteRange | None) -> Admitted:
        """A range within this process's share: local bookkeeping only, no round trip."""
        lease.in_flight += 1
        self._next_token += 1
        token = self._next_token
        now = self._clock.monotonic()
        self._grants[token] = SessionGrant(lease, byte_range, lease.download_class, now, now)
        self._meters.admitted += 1
        grant = Grant(token, "session", lease.download_class, byte_range, lease.key)
        return Admitted(grant, self._answers.lease_ticket(lease, now))
