"""The shared ticket key: one key for the whole fleet, whoever creates it first."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from arkvory_sched.postgres import ensure_ticket_key, read_ticket_key
from tests.pg import connect

pytestmark = pytest.mark.anyio

RACERS = 16


async def test_gateways_read_none_until_a_writer_creates_the_key(
    pool: asyncpg.Pool, schema: str
) -> None:
    assert await read_ticket_key(pool, schema) is None
    key = await ensure_ticket_key(pool, schema)
    assert len(key) == 32
    assert await read_ticket_key(pool, schema) == key
    assert await ensure_ticket_key(pool, schema) == key


async def test_writers_racing_to_create_the_key_all_end_with_the_same_key(
    database_url: str, schema: str
) -> None:
    # Separate connections, so the inserts truly race on the row's unique index.
    connections = [await connect() for _ in range(RACERS)]
    start = asyncio.Event()

    async def writer(connection: asyncpg.Connection) -> bytes:
        await start.wait()
        return await ensure_ticket_key(connection, schema)

    try:
        tasks = [asyncio.create_task(writer(connection)) for connection in connections]
        await asyncio.sleep(0.05)
        start.set()
        keys = await asyncio.gather(*tasks)
    finally:
        for connection in connections:
            await connection.close()
    assert len(set(keys)) == 1
    assert len(keys[0]) == 32
