"""``PostgresScheduler`` instances sharing one schema, as processes of one fleet would.

Each scheduler here has its own pool, node id and lease cache, exactly like a separate
process; only the event loop is shared, which lets a test line up races precisely.
Leases are aged by moving ``lease_expires_at``/``heartbeat_at`` back in the database —
the only clock leases use — instead of sleeping.
"""

from __future__ import annotations

from typing import Any

import anyio
import asyncpg
import pytest

from arkvory_sched import (
    Admitted,
    ByteRange,
    Delivered,
    DownloadClass,
    DownloadRequest,
    Interrupted,
    PrincipalKind,
    Queued,
    RangeKind,
    Rejected,
    RejectReason,
    SchedulerSettings,
    SettingsKeeper,
)
from arkvory_sched.postgres import PostgresScheduler, PostgresSettingsStore
from arkvory_sched.testing import FakeClock
from tests.postgres._helpers import FLEET_SETTINGS, MIB, SIZE, Connect, download

pytestmark = pytest.mark.anyio

RANGE = 8 * MIB


def settings(**changes: object) -> SchedulerSettings:
    return FLEET_SETTINGS.with_changes(**changes) if changes else FLEET_SETTINGS


def chunk(index: int) -> ByteRange:
    return ByteRange(index * RANGE, (index + 1) * RANGE, RangeKind.BOUNDED)


async def active_slots(db: asyncpg.Connection) -> int:
    count: int = await db.fetchval(
        "SELECT count(*) FROM download_slot WHERE session_key IS NOT NULL"
    )
    return count


async def test_concurrent_admissions_from_two_processes_never_exceed_the_limit(
    connect: Connect, db: asyncpg.Connection
) -> None:
    first = await connect(node_id="node-a")
    second = await connect(node_id="node-b")
    decisions: list[object] = []

    async def ask(scheduler: PostgresScheduler, n: int) -> None:
        decisions.append(await scheduler.admit(download(f"agent-{n}", f"dl-{n}")))

    async with anyio.create_task_group() as group:
        for n in range(40):
            group.start_soon(ask, first if n % 2 else second, n)
    admitted = [d for d in decisions if isinstance(d, Admitted)]
    queued = [d for d in decisions if isinstance(d, Queued)]
    assert len(admitted) <= 2, f"{len(admitted)} sessions admitted for 2 slots"
    assert len(admitted) + len(queued) + sum(isinstance(d, Rejected) for d in decisions) == 40
    assert await active_slots(db) == len(admitted)
    keys = await db.fetchval(
        "SELECT count(DISTINCT session_key) FROM download_slot WHERE session_key IS NOT NULL"
    )
    assert keys == len(admitted)


async def test_a_range_of_a_session_may_be_served_by_any_process(
    connect: Connect, db: asyncpg.Connection
) -> None:
    first = await connect(node_id="node-a")
    second = await connect(node_id="node-b")
    opened = await first.admit(download("ci", "dl-1", chunk(0)))
    assert isinstance(opened, Admitted)
    await first.report(opened.grant, Delivered(chunk(0)))
    for index in range(1, 5):
        serving = second if index % 2 else first
        decision = await serving.admit(download("ci", "dl-1", chunk(index)))
        assert isinstance(decision, Admitted), (index, decision)
        assert decision.admission == "session"
        await serving.report(decision.grant, Delivered(chunk(index)))
    assert await active_slots(db) == 0, "the last range completed the session"
    assert (await first.stats()).completed_total == 1


async def test_a_holder_with_an_old_token_changes_nothing(
    connect: Connect, db: asyncpg.Connection
) -> None:
    zombie = await connect(node_id="zombie", settings=settings(sessions=1))
    peer = await connect(node_id="peer", settings=settings(sessions=1))
    stale = await zombie.admit(download("ci", "dl-old", chunk(0)))
    assert isinstance(stale, Admitted)
    # The zombie pauses past its lease: it stops renewing and beating.
    await db.execute(
        "UPDATE download_slot SET lease_expires_at = now() - interval '1 second' "
        "WHERE session_key IS NOT NULL"
    )
    await db.execute(
        "UPDATE fleet_node SET heartbeat_at = now() - interval '1 hour' WHERE node_id = 'zombie'"
    )
    await db.execute("UPDATE queue_leader SET expires_at = now() - interval '1 second'")
    await peer.tick()
    assert peer.is_leader
    peer.leader.since -= 3600  # led for long enough to judge holders
    await peer.tick()
    assert await active_slots(db) == 0, "the dead holder's lease was reaped"
    fresh = await peer.admit(download("ann", "dl-new"))
    assert isinstance(fresh, Admitted)
    before = await db.fetchrow("SELECT session_key, lease_token, holder_node FROM download_slot")

    # The zombie wakes up: delivery, completion, renewal and release are all fenced.
    await zombie.report(stale.grant, Delivered(ByteRange(0, SIZE, RangeKind.FULL)))
    await zombie.tick()
    after = await db.fetchrow("SELECT session_key, lease_token, holder_node FROM download_slot")
    assert after == before
    paused = await db.fetchrow(
        "SELECT state, isempty(delivered) AS empty FROM download_session WHERE principal = 'ci'"
    )
    assert paused is not None and paused["state"] == 2 and paused["empty"], dict(paused or {})
    assert not [lease for lease in zombie.debug_leases() if lease.held]
    await peer.report(fresh.grant, Interrupted())


async def test_a_new_leader_frees_nothing_a_live_peer_holds(
    connect: Connect, db: asyncpg.Connection
) -> None:
    holder = await connect(node_id="holder")
    newcomer = await connect(node_id="newcomer")
    decision = await holder.admit(download("ci", "dl-1"))
    assert isinstance(decision, Admitted)
    # A slow database let the lease run out, but the holder still beats.
    await db.execute(
        "UPDATE download_slot SET lease_expires_at = now() - interval '1 second' "
        "WHERE session_key IS NOT NULL"
    )
    await db.execute("UPDATE queue_leader SET expires_at = now() - interval '1 second'")
    await newcomer.tick()
    assert newcomer.is_leader
    newcomer.leader.since -= 3600
    await newcomer.tick()
    assert await active_slots(db) == 1, "a live holder's lease was freed"
    # Its next renewal brings the lease back.
    holder._fleet.next_heartbeat = 0.0
    await holder.tick()
    left = await db.fetchval(
        "SELECT extract(epoch FROM lease_expires_at - now()) FROM download_slot "
        "WHERE session_key IS NOT NULL"
    )
    assert left > 5
    await holder.report(decision.grant, Interrupted())


async def test_leadership_moves_when_the_leader_stops(
    connect: Connect, db: asyncpg.Connection
) -> None:
    first = await connect(node_id="first")
    second = await connect(node_id="second")
    await first.tick()
    await second.tick()
    assert first.is_leader and not second.is_leader
    old_token = await db.fetchval("SELECT token FROM queue_leader")
    await db.execute("UPDATE queue_leader SET expires_at = now() - interval '1 second'")
    await second.tick()
    assert second.is_leader
    assert await db.fetchval("SELECT token FROM queue_leader") == old_token + 1
    await first.tick()  # the old leader comes back: it is fenced out and follows
    assert not first.is_leader
    assert await db.fetchval("SELECT node_id FROM queue_leader") == "second"


async def test_database_trouble_answers_busy_and_active_sessions_continue(
    connect: Connect,
) -> None:
    scheduler = await connect(node_id="node-a")
    active = await scheduler.admit(download("ci", "dl-1", chunk(0)))
    assert isinstance(active, Admitted)
    pool = scheduler._connections.pool
    assert pool is not None
    pool.terminate()  # every connection gone at once, like a database restart
    newcomer = await scheduler.admit(download("ann", "dl-2"))
    assert isinstance(newcomer, Rejected)
    assert newcomer.reason is RejectReason.STORAGE_UNAVAILABLE
    assert newcomer.retry_after >= 1
    follow_up = await scheduler.admit(download("ci", "dl-1", chunk(1)))
    assert isinstance(follow_up, Admitted), "a valid lease keeps serving without the database"
    await scheduler.report(follow_up.grant, Delivered(chunk(1)))  # recorded nowhere, no error
    report = await scheduler.tick()
    assert report.duration >= 0
    stats = await scheduler.stats()
    assert stats.rejections_total[RejectReason.STORAGE_UNAVAILABLE] == 1


async def test_unreachable_database_at_start_does_not_stop_the_process() -> None:
    scheduler = await PostgresScheduler.connect(
        "postgresql://postgres@127.0.0.1:9/none", settings=settings(), migrate=False
    )
    try:
        decision = await scheduler.admit(download("ci", "dl-1"))
        assert isinstance(decision, Rejected)
        assert decision.reason is RejectReason.STORAGE_UNAVAILABLE
        await scheduler.tick()
    finally:
        await scheduler.disconnect()


async def test_the_keeper_applies_stored_settings_only_when_newer(
    connect: Connect, database_url: str, schema: str
) -> None:
    scheduler = await connect(node_id="node-a")
    assert scheduler.settings.sessions == 2
    store = PostgresSettingsStore(database_url, environment=settings(), schema=schema)
    keeper = SettingsKeeper(store, scheduler)
    try:
        saved = await store.compare_and_set({"sessions": 5}, expected_revision=0, updated_by="ops")
        assert await keeper.refresh()
        assert scheduler.settings.sessions == 5
        assert (keeper.revision, keeper.updated_by) == (saved.revision, "ops")
        assert not await keeper.refresh(), "the same revision is not applied twice"
        await store.compare_and_set({}, expected_revision=saved.revision, updated_by="ops")
        assert await keeper.refresh()
        assert scheduler.settings.sessions == 2, "{} returns to the environment"
    finally:
        await store.close()


async def test_a_cached_lease_is_trusted_for_two_seconds_of_the_schedulers_clock(
    connect: Connect, db: asyncpg.Connection
) -> None:
    """With a clock passed in, the cache's trust runs on it, not on real time: the same
    requests at the same queue times are answered from the cache, or from the
    database, however fast the machine runs (ADR 0017)."""
    clock = FakeClock()
    holder = await connect(node_id="holder", clock=clock)
    first = await holder.admit(download("ci", "dl-1", chunk(0)))
    assert isinstance(first, Admitted)
    await holder.report(first.grant, Delivered(chunk(0)))
    # The slot is freed behind this process's back (another process's release).
    await db.execute(
        "UPDATE download_slot SET session_key = NULL, holder_node = NULL, lease_expires_at = NULL"
    )
    cached = await holder.admit(download("ci", "dl-1", chunk(1)))
    assert isinstance(cached, Admitted), "trusted: answered without asking"
    await holder.report(cached.grant, Interrupted())
    clock.advance(2.5)  # real time: a few milliseconds
    asked = await holder.admit(download("ci", "dl-1", chunk(2)))
    assert isinstance(asked, Rejected), "no longer trusted: the database says it is gone"


async def test_the_keeper_applies_new_settings_with_a_pool_of_two(
    database_url: str, schema: str
) -> None:
    """The keeper reads through the scheduler's own pool (``settings_store()``, as the
    demo does) and configures it from its own task: with a pool of two, one connection
    kept aside for admissions, and a response admitted, the change still applies
    without waiting for ever."""
    scheduler = await PostgresScheduler.connect(
        database_url, schema=schema, migrate=False, pool_size=2, settings=settings()
    )
    store = PostgresSettingsStore(database_url, environment=settings(), schema=schema)
    try:
        decision = await scheduler.admit(download("ci", "dl-1"))  # keeps a connection
        assert isinstance(decision, Admitted)
        await store.compare_and_set({"sessions": 3}, expected_revision=0, updated_by="ops")
        keeper = SettingsKeeper(scheduler.settings_store(), scheduler)
        with anyio.fail_after(10):
            assert await keeper.refresh()
            await scheduler.tick()
        assert keeper.revision == 1
        assert scheduler.settings.sessions == 3
        await scheduler.report(decision.grant, Interrupted())
    finally:
        await store.close()
        await scheduler.disconnect()


async def test_a_gateway_without_the_key_works_without_tickets_until_it_appears(
    connect: Connect,
) -> None:
    gateway = await connect(node_id="gateway", writer=False, settings=settings(sessions=1))
    holder = await gateway.admit(download("ci", "dl-1"))
    assert isinstance(holder, Admitted)
    assert holder.ticket is None
    assert not gateway.ticket_signing
    writer = await connect(node_id="writer", settings=settings(sessions=1))
    assert writer.ticket_signing
    await gateway.refresh_ticket_key()
    queued = await gateway.admit(download("ann", "dl-2"))
    assert isinstance(queued, Queued)
    assert queued.ticket is not None
    again = await writer.admit(download("ann", "dl-2", None))
    assert isinstance(again, Queued)
    assert again.ticket is not None
    assert again.ticket.split(".")[1] == queued.ticket.split(".")[1], "same arrival on both"
    await gateway.report(holder.grant, Interrupted())


async def test_a_bulk_protocol_client_yields_its_slot_to_a_waiting_person(
    connect: Connect,
) -> None:
    clock = FakeClock(wall=1_780_000_000.0)
    scheduler = await connect(
        node_id="node-a", clock=clock, settings=settings(sessions=1, preempt=True)
    )

    def mirror(index: int) -> DownloadRequest:
        return DownloadRequest(
            principal="mirror",
            principal_kind=PrincipalKind.SERVICE,
            object_id="releases/big.iso",
            object_size=SIZE,
            byte_range=chunk(index),
            download_id="dl-m",
            requested_class="bulk",
        )

    for index in range(2):  # a bulk mirror holds the only slot for over a minute …
        decision = await scheduler.admit(mirror(index))
        assert isinstance(decision, Admitted)
        await scheduler.report(decision.grant, Delivered(chunk(index)))
        clock.advance(25.0)
    person = DownloadRequest(
        principal="ann",
        principal_kind=PrincipalKind.PERSON,
        object_id="releases/big.iso",
        object_size=SIZE,
        download_id="dl-p",
    )
    assert isinstance(await scheduler.admit(person), Queued)  # … while a person waits
    decision = await scheduler.admit(mirror(2))
    assert isinstance(decision, Admitted)
    await scheduler.report(decision.grant, Delivered(chunk(2)))
    clock.advance(15.0)
    report = await scheduler.tick()
    assert report.preempted
    scheduler._fleet.next_heartbeat = 0.0  # renew now: the lease carries the yield
    await scheduler.tick()
    yielded = await scheduler.admit(mirror(3))
    assert isinstance(yielded, Queued), yielded
    clock.advance(1.0)
    started = await scheduler.admit(person)
    assert isinstance(started, Admitted), started
    assert started.download_class is DownloadClass.INTERACTIVE
    clock.advance(1.0)
    await scheduler.tick()
    assert isinstance(await scheduler.admit(mirror(3)), Queued), "blocked while the head waits"
    stats = await scheduler.stats()
    assert stats.preemptions_total == 1
    assert (stats.active, stats.waiting) == (1, 1)
    await scheduler.report(started.grant, Interrupted())


async def test_a_delivery_record_lost_to_an_outage_is_written_on_a_later_tick(
    connect: Connect, db: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    scheduler = await connect(node_id="node-a", settings=settings(sessions=1))
    decision = await scheduler.admit(download("ci", "dl-1"))
    assert isinstance(decision, Admitted)
    record = scheduler._delivery.record_delivery
    failures = [asyncpg.ConnectionDoesNotExistError("connection was closed mid-operation")]

    async def dropped_once(*args: Any) -> None:
        if failures:  # the connection dies under the first write, as in a restart
            raise failures.pop()
        await record(*args)

    monkeypatch.setattr(scheduler._delivery, "record_delivery", dropped_once)
    await scheduler.report(decision.grant, Delivered(ByteRange(0, SIZE, RangeKind.FULL)))
    assert await active_slots(db) == 1, "the record could not be written"
    await scheduler.tick()
    assert await active_slots(db) == 0, "written late, the delivery completed the session"
    assert (await scheduler.stats()).completed_total == 1


async def test_one_process_of_the_fleet_reports_the_fleet_wide_figures(connect: Connect) -> None:
    """Fleet-wide figures come from the shared tables: exported by every process, a sum
    over the fleet would count them once per process (R-VIS-3)."""
    clock = FakeClock()
    first = await connect(clock=clock, node_id="node-a")
    second = await connect(clock=clock, node_id="node-b")
    for scheduler in (first, second, first, second):
        await scheduler.tick()
    reports = [(await s.stats()).reports_fleet_figures for s in (first, second)]
    assert sorted(reports) == [False, True]
    assert reports[0] is first.is_leader
