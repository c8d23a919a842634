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
import logging
import math
import os
import secrets
import socket
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio
import asyncpg

from .._accuracy import EstimateScorer
from .._classes import DownloadClass, applied_class, default_class
from .._clock import Clock
from .._histogram import Histogram
from .._model import (
    Admitted,
    ByteRange,
    ClassStats,
    Decision,
    Delivered,
    DeliveryOutcome,
    DownloadRequest,
    Grant,
    Queued,
    RangeKind,
    Rejected,
    RejectReason,
    SchedulerStats,
    TickReport,
)
from .._port import DownloadScheduler
from .._rate import PeakRateMeter
from .._request_admission import (
    PendingRequest,
    RequestAdmission,
    RequestTimer,
    wait_with_timeout,
)
from .._session import SessionKeys
from .._settings import SchedulerSettings, Strategy
from .._tickets import TicketSigner
from .._ticking import next_tick_delay
from ..policy import (
    CLASS_COUNT,
    NEWCOMER_CHECK_SECONDS,
    SHUTDOWN_RETRY_SECONDS,
    TICKET_REUSE_SECONDS,
    backup_may_take_slot,
    busy_retry_after,
    check_delay,
    estimate_interval,
    estimate_rate,
    estimate_start,
    no_show_at,
    promote_at,
    sets_start,
    smallest_first_key,
    stride_ahead,
    strides_of,
    uses_sessions,
    validated_download_id,
)
from . import _sql as sql
from ._db_clock import DatabaseClock
from ._estimates import QueueSnapshot, read_snapshot
from ._leader import QueueLeader
from ._leases import Lease, LeaseCache
from ._migrate import DEFAULT_SCHEMA, apply_migrations, validate_schema
from ._pool import KeptConnections, create_pool, open_all
from ._settings_store import SettingsStore, apply_stored
from ._ticket_key import ensure_ticket_key, read_ticket_key

__all__ = ["DATABASE_ERRORS", "PostgresScheduler"]

log = logging.getLogger("arkvory_sched.postgres")

DATABASE_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,  # a connection terminated mid-query (asyncpg #1069)
    OSError,
    TimeoutError,
)
"""What a lost connection, a restarting server or a slow database raises."""

_WAITING, _ACTIVE, _PAUSED = 0, 1, 2
HEARTBEAT_SECONDS = 1.0
SETTINGS_REFRESH_SECONDS = 10.0  # R-SET-3
TICKET_KEY_RETRY_SECONDS = 30.0  # R-TICKET-4
STORAGE_RETRY_AFTER = 2
NEWCOMER_COUNT_CAP = 1024  # a newcomer's waiters-ahead count stops here
UNRECORDED_LIMIT = 4096  # delivery records kept through an outage, then the oldest go
ACQUIRE_TIMEOUT = 2.0  # seconds a request waits for a connection: longer is database trouble
KEPT_CONNECTIONS = 4  # at most, and at most half the pool (KeptConnections)
_BOUND_OUTCOMES = frozenset({"queue_full", "principal_limit"})  # admit_session's refusals


@dataclass(slots=True)
class _SessionGrant:
    lease: Lease
    byte_range: ByteRange | None
    download_class: DownloadClass
    started: float
    last_progress: float
    progressed: int = 0


class PostgresScheduler(DownloadScheduler):
    """The ``DownloadScheduler`` port on PostgreSQL, shared by any number of processes.

    Build it with :meth:`connect` (which migrates, reads the ticket key and the stored
    settings), then run ``tick()`` periodically on every process — the middleware's
    lifespan does. ``disconnect()`` after ``close()`` leaves the fleet and closes the
    pool. ``writer=False`` makes a read gateway: it never creates the ticket key.
    Without a ``clock``, queue time is the database's (:class:`DatabaseClock`).
    """

    def __init__(
        self,
        pool: asyncpg.Pool | None = None,
        *,
        schema: str = DEFAULT_SCHEMA,
        settings: SchedulerSettings | None = None,
        clock: Clock | None = None,
        ticket_keys: Sequence[bytes] | None = None,
        node_id: str | None = None,
        writer: bool = True,
        lease_seconds: float = 10.0,
        leader_seconds: float = 3.0,
        owns_pool: bool = False,
        request_timer: RequestTimer = wait_with_timeout,
    ) -> None:
        self._pool = pool
        self._kept: KeptConnections | None = None
        self._dsn: str | None = None
        self._pool_size = 8
        self._prepared = False
        self._migrate = False
        self._migrated = True
        self._schema = validate_schema(schema)
        self._environment = settings or SchedulerSettings.from_env()
        self._settings = self._environment
        # Queue time for the whole fleet: the database's, unless another clock is passed
        # in. A DatabaseClock (made here, or passed in) is fed by every heartbeat.
        self._db_clock = clock if isinstance(clock, DatabaseClock) else None
        if clock is None:
            clock = self._db_clock = DatabaseClock()
        self._clock = clock
        self._explicit_keys = tuple(ticket_keys) if ticket_keys else ()
        self._signer = TicketSigner(self._explicit_keys) if self._explicit_keys else None
        self._node = node_id or f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
        self._writer = writer
        self._lease_seconds = lease_seconds
        self._leader_seconds = leader_seconds
        self._owns_pool = owns_pool
        self._store: SettingsStore | None = None
        self._applied_revision = 0
        self.settings_problems: list[str] = []
        self._leases = LeaseCache(max_trust=min(2.0, lease_seconds / 3))
        self._keys = SessionKeys()  # session keys of recent requests (no hash per range)
        self._grants: dict[int, _SessionGrant] = {}
        self._unrecorded: deque[tuple[Lease, ByteRange, float]] = deque(maxlen=UNRECORDED_LIMIT)
        self._next_token = 0
        self._closed = False
        self._changed = anyio.Event()
        self._snapshot: QueueSnapshot | None = None
        self._snapshot_until = 0.0
        self._rate = PeakRateMeter()
        self._last_rate = 0.0
        self._bytes_by_class = [0] * CLASS_COUNT
        # Small objects stay in this process: its own per-request places (R-SESS-3),
        # the same component the in-memory scheduler uses.
        self._requests = RequestAdmission(
            self._environment, self._clock, rate=self._rate, bytes_by_class=self._bytes_by_class
        )
        self._request_timer = request_timer
        self._wait_histograms = [Histogram() for _ in range(CLASS_COUNT)]
        self._estimates = EstimateScorer()
        self._admitted = 0
        self._rejections: dict[RejectReason, int] = {}
        self._last_tick_seconds = 0.0
        self._last_stats: SchedulerStats | None = None
        # Fleet bookkeeping, on this process's monotonic clock (never queue decisions).
        self._next_heartbeat = 0.0
        self._next_settings_read = 0.0
        self._next_key_read = 0.0
        self._leader = QueueLeader(
            self._node,
            lease_seconds=lease_seconds,
            leader_seconds=leader_seconds,
            heartbeat_seconds=HEARTBEAT_SECONDS,
            clock=self._clock,
        )
        self._last_trouble = -math.inf

    # ------------------------------------------------------------------ building
    @classmethod
    def from_dsn(
        cls,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        settings: SchedulerSettings | None = None,
        clock: Clock | None = None,
        ticket_keys: Sequence[bytes] | None = None,
        node_id: str | None = None,
        writer: bool = True,
        migrate: bool = True,
        lease_seconds: float = 10.0,
        pool_size: int = 8,
        request_timer: RequestTimer = wait_with_timeout,
    ) -> PostgresScheduler:
        """A scheduler that connects in :meth:`start` — build it before the event loop
        runs (an application factory), start it in the application's lifespan."""
        scheduler = cls(
            None,
            schema=schema,
            settings=settings,
            clock=clock,
            ticket_keys=ticket_keys,
            node_id=node_id,
            writer=writer,
            lease_seconds=lease_seconds,
            owns_pool=True,
            request_timer=request_timer,
        )
        scheduler._dsn = dsn
        scheduler._pool_size = pool_size
        scheduler._migrate = migrate and writer
        scheduler._migrated = not scheduler._migrate
        return scheduler

    @classmethod
    async def connect(
        cls,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        settings: SchedulerSettings | None = None,
        clock: Clock | None = None,
        ticket_keys: Sequence[bytes] | None = None,
        node_id: str | None = None,
        writer: bool = True,
        migrate: bool = True,
        lease_seconds: float = 10.0,
        pool_size: int = 8,
        request_timer: RequestTimer = wait_with_timeout,
    ) -> PostgresScheduler:
        """:meth:`from_dsn` and :meth:`start` in one call."""
        scheduler = cls.from_dsn(
            dsn,
            schema=schema,
            settings=settings,
            clock=clock,
            ticket_keys=ticket_keys,
            node_id=node_id,
            writer=writer,
            migrate=migrate,
            lease_seconds=lease_seconds,
            pool_size=pool_size,
            request_timer=request_timer,
        )
        await scheduler.start()
        return scheduler

    async def start(self) -> None:
        """Connect, migrate (writers), read key and settings, join the fleet.

        A database that is down at start does not stop the process (R-SET-4): the
        pool connects lazily, admissions answer ``503`` until the database is back,
        and migrations, key and settings are retried on later ticks.
        """
        if self._pool is None:
            assert self._dsn is not None, "PostgresScheduler needs a pool or a DSN"
            self._pool = await create_pool(self._dsn, schema=self._schema, size=self._pool_size)
        try:
            await self._prepare()
        except DATABASE_ERRORS as error:
            self._trouble(error)

    async def _prepare(self) -> None:
        if not self._migrated:
            assert self._dsn is not None
            await apply_migrations(self._dsn, schema=self._schema)
            self._migrated = True
        await self.refresh_ticket_key()
        await self.refresh_settings()
        async with self._acquire() as conn:
            await conn.execute(sql.ENSURE_SLOTS, self._settings.sessions)
            await conn.execute(sql.ANALYZE_SLOTS)
            await self._heartbeat(conn, 0.0)
        # The process's own schedule of re-reads, not a queue decision: local time.
        self._next_heartbeat = time.monotonic() + HEARTBEAT_SECONDS
        self._prepared = True
        if self._owns_pool:
            kept = self._kept
            if kept is not None:
                await kept.return_all()  # open_all holds every connection at once
            try:
                await open_all(self._require_pool(), self._pool_size)
            finally:
                if kept is not None:
                    kept.keep_again()

    def _require_pool(self) -> asyncpg.Pool:
        if self._pool is None:
            raise RuntimeError("PostgresScheduler.start() has not run")
        return self._pool

    def _acquire(self) -> Any:
        """A pooled connection; a slow pool is database trouble, not a hang."""
        return self._require_pool().acquire(timeout=ACQUIRE_TIMEOUT)

    def _kept_connection(self) -> Any:
        """A connection for the statements of every download (a newcomer's admission,
        a range's record), kept out of the pool between them (``KeptConnections``)."""
        kept = self._kept
        if kept is None:
            pool = self._require_pool()
            size = min(KEPT_CONNECTIONS, pool.get_max_size() // 2)
            kept = self._kept = KeptConnections(pool, size, timeout=ACQUIRE_TIMEOUT)
        return kept.connection()

    @property
    def node_id(self) -> str:
        return self._node

    @property
    def settings(self) -> SchedulerSettings:
        return self._settings

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
        return self._signer is not None

    # ------------------------------------------------------------------ admission
    async def admit(self, request: DownloadRequest) -> Decision:
        key: bytes | None = None
        if len(self._leases):  # without a lease here, no request needs its key yet
            key = self._keys.key(
                request.principal, request.object_id, request.download_id, request.client_address
            )
            lease = self._leases.trusted(key)
            if lease is not None and not (lease.yield_requested and not self._closed):
                # A further range of a session this process holds a trusted lease of (or,
                # R-STRAT-4, an active session's request after a switch to shared): no
                # round trip, and as little work as the in-memory fast path (ADR 0013).
                # The lease was created for a validated id, and the key covers the id,
                # so only a requested class is left to check (unknown → 400, as below).
                if request.requested_class is not None:
                    applied_class(
                        request.base_class or default_class(request.principal_kind),
                        request.requested_class,
                    )
                return self._admit_range(lease, request.effective_range)
        download_id = validated_download_id(request.download_id)
        base = request.base_class or default_class(request.principal_kind)
        cls = applied_class(base, request.requested_class)
        if not uses_sessions(self._settings, request.object_size):
            decision = self._requests.admit(request.principal, cls, request.effective_range)
            if isinstance(decision, PendingRequest):
                return await self._requests.wait(
                    decision, request.effective_range, self._request_timer
                )
            return decision
        if key is None:
            key = self._keys.key(
                request.principal, request.object_id, download_id, request.client_address
            )
        try:
            return await self._admit_session(request, key, cls, download_id is not None)
        except DATABASE_ERRORS as error:
            self._trouble(error)
            return self._reject(RejectReason.STORAGE_UNAVAILABLE, STORAGE_RETRY_AFTER, cls)

    def _admit_range(self, lease: Lease, byte_range: ByteRange | None) -> Decision:
        """A range of an active session: local bookkeeping only, no round trip."""
        if lease.in_flight >= self._settings.ranges_per_session:
            return self._reject(RejectReason.RANGES_PER_SESSION, 1, lease.download_class)
        lease.in_flight += 1
        self._next_token += 1
        token = self._next_token
        now = self._clock.monotonic()
        self._grants[token] = _SessionGrant(lease, byte_range, lease.download_class, now, now)
        self._admitted += 1
        grant = Grant(token, "session", lease.download_class, byte_range, lease.key)
        return Admitted(grant, self._lease_ticket(lease, now))

    async def _admit_session(
        self, request: DownloadRequest, key: bytes, cls: DownloadClass, has_id: bool
    ) -> Decision:
        now = self._clock.monotonic()
        async with self._kept_connection() as conn:
            if self._closed:
                row = await conn.fetchrow(sql.SESSION_WITH_LEASE, key)
                if row is not None and row["state"] == _ACTIVE:
                    return await self._join_active(conn, key, row, request.effective_range)
                return self._reject(RejectReason.SHUTTING_DOWN, SHUTDOWN_RETRY_SECONDS, cls)
            try:
                row = await self._admit_or_look_up(conn, request, key, cls, has_id, now)
                outcome = row["outcome"]
            except asyncpg.RaiseError as error:
                # A concurrent admission took the last place between the function's
                # first look at the counts and its own count (R-RES-1): all rolled back.
                if error.message not in _BOUND_OUTCOMES:
                    raise
                outcome = error.message
            if outcome == "existing":
                return await self._admit_existing(conn, request, key, row, now)
            if outcome == "admitted":
                lease = self._remember_claim(key, row, row, now)
                self._invalidate()
                return self._admit_range(lease, request.effective_range)
            if outcome == "queued":
                return await self._queued(conn, key, cls, now, newcomer=row)
            if outcome == "raced":  # another process inserted it a moment ago
                return await self._queued(conn, key, cls, now)
            snapshot = await self._queue_snapshot(conn)
            reason = (
                RejectReason.QUEUE_FULL if outcome == "queue_full" else RejectReason.PRINCIPAL_LIMIT
            )
            retry = busy_retry_after(
                snapshot.waiting_bytes, snapshot.waiting, self._fleet_rate(snapshot)
            )
            return self._reject(reason, retry, cls)

    async def _admit_existing(
        self,
        conn: asyncpg.Connection,
        request: DownloadRequest,
        key: bytes,
        row: asyncpg.Record,
        now: float,
    ) -> Decision:
        """A session the queue already holds: a range, a poll, a resumption."""
        if row["state"] == _ACTIVE:
            return await self._join_active(conn, key, row, request.effective_range)
        stored_class = DownloadClass.by_rank(row["base_class"])
        if row["state"] == _PAUSED:
            lease = await self._resume(conn, key, row, now)
            if lease is not None:
                return self._admit_range(lease, request.effective_range)
        elif row["marked"] and await self._may_take_marked_slot(conn, row, now):
            lease = await self._claim(conn, key, row, now)
            if lease is not None:
                self._invalidate()
                return self._admit_range(lease, request.effective_range)
        return await self._queued(conn, key, stored_class, now)

    async def _join_active(
        self,
        conn: asyncpg.Connection,
        key: bytes,
        row: asyncpg.Record,
        byte_range: ByteRange | None,
    ) -> Decision:
        """A range of a session another process (or this one, earlier) activated."""
        cls = DownloadClass.by_rank(row["base_class"])
        if row["yield_requested"] and not self._closed and row["slot_no"] is not None:
            yielded = await self._yield_slot(conn, key, row)
            if yielded is not None:
                return yielded
        if row["slot_no"] is not None and (row["lease_left"] or 0.0) > 0.0:
            left = await conn.fetchval(
                sql.TAKE_OVER_LEASE, key, row["lease_token"], self._node, self._lease_seconds
            )
            if left is not None:
                lease = self._leases.remember(
                    key,
                    slot_no=row["slot_no"],
                    token=row["lease_token"],
                    download_class=cls,
                    object_size=row["object_size"],
                    arrival_wall_ms=row["arrival_wall_ms"],
                    seconds_left=left,
                    held=True,
                )
                return self._admit_range(lease, byte_range)
        # The lease ran out and the reaper has not yet judged its holder: ask again soon.
        return self._reject(RejectReason.STORAGE_UNAVAILABLE, 1, cls)

    async def _yield_slot(
        self, conn: asyncpg.Connection, key: bytes, row: asyncpg.Record
    ) -> Decision | None:
        """R-PREEMPT-2: a preempted protocol client yields at a range boundary.

        It waits again with its arrival (not its aging), blocked while the head it
        yielded to waits; the head is marked to take the slot at its next poll.
        """
        now = self._clock.monotonic()
        rank = row["base_class"]
        check_at = now + NEWCOMER_CHECK_SECONDS
        async with conn.transaction():
            freed = await conn.fetchval(sql.RELEASE_SLOT, row["slot_no"], row["lease_token"], key)
            if freed is None:
                return None  # the lease is gone already: answered as any other session
            order_key = await self._order_key(
                conn, rank, row["principal"], row["object_size"], row["arrival"], old=True
            )
            await conn.execute(
                sql.REQUEUE_YIELDER,
                key,
                order_key,
                now,
                self._promote_at(rank, now),
                check_at,
                no_show_at(check_at, NEWCOMER_CHECK_SECONDS),
            )
            await conn.execute(sql.NOTE_RELEASE, now)
        self._leases.forget(key)
        self._invalidate()
        return await self._queued(conn, key, DownloadClass.by_rank(rank), now)

    async def _admit_or_look_up(
        self,
        conn: asyncpg.Connection,
        request: DownloadRequest,
        key: bytes,
        cls: DownloadClass,
        has_id: bool,
        now: float,
    ) -> asyncpg.Record:
        """One round trip: the stored session, or a newcomer checked, inserted, placed.

        ``admit_session`` (migration 0003, ADR 0011) runs the statements a newcomer
        needs inside the database, so a newcomer costs one statement and one commit
        instead of ten round trips; a session that exists comes back as stored.
        """
        settings = self._settings
        now_ms = int(self._clock.wall() * 1000)  # tickets are wall time (R-RES-5)
        arrival_ms = now_ms
        if self._signer is not None and request.ticket:
            signed = self._signer.verify(request.ticket, key, now_ms)
            if signed is not None and signed <= now_ms:
                arrival_ms = signed
        arrival = now - (now_ms - arrival_ms) / 1000.0  # the ticket's age in queue time
        rank = cls.rank
        order_key = (
            smallest_first_key(request.object_size, arrival, settings.aging_minutes * 60.0)
            if settings.strategy is Strategy.SMALLEST_FIRST
            else None
        )
        check_at = now + NEWCOMER_CHECK_SECONDS
        return await conn.fetchrow(
            sql.ADMIT_SESSION,
            key,
            request.principal,
            rank,
            has_id,
            request.object_size,
            arrival,
            arrival_ms,
            arrival_ms < now_ms,
            order_key,
            now,
            self._promote_at(rank, now),
            check_at,
            no_show_at(check_at, NEWCOMER_CHECK_SECONDS),
            settings.queue_limit,
            settings.queue_per_principal,
            settings.sessions,
            cls is DownloadClass.INTERACTIVE,
            settings.reserve,
            self._node,
            self._lease_seconds,
            settings.strategy is Strategy.ORDERED,
            1.0 / settings.weights[rank],
            NEWCOMER_COUNT_CAP,
        )

    async def _resume(
        self, conn: asyncpg.Connection, key: bytes, row: asyncpg.Record, now: float
    ) -> Lease | None:
        """R-SESS-9: a paused session waits again with its arrival; starts if alone."""
        rank = row["base_class"]
        check_at = now + NEWCOMER_CHECK_SECONDS
        async with conn.transaction():
            order_key = await self._order_key(
                conn, rank, row["principal"], row["object_size"], row["arrival"], old=True
            )
            await conn.execute(
                sql.RESUME_PAUSED,
                key,
                order_key,
                now,
                self._promote_at(rank, now),
                check_at,
                no_show_at(check_at, NEWCOMER_CHECK_SECONDS),
            )
            if await conn.fetchval(sql.OTHERS_WAITING, key):
                return None
            lease = await self._claim(conn, key, row, now)
        if lease is not None:
            self._invalidate()
        return lease

    async def _may_take_marked_slot(
        self, conn: asyncpg.Connection, row: asyncpg.Record, now: float
    ) -> bool:
        if not row["mark_backup"]:
            return True
        # A back-up takes a freed slot only when the first marked waiters did not come
        # for it within one of their poll periods (as in memory, ADR 0002).
        snapshot = await self._queue_snapshot(conn, fresh=True)
        return backup_may_take_slot(now, snapshot.last_release)

    async def _claim(
        self,
        conn: asyncpg.Connection,
        key: bytes,
        row: asyncpg.Record,
        now: float,
    ) -> Lease | None:
        """Take a free slot for ``key`` in one statement; None when none is free.

        ``row`` needs the session's ``base_class``, ``object_size`` and
        ``arrival_wall_ms``. The claim and the round's advance commit together (inside
        a caller's transaction, as a savepoint, so a lost race for the session ends
        without aborting it). A newcomer's claim happens inside ``admit_session``.
        """
        settings = self._settings
        cls = DownloadClass.by_rank(row["base_class"])
        try:
            async with conn.transaction():
                claimed = await conn.fetchrow(
                    sql.CLAIM_SLOT,
                    key,
                    settings.sessions,
                    cls is DownloadClass.INTERACTIVE,
                    settings.reserve,
                    self._node,
                    self._lease_seconds,
                    now,
                )
                if claimed is None:
                    return None
                rank = claimed["queue_rank"]
                tag = int(claimed["order_key"]) if settings.strategy is Strategy.ORDERED else 0
                await conn.execute(sql.ADVANCE_ROUND, rank, tag, 1.0 / settings.weights[rank])
        except asyncpg.UniqueViolationError:
            return None  # another process activated this session at the same moment
        return self._remember_claim(key, claimed, row, now)

    def _remember_claim(
        self, key: bytes, claimed: asyncpg.Record, session: asyncpg.Record, now: float
    ) -> Lease:
        """A slot this process just claimed: its wait is measured, its lease trusted.

        ``claimed`` is the claim (``CLAIM_SLOT``'s row, or ``admit_session``'s, which is
        also ``session``); ``session`` gives the class, size and arrival.
        """
        cls = DownloadClass.by_rank(session["base_class"])
        self._wait_histograms[cls.rank].observe(max(0.0, now - claimed["waiting_since"]))
        first_estimate = claimed["first_estimate"]
        estimated_at = claimed.get("first_estimate_at")
        if first_estimate is not None and estimated_at is not None:
            self._estimates.score(estimated_at, first_estimate, now)
        return self._leases.remember(
            key,
            slot_no=claimed["slot_no"],
            token=claimed["lease_token"],
            download_class=cls,
            object_size=session["object_size"],
            arrival_wall_ms=session["arrival_wall_ms"],
            seconds_left=claimed["lease_left"],
            held=True,
        )

    async def _order_key(
        self,
        conn: asyncpg.Connection,
        rank: int,
        principal: str,
        size: int,
        arrival: float,
        *,
        old: bool,
    ) -> float:
        """The session's place within its class under the current strategy."""
        settings = self._settings
        if settings.strategy is Strategy.SMALLEST_FIRST:
            return smallest_first_key(size, arrival, settings.aging_minutes * 60.0)
        tag = await conn.fetchval(sql.NEXT_TAG, rank, principal, old)
        return float(tag)

    def _promote_at(self, rank: int, now: float) -> float | None:
        """When a session entering the queue in its base class ``rank`` now ages."""
        return promote_at(now, rank, rank, self._settings.aging_minutes * 60.0)

    async def _queued(
        self,
        conn: asyncpg.Connection,
        key: bytes,
        cls: DownloadClass,
        now: float,
        *,
        newcomer: asyncpg.Record | None = None,
    ) -> Decision:
        """The answer to a waiting session: place, estimate, when to ask again.

        ``newcomer`` is ``admit_session``'s row for a session it has just queued: its
        place, counted up to ``NEWCOMER_COUNT_CAP``, and its arrival. A newcomer's place
        is only announced from its first poll on (R-EST-3), so beyond the cap the class
        length stands in: the estimate costs the same at the end of a long queue.
        """
        is_newcomer = newcomer is not None
        row = newcomer if newcomer is not None else await conn.fetchrow(sql.POSITION, key)
        if row is None:  # activated or released by another process a moment ago
            return self._reject(RejectReason.STORAGE_UNAVAILABLE, 1, cls)
        snapshot = await self._queue_snapshot(conn)
        own_ahead = row["own_ahead"]
        if is_newcomer and own_ahead >= NEWCOMER_COUNT_CAP:
            own_ahead = max(own_ahead, snapshot.class_lengths[row["queue_rank"]])
        settings = self._settings
        ahead = stride_ahead(
            own_ahead,
            row["queue_rank"],
            snapshot.passes,
            snapshot.class_lengths,
            strides_of(settings.weights),
        )
        start = estimate_start(
            snapshot.finish_table,
            ahead=ahead,
            now=now,
            sessions=settings.sessions,
            reserve=settings.reserve,
            interactive=cls is DownloadClass.INTERACTIVE,
            active=snapshot.active,
            active_interactive=snapshot.active_interactive,
            waiting=snapshot.waiting,
            waiting_bytes=snapshot.waiting_bytes,
            rate=self._fleet_rate(snapshot),
        )
        wait = start - now
        delay = check_delay(
            key,
            newcomer=is_newcomer,
            ahead=ahead,
            wait=wait,
            marked=bool(row["marked"]),
            free_at_mark=snapshot.free_at_mark,
        )
        check_at = now + delay
        no_show = no_show_at(check_at, delay)
        if not is_newcomer:  # a newcomer's row already says exactly this
            await conn.execute(sql.RECORD_CHECK, key, check_at, no_show, start, now)
        earliest, latest = estimate_interval(start, now)
        wall_offset = self._clock.wall() - now  # announced times are wall time (R-RES-5)
        return Queued(
            position=None if is_newcomer else ahead + 1,
            starts_at=start + wall_offset,
            starts_earliest=earliest + wall_offset,
            starts_latest=latest + wall_offset,
            check_at=check_at + wall_offset,
            retry_after=max(1, math.ceil(delay)),
            download_class=cls,
            ticket=await self._session_ticket(conn, key, now, newcomer),
        )

    async def _session_ticket(
        self, conn: asyncpg.Connection, key: bytes, now: float, stored: asyncpg.Record | None
    ) -> str | None:
        """The session's ticket, with its arrival from ``stored`` when the caller has it."""
        if self._signer is None:
            return None
        if stored is not None:
            arrival_ms = stored["arrival_wall_ms"]
        else:
            arrival_ms = await conn.fetchval(
                "SELECT arrival_wall_ms FROM download_session WHERE session_key = $1", key
            )
        if arrival_ms is None:
            return None
        return self._signer.issue(key, arrival_ms, max(int(self._clock.wall() * 1000), arrival_ms))

    def _lease_ticket(self, lease: Lease, now: float) -> str | None:
        """As in memory: an active session's ticket is re-signed at most once a minute."""
        if self._signer is None:
            return None
        if lease.ticket is not None and now - lease.ticket_issued < TICKET_REUSE_SECONDS:
            return lease.ticket
        lease.ticket = self._signer.issue(
            lease.key,
            lease.arrival_wall_ms,
            max(int(self._clock.wall() * 1000), lease.arrival_wall_ms),
        )
        lease.ticket_issued = now
        return lease.ticket

    def _fleet_rate(self, snapshot: QueueSnapshot | None) -> float:
        if snapshot is None:
            return estimate_rate(0.0, self._local_rate(), self._settings.bandwidth)
        return snapshot.rate(self._local_rate(), self._settings.bandwidth)

    def _local_rate(self) -> float:
        peak = self._rate.peak(self._clock.monotonic())
        if peak > 0:
            self._last_rate = peak
        return peak or self._last_rate

    async def _queue_snapshot(
        self, conn: asyncpg.Connection, *, fresh: bool = False
    ) -> QueueSnapshot:
        """The leader's last tick plus the slot table, cached for half a second."""
        # Its age on queue time: what an answer says must not depend on how fast the
        # process runs (the same requests at the same queue times, the same answers).
        now = self._clock.monotonic()
        if not fresh and self._snapshot is not None and now < self._snapshot_until:
            return self._snapshot
        snapshot = await read_snapshot(conn)
        self._snapshot = snapshot
        self._snapshot_until = now + 0.5
        return snapshot

    def _invalidate(self) -> None:
        self._snapshot = None
        self._notify()

    def _reject(
        self, reason: RejectReason, retry_after: int, cls: DownloadClass | None
    ) -> Rejected:
        self._rejections[reason] = self._rejections.get(reason, 0) + 1
        return Rejected(reason, retry_after, cls)

    # ------------------------------------------------------------------ delivery
    async def report(self, grant: Grant, outcome: DeliveryOutcome) -> None:
        if grant.admission == "per-request":
            self._requests.report(grant, outcome)  # wakes a waiter promoted into the place
            return
        state = self._grants.pop(grant.token, None)
        if state is None:
            return
        lease = state.lease
        lease.in_flight = max(0, lease.in_flight - 1)
        now = self._clock.monotonic()
        counted = None
        if isinstance(outcome, Delivered):
            counted = outcome.byte_range or state.byte_range
            sent = counted.length if counted is not None else 0
        else:
            sent = outcome.bytes_sent
        self._record_bytes(state, max(0, sent - state.progressed))
        try:
            async with self._kept_connection() as conn:
                if counted is None:
                    await conn.execute(
                        sql.RECORD_INTERRUPTION, lease.key, lease.token, now, not lease.in_flight
                    )
                else:
                    await self._record_delivery(conn, lease, counted, now)
        except DATABASE_ERRORS as error:
            # The bytes were sent; only the record is missing. It is written on a later
            # tick (fenced by the same token, so a late write is as safe as a prompt
            # one); until then the session keeps its slot rather than completing wrongly.
            self._trouble(error)
            if counted is not None:
                self._unrecorded.append((lease, counted, now))
        self._notify()

    async def _record_late_deliveries(self, conn: asyncpg.Connection) -> None:
        """Write delivery records a database outage kept from ``report``, oldest first."""
        while self._unrecorded:
            lease, counted, at = self._unrecorded[0]
            await self._record_delivery(conn, lease, counted, at)
            self._unrecorded.popleft()

    async def _record_delivery(
        self, conn: asyncpg.Connection, lease: Lease, counted: ByteRange, now: float
    ) -> None:
        """One statement (``record_delivery``, ADR 0011): record, and complete if whole.

        The slot is released only when no other range of the session is in flight
        here; the session is deleted only with its slot, both fenced by the token.
        """
        outcome = await conn.fetchval(
            sql.RECORD_DELIVERY,
            lease.key,
            lease.token,
            counted.start,
            counted.end,
            # The policy's R-SESS-8 rule up to the delivered ranges, which only the row
            # holds: record_delivery applies the rest there (ADR 0016).
            sets_start(counted, lease.object_size, None),
            counted.kind is RangeKind.BOUNDED,
            now,
            not lease.in_flight,
            lease.slot_no,
        )
        if outcome == "fenced":
            self._leases.forget(lease.key)  # the lease is gone: fenced out
        elif outcome == "completed":
            self._leases.forget(lease.key)
            self._snapshot = None

    async def progress(self, grant: Grant, nbytes: int) -> None:
        if grant.admission == "per-request":
            self._requests.progress(grant, nbytes)
            return
        state = self._grants.get(grant.token)
        if state is None or nbytes <= 0:
            return
        self._record_bytes(state, nbytes)
        state.progressed += nbytes

    def _record_bytes(self, state: _SessionGrant, nbytes: int) -> None:
        if nbytes <= 0:
            return
        now = self._clock.monotonic()
        started = now - max(0.0, now - state.last_progress)
        self._rate.record(started, now, nbytes)
        state.last_progress = now
        self._bytes_by_class[state.download_class.rank] += nbytes

    async def wait_for_change(self, timeout: float) -> None:
        # Changes made by other processes are not signalled here: wake at least every
        # second so a held request re-checks the shared queue.
        changed = self._changed
        with anyio.move_on_after(max(0.0, min(timeout, 1.0))):
            await changed.wait()

    def _notify(self) -> None:
        changed = self._changed
        self._changed = anyio.Event()
        changed.set()

    # ------------------------------------------------------------------ tick
    async def tick(self) -> TickReport:
        started = time.perf_counter()  # measures the tick (not a decision)
        expired = marked = 0
        preempted = False
        try:
            if not self._prepared:
                await self._prepare()
            async with self._acquire() as conn:
                await self._fleet_duties(conn)
                await self._record_late_deliveries(conn)
                if await self._leader.elect(conn):
                    outcome = await self._leader.tick(
                        conn,
                        settings=self._settings,
                        now=self._clock.monotonic(),
                        in_flight=self._leases.in_flight_keys(),
                        local_rate=self._local_rate(),
                        last_trouble=self._last_trouble,
                        closed=self._closed,
                    )
                    expired, marked = outcome.expired, outcome.marked
                    preempted = outcome.preempted
                    self._learn_of_yield(outcome.yielding)
                    for key in outcome.released:
                        self._leases.forget(key)
        except DATABASE_ERRORS as error:
            self._trouble(error)
            self._leader.step_down()
        except Exception as error:
            # Whatever went wrong, the next tick must run: a process whose tick loop
            # died keeps answering but never renews, reaps or marks again.
            log.exception("tick failed on node %s", self._node)
            self._trouble(error)
            self._leader.step_down()
        self._leases.drop_untrusted_idle()
        duration = time.perf_counter() - started
        self._last_tick_seconds = duration
        self._invalidate()
        return TickReport(
            duration=duration,
            # Database waits, not CPU: tick at least once a heartbeat, so a slow tick
            # never lets the leader lease (3 s) run out between two ticks.
            next_tick_in=min(next_tick_delay(duration), HEARTBEAT_SECONDS),
            expired=expired,
            marked=marked,
            preempted=preempted,
        )

    def _learn_of_yield(self, key: bytes | None) -> None:
        """The leader asked ``key`` to yield: if this process serves it, its next range
        yields (R-PREEMPT-2) instead of passing on a lease trusted without a round trip.

        Other processes learn of it when they renew the lease (every heartbeat); the
        allowed difference is in ADR 0017.
        """
        if key is None:
            return
        lease = self._leases.get(key)
        if lease is not None:
            lease.yield_requested = True

    async def _fleet_duties(self, conn: asyncpg.Connection) -> None:
        """Every process: heartbeat, renew held leases, refresh settings and key."""
        real = time.monotonic()  # the process's own schedule of re-reads, not a decision
        if real >= self._next_heartbeat:
            self._next_heartbeat = real + HEARTBEAT_SECONDS
            await self._heartbeat(conn, self._local_rate())
            in_flight = self._leases.in_flight_keys()
            if in_flight:
                # A response still streaming is activity, wherever it streams from.
                await conn.execute(sql.TOUCH_SESSIONS, in_flight, self._clock.monotonic())
            await self._renew_leases(conn)
        if real >= self._next_settings_read:
            await self.refresh_settings()
        if self._signer is None and real >= self._next_key_read:
            await self.refresh_ticket_key()

    async def _heartbeat(self, conn: asyncpg.Connection, rate: float) -> None:
        """The fleet's heartbeat; the database time it returns keeps the queue clock."""
        beat = conn.fetchval(sql.HEARTBEAT, self._node, rate)
        if self._db_clock is None:
            await beat
        else:
            await self._db_clock.refresh(beat)

    async def _renew_leases(self, conn: asyncpg.Connection) -> None:
        held = self._leases.held()
        if not held:
            return
        rows = await conn.fetch(
            sql.RENEW_LEASES,
            [lease.slot_no for lease in held],
            [lease.token for lease in held],
            self._lease_seconds,
            self._node,
        )
        renewed = {(row["slot_no"], row["lease_token"]): row for row in rows}
        for lease in held:
            row = renewed.get((lease.slot_no, lease.token))
            if row is None:
                # Released, reaped or taken over elsewhere: stop trusting and renewing.
                lease.held = False
                lease.trusted_until = 0.0
            else:
                lease.yield_requested = bool(row["yield_requested"])
                self._leases.confirm(lease, row["lease_left"])

    # ------------------------------------------------------------------ settings
    async def refresh_settings(self) -> bool:
        """R-SET-3: read the stored record; apply it only if its revision is newer.

        Runs at start and every 10 s from ``tick``; an API that just saved a change
        calls it to apply at once. Returns whether new settings were applied.
        """
        self._next_settings_read = time.monotonic() + SETTINGS_REFRESH_SECONDS
        if self._store is None:
            self._store = SettingsStore(
                self._require_pool(), environment=self._environment, schema=self._schema
            )
        stored = await self._store.read()
        if stored.revision <= self._applied_revision:
            return False
        settings, problems = apply_stored(self._environment, stored.fields)
        self.settings_problems = problems
        for problem in problems:
            log.warning("stored settings: %s", problem)
        self._applied_revision = stored.revision
        await self.configure(settings)
        return True

    @property
    def settings_revision(self) -> int:
        """The revision of the stored settings in force (0: the environment's)."""
        return self._applied_revision

    async def refresh_ticket_key(self) -> None:
        """Read (writers: create) the ticket key (R-TICKET-4).

        A gateway without a key works without tickets and tries again every 30 s.
        """
        if self._explicit_keys:
            return
        self._next_key_read = time.monotonic() + TICKET_KEY_RETRY_SECONDS
        key: bytes | None
        if self._writer:
            key = await ensure_ticket_key(self._require_pool(), self._schema)
        else:
            key = await read_ticket_key(self._require_pool(), self._schema)
        if key is not None:
            self._signer = TicketSigner([key])

    async def configure(self, settings: SchedulerSettings) -> None:
        current = self._settings
        settings = settings.keeping_environment_only(current)
        self._settings = settings
        async with self._acquire() as conn:
            await conn.execute(sql.ENSURE_SLOTS, settings.sessions)
            await conn.execute(sql.ANALYZE_SLOTS)
            if (
                settings.strategy is not current.strategy
                or settings.aging_minutes != current.aging_minutes
            ):
                await self._rekey(conn, settings)
        self._invalidate()

    async def _rekey(self, conn: asyncpg.Connection, settings: SchedulerSettings) -> None:
        """A new strategy orders the waiters anew, by arrival (O(n), only on change)."""
        rows = await conn.fetch(sql.WAITING_FOR_REKEY)
        vts = {
            row["queue_rank"]: row["virtual_time"]
            for row in await conn.fetch("SELECT queue_rank, virtual_time FROM class_state")
        }
        rounds: dict[tuple[int, str], int] = {}
        keys: list[bytes] = []
        order: list[float] = []
        for row in rows:
            keys.append(row["session_key"])
            if settings.strategy is Strategy.SMALLEST_FIRST:
                order.append(
                    smallest_first_key(
                        row["object_size"], row["arrival"], settings.aging_minutes * 60.0
                    )
                )
            else:
                turn = (row["queue_rank"], row["principal"])
                rounds[turn] = rounds.get(turn, 0) + 1
                order.append(float(vts.get(row["queue_rank"], 0) + rounds[turn]))
        async with conn.transaction():
            await conn.execute(sql.REKEY_WAITING, keys, order)
            await conn.execute("DELETE FROM principal_round")
            if rounds:
                await conn.executemany(
                    "INSERT INTO principal_round (queue_rank, principal, last_tag) "
                    "VALUES ($1, $2, $3)",
                    [(rank, who, vts.get(rank, 0) + n) for (rank, who), n in rounds.items()],
                )

    # ------------------------------------------------------------------ stats
    async def stats(self) -> SchedulerStats:
        requests = self._requests
        try:
            async with self._acquire() as conn:
                rows = await conn.fetch(sql.STATS)
                counters = await conn.fetchrow(sql.COUNTERS)
                remaining = await conn.fetch(sql.ACTIVE_FOR_ESTIMATE)
        except DATABASE_ERRORS as error:
            self._trouble(error)
            if self._last_stats is not None:
                return replace(self._last_stats, closed=self._closed)
            rows, counters, remaining = [], None, []
        now = self._clock.monotonic()
        counts = [[0, 0, 0] for _ in range(CLASS_COUNT)]
        oldest: list[float | None] = [None] * CLASS_COUNT
        waiting_bytes = 0.0
        for row in rows:
            counts[row["base_class"]][row["state"]] = row["n"]
            if row["state"] == _WAITING:
                oldest[row["base_class"]] = row["oldest"]
                waiting_bytes += row["bytes"]
        per_class = {}
        for rank in range(CLASS_COUNT):
            since = oldest[rank]
            per_class[DownloadClass.by_rank(rank)] = ClassStats(
                waiting=counts[rank][_WAITING],
                active=counts[rank][_ACTIVE],
                paused=counts[rank][_PAUSED],
                oldest_wait_seconds=0.0 if since is None else max(0.0, now - since),
                bytes_delivered=self._bytes_by_class[rank],
                wait_seconds=self._wait_histograms[rank].snapshot(),
            )
        rejections = dict(requests.rejections)
        for reason, count in self._rejections.items():
            rejections[reason] = rejections.get(reason, 0) + count
        rate = estimate_rate(
            0.0 if counters is None else counters["fleet_rate"],
            self._local_rate(),
            self._settings.bandwidth,
        )
        waiting_total = sum(count[_WAITING] for count in counts)
        empty_in: float | None = None
        if waiting_total:
            left = sum(
                max(0, r["object_size"] - (r["start_offset"] or 0) - r["covered"])
                for r in remaining
            )
            # As in memory: every waiting byte and what active sessions have left, on the
            # whole link (the queue as stored, not a snapshot a tick may have dropped).
            empty_in = (waiting_bytes + left) / rate
        settings = self._settings
        stats = SchedulerStats(
            strategy=settings.strategy.value,
            admission="per-request" if settings.strategy is Strategy.SHARED else "session",
            sessions_limit=settings.sessions,
            per_class=per_class,
            request_active=requests.active,
            request_waiting=requests.waiting,
            admitted_total=self._admitted + requests.admitted,
            completed_total=0 if counters is None else counters["completed_total"],
            no_shows_total=0 if counters is None else counters["no_shows_total"],
            idle_releases_total=0 if counters is None else counters["idle_releases_total"],
            preemptions_total=0 if counters is None else counters["preemptions_total"],
            rejections_total=rejections,
            estimate_error_seconds=self._estimates.absolute().snapshot(),
            estimate_accuracy=self._estimates.accuracy(),
            reports_fleet_figures=self._leader.is_leader,
            last_tick_seconds=self._last_tick_seconds,
            delivery_rate=rate,
            queue_empty_in_seconds=empty_in,
            closed=self._closed,
        )
        self._last_stats = stats
        return stats

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

    def _trouble(self, error: BaseException) -> None:
        self._last_trouble = self._clock.monotonic()
        log.warning("database trouble on node %s: %s", self._node, error)

    def debug_leases(self) -> list[Lease]:
        """Leases this process knows (tests)."""
        return list(self._leases)
