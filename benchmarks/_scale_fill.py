"""Filling both stores with the same waiting downloads, fast and as the store writes them.

PostgreSQL: the rows a newcomer's ``admit_session`` writes (``INSERT_SESSION`` with the
turn ``ROUND_TAG`` gives), after the waiter polled once (``RECORD_CHECK``), written with
one ``COPY``, together with everything an admission counts (``principal_round``,
``principal_load``, the 16 ``queue_admitted`` shards), then ``VACUUM (ANALYZE)`` — what
autovacuum does soon after a bulk insert, so that the planner knows the table and the
visibility map lets the queue's index answer without the heap. :func:`check_fill`
confirms that the store's own bounds and turns agree with the rows.

In memory: the same downloads through ``admit``, in the same order, on a ``FakeClock``
that spreads the arrivals over the same 300 s; then each polls once, as the rows say.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import asyncpg

from arkvory_sched import DownloadClass, InMemoryDownloadScheduler, Queued
from arkvory_sched._session_keys import session_key
from arkvory_sched.postgres import _sql as sql
from arkvory_sched.testing import FakeClock
from benchmarks._scale_workload import ScaleWorkload

__all__ = [
    "SESSION_COLUMNS",
    "FillReport",
    "SessionRows",
    "check_fill",
    "fill_memory",
    "fill_postgres",
    "session_row",
]

RANK: Final = DownloadClass.RELEASE.rank
SHARDS: Final = 16  # queue_admitted rows (migration 0004): first key byte modulo 16
SPREAD: Final = 300.0  # arrivals over the last check period, as in core_bench
CHECK_PERIOD: Final = 300.0  # far-back waiters are told to come back after 300 s
# The harness does not replay the waiters' own polls (N/300 per second), so their no-show
# deadlines are moved beyond the run; the churn's newcomers provide the no-shows.
DEADLINE_HORIZON: Final = 3600.0
GOLDEN: Final = 0.618_033_988_75  # spreads the last polls evenly over the period


def _inserted_columns() -> tuple[str, ...]:
    """The columns a newcomer's ``INSERT_SESSION`` writes, read from the statement, so
    that a column the admission starts to write cannot be missing from the fill."""
    found = re.search(r"INSERT INTO download_session \(([^)]*)\)", sql.INSERT_SESSION)
    if found is None:
        raise RuntimeError("INSERT_SESSION no longer names its columns")
    return tuple(name.strip() for name in found[1].split(","))


# A newcomer's columns, then those of its first poll's estimate (R-EST-4).
SESSION_COLUMNS: Final = (*_inserted_columns(), "first_estimate", "first_estimate_at")


def session_row(
    workload: ScaleWorkload, index: int, now: float, virtual_time: int, wall_offset: float
) -> tuple[Any, ...]:
    """``download_session``'s row of waiting download ``index`` (``SESSION_COLUMNS``).

    Arrivals are spread evenly over the last 300 s of queue time ``now`` in index order;
    the last poll of each, spread over the same 300 s (never before its arrival), told it
    to come back 300 s later. The order key is the principal's turn after the class's
    current round ``virtual_time``. ``wall_offset`` is wall time minus queue time (the
    ticket's arrival is wall time, R-RES-5). ``release`` does not age: no ``promote_at``.
    """
    request = workload.request(index)
    arrival = now - SPREAD + SPREAD * index / max(1, workload.waiting)
    polled = max(arrival, now - CHECK_PERIOD * ((index * GOLDEN) % 1.0))
    check_at = polled + CHECK_PERIOD
    key = session_key(
        request.principal, request.object_id, request.download_id, request.client_address
    )
    return (
        key,
        request.principal,
        RANK,
        RANK,
        True,
        request.object_size,
        0,
        arrival,
        math.floor((arrival + wall_offset) * 1000),
        float(virtual_time + workload.turn(index)),
        arrival,
        None,
        arrival,
        check_at,
        check_at + CHECK_PERIOD + DEADLINE_HORIZON,
        polled,  # last_activity
        now + DEADLINE_HORIZON,  # first_estimate
        polled,  # first_estimate_at: its one poll made the first estimate
    )


class SessionRows:
    """The rows of every waiting download, made one at a time as ``COPY`` asks for them
    (a million tuples at once would take a gigabyte); counts the ``queue_admitted``
    shard of each key on the way."""

    def __init__(
        self, workload: ScaleWorkload, now: float, virtual_time: int, wall_offset: float
    ) -> None:
        self._workload = workload
        self._now = now
        self._virtual_time = virtual_time
        self._wall_offset = wall_offset
        self.shards = [0] * SHARDS

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        workload, shards = self._workload, self.shards
        for index in range(workload.waiting):
            row = session_row(workload, index, self._now, self._virtual_time, self._wall_offset)
            shards[row[0][0] % SHARDS] += 1
            yield row


@dataclass(slots=True)
class FillReport:
    waiting: int
    copy_seconds: float = 0.0
    vacuum_seconds: float = 0.0
    check_seconds: float = 0.0


async def fill_postgres(conn: asyncpg.Connection, workload: ScaleWorkload) -> FillReport:
    """Write the waiting downloads and their counts in one transaction, then vacuum.

    The fill's principals must be new to the queue (the slot holders have others): a
    principal that already had turns would take later ones, so a clash fails the fill
    (unique violation) rather than write a wrong order.
    """
    report = FillReport(workload.waiting)
    started = time.perf_counter()
    async with conn.transaction():
        now = float(await conn.fetchval("SELECT extract(epoch FROM clock_timestamp())::float8"))
        virtual_time = int(
            await conn.fetchval("SELECT virtual_time FROM class_state WHERE queue_rank = $1", RANK)
        )
        rows = SessionRows(workload, now, virtual_time, time.time() - now)
        await conn.copy_records_to_table(
            "download_session", records=rows, columns=list(SESSION_COLUMNS)
        )
        await conn.copy_records_to_table(
            "principal_round",
            records=(
                (RANK, who, virtual_time + count) for who, count in workload.principal_counts()
            ),
            columns=["queue_rank", "principal", "last_tag"],
        )
        await conn.copy_records_to_table(
            "principal_load",
            records=workload.principal_counts(),
            columns=["principal", "sessions"],
        )
        await conn.execute(
            "UPDATE queue_admitted AS a SET sessions = a.sessions + f.added "
            "FROM unnest($1::smallint[], $2::bigint[]) AS f(shard, added) "
            "WHERE a.shard = f.shard",
            list(range(SHARDS)),
            rows.shards,
        )
    report.copy_seconds = time.perf_counter() - started
    started = time.perf_counter()
    await conn.execute(
        "VACUUM (ANALYZE) download_session, principal_round, principal_load, queue_admitted"
    )
    report.vacuum_seconds = time.perf_counter() - started
    started = time.perf_counter()
    await check_fill(conn, workload)
    report.check_seconds = time.perf_counter() - started
    return report


async def check_fill(conn: asyncpg.Connection, workload: ScaleWorkload) -> None:
    """Fail unless the store's bounds and turns agree with the rows: the waiting count,
    the fleet's session count (``queue_admitted`` − gone), every principal's count
    (``principal_load`` − gone) and every waiter's turn within its principal's."""
    waiting = await conn.fetchval("SELECT count(*) FROM download_session WHERE state = 0")
    sessions = await conn.fetchval("SELECT count(*) FROM download_session")
    counted = await conn.fetchval("SELECT queue_admitted_total() - queue_gone()")
    wrong_loads = await conn.fetchval(
        "WITH held AS (SELECT principal, count(*) AS n FROM download_session GROUP BY principal) "
        "SELECT count(*) FROM principal_load AS l FULL JOIN held AS h USING (principal) "
        "WHERE coalesce(l.sessions, 0) - principal_gone(principal) <> coalesce(h.n, 0)"
    )
    beyond_turns = await conn.fetchval(
        "SELECT count(*) FROM download_session AS d LEFT JOIN principal_round AS r "
        "ON r.queue_rank = d.queue_rank AND r.principal = d.principal "
        "WHERE d.state = 0 AND (r.last_tag IS NULL OR d.order_key > r.last_tag)"
    )
    problems = []
    if waiting < workload.waiting:
        problems.append(f"{waiting:,} waiting, {workload.waiting:,} written")
    if counted != sessions:
        problems.append(f"the fleet's count says {counted:,} sessions, the table {sessions:,}")
    if wrong_loads:
        problems.append(f"{wrong_loads:,} principals counted wrong in principal_load")
    if beyond_turns:
        problems.append(f"{beyond_turns:,} waiters beyond their principal's last turn")
    if problems:
        raise RuntimeError("the filled queue is inconsistent: " + "; ".join(problems))


async def fill_memory(
    scheduler: InMemoryDownloadScheduler, clock: FakeClock, workload: ScaleWorkload
) -> None:
    """The same downloads through ``admit``, arriving over 300 s of ``clock`` in index
    order, then each polling once (no tick meanwhile, so nobody expires in between)."""
    gap = SPREAD / max(1, workload.waiting)
    for index in range(workload.waiting):
        clock.advance(gap)
        decision = await scheduler.admit(workload.request(index))
        if not isinstance(decision, Queued):
            raise RuntimeError(f"in-memory fill: download {index} answered {decision!r}")
    for index in range(workload.waiting):
        decision = await scheduler.admit(workload.request(index))
        if not isinstance(decision, Queued) or decision.position is None:
            raise RuntimeError(f"in-memory fill: the poll of {index} answered {decision!r}")
