"""The leader's aging step, and the window view its marking and preemption use.

Aging, under every strategy (``policy.promote_at``): the due waiters move one class up,
except those of a class with windows, which are deferred — they stay in their class
and are not due again (``policy.class_ages``, ADR 0021), as in memory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from ..policy import CLASS_COUNT, ClassGate, class_ages, closed_ranks, promote_at, take_room
from ..settings import SchedulerSettings, Strategy
from . import _sql_tick as tick_sql

__all__ = ["WindowView", "entered_empty", "promote_aged"]


async def promote_aged(
    conn: asyncpg.Connection, settings: SchedulerSettings, now: float, batch: int
) -> list[int]:
    """Aging, under every strategy: the due waiters move one class up (``promote_at``).

    In the order the in-memory queue moves them — the class next to ``release`` first,
    then by promotion time and arrival order — since under ``ordered`` each takes a
    turn of its new class, and turns handed out one after another depend on the order.
    A due waiter of a class with windows is deferred instead. At most ``batch`` a
    tick. Returns the class each promoted waiter left.
    """
    rows = await conn.fetch(tick_sql.AGED_WAITERS, now, batch)
    if not rows:
        return []
    windows = settings.class_windows
    deferred = [row["session_key"] for row in rows if not class_ages(windows, row["base_class"])]
    if deferred:
        await conn.execute(tick_sql.DEFER_AGING, deferred)
        rows = [row for row in rows if class_ages(windows, row["base_class"])]
        if not rows:
            return []
    rows = sorted(rows, key=lambda row: (row["queue_rank"], row["promote_at"], row["seq"]))
    aging = settings.aging_minutes * 60.0
    keys = [row["session_key"] for row in rows]
    next_at = [
        promote_at(row["aging_since"], row["base_class"], row["queue_rank"] - 1, aging)
        for row in rows
    ]
    ordered = settings.strategy is Strategy.ORDERED
    await conn.execute(tick_sql.PROMOTE_AGED, keys, next_at, ordered)
    return [row["queue_rank"] for row in rows]


def entered_empty(lengths: Sequence[int], promoted_from: Sequence[int]) -> set[int]:
    """The classes a promoted waiter entered while nobody waited in them, from the
    lengths after the promotions: a class's length before them is its length after,
    less the waiters that entered it, plus those that left it."""
    entered = Counter(rank - 1 for rank in promoted_from)
    left = Counter(promoted_from)
    return {rank for rank, count in entered.items() if lengths[rank] - count + left[rank] == 0}


@dataclass(slots=True)
class WindowView:
    """The windows as one tick sees them (R-WIN-2): the gate, the slots each closed
    class may still take (counted down while marking) and the ranks not to scan."""

    gate: ClassGate | None
    room: list[int | None]
    closed: list[bool]

    @classmethod
    def of(cls, gate: ClassGate | None, base_classes: Sequence[int], aging: bool) -> WindowView:
        """From the base classes of the active sessions' rows (at most ``sessions``)."""
        if gate is None:
            return cls(None, [], [False] * CLASS_COUNT)
        active = [0] * CLASS_COUNT
        for rank in base_classes:
            active[rank] += 1
        room = gate.room(active)
        return cls(gate, room, closed_ranks(gate, room, aging))

    def may_take(self, base_rank: int) -> bool:
        """Whether a waiter of this base class may be marked; counts it if so."""
        return self.gate is None or take_room(self.room, base_rank)

    def closed_class(self, base_rank: int) -> bool:
        """Whether the class is outside its windows (its head makes nobody yield)."""
        return self.gate is not None and self.gate.closed(base_rank)
