"""``DatabaseClock``: one queue time for every process of a fleet (R-RES-5).

Queue decisions (no-shows, idle release, pause expiry, aging, marks, estimates) compare
times that different processes wrote into shared rows. They must therefore come from a
clock every process reads alike — not from each node's wall clock, where a step on one
node (an NTP correction, a manual change, a restored VM) would expire waiters or hold
slots on its own. The database is that clock: its ``clock_timestamp()`` in epoch
seconds, sampled when the process starts and then with every heartbeat, on the
connection and in the statement the heartbeat already uses (no round trip of its own,
none per admission). Between samples the local monotonic clock carries it forward.

* A sample is placed at the midpoint of the round trip that read it, so every node
  agrees with the database, and so with each other, to within half a round trip.
* The clock never goes backwards: a sample behind the extrapolation (the local clock ran
  fast, or the database clock was stepped back) is adopted, but readings **hold** at the
  last value returned until the new sample's extrapolation catches up. Holding rather
  than stepping back keeps every ``now`` a process ever used in the past; holding rather
  than slewing keeps the rule simple and the drift it absorbs is milliseconds per
  heartbeat. A sample ahead of the extrapolation is adopted at once (the clock steps
  forward, as a paused process does when it resumes).
* Until the first sample (a database down at start-up) it reads the local wall clock,
  the best guess on the same scale; the first sample is then adopted as it is, once,
  even if behind — before it the process wrote nothing to the shared queue, and holding
  for however far this node's wall clock was ahead would freeze its queue time.

The database's epoch seconds are the scale queue times were stored in before, when they
came from the nodes' wall clocks, so rows written by an older process keep their meaning
through a rolling upgrade. ``wall()`` is the local wall clock: it is used only for
tickets and the announced start times, which clients compare with their own clocks.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

__all__ = ["DatabaseClock"]


class DatabaseClock:
    """The database's time, carried between samples by the local monotonic clock.

    ``local`` and ``wall`` are the process clocks (injectable for tests). The scheduler
    feeds it with :meth:`refresh` around the heartbeat statement, which returns
    ``extract(epoch FROM clock_timestamp())``.
    """

    __slots__ = ("_base", "_base_local", "_floor", "_local", "_synced", "_wall")

    def __init__(
        self,
        *,
        local: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._local = local
        self._wall = wall
        self._base_local = local()
        self._base = wall()  # until the first sample: the local wall clock
        self._floor = -float("inf")
        self._synced = False

    @property
    def synced(self) -> bool:
        """Whether the clock has had a sample from the database yet."""
        return self._synced

    def monotonic(self) -> float:
        """Queue time: the last sample plus local time since; never backwards."""
        now = max(self._base + (self._local() - self._base_local), self._floor)
        self._floor = now
        return now

    def wall(self) -> float:
        return self._wall()

    def sample(self, database_time: float, sent: float, received: float) -> None:
        """Adopt ``database_time``, read by a statement sent and answered at the local
        monotonic times ``sent`` and ``received``; it is placed at their midpoint."""
        self._base = database_time
        self._base_local = (sent + received) / 2.0
        if not self._synced:
            self._synced = True
            self._floor = -float("inf")  # the one step back allowed (module docstring)

    async def refresh(self, reading: Awaitable[float]) -> None:
        """Await ``reading`` (a statement not yet sent that returns the database's
        epoch seconds) and adopt what it returns as a sample."""
        sent = self._local()
        database_time = await reading
        self.sample(database_time, sent, self._local())

    def __repr__(self) -> str:
        state = "synced" if self._synced else "unsynced"
        return f"DatabaseClock({state}, monotonic={self.monotonic()!r})"
