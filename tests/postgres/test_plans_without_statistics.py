"""The shared queue right after a burst, before anything analysed the table (issue #26).

A mass update arrives faster than autovacuum analyses ``download_session``: until it
does, the planner knows nothing of the rows, and a statement whose plan depends on
what ``pg_stat`` says may walk a whole class on every poll. Here autovacuum is off for
the schema's tables and the test never runs ``ANALYZE``: 2,048 downloads wait, then
30,720 newcomers arrive in one burst and the leader folds them into place buckets (ADR
0020). ``auto_explain`` reports every statement the scheduler runs, with its plan and
the buffers it read; buffers, unlike times, do not move with the machine's load.

- With the leader's own ``ANALYZE`` held back, a poll at the back of 32,768 waiting
  reads at most twice the buffers of a poll at the back of 2,048, and its count is one
  bounded range of ``download_session_place``: the poll needs no statistics.
- The leader analyses the table at its next tick after the burst; from then on no
  statement of the hot paths — admission, poll, claim, tick and marking, a person's
  own downloads, the queue state — reads ``download_session`` whole or throws away
  more rows of it than two place buckets hold.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import asyncpg
import pytest
from benchmarks.pg_burst import burst, request

from arkvory_sched import (
    Admitted,
    Delivered,
    DownloadRequest,
    Queued,
    SchedulerSettings,
)
from arkvory_sched.policy import PLACE_BUCKET
from arkvory_sched.postgres import PostgresOptions, PostgresScheduler, _leader
from arkvory_sched.postgres import _sql as sql
from arkvory_sched.postgres._pool import light_reset, warm_connection
from arkvory_sched.testing import FakeClock

pytestmark = [
    pytest.mark.anyio,
    # The listener stays for the connection's life: asyncpg warns at every release.
    pytest.mark.filterwarnings("ignore:.*active log listener:asyncpg.InterfaceWarning"),
]

BEFORE = 2_048
BURST = 30_720
NEVER_ANALYSED = (
    "SELECT last_analyze IS NULL AND last_autoanalyze IS NULL FROM pg_stat_user_tables"
    " WHERE relid = 'download_session'::regclass"
)
SETTINGS = SchedulerSettings(
    sessions=2, reserve=0, per_principal=2, queue_limit=65_536, queue_per_principal=4_096
)
SENT = {
    " ".join(text.split())
    for name, text in vars(sql).items()
    if name.isupper() and isinstance(text, str)
}
ANALYSE_COUNT = (
    "SELECT analyze_count FROM pg_stat_user_tables WHERE relid = 'download_session'::regclass"
)
EXPLAIN_EVERYTHING = {
    "session_preload_libraries": "auto_explain",
    "auto_explain.log_min_duration": "0",
    "auto_explain.log_analyze": "on",
    "auto_explain.log_buffers": "on",
    "auto_explain.log_timing": "off",
    "auto_explain.log_nested_statements": "on",
    "auto_explain.log_format": "json",
    "client_min_messages": "log",
}


@dataclass
class Explained:
    """Every plan the scheduler's connections ran since the last :meth:`clear`."""

    plans: list[dict[str, Any]] = field(default_factory=list)

    def heard(self, _conn: object, message: asyncpg.PostgresLogMessage) -> None:
        text = message.message
        if text.startswith("duration:") and "plan:" in text:
            self.plans.append(json.loads(text.split("plan:", 1)[1]))

    def clear(self) -> None:
        self.plans.clear()

    def top_level_buffers(self) -> int:
        """Buffers read by the statements the scheduler sent; a statement run inside a
        function is counted in the statement that called it."""
        return sum(
            plan["Plan"].get("Shared Hit Blocks", 0) + plan["Plan"].get("Shared Read Blocks", 0)
            for plan in self.plans
            if " ".join(plan["Query Text"].split()) in SENT
        )

    def costs(self) -> list[tuple[str, int]]:
        """(statement, buffers) of each statement the scheduler sent, for a failure."""
        return [
            (" ".join(plan["Query Text"].split())[:80], plan["Plan"].get("Shared Hit Blocks", 0))
            for plan in self.plans
            if " ".join(plan["Query Text"].split()) in SENT
        ]

    def session_reads(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(statement, node) for every plan node that reads ``download_session``."""
        for plan in self.plans:
            for node in _nodes(plan["Plan"]):
                if node.get("Relation Name") == "download_session":
                    yield " ".join(plan["Query Text"].split()), node


def rows_read(node: dict[str, Any]) -> int:
    """Rows a plan node took from its table, kept or thrown away, over all its loops."""
    per_loop = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
    return int(per_loop * node["Actual Loops"])


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", ()):
        yield from _nodes(child)


@pytest.fixture
async def explained(database_url: str, schema: str) -> AsyncIterator[tuple[Explained, str]]:
    async with asyncpg.create_pool(database_url) as admin:
        tables = await admin.fetch("SELECT tablename FROM pg_tables WHERE schemaname = $1", schema)
        for (table,) in tables:
            await admin.execute(
                f'ALTER TABLE "{schema}"."{table}" SET (autovacuum_enabled = false)'
            )
    yield Explained(), database_url


async def test_a_burst_before_any_analyse_leaves_every_poll_a_bounded_range(
    explained: tuple[Explained, str], schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, database_url = explained
    monkeypatch.setattr(_leader, "ANALYSE_FROM_SESSIONS", 1 << 40)  # held back

    async def listen(conn: asyncpg.Connection) -> None:
        conn.add_log_listener(log.heard)  # at each acquire: a release removes it

    pool = await asyncpg.create_pool(
        database_url,
        min_size=0,
        max_size=4,
        server_settings={"search_path": schema, **EXPLAIN_EVERYTHING},
        init=warm_connection,
        setup=listen,
        reset=light_reset,
    )
    clock = FakeClock()
    scheduler = PostgresScheduler(
        pool, PostgresOptions(schema=schema, settings=SETTINGS, clock=clock, migrate=False)
    )
    await scheduler.start()
    try:
        holders = [await scheduler.admit(request(-n)) for n in (1, 2)]
        first_holder = holders[0]
        assert isinstance(first_holder, Admitted)
        assert isinstance(holders[1], Admitted)
        answers = [await scheduler.admit(request(number)) for number in range(BEFORE)]
        newcomer = answers[-1]
        assert all(isinstance(answer, Queued) for answer in answers)
        assert isinstance(newcomer, Queued)
        await fold(scheduler, clock, pool)
        short = await poll_cost(scheduler, log, request(BEFORE - 1), newcomer)

        async with pool.acquire() as conn:
            await burst(conn, BEFORE, BURST)
        last = request(BEFORE + BURST)
        newcomer = await scheduler.admit(last)
        assert isinstance(newcomer, Queued)  # at the back of its round
        await fold(scheduler, clock, pool)
        assert await pool.fetchval(NEVER_ANALYSED)
        log.clear()
        long = await poll_cost(scheduler, log, last, newcomer)
        assert long <= 2 * short, (short, long, log.costs())
        counts = [
            node
            for statement, node in log.session_reads()
            if "count(*)" in statement and "place >=" in statement
        ]
        assert counts, [p["Query Text"][:300] for p in log.plans]
        for node in counts:
            assert node["Index Name"] == "download_session_place", node
            assert "place >=" in node["Index Cond"] and "place <" in node["Index Cond"], node

        # The leader's next tick analyses the table the burst filled.
        monkeypatch.undo()
        clock.advance(0.5)
        await scheduler.tick()
        assert not await pool.fetchval(NEVER_ANALYSED)
        clock.advance(0.5)
        await scheduler.tick()
        analysed = await pool.fetchval(ANALYSE_COUNT)
        # Every hot path on the table as the product left it.
        log.clear()
        await scheduler.report(first_holder.grant, Delivered(first_holder.grant.byte_range))
        clock.advance(0.5)
        await scheduler.tick()  # marks the head for the freed slot
        assert isinstance(await scheduler.admit(request(0)), Admitted)  # the claim
        assert isinstance(await scheduler.admit(request(BEFORE + BURST + 1)), Queued)
        await scheduler.downloads_of("ci-7")
        await scheduler.queue_state()
        clock.advance(0.5)
        await scheduler.tick()
        await asyncio.sleep(0)  # the listener hears a statement's plan a turn after it
        assert await pool.fetchval(ANALYSE_COUNT) == analysed  # once for the burst
        reads = list(log.session_reads())
        assert len(reads) > 10
        for statement, node in reads:
            assert rows_read(node) <= 2 * PLACE_BUCKET, (statement, node)
    finally:
        await scheduler.disconnect()
        await pool.close()


async def fold(scheduler: PostgresScheduler, clock: FakeClock, pool: asyncpg.Pool) -> None:
    """Tick as the leader until every change is folded into the place buckets."""
    for _ in range(200):
        clock.advance(0.5)
        await scheduler.tick()
        if not await pool.fetchval("SELECT EXISTS (SELECT 1 FROM queue_change)"):
            return
    raise AssertionError("the leader did not fold the queue")


async def poll_cost(
    scheduler: PostgresScheduler, log: Explained, waiter: DownloadRequest, newcomer: Queued
) -> int:
    """Buffers of the first poll of ``waiter`` with the ticket of its newcomer's answer
    ``newcomer``: decided by the store (a newcomer's answer is never repeated to an
    early poll, ADR 0029)."""
    polling = replace(waiter, ticket=newcomer.ticket)
    log.clear()
    assert isinstance(await scheduler.admit(polling), Queued)
    await asyncio.sleep(0)  # the listener hears a statement's plan a turn after it
    return log.top_level_buffers()
