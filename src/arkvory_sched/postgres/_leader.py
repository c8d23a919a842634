"""The queue work one process does for the whole fleet on each tick.

Leadership is a lease in ``queue_leader``: kept by renewing it every tick, taken over
only once it expired, with a token that grows with every change of leader. All of a
tick's work runs in one transaction that first locks the leader row *with this
process's token*, so a leader that was paused past its lease commits nothing.

The decisions of a tick — who ages, how many to mark and whom, who yields — are the
policy's (:mod:`arkvory_sched.policy`, ADR 0016): the leader reads the rows a rule
needs, asks the policy and writes the result.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from .._classes import DownloadClass
from .._clock import Clock
from ..policy import (
    CLASS_COUNT,
    MARK_SCAN_SLACK,
    PAUSE_RETENTION_SECONDS,
    PLACE_BUCKET,
    TAIL_ONLY_HOLD_SECONDS,
    ClassGate,
    YieldCandidate,
    YieldHead,
    caught_up,
    choose_marks,
    choose_victim,
    current_gate,
    finishing_soon,
    marking_budget,
    over_share_with_contenders,
    scheduled,
    service_order,
    slot_free_for,
    strides_of,
)
from ..settings import SchedulerSettings, Strategy
from . import _sql as sql
from . import _sql_tick as tick_sql
from ._estimate_inputs import FleetRate, count_shape, held_slots, waiter_schedule
from ._idle_slots import IdleSlotCount
from ._leader_aging import WindowView, entered_empty, promote_aged
from ._leader_sizing import FleetSizing

__all__ = ["LeaderOutcome", "QueueLeader"]

log = logging.getLogger("arkvory_sched.postgres")

ROUND_CLEANUP_SECONDS = 60.0
# The most changes one fold takes: a burst (a migration of a long queue, a strategy
# switch that gives every waiter a new key) is folded over several ticks, each well
# inside the statement timeout, while positions lag by what is not folded yet.
FOLD_LIMIT = 65536
# Above this many sessions the leader analyses download_session when its rows doubled
# since the planner last learnt of them: a burst before autovacuum's look (ADR 0020).
ANALYSE_FROM_SESSIONS = 4096


# The most no-shows, expired pauses and promotions one tick takes of each: a crowd
# that leaves or ages at once is handled over several ticks, each inside the statement
# timeout, where one tick for all of them would fail every time (ADR 0020).
TICK_BATCH = 8192


@dataclass(frozen=True, slots=True)
class LeaderOutcome:
    """What one leader tick did; ``released`` are sessions whose idle slot it freed."""

    expired: int
    marked: int
    released: tuple[bytes, ...]
    yielding: bytes | None = None
    """The session asked to yield its slot this tick, if any (R-PREEMPT-1..3)."""

    @property
    def preempted(self) -> bool:
        return self.yielding is not None


class QueueLeader:
    """This process's side of the leader lease, and the leader's share of a tick."""

    def __init__(
        self,
        node: str,
        *,
        lease_seconds: float,
        leader_seconds: float,
        heartbeat_seconds: float,
        clock: Clock,
    ) -> None:
        self._node = node
        self._clock = clock  # queue time: the grace before reaping is a decision
        self._lease_seconds = lease_seconds
        self._leader_seconds = leader_seconds
        self._heartbeat_seconds = heartbeat_seconds
        self.token: int | None = None
        self.since = 0.0  # when this process became leader (queue time)
        self._next_round_cleanup = 0.0
        self._gate: ClassGate | None = None  # the windows' verdict (R-WIN-2)
        self._rate = FleetRate(node, lease_seconds)  # read from busy seconds (ADR 0034)
        self._idle = IdleSlotCount(stale_after=lease_seconds)  # issue #28
        self._sizing = FleetSizing()  # issue #30
        self._configured: SchedulerSettings | None = None  # the operator's, this tick

    @property
    def is_leader(self) -> bool:
        return self.token is not None

    def step_down(self) -> None:
        self.token = None
        self._sizing.forget()

    async def elect(self, conn: asyncpg.Connection) -> bool:
        """Renew or take the leader lease; False when another live process holds it."""
        token = await conn.fetchval(sql.TAKE_LEADERSHIP, self._node, self._leader_seconds)
        if token is None:
            self.token = None
            return False
        if self.token != token:
            self._sizing.forget()
            self.since = self._clock.monotonic()
            log.info("node %s leads the queue (token %s)", self._node, token)
        self.token = token
        return True

    async def tick(
        self,
        conn: asyncpg.Connection,
        *,
        settings: SchedulerSettings,
        now: float,
        in_flight: list[bytes],
        local_rate: float,
        local_seconds: tuple[int, Sequence[float]],
        last_trouble: float,
        closed: bool = False,
        configured: SchedulerSettings | None = None,
    ) -> LeaderOutcome:
        """Reap, release idle, expire, age, refresh estimates, size and mark — fenced.

        ``settings`` are those in force; ``configured`` the operator's, whose bounds
        the self-sizing slots keep (ADR 0038; the same when the count is fixed).

        ``now`` and ``last_trouble`` are queue time (the scheduler's clock).
        ``local_seconds`` is this process's ``PeakRateMeter.complete_seconds(now)``,
        added to the other processes' seconds for the fleet's rate (ADR 0027).
        """
        self._configured = configured or settings
        if not await self._fold(conn):
            return LeaderOutcome(0, 0, ())
        # The round cleanup's age on queue time too, like every decision of the tick.
        real = now
        async with conn.transaction():
            confirmed = await conn.fetchval(sql.CONFIRM_LEADERSHIP, self._node, self.token)
            if confirmed is None:
                self.token = None
                return LeaderOutcome(0, 0, ())
            reaped = 0
            # A new leader, or one that just had database trouble, first gives every
            # holder a full lease period to renew: it frees nothing a live peer holds.
            if (
                now - self.since >= self._lease_seconds
                and now - last_trouble >= self._lease_seconds
            ):
                reaped = await conn.fetchval(tick_sql.REAP_EXPIRED, self._lease_seconds)
            released = await self._release_idle(conn, settings, now, in_flight)
            await conn.fetchval(tick_sql.PAUSE_ORPHANS, now + PAUSE_RETENTION_SECONDS)
            no_shows = await conn.fetchval(tick_sql.EXPIRE_NO_SHOWS, now, TICK_BATCH)
            expired_paused = await conn.fetchval(tick_sql.EXPIRE_PAUSED, now, TICK_BATCH)
            # The fleet-wide rows every admission and completion write (queue_state,
            # class_state) are written last, just before the commit: a row this
            # transaction updates stays locked until it ends, and the scans between
            # here and there take tens of milliseconds at a long queue.
            last_writes: list[tuple[str, tuple[object, ...]]] = [
                (sql.COUNT_EXPIRIES, (no_shows, len(released), reaped, now))
            ]
            # A class nobody waits in catches up with the pass of the last grant, and so
            # does one that a promoted waiter enters empty: the fair queue catches a
            # class up as its first waiter enters (ADR 0017).
            promoted_from: list[int] = []
            if settings.aging_minutes > 0:
                promoted_from = await promote_aged(conn, settings, now, TICK_BATCH)
            if real >= self._next_round_cleanup:
                self._next_round_cleanup = real + ROUND_CLEANUP_SECONDS
                await conn.execute(tick_sql.FORGET_OLD_ROUNDS)
            shape = await count_shape(conn)
            last_writes.append(
                (sql.STORE_SHAPE, (list(shape.lengths), shape.waiting_bytes, shape.sessions))
            )
            lengths = shape.lengths
            entered = entered_empty(lengths, promoted_from)
            idle_classes = [
                rank for rank in range(CLASS_COUNT) if not lengths[rank] or rank in entered
            ]
            # Every grant advances its class's row, so the catch-up is written last too
            # (and only where a pass changes); the ordering below applies it as read.
            if idle_classes:
                last_writes.append((sql.CATCH_UP_IDLE_CLASSES, (idle_classes,)))
            await conn.execute(sql.UNBLOCK_YIELDERS)
            await conn.execute(sql.CANCEL_STALE_YIELDS)
            gate = self._window_gate(settings, now)
            marked = await self._mark_waiters(
                conn,
                settings,
                now,
                sum(lengths),
                (local_rate, local_seconds),
                idle_classes,
                last_writes,
                gate,
            )
            yielding: bytes | None = None
            if settings.preempt and settings.strategy is not Strategy.SHARED and not closed:
                yielding = await self._maybe_preempt(conn, settings, now, idle_classes, gate)
            last_writes.append(await self._idle.count(conn, settings, gate, now))
            for statement, arguments in last_writes:
                await conn.execute(statement, *arguments)
        if reaped or released:
            log.info("released %d dead and %d idle leases", reaped, len(released))
        expired = no_shows + expired_paused + reaped + len(released)
        return LeaderOutcome(expired, marked, tuple(released), yielding)

    def _window_gate(self, settings: SchedulerSettings, now: float) -> ClassGate | None:
        """The windows' verdict at the wall time of queue time ``now`` (R-RES-5)."""
        if not settings.class_windows:
            return None
        wall = now + (self._clock.wall() - self._clock.monotonic())
        self._gate = current_gate(self._gate, settings.class_windows, settings.sessions, wall)
        return self._gate

    async def _fold(self, conn: asyncpg.Connection) -> bool:
        """Fold the queue's changes into the place buckets (ADR 0020); False if not leader.

        A transaction of its own at REPEATABLE READ: the changes it takes and the rows
        it counts when it cuts a bucket are seen as of one snapshot, so no count drifts.
        Only leader rows are written, so nothing else can make it fail to serialize.
        """
        async with conn.transaction(isolation="repeatable_read"):
            confirmed = await conn.fetchval(sql.CONFIRM_LEADERSHIP, self._node, self.token)
            if confirmed is None:
                self.token = None
                return False
            await conn.fetchval(tick_sql.FOLD_QUEUE_CHANGES, PLACE_BUCKET, FOLD_LIMIT)
        if await conn.fetchval(tick_sql.STATISTICS_BEHIND, ANALYSE_FROM_SESSIONS):
            await conn.execute(tick_sql.ANALYSE_SESSIONS)  # a burst (ADR 0020)
        return True

    async def _release_idle(
        self,
        conn: asyncpg.Connection,
        settings: SchedulerSettings,
        now: float,
        in_flight: list[bytes],
    ) -> list[bytes]:
        """R-SESS-10: a session with nothing in flight and no activity frees its slot.

        Sessions held by a node whose heartbeat is late are left to the reaper: that
        node may be streaming a response it could not report as activity.
        """
        rows = await conn.fetch(
            tick_sql.IDLE_SESSIONS,
            now,
            min(TAIL_ONLY_HOLD_SECONDS, settings.idle_seconds),
            settings.idle_seconds,
            in_flight,
            self._node,
            max(3 * self._heartbeat_seconds, self._lease_seconds / 2),
        )
        released: list[bytes] = []
        for row in rows:
            key = row["session_key"]
            freed = await conn.fetchval(sql.RELEASE_SLOT, row["slot_no"], row["lease_token"], key)
            if freed is not None:
                released.append(key)
        return released

    async def _mark_waiters(
        self,
        conn: asyncpg.Connection,
        settings: SchedulerSettings,
        now: float,
        waiting: int,
        local: tuple[float, tuple[int, Sequence[float]]],
        idle_classes: Sequence[int],
        last_writes: list[tuple[str, tuple[object, ...]]],
        gate: ClassGate | None,
    ) -> int:
        """R-SESS-12: mark twice as many waiters as there are (soon) free slots, in the
        order of the fair queue: stride between classes, round-robin within a class;
        a class outside its windows only within its share (R-WIN-2)."""
        active_rows = await conn.fetch(tick_sql.ACTIVE_FOR_ESTIMATE)
        reading = await self._rate.read(
            conn,
            settings,
            now,
            busy=waiting > 0 or len(active_rows) >= settings.sessions,
            local_seconds=local[1],
        )
        configured = self._configured or settings
        sized = await self._sizing.step(conn, configured, now, waiting, active_rows, reading)
        if sized:
            last_writes.append(sized)
        shares, remaining = held_slots(active_rows, reading.rate, settings.sessions)
        soon = soon_interactive = active_interactive = 0
        for row, left, share in zip(active_rows, remaining, shares.held, strict=True):
            interactive = row["base_class"] == _INTERACTIVE_RANK
            active_interactive += interactive
            if finishing_soon(left, share, row["yield_requested"]):
                soon += 1
                soon_interactive += interactive
        budget = marking_budget(
            sessions=settings.sessions,
            reserve=settings.reserve,
            active=len(active_rows),
            active_interactive=active_interactive,
            soon=soon,
            soon_interactive=soon_interactive,
        )
        finishes, schedule_table = shares.tables(remaining, now, settings.sessions)
        # The passes are read once, for the schedule and the marking, and only if needed.
        passes = (
            await _caught_up_passes(conn, idle_classes)
            if waiting and (budget.free or scheduled(settings))
            else []
        )
        schedule, scheduled_seqs = (
            await waiter_schedule(conn, settings, shares, schedule_table, passes)
            if waiting and scheduled(settings)
            else ([], [])
        )
        await conn.execute(tick_sql.CLEAR_MARKS)
        marked: list[bytes] = []  # filled below: written with the last writes
        last_writes.append((tick_sql.STORE_MARKS, (marked,)))
        estimates = (finishes, now, reading.counted, budget.free, reading.provisional)
        last_writes.append((tick_sql.STORE_ESTIMATES, (*estimates, schedule, scheduled_seqs)))
        if not budget.free or not waiting:
            return 0
        active_by_principal = await _active_by_principal(conn)
        contenders = await _contenders(conn, settings, active_by_principal)
        # Storage work: each class's first rows, as many as a marking can look at (the
        # blocked ones are left out by the statement, ``UNBLOCK_YIELDERS`` ran before).
        window = WindowView.of(
            gate, [row["base_class"] for row in active_rows], settings.aging_minutes > 0
        )
        fetch = 4 * budget.total + MARK_SCAN_SLACK // 64
        heads: list[list[asyncpg.Record]] = []
        for rank in range(CLASS_COUNT):
            allowed = (rank == 0 or budget.noninteractive > 0) and not window.closed[rank]
            heads.append(
                list(await conn.fetch(tick_sql.HEADS_OF_CLASS, rank, fetch)) if allowed else []
            )

        def may_take(row: asyncpg.Record) -> bool:
            return not over_share_with_contenders(
                active_by_principal.get(row["principal"], 0), settings.per_principal, contenders
            ) and window.may_take(row["base_class"])

        marks = choose_marks(
            heads, passes, strides_of(settings.weights), budget, may_take, window.closed
        )
        if marks:
            marked.extend(row["session_key"] for row, _ in marks)
            await conn.execute(sql.SET_MARKS, marked, [backup for _, backup in marks])
            if len(active_rows) < settings.sessions:
                # Marked for a slot free now: the other processes' held waiters look
                # at once (ADR 0037), not at their next re-check.
                last_writes.append((tick_sql.SIGNAL_SLOT_FREE, ()))
        return len(marks)

    async def _maybe_preempt(
        self,
        conn: asyncpg.Connection,
        settings: SchedulerSettings,
        now: float,
        idle_classes: Sequence[int],
        gate: ClassGate | None,
    ) -> bytes | None:
        """R-PREEMPT-1..3, as in memory: at most one yield at a time, only for a head
        that has no slot, from a protocol client of a lower class (or above its share
        while the head's principal is below), held for at least a minute."""
        if await conn.fetchval(sql.PENDING_YIELD):
            return None
        active_by_principal = await _active_by_principal(conn)
        contenders = await _contenders(conn, settings, active_by_principal)
        share = settings.per_principal
        # The active rows are read before the head only when windows need them.
        active = None if gate is None else await conn.fetch(tick_sql.ACTIVE_FOR_ESTIMATE)
        window = WindowView.of(
            gate, [row["base_class"] for row in active or ()], settings.aging_minutes > 0
        )
        head = await self._first_eligible(
            conn, settings, active_by_principal, contenders, idle_classes, window
        )
        if head is None:
            return None
        if active is None:
            active = await conn.fetch(tick_sql.ACTIVE_FOR_ESTIMATE)
        head_principal = head["principal"]
        head_active = active_by_principal.get(head_principal, 0)
        head_interactive = head["base_class"] == _INTERACTIVE_RANK
        if slot_free_for(
            sessions=settings.sessions,
            reserve=settings.reserve,
            active=len(active),
            active_interactive=sum(row["base_class"] == _INTERACTIVE_RANK for row in active),
            interactive=head_interactive,
            over_share=over_share_with_contenders(head_active, share, contenders),
        ):
            return None  # a slot is free for the head: no one needs to yield
        victim = choose_victim(
            (
                YieldCandidate(
                    row["session_key"],
                    row["principal"],
                    row["base_class"],
                    active_by_principal.get(row["principal"], 0),
                    now if row["slot_since"] is None else row["slot_since"],
                    row["has_id"],
                    row["yield_requested"],
                )
                for row in await conn.fetch(sql.PREEMPTION_CANDIDATES)
            ),
            YieldHead(head_principal, head["queue_rank"], head_interactive, head_active),
            now=now,
            per_principal=share,
        )
        if victim is None:
            return None
        await conn.execute(sql.REQUEST_YIELD, victim.ref, head["session_key"])
        return victim.ref

    async def _first_eligible(
        self,
        conn: asyncpg.Connection,
        settings: SchedulerSettings,
        active_by_principal: dict[str, int],
        contenders: bool,
        idle_classes: Sequence[int],
        window: WindowView,
    ) -> asyncpg.Record | None:
        """The first waiter in service order that may take a slot now; never one of a
        class outside its windows (R-WIN-2: a closed class makes nobody yield)."""
        heads = [
            [] if window.closed[rank] else list(await conn.fetch(tick_sql.HEADS_OF_CLASS, rank, 64))
            for rank in range(CLASS_COUNT)
        ]
        passes = await _caught_up_passes(conn, idle_classes)
        for _, row in service_order(heads, passes, strides_of(settings.weights)):
            if window.closed_class(row["base_class"]):
                continue
            active = active_by_principal.get(row["principal"], 0)
            if not over_share_with_contenders(active, settings.per_principal, contenders):
                return row
        return None


_INTERACTIVE_RANK = DownloadClass.INTERACTIVE.rank


async def _active_by_principal(conn: asyncpg.Connection) -> dict[str, int]:
    return {row["principal"]: row["count"] for row in await conn.fetch(sql.ACTIVE_BY_PRINCIPAL)}


async def _contenders(
    conn: asyncpg.Connection, settings: SchedulerSettings, active_by_principal: dict[str, int]
) -> bool:
    """R-CLASS-5: whether a principal below its share waits (the share binds only then)."""
    over = [p for p, n in active_by_principal.items() if n >= settings.per_principal]
    return bool(over) and bool(await conn.fetchval(sql.UNDER_SHARE_WAITING, over))


async def _caught_up_passes(conn: asyncpg.Connection, idle_classes: Sequence[int]) -> list[float]:
    """The classes' passes as they will be once ``CATCH_UP_IDLE_CLASSES`` is written.

    The tick writes the catch-up just before its commit (a grant waits for every
    ``class_state`` row the tick has written), so its ordering applies it to what it
    reads: a class nobody waited in starts from the pass of the last grant.
    """
    row = await conn.fetchrow(tick_sql.PASSES_AND_GLOBAL)
    passes = [float(value) for value in row["passes"]]
    return caught_up(passes, idle_classes, float(row["global_pass"]))
