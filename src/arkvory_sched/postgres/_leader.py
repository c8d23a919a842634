"""The queue work one process does for the whole fleet on each tick.

Leadership is a lease in ``queue_leader``: kept by renewing it every tick, taken over
only once it expired, with a token that grows with every change of leader. All of a
tick's work runs in one transaction that first locks the leader row *with this
process's token*, so a leader that was paused past its lease commits nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from .._classes import DownloadClass
from .._clock import Clock
from .._core import (
    FALLBACK_RATE,
    FINISHING_SOON_SECONDS,
    MARK_SCAN_SLACK,
    PAUSE_RETENTION_SECONDS,
    PREEMPT_MIN_HOLD_SECONDS,
    TAIL_ONLY_HOLD_SECONDS,
)
from .._fairqueue import CLASS_COUNT
from .._settings import SchedulerSettings, Strategy
from . import _sql as sql

__all__ = ["LeaderOutcome", "QueueLeader"]

log = logging.getLogger("arkvory_sched.postgres")

ROUND_CLEANUP_SECONDS = 60.0
# Counting a long queue's shape is a scan of every waiting row (17 ms at 65,536 on two
# CPUs that also serve admissions): from this many waiting on, a count up to this old
# is reused. Estimates move by a few sessions in that time, and a queue this long
# cannot look empty to the marking while it is reused.
SHAPE_REUSE_WAITING = 4096
SHAPE_REUSE_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class QueueShape:
    """Waiting sessions per class, their bytes, and all sessions (the queue's bound)."""

    lengths: tuple[int, ...]
    waiting_bytes: float
    sessions: int
    counted_at: float  # the process's monotonic clock: a cache's age, not a decision

    def reusable(self, real: float) -> bool:
        return (
            sum(self.lengths) >= SHAPE_REUSE_WAITING
            and real - self.counted_at < SHAPE_REUSE_SECONDS
        )


@dataclass(frozen=True, slots=True)
class LeaderOutcome:
    """What one leader tick did; ``released`` are sessions whose idle slot it freed."""

    expired: int
    marked: int
    released: tuple[bytes, ...]
    preempted: bool = False


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
        self._shape: QueueShape | None = None

    @property
    def is_leader(self) -> bool:
        return self.token is not None

    def step_down(self) -> None:
        self.token = None
        self._shape = None

    async def elect(self, conn: asyncpg.Connection) -> bool:
        """Renew or take the leader lease; False when another live process holds it."""
        token = await conn.fetchval(sql.TAKE_LEADERSHIP, self._node, self._leader_seconds)
        if token is None:
            self.token = None
            return False
        if self.token != token:
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
        last_trouble: float,
        closed: bool = False,
    ) -> LeaderOutcome:
        """Reap, release idle, expire, age, refresh estimates and mark — fenced.

        ``now`` and ``last_trouble`` are queue time (the scheduler's clock).
        """
        # The process's own clock only for its caches' ages (the shape count, the round
        # cleanup): measuring, not deciding.
        real = time.monotonic()
        counted: QueueShape | None = None  # kept once the tick that counted it commits
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
                reaped = await conn.fetchval(sql.REAP_EXPIRED, self._lease_seconds)
            released = await self._release_idle(conn, settings, now, in_flight)
            await conn.fetchval(sql.PAUSE_ORPHANS, now + PAUSE_RETENTION_SECONDS)
            no_shows = await conn.fetchval(sql.EXPIRE_NO_SHOWS, now)
            expired_paused = await conn.fetchval(sql.EXPIRE_PAUSED, now)
            # The fleet-wide rows every admission and completion write (queue_state,
            # class_state) are written last, just before the commit: a row this
            # transaction updates stays locked until it ends, and the scans between
            # here and there take tens of milliseconds at a long queue.
            last_writes: list[tuple[str, tuple[object, ...]]] = [
                (sql.COUNT_EXPIRIES, (no_shows, len(released), reaped, now))
            ]
            if settings.aging_minutes > 0 and settings.strategy is Strategy.ORDERED:
                await conn.execute(sql.PROMOTE_AGED, now, settings.aging_minutes * 60.0)
            if real >= self._next_round_cleanup:
                self._next_round_cleanup = real + ROUND_CLEANUP_SECONDS
                await conn.execute(sql.FORGET_OLD_ROUNDS)
            shape = self._shape
            if shape is None or not shape.reusable(real):
                shape = counted = await _count_shape(conn, real)
                last_writes.append(
                    (sql.STORE_SHAPE, (list(shape.lengths), shape.waiting_bytes, shape.sessions))
                )
            lengths = shape.lengths
            idle_classes = [rank for rank in range(CLASS_COUNT) if not lengths[rank]]
            # Every grant advances its class's row, so the catch-up is written last too
            # (and only where a pass changes); the ordering below applies it as read.
            if idle_classes:
                last_writes.append((sql.CATCH_UP_IDLE_CLASSES, (idle_classes,)))
            await conn.execute(sql.UNBLOCK_YIELDERS)
            await conn.execute(sql.CANCEL_STALE_YIELDS)
            marked = await self._mark_waiters(
                conn, settings, now, sum(lengths), local_rate, idle_classes, last_writes
            )
            preempted = False
            if settings.preempt and settings.strategy is not Strategy.SHARED and not closed:
                preempted = await self._maybe_preempt(conn, settings, now, idle_classes)
            for statement, arguments in last_writes:
                await conn.execute(statement, *arguments)
        if counted is not None:
            self._shape = counted
        if reaped or released:
            log.info("released %d dead and %d idle leases", reaped, len(released))
        expired = no_shows + expired_paused + reaped + len(released)
        return LeaderOutcome(expired, marked, tuple(released), preempted)

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
            sql.IDLE_SESSIONS,
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
        local_rate: float,
        idle_classes: Sequence[int],
        last_writes: list[tuple[str, tuple[object, ...]]],
    ) -> int:
        """R-SESS-12: mark twice as many waiters as there are (soon) free slots, in the
        order of the fair queue: stride between classes, round-robin within a class."""
        active_rows = await conn.fetch(sql.ACTIVE_FOR_ESTIMATE)
        fleet_rate = await conn.fetchval(sql.FLEET_RATE, self._lease_seconds)
        rate = fleet_rate or local_rate or FALLBACK_RATE
        if settings.bandwidth is not None:
            rate = max(rate, float(settings.bandwidth))
        per_session = rate / max(1, len(active_rows))
        finishes: list[float] = []
        soon_total = soon_ni = active_ni = 0
        for row in active_rows:
            remaining = max(0, row["object_size"] - (row["start_offset"] or 0) - row["covered"])
            finish = now + remaining / per_session
            finishes.append(finish)
            interactive = row["base_class"] == DownloadClass.INTERACTIVE.rank
            active_ni += not interactive
            if remaining == 0 or finish <= now + FINISHING_SOON_SECONDS:
                soon_total += 1
                soon_ni += not interactive
        finishes.sort()
        free_total = settings.sessions - len(active_rows) + soon_total
        free_ni = settings.sessions - settings.reserve - active_ni + soon_ni
        await conn.execute(sql.CLEAR_MARKS)
        last_writes.append((sql.STORE_ESTIMATES, (finishes, now, fleet_rate, max(0, free_total))))
        if free_total <= 0 or not waiting:
            return 0
        budget = 2 * free_total
        budget_ni = 2 * max(0, free_ni)
        active_by_principal = {
            row["principal"]: row["count"] for row in await conn.fetch(sql.ACTIVE_BY_PRINCIPAL)
        }
        over = {p for p, n in active_by_principal.items() if n >= settings.per_principal}
        contenders = bool(over) and await conn.fetchval(sql.UNDER_SHARE_WAITING, list(over))
        limit = 4 * budget + MARK_SCAN_SLACK // 64
        heads: list[list[asyncpg.Record]] = []
        for rank in range(CLASS_COUNT):
            allowed = rank == 0 or budget_ni > 0
            heads.append(list(await conn.fetch(sql.HEADS_OF_CLASS, rank, limit)) if allowed else [])
        passes = await _caught_up_passes(conn, idle_classes)
        strides = [1.0 / weight for weight in settings.weights]
        positions = [0] * CLASS_COUNT
        keys: list[bytes] = []
        backups: list[bool] = []
        while budget > 0:
            best = -1
            for rank in range(CLASS_COUNT):
                if positions[rank] >= len(heads[rank]) or (rank > 0 and budget_ni <= 0):
                    continue
                if best < 0 or passes[rank] < passes[best]:
                    best = rank
            if best < 0:
                break
            row = heads[best][positions[best]]
            positions[best] += 1
            passes[best] += strides[best]
            if contenders and row["principal"] in over:
                continue  # R-CLASS-5: beyond its share only while nobody else waits
            keys.append(row["session_key"])
            backups.append(len(keys) > free_total)
            budget -= 1
            if row["base_class"] != DownloadClass.INTERACTIVE.rank:
                budget_ni -= 1
        if keys:
            await conn.execute(sql.SET_MARKS, keys, backups)
        return len(keys)

    async def _maybe_preempt(
        self,
        conn: asyncpg.Connection,
        settings: SchedulerSettings,
        now: float,
        idle_classes: Sequence[int],
    ) -> bool:
        """R-PREEMPT-1..3, as in memory: at most one yield at a time, only for a head
        that has no slot, from a protocol client of a lower class (or above its share
        while the head's principal is below), held for at least a minute."""
        if await conn.fetchval(sql.PENDING_YIELD):
            return False
        active_by_principal: dict[str, int] = {
            row["principal"]: row["count"] for row in await conn.fetch(sql.ACTIVE_BY_PRINCIPAL)
        }
        share = settings.per_principal
        over = {p for p, n in active_by_principal.items() if n >= share}
        contenders = bool(over) and await conn.fetchval(sql.UNDER_SHARE_WAITING, list(over))
        head = await self._first_eligible(
            conn, settings, over if contenders else set(), idle_classes
        )
        if head is None:
            return False
        active = await conn.fetch(sql.ACTIVE_FOR_ESTIMATE)
        interactive_rank = DownloadClass.INTERACTIVE.rank
        active_ni = sum(row["base_class"] != interactive_rank for row in active)
        head_interactive = head["base_class"] == interactive_rank
        if (
            len(active) < settings.sessions
            and (head_interactive or active_ni < settings.sessions - settings.reserve)
            and not (contenders and head["principal"] in over)
        ):
            return False  # a slot is free for the head: no one needs to yield
        head_below_share = active_by_principal.get(head["principal"], 0) < share
        victim: asyncpg.Record | None = None
        for row in await conn.fetch(sql.PREEMPTION_CANDIDATES, now - PREEMPT_MIN_HOLD_SECONDS):
            if row["principal"] == head["principal"]:
                continue
            lower_class = row["base_class"] > head["queue_rank"]
            above_share = head_below_share and active_by_principal.get(row["principal"], 0) > share
            if not (lower_class or above_share):
                continue
            if not head_interactive and row["base_class"] == interactive_rank:
                continue
            if victim is None or (row["base_class"], -row["slot_since"]) > (
                victim["base_class"],
                -victim["slot_since"],
            ):
                victim = row
        if victim is None:
            return False
        await conn.execute(sql.REQUEST_YIELD, victim["session_key"], head["session_key"])
        return True

    async def _first_eligible(
        self,
        conn: asyncpg.Connection,
        settings: SchedulerSettings,
        over: set[str],
        idle_classes: Sequence[int],
    ) -> asyncpg.Record | None:
        """The first waiter in service order that may take a slot now."""
        heads = [
            list(await conn.fetch(sql.HEADS_OF_CLASS, rank, 64)) for rank in range(CLASS_COUNT)
        ]
        passes = await _caught_up_passes(conn, idle_classes)
        strides = [1.0 / weight for weight in settings.weights]
        positions = [0] * CLASS_COUNT
        while True:
            best = -1
            for rank in range(CLASS_COUNT):
                if positions[rank] < len(heads[rank]) and (best < 0 or passes[rank] < passes[best]):
                    best = rank
            if best < 0:
                return None
            row = heads[best][positions[best]]
            positions[best] += 1
            passes[best] += strides[best]
            if row["principal"] not in over:
                return row


async def _caught_up_passes(conn: asyncpg.Connection, idle_classes: Sequence[int]) -> list[float]:
    """The classes' passes as they will be once ``CATCH_UP_IDLE_CLASSES`` is written.

    The tick writes the catch-up just before its commit (a grant waits for every
    ``class_state`` row the tick has written), so its ordering applies it to what it
    reads: a class nobody waited in starts from the slowest busy class's pass.
    """
    passes = [float(value) for value in await conn.fetchval(sql.CLASS_PASSES)]
    return caught_up(passes, idle_classes)


def caught_up(passes: Sequence[float], idle_classes: Sequence[int]) -> list[float]:
    """``CATCH_UP_IDLE_CLASSES`` on a list: idle classes rise to the slowest busy one's
    pass, or to the highest pass when every class is idle."""
    idle = set(idle_classes)
    busy = [value for rank, value in enumerate(passes) if rank not in idle]
    target = min(busy) if busy else max(passes, default=0.0)
    return [max(value, target) if rank in idle else value for rank, value in enumerate(passes)]


async def _count_shape(conn: asyncpg.Connection, real: float) -> QueueShape:
    lengths = [0] * CLASS_COUNT
    waiting_bytes = 0.0
    sessions = 0
    for row in await conn.fetch(sql.QUEUE_SHAPE):
        lengths[row["queue_rank"]] = row["n"]
        waiting_bytes += row["bytes"]
        sessions += row["sessions"]
    return QueueShape(tuple(lengths), waiting_bytes, sessions, real)
