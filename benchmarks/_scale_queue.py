"""The queue ``pg_scale`` measures, and filling both stores with it fast and as each
store writes it.

The waiting downloads, in arrival order ``0 .. waiting - 1``, are the downloads of up to
1,000 CI principals taking turns (``ci-{index % 1000}``; at 1,048,000 waiting each has
1,048), all of class ``release``. A principal's k-th download gets round-robin turn k, as
``ROUND_TAG`` and the in-memory fair queue both give it, so the queue serves them in
arrival order: download ``index`` waits at position ``index + 1``. Downloads after the
fill (``index >= waiting``) are newcomers taking their principal's next turn, at the end
of the queue. Everything is a function of the index: nothing is kept per download
outside the stores.

PostgreSQL is filled with one ``COPY`` of the rows a newcomer's ``admit_session`` writes
(``INSERT_SESSION``) after its first poll, with the counts an admission keeps
(``principal_round``, ``principal_load``, the 16 ``queue_admitted`` shards), then
``VACUUM (ANALYZE)``, what autovacuum does soon after a bulk insert; :func:`check_fill`
confirms that the store's own counts and turns agree with the rows. The in-memory store
gets the same downloads through ``admit`` on a ``FakeClock``.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import asyncpg

from arkvory_sched import (
    ByteRange,
    DownloadClass,
    DownloadRequest,
    InMemoryDownloadScheduler,
    PrincipalKind,
    Queued,
    SchedulerSettings,
)
from arkvory_sched._session_keys import session_key
from arkvory_sched.postgres import _sql as sql
from arkvory_sched.testing import FakeClock

__all__ = [
    "SESSIONS",
    "ScaleWorkload",
    "fill_memory",
    "fill_postgres",
    "holder_request",
    "scale_settings",
    "waiting_for",
]

MIB: Final = 1024 * 1024
GIB: Final = 1024 * MIB
QUEUE_LIMIT: Final = 1_048_576  # the largest queue_limit the settings accept
HEADROOM: Final = 576  # places left for the slot holders and the newcomers
SESSIONS: Final = 16  # slots: 15 for release, 1 reserved for interactive
PRINCIPALS: Final = 1_000
RANGE_BYTES: Final = MIB  # what an active download fetches per call
HOLDER_BYTES: Final = 64 * GIB  # a slot holder's object: never done by itself
RANK: Final = DownloadClass.RELEASE.rank
SHARDS: Final = 16  # queue_admitted rows (migration 0004): first key byte modulo 16
CHECK_PERIOD: Final = 300.0  # arrivals spread over 300 s; far-back waiters come back after it
# The waiters' own polls (N/300 per second) are not replayed, so their no-show deadlines
# are moved beyond the run.
DEADLINE_HORIZON: Final = 3600.0
GOLDEN: Final = 0.618_033_988_75  # spreads the last polls evenly over the period


def scale_settings() -> SchedulerSettings:
    """The same settings for every size and both stores (ordered, tickets on)."""
    return SchedulerSettings(sessions=SESSIONS, queue_limit=QUEUE_LIMIT, queue_per_principal=4_096)


def waiting_for(size: int) -> int:
    """Waiting downloads for a nominal size: the queue limit counts the slot holders and
    the newcomers too, so the largest queue keeps ``HEADROOM`` places free."""
    return max(0, min(size, QUEUE_LIMIT - HEADROOM))


@dataclass(frozen=True, slots=True)
class ScaleWorkload:
    """Download ``index`` -> its principal, round-robin turn and request."""

    waiting: int

    @property
    def principals(self) -> int:
        return max(1, min(PRINCIPALS, self.waiting))

    def principal(self, index: int) -> str:
        return f"ci-{index % self.principals}"

    def turn(self, index: int) -> int:
        """The principal's k-th download (k = 1, 2, …), newcomers continuing the count."""
        return index // self.principals + 1

    def request(self, index: int) -> DownloadRequest:
        size = GIB + (index * 2_654_435_761) % (3 * GIB)  # 1 to 4 GiB, hashed
        return DownloadRequest(
            principal=self.principal(index),
            principal_kind=PrincipalKind.SERVICE,
            object_id=f"artifact-{index % 8192}",
            object_size=size,
            byte_range=ByteRange(0, RANGE_BYTES),
            download_id=f"dl-{index:x}",
        )

    def principal_counts(self) -> Iterator[tuple[str, int]]:
        """(principal, its waiting downloads); a principal's last turn is its count."""
        whole, rest = divmod(self.waiting, self.principals)
        for number in range(self.principals):
            if whole + (number < rest):
                yield f"ci-{number}", whole + (number < rest)


def holder_request(number: int) -> DownloadRequest:
    """A slot holder, admitted on the empty queue: ``number`` 0 is interactive (the
    reserved slot), the others release; each downloads a 64 GiB object of its own."""
    return DownloadRequest(
        principal=f"holder-{number}",
        principal_kind=PrincipalKind.PERSON if number == 0 else PrincipalKind.SERVICE,
        object_id=f"holder-object-{number}",
        object_size=HOLDER_BYTES,
        byte_range=ByteRange(0, RANGE_BYTES),
        download_id=f"holder-{number}",
    )


# ====================================================================== PostgreSQL
def _inserted_columns() -> tuple[str, ...]:
    """The columns ``INSERT_SESSION`` writes, read from the statement, so that a column
    the admission starts to write cannot be missing from the fill."""
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

    Arrivals are spread evenly over the 300 s before queue time ``now``; the last poll
    of each, spread over the same 300 s (never before its arrival), told it to come back
    300 s later. The order key is the turn after the class's round ``virtual_time``;
    ``wall_offset`` is wall time minus queue time (a ticket's arrival is wall time).
    """
    request = workload.request(index)
    arrival = now - CHECK_PERIOD + CHECK_PERIOD * index / max(1, workload.waiting)
    polled = max(arrival, now - CHECK_PERIOD * ((index * GOLDEN) % 1.0))
    check_at = polled + CHECK_PERIOD
    key = session_key(
        request.principal, request.object_id, request.download_id, request.client_address
    )
    order_key = float(virtual_time + workload.turn(index))
    wall_ms = math.floor((arrival + wall_offset) * 1000)
    return (
        *(key, request.principal, RANK, RANK, True, request.object_size, 0),
        *(arrival, wall_ms, order_key, arrival, None, arrival, check_at),
        check_at + CHECK_PERIOD + DEADLINE_HORIZON,  # no_show_at
        polled,  # last_activity
        now + DEADLINE_HORIZON,  # first_estimate
        polled,  # first_estimate_at: its one poll made the first estimate
    )


async def fill_postgres(conn: asyncpg.Connection, workload: ScaleWorkload) -> None:
    """Write the waiting downloads and their counts in one transaction, then vacuum.

    The fill's principals must be new to the queue (the slot holders have others): one
    that already had turns would take later ones, so a clash fails the fill (unique
    violation) rather than write a wrong order.
    """
    shards = [0] * SHARDS

    def rows(now: float, virtual_time: int) -> Iterator[tuple[Any, ...]]:
        """One row at a time, as ``COPY`` asks (a million at once would take a GiB)."""
        offset = time.time() - now
        for index in range(workload.waiting):
            row = session_row(workload, index, now, virtual_time, offset)
            shards[row[0][0] % SHARDS] += 1
            yield row

    async with conn.transaction():
        now = float(await conn.fetchval("SELECT extract(epoch FROM clock_timestamp())::float8"))
        virtual_time = int(
            await conn.fetchval("SELECT virtual_time FROM class_state WHERE queue_rank = $1", RANK)
        )
        await conn.copy_records_to_table(
            "download_session", records=rows(now, virtual_time), columns=list(SESSION_COLUMNS)
        )
        await conn.copy_records_to_table(
            "principal_round",
            records=((RANK, who, virtual_time + n) for who, n in workload.principal_counts()),
            columns=["queue_rank", "principal", "last_tag"],
        )
        await conn.copy_records_to_table(
            "principal_load", records=workload.principal_counts(), columns=["principal", "sessions"]
        )
        await conn.execute(
            "UPDATE queue_admitted AS a SET sessions = a.sessions + f.added "
            "FROM unnest($1::smallint[], $2::bigint[]) AS f(shard, added) WHERE a.shard = f.shard",
            list(range(SHARDS)),
            shards,
        )
    await conn.execute(
        "VACUUM (ANALYZE) download_session, principal_round, principal_load, queue_admitted"
    )
    await check_fill(conn, workload)


async def check_fill(conn: asyncpg.Connection, workload: ScaleWorkload) -> None:
    """Fail unless the store's counts and turns agree with the rows: the waiting count,
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


# ====================================================================== in memory
async def fill_memory(
    scheduler: InMemoryDownloadScheduler, clock: FakeClock, workload: ScaleWorkload
) -> None:
    """The same downloads through ``admit``, arriving over 300 s of ``clock`` in index
    order, then each polling once (no tick meanwhile, so nobody expires in between)."""
    gap = CHECK_PERIOD / max(1, workload.waiting)
    for index in range(workload.waiting):
        clock.advance(gap)
        decision = await scheduler.admit(workload.request(index))
        if not isinstance(decision, Queued):
            raise RuntimeError(f"in-memory fill: download {index} answered {decision!r}")
    for index in range(workload.waiting):
        decision = await scheduler.admit(workload.request(index))
        if not isinstance(decision, Queued) or decision.position is None:
            raise RuntimeError(f"in-memory fill: the poll of {index} answered {decision!r}")
