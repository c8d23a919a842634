"""The fleet's delivery rate on PostgreSQL (R-EST-1, ADR 0027, ADR 0028).

Behind a load balancer the processes of a fleet take turns with a session's ranges, so
each one peaks in different seconds. The fleet's rate is the peak of their summed
per-second bytes, read as one process reads its own (the busiest five-second mean);
the sum of their own peaks would count one link several times.
"""

from __future__ import annotations

import asyncpg
import pytest

from arkvory_sched import Admitted, Grant, Queued
from arkvory_sched._rate import peak_of_means
from arkvory_sched.postgres import PostgresScheduler
from arkvory_sched.postgres._estimate_inputs import FleetRate
from arkvory_sched.testing import FakeClock
from tests.postgres._helpers import FLEET_SETTINGS, MIB, Connect, download

pytestmark = pytest.mark.anyio

RATE = 10 * MIB  # what the link delivers every second, whichever process sends it
PROCESSES = 3


async def _taking_turns(
    connect: Connect, clock: FakeClock, seconds: int
) -> tuple[list[PostgresScheduler], list[Grant]]:
    """Three processes, each serving its own session, delivering ``RATE`` in turn: one
    process a second, so each one's own peak is ``RATE`` and so is the fleet's. Ends on
    a second's boundary."""
    settings = FLEET_SETTINGS.with_changes(sessions=PROCESSES)
    fleet = [
        await connect(clock=clock, node_id=f"node-{n}", settings=settings) for n in range(PROCESSES)
    ]
    grants: list[Grant] = []
    for n, scheduler in enumerate(fleet):
        decision = await scheduler.admit(download(f"agent-{n}", f"dl-{n}"))
        assert isinstance(decision, Admitted), decision
        grants.append(decision.grant)
    # Someone waits throughout: the slots are busy, so every second is read (ADR 0034).
    assert isinstance(await fleet[0].admit(download("agent-waiting", "dl-w")), Queued)
    for second in range(seconds):
        turn = second % PROCESSES
        # One byte closes the process's idle gap, so the rest lands in this second alone.
        await fleet[turn].progress(grants[turn], 1)
        # Every process ticks, as a running fleet does: the leader notes the slots busy
        # (every one held), and only busy seconds are read into the rate (ADR 0034).
        for scheduler in fleet:
            await scheduler.tick()
        clock.advance(1.0)
        await fleet[turn].progress(grants[turn], RATE - 1)
    return fleet, grants


async def _beat_and_lead(fleet: list[PostgresScheduler]) -> PostgresScheduler:
    """Every process beats (reporting its seconds), then the leader ticks again."""
    for _ in range(2):
        for scheduler in fleet:
            scheduler._fleet.next_heartbeat = 0.0  # the heartbeat is due now
            await scheduler.tick()
    leaders = [scheduler for scheduler in fleet if scheduler.is_leader]
    assert len(leaders) == 1
    return leaders[0]


async def test_processes_peaking_in_turn_make_a_fleet_rate_of_one_link_not_three(
    connect: Connect, db: asyncpg.Connection
) -> None:
    clock = FakeClock()
    fleet, _ = await _taking_turns(connect, clock, seconds=12)
    clock.advance(0.5)
    now = clock.monotonic()
    for scheduler in fleet:  # each sends in at most two of any five seconds
        assert scheduler._meters.rate.peak(now) == pytest.approx(0.4 * RATE, rel=1e-3)
    await _beat_and_lead(fleet)
    stored = await db.fetchval("SELECT fleet_rate FROM queue_state")
    assert stored == pytest.approx(RATE, rel=1e-3), (
        f"fleet rate {stored / MIB:.1f} MiB/s on a {RATE / MIB:.0f} MiB/s link"
    )
    for scheduler in fleet:
        assert (await scheduler.stats()).delivery_rate == pytest.approx(RATE, rel=1e-3)


async def test_the_stored_fleet_rate_is_the_peak_of_the_summed_seconds(
    connect: Connect, db: asyncpg.Connection
) -> None:
    clock = FakeClock()
    fleet, grants = await _taking_turns(connect, clock, seconds=7)
    # Two processes deliver in the same second: the fleet's busiest second, 1.5 RATE.
    for scheduler, grant in zip(fleet[:2], grants[:2], strict=True):
        await scheduler.progress(grant, 1)
    for scheduler in fleet:
        await scheduler.tick()
    clock.advance(1.0)
    await fleet[0].progress(grants[0], RATE - 1)
    await fleet[1].progress(grants[1], RATE // 2 - 1)
    # And one more second of the link, so that second is not the run's last (partial).
    await fleet[2].progress(grants[2], 1)
    for scheduler in fleet:
        await scheduler.tick()
    clock.advance(1.0)
    await fleet[2].progress(grants[2], RATE - 1)
    clock.advance(0.5)
    await _beat_and_lead(fleet)
    now = clock.monotonic()
    summed: dict[int, float] = {}
    for scheduler in fleet:
        first, seconds = scheduler._meters.rate.complete_seconds(now)
        for offset, nbytes in enumerate(seconds):
            summed[first + offset] = summed.get(first + offset, 0.0) + nbytes
    stored = await db.fetchval("SELECT fleet_rate FROM queue_state")
    assert stored == pytest.approx(peak_of_means([summed[s] for s in sorted(summed)]), rel=1e-9)
    # The busiest five inner seconds: four of RATE and the one of 1.5 RATE.
    assert stored == pytest.approx(1.1 * RATE, rel=1e-3)


async def test_a_process_reporting_only_its_peak_still_counts_in_full(
    connect: Connect, db: asyncpg.Connection
) -> None:
    """During a rolling upgrade an older process reports only its own peak (``rate``):
    it is added to the summed peak, as the older leader added every process's."""
    clock = FakeClock()
    fleet, _ = await _taking_turns(connect, clock, seconds=6)
    clock.advance(0.5)
    await db.execute("INSERT INTO fleet_node (node_id, rate) VALUES ('older', $1)", 4.0 * MIB)
    await _beat_and_lead(fleet)
    stored = await db.fetchval("SELECT fleet_rate FROM queue_state")
    assert stored == pytest.approx(RATE + 4 * MIB, rel=1e-3)


async def test_a_minute_without_deliveries_keeps_the_last_fleet_rate(
    connect: Connect, db: asyncpg.Connection
) -> None:
    """As one process keeps its last peak, the fleet keeps its last rate: falling back
    to the leader's own rate would be one process's share of the fleet's."""
    clock = FakeClock()
    fleet, _ = await _taking_turns(connect, clock, seconds=6)
    clock.advance(0.5)
    await _beat_and_lead(fleet)
    clock.advance(90.0)
    for scheduler in fleet:
        assert scheduler._meters.rate.peak(clock.monotonic()) == 0.0
    await _beat_and_lead(fleet)
    stored = await db.fetchval("SELECT fleet_rate FROM queue_state")
    assert stored == pytest.approx(RATE, rel=1e-3)


async def test_a_full_link_served_by_several_processes_opens_no_slot(
    connect: Connect, db: asyncpg.Connection
) -> None:
    """Slots that size themselves (ADR 0038): two processes serve the downloads, the
    link full, a third leads, and eight wait, asking every second. The leader reads the
    other processes' seconds as of their heartbeats, so its newest second lacks their
    bytes; read so, the link looked half idle and the count rose a slot a second to the
    maximum (64 in the gate)."""
    clock = FakeClock()
    settings = FLEET_SETTINGS.with_changes(
        sessions=9, bandwidth=RATE, min_sessions=2, per_principal=9
    )
    fleet = [await connect(clock=clock, node_id=f"node-{n}", settings=settings) for n in range(3)]
    leader = await _beat_and_lead(fleet)
    servers = [scheduler for scheduler in fleet if scheduler is not leader]
    holding: list[tuple[PostgresScheduler, Grant]] = []
    waiting = [download(f"agent-{n}", f"dl-{n}") for n in range(10)]
    warm: int | None = None
    for second in range(30):
        if second == 10:  # past the link's first seconds, read before it was busy
            warm = await db.fetchval("SELECT sessions_in_force FROM queue_state")
        for request in list(waiting):
            server = servers[len(holding) % 2]
            decision = await server.admit(request)
            if isinstance(decision, Admitted):
                waiting.remove(request)
                holding.append((server, decision.grant))
        clock.advance(1.0)
        for server, grant in holding:  # the link, shared by whoever holds a slot
            await server.progress(grant, RATE // len(holding))
        # The leader ticks first: the others' last second reaches it with their next beat.
        for scheduler in [leader, *servers]:
            scheduler._fleet.next_heartbeat = 0.0
            await scheduler.tick()
    # The link's first seconds, before the downloads began, open a few slots; the full
    # link after them opens none.
    published = await db.fetchrow("SELECT sessions_in_force, sizing_reason FROM queue_state")
    assert published["sessions_in_force"] == warm, (warm, dict(published))
    assert warm is not None and warm < 9


async def test_the_delivery_is_read_up_to_the_last_second_every_process_reported(
    connect: Connect, db: asyncpg.Connection
) -> None:
    """ADR 0038: the self-sizing slots read the fleet's delivery up to the last second
    every other live process has reported with its heartbeat; a leader alone reads its
    own to the last. Read two seconds back whatever the fleet, one process stepped a
    slot at a time where memory opened several: the simulation's half-slow crowd was at
    1.13 of the oracle on PostgreSQL, and is at 1.10 read to the last second."""
    await connect()  # the schema, migrated
    await db.execute("DELETE FROM fleet_node")
    rate = FleetRate("leader", lease_seconds=30.0)
    own = (1000, [0.0] * 57 + [2.0 * MIB, 4.0 * MIB, 6.0 * MIB])  # seconds 1000..1059
    alone = await rate.read(db, FLEET_SETTINGS, 1060.2, busy=True, local_seconds=own)
    assert (alone.recent, alone.recent_since) == (5.0 * MIB, 1058.0)
    # Another process, whose last heartbeat brought its seconds up to 1057.
    await db.execute(
        "INSERT INTO fleet_node (node_id, rate_first, rate_seconds) VALUES ('other', 998, $1)",
        [1.0 * MIB] * 60,
    )
    fleet = await rate.read(db, FLEET_SETTINGS, 1060.2, busy=True, local_seconds=own)
    # Seconds 1056 and 1057: the leader's 0 and 2 MiB, the other's 1 MiB each.
    assert (fleet.recent, fleet.recent_since) == (2.0 * MIB, 1056.0)
