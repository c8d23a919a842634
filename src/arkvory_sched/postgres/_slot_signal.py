"""The fleet's slot-free signal: one of the pool's connections listens (ADR 0037).

A slot freed by one process used to be found by the requests other processes hold at
the door only at their next re-check, up to a quarter of a second later: with the
gate's sessions of two seconds that left 4-5 % of the slot-seconds idle while hundreds
waited. Migration 0019 notifies ``arkvory_slot_free`` whenever a slot goes from held to
free (and the leader's tick does when it marked waiters for a free slot); this
connection hears it, drops the process's queue snapshot and wakes only this
process's requests at the door (:meth:`Running.slot_freed_elsewhere`), a handful,
never the third-party tools held further back.

The connection is the pool's, taken for as long as it listens, so a process still
opens ``pool_size`` connections in all; a pool smaller than :data:`MIN_POOL_TO_LISTEN`
keeps all of its few for statements. The signal is a shortcut, never the only way: a
process that does not listen (such a pool, a database down) still re-checks every
second, and one whose connection was lost takes another on a later tick.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any, Final

import asyncpg

from .._exceptions import StoreUnavailableError
from ._boundary import ACQUIRE_TIMEOUT, QUEUE_BOUNDARY
from ._running import Running

__all__ = ["MIN_POOL_TO_LISTEN", "SLOT_FREE_CHANNEL", "SlotSignal"]

log = logging.getLogger("arkvory_sched.postgres")

SLOT_FREE_CHANNEL: Final = "arkvory_slot_free"  # migration 0019, sql/tick.sql
RETRY_SECONDS: Final = 5.0  # between attempts to take a listening connection
# Smaller pools keep every connection for statements: the kept ones (up to half the
# pool), the tick's, and the reads of settings, statistics and the queue's state.
MIN_POOL_TO_LISTEN: Final = 6


class SlotSignal:
    """This process's listening connection, taken from the pool at start and again
    when lost."""

    __slots__ = ("_conn", "_lost", "_next_try", "_pool", "_running", "_schema")

    def __init__(self, running: Running, *, schema: str) -> None:
        self._running = running
        self._schema = schema
        self._pool: asyncpg.Pool | None = None
        self._conn: Any = None
        # Set when the connection closes: the pool then takes it back on its own, and
        # the proxy held here refuses every call (asyncpg's release on close).
        self._lost = False
        self._next_try = 0.0

    @property
    def listening(self) -> bool:
        return self._conn is not None and not self._lost

    async def keep_listening(self, pool: asyncpg.Pool) -> None:
        """Take a connection and listen, if none listens and an attempt is due. The tick
        calls this every time; while the connection is up it costs nothing."""
        if self.listening or pool.get_max_size() < MIN_POOL_TO_LISTEN:
            return
        self._pool = self._conn = None  # a lost one: the pool took it back
        now = time.monotonic()  # the process's own schedule of attempts, not a decision
        if now < self._next_try:
            return
        self._next_try = now + RETRY_SECONDS
        try:
            with QUEUE_BOUNDARY:
                conn = await pool.acquire(timeout=ACQUIRE_TIMEOUT)
                try:
                    await conn.add_listener(SLOT_FREE_CHANNEL, self._heard)
                except BaseException:
                    await pool.release(conn)
                    raise
        except StoreUnavailableError as error:
            log.info("not listening for freed slots yet: %s", error)
            return
        conn.add_termination_listener(self._closed)
        self._pool, self._conn, self._lost = pool, conn, False

    def _heard(self, conn: object, pid: int, channel: str, payload: object) -> None:
        if payload == self._schema:  # the channel is shared by every schema
            self._running.slot_freed_elsewhere()

    def _closed(self, conn: object) -> None:
        self._lost = True

    async def close(self) -> None:
        """Stop listening and give the connection back (before the pool closes, which
        waits for every connection it lent)."""
        pool, conn, lost = self._pool, self._conn, self._lost
        self._pool = self._conn = None
        if pool is None or conn is None or lost:
            return
        with contextlib.suppress(StoreUnavailableError), QUEUE_BOUNDARY:
            conn.remove_termination_listener(self._closed)
            await conn.remove_listener(SLOT_FREE_CHANNEL, self._heard)
        with contextlib.suppress(StoreUnavailableError), QUEUE_BOUNDARY:
            await pool.release(conn)
