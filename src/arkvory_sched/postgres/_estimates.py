"""The shared queue's snapshot for estimates: one row, no scan of the waiting sessions.

The rules of estimates are the policy's (:mod:`arkvory_sched.policy`, ADR 0016); only
their inputs differ from the in-memory store. The count of waiters ahead in the
session's own class comes from an index range, and everything else from
:class:`QueueSnapshot` — one row the leader refreshes every tick plus the slot table —
so a poll never scans the waiting sessions.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg

from ..policy import CLASS_COUNT, estimate_rate
from . import _sql as sql

__all__ = ["QueueSnapshot", "read_snapshot"]


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """What the leader's last tick left for estimates, plus the slots as they are now."""

    last_release: float
    free_at_mark: int
    finish_table: tuple[float, ...]
    fleet_rate: float
    class_lengths: tuple[int, ...]
    waiting_bytes: float
    session_count: int
    passes: tuple[float, ...]
    active: int
    active_interactive: int
    active_by_class: tuple[int, ...]
    """Held slots by base class, for the share of a class outside its windows."""
    marked: frozenset[bytes] = frozenset()
    """The waiters marked for a free slot: their early polls are decided (ADR 0029)."""

    @property
    def waiting(self) -> int:
        return sum(self.class_lengths)

    def rate(self, fallback: float, bandwidth: int | None) -> float:
        """The fleet's delivery rate, this process's own when nobody measured one yet."""
        return estimate_rate(self.fleet_rate, fallback, bandwidth)


async def read_snapshot(conn: asyncpg.Connection) -> QueueSnapshot:
    row = await conn.fetchrow(sql.QUEUE_SNAPSHOT)
    return QueueSnapshot(
        last_release=row["last_release"],
        free_at_mark=row["free_at_mark"],
        finish_table=tuple(row["finish_table"] or ()),
        fleet_rate=row["fleet_rate"],
        class_lengths=tuple(row["class_lengths"] or (0,) * CLASS_COUNT),
        waiting_bytes=row["waiting_bytes"],
        session_count=row["session_count"],
        passes=tuple(row["passes"] or (0.0,) * CLASS_COUNT),
        active=row["active"],
        active_interactive=row["active_interactive"],
        active_by_class=tuple(row["active_by_class"] or (0,) * CLASS_COUNT),
        marked=frozenset(row["marked"] or ()),
    )
