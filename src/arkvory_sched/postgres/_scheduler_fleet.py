"""Joining and staying in the fleet: start, the tick, leases, configuration and the key.

Every process ticks (heartbeat, lease renewal, late delivery records, key refresh);
the one that holds the leader lease also runs the queue work. The stored settings
record is not read here: a :class:`~arkvory_sched.SettingsKeeper` applies it through
:meth:`configure`, the one mechanism for every scheduler (ADR 0022).
"""

from __future__ import annotations

import time

import asyncpg

from .._model import TickReport
from .._tickets import TicketSigner
from .._ticking import next_tick_delay
from ..policy import smallest_first_key
from ..settings import SchedulerSettings, Strategy
from . import _sql as sql
from ._migrate import apply_migrations
from ._pool import create_pool, open_all
from ._scheduler_delivery import SchedulerDelivery
from ._scheduler_state import (
    DATABASE_ERRORS,
    HEARTBEAT_SECONDS,
    TICKET_KEY_RETRY_SECONDS,
    log,
)
from ._settings_store import PostgresSettingsStore
from ._ticket_key import ensure_ticket_key, read_ticket_key

__all__ = ["SchedulerFleet"]

# Waiters given a new key per statement on a switch to smallest-first: a long queue is
# rekeyed in batches, so neither the process nor one statement holds all of it.
REKEY_BATCH = 10_000


class SchedulerFleet(SchedulerDelivery):
    """Start-up, the tick, fleet duties and configuration of :class:`PostgresScheduler`."""

    async def start(self) -> None:
        """Connect, migrate (writers), read the key, join the fleet.

        A database that is down at start does not stop the process (R-SET-4): the
        pool connects lazily, admissions answer ``503`` until the database is back,
        and migrations and key are retried on later ticks. The stored settings come
        from the process's keeper, which applies them before the first request.
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

    # ------------------------------------------------------------------ tick
    async def tick(self) -> TickReport:
        started = time.perf_counter()  # measures the tick (not a decision)
        expired = marked = 0
        preempted = False
        try:
            if not self._prepared:
                await self._prepare()
            await self._reread_key_due()
            async with self._acquire() as conn:
                await self._fleet_duties(conn)
                await self._record_late_deliveries(conn)
                if await self._leader.elect(conn):
                    now = self._clock.monotonic()
                    outcome = await self._leader.tick(
                        conn,
                        settings=self._settings,
                        now=now,
                        in_flight=self._leases.in_flight_keys(),
                        local_rate=self._local_rate(),
                        local_seconds=self._rate.complete_seconds(now),
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

    async def _reread_key_due(self) -> None:
        """Every process: look for the ticket key again when it has none and it is due.

        Before the tick takes its connection: the key is read through the pool, and
        with a pool of two — one kept aside for admissions — a read waiting for a second
        connection while the tick held one would wait for ever.
        """
        if self._signer is None and time.monotonic() >= self._next_key_read:
            await self.refresh_ticket_key()

    async def _fleet_duties(self, conn: asyncpg.Connection) -> None:
        """Every process: heartbeat, renew held leases, hand back idle range shares."""
        real = time.monotonic()  # the process's own schedule of beats, not a decision
        if real >= self._next_heartbeat:
            self._next_heartbeat = real + HEARTBEAT_SECONDS
            await self._heartbeat(conn, self._local_rate())
            in_flight = self._leases.in_flight_keys()
            if in_flight:
                # A response still streaming is activity, wherever it streams from.
                await conn.execute(sql.TOUCH_SESSIONS, in_flight, self._clock.monotonic())
            await self._renew_leases(conn)
            await self._return_idle_shares(conn)

    async def _heartbeat(self, conn: asyncpg.Connection, rate: float) -> None:
        """The fleet's heartbeat; the database time it returns keeps the queue clock.

        It carries this process's complete seconds of queue time, the clock every
        process shares, so the leader can add the fleet's bytes second by second
        (ADR 0027); and its own peak ``rate``, which an older leader adds up instead.
        """
        first, seconds = self._rate.complete_seconds(self._clock.monotonic())
        beat = conn.fetchval(sql.HEARTBEAT, self._node, rate, first, seconds)
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
                lease.contended = bool(row["contended"])
                self._leases.confirm(lease, row["lease_left"])

    async def _return_idle_shares(self, conn: asyncpg.Connection) -> None:
        """R-SESS-11 across processes (ADR 0019): range shares this process does not
        use go back when another process holds or waits for one, or when this process
        no longer renews the lease; a process serving a session alone keeps its share."""
        idle = self._leases.idle_shares()
        if not idle:
            return
        shares = []
        for lease in idle:
            unused = max(0, lease.share - lease.in_flight)
            lease.share -= unused
            shares.append((lease, unused))
        await self._give_back_ranges(conn, shares)

    # ------------------------------------------------------------------ settings and key
    def settings_store(self) -> PostgresSettingsStore:
        """The settings store of this scheduler's schema, on its pool, validating
        against the environment it started with: the store a process's keeper reads
        (ADR 0022) without connections of its own. Usable once :meth:`start` ran."""
        return PostgresSettingsStore(
            self._require_pool, environment=self._environment, schema=self._schema
        )

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
        self._early.clear()  # the next poll of every waiter is decided anew (R-STRAT-4)
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
        """A new strategy orders the waiters anew, by arrival (O(n), only on change), as
        the in-memory queue re-adds them: the smallest-first key, or under ``ordered``
        each waiter's round-robin turn again (``REKEY_ROUND_TAGS``, migration 0007)."""
        if settings.strategy is not Strategy.SMALLEST_FIRST:
            await conn.execute(sql.REKEY_ROUND_TAGS)
            return
        aging = settings.aging_minutes * 60.0
        after = b""
        async with conn.transaction():
            while rows := await conn.fetch(sql.WAITING_FOR_REKEY, after, REKEY_BATCH):
                keys = [row["session_key"] for row in rows]
                order = [
                    smallest_first_key(row["object_size"], row["arrival"], aging) for row in rows
                ]
                await conn.execute(sql.REKEY_WAITING, keys, order)
                after = keys[-1]
            await conn.execute(sql.FORGET_ALL_ROUNDS)
