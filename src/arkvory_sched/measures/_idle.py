"""Slots left free while someone waits, integrated over queue time (issue #28).

A slot free while a session waits is link time nobody uses: the waiter that may take
it has not come back yet, or was told to come back too late. :class:`IdleRecord` is
the integration's state, a value both stores keep: the in-memory store replaces it at
every change of the counts, so it is exact; the PostgreSQL leader replaces it on each
tick from what it sees and stores it with the queue's state, so every process reads
the same figures. How many free slots a waiter could take is the policy's
(:func:`~arkvory_sched.policy.usable_free_slots`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .._model import IdleSlots

__all__ = ["IdleRecord"]


@dataclass(frozen=True, slots=True)
class IdleRecord:
    """Where the integration stands: ``slots`` idle since ``at`` (queue time; None
    before the first count), the slot-seconds up to ``at``, and the stretches.

    ``stretch_since`` is when the current stretch began (None outside one);
    ``last_stretch`` the length of the last one that ended, ``longest_stretch`` the
    longest that ended. A stretch that begins and ends at one instant (a newcomer
    queued and started by one admission) is none.
    """

    at: float | None = None
    slots: int = 0
    slot_seconds: float = 0.0
    stretch_since: float | None = None
    last_stretch: float = 0.0
    longest_stretch: float = 0.0

    def after(self, now: float, slots: int) -> IdleRecord:
        """The record once ``slots`` are idle from ``now`` on, what was idle since
        :attr:`at` counted. A ``now`` before :attr:`at` counts nothing (a clock that
        stepped back) and the record stays at :attr:`at`."""
        slots = max(0, slots)
        if self.at is None:
            at, total = now, self.slot_seconds
        else:
            at = max(self.at, now)
            total = self.slot_seconds + self.slots * (at - self.at)
        since, last, longest = self.stretch_since, self.last_stretch, self.longest_stretch
        if slots and since is None:
            since = at
        elif not slots and since is not None:
            length = at - since
            if length > 0:
                last, longest = length, max(longest, length)
            since = None
        return IdleRecord(at, slots, total, since, last, longest)

    def figures(self, now: float) -> IdleSlots:
        """The figures at ``now``: the slots idle since :attr:`at` counted up to it."""
        elapsed = 0.0 if self.at is None else max(0.0, now - self.at)
        stretch, longest = self.last_stretch, self.longest_stretch
        if self.stretch_since is not None:
            stretch = max(0.0, now - self.stretch_since)
            longest = max(longest, stretch)
        return IdleSlots(
            slots=self.slots,
            slot_seconds=self.slot_seconds + self.slots * elapsed,
            stretch_seconds=stretch,
            longest_stretch_seconds=longest,
        )
