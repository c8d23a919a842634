"""The leader's reading of the self-sizing slots on PostgreSQL (issue #30, ADR 0038):
a held slot's pace over the time its bytes cover."""

from __future__ import annotations

import asyncpg
import pytest

from arkvory_sched import Admitted
from arkvory_sched.policy import LinkRate, SizingReason
from arkvory_sched.postgres import _sql_tick as tick_sql
from arkvory_sched.postgres._delivery import IN_FLIGHT_SECONDS
from arkvory_sched.postgres._estimate_inputs import RateReading
from arkvory_sched.postgres._leader_sizing import FleetSizing
from arkvory_sched.testing import FakeClock
from tests.postgres._helpers import FLEET_SETTINGS, MIB, Connect, download

pytestmark = pytest.mark.anyio

LINK = 40 * MIB


async def test_bytes_in_flight_carry_the_time_they_were_written(
    connect: Connect, db: asyncpg.Connection
) -> None:
    """What a running response has sent reaches the table about once a second; the
    leader reads it with the time it was written. A stalled response's count is written
    again unmoved, so its time says no byte came since."""
    clock = FakeClock()
    scheduler = await connect(clock=clock)
    decision = await scheduler.admit(download("agent", "dl-1"))
    assert isinstance(decision, Admitted), decision

    async def read() -> tuple[int, float | None]:
        row = await db.fetchrow(tick_sql.ACTIVE_FOR_ESTIMATE)
        return row["covered"], row["sent_as_of"]

    assert await read() == (0, None)  # nothing sent: whole up to now
    await scheduler.progress(decision.grant, MIB)
    await scheduler.tick()  # writes the count
    written = clock.monotonic()
    clock.advance(IN_FLIGHT_SECONDS / 2)
    await scheduler.progress(decision.grant, MIB)
    await scheduler.tick()  # too soon to write again
    assert await read() == (MIB, written)
    clock.advance(IN_FLIGHT_SECONDS / 2)
    await scheduler.tick()
    assert await read() == (2 * MIB, clock.monotonic())
    clock.advance(IN_FLIGHT_SECONDS)  # the client stalls
    await scheduler.tick()
    assert await read() == (2 * MIB, clock.monotonic())


async def test_paces_are_read_over_the_time_their_bytes_cover(
    connect: Connect, db: asyncpg.Connection
) -> None:
    """Sixteen downloads share a full link evenly, 2.5 MiB/s each, for 3 s, their bytes
    as of half a second back; a seventeenth took its slot a moment ago. Read up to the
    tick, each pace looked a sixth low, the new download seemed to have a third of the
    link to itself, and every other one looked limited by its client: the count rose.
    Read up to when the bytes were written, the link is full of downloads nothing
    limits, and the count does not rise."""
    await connect()  # the schema, migrated
    settings = FLEET_SETTINGS.with_changes(
        sessions=64, min_sessions=2, per_principal=64, bandwidth=LINK
    )
    now, since = 1000.0, 997.0
    reading = RateReading(LINK, LINK, LinkRate(LINK, known=True), recent=LINK, recent_since=now - 2)

    async def count_after(sent_as_of: float | None) -> int:
        await db.execute("UPDATE queue_state SET sessions_in_force = 17")
        sent = LINK / 16 * (now - IN_FLIGHT_SECONDS / 2 - since)
        rows = [{"covered": sent, "slot_since": since, "sent_as_of": sent_as_of} for _ in range(16)]
        rows.append({"covered": 0.0, "slot_since": now - 0.2, "sent_as_of": None})
        sizing = FleetSizing()
        first = await sizing.step(db, settings, now - 1.0, 5, rows, reading)
        assert first is not None and first[1] == (17, SizingReason.START.value, 0)
        write = await sizing.step(db, settings, now, 5, rows, reading)
        assert write is not None
        count = write[1][0]
        assert isinstance(count, int)
        return count

    assert await count_after(now - IN_FLIGHT_SECONDS / 2) <= 17
    assert await count_after(None) == 18  # as the tick read them before
