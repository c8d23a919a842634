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

The class itself is a facade: it builds the parts (the package docstring draws them),
hands each what it uses, and passes each call of the port to the part whose job it is.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
import time
from collections.abc import Coroutine
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import asyncpg

from .._early_polls import EarlyPolls
from .._exceptions import StoreUnavailableError
from .._model import Decision, DeliveryOutcome, DownloadRequest, Grant, SchedulerStats, TickReport
from .._own_downloads import OWN_DOWNLOADS_LIMIT, OwnDownloads
from .._port import DownloadScheduler
from .._queue_state import QueueState
from .._request_admission import RequestAdmission
from .._session_keys import SessionKeys
from ..settings import SchedulerSettings
from . import _sql as sql
from ._admission import Admission
from ._answers import Answers
from ._boundary import Connections
from ._claims import Claims
from ._configuration import Configuration
from ._db_clock import DatabaseClock
from ._delivery import Delivery
from ._estimates import QueueSnapshots
from ._fleet import HEARTBEAT_SECONDS, Fleet
from ._leader import QueueLeader
from ._leases import Lease, LeaseCache, SessionGrant
from ._meters import Meters
from ._migrate import validate_schema
from ._options import PostgresOptions
from ._own_downloads import OwnDownloadsReader
from ._queue_state import QueueStateReader
from ._ranges import RangeAdmission
from ._running import Running
from ._session_admission import SessionAdmission
from ._settings_store import PostgresSettingsStore
from ._slot_signal import SlotSignal
from ._stats import Statistics
from ._ticket_key import TicketKeyring

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from ._options import PostgresOptionChanges

__all__ = ["PostgresScheduler"]


class PostgresScheduler(DownloadScheduler):
    """The ``DownloadScheduler`` port on PostgreSQL, shared by any number of processes.

    Build it with :meth:`connect` (which migrates, reads the ticket key and the stored
    settings), then run ``tick()`` periodically on every process — the middleware's
    lifespan does. ``disconnect()`` after ``close()`` leaves the fleet and closes the
    pool. ``writer=False`` makes a read gateway: it never creates the ticket key.
    Without a ``clock``, queue time is the database's (:class:`DatabaseClock`).
    How it is built (schema, settings, clock, keys, leases, pool) is one
    :class:`PostgresOptions` value.
    """

    def __init__(
        self,
        pool: asyncpg.Pool | None = None,
        options: PostgresOptions | None = None,
        *,
        owns_pool: bool = False,
    ) -> None:
        options = PostgresOptions() if options is None else options
        self._options = options
        lease_seconds = options.lease_seconds
        schema = validate_schema(options.schema)
        environment = options.settings or SchedulerSettings.from_env()
        # Queue time for the whole fleet: the database's, unless another clock is passed
        # in. A DatabaseClock (made here, or passed in) is fed by every heartbeat.
        clock = options.clock
        db_clock = clock if isinstance(clock, DatabaseClock) else None
        if clock is None:
            clock = db_clock = DatabaseClock()
        node = options.node_id or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self._node = node
        snapshots = QueueSnapshots(clock)
        self._running = running = Running(environment, clock, snapshots)
        self._connections = connections = Connections(
            pool, node=node, clock=clock, schema=schema, size=options.pool_size, owns_pool=owns_pool
        )
        # A cached lease is trusted for a while without asking the database. Its real
        # bound is the lease in the database (its clock, real time): with the database
        # as queue clock the trust runs on this process's monotonic clock. A clock passed
        # in (tests: a FakeClock) is the fleet's time, so trust runs on it too: whether a
        # range is answered from the cache or from the database then follows the queue
        # time of the requests, not the pace of the machine running them.
        trust_clock = time.monotonic if db_clock is not None else clock.monotonic
        self._leases = leases = LeaseCache(max_trust=min(2.0, lease_seconds / 3), now=trust_clock)
        self._keyring = keyring = TicketKeyring(
            options.ticket_keys or (), writer=options.writer, schema=schema
        )
        self._meters = meters = Meters(clock)
        self._leader = leader = QueueLeader(
            node,
            lease_seconds=lease_seconds,
            leader_seconds=options.leader_seconds,
            heartbeat_seconds=HEARTBEAT_SECONDS,
            clock=clock,
        )
        # Small objects stay in this process: its own per-request places (R-SESS-3),
        # the same component the in-memory scheduler uses.
        self._requests = requests = RequestAdmission(
            environment, clock, rate=meters.rate, bytes_by_class=meters.bytes_by_class
        )
        early = EarlyPolls()  # early polls answered without a statement (ADR 0029)
        grants: dict[int, SessionGrant] = {}  # the session ranges in flight here
        answers = Answers(running, clock, snapshots, meters, keyring, early)
        claims = Claims(
            running, leases, snapshots, early, meters, node=node, lease_seconds=lease_seconds
        )
        ranges = RangeAdmission(
            running,
            connections,
            answers,
            meters,
            clock,
            grants,
            node=node,
            lease_seconds=lease_seconds,
        )
        sessions = SessionAdmission(
            running,
            connections,
            leases,
            ranges,
            claims,
            answers,
            snapshots,
            meters,
            keyring,
            clock,
            node=node,
            lease_seconds=lease_seconds,
        )
        self._admission = Admission(
            running,
            leases,
            SessionKeys(),  # session keys of recent requests (no hash per range)
            ranges,
            sessions,
            requests,
            early,
            snapshots,
            connections,
            meters,
            clock,
            options.request_timer,
        )
        self._delivery = delivery = Delivery(
            running, connections, leases, grants, requests, snapshots, meters, clock, node=node
        )
        self._signal = SlotSignal(running, schema=schema)
        self._fleet = Fleet(
            running,
            connections,
            leases,
            leader,
            delivery,
            meters,
            keyring,
            self._signal,
            clock,
            db_clock,
            node=node,
            schema=schema,
            lease_seconds=lease_seconds,
        )
        self._configuration = Configuration(
            running, connections, early, environment=environment, schema=schema
        )
        self._statistics = statistics = Statistics(
            running, connections, requests, meters, leader, clock
        )
        self._queue_state = QueueStateReader(running, connections, statistics, clock)
        self._own_downloads = OwnDownloadsReader(running, connections, answers, snapshots, clock)

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
        scheduler._connections.dsn = dsn
        scheduler._fleet.migrated = not (options.migrate and options.writer)
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

    @property
    def node_id(self) -> str:
        return self._node

    @property
    def settings(self) -> SchedulerSettings:
        return self._running.settings

    @property
    def is_leader(self) -> bool:
        return self._leader.is_leader

    @property
    def leader(self) -> QueueLeader:
        """This process's side of the leader lease (tests and diagnostics)."""
        return self._leader

    @property
    def ticket_signing(self) -> bool:
        """Whether this process issues and reads queue tickets (it has the key)."""
        return self._keyring.signer is not None

    # ------------------------------------------------------------------ requests
    # The calls of every request and range hand on their part's own coroutine: no
    # frame of the facade's between the caller and the part.
    def admit(self, request: DownloadRequest) -> Coroutine[Any, Any, Decision]:
        return self._admission.admit(request)

    def report(self, grant: Grant, outcome: DeliveryOutcome) -> Coroutine[Any, Any, None]:
        return self._delivery.report(grant, outcome)

    def progress(self, grant: Grant, nbytes: int) -> Coroutine[Any, Any, None]:
        return self._delivery.progress(grant, nbytes)

    def wait_for_change(self, timeout: float) -> Coroutine[Any, Any, None]:
        return self._running.wait_for_change(timeout)

    def wait_at_the_door(self, timeout: float) -> Coroutine[Any, Any, None]:
        return self._running.wait_for_change(timeout, at_the_door=True)

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Connect, migrate (writers), read the key, join the fleet.

        A database that is down at start does not stop the process (R-SET-4): the
        pool connects lazily, admissions answer ``503`` until the database is back,
        and migrations and key are retried on later ticks. The stored settings come
        from the process's keeper, which applies them before the first request.
        """
        await self._fleet.start()

    async def tick(self) -> TickReport:
        return await self._fleet.tick()

    async def configure(self, settings: SchedulerSettings) -> None:
        await self._configuration.configure(settings)

    def settings_store(self) -> PostgresSettingsStore:
        """The settings store of this scheduler's schema, on its pool, validating
        against the environment it started with: the store a process's keeper reads
        (ADR 0022) without connections of its own. Usable once :meth:`start` ran."""
        return self._configuration.settings_store()

    async def refresh_ticket_key(self) -> None:
        """Read (writers: create) the ticket key (R-TICKET-4).

        A gateway without a key works without tickets and tries again every 30 s.
        """
        await self._keyring.refresh(self._connections.require_pool())

    async def close(self) -> None:
        self._running.close()
        self._requests.close()  # refuses and wakes the per-request waiters

    async def disconnect(self) -> None:
        """Leave the fleet and close the pool (after ``close()`` and the last report).

        Leases this process still holds are not freed here: they expire on their own,
        so a client that moves to another process keeps its slot meanwhile.
        """
        if not self._running.closed:
            await self.close()
        # Unreachable, the leadership and the heartbeat run out on their own.
        with contextlib.suppress(StoreUnavailableError):
            async with self._connections.acquire() as conn:
                await conn.execute(sql.RESIGN_LEADERSHIP, self._node)
                await conn.execute(sql.LEAVE_FLEET, self._node)
        self._leader.step_down()
        await self._signal.close()
        await self._connections.close()

    # ------------------------------------------------------------------ reading
    async def stats(self) -> SchedulerStats:
        return await self._statistics.stats()

    async def queue_state(self) -> QueueState:
        return await self._queue_state.read()

    async def downloads_of(
        self, principal: str, *, limit: int = OWN_DOWNLOADS_LIMIT
    ) -> OwnDownloads:
        return await self._own_downloads.read(principal, limit)

    def debug_leases(self) -> list[Lease]:
        """Leases this process knows (tests)."""
        return list(self._leases)
