"""Queue time from the database (``DatabaseClock``), checked against a real server.

The node's wall clock here is an hour ahead of the database's. Queue times written to
the shared rows must still be the database's epoch seconds (what every other node
reads), while tickets and announced start times follow the node's own wall clock.
"""

from __future__ import annotations

import time

import asyncpg
import pytest

from arkvory_sched import Admitted, Interrupted, Queued, SchedulerSettings
from arkvory_sched.postgres import PostgresScheduler
from arkvory_sched.postgres._db_clock import DatabaseClock
from tests.postgres._helpers import download

pytestmark = pytest.mark.anyio

HOUR = 3600.0
KEYS = [b"db-clock-test-ticket-key-0000001"]


async def test_queue_time_is_the_database_clock_whatever_the_node_wall_clock_says(
    database_url: str, schema: str, db: asyncpg.Connection
) -> None:
    clock = DatabaseClock(wall=lambda: time.time() + HOUR)
    assert clock.monotonic() > time.time() + HOUR - 1, "unsynced: the local wall clock"
    scheduler = await PostgresScheduler.connect(
        database_url,
        schema=schema,
        settings=SchedulerSettings(sessions=1, reserve=0, idle_seconds=30.0),
        clock=clock,
        ticket_keys=KEYS,
        migrate=False,
        pool_size=4,
    )
    try:
        assert clock.synced, "start() samples the database's clock"
        holder = await scheduler.admit(download("holder", "dl-h"))
        assert isinstance(holder, Admitted)
        waiter = await scheduler.admit(download("ann", "dl-a"))
        assert isinstance(waiter, Queued)
        await scheduler.tick()  # the leader judges no-shows on the same clock

        rows = await db.fetch(
            "SELECT arrival, arrival_wall_ms, check_at, no_show_at,"
            " extract(epoch FROM clock_timestamp())::float8 AS db_now FROM download_session"
        )
        assert len(rows) == 2, "the waiter was expired by the node's wall clock"
        for row in rows:
            assert abs(row["arrival"] - row["db_now"]) < 2.0, "queue time is the database's"
            assert row["no_show_at"] > row["db_now"]
            # Tickets carry the node's wall time, which clients compare with theirs.
            assert abs(row["arrival_wall_ms"] / 1000 - (time.time() + HOUR)) < 2.0
        assert abs(waiter.check_at - (time.time() + HOUR)) < waiter.retry_after + 1
        assert waiter.starts_at > time.time() + HOUR - 1
        await scheduler.report(holder.grant, Interrupted())
    finally:
        await scheduler.disconnect()
