"""Recording how a response went: bytes for the rate meter, delivered ranges, completion."""

from __future__ import annotations

import anyio
import asyncpg

from .._model import (
    ByteRange,
    Delivered,
    DeliveryOutcome,
    Grant,
    RangeKind,
)
from ..policy import sets_start
from . import _sql as sql
from ._leases import Lease
from ._scheduler_answers import SchedulerAnswers
from ._scheduler_state import (
    DATABASE_ERRORS,
    _SessionGrant,
)

__all__ = ["SchedulerDelivery"]


class SchedulerDelivery(SchedulerAnswers):
    """The delivery path of :class:`PostgresScheduler` (``report`` and ``progress``)."""

    # ------------------------------------------------------------------ delivery
    async def report(self, grant: Grant, outcome: DeliveryOutcome) -> None:
        if grant.admission == "per-request":
            self._requests.report(grant, outcome)  # wakes a waiter promoted into the place
            return
        state = self._grants.pop(grant.token, None)
        if state is None:
            return
        lease = state.lease
        lease.in_flight = max(0, lease.in_flight - 1)
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
            async with self._kept_connection() as conn:
                if give_back:
                    await self._give_back_ranges(conn, [(lease, give_back)])
                if counted is None:
                    await self._record_interruption(conn, lease, now)
                else:
                    await self._record_delivery(conn, lease, counted, now)
        except DATABASE_ERRORS as error:
            # The bytes were sent; only the record is missing. It is written on a later
            # tick (fenced by the same token, so a late write is as safe as a prompt
            # one); until then the session keeps its slot rather than completing wrongly.
            self._trouble(error)
            if counted is not None:
                self._unrecorded.append((lease, counted, now))
        self._notify()

    async def _give_back_ranges(
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

    async def _record_late_deliveries(self, conn: asyncpg.Connection) -> None:
        """Write delivery records a database outage kept from ``report``, oldest first."""
        while self._unrecorded:
            lease, counted, at = self._unrecorded[0]
            await self._record_delivery(conn, lease, counted, at)
            self._unrecorded.popleft()

    async def _record_delivery(
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
            self._snapshot = None

    async def progress(self, grant: Grant, nbytes: int) -> None:
        if grant.admission == "per-request":
            self._requests.progress(grant, nbytes)
            return
        state = self._grants.get(grant.token)
        if state is None or nbytes <= 0:
            return
        self._record_bytes(state, nbytes)
        state.progressed += nbytes

    def _record_bytes(self, state: _SessionGrant, nbytes: int) -> None:
        if nbytes <= 0:
            return
        now = self._clock.monotonic()
        started = now - max(0.0, now - state.last_progress)
        self._rate.record(started, now, nbytes)
        state.last_progress = now
        self._bytes_by_class[state.download_class.rank] += nbytes

    async def wait_for_change(self, timeout: float) -> None:
        # Changes made by other processes are not signalled here: wake at least every
        # second so a held request re-checks the shared queue.
        changed = self._changed
        with anyio.move_on_after(max(0.0, min(timeout, 1.0))):
            await changed.wait()
