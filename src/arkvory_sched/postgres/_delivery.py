"""Recording how a response went: bytes for the rate meter, delivered ranges, completion.

A range's record is one statement, fenced by its lease's token. A record a database
outage kept from being written stays here (at most ``UNRECORDED_LIMIT``) and is written
on a later tick, as safe late as prompt; meanwhile the session keeps its slot.

The bytes a response still running has sent count too (issue #28, ADR 0033): kept per
lease here as it reports progress, and written for all the process's leases in one
statement at most every ``IN_FLIGHT_SECONDS`` of the tick, never per chunk.
"""

from __future__ import annotations

import time
from collections import deque

import asyncpg

from .._clock import Clock
from .._exceptions import StoreUnavailableError
from .._model import (
    ByteRange,
    Delivered,
    DeliveryOutcome,
    Grant,
    RangeKind,
)
from .._request_admission import RequestAdmission
from ..policy import sets_start
from . import _sql as sql
from ._boundary import Connections
from ._estimates import QueueSnapshots
from ._leases import UNWRITTEN, Lease, LeaseCache, SessionGrant
from ._meters import Meters
from ._running import Running

__all__ = ["IN_FLIGHT_SECONDS", "UNRECORDED_LIMIT", "Delivery"]

UNRECORDED_LIMIT = 4096  # delivery records kept through an outage, then the oldest go
# How often (queue seconds) a tick writes the bytes in flight of this process's leases:
# one statement a second per process, one row per lease whose count moved (ADR 0033).
IN_FLIGHT_SECONDS = 1.0


class Delivery:
    """``report()`` and ``progress()`` of :class:`PostgresScheduler`."""

    def __init__(
        self,
        running: Running,
        connections: Connections,
        leases: LeaseCache,
        grants: dict[int, SessionGrant],
        requests: RequestAdmission,
        snapshots: QueueSnapshots,
        meters: Meters,
        clock: Clock,
        *,
        node: str,
    ) -> None:
        self._running = running
        self._connections = connections
        self._leases = leases
        self._grants = grants
        self._requests = requests
        self._snapshots = snapshots
        self._meters = meters
        self._clock = clock
        self._node = node
        self._unrecorded: deque[tuple[Lease, ByteRange, float]] = deque(maxlen=UNRECORDED_LIMIT)
        self._next_in_flight = -float("inf")
        # Orders this process's writes of bytes in flight (``store_in_flight``); from
        # the wall clock, so a restarted process reusing its node id writes past its
        # predecessor's rows.
        self._in_flight_seq = time.time_ns() // 1000

    async def report(self, grant: Grant, outcome: DeliveryOutcome) -> None:
        if grant.admission == "per-request":
            self._requests.report(grant, outcome)  # wakes a waiter promoted into the place
            return
        state = self._grants.pop(grant.token, None)
        if state is None:
            return
        lease = state.lease
        lease.in_flight = max(0, lease.in_flight - 1)
        # Its bytes in flight leave with it: a delivered range counts them from now on,
        # an interrupted response's are dropped (issue #28).
        lease.bytes_in_flight = max(0, lease.bytes_in_flight - state.progressed)
        now = self._clock.monotonic()
        counted = None
        if isinstance(outcome, Delivered):
            counted = outcome.byte_range or state.byte_range
            sent = counted.length if counted is not None else 0
        else:
            sent = outcome.bytes_sent
        self._record_bytes(state, max(0, sent - state.progressed))
        # R-SESS-11 across processes (ADR 0019): while another process holds or waits
        # for a share of this session's ranges, the share this range used goes back.
        give_back = max(0, lease.share - lease.in_flight) if lease.contended else 0
        lease.share -= give_back
        try:
            async with self._connections.kept() as conn:
                if give_back:
                    await self.give_back_ranges(conn, [(lease, give_back)])
                if lease.bytes_written != lease.bytes_in_flight:
                    # Before the record, so that its bytes are never counted twice:
                    # for the moment between, they count as not yet sent, as before.
                    await self.store_in_flight(conn, [lease])
                if counted is None:
                    await self._record_interruption(conn, lease, now)
                else:
                    await self.record_delivery(conn, lease, counted, now)
        except StoreUnavailableError as error:
            # The bytes were sent; only the record is missing. It is written on a later
            # tick (fenced by the same token, so a late write is as safe as a prompt
            # one); until then the session keeps its slot rather than completing wrongly.
            self._connections.trouble(error)
            if counted is not None:
                self._unrecorded.append((lease, counted, now))
        self._running.notify()

    async def give_back_ranges(
        self, conn: asyncpg.Connection, shares: list[tuple[Lease, int]]
    ) -> None:
        """Hand unused range shares back to their sessions' budgets (already taken off
        the leases here). A failed hand-back is owed and retried at the heartbeat; until
        then the fleet runs fewer ranges of the session, never more."""
        for lease, ranges in shares:
            lease.unreturned += ranges
        await conn.execute(
            sql.GIVE_BACK_RANGES,
            [lease.slot_no for lease, _ in shares],
            [lease.token for lease, _ in shares],
            [lease.unreturned for lease, _ in shares],
            self._node,
        )
        for lease, _ in shares:
            lease.unreturned = 0

    async def write_in_flight(self, conn: asyncpg.Connection) -> None:
        """The tick's write of bytes in flight: at most once every ``IN_FLIGHT_SECONDS``
        of queue time, one statement for every lease whose count moved since or whose
        responses still run."""
        now = self._clock.monotonic()
        if now < self._next_in_flight:
            return
        self._next_in_flight = now + IN_FLIGHT_SECONDS
        # A running response's count is written again even unmoved: its time says the
        # count is whole up to now (a stalled client's pace must not read as its last).
        due = self._leases.unwritten_or_running()
        if due:
            await self.store_in_flight(conn, due)

    async def store_in_flight(self, conn: asyncpg.Connection, leases: list[Lease]) -> None:
        """Write the bytes in flight of ``leases`` to this process's range_share rows.

        Each lease counts as written before the statement leaves, so that a response
        ending meanwhile writes its lease again, later in the order; a failed write
        leaves them unknown, to be written again by the next tick."""
        counts = [lease.bytes_in_flight for lease in leases]
        for lease, count in zip(leases, counts, strict=True):
            lease.bytes_written = count
        self._in_flight_seq += 1
        try:
            await conn.execute(
                sql.STORE_IN_FLIGHT,
                [lease.slot_no for lease in leases],
                [lease.token for lease in leases],
                counts,
                self._node,
                self._in_flight_seq,
                self._clock.monotonic(),
            )
        except BaseException:
            for lease in leases:
                lease.bytes_written = UNWRITTEN
            raise

    async def record_late_deliveries(self, conn: asyncpg.Connection) -> None:
        """Write delivery records a database outage kept from ``report``, oldest first."""
        while self._unrecorded:
            lease, counted, at = self._unrecorded[0]
            await self.record_delivery(conn, lease, counted, at)
            self._unrecorded.popleft()

    async def record_delivery(
        self, conn: asyncpg.Connection, lease: Lease, counted: ByteRange, now: float
    ) -> None:
        """One statement (``record_delivery``, ADR 0011): record, and complete if whole.

        The slot is released only when no other range of the session is in flight
        here; the session is deleted only with its slot, both fenced by the token.
        """
        outcome = await conn.fetchval(
            sql.RECORD_DELIVERY,
            lease.key,
            lease.token,
            counted.start,
            counted.end,
            # The policy's R-SESS-8 rule up to the delivered ranges, which only the row
            # holds: record_delivery applies the rest there (ADR 0016).
            sets_start(counted, lease.object_size, None),
            counted.kind is RangeKind.BOUNDED,
            now,
            not lease.in_flight,
            lease.slot_no,
        )
        self._after_record(lease, outcome)

    async def _record_interruption(
        self, conn: asyncpg.Connection, lease: Lease, now: float
    ) -> None:
        """One statement (``record_interruption``): activity, the short hold, and the
        completion of a session whose ranges all arrived before its last one was dropped
        (R-SESS-8, as in memory: completion does not depend on how the last range ends)."""
        outcome = await conn.fetchval(
            sql.RECORD_INTERRUPTION,
            lease.key,
            lease.token,
            now,
            not lease.in_flight,
            lease.slot_no,
        )
        self._after_record(lease, outcome)

    def _after_record(self, lease: Lease, outcome: str) -> None:
        if outcome == "fenced":
            self._leases.forget(lease.key)  # the lease is gone: fenced out
        elif outcome == "completed":
            self._leases.forget(lease.key)
            self._snapshots.drop()

    async def progress(self, grant: Grant, nbytes: int) -> None:
        if grant.admission == "per-request":
            self._requests.progress(grant, nbytes)
            return
        state = self._grants.get(grant.token)
        if state is None or nbytes <= 0:
            return
        self._record_bytes(state, nbytes)
        state.progressed += nbytes
        state.lease.bytes_in_flight += nbytes  # written by the tick (ADR 0033)

    def _record_bytes(self, state: SessionGrant, nbytes: int) -> None:
        if nbytes <= 0:
            return
        now = self._clock.monotonic()
        started = now - max(0.0, now - state.last_progress)
        self._meters.rate.record(started, now, nbytes)
        state.last_progress = now
        self._meters.bytes_by_class[state.download_class.rank] += nbytes
