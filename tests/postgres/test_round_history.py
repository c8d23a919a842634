"""The round-robin round a waiter enters (migration 0007), against the in-memory rule.

Under ``ordered`` a waiter's place within its class is a round tag. A download that
comes back with an old arrival (a ticket, a pause, a yield, aging) takes the round
that was current when it arrived, found in the rounds' history (R-SESS-9,
R-TICKET-1). The in-memory ``FairQueue`` keeps that history in a deque; the database
keeps it in ``class_round_history``, filled when a grant moves a class's round on. Here
the same sequences of arrivals and grants run through both and must hand out the same
tags.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import asyncpg
import pytest

from arkvory_sched import DownloadClass, SchedulerSettings
from arkvory_sched.memory._fairqueue import FairQueue
from arkvory_sched.memory._session import PrincipalRecord, Session
from arkvory_sched.policy import ROUND_HISTORY_SECONDS, Strategy
from arkvory_sched.postgres import _sql as sql
from arkvory_sched.postgres import _sql_tick as tick_sql
from arkvory_sched.postgres._leader_aging import promote_aged
from tests.postgres._helpers import SIZE
from tests.postgres.test_one_round_trip import admit

pytestmark = pytest.mark.anyio

START = 1_000.0
WEIGHTS = SchedulerSettings().weights


@dataclass(slots=True)
class Stores:
    """One sequence of arrivals and grants, played on the fair queue and the database."""

    db: asyncpg.Connection
    queue: FairQueue
    principals: dict[str, PrincipalRecord]
    waiting: list[Session]
    seq: int = 0

    async def enter(self, principal: str, rank: int, arrival: float) -> tuple[int, int]:
        """A waiter enters class ``rank``: (memory's tag, the database's tag)."""
        record = self.principals.setdefault(principal, PrincipalRecord(principal))
        self.seq += 1
        session = Session(
            key=b"%d" % self.seq,
            principal=record,
            object_size=SIZE,
            base_class=DownloadClass.by_rank(rank),
            has_id=True,
            arrival=arrival,
            arrival_wall_ms=int(arrival * 1000),
            seq=self.seq,
        )
        self.queue.add(session)
        assert session.entry is not None
        self.waiting.append(session)
        tag = await self.db.fetchval(sql.ROUND_TAG, rank, principal, arrival)
        return int(session.entry[0]), tag

    async def grant(self, session: Session, now: float) -> None:
        """The waiter gets a slot: its class's round moves on to its tag (if later)."""
        assert session.entry is not None
        tag, rank = int(session.entry[0]), session.queue_rank
        self.queue.granted(session, now)
        self.waiting.remove(session)
        await self.db.execute(sql.ADVANCE_ROUND, rank, tag, 1.0 / WEIGHTS[rank], now)


@pytest.fixture
def stores(db: asyncpg.Connection) -> Stores:
    return Stores(db, FairQueue(Strategy.ORDERED, WEIGHTS, 0.0), {}, [])


@pytest.mark.parametrize("seed", range(6))
async def test_returning_and_new_arrivals_take_the_rounds_the_fair_queue_gives_them(
    stores: Stores, seed: int
) -> None:
    """Random arrivals (new, or up to half an hour old: beyond the history too) and
    grants in any order, over a queue time that runs past the history's 20 minutes."""
    rng = random.Random(seed)
    now = START
    for step in range(240):
        now += rng.choice((0.0, 0.0, 1.0, 5.0, 30.0, 120.0))
        if stores.waiting and rng.random() < 0.45:
            await stores.grant(rng.choice(stores.waiting), now)
            continue
        old = rng.random() < 0.4
        arrival = now - rng.uniform(0.0, 1.5 * ROUND_HISTORY_SECONDS) if old else now
        principal = rng.choice(("ann", "bob", "ci", "mirror"))
        memory, database = await stores.enter(principal, rng.randrange(4), arrival)
        assert database == memory, f"step {step}: arrival {arrival - START:.0f} s"


async def test_an_arrival_before_the_last_round_takes_the_round_of_its_arrival(
    stores: Stores,
) -> None:
    """R-SESS-9: behind those served from before it, ahead of those who came after it."""
    first, _ = await stores.enter("alpha", 1, START)
    await stores.grant(stores.waiting[0], START)  # alpha: round 1 starts at START
    await stores.enter("beta", 1, START + 1.0)  # round 2
    await stores.enter("gamma", 1, START + 2.0)  # round 2
    await stores.grant(stores.waiting[0], START + 30.0)  # beta: round 2 starts
    returning = await stores.enter("alpha", 1, START)  # back after a pause
    assert returning == (2, 2), "the round current at its arrival, plus one"
    later = await stores.enter("delta", 1, START + 40.0)
    assert later == (3, 3), "a new arrival takes the round after the current one"
    assert first == 1


async def test_the_history_is_forgotten_after_twenty_minutes(
    stores: Stores, db: asyncpg.Connection
) -> None:
    await stores.enter("alpha", 2, START)
    await stores.grant(stores.waiting[0], START)
    await stores.enter("beta", 2, START)
    await stores.grant(stores.waiting[0], START + ROUND_HISTORY_SECONDS + 1.0)
    kept = await db.fetch("SELECT advanced_at FROM class_round_history WHERE queue_rank = 2")
    assert [row["advanced_at"] for row in kept] == [START + ROUND_HISTORY_SECONDS + 1.0]
    # An arrival older than what is kept takes the first round, in memory as here.
    assert await stores.enter("gamma", 2, START + 10.0) == (1, 1)


async def test_a_switch_to_ordered_gives_the_waiters_the_rounds_the_fair_queue_gives(
    stores: Stores, db: asyncpg.Connection
) -> None:
    """Re-keyed by arrival, old arrivals in the rounds of their arrival (R-STRAT-4)."""
    rng = random.Random(7)
    now = START
    for _ in range(40):  # rounds move on in every class
        now += 30.0
        await stores.enter(rng.choice(("ann", "bob")), rng.randrange(4), now)
        await stores.grant(stores.waiting[0], now)
    for n in range(12):
        arrival = now - rng.uniform(0.0, 900.0) if n % 2 else now
        await stores.enter(rng.choice(("ann", "bob", "ci")), rng.randrange(4), arrival)
    for session in stores.waiting:
        assert session.entry is not None
        await db.execute(
            sql.INSERT_SESSION,
            *(session.key, session.principal.name, session.queue_rank, True, SIZE),
            *(session.arrival, session.arrival_wall_ms, session.entry[0], now, None),
            *(now + 2.0, now + 32.0),
        )
    stores.queue.reconfigure(Strategy.ORDERED, WEIGHTS, 60.0)  # aging on: re-keyed
    await db.execute(sql.REKEY_ROUND_TAGS)
    rows = await db.fetch("SELECT session_key, order_key FROM download_session")
    database = {row["session_key"]: row["order_key"] for row in rows}
    memory = {s.key: s.entry[0] for s in stores.waiting if s.entry is not None}
    assert database == memory


async def test_a_principal_without_sessions_starts_its_turns_afresh(
    db: asyncpg.Connection,
) -> None:
    """The fair queue forgets a principal with its last session; so does a newcomer's
    admission: its first waiter takes the next round, not one after turns it had."""
    await db.execute(sql.ENSURE_SLOTS, 1)
    await admit(db, b"holder", principal="other")
    turns = [(await admit(db, b"w%d" % n, principal="ann"))["order_key"] for n in range(3)]
    assert turns == [2.0, 3.0, 4.0]  # the holder took round 1
    # Its three sessions expire (as the leader's no-show expiry counts them).
    await db.execute("DELETE FROM download_session WHERE principal = 'ann'")
    await db.execute("INSERT INTO principal_expired (principal, sessions) VALUES ('ann', 3)")
    again = await admit(db, b"w9", principal="ann")
    assert again["outcome"] == "queued" and again["order_key"] == 2.0


async def test_the_tick_forgets_the_turns_of_a_principal_without_sessions(
    db: asyncpg.Connection,
) -> None:
    await db.execute(sql.ENSURE_SLOTS, 1)
    await admit(db, b"holder", principal="other")
    for n in range(3):
        await admit(db, b"w%d" % n, principal="ann")
    await db.execute("DELETE FROM download_session WHERE principal = 'ann'")
    await db.execute("INSERT INTO principal_expired (principal, sessions) VALUES ('ann', 3)")
    await db.execute(tick_sql.FORGET_OLD_ROUNDS)
    left = await db.fetchval("SELECT count(*) FROM principal_round WHERE principal = 'ann'")
    assert left == 0
    again = await admit(db, b"w9", principal="ann")
    assert again["outcome"] == "queued" and again["order_key"] == 2.0


async def test_aged_waiters_move_up_in_the_order_the_fair_queue_moves_them(
    db: asyncpg.Connection,
) -> None:
    """Two waiters of one principal promoted at one tick take consecutive turns of the
    new class, the one due first the earlier turn (then by arrival order), whatever
    order the rows are stored in."""
    due = {b"due-last": START + 65.0, b"due-first": START + 60.0}  # stored in this order
    for key, promote in due.items():
        await db.execute(
            sql.INSERT_SESSION,
            *(key, "ann", 2, True, SIZE, START, int(START * 1000), 1.0, START, promote),
            *(START + 2.0, START + 32.0),
        )
    await promote_aged(db, SchedulerSettings(aging_minutes=1.0), START + 70.0, 8192)
    rows = await db.fetch("SELECT session_key, queue_rank, order_key FROM download_session")
    placed = {row["session_key"]: (row["queue_rank"], row["order_key"]) for row in rows}
    assert placed == {b"due-first": (1, 1.0), b"due-last": (1, 2.0)}
