"""What a ``PostgresScheduler`` process runs under now, read by each of its parts.

The settings in force (an operator's change replaces them, ADR 0022), the windows'
verdict under them (R-WIN-2), whether the process closed, and the signals that wake
the requests held for a change: every held request on a change made here (one
further back than the door at most twice a second, ADR 0040), and the requests held
at the door also on a slot another process freed (ADR 0037). Every part
is handed this one value instead of a copy of the settings, so a change reaches all of
them at once.
"""

from __future__ import annotations

import anyio

from .._clock import Clock
from ..policy import ClassGate, current_gate
from ..settings import SchedulerSettings
from ._estimates import QueueSnapshots
from ._leader_sizing import InForce

__all__ = ["HELD_RECHECK_SECONDS", "OTHER_PROCESSES_RECHECK_SECONDS", "Running"]

# A held request looks at the shared queue at least this often: what other processes
# changed is signalled only to the requests at the door, and only while the process
# listens (ADR 0037).
OTHER_PROCESSES_RECHECK_SECONDS = 1.0
# ... and a held request not at the door at most this often (ADR 0040): what it can
# learn there changes when the leader marks the next round (each tick, every half
# second) or a slot frees, and each look is an admission's statements. Woken by every
# range report, the curl crowd held at the doors of three processes asked 420 times a
# second, and the database took the CPU the link's responses needed.
HELD_RECHECK_SECONDS = 0.5


class Running:
    """The process's settings in force, its windows' verdict, closing and change signal."""

    __slots__ = ("_changed", "_clock", "_closing", "_gate", "_slot_free", "_snapshots",
                 "closed", "configured", "settings", "sizing_reason",
                 "sizing_rising")  # fmt: skip

    def __init__(
        self, settings: SchedulerSettings, clock: Clock, snapshots: QueueSnapshots
    ) -> None:
        # The settings in force: the operator's, with ``sessions`` at the count the
        # leader published under automatic sizing (ADR 0038), and the operator's own.
        self.settings = settings
        self.configured = settings
        self.sizing_reason: str | None = None
        self.sizing_rising = 0  # slots the count may open at its next step
        self.closed = False
        self._clock = clock
        self._snapshots = snapshots
        self._changed = anyio.Event()
        self._slot_free = anyio.Event()  # set with _changed, and by another process's release
        self._closing = anyio.Event()
        # The windows' verdict (R-WIN-2), kept until a class opens or closes.
        self._gate: ClassGate | None = None

    def take(self, in_force: InForce) -> None:
        """Run on what the leader published (ADR 0038)."""
        self.settings, self.sizing_reason, self.sizing_rising = in_force

    def class_gate(self) -> ClassGate:
        """The windows' verdict at this process's wall time (R-WIN-2, R-RES-5)."""
        settings = self.settings
        gate = current_gate(
            self._gate, settings.class_windows, settings.sessions, self._clock.wall()
        )
        self._gate = gate
        return gate

    def close(self) -> None:
        """Refuse from now on, and wake every held request at once to be told so."""
        self.closed = True
        self._closing.set()
        self.notify()

    def notify(self) -> None:
        """Wake every request held for a change."""
        changed = self._changed
        self._changed = anyio.Event()
        changed.set()
        self.wake_the_door()

    def wake_the_door(self) -> None:
        """Wake the requests held at the door: a slot may be free for them to take (a
        change here, another process freed one, or the leader marked waiters for one,
        ADR 0037). Called alone, for another process's signal, the other held requests
        wait on: a third-party tool further back would only read the queue to be told
        to wait again."""
        free = self._slot_free
        self._slot_free = anyio.Event()
        free.set()

    def slot_freed_elsewhere(self) -> None:
        """Another process freed a slot, or the leader marked waiters for one (the
        fleet's signal, ADR 0037): the snapshot this process keeps is dropped before the
        requests at the door wake. Kept, it still showed the slot held, and each woken
        waiter was told its last answer again (ADR 0029) instead of claiming the slot,
        which then stayed empty until the snapshot's half second ran out (issue #28)."""
        self._snapshots.drop()
        self.wake_the_door()

    def invalidate(self) -> None:
        """The queue changed here: answers read it anew, held requests look again."""
        self._snapshots.drop()
        self.notify()

    async def wait_for_change(self, timeout: float, *, at_the_door: bool = False) -> None:
        # Other processes' changes reach only the requests at the door (ADR 0037), and
        # only while the signal's connection is up: wake at least every second so a
        # held request re-checks the shared queue.
        event = self._slot_free if at_the_door else self._changed
        with anyio.move_on_after(max(0.0, min(timeout, OTHER_PROCESSES_RECHECK_SECONDS))):
            if not at_the_door:
                # A change within the first half second wakes it when the half second
                # is over (the event is the one of this wait's start); closing at once.
                with anyio.move_on_after(HELD_RECHECK_SECONDS):
                    await self._closing.wait()
            await event.wait()
