"""The scheduler's connection pool: every connection ready before a request needs it.

A newcomer's ``admit`` is one statement (ADR 0011), so anything else a request pays on
the way is visible in its latency. Two costs would otherwise land on requests:

* opening a connection (TCP, authentication, a new PostgreSQL backend process) when a
  burst needs more connections than were open, and
* asyncpg's type introspection on a connection's first statement with array
  parameters or results (three round trips and a recursive catalog query).

Measured on the 2-CPU test machine, the two together added 10-20 ms to the newcomers
that met them, which was most of the p99 of open-loop admission (ADR 0012). So the pool
learns the array codecs in each new connection's ``init`` (before the pool hands it
out, also after a reconnect) and the scheduler opens all connections when it starts;
idle connections are kept rather than closed after asyncpg's default five minutes, so
the first burst after a quiet night is not slower than the rest.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, Final

import asyncpg

from . import _sql as sql

__all__ = ["ARRAY_TYPES", "KeptConnections", "create_pool", "open_all", "warm_connection"]

# The array types the scheduler's statements bind or read (see sql/ and migrations/).
# Core scalar types have built-in codecs; arrays of them are introspected per connection.
# ``LEARN_ARRAY_CODECS`` (sql/pool.sql) names each of them; a unit test keeps the two equal.
ARRAY_TYPES: Final = ("int2", "int4", "int8", "float8", "bool", "bytea", "text")


async def warm_connection(conn: asyncpg.Connection) -> None:
    """The pool's ``init``: learn the array codecs now, not on a request's first use.

    Uses only built-in types, so it works before the schema is migrated.
    """
    await conn.fetchrow(sql.LEARN_ARRAY_CODECS)


async def light_reset(conn: asyncpg.Connection) -> None:
    """What a returned connection needs: no open transaction. The scheduler sets no
    session state, so asyncpg's full reset (a round trip per release) is not needed."""
    if conn.is_in_transaction():
        await conn.execute(sql.ROLLBACK)


async def create_pool(dsn: str, *, schema: str, size: int) -> asyncpg.Pool:
    """A pool that connects lazily (a database down at start must not stop the process,
    R-SET-4) and keeps what it opened; :func:`open_all` fills it once the database
    answers."""
    pool: asyncpg.Pool = await asyncpg.create_pool(
        dsn,
        min_size=0,
        max_size=size,
        max_inactive_connection_lifetime=0,  # 0: idle connections stay open
        server_settings={"search_path": schema},
        command_timeout=5.0,
        init=warm_connection,
        reset=light_reset,
    )
    return pool


async def open_all(pool: asyncpg.Pool, size: int, *, timeout: float = 5.0) -> None:
    """Open ``size`` connections at once (each through ``init``) and put them back.

    Holding them all together is what makes the pool open new ones instead of handing
    out the same connection again. The first error is raised after every connection
    that did open is back in the pool.
    """
    held: list[Any] = []
    results = await asyncio.gather(
        *(pool.acquire(timeout=timeout) for _ in range(size)), return_exceptions=True
    )
    failure: BaseException | None = None
    for result in results:
        if isinstance(result, BaseException):
            failure = failure or result
        else:
            held.append(result)
    for conn in held:
        await pool.release(conn)
    if failure is not None:
        raise failure


class KeptConnections:
    """A few of the pool's connections, kept aside for the statements every download
    runs: a newcomer's ``admit_session`` and the ``record_delivery`` of its ranges.

    On Python 3.11, asyncpg's ``Pool.acquire(timeout=...)`` runs its wait in a task of
    its own and ``Pool.release`` shields another, each with timers and turns of the
    event loop: measured, a third of the Python CPU of a newcomer's admission and
    completion (ADR 0012). Taking a kept connection is a list pop, and giving it back a
    list append. The pool stays the owner of every connection: a kept one is simply
    not returned yet.

    The set fills as it is used: a connection that served a kept statement stays aside
    while fewer than ``size`` are kept; when none is free, the pool's ``acquire`` (with
    its timeout: a slow pool is database trouble, not a hang) lends one. A connection
    goes back to the pool, which resets or reopens it, after anything but a clean exit:
    an error (such as a dropped connection), a cancellation, a transaction left open,
    or once :meth:`return_all` ran.
    """

    __slots__ = ("_idle", "_in_use", "_pool", "_returning", "_size", "_timeout")

    def __init__(self, pool: asyncpg.Pool, size: int, *, timeout: float) -> None:
        self._pool = pool
        self._size = size
        self._timeout = timeout
        self._idle: list[Any] = []
        self._in_use = 0
        self._returning = False

    @property
    def held(self) -> int:
        """Connections out of the pool on this set's account (kept or in use)."""
        return len(self._idle) + self._in_use

    def connection(self) -> _KeptConnection:
        """``async with kept.connection() as conn:`` — a kept connection, or the pool's."""
        return _KeptConnection(self)

    async def return_all(self) -> None:
        """Give every kept connection back to the pool, and the ones in use when they
        are done (before the pool closes, or opens all its connections)."""
        self._returning = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await self._pool.release(conn)

    def keep_again(self) -> None:
        """After :meth:`return_all`: keep connections aside again as they are used."""
        self._returning = False

    async def _take(self) -> Any:
        conn = self._idle.pop() if self._idle else await self._pool.acquire(timeout=self._timeout)
        self._in_use += 1
        return conn

    async def _give_back(self, conn: Any, clean: bool) -> None:
        self._in_use -= 1
        if (
            clean
            and not self._returning
            and len(self._idle) < self._size
            and not conn.is_closed()
            and not conn.is_in_transaction()
        ):
            self._idle.append(conn)
        else:
            await self._pool.release(conn)


class _KeptConnection:
    __slots__ = ("_conn", "_kept")

    def __init__(self, kept: KeptConnections) -> None:
        self._kept = kept
        self._conn: Any = None

    async def __aenter__(self) -> Any:
        self._conn = await self._kept._take()
        return self._conn

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self._kept._give_back(self._conn, clean=kind is None)
