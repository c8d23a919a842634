"""A poll at the back of the shared queue right after a burst, before any ``ANALYZE``
(issue #26; ADR 0020): ``python -m benchmarks.pg_burst`` (``make bench-pg-burst``).

2,048 downloads wait, then 30,720 newcomers arrive in one statement, the leader folds
them into place buckets, and the waiter at the back polls with its newcomer's ticket.
Autovacuum is off for the schema's tables and nothing analyses them, as in the minute
before autovacuum's first look at a mass update; the leader's own ``ANALYZE`` after a
burst is held back for the first figure and let run for the second. Each figure is the
median of a few hundred polls of the same waiter, each decided by the database (the
newcomer's ticket is never told an earlier answer again, ADR 0029), beside the same
poll at 2,048 waiting, in one run: a ratio, which the machine's load moves little.
The test ``tests/postgres/test_plans_without_statistics.py`` asserts the same in
buffers, which do not move at all.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import secrets
import sys
import time
from dataclasses import replace
from statistics import median
from typing import Final

import asyncpg

from arkvory_sched import Admitted, DownloadRequest, PrincipalKind, Queued, SchedulerSettings
from arkvory_sched.postgres import PostgresScheduler, _leader
from arkvory_sched.testing import FakeClock
from benchmarks._machine import load_average
from benchmarks._report import header, write_section
from benchmarks.pg_scale import DEFAULT_DSN, DSN_VARIABLE, server_version

BEFORE: Final = 2_048
BURST: Final = 30_720
POLLS: Final = 300
ANALYSING_TICK: Final = "the leader's tick that analyses (s)"
SHARDS: Final = 16  # queue_admitted's shards (migration 0004)
SETTINGS: Final = SchedulerSettings(
    sessions=2, reserve=0, per_principal=2, queue_limit=65_536, queue_per_principal=4_096
)


def request(number: int) -> DownloadRequest:
    return DownloadRequest(
        principal=f"ci-{number % 500}",
        principal_kind=PrincipalKind.SERVICE,
        object_id=f"artifact-{number}",
        object_size=1 << 30,
        download_id=f"dl-{number}",
        client_address="192.0.2.1",
    )


async def burst(conn: asyncpg.Connection, start: int, count: int) -> None:
    """``count`` newcomers of as many new principals in one statement, with the counts
    an admission keeps (``principal_load``, ``principal_round``, ``queue_admitted``), in
    the class's latest round and later than everyone: behind every waiter."""
    round_after = await conn.fetchval("SELECT max(order_key) FROM download_session")
    now = await conn.fetchval("SELECT max(arrival) FROM download_session")
    keys = [hashlib.sha256(b"burst-%d" % n).digest() for n in range(start, start + count)]
    shards = [0] * SHARDS
    for key in keys:
        shards[key[0] % SHARDS] += 1
    async with conn.transaction():
        await conn.execute(
            "INSERT INTO download_session (session_key, principal, base_class, queue_rank,"
            " has_id, object_size, state, arrival, arrival_wall_ms, order_key, aging_since,"
            " promote_at, waiting_since, check_at, no_show_at, last_activity)"
            " SELECT k.key, 'burst-' || k.n, 1, 1, true, 1073741824, 0, $2 + k.n * 1e-6,"
            " 1800000000000, $3, $2, NULL, $2, $2 + 300, $2 + 3600, $2"
            " FROM unnest($1::bytea[]) WITH ORDINALITY AS k(key, n)",
            keys,
            now,
            round_after,
        )
        await conn.execute(
            "INSERT INTO principal_load (principal, sessions)"
            " SELECT 'burst-' || n, 1 FROM generate_series(1, $1) AS n",
            count,
        )
        await conn.execute(
            "INSERT INTO principal_round (queue_rank, principal, last_tag)"
            " SELECT 1, 'burst-' || n, $2 FROM generate_series(1, $1) AS n",
            count,
            round_after,
        )
        await conn.execute(
            "UPDATE queue_admitted AS a SET sessions = a.sessions + f.added"
            " FROM unnest($1::smallint[], $2::bigint[]) AS f(shard, added)"
            " WHERE a.shard = f.shard",
            list(range(SHARDS)),
            shards,
        )


async def fold(scheduler: PostgresScheduler, clock: FakeClock, conn: asyncpg.Connection) -> None:
    """Tick as the leader until every change is folded into the place buckets."""
    for _ in range(200):
        clock.advance(0.5)
        await scheduler.tick()
        if not await conn.fetchval("SELECT EXISTS (SELECT 1 FROM queue_change)"):
            return
    raise RuntimeError("the leader did not fold the queue")


async def poll_ms(scheduler: PostgresScheduler, waiter: DownloadRequest, ticket: str) -> float:
    """The median of ``POLLS`` decided polls of ``waiter``, in milliseconds."""
    polling = replace(waiter, ticket=ticket)
    seconds = []
    for _ in range(POLLS):
        started = time.perf_counter()
        decision = await scheduler.admit(polling)
        seconds.append(time.perf_counter() - started)
        assert isinstance(decision, Queued), decision
    return median(seconds) * 1000


async def measure(dsn: str) -> dict[str, float]:
    schema = f"arkvory_bench_burst_{secrets.token_hex(4)}"
    clock = FakeClock()
    scheduler = await PostgresScheduler.connect(
        dsn, schema=schema, settings=SETTINGS, clock=clock, node_id="pg-burst"
    )
    conn = await asyncpg.connect(dsn, server_settings={"search_path": schema})
    held = _leader.ANALYSE_FROM_SESSIONS
    try:
        for (table,) in await conn.fetch(
            "SELECT tablename FROM pg_tables WHERE schemaname = $1", schema
        ):
            await conn.execute(f'ALTER TABLE "{table}" SET (autovacuum_enabled = false)')
        for number in (-1, -2):
            assert isinstance(await scheduler.admit(request(number)), Admitted)
        answers = [await scheduler.admit(request(number)) for number in range(BEFORE)]
        short = answers[-1]
        assert isinstance(short, Queued) and short.ticket is not None
        _leader.ANALYSE_FROM_SESSIONS = 1 << 40  # the leader's ANALYZE held back
        await fold(scheduler, clock, conn)
        figures = {"2,048 waiting": await poll_ms(scheduler, request(BEFORE - 1), short.ticket)}
        await burst(conn, BEFORE, BURST)
        last = request(BEFORE + BURST)
        long = await scheduler.admit(last)
        assert isinstance(long, Queued) and long.ticket is not None
        await fold(scheduler, clock, conn)
        figures["32,768 waiting, never analysed"] = await poll_ms(scheduler, last, long.ticket)
        _leader.ANALYSE_FROM_SESSIONS = held
        started = time.perf_counter()
        clock.advance(0.5)
        await scheduler.tick()  # the leader analyses the burst
        figures[ANALYSING_TICK] = time.perf_counter() - started
        figures["32,768 waiting, analysed by the leader"] = await poll_ms(
            scheduler, last, long.ticket
        )
        return figures
    finally:
        _leader.ANALYSE_FROM_SESSIONS = held
        await scheduler.disconnect()
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()


def render(figures: dict[str, float], software: str, load_before: str) -> str:
    base = figures["2,048 waiting"]
    rows = [
        f"| {label} | {value:.3f} ms | {value / base:.2f} |"
        for label, value in figures.items()
        if label.endswith("waiting") or "analysed" in label
    ]
    ratio = figures["32,768 waiting, never analysed"] / base
    return "\n".join(
        [
            "## PostgreSQL after a burst, before any ANALYZE (issue #26)",
            "",
            *header("pg_burst", sys.argv[1:], software, load_before),
            "",
            "A poll at the back of the queue (median of 300, decided by the database):",
            "",
            "| waiting | poll p50 | ÷ 2,048 |",
            "|---|---:|---:|",
            *rows,
            "",
            f"- Goal: a poll at the back of 32,768 unanalysed within 2x of 2,048: "
            f"{'**pass**' if ratio <= 2.0 else '**FAIL**'} ({ratio:.2f}x).",
            f"- The leader's tick that ran `ANALYZE download_session` after the burst: "
            f"{figures[ANALYSING_TICK]:.2f} s.",
            "- Before migration 0013 the same poll read `download_session_queue` with a "
            "filter on `place`: 1,241 buffers against 97 at 2,048, 19 ms against 0.83 ms "
            "(issue #26).",
            "",
        ]
    )


async def main() -> None:
    dsn = os.environ.get(DSN_VARIABLE) or DEFAULT_DSN
    load_before = load_average()
    figures = await measure(dsn)
    write_section(render(figures, f"PostgreSQL {await server_version(dsn)}", load_before))


if __name__ == "__main__":
    asyncio.run(main())
