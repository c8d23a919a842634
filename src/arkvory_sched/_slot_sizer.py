"""One store's self-sizing slots: the controller's state and the settings it puts in
force (issue #30, ADR 0038).

Under ``min_sessions`` the operator's ``sessions`` is the most slots, and the count in
force moves between the two by :func:`~arkvory_sched.policy.size_slots`. Each store
runs on the settings this holder gives it: the operator's, with ``sessions`` at the
count in force and the reserve and per-principal share lowered to fit by the rules of
R-SET-2 (``SchedulerSettings.with_changes``), from the operator's values each time, so
a count that rises again gets them back. Lowering the count takes no slot away: the
stores admit nobody while more are held, as after an operator lowers ``sessions``.

A line goes to the log when the count turns or reaches a bound, not at every step.
"""

from __future__ import annotations

import dataclasses
import logging

from .policy import (
    SizingReading,
    SizingReason,
    SlotSizing,
    rising_slots,
    size_slots,
    start_sizing,
)
from .settings import SchedulerSettings

__all__ = ["SlotSizer"]

log = logging.getLogger("arkvory_sched.sizing")

_LOGGED = frozenset({SizingReason.AT_MAXIMUM, SizingReason.AT_MINIMUM})


class SlotSizer:
    """The count in force for one store (one process in memory; the leader's tick on
    PostgreSQL, which publishes it), and the settings that follow from it."""

    __slots__ = ("_configured", "_state")

    def __init__(self, configured: SchedulerSettings, now: float) -> None:
        self._configured = configured
        self._state: SlotSizing | None = None
        self.configure(configured, now)

    @property
    def state(self) -> SlotSizing | None:
        """The controller's state; ``None`` while the count is fixed."""
        return self._state

    @property
    def configured(self) -> SchedulerSettings:
        """The operator's settings: ``sessions`` is the most slots under automatic sizing."""
        return self._configured

    def configure(
        self, configured: SchedulerSettings, now: float, *, count: int | None = None
    ) -> SchedulerSettings:
        """Take the operator's new settings; the settings in force. A controller already
        running keeps its state within the new bounds; ``count`` starts one at a count
        another took (a new leader from the published count)."""
        self._configured = configured
        if configured.min_sessions is None or not configured.automatic_sessions:
            self._state = None
            return configured
        minimum, maximum = configured.min_sessions, configured.sessions
        if self._state is None:
            self._state = start_sizing(minimum, now)
        if count is not None:
            self._state = SlotSizing(count, SizingReason.START, now)
        state = self._state
        bounded = min(max(state.count, minimum), maximum)
        if bounded != state.count:
            self._state = dataclasses.replace(state, count=bounded, stepped_at=now)
        return self.in_force()

    def rising(self, now: float) -> int:
        """Slots the count may open at its next step (``policy.rising_slots``)."""
        return rising_slots(self._state, now, self._configured.sessions)

    def in_force(self) -> SchedulerSettings:
        """The settings the store runs on now."""
        state = self._state
        if state is None or state.count == self._configured.sessions:
            return self._configured
        return self._configured.with_changes(sessions=state.count)

    def step(self, reading: SizingReading) -> SchedulerSettings | None:
        """One reading at a tick; the new settings in force when the count moved."""
        state = self._state
        configured = self._configured
        if state is None or configured.min_sessions is None:
            return None
        after = size_slots(state, reading, configured.min_sessions, configured.sessions)
        self._state = after
        turned = after.turned_at != state.turned_at
        if turned or (after.reason is not state.reason and after.reason in _LOGGED):
            log.info(
                "session slots %d -> %d (%s): delivery %.0f B/s, %d held, %s waiting",
                state.count,
                after.count,
                after.reason.value,
                reading.delivery,
                reading.active,
                "someone" if reading.waiting else "nobody",
            )
        if after.count == state.count:
            return None
        return self.in_force()
