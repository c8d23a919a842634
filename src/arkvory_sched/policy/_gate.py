"""Which classes may take a slot now, by their operator windows (R-WIN-2; ADR 0021).

A session is judged by its *base class* — the class it was admitted in after a client
header lowered it — never by the rank aging lifted it to: aging changes whom the queue
serves first, not when a class may run. Outside its windows a class holds at most
``floor(outside_share × sessions)`` slots (0 by default: none); a waiter whose class is
closed and at that cap takes no slot, is passed over by the marking and does not
trigger preemption, and the slots go to the other classes. A session that started
inside its window keeps its slot until it completes: the gate is asked only when a slot
is taken, never about one held.

A :class:`ClassGate` is the answer for one instant of wall time and stays true until
the next opening or closing of any class (``until``), so a store computes it once per
change of a window rather than on every claim. The functions here are pure: wall time
comes in, the stores convert their queue time to it (R-RES-5).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ._constants import AGING_CAP_RANK, CLASS_COUNT, JITTER_HIGH, MIN_CHECK_SECONDS
from ._windows import (
    ClassSchedule,
    ClassSchedules,
    ClassWindow,
    is_open,
    next_closing,
    next_opening,
)

__all__ = [
    "ClassGate",
    "StartEstimate",
    "WindowEstimate",
    "class_ages",
    "class_gate",
    "closed_ranks",
    "current_gate",
    "open_lengths",
    "opening_check_delay",
    "passable_classes",
    "take_room",
    "window_estimate",
    "windowed_start",
]


@dataclass(frozen=True, slots=True)
class ClassGate:
    """The windows' verdict at wall time ``at``, valid while ``at <= wall < until``.

    ``caps[rank]`` is how many slots base class ``rank`` may hold now (None: no limit,
    the class is open or has no windows); ``windowed[rank]`` says the class has windows
    at all (its waiters do not age); ``openings[rank]`` is when a closed class opens
    next in wall time (None while open, or when it never opens). ``schedules`` and
    ``sessions`` are those the gate was computed for: a settings change makes it stale.
    """

    at: float
    until: float
    caps: tuple[int | None, ...]
    windowed: tuple[bool, ...]
    openings: tuple[float | None, ...]
    schedules: ClassSchedules
    sessions: int

    def holds_for(self, schedules: ClassSchedules, sessions: int, wall: float) -> bool:
        """Whether this gate still answers for ``wall`` under these settings (a wall
        clock stepped back makes it stale too)."""
        return (
            schedules is self.schedules
            and sessions == self.sessions
            and self.at <= wall < self.until
        )

    def closed(self, base_rank: int) -> bool:
        """Whether base class ``base_rank`` is outside its windows now."""
        return self.caps[base_rank] is not None

    def room(self, active_by_class: Sequence[int]) -> list[int | None]:
        """Slots each base class may still take now (None: no limit), from the active
        sessions counted by base class; never negative."""
        return [
            None if cap is None else max(0, cap - active_by_class[rank])
            for rank, cap in enumerate(self.caps)
        ]

    def may_start(self, base_rank: int, active_of_class: int) -> bool:
        """Whether a waiter of base class ``base_rank`` may take a slot, its class
        holding ``active_of_class`` slots now."""
        cap = self.caps[base_rank]
        return cap is None or active_of_class < cap


def class_gate(schedules: ClassSchedules, sessions: int, wall: float) -> ClassGate:
    """The gate at wall time ``wall``: each windowed class open or closed, its cap, and
    until when that holds. O(classes × windows); the stores cache it (``holds_for``)."""
    caps: list[int | None] = [None] * CLASS_COUNT
    windowed = [False] * CLASS_COUNT
    openings: list[float | None] = [None] * CLASS_COUNT
    until = math.inf
    for cls, schedule in schedules:
        rank = cls.rank
        windowed[rank] = True
        if is_open(schedule.windows, wall):
            change = next_closing(schedule.windows, wall)
        else:
            caps[rank] = math.floor(schedule.outside_share * sessions)
            change = openings[rank] = next_opening(schedule.windows, wall)
        if change is not None:
            until = min(until, change)
    return ClassGate(
        wall, until, tuple(caps), tuple(windowed), tuple(openings), schedules, sessions
    )


def current_gate(
    cached: ClassGate | None, schedules: ClassSchedules, sessions: int, wall: float
) -> ClassGate:
    """``cached`` while it still holds, else the gate computed afresh for ``wall``."""
    if cached is not None and cached.holds_for(schedules, sessions, wall):
        return cached
    return class_gate(schedules, sessions, wall)


def class_ages(schedules: ClassSchedules, base_rank: int) -> bool:
    """Whether waiters of base class ``base_rank`` age (R-STRAT-1): not when it has
    windows. Aging would lift them into a rank the window does not bind and let them
    start outside it; while the class is open its weight already gives it its share,
    and while it is closed its waiters belong behind the window, not at the head of
    another class where a crowd of them would hide that class's own waiters. A due
    waiter of such a class is *deferred*: it stays in its class and ages no more
    (ADR 0021)."""
    return not any(cls.rank == base_rank for cls, _ in schedules)


def passable_classes(gate: ClassGate | None, newcomer_rank: int) -> tuple[int, ...]:
    """Base classes whose waiters a newcomer of base class ``newcomer_rank`` does not
    wait behind when a slot is free for it: those outside their windows now, when the
    newcomer's own class is open (issue #26).

    Such a waiter takes no slot before its window opens, or only its class's share,
    which the newcomer's slot does not take from it: an open class's newcomer that
    waited behind it would leave a free slot idle until the next mark. A closed
    class's newcomer passes nobody: it queues behind every waiter, as without windows.
    """
    if gate is None or gate.closed(newcomer_rank):
        return ()
    return tuple(rank for rank in range(CLASS_COUNT) if gate.closed(rank))


def closed_ranks(
    gate: ClassGate,
    room: Sequence[int | None],
    aging: bool,
    waiting_by_class: Sequence[int] | None = None,
) -> list[bool]:
    """Queue ranks that hold only waiters who may not take a slot now.

    Queue rank ``r`` holds waiters of base class ``r`` and, with aging on, of the
    classes below it that age (those without windows: a windowed class does not
    age) — unless, by ``waiting_by_class`` (waiters counted by base class, where the
    store has the count), no such waiter exists. When all a rank may hold is closed
    with no room left, the marking and the search for a head skip the rank, so a
    crowd waiting for its window is not scanned each tick and does not use up how far
    they look (R-SESS-12). Interactive has no windows.
    """
    held = [cap is not None and cap <= 0 for cap in room]
    ranks = [False] * CLASS_COUNT
    for rank in range(1, CLASS_COUNT):
        below = range(rank + 1, CLASS_COUNT) if aging and rank >= AGING_CAP_RANK else ()
        # A waiter that aged here before its class had windows is not counted: it is
        # passed over one by one, as any waiter that may not take a slot.
        ranks[rank] = held[rank] and all(
            gate.windowed[lower] or (waiting_by_class is not None and not waiting_by_class[lower])
            for lower in below
        )
    return ranks


def open_lengths(lengths: Sequence[int], closed: Sequence[bool], own_rank: int) -> list[int]:
    """Class lengths for a waiter's estimate, a closed rank's waiters left out: they
    take no slot before their window opens, so they are not ahead of anyone (R-EST-2).
    The waiter's own rank is kept: those ahead of it in its class are ahead of it."""
    return [
        0 if rank != own_rank and rank < len(closed) and closed[rank] else length
        for rank, length in enumerate(lengths)
    ]


def take_room(room: list[int | None], base_rank: int) -> bool:
    """Count one more slot for base class ``base_rank`` against ``room``; False (and
    nothing counted) when the class has none left. Used while marking, so that a
    closed class with a share is not marked beyond the slots it may take."""
    left = room[base_rank]
    if left is None:
        return True
    if left <= 0:
        return False
    room[base_rank] = left - 1
    return True


def windowed_start(
    windows: Sequence[ClassWindow], outside_share: float, start: float, now: float
) -> tuple[float, float]:
    """A start estimate (wall time) moved into the class's windows (R-EST-2), and the
    opening it waits for (``now`` when it waits for none): the announced interval
    starts no earlier.

    A class closed now waits for its next opening, and then for as long as it would
    wait were it open now: the other classes hold the link meanwhile. A start that
    falls where the class is closed (it closes before its turn comes) moves to the
    next opening after it. A class with an outside share may start before its window,
    so its estimate is left as the queue gives it. O(windows), per poll, no loop over
    waiters.
    """
    if not windows or outside_share > 0:
        return start, now
    opening = next_opening(windows, now)
    if opening is None:
        return start, now  # a window that never opens: nothing better to promise
    not_before = now
    if opening > now:
        start = opening + (start - now)
        not_before = opening
    if not is_open(windows, start):
        later = next_opening(windows, start)
        if later is not None:
            start = not_before = later
    return start, not_before


def opening_check_delay(delay: float, opens_in: float | None, factor: float) -> float:
    """The check delay of a waiter whose class opens in ``opens_in`` seconds.

    Never later than the opening, so a client waiting for a window is there when it
    opens; spread before it by the download's jitter ``factor`` so a fleet waiting for
    the same window does not arrive in the same second. Still at least the minimum
    check delay: a waiter never polls faster than any other.
    """
    if opens_in is None or opens_in <= 0:
        return delay
    return min(delay, max(MIN_CHECK_SECONDS, opens_in * factor / JITTER_HIGH))


@dataclass(frozen=True, slots=True)
class WindowEstimate:
    """What the windows change in one waiter's estimate made at wall time ``at``.

    ``lengths`` are the class lengths to count the waiters ahead by (closed classes
    left out, :func:`open_lengths`); the waiter's own class's ``windows`` and
    ``outside_share`` move its start (:func:`windowed_start`); ``opening`` is when
    its class opens next if closed now (its check delay ends no later).
    """

    lengths: Sequence[int]
    windows: tuple[ClassWindow, ...] = ()
    outside_share: float = 0.0
    opening: float | None = None
    at: float = 0.0

    def start(self, start: float, now: float) -> tuple[float, float]:
        """The start estimate (wall time) moved into the class's windows, and the
        opening the announced interval starts no earlier than (:func:`windowed_start`)."""
        return windowed_start(self.windows, self.outside_share, start, now)

    def check_delay(self, delay: float, factor: float) -> float:
        """The check delay, ending no later than the class's opening."""
        opens_in = None if self.opening is None else self.opening - self.at
        return opening_check_delay(delay, opens_in, factor)


def window_estimate(
    gate: ClassGate,
    schedule: ClassSchedule | None,
    base_rank: int,
    queue_rank: int,
    lengths: Sequence[int],
    active_by_class: Sequence[int],
    *,
    wall: float,
) -> WindowEstimate:
    """The :class:`WindowEstimate` of a waiter of base class ``base_rank`` waiting in
    ``queue_rank`` (``schedule`` is its class's, None without windows). O(classes).

    A rank whose own class is closed with no room left counts as empty: the few
    waiters that may have aged into it from below are not worth a count the stores
    would have to keep by base class for every poll (the marking passes them over
    one by one, :func:`closed_ranks`).
    """
    held = [cap is not None and cap <= 0 for cap in gate.room(active_by_class)]
    shown = open_lengths(lengths, held, queue_rank)
    if schedule is None:
        return WindowEstimate(shown, at=wall)
    return WindowEstimate(
        shown, schedule.windows, schedule.outside_share, gate.openings[base_rank], wall
    )


@dataclass(frozen=True, slots=True)
class StartEstimate:
    """A waiting session's place and start on its store's queue time, as both stores
    answer it: ``ahead`` waiters before it, ``start`` with its interval
    ``earliest``..``latest``; ``wall_offset`` turns them into wall time, ``window`` is
    what the class windows changed (its ``check_delay`` bounds the next poll); ``known``
    is false when the rate behind it is a guess (:class:`~._estimates.LinkRate`)."""

    ahead: int
    start: float
    earliest: float
    latest: float
    wall_offset: float
    window: WindowEstimate
    known: bool = True
