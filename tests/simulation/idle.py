"""Idle slots while someone waits: the waste the issue's third target bounds.

A slot is idle when fewer download sessions hold one than the link has usable slots,
as the clients see it: a slot the scheduler marked for a waiter who has not come yet is
idle too, since nothing flows through it. Counted only while some client that has
arrived has not started, because a slot idle with nobody waiting is no loss. A session
counts from its client's first admission to its last byte: right for a crowd in one
class, where nothing is preempted.
"""

from __future__ import annotations

from collections import deque

__all__ = ["IdleSlots"]


class IdleSlots:
    """Idle slot-seconds while anyone waits, and the longest single idle stretch.

    Each idle slot carries the moment it became idle with a waiter present (the slot
    freed, or the first waiter arrived); the oldest is the one a starting session takes,
    so a stretch is the time one slot stayed empty while someone could have used it.
    """

    def __init__(self, usable: int) -> None:
        self.usable = usable
        self.active = 0
        self.waiting = 0
        self.idle_slot_seconds = 0.0
        self.longest_stretch = 0.0
        self._idle_since: deque[float] = deque()

    def advance(self, elapsed: float) -> None:
        """Count ``elapsed`` seconds of the state as it stands."""
        if self.waiting:
            self.idle_slot_seconds += max(0, self.usable - self.active) * elapsed

    def arrived(self, now: float) -> None:
        self.waiting += 1
        self._sync(now)

    def started(self, now: float) -> None:
        self.waiting -= 1
        self.active += 1
        self._sync(now)

    def finished(self, now: float) -> None:
        self.active -= 1
        self._sync(now)

    def close(self, now: float) -> None:
        """End the stretches still open when the run ends."""
        self.waiting = 0
        self._sync(now)

    def _sync(self, now: float) -> None:
        idle = max(0, self.usable - self.active) if self.waiting else 0
        since = self._idle_since
        while len(since) > idle:
            self.longest_stretch = max(self.longest_stretch, now - since.popleft())
        while len(since) < idle:
            since.append(now)
