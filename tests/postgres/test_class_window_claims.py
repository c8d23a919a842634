"""Claims of a class outside its windows with a share of slots take turns (R-WIN-2).

The claiming statement counts the slots the class holds against its share; two
processes counting at the same moment could both take the last one, so the claims of
such a class take an advisory lock first. Held here by another connection, it holds a
closed class's claim back, and nothing else.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from zoneinfo import ZoneInfo

import asyncpg
import pytest

from arkvory_sched import Admitted, Decision, DownloadRequest, PrincipalKind, SchedulerSettings
from arkvory_sched.postgres import PostgresScheduler
from arkvory_sched.testing import FakeClock
from tests.postgres._helpers import SIZE

pytestmark = pytest.mark.anyio

NOON = datetime(2026, 6, 5, 12, 0, tzinfo=ZoneInfo("Europe/Berlin")).timestamp()
SETTINGS = SchedulerSettings(
    sessions=4,
    reserve=0,
    per_principal=4,
    class_windows={
        "bulk": {
            "windows": [
                {"weekdays": ["fri"], "start": "22:00", "end": "06:00", "zone": "Europe/Berlin"}
            ],
            "outsideShare": 0.5,
        }
    },
)
LOCK_CLASS = "SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.class_window'), $1)"


def request(principal: str, requested_class: str | None) -> DownloadRequest:
    return DownloadRequest(
        principal=principal,
        principal_kind=PrincipalKind.SERVICE,
        object_id="releases/big.iso",
        object_size=SIZE,
        download_id=f"dl-{principal}",
        client_address="192.0.2.1",
        requested_class=requested_class,
    )


async def test_a_closed_class_claims_its_share_in_turn(
    database_url: str, schema: str, db: asyncpg.Connection
) -> None:
    scheduler = await PostgresScheduler.connect(
        database_url,
        schema=schema,
        migrate=False,
        pool_size=4,
        settings=SETTINGS,
        clock=FakeClock(wall=NOON),
    )
    try:
        held = db.transaction()
        await held.start()
        await db.execute(LOCK_CLASS, 2)  # bulk's turn, taken by someone else
        bulk = asyncio.ensure_future(scheduler.admit(request("fleet", "bulk")))
        # The interleaving of the race, driven: bulk is queued and waits for its turn.
        await blocked_on_the_class_lock(db, bulk)
        # An open class does not wait for it, on three free slots (issue #26).
        release = await scheduler.admit(request("ci", None))
        assert isinstance(release, Admitted)
        assert not bulk.done()
        await held.commit()
        decision = await asyncio.wait_for(bulk, 5.0)
        assert isinstance(decision, Admitted)  # within its share of two
    finally:
        await scheduler.disconnect()


async def blocked_on_the_class_lock(
    db: asyncpg.Connection, admission: asyncio.Future[Decision]
) -> None:
    """Wait until another connection waits for the advisory lock ``db`` holds: the
    barrier that puts the next step inside the race, however fast the machine is."""
    for _ in range(1000):
        waiting = await db.fetchval(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        )
        if waiting:
            return
        assert not admission.done(), admission.result()
        await asyncio.sleep(0.01)
    raise AssertionError("the bulk admission never reached the class's lock")
