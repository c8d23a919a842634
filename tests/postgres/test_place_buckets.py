"""Places from the leader's buckets (ADR 0020) against the in-memory queue and the truth.

A few thousand waiters from several principals, the same arrivals in both stores:
after a fold every place equals the in-memory queue's. Then waiters leave and others
join ahead without a fold, and every place stays within the stated bound: off by at
most the changes ahead of it since the last fold, exact where the bucket's waiters
ahead were fewer than the exact head, and never higher than before while nobody
joined ahead.
"""

from __future__ import annotations

import random
from dataclasses import replace

import anyio
import asyncpg
import pytest

from arkvory_sched import (
    Admitted,
    DownloadRequest,
    InMemoryDownloadScheduler,
    Queued,
    SchedulerSettings,
    Strategy,
)
from arkvory_sched._session_keys import session_key
from arkvory_sched.policy import PLACE_BUCKET, exact_head
from arkvory_sched.postgres import PostgresScheduler
from arkvory_sched.postgres._migrate import _apply, load_migrations
from arkvory_sched.postgres._sql import POSITION
from arkvory_sched.testing import FakeClock
from tests.pg import connect as pg_connect
from tests.pg import drop_schema, schema_name
from tests.postgres._helpers import Connect, download

pytestmark = pytest.mark.anyio

WAITERS = 2600  # three buckets: the head counted exactly, two from their buckets
PRINCIPALS = 7
LEAVING = 300
JOINING = 40
SETTINGS = SchedulerSettings(sessions=1, reserve=0, per_principal=1)

TRUE_PLACE = """
SELECT count(*) + 1 FROM download_session AS w, download_session AS d
WHERE d.session_key = $1 AND w.state = 0 AND w.queue_rank = d.queue_rank
  AND (w.order_key, w.arrival, w.seq) < (d.order_key, d.arrival, d.seq)
"""
KEY_OF = "SELECT order_key, arrival, seq FROM download_session WHERE session_key = $1"
# Waiters w1..wN of one class in that order, as a queue holds them before migration 0009
# (told to come back far in the future: no tick judges them no-shows).
FILL = """
INSERT INTO download_session (
    session_key, principal, base_class, queue_rank, has_id, object_size, state, arrival,
    arrival_wall_ms, order_key, aging_since, waiting_since, check_at, no_show_at,
    last_activity)
SELECT ('w' || n)::bytea, 'p' || (n % 97), 2, 2, true, 1 << 30, 0, n::float8, n * 1000, 1,
       0, 0, 1e12, 1e12, 0
FROM generate_series(1, $1) AS n
"""


def waiter(index: int) -> DownloadRequest:
    return download(f"agent-{index % PRINCIPALS}", f"wait-{index}")


def key_of(request: DownloadRequest) -> bytes:
    return session_key(
        request.principal, request.object_id, request.download_id, request.client_address
    )


FIRST_TICKETS: dict[tuple[int, int], str] = {}


async def places(
    scheduler: PostgresScheduler | InMemoryDownloadScheduler,
    indexes: list[int],
    clock: FakeClock | None = None,
) -> dict[int, int]:
    """The place each waiter's poll is told now, decided by the store: each asks with
    the ticket of its newcomer's answer (when the test kept it), not of its last, so an
    answer is never repeated to it as to an early poll (ADR 0029) while the test moves
    the queue between polls. ``clock`` moves on a millisecond first: a ticket names
    when it was issued, so the last answer's ticket differs from the first one."""
    if clock is not None:
        clock.advance(0.001)
    answered = {}
    for index in indexes:
        first = FIRST_TICKETS.get((id(scheduler), index))
        decision = await scheduler.admit(replace(waiter(index), ticket=first))
        assert isinstance(decision, Queued), (index, decision)
        assert decision.position is not None
        answered[index] = decision.position
    return answered


async def test_places_match_memory_after_a_fold_and_stay_within_the_bound(
    connect: Connect, db: asyncpg.Connection
) -> None:
    memory = InMemoryDownloadScheduler(SETTINGS, clock=FakeClock())
    pg_clock = FakeClock()
    postgres = await connect(settings=SETTINGS, clock=pg_clock)
    try:
        for store in (memory, postgres):
            assert isinstance(await store.admit(download("holder", "holds-the-slot")), Admitted)
            for index in range(WAITERS):
                first = await store.admit(waiter(index))
                assert isinstance(first, Queued)
                if first.ticket is not None:  # the in-memory store here signs none
                    FIRST_TICKETS[(id(store), index)] = first.ticket
        await postgres.tick()
        rank = await db.fetchval(
            "SELECT queue_rank FROM download_session WHERE session_key = $1", key_of(waiter(0))
        )
        buckets = await db.fetch(
            "SELECT waiting, ahead FROM place_bucket WHERE queue_rank = $1 ORDER BY ahead", rank
        )
        assert len(buckets) >= 3 and max(b["waiting"] for b in buckets) <= 2 * PLACE_BUCKET
        assert sum(1 for b in buckets if b["ahead"] >= exact_head(SETTINGS.sessions)) >= 1

        everyone = list(range(WAITERS))
        expected = await places(memory, everyone)
        folded = await places(postgres, everyone, pg_clock)
        assert folded == expected

        # Waiters leave (as expiries committed by a tick after its fold would), nobody
        # joins: no place rises, and each is off by at most the departures ahead of it.
        rng = random.Random(17)
        leaving = set(rng.sample(everyone, LEAVING))
        keys = {
            index: tuple(await db.fetchrow(KEY_OF, key_of(waiter(index)))) for index in everyone
        }
        await db.execute(
            "DELETE FROM download_session WHERE session_key = ANY($1::bytea[])",
            [key_of(waiter(index)) for index in leaving],
        )
        staying = [index for index in everyone if index not in leaving]
        stale = await places(postgres, staying, pg_clock)
        for index in staying:
            truth = await db.fetchval(TRUE_PLACE, key_of(waiter(index)))
            left_ahead = sum(1 for gone in leaving if keys[gone] < keys[index])
            assert stale[index] <= folded[index], index
            assert truth <= stale[index] <= truth + left_ahead, index
            if truth <= 2 * SETTINGS.sessions:
                assert stale[index] == truth, index

        # New principals join ahead of most (their first turn is the next round).
        joined = [download(f"newcomer-{n}", f"join-{n}") for n in range(JOINING)]
        for newcomer in joined:
            assert isinstance(await postgres.admit(newcomer), Queued)
        joined_keys = [tuple(await db.fetchrow(KEY_OF, key_of(d))) for d in joined]
        mixed = await places(postgres, staying, pg_clock)
        for index in staying:
            truth = await db.fetchval(TRUE_PLACE, key_of(waiter(index)))
            changes_ahead = sum(1 for gone in leaving if keys[gone] < keys[index]) + sum(
                1 for k in joined_keys if k < keys[index]
            )
            assert abs(mixed[index] - truth) <= changes_ahead, index

        # The next fold makes every place exact again.
        await postgres.tick()
        for index, place in (await places(postgres, staying, pg_clock)).items():
            assert place == await db.fetchval(TRUE_PLACE, key_of(waiter(index))), index
    finally:
        await memory.close()


async def test_a_switch_to_smallest_first_rekeys_in_batches_and_buckets_follow(
    connect: Connect, db: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches of two: every waiter gets its new key, and after a fold the places are
    the new order, counted from buckets that hold every waiter once."""
    monkeypatch.setattr("arkvory_sched.postgres._configuration.REKEY_BATCH", 2)
    postgres = await connect(settings=SETTINGS, clock=FakeClock())
    sizes = [5, 1, 4, 2, 3]  # GiB, in arrival order
    downloads = [
        replace(download(f"agent-{n}", f"sized-{n}"), object_size=size << 30)
        for n, size in enumerate(sizes)
    ]
    assert isinstance(await postgres.admit(download("holder", "holds-the-slot")), Admitted)
    for sized in downloads:
        assert isinstance(await postgres.admit(sized), Queued)
    await postgres.configure(SETTINGS.with_changes(strategy=Strategy.SMALLEST_FIRST))
    await postgres.tick()
    told = {}
    for sized in downloads:
        decision = await postgres.admit(sized)
        assert isinstance(decision, Queued)
        told[sized.object_size >> 30] = decision.position
    assert told == {1: 1, 2: 2, 3: 3, 4: 4, 5: 5}
    assert await db.fetchval("SELECT sum(waiting) FROM place_bucket") == len(sizes)
    assert not await db.fetchval("SELECT count(*) FROM queue_change")


async def test_a_queue_that_waits_before_the_migration_is_placed_after_it(
    database_url: str,
) -> None:
    """Migration 0009 on a schema with waiters: the first buckets hold them all, the
    leader's folds cut them, and the places are the exact ones."""
    schema = schema_name("m")
    migrations = load_migrations()
    before = [m for m in migrations if m.version < "0009"]
    connection = await pg_connect()
    try:
        await _apply(connection, schema, before)
        await connection.execute(f'SET search_path TO "{schema}"')
        await connection.execute(FILL, WAITERS)
        await _apply(connection, schema, migrations)
        await connection.execute(f'SET search_path TO "{schema}"')
        assert await connection.fetchval("SELECT sum(waiting) FROM place_bucket") == WAITERS
        postgres = await PostgresScheduler.connect(
            database_url, schema=schema, settings=SETTINGS, migrate=False, pool_size=2
        )
        try:
            for _ in range(3):
                await postgres.tick()
        finally:
            await postgres.disconnect()
        assert (
            await connection.fetchval("SELECT max(waiting) FROM place_bucket") <= 2 * PLACE_BUCKET
        )
        for n in (1, 1500, WAITERS):
            key = f"w{n}".encode()
            told = await connection.fetchrow(POSITION, key, exact_head(SETTINGS.sessions))
            assert told["own_ahead"] + 1 == await connection.fetchval(TRUE_PLACE, key) == n
    finally:
        await connection.close()
        await drop_schema(schema)


BUCKET_DRIFT = """
SELECT b.queue_rank, b.lo, b.waiting,
       waiting_between(b.queue_rank, b.lo,
           coalesce(lead(b.lo) OVER (PARTITION BY b.queue_rank ORDER BY b.lo),
                    '{Infinity,Infinity,Infinity}')) AS counted
FROM place_bucket AS b
"""


async def test_counts_do_not_drift_while_two_processes_admit_and_the_leader_folds(
    connect: Connect, db: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Newcomers from two processes, cuts and merges (buckets of 16), and ticks running
    all the while: once quiet and folded, every bucket holds exactly its waiters and
    every tally its sessions."""
    monkeypatch.setattr("arkvory_sched.postgres._leader.PLACE_BUCKET", 16)
    settings = SchedulerSettings(sessions=1, reserve=0, per_principal=1)
    leader = await connect(settings=settings, node_id="leader")
    other = await connect(settings=settings, node_id="other")
    stop = anyio.Event()
    one_at_a_time = anyio.Lock()  # the test's own connection runs one statement at once

    async def keep_ticking() -> None:
        while not stop.is_set():
            await leader.tick()
            await anyio.sleep(0.01)

    async def admit(scheduler: PostgresScheduler, first: int) -> None:
        for n in range(first, first + 150):
            await scheduler.admit(download(f"agent-{n % 11}", f"drift-{n}"))
            if n % 7 == 0:  # some leave again, as no-shows do
                async with one_at_a_time:
                    await db.execute(
                        "DELETE FROM download_session WHERE session_key = $1",
                        key_of(download(f"agent-{(n - 7) % 11}", f"drift-{n - 7}")),
                    )

    async with anyio.create_task_group() as group:
        group.start_soon(keep_ticking)
        async with anyio.create_task_group() as admitting:
            for number, scheduler in enumerate((leader, other, leader, other)):
                admitting.start_soon(admit, scheduler, number * 150)
        stop.set()
    await leader.tick()
    await leader.tick()
    drift = [row for row in await db.fetch(BUCKET_DRIFT) if row["waiting"] != row["counted"]]
    assert not drift, drift[:5]
    assert len(await db.fetch("SELECT 1 FROM place_bucket")) > 4 * 3  # it did cut
    tallies = await db.fetch(
        "SELECT t.base_class, t.state, t.sessions, coalesce(c.n, 0) AS n FROM session_tally AS t "
        "LEFT JOIN (SELECT base_class, state, count(*) AS n FROM download_session "
        "GROUP BY base_class, state) AS c USING (base_class, state)"
    )
    assert all(row["sessions"] == row["n"] for row in tallies), tallies
