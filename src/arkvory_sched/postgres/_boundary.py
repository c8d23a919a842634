"""The one boundary between the PostgreSQL store and its driver.

A database that does not answer shows itself in many shapes: asyncpg's own errors, a
connection terminated mid-query (``InternalClientError``, asyncpg #1069), a refused or
reset socket (``OSError``), a pool or a statement that waits too long
(``TimeoutError``). Only this module names them (:data:`DRIVER_ERRORS`). Every other
part of the package meets one named error instead, :class:`StoreUnavailableError`
(the settings store: :class:`SettingsUnavailableError`), raised ``from`` the driver's
error so the cause stays on it, and decides there what its caller is told (a ``503``
refusal, an answer from the cache, a record kept for later).

Two ways through, both free when nothing fails:

* :class:`Connections` lends the scheduler's connections; whatever the driver raises
  while one is taken or used leaves the ``async with`` as the named error.
* :class:`DriverBoundary` (``with QUEUE_BOUNDARY:``) does the same around a driver call
  that is not on a lent connection — the migrations and the ticket key at start-up — or
  whose failure is answered inside the connection's block (a range that asks for one
  more share of its session); :class:`SettingsBoundary` around the settings store's
  statements.

A statement refusing on purpose (``admit_session`` raising a bound outcome, a unique
violation lost to another process) is caught, as such, around that statement, before it
reaches the boundary.
"""

from __future__ import annotations

import logging
import math
from types import TracebackType
from typing import Any, Final

import asyncpg

from .._clock import Clock
from .._exceptions import SettingsUnavailableError, StoreUnavailableError
from ._pool import KeptConnections, create_pool, open_all

__all__ = [
    "ACQUIRE_TIMEOUT",
    "DRIVER_ERRORS",
    "KEPT_CONNECTIONS",
    "QUEUE_BOUNDARY",
    "Connections",
    "DriverBoundary",
    "SettingsBoundary",
]

log = logging.getLogger("arkvory_sched.postgres")

DRIVER_ERRORS: Final[tuple[type[BaseException], ...]] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,  # a connection terminated mid-query (asyncpg #1069)
    OSError,
    TimeoutError,
)
"""What a lost connection, a restarting server or a slow database raises."""

ACQUIRE_TIMEOUT = 2.0  # seconds a request waits for a connection: longer is database trouble
KEPT_CONNECTIONS = 4  # at most, and at most half the pool (KeptConnections)


def driver_text(error: BaseException) -> str:
    """The driver's message on one line (its class name when it has none)."""
    return " ".join(str(error).split()) or type(error).__name__


class DriverBoundary:
    """``with boundary:`` — a driver error inside leaves as :class:`StoreUnavailableError`
    (``raise … from``, the driver's error its cause); any other error passes unchanged.

    Holds no state, so one value serves every use (:data:`QUEUE_BOUNDARY`).
    """

    __slots__ = ("_what",)

    def __init__(self, what: str) -> None:
        self._what = what

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.translate(error)

    def translate(self, error: BaseException | None) -> None:
        """Raise the named error for a driver's ``error``; leave anything else alone."""
        if error is not None and isinstance(error, DRIVER_ERRORS):
            raise StoreUnavailableError(self.describe(error)) from error

    def describe(self, error: BaseException) -> str:
        return f"{self._what}: {driver_text(error)}"


class SettingsBoundary(DriverBoundary):
    """The settings store's boundary: the port's :class:`SettingsUnavailableError`,
    which every settings store raises (ADR 0022), instead."""

    __slots__ = ()

    def translate(self, error: BaseException | None) -> None:
        if error is not None and isinstance(error, DRIVER_ERRORS):
            raise SettingsUnavailableError(self.describe(error)) from error


QUEUE_BOUNDARY: Final = DriverBoundary("the shared queue cannot be read right now")
"""The scheduler's boundary: its driver errors become :class:`StoreUnavailableError`."""


class _Lent:
    """A connection's ``async with`` whose driver errors leave through the boundary."""

    __slots__ = ("_inner",)

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def __aenter__(self) -> Any:
        with QUEUE_BOUNDARY:
            return await self._inner.__aenter__()

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        with QUEUE_BOUNDARY:
            await self._inner.__aexit__(kind, error, traceback)
        QUEUE_BOUNDARY.translate(error)


class Connections:
    """The scheduler's pool and the few connections kept aside from it.

    Every connection lent here (:meth:`acquire`, :meth:`kept`) leaves driver errors as
    :class:`StoreUnavailableError`. It also remembers when the database last failed
    this process (:meth:`trouble`): the leader does not reap other holders' leases
    while its own database connection was just failing (``last_trouble``).
    """

    def __init__(
        self,
        pool: asyncpg.Pool | None,
        *,
        node: str,
        clock: Clock,
        schema: str,
        size: int,
        owns_pool: bool,
    ) -> None:
        self.pool = pool
        self.dsn: str | None = None
        self.kept_connections: KeptConnections | None = None
        self.last_trouble = -math.inf
        self._node = node
        self._clock = clock
        self._schema = schema
        self._size = size
        self._owns_pool = owns_pool

    def require_pool(self) -> asyncpg.Pool:
        if self.pool is None:
            raise RuntimeError("PostgresScheduler.start() has not run")
        return self.pool

    def acquire(self) -> _Lent:
        """A pooled connection; a slow pool is database trouble, not a hang."""
        return _Lent(self.require_pool().acquire(timeout=ACQUIRE_TIMEOUT))

    def kept(self) -> _Lent:
        """A connection for the statements of every download (a newcomer's admission,
        a range's record), kept out of the pool between them (``KeptConnections``)."""
        kept = self.kept_connections
        if kept is None:
            pool = self.require_pool()
            size = min(KEPT_CONNECTIONS, pool.get_max_size() // 2)
            kept = self.kept_connections = KeptConnections(pool, size, timeout=ACQUIRE_TIMEOUT)
        return _Lent(kept.connection())

    def trouble(self, error: BaseException) -> None:
        """Database trouble met by this process: noted and logged with the driver's
        own message (the cause of a :class:`StoreUnavailableError`)."""
        self.last_trouble = self._clock.monotonic()
        cause = error.__cause__ if isinstance(error, StoreUnavailableError) else None
        log.warning("database trouble on node %s: %s", self._node, cause or error)

    async def open(self) -> None:
        """The pool of a scheduler built from a DSN; it connects lazily (R-SET-4)."""
        if self.pool is None:
            assert self.dsn is not None, "PostgresScheduler needs a pool or a DSN"
            self.pool = await create_pool(self.dsn, schema=self._schema, size=self._size)

    async def open_all(self) -> None:
        """Open every connection of a pool this scheduler owns, once the database
        answers (ADR 0012); the kept ones go back first and are kept again after."""
        if not self._owns_pool:
            return
        kept = self.kept_connections
        if kept is not None:
            await kept.return_all()  # open_all holds every connection at once
        try:
            with QUEUE_BOUNDARY:
                await open_all(self.require_pool(), self._size)
        finally:
            if kept is not None:
                kept.keep_again()

    async def close(self) -> None:
        """Give the kept connections back and close the pool this scheduler opened."""
        if self.kept_connections is not None:
            await self.kept_connections.return_all()
        if self._owns_pool and self.pool is not None:
            await self.pool.close()
