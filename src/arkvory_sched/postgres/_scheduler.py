"""``PostgresScheduler``: the port on a queue that many processes share.

Where the state lives (ADR 0010):

* Sessions, their order and the slot leases are rows in PostgreSQL. A slot is a lease
  with a fencing token; granting it is one conditional statement (``CLAIM_SLOT``).
* Each process keeps only what is its own: responses in flight, a cache of leases it
  may trust without a round trip, its delivery-rate meter and its per-request places
  (small objects never touch the database).
* One process at a time — the leader, itself holding a fenced lease — runs the queue
  work of a tick: reaping dead holders, releasing idle sessions, expiring no-shows,
  aging, estimates and marking the next waiters. Every process ticks (heartbeat,
  lease renewal, settings refresh) and any process can become leader.

Queue times (arrival, activity, no-shows, pauses, aging, marks, estimates) are the
clock's monotonic side: in production a :class:`DatabaseClock`, the database's time
carried between heartbeats by the local monotonic clock, so every node agrees on it to
within a round trip and a wall-clock step on one node changes nothing (R-RES-5). The
wall side is used only for tickets and announced start times, converted as in memory.
A clock passed in (tests: one ``FakeClock`` for every instance) must likewise be one
clock for the whole fleet. Lease times are the database clock only (``now()``).
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import TYPE_CHECKING

from .._own_downloads import OWN_DOWNLOADS_LIMIT, OwnDownloads
from .._port import DownloadScheduler
from .._queue_state import QueueState
from . import _sql as sql
from ._leases import Lease
from ._options import PostgresOptions
from ._scheduler_admission import SchedulerAdmission
from ._scheduler_fleet import SchedulerFleet
from ._scheduler_own_downloads import read_downloads_of
from ._scheduler_queue_state import read_queue_state
from ._scheduler_state import DATABASE_ERRORS
from ._scheduler_stats import SchedulerStatsPart

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._options import PostgresOptionChanges

__all__ = ["DATABASE_ERRORS", "PostgresScheduler"]


class PostgresScheduler(SchedulerAdmission, SchedulerFleet, SchedulerStatsPart, DownloadScheduler):
    """The ``DownloadScheduler`` port on PostgreSQL, shared by any number of processes.

    Build it with :meth:`connect` (which migrates, reads the ticket key and the stored
    settings), then run ``tick()`` periodically on every process — the middleware's
    lifespan does. ``disconnect()`` after ``close()`` leaves the fleet and closes the
    pool. ``writer=False`` makes a read gateway: it never creates the ticket key.
    Without a ``clock``, queue time is the database's (:class:`DatabaseClock`).
    How it is built (schema, settings, clock, keys, leases, pool) is one
    :class:`PostgresOptions` value.
    """

    # ------------------------------------------------------------------ building
    @classmethod
    def from_dsn(
        cls,
        dsn: str,
        options: PostgresOptions | None = None,
        **changes: Unpack[PostgresOptionChanges],
    ) -> PostgresScheduler:
        """A scheduler that connects in :meth:`start` — build it before the event loop
        runs (an application factory), start it in the application's lifespan.

        ``options`` (default :class:`PostgresOptions`) with ``changes``, the same names
        as keyword arguments, applied on top: ``from_dsn(dsn, pool_size=4)``.
        """
        options = replace(PostgresOptions() if options is None else options, **changes)
        scheduler = cls(None, options, owns_pool=True)
        scheduler._dsn = dsn
        scheduler._migrate = options.migrate and options.writer
        scheduler._migrated = not scheduler._migrate
        return scheduler

    @classmethod
    async def connect(
        cls,
        dsn: str,
        options: PostgresOptions | None = None,
        **changes: Unpack[PostgresOptionChanges],
    ) -> PostgresScheduler:
        """:meth:`from_dsn` and :meth:`start` in one call."""
        scheduler = cls.from_dsn(dsn, options, **changes)
        await scheduler.start()
        return scheduler

    @property
    def options(self) -> PostgresOptions:
        """The options this scheduler was built with."""
        return self._options

    @property
    def shared(self) -> bool:
        return True  # every process on the schema sees one queue

    # ------------------------------------------------------------------ lifecycle
    async def close(self) -> None:
        self._closed = True
        self._requests.close()  # refuses and wakes the per-request waiters
        self._notify()

    async def disconnect(self) -> None:
        """Leave the fleet and close the pool (after ``close()`` and the last report).

        Leases this process still holds are not freed here: they expire on their own,
        so a client that moves to another process keeps its slot meanwhile.
        """
        if not self._closed:
            await self.close()
        with contextlib.suppress(*DATABASE_ERRORS):
            async with self._acquire() as conn:
                await conn.execute(sql.RESIGN_LEADERSHIP, self._node)
                await conn.execute(sql.LEAVE_FLEET, self._node)
        self._leader.step_down()
        if self._kept is not None:
            await self._kept.return_all()
        if self._owns_pool and self._pool is not None:
            await self._pool.close()

    async def queue_state(self) -> QueueState:
        return await read_queue_state(self)

    async def downloads_of(
        self, principal: str, *, limit: int = OWN_DOWNLOADS_LIMIT
    ) -> OwnDownloads:
        return await read_downloads_of(self, principal, limit)

    def debug_leases(self) -> list[Lease]:
        """Leases this process knows (tests)."""
        return list(self._leases)
