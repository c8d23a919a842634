"""Joining and staying in the fleet: start-up and the tick.

Every process ticks (heartbeat, lease renewal, late delivery records, key refresh);
the one that holds the leader lease also runs the queue work (:class:`QueueLeader`).
The stored settings record is not read here: a :class:`~arkvory_sched.SettingsKeeper`
applies it through ``configure`` (:class:`Configuration`), the one mechanism for every
scheduler (ADR 0022).
"""

from __future__ import annotations

import logging
import time

import asyncpg

from .._clock import Clock
from .._exceptions import StoreUnavailableError
from .._model import TickReport
from .._ticking import next_tick_delay
from . import _sql as sql
from ._boundary import QUEUE_BOUNDARY, Connections
from ._db_clock import DatabaseClock
from ._delivery import Delivery
from ._leader import QueueLeader
from ._leader_sizing import FleetSizing
from ._leases import LeaseCache
from ._meters import Meters
from ._migrate import apply_migrations
from ._running import Running
from ._slot_signal import SlotSignal
from ._ticket_key import TicketKeyring

__all__ = ["HEARTBEAT_SECONDS", "Fleet"]

log = logging.getLogger("arkvory_sched.postgres")

HEARTBEAT_SECONDS = 1.0


class Fleet:
    """Start-up, the tick and the fleet duties of one process."""

    def __init__(
        self,
        running: Running,
        connections: Connections,
        leases: LeaseCache,
        leader: QueueLeader,
        delivery: Delivery,
        meters: Meters,
        keyring: TicketKeyring,
        signal: SlotSignal,
        clock: Clock,
        db_clock: DatabaseClock | None,
        *,
        node: str,
        schema: str,
        lease_seconds: float,
    ) -> None:
        self._running = running
        self._connections = connections
        self._leases = leases
        self._leader = leader
        self._delivery = delivery
        self._meters = meters
        self._keyring = keyring
        self._signal = signal
        self._clock = clock
        self._db_clock = db_clock
        self._node = node
        self._schema = schema
        self._lease_seconds = lease_seconds
        self.migrated = True  # False: migrate the DSN's schema before anything else
        self.prepared = False
        # Fleet bookkeeping, on this process's monotonic clock (never queue decisions).
        self.next_heartbeat = 0.0

    async def start(self) -> None:
        """Connect, migrate (writers), read the key, join the fleet.

        A database that is down at start does not stop the process (R-SET-4): the
        pool connects lazily, admissions answer ``503`` until the database is back,
        and migrations and key are retried on later ticks. The stored settings come
        from the process's keeper, which applies them before the first request.
        """
        await self._connections.open()
        try:
            await self._prepare()
        except StoreUnavailableError as error:
            self._connections.trouble(error)
        if self.prepared:  # after open_all, which holds every connection at once
            await self._signal.keep_listening(self._connections.require_pool())

    async def _prepare(self) -> None:
        if not self.migrated:
            dsn = self._connections.dsn
            assert dsn is not None
            with QUEUE_BOUNDARY:
                await apply_migrations(dsn, schema=self._schema)
            self.migrated = True
        await self._keyring.refresh(self._connections.require_pool())
        async with self._connections.acquire() as conn:
            await conn.execute(sql.ENSURE_SLOTS, self._running.settings.sessions)
            await conn.execute(sql.ANALYZE_SLOTS)
            await self._heartbeat(conn, 0.0)
        # The process's own schedule of re-reads, not a queue decision: local time.
        self.next_heartbeat = time.monotonic() + HEARTBEAT_SECONDS
        self.prepared = True
        await self._connections.open_all()

    # ------------------------------------------------------------------ tick
    async def tick(self) -> TickReport:
        started = time.perf_counter()  # measures the tick (not a decision)
        expired = marked = 0
        preempted = False
        try:
            if not self.prepared:
                await self._prepare()
            await self._signal.keep_listening(self._connections.require_pool())
            await self._reread_key_due()
            async with self._connections.acquire() as conn:
                await self._fleet_duties(conn)
                await self._delivery.record_late_deliveries(conn)
                await self._delivery.write_in_flight(conn)
                if await self._leader.elect(conn):
                    now = self._clock.monotonic()
                    outcome = await self._leader.tick(
                        conn,
                        settings=self._running.settings,
                        now=now,
                        in_flight=self._leases.in_flight_keys(),
                        local_rate=self._meters.local_rate(),
                        local_seconds=self._meters.rate.complete_seconds(now),
                        last_trouble=self._connections.last_trouble,
                        closed=self._running.closed,
                        configured=self._running.configured,
                    )
                    expired, marked = outcome.expired, outcome.marked
                    preempted = outcome.preempted
                    self._learn_of_yield(outcome.yielding)
                    for key in outcome.released:
                        self._leases.forget(key)
                running = self._running
                running.take(await FleetSizing.in_force(conn, running.configured))
        except StoreUnavailableError as error:
            self._connections.trouble(error)
            self._leader.step_down()
        except Exception as error:
            # Whatever went wrong, the next tick must run: a process whose tick loop
            # died keeps answering but never renews, reaps or marks again.
            log.exception("tick failed on node %s", self._node)
            self._connections.trouble(error)
            self._leader.step_down()
        self._leases.drop_untrusted_idle()
        duration = time.perf_counter() - started
        self._meters.last_tick_seconds = duration
        self._running.invalidate()
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
        if self._keyring.read_due():
            await self._keyring.refresh(self._connections.require_pool())

    async def _fleet_duties(self, conn: asyncpg.Connection) -> None:
        """Every process: heartbeat, renew held leases, hand back idle range shares."""
        real = time.monotonic()  # the process's own schedule of beats, not a decision
        if real >= self.next_heartbeat:
            self.next_heartbeat = real + HEARTBEAT_SECONDS
            await self._heartbeat(conn, self._meters.local_rate())
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
        first, seconds = self._meters.rate.complete_seconds(self._clock.monotonic())
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
        await self._delivery.give_back_ranges(conn, shares)
