"""The shared queue's snapshot for estimates: one row, no scan of the waiting sessions.

The rules of estimates are the policy's (:mod:`arkvory_sched.policy`, ADR 0016); only
their inputs differ from the in-memory store. The count of waiters ahead in the
session's own class comes from an index range, and everything else from
:class:`QueueSnapshot` — one row the leader refreshes every tick plus the slot table —
so a poll never scans the waiting sessions. :class:`QueueSnapshots` keeps the last one
read for half a second of queue time, for every answer of this process meanwhile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import asyncpg

from .._clock import Clock
from ..policy import CLASS_COUNT, LinkRate, estimate_rate
from . import _sql as sql

__all__ = ["SNAPSHOT_SECONDS", "QueueSnapshot", "QueueSnapshots", "read_snapshot"]

SNAPSHOT_SECONDS = 0.5  # of queue time: how long one read serves every answer


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """What the leader's last tick left for estimates, plus the slots as they are now."""

    last_release: float
    free_at_mark: int
    finish_table: tuple[float, ...]
    finish_table_at: float
    """When the leader made the finish table, on queue time."""
    fleet_rate: float
    provisional_rate: float
    waiter_schedule: tuple[float, ...]
    """When the first waiters start by their own sizes, in service order (issue #28)."""
    scheduled_starts: dict[int, float]
    """The same starts by who each waiter is (its ``seq``), built once per read: a poll
    finds its own (``estimate_start``'s ``own_start``)."""
    class_lengths: tuple[int, ...]
    waiting_bytes: float
    session_count: int
    passes: tuple[float, ...]
    active: int
    active_interactive: int
    active_by_class: tuple[int, ...]
    """Held slots by base class, for the share of a class outside its windows."""
    marked_order: tuple[bytes, ...] = ()
    """The waiters the last tick marked, in its order (issue #28: they take slots in it)."""
    marked: frozenset[bytes] = frozenset()
    """The same waiters as a set, built once per read: every early poll asks whether it
    is among them, and is decided anew if so (ADR 0029)."""

    @property
    def waiting(self) -> int:
        return sum(self.class_lengths)

    def rate(self, bandwidth: int | None) -> LinkRate:
        """The fleet's delivery rate as the leader last stored it (ADR 0034)."""
        return estimate_rate(self.fleet_rate, 0.0, bandwidth, self.provisional_rate)


async def read_snapshot(conn: asyncpg.Connection) -> QueueSnapshot:
    row = await conn.fetchrow(sql.QUEUE_SNAPSHOT)
    return QueueSnapshot(
        last_release=row["last_release"],
        free_at_mark=row["free_at_mark"],
        finish_table=tuple(row["finish_table"] or ()),
        finish_table_at=-math.inf if row["finish_table_at"] is None else row["finish_table_at"],
        fleet_rate=row["fleet_rate"],
        provisional_rate=row["provisional_rate"],
        waiter_schedule=tuple(row["waiter_schedule"] or ()),
        scheduled_starts=dict(
            zip(row["waiter_schedule_seqs"] or (), row["waiter_schedule"] or (), strict=False)
        ),
        class_lengths=tuple(row["class_lengths"] or (0,) * CLASS_COUNT),
        waiting_bytes=row["waiting_bytes"],
        session_count=row["session_count"],
        passes=tuple(row["passes"] or (0.0,) * CLASS_COUNT),
        active=row["active"],
        active_interactive=row["active_interactive"],
        active_by_class=tuple(row["active_by_class"] or (0,) * CLASS_COUNT),
        marked_order=tuple(row["marked"] or ()),
        marked=frozenset(row["marked"] or ()),
    )


class QueueSnapshots:
    """The last :class:`QueueSnapshot` this process read, kept for half a second.

    Its age is counted on queue time: what an answer says must not depend on how fast
    the process runs (the same requests at the same queue times, the same answers).
    """

    __slots__ = ("_clock", "_read_at", "_snapshot", "_until")

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._snapshot: QueueSnapshot | None = None
        self._until = 0.0
        self._read_at = -float("inf")

    def current(self, now: float) -> QueueSnapshot | None:
        """The snapshot still within its half second at ``now``, if any."""
        snapshot = self._snapshot
        if snapshot is None or now >= self._until:
            return None
        return snapshot

    def read_since(self, moment: float) -> QueueSnapshot | None:
        """The snapshot kept, if it was read at ``moment`` or later (queue time)."""
        return self._snapshot if self._read_at >= moment else None

    async def read(
        self, conn: asyncpg.Connection, *, fresh_since: float | None = None
    ) -> QueueSnapshot:
        """The leader's last tick plus the slot table, cached for half a second; with
        ``fresh_since``, read anew unless the one kept was read at that moment or later
        (a request that began then and read it already: a marked waiter's claim read it
        twice in a few milliseconds, ADR 0040)."""
        now = self._clock.monotonic()
        # Kept for half a second, or, asked fresh, if read since that moment.
        kept = self.current(now) if fresh_since is None else self.read_since(fresh_since)
        if kept is not None:
            return kept
        snapshot = await read_snapshot(conn)
        self._snapshot = snapshot
        self._read_at = now
        self._until = now + SNAPSHOT_SECONDS
        return snapshot

    def drop(self) -> None:
        """The queue changed here: the next answer reads the snapshot anew."""
        self._snapshot = None
