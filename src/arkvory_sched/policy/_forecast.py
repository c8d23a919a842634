"""When the queue empties, and why a class is not draining (R-VIS-2, R-WIN-2).

Pure functions of values a store's :class:`~arkvory_sched.QueueState` and the settings
hold; ``now`` is wall-clock epoch seconds, passed in. Both stores' answers go through
these, so the operator page says the same on either.

The forecast is a fluid model on the measured link rate, not a replay of the
scheduler: the link drains the bytes active sessions have left (a session started
inside its window runs to completion), then the waiting bytes of each open class, most
urgent first. A class outside its windows drains only at its ``outsideShare`` of the
link, or not at all, until its next opening. It answers the operator's question —
"when will this be over?" — to within the accuracy of the rate, which is the same
rate the start estimates use (R-EST-1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from ._windows import ClassSchedule, is_open, next_opening, open_intervals

__all__ = [
    "FORECAST_HORIZON_SECONDS",
    "ClassWork",
    "Forecast",
    "Stall",
    "StallReason",
    "forecast_empty",
    "stall_reason",
]

FORECAST_HORIZON_SECONDS: Final = 90 * 86_400.0
"""How far ahead the forecast looks; work not done by then is forecast as ``None``."""

_EPSILON_BYTES: Final = 0.5


@dataclass(frozen=True, slots=True)
class ClassWork:
    """The bytes one class still has to move: of its active and its waiting sessions."""

    active_bytes: float
    waiting_bytes: float


@dataclass(frozen=True, slots=True)
class Forecast:
    """When the queue (``empties_at``) and each class (by rank) will have no work left.

    Wall-clock epoch seconds; ``now`` for what is empty already; ``None`` when it cannot
    be said (no measured rate, or a class that does not open within the horizon).
    """

    empties_at: float | None
    class_empties_at: tuple[float | None, ...]


class StallReason(StrEnum):
    """Why a class with waiters gets no slot now."""

    OUTSIDE_WINDOW = "outside_window"
    """Closed by its operator windows and at (or without) its outside share."""
    NO_FREE_SLOT = "no_free_slot"
    """Every slot is held."""
    RESERVE = "reserve"
    """Only the slots reserved for ``interactive`` are free (R-CLASS-3)."""
    AT_SHARE = "at_share"
    """Its first waiter's principal holds its share while others wait (R-CLASS-5)."""


@dataclass(frozen=True, slots=True)
class Stall:
    """A class not draining and why; ``next_opening`` (wall time) for ``outside_window``,
    ``None`` there when no window of the class ever opens."""

    reason: StallReason
    next_opening: float | None = None


def stall_reason(
    *,
    rank: int,
    waiting: int,
    active: int,
    active_total: int,
    active_interactive: int,
    sessions: int,
    reserve: int,
    schedule: ClassSchedule | None,
    head_at_share: bool,
    now: float,
) -> Stall | None:
    """Why class ``rank`` does not drain now, or ``None`` when it does (or has no waiters).

    The checks follow the order an operator acts on: a closed window first (nothing
    else matters until it opens), then a full link, then the interactive reserve,
    then the per-principal share. ``active`` counts the class's own active sessions,
    which an outside share is measured against.
    """
    if waiting <= 0:
        return None
    if schedule is not None and not is_open(schedule.windows, now):
        allowed = math.floor(schedule.outside_share * sessions)
        if active >= allowed:
            return Stall(StallReason.OUTSIDE_WINDOW, next_opening(schedule.windows, now))
    if active_total >= sessions:
        return Stall(StallReason.NO_FREE_SLOT)
    if rank > 0 and active_total - active_interactive >= sessions - reserve:
        return Stall(StallReason.RESERVE)
    if head_at_share:
        return Stall(StallReason.AT_SHARE)
    return None


def forecast_empty(
    work: Sequence[ClassWork],
    schedules: Sequence[ClassSchedule | None],
    *,
    rate: float,
    now: float,
    horizon: float = FORECAST_HORIZON_SECONDS,
) -> Forecast:
    """When each class and the whole queue run out of work (see the module docstring).

    ``work`` and ``schedules`` are by class rank; ``rate`` is the link's bytes/s.
    """
    active = [max(0.0, item.active_bytes) for item in work]
    waiting = [max(0.0, item.waiting_bytes) for item in work]
    done: list[float | None] = [
        now if active[rank] + waiting[rank] <= _EPSILON_BYTES else None for rank in range(len(work))
    ]
    if all(at is not None for at in done):
        return Forecast(now, tuple(done))
    if rate <= 0:
        return Forecast(None, tuple(done))
    end = now + horizon
    windows = [
        None if schedule is None else _Openings(open_intervals(schedule.windows, now, end))
        for schedule in schedules
    ]
    shares = [0.0 if schedule is None else schedule.outside_share for schedule in schedules]
    clock = now
    while clock < end and any(at is None for at in done):
        # One segment: until a class opens or closes, or one part of the work drains.
        caps: list[tuple[int, bool, float]] = []  # (rank, active part?, most bytes/s)
        caps += [(rank, True, rate) for rank in range(len(work)) if active[rank] > _EPSILON_BYTES]
        for rank, opening in enumerate(windows):
            if waiting[rank] > _EPSILON_BYTES:
                fraction = 1.0 if opening is None or opening.open_at(clock) else shares[rank]
                if fraction > 0:
                    caps.append((rank, False, rate * min(1.0, fraction)))
        boundary = min(
            (opening.next_change(clock) for opening in windows if opening is not None),
            default=math.inf,
        )
        boundary = min(boundary, end)
        left = rate
        flows: list[tuple[int, bool, float]] = []
        for rank, is_active, cap in caps:
            flow = min(cap, left)
            if flow <= 0:
                break
            flows.append((rank, is_active, flow))
            left -= flow
        drain = min(
            (
                (active[rank] if is_active else waiting[rank]) / flow
                for rank, is_active, flow in flows
            ),
            default=math.inf,
        )
        # A boundary is reached exactly (no float drift that could stall the loop).
        step, after = (
            (drain, clock + drain) if drain < boundary - clock else (boundary - clock, boundary)
        )
        for rank, is_active, flow in flows:
            if is_active:
                active[rank] = max(0.0, active[rank] - flow * step)
            else:
                waiting[rank] = max(0.0, waiting[rank] - flow * step)
        clock = after
        for rank in range(len(work)):
            if done[rank] is None and active[rank] + waiting[rank] <= _EPSILON_BYTES:
                done[rank] = min(clock, end)
    overall = None if any(at is None for at in done) else max(at for at in done if at is not None)
    return Forecast(overall, tuple(done))


class _Openings:
    """A class's open intervals, read forward only as the forecast's clock advances."""

    __slots__ = ("_index", "_spans")

    def __init__(self, spans: list[tuple[float, float]]) -> None:
        self._spans = spans
        self._index = 0

    def _skip_to(self, at: float) -> None:
        while self._index < len(self._spans) and self._spans[self._index][1] <= at:
            self._index += 1

    def open_at(self, at: float) -> bool:
        self._skip_to(at)
        return self._index < len(self._spans) and self._spans[self._index][0] <= at

    def next_change(self, at: float) -> float:
        """The first opening or closing after ``at`` (``inf`` when there is none)."""
        self._skip_to(at)
        if self._index == len(self._spans):
            return math.inf
        opens, closes = self._spans[self._index]
        return opens if opens > at else closes
