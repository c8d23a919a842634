"""Fixtures of the PostgreSQL tests: a real server, one migrated schema per test.

No mocks: what these tests are about (advisory locks, row locks under concurrent
updates, snapshots) only exists in the real server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.pg import drop_schema, new_schema, require_database


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
