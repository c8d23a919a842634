"""The leader's self-sizing slots: the fleet's count in force (issue #30, ADR 0038).

The leader runs the one controller of the policy (through :class:`SlotSizer`, as the
in-memory store does) on what the fleet carries: the processes' summed seconds, the
held slots' sessions and whether anyone waits. The count goes out with the tick's last
writes, fenced like the rest of it; every process takes it as ``sessions`` for its
claims at its next tick (:meth:`FleetSizing.in_force`), and a new leader starts from
it, so a failover neither resets the count nor runs two controllers.

A held slot's pace is read over the time its bytes cover: a running response's count
is as of its process's last write of bytes in flight, up to ``IN_FLIGHT_SECONDS``
back (``sent_as_of``; migration 0021). Read up to the tick, every pace read low by up
to a second of its bytes (a fifth for a slot held five seconds). The sessions too new
to read are then taken to fill what the read ones seemed to leave of the link, which
made every read one look limited by its client: in the half-slow crowd of simulation
scenario 6 the count climbed from 18 to 24 a slot at a time on such readings, and the
fast clients shared the link the more (1.15 times the oracle's mean completion).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import asyncpg

from .._slot_sizer import SlotSizer
from ..policy import held_pace, sizing_reading
from ..settings import SchedulerSettings
from . import _sql_tick as tick_sql
from ._estimate_inputs import RateReading

__all__ = ["FleetSizing", "InForce"]


class InForce(NamedTuple):
    """What a process's claims and answers run on (:meth:`FleetSizing.in_force`)."""

    settings: SchedulerSettings
    """The operator's, with the count the leader published."""
    reason: str | None
    """Why the count is where it is."""
    rising: int
    """Slots the count may open at its next step (``policy.rising_slots``)."""


class FleetSizing:
    """The controller's state while this process leads, and its step at each tick."""

    __slots__ = ("_cleared", "_sizer")

    def __init__(self) -> None:
        self._sizer: SlotSizer | None = None
        self._cleared = False  # a fixed count's NULL written in this leadership

    def forget(self) -> None:
        """No longer the leader: the next leadership starts from the published count."""
        self._sizer = None
        self._cleared = False

    async def step(
        self,
        conn: asyncpg.Connection,
        configured: SchedulerSettings,
        now: float,
        waiting: int,
        active_rows: Sequence[asyncpg.Record],
        reading: RateReading,
    ) -> tuple[str, tuple[object, ...]] | None:
        """One reading: ``waiting`` sessions, the held slots' ``active_rows``
        (``ACTIVE_FOR_ESTIMATE``) and the tick's rate ``reading``; the tick's last write
        that publishes the count. A fixed count writes ``NULL`` once a leadership, and
        then nothing."""
        sizer = self._sizer
        if sizer is None:
            sizer = self._sizer = SlotSizer(configured, now)
            row = await conn.fetchrow(tick_sql.SESSIONS_IN_FORCE)
            if row["sessions_in_force"] is not None:
                sizer.configure(configured, now, count=row["sessions_in_force"])
        elif sizer.configured is not configured:
            sizer.configure(configured, now)
        if sizer.state is None:
            if self._cleared:
                return None
            self._cleared = True
            return tick_sql.STORE_SESSIONS_IN_FORCE, (None, None, 0)
        self._cleared = False
        sizer.step(
            sizing_reading(
                now,
                waiting=waiting,
                paces=[_pace(row, now) for row in active_rows],
                delivery=reading.recent,
                delivery_since=reading.recent_since,
                rate=reading.rate,
                carried=reading.carried,
                capacity_told=configured.bandwidth is not None,
            )
        )
        state = sizer.state
        assert state is not None
        rising = sizer.rising(now)
        return tick_sql.STORE_SESSIONS_IN_FORCE, (state.count, state.reason.value, rising)

    @staticmethod
    async def in_force(conn: asyncpg.Connection, configured: SchedulerSettings) -> InForce:
        """The settings this process's claims run on: the operator's, with the count the
        leader published (within the operator's bounds), why it is there, and what it
        may open next. A fixed count reads nothing."""
        if configured.min_sessions is None or not configured.automatic_sessions:
            return InForce(configured, None, 0)  # a fixed count: no statement
        row = await conn.fetchrow(tick_sql.SESSIONS_IN_FORCE)
        count = row["sessions_in_force"]
        if count is None:  # not published yet: the count a controller starts from
            count = configured.min_sessions
        count = min(max(count, configured.min_sessions), configured.sessions)
        reason, rising = row["sizing_reason"], row["sizing_rising"]
        if count == configured.sessions:
            return InForce(configured, reason, rising)
        return InForce(configured.with_changes(sessions=count), reason, rising)


def _pace(row: asyncpg.Record, now: float) -> float | None:
    """A held slot's pace over the time its bytes cover (the module's docstring)."""
    as_of = row["sent_as_of"]
    return held_pace(float(row["covered"]), row["slot_since"], now if as_of is None else as_of)
