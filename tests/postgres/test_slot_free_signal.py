"""A slot freed by one process wakes the requests another holds at the door (ADR 0037).

Two schedulers on one schema, as two processes of a fleet. The periodic re-check that
would otherwise find the freed slot is pushed out to a minute, so a wait that ends
within the test's bound ended because it was signalled, whatever the machine's speed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator

import anyio
import asyncpg
import pytest

from arkvory_sched import Admitted, ByteRange, Delivered, Queued, RangeKind
from arkvory_sched.postgres import PostgresScheduler
from arkvory_sched.postgres import _estimates as estimates_module
from arkvory_sched.postgres import _running as running_module
from arkvory_sched.postgres import _slot_signal as slot_signal
from arkvory_sched.postgres._slot_signal import MIN_POOL_TO_LISTEN, SLOT_FREE_CHANNEL
from tests.postgres._helpers import FLEET_SETTINGS, SIZE, Connect, download

pytestmark = pytest.mark.anyio

POOL = MIN_POOL_TO_LISTEN  # the smallest pool that gives one of its connections to listen
NEVER = 60.0  # the re-check pushed out of the test's reach
SIGNALLED = 10.0  # a notification takes milliseconds: this bound only catches none


@pytest.fixture(autouse=True)
def no_periodic_recheck(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(running_module, "OTHER_PROCESSES_RECHECK_SECONDS", NEVER)
    yield


async def full_slots(first: PostgresScheduler) -> list[Admitted]:
    """Every slot held by ``first``'s whole-file downloads."""
    held = []
    for n in range(FLEET_SETTINGS.sessions):
        decision = await first.admit(download(f"holder-{n}", f"dl-holder-{n}"))
        assert isinstance(decision, Admitted), decision
        held.append(decision)
    return held


async def finish(scheduler: PostgresScheduler, held: Admitted) -> None:
    await scheduler.report(held.grant, Delivered(ByteRange(0, SIZE, RangeKind.FULL)))


async def woken_at_the_door(
    scheduler: PostgresScheduler, signal: Callable[[], Awaitable[object]]
) -> None:
    """A request at the door of ``scheduler`` is woken by what ``signal`` does, well
    before its periodic re-check (pushed out to :data:`NEVER`)."""
    woken = anyio.Event()

    async def wait_at_the_door() -> None:
        await scheduler.wait_at_the_door(NEVER)
        woken.set()

    async with anyio.create_task_group() as group:
        group.start_soon(wait_at_the_door)
        await anyio.wait_all_tasks_blocked()  # waiting before the signal
        await signal()
        with anyio.fail_after(SIGNALLED):
            await woken.wait()


async def test_a_slot_freed_by_one_process_wakes_a_request_held_at_the_door_by_another(
    connect: Connect,
) -> None:
    first = await connect(node_id="node-a", pool_size=POOL)
    second = await connect(node_id="node-b", pool_size=POOL)
    held = await full_slots(first)
    waiter = await second.admit(download("waiter", "dl-waiter"))
    assert isinstance(waiter, Queued)
    woken = anyio.Event()
    elsewhere = anyio.Event()  # a plain held request: not at the door

    async def wait_at_the_door() -> None:
        await second.wait_at_the_door(NEVER)
        woken.set()

    async def wait_for_change() -> None:
        await second.wait_for_change(NEVER)
        elsewhere.set()

    async with anyio.create_task_group() as group:
        group.start_soon(wait_at_the_door)
        group.start_soon(wait_for_change)
        await anyio.wait_all_tasks_blocked()  # both wait before the slot frees
        await finish(first, held[0])
        with anyio.fail_after(SIGNALLED):
            await woken.wait()
        # Only the requests at the door are woken by another process's release: the
        # third-party tools held further back keep waiting.
        assert not elsewhere.is_set()
        group.cancel_scope.cancel()


async def test_a_marked_waiter_woken_by_another_process_s_release_takes_the_slot(
    connect: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #28: the woken request asks again before its checkAt, and the snapshot the
    process kept (for a minute here, half a second in service) showed every slot held:
    it was told its last answer again (ADR 0029) and left the freed slot empty."""
    monkeypatch.setattr(estimates_module, "SNAPSHOT_SECONDS", NEVER)
    first = await connect(node_id="node-a", pool_size=POOL)
    second = await connect(node_id="node-b", pool_size=POOL)
    held = await full_slots(first)
    request = download("waiter", "dl-waiter")
    assert isinstance(await second.admit(request), Queued)  # its first answer
    await first.tick()  # first becomes the leader
    marks = await first.tick()
    assert marks.marked == 1, "the holders finish within seconds: the next round is marked"
    told = await second.admit(request)
    assert isinstance(told, Queued) and told.at_the_door, told
    await woken_at_the_door(second, lambda: finish(first, held[0]))
    decision = await second.admit(request)  # before its checkAt, as the held request asks
    assert isinstance(decision, Admitted), decision


async def test_another_schema_freeing_a_slot_wakes_nobody(
    connect: Connect, db: asyncpg.Connection
) -> None:
    scheduler = await connect(node_id="node-a", pool_size=POOL)

    async def other_then_own() -> None:
        await db.execute("SELECT pg_notify($1, 'some_other_schema')", SLOT_FREE_CHANNEL)
        # This schema's own notification, sent after the other one, is heard in order:
        # once it woke the wait, the other one had been heard and ignored.
        await db.execute("SELECT pg_notify($1, current_schema())", SLOT_FREE_CHANNEL)

    await woken_at_the_door(scheduler, other_then_own)
    heard: list[str] = []
    await db.add_listener(SLOT_FREE_CHANNEL, lambda *args: heard.append(args[3]))
    await db.execute("SELECT pg_notify($1, 'some_other_schema')", SLOT_FREE_CHANNEL)
    assert heard == ["some_other_schema"], "the channel carries the schema as its payload"


async def test_a_smaller_pool_keeps_its_connections_for_statements(connect: Connect) -> None:
    """Below MIN_POOL_TO_LISTEN every connection is for statements: no wake-up from
    other processes, the re-check finds their freed slots."""
    first = await connect(node_id="node-a", pool_size=POOL)
    second = await connect(node_id="node-b", pool_size=POOL - 1)
    held = await full_slots(first)
    waiter = await second.admit(download("waiter", "dl-waiter"))
    assert isinstance(waiter, Queued)
    woken = {"first": anyio.Event(), "second": anyio.Event()}

    async def wait_at_the_door(name: str, scheduler: PostgresScheduler) -> None:
        await scheduler.wait_at_the_door(NEVER)
        woken[name].set()

    async with anyio.create_task_group() as group:
        group.start_soon(wait_at_the_door, "first", first)
        group.start_soon(wait_at_the_door, "second", second)
        await anyio.wait_all_tasks_blocked()
        await finish(first, held[0])
        # Heard by first's own listener (the same schema): once first was woken,
        # second would have been too, had it listened.
        with anyio.fail_after(SIGNALLED):
            await woken["first"].wait()
        await anyio.sleep(0.2)
        assert not woken["second"].is_set()
        group.cancel_scope.cancel()


async def test_a_tick_marking_waiters_for_a_free_slot_signals_the_fleet(
    connect: Connect, db: asyncpg.Connection
) -> None:
    first = await connect(node_id="node-a", pool_size=POOL)
    await full_slots(first)
    waiter = await first.admit(download("waiter", "dl-waiter"))
    assert isinstance(waiter, Queued)
    await first.tick()  # first becomes the leader
    heard: list[str] = []
    marker = anyio.Event()

    def listen(conn: object, pid: int, channel: str, payload: str) -> None:
        heard.append(payload)
        if payload == "marker":
            marker.set()

    async def heard_until_marker() -> list[str]:
        """What was heard before a marker sent now: notifications arrive in the order
        of their commits, so whatever an earlier commit sent is in by then."""
        nonlocal marker
        marker = anyio.Event()
        await db.execute("SELECT pg_notify($1, 'marker')", SLOT_FREE_CHANNEL)
        with anyio.fail_after(SIGNALLED):
            await marker.wait()
        before = heard[:-1]
        heard.clear()
        return before

    await db.add_listener(SLOT_FREE_CHANNEL, listen)
    schema = await db.fetchval("SELECT current_schema()")
    await first.tick()
    assert await heard_until_marker() == [], "no slot is free: the tick signals nothing"
    await db.execute(
        "UPDATE download_slot SET session_key = NULL, holder_node = NULL,"
        " lease_expires_at = NULL, claimed_at = NULL"
        " WHERE slot_no = (SELECT min(slot_no) FROM download_slot"
        " WHERE session_key IS NOT NULL)"
    )
    assert await heard_until_marker() == [schema], "the release (migration 0019's trigger)"
    report = await first.tick()
    assert report.marked >= 1, report
    assert await heard_until_marker() == [schema], "the marks for the free slot"


async def test_a_lost_listening_connection_is_taken_again_on_a_later_tick(
    connect: Connect, db: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slot_signal, "RETRY_SECONDS", 0.0)
    first = await connect(node_id="node-a", pool_size=POOL)
    second = await connect(node_id="node-b", pool_size=POOL)
    held = await full_slots(first)
    # Only these two schedulers' listeners: another fleet on the same server (a test
    # run beside this one, a demo) listens on connections of its own.
    listeners = [s._signal._conn for s in (first, second)]
    assert all(c is not None for c in listeners), "each scheduler listens"
    pids = [c.get_server_pid() for c in listeners if c is not None]
    terminated = await db.fetchval(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
        " WHERE query LIKE 'LISTEN %' AND pid = ANY($1::int[])",
        pids,
    )
    assert terminated == 2 == len(set(pids)), "each scheduler listened on a connection of its own"
    with anyio.fail_after(SIGNALLED):  # the process notices when the socket closes
        while second._signal.listening:
            await anyio.sleep(0.01)
    await second.tick()  # the pool took the lost one back; a new one listens
    assert second._signal.listening
    await woken_at_the_door(second, lambda: finish(first, held[0]))
