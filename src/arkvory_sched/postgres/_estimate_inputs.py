"""What the leader's tick reads for the estimates (R-EST-1, issue #28, ADR 0034).

Two inputs, each one statement or a few per tick, kept out of the leader's marking:

* :class:`FleetRate`: the fleet's rate, read only from the seconds this leader saw the
  slots busy, beside a provisional reading of every second for a cold server;
* :func:`held_slots`: each held slot's share of the rate, from the pace of its
  session (``policy.slot_shares``), and the bytes its session has still to send;
* :func:`waiter_schedule`: when the first waiters start, by their own sizes, in the
  order the fair queue serves them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

import asyncpg

from .._rate import BusySeconds, masked, peak_of_means, reading_min_run
from ..policy import (
    CLASS_COUNT,
    DELIVERY_SECONDS,
    SCHEDULED_WAITERS,
    LinkRate,
    SlotShares,
    estimate_rate,
    queue_schedule,
    sending_pace,
    service_order,
    slot_shares,
    strides_of,
)
from ..settings import SchedulerSettings
from . import _sql as sql
from . import _sql_tick as tick_sql

__all__ = ["FleetRate", "QueueShape", "RateReading", "count_shape", "waiter_schedule"]


@dataclass(frozen=True, slots=True)
class RateReading:
    """One tick's reading: what is stored (``counted``, ``provisional``) and the rate
    estimates use."""

    counted: float
    provisional: float
    rate: LinkRate
    recent: float = 0.0
    """What the fleet carried over its last complete seconds (the self-sizing slots'
    delivery, ADR 0038), in bytes per second."""
    recent_since: float = float("-inf")
    """When the first of those seconds began."""
    carried: float = 0.0
    """The most the fleet carried over the window's seconds, busy or not: a floor of
    what the link can carry, read by the self-sizing slots (ADR 0038)."""


class FleetRate:
    """The fleet's delivery rate as the leader reads it at each tick (ADR 0027, 0028,
    0034): the peak of the processes' summed seconds, only the busy ones."""

    __slots__ = ("_busy", "_lease_seconds", "_node")

    def __init__(self, node: str, lease_seconds: float) -> None:
        self._node = node
        self._lease_seconds = lease_seconds
        # A new leader has seen no busy second yet: it keeps the stored rate.
        self._busy = BusySeconds()

    async def read(
        self,
        conn: asyncpg.Connection,
        settings: SchedulerSettings,
        now: float,
        *,
        busy: bool,
        local_seconds: tuple[int, Sequence[float]],
    ) -> RateReading:
        """``busy``: someone waits or every slot is held, as this tick sees it.

        The leader's own seconds are as of now, the others' as of their heartbeats
        (ADR 0017). This process's own reading is no fallback: it is one process's
        share of the fleet, read without knowing whether the slots were busy.
        """
        self._busy.note(now, busy)
        first, seconds = local_seconds
        fleet = await conn.fetchrow(
            tick_sql.FLEET_SECONDS,
            self._lease_seconds,
            self._node,
            first,
            list(seconds),
            first + len(seconds),
            len(seconds),
        )
        totals = fleet["totals"] or []
        busy_totals = masked(totals, self._busy.flags(first, len(totals)))
        min_run = reading_min_run(settings.bandwidth is not None)
        summed = peak_of_means(busy_totals, min_run=min_run) + fleet["older"]
        counted = summed or fleet["stored"]  # a minute without a byte keeps the last
        carried = peak_of_means(totals)
        provisional = 0.0 if counted else carried
        rate = estimate_rate(counted, 0.0, settings.bandwidth, provisional)
        # The last seconds may not hold the other processes' bytes yet: each reports
        # its seconds with its heartbeat. Read as they were, the fleet looked a third as
        # busy with three processes, and the self-sizing slots opened to their maximum.
        # So the delivery is read up to the last second every process has reported; a
        # leader alone reads its own to the last.
        end = first + len(totals)
        reported = fleet["reported_to"]
        upto = end if reported is None else max(first + DELIVERY_SECONDS, min(end, reported))
        recent = sum(totals[upto - first - DELIVERY_SECONDS : upto - first]) / DELIVERY_SECONDS
        return RateReading(
            counted, provisional, rate, recent, float(upto - DELIVERY_SECONDS), carried
        )


def held_slots(
    active_rows: Sequence[asyncpg.Record], rate: LinkRate, sessions: int
) -> tuple[SlotShares, list[int]]:
    """Each held slot's share of ``rate`` and its session's bytes still to send, from
    ``ACTIVE_FOR_ESTIMATE``'s rows, in their order."""
    shares = slot_shares(
        [
            # Up to when its count is whole: NULL while no response of it runs with
            # bytes counted.
            sending_pace(float(row["covered"]), row["slot_since"], row["sent_as_of"])
            for row in active_rows
        ],
        rate.bytes_per_second,
        sessions,
        known=rate.known,
    )
    return shares, [_remaining(row) for row in active_rows]


def _remaining(row: asyncpg.Record) -> int:
    """An active session's bytes still to send, from ``ACTIVE_FOR_ESTIMATE``'s row."""
    left: int = row["object_size"] - (row["start_offset"] or 0) - row["covered"]
    return max(0, left)


async def waiter_schedule(
    conn: asyncpg.Connection,
    settings: SchedulerSettings,
    shares: SlotShares,
    finishes: Sequence[float],
    passes: Sequence[float],
) -> tuple[list[float], list[int]]:
    """When each of the first :data:`SCHEDULED_WAITERS` waiters starts, by its own size,
    in the fair queue's order (:func:`~arkvory_sched.policy.queue_schedule`), and a
    round of followers for whoever comes before the next tick, as in memory; and who
    each scheduled waiter is (its ``seq``: a poll finds its own entry by it). Each
    class's first rows are one range of its place index. The caller asks only when the
    settings want a schedule (:func:`~arkvory_sched.policy.scheduled`)."""
    heads = [
        await conn.fetch(tick_sql.WAITING_SIZES_OF_CLASS, rank, SCHEDULED_WAITERS)
        for rank in range(CLASS_COUNT)
    ]
    order = service_order(heads, passes, strides_of(settings.weights))
    first = [row for _, row in islice(order, SCHEDULED_WAITERS)]
    sizes = (float(row["remaining"]) for row in first)
    starts = queue_schedule(
        finishes,
        sizes,
        shares.per_slot,
        followers=settings.sessions,
        limited_share=shares.limited_share,
    )
    return starts, [row["seq"] for row in first]


@dataclass(frozen=True, slots=True)
class QueueShape:
    """Waiting sessions per class, their bytes, and all sessions (the queue's bound)."""

    lengths: tuple[int, ...]
    waiting_bytes: float
    sessions: int


async def count_shape(conn: asyncpg.Connection) -> QueueShape:
    """The queue's shape as the leader's tick reads it, exact at this statement."""
    row = await conn.fetchrow(sql.QUEUE_SHAPE)
    return QueueShape(
        tuple(int(n) for n in row["lengths"]), float(row["waiting_bytes"]), int(row["sessions"])
    )
