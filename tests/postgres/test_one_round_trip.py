"""The two busiest calls in one round trip: ``admit_session`` and ``record_delivery``.

The functions of migration 0003 replace a sequence of statements, so these tests pin
down each of their outcomes against the rows they leave, including the race that a
sequence of statements used to handle in Python (two processes inserting the same
newcomer), and count the statements a newcomer, a poll, a further range of an active
session and a completing delivery send (the benchmarks time these calls; their round
trips are asserted here, where no machine's load can move them).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import anyio
import asyncpg
import pytest

from arkvory_sched import (
    Admitted,
    ByteRange,
    Delivered,
    Queued,
    RangeKind,
    Rejected,
    RejectReason,
    SchedulerSettings,
)
from arkvory_sched.policy import caught_up
from arkvory_sched.postgres import PostgresScheduler
from arkvory_sched.postgres import _sql as sql
from arkvory_sched.postgres import _sql_tick as tick_sql
from arkvory_sched.testing import FakeClock
from tests.postgres._helpers import MIB, SIZE, download, statements_sent

pytestmark = pytest.mark.anyio

LEASE_SECONDS = 10.0
NOW = 1_800_000_000.0


def admit_arguments(key: bytes, principal: str = "agent", **changes: Any) -> list[Any]:
    """``admit_session``'s arguments, named, in the order of its parameters."""
    values: dict[str, Any] = {
        "key": key,
        "principal": principal,
        "rank": 1,
        "has_id": True,
        "size": SIZE,
        "arrival": NOW,
        "arrival_ms": int(NOW * 1000),
        "order_key": None,
        "now": NOW,
        "promote_at": None,
        "check_at": NOW + 2,
        "no_show_at": NOW + 32,
        "queue_limit": 100,
        "per_principal": 10,
        "sessions": 2,
        "interactive": False,
        "reserve": 0,
        "node": "node-a",
        "lease_seconds": LEASE_SECONDS,
        "round_tag": True,
        "round_step": 0.25,
        "count_cap": 1024,
        "object_id": "releases/app.iso",
        "download_id": "dl-1",
        "passable": [],
    }
    unknown = set(changes) - set(values)
    assert not unknown, unknown
    values.update(changes)
    return list(values.values())


@pytest.fixture
async def db(database_url: str, schema: str) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(database_url, server_settings={"search_path": schema})
    try:
        await connection.execute(sql.ENSURE_SLOTS, 2)
        yield connection
    finally:
        await connection.close()


async def admit(db: asyncpg.Connection, key: bytes, **changes: Any) -> asyncpg.Record:
    row: asyncpg.Record = await db.fetchrow(sql.ADMIT_SESSION, *admit_arguments(key, **changes))
    return row


async def test_a_newcomer_alone_takes_a_slot_and_advances_its_class_round(
    db: asyncpg.Connection,
) -> None:
    row = await admit(db, b"k1")
    assert row["outcome"] == "admitted"
    assert row["slot_no"] in (0, 1)
    assert row["lease_token"] > 0
    assert 0 < row["lease_left"] <= LEASE_SECONDS
    assert (row["base_class"], row["queue_rank"], row["state"]) == (1, 1, 1)
    assert (row["object_size"], row["arrival_wall_ms"]) == (SIZE, int(NOW * 1000))
    assert row["waiting_since"] == NOW
    slot = await db.fetchrow("SELECT * FROM download_slot WHERE session_key = $1", b"k1")
    assert slot["lease_token"] == row["lease_token"] and slot["holder_node"] == "node-a"
    session = await db.fetchrow("SELECT * FROM download_session WHERE session_key = $1", b"k1")
    assert session["state"] == 1 and session["slot_since"] == NOW
    round_ = await db.fetchrow("SELECT virtual_time, pass FROM class_state WHERE queue_rank = 1")
    assert (round_["virtual_time"], round_["pass"]) == (int(row["order_key"]), 0.25)


async def test_a_stored_session_comes_back_as_stored_and_nothing_is_written(
    db: asyncpg.Connection,
) -> None:
    first = await admit(db, b"k1")
    tokens = await db.fetchval("SELECT last_value FROM lease_token_seq")
    again = await admit(db, b"k1", principal="someone-else", rank=3, now=NOW + 60)
    assert again["outcome"] == "existing"
    assert again["state"] == 1 and again["principal"] == "agent" and again["base_class"] == 1
    assert (again["slot_no"], again["lease_token"]) == (first["slot_no"], first["lease_token"])
    assert await db.fetchval("SELECT last_value FROM lease_token_seq") == tokens
    assert await db.fetchval("SELECT count(*) FROM download_session") == 1


async def test_newcomers_behind_others_wait_with_their_place_counted_up_to_the_cap(
    db: asyncpg.Connection,
) -> None:
    assert (await admit(db, b"k1", principal="a"))["outcome"] == "admitted"
    assert (await admit(db, b"k2", principal="b"))["outcome"] == "admitted"
    places = []
    for n in range(5):
        row = await admit(db, f"w{n}".encode(), principal=f"p{n}", count_cap=3)
        assert row["outcome"] == "queued" and row["state"] == 0 and row["slot_no"] is None
        places.append(row["own_ahead"])
    assert places == [0, 1, 2, 3, 3]
    assert await db.fetchval("SELECT count(*) FROM download_slot WHERE session_key IS NULL") == 0


async def test_a_newcomer_does_not_jump_a_waiting_session_for_a_free_slot(
    db: asyncpg.Connection,
) -> None:
    await admit(db, b"k1", principal="a")
    await admit(db, b"k2", principal="b")
    await admit(db, b"w1", principal="c")
    await db.execute("UPDATE download_slot SET session_key = NULL, lease_expires_at = NULL")
    row = await admit(db, b"w2", principal="d")
    assert row["outcome"] == "queued" and row["own_ahead"] == 1


async def test_the_bounds_reject_without_writing(db: asyncpg.Connection) -> None:
    await db.execute("UPDATE queue_admitted SET sessions = CASE WHEN shard = 0 THEN 5 ELSE 0 END")
    full = await admit(db, b"k1", queue_limit=5)
    assert full["outcome"] == "queue_full"
    await db.execute("UPDATE queue_admitted SET sessions = 0")
    await admit(db, b"k2", principal="greedy", per_principal=2)
    await admit(db, b"k3", principal="greedy", per_principal=2)
    limited = await admit(db, b"k4", principal="greedy", per_principal=2)
    assert limited["outcome"] == "principal_limit"
    keys = await db.fetch("SELECT session_key FROM download_session ORDER BY session_key")
    assert [r["session_key"] for r in keys] == [b"k2", b"k3"]
    counts = await db.fetchrow(
        "SELECT (SELECT sum(sessions) FROM queue_admitted) AS queue,"
        " (SELECT sessions FROM principal_load WHERE principal = 'greedy') AS greedy"
    )
    assert (counts["queue"], counts["greedy"]) == (2, 2)


async def test_the_last_place_taken_meanwhile_rolls_the_admission_back(
    db: asyncpg.Connection, database_url: str, schema: str
) -> None:
    """R-RES-1 across processes: the count is raised in the admitting statement, so an
    admission that passed the first look while another took the last place writes
    nothing."""
    other = await asyncpg.connect(database_url, server_settings={"search_path": schema})
    raised: list[str] = []

    async def second() -> None:
        with pytest.raises(asyncpg.RaiseError) as caught:
            await admit(other, b"k2", principal="other", queue_limit=1)
        raised.append(caught.value.message)

    try:
        async with anyio.create_task_group() as group:
            transaction = db.transaction()
            await transaction.start()
            first = await admit(db, b"k1", queue_limit=1)
            assert first["outcome"] == "admitted"
            group.start_soon(second)
            await anyio.sleep(0.3)  # the second passed the first look, waits for the count
            await transaction.commit()
        assert raised == ["queue_full"]
    finally:
        await other.close()
    keys = await db.fetch("SELECT session_key FROM download_session")
    assert [r["session_key"] for r in keys] == [b"k1"]
    held = await db.fetchval("SELECT count(*) FROM download_slot WHERE session_key IS NOT NULL")
    assert held == 1
    assert await db.fetchval("SELECT sum(sessions) FROM queue_admitted") == 1


async def test_admissions_far_from_the_limit_do_not_queue_on_one_count(
    db: asyncpg.Connection, database_url: str, schema: str
) -> None:
    """The fleet's count is 16 rows: an admission whose key falls in another row goes
    through while one is still uncommitted, and both are counted."""
    other = await asyncpg.connect(database_url, server_settings={"search_path": schema})
    try:
        async with db.transaction():
            # No slots: both wait, so neither advances a class round (a grant does).
            first = await admit(db, b"\x00first", principal="a", sessions=0)
            assert first["outcome"] == "queued"
            with anyio.fail_after(2):  # would wait for the first commit on one shared row
                second = await admit(other, b"\x01second", principal="b", sessions=0)
            assert second["outcome"] == "queued"
    finally:
        await other.close()
    rows = await db.fetch("SELECT shard, sessions FROM queue_admitted WHERE sessions > 0")
    assert sorted((r["shard"], r["sessions"]) for r in rows) == [(0, 1), (1, 1)]


async def test_near_the_limit_the_count_is_exact(db: asyncpg.Connection) -> None:
    """Within 15 of the limit an admission locks every row and counts exactly."""
    await db.execute("UPDATE queue_admitted SET sessions = CASE WHEN shard = 3 THEN 8 ELSE 0 END")
    taken = await admit(db, b"\x05near", principal="a", queue_limit=9)
    assert taken["outcome"] in ("admitted", "queued")
    full = await admit(db, b"\x06full", principal="b", queue_limit=9)
    assert full["outcome"] == "queue_full"
    assert await db.fetchval("SELECT sum(sessions) FROM queue_admitted") == 9


async def test_turns_go_round_robin_between_principals_as_in_memory(
    db: asyncpg.Connection,
) -> None:
    await admit(db, b"k1", principal="a")
    await admit(db, b"k2", principal="a")
    tags = {}
    for key, principal in ((b"a3", "a"), (b"a4", "a"), (b"b1", "b"), (b"b2", "b")):
        row = await admit(db, key, principal=principal)
        assert row["outcome"] == "queued"
        tags[key] = row["order_key"]
    # a's third and fourth wait one and two rounds ahead of the current one; b's first
    # takes the next round, ahead of a's fourth.
    assert tags[b"b1"] < tags[b"a4"] and tags[b"a3"] < tags[b"a4"] and tags[b"b1"] < tags[b"b2"]
    smallest = await admit(db, b"s1", principal="c", order_key=123.5)
    assert smallest["order_key"] == 123.5


async def test_an_old_arrival_takes_the_next_round_not_its_principals_last(
    db: asyncpg.Connection,
) -> None:
    await admit(db, b"k1", principal="a")
    await admit(db, b"k2", principal="b")
    for n in range(3):
        await admit(db, f"a{n}".encode(), principal="a")
    returning = await admit(db, b"back", principal="a", arrival=NOW - 300)
    fresh = await admit(db, b"fresh", principal="a")
    assert returning["order_key"] < fresh["order_key"]


async def test_two_processes_inserting_one_newcomer_race_to_exactly_one_row(
    database_url: str, schema: str, db: asyncpg.Connection
) -> None:
    """The second sees 'raced' once the first commits; neither raises."""
    other = await asyncpg.connect(database_url, server_settings={"search_path": schema})
    try:
        first = other.transaction()
        await first.start()
        assert (await other.fetchrow(sql.ADMIT_SESSION, *admit_arguments(b"k1")))[
            "outcome"
        ] == "admitted"
        outcomes: list[str] = []

        async def second() -> None:
            outcomes.append((await admit(db, b"k1", node="node-b"))["outcome"])

        async with anyio.create_task_group() as group:
            group.start_soon(second)
            await anyio.sleep(0.3)  # the second blocks on the uncommitted row
            assert outcomes == []
            await first.commit()
        assert outcomes == ["raced"]
        assert (
            await db.fetchval("SELECT count(*) FROM download_slot WHERE session_key = $1", b"k1")
            == 1
        )
    finally:
        await other.close()


# --------------------------------------------------------------------- record_delivery
async def record(
    db: asyncpg.Connection,
    key: bytes,
    token: int,
    slot: int,
    start: int,
    end: int,
    *,
    release: bool = True,
) -> str:
    outcome: str = await db.fetchval(
        sql.RECORD_DELIVERY, key, token, start, end, True, True, NOW + 5, release, slot
    )
    return outcome


async def test_a_delivery_records_then_completes_and_frees_the_slot(
    db: asyncpg.Connection,
) -> None:
    claim = await admit(db, b"k1")
    token, slot = claim["lease_token"], claim["slot_no"]
    assert await record(db, b"k1", token, slot, 0, SIZE // 2) == "recorded"
    assert await db.fetchval("SELECT completed_total FROM queue_state") == 0
    assert await record(db, b"k1", token, slot, SIZE // 2, SIZE) == "completed"
    assert await db.fetchval("SELECT count(*) FROM download_session") == 0
    assert (
        await db.fetchval("SELECT session_key FROM download_slot WHERE slot_no = $1", slot) is None
    )
    state = await db.fetchrow("SELECT completed_total, last_release FROM queue_state")
    assert (state["completed_total"], state["last_release"]) == (1, NOW + 5)


async def test_a_complete_session_keeps_its_slot_while_another_range_is_in_flight(
    db: asyncpg.Connection,
) -> None:
    claim = await admit(db, b"k1")
    outcome = await record(
        db, b"k1", claim["lease_token"], claim["slot_no"], 0, SIZE, release=False
    )
    assert outcome == "recorded"
    assert (
        await db.fetchval("SELECT state FROM download_session WHERE session_key = $1", b"k1") == 1
    )


async def test_an_old_token_changes_nothing(db: asyncpg.Connection) -> None:
    claim = await admit(db, b"k1")
    before = await db.fetchrow("SELECT delivered, last_activity FROM download_session")
    assert await record(db, b"k1", claim["lease_token"] - 1, claim["slot_no"], 0, SIZE) == "fenced"
    after = await db.fetchrow("SELECT delivered, last_activity FROM download_session")
    assert after == before
    assert await db.fetchval("SELECT completed_total FROM queue_state") == 0


# ----------------------------------------------------------------- statements per call
async def test_a_newcomer_and_its_completion_cost_one_statement_each(
    database_url: str, schema: str
) -> None:
    settings = SchedulerSettings(sessions=1, reserve=0, per_principal=1, queue_per_principal=1)
    scheduler = await PostgresScheduler.connect(
        database_url, schema=schema, migrate=False, pool_size=2, settings=settings
    )
    try:
        with statements_sent() as sent:
            first = await scheduler.admit(download("agent", "dl-1"))
        assert isinstance(first, Admitted)
        assert sent == [" ".join(sql.ADMIT_SESSION.split())]

        with statements_sent() as sent:
            second = await scheduler.admit(download("other", "dl-2"))
        assert isinstance(second, Queued) and second.position is None
        assert sent[0] == " ".join(sql.ADMIT_SESSION.split())
        assert len(sent) <= 2  # plus the queue snapshot when its half-second cache is cold

        with statements_sent() as sent:
            await scheduler.report(first.grant, Delivered(ByteRange(0, SIZE, RangeKind.FULL)))
        assert sent == [" ".join(sql.RECORD_DELIVERY.split())]

        limited = await scheduler.admit(download("other", "dl-3"))
        assert isinstance(limited, Rejected) and limited.reason is RejectReason.PRINCIPAL_LIMIT
    finally:
        await scheduler.disconnect()


async def test_a_queued_newcomer_is_one_statement_and_a_further_range_is_none(
    database_url: str, schema: str
) -> None:
    """What ``pg_scale`` times and compares with the in-memory store: a newcomer behind the
    queue is its admission alone, and the next range of a session this process serves
    comes from its lease, without a round trip. Queue time stands still (``FakeClock``),
    so the queue snapshot a first newcomer reads is still fresh for the second."""
    scheduler = await PostgresScheduler.connect(
        database_url,
        schema=schema,
        migrate=False,
        pool_size=2,
        settings=SchedulerSettings(sessions=1, reserve=0),
        clock=FakeClock(),
    )
    first, second = ByteRange(0, MIB, RangeKind.BOUNDED), ByteRange(MIB, 2 * MIB, RangeKind.BOUNDED)
    try:
        active = await scheduler.admit(download("agent", "dl-1", first))
        assert isinstance(active, Admitted)
        await scheduler.report(active.grant, Delivered(first))
        assert isinstance(await scheduler.admit(download("other", "dl-2")), Queued)
        with statements_sent() as sent:
            newcomer = await scheduler.admit(download("third", "dl-3"))
        assert isinstance(newcomer, Queued) and newcomer.position is None
        assert sent == [" ".join(sql.ADMIT_SESSION.split())]
        with statements_sent() as sent:
            further = await scheduler.admit(download("agent", "dl-1", second))
        assert isinstance(further, Admitted)
        assert sent == [], "the lease cache answers a further range"
    finally:
        await scheduler.disconnect()


async def test_a_poll_with_its_ticket_costs_two_statements_and_without_three(
    database_url: str, schema: str
) -> None:
    """A returning waiter asks for its place first (ADR 0020); the same answer either way.

    Each poll comes at the checkAt it was given (an early one costs none, ADR 0029);
    the snapshot a process reads at most once a half second for all its polls is not
    counted as a poll's own."""
    settings = SchedulerSettings(sessions=1, reserve=0)
    clock = FakeClock()
    scheduler = await PostgresScheduler.connect(
        database_url,
        schema=schema,
        migrate=False,
        pool_size=2,
        settings=settings,
        clock=clock,
        ticket_keys=(b"one-round-trip-ticket-key-000001",),
    )
    snapshot = " ".join(sql.QUEUE_SNAPSHOT.split())
    try:
        assert isinstance(await scheduler.admit(download("agent", "dl-1")), Admitted)
        queued = await scheduler.admit(download("other", "dl-2"))
        assert isinstance(queued, Queued) and queued.ticket is not None
        clock.advance(queued.check_at - clock.wall())
        told = await scheduler.admit(replace(download("other", "dl-2"), ticket=queued.ticket))
        assert isinstance(told, Queued)
        clock.advance(told.check_at - clock.wall())
        with statements_sent() as sent:
            with_ticket = await scheduler.admit(
                replace(download("other", "dl-2"), ticket=told.ticket)
            )
        own = [statement for statement in sent if statement != snapshot]
        assert own == [" ".join(sql.POSITION.split()), " ".join(sql.RECORD_CHECK.split())]
        assert isinstance(with_ticket, Queued)
        clock.advance(with_ticket.check_at - clock.wall())
        with statements_sent() as sent:
            without = await scheduler.admit(download("other", "dl-2"))
        own = [statement for statement in sent if statement != snapshot]
        assert own[0] == " ".join(sql.ADMIT_SESSION.split()) and len(own) == 3
        assert isinstance(without, Queued)
        assert with_ticket.position == without.position == 1
    finally:
        await scheduler.disconnect()


@pytest.mark.parametrize(
    ("passes", "idle"),
    [
        ([5.0, 1.0, 3.0, 0.5], [1, 3]),
        ([5.0, 7.0, 3.0, 0.5], [1, 3]),
        ([2.0, 9.0, 4.0, 0.0], [0, 1, 2, 3]),
        ([2.0, 9.0, 4.0, 0.0], []),
    ],
)
async def test_the_leaders_catch_up_is_what_its_ordering_assumed(
    db: asyncpg.Connection, passes: list[float], idle: list[int]
) -> None:
    """The tick orders with ``caught_up`` and writes ``CATCH_UP_IDLE_CLASSES`` at its end."""
    for rank, value in enumerate(passes):
        await db.execute("UPDATE class_state SET pass = $2 WHERE queue_rank = $1", rank, value)
    global_pass = await db.fetchval(sql.GLOBAL_PASS)
    await db.execute(sql.CATCH_UP_IDLE_CLASSES, idle)
    assert list(await db.fetchval(tick_sql.CLASS_PASSES)) == caught_up(passes, idle, global_pass)


async def test_the_global_pass_is_the_pass_the_last_grant_had(db: asyncpg.Connection) -> None:
    """As the in-memory fair queue's: grants are recorded in order, a catch-up is not."""
    assert await db.fetchval(sql.GLOBAL_PASS) == 0.0
    await db.execute(sql.ADVANCE_ROUND, 2, 0, 0.5, 1.0)  # bulk granted at pass 0
    await db.execute(sql.ADVANCE_ROUND, 1, 0, 0.25, 2.0)  # then release, at pass 0
    await db.execute(sql.ADVANCE_ROUND, 2, 0, 0.5, 3.0)  # then bulk again, at pass 0.5
    assert await db.fetchval(sql.GLOBAL_PASS) == 0.5
    await db.execute(sql.CATCH_UP_IDLE_CLASSES, [0, 3])
    assert await db.fetchval(sql.GLOBAL_PASS) == 0.5
    assert list(await db.fetchval(tick_sql.CLASS_PASSES)) == [0.5, 0.25, 1.0, 0.5]


async def _commit_setting_after(db: asyncpg.Connection, statement: str, *arguments: Any) -> str:
    async with db.transaction():
        await db.fetchrow(statement, *arguments)
        setting: str = await db.fetchval("SELECT current_setting('synchronous_commit')")
    return setting


async def test_only_a_grant_waits_for_its_commit_to_reach_the_disk(
    db: asyncpg.Connection,
) -> None:
    """A grant lost in a server crash could be given twice; a waiting row, a poll's
    record or a delivery record lost in one only costs a poll or keeps a slot until the
    idle release."""
    granted = admit_arguments(b"k1", principal="a")
    assert await _commit_setting_after(db, sql.ADMIT_SESSION, *granted) == "on"
    await admit(db, b"k2", principal="b")
    waiting = admit_arguments(b"w1", principal="c")
    assert await _commit_setting_after(db, sql.ADMIT_SESSION, *waiting) == "off"
    check = (b"w1", NOW + 5, NOW + 20, NOW + 10, NOW, NOW + 5)
    assert await _commit_setting_after(db, sql.RECORD_CHECK, *check) == "off"
    assert await db.fetchval("SELECT check_at FROM download_session WHERE session_key = 'w1'") == (
        NOW + 5
    )
    claim = await db.fetchrow(
        "SELECT slot_no, lease_token FROM download_slot WHERE session_key = $1", b"k1"
    )
    delivery = (b"k1", claim["lease_token"], 0, SIZE, True, True, NOW + 5, True, claim["slot_no"])
    assert await _commit_setting_after(db, sql.RECORD_DELIVERY, *delivery) == "off"
    assert await db.fetchval("SELECT current_setting('synchronous_commit')") == "on"


# ------------------------------------------------------------------- the queue's shape
async def _fill_waiting(db: asyncpg.Connection, count: int) -> None:
    await db.execute(
        """
        INSERT INTO download_session (
            session_key, principal, base_class, queue_rank, has_id, object_size, state,
            arrival, arrival_wall_ms, order_key, aging_since, waiting_since, check_at,
            no_show_at, last_activity)
        SELECT ('w' || n)::bytea, 'p' || (n % 97), 2, 2, true, $2, 0, $3::float8,
               ($3::float8 * 1000)::bigint, n, $3::float8, $3::float8, $3::float8 + 3600,
               $3::float8 + 7200, $3::float8
        FROM generate_series(1, $1) AS n
        """,
        count,
        SIZE,
        NOW,
    )


async def test_the_leader_takes_class_lengths_from_the_buckets_not_from_a_scan(
    database_url: str, schema: str, db: asyncpg.Connection
) -> None:
    """Every tick stores exact class lengths; none of its statements counts the queue."""
    waiting = 3000
    await _fill_waiting(db, waiting)
    scheduler = await PostgresScheduler.connect(
        database_url, schema=schema, migrate=False, pool_size=2, settings=SchedulerSettings()
    )
    try:
        with statements_sent() as sent:
            await scheduler.tick()
            await scheduler.tick()
        assert scheduler.is_leader
        assert not [s for s in sent if "count(*) FILTER" in s or "GROUP BY d.base_class" in s]
        lengths = await db.fetchval("SELECT class_lengths FROM queue_state")
        assert list(lengths) == [0, 0, waiting, 0]
        buckets = await db.fetch(
            "SELECT waiting, ahead FROM place_bucket WHERE queue_rank = 2 ORDER BY ahead"
        )
        assert sum(b["waiting"] for b in buckets) == waiting
        assert len(buckets) >= 2  # the first fold cut the first bucket
        assert [b["ahead"] for b in buckets] == [
            sum(b["waiting"] for b in buckets[:i]) for i in range(len(buckets))
        ]
    finally:
        await scheduler.disconnect()


async def test_a_crowd_of_no_shows_is_expired_over_several_ticks(
    database_url: str, schema: str, db: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At most TICK_BATCH a tick, so a crowd that left at once never makes every tick
    fail on the statement timeout; the earliest deadlines go first."""
    monkeypatch.setattr("arkvory_sched.postgres._leader.TICK_BATCH", 2)
    await _fill_waiting(db, 5)
    await db.execute("UPDATE download_session SET no_show_at = order_key")  # 1..5, long past
    scheduler = await PostgresScheduler.connect(
        database_url, schema=schema, migrate=False, pool_size=2, settings=SchedulerSettings()
    )
    try:
        left = []
        for _ in range(3):
            await scheduler.tick()
            left.append(
                await db.fetch("SELECT session_key FROM download_session ORDER BY no_show_at")
            )
        assert [[row[0] for row in rows] for rows in left] == [[b"w3", b"w4", b"w5"], [b"w5"], []]
        assert await db.fetchval("SELECT no_shows_total FROM queue_state") == 5
    finally:
        await scheduler.disconnect()
