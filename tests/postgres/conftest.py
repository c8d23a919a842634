"""Fixtures of the PostgreSQL tests: a real server, one migrated schema per test.

No mocks: what these tests are about (advisory locks, row locks under concurrent
updates, snapshots) only exists in the real server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from arkvory_sched.postgres import PostgresScheduler
from tests.pg import drop_schema, new_schema, require_database
from tests.postgres._helpers import FLEET_SETTINGS, Connect


@pytest.fixture
def anyio_backend() -> str:
    # asyncpg runs on asyncio only.
    return "asyncio"


@pytest.fixture
def database_url() -> str:
    """The test database's URL; skips (or fails under CI) when it does not answer."""
    return require_database()


@pytest.fixture
async def schema(database_url: str) -> AsyncIterator[str]:
    """A fresh schema with every migration applied, dropped after the test."""
    name = await new_schema()
    try:
        yield name
    finally:
        await drop_schema(name)


@pytest.fixture
async def pool(database_url: str) -> AsyncIterator[asyncpg.Pool]:
    """A pool large enough for the concurrency tests to run truly in parallel."""
    created = await asyncpg.create_pool(database_url, min_size=1, max_size=16)
    try:
        yield created
    finally:
        await created.close()


@pytest.fixture
async def db(database_url: str, schema: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection to the test's schema, for reading and ageing rows directly."""
    connection = await asyncpg.connect(database_url, server_settings={"search_path": schema})
    try:
        yield connection
    finally:
        await connection.close()


@pytest.fixture
async def connect(database_url: str, schema: str) -> AsyncIterator[Connect]:
    """Schedulers on the test's schema, each with its own pool and node id, like the
    processes of one fleet; ``settings`` defaults to ``FLEET_SETTINGS``."""
    made: list[PostgresScheduler] = []

    async def make(**options: object) -> PostgresScheduler:
        options.setdefault("settings", FLEET_SETTINGS)
        options.setdefault("pool_size", 4)
        scheduler = await PostgresScheduler.connect(
            database_url,
            schema=schema,
            migrate=False,
            **options,  # type: ignore[arg-type]
        )
        made.append(scheduler)
        return scheduler

    yield make
    for scheduler in made:
        await scheduler.disconnect()
