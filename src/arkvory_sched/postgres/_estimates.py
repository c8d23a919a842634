"""Positions and start estimates for the shared queue: pure functions of one snapshot.

The rules are the in-memory ones (R-EST-1/2, ADR 0002); only their inputs differ. The
count of waiters ahead in the session's own class comes from an index range, and
everything else from :class:`QueueSnapshot` — one row the leader refreshes every tick
plus the slot table — so a poll never scans the waiting sessions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from .._classes import DownloadClass
from .._core import (
    FALLBACK_RATE,
    HEAD_MIN_CHECK_SECONDS,
    MAX_CHECK_SECONDS,
    MIN_CHECK_SECONDS,
    NEWCOMER_CHECK_SECONDS,
    _jitter,
)
from .._fairqueue import CLASS_COUNT
from .._settings import SchedulerSettings
from . import _sql as sql

__all__ = [
    "QueueSnapshot",
    "busy_retry_after",
    "check_delay",
    "estimate_start",
    "read_snapshot",
    "smallest_first_key",
    "stride_ahead",
]

_SIZE_UNIT = 16 * 1024 * 1024
_SIZE_DOUBLINGS_FOR_FULL_DELAY = 10.0
_JITTER_HIGH = 1.1


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

    def rate(self, fallback: float, bandwidth: int | None) -> float:
        """The fleet's delivery rate, this process's own when nobody measured one yet."""
        return self.rate_of(self.fleet_rate, fallback, bandwidth)

    @staticmethod
    def rate_of(fleet_rate: float, fallback: float, bandwidth: int | None) -> float:
        """A rate for estimates: never zero, never below the configured bandwidth."""
        rate = fleet_rate or fallback or FALLBACK_RATE
        return max(rate, float(bandwidth)) if bandwidth is not None else rate


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
    )


def stride_ahead(
    own: int,
    rank: int,
    passes: Sequence[float],
    lengths: Sequence[int],
    weights: Sequence[int],
) -> int:
    """How many waiters the stride between classes serves before this one."""
    strides = [1.0 / weight for weight in weights]
    my_pass = passes[rank] + own * strides[rank]
    ahead = own
    for other in range(CLASS_COUNT):
        if other == rank or not lengths[other]:
            continue
        gap = my_pass - passes[other]
        if gap > 0:
            turns = math.ceil(gap / strides[other])
        else:
            turns = 1 if gap == 0 and other < rank else 0
        ahead += min(lengths[other], max(0, turns))
    return int(ahead)


def estimate_start(
    settings: SchedulerSettings,
    cls: DownloadClass,
    ahead: int,
    now: float,
    snapshot: QueueSnapshot,
    rate: float,
) -> float:
    """When the waiter with ``ahead`` others before it starts (R-EST-1/2).

    Slots free at the times of the finish table; after one round of slots, each
    further round takes the mean waiting download's time on its share of the link. A
    non-interactive waiter does not count free slots held back as the reserve.
    """
    interactive = cls is DownloadClass.INTERACTIVE
    usable = max(1, settings.sessions if interactive else settings.sessions - settings.reserve)
    skip = 0
    if not interactive:
        free = max(0, settings.sessions - snapshot.active)
        active_ni = snapshot.active - snapshot.active_interactive
        free_ni = max(0, settings.sessions - settings.reserve - active_ni)
        skip = free - min(free, free_ni)
    finishes = [max(now, finish) for finish in snapshot.finish_table]
    finishes.extend([now] * max(0, settings.sessions - len(finishes)))
    finishes.sort()
    table = finishes[skip : skip + usable] or [now]
    waiting = max(1, sum(snapshot.class_lengths))
    service = snapshot.waiting_bytes / waiting * len(table) / rate
    cycles, index = divmod(ahead, len(table))
    return max(now, table[index] + cycles * service)


def check_delay(
    key: bytes, *, newcomer: bool, ahead: int, wait: float, marked: bool, free_at_mark: int
) -> float:
    """Seconds until the waiter should ask again (R-EST-3), spread per download."""
    if newcomer:
        return NEWCOMER_CHECK_SECONDS
    floor = HEAD_MIN_CHECK_SECONDS if ahead == 0 or marked else MIN_CHECK_SECONDS
    halfway = min(MAX_CHECK_SECONDS / _JITTER_HIGH, max(floor, wait / 2))
    delay = max(floor, halfway * _jitter(key))
    if marked and ahead < free_at_mark:
        delay = HEAD_MIN_CHECK_SECONDS  # marked for a slot that is (about to be) free
    return delay


def busy_retry_after(snapshot: QueueSnapshot, rate: float) -> int:
    """An honest wait for a full queue: about one mean download's time on the link."""
    mean = snapshot.waiting_bytes / max(1, sum(snapshot.class_lengths))
    return int(min(MAX_CHECK_SECONDS, max(MIN_CHECK_SECONDS, math.ceil(mean / rate))))


def smallest_first_key(size: int, arrival: float, aging_seconds: float) -> float:
    """As the in-memory fair queue: by size, or by arrival plus a bounded size delay."""
    if aging_seconds <= 0:
        return float(size)
    doublings = math.log2(max(size, _SIZE_UNIT) / _SIZE_UNIT)
    return arrival + aging_seconds * min(1.0, doublings / _SIZE_DOUBLINGS_FOR_FULL_DELAY)
