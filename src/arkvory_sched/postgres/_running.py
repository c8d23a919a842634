"""What a ``PostgresScheduler`` process runs under now, read by each of its parts.

The settings in force (an operator's change replaces them, ADR 0022), the windows'
verdict under them (R-WIN-2), whether the process closed, and the signal that wakes
the requests held for a change. Every part is handed this one value instead of a copy
of the settings, so a change reaches all of them at once.
"""

from __future__ import annotations

import anyio

from .._clock import Clock
from ..policy import ClassGate, current_gate
from ..settings import SchedulerSettings
from ._estimates import QueueSnapshots

__all__ = ["Running"]


class Running:
    """The process's settings in force, its windows' verdict, closing and change signal."""

    __slots__ = ("_changed", "_clock", "_gate", "_snapshots", "closed", "settings")

    def __init__(
        self, settings: SchedulerSettings, clock: Clock, snapshots: QueueSnapshots
    ) -> None:
        self.settings = settings
        self.closed = False
        self._clock = clock
        self._snapshots = snapshots
        self._changed = anyio.Event()
        # The windows' verdict (R-WIN-2), kept until a class opens or closes.
        self._gate: ClassGate | None = None

    def class_gate(self) -> ClassGate:
        """The windows' verdict at this process's wall time (R-WIN-2, R-RES-5)."""
        settings = self.settings
        gate = current_gate(
            self._gate, settings.class_windows, settings.sessions, self._clock.wall()
        )
        self._gate = gate
        return gate

    def notify(self) -> None:
        """Wake every request held for a change."""
        changed = self._changed
        self._changed = anyio.Event()
        changed.set()

    def invalidate(self) -> None:
        """The queue changed here: answers read it anew, held requests look again."""
        self._snapshots.drop()
        self.notify()

    async def wait_for_change(self, timeout: float) -> None:
        # Changes made by other processes are not signalled here: wake at least every
        # second so a held request re-checks the shared queue.
        changed = self._changed
        with anyio.move_on_after(max(0.0, min(timeout, 1.0))):
            await changed.wait()
