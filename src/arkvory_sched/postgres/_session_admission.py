"""Admitting a session the shared queue is asked about: a newcomer, a waiter, a return.

A newcomer costs one statement (``admit_session``, ADR 0011); a session the queue holds
already is joined, resumed, yields or claims a slot; a waiter's poll is answered with
its place. The ranges of a session once it holds a slot are :class:`RangeAdmission`'s.
"""

from __future__ import annotations

import asyncpg

from .._classes import DownloadClass
from .._clock import Clock
from .._model import (
    ByteRange,
    Decision,
    DownloadRequest,
    RejectReason,
)
from ..policy import (
    NEWCOMER_CHECK_SECONDS,
    SHUTDOWN_RETRY_SECONDS,
    RequestPlan,
    busy_retry_after,
    exact_head,
    no_show_at,
    passable_classes,
    sets_start,
    smallest_first_key,
    ticket_arrival,
)
from ..settings import Strategy
from . import _sql as sql
from ._answers import NEWCOMER_COUNT_CAP, Answers
from ._boundary import Connections
from ._claims import Claims
from ._estimates import QueueSnapshots
from ._leases import Lease, LeaseCache
from ._meters import Meters
from ._ranges import RangeAdmission
from ._running import Running
from ._ticket_key import TicketKeyring

__all__ = ["SessionAdmission"]

BOUND_OUTCOMES = frozenset({"queue_full", "principal_limit"})  # admit_session's refusals


class SessionAdmission:
    """Admits a request of a session through the shared queue (one connection each)."""

    def __init__(
        self,
        running: Running,
        connections: Connections,
        leases: LeaseCache,
        ranges: RangeAdmission,
        claims: Claims,
        answers: Answers,
        snapshots: QueueSnapshots,
        meters: Meters,
        keyring: TicketKeyring,
        clock: Clock,
        *,
        node: str,
        lease_seconds: float,
    ) -> None:
        self._running = running
        self._connections = connections
        self._leases = leases
        self._ranges = ranges
        self._claims = claims
        self._answers = answers
        self._snapshots = snapshots
        self._meters = meters
        self._keyring = keyring
        self._clock = clock
        self._node = node
        self._lease_seconds = lease_seconds

    async def admit(
        self, request: DownloadRequest, key: bytes, plan: RequestPlan, *, began: float
    ) -> Decision:
        """The answer to a request of the session ``key``, planned by the policy:
        joined, started, queued or refused, on one kept connection. Raises
        :class:`StoreUnavailableError` when the database does not answer. ``began``:
        when the request's admission began, so that a queue snapshot it read already
        serves as a fresh one (ADR 0040)."""
        cls = plan.download_class
        async with self._connections.kept() as conn:
            # Read once a connection is lent, not before: a newcomer's arrival (its
            # place) is this moment, and a burst waits here for one of a few kept
            # connections. Stamped before that wait, a session could commit after a
            # waiter behind it had been told its place, and that place would grow on
            # its next poll (ADR 0017 point 5).
            now = self._clock.monotonic()
            if self._running.closed:
                row = await conn.fetchrow(sql.SESSION_WITH_LEASE, key)
                if row is not None and row["state"] == sql.ACTIVE:
                    return await self._join_active(conn, key, row, request.effective_range)
                return self._meters.reject(RejectReason.SHUTTING_DOWN, SHUTDOWN_RETRY_SECONDS, cls)
            if self._returning_waiter(request, key) and not self._seen_marked(key, began):
                placed = await conn.fetchrow(
                    sql.POSITION, key, exact_head(self._running.settings.sessions)
                )
                if (
                    placed is not None
                    and not placed["marked"]
                    and not await self._claims.slot_left_free(conn, now)
                ):
                    stored_class = DownloadClass.by_rank(placed["base_class"])
                    return await self._answers.queued(conn, key, stored_class, now, placed=placed)
            try:
                row = await self._admit_or_look_up(conn, request, key, plan, now)
                outcome = row["outcome"]
            except asyncpg.RaiseError as error:
                # A concurrent admission took the last place between the function's
                # first look at the counts and its own count (R-RES-1): all rolled back.
                if error.message not in BOUND_OUTCOMES:
                    raise
                outcome = error.message
            if outcome == "existing":
                return await self._admit_existing(conn, request, key, row, now, began)
            if outcome in ("admitted", "queued"):
                await self._note_start(conn, key, request)
            if outcome == "admitted":
                lease = self._claims.remember_claim(key, row, row, now)
                self._running.invalidate()
                return await self._ranges.admit(lease, request.effective_range, conn)
            if outcome == "queued":
                started = await self._claims.start_outside_window(conn, key, row, cls, now)
                if started is not None:
                    return await self._ranges.admit(started, request.effective_range, conn)
                return await self._answers.queued(conn, key, cls, now, newcomer=row)
            if outcome == "raced":  # another process inserted it a moment ago
                return await self._answers.queued(conn, key, cls, now)
            snapshot = await self._snapshots.read(conn)
            reason = (
                RejectReason.QUEUE_FULL if outcome == "queue_full" else RejectReason.PRINCIPAL_LIMIT
            )
            retry = busy_retry_after(
                snapshot.waiting_bytes,
                snapshot.waiting,
                self._answers.fleet_rate(snapshot).bytes_per_second,
            )
            return self._meters.reject(reason, retry, cls)

    async def _admit_existing(
        self,
        conn: asyncpg.Connection,
        request: DownloadRequest,
        key: bytes,
        row: asyncpg.Record,
        now: float,
        began: float,
    ) -> Decision:
        """A session the queue already holds: a range, a poll, a resumption."""
        if row["state"] == sql.ACTIVE:
            return await self._join_active(conn, key, row, request.effective_range)
        stored_class = DownloadClass.by_rank(row["base_class"])
        if row["state"] == sql.PAUSED:
            lease = await self._resume(conn, key, row, now)
            if lease is not None:
                return await self._ranges.admit(lease, request.effective_range, conn)
            return await self._answers.queued(conn, key, stored_class, now, again=True)
        if await self._claims.may_take_slot(conn, key, row, now, began):
            lease = await self._claims.claim(conn, key, row, now)
            if lease is not None:
                self._running.invalidate()
                return await self._ranges.admit(lease, request.effective_range, conn)
        return await self._answers.queued(conn, key, stored_class, now)

    async def _join_active(
        self,
        conn: asyncpg.Connection,
        key: bytes,
        row: asyncpg.Record,
        byte_range: ByteRange | None,
    ) -> Decision:
        """A range of a session another process (or this one, earlier) activated."""
        cls = DownloadClass.by_rank(row["base_class"])
        if row["yield_requested"] and not self._running.closed and row["slot_no"] is not None:
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
                return await self._ranges.admit(lease, byte_range, conn)
        # The lease ran out and the reaper has not yet judged its holder: ask again soon.
        return self._meters.reject(RejectReason.STORAGE_UNAVAILABLE, 1, cls)

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
        self._running.invalidate()
        return await self._answers.queued(conn, key, DownloadClass.by_rank(rank), now, again=True)

    async def _note_start(
        self, conn: asyncpg.Connection, key: bytes, request: DownloadRequest
    ) -> None:
        """A newcomer that resumes from the middle (``bytes=N-``): where it starts, for
        the estimates, as in memory; one statement, for such newcomers only."""
        byte_range = request.effective_range
        if (
            byte_range is not None
            and byte_range.start > 0
            and sets_start(byte_range, request.object_size, None)
        ):
            await conn.execute(sql.NOTE_START_HINT, key, byte_range.start)

    def _seen_marked(self, key: bytes, began: float) -> bool:
        """Whether the snapshot this request read already (since ``began``) names ``key``
        marked: it comes to claim, and its place would only send it on to the full
        admission (ADR 0040)."""
        seen = self._snapshots.read_since(began)
        return seen is not None and key in seen.marked

    def _returning_waiter(self, request: DownloadRequest, key: bytes) -> bool:
        """A request with this queue's ticket for its session: most likely a poll.

        Such a request asks for its place first (two statements in all instead of
        three); if its session no longer waits unmarked, or a slot has been left free
        (issue #28), it takes the full admission as any other, so the answer is the
        same either way.
        """
        signer = self._keyring.signer
        if signer is None or not request.ticket:
            return False
        return signer.verify(request.ticket, key, int(self._clock.wall() * 1000)) is not None

    async def _admit_or_look_up(
        self,
        conn: asyncpg.Connection,
        request: DownloadRequest,
        key: bytes,
        plan: RequestPlan,
        now: float,
    ) -> asyncpg.Record:
        """One round trip: the stored session, or a newcomer checked, inserted, placed.

        ``admit_session`` (migration 0003, ADR 0011) runs the statements a newcomer
        needs inside the database, so a newcomer costs one statement and one commit
        instead of ten round trips; a session that exists comes back as stored.
        """
        settings = self._running.settings
        cls = plan.download_class
        now_ms = int(self._clock.wall() * 1000)  # tickets are wall time (R-RES-5)
        signer = self._keyring.signer
        signed = (
            signer.verify(request.ticket, key, now_ms)
            if signer is not None and request.ticket
            else None
        )
        arrival, arrival_ms = ticket_arrival(signed, now, now_ms)
        rank = cls.rank
        order_key = (
            smallest_first_key(request.object_size, arrival, settings.aging_minutes * 60.0)
            if settings.strategy is Strategy.SMALLEST_FIRST
            else None
        )
        check_at = now + NEWCOMER_CHECK_SECONDS
        # A class outside its windows takes no slot here: the function cannot count
        # its slots, so a share outside them is left to Claims.start_outside_window.
        # An open class's newcomer passes the waiters of the classes closed now.
        sessions = settings.sessions
        passable: tuple[int, ...] = ()
        if settings.class_windows:
            gate = self._running.class_gate()
            if gate.closed(rank):
                sessions = 0
            passable = passable_classes(gate, rank)
        return await conn.fetchrow(
            sql.ADMIT_SESSION,
            key,
            request.principal,
            rank,
            plan.download_id is not None,
            request.object_size,
            arrival,
            arrival_ms,
            order_key,
            now,
            self._claims.promote_at(rank, arrival),
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
            plan.download_id,
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
        order_key = await self._claims.order_key(
            conn, rank, row["principal"], row["object_size"], row["arrival"]
        )
        await conn.execute(
            statement,
            key,
            order_key,
            now,
            self._claims.promote_at(rank, now),
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
            lease = await self._claims.claim(conn, key, row, now)
        if lease is not None:
            self._running.invalidate()
        return lease
