"""The leader's count of the slots left free while someone waits (issue #28).

On each tick the leader counts the free slots a waiter could take (the policy's
:func:`~arkvory_sched.policy.usable_free_slots`, on the waiting sessions and held slots
per base class) and integrates the count of its last tick over the time since: the
count is taken as it stood from one tick to the next, so the figures are true to about
a tick (a second) — a slot freed and taken again between two ticks is not seen. The
integration (:class:`~arkvory_sched.measures.IdleRecord`) is stored in ``queue_state``
with the tick's last writes (migration 0015): every process reports the same figures,
and a new leader goes on from them.

A record this process did not store itself — another leader's, or one from before the
fleet stopped — counts for at most ``stale_after`` seconds: past that, nobody watched
the queue, and the slots its count found idle are not known to have stayed so.
"""

from __future__ import annotations

import asyncpg

from .._classes import DownloadClass
from .._model import IdleSlots
from ..measures import IdleRecord
from ..policy import ClassGate, usable_free_slots
from ..settings import SchedulerSettings
from . import _sql_tick as tick_sql

__all__ = ["IdleSlotCount", "idle_record_of", "idle_slots_of"]

_INTERACTIVE_RANK = DownloadClass.INTERACTIVE.rank


class IdleSlotCount:
    """The leader's side of the idle slots: count, integrate, hand the write back."""

    __slots__ = ("_last_stored", "_stale_after")

    def __init__(self, *, stale_after: float) -> None:
        self._stale_after = stale_after
        self._last_stored: float | None = None  # queue time of the last record it stored

    async def count(
        self,
        conn: asyncpg.Connection,
        settings: SchedulerSettings,
        gate: ClassGate | None,
        now: float,
    ) -> tuple[str, tuple[object, ...]]:
        """This tick's count at queue time ``now``, integrated into the stored record;
        returns the write that stores it (for the tick's last writes)."""
        row = await conn.fetchrow(tick_sql.IDLE_SLOT_COUNTS)
        active_by_class = [int(n) for n in row["active"]]
        slots = usable_free_slots(
            sessions=settings.sessions,
            reserve=settings.reserve,
            active=sum(active_by_class),
            active_interactive=active_by_class[_INTERACTIVE_RANK],
            waiting_by_class=[int(n) for n in row["waiting"]],
            room=[] if gate is None else gate.room(active_by_class),
        )
        record = idle_record_of(row)
        if (
            record.at is not None
            and record.at != self._last_stored
            and now - record.at > self._stale_after
        ):
            record = record.after(record.at + self._stale_after, 0)
        record = record.after(now, slots)
        self._last_stored = record.at
        return (
            tick_sql.STORE_IDLE_SLOTS,
            (
                record.at,
                record.slots,
                record.slot_seconds,
                record.stretch_since,
                record.last_stretch,
                record.longest_stretch,
            ),
        )


def idle_record_of(row: asyncpg.Record) -> IdleRecord:
    """The stored record, from a row with ``queue_state``'s idle columns."""
    return IdleRecord(
        at=row["idle_sampled_at"],
        slots=row["idle_slots"],
        slot_seconds=row["idle_slot_seconds"],
        stretch_since=row["idle_stretch_since"],
        last_stretch=row["idle_last_stretch"],
        longest_stretch=row["idle_longest_stretch"],
    )


def idle_slots_of(row: asyncpg.Record | None) -> IdleSlots:
    """The figures as the leader's last tick stored them: every process reports the
    same, so nothing is counted on to this process's now."""
    if row is None:
        return IdleSlots()
    record = idle_record_of(row)
    return record.figures(record.at if record.at is not None else 0.0)
