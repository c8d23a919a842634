"""The scheduler's pool: requests meet open connections that already know their types.

Opening a connection and asyncpg's type introspection each cost a request several
milliseconds (ADR 0012); these tests make sure neither happens on the request path,
including after the database dropped every connection.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import asyncpg
import pytest
from asyncpg.connection import Connection

from arkvory_sched import (
    Admitted,
    ByteRange,
    Delivered,
    Queued,
    RangeKind,
    Rejected,
    SchedulerSettings,
)
from arkvory_sched.postgres import PostgresScheduler, _pool
from tests.postgres._helpers import SIZE, download

pytestmark = pytest.mark.anyio

_IN_INIT: contextvars.ContextVar[bool] = contextvars.ContextVar("in_init", default=False)


@contextmanager
def introspections_outside_init(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """The type oids asyncpg introspected anywhere but in the pool's ``init``."""
    seen: list[Any] = []
    original_introspect = Connection._introspect_types
    original_warm = _pool.warm_connection

    async def introspect(self: Connection, typeoids: Any, timeout: Any) -> Any:
        if not _IN_INIT.get():
            seen.append(sorted(typeoids))
        return await original_introspect(self, typeoids, timeout)

    async def warm(conn: asyncpg.Connection) -> None:
        token = _IN_INIT.set(True)
        try:
            await original_warm(conn)
        finally:
            _IN_INIT.reset(token)

    monkeypatch.setattr(Connection, "_introspect_types", introspect)
    monkeypatch.setattr(_pool, "warm_connection", warm)
    yield seen


async def admit_queue_complete_tick(scheduler: PostgresScheduler, name: str) -> None:
    """The request path and a tick, each statement kind once (one slot: the second
    newcomer queues)."""
    first = await scheduler.admit(download(f"{name}-agent", f"{name}-1"))
    assert isinstance(first, Admitted), first
    second = await scheduler.admit(download(f"{name}-other", f"{name}-2"))
    assert isinstance(second, Queued), second
    await scheduler.report(first.grant, Delivered(ByteRange(0, SIZE, RangeKind.FULL)))
    await scheduler.tick()
    await scheduler.admit(download(f"{name}-other", f"{name}-2"))  # the queued one's poll


async def test_a_plain_connection_introspects_array_types_on_first_use(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: what the scheduler's pool saves its requests from."""
    with introspections_outside_init(monkeypatch) as seen:
        conn = await asyncpg.connect(database_url)
        try:
            await conn.fetchval("SELECT cardinality($1::bytea[])", [b"x"])
        finally:
            await conn.close()
    assert seen, "asyncpg no longer introspects arrays: the pool's init may be unneeded"


async def test_start_opens_every_connection_and_requests_introspect_nothing(
    database_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = SchedulerSettings(sessions=1, reserve=0)
    with introspections_outside_init(monkeypatch) as seen:
        scheduler = await PostgresScheduler.connect(
            database_url, schema=schema, migrate=False, pool_size=3, settings=settings
        )
        try:
            pool = scheduler._pool
            assert pool is not None
            assert pool.get_size() == 3
            assert pool.get_idle_size() == 3

            await admit_queue_complete_tick(scheduler, "first")
            assert pool.get_size() == 3  # nothing opened on the way
        finally:
            await scheduler.disconnect()
    assert seen == []


async def test_connections_reopened_after_termination_are_warmed_too(
    database_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with introspections_outside_init(monkeypatch) as seen:
        scheduler = await PostgresScheduler.connect(
            database_url,
            schema=schema,
            migrate=False,
            pool_size=2,
            settings=SchedulerSettings(sessions=1, reserve=0),
        )
        try:
            pool = scheduler._pool
            assert pool is not None
            held = [await pool.acquire(), await pool.acquire()]
            pids = [await conn.fetchval("SELECT pg_backend_pid()") for conn in held]
            for conn in held:
                await pool.release(conn)
            admin = await asyncpg.connect(database_url)
            try:
                killed = [
                    await admin.fetchval("SELECT pg_terminate_backend($1)", pid) for pid in pids
                ]
            finally:
                await admin.close()
            assert killed == [True, True]
            for _ in range(3):  # the first request may meet a dropped connection: 503
                answer = await scheduler.admit(download("probe", "probe"))
                if not isinstance(answer, Rejected):
                    break
            assert isinstance(answer, Admitted), answer
            await scheduler.report(answer.grant, Delivered(ByteRange(0, SIZE, RangeKind.FULL)))
            await admit_queue_complete_tick(scheduler, "after")
        finally:
            await scheduler.disconnect()
    assert seen == []
