"""R-SESS-11 across processes: the shares of a session's ranges (migration 0006, ADR 0019).

The contract suite checks the rule through the port on both stores; these tests pin down
what only the shared store has: what a process serving a session alone pays (nothing per
range once its share has grown), how an idle share reaches a process that waits, what a
dead process's share counts, and the bound under concurrent requests from three processes.
"""

from __future__ import annotations

import anyio
import asyncpg
import pytest

from arkvory_sched import (
    Admitted,
    ByteRange,
    Decision,
    Delivered,
    Interrupted,
    RangeKind,
    Rejected,
    RejectReason,
    SchedulerSettings,
)
from arkvory_sched.postgres import PostgresScheduler
from arkvory_sched.postgres import _sql as sql
from tests.postgres._helpers import MIB, Connect, download, statements_sent

pytestmark = pytest.mark.anyio

RANGE = 4 * MIB


def chunk(index: int) -> ByteRange:
    return ByteRange(index * RANGE, (index + 1) * RANGE, RangeKind.BOUNDED)


def settings(ranges: int) -> SchedulerSettings:
    return SchedulerSettings(sessions=2, reserve=0, per_principal=2, ranges_per_session=ranges)


async def shares(db: asyncpg.Connection) -> dict[str, int]:
    rows = await db.fetch("SELECT node_id, ranges FROM range_share ORDER BY node_id")
    return {row["node_id"]: row["ranges"] for row in rows}


async def range_of(scheduler: PostgresScheduler, index: int) -> Decision:
    return await scheduler.admit(download("ci", "dl-1", chunk(index)))


async def admitted(scheduler: PostgresScheduler, index: int) -> Admitted:
    decision = await range_of(scheduler, index)
    assert isinstance(decision, Admitted), (index, decision)
    return decision


async def refused(scheduler: PostgresScheduler, index: int) -> None:
    decision = await range_of(scheduler, index)
    assert isinstance(decision, Rejected), (index, decision)
    assert decision.reason is RejectReason.RANGES_PER_SESSION


async def heartbeat(scheduler: PostgresScheduler) -> None:
    scheduler._fleet.next_heartbeat = 0.0  # the heartbeat is due now
    await scheduler.tick()


async def test_a_process_serving_a_session_alone_grows_its_share_once_then_asks_nothing(
    connect: Connect, db: asyncpg.Connection
) -> None:
    alone = await connect(node_id="node-a", settings=settings(4))
    first = await admitted(alone, 0)
    assert await shares(db) == {"node-a": 1}, "the claim gives the claimant one range"
    take = " ".join(sql.TAKE_RANGE.split())
    with statements_sent() as sent:
        running = [first] + [await admitted(alone, index) for index in (1, 2, 3)]
    assert sent == [take] * 3, "one statement for each range beyond the share"
    await refused(alone, 4)  # the fifth is over the limit: no statement either
    for index, decision in enumerate(running):
        await alone.report(decision.grant, Delivered(chunk(index)))
    assert await shares(db) == {"node-a": 4}, "kept between ranges: nobody else asked"
    with statements_sent() as sent:
        again = [await admitted(alone, index) for index in (4, 5, 6, 7)]
    assert sent == [], "a grown share serves further ranges without a round trip"
    for decision in again:
        await alone.report(decision.grant, Interrupted())


async def test_an_idle_share_goes_to_a_waiting_process_at_the_holders_heartbeat(
    connect: Connect, db: asyncpg.Connection
) -> None:
    holder = await connect(node_id="node-a", settings=settings(2))
    other = await connect(node_id="node-b", settings=settings(2))
    running = [await admitted(holder, 0), await admitted(holder, 1)]
    for index, decision in enumerate(running):
        await holder.report(decision.grant, Delivered(chunk(index)))
    await refused(other, 2)  # the holder keeps its idle share of 2 until it hears
    assert await shares(db) == {"node-a": 2, "node-b": 0}, "the refused process waits"
    await heartbeat(holder)
    assert await shares(db) == {"node-b": 0}, "the idle share went back"
    late = await admitted(other, 2)
    await other.report(late.grant, Delivered(chunk(2)))
    assert await shares(db) == {"node-b": 1}, "alone now, it keeps its share"
    nearly = await admitted(holder, 3)
    assert await shares(db) == {"node-a": 1, "node-b": 1}
    await holder.report(nearly.grant, Interrupted())
    assert await shares(db) == {"node-b": 1}, "contended: the range's share went back"


async def test_a_share_of_a_process_that_stopped_beating_counts_no_more(
    connect: Connect, db: asyncpg.Connection
) -> None:
    holder = await connect(node_id="node-a", settings=settings(2))
    crashed = await connect(node_id="node-b", settings=settings(2))
    running = await admitted(holder, 0)
    await admitted(crashed, 1)  # in flight when node-b stops: never reported
    await refused(holder, 2)
    await db.execute(
        "UPDATE fleet_node SET heartbeat_at = now() - interval '1 hour' WHERE node_id = 'node-b'"
    )
    further = await admitted(holder, 2)
    assert (await shares(db))["node-a"] == 2
    for decision in (running, further):
        await holder.report(decision.grant, Interrupted())


async def test_concurrent_ranges_from_three_processes_never_exceed_the_limit(
    connect: Connect, db: asyncpg.Connection
) -> None:
    fleet = [await connect(node_id=f"node-{n}", settings=settings(3)) for n in range(3)]
    opened = await admitted(fleet[0], 0)
    decisions: list[tuple[PostgresScheduler, Decision]] = []

    async def ask(index: int) -> None:
        scheduler = fleet[index % 3]
        decisions.append((scheduler, await range_of(scheduler, index)))

    async with anyio.create_task_group() as group:
        for index in range(1, 31):
            group.start_soon(ask, index)
    running = [(s, d) for s, d in decisions if isinstance(d, Admitted)]
    assert 1 + len(running) <= 3, f"{1 + len(running)} ranges in flight with a limit of 3"
    assert sum((await shares(db)).values()) <= 3
    assert {d.reason for _, d in decisions if isinstance(d, Rejected)} <= {
        RejectReason.RANGES_PER_SESSION,
        RejectReason.STORAGE_UNAVAILABLE,  # a lease another process was still taking over
    }
    for scheduler, decision in [(fleet[0], opened), *running]:
        assert isinstance(decision, Admitted)
        await scheduler.report(decision.grant, Interrupted())


async def test_a_released_slot_leaves_no_share_and_a_new_claim_starts_at_one(
    connect: Connect, db: asyncpg.Connection
) -> None:
    scheduler = await connect(node_id="node-a", settings=settings(2))
    first = await admitted(scheduler, 0)
    second = await admitted(scheduler, 1)
    assert await shares(db) == {"node-a": 2}
    await scheduler.report(second.grant, Delivered(chunk(1)))
    await scheduler.report(
        first.grant, Delivered(ByteRange(0, 40 * MIB, RangeKind.FULL))
    )  # the whole object: the session completes and frees its slot
    assert await shares(db) == {}
    other = await scheduler.admit(download("ci", "dl-2", chunk(0)))
    assert isinstance(other, Admitted)
    assert await shares(db) == {"node-a": 1}
    await scheduler.report(other.grant, Interrupted())
