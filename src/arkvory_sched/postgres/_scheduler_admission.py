"""Admitting a GET on the shared queue: a newcomer, a further range, a returning waiter.

A further range of a session this process holds a trusted lease of needs no round
trip; a newcomer costs one statement (``admit_session``); a session the queue holds
already is joined, resumed, yields or claims a slot.
"""

from __future__ import annotations

import asyncpg

from .._classes import DownloadClass, applied_class
from .._model import (
    Admitted,
    ByteRange,
    Decision,
    DownloadRequest,
    Grant,
    Queued,
    RejectReason,
)
from .._request_admission import PendingRequest
from ..policy import (
    NEWCOMER_CHECK_SECONDS,
    SHUTDOWN_RETRY_SECONDS,
    busy_retry_after,
    no_show_at,
    passable_classes,
    smallest_first_key,
    uses_sessions,
    validated_download_id,
)
from ..settings import Strategy
from . import _sql as sql
from ._leader import exact_head
from ._leases import Lease
from ._scheduler_claims import SchedulerClaims
from ._scheduler_state import (
    _ACTIVE,
    _BOUND_OUTCOMES,
    _PAUSED,
    DATABASE_ERRORS,
    NEWCOMER_COUNT_CAP,
    STORAGE_RETRY_AFTER,
    _SessionGrant,
)

__all__ = ["SchedulerAdmission"]


class SchedulerAdmission(SchedulerClaims):
    """The admission path of :class:`PostgresScheduler`."""

    # ------------------------------------------------------------------ admission
    async def admit(self, request: DownloadRequest) -> Decision:
        key: bytes | None = None
        if len(self._leases):  # without a lease here, no request needs its key yet
            key = self._keys.key(
                request.principal, request.object_id, request.download_id, request.client_address
            )
            lease = self._leases.trusted(key)
            if lease is not None and not (lease.yield_requested and not self._closed):
                # A further range of a session this process holds a trusted lease of (or,
                # R-STRAT-4, an active session's request after a switch to shared): no
                # round trip, and as little work as the in-memory fast path (ADR 0013).
                # The lease was created for a validated id, and the key covers the id,
                # so only a requested class is left to check (unknown → 400, as below).
                if request.requested_class is not None:
                    applied_class(
                        self._settings.base_class_of(
                            request.principal, request.principal_kind, request.base_class
                        ),
                        request.requested_class,
                    )
                if lease.in_flight < lease.share and (
                    lease.in_flight < self._settings.ranges_per_session
                ):
                    return self._grant_range(lease, request.effective_range)
                return await self._admit_range(lease, request.effective_range)
        download_id = validated_download_id(request.download_id)
        base = self._settings.base_class_of(
            request.principal, request.principal_kind, request.base_class
        )
        cls = applied_class(base, request.requested_class)
        if not uses_sessions(self._settings.admission_rules, request.object_size):
            decision = self._requests.admit(request.principal, cls, request.effective_range)
            if isinstance(decision, PendingRequest):
                return await self._requests.wait(
                    decision, request.effective_range, self._request_timer
                )
            return decision
        if key is None:
            key = self._keys.key(
                request.principal, request.object_id, download_id, request.client_address
            )
        try:
            if download_id is not None and not self._closed:
                early = await self._early_answer(key, request.ticket)
                if early is not None:
                    return early
            return await self._admit_session(request, key, cls, download_id is not None)
        except DATABASE_ERRORS as error:
            self._trouble(error)
            return self._reject(RejectReason.STORAGE_UNAVAILABLE, STORAGE_RETRY_AFTER, cls)

    async def _early_answer(self, key: bytes, ticket: str | None) -> Queued | None:
        """A poll well before its checkAt, told its last answer again (ADR 0029): no
        statement of its own. Unless the snapshot this process last read (at most one
        a half second for all its polls) names it marked while a slot is free: then
        it claims the slot, as in memory."""
        now = self._clock.monotonic()
        if not self._early.is_early(key, ticket, now):
            return None
        if self._snapshot is None or now >= self._snapshot_until:
            async with self._kept_connection() as conn:
                await self._queue_snapshot(conn)
        snapshot = self._snapshot
        if snapshot is None or (
            key in snapshot.marked and snapshot.active < self._settings.sessions
        ):
            return None
        return self._early.answer(key, ticket, now, self._clock.wall() - now)

    async def _admit_range(
        self,
        lease: Lease,
        byte_range: ByteRange | None,
        conn: asyncpg.Connection | None = None,
    ) -> Decision:
        """A range of an active session, within R-SESS-11 across the fleet (ADR 0019).

        Within this process's share of the session's ranges, no round trip; beyond it,
        one statement asks the database for one more range of the shared budget.
        """
        if lease.in_flight >= self._settings.ranges_per_session:
            return self._reject(RejectReason.RANGES_PER_SESSION, 1, lease.download_class)
        if lease.in_flight >= lease.share:
            try:
                if conn is None:
                    async with self._kept_connection() as kept:
                        widened = await self._widen_share(kept, lease)
                else:
                    widened = await self._widen_share(conn, lease)
            except DATABASE_ERRORS as error:
                self._trouble(error)
                if lease.contended:
                    return self._reject(
                        RejectReason.STORAGE_UNAVAILABLE, STORAGE_RETRY_AFTER, lease.download_class
                    )
                # Serving the session alone, a trusted lease keeps serving through an
                # outage (R-SET-4), within the limit but beyond the share the database
                # knows; the share is not grown, so nothing is owed afterwards.
                widened = True
            if not widened:
                return self._reject(RejectReason.RANGES_PER_SESSION, 1, lease.download_class)
        return self._grant_range(lease, byte_range)

    async def _widen_share(self, conn: asyncpg.Connection, lease: Lease) -> bool:
        """One more range for this process's share; refused while the fleet runs the
        session's limit (other processes then see this one waiting and hand back)."""
        row = await conn.fetchrow(
            sql.TAKE_RANGE,
            lease.slot_no,
            lease.token,
            self._node,
            self._settings.ranges_per_session,
            self._lease_seconds,
        )
        lease.contended = bool(row["contended"])
        if not row["granted"]:
            lease.contended = True  # refused: hand back what is idle here too
            return False
        lease.share += 1
        return True

    def _grant_range(self, lease: Lease, byte_range: ByteRange | None) -> Admitted:
        """A range within this process's share: local bookkeeping only, no round trip."""
        lease.in_flight += 1
        self._next_token += 1
        token = self._next_token
        now = self._clock.monotonic()
        self._grants[token] = _SessionGrant(lease, byte_range, lease.download_class, now, now)
        self._admitted += 1
        grant = Grant(token, "session", lease.download_class, byte_range, lease.key)
        return Admitted(grant, self._lease_ticket(lease, now))

    async def _admit_session(
        self, request: DownloadRequest, key: bytes, cls: DownloadClass, has_id: bool
    ) -> Decision:
        now = self._clock.monotonic()
        async with self._kept_connection() as conn:
            if self._closed:
                row = await conn.fetchrow(sql.SESSION_WITH_LEASE, key)
                if row is not None and row["state"] == _ACTIVE:
                    return await self._join_active(conn, key, row, request.effective_range)
                return self._reject(RejectReason.SHUTTING_DOWN, SHUTDOWN_RETRY_SECONDS, cls)
            if self._returning_waiter(request, key):
                placed = await conn.fetchrow(sql.POSITION, key, exact_head(self._settings.sessions))
                if placed is not None and not placed["marked"]:
                    stored_class = DownloadClass.by_rank(placed["base_class"])
                    return await self._queued(conn, key, stored_class, now, placed=placed)
            try:
                row = await self._admit_or_look_up(conn, request, key, cls, has_id, now)
                outcome = row["outcome"]
            except asyncpg.RaiseError as error:
                # A concurrent admission took the last place between the function's
                # first look at the counts and its own count (R-RES-1): all rolled back.
                if error.message not in _BOUND_OUTCOMES:
                    raise
                outcome = error.message
            if outcome == "existing":
                return await self._admit_existing(conn, request, key, row, now)
            if outcome == "admitted":
                lease = self._remember_claim(key, row, row, now)
                self._invalidate()
                return await self._admit_range(lease, request.effective_range, conn)
            if outcome == "queued":
                started = await self._start_outside_window(conn, key, row, cls, now)
                if started is not None:
                    return await self._admit_range(started, request.effective_range, conn)
                return await self._queued(conn, key, cls, now, newcomer=row)
            if outcome == "raced":  # another process inserted it a moment ago
                return await self._queued(conn, key, cls, now)
            snapshot = await self._queue_snapshot(conn)
            reason = (
                RejectReason.QUEUE_FULL if outcome == "queue_full" else RejectReason.PRINCIPAL_LIMIT
            )
            retry = busy_retry_after(
                snapshot.waiting_bytes, snapshot.waiting, self._fleet_rate(snapshot)
            )
            return self._reject(reason, retry, cls)

    async def _admit_existing(
        self,
        conn: asyncpg.Connection,
        request: DownloadRequest,
        key: bytes,
        row: asyncpg.Record,
        now: float,
    ) -> Decision:
        """A session the queue already holds: a range, a poll, a resumption."""
        if row["state"] == _ACTIVE:
            return await self._join_active(conn, key, row, request.effective_range)
        stored_class = DownloadClass.by_rank(row["base_class"])
        if row["state"] == _PAUSED:
            lease = await self._resume(conn, key, row, now)
            if lease is not None:
                return await self._admit_range(lease, request.effective_range, conn)
            return await self._queued(conn, key, stored_class, now, again=True)
        if row["marked"] and await self._may_take_marked_slot(conn, row, now):
            lease = await self._claim(conn, key, row, now)
            if lease is not None:
                self._invalidate()
                return await self._admit_range(lease, request.effective_range, conn)
        return await self._queued(conn, key, stored_class, now)

    async def _join_active(
        self,
        conn: asyncpg.Connection,
        key: bytes,
        row: asyncpg.Record,
        byte_range: ByteRange | None,
    ) -> Decision:
        """A range of a session another process (or this one, earlier) activated."""
        cls = DownloadClass.by_rank(row["base_class"])
        if row["yield_requested"] and not self._closed and row["slot_no"] is not None:
            yielded = await self._yield_slot(conn, key, row)
            if yielded is not None:
                return yielded
        if row["slot_no"] is not None and (row["lease_left"] or 0.0) > 0.0:
            left = await conn.fetchval(
                sql.TAKE_OVER_LEASE, key, row["lease_token"], self._node, self._lease_seconds
            )
            if left is not None:
                lease = self._leases.remember(
                    key,
                    slot_no=row["slot_no"],
                    token=row["lease_token"],
                    download_class=cls,
                    object_size=row["object_size"],
                    arrival_wall_ms=row["arrival_wall_ms"],
                    seconds_left=left,
                    held=True,
                )
                return await self._admit_range(lease, byte_range, conn)
        # The lease ran out and the reaper has not yet judged its holder: ask again soon.
        return self._reject(RejectReason.STORAGE_UNAVAILABLE, 1, cls)

    async def _yield_slot(
        self, conn: asyncpg.Connection, key: bytes, row: asyncpg.Record
    ) -> Decision | None:
        """R-PREEMPT-2: a preempted protocol client yields at a range boundary.

        It waits again with its arrival (not its aging), blocked while the head it
        yielded to waits; the head is marked to take the slot at its next poll.
        """
        now = self._clock.monotonic()
        rank = row["base_class"]
        async with conn.transaction():
            freed = await conn.fetchval(sql.RELEASE_SLOT, row["slot_no"], row["lease_token"], key)
            if freed is None:
                return None  # the lease is gone already: answered as any other session
            await self._wait_again(conn, sql.REQUEUE_YIELDER, key, row, now)
            await conn.execute(sql.NOTE_RELEASE, now)
        self._leases.forget(key)
        self._invalidate()
        return await self._queued(conn, key, DownloadClass.by_rank(rank), now, again=True)

    def _returning_waiter(self, request: DownloadRequest, key: bytes) -> bool:
        """A request with this queue's ticket for its session: most likely a poll.

        Such a request asks for its place first (two statements in all instead of
        three); if its session no longer waits unmarked, it takes the full admission
        as any other, so the answer is the same either way.
        """
        if self._signer is None or not request.ticket:
            return False
        return self._signer.verify(request.ticket, key, int(self._clock.wall() * 1000)) is not None

    async def _admit_or_look_up(
        self,
        conn: asyncpg.Connection,
        request: DownloadRequest,
        key: bytes,
        cls: DownloadClass,
        has_id: bool,
        now: float,
    ) -> asyncpg.Record:
        """One round trip: the stored session, or a newcomer checked, inserted, placed.

        ``admit_session`` (migration 0003, ADR 0011) runs the statements a newcomer
        needs inside the database, so a newcomer costs one statement and one commit
        instead of ten round trips; a session that exists comes back as stored.
        """
        settings = self._settings
        now_ms = int(self._clock.wall() * 1000)  # tickets are wall time (R-RES-5)
        arrival_ms = now_ms
        if self._signer is not None and request.ticket:
            signed = self._signer.verify(request.ticket, key, now_ms)
            if signed is not None and signed <= now_ms:
                arrival_ms = signed
        arrival = now - (now_ms - arrival_ms) / 1000.0  # the ticket's age in queue time
        rank = cls.rank
        order_key = (
            smallest_first_key(request.object_size, arrival, settings.aging_minutes * 60.0)
            if settings.strategy is Strategy.SMALLEST_FIRST
            else None
        )
        check_at = now + NEWCOMER_CHECK_SECONDS
        # A class outside its windows takes no slot here: the function cannot count
        # its slots, so a share outside them is left to _start_outside_window.
        # An open class's newcomer passes the waiters of the classes closed now.
        sessions = settings.sessions
        passable: tuple[int, ...] = ()
        if settings.class_windows:
            gate = self._class_gate()
            if gate.closed(rank):
                sessions = 0
            passable = passable_classes(gate, rank)
        return await conn.fetchrow(
            sql.ADMIT_SESSION,
            key,
            request.principal,
            rank,
            has_id,
            request.object_size,
            arrival,
            arrival_ms,
            order_key,
            now,
            self._promote_at(rank, arrival),
            check_at,
            no_show_at(check_at, NEWCOMER_CHECK_SECONDS),
            settings.queue_limit,
            settings.queue_per_principal,
            sessions,
            cls is DownloadClass.INTERACTIVE,
            settings.reserve,
            self._node,
            self._lease_seconds,
            settings.strategy is Strategy.ORDERED,
            1.0 / settings.weights[rank],
            NEWCOMER_COUNT_CAP,
            request.object_id,  # for the principal's own downloads page (issue #19)
            request.download_id if has_id else None,
            list(passable),
        )

    async def _wait_again(
        self,
        conn: asyncpg.Connection,
        statement: str,
        key: bytes,
        row: asyncpg.Record,
        now: float,
    ) -> None:
        """Put a yielding or resuming session back in its own class with its old arrival
        (R-PREEMPT-2, R-SESS-9): a new turn, a fresh aging clock, a newcomer's check."""
        rank = row["base_class"]
        check_at = now + NEWCOMER_CHECK_SECONDS
        order_key = await self._order_key(
            conn, rank, row["principal"], row["object_size"], row["arrival"]
        )
        await conn.execute(
            statement,
            key,
            order_key,
            now,
            self._promote_at(rank, now),
            check_at,
            no_show_at(check_at, NEWCOMER_CHECK_SECONDS),
        )

    async def _resume(
        self, conn: asyncpg.Connection, key: bytes, row: asyncpg.Record, now: float
    ) -> Lease | None:
        """R-SESS-9: a paused session waits again with its arrival; starts if alone."""
        async with conn.transaction():
            await self._wait_again(conn, sql.RESUME_PAUSED, key, row, now)
            if await conn.fetchval(sql.OTHERS_WAITING, key):
                return None
            lease = await self._claim(conn, key, row, now)
        if lease is not None:
            self._invalidate()
        return lease
