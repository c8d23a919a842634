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
            pool = scheduler._connections.pool
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
            pool = scheduler._connections.pool
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


# --- kept connections -----------------------------------------------------------------


async def _admit_and_complete(scheduler: PostgresScheduler, name: str) -> None:
    answer = await scheduler.admit(download(name, name))
    assert isinstance(answer, Admitted), answer
    await scheduler.report(answer.grant, Delivered(ByteRange(0, SIZE, RangeKind.FULL)))


async def test_newcomers_and_their_records_run_on_kept_connections(
    database_url: str, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    scheduler = await PostgresScheduler.connect(
        database_url, schema=schema, migrate=False, pool_size=4
    )
    try:
        pool = scheduler._connections.pool
        assert pool is not None
        await _admit_and_complete(scheduler, "warm")
        kept = scheduler._connections.kept_connections
        assert kept is not None
        assert kept.held == 1  # the one connection that served both statements
        calls: list[str] = []
        original_acquire, original_release = asyncpg.Pool.acquire, asyncpg.Pool.release

        def counting_acquire(self: asyncpg.Pool, *, timeout: float | None = None) -> Any:
            calls.append("acquire")
            return original_acquire(self, timeout=timeout)

        async def counting_release(
            self: asyncpg.Pool, connection: Any, *, timeout: float | None = None
        ) -> None:
            calls.append("release")
            await original_release(self, connection, timeout=timeout)

        monkeypatch.setattr(asyncpg.Pool, "acquire", counting_acquire)
        monkeypatch.setattr(asyncpg.Pool, "release", counting_release)
        for index in range(20):
            await _admit_and_complete(scheduler, f"newcomer-{index}")
        assert calls == []  # neither the pool's acquire nor its release ran
        assert pool.get_idle_size() == pool.get_size() - kept.held

        await kept.return_all()
        assert kept.held == 0
        assert pool.get_idle_size() == pool.get_size()
    finally:
        await scheduler.disconnect()


async def test_a_kept_connection_is_returned_to_the_pool_unless_it_ended_cleanly(
    pool: asyncpg.Pool,
) -> None:
    kept = _pool.KeptConnections(pool, 2, timeout=2.0)
    async with kept.connection() as conn:
        assert await conn.fetchval("SELECT 1") == 1
    assert kept.held == 1  # kept aside for the next statement
    async with kept.connection() as again:
        assert again is conn  # a list pop, not the pool's acquire
    with pytest.raises(asyncpg.DataError):
        async with kept.connection() as conn:
            await conn.fetchval("SELECT 1 / $1::int", "x")
    assert kept.held == 0  # after an error the pool resets or reopens it
    async with kept.connection() as conn:
        await conn.execute("BEGIN")  # left open: not fit for the next statement
    assert kept.held == 0  # back in the pool, which rolls it back
    async with kept.connection() as conn:
        assert not conn.is_in_transaction()
    assert kept.held == 1
    await kept.return_all()
    kept.keep_again()
    busy = [kept.connection() for _ in range(3)]
    conns = [await context.__aenter__() for context in busy]
    assert len({id(conn) for conn in conns}) == 3  # beyond the kept ones, the pool lends
    for context in busy:
        await context.__aexit__(None, None, None)
    assert kept.held == 2  # at most ``size`` are kept
    assert pool.get_idle_size() == pool.get_size() - 2
    await kept.return_all()  # the pool closes only once every connection is back
    assert pool.get_idle_size() == pool.get_size()


async def test_a_kept_connection_whose_backend_was_terminated_is_replaced(
    database_url: str, schema: str
) -> None:
    scheduler = await PostgresScheduler.connect(
        database_url, schema=schema, migrate=False, pool_size=2
    )
    try:
        await _admit_and_complete(scheduler, "warm")
        kept = scheduler._connections.kept_connections
        assert kept is not None and kept.held == 1
        async with kept.connection() as conn:
            pid = await conn.fetchval("SELECT pg_backend_pid()")
        admin = await asyncpg.connect(database_url)
        try:
            assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
        finally:
            await admin.close()
        answers = []
        for index in range(3):  # the dropped connection may cost one request a 503
            answer = await scheduler.admit(download(f"after-{index}", f"after-{index}"))
            answers.append(answer)
            if isinstance(answer, Admitted):
                break
            assert isinstance(answer, Rejected), answer
        assert isinstance(answers[-1], Admitted), answers
        await scheduler.report(answers[-1].grant, Delivered(ByteRange(0, SIZE, RangeKind.FULL)))
        async with kept.connection() as conn:
            assert await conn.fetchval("SELECT pg_backend_pid()") != pid
    finally:
        await scheduler.disconnect()
